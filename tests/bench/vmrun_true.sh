#!/bin/sh
# make bench-vmrun: wall time of `vmrun -- true` and its phases, N runs
# (default 10), medians printed; on a KVM host that runs Linux guests.
set -u
cd "$(dirname "$0")/../.."
n=${1:-10}
tmp=$(mktemp -d /tmp/bench-vmrun.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
for i in $(seq "$n"); do
	t0=$(date +%s%N)
	build/bin/vmrun --json -- true >"$tmp/$i.json" || { echo "bench-vmrun: run $i failed" >&2; cat "$tmp/$i.json" >&2; exit 1; }
	echo $(( ($(date +%s%N) - t0) / 1000000 )) >>"$tmp/wall"
done
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "bench-vmrun: $n runs of 'vmrun -- true' (median ms): wall $(median <"$tmp/wall")" \
	"$(for k in prepare boot run teardown total; do
		printf '%s %s ' "$k" "$(for f in "$tmp"/*.json; do python3 -c "import json,sys; print(json.load(open('$f'))['durations_ms']['$k'])"; done | median)"
	done)"
