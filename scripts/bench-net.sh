#!/usr/bin/env bash
# The network lab with every peer: builds `y3-lab` with the heavy Rust peers (feature
# net-peers: monoio, async-nats, zenoh) and the product `y3` (for `y3 serve` rows), installs
# Debian's libasio-dev and nats-server when missing (root only), builds bench/cpp (the asio
# ping-pong), then runs
#
#   y3-lab net pingpong   header/body ping-pong: y3-transport vs tokio vs asio
#   y3-lab net echo       echo server: y3 on tokio/monoio vs tokio vs monoio
#   y3-lab net e2e        publish → route → subscribe: y3 router vs NATS vs Zenoh
#   y3-lab net yomo       YoMo's zipper vs y3 serve with YoMo's own Go clients, then y3's
#                         clients (needs `go`: the lab builds interop/yomo's yomo-peer)
#
# Usage:
#   scripts/bench-net.sh                      all four suites, full size (~50 min on 2 cores)
#   scripts/bench-net.sh --big                plus ping-pong at 10 000 sessions, one run per
#                                             cell (~45 min more on 2 cores)
#   scripts/bench-net.sh --quick              CI-sized (~3 min)
#   scripts/bench-net.sh --docs               also refresh docs/bench from the recorded JSON
#   scripts/bench-net.sh --suites pingpong,echo   only these suites
#   scripts/bench-net.sh --smoke              seconds: the debug lab ($Y3_LAB, else built
#                                             here) without peers, tiny counts, results in a
#                                             temporary directory (the test command's check)
# Other arguments go to every measuring `y3-lab net` command. Results:
# bench-results/net-*.{json,md,svg} (the 10 000-session part: net-pingpong-10k.json, joined
# into the ping-pong report).
# Every server runs on 127.0.0.1 and is stopped by the lab; nothing here runs in the tests.
set -euo pipefail
cd "$(dirname "$0")/.."

suites=(pingpong echo e2e yomo)
args=()
docs=()
big=0
smoke=0
while [ $# -gt 0 ]; do
    case "$1" in
        --docs) docs=(--docs docs/bench) ;;
        --big) big=1 ;;
        --smoke) smoke=1 ;;
        --suites) IFS=, read -r -a suites <<<"$2"; shift ;;
        *) args+=("$1") ;;
    esac
    shift
done

results=bench-results
if [ "$smoke" = 1 ]; then
    [ ${#docs[@]} -eq 0 ] && [ "$big" = 0 ] || { echo "bench-net: --smoke writes no docs, runs no --big" >&2; exit 2; }
    if [ -z "${Y3_LAB:-}" ]; then
        cargo build --locked -p y3-lab -p y3-cli
        Y3_LAB="${CARGO_TARGET_DIR:-target}/debug/y3-lab"
    fi
    results="$(mktemp -d)"
    trap 'rm -rf "$results"' EXIT
    # The YoMo suite runs with the debug y3 beside the debug lab (no release build).
    export Y3_LAB_SMOKE=1
    smoke_args=(--quick --runs 1)
    for suite in "${suites[@]}"; do
        case "$suite" in
            pingpong) a=(--sessions 4 --threads 1 --total 64) ;;
            echo) a=(--conns 2 --sizes 100 --seconds 0.2 --warmup 0.1) ;;
            e2e) a=(--sizes 64 --subs 1 --messages 500 --paced 100) ;;
            yomo) a=(--workloads sink --sizes 64 --messages 500 --paced 100) ;;
            *) a=() ;;
        esac
        "$Y3_LAB" net "$suite" --json "$results/net-$suite.json" --out "$results" \
            "${smoke_args[@]}" "${a[@]}" "${args[@]}"
        "$Y3_LAB" net "$suite" --from "$results/net-$suite.json" --out "$results"
    done
    exit 0
fi

need_apt=()
[ -f /usr/include/asio.hpp ] || need_apt+=(libasio-dev)
command -v nats-server >/dev/null || [ -x /usr/sbin/nats-server ] || need_apt+=(nats-server)
command -v taskset >/dev/null || need_apt+=(util-linux)
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq "${need_apt[@]}" >/dev/null 2>&1 ||
            { apt-get update -qq && apt-get install -y -qq "${need_apt[@]}" >/dev/null; }
    else
        echo "bench-net: missing ${need_apt[*]} (not root: those peers are skipped)" >&2
    fi
fi
export PATH="$PATH:/usr/sbin"

bench/cpp/build.sh || echo "bench-net: asio build failed: its rows are skipped" >&2
cargo build --release --locked -p y3-cli -p y3-lab --features y3-lab/net-peers
lab="${CARGO_TARGET_DIR:-target}/release/y3-lab"

for suite in "${suites[@]}"; do
    if [ "$suite" = yomo ] && ! command -v go >/dev/null; then
        echo "bench-net: go is not installed: the yomo suite is skipped" >&2
        continue
    fi
    "$lab" net "$suite" --json "$results/net-$suite.json" "${args[@]}"
    parts="$results/net-$suite.json"
    if [ "$suite" = pingpong ] && [ "$big" = 1 ]; then
        # 10 000 sessions x 8192 messages is minutes per run: one run per cell.
        "$lab" net pingpong --sessions 10000 --runs 1 --limit-s 900 \
            --json bench-results/net-pingpong-10k.json "${args[@]}"
        parts="$parts,bench-results/net-pingpong-10k.json"
    fi
    # The report (and, with --docs, docs/bench and README.md) from every part of the suite.
    "$lab" net "$suite" --from "$parts" "${docs[@]}"
done
