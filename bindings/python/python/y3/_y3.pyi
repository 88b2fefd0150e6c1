"""Type stubs of the native module ``y3._y3`` (PyO3). Use the wrappers in ``y3``."""

from typing import Any, Literal, final

MAX_PATH_DEPTH: int
MAX_SUBSCRIPTIONS: int
DEFAULT_MAX_PACKET_LEN: int
DEFAULT_MAX_DEPTH: int

_Buffer = bytes | bytearray | memoryview

def encode(item: Any, dialect: str = "golang") -> bytes: ...
def encoded_len(item: Any, dialect: str = "golang") -> int: ...
def decode(
    data: _Buffer,
    schema: CompiledSchema,
    dialect: str = "golang",
    max_packet_len: int | None = None,
    max_depth: int | None = None,
    missing: str = "omit",
) -> Any: ...
def decode_stream(
    data: _Buffer,
    schema: CompiledSchema,
    dialect: str = "golang",
    max_packet_len: int | None = None,
    max_depth: int | None = None,
    missing: str = "omit",
) -> Any: ...
def get(
    data: _Buffer,
    path: list[int],
    schema: CompiledSchema | None = None,
    dialect: str = "golang",
    max_packet_len: int | None = None,
    max_depth: int | None = None,
    missing: str = "omit",
) -> Any: ...
def parse(
    data: _Buffer,
    schema: CompiledSchema | None = None,
    dialect: str = "golang",
    max_packet_len: int | None = None,
    max_depth: int | None = None,
    missing: str = "omit",
) -> tuple[int, Any, int]: ...
def marshal(key: int, value: Any, schema: CompiledSchema, dialect: str = "golang") -> bytes: ...
def unmarshal(
    data: _Buffer,
    key: int,
    schema: CompiledSchema,
    dialect: str = "golang",
    max_packet_len: int | None = None,
    max_depth: int | None = None,
    missing: str = "zero",
) -> Any: ...
def inspect(
    data: _Buffer,
    dialect: str = "golang",
    max_packet_len: int | None = None,
    max_depth: int | None = None,
) -> list[dict[str, Any]]: ...
def validate(
    data: _Buffer,
    dialect: str = "golang",
    max_packet_len: int | None = None,
    max_depth: int | None = None,
) -> int: ...
def parse_path(text: str) -> list[int]: ...
@final
class CompiledSchema:
    def __new__(cls, canonical: Any, tag: int | None = None) -> CompiledSchema: ...
    @property
    def tag(self) -> int | None: ...

@final
class Observer:
    def __new__(
        cls,
        paths: list[list[int]],
        schemas: list[CompiledSchema | None] | None = None,
        dialect: str = "golang",
        max_packet_len: int | None = None,
        max_depth: int | None = None,
        validate: bool = False,
    ) -> Observer: ...
    def feed(self, chunk: _Buffer) -> list[tuple[int, int, Any]]: ...
    def finish(self) -> None: ...
    def reset(self) -> None: ...
    @property
    def position(self) -> int: ...
    @property
    def packets(self) -> int: ...
    @property
    def paths(self) -> list[list[int]]: ...
    @property
    def dialect(self) -> str: ...

# --- The client SDK (src/client/): wrapped by y3.Source, y3.StreamFunction, y3.Sink ---

from collections.abc import Awaitable

@final
class Options:
    def __init__(
        self,
        addr: str,
        *,
        transport: str = "tcp",
        name: str = "",
        token: str | None = None,
        credential: str | None = None,
        pin: str | None = None,
        ca: str | None = None,
        insecure: bool = False,
        server_name: str | None = None,
        wanted_target: str = "",
        max_frame_len: int | None = None,
        handshake_timeout: float = 5.0,
        backoff_initial: float = 0.1,
        backoff_max: float = 5.0,
        backoff_attempts: int = 10,
        send_queue: int = 1024,
        filters: list[tuple[int, str]] = ...,
    ) -> None: ...
    @property
    def addr(self) -> str: ...
    @property
    def transport(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def send_queue(self) -> int: ...
    @property
    def exposes_credential(self) -> bool: ...

@final
class Frame:
    """A received data frame; ``payload`` is copied once out of the connection's buffer."""

    @property
    def tag(self) -> int: ...
    @property
    def payload(self) -> bytes: ...
    @property
    def hops(self) -> int: ...
    @property
    def metadata(self) -> dict[str, str]: ...
    @property
    def tid(self) -> str | None: ...
    @property
    def source_id(self) -> str | None: ...

_Pairs = list[tuple[str, str]] | None

@final
class NativeSource:
    def try_send(self, tag: int, data: _Buffer, target: str | None = None, metadata: _Pairs = None) -> bool: ...
    def send(self, tag: int, data: _Buffer, target: str | None = None, metadata: _Pairs = None) -> Awaitable[None]: ...
    def flush(self) -> Awaitable[None]: ...
    def close(self) -> Awaitable[None]: ...
    def shutdown(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def id(self) -> str: ...

@final
class NativeSink:
    def fileno(self) -> int: ...
    def drain_wakeups(self) -> None: ...
    def take(self, max: int) -> list[Frame] | None: ...
    def wait_ready(self) -> Awaitable[None]: ...
    def close(self) -> Awaitable[None]: ...
    @property
    def id(self) -> str: ...

@final
class NativeFunction:
    def next(self, reply: tuple[int, _Buffer] | None = None) -> Awaitable[Frame | None]: ...
    def try_next(self, reply: tuple[int, _Buffer] | None = None, spin_us: int = 0) -> Frame | None | Literal[False]: ...
    def stop(self) -> None: ...
    def result(self) -> Awaitable[None]: ...
    def fileno(self) -> int: ...
    def drain_wakeups(self) -> None: ...

def source_connect(options: Options) -> Awaitable[NativeSource]: ...
def sink_connect(options: Options, observed: list[int], cap: int = 1024) -> Awaitable[NativeSink]: ...
def function_start(options: Options, observed: list[int]) -> NativeFunction: ...
def quiesce(timeout: float) -> None: ...
