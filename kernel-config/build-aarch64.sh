#!/bin/sh
# Builds the arm64 guest kernel from Debian's linux-source-6.1 and
# guest-aarch64.config, cross-compiled with Debian's gcc-aarch64-linux-gnu,
# into $1 (the Image; kernel.config goes beside it). A second argument names
# a fragment of options added to it, as build.sh's third does for x86.
#
# A script of its own rather than an arch argument to build.sh: build.sh's
# cache key hashes build.sh itself, so any edit to it would throw away every
# cached x86 kernel. The steps are the same; keep the two in step.
#
# Cached in $VMRUN_CACHE (default /var/cache/vmrun) as kernel-aarch64-<key>,
# keyed by the fragment, this script, the source package version and the
# cross compiler's version.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
out_image=$1
extra=${2:-}
frag="$here/guest-aarch64.config"
src_tar=/usr/src/linux-source-6.1.tar.xz
cache_root=${VMRUN_CACHE:-/var/cache/vmrun}
cross=aarch64-linux-gnu-

[ -r "$src_tar" ] || { echo "kernel-aarch64: $src_tar missing (run 'make deps')" >&2; exit 1; }
command -v "${cross}gcc" >/dev/null 2>&1 ||
	{ echo "kernel-aarch64: ${cross}gcc missing (run 'make deps')" >&2; exit 1; }
srcver=$(dpkg-query -W -f='${Version}' linux-source-6.1)
ccver=$("${cross}gcc" --version | head -n 1)
both=""
trap 'rm -rf ${work:+"$work"} ${both:+"$both"}' EXIT
if [ -n "$extra" ]; then
	[ -r "$extra" ] || { echo "kernel-aarch64: fragment $extra missing" >&2; exit 1; }
	both=$(mktemp)
	cat "$frag" "$extra" >"$both"
	frag=$both
fi
key=$( { cat "$frag" "$0"; echo "$srcver"; echo "$ccver"; } | sha256sum | cut -c1-16)
cdir="$cache_root/kernel-aarch64-$key"

if [ ! -f "$cdir/Image" ]; then
	start=$(date +%s)
	work="$cache_root/kernel-build-aarch64-$key.$$"
	rm -rf "$work"
	mkdir -p "$work"
	echo "kernel-aarch64: building linux-source-6.1 $srcver (cache key $key)"
	tar -xf "$src_tar" -C "$work"
	ksrc="$work/linux-source-6.1"
	kmake() { make -s -C "$ksrc" ARCH=arm64 CROSS_COMPILE="$cross" "$@"; }
	kmake KCONFIG_ALLCONFIG="$frag" allnoconfig
	# Every option the fragment sets must have survived dependency resolution.
	grep -E '^CONFIG_[A-Z0-9_]+=' "$frag" | while IFS= read -r line; do
		grep -qxF "$line" "$ksrc/.config" || { echo "kernel-aarch64: config lost: $line" >&2; exit 1; }
	done
	kmake -j"$(nproc)" Image
	img="$ksrc/arch/arm64/boot/Image"
	# vmm's loader refuses an Image without the arm64 magic; fail here, where
	# the cause is plain, rather than at the first boot.
	[ "$(od -An -tx1 -j56 -N4 "$img" | tr -d ' \n')" = 41524d64 ] ||
		{ echo "kernel-aarch64: $img lacks the arm64 Image magic" >&2; exit 1; }
	rm -rf "$cdir.tmp"
	mkdir -p "$cdir.tmp"
	cp "$img" "$ksrc/.config" "$cdir.tmp/"
	rm -rf "$cdir"
	mv "$cdir.tmp" "$cdir"
	echo "kernel-aarch64: built in $(( $(date +%s) - start )) s"
fi
mkdir -p "$(dirname "$out_image")"
cp "$cdir/Image" "$out_image"
cp "$cdir/.config" "$(dirname "$out_image")/kernel.config"
echo "kernel-aarch64: Image $(stat -c %s "$out_image") bytes (cache $cdir)"
