"""Type stubs of the native module ``y3._y3`` (PyO3). Use the wrappers in ``y3``."""

from typing import Any, final

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
