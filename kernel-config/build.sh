#!/bin/sh
# Builds the guest kernel from Debian's linux-source-6.1 and the arch's
# fragment beside this script:
#   build.sh VMLINUX BZIMAGE [EXTRA]        x86_64 (guest-x86_64.config)
#   build.sh --arch aarch64 IMAGE [EXTRA]   arm64 (guest-aarch64.config),
#                                           cross-built with Debian's
#                                           gcc-aarch64-linux-gnu
# kernel.config goes beside the first output. EXTRA names a fragment of
# options added to the arch's (the evaluation's test-only kernel:
# tests/eval/kernel-attack.config), which is part of the cache key.
#
# The build is cached outside the tree, in $VMRUN_CACHE (default
# /var/cache/vmrun), as kernel-<key> (x86_64) or kernel-aarch64-<key>, keyed
# by a hash of the fragment, this script, the source package version and
# the compiler's version: a clean clone on a machine that built the same
# kernel before copies it in seconds. Hashing the whole script means any
# edit of it rebuilds both arches' kernels (3-7 min each on 2 cores): a
# step changed for one arch can never be missed by the key.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
arch=x86_64
if [ "${1:-}" = --arch ]; then
	arch=$2
	shift 2
fi
case $arch in
x86_64)
	out1=$1 out2=$2
	shift 2
	kmake_arch="ARCH=x86_64"
	cc=gcc
	targets="vmlinux bzImage"
	built="vmlinux arch/x86/boot/bzImage"
	name=kernel
	;;
aarch64)
	out1=$1 out2=""
	shift
	kmake_arch="ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu-"
	cc=aarch64-linux-gnu-gcc
	targets=Image
	built=arch/arm64/boot/Image
	name=kernel-aarch64
	;;
*) echo "kernel: --arch $arch: x86_64 or aarch64" >&2; exit 1 ;;
esac
extra=${1:-}
frag="$here/guest-$arch.config"
src_tar=/usr/src/linux-source-6.1.tar.xz
cache_root=${VMRUN_CACHE:-/var/cache/vmrun}

[ -r "$src_tar" ] || { echo "$name: $src_tar missing (run 'make deps')" >&2; exit 1; }
command -v "$cc" >/dev/null 2>&1 || { echo "$name: $cc missing (run 'make deps')" >&2; exit 1; }
srcver=$(dpkg-query -W -f='${Version}' linux-source-6.1)
ccver=$("$cc" --version | head -n 1)
both=""
work=""
trap 'rm -rf ${work:+"$work"} ${both:+"$both"}' EXIT
if [ -n "$extra" ]; then
	[ -r "$extra" ] || { echo "$name: fragment $extra missing" >&2; exit 1; }
	both=$(mktemp)
	cat "$frag" "$extra" >"$both"
	frag=$both
fi
key=$( { cat "$frag" "$0"; echo "$srcver"; echo "$ccver"; } | sha256sum | cut -c1-16)
cdir="$cache_root/$name-$key"

missing=0
for f in $built; do [ -f "$cdir/$(basename "$f")" ] || missing=1; done
if [ "$missing" = 1 ]; then
	start=$(date +%s)
	work="$cache_root/$name-build-$key.$$"
	rm -rf "$work"
	mkdir -p "$work"
	echo "$name: building linux-source-6.1 $srcver (cache key $key)"
	tar -xf "$src_tar" -C "$work"
	ksrc="$work/linux-source-6.1"
	# shellcheck disable=SC2086 # kmake_arch and targets are word lists
	make -s -C "$ksrc" $kmake_arch KCONFIG_ALLCONFIG="$frag" allnoconfig
	# Every option the fragment sets must have survived dependency resolution.
	grep -E '^CONFIG_[A-Z0-9_]+=' "$frag" | while IFS= read -r line; do
		grep -qxF "$line" "$ksrc/.config" || { echo "$name: config lost: $line" >&2; exit 1; }
	done
	# shellcheck disable=SC2086
	make -s -C "$ksrc" $kmake_arch -j"$(nproc)" $targets
	# vmm's arm64 loader refuses an Image without the arm64 magic; fail
	# here, where the cause is plain, rather than at the first boot.
	[ "$arch" != aarch64 ] || [ "$(od -An -tx1 -j56 -N4 "$ksrc/$built" | tr -d ' \n')" = 41524d64 ] ||
		{ echo "$name: $built lacks the arm64 Image magic" >&2; exit 1; }
	rm -rf "$cdir.tmp"
	mkdir -p "$cdir.tmp"
	for f in $built; do cp "$ksrc/$f" "$cdir.tmp/"; done
	cp "$ksrc/.config" "$cdir.tmp/"
	rm -rf "$cdir"
	mv "$cdir.tmp" "$cdir"
	echo "$name: built in $(( $(date +%s) - start )) s"
fi
# The outputs in the order $built names their files.
said=""
for f in $built; do
	out=$out1
	[ -n "$said" ] && out=$out2
	mkdir -p "$(dirname "$out")"
	cp "$cdir/$(basename "$f")" "$out"
	said="$said${said:+, }$(basename "$f") $(stat -c %s "$out") bytes"
done
cp "$cdir/.config" "$(dirname "$out1")/kernel.config"
echo "$name: $said (cache $cdir)"
