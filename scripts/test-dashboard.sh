#!/usr/bin/env bash
# The live dashboard in a real headless Chromium: starts `y3 serve` (metrics token on), a
# source (`y3 send`, 100 frames a second on tag 0x10) and a sink (`y3 observe`), loads the
# page and checks that the rendered numbers move (scripts/dashboard/check.mjs, driving
# Debian's chromium with playwright-core from npm at the version package-lock.json pins).
# The screenshot goes to target/dashboard.png; `--docs` refreshes the committed
# docs/dashboard.png instead (as the lab's `--docs` refreshes its pages).
#
# Installs Debian's chromium when it is missing (apt-get, as root or through sudo -n); a
# Chromium that cannot be installed fails the run.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target_dir="$(mkdir -p "${CARGO_TARGET_DIR:-target}" && cd "${CARGO_TARGET_DIR:-target}" && pwd)"
screenshot="$target_dir/dashboard.png"
[ "${1:-}" = "--docs" ] && screenshot="$root/docs/dashboard.png"

log() { printf '==> %s\n' "$*" >&2; }

chromium="${CHROMIUM:-$(command -v chromium || true)}"
if [ -z "$chromium" ]; then
    log "installing Debian's chromium"
    if [ "$(id -u)" = 0 ]; then apt=(apt-get); else apt=(sudo -n apt-get); fi
    "${apt[@]}" install -y chromium >&2 || { "${apt[@]}" update >&2 && "${apt[@]}" install -y chromium >&2; }
    chromium="$(command -v chromium || true)"
fi
[ -x "$chromium" ] || { echo "test-dashboard: no chromium (install Debian's chromium)" >&2; exit 1; }
export CHROMIUM="$chromium"

log "playwright-core (npm ci)"
(cd scripts/dashboard && npm ci --no-audit --no-fund --loglevel=error >&2)

# The y3 binary: Y3_BIN (scripts/test.sh builds it), else built here.
if [ -n "${Y3_BIN:-}" ]; then
    y3="$Y3_BIN"
else
    cargo build -p y3-cli --locked
    y3="$target_dir/debug/y3"
fi

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
port="$(free_port)"
metrics_port="$(free_port)"
work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

token="dashboard-$RANDOM$RANDOM"
printf '%s\n' "$token" > "$work/metrics.token"
chmod 600 "$work/metrics.token"
"$y3" serve --tcp "127.0.0.1:$port" --quic "127.0.0.1:$port" \
    --metrics "127.0.0.1:$metrics_port" --metrics-token-file "$work/metrics.token" \
    > "$work/serve.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q "listening" "$work/serve.log" && break; sleep 0.1; done
grep -q "listening" "$work/serve.log" || { cat "$work/serve.log" >&2; exit 1; }

# The sink, then a source sending 100 frames a second for as long as the check runs.
"$y3" observe --addr "127.0.0.1:$port" --transport tcp --tag 0x10 > /dev/null 2> "$work/observe.log" &
pids+=($!)
(
    while true; do
        for _ in $(seq 10); do echo '{"payload_hex":"0102030405060708"}'; done
        sleep 0.1
    done | "$y3" send --addr "127.0.0.1:$port" --transport tcp --tag 0x10 > /dev/null 2> "$work/send.log"
) &
pids+=($!)

# The binary names the commit it was built from (y3_build_info, /varz, the page's header).
Y3_EXPECT_GIT="$(git rev-parse --short=12 HEAD 2>/dev/null || true)"
export Y3_EXPECT_GIT
log "headless chromium: $("$chromium" --version 2>/dev/null | head -n 1)"
node scripts/dashboard/check.mjs "http://127.0.0.1:$metrics_port/dashboard" "$token" "$screenshot" || {
    echo "--- serve.log" >&2; tail -n 20 "$work/serve.log" >&2
    echo "--- send.log" >&2; tail -n 5 "$work/send.log" >&2
    echo "--- observe.log" >&2; tail -n 5 "$work/observe.log" >&2
    exit 1
}
log "dashboard ok; screenshot: $screenshot"
