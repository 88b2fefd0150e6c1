"""Schemas: the types the wire does not carry, in the forms users write them.

The wire has keys, lengths and bytes; whether ``42 20`` is the float32 40.0 or the int
4256 is the reader's business. A schema says it. Forms (they nest freely):

``"int32"`` ``"int64"`` ``"uint32"`` ``"uint64"`` ``"float32"`` ``"float64"`` ``"bool"`` ``"string"`` ``"bytes"``
    a primitive, read with the core's accessor for that type. The Python types ``int``,
    ``float``, ``str``, ``bytes`` and ``bool`` stand for int64, float64, string, bytes, bool.
``"raw"``
    the value bytes of any packet, node or not (``"bytes"`` refuses a node).
``"any"``
    the packet as an :func:`y3.inspect` tree.
``{0x11: "float32", 0x12: "int64"}``
    a node read into a dict, keyed by tag (int keys, or tag strings such as ``"0x11"``,
    which are kept as written).
``{"noise": (0x11, "float32"), "time": (0x12, "int64", 0)}``
    a node read into a dict keyed by name; a third tuple item is the default used when
    the key is not on the wire. Both dict forms may be mixed.
``["int32"]``
    every child of a node (array node or plain node, whatever the child keys) -> list.
``{"tag": 16, "node": [{"tag": 17, "type": "int32", "name": "x"}]}``
    the typed form, mirroring the items :func:`y3.encode` takes: ``"type"`` (any schema),
    ``"node"`` (a list of typed fields with ``"tag"`` and optional ``"name"`` and
    ``"default"``, or a dict form) or ``"array"`` (the element schema). A top-level
    ``"tag"`` is checked against the packet.

In a node, keys the schema does not name are skipped, and a repeated key's last packet
wins. A field with no packet is left out of the dict (``missing="omit"``), set to ``None``
(``missing="none"``) or to its zero value (``missing="zero"``: 0, 0.0, False, "", b"", [],
a dict of zeros); an explicit default always wins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Union

from . import _y3

__all__ = ["Schema", "SchemaLike", "SCALAR_TYPES"]

SCALAR_TYPES = frozenset(
    {"int32", "int64", "uint32", "uint64", "float32", "float64", "bool", "string", "bytes"}
)
_SPECIAL = frozenset({"raw", "any"})
_PY_TYPES: dict[Any, str] = {
    bool: "bool",
    int: "int64",
    float: "float64",
    str: "string",
    bytes: "bytes",
}
_TYPED_VALUE_KEYS = ("type", "node", "array")
_TYPED_KEYS = frozenset({"tag", "name", "default", *_TYPED_VALUE_KEYS})

SchemaLike = Union["Schema", str, type, Mapping[Any, Any], Sequence[Any]]


class Schema:
    """A schema compiled once, for reuse in hot loops.

    Every function that takes a schema also takes the plain forms above and compiles them
    on each call; a ``Schema`` skips that step.
    """

    __slots__ = ("source", "tag", "_compiled")

    def __init__(self, schema: SchemaLike) -> None:
        if isinstance(schema, Schema):
            self.source: Any = schema.source
            self.tag: int | None = schema.tag
            self._compiled: Any = schema._compiled
            return
        canonical, tag = _top(schema)
        self.source = schema
        self.tag = tag
        self._compiled = _y3.CompiledSchema(canonical, tag)

    def __repr__(self) -> str:
        return f"Schema({self.source!r})"


def compiled(schema: SchemaLike) -> Any:
    """The native compiled form of any schema form."""
    if isinstance(schema, Schema):
        return schema._compiled
    return Schema(schema)._compiled


def _describe(obj: Any) -> str:
    text = repr(obj)
    return text if len(text) <= 40 else text[:37] + "..."


def _tag(raw: Any, at: str) -> int:
    if isinstance(raw, bool):
        raise TypeError(f"{at}: expected a tag id, found {_describe(raw)}")
    if isinstance(raw, int):
        if 0 <= raw <= 0xFFFF_FFFF:
            return raw
        raise ValueError(f"{at}: tag {raw} out of range 0..=4294967295")
    if isinstance(raw, str):
        text = raw.strip()
        try:
            value = int(text[2:], 16) if text[:2].lower() == "0x" else int(text, 10)
        except ValueError:
            value = -1
        if 0 <= value <= 0xFFFF_FFFF:
            return value
        raise ValueError(f"{at}: not a tag id: {raw!r} (expected \"0x10\" or \"16\")")
    raise TypeError(f"{at}: expected a tag id (int or \"0x..\"), found {_describe(raw)}")


def _is_tag_text(key: str) -> bool:
    try:
        _tag(key, "")
    except (TypeError, ValueError):
        return False
    return True


def _is_typed(schema: Mapping[Any, Any]) -> bool:
    """Whether a dict is the typed form (``{"tag", "type"|"node"|"array", ...}``)."""
    if not all(isinstance(k, str) and k in _TYPED_KEYS for k in schema):
        return False
    present = [k for k in _TYPED_VALUE_KEYS if k in schema]
    return len(present) == 1 and not isinstance(schema[present[0]], tuple)


def _top(schema: Any) -> tuple[Any, int | None]:
    """Canonical form and the top-level tag to check (typed form only)."""
    if isinstance(schema, Mapping) and _is_typed(schema):
        tag = _tag(schema["tag"], "$.tag") if "tag" in schema else None
        return _typed(schema, "$"), tag
    return _canonical(schema, "$"), None


def _canonical(schema: Any, at: str) -> Any:
    if isinstance(schema, Schema):
        return _top(schema.source)[0]
    if isinstance(schema, str):
        if schema in SCALAR_TYPES or schema in _SPECIAL:
            return schema
        raise ValueError(
            f"{at}: unknown type {schema!r} (expected one of "
            f"{' '.join(sorted(SCALAR_TYPES | _SPECIAL))})"
        )
    if isinstance(schema, type):
        if schema in _PY_TYPES:
            return _PY_TYPES[schema]
        raise TypeError(f"{at}: no wire type for {schema.__name__}")
    if isinstance(schema, Mapping):
        if _is_typed(schema):
            return _typed(schema, at)
        return _struct(schema, at)
    if isinstance(schema, list):
        if len(schema) != 1:
            raise ValueError(f"{at}: a list schema has exactly one element schema, found {len(schema)}")
        return ("list", _canonical(schema[0], f"{at}[]"))
    raise TypeError(f"{at}: not a schema: {_describe(schema)}")


def _struct(schema: Mapping[Any, Any], at: str) -> Any:
    fields = []
    seen: dict[int, Any] = {}
    for key, spec in schema.items():
        here = f"{at}[{key!r}]"
        if isinstance(key, int) and not isinstance(key, bool):
            tag, sub, default = _tag(key, here), spec, _MISSING
        elif isinstance(key, str) and isinstance(spec, tuple):
            if len(spec) not in (2, 3):
                raise ValueError(f"{here}: a named field is (tag, schema) or (tag, schema, default)")
            tag, sub = _tag(spec[0], here), spec[1]
            default = spec[2] if len(spec) == 3 else _MISSING
        elif isinstance(key, str) and _is_tag_text(key):
            tag, sub, default = _tag(key, here), spec, _MISSING
        elif isinstance(key, str):
            raise TypeError(
                f"{here}: a named field needs a (tag, schema) tuple, found {_describe(spec)}"
            )
        else:
            raise TypeError(f"{here}: a field key is a tag (int or \"0x..\") or a name (str)")
        if isinstance(spec, tuple) and not isinstance(key, str):
            raise TypeError(f"{here}: with a tag as the key, give just the schema")
        if tag in seen:
            raise ValueError(f"{at}: fields {seen[tag]!r} and {key!r} both have tag 0x{tag:02x}")
        seen[tag] = key
        canonical = _canonical(sub, f"{at}.0x{tag:02x}")
        fields.append(_field(tag, key, canonical, default))
    return ("struct", fields)


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING: Any = _Missing()


def _field(tag: int, key: Any, canonical: Any, default: Any) -> tuple[Any, ...]:
    if default is _MISSING:
        return (tag, key, canonical, False, None)
    return (tag, key, canonical, True, default)


def _typed(schema: Mapping[str, Any], at: str) -> Any:
    if "type" in schema:
        return _canonical(schema["type"], f"{at}.type")
    if "array" in schema:
        element = schema["array"]
        if isinstance(element, Mapping) and _is_typed(element) and "tag" not in element:
            return ("list", _typed(element, f"{at}.array"))
        return ("list", _canonical(element, f"{at}.array"))
    node = schema["node"]
    if isinstance(node, Mapping):
        return _struct(node, f"{at}.node")
    if not isinstance(node, (list, tuple)):
        raise TypeError(f"{at}.node: expected a list of typed fields, found {_describe(node)}")
    fields = []
    seen: dict[int, Any] = {}
    for i, field in enumerate(node):
        here = f"{at}.node[{i}]"
        if not (isinstance(field, Mapping) and _is_typed(field)):
            raise TypeError(
                f"{here}: expected a typed field {{\"tag\", \"type\"|\"node\"|\"array\"}}, "
                f"found {_describe(field)}"
            )
        if "tag" not in field:
            raise ValueError(f"{here}: missing \"tag\"")
        tag = _tag(field["tag"], f"{here}.tag")
        key = field.get("name", tag)
        if tag in seen:
            raise ValueError(f"{here}: tag 0x{tag:02x} appears twice")
        seen[tag] = key
        fields.append(_field(tag, key, _typed(field, here), field.get("default", _MISSING)))
    return ("struct", fields)
