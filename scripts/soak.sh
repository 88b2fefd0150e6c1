#!/usr/bin/env bash
# The lab's soak: `y3 serve` (release) under mixed load and chaos for 30 minutes (or
# $1, e.g. `scripts/soak.sh 5m`), a router restart every 5 minutes. Writes
# bench-results/soak/{soak.md,soak.json,soak-rss.svg}; exits non-zero when a frame is
# unaccounted or a healthy flow loses order. The test command runs a 60 s version.
set -euo pipefail
cd "$(dirname "$0")/.."
duration="${1:-30m}"
cargo build --release -p y3-cli -p y3-soak --locked
target_dir="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)"
exec "$target_dir/release/y3-soak" --y3 "$target_dir/release/y3" --duration "$duration" \
    --restart-every 5m --out bench-results/soak
