"""Exceptions raised by the codec, with the Rust core's stable ``kind`` strings.

Every exception carries ``kind`` (a snake_case name shared by the Rust, Go and Python
implementations and by the negative vectors in ``testdata/vectors/``), ``message`` (for
humans; may change) and ``details``: the numeric context of the Rust variant, such as
``needed`` for ``unexpected_end`` or ``declared`` and ``available`` for ``child_overflow``.
Each detail is also an attribute (``err.needed``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["Y3Error", "DecodeError", "EncodeError", "PathError", "TransportError"]


class _Kinded(Exception):
    """``kind``, ``message`` and ``details`` (also attributes), shared by every error."""

    kind: str
    message: str
    details: dict[str, Any]

    def __init__(self, kind: str, message: str = "", **details: Any) -> None:
        super().__init__(kind, message)
        self.kind = kind
        self.message = message
        self.details = details

    def __getattr__(self, name: str) -> Any:
        # Details read as attributes: err.needed, err.declared, ...
        details = self.__dict__.get("details")
        if details is not None and name in details:
            return details[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}" if self.message else self.kind

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.kind!r}, {self.message!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.kind, self.message, self.details))


def _rebuild(cls: type[_Kinded], kind: str, message: str, details: dict[str, Any]) -> _Kinded:
    return cls(kind, message, **details)


class Y3Error(_Kinded, ValueError):
    """Base class of the codec's errors; a ``ValueError``."""


class TransportError(_Kinded):
    """A client could not connect, was refused, or lost its connection for good.

    ``kind`` is the Rust transport's stable name: a refusal's code (``unauthorized``,
    ``forbidden``, ``reserved_tag``, ``protocol_error``, ``bad_handshake``,
    ``shutting_down``, ``rejected``, ...; its number in ``details["code"]``), or ``io``,
    ``tls``, ``certificate``, ``quic_connect``, ``quic_connection``, ``closed``,
    ``timeout``, ``gave_up`` (``attempts``, ``addr``), ``redirected``, ``unexpected_frame``,
    ``config``, or a frame error's kind. ``retryable`` says whether trying again later may
    succeed (a lost connection) rather than repeat a refusal.
    """

    @property
    def retryable(self) -> bool:
        return bool(self.details.get("retryable", False))


class DecodeError(Y3Error):
    """Bytes could not be read as Y3.

    Kinds: ``unexpected_end``, ``too_long``, ``too_deep``, ``negative_length``,
    ``varint_overflow``, ``varint_unterminated``, ``child_overflow``, ``truncated_header``,
    ``invalid_tag``, ``invalid_utf8``, ``invalid_length``, ``invalid_bool``, ``wrong_type``,
    ``wrong_count``, ``trailing_bytes``.

    Raised by ``Observer.feed``, it also has ``observed``: the values that completed in
    that chunk before the error.
    """


class EncodeError(Y3Error):
    """A value could not be written as Y3.

    Kinds: ``invalid_tag``, ``reserved_tag``, ``too_long``, ``buffer_too_small``.
    """


class PathError(Y3Error):
    """A key path (or set of paths) cannot be observed.

    Kinds: ``empty_path``, ``path_too_deep``, ``path_count``, ``path_overlap``,
    ``path_syntax``.
    """


# Shown (and pickled) as y3.DecodeError etc., where users import them from.
for _cls in (Y3Error, DecodeError, EncodeError, PathError, TransportError):
    _cls.__module__ = "y3"
del _cls
