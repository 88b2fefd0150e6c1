#!/usr/bin/env bash
# The project's one test command: Rust (fmt, clippy, tests, docs, no_std build, fuzz build
# check), Go and Python. `.ci/run` calls exactly this. Any failing step fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "rust: format"
cargo fmt --all --check

# Default features: the benchmark lab's heavy peers (y3-bench features `peers`, `net-peers`)
# stay out of the test command; the lab builds them when it runs (scripts/bench-*).
step "rust: clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

# The federation tests (crates/y3-cli/tests/federation.rs) start a real nats-server cluster:
# install it once from the Go module proxy (Debian's package as the fallback), and tell the
# tests where it is. Without it they fail rather than skip.
step "tools: nats-server"
tools="$(mkdir -p "${CARGO_TARGET_DIR:-target}" && cd "${CARGO_TARGET_DIR:-target}" && pwd)/tools/bin"
if [ -z "${NATS_SERVER_BIN:-}" ]; then
    if [ ! -x "$tools/nats-server" ]; then
        mkdir -p "$tools"
        GOBIN="$tools" go install github.com/nats-io/nats-server/v2@v2.15.2 ||
            { sudo -n apt-get install -y nats-server && ln -sf "$(command -v nats-server)" "$tools/"; }
    fi
    export NATS_SERVER_BIN="$tools/nats-server"
fi
"$NATS_SERVER_BIN" --version

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
