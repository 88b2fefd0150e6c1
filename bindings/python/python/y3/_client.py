"""Sources, stream functions and sinks for asyncio, on the Rust client SDK.

Every connection, handshake, reconnection, batch of writes and TLS session is the Rust
SDK's (``y3_transport::sdk``); this module only gives it an asyncio shape. The clients
speak YoMo v1.22's protocol, so they work against ``y3 serve`` and a YoMo zipper alike.

A source sends; a sink is an async iterator of frames; a stream function runs a handler on
every frame it observes and may answer with a frame of its own:

>>> import asyncio, y3
>>> async def pipeline(addr):
...     async with y3.Sink(addr, [0x21], name="printer") as sink, \\
...                y3.StreamFunction(addr, [0x20], double, name="doubler") as sfn:
...         await wait_subscribed(2)      # the router now routes 0x20 and 0x21
...         async with y3.Source(addr, name="sensor") as source:
...             await source.send(0x20, b"\\x01\\x02")
...         frame = await anext(sink)
...         return frame.tag, frame.payload, frame.metadata["yomo-source-id"] == source.id
>>> async def double(frame):
...     return 0x21, bytes(2 * b for b in frame.payload)
>>> asyncio.run(pipeline(ADDR))
(33, b'\\x02\\x04', True)

Backpressure reaches Python both ways: :meth:`Source.send` waits when ``send_queue``
frames are queued, and a sink or stream function that stops taking frames stops the
connection's reads, after a bounded number of frames (the SDK's 1024 plus twice the batch
for a sink, one for a stream function); the router then applies its queue policy (``block`` holds the source
back, ``drop-oldest`` counts drops).
"""

from __future__ import annotations

import asyncio
import atexit
import inspect
import logging
import weakref
from collections import deque
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Mapping
from os import PathLike
from types import TracebackType
from typing import Any, NamedTuple, Optional, Self, Union

from . import _y3
from ._errors import TransportError
from ._y3 import Frame

__all__ = [
    "Backoff",
    "DurableSource",
    "Frame",
    "Handler",
    "Output",
    "Sink",
    "Source",
    "StreamFunction",
    "TransportError",
    "Writer",
]

log = logging.getLogger("y3")

# How long a stream function waits, without an await, for the frame after its answer.
_SPIN_US = 50

# Before the interpreter finalizes, let the runtime's threads finish handing results over.
atexit.register(_y3.quiesce, 2.0)

Buffer = Union[bytes, bytearray, memoryview]
#: One output of a stream function: ``(tag, data)``, or ``(tag, data, target)`` for the
#: functions wanting ``target`` only.
Output = Union[tuple[int, Buffer], tuple[int, Buffer, str]]
#: What a handler returns: nothing, one output, or any number of them (a list, a generator;
#: an async generator's outputs are written as it yields them).
Reply = Union[None, Output, Iterable[Output], AsyncIterable[Output]]
Handler = Callable[..., Union[Awaitable[Reply], Reply]]
# The outputs handed to the native half: (tag, data, target), "" for no target.
_Outputs = list[tuple[int, Buffer, str]]


class Backoff(NamedTuple):
    """Exponential backoff between connection attempts (``sdk::Backoff``).

    ``initial`` seconds after the first failure, doubling up to ``max``, with up to a
    quarter of jitter. ``attempts=None`` (the default) never gives up: a client outlives
    a router restart or outage, retrying every ``max`` seconds at worst and logging a
    warning with the address and the cause. With a number, after that many failed
    attempts the client gives up with ``TransportError("gave_up")``, whose message names
    the address and the last failure (``details["addr"]``, ``details["attempts"]``).

    >>> y3.Backoff(initial=0.05, attempts=3)
    Backoff(initial=0.05, max=5.0, attempts=3)
    >>> y3.Backoff()
    Backoff(initial=0.1, max=5.0, attempts=None)
    """

    initial: float = 0.1
    max: float = 5.0
    attempts: int | None = None


def _options(
    addr: str,
    *,
    transport: str = "tcp",
    name: str = "",
    token: str | None = None,
    credential: str | None = None,
    pin: str | None = None,
    ca: str | PathLike[str] | None = None,
    insecure: bool = False,
    server_name: str | None = None,
    wanted_target: str = "",
    max_frame_len: int | None = None,
    handshake_timeout: float = 5.0,
    backoff: Backoff = Backoff(),
    send_queue: int = 1024,
    filters: list[tuple[int, str]] | None = None,
) -> _y3.Options:
    return _y3.Options(
        addr,
        transport=transport,
        name=name,
        token=token,
        credential=credential,
        pin=pin,
        ca=None if ca is None else str(ca),
        insecure=insecure,
        server_name=server_name,
        wanted_target=wanted_target,
        max_frame_len=max_frame_len,
        handshake_timeout=handshake_timeout,
        backoff_initial=backoff.initial,
        backoff_max=backoff.max,
        backoff_attempts=backoff.attempts,
        send_queue=send_queue,
        filters=filters or [],
    )


def _filters(observe: list[int], where: str | Mapping[int, str] | None) -> list[tuple[int, str]]:
    """Router-side content filters (``spec/filters.md``): one text for every observed tag,
    or a text per tag."""
    if where is None:
        return []
    if isinstance(where, str):
        return [(tag, where) for tag in observe]
    return [(int(tag), text) for tag, text in where.items()]


_OPTIONS_DOC = """
    Options (keyword-only, as ``sdk::ClientOptions``): ``transport`` ``"tcp"`` (default),
    ``"tls"`` (TLS 1.3 over TCP) or ``"quic"``; for TLS and QUIC one of ``pin`` (the
    router certificate's SHA-256 fingerprint, as ``y3 serve`` prints it), ``ca`` (a PEM
    file: a pinned certificate or CA roots) or ``insecure=True`` (development only);
    ``server_name`` (``"localhost"``); ``name``; ``token`` (sent as ``token:TOKEN``) or
    ``credential`` (``type:payload``); ``wanted_target`` (the ``yomo-target`` a function or
    sink accepts); ``max_frame_len``; ``handshake_timeout`` (seconds); ``backoff``
    (:class:`Backoff`); ``send_queue`` (frames queued before ``send`` waits). A sink or
    stream function also takes ``where``: a content filter the router evaluates
    (``spec/filters.md``, e.g. ``"0x10/0x11:f32 > 60"``) on every observed tag, or a dict
    of one per tag; frames that do not match never leave the router. A filter the router
    refuses fails the connection with :class:`TransportError` kind ``bad_filter``.
"""


class _Sending:
    """What :class:`Source` and :class:`DurableSource` share: the native half, its
    connection, ``send`` and ``id``."""

    _connect = staticmethod(_y3.source_connect)

    def __init__(self, addr: str, **options: Any) -> None:
        self._options = _options(addr, **options)
        self._native: _y3.NativeSource | None = None

    async def connect(self) -> Self:
        """Connects (with backoff) and handshakes; ``async with`` calls it.

        Raises :class:`TransportError`: ``unauthorized`` for a wrong token, ``gave_up``
        when the router cannot be reached.
        """
        if self._native is None:
            self._native = await self._connect(self._options)
        return self

    async def __aenter__(self) -> Self:
        return await self.connect()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            await self.close()
        else:
            # Leaving on an error or a cancellation: close without waiting; the Rust side
            # still writes what is queued and closes the connection.
            self._native_or_raise().shutdown()

    async def close(self) -> Any:
        """Closes (see the subclasses)."""
        raise NotImplementedError

    def _native_or_raise(self) -> _y3.NativeSource:
        if self._native is None:
            raise TransportError("closed", "not connected: use `async with` or `await connect()`")
        return self._native

    async def send(
        self,
        tag: int,
        data: Buffer,
        *,
        target: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        """Queues ``data`` (a ``bytes`` is shared with the Rust side, not copied) under
        ``tag``; waits only while the queue is full.

        ``target``: only stream functions whose ``wanted_target`` it is receive the frame
        (``yomo-target``). ``metadata``: extra string pairs, after the source's own.
        """
        native = self._native_or_raise()
        pairs = None if metadata is None else list(metadata.items())
        if not native.try_send(tag, data, target, pairs):
            await native.send(tag, data, target, pairs)

    @property
    def id(self) -> str:
        """This client's id: the ``yomo-source-id`` of its frames."""
        return self._native_or_raise().id


class Source(_Sending):
    """A client that sends data frames.

    ``await source.send(tag, data)`` returns once the frame is queued for the writer
    (which batches writes); :meth:`flush` once everything queued is written to the
    connection; :meth:`close` once everything is written and the router closed without
    refusing a frame. None of them says the router routed a frame. Every frame carries
    ``yomo-source-id`` (:attr:`id`) and a fresh ``yomo-tid``, as YoMo's sources do. A lost
    connection is re-established with ``backoff`` on a later send; a frame the router
    refused, or a reconnection that gave up, raises :class:`TransportError` from the next
    ``send``, ``flush`` or ``close``. Delivery is at most once (see :class:`DurableSource`).

    >>> async def main(addr):
    ...     async with y3.Source(addr, name="sensor-1") as source:
    ...         await source.send(0x10, y3.encode({"tag": 0x10, "node": [{"tag": 0x11, "float32": 61.5}]}))
    ...         await source.send(0x10, b"raw bytes too", metadata={"room": "b"})
    ...         await source.flush()
    ...         return len(source.id)
    >>> asyncio.run(main(ADDR))
    21
    """

    __doc__ = (__doc__ or "") + _OPTIONS_DOC

    async def flush(self) -> None:
        """Waits until every frame queued so far is written to the connection."""
        await self._native_or_raise().flush()

    async def close(self) -> None:
        """Writes what is queued, closes, and waits (bounded) for the router's close."""
        if self._native is not None:
            await self._native.close()


class DurableSource(_Sending):
    """A source whose frames survive a lost connection and a restarted router (the Rust
    SDK's ``DurableSource``): it asks the router for stored acknowledgements
    (``spec/frames.md``), keeps every frame until the router says it is stored (written
    to a subscriber, and for a durable tag of the federation, in JetStream), and writes
    again, in order, what was not stored when a connection ended: by itself (the Rust
    SDK's task reconnects with ``backoff`` and resends), with no further call needed.
    Delivery is at least once; a frame written twice keeps its ``yomo-tid``, which
    durable tags de-duplicate. Only for ``y3 serve``: YoMo's zipper never acknowledges.

    ``send`` is :class:`Source`'s; :meth:`wait_stored` waits until everything sent is
    stored, and :meth:`close` does too before it closes. A frame the router refuses (over
    its frame limit, past its hop limit, a loop) is not written again: it is counted in
    :attr:`refused` and listed in :attr:`refusals`, and :meth:`close` returns ``False``.
    A frame nobody took (no subscriber to its tag yet: ``no_subscriber``) was not stored:
    it is kept and written again with backoff until a subscriber takes it (counted in
    :attr:`retried`), bounded by the source's window.

    >>> async def main(addr):
    ...     async with y3.Sink(addr, [0x12], name="archive") as sink:
    ...         await wait_subscribed(1)      # someone takes 0x12: its frames can be stored
    ...         async with y3.DurableSource(addr, name="meter") as source:
    ...             await source.send(0x12, b"kept until stored")
    ...             return await source.wait_stored(5.0)
    >>> asyncio.run(main(ADDR))
    True
    """

    __doc__ = (__doc__ or "") + _OPTIONS_DOC

    _connect = staticmethod(_y3.durable_source_connect)

    async def wait_stored(self, timeout: float) -> bool:
        """Waits at most ``timeout`` seconds until the router handled every frame sent so
        far (stored it, or refused it: see :attr:`refused`), reconnecting and writing again
        as needed; whether it did. Raises
        :class:`TransportError` for a refusal or a reconnection that gave up."""
        return await self._native_or_raise().flush(timeout)

    async def close(self, timeout: float = 10.0) -> bool:
        """Waits at most ``timeout`` seconds until everything is handled, then closes;
        whether everything was stored: ``False`` too when the router refused a frame (what
        was not stored is lost with this object)."""
        if self._native is None:
            return True
        return await self._native.close(timeout)

    @property
    def resent(self) -> int:
        """Frames written again after a reconnect, as of the last :meth:`wait_stored`."""
        return self._native_or_raise().resent

    @property
    def refused(self) -> int:
        """Frames the router refused so far: delivered to no one, not written again."""
        return self._native_or_raise().refused

    @property
    def refusals(self) -> list[tuple[int, str, str]]:
        """The first refused frames (up to 1,024), each ``(tag, yomo-tid, reason)``; the
        reason is ``"too_long"``, ``"hop_limit"`` or ``"loop"``."""
        return self._native_or_raise().refusals

    @property
    def retried(self) -> int:
        """Times the router answered a frame ``no_subscriber`` (nobody subscribed to its
        tag yet) or ``not_stored`` (the federation's JetStream did not store it) so far: each
        time the frame was kept and written again after a backoff (100 ms, doubling to 2 s)
        until it was taken; such frames are not refused."""
        return self._native_or_raise().retried


class Sink:
    """A client that receives the data frames of the tags it observes: an async iterator
    of :class:`Frame`.

    Frames cross from Rust in batches of up to ``batch``: whatever is ready is taken at
    once, and an empty queue is waited for by the event loop itself (it watches a socket
    pair the Rust side writes one byte to), so no tokio thread enters the interpreter. The iteration ends when the sink
    is closed; a refusal or a reconnection that gave up raises :class:`TransportError`.
    A lost connection is re-established with ``backoff``; frames routed meanwhile are not
    delivered to it.

    >>> async def main(addr):
    ...     async with y3.Sink(addr, [0x30], name="sink") as sink, y3.Source(addr) as source:
    ...         for i in range(3):
    ...             await source.send(0x30, bytes([i]))
    ...         got = []
    ...         async for frame in sink:
    ...             got.append(frame.payload)
    ...             if len(got) == 3:
    ...                 return got
    >>> asyncio.run(main(ADDR))
    [b'\\x00', b'\\x01', b'\\x02']
    """

    __doc__ = (__doc__ or "") + _OPTIONS_DOC

    def __init__(
        self,
        addr: str,
        observe: Iterable[int],
        *,
        batch: int = 512,
        where: str | Mapping[int, str] | None = None,
        **options: Any,
    ) -> None:
        self._observe = list(observe)
        self._options = _options(addr, filters=_filters(self._observe, where), **options)
        self._batch = max(1, batch)
        self._native: _y3.NativeSink | None = None
        self._ready: deque[Frame] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiter: asyncio.Future[None] | None = None

    async def connect(self) -> Sink:
        """Connects (with backoff) and handshakes; once it returns, the router routes the
        observed tags to this sink. Raises :class:`TransportError`."""
        if self._native is None:
            native = await _y3.sink_connect(self._options, self._observe, 2 * self._batch)
            self._native = native
            loop = asyncio.get_running_loop()
            try:
                # Woken by the loop itself when frames arrive (a byte on a socket pair);
                # a weak reference, so that an unclosed sink can still be collected.
                loop.add_reader(native.fileno(), _wake_sink, weakref.ref(self))
                self._loop = loop
            except NotImplementedError:
                self._loop = None  # a loop without add_reader: await native.wait_ready()
        return self

    async def __aenter__(self) -> Sink:
        return await self.connect()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.shield(self.close())

    async def close(self) -> None:
        """Stops receiving and closes the connection; an iteration waiting in another task
        ends."""
        native = self._native
        if native is None:
            return
        self._unwatch()
        self._wake()
        await native.close()

    def _unwatch(self) -> None:
        if self._loop is not None and self._native is not None:
            if not self._loop.is_closed():
                self._loop.remove_reader(self._native.fileno())
            self._loop = None

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def __del__(self) -> None:
        # Collected without close(): stop watching; the native half closes the connection.
        try:
            self._unwatch()
        except Exception:
            pass

    def __aiter__(self) -> Sink:
        return self

    async def __anext__(self) -> Frame:
        if not self._ready:
            batch = await self.recv_batch()
            if batch is None:
                raise StopAsyncIteration
            self._ready.extend(batch)
        return self._ready.popleft()

    async def recv_batch(self) -> list[Frame] | None:
        """The frames ready now (at least one, at most ``batch``; waits for the first), or
        ``None`` once the sink has ended. For consumers that handle frames in bulk."""
        if self._ready:
            out = list(self._ready)
            self._ready.clear()
            return out
        native = self._native
        if native is None:
            raise TransportError("closed", "not connected: use `async with` or `await connect()`")
        waited = False
        while True:
            batch = native.take(self._batch)
            if batch is None or batch:
                if batch and not waited:
                    # Ready without waiting: still let the other tasks of the loop run.
                    await asyncio.sleep(0)
                return batch
            waited = True
            if self._loop is not None:
                waiter = self._waiter = self._loop.create_future()
                await waiter
            else:
                await native.wait_ready()

    @property
    def id(self) -> str:
        """This client's id (without the reconnect suffix)."""
        if self._native is None:
            raise TransportError("closed", "not connected")
        return self._native.id


def _wake_sink(ref: weakref.ReferenceType[Sink]) -> None:
    sink = ref()
    if sink is not None and sink._native is not None:
        sink._native.drain_wakeups()
        sink._wake()


class Writer:
    """Writes the outputs of one input frame, as YoMo's ``ctx.Write`` and
    ``ctx.WriteWithTarget`` do: a :class:`StreamFunction` handler taking two arguments
    gets one as its second. Every output keeps the input's metadata (``yomo-tid``,
    ``yomo-source-id``, custom keys; not ``yomo-target``) and one more hop.

    Each write waits for room in the connection's send queue (never buffering without
    bound) and raises :class:`TransportError` (``closed``) once the connection is gone or
    the function stopped. A writer may be kept and used after the handler returned, while
    the function runs.
    """

    __slots__ = ("_native", "_function")

    def __init__(self, native: _y3.NativeWriter, function: StreamFunction) -> None:
        self._native, self._function = native, function

    async def write(self, tag: int, data: Buffer) -> None:
        """Writes ``data`` under ``tag``."""
        await self._native.write(tag, data, "")
        self._function.emitted += 1

    async def write_with_target(self, tag: int, data: Buffer, target: str) -> None:
        """Writes ``data`` under ``tag`` for the functions wanting ``target`` only (an empty
        ``target``: as :meth:`write`)."""
        await self._native.write(tag, data, target)
        self._function.emitted += 1


def _takes_writer(handler: Callable[..., Any]) -> bool:
    """Whether ``handler`` takes a second positional argument (a :class:`Writer`)."""
    try:
        params = inspect.signature(handler).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = 0
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            return True
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            positional += 1
    return positional >= 2


def _output(out: Any) -> tuple[int, Buffer, str]:
    """One output as ``(tag, data, target)``; ``TypeError`` for anything else."""
    if isinstance(out, tuple) and len(out) in (2, 3):
        tag, data, target = out if len(out) == 3 else (*out, "")
        if (
            isinstance(tag, int)
            and isinstance(data, (bytes, bytearray, memoryview))
            and isinstance(target, str)
        ):
            return tag, data, target
    raise TypeError(f"an output is (tag: int, data: bytes) or (tag, data, target: str), not {out!r}")


class StreamFunction:
    """A client that observes tags and answers frames: ``handler(frame)`` (``async`` or
    not) runs once per frame, in arrival order, and returns its outputs: ``None``, one
    ``(tag, data)``, or any number of them (a list or a generator of outputs; an ``async``
    generator's are written as it yields them, each waiting for room). An output
    ``(tag, data, target)`` reaches only the functions wanting ``target``. A handler taking
    two arguments, ``handler(frame, writer)``, may also write through the :class:`Writer`
    while it runs, as YoMo's ``ctx.Write`` / ``ctx.WriteWithTarget``. Every output keeps the
    input's metadata (``yomo-tid``, ``yomo-source-id``, custom keys; not ``yomo-target``)
    and one more hop, as in YoMo.

    One frame is in the handler's hands at a time and the next is read only after it
    returns, so a slow handler slows its input: nothing piles up between Rust and Python.
    With ``durable=True`` the function keeps every output until the router stored it and
    writes again, in order and with the same metadata, what a lost connection left
    unstored (as :class:`DurableSource`; only for ``y3 serve``).

    A handler that raises is logged (logger ``"y3"``), counted in :attr:`errors`, passed to
    ``on_error`` if given, and answered with ``None``; the function goes on. Returned
    outputs that could not be written because the connection was gone are counted in
    :attr:`unwritten` and logged.

    :meth:`run` connects (with backoff), reconnects when the connection is lost, and runs
    until :meth:`stop` or cancellation; it raises :class:`TransportError` for a refusal
    (``unauthorized``) or when reconnecting gave up. ``async with`` runs it in a task
    (entering does not wait for the connection); what that task raised is raised by
    :meth:`wait`, or on leaving the block.

    >>> async def noise_alert(frame):
    ...     noise = y3.get(frame.payload, [0x10, 0x11], as_="float32")   # no copy of the payload
    ...     if noise is not None and noise > 60.0:
    ...         return 0x20, frame.payload
    >>> async def main(addr):
    ...     async with y3.Sink(addr, [0x20]) as alerts, \\
    ...                y3.StreamFunction(addr, [0x10], noise_alert, name="noise-alert") as sfn:
    ...         await wait_subscribed(2)
    ...         async with y3.Source(addr) as source:
    ...             for noise in (40.0, 72.5):
    ...                 await source.send(0x10, y3.encode({"tag": 0x10, "node": [{"tag": 0x11, "float32": noise}]}))
    ...         alert = await anext(alerts)
    ...         return y3.get(alert.payload, "0x10/0x11", as_="float32"), sfn.handled
    >>> asyncio.run(main(ADDR))
    (72.5, 2)
    """

    __doc__ = (__doc__ or "") + _OPTIONS_DOC

    def __init__(
        self,
        addr: str,
        observe: Iterable[int],
        handler: Handler,
        *,
        on_error: Callable[[Frame, BaseException], None] | None = None,
        where: str | Mapping[int, str] | None = None,
        durable: bool = False,
        **options: Any,
    ) -> None:
        self._durable = durable
        self._observe = list(observe)
        self._options = _options(addr, filters=_filters(self._observe, where), **options)
        self._handler = handler
        self._takes_writer = _takes_writer(handler)
        self._on_error = on_error
        self._native: _y3.NativeFunction | None = None
        self._task: asyncio.Task[None] | None = None
        self._waiter: asyncio.Future[None] | None = None
        #: Frames handled (the handler returned or raised).
        self.handled = 0
        #: Outputs returned or written by the handler.
        self.emitted = 0
        self._unwritten_logged = 0
        #: Handler calls that raised.
        self.errors = 0

    async def run(self) -> None:
        """Runs the function until :meth:`stop` or cancellation."""
        if self._native is not None:
            raise RuntimeError("this StreamFunction is already running")
        native = self._native = _y3.function_start(self._options, self._observe, self._durable)
        loop = asyncio.get_running_loop()
        try:
            # Woken by the loop itself when a frame is handed over (a byte on a socket pair).
            loop.add_reader(native.fileno(), self._on_readable)
            watched = True
        except NotImplementedError:
            watched = False  # a loop without add_reader: await native.next()
        reply: _Outputs | None = None
        try:
            while True:
                # While frames stream in, the next one is usually handed over within
                # microseconds of the answer: take it without waiting on the loop.
                frame = native.try_next(reply, _SPIN_US)
                reply = None
                while frame is False:
                    if watched:
                        self._waiter = loop.create_future()
                        await self._waiter
                        frame = native.try_next(None, 0)
                    else:
                        frame = await native.next(None)
                if frame is None:
                    break
                reply = await self._call(frame)
                if native.unwritten != self._unwritten_logged:
                    self._log_unwritten(native.unwritten)
        finally:
            # Also on cancellation: the Rust side flushes the outputs handed over, closes
            # the connection and ends; nothing is left open.
            if watched and not loop.is_closed():
                loop.remove_reader(native.fileno())
            native.stop()
        await native.result()

    @property
    def unwritten(self) -> int:
        """Returned outputs not written because the connection was gone."""
        return self._native.unwritten if self._native is not None else 0

    def _log_unwritten(self, total: int) -> None:
        log.warning(
            "stream function %r: %d returned outputs not written (connection gone), %d in all",
            self._options.name,
            total - self._unwritten_logged,
            total,
        )
        self._unwritten_logged = total

    def _on_readable(self) -> None:
        if self._native is not None:
            self._native.drain_wakeups()
        self._wake()

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _call(self, frame: Frame) -> _Outputs | None:
        self.handled += 1
        native = self._native
        assert native is not None
        try:
            if self._takes_writer:
                out = self._handler(frame, Writer(native.writer(), self))
            else:
                out = self._handler(frame)
            if inspect.isawaitable(out):
                out = await out
            outputs = await self._outputs(native, out)
        except Exception as e:
            self.errors += 1
            if self._on_error is not None:
                self._on_error(frame, e)
            else:
                log.exception("stream function handler raised on %r; the frame gets no answer", frame)
            return None
        self.emitted += len(outputs)
        return outputs or None

    async def _outputs(self, native: _y3.NativeFunction, out: Any) -> _Outputs:
        """The outputs a handler returned, checked; an async iterable's are written as they
        come (and counted) instead."""
        if out is None:
            return []
        if isinstance(out, tuple) and out and isinstance(out[0], int):
            return [_output(out)]
        if isinstance(out, AsyncIterable):
            writer = native.writer()
            async for item in out:
                tag, data, target = _output(item)
                await writer.write(tag, data, target)
                self.emitted += 1
            return []
        if isinstance(out, Iterable) and not isinstance(out, (bytes, bytearray, memoryview, str)):
            return [_output(item) for item in out]
        raise TypeError(f"a handler returns None, an output or outputs, not {out!r}")

    def stop(self) -> None:
        """Asks the function to stop; :meth:`run` then returns."""
        if self._native is not None:
            self._native.stop()
        self._wake()

    async def __aenter__(self) -> StreamFunction:
        self._task = asyncio.ensure_future(self.run())
        await asyncio.sleep(0)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        task = self._task
        if task is None:
            return
        if not task.done():
            # stop() lets the Rust side flush and close; cancelling ends a handler that is
            # still awaiting something.
            self.stop()
            task.cancel()
        await asyncio.wait([task])
        if exc_type is None and not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]

    async def wait(self) -> None:
        """Waits for the task ``async with`` started; raises what :meth:`run` raised."""
        if self._task is not None:
            await self._task

