#!/usr/bin/env bash
# Every benchmark entry point in a smoke mode (seconds, tiny counts), so that a change of a
# schema, a flag or a path cannot break one unnoticed: each lab suite measures a few hundred
# messages with the lab's default features (debug build, no heavy peers: those are
# `cargo check`ed by scripts/test.sh), writes its JSON and re-renders its report from it
# (`--from`); scripts/bench-codec and scripts/bench-net.sh run with --smoke (the same debug
# lab, their own argument handling and render step); bindings/python/bench/clients.py runs
# with --smoke against `y3 serve` and the lab. Numbers from here mean nothing.
#
#   scripts/test-smoke.sh            (Y3_BIN: the y3 binary, built by scripts/test.sh)
#
# Needs the Python binding's venv (scripts/python-test.sh makes it) for clients.py.
set -euo pipefail
cd "$(dirname "$0")/.."

target_dir="$(mkdir -p "${CARGO_TARGET_DIR:-target}" && cd "${CARGO_TARGET_DIR:-target}" && pwd)"
# scripts/test.sh's command for the binaries, so a no-op there (one feature set, no rebuild).
cargo build --workspace --bins --locked
lab="$target_dir/debug/y3-lab"
export Y3_BIN="${Y3_BIN:-$target_dir/debug/y3}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

smoke() {
    local name="$1"
    shift
    local started=$SECONDS
    "$lab" "$@" --json "$out/$name.json" --out "$out/run" >"$out/$name.log" 2>&1 ||
        { cat "$out/$name.log"; echo "smoke: $name failed" >&2; exit 1; }
    python3 - "$out/$name.json" "$name" <<'PY'
import json, sys
path, name = sys.argv[1], sys.argv[2]
records = json.load(open(path))["records"]
if not records:
    sys.exit(f"smoke: {name}: no records in {path}")
for r in records:
    for key in ("suite", "impl", "case", "metrics"):
        if key not in r:
            sys.exit(f"smoke: {name}: a record without {key!r}: {r}")
PY
    # The report renders from the recording alone.
    local suite=("$1")
    if [ "$1" = net ]; then suite=(net "$2"); fi
    "$lab" "${suite[@]}" --from "$out/$name.json" --out "$out/rendered" >"$out/$name-render.log" 2>&1 ||
        { cat "$out/$name-render.log"; echo "smoke: $name: re-render failed" >&2; exit 1; }
    echo "smoke: $name ok ($((SECONDS - started)) s)"
}

smoke codec codec --quick --samples 1 --sample-ms 1 --mode serial
smoke serde serde --quick --samples 1 --sample-ms 1
smoke pingpong net pingpong --quick --sessions 4 --threads 1 --total 64 --runs 1
smoke echo net echo --quick --conns 2 --sizes 100 --seconds 0.2 --warmup 0.1 --runs 1
smoke e2e net e2e --quick --sizes 64 --subs 1 --messages 500 --paced 100 --runs 1
smoke pipeline net pipeline --quick --transport tcp --sizes 64 --messages 500 --paced 100 --runs 1
smoke filter net filter --quick --functions 2 --messages 500
smoke quic net quic --quick --sizes 64 --messages 500 --paced 100 --runs 1
# The YoMo and federation suites with the debug y3 beside the debug lab (no release build);
# federation's nats-server: $NATS_SERVER_BIN (scripts/test.sh installs it).
export Y3_LAB_SMOKE=1
smoke yomo net yomo --quick --workloads sink --sizes 64 --messages 500 --paced 100 --runs 1
smoke federation net federation --quick --sizes 64 --messages 500 --paced 100 --runs 1

# The scripts themselves (argument handling, render step) on the debug lab.
Y3_LAB="$lab" scripts/bench-codec --smoke --mode serial >"$out/bench-codec.log" 2>&1 ||
    { cat "$out/bench-codec.log"; echo "smoke: scripts/bench-codec failed" >&2; exit 1; }
echo "smoke: scripts/bench-codec ok"
Y3_LAB="$lab" scripts/bench-net.sh --smoke >"$out/bench-net.log" 2>&1 ||
    { cat "$out/bench-net.log"; echo "smoke: scripts/bench-net.sh failed" >&2; exit 1; }
echo "smoke: scripts/bench-net.sh ok"

# The Python SDK's benchmark, against this y3 and the lab's e2e case.
venv_py=bindings/python/.venv/bin/python
[ -x "$venv_py" ] || { echo "smoke: $venv_py missing (scripts/python-test.sh makes it)" >&2; exit 1; }
"$venv_py" bindings/python/bench/clients.py --smoke --y3 "$Y3_BIN" --lab "$lab"
echo "smoke: every benchmark entry point ran"
