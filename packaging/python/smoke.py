"""Uses the installed y3 wheel as a user would: import, encode and decode a vector, then
route a frame through `y3 serve` (plain TCP at sys.argv[1]) from a Source to a Sink.

    python smoke.py 127.0.0.1:PORT
"""

import asyncio
import sys

import y3


async def roundtrip(addr: str) -> bytes:
    payload = y3.encode({"tag": 0x10, "node": [{"tag": 0x11, "float32": 72.5}]})
    async with y3.Sink(addr, [0x21], name="wheel-sink") as sink, y3.Source(addr, name="wheel-source") as source:

        async def first() -> bytes:
            async for frame in sink:
                return frame.payload
            raise AssertionError("the sink ended")

        got = asyncio.create_task(first())
        while not got.done():  # until the sink is subscribed and the frame routed
            await source.send(0x21, payload)
            await asyncio.wait({got}, timeout=0.2)
        return got.result()


def main() -> None:
    assert "site-packages" in y3.__file__, y3.__file__  # the installed wheel, not the tree
    data = y3.encode({"tag": 0x10, "node": [{"tag": 0x11, "int32": 1}, {"tag": 0x12, "string": "a"}]})
    assert data.hex() == "9006110101120161", data.hex()
    assert y3.get(data, "0x10/0x12", as_="string") == "a"
    print(f"codec: {data.hex()} from {y3.__file__}")
    got = asyncio.run(asyncio.wait_for(roundtrip(sys.argv[1]), 30))
    assert y3.get(got, "0x10/0x11", as_="float32") == 72.5
    print(f"client: routed {got.hex()} through {sys.argv[1]}")


if __name__ == "__main__":
    main()
