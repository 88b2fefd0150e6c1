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

step "mqtt: mosquitto, paho-mqtt and the paho tests (the Rust and Go MQTT tests need them)"; scripts/test-mqtt.sh

step "rust: tests"
cargo test --workspace --locked

step "rust: docs"
RUSTDOCFLAGS=-Dwarnings cargo doc --workspace --no-deps --locked

# Every published crate packages and resolves as crates.io would take it (versioned path
# dependencies, real metadata); the build it would verify is the one above.
step "rust: cargo publish --dry-run"
cargo publish --workspace --dry-run --no-verify --locked

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
    # The router client is a module of its own: the codec module depends on nothing.
    (cd bindings/go/client && go vet ./... && go test ./...)
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

# examples/: every program runs (the YoMo app against `y3 serve` on a free port).
step "examples: run each"
cargo build -p y3-cli -p y3-examples --locked
target_dir="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)"
"$target_dir/debug/observe-key"
"$target_dir/debug/pipeline"
"$target_dir/debug/fan-out"
"$target_dir/debug/embedded-router" 1
(cd examples/yomo-app && go vet ./... && go build -o "$target_dir/yomo-app" .)
port="$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
serve_log="$target_dir/yomo-app-serve.log"
"$target_dir/debug/y3" serve --tcp "" --quic "127.0.0.1:$port" --metrics "" \
    > "$serve_log" 2>&1 &
serve_pid=$!
for _ in $(seq 100); do grep -q "listening" "$serve_log" && break; sleep 0.1; done
YOMO_ZIPPER="127.0.0.1:$port" "$target_dir/yomo-app" || { kill "$serve_pid"; exit 1; }
kill "$serve_pid"; wait "$serve_pid" || true

# Mixed load and chaos for 60 s (killed functions, a stalling consumer, garbage, partial
# frames, connection storms, a router restart): every frame accounted, healthy flows in
# order. The lab's 30-minute soak is scripts/soak.sh.
step "soak: 60 s of load and chaos against y3 serve"
cargo build -p y3-soak --locked
"$target_dir/debug/y3-soak" --y3 "$target_dir/debug/y3" --duration 60s --restart-every 30s \
    --kill-every 7s --storm-every 20s --rate 2000 --out "$target_dir/soak"

if [ -f bench/go/go.mod ]; then
    step "go: benchmark module builds"
    (cd bench/go && go vet ./...)
fi

if [ -x scripts/python-test.sh ]; then
    step "python: build and test"
    scripts/python-test.sh
fi

printf '\nall checks passed\n'
