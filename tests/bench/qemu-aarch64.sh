#!/bin/sh
# tests/bench/qemu-aarch64.sh DEST: Debian's arm64 qemu-system-aarch64 and
# the shared libraries it links, unpacked into DEST (nothing installed),
# for the arm64 boot benchmark's peer (tests/bench/boot_aarch64.sh) inside
# the emulated aarch64 host, whose busybox userland has no loader or libc.
# Run it there through the arm64 loader it brings:
#   DEST/lib/ld-linux-aarch64.so.1 --library-path D1:D2:... \
#     DEST/usr/bin/qemu-system-aarch64 ...
# where D1, D2, ... are DEST/ followed by each line of DEST/library-dirs.
# DEST/packages lists each "name version" unpacked.
#
# The closure is apt's, from the private arm64 state of scripts/apt-arm64.sh:
# Depends and Pre-Depends, no Recommends, followed from qemu-system-arm, less
# the packages below, which the binary does not need to boot a kernel with
# -nodefaults. Every NEEDED library of every ELF file unpacked is then
# checked to be there, so a closure that lost one fails here, not inside the
# emulated host.
#
# Cached: DEST is rebuilt only when it lacks the binary or was made by
# another version of this script; a rebuild needs no network once the
# .debs are in the apt state's archives.
set -eu

dest=${1:?usage: tests/bench/qemu-aarch64.sh DEST}
here=$(cd "$(dirname "$0")" && pwd)
scripts=$here/../../scripts
# qemu-system-common: the helpers (bridge, pr-helper), docs and the
#   UI/audio/USB modules, all loaded only for options we do not give.
# qemu-system-data: firmware, option ROMs and keymaps: -kernel boots
#   without firmware, and -nodefaults leaves no NIC whose ROM it would load.
# gcc-12-base: only docs. adduser: libibverbs1's postinst makes a group; it
#   would bring perl, passwd, PAM and debconf.
# libsasl2-modules-db: SASL plugins, loaded only for VNC's SASL auth.
skip="qemu-system-common qemu-system-data gcc-12-base adduser libsasl2-modules-db"

key=$(cat "$0" "$scripts/arm64-debs.sh" "$scripts/apt-arm64.sh" | sha256sum | cut -c1-16)
if [ -x "$dest/usr/bin/qemu-system-aarch64" ] && [ "$(cat "$dest/.key" 2>/dev/null)" = "$key" ]; then
	exit 0
fi

# shellcheck disable=SC1091 # scripts/apt-arm64.sh
. "$scripts/apt-arm64.sh"
apt_arm64_lists || { echo "qemu-aarch64: apt-get update failed (see $APT_ARM64_DIR/update.log)" >&2; exit 1; }

# Breadth first, one apt-cache call per level. An alternative ("a | b")
# brings both: rare among libraries, and harmless.
seen=" "
level=qemu-system-arm
while [ -n "$level" ]; do
	next=""
	for p in $level; do
		case "$seen$skip " in *" $p "*) continue ;; esac
		seen="$seen$p "
		next="$next $p"
	done
	[ -n "$next" ] || break
	# shellcheck disable=SC2086
	level=$(apt-cache $APT_ARM64_OPTS depends --no-recommends --no-suggests --no-conflicts \
		--no-breaks --no-replaces --no-enhances $next |
		sed -n 's/^ *|\{0,1\}\(Pre\)\{0,1\}Depends: \([^<].*\)$/\2/p' | sort -u)
done

tmp=$dest.tmp
rm -rf "$tmp"
# shellcheck disable=SC2086
"$scripts/arm64-debs.sh" "$tmp" $seen >"$tmp.packages"
mv "$tmp.packages" "$tmp/packages"
# Only shared libraries and the binary are needed; the rest is bulk that
# travels over 9p into the emulated host for nothing.
rm -rf "${tmp:?}/usr/share" "$tmp/usr/lib/aarch64-linux-gnu/gconv" "${tmp:?}/etc" "${tmp:?}/var" \
	"$tmp/usr/sbin" "$tmp/sbin"
find "$tmp/usr/bin" -type f ! -name qemu-system-aarch64 -exec rm -f {} +

# Debian's arm64 libc6 puts the loader in /lib (usrmerge is not applied by
# dpkg-deb -x); every library directory the closure has goes on its path.
[ -e "$tmp/lib/ld-linux-aarch64.so.1" ] || { echo "qemu-aarch64: no lib/ld-linux-aarch64.so.1 in libc6" >&2; exit 1; }
for d in lib/aarch64-linux-gnu usr/lib/aarch64-linux-gnu lib usr/lib; do
	[ ! -d "$tmp/$d" ] || echo "$d"
done >"$tmp/library-dirs"

# The check: every NEEDED soname of the binary and of each library is a
# file (or link) in one of those directories.
missing=""
for f in "$tmp/usr/bin/qemu-system-aarch64" $(find "$tmp" -name '*.so*' -type f); do
	for so in $(readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
		found=0
		for d in lib/aarch64-linux-gnu usr/lib/aarch64-linux-gnu lib usr/lib; do
			[ -e "$tmp/$d/$so" ] && { found=1; break; }
		done
		[ "$found" = 1 ] || missing="$missing $so(${f#"$tmp"/})"
	done
done
[ -z "$missing" ] || { echo "qemu-aarch64: libraries missing from the closure:$missing" >&2; exit 1; }

echo "$key" >"$tmp/.key"
rm -rf "$dest"
mv "$tmp" "$dest"
echo "qemu-aarch64: $(wc -l <"$dest/packages") packages, $(du -sh "$dest" | cut -f1) in $dest"
