#!/bin/sh
# Builds the guest kernel from Debian's linux-source-6.1 and the fragment
# beside this script, into $1 (vmlinux) and $2 (bzImage). A third argument
# names a fragment of options added to it (the evaluation's test-only
# kernel: tests/eval/kernel-attack.config), which is part of the cache key.
#
# The build is cached outside the tree, in $VMRUN_CACHE (default
# /var/cache/vmrun), keyed by a hash of the fragment, this script, the source
# package version and the compiler version: a clean clone on a machine that
# built the same kernel before copies it in seconds.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
out_vmlinux=$1
out_bzimage=$2
extra=${3:-}
frag="$here/guest-x86_64.config"
src_tar=/usr/src/linux-source-6.1.tar.xz
cache_root=${VMRUN_CACHE:-/var/cache/vmrun}

[ -r "$src_tar" ] || { echo "kernel: $src_tar missing (run 'make deps')" >&2; exit 1; }
srcver=$(dpkg-query -W -f='${Version}' linux-source-6.1)
ccver=$(gcc --version | head -n 1)
if [ -n "$extra" ]; then
	[ -r "$extra" ] || { echo "kernel: fragment $extra missing" >&2; exit 1; }
	both=$(mktemp)
	cat "$frag" "$extra" >"$both"
	frag=$both
fi
key=$( { cat "$frag" "$0"; echo "$srcver"; echo "$ccver"; } | sha256sum | cut -c1-16)
cdir="$cache_root/kernel-$key"

if [ ! -f "$cdir/vmlinux" ] || [ ! -f "$cdir/bzImage" ]; then
	start=$(date +%s)
	work="$cache_root/kernel-build-$key.$$"
	rm -rf "$work"
	mkdir -p "$work"
	trap 'rm -rf "$work" ${both:+"$both"}' EXIT
	echo "kernel: building linux-source-6.1 $srcver (cache key $key)"
	tar -xf "$src_tar" -C "$work"
	ksrc="$work/linux-source-6.1"
	make -s -C "$ksrc" ARCH=x86_64 KCONFIG_ALLCONFIG="$frag" allnoconfig
	# Every option the fragment sets must have survived dependency resolution.
	bad=0
	grep -E '^CONFIG_[A-Z0-9_]+=' "$frag" | while IFS= read -r line; do
		grep -qxF "$line" "$ksrc/.config" || { echo "kernel: config lost: $line" >&2; exit 1; }
	done || bad=1
	[ "$bad" = 0 ] || exit 1
	make -s -C "$ksrc" ARCH=x86_64 -j"$(nproc)" vmlinux bzImage
	mkdir -p "$cdir.tmp"
	cp "$ksrc/vmlinux" "$ksrc/arch/x86/boot/bzImage" "$ksrc/.config" "$cdir.tmp/"
	rm -rf "$cdir"
	mv "$cdir.tmp" "$cdir"
	echo "kernel: built in $(( $(date +%s) - start )) s"
fi
[ -z "$extra" ] || rm -f "$both"
mkdir -p "$(dirname "$out_vmlinux")" "$(dirname "$out_bzimage")"
cp "$cdir/vmlinux" "$out_vmlinux"
cp "$cdir/bzImage" "$out_bzimage"
cp "$cdir/.config" "$(dirname "$out_vmlinux")/kernel.config"
echo "kernel: vmlinux $(stat -c %s "$out_vmlinux") bytes, bzImage $(stat -c %s "$out_bzimage") bytes (cache $cdir)"
