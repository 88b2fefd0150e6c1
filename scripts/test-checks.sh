#!/usr/bin/env bash
# The compile-only checks of scripts/test.sh: nothing here runs a test, so scripts/test.sh
# starts this script in the background under `nice -n 19` and it compiles on the CPU the
# test suites leave idle (their sleeps, timers and network waits); its log is printed, and
# its status checked, where scripts/test.sh waits for it. Each check uses a target
# directory of its own, so it never holds the build lock a foreground cargo waits on:
#
#   1. the Python binding's crate (a workspace of its own, bindings/python/target):
#      rustfmt and clippy;
#   2. the fuzz targets (a workspace of their own, fuzz/target): they build;
#   3. the declared MSRV (workspace `rust-version`): the whole workspace, tests included,
#      checked with that very toolchain (target/msrv), installed by rustup when missing.
#      Clippy's `incompatible_msrv` (scripts/test.sh's clippy step) reads the same
#      `rust-version`; this also covers language features and dependencies' own
#      rust-version. Without rustup, or when it cannot install that toolchain, it fails;
#   4. the lab as scripts/bench-* build it (target/peers): every peer feature compiled
#      (zenoh, async-nats, monoio, sonic-rs, simd-json, rkyv, prost, ...), so that code
#      cannot rot unseen. Its features change most dependencies' feature sets: after the
#      clippy step, in target/debug, it still rebuilt 279 of its ~390 crates.
#
#   scripts/test-checks.sh            (any failing check fails it)
set -euo pipefail
cd "$(dirname "$0")/.."
target_dir="$(mkdir -p "${CARGO_TARGET_DIR:-target}" && cd "${CARGO_TARGET_DIR:-target}" && pwd)"

# Each check says how long this script has taken so far (min:s).
step() { printf '\n==> [checks %d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

step "rust: format and clippy of the Python binding's crate"
cargo fmt --manifest-path bindings/python/Cargo.toml --check
cargo clippy --manifest-path bindings/python/Cargo.toml --all-targets --locked -- -D warnings

if [ -f fuzz/Cargo.toml ]; then
    step "rust: fuzz targets build check"
    cargo check --manifest-path fuzz/Cargo.toml
fi

msrv="$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
step "rust: MSRV $msrv"
command -v rustup >/dev/null || { echo "MSRV: rustup is needed to install Rust $msrv" >&2; exit 1; }
rustup run "$msrv" rustc --version >/dev/null 2>&1 ||
    rustup toolchain install "$msrv" --profile minimal >/dev/null
CARGO_TARGET_DIR="$target_dir/msrv" cargo "+$msrv" check --workspace --all-targets --locked

step "rust: the lab with every peer feature"
CARGO_TARGET_DIR="$target_dir/peers" cargo check -p y3-lab --all-targets --features peers,net-peers --locked

step "checks passed"
