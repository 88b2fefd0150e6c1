#!/usr/bin/env bash
# The network lab with every peer: builds `y3` with the heavy Rust peers (feature
# y3-bench/net-peers: monoio, async-nats, zenoh), installs Debian's libasio-dev and
# nats-server when missing (root only), builds bench/cpp (the asio ping-pong), then runs
#
#   y3 bench net pingpong   header/body ping-pong: y3-transport vs tokio vs asio
#   y3 bench net echo       echo server: y3 on tokio/monoio vs tokio vs monoio
#   y3 bench net e2e        publish → route → subscribe: y3 router vs NATS vs Zenoh
#
# Usage:
#   scripts/bench-net.sh                      all three suites, full size (~30 min on 2 cores)
#   scripts/bench-net.sh --quick              CI-sized (~3 min)
#   scripts/bench-net.sh --docs               also refresh docs/bench and README.md's sections
#   scripts/bench-net.sh --suites pingpong,echo   only these suites
# Other arguments go to every `y3 bench net` command. Results: bench-results/net-*.{json,md,svg}.
# Every server runs on 127.0.0.1 and is stopped by the lab; nothing here runs in the tests.
set -euo pipefail
cd "$(dirname "$0")/.."

suites=(pingpong echo e2e)
args=()
docs=()
while [ $# -gt 0 ]; do
    case "$1" in
        --docs) docs=(--docs docs/bench --readme README.md) ;;
        --suites) IFS=, read -r -a suites <<<"$2"; shift ;;
        *) args+=("$1") ;;
    esac
    shift
done

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
cargo build --release --locked -p y3-cli --features y3-bench/net-peers
y3=target/release/y3

for suite in "${suites[@]}"; do
    "$y3" bench net "$suite" --json "bench-results/net-$suite.json" "${docs[@]}" "${args[@]}"
done
