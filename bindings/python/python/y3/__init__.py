"""Y3: YoMo's tag-length-value wire format, on the Rust core of this project.

>>> import y3
>>> data = y3.encode({"tag": 0x10, "node": [{"tag": 0x11, "float32": 40.0}, {"tag": 0x13, "string": "127.0.0.1"}]})
>>> data.hex()
'900f1102422013093132372e302e302e31'
>>> y3.decode(data, {"noise": (0x11, "float32"), "from": (0x13, "string")})
{'noise': 40.0, 'from': '127.0.0.1'}
>>> y3.get(data, "0x10/0x11", as_="float32")
40.0
>>> obs = y3.Observer(["0x10/0x13"])
>>> obs.feed(data[:7]), obs.feed(data[7:])
([], [(0, 19, b'127.0.0.1')])

Dialects: ``"golang"`` (default; y3-codec-golang v1.7.3), ``"nvarint"`` (yomorun/y3
v1.0.5) and ``"draft02"`` (opt-in varint tags). Errors are :class:`DecodeError`,
:class:`EncodeError` and :class:`PathError` (all ``ValueError``) with the Rust core's
stable ``kind`` strings. See ``README.md`` for the item and schema forms.

Clients for asyncio, on the Rust SDK: :class:`Source` (and :class:`DurableSource`, which
keeps what the router has not stored), :class:`StreamFunction` and :class:`Sink` (QUIC,
TCP, TLS; tokens; reconnection with :class:`Backoff`), whose errors are
:class:`TransportError` with the transport's stable ``kind`` strings.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, Union, cast

from . import _y3
from ._client import Backoff, DurableSource, Frame, Handler, Output, Sink, Source, StreamFunction, Writer
from ._errors import DecodeError, EncodeError, PathError, TransportError, Y3Error
from ._schema import SCALAR_TYPES, Schema, SchemaLike, compiled

__all__ = [
    "encode",
    "encoded_len",
    "decode",
    "decode_stream",
    "get",
    "parse",
    "inspect",
    "validate",
    "marshal",
    "unmarshal",
    "parse_path",
    "Observer",
    "Schema",
    "Y3Error",
    "DecodeError",
    "EncodeError",
    "PathError",
    "TransportError",
    "Source",
    "DurableSource",
    "StreamFunction",
    "Writer",
    "Sink",
    "Frame",
    "Backoff",
    "Handler",
    "Output",
    "DIALECTS",
    "SCALAR_TYPES",
    "MAX_PATH_DEPTH",
    "MAX_SUBSCRIPTIONS",
]

__version__ = "0.1.0"

# One of DIALECTS: "golang" (default), "nvarint", "draft02".
Dialect = str
Missing = Literal["omit", "none", "zero"]
Buffer = Union[bytes, bytearray, memoryview]
PathLike = Union[str, int, Sequence[int]]

DIALECTS: tuple[str, ...] = ("golang", "nvarint", "draft02")
MAX_PATH_DEPTH: int = _y3.MAX_PATH_DEPTH
MAX_SUBSCRIPTIONS: int = _y3.MAX_SUBSCRIPTIONS


def encode(item: Mapping[str, Any] | Sequence[Mapping[str, Any]], dialect: Dialect = "golang") -> bytes:
    """Encodes a typed item, or a list of them (a stream of top-level packets).

    ``{"tag": 0x10, "node": [{"tag": 0x11, "int32": 42}]}``; value keys: ``int32``
    ``int64`` ``uint32`` ``uint64`` ``float32`` ``float64`` ``float32_bits``
    ``float64_bits`` ``bool`` ``string`` ``bytes`` ``node`` ``array`` (see README).
    Raises :class:`EncodeError` (``invalid_tag`` for a key the dialect cannot carry, such
    as 0x40 in ``golang``), ``TypeError`` / ``ValueError`` for a malformed item.
    """
    return _y3.encode(item, dialect)


def encoded_len(item: Mapping[str, Any] | Sequence[Mapping[str, Any]], dialect: Dialect = "golang") -> int:
    """Bytes :func:`encode` would return."""
    return _y3.encoded_len(item, dialect)


def decode(
    data: Buffer,
    schema: SchemaLike,
    *,
    dialect: Dialect = "golang",
    missing: Missing = "omit",
    max_packet_len: int | None = None,
    max_depth: int | None = None,
) -> Any:
    """Reads exactly one packet (the whole tree validated first) by ``schema``.

    Short input raises ``DecodeError("unexpected_end")``, bytes after the packet
    ``DecodeError("trailing_bytes")``.
    """
    return _y3.decode(data, compiled(schema), dialect, max_packet_len, max_depth, missing)


def decode_stream(
    data: Buffer,
    schema: SchemaLike,
    *,
    dialect: Dialect = "golang",
    missing: Missing = "omit",
    max_packet_len: int | None = None,
    max_depth: int | None = None,
) -> Any:
    """Reads a buffer of top-level packets as if they were the children of one node.

    A dict schema gives a dict by top-level key, a list schema (``["int32"]``) a list of
    every packet.
    """
    return _y3.decode_stream(data, compiled(schema), dialect, max_packet_len, max_depth, missing)


def get(
    data: Buffer,
    path: PathLike,
    as_: SchemaLike | None = None,
    *,
    dialect: Dialect = "golang",
    missing: Missing = "omit",
    max_packet_len: int | None = None,
    max_depth: int | None = None,
) -> Any:
    """The first value at a key path, or ``None`` when the input ends without one.

    ``path``: ``"0x10/0x11"`` (child 0x11 of top-level packet 0x10), ``[0x10, 0x11]`` or
    a single key. ``as_``: a schema for the value; ``None`` gives its raw value bytes (a
    node's are its children). Walks header by header up to the match, like the streaming
    observer, and reads nothing after it.
    """
    schema = None if as_ is None else compiled(as_)
    return _y3.get(data, _path(path), schema, dialect, max_packet_len, max_depth, missing)


def parse(
    data: Buffer,
    schema: SchemaLike | None = None,
    *,
    dialect: Dialect = "golang",
    missing: Missing = "omit",
    max_packet_len: int | None = None,
    max_depth: int | None = None,
) -> tuple[int, Any, int]:
    """Reads the first packet of ``data``: ``(key, value, bytes consumed)``.

    Bytes after the packet are left alone (frame a stream with it). ``schema=None`` gives
    the raw value bytes.
    """
    compiled_schema = None if schema is None else compiled(schema)
    return _y3.parse(data, compiled_schema, dialect, max_packet_len, max_depth, missing)


def inspect(
    data: Buffer,
    *,
    dialect: Dialect = "golang",
    max_packet_len: int | None = None,
    max_depth: int | None = None,
) -> list[dict[str, Any]]:
    """Every top-level packet as a typed-item tree that :func:`encode` accepts back.

    Nodes are ``{"tag", "node": [...]}`` or ``{"tag", "array": [...]}``, primitives
    ``{"tag", "bytes": b"..."}`` (the type is not on the wire). In ``draft02`` nothing
    marks a node, so every packet is ``bytes``.
    """
    return _y3.inspect(data, dialect, max_packet_len, max_depth)


def validate(
    data: Buffer,
    *,
    dialect: Dialect = "golang",
    max_packet_len: int | None = None,
    max_depth: int | None = None,
) -> int:
    """Checks a stream of complete top-level packets; returns how many there are."""
    return _y3.validate(data, dialect, max_packet_len, max_depth)


def marshal(key: int, value: Any, schema: SchemaLike, *, dialect: Dialect = "golang") -> bytes:
    """``NewCodec(key).Marshal(value)`` of y3-codec-golang: the root node 0x81 around
    ``value`` under ``key``, with the reference's rules: numbers and bools always written,
    empty strings and bytes left out of structs, struct fields as nodes, list fields as
    array nodes with key-0 elements, a top-level list of structs as a plain node.

    ``value`` follows ``schema``: a dict (or any object with the fields as attributes,
    such as a dataclass) for a named or tagged struct, a list for ``[elem]``. ``None`` or
    an absent field is left out. Keys 0x00..0x0f raise ``EncodeError("reserved_tag")``,
    keys the dialect cannot carry ``EncodeError("invalid_tag")``.
    """
    return _y3.marshal(key, value, compiled(schema), dialect)


def unmarshal(
    data: Buffer,
    key: int,
    schema: SchemaLike,
    *,
    dialect: Dialect = "golang",
    missing: Missing = "zero",
    max_packet_len: int | None = None,
    max_depth: int | None = None,
) -> Any:
    """The value under ``key`` in what :func:`marshal` wrote, or ``None`` when the root
    holds no ``key``. Fields missing from a struct get their zero values (as in Go)."""
    return _y3.unmarshal(data, key, compiled(schema), dialect, max_packet_len, max_depth, missing)


def parse_path(text: str) -> list[int]:
    """``"0x10/0x11"`` or ``"16/17"`` -> ``[16, 17]``; raises :class:`PathError`."""
    return _y3.parse_path(text)


def _path(path: PathLike) -> list[int]:
    if isinstance(path, str):
        return _y3.parse_path(path)
    if isinstance(path, int) and not isinstance(path, bool):
        return [path]
    if isinstance(path, Sequence) and all(isinstance(k, int) and not isinstance(k, bool) for k in path):
        return list(cast(Sequence[int], path))
    raise TypeError(f"a key path is a str such as '0x10/0x11', an int or a sequence of ints, not {path!r}")


class Observer:
    """Streaming observer of key paths over a byte stream of top-level packets.

    ``paths``: a list of paths (each ``"0x10/0x11"``, ``[0x10, 0x11]`` or a single key),
    a single ``str`` path, or a dict ``{path: schema}`` to have values read by a schema
    (``None`` for raw bytes). A list of ints is a list of one-key paths: write
    ``[(0x10, 0x11)]`` for one two-key path. Paths must not be prefixes of each other.

    :meth:`feed` returns ``[(path_index, key, value), ...]`` for every value that completed
    in the chunk; values are copied out (``bytes``, or read by the path's schema).
    Unsubscribed values are skipped by counting, without being checked; ``validate=True``
    checks every header in the stream (and ``Observer([], validate=True)`` only
    validates). :meth:`finish` raises ``DecodeError("unexpected_end")`` if the stream
    stopped inside a packet.
    """

    __slots__ = ("_native",)

    def __init__(
        self,
        paths: PathLike | Iterable[PathLike] | Mapping[Any, SchemaLike | None],
        *,
        dialect: Dialect = "golang",
        validate: bool = False,
        max_packet_len: int | None = None,
        max_depth: int | None = None,
    ) -> None:
        schemas: list[Any] | None = None
        if isinstance(paths, (str, int)) and not isinstance(paths, bool):
            keys = [_path(paths)]
        elif isinstance(paths, Mapping):
            keys = [_path(p) for p in paths]
            schemas = [None if s is None else compiled(s) for s in paths.values()]
        else:
            keys = [_path(p) for p in cast(Iterable[PathLike], paths)]
        self._native = _y3.Observer(keys, schemas, dialect, max_packet_len, max_depth, validate)

    def feed(self, chunk: Buffer) -> list[tuple[int, int, Any]]:
        """Feeds a chunk of any size; returns the values that completed in it."""
        return self._native.feed(chunk)

    def finish(self) -> None:
        """Declares the end of the stream."""
        self._native.finish()

    def reset(self) -> None:
        """Forgets the stream state (and a previous error); keeps the paths."""
        self._native.reset()

    def observe(self, chunks: Iterable[Buffer]) -> Iterator[tuple[int, int, Any]]:
        """Feeds every chunk, yielding values as they complete, then :meth:`finish`."""
        for chunk in chunks:
            yield from self._native.feed(chunk)
        self._native.finish()

    @property
    def position(self) -> int:
        """Bytes consumed since creation or the last :meth:`reset`."""
        return self._native.position

    @property
    def packets(self) -> int:
        """Top-level packets completed so far."""
        return self._native.packets

    @property
    def paths(self) -> list[list[int]]:
        """The subscribed key paths, in index order."""
        return self._native.paths

    @property
    def dialect(self) -> str:
        return self._native.dialect

    def __repr__(self) -> str:
        if not hasattr(self, "_native"):
            return "Observer(<not initialized>)"
        paths = ", ".join("/".join(f"0x{k:02x}" for k in p) for p in self.paths)
        return f"Observer([{paths}], dialect={self.dialect!r})"
