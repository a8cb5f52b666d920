#!/bin/sh
# Builds the guest kernel from Debian's linux-source-6.1 and the arch's
# fragment beside this script:
#   build.sh [--also EXTRA] VMLINUX BZIMAGE [EXTRA]
#                                           x86_64 (guest-x86_64.config)
#   build.sh --arch aarch64 IMAGE [EXTRA]   arm64 (guest-aarch64.config),
#                                           cross-built with Debian's
#                                           gcc-aarch64-linux-gnu
# kernel.config goes beside the first output. EXTRA names a fragment of
# options added to the arch's (the evaluation's test-only kernel:
# tests/eval/kernel-attack.config), which is part of the cache key.
# --also EXTRA: when this build misses its cache, the kernel with EXTRA
# is built next in the same tree (an incremental build: kbuild remakes
# only what the changed options touch) and cached under its own key, so
# that the later `build.sh ... EXTRA` finds it instead of building a
# whole kernel again.
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
also=""
while :; do
	case ${1:-} in
	--arch) arch=$2; shift 2 ;;
	--also) also=$2; shift 2 ;;
	*) break ;;
	esac
done
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
work=""
frags=$(mktemp -d)
trap 'rm -rf ${work:+"$work"} "$frags"' EXIT
# fragment_with EXTRA: the arch's fragment, with EXTRA's options after it
# when EXTRA is not empty (a file in $frags, gone at exit).
fragment_with() {
	[ -n "$1" ] || { echo "$frag"; return; }
	[ -r "$1" ] || { echo "$name: fragment $1 missing" >&2; exit 1; }
	cat "$frag" "$1" >"$frags/$(basename "$1")"
	echo "$frags/$(basename "$1")"
}
# cache_dir FRAGMENT: the cache entry of the kernel that FRAGMENT makes.
cache_dir() {
	echo "$cache_root/$name-$( { cat "$1" "$0"; echo "$srcver"; echo "$ccver"; } | sha256sum | cut -c1-16)"
}
# cached DIR: whether DIR holds every file the build makes.
cached() {
	for f in $built; do [ -f "$1/$(basename "$f")" ] || return 1; done
}
# configure_and_make TREE FRAGMENT: the kernel FRAGMENT asks for, in TREE
# (a first build, or again over an earlier one's objects).
configure_and_make() {
	# shellcheck disable=SC2086 # kmake_arch and targets are word lists
	make -s -C "$1" $kmake_arch KCONFIG_ALLCONFIG="$2" allnoconfig
	# Every option the fragment sets must have survived dependency resolution.
	grep -E '^CONFIG_[A-Z0-9_]+=' "$2" | while IFS= read -r line; do
		grep -qxF "$line" "$1/.config" || { echo "$name: config lost: $line" >&2; exit 1; }
	done
	# shellcheck disable=SC2086
	make -s -C "$1" $kmake_arch -j"$(nproc)" $targets
	# vmm's arm64 loader refuses an Image without the arm64 magic; fail
	# here, where the cause is plain, rather than at the first boot.
	[ "$arch" != aarch64 ] || [ "$(od -An -tx1 -j56 -N4 "$1/$built" | tr -d ' \n')" = 41524d64 ] ||
		{ echo "$name: $built lacks the arm64 Image magic" >&2; exit 1; }
}
# publish TREE DIR: the built files and .config into the cache entry DIR.
publish() {
	rm -rf "$2.tmp"
	mkdir -p "$2.tmp"
	for f in $built; do cp "$1/$f" "$2.tmp/"; done
	cp "$1/.config" "$2.tmp/"
	rm -rf "$2"
	mv "$2.tmp" "$2"
}

frag_main=$(fragment_with "$extra")
cdir=$(cache_dir "$frag_main")
key=${cdir##*-}
if ! cached "$cdir"; then
	start=$(date +%s)
	work="$cache_root/$name-build-$key.$$"
	rm -rf "$work"
	mkdir -p "$work"
	echo "$name: building linux-source-6.1 $srcver (cache key $key)"
	tar -xf "$src_tar" -C "$work"
	ksrc="$work/linux-source-6.1"
	configure_and_make "$ksrc" "$frag_main"
	publish "$ksrc" "$cdir"
	echo "$name: built in $(( $(date +%s) - start )) s"
	if [ -n "$also" ]; then
		frag_also=$(fragment_with "$also")
		adir=$(cache_dir "$frag_also")
		if ! cached "$adir"; then
			start=$(date +%s)
			configure_and_make "$ksrc" "$frag_also"
			publish "$ksrc" "$adir"
			echo "$name: with $also built in the same tree in $(( $(date +%s) - start )) s (cache $adir)"
		fi
	fi
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
