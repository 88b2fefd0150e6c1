"""The streaming Observer: every vector observed at every leaf path, fed at several split
points and one byte at a time, must give exactly what one-shot feeding gives, and that
must be the values in the tree. Mirrors crates/y3/tests/split.rs.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

import y3
from conftest import Vector, all_vectors, item_value, items_of, leaf_paths, params, same

OBSERVABLE = [v for v in all_vectors() if v.hex and not (v.dialect == "golang" and v.tag in (0x40, 0x41))]


def leaves(trees: list[dict[str, Any]]) -> list[tuple[tuple[int, ...], dict[str, Any]]]:
    """(path, subtree) of every leaf, in stream order."""
    out = []

    def walk(tree: dict[str, Any], prefix: tuple[int, ...]) -> None:
        path = prefix + (tree.get("tag", 0),)
        children = tree.get("node", tree.get("array"))
        if children:
            for c in children:
                walk(c, path)
        else:
            out.append((path, tree))

    for t in trees:
        walk(t, ())
    return out


def unique(paths: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """Distinct paths, dropping any that is a prefix of another (an empty node beside a
    non-empty one with the same key path: the observer refuses overlapping paths)."""
    distinct = list(dict.fromkeys(paths))
    return [p for p in distinct if not any(q != p and q[: len(p)] == p for q in distinct)]


def observe(data: bytes, paths: list[tuple[int, ...]], dialect: str, cuts: list[int]) -> list[Any]:
    obs = y3.Observer(paths, dialect=dialect)
    got = []
    start = 0
    for cut in [*cuts, len(data)]:
        got.extend(obs.feed(data[start:cut]))
        start = cut
    obs.finish()
    assert obs.position == len(data)
    return got


def split_points(n: int) -> list[list[int]]:
    """Single split points (all of them for short inputs, a sample for long ones), a few
    random multi-way splits, and fixed chunk sizes (1 byte included)."""
    singles = range(n + 1) if n <= 96 else sorted({0, 1, 2, 3, n // 3, n // 2, n - 3, n - 2, n - 1, n})
    rng = random.Random(n)
    plans = [[c] for c in singles]
    for _ in range(8):
        plans.append(sorted(rng.sample(range(n + 1), min(n + 1, 5))))
    for size in (1, 2, 3, 7, 64):
        plans.append(list(range(size, n, size)))
    return plans


def check_splits(data: bytes, paths: list[tuple[int, ...]], dialect: str) -> list[Any]:
    one_shot = observe(data, paths, dialect, [])
    for cuts in split_points(len(data)):
        assert observe(data, paths, dialect, cuts) == one_shot, cuts
    return one_shot


@pytest.mark.parametrize("v", params(OBSERVABLE))
def test_vector_observed_at_every_split(v: Vector) -> None:
    trees = y3.inspect(v.bytes, dialect=v.dialect)
    found = leaves(trees)
    paths = unique([p for p, _ in found])
    one_shot = check_splits(v.bytes, paths, v.dialect)
    # One-shot gives every leaf's value bytes, in stream order.
    expected = [(paths.index(p), p[-1], t.get("bytes", b"")) for p, t in found if p in paths]
    assert one_shot == expected


@pytest.mark.parametrize("v", params([v for v in OBSERVABLE if not v.is_marshal and v.tag <= 0x3F]))
def test_draft02_vector_observed_at_every_split(v: Vector) -> None:
    """draft02 has no node flag: the observer descends into whatever a path names."""
    items = items_of(v)
    data = y3.encode(items, "draft02")
    found = leaves(items)
    paths = unique([p for p, _ in found])
    one_shot = check_splits(data, paths, "draft02")
    assert len(one_shot) == len([p for p, _ in found if p in paths])


def primitive_leaves(v: Vector) -> list[tuple[tuple[int, ...], dict[str, Any]]]:
    """(path, item) of the primitive leaves of a one-packet vector, when their paths are
    distinct (a node with repeated keys, or with no primitive at all, has none)."""
    if v.is_marshal or v.tag > 0x3F or v.type == "stream":
        return []
    (item,) = items_of(v)
    typed = [(p, t) for p, t in leaves([item]) if "node" not in t and "array" not in t]
    return typed if len({p for p, _ in typed}) == len(typed) else []


@pytest.mark.parametrize("v", params([v for v in OBSERVABLE if primitive_leaves(v)]))
def test_observer_reads_values_by_schema(v: Vector) -> None:
    """Observer({path: schema}) hands out values read by the schema."""
    typed = primitive_leaves(v)
    paths = [p for p, _ in typed]
    schemas = {p: next(k for k in t if k != "tag").removesuffix("_bits") for p, t in typed}
    data = v.bytes
    for chunk in (len(data), 1):
        obs = y3.Observer(schemas, dialect=v.dialect)
        got = []
        for i in range(0, len(data), chunk):
            got.extend(obs.feed(data[i : i + chunk]))
        obs.finish()
        assert len(got) == len(typed)
        for (index, key, value), (path, leaf) in zip(got, typed):
            assert index == paths.index(path) and key == path[-1]
            assert same(value, item_value(leaf))


def test_many_top_level_packets() -> None:
    packet = bytes.fromhex("9017110242201206aec8bbba800013093132372e302e302e31")
    stream = packet * 5
    paths = [(0x10, 0x11), (0x10, 0x13)]
    one_shot = check_splits(stream, paths, "golang")
    assert one_shot == [(0, 0x11, b"\x42\x20"), (1, 0x13, b"127.0.0.1")] * 5
    obs = y3.Observer({"0x10/0x11": "float32", "0x10/0x13": str})
    assert obs.feed(stream) == [(0, 0x11, 40.0), (1, 0x13, "127.0.0.1")] * 5
    assert obs.packets == 5 and obs.position == len(stream)
    assert list(y3.Observer(["0x10/0x12"]).observe([stream[:9], stream[9:]])) == [
        (0, 0x12, bytes.fromhex("aec8bbba8000"))
    ] * 5


def test_observer_walks_headers_not_bytes() -> None:
    # The reference Subscribe on 81 08 02 03 10 01 07 10 01 05 for 0x10 yields 10 01 07 (a
    # match inside a value); ours, observing 0x01/0x10, yields only the value 05.
    data = bytes.fromhex("81080203100107100105")
    assert y3.Observer([(0x01, 0x10)]).feed(data) == [(0, 0x10, b"\x05")]
    assert y3.get(data, "0x01/0x10", as_="int32") == 5
    # A primitive with a matching key is not descended into.
    assert y3.Observer([(0x01, 0x02, 0x10)]).feed(data) == []


def test_primitive_keys_do_not_match_node_paths() -> None:
    data = y3.encode([{"tag": 0x10, "int32": 1}, {"tag": 0x10, "node": [{"tag": 0x11, "int32": 2}]}])
    assert y3.Observer(["0x10/0x11"]).feed(data) == [(0, 0x11, b"\x02")]
    assert y3.Observer(["0x10"]).feed(data) == [(0, 0x10, b"\x01"), (0, 0x10, b"\x11\x01\x02")]


def test_errors_stick_until_reset() -> None:
    good = y3.encode({"tag": 0x11, "int32": 7})
    obs = y3.Observer([0x11])
    with pytest.raises(y3.DecodeError) as err:
        obs.feed(good + bytes.fromhex("117f01"))
    assert err.value.kind == "negative_length"
    assert err.value.observed == [(0, 0x11, b"\x07")]
    with pytest.raises(y3.DecodeError) as err:
        obs.feed(good)
    assert err.value.kind == "negative_length"
    with pytest.raises(y3.DecodeError):
        obs.finish()
    obs.reset()
    assert obs.feed(good) == [(0, 0x11, b"\x07")]
    obs.finish()


def test_truncation_is_reported_by_finish() -> None:
    data = y3.encode({"tag": 0x10, "node": [{"tag": 0x11, "string": "hello"}]})
    obs = y3.Observer(["0x10/0x11"])
    assert obs.feed(data[:-1]) == []
    with pytest.raises(y3.DecodeError) as err:
        obs.finish()
    assert err.value.kind == "unexpected_end" and err.value.needed == 1
    assert obs.feed(data[-1:]) == [(0, 0x11, b"hello")]
    obs.finish()


def test_validate_mode_checks_skipped_values() -> None:
    # 0x12's node holds a child that overflows it; observing only 0x11 skips it unchecked.
    bad = bytes.fromhex("1101019203110501")
    assert y3.Observer([0x11]).feed(bad) == [(0, 0x11, b"\x01")]
    with pytest.raises(y3.DecodeError) as err:
        y3.Observer([0x11], validate=True).feed(bad)
    assert err.value.kind == "child_overflow"
    assert err.value.observed == [(0, 0x11, b"\x01")]
    with pytest.raises(y3.DecodeError):
        y3.Observer([], validate=True).feed(bad)


@pytest.mark.parametrize(
    "paths, kind",
    [
        ([], "path_count"),
        ([[0x10]] * 65, "path_count"),
        ([[]], "empty_path"),
        (["0x10", "0x10/0x11"], "path_overlap"),
        ([(0x10, 0x11), (0x10, 0x11)], "path_overlap"),
        (["0x10//1"], "path_syntax"),
        (["zz"], "path_syntax"),
        ([list(range(17))], "path_too_deep"),
        (["/".join(["1"] * 17)], "path_too_deep"),
    ],
)
def test_path_errors(paths: list[Any], kind: str) -> None:
    with pytest.raises(y3.PathError) as err:
        y3.Observer(paths)
    assert err.value.kind == kind
    assert isinstance(err.value, ValueError)


def test_get_path_errors() -> None:
    with pytest.raises(y3.PathError) as err:
        y3.get(b"", [])
    assert err.value.kind == "empty_path"
    with pytest.raises(y3.PathError) as err:
        y3.get(b"", list(range(17)))
    assert err.value.kind == "path_too_deep"
    assert y3.get(b"", "0x10") is None
    with pytest.raises(y3.DecodeError) as derr:
        y3.get(bytes.fromhex("9005"), "0x10/0x11")
    assert derr.value.kind == "unexpected_end"


def test_feed_accepts_buffers() -> None:
    data = y3.encode({"tag": 0x11, "string": "abc"})
    for chunk in (data, bytearray(data), memoryview(data)):
        assert y3.Observer([0x11]).feed(chunk) == [(0, 0x11, b"abc")]
    with pytest.raises(TypeError):
        y3.Observer([0x11]).feed("abc")  # type: ignore[arg-type]


def test_unreadable_value_does_not_stop_the_stream() -> None:
    data = y3.encode([{"tag": 0x11, "int32": 1}, {"tag": 0x11, "int32": 2}, {"tag": 0x11, "int32": 0}])
    obs = y3.Observer({0x11: "bool"})
    with pytest.raises(y3.DecodeError) as err:
        obs.feed(data)
    assert err.value.kind == "invalid_bool" and err.value.value == 2
    assert err.value.observed == [(0, 0x11, True), (0, 0x11, False)]
    assert obs.position == len(data)
    assert obs.feed(data[:3]) == [(0, 0x11, True)]
    obs.finish()
