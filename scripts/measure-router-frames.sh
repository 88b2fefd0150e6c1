#!/usr/bin/env bash
# Instructions and allocations per routed frame in `y3 serve` (as it ships: release,
# mimalloc), from callgrind runs at two frame counts (the difference cancels start-up and
# shutdown), and syscalls per frame from `strace -c -f`. The clients are raw-frame Python
# (scripts/router-frames.py), outside the measured process.
#
# usage: [MODES="--direct --relay"] scripts/measure-router-frames.sh [Y3_BIN] [N1] [N2]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/../target/release/y3}
n1=${2:-2000}
n2=${3:-12000}
port=${PORT:-19431}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# One router under `$tool`, N frames through it (relay: source → function → sink, so each
# message is routed twice: 2N routed frames), then SIGTERM; prints the tool's output file.
run() {
  local tool=$1 n=$2 mode=$3 log=$out/$1-$2-$3
  case $tool in
    callgrind) valgrind --tool=callgrind --callgrind-out-file="$log.cg" \
      "$bin" serve --tcp 127.0.0.1:$port --quic "" --metrics "" >"$log.log" 2>&1 & ;;
    strace) strace -c -f -o "$log.st" \
      "$bin" serve --tcp 127.0.0.1:$port --quic "" --metrics "" >"$log.log" 2>&1 & ;;
  esac
  local pid=$!
  for _ in $(seq 1 300); do
    grep -q "listening" "$log.log" 2>/dev/null && break
    sleep 0.1
  done
  python3 "$here/router-frames.py" 127.0.0.1:$port "$n" $mode >/dev/null
  # Valgrind runs the router in its own process; strace runs it as its child.
  kill -TERM "$(pgrep -P "$pid" || echo "$pid")"
  wait "$pid" || true
  echo "$log"
}

for mode in ${MODES:---direct --relay}; do
  flag=$([ "$mode" = --direct ] && echo --direct || echo "")
  routed=$([ "$mode" = --direct ] && echo 1 || echo 2)
  a=$(python3 "$here/callgrind-calls.py" "$(run callgrind "$n1" "$flag").cg")
  b=$(python3 "$here/callgrind-calls.py" "$(run callgrind "$n2" "$flag").cg")
  python3 - "$a" "$b" "$n1" "$n2" "$routed" "$mode" <<'PY'
import sys
a, b = (dict(kv.split("=") for kv in s.split()) for s in sys.argv[1:3])
n1, n2, routed = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
frames = (n2 - n1) * routed
ir = (int(b["ir"]) - int(a["ir"])) / frames
al = (int(b["allocs"]) - int(a["allocs"])) / frames
print(f"{sys.argv[6]:8} instructions/routed frame {ir:8.0f}   allocations/routed frame {al:5.2f}")
PY
  s=$(run strace "$n2" "$flag").st
  calls=$(awk '/^-+ /{f=1;next} f&&/total/{print $4}' "$s")
  python3 -c "import sys; print(f'{sys.argv[3]:8} syscalls/routed frame {int(sys.argv[1])/(int(sys.argv[2])*int(sys.argv[4])):.3f}')" "$calls" "$n2" "$mode" "$routed"
done
