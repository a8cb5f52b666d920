#!/bin/sh
# build.sh OUT AGENT MANIFEST: builds the read-only guest root image OUT
# (ext4) of one runtime (rootfs/runtimes/NAME, format in its README) with
# mke2fs -d from a staging tree:
#   /init          the guest agent (AGENT, static), also /sbin/init
#   /bin/busybox   static, with its applet links
#   the runtime    the closure of the manifest's Debian packages (apt-get
#                  download, dependencies resolved by apt-cache against the
#                  archives, never this machine's installed versions),
#                  unpacked without maintainer scripts, less the paths
#                  the manifest's `remove` names and with the links its
#                  `links` names (those update-alternatives would make)
#                  and vmrun's helpers its `install` names;
#                  Python's standard library byte-compiled where the
#                  manifest says so
#   /etc/passwd, /etc/group with the unprivileged `sandbox` user
#   /etc/ssl/certs/ca-certificates.crt where the packages hold
#                  ca-certificates (what its maintainer script makes)
#   /etc/vmrun/programs  the manifest of programs offered, which is also
#                  written next to the image as NAME.programs: the
#                  runtime's allowlist
# and NAME.runtime beside it: the manifest with the version read from the
# package (`version-of`), for vmrun to list and look up.
#
# ROOTFS_ARCH=arm64 builds the image of an arm64 guest on this x86_64
# machine: the packages are Debian's arm64 ones (apt with the private
# state of scripts/apt-arm64.sh), busybox is busybox-static's arm64 binary
# (its applet links listed by this machine's busybox of the same version,
# as an arm64 binary cannot run here), AGENT must be an arm64 build, and
# the manifest's check, which runs the runtime, is not run.
#
# Reproducible: the same inputs give the same image bytes. File times are
# pinned, the UUID and directory hash seed are fixed, mke2fs's clock is
# faked, the staging tree sits on tmpfs, whose readdir order depends only on
# creation order, and bytecode uses hash-based invalidation. The image is
# cached under $VMRUN_CACHE keyed by every input, so a rebuild with nothing
# changed is a copy.
set -eu

out=$1
agent=$2
manifest=$3
here=$(cd "$(dirname "$0")" && pwd)
start=$(date +%s%N)
cache=${VMRUN_CACHE:-/var/cache/vmrun}
BUSYBOX=/bin/busybox
PYTHON=/usr/bin/python3.11
# apt-cache against the archives alone: a package installed here from
# elsewhere (nodesource's nodejs) must not pick the version or its
# dependencies.
APT_CACHE="apt-cache -o Dir::State::status=/dev/null"
APT_GET="apt-get"
native=$(dpkg --print-architecture)
arch=${ROOTFS_ARCH:-$native}
if [ "$arch" != "$native" ]; then
	[ "$arch" = arm64 ] || { echo "rootfs: ROOTFS_ARCH=$arch: only arm64 is known besides $native" >&2; exit 1; }
	. "$here/../scripts/apt-arm64.sh"
	apt_arm64_lists || { echo "rootfs: arm64 apt-get update failed (see $APT_ARM64_DIR/update.log)" >&2; exit 1; }
	APT_CACHE="apt-cache $APT_ARM64_OPTS"
	APT_GET="apt-get $APT_ARM64_OPTS"
fi

# key: the value of one "key: value" line of the manifest ("" when absent).
key() { sed -n "s/^$1:[[:space:]]*//p" "$manifest" | head -n 1; }
# keys: the values of every "key: value" line of a list-valued key
# (exclude, remove, links), which may span several lines.
keys() { sed -n "s/^$1:[[:space:]]*//p" "$manifest" | tr '\n' ' '; }

[ -f "$manifest" ] || { echo "rootfs: no runtime manifest $manifest" >&2; exit 1; }
name=$(key name)
ROOTS=$(key packages)
[ -n "$name" ] && [ -n "$ROOTS" ] && [ -n "$(key version-of)" ] && [ -n "$(key run)" ] ||
	{ echo "rootfs: $manifest needs name, packages, version-of and run" >&2; exit 1; }
# The closure apt-cache computes also holds the packages' install-time
# tools (dpkg, tar, perl via mailcap); a read-only image never runs
# maintainer scripts, so those are left out, with what the manifest's
# `exclude` names (the libraries only those tools need, where the runtime
# does not).
EXCLUDE=" dpkg install-info tar perl perl-base perl-modules-5.36 libperl5.36 libgdbm-compat4 mailcap
	mime-support $(keys exclude) "

[ -x "$BUSYBOX" ] && "$BUSYBOX" --list >/dev/null 2>&1 ||
	{ echo "rootfs: $BUSYBOX missing (run 'make deps')" >&2; exit 1; }
file -L "$BUSYBOX" 2>/dev/null | grep -q 'statically linked' ||
	{ echo "rootfs: $BUSYBOX is not static (install busybox-static)" >&2; exit 1; }
# The image's busybox: this machine's, or the same version's arm64 build.
# Its applets are listed by this machine's (APPLETS), which can run here.
APPLETS=$BUSYBOX
if [ "$arch" != "$native" ]; then
	bbver=$(dpkg-query -W -f='${Version}' busybox-static)
	bb_candidate() { $APT_CACHE policy busybox-static | sed -n 's/^  Candidate: //p'; }
	# Stale private lists may name an older version: fetch them once more.
	[ "$(bb_candidate)" = "$bbver" ] || { apt_arm64_update && [ "$(bb_candidate)" = "$bbver" ]; } ||
		{ echo "rootfs: Debian's $arch busybox-static is not this machine's $bbver" >&2; exit 1; }
	bbdir=$cache/busybox-$arch-$bbver
	if [ ! -x "$bbdir/bin/busybox" ]; then
		rm -rf "$bbdir.tmp"
		"$here/../scripts/arm64-debs.sh" "$bbdir.tmp" busybox-static >/dev/null &&
			rm -rf "$bbdir" && mv "$bbdir.tmp" "$bbdir" ||
			{ echo "rootfs: cannot unpack busybox-static for $arch" >&2; exit 1; }
	fi
	BUSYBOX=$bbdir/bin/busybox
fi
[ -x "$agent" ] || { echo "rootfs: agent $agent not built" >&2; exit 1; }
[ -z "$(key compileall)" ] || [ -x "$PYTHON" ] || { echo "rootfs: $PYTHON missing (run 'make deps')" >&2; exit 1; }

# ---- the package set, pinned to versions -----------------------------------
pkgs=$($APT_CACHE depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
	--no-replaces --no-enhances $ROOTS 2>/dev/null | grep -v '^[ <]' | sort -u |
	while read -r p; do case "$EXCLUDE" in *[[:space:]]$p[[:space:]]*) ;; *) echo "$p" ;; esac; done)
[ -n "$pkgs" ] || { echo "rootfs: apt-cache cannot resolve $ROOTS" >&2; exit 1; }
# One apt-cache for all of them (it loads its cache once per call, most
# of a second): its sections come in the order asked, "NAME:" then the
# candidate.
versions=$($APT_CACHE policy $pkgs | awk '/^[^ ]/ { n = $1; sub(/:$/, "", n) } /^  Candidate: / { print n "=" $2 }')
[ "$(echo "$versions" | wc -l)" = "$(echo "$pkgs" | wc -l)" ] ||
	{ echo "rootfs: apt-cache policy did not give one candidate for each of $name's packages" >&2; exit 1; }
# The runtime's version, as its package says it: the upstream part.
pkgver=$(echo "$versions" | sed -n "s/^$(key version-of)=//p")
[ -n "$pkgver" ] || { echo "rootfs: $(key version-of) is not among $name's packages" >&2; exit 1; }
version=$(echo "$pkgver" | sed 's/^[0-9]*://; s/[-+~].*$//')

hash=$( { cat "$0" "$here/passwd" "$here/group" "$manifest" "$agent" "$BUSYBOX"; echo "$arch $versions"
	for i in $(keys install); do cat "$here/${i#*=}"; done
	[ -z "$(key compileall)" ] || "$PYTHON" -V; } | sha256sum | cut -c1-16)
cached=$cache/rootfs-$name$([ "$arch" = "$native" ] || echo "-$arch")-$hash.ext4
mkdir -p "$(dirname "$out")"
manifest_out=${out%.ext4}.programs
runtime_out=${out%.ext4}.runtime
write_runtime() { # the manifest without comments, and the version
	{ grep -v '^[[:space:]]*\(#\|$\)' "$manifest"; echo "version: $version"; } >"$runtime_out.tmp" &&
		mv "$runtime_out.tmp" "$runtime_out"
}
# The cached image is linked, not copied, where the cache shares the
# output's file system: nine images are 2 GiB, and every make check in a
# fresh clone would copy and hash them. Safe because a root image is only
# ever opened read-only (virtio_blk's ro disks); the entry is 0444 besides,
# so a run that is not root cannot open it for writing either. Its sha256
# is kept beside it, computed once.
if [ -f "$cached" ] && [ -f "$cached.programs" ]; then
	ln -f "$cached" "$out" 2>/dev/null || { cp "$cached" "$out.tmp" && mv "$out.tmp" "$out"; }
	cp "$cached.programs" "$manifest_out"
	write_runtime
	[ -s "$cached.sha256" ] || { sha256sum <"$cached" | cut -c1-16 >"$cached.sha256.tmp" &&
		mv "$cached.sha256.tmp" "$cached.sha256"; }
	echo "rootfs: $out ($name $version) $(stat -c %s "$out") bytes, sha256 $(cat "$cached.sha256"), from cache ($cached)"
	exit 0
fi

# ---- the packages, downloaded once into the cache --------------------------
debs=$cache/debs
mkdir -p "$debs"
# deb_of NAME VERSION: the cached .deb of this arch (or of all arches), by
# its exact name: another arch's build of the same version may be there.
deb_of() {
	for f in "$debs/${1}_$(echo "$2" | sed 's/:/%3a/')_$arch.deb" "$debs/${1}_$(echo "$2" | sed 's/:/%3a/')_all.deb"; do
		[ -f "$f" ] && { echo "$f"; return 0; }
	done
	return 1
}
missing=
for pv in $versions; do
	p=${pv%%=*}
	v=${pv#*=}
	deb_of "$p" "$v" >/dev/null || missing="$missing $pv"
done
download() {
	(cd "$debs" && $APT_GET download "$@" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2)
	left=""
	for pv in "$@"; do deb_of "${pv%%=*}" "${pv#*=}" >/dev/null || left="$left $pv"; done
	[ -z "$left" ]
}
if [ -n "$missing" ]; then
	echo "rootfs: downloading$missing"
	# shellcheck disable=SC2086 # a list of NAME=VERSION words
	if ! download $missing; then
		# The private arm64 lists are fetched once: a version they name
		# may be gone from the archive since. This machine's own lists
		# are apt-get update's business.
		[ "$arch" != "$native" ] && apt_arm64_update && download $left ||
			{ echo "rootfs: apt-get download failed for:$left" >&2; exit 1; }
	fi
fi

stage_root=/dev/shm
[ -d "$stage_root" ] && [ -w "$stage_root" ] || stage_root=${TMPDIR:-/tmp}
stage=$(mktemp -d "$stage_root/vmrun-rootfs.XXXXXX")
trap 'rm -rf "$stage" "$stage.cmds" "$stage.err"' EXIT

for pv in $versions; do
	dpkg-deb -x "$(deb_of "${pv%%=*}" "${pv#*=}")" "$stage"
done
# Documentation and package metadata are of no use in the sandbox.
rm -rf "$stage/usr/share/doc" "$stage/usr/share/man" "$stage/usr/share/lintian" "$stage/usr/share/info" \
	"$stage/etc/cron.daily"
# What the manifest's `remove` names: parts of its packages that nothing run
# in the sandbox uses (go's prebuilt toolchain internals, the JDK's jmods).
# Each must be there, so that a manifest outliving its package fails here.
# (Paths, never patterns: no globbing while these lists are split.)
plain_path() { case $1 in /*/*) ;; *) return 1 ;; esac; case $1/ in */../*|*/./*|*//*) return 1 ;; esac; }
set -f
for p in $(keys remove); do
	plain_path "$p" || { echo "rootfs: remove: $p is not an absolute path below /" >&2; exit 1; }
	[ -e "$stage$p" ] || [ -L "$stage$p" ] || { echo "rootfs: remove: $p is not in $name's packages" >&2; exit 1; }
	rm -rf "${stage:?}$p"
done
# The manifest's `links` (LINK=TARGET): what update-alternatives makes in
# the maintainer scripts that are not run here (/usr/bin/java,
# /usr/bin/cc). Never over a file a package installed, never to nothing.
for l in $(keys links); do
	link=${l%%=*}
	target=${l#*=}
	[ "$link" != "$l" ] && [ -n "$target" ] && plain_path "$link" ||
		{ echo "rootfs: links: $l: not LINK=TARGET with an absolute LINK" >&2; exit 1; }
	! [ -e "$stage$link" ] && ! [ -L "$stage$link" ] ||
		{ echo "rootfs: links: $link is a file of $name's packages" >&2; exit 1; }
	case $target in /*) t=$stage$target ;; *) t=$stage$(dirname "$link")/$target ;; esac
	[ -e "$t" ] || { echo "rootfs: links: $link: $target is not in $name's packages" >&2; exit 1; }
	mkdir -p "$stage$(dirname "$link")"
	ln -s "$target" "$stage$link"
done
# The manifest's `install` (PATH=FILE): vmrun's own helpers for the
# runtime (vmrun-javac), FILE relative to this directory (scripts/...),
# root's and executable; never over a file a package installed.
for i in $(keys install); do
	dest=${i%%=*}
	src=${i#*=}
	[ "$dest" != "$i" ] && [ -n "$src" ] && plain_path "$dest" ||
		{ echo "rootfs: install: $i: not PATH=FILE with an absolute PATH" >&2; exit 1; }
	[ -f "$here/$src" ] || { echo "rootfs: install: $src is not a file in $here" >&2; exit 1; }
	! [ -e "$stage$dest" ] && ! [ -L "$stage$dest" ] ||
		{ echo "rootfs: install: $dest is a file of $name's packages" >&2; exit 1; }
	mkdir -p "$stage$(dirname "$dest")"
	install -m 0755 "$here/$src" "$stage$dest"
done
set +f
# ca-certificates' bundle, which its maintainer script makes
# (update-ca-certificates): every certificate it ships, in sorted order,
# so that TLS clients (pip, git, curl) verify against the system's CAs.
if [ -d "$stage/usr/share/ca-certificates" ]; then
	mkdir -p "$stage/etc/ssl/certs"
	(cd "$stage/usr/share/ca-certificates" && find . -name '*.crt' | LC_ALL=C sort | xargs cat) \
		>"$stage/etc/ssl/certs/ca-certificates.crt"
fi
if [ -n "$(key compileall)" ]; then
	"$PYTHON" -m compileall -q -j 0 --invalidation-mode unchecked-hash -s "$stage" -p / \
		"$stage$(key compileall)" >/dev/null
fi

mkdir -p "$stage/bin" "$stage/sbin" "$stage/usr/bin" "$stage/usr/sbin" "$stage/etc/vmrun" \
	"$stage/proc" "$stage/sys" "$stage/dev" "$stage/tmp" "$stage/workspace" "$stage/home/sandbox"
cp "$BUSYBOX" "$stage/bin/busybox"
# Applet links, in sorted order so the tree is built the same way each time;
# never over a file a package installed.
"$APPLETS" --list-full | sort | while read -r path; do
	[ "$path" = bin/busybox ] || [ "$path" = sbin/init ] && continue
	[ -e "$stage/$path" ] || [ -L "$stage/$path" ] && continue
	depth=$(echo "$path" | tr -cd / | wc -c)
	rel=$(printf '%*s' "$depth" '' | sed 's| |../|g')bin/busybox
	ln -s "$rel" "$stage/$path"
done
cp "$here/passwd" "$stage/etc/passwd"
cp "$here/group" "$stage/etc/group"
install -m 0755 "$agent" "$stage/init"
ln -sf ../init "$stage/sbin/init"
chmod 1777 "$stage/tmp"
chown 1000:1000 "$stage/home/sandbox" 2>/dev/null || true

# The manifest: every program in /bin and /usr/bin (the administrative ones
# in sbin are not offered).
(cd "$stage" && find bin usr/bin -mindepth 1 -maxdepth 1 \( -type f -o -type l \) | sort |
	while read -r f; do [ -x "$f" ] && echo "/$f"; done) >"$stage/etc/vmrun/programs"

# A smoke test where we can chroot: the manifest's check (the interpreter
# and its libraries load, a compiler builds and runs a program). It runs as
# the guest runs a command: as the sandbox user, in /workspace, with the
# guest's environment, its /proc (the java launcher finds the JDK through
# /proc/self/exe), the device nodes of its devtmpfs that programs open (go
# needs /dev/null) and tmpfs on /tmp, /workspace and /home/sandbox (where
# the JVM writes its font cache), so that nothing it writes reaches the
# image. The mounts live in a mount and PID namespace of their
# own and end with it, as does any process the check leaves.
if [ "$(id -u)" = 0 ] && [ -n "$(key check)" ] && [ "$arch" = "$native" ]; then
	unshare --mount --propagation private --pid --fork --mount-proc="$stage/proc" /bin/sh -ec '
		mount -t tmpfs -o mode=0755,size=1m vmrun-dev "$1/dev"
		mknod -m 0666 "$1/dev/null" c 1 3
		mknod -m 0666 "$1/dev/zero" c 1 5
		mknod -m 0666 "$1/dev/full" c 1 7
		mknod -m 0666 "$1/dev/random" c 1 8
		mknod -m 0666 "$1/dev/urandom" c 1 9
		mount -t tmpfs -o mode=1777,size=64m vmrun-tmp "$1/tmp"
		mount -t tmpfs -o mode=0755,uid=1000,gid=1000 vmrun-workspace "$1/workspace"
		mount -t tmpfs -o mode=0755,uid=1000,gid=1000 vmrun-home "$1/home/sandbox"
		exec chroot --userspec=1000:1000 "$1" /bin/busybox env -i PATH=/usr/local/bin:/usr/bin:/bin \
			HOME=/workspace LANG=C.UTF-8 PYTHONIOENCODING=utf-8 /bin/sh -c "cd /workspace && $2"' \
		sh "$stage" "$(key check)" >/dev/null ||
		{ echo "rootfs: $name's check fails in the staged root: $(key check)" >&2; exit 1; }
fi

# Pin every timestamp (mke2fs -d copies them).
find "$stage" -exec touch -h -d @1 {} +

blocks_kib=$(du -sk "$stage" | cut -f1)
size_mib=$(( (blocks_kib * 12 / 10) / 1024 + 8 ))
inodes=$(( $(find "$stage" | wc -l) * 12 / 10 + 1024 ))
rm -f "$out.tmp"
E2FSPROGS_FAKE_TIME=1 mke2fs -q -F -t ext4 -b 4096 -L vmrun-root \
	-U 6d2e8f4a-1b3c-4d5e-8f70-0a1b2c3d4e5f \
	-E hash_seed=0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0,root_owner=0:0,lazy_itable_init=0,lazy_journal_init=0 \
	-O ^has_journal,^resize_inode -m 0 -N "$inodes" \
	-d "$stage" "$out.tmp" "${size_mib}M"
# mke2fs copies each file's ctime, which no tool can pin in the staging
# tree; pin it in the image instead (debugfs recomputes the checksums).
(cd "$stage" && find . -mindepth 1 | sort | sed 's|^\.||; s|.*|sif "&" ctime 1\nsif "&" atime 1|'; echo 'sif / ctime 1';
	echo 'sif /lost+found ctime 1') >"$stage.cmds"
E2FSPROGS_FAKE_TIME=1 debugfs -w -f "$stage.cmds" "$out.tmp" >/dev/null 2>"$stage.err" ||
	{ cat "$stage.err" >&2; exit 1; }
cp "$stage/etc/vmrun/programs" "$manifest_out"
mkdir -p "$cache"
chmod 0444 "$out.tmp"
sha256sum <"$out.tmp" | cut -c1-16 >"$cached.sha256"
cp "$out.tmp" "$cached.tmp" && mv "$cached.tmp" "$cached"
cp "$manifest_out" "$cached.programs"
mv "$out.tmp" "$out"
write_runtime
ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "rootfs: $out ($name $version) $(stat -c %s "$out") bytes ($size_mib MiB, $(wc -l <"$manifest_out") programs, $(echo $pkgs | wc -w) packages), sha256 $(cat "$cached.sha256"), built in $ms ms"
