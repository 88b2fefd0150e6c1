"""Hostile inputs, and the reference libraries' malformed-input behaviour
(testdata/vectors/malformed-behaviour.json) held against ours.

Every case ends in a typed DecodeError with the Rust core's kind (or a value accepted on
purpose), never a crash or a silent zero. TABLE is the same table, in the same words, as
crates/y3/tests/malformed.rs (test_table_matches_the_rust_core checks that they agree).
"""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Any, Callable

import pytest

import y3
from conftest import MALFORMED_FILE, ROOT, load

# What we do with each malformed-behaviour.json entry, keyed by (name, lib, call).
# lib: golang = y3-codec-golang v1.7.3 (our golang dialect), nvarint = y3 v1.0.5.
# call: prim = DecodePrimitivePacket + ToInt32 (ours: decode + int32), helpers = ToInt32 /
# ToBool / ToFloat32 / ToFloat64 (ours: decode + int32/bool/float32/float64), node =
# DecodeNodePacket (ours: decode, which walks the tree, then counting children). Where
# decode fails but parse (one packet, the rest left alone) succeeds, the row says so.
TABLE: list[tuple[str, str, str, str]] = [
    ('empty', 'golang', 'prim', 'decode unexpected_end'),
    ('empty', 'golang', 'helpers', 'decode unexpected_end'),
    ('empty', 'nvarint', 'prim', 'decode unexpected_end'),
    ('tag_only', 'golang', 'prim', 'decode unexpected_end'),
    ('tag_only', 'golang', 'helpers', 'decode unexpected_end'),
    ('tag_only', 'nvarint', 'prim', 'decode unexpected_end'),
    ('length_0', 'golang', 'prim', 'i32 invalid_length'),
    ('length_0', 'golang', 'helpers', 'i32 invalid_length, bool invalid_length, f32 invalid_length, f64 invalid_length'),
    ('length_0', 'nvarint', 'prim', 'i32 invalid_length'),
    ('value_truncated (len 2, 1 byte)', 'golang', 'prim', 'decode unexpected_end'),
    ('value_truncated (len 2, 1 byte)', 'golang', 'helpers', 'decode unexpected_end'),
    ('value_truncated (len 2, 1 byte)', 'nvarint', 'prim', 'decode unexpected_end'),
    ('length_varint_unterminated', 'golang', 'prim', 'decode unexpected_end'),
    ('length_varint_unterminated', 'golang', 'helpers', 'decode unexpected_end'),
    ('length_varint_unterminated', 'nvarint', 'prim', 'decode unexpected_end'),
    ('length_negative_-1 (0x7f)', 'golang', 'prim', 'decode negative_length'),
    ('length_negative_-1 (0x7f)', 'golang', 'helpers', 'decode negative_length'),
    ('length_negative_-1 (0x7f)', 'nvarint', 'prim', 'decode negative_length'),
    ('length_negative_-64 (0x40)', 'golang', 'prim', 'decode negative_length'),
    ('length_negative_-64 (0x40)', 'golang', 'helpers', 'decode negative_length'),
    ('length_negative_-64 (0x40)', 'nvarint', 'prim', 'decode negative_length'),
    ('length_non_minimal (1 as 80 01)', 'golang', 'prim', 'i32 5'),
    ('length_non_minimal (1 as 80 01)', 'golang', 'helpers', 'i32 5, bool invalid_bool, f32 6.018531e-36, f64 1.344974619049452e-284'),
    ('length_non_minimal (1 as 80 01)', 'nvarint', 'prim', 'i32 5'),
    ('trailing_bytes_after_packet', 'golang', 'prim', 'decode trailing_bytes; parse ok (rest 2), i32 5'),
    ('trailing_bytes_after_packet', 'golang', 'helpers', 'decode trailing_bytes; parse ok (rest 2), i32 5'),
    ('trailing_bytes_after_packet', 'nvarint', 'prim', 'decode trailing_bytes; parse ok (rest 2), i32 5'),
    ('value_non_minimal_pvarint (5 as 80 05)', 'golang', 'prim', 'i32 5'),
    ('value_non_minimal_pvarint (5 as 80 05)', 'golang', 'helpers', 'i32 5, bool invalid_bool, f32 -4.59177e-40, f64 -6.953355807835004e-309'),
    ('value_non_minimal_pvarint (5 as 80 05)', 'nvarint', 'prim', 'i32 -32763'),
    ('value_pvarint_overlong_6_bytes', 'golang', 'prim', 'i32 varint_overflow'),
    ('value_pvarint_overlong_6_bytes', 'golang', 'helpers', 'i32 varint_overflow, bool invalid_bool, f32 invalid_length, f64 -2.0422003852342723e-301'),
    ('value_pvarint_overlong_6_bytes', 'nvarint', 'prim', 'i32 varint_overflow'),
    ('value_pvarint_unterminated', 'golang', 'prim', 'i32 varint_unterminated'),
    ('value_pvarint_unterminated', 'golang', 'helpers', 'i32 varint_unterminated, bool varint_unterminated, f32 -0.0, f64 -0.0'),
    ('value_pvarint_unterminated', 'nvarint', 'prim', 'i32 -128'),
    ('bool_value_2', 'golang', 'prim', 'i32 2'),
    ('bool_value_2', 'golang', 'helpers', 'i32 2, bool invalid_bool, f32 9.403955e-38, f64 4.778309726736481e-299'),
    ('bool_value_2', 'nvarint', 'prim', 'i32 2'),
    ('float32_5_bytes', 'golang', 'prim', 'i32 trailing_bytes'),
    ('float32_5_bytes', 'golang', 'helpers', 'i32 trailing_bytes, bool trailing_bytes, f32 invalid_length, f64 0.1250000004656613'),
    ('float32_5_bytes', 'nvarint', 'prim', 'i32 varint_overflow'),
    ('float64_9_bytes', 'golang', 'prim', 'i32 trailing_bytes'),
    ('float64_9_bytes', 'golang', 'helpers', 'i32 trailing_bytes, bool trailing_bytes, f32 invalid_length, f64 invalid_length'),
    ('float64_9_bytes', 'nvarint', 'prim', 'i32 varint_overflow'),
    ('tag_with_slice_flag_on_primitive (0x51)', 'golang', 'prim', 'decode invalid_tag'),
    ('tag_with_slice_flag_on_primitive (0x51)', 'golang', 'helpers', 'decode invalid_tag'),
    ('tag_with_slice_flag_on_primitive (0x51)', 'nvarint', 'prim', 'decode invalid_tag'),
    ('node_empty_buffer', 'golang', 'node', 'decode unexpected_end'),
    ('node_empty_buffer', 'nvarint', 'node', 'decode unexpected_end'),
    ('node_tag_only', 'golang', 'node', 'decode unexpected_end'),
    ('node_tag_only', 'nvarint', 'node', 'decode unexpected_end'),
    ('node_length_0', 'golang', 'node', 'ok (prims 0, nodes 0)'),
    ('node_length_0', 'nvarint', 'node', 'ok (prims 0, nodes 0)'),
    ('node_length_exceeds_buffer', 'golang', 'node', 'decode unexpected_end'),
    ('node_length_exceeds_buffer', 'nvarint', 'node', 'decode unexpected_end'),
    ('node_child_truncated', 'golang', 'node', 'decode child_overflow; parse ok (rest 0)'),
    ('node_child_truncated', 'nvarint', 'node', 'decode child_overflow; parse ok (rest 0)'),
    ('node_negative_length (0x7f)', 'golang', 'node', 'decode negative_length'),
    ('node_negative_length (0x7f)', 'nvarint', 'node', 'decode negative_length'),
    ('node_child_negative_length', 'golang', 'node', 'decode negative_length; parse ok (rest 0)'),
    ('node_child_negative_length', 'nvarint', 'node', 'decode negative_length; parse ok (rest 0)'),
    ('node_child_length_unterminated', 'golang', 'node', 'decode truncated_header; parse ok (rest 0)'),
    ('node_child_length_unterminated', 'nvarint', 'node', 'decode truncated_header; parse ok (rest 0)'),
    ('node_trailing_bytes', 'golang', 'node', 'decode trailing_bytes; parse ok (rest 1)'),
    ('node_trailing_bytes', 'nvarint', 'node', 'decode trailing_bytes; parse ok (rest 1)'),
    ('node_child_is_single_byte', 'golang', 'node', 'decode truncated_header; parse ok (rest 0)'),
    ('node_child_is_single_byte', 'nvarint', 'node', 'decode truncated_header; parse ok (rest 0)'),
]


def lib_dialect(lib: str) -> tuple[str, str]:
    return {
        "y3-codec-golang v1.7.3": ("golang", "golang"),
        "y3 v1.0.5": ("nvarint", "nvarint"),
    }[lib]


def call_kind(call: str) -> str:
    if "NodePacket" in call:
        return "node"
    if call.startswith("ToInt32 /"):
        return "helpers"
    assert "PrimitivePacket + ToInt32" in call, call
    return "prim"


def rust_float(x: float, bits: int) -> str:
    """Rust's Debug formatting of an f32 / f64: the shortest digits that round-trip."""
    if bits == 32:
        want = struct.pack(">f", x)
        for digits in range(1, 10):
            text = f"{x:.{digits}g}"
            if struct.pack(">f", float(text)) == want:
                x = float(text)
                break
    text = repr(x)
    # Python pads exponents (1e-07, 1e+16); Rust does not (1e-7, 1e16).
    return re.sub(r"e([+-]?)0*(\d)", lambda m: "e" + m.group(1).replace("+", "") + m.group(2), text)


def show(read: Callable[[], Any], bits: int = 0) -> str:
    try:
        value = read()
    except y3.DecodeError as e:
        return e.kind
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return rust_float(value, bits)
    return str(value)


def ours(data: bytes, dialect: str, call: str) -> str:
    """Our outcome for one entry, in the words of the table."""
    def read(ty: str) -> Callable[[], Any]:
        return lambda: y3.decode(data, ty, dialect=dialect)

    try:
        y3.decode(data, "raw", dialect=dialect)
    except y3.DecodeError as e:
        out = f"decode {e.kind}"
        try:
            _, _, consumed = y3.parse(data, dialect=dialect)
        except y3.DecodeError:
            return out
        value = ""
        if call != "node":
            value = f", i32 {show(lambda: y3.parse(data, 'int32', dialect=dialect)[1])}"
        return f"{out}; parse ok (rest {len(data) - consumed}){value}"
    if call == "prim":
        return f"i32 {show(read('int32'))}"
    if call == "helpers":
        return (
            f"i32 {show(read('int32'))}, bool {show(read('bool'))}, "
            f"f32 {show(read('float32'), 32)}, f64 {show(read('float64'), 64)}"
        )
    (tree,) = y3.inspect(data, dialect=dialect)
    children = tree.get("node", tree.get("array", []))
    nodes = sum(1 for c in children if "node" in c or "array" in c)
    return f"ok (prims {len(children) - nodes}, nodes {nodes})"


ENTRIES = load(MALFORMED_FILE)


@pytest.mark.parametrize(
    "entry", [pytest.param(e, id=f"{e['name']}|{e['lib']}|{call_kind(e['call'])}") for e in ENTRIES]
)
def test_reference_malformed_behaviour_is_tabled(entry: dict[str, Any]) -> None:
    lib, dialect = lib_dialect(entry["lib"])
    call = call_kind(entry["call"])
    data = bytes.fromhex(entry["input_hex"].replace(" ", ""))
    rows = [r[3] for r in TABLE if r[:3] == (entry["name"], lib, call)]
    assert len(rows) == 1, f"no table row for {entry['name']} {lib} {call}"
    assert ours(data, dialect, call) == rows[0]


@pytest.mark.parametrize("entry", [pytest.param(e, id=f"{e['name']}|{e['lib']}") for e in ENTRIES])
def test_streaming_agrees_with_one_shot(entry: dict[str, Any]) -> None:
    """A validating observer fed one byte at a time ends as one-shot validation does."""
    _, dialect = lib_dialect(entry["lib"])
    data = bytes.fromhex(entry["input_hex"].replace(" ", ""))

    def outcome(run: Callable[[], Any]) -> str:
        try:
            run()
        except y3.DecodeError as e:
            return e.kind
        return "ok"

    def chunked(size: int) -> Callable[[], None]:
        def run() -> None:
            obs = y3.Observer([], validate=True, dialect=dialect)
            for i in range(0, len(data), size):
                obs.feed(data[i : i + size])
            obs.finish()
        return run

    one_shot = outcome(lambda: y3.validate(data, dialect=dialect))
    for size in (1, 2, 3):
        assert outcome(chunked(size)) == one_shot


def test_every_entry_has_one_row() -> None:
    keys = {(e["name"], lib_dialect(e["lib"])[0], call_kind(e["call"])) for e in ENTRIES}
    assert len(keys) == len(ENTRIES) == len(TABLE)
    assert keys == {r[:3] for r in TABLE}


RUST_TESTS = ROOT / "crates" / "y3" / "tests" / "malformed.rs"


@pytest.mark.skipif(not RUST_TESTS.exists(), reason="crates/y3/tests/malformed.rs not present")
def test_table_matches_the_rust_core() -> None:
    """The decisions are the Rust core's: its own table, in crates/y3/tests/malformed.rs,
    must say the same for every entry."""
    src = RUST_TESTS.read_text(encoding="utf-8")
    body = src[src.index("const TABLE") :]
    body = body[: body.index("\n];")]
    rows = re.findall(
        r'\(\s*"((?:[^"\\]|\\.)*)",\s*"([^"]*)",\s*"([^"]*)",\s*"((?:[^"\\]|\\.)*)",?\s*\)', body
    )
    assert sorted(rows) == sorted(TABLE)


# ---------------------------------------------------------------------------------------
# The decisions, one by one (spec/wire-format.md), with their numeric context.
# ---------------------------------------------------------------------------------------

KINDS: list[tuple[str, str, str, dict[str, int]]] = [
    # (hex, read as, kind, details)
    ("", "raw", "unexpected_end", {"needed": 1}),
    ("11", "raw", "unexpected_end", {"needed": 1}),
    ("11 02 01", "int32", "unexpected_end", {"needed": 1}),
    ("11 80", "raw", "unexpected_end", {"needed": 1}),
    ("11 7f 01", "int32", "negative_length", {"declared": -1}),
    ("11 40 01", "int32", "negative_length", {"declared": -64}),
    ("81 7f", "any", "negative_length", {"declared": -1}),
    ("51 01 05", "int32", "invalid_tag", {"tag": 0x51}),
    ("81 05 11 01 01", "any", "unexpected_end", {"needed": 2}),
    ("81 03 11 05 01", "any", "child_overflow", {"declared": 5, "available": 1}),
    ("81 01 11", "any", "truncated_header", {"available": 1}),
    ("81 02 11 80", "any", "truncated_header", {"available": 2}),
    ("81 02 11 7f", "any", "negative_length", {"declared": -1}),
    ("11 05 3f c0 00 00 01", "float32", "invalid_length", {"len": 5, "min": 1, "max": 4}),
    ("11 09 3f f8 00 00 00 00 00 00 01", "float64", "invalid_length", {"len": 9, "min": 1, "max": 8}),
    ("11 01 02", "bool", "invalid_bool", {"value": 2}),
    ("11 06 81 81 81 81 81 01", "int32", "varint_overflow", {}),
    ("11 01 80", "int32", "varint_unterminated", {"len": 1}),
    ("11 00", "int32", "invalid_length", {"len": 0, "min": 1}),
    ("11 00", "float32", "invalid_length", {"len": 0}),
    ("11 01 05 ff ff", "int32", "trailing_bytes", {"count": 2}),
    ("81 03 11 01 05 ff", "any", "trailing_bytes", {"count": 1}),
    ("11 02 c3 28", "string", "invalid_utf8", {"valid_up_to": 0}),
    ("90 03 11 01 01", "int32", "wrong_type", {"tag": 0x10}),
    ("11 01 01", {0x11: "int32"}, "wrong_type", {"tag": 0x11}),
    ("11 87 ff ff ff 7f", "raw", "too_long", {"declared": 2**31 - 1, "limit": 16 << 20}),
]


@pytest.mark.parametrize("hex_, as_, kind, details", [pytest.param(*k, id=f"{k[0]}:{k[2]}") for k in KINDS])
def test_decode_error_kinds(hex_: str, as_: Any, kind: str, details: dict[str, int]) -> None:
    data = bytes.fromhex(hex_.replace(" ", ""))
    with pytest.raises(y3.DecodeError) as err:
        y3.decode(data, as_)
    e = err.value
    assert e.kind == kind
    assert isinstance(e, ValueError) and isinstance(e, y3.Y3Error)
    for name, value in details.items():
        assert e.details[name] == value
        assert getattr(e, name) == value


def test_accepted_on_purpose() -> None:
    # Non-minimal lengths and integers that fit are accepted.
    assert y3.decode(bytes.fromhex("11800105"), "int32") == 5
    assert y3.decode(bytes.fromhex("11028005"), "int32") == 5
    # nvarint reads 80 05 as two's complement.
    assert y3.decode(bytes.fromhex("11028005"), "int32", dialect="nvarint") == -32763
    # parse reads one packet and leaves the rest.
    assert y3.parse(bytes.fromhex("110105ffff"), "int32") == (0x11, 5, 3)


def test_limits() -> None:
    deep = bytes.fromhex("810a82058303040105050178")
    assert y3.validate(deep) == 1
    with pytest.raises(y3.DecodeError) as err:
        y3.validate(deep, max_depth=2)
    assert err.value.kind == "too_deep" and err.value.limit == 2
    with pytest.raises(y3.DecodeError) as err:
        y3.decode(bytes.fromhex("1103010203"), "raw", max_packet_len=2)
    assert err.value.kind == "too_long" and err.value.declared == 3 and err.value.limit == 2
    # Nesting deeper than the default limit of 64.
    nested = {"tag": 1, "node": []}
    for _ in range(70):
        nested = {"tag": 1, "node": [nested]}
    with pytest.raises(y3.DecodeError) as err:
        y3.inspect(y3.encode(nested))
    assert err.value.kind == "too_deep" and err.value.limit == 64


def test_truncation_at_every_byte_is_unexpected_end() -> None:
    item = {
        "tag": 0x10,
        "node": [
            {"tag": 0x11, "string": "x" * 200},
            {"tag": 0x12, "array": [{"int64": -(2**63)}, {"float64": 0.1}]},
        ],
    }
    for dialect in ("golang", "nvarint"):
        data = y3.encode(item, dialect)
        for cut in range(len(data)):
            with pytest.raises(y3.DecodeError) as err:
                y3.decode(data[:cut], "any", dialect=dialect)
            assert err.value.kind == "unexpected_end", cut
            obs = y3.Observer(["0x10/0x11"], dialect=dialect)
            for i in range(cut):
                obs.feed(data[i : i + 1])
            if cut == 0:
                obs.finish()  # an empty stream is complete
            else:
                with pytest.raises(y3.DecodeError) as err:
                    obs.finish()
                assert err.value.kind == "unexpected_end", cut
