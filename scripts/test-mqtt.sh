#!/usr/bin/env bash
# Devices over MQTT (issue 31): installs the real MQTT software the tests use — Debian's
# mosquitto and mosquitto-clients (mosquitto_pub/mosquitto_sub, also used by the Rust tests in
# crates/y3-router/tests/mqtt.rs and interop/yomo/mqtt_test.go, which run later in
# scripts/test.sh) and paho-mqtt in a virtual environment — then runs the paho tests
# (interop/mqtt/test_paho.py) against `y3 serve` (Y3_BIN, else `cargo build -p y3-cli` here).
# A tool that cannot be installed fails the run.
#
#   scripts/test-mqtt.sh [pytest args...]
#   scripts/test-mqtt.sh install      (the tools only: scripts/test.sh installs them before
#                                      the Rust tests, and runs the paho tests once y3 is built)
set -euo pipefail
cd "$(dirname "$0")/.."

PAHO_VERSION=2.1.0
PYTEST_VERSION=9.2.0

if ! command -v mosquitto_pub >/dev/null || ! command -v mosquitto_sub >/dev/null ||
    ! command -v mosquitto >/dev/null; then
    if [ "$(id -u)" = 0 ]; then apt=(apt-get); else apt=(sudo -n apt-get); fi
    "${apt[@]}" install -y mosquitto mosquitto-clients ||
        { "${apt[@]}" update && "${apt[@]}" install -y mosquitto mosquitto-clients; }
fi
command -v mosquitto mosquitto_pub mosquitto_sub

target="$(mkdir -p "${CARGO_TARGET_DIR:-target}" && cd "${CARGO_TARGET_DIR:-target}" && pwd)"
venv="$target/mqtt-venv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet "paho-mqtt==$PAHO_VERSION" "pytest==$PYTEST_VERSION"
if [ "${1:-}" = install ]; then exit 0; fi

if [ -z "${Y3_BIN:-}" ]; then
    cargo build -p y3-cli --locked
    Y3_BIN="$target/debug/y3"
fi
Y3_BIN="$Y3_BIN" "$venv/bin/python" -m pytest -q interop/mqtt/test_paho.py "$@"
