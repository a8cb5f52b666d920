#!/bin/sh
# arm64-debs.sh DEST PKG...: unpack Debian's arm64 builds of PKG... (exact
# names, no dependencies followed) into DEST, for the aarch64 cross build
# (libseccomp and libfdt to link vmm) and the emulated aarch64 host (its
# kernel and busybox). Prints each "name version" it unpacked.
#
# Why not `dpkg --add-architecture arm64`: that changes what apt-cache and
# dpkg-query answer for everything on this machine (the root images' package
# closure picked up ":arm64" twins). Instead apt runs with a private state
# of its own, arm64 only, under ${VMRUN_CACHE:-/var/cache/vmrun}/apt-arm64,
# from this machine's sources; nothing is installed. The .debs are kept
# there, so a later run needs no network.
set -eu
dest=$1
shift
cache=${VMRUN_CACHE:-/var/cache/vmrun}/apt-arm64
mkdir -p "$cache/lists/partial" "$cache/archives/partial" "$dest"
apt_arm64() {
	apt-get -q -o APT::Architecture=arm64 -o APT::Architectures::=arm64 \
		-o Dir::State::Lists="$cache/lists" -o Dir::State::status=/dev/null \
		-o Dir::Cache="$cache" -o Dir::Cache::archives="$cache/archives" \
		-o Debug::NoLocking=1 "$@"
}
# The lists are fetched once, and again when a version they name is gone.
fresh=0
[ -n "$(ls "$cache/lists" 2>/dev/null | grep _Packages)" ] || { apt_arm64 update >/dev/null; fresh=1; }
for p in "$@"; do
	v=$(apt-cache -o APT::Architecture=arm64 -o APT::Architectures::=arm64 \
		-o Dir::State::Lists="$cache/lists" -o Dir::State::status=/dev/null -o Dir::Cache="$cache" \
		policy "$p" | sed -n 's/^  Candidate: //p')
	if [ -z "$v" ] || [ "$v" = "(none)" ]; then
		echo "arm64-debs: no arm64 package $p" >&2
		exit 1
	fi
	deb=$(ls "$cache/archives/${p}_$(echo "$v" | sed 's/:/%3a/')_"*.deb 2>/dev/null | head -n 1)
	if [ -z "$deb" ]; then
		(cd "$cache/archives" && apt_arm64 download "$p=$v" >/dev/null 2>&1) ||
			{ [ "$fresh" = 0 ] && apt_arm64 update >/dev/null && fresh=1 &&
				(cd "$cache/archives" && apt_arm64 download "$p=$v" >/dev/null 2>&1); } ||
			{ echo "arm64-debs: cannot download $p $v" >&2; exit 1; }
		deb=$(ls "$cache/archives/${p}_$(echo "$v" | sed 's/:/%3a/')_"*.deb | head -n 1)
	fi
	dpkg-deb -x "$deb" "$dest"
	echo "$p $v"
done
