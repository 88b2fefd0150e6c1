#!/usr/bin/env bash
# The installable artifacts, installed and used as users install them:
#
#   1. the Debian package (packaging/deb/build-deb.sh): `dpkg -i`, the installed
#      /usr/bin/y3 runs (--version, a router with a frame sent and observed through it), the
#      unit passes `systemd-analyze verify` with no finding, `dpkg -r` removes it (the
#      settings stay, a conffile) and `dpkg --purge` the settings too;
#   2. the Python wheel (maturin build): `pip install` into a fresh virtualenv, with no
#      index, then imported and used (a vector encoded and decoded, a frame routed
#      through `y3 serve`) by packaging/python/smoke.py;
#   3. the Go modules: a module proxy made from the repository's own modules at the
#      workspace version (packaging/go/module-proxy.py; what the tags bindings/go/vX.Y.Z
#      and bindings/go/client/vX.Y.Z publish), and a consumer module with no `replace`
#      (packaging/go/consumer) resolved through it, built, and run against `y3 serve`;
#   4. the README's `y3 encode` / `get` / `inspect` examples print what it says.
#
# The package carries the debug build that scripts/test.sh has already built (stripped):
# a release build would cost minutes on 2 cores for the same test. The wheel is built with
# Y3_PY_PROFILE (default release, reusing scripts/python-test.sh's cache in
# bindings/python/target). Needs root or `sudo -n` for dpkg (and apt-get for a missing
# tool); a missing tool fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"

step() { printf '\n==> packages: %s\n' "$*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }
need() { # need COMMAND [DEBIAN PACKAGE]
    command -v "$1" >/dev/null && return 0
    as_root apt-get install -y "${2:-$1}" >/dev/null ||
        { as_root apt-get update >/dev/null && as_root apt-get install -y "${2:-$1}" >/dev/null; }
    command -v "$1" >/dev/null || { echo "test-packages: $1 is missing" >&2; exit 1; }
}
need dpkg-deb dpkg
need objcopy binutils
need systemd-analyze systemd
need python3
need go

work="$(mktemp -d)"
pids=()
installed=""  # set once this script installed the package: the cleanup purges it
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    # Routers `serve` started: it runs in a command substitution (a subshell), so their
    # pids come back through a file, not through `pids`.
    if [ -f "$work/serve.pids" ]; then
        while read -r pid; do kill "$pid" 2>/dev/null || true; done < "$work/serve.pids"
    fi
    if [ -n "$installed" ] && dpkg-query -W y3 >/dev/null 2>&1; then
        as_root dpkg --purge y3 >/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# serve BIN LOG: starts `BIN serve` on a free loopback TCP port; prints the port. Called
# as `port="$(serve ...)"`, so its pid goes to $work/serve.pids for the cleanup.
serve() {
    local port
    port="$(free_port)"
    "$1" serve --tcp "127.0.0.1:$port" --quic "" --metrics "" --dev-cert-out "$work/cert.pem" \
        > "$2" 2>&1 &
    echo "$!" >> "$work/serve.pids"
    for _ in $(seq 200); do grep -q "listening" "$2" && break; sleep 0.1; done
    grep -q "listening" "$2" || { cat "$2" >&2; echo "test-packages: $1 serve did not start" >&2; exit 1; }
    echo "$port"
}

# The y3 binary: Y3_BIN (scripts/test.sh builds it), else built here.
target="$(mkdir -p "${CARGO_TARGET_DIR:-target}" && cd "${CARGO_TARGET_DIR:-target}" && pwd)"
if [ -z "${Y3_BIN:-}" ]; then
    cargo build -p y3-cli --locked
    Y3_BIN="$target/debug/y3"
fi
version="$("$Y3_BIN" --version | awk '{ print $2 }')"

step "debian package"
started=$SECONDS
deb="$(packaging/deb/build-deb.sh "$Y3_BIN" "$work/deb")"
echo "built $(basename "$deb") ($(du -h "$deb" | cut -f1)) in $((SECONDS - started)) s"
if dpkg-query -W y3 >/dev/null 2>&1; then
    echo "test-packages: a y3 package is already installed; remove it first (dpkg --purge y3)" >&2
    exit 1
fi
installed=yes
as_root dpkg -i "$deb"
# The installed binary is the one packaged: `y3 0.1.0 (git <commit>)`, as built.
[ "$(/usr/bin/y3 --version)" = "$("$Y3_BIN" --version)" ]
[ -f /etc/y3/y3.toml ] && [ -f /usr/lib/systemd/system/y3.service ]
/usr/bin/y3 serve --config /etc/y3/y3.toml --print-config > /dev/null
port="$(serve /usr/bin/y3 "$work/deb-serve.log")"
/usr/bin/y3 observe --addr "127.0.0.1:$port" --tag 0x20 --count 1 > "$work/observed" &
observer=$!
pids+=("$observer")
for _ in $(seq 100); do
    echo '{"tag":32,"string":"hello"}' | /usr/bin/y3 send --addr "127.0.0.1:$port" --tag 0x20 > /dev/null
    kill -0 "$observer" 2>/dev/null || break
    sleep 0.1
done
wait "$observer"  # its output: {"tag":32,...,"payload_hex":"...68656c6c6f" ("hello")}
grep -q 68656c6c6f "$work/observed" || { echo "test-packages: nothing observed" >&2; exit 1; }
echo "installed y3 served, sent and observed: $(head -c 200 "$work/observed")"
# Offline verification of the installed unit; any finding (a bad key, a missing binary)
# fails the run.
findings="$(systemd-analyze verify /usr/lib/systemd/system/y3.service 2>&1)" || true
if [ -n "$findings" ]; then
    echo "$findings" >&2
    echo "test-packages: systemd-analyze verify y3.service has findings" >&2
    exit 1
fi
echo "systemd-analyze verify y3.service: clean ($(systemd-analyze --version | head -n 1))"
# Removed, the settings stay (a conffile, as Debian keeps them); purged, they go too.
as_root dpkg -r y3
[ ! -e /usr/bin/y3 ] && [ ! -e /usr/lib/systemd/system/y3.service ] && [ -f /etc/y3/y3.toml ]
as_root dpkg --purge y3
[ ! -e /etc/y3/y3.toml ]

step "python wheel"
venv="$work/wheel-builder"
python3 -m venv "$venv"
"$venv/bin/pip" install --disable-pip-version-check --quiet "maturin==$(sed -n 's/^MATURIN_VERSION=//p' scripts/python-test.sh)"
started=$SECONDS
(cd bindings/python && "$venv/bin/maturin" build --profile "${Y3_PY_PROFILE:-release}" --out "$work/wheels" --quiet)
wheel="$(ls "$work"/wheels/y3-*.whl)"
echo "built $(basename "$wheel") in $((SECONDS - started)) s"
python3 -m venv "$work/user-venv"
"$work/user-venv/bin/pip" install --disable-pip-version-check --no-index "$wheel"
port="$(serve "$Y3_BIN" "$work/py-serve.log")"
(cd "$work" && "$work/user-venv/bin/python" "$root/packaging/python/smoke.py" "127.0.0.1:$port")

step "go modules through a module proxy, no replace"
gover="v$version"
grep -q "github.com/y3-dev/y3/bindings/go $gover\$" bindings/go/client/go.mod ||
    { echo "test-packages: bindings/go/client/go.mod must require the codec at $gover" >&2; exit 1; }
python3 packaging/go/module-proxy.py "$work/goproxy" "$gover" bindings/go bindings/go/client
mkdir "$work/consumer"
cp packaging/go/consumer/main.go "$work/consumer/"
cp packaging/go/consumer/go.mod.in "$work/consumer/go.mod"
# A module cache of its own, so the repository's modules come from the proxy alone; the
# third-party ones from the user's module cache, itself laid out as a proxy.
(
    cd "$work/consumer"
    export GOMODCACHE="$work/gomodcache" GOFLAGS=-mod=mod GOSUMDB=off GOTOOLCHAIN=local
    export GOPROXY="file://$work/goproxy,file://$(go env GOMODCACHE)/cache/download"
    go get "github.com/y3-dev/y3/bindings/go@$gover" "github.com/y3-dev/y3/bindings/go/client@$gover"
    if grep -q replace go.mod; then echo "test-packages: the consumer has a replace" >&2; exit 1; fi
    go build -o consumer .
    go clean -modcache
)
port="$(serve "$Y3_BIN" "$work/go-serve.log")"
"$work/consumer/consumer" "127.0.0.1:$port"
echo "tags for this version: git tag bindings/go/$gover && git tag bindings/go/client/$gover"

# The README's `y3` command examples, with the outputs it shows.
step "README: the y3 command's examples"
y3="$Y3_BIN"
[ "$(echo '{"tag":16,"node":[{"tag":17,"float32":40}]}' | "$y3" encode)" = 900411024220 ]
[ "$("$y3" get --hex 900411024220 --path 0x10/0x11 --as float32)" = 40.0 ]
"$y3" inspect --hex 9017110242201206aec8bbba800013093132372e302e302e31 | grep -q float32=40.0
echo "encode, get and inspect print what the README says"

printf '\npackages: all installed and used\n'
