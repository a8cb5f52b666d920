#!/bin/sh
# The evaluation's test-only root images (never shipped): ROOTFS with a
# test agent as /init (guest root's, or the forging one) and the attack
# programs, if any, in /usr/bin, and the
# root image's allowlist with those programs added, into OUTDIR as
# rootfs.ext4 and programs.txt (vmrun reads the list beside a --rootfs).
#   attack_image.sh ROOTFS AGENT OUTDIR [PROGRAM...]
set -eu
[ $# -ge 3 ] || { echo "usage: $0 ROOTFS AGENT OUTDIR [PROGRAM...]" >&2; exit 2; }
rootfs=$1 agent=$2 out=$3
shift 3
mkdir -p "$out"
tmp="$out/rootfs.ext4.tmp"
cp "$rootfs" "$tmp"
cmds=$(mktemp)
trap 'rm -f "$cmds" "$tmp"' EXIT
# install SRC DEST: a root-owned executable.
install_cmd() {
	printf 'rm %s\nwrite %s %s\nsif %s mode 0100755\nsif %s uid 0\nsif %s gid 0\n' "$2" "$1" "$2" "$2" "$2" "$2"
}
install_cmd "$agent" /init >"$cmds"
cp "$(dirname "$rootfs")/programs.txt" "$out/programs.txt.tmp"
for p in "$@"; do
	install_cmd "$p" "/usr/bin/$(basename "$p")" >>"$cmds"
	echo "/usr/bin/$(basename "$p")" >>"$out/programs.txt.tmp"
done
# debugfs reports a failed command on stderr and still exits 0: any
# message but its banner and the "rm" of a file not there yet fails this.
errs=$(debugfs -w -f "$cmds" "$tmp" 2>&1 >/dev/null | grep -v '^debugfs [0-9]' |
	grep -v 'rm: File not found by ext2_lookup' || true)
[ -z "$errs" ] || { echo "attack image: debugfs: $errs" >&2; exit 1; }
e2fsck -fn "$tmp" >/dev/null 2>&1 || { echo "attack image: $tmp fails e2fsck after the changes" >&2; exit 1; }
mv "$out/programs.txt.tmp" "$out/programs.txt"
mv "$tmp" "$out/rootfs.ext4"
echo "attack image: $out/rootfs.ext4 ($(basename "$agent")${*:+, $*})"
