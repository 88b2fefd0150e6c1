#!/usr/bin/env bash
# The project's one test command: Rust (fmt, clippy, tests, docs, no_std build, the lab with
# every peer, the MSRV, fuzz build check), Go and Python, every benchmark entry point in a
# smoke mode. `.ci/run` calls exactly this. Any failing step fails the run, and so does a
# skipped test that scripts/declared-skips.txt does not declare: every suite's skips are
# recorded (scripts/skips.py) and counted per suite at the end.
#
# Every test suite in the repository runs here, except (one line each):
#   fuzz/          fuzzing is open-ended: its targets are build-checked; their invariants
#                  run on the committed corpus in crates/y3-harness/tests/fuzz_corpus.rs
#   scripts/soak.sh  the 30-minute soak: its 60 s version runs below
#   scripts/icount   instruction counts (needs valgrind), a measurement, not a test
#   bench/cpp      the asio ping-pong peer, built and run only by scripts/bench-net.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step says how long the run has taken so far (min:s), so a slow step shows in the log.
step() { printf '\n==> [%d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

target_dir="$(mkdir -p "${CARGO_TARGET_DIR:-target}" && cd "${CARGO_TARGET_DIR:-target}" && pwd)"
# The skip ledger: each suite's skipped tests (scripts/skips.py), reported at the end.
export Y3_SKIP_DIR="$target_dir/skips"
rm -rf "$Y3_SKIP_DIR"
mkdir -p "$Y3_SKIP_DIR"

step "rust: format"
cargo fmt --all --check

step "rust: no function over 150 lines (scripts/long-functions-allowed.txt)"; scripts/long-functions.sh --check

# Default features here; the lab's peers (y3-lab features `peers`, `net-peers`) are
# checked in a step of their own below.
step "rust: clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

# The federation tests (crates/y3-cli/tests/federation.rs) start a real nats-server cluster:
# install it once from the Go module proxy (Debian's package as the fallback), and tell the
# tests where it is. Without it they fail rather than skip.
step "tools: nats-server"
tools="$target_dir/tools/bin"
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

# The router binary every suite that runs one uses (Go client, YoMo interop, Python,
# examples, smoke): built once, exported as Y3_BIN. A suite that cannot find it fails.
step "rust: build y3 (Y3_BIN)"
cargo build -p y3-cli --locked
export Y3_BIN="$target_dir/debug/y3"

step "rust: tests"
cargo test --workspace --locked 2>&1 | tee "$Y3_SKIP_DIR/cargo-test.log"
scripts/skips.py cargo rust "$Y3_SKIP_DIR/cargo-test.log"

# The Python binding's Rust crate is a workspace of its own (bindings/python/Cargo.toml).
step "rust: format and clippy of the Python binding's crate"
cargo fmt --manifest-path bindings/python/Cargo.toml --check
cargo clippy --manifest-path bindings/python/Cargo.toml --all-targets --locked -- -D warnings

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
# features and dependencies' own rust-version. Without rustup, or when it cannot install
# that toolchain, the run fails.
msrv="$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
step "rust: MSRV $msrv"
command -v rustup >/dev/null || { echo "MSRV: rustup is needed to install Rust $msrv" >&2; exit 1; }
rustup run "$msrv" rustc --version >/dev/null 2>&1 ||
    rustup toolchain install "$msrv" --profile minimal >/dev/null
CARGO_TARGET_DIR="$target_dir/msrv" cargo "+$msrv" check --workspace --all-targets --locked

if [ -f fuzz/Cargo.toml ]; then
    step "rust: fuzz targets build check"
    cargo check --manifest-path fuzz/Cargo.toml
fi

# Go: every module, vetted and tested with -count=1 (never a result cached from before the
# router was rebuilt), skips recorded. Y3_BIN and NATS_SERVER_BIN are exported above.
gotest() { # SUITE DIR: go vet and go test in DIR
    step "go: $2"
    (cd "$2" && go vet ./...)
    scripts/skips.py go "$1" "$2" -count=1 ./...
}
gotest go-codec bindings/go
# The router client is a module of its own: the codec module depends on nothing.
gotest go-client bindings/go/client
# The codec against the reference Go implementation (reference-equality check).
gotest go-codec-bench bindings/go/bench
# The lab's Go peers (bench/go): their own tests.
gotest go-bench bench/go
# Real YoMo v1.22.0 (its zipper, sources and stream functions, from the Go module proxy)
# against `y3 serve`, y3's CLI against YoMo's zipper. Every test also runs against YoMo's own
# zipper, which is what validates it.
gotest go-interop-yomo interop/yomo

# examples/: every program runs (the YoMo app against `y3 serve` on a free port).
step "examples: run each"
cargo build -p y3-cli -p y3-examples --locked
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
# SIGTERM drains and stops it with status 0: any other status (a crash) fails the run.
kill "$serve_pid"
serve_rc=0
wait "$serve_pid" || serve_rc=$?
[ "$serve_rc" = 0 ] || { cat "$serve_log"; echo "y3 serve exited with $serve_rc" >&2; exit 1; }

step "dashboard: the live page in headless chromium"; scripts/test-dashboard.sh

# Mixed load and chaos for 60 s (killed functions, a stalling consumer, garbage, partial
# frames, connection storms, a router restart): every frame accounted, healthy flows in
# order. The lab's 30-minute soak is scripts/soak.sh.
step "soak: 60 s of load and chaos against y3 serve"
cargo build -p y3-soak --locked
"$target_dir/debug/y3-soak" --y3 "$target_dir/debug/y3" --duration 60s --restart-every 30s \
    --kill-every 7s --storm-every 20s --rate 2000 --out "$target_dir/soak"

step "python: build and test"
scripts/python-test.sh -rs --junitxml="$Y3_SKIP_DIR/pytest.xml"
scripts/skips.py pytest python "$Y3_SKIP_DIR/pytest.xml"

# Every benchmark entry point (lab suites, scripts/bench-*, bindings/python/bench) in a
# smoke mode: seconds, tiny counts.
step "bench: smoke runs"
scripts/test-smoke.sh

# Every test docs/guarantees.md names as the proof of a claim exists.
step "docs: the tests behind docs/guarantees.md exist"
scripts/check-guarantees.py docs/guarantees.md

step "skips: per suite"
scripts/skips.py report scripts/declared-skips.txt

step "packages: the .deb, the wheel and the Go modules, installed and used"; scripts/test-packages.sh

printf '\nall checks passed\n'
