#!/bin/bash
# The eval's corrupt-workspace case (make eval, make check): every corrupt
# image of e2fsprogs' test suite (scripts/e2fs-test-images.sh), as the
# workspace image a guest left behind, fed to the artifact extractor as
# vmrun feeds it (build/tests/eval-extract). Each image twice: as it is
# (most have no /artifacts, so the extractor's open and look-up meet the
# damage), and with the root directory linked in as /artifacts by debugfs
# where debugfs can write the image at all (so the tree walk crosses every
# damaged inode, and a loop back to the root). Runs on this host: no VM is
# involved, and the extractor's sandbox is the host's. Appends one case to
# CASES for tests/eval/judge.py; judges nothing itself.
#   corrupt_images.sh IMAGES_DIR CASES PROFILE
set -u
images=$1
cases=$2
profile=$3
cd "$(dirname "$0")/../.."
EXTRACT=$PWD/build/tests/eval-extract
tmp=$(mktemp -d /tmp/eval-corrupt.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp/dest
mkdir -p "$TMPDIR"
. tests/eval/lib.sh

# extract IMAGE NAME OUT: one line of what eval-extract observed, or of
# why it could not say, appended to OUT.
extract() {
	local out
	out=$("$EXTRACT" "$1" "$2" 2>"$3.err")
	if [ -n "$out" ]; then
		echo "$out" >>"$3"
	else
		printf '{"image":%s,"error":%s}\n' "$(jstr "$2")" "$(jstr "$(tail -n 1 "$3.err")")" >>"$3"
	fi
}

# one FILE K: the image FILE (K-th) as it is and, where debugfs can write
# it, with the root as /artifacts; its lines into $tmp/K.lines, its counts
# ("images variants unreadable") into $tmp/K.counts.
one() {
	local f=$1 k=$2 name img
	name=$(basename "$(dirname "$f")")/$(basename "$f")
	img=$tmp/$k.image
	: >"$tmp/$k.lines"
	case $f in
	*.tar.bz2) echo "0 0 1" >"$tmp/$k.counts"; return ;;   # an archive of several images, not one
	*.gz) gzip -dc "$f" >"$img" ;;
	*.bz2) bzip2 -dc "$f" >"$img" ;;
	*) cp "$f" "$img" ;;
	esac || { echo "0 0 1" >"$tmp/$k.counts"; return; }
	extract "$img" "$name" "$tmp/$k.lines"
	# debugfs exits 0 whether or not it could open the image: the
	# variant exists where the image changed.
	cp "$img" "$tmp/$k.before"
	debugfs -w -R 'ln <2> artifacts' "$img" >/dev/null 2>&1
	if ! cmp -s "$img" "$tmp/$k.before"; then
		extract "$img" "$name, root as /artifacts" "$tmp/$k.lines"
		echo "1 1 0" >"$tmp/$k.counts"
	else
		echo "1 0 0" >"$tmp/$k.counts"
	fi
	rm -f "$img" "$tmp/$k.before" "$tmp/$k.lines.err"
}

# The images one per core at a time (each is a process or two, one core
# each); their lines come out in the images' order whatever the finishing
# order.
t0=$(date +%s%N)
lines=$tmp/lines
: >"$lines"
jobs=$(nproc 2>/dev/null || echo 1)
k=0
for f in "$images"/*/image*; do
	[ "$(jobs -rp | wc -l)" -lt "$jobs" ] || wait -n
	one "$f" "$k" &
	k=$((k + 1))
done
wait
n=0 variants=0 unreadable=0
for ((i = 0; i < k; i++)); do
	read -r a b c <"$tmp/$i.counts" || { echo "corrupt images: image $i left no counts" >&2; exit 1; }
	n=$((n + a)) variants=$((variants + b)) unreadable=$((unreadable + c))
	cat "$tmp/$i.lines" >>"$lines"
done
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
left=$(ls -A "$TMPDIR" | sed "s|^|extraction directory: $TMPDIR/|"; pgrep -f "^$EXTRACT" | sed 's/^/process: /')
runs=$(paste -sd, "$lines")
printf '{"id":"corrupt_workspace","category":"fault","expected":"failed safe","attempt":%s,"profile":%s,' \
	"$(jstr "e2fsprogs' $n corrupt test images, and $variants of them with the root linked in as /artifacts, as a workspace image left by the guest, into the artifact extractor")" \
	"$(jstr "$profile")" >>"$cases"
printf '"status":0,"wall_ms":%d,"destroy_ms":null,"leftovers":%s,"facts":{"images":%d,"variants":%d,"unreadable":%d,"runs":[%s]},"stderr_tail":"","result":null}\n' \
	"$ms" "$(jlines "$left")" "$n" "$variants" "$unreadable" "$runs" >>"$cases"
echo "case corrupt_workspace: $n images, $variants with /artifacts, in $ms ms"
