#!/bin/sh
# Installs every Debian package the project needs, on a fresh Debian 12
# machine as root. Idempotent: apt is touched only when something is missing,
# and `apt-get update` runs first then, since a fresh machine has stale lists.
set -eu

PKGS="build-essential ccache pkg-config libext2fs-dev libcmocka-dev libseccomp-dev
libmicrohttpd-dev libjansson-dev libsqlite3-dev postgresql libpq-dev curl
musl-tools linux-source-6.1 busybox-static qemu-system-x86 flex bison
libelf-dev bc libssl-dev clang libclang-rt-14-dev cpio e2fsprogs kmod
xz-utils zstd python3 file procps libidn2-dev libhttp-parser-dev libc-ares-dev
dnsmasq-base iproute2 openssl bzip2 debian-archive-keyring libfdt-dev
device-tree-compiler gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-system-arm
libarchive-dev jq libcurl4-openssl-dev"

# node and npm: npm fetches the Piston client vmrund's test uses, node runs
# it. Debian's own unless a node with npm is there already (NodeSource's
# nodejs package brings npm and conflicts with Debian's).
command -v npm >/dev/null 2>&1 || PKGS="$PKGS nodejs npm"

missing=""
for p in $PKGS; do
	st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$st" = installed ] || missing="$missing $p"
done
if [ -z "$missing" ]; then
	echo "deps: all $(echo $PKGS | wc -w) packages present"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "deps: missing packages:$missing (run 'make deps' as root)" >&2
	exit 1
fi
echo "deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing
