"""The Python API itself: item and schema forms, errors, buffers, the README's examples."""

from __future__ import annotations

import doctest
import pickle
from pathlib import Path
from typing import Any

import pytest

import y3

NOISE_HEX = "9017110242201206aec8bbba800013093132372e302e302e31"
NOISE = bytes.fromhex(NOISE_HEX)


def test_readme_examples() -> None:
    readme = Path(__file__).resolve().parents[1] / "README.md"
    result = doctest.testfile(str(readme), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 20


def test_module_docstring_examples() -> None:
    result = doctest.testmod(y3)
    assert result.failed == 0 and result.attempted > 0


# ---------------------------------------------------------------------------------------
# encode
# ---------------------------------------------------------------------------------------


def test_encode_forms() -> None:
    node = {"tag": "0x10", "node": [{"tag": "17", "float32": 40.0}, {"tag": 0x12, "int64": 1600000000000}, {"tag": 0x13, "string": "127.0.0.1"}]}
    assert y3.encode(node).hex() == NOISE_HEX
    # Tuples are lists; bits, hex bytes and named floats as typed JSON spells them.
    assert y3.encode({"tag": 0x11, "float32_bits": "42200000"}) == y3.encode({"tag": 0x11, "float32": 40})
    assert y3.encode({"tag": 0x11, "float32_bits": 0x42200000}) == bytes.fromhex("11024220")
    assert y3.encode({"tag": 0x11, "float64": "-inf"}).hex() == "1102fff0"
    assert y3.encode({"tag": 0x11, "bytes": "dead beef"}) == y3.encode({"tag": 0x11, "bytes": bytearray(b"\xde\xad\xbe\xef")})
    assert y3.encode(({"tag": 1, "bool": True}, {"tag": 2, "uint64": 2**64 - 1})).hex() == "010101" + "02017f"
    assert y3.encode([]) == b""
    assert y3.encode({"tag": 0x10, "array": [{"string": "a"}, {"tag": 0, "string": "b"}]}).hex() == "d006000161000162"


@pytest.mark.parametrize(
    "item, error, match",
    [
        ("x", TypeError, "expected an item dict"),
        ({"int32": 1}, ValueError, 'missing "tag"'),
        ({"tag": 1}, ValueError, "no value key"),
        ({"tag": 1, "int32": 1, "int64": 1}, ValueError, "two value keys"),
        ({"tag": 1, "int33": 1}, ValueError, "unknown key"),
        ({"tag": -1, "int32": 1}, ValueError, "expected a tag id"),
        ({"tag": "0xzz", "int32": 1}, ValueError, "expected a tag id"),
        ({"tag": 1, "int32": 2**31}, ValueError, "out of range for int32"),
        ({"tag": 1, "uint32": -1}, ValueError, "out of range for uint32"),
        ({"tag": 1, "uint64": 2**64}, ValueError, "out of range for uint64"),
        ({"tag": 1, "int64": 1.0}, TypeError, "expected an int"),
        ({"tag": 1, "int32": True}, TypeError, "expected an int"),
        ({"tag": 1, "float32": 1e39}, ValueError, "out of range for float32"),
        ({"tag": 1, "float32": "fast"}, TypeError, "expected a float"),
        ({"tag": 1, "float64_bits": "00"}, ValueError, "16 hex digits"),
        ({"tag": 1, "bool": 1}, TypeError, "True or False"),
        ({"tag": 1, "string": b"x"}, TypeError, "expected a str"),
        ({"tag": 1, "bytes": "xyz"}, ValueError, "not a hex string"),
        ({"tag": 1, "bytes": 5}, TypeError, "expected bytes"),
        ({"tag": 1, "node": {"tag": 2, "int32": 1}}, TypeError, "expected a list of items"),
        ({"tag": 1, "node": [{"tag": 2, "int32": "1"}]}, TypeError, r"\$\.node\[0\]\.int32"),
    ],
)
def test_encode_shape_errors(item: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        y3.encode(item)


def test_encode_unknown_dialect() -> None:
    with pytest.raises(ValueError, match="unknown dialect"):
        y3.encode({"tag": 1, "int32": 1}, "golang2")


# ---------------------------------------------------------------------------------------
# schemas
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "schema, expected",
    [
        ({0x11: "float32", 0x12: "int64", 0x13: "string"}, {0x11: 40.0, 0x12: 1600000000000, 0x13: "127.0.0.1"}),
        ({"0x11": "float32", "19": str}, {"0x11": 40.0, "19": "127.0.0.1"}),
        ({"noise": (0x11, "float32"), "from": ("0x13", "string")}, {"noise": 40.0, "from": "127.0.0.1"}),
        ({"noise": (0x11, float)}, {"noise": 34359738368.0}),
        ({0x11: "raw", 0x12: "uint64", 0x14: "int32"}, {0x11: b"\x42\x20", 0x12: 1600000000000}),
        ({"tag": 0x10, "node": [{"tag": 0x11, "type": "float32"}, {"tag": 0x13, "name": "from", "type": "string"}]}, {0x11: 40.0, "from": "127.0.0.1"}),
        ({"tag": 0x10, "node": {0x11: "float32"}}, {0x11: 40.0}),
        ({"type": {0x11: "float32"}}, {0x11: 40.0}),
        ("raw", NOISE[2:]),
        ("any", y3.inspect(NOISE)[0]),
        (["raw"], [b"\x42\x20", bytes.fromhex("aec8bbba8000"), b"127.0.0.1"]),
        ({"type": (0x11, "string"), "name": (0x13, "string")}, {"name": "127.0.0.1", "type": "B "}),
    ],
)
def test_schema_forms(schema: Any, expected: Any) -> None:
    assert y3.decode(NOISE, schema) == expected
    assert y3.decode(NOISE, y3.Schema(schema)) == expected
    assert y3.decode(bytearray(NOISE), schema) == expected
    assert y3.decode(memoryview(NOISE), schema) == expected


def test_missing_fields() -> None:
    schema = {"a": (0x11, "int32"), "b": (0x12, ["string"]), "c": (0x13, {"d": (0x14, "float64")}), "e": (0x15, "bytes", b"?")}
    data = y3.encode({"tag": 0x10, "node": [{"tag": 0x11, "int32": 1}]})
    assert y3.decode(data, schema) == {"a": 1, "e": b"?"}
    assert y3.decode(data, schema, missing="none") == {"a": 1, "b": None, "c": None, "e": b"?"}
    assert y3.decode(data, schema, missing="zero") == {"a": 1, "b": [], "c": {"d": 0.0}, "e": b"?"}
    with pytest.raises(ValueError, match="missing="):
        y3.decode(data, schema, missing="skip")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "schema, error, match",
    [
        ("int16", ValueError, "unknown type"),
        (list, TypeError, "no wire type"),
        (["int32", "int64"], ValueError, "exactly one element"),
        ({"name": "int32"}, TypeError, r"needs a \(tag, schema\) tuple"),
        ({"a": (0x11,)}, ValueError, "a named field is"),
        ({"a": (0x11, "int32"), "b": (0x11, "string")}, ValueError, "both have tag 0x11"),
        ({0x11: (0x11, "int32")}, TypeError, "give just the schema"),
        ({"tag": 1, "node": [{"type": "int32"}]}, ValueError, 'missing "tag"'),
        ({"tag": 1, "node": [{"tag": 2, "type": "int32"}, {"tag": 2, "type": "bool"}]}, ValueError, "appears twice"),
        ({1.5: "int32"}, TypeError, "a field key is"),
        (3, TypeError, "not a schema"),
    ],
)
def test_schema_errors(schema: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        y3.Schema(schema)


def test_typed_schema_checks_the_top_level_tag() -> None:
    with pytest.raises(ValueError, match="top-level tag 0x11"):
        y3.decode(NOISE, {"tag": 0x11, "node": []})


def test_decode_errors_name_the_place() -> None:
    data = y3.encode({"tag": 0x10, "node": [{"tag": 0x11, "array": [{"int32": 1}, {"int32": 2}]}]})
    with pytest.raises(y3.DecodeError) as err:
        y3.decode(data, {0x11: ["bool"]})
    assert err.value.kind == "invalid_bool" and err.value.value == 2
    assert err.value.message.startswith("$.0x11[1]: ")
    with pytest.raises(y3.DecodeError) as err:
        y3.decode(data, {0x11: "int32"})
    assert err.value.kind == "wrong_type" and err.value.expected == "primitive"


def test_decode_stream() -> None:
    stream = y3.encode([{"tag": 1, "int32": 5}, {"tag": 2, "string": "x"}, {"tag": 1, "int32": 6}])
    assert y3.decode_stream(stream, {1: "int32", 2: "string"}) == {1: 6, 2: "x"}
    assert y3.decode_stream(stream, ["raw"]) == [b"\x05", b"x", b"\x06"]
    assert y3.decode_stream(b"", ["raw"]) == []
    with pytest.raises(TypeError, match="struct"):
        y3.decode_stream(stream, "int32")
    with pytest.raises(y3.DecodeError) as err:
        y3.decode_stream(stream[:-1], ["raw"])
    assert err.value.kind == "unexpected_end"
    with pytest.raises(y3.DecodeError) as err:
        y3.decode(stream, "raw")
    assert err.value.kind == "trailing_bytes"


def test_get_and_parse() -> None:
    assert y3.get(NOISE, "0x10/0x12", as_="int64") == 1600000000000
    assert y3.get(NOISE, (0x10, 0x12), as_=int) == 1600000000000
    assert y3.get(NOISE, 0x10, as_={0x13: str}) == {0x13: "127.0.0.1"}
    assert y3.get(NOISE, 0x10) == NOISE[2:]
    assert y3.get(NOISE, "16/19", as_="string") == "127.0.0.1"
    assert y3.get(NOISE + b"\xff", "0x10/0x11", as_="float32") == 40.0  # nothing after is read
    with pytest.raises(TypeError):
        y3.get(NOISE, 1.5)  # type: ignore[arg-type]
    key, value, used = y3.parse(NOISE + NOISE, {0x13: str})
    assert (key, value, used) == (0x10, {0x13: "127.0.0.1"}, len(NOISE))
    assert y3.parse(NOISE) == (0x10, NOISE[2:], len(NOISE))
    assert y3.parse_path("0x10/0x11") == [0x10, 0x11]
    with pytest.raises(y3.PathError) as err:
        y3.parse_path("0x10/x")
    assert err.value.kind == "path_syntax" and err.value.at == 5


def test_inspect_dialects() -> None:
    nested = {"tag": 1, "node": [{"tag": 2, "int32": -1}, {"tag": 3, "array": [{"string": "C"}]}]}
    for dialect in ("golang", "nvarint"):
        data = y3.encode(nested, dialect)
        tree = y3.inspect(data, dialect=dialect)
        assert tree[0]["node"][1] == {"tag": 3, "array": [{"tag": 0, "bytes": b"C"}]}
        assert y3.encode(tree, dialect) == data
    # draft02: no node flag on the wire, so the tree is one primitive.
    data = y3.encode(nested, "draft02")
    assert y3.inspect(data, dialect="draft02") == [{"tag": 1, "bytes": data[2:]}]
    assert y3.decode(data, {2: "int32", 3: ["string"]}, dialect="draft02") == {2: -1, 3: ["C"]}


def test_errors_are_value_errors_and_pickle() -> None:
    with pytest.raises(ValueError):
        y3.decode(b"\x11", "raw")
    try:
        y3.decode(bytes.fromhex("11017f00"), "int32")
    except y3.DecodeError as e:
        err = e
    assert err.kind == "trailing_bytes" and err.count == 1
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is y3.DecodeError and back.kind == err.kind and back.details == err.details
    assert str(err) == "trailing_bytes: 1 trailing bytes after the packet"
    assert repr(y3.EncodeError("invalid_tag", "m")) == "EncodeError('invalid_tag', 'm')"
    assert y3.DecodeError("unexpected_end").args == ("unexpected_end", "")
    assert issubclass(y3.PathError, y3.Y3Error) and issubclass(y3.Y3Error, ValueError)


def test_buffers_and_types() -> None:
    with pytest.raises(TypeError, match="expected bytes"):
        y3.decode("9000", "raw")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        y3.decode(16, "raw")  # type: ignore[arg-type]
    assert y3.decode(bytes.fromhex("110187"), "uint32", dialect="nvarint") == 2**32 - 121


def test_unsigned_and_float_edges() -> None:
    cases = [
        ("uint32", 2**32 - 1, "11017f"),
        ("uint64", 2**64 - 1, "11017f"),
        ("int64", -(2**63), "110aff808080808080808000"),
        ("float64", -0.0, "110180"),
    ]
    for ty, value, hex_ in cases:
        data = y3.encode({"tag": 0x11, ty: value})
        assert data.hex() == hex_
        assert y3.decode(data, ty) == value
    # nvarint writers may send 00 ff ff ff ff for uint32::MAX.
    assert y3.decode(bytes.fromhex("110500ffffffff"), "uint32", dialect="nvarint") == 2**32 - 1
