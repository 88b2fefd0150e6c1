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
#
# Steps that no later step needs right away run in the background from the start (see `bg`
# below): the compile-only checks (scripts/test-checks.sh: the Python binding's crate, the
# fuzz targets, the MSRV, the lab with every peer) and the Python extension's build.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step says how long the run has taken so far (min:s), so a slow step shows in the log.
step() { printf '\n==> [%d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

target_dir="$(mkdir -p "${CARGO_TARGET_DIR:-target}" && cd "${CARGO_TARGET_DIR:-target}" && pwd)"
# The skip ledger: each suite's skipped tests (scripts/skips.py), reported at the end.
export Y3_SKIP_DIR="$target_dir/skips"
rm -rf "$Y3_SKIP_DIR"
mkdir -p "$Y3_SKIP_DIR"

# Background jobs run under `nice -n 19`: on the CPU that the test suites' sleeps, timers and
# network waits leave idle, without slowing a foreground step much. A job's output goes to
# target/bg/NAME.log and is printed where the run waits for it (`bg_wait`), which fails the
# run when the job failed. A run that stops early stops its jobs (each is a process group).
bg_dir="$target_dir/bg"
rm -rf "$bg_dir"
mkdir -p "$bg_dir"
declare -A bg_pids=()
bg() { # NAME COMMAND...: starts COMMAND in the background
    local name="$1"
    shift
    setsid nice -n 19 "$@" >"$bg_dir/$name.log" 2>&1 &
    bg_pids[$name]=$!
}
bg_wait() { # NAME STEP: waits for job NAME, prints its log; its failure fails the run
    local name="$1" rc=0 waited=$SECONDS
    step "$2 (in the background since the start)"
    wait "${bg_pids[$name]}" || rc=$?
    unset "bg_pids[$name]"
    cat "$bg_dir/$name.log"
    echo "(waited $((SECONDS - waited)) s for it)"
    [ "$rc" = 0 ] || { echo "$2: failed (status $rc)" >&2; exit 1; }
}
bg_stop() {
    local pid
    for pid in "${bg_pids[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
}
trap bg_stop EXIT
trap 'exit 130' INT TERM

step "rust: format"
cargo fmt --all --check

step "rust: no function over 150 lines (scripts/long-functions-allowed.txt)"; scripts/long-functions.sh --check

step "background: the compile-only checks and the Python extension's build"
bg checks scripts/test-checks.sh
bg python scripts/python-test.sh --build-only
echo "started: scripts/test-checks.sh, scripts/python-test.sh --build-only (logs in $bg_dir)"

# Default features here; the lab's peers (y3-lab features `peers`, `net-peers`) are
# checked by scripts/test-checks.sh, in the background.
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

step "mqtt: mosquitto and paho-mqtt (the Rust, Go and paho MQTT tests need them)"; scripts/test-mqtt.sh install

step "rust: tests"
cargo test --workspace --locked 2>&1 | tee "$Y3_SKIP_DIR/cargo-test.log"
scripts/skips.py cargo rust "$Y3_SKIP_DIR/cargo-test.log"

# Every binary the later suites run (y3 as Y3_BIN for the Go client, YoMo interop, MQTT,
# Python, dashboard and packages; the examples; the soak; the lab for the smoke runs): built
# once, by one command, so with one feature set (a `cargo build -p X` per step resolved
# features per package and rebuilt y3-router and its dependencies each time). It runs after
# the tests because `cargo test` links y3 and the lab into target/debug with the tests'
# dev-dependency features. A suite that cannot find its binary fails.
step "rust: build the binaries (Y3_BIN)"
cargo build --workspace --bins --locked
export Y3_BIN="$target_dir/debug/y3"

step "mqtt: the paho tests"; scripts/test-mqtt.sh

step "rust: docs"
RUSTDOCFLAGS=-Dwarnings cargo doc --workspace --no-deps --locked

# Every published crate packages and resolves as crates.io would take it (versioned path
# dependencies, real metadata); the build it would verify is the one above.
step "rust: cargo publish --dry-run"
cargo publish --workspace --dry-run --no-verify --locked

step "rust: y3 without std"
cargo build -p y3 --no-default-features --locked

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

# examples/: every program runs (the YoMo app against `y3 serve` on a free port); built by
# the binaries step above.
step "examples: run each"
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
"$target_dir/debug/y3-soak" --y3 "$target_dir/debug/y3" --duration 60s --restart-every 30s \
    --kill-every 7s --storm-every 20s --rate 2000 --out "$target_dir/soak"

bg_wait python "python: the extension and yomo-peer built"
step "python: test"
scripts/python-test.sh -rs --junitxml="$Y3_SKIP_DIR/pytest.xml"
scripts/skips.py pytest python "$Y3_SKIP_DIR/pytest.xml"

# Every benchmark entry point (lab suites, scripts/bench-*, bindings/python/bench) in a
# smoke mode: seconds, tiny counts.
step "bench: smoke runs"
scripts/test-smoke.sh

# Every test docs/guarantees.md names as the proof of a claim exists.
step "docs: the tests behind docs/guarantees.md exist"
scripts/check-guarantees.py docs/guarantees.md

bg_wait checks "rust: the compile-only checks (scripts/test-checks.sh)"

step "skips: per suite"
scripts/skips.py report scripts/declared-skips.txt

step "packages: the .deb, the wheel and the Go modules, installed and used"; scripts/test-packages.sh

printf '\nall checks passed\n'
