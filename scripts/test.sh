#!/usr/bin/env bash
# The project's one test command: Rust (fmt, clippy, tests, docs, no_std build, the lab with
# every peer, the MSRV, fuzz build check), Go and Python. `.ci/run` calls exactly this. Any failing step fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "rust: format"
cargo fmt --all --check

# Default features here; the lab's peers (y3-lab features `peers`, `net-peers`) are
# checked in a step of their own below.
step "rust: clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "rust: tests"
cargo test --workspace --locked

step "rust: docs"
RUSTDOCFLAGS=-Dwarnings cargo doc --workspace --no-deps --locked

step "rust: y3 without std"
cargo build -p y3 --no-default-features --locked

# The lab as scripts/bench-* build it: every peer feature compiled (zenoh, async-nats,
# monoio, sonic-rs, simd-json, rkyv, prost, ...), so that code cannot rot unseen.
step "rust: the lab with every peer feature"
cargo check -p y3-lab --all-targets --features peers,net-peers --locked

# The declared MSRV (workspace `rust-version`): the whole workspace, tests included, checked
# with that very toolchain, installed by rustup when missing. Clippy's `incompatible_msrv`
# (in the clippy step above) reads the same `rust-version`; this step also covers language
# features and dependencies' own rust-version. Without rustup it is skipped, and says so.
msrv="$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
step "rust: MSRV $msrv"
if command -v rustup >/dev/null &&
    { rustup run "$msrv" rustc --version >/dev/null 2>&1 ||
        rustup toolchain install "$msrv" --profile minimal >/dev/null; }; then
    CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/msrv" \
        cargo "+$msrv" check --workspace --all-targets --locked
else
    echo "skipped: rustup cannot provide Rust $msrv here"
fi

if [ -f fuzz/Cargo.toml ]; then
    step "rust: fuzz targets build check"
    cargo check --manifest-path fuzz/Cargo.toml
fi

if [ -f bindings/go/go.mod ]; then
    step "go: vet and test"
    (cd bindings/go && go vet ./... && go test ./...)
fi

if [ -f interop/yomo/go.mod ]; then
    # Real YoMo v1.22.0 (its zipper, sources and stream functions, from the Go module
    # proxy) against `y3 serve`, y3's CLI against YoMo's zipper. Every test also runs
    # against YoMo's own zipper, which is what validates it.
    step "go: YoMo v1.22 interop"
    cargo build -p y3-cli --locked
    y3_bin="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug/y3"
    (cd interop/yomo && go vet ./... && Y3_BIN="$y3_bin" go test ./...)
fi

if [ -f bench/go/go.mod ]; then
    step "go: benchmark module builds"
    (cd bench/go && go vet ./...)
fi

if [ -x scripts/python-test.sh ]; then
    step "python: build and test"
    scripts/python-test.sh
fi

printf '\nall checks passed\n'
