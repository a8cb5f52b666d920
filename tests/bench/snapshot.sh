#!/bin/bash
# make bench-snapshot: warm starts against cold boots, side by side in one
# run, on a KVM host that runs Linux guests (scripts/on-kvm-host.sh
# decides where). Prints:
#   - restore to HELLO and `vmrun -- true` in all, restored and cold,
#     medians of N runs each (default 7), interleaved so that both see the
#     same host; the target is a restore to HELLO at most 0.1x the cold
#     boot to HELLO;
#   - the summed PSS of 4 concurrent restored VMs against 4 cold-booted
#     ones (each vmm's /proc/PID/smaps_rollup, peak of the sums sampled
#     every 0.5 s while they run `sleep`).
set -u
cd "$(dirname "$0")/../.."
VMRUN=$PWD/build/bin/vmrun
n=${1:-7}
tmp=$(mktemp -d /tmp/bench-snapshot.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp/runs VMRUN_CACHE=$tmp/cache
mkdir -p "$TMPDIR"
die() { echo "bench-snapshot: $*" >&2; exit 1; }

t0=$(date +%s%N)
snap=$(timeout -k 5 200 "$VMRUN" snapshot) || die "vmrun snapshot failed"
made_ms=$(( ($(date +%s%N) - t0) / 1000000 ))

# vmrun's JSON is one line: the figures by sed, as Python starts slowly on
# the emulated host.
ms() { sed -n 's/.*"'"$2"'":\([0-9][0-9]*\).*/\1/p' "$1"; }
for i in $(seq "$n"); do
	for mode in restored cold; do
		args=()
		[ $mode = cold ] && args=(--cold)
		t0=$(date +%s%N)
		timeout -k 5 120 "$VMRUN" "${args[@]}" --json -- true >"$tmp/$mode.$i.json" ||
			die "$mode run $i failed: $(cat "$tmp/$mode.$i.json")"
		echo $(( ($(date +%s%N) - t0) / 1000000 )) >>"$tmp/$mode.wall"
		grep -qF '"boot":"'$mode'"' "$tmp/$mode.$i.json" || die "run $i was not $mode"
		ms "$tmp/$mode.$i.json" boot >>"$tmp/$mode.hello"
		ms "$tmp/$mode.$i.json" total >>"$tmp/$mode.total"
	done
done
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# pss MODE: the peak summed PSS (KiB) of 4 concurrent vmms of MODE.
pss() {
	local args=() peak=0 pids
	[ "$1" = cold ] && args=(--cold)
	for k in 1 2 3 4; do
		timeout -k 5 120 "$VMRUN" "${args[@]}" -t 60 -- sleep 12 >/dev/null 2>&1 &
	done
	for _ in $(seq 120); do
		pids=$(pgrep -f '^vmm --kvm-fd 3 ' | tr '\n' ' ')
		sum=0
		for p in $pids; do
			kib=$(awk '/^Pss:/ {print $2}' /proc/$p/smaps_rollup 2>/dev/null)
			sum=$((sum + ${kib:-0}))
		done
		[ $sum -gt $peak ] && peak=$sum
		[ -z "$pids" ] && [ -z "$(jobs -r)" ] && break
		sleep 0.5
	done
	wait
	echo $peak
}
pss_restored=$(pss restored)
pss_cold=$(pss cold)

hr=$(median <"$tmp/restored.hello")
hc=$(median <"$tmp/cold.hello")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b ? a / b : 0 }'; }
echo "bench-snapshot: snapshot made in $made_ms ms; $n runs each of 'vmrun -- true', interleaved (median ms)"
printf '| %-30s | %9s | %9s | %16s |\n' figure restored cold restored/cold
printf '|%s|%s|%s|%s|\n' -------------------------------- ----------- ----------- ------------------
printf '| %-30s | %9s | %9s | %16s |\n' "start to HELLO (ms)" "$hr" "$hc" "$(ratio "$hr" "$hc")x (target <= 0.1x)"
for k in total wall; do
	a=$(median <"$tmp/restored.$k")
	b=$(median <"$tmp/cold.$k")
	printf '| %-30s | %9s | %9s | %16s |\n' "vmrun -- true, $k (ms)" "$a" "$b" "$(ratio "$a" "$b")x"
done
printf '| %-30s | %9s | %9s | %16s |\n' "summed PSS of 4 VMs (MiB)" $((pss_restored / 1024)) $((pss_cold / 1024)) \
	"$(ratio "$pss_restored" "$pss_cold")x"
