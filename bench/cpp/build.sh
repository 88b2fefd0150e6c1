#!/usr/bin/env bash
# Builds the asio peer of the network lab: bench/cpp/build/pingpong_asio, with g++ against
# Debian's standalone asio headers (package libasio-dev, installed here when missing and we
# are root). Run by scripts/bench-net.sh; never by the test command.
set -euo pipefail
cd "$(dirname "$0")"

if [ ! -f /usr/include/asio.hpp ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq libasio-dev >/dev/null 2>&1 ||
            { apt-get update -qq && apt-get install -y -qq libasio-dev >/dev/null; }
    else
        echo "build.sh: /usr/include/asio.hpp missing: apt-get install libasio-dev" >&2
        exit 1
    fi
fi

mkdir -p build
"${CXX:-g++}" -std=c++17 -O2 -DNDEBUG -DASIO_STANDALONE -DASIO_NO_DEPRECATED -pthread \
    -Wall -Wextra -o build/pingpong_asio pingpong_asio.cpp
echo "built bench/cpp/build/pingpong_asio ($(build/pingpong_asio version))"
