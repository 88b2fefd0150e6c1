#!/usr/bin/env bash
# Builds the Python binding (bindings/python) and runs its tests: every shared vector in
# testdata/vectors/ both ways, the malformed-input table, observer split points, the API,
# and the asyncio clients against `y3 serve` and YoMo v1.22's own zipper and clients.
#
#   scripts/python-test.sh [pytest args...]
#   scripts/python-test.sh --build-only    (the venv, the extension and yomo-peer, no test:
#                                           scripts/test.sh runs it early, in the background)
#
# The client tests run the `y3` binary (Y3_BIN, else `cargo build -p y3-cli` here, a no-op
# when scripts/test.sh built it already) and `yomo-peer` (YOMO_PEER, else `go build` of
# interop/yomo/cmd/yomo-peer when `go` is on PATH; without it the YoMo rows are skipped).
# Y3_PY_PROFILE=dev builds the extension without optimizations, for quicker iteration;
# the default (and what CI runs) is release.
#
# Needs only Python >= 3.11 (Y3_PYTHON, else python3.11, else python3) and a Rust
# toolchain. The virtual environment bindings/python/.venv is created on first use and
# reused afterwards; maturin and pytest are installed into it from PyPI at pinned
# versions; the extension is built in release mode with `maturin develop` (cargo's
# incremental cache lives in bindings/python/target). Exits non-zero on any failure.
set -euo pipefail

MATURIN_VERSION=1.16.0
PYTEST_VERSION=9.2.0

build_only=false
if [ "${1:-}" = --build-only ]; then build_only=true; shift; fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pkg="$root/bindings/python"
venv="$pkg/.venv"

log() { printf '==> %s\n' "$*" >&2; }

pick_python() {
    local candidate
    for candidate in "${Y3_PYTHON:-}" python3.11 python3 python; do
        [ -n "$candidate" ] || continue
        command -v "$candidate" >/dev/null 2>&1 || continue
        if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    echo "python-test: no Python >= 3.11 found (set Y3_PYTHON)" >&2
    return 1
}

# A cached venv is reused only if its interpreter still runs (the base Python may have moved).
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    log "reusing $venv"
else
    python="$(pick_python)"
    log "creating $venv with $("$python" --version 2>&1)"
    rm -rf "$venv"
    "$python" -m venv "$venv"
fi
vpy="$venv/bin/python"

if ! "$vpy" - "$MATURIN_VERSION" "$PYTEST_VERSION" 2>/dev/null <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version
try:
    ok = version("maturin") == sys.argv[1] and version("pytest") == sys.argv[2]
except PackageNotFoundError:
    ok = False
sys.exit(0 if ok else 1)
PY
then
    log "installing maturin==$MATURIN_VERSION pytest==$PYTEST_VERSION from PyPI"
    "$vpy" -m pip install --disable-pip-version-check --quiet \
        "maturin==$MATURIN_VERSION" "pytest==$PYTEST_VERSION"
fi

profile="${Y3_PY_PROFILE:-release}"
log "building the extension (maturin develop, profile $profile)"
(
    cd "$pkg"
    VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" "$venv/bin/maturin" develop --profile "$profile" --quiet
) >&2

if [ -z "${YOMO_PEER:-}" ] && command -v go >/dev/null 2>&1 && [ -f "$root/interop/yomo/go.mod" ]; then
    log "building yomo-peer (go build ./cmd/yomo-peer)"
    mkdir -p "$pkg/target"
    (cd "$root/interop/yomo" && go build -o "$pkg/target/yomo-peer" ./cmd/yomo-peer) >&2
    YOMO_PEER="$pkg/target/yomo-peer"
fi
export YOMO_PEER="${YOMO_PEER:-}"
if "$build_only"; then exit 0; fi

if [ -z "${Y3_BIN:-}" ]; then
    log "building the y3 binary (cargo build -p y3-cli)"
    (cd "$root" && cargo build -p y3-cli --locked --quiet) >&2
    Y3_BIN="$(cd "$root/${CARGO_TARGET_DIR:-target}" && pwd)/debug/y3"
fi
export Y3_BIN

log "running pytest"
cd "$pkg"
exec "$vpy" -m pytest -p no:cacheprovider -q "$@"
