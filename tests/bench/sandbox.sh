#!/bin/bash
# make bench-sandbox: a sandbox's figures, side by side in one run, on a
# KVM host that runs Linux guests (scripts/on-kvm-host.sh decides where):
#   - a command (`true`) in a running sandbox, request to exit status,
#     p50/p99 of N, against a fresh restored `vmrun -- true` (target:
#     <= 0.05x);
#   - a file of 1 MiB and of 64 MiB written and read through the API, MiB/s;
#   - a sandbox's start (the supervisor's exec to running), p50/p99 of 5;
#   - the summed PSS of 10 idle sandboxes' vmms.
# Every request has a deadline.
set -u
cd "$(dirname "$0")/../.."
n=${1:-30}
tmp=$(mktemp -d /tmp/bench-sandbox.XXXXXX)
export VMRUN_CACHE=$tmp/cache TMPDIR=$tmp/runs
mkdir -p "$TMPDIR"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait; rm -rf "$tmp"' EXIT
pct() { python3 -c "import sys; v=sorted(float(x) for x in sys.stdin); print('%.0f' % v[min(len(v)-1, int(len(v)*$1/100))])"; }

# start NAME DISK_MIB: a sandbox in $tmp/NAME; prints the ms from the
# supervisor's start to running.
start() {
	local dir=$tmp/$1 t0
	mkdir -p "$dir"
	printf '{"runtime":"python","limits":{"disk_mib":%s}}' "$2" >"$dir/request.json"
	t0=$(date +%s%N)
	build/bin/vmrund-sandbox --timeout 900 "$dir" "$PWD/build/bin/vmm" "$PWD/build/guest" "" >"$dir.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 6000); do [ -S "$dir/api.sock" ] && break; sleep 0.01; done
	curl -s -m 120 --unix-socket "$dir/api.sock" 'http://s/?wait=120' | grep -q '"state":"running"' ||
		{ echo "bench-sandbox: sandbox $1 did not start: $(cat "$dir/state.json" 2>&1) $(tail -3 "$dir.log")" >&2; exit 1; }
	echo $(( ($(date +%s%N) - t0) / 1000000 ))
}

build/bin/vmrun -- true >/dev/null 2>&1 || { echo "bench-sandbox: vmrun -- true failed" >&2; exit 1; }   # the snapshot
for _ in $(seq "$n"); do
	t0=$(date +%s%N)
	timeout -k 5 120 build/bin/vmrun -- true >/dev/null 2>&1 || { echo "bench-sandbox: a run failed" >&2; exit 1; }
	echo $(( ($(date +%s%N) - t0) / 1000000 )) >>"$tmp/run"
done

start a 256 >/dev/null
S="curl -s -m 120 --unix-socket $tmp/a/api.sock"
for _ in $(seq "$n"); do
	$S -o "$tmp/out" -w '%{time_total}\n' -d '{"argv":["true"]}' 'http://s/commands?wait=60' |
		awk '{printf "%.1f\n", $1 * 1000}' >>"$tmp/cmd"
	grep -q '"exit_code":0' "$tmp/out" || { echo "bench-sandbox: a command failed: $(cat "$tmp/out")" >&2; exit 1; }
done

# files: MiB/s of a write and a read
for mib in 1 64; do
	head -c $((mib << 20)) /dev/urandom >"$tmp/f$mib"
	w=$($S -o /dev/null -w '%{time_total}' -X PUT --data-binary @"$tmp/f$mib" "http://s/files?path=f$mib")
	r=$($S -o "$tmp/back$mib" -w '%{time_total}' "http://s/files?path=f$mib")
	cmp -s "$tmp/f$mib" "$tmp/back$mib" || { echo "bench-sandbox: the $mib MiB file came back different" >&2; exit 1; }
	echo "$mib $(python3 -c "print('%.1f %.1f' % ($mib / $w, $mib / $r))")" >>"$tmp/files"
done
$S -X DELETE http://s/ >/dev/null

for i in 1 2 3 4 5; do
	start "s$i" 64 >>"$tmp/start"
	curl -s -m 30 --unix-socket "$tmp/s$i/api.sock" -X DELETE http://s/ >/dev/null
done

for i in $(seq 10); do start "idle$i" 16 >/dev/null; done
sleep 2
pss=0
for p in $(pgrep -f '^vmm --kvm-fd 3 '); do
	kib=$(awk '/^Pss:/ {print $2}' "/proc/$p/smaps_rollup" 2>/dev/null)
	pss=$((pss + ${kib:-0}))
done
vms=$(pgrep -fc '^vmm --kvm-fd 3 ')

run50=$(pct 50 <"$tmp/run") run99=$(pct 99 <"$tmp/run")
cmd50=$(pct 50 <"$tmp/cmd") cmd99=$(pct 99 <"$tmp/cmd")
echo "bench-sandbox: $n of each, side by side"
printf '| %-44s | %8s | %8s |\n' "figure" "p50" "p99"
printf '| %-44s | %8s | %8s |\n' "command \`true\` in a running sandbox (ms)" "$cmd50" "$cmd99"
printf '| %-44s | %8s | %8s |\n' "fresh restored \`vmrun -- true\` (ms)" "$run50" "$run99"
printf '| %-44s | %8s | %8s |\n' "ratio (target <= 0.05)" "$(python3 -c "print('%.3f' % ($cmd50 / $run50))")" \
	"$(python3 -c "print('%.3f' % ($cmd99 / $run99))")"
printf '| %-44s | %8s | %8s |\n' "sandbox start to running (ms, 5)" "$(pct 50 <"$tmp/start")" "$(pct 99 <"$tmp/start")"
while read -r mib w r; do
	printf '| %-44s | %8s | %8s |\n' "file of $mib MiB through the API (MiB/s, write / read)" "$w" "$r"
done <"$tmp/files"
printf '| %-44s | %17s |\n' "summed PSS of $vms idle sandboxes (MiB)" "$((pss / 1024))"
