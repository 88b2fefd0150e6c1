#!/usr/bin/env bash
# Builds the y3 Debian package from a built `y3` binary, with dpkg-deb (Debian's own
# packaging tool, on every Debian and Ubuntu system):
#
#   packaging/deb/build-deb.sh BIN OUT_DIR      -> OUT_DIR/y3_<version>_<arch>.deb
#
# The version is the binary's own (`y3 --version`), so the package cannot disagree with
# what it carries. The binary is copied without its symbols. Contents:
#
#   /usr/bin/y3                          the command (router, clients, codec tools)
#   /usr/lib/systemd/system/y3.service   the router as a service (packaging/systemd/)
#   /etc/y3/y3.toml                      its settings (a conffile: edits survive upgrades)
#   /usr/share/doc/y3/copyright          the licence
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: $0 BIN OUT_DIR" >&2; exit 2; }
bin="$1"
out="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="$(cd "$here/.." && pwd)"

version="$("$bin" --version | awk '$1 == "y3" { print $2 }')"
[ -n "$version" ] || { echo "build-deb: cannot read the version from $bin --version" >&2; exit 1; }
arch="$(dpkg --print-architecture)"

stage="$(mktemp -d)"
chmod 0755 "$stage"
trap 'rm -rf "$stage"' EXIT
install -d "$stage/DEBIAN" "$stage/usr/bin" "$stage/usr/lib/systemd/system" \
    "$stage/etc/y3" "$stage/usr/share/doc/y3"
objcopy --strip-all "$bin" "$stage/usr/bin/y3"
chmod 0755 "$stage/usr/bin/y3"
install -m 0644 "$here/systemd/y3.service" "$stage/usr/lib/systemd/system/y3.service"
install -m 0644 "$here/etc/y3.toml" "$stage/etc/y3/y3.toml"
install -m 0644 "$root/LICENSE" "$stage/usr/share/doc/y3/copyright"
echo /etc/y3/y3.toml > "$stage/DEBIAN/conffiles"

cat > "$stage/DEBIAN/control" <<CONTROL
Package: y3
Version: $version
Architecture: $arch
Maintainer: y3 developers <y3@invalid>
Section: net
Priority: optional
Depends: libc6
Installed-Size: $(du -sk "$stage" | cut -f1)
Homepage: https://github.com/y3-dev/y3
Description: Y3 codec tools and a router that speaks YoMo v1.22's wire protocol
 y3 serve is a router for YoMo sources, stream functions and zippers (QUIC and
 TCP, tokens, TLS, metrics); y3 send, observe, encode and inspect are the
 command-line clients and codec tools. The systemd unit y3.service runs the
 router with the settings in /etc/y3/y3.toml.
CONTROL

# systemd learns about the unit; it is not started until `systemctl enable --now y3`.
for script in postinst postrm; do
    cat > "$stage/DEBIAN/$script" <<'SCRIPT'
#!/bin/sh
set -e
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
    systemctl daemon-reload || true
fi
SCRIPT
    chmod 0755 "$stage/DEBIAN/$script"
done

mkdir -p "$out"
deb="$out/y3_${version}_${arch}.deb"
# gzip: xz takes minutes for a debug build on 2 cores, for a few MB saved.
dpkg-deb --root-owner-group -Zgzip --build "$stage" "$deb" >/dev/null
echo "$deb"
