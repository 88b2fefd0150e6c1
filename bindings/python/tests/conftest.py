"""Shared vector loading: the reference vectors in testdata/vectors/ as typed items
(what y3.encode takes), schemas (what y3.decode takes) and expected Python values; and the
one fixture that starts `y3 serve` (`y3_serve`, through its ready file: routers.py).

Mirrors crates/y3/tests/common/mod.rs, so every language reads the vectors the same way.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import routers
from routers import Y3Router, YomoZipper, y3_serve  # noqa: F401 (the fixture, shared)

ROOT = Path(__file__).resolve().parents[3]
VECTORS = ROOT / "testdata" / "vectors"
GOLANG_FILE = "y3-codec-golang-v1.7.3.json"
NVARINT_FILE = "yomorun-y3-v1.0.5.json"
MALFORMED_FILE = "malformed-behaviour.json"

SCALARS = ("int32", "int64", "uint32", "uint64", "float32", "float64", "bool", "string", "bytes")


@dataclass(frozen=True)
class Vector:
    file: str
    dialect: str
    json: dict[str, Any]

    @property
    def name(self) -> str:
        return self.json["name"]

    @property
    def type(self) -> str:
        return self.json["type"]

    @property
    def tag(self) -> int:
        return self.json["tag"]

    @property
    def hex(self) -> str:
        return self.json["hex"]

    @property
    def bytes(self) -> bytes:
        return bytes.fromhex(self.json["hex"])

    @property
    def is_marshal(self) -> bool:
        return self.json["api"].startswith("NewCodec(")

    @property
    def id(self) -> str:
        return f"{self.dialect}:{self.name}"


def load(file: str) -> list[Any]:
    with open(VECTORS / file, encoding="utf-8") as f:
        return json.load(f)


def golang() -> list[Vector]:
    return [Vector(GOLANG_FILE, "golang", e) for e in load(GOLANG_FILE)]


def nvarint() -> list[Vector]:
    return [Vector(NVARINT_FILE, "nvarint", e) for e in load(NVARINT_FILE)]


def all_vectors() -> list[Vector]:
    return golang() + nvarint()


def params(vectors: list[Vector]) -> list[Any]:
    return [pytest.param(v, id=v.id) for v in vectors]


# ---------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------


def recipe_string(recipe: str) -> str:
    # "repeat 'a' 16384"
    word, ch, count = recipe.split(" ")
    assert word == "repeat", recipe
    return ch.strip("'") * int(count)


def float_from_bits(ty: str, bits: str) -> float:
    raw = bytes.fromhex(bits)
    return struct.unpack(">f" if ty == "float32" else ">d", raw)[0]


def scalar_item(ty: str, tag: int, value: Any, bits: str | None = None) -> dict[str, Any]:
    """A typed item for a scalar vector value; floats exactly, by their bits."""
    if ty in ("float32", "float64"):
        assert bits is not None
        return {"tag": tag, f"{ty}_bits": bits}
    if ty == "bytes":
        return {"tag": tag, "bytes": bytes.fromhex(value)}
    return {"tag": tag, ty: value}


def stress_item(k: int) -> dict[str, Any]:
    """The report's C63 data set at key k (1-based)."""
    kind = (k - 1) % 7
    return [
        {"tag": k, "string": "a"},
        {"tag": k, "int32": -65},
        {"tag": k, "uint32": 128},
        {"tag": k, "int64": -1},
        {"tag": k, "uint64": 2**64 - 1},
        {"tag": k, "float32": 0.25},
        {"tag": k, "float64": 23.0},
    ][kind]


def node_children(mapping: dict[str, Any]) -> list[dict[str, Any]]:
    """Children of a node described as {"0x11": {"int32": 1}, "0x03": {"0x04": {...}}}."""
    out = []
    for key, inner in mapping.items():
        tag = int(key, 16)
        if inner and all(k.startswith("0x") for k in inner):
            out.append({"tag": tag, "node": node_children(inner)})
        else:
            ((ty, value),) = inner.items()
            out.append({"tag": tag, ty: value})
    return out


def items_of(v: Vector) -> list[dict[str, Any]] | None:
    """The packets a low-level (non-Marshal) vector describes."""
    if v.is_marshal:
        return None
    value = v.json["value"]
    if v.type == "node" and v.name.startswith("stress_C63"):
        return [{"tag": v.tag, "node": [stress_item(k) for k in range(1, 64)]}]
    if v.type == "node" and isinstance(value, list):
        # node_duplicate_child_keys: three int32 children, all with key 0.
        return [{"tag": v.tag, "node": [{"tag": 0, "int32": e} for e in value]}]
    if v.type == "node":
        return [{"tag": v.tag, "node": node_children(value)}]
    if v.type == "slice<int32>":
        return [{"tag": v.tag, "array": [{"int32": e} for e in value]}]
    if v.type == "stream":
        # spec_tlv_example: age 0x01 = 5, summary 0x02 { name 0x03, create 0x04 }.
        return [
            {"tag": 0x01, "int32": 5},
            {"tag": 0x02, "node": [{"tag": 0x03, "string": "CELLA"}, {"tag": 0x04, "string": "Y3"}]},
        ]
    if "value_recipe" in v.json:
        return [{"tag": v.tag, "string": recipe_string(v.json["value_recipe"])}]
    return [scalar_item(v.type, v.tag, value, v.json.get("bits"))]


def item_type(item: dict[str, Any]) -> str:
    (key,) = [k for k in item if k != "tag"]
    return key.removesuffix("_bits")


def item_value(item: dict[str, Any]) -> Any:
    """The Python value y3.decode returns for an item read by schema_of(item)."""
    ty = item_type(item)
    if ty == "node":
        children = item["node"]
        if has_duplicates(children):
            return [item_value(c) for c in children]
        return {c.get("tag", 0): item_value(c) for c in children}
    if ty == "array":
        return [item_value(c) for c in item["array"]]
    if f"{ty}_bits" in item:
        return float_from_bits(ty, item[f"{ty}_bits"])
    raw = item[ty]
    if ty in ("float32", "float64"):
        return float(raw)
    return raw


def has_duplicates(children: list[dict[str, Any]]) -> bool:
    tags = [c.get("tag", 0) for c in children]
    return len(set(tags)) != len(tags)


def schema_of(item: dict[str, Any]) -> dict[str, Any]:
    """The typed-form schema that reads an item back (types are not on the wire)."""
    ty = item_type(item)
    out: dict[str, Any] = {"tag": item.get("tag", 0)}
    if ty == "node":
        children = item["node"]
        if has_duplicates(children):
            element = schema_of(children[0]) if children else {"type": "raw"}
            element.pop("tag", None)
            out["type"] = [element["type"] if "type" in element else element]
        else:
            out["node"] = [schema_of(c) for c in children]
    elif ty == "array":
        elements = item["array"]
        element = schema_of(elements[0]) if elements else {"type": "raw"}
        element.pop("tag", None)
        out["array"] = element
    else:
        out["type"] = ty
    return out


def decode_items(data: bytes, items: list[dict[str, Any]], dialect: str) -> list[Any]:
    """Reads `data` as the packets `items` describe: one packet by decode, a stream by
    decode_stream (a stream reads like the children of a node)."""
    import y3

    if len(items) == 1:
        return [y3.decode(data, schema_of(items[0]), dialect=dialect)]
    stream = y3.decode_stream(data, {"node": [schema_of(i) for i in items]}, dialect=dialect)
    return [stream[i["tag"]] for i in items]


def float_bits(x: float) -> bytes:
    return struct.pack(">d", x)


def same(a: Any, b: Any) -> bool:
    """Equality with floats compared bit for bit (NaN payloads, the sign of zero)."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and float_bits(float(a)) == float_bits(float(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def is_finite_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def leaf_paths(tree: dict[str, Any], prefix: tuple[int, ...] = ()) -> list[tuple[int, ...]]:
    """Key paths of every leaf (primitive or empty node) of an inspect()/item tree."""
    path = prefix + (tree.get("tag", 0),)
    children = tree.get("node", tree.get("array"))
    if children:
        out: list[tuple[int, ...]] = []
        for c in children:
            out.extend(leaf_paths(c, path))
        return out
    return [path]


@pytest.fixture
def y3_router(y3_serve: Callable[..., Y3Router]) -> Y3Router:
    """One `y3 serve` with the defaults (see `y3_serve`)."""
    return y3_serve()


@pytest.fixture(params=["y3", "yomo"])
def router(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Y3Router | YomoZipper]:
    """`y3 serve` (the `y3_serve` fixture), then YoMo's zipper: the same test against both."""
    if request.param == "y3":
        if not routers.Y3_BIN:
            pytest.skip("Y3_BIN is not set")
        r: Y3Router | YomoZipper = request.getfixturevalue("y3_serve")()
    else:
        if not routers.YOMO_PEER:
            pytest.skip("YOMO_PEER is not set")
        r = YomoZipper(tmp_path)
    yield r
    r.stop()
