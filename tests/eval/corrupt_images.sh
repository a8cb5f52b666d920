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

# extract IMAGE NAME: one line of what eval-extract observed, or of why it
# could not say.
extract() {
	local out
	out=$("$EXTRACT" "$1" "$2" 2>"$tmp/err")
	if [ -n "$out" ]; then
		echo "$out" >>"$lines"
	else
		printf '{"image":%s,"error":%s}\n' "$(jstr "$2")" "$(jstr "$(tail -n 1 "$tmp/err")")" >>"$lines"
	fi
}

t0=$(date +%s%N)
lines=$tmp/lines
: >"$lines"
n=0 variants=0 unreadable=0
for f in "$images"/*/image*; do
	name=$(basename "$(dirname "$f")")/$(basename "$f")
	img=$tmp/image
	case $f in
	*.tar.bz2) unreadable=$((unreadable + 1)); continue ;;   # an archive of several images, not one
	*.gz) gzip -dc "$f" >"$img" ;;
	*.bz2) bzip2 -dc "$f" >"$img" ;;
	*) cp "$f" "$img" ;;
	esac || { unreadable=$((unreadable + 1)); continue; }
	n=$((n + 1))
	extract "$img" "$name"
	# debugfs exits 0 whether or not it could open the image: the
	# variant exists where the image changed.
	cp "$img" "$tmp/before"
	debugfs -w -R 'ln <2> artifacts' "$img" >/dev/null 2>&1
	if ! cmp -s "$img" "$tmp/before"; then
		variants=$((variants + 1))
		extract "$img" "$name, root as /artifacts"
	fi
	rm -f "$img" "$tmp/before"
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
