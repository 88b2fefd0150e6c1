#!/usr/bin/env bash
# Writes the seed corpus for the fuzz targets from the language-neutral vectors:
#
#   fuzz/corpus/decode/            every vector's bytes (`hex`, `draft02_hex`) and every
#                                  malformed-behaviour `input_hex`
#   fuzz/corpus/observe_split/     the same bytes behind a 5-byte harness header that observes
#                                  the first key (and first child key) in the vector's dialect
#   fuzz/corpus/encode_roundtrip/  the same bytes (arbitrary's input; any bytes will do)
#
# fuzz/corpus is git-ignored; run this before `cargo fuzz run <target>`. Seeds are named by
# content hash, so running it twice adds nothing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
vectors="$here/../testdata/vectors"
out="${1:-$here/corpus}"

python3 - "$vectors" "$out" <<'PY'
import hashlib, json, os, sys

vectors, out = sys.argv[1], sys.argv[2]
targets = ("decode", "observe_split", "encode_roundtrip")
for t in targets:
    os.makedirs(os.path.join(out, t), exist_ok=True)

def put(target, data):
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(out, target, name), "wb") as f:
        f.write(data)

def header(dialect, path, validating=False, seed=0):
    # Layout of y3_harness::observe_split: dialect | (path len - 1) << 2 | validating << 4,
    # three key bytes, a chunk seed.
    keys = list(path) + [0] * (3 - len(path))
    return bytes([dialect | (len(path) - 1) << 2 | int(validating) << 4, *keys, seed])

def seeds():
    for file, dialect in (("y3-codec-golang-v1.7.3.json", 0), ("yomorun-y3-v1.0.5.json", 1)):
        for entry in json.load(open(os.path.join(vectors, file))):
            yield dialect, bytes.fromhex(entry["hex"])
            if entry.get("draft02_hex"):
                yield 2, bytes.fromhex(entry["draft02_hex"])
    for entry in json.load(open(os.path.join(vectors, "malformed-behaviour.json"))):
        yield int(entry["lib"] == "y3 v1.0.5"), bytes.fromhex(entry["input_hex"].replace(" ", ""))

count = 0
for dialect, data in seeds():
    count += 1
    put("decode", data)
    put("encode_roundtrip", bytes([dialect]) + data)
    first = data[0] & 0x3f if data else 0
    put("observe_split", header(dialect, [first], seed=len(data) & 0xff) + data)
    # First child key, when the length fits one byte (tag, length, child tag).
    if len(data) > 2 and data[1] < 0x40:
        child = data[2] & 0x3f
        put("observe_split", header(dialect, [first, child], validating=True) + data)
for t in targets:
    print(f"{t}: {len(os.listdir(os.path.join(out, t)))} seeds from {count} inputs")
PY
