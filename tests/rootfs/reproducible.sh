#!/bin/sh
# Two builds of a runtime image (default: bash, the smallest) into two
# empty caches (sharing only the downloaded packages) must be
# byte-identical, and identical to the one make guest built.
# Ends with "rootfs: N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
rt=${1:-bash}
tmp=$(mktemp -d /tmp/rootfs-repro.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
debs=${VMRUN_CACHE:-/var/cache/vmrun}/debs
pass=0
fail=0
for c in a b; do
	mkdir -p "$tmp/$c"
	ln -s "$debs" "$tmp/$c/debs"
	VMRUN_CACHE=$tmp/$c ./rootfs/build.sh "$tmp/$c/$rt.ext4" build/guest/agent "rootfs/runtimes/$rt" | sed 's/^/# /'
done
if cmp -s "$tmp/a/$rt.ext4" "$tmp/b/$rt.ext4" && cmp -s "$tmp/a/$rt.ext4" "build/guest/runtimes/$rt.ext4" &&
	cmp -s "$tmp/a/$rt.programs" "$tmp/b/$rt.programs"; then
	echo "ok - $rt: two builds into empty caches are byte-identical, and equal to make guest's"
	pass=1
else
	echo "not ok - $rt: the builds differ"
	fail=1
fi
echo "rootfs: $pass passed, $fail failed"
[ $fail -eq 0 ]
