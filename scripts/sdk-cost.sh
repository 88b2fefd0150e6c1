#!/usr/bin/env bash
# The Rust SDK's instructions per frame (source send + sink receive), by callgrind: the
# example `sdk_cost` pushes FRAMES_A and then FRAMES_B frames through a `y3 serve` process
# (not instrumented), and (I_B - I_A) / (FRAMES_B - FRAMES_A) is the clients' cost per
# frame with setup and teardown cancelled out. Instruction counts, unlike wall time, do not
# depend on what else the machine runs.
#
#   scripts/sdk-cost.sh [SIZE] [tcp|quic] [THREADS]      (defaults: 64 tcp 0)
#
# Needs valgrind, and release builds of `y3` and the example (built here when missing:
# SDK_COST_BUILD=0 skips the build and uses what is there; Y3_BIN=PATH runs that router).
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${1:-64}
TRANSPORT=${2:-tcp}
THREADS=${3:-0}
FRAMES_A=${FRAMES_A:-2000}
FRAMES_B=${FRAMES_B:-22000}
command -v valgrind >/dev/null || { echo "sdk-cost: valgrind is missing (apt-get install valgrind)" >&2; exit 1; }
TARGET=${CARGO_TARGET_DIR:-target}
if [ "${SDK_COST_BUILD:-1}" = 1 ]; then
  cargo build --release -q -p y3-cli
  cargo build --release -q -p y3-transport --example sdk_cost
fi
WORK=$(mktemp -d)
trap 'kill "$ROUTER" 2>/dev/null || true; rm -rf "$WORK"' EXIT
RUST_LOG=warn "${Y3_BIN:-$TARGET/release/y3}" serve --tcp 127.0.0.1:0 --quic 127.0.0.1:0 --metrics "" \
  --dev-cert-out "$WORK/cert.pem" >"$WORK/serve.log" 2>&1 &
ROUTER=$!
for _ in $(seq 100); do grep -q "y3 router listening:" "$WORK/serve.log" && break; sleep 0.1; done
LINE=$(grep "y3 router listening:" "$WORK/serve.log") || { cat "$WORK/serve.log" >&2; exit 1; }
ADDR=$(echo "$LINE" | sed -n "s/.* $TRANSPORT \([0-9.:]*\).*/\1/p")
count() {
  valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.$1" \
    "$TARGET/release/examples/sdk_cost" "$ADDR" "$1" "$SIZE" "$TRANSPORT" "$THREADS" \
    >"$WORK/out.$1" 2>"$WORK/err.$1" || { cat "$WORK/err.$1" >&2; exit 1; }
  sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$WORK/err.$1"
}
A=$(count "$FRAMES_A")
B=$(count "$FRAMES_B")
echo "sdk-cost: $SIZE B over $TRANSPORT, threads $THREADS: $FRAMES_A frames $A instructions, $FRAMES_B frames $B instructions"
echo "sdk-cost: $(( (B - A) / (FRAMES_B - FRAMES_A) )) instructions per frame (source + sink)"
if [ -n "${SDK_COST_KEEP:-}" ]; then cp "$WORK/cg.$FRAMES_B" "$SDK_COST_KEEP"; fi
