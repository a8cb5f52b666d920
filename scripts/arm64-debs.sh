#!/bin/sh
# arm64-debs.sh DEST PKG...: unpack Debian's arm64 builds of PKG... (exact
# names, no dependencies followed) into DEST, for the aarch64 cross build
# (libseccomp, libfdt and cmocka to link vmm and its seccomp test). Prints
# each "name version" it unpacked. apt runs with the private arm64 state of
# scripts/apt-arm64.sh (nothing installed); the .debs stay in its archives,
# so a later run needs no network.
set -eu
dest=$1
shift
. "$(dirname "$0")/apt-arm64.sh"
apt_arm64_lists || { echo "arm64-debs: apt-get update failed (see $APT_ARM64_DIR/update.log)" >&2; exit 1; }
mkdir -p "$dest"
fresh=0
for p in "$@"; do
	# shellcheck disable=SC2086
	v=$(apt-cache $APT_ARM64_OPTS policy "$p" | sed -n 's/^  Candidate: //p')
	if [ -z "$v" ] || [ "$v" = "(none)" ]; then
		echo "arm64-debs: no arm64 package $p" >&2
		exit 1
	fi
	deb=$(ls "$APT_ARM64_DIR/archives/${p}_$(echo "$v" | sed 's/:/%3a/')_"*.deb 2>/dev/null | head -n 1)
	if [ -z "$deb" ]; then
		# shellcheck disable=SC2086
		(cd "$APT_ARM64_DIR/archives" && apt-get $APT_ARM64_OPTS download "$p=$v" >/dev/null 2>&1) ||
			{ [ "$fresh" = 0 ] && apt_arm64_update && fresh=1 &&
				(cd "$APT_ARM64_DIR/archives" && apt-get $APT_ARM64_OPTS download "$p=$v" >/dev/null 2>&1); } ||
			{ echo "arm64-debs: cannot download $p $v" >&2; exit 1; }
		deb=$(ls "$APT_ARM64_DIR/archives/${p}_$(echo "$v" | sed 's/:/%3a/')_"*.deb | head -n 1)
	fi
	dpkg-deb -x "$deb" "$dest"
	echo "$p $v"
done
