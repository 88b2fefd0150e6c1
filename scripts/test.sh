#!/usr/bin/env bash
# The project's one test command: Rust (fmt, clippy, tests, docs, no_std build, fuzz build
# check), Go and Python. `.ci/run` calls exactly this. Any failing step fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "rust: format"
cargo fmt --all --check

# Default features: the benchmark lab's heavy peers (y3-lab features `peers`, `net-peers`)
# stay out of the test command; the lab builds them when it runs (scripts/bench-*).
step "rust: clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "rust: tests"
cargo test --workspace --locked

step "rust: docs"
RUSTDOCFLAGS=-Dwarnings cargo doc --workspace --no-deps --locked

step "rust: y3 without std"
cargo build -p y3 --no-default-features --locked

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
