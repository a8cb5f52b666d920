#!/bin/sh
# Builds the read-only guest root image $1 (ext4) with mke2fs -d from a
# staging tree: busybox (static) with its applet links, /etc/passwd and
# /etc/group with the unprivileged `sandbox` user, and /init.
#
# Reproducible: the same inputs give the same image bytes. File times are
# pinned, the UUID and directory hash seed are fixed, mke2fs's clock is
# faked, and the staging tree sits on tmpfs, whose readdir order depends
# only on creation order.
#
# /init is a small shell init until the guest agent lands (issue 5): it
# mounts the kernel filesystems, says "vmrun-rootfs: init reached" on the
# console and resets the VM.
set -eu

out=$1
here=$(cd "$(dirname "$0")" && pwd)
start=$(date +%s%N)
BUSYBOX=/bin/busybox
[ -x "$BUSYBOX" ] && "$BUSYBOX" --list >/dev/null 2>&1 ||
	{ echo "rootfs: $BUSYBOX missing (run 'make deps')" >&2; exit 1; }
file -L "$BUSYBOX" 2>/dev/null | grep -q 'statically linked' ||
	{ echo "rootfs: $BUSYBOX is not static (install busybox-static)" >&2; exit 1; }

stage_root=/dev/shm
[ -d "$stage_root" ] && [ -w "$stage_root" ] || stage_root=${TMPDIR:-/tmp}
stage=$(mktemp -d "$stage_root/vmrun-rootfs.XXXXXX")
trap 'rm -rf "$stage" "$stage.cmds" "$stage.err"' EXIT

mkdir -p "$stage/bin" "$stage/sbin" "$stage/usr/bin" "$stage/usr/sbin" "$stage/etc" \
	"$stage/proc" "$stage/sys" "$stage/dev" "$stage/tmp" "$stage/workspace" "$stage/home/sandbox"
cp "$BUSYBOX" "$stage/bin/busybox"
# Applet links, in sorted order so the tree is built the same way each time.
"$BUSYBOX" --list-full | sort | while read -r path; do
	[ "$path" = bin/busybox ] && continue
	depth=$(echo "$path" | tr -cd / | wc -c)
	rel=$(printf '%*s' "$depth" '' | sed 's| |../|g')bin/busybox
	ln -s "$rel" "$stage/$path"
done
cp "$here/passwd" "$stage/etc/passwd"
cp "$here/group" "$stage/etc/group"
install -m 0755 "$here/init.sh" "$stage/init"
chmod 1777 "$stage/tmp"

# Pin every timestamp (mke2fs -d copies them).
find "$stage" -exec touch -h -d @1 {} +

blocks_kib=$(du -sk "$stage" | cut -f1)
size_mib=$(( (blocks_kib * 13 / 10) / 1024 + 8 ))
mkdir -p "$(dirname "$out")"
rm -f "$out.tmp"
E2FSPROGS_FAKE_TIME=1 mke2fs -q -F -t ext4 -b 4096 -L vmrun-root \
	-U 6d2e8f4a-1b3c-4d5e-8f70-0a1b2c3d4e5f \
	-E hash_seed=0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0,root_owner=0:0,lazy_itable_init=0,lazy_journal_init=0 \
	-O ^has_journal,^resize_inode -m 0 -N 4096 \
	-d "$stage" "$out.tmp" "${size_mib}M"
# mke2fs copies each file's ctime, which no tool can pin in the staging
# tree; pin it in the image instead (debugfs recomputes the checksums).
(cd "$stage" && find . -mindepth 1 | sort | sed 's|^\.||; s|.*|sif "&" ctime 1\nsif "&" atime 1|'; echo 'sif / ctime 1';
	echo 'sif /lost+found ctime 1') >"$stage.cmds"
E2FSPROGS_FAKE_TIME=1 debugfs -w -f "$stage.cmds" "$out.tmp" >/dev/null 2>"$stage.err" ||
	{ cat "$stage.err" >&2; rm -f "$stage.cmds" "$stage.err"; exit 1; }
rm -f "$stage.cmds" "$stage.err"
mv "$out.tmp" "$out"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "rootfs: $out $(stat -c %s "$out") bytes ($size_mib MiB), sha256 $(sha256sum "$out" | cut -c1-16), built in $ms ms"
