# Sourced by sh and bash scripts: apt for Debian's arm64 packages, with a
# private state of its own, arm64 only, from this machine's sources, under
# $APT_ARM64_DIR. Used by the aarch64 cross build (scripts/arm64-debs.sh),
# the arm64 root image (rootfs/build.sh) and the emulated aarch64 host
# (tests/kvmhost/run-aarch64).
#
# Why not `dpkg --add-architecture arm64`: that changes what apt-cache and
# dpkg answer for everything on this machine. It was tried: apt-cache's
# dependency closure of the root images picked up ":arm64" twins, arm64
# .debs landed in their download cache under the amd64 names' prefixes,
# and installing libfdt-dev:arm64 removed libfdt-dev (it is not
# multi-arch). Nothing here is installed; dpkg never hears of arm64.
#
#   apt-get $APT_ARM64_OPTS ...    apt-cache $APT_ARM64_OPTS ...
#   apt_arm64_lists                fetch the lists unless there are some
#   apt_arm64_update               fetch them again
# ($APT_ARM64_OPTS is split on blanks: the cache path must have none.)
APT_ARM64_DIR=${VMRUN_CACHE:-/var/cache/vmrun}/apt-arm64
APT_ARM64_OPTS="-o APT::Architecture=arm64 -o APT::Architectures::=arm64 \
-o Dir::State::Lists=$APT_ARM64_DIR/lists -o Dir::State::status=/dev/null \
-o Dir::Cache=$APT_ARM64_DIR -o Dir::Cache::archives=$APT_ARM64_DIR/archives -o Debug::NoLocking=1"

# flock: two runs must not write the same lists at once (apt's own
# locking is off: it would fail for a non-root caller).
apt_arm64_update() {
	mkdir -p "$APT_ARM64_DIR/lists/partial" "$APT_ARM64_DIR/archives/partial" &&
		# shellcheck disable=SC2086
		flock "$APT_ARM64_DIR/lock" apt-get $APT_ARM64_OPTS update -qq >"$APT_ARM64_DIR/update.log" 2>&1
}

apt_arm64_lists() {
	ls "$APT_ARM64_DIR/lists/" 2>/dev/null | grep -q _Packages || apt_arm64_update
}
