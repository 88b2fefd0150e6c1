"""Typed structs against the reference NewCodec(key).Marshal(v) of y3-codec-golang
v1.7.3: every marshal_* vector byte for byte with y3.marshal, and read back with
y3.unmarshal (zero values for missing fields, as Go's ToObject fills them), y3.get on the
observed key and y3.decode of the bare packet. Mirrors crates/y3/tests/marshal.rs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

import y3
from conftest import Vector, float_from_bits, golang, params, same

# The Go types of the vectors, field for field, as named schemas.
NOISE = {"Noise": (0x11, "float32"), "Time": (0x12, "int64"), "From": (0x13, "string")}
ALL_TYPES = {
    "S": (0x10, "string"),
    "I32": (0x11, "int32"),
    "U32": (0x12, "uint32"),
    "I64": (0x13, "int64"),
    "U64": (0x14, "uint64"),
    "F32": (0x15, "float32"),
    "F64": (0x16, "float64"),
    "B": (0x17, "bool"),
    "Bs": (0x18, "bytes"),
}
INNER = {"Name": (0x21, "string"), "Vals": (0x22, ["int32"])}
OUTER = {
    "ID": (0x11, "int32"),
    "In": (0x12, INNER),
    "Arr": (0x13, ["int32"]),
    "Items": (0x14, [INNER]),
    "Tags": (0x15, ["string"]),
}
LEVEL3 = {"A": (0x31, {"B": (0x32, {"C": (0x33, "int32")})})}

STRUCTS = {"NoiseData": NOISE, "AllTypes": ALL_TYPES, "Outer": OUTER, "Level3": LEVEL3}

MARSHAL = [v for v in golang() if v.is_marshal]


def schema_and_value(v: Vector) -> tuple[Any, Any]:
    ty, value = v.type, v.json["value"]
    if ty.startswith("slice<float") :
        inner = ty[len("slice<") : -1]
        return [inner], [float_from_bits(inner, b) for b in v.json["bits"]]
    if ty.startswith("slice<struct"):
        return [NOISE], value
    if ty.startswith("slice<") or ty.startswith("array<"):
        inner = ty[ty.index("<") + 1 :].split(",")[0].rstrip(">")
        return [inner], value
    if ty == "struct":
        go_type = v.json["go_type"]
        schema = next(s for name, s in STRUCTS.items() if go_type.startswith(name))
        if go_type.startswith("AllTypes"):
            value = {**value, "Bs": bytes.fromhex(value["Bs"])}
        return schema, value
    if ty == "bytes":
        return "bytes", bytes.fromhex(value)
    return ty, value


@pytest.mark.parametrize("v", params(MARSHAL))
def test_marshal_vector(v: Vector) -> None:
    schema, value = schema_and_value(v)
    if v.name.startswith("marshal_forbidden"):
        # The reference panics on these keys; we refuse them with typed errors.
        with pytest.raises(y3.EncodeError) as err:
            y3.marshal(v.tag, value, schema)
        assert err.value.kind == ("reserved_tag" if v.tag < 0x10 else "invalid_tag")
        assert "prohibit" in v.json["decoded"]
        return
    if v.name == "marshal_array_int32_bare":
        # The reference panics on a bare Go array; ours writes it as the slice.
        assert v.hex == ""
        data = y3.marshal(v.tag, value, schema)
        assert data.hex() == "810bd009000101000102000103"
        assert y3.unmarshal(data, v.tag, schema) == value
        return
    data = y3.marshal(v.tag, value, schema)
    assert data.hex() == v.hex, "marshal"
    back = y3.unmarshal(v.bytes, v.tag, schema)
    assert same(back, value), f"unmarshal {back!r} != {value!r}"
    # ToObject is given the observed packet: get reads it by the same schema.
    assert same(y3.get(v.bytes, [0x01, v.tag], as_=schema, missing="zero"), value)
    # The packet under the root decodes on its own too.
    assert same(y3.decode(v.bytes[2:], schema, missing="zero"), value)
    assert y3.unmarshal(v.bytes, v.tag + 1, schema) is None


def test_every_marshal_vector_is_listed() -> None:
    assert len(MARSHAL) == 35


def test_struct_layout_rules() -> None:
    zero = {k: (b"" if k == "Bs" else "" if k == "S" else False if k == "B" else 0) for k in ALL_TYPES}
    # Zero numbers are written, empty strings and bytes omitted (marshal_struct_AllTypes_zero).
    assert y3.marshal(0x10, zero, ALL_TYPES).hex() == "81179015110100120100130100140100150100160100170100"
    # Absent fields and None are omitted too, and decode as zero values.
    assert y3.marshal(0x10, {"I32": 0, "U32": 0, "I64": 0, "U64": 0, "F32": 0.0, "F64": 0.0, "B": False, "S": None}, ALL_TYPES) == y3.marshal(0x10, zero, ALL_TYPES)
    assert y3.unmarshal(y3.marshal(0x10, {}, ALL_TYPES), 0x10, ALL_TYPES) == zero
    # Under the root, an empty string is omitted as well: 81 00, read back as "no key".
    assert y3.marshal(0x10, "", "string").hex() == "8100"
    assert y3.unmarshal(bytes.fromhex("8100"), 0x10, "string") is None
    # ...but not inside arrays.
    assert y3.marshal(0x10, [""], ["string"]).hex() == "8104d0020000"


def test_marshal_dataclass() -> None:
    @dataclass
    class NoiseData:
        Noise: float
        Time: int
        From: str

    data = y3.marshal(0x10, NoiseData(40.0, 1600000000000, "127.0.0.1"), NOISE)
    assert data.hex() == "81199017110242201206aec8bbba800013093132372e302e302e31"
    assert NoiseData(**y3.unmarshal(data, 0x10, NOISE)) == NoiseData(40.0, 1600000000000, "127.0.0.1")


def test_marshal_refuses_unknown_fields_and_bad_values() -> None:
    with pytest.raises(ValueError, match="not a field"):
        y3.marshal(0x10, {"Noise": 1.0, "Nosie": 2.0}, NOISE)
    with pytest.raises(TypeError):
        y3.marshal(0x10, {"Noise": "loud"}, NOISE)
    with pytest.raises(ValueError, match="out of range"):
        y3.marshal(0x10, 2**31, "int32")
    with pytest.raises(TypeError):
        y3.marshal(0x10, [1, None], ["int32"])
    with pytest.raises(TypeError):
        y3.marshal(0x10, b"x", "raw")


@pytest.mark.parametrize("dialect", ["golang", "nvarint", "draft02"])
def test_marshal_round_trip_every_dialect(dialect: str) -> None:
    value = {
        "ID": -7,
        "In": {"Name": "in", "Vals": [1, -2, 2**31 - 1]},
        "Arr": [4, 5, 6],
        "Items": [{"Name": "a", "Vals": []}, {"Name": "", "Vals": [-1]}],
        "Tags": ["x", "", "y"],
    }
    data = y3.marshal(0x3F, value, OUTER, dialect=dialect)
    back = y3.unmarshal(data, 0x3F, OUTER, dialect=dialect)
    assert back == value
    assert y3.validate(data, dialect=dialect) == 1
