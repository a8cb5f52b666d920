#!/bin/bash
# tests/stress/agent-boots.sh [N]: boot the real root image with the agent N
# times (default 100) through `vmrun --json -t 30 -- true`, one after
# another, each under a 60 s watchdog, and print one line a run and a
# summary: how many ended, how many hung. This is how the hang rate of
# issue 11 was measured; run it on a KVM host that runs Linux guests
# (scripts/on-kvm-host.sh --limit SEC "agent boots" tests/stress/agent-boots.sh).
# A wedged emulated host stops this script too: then the lines printed so
# far say after how many runs, and the caller's limit ends it.
set -u
cd "$(dirname "$0")/../.."
n=${1:-100}
tmp=$(mktemp -d /tmp/vmrun-stress.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp
ended=0
hung=0
other=0
times=()
for i in $(seq "$n"); do
	t0=$(date +%s%N)
	timeout -k 5 60 build/bin/vmrun --json -t 30 -- true >"$tmp/out" 2>"$tmp/err"
	rc=$?
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	case $rc in
	0) ended=$((ended + 1)); times+=("$ms"); echo "run $i: ok in $ms ms" ;;
	124 | 137)
		hung=$((hung + 1))
		echo "run $i: HUNG (status $rc after $ms ms): $(head -c 300 "$tmp/out") $(tail -n 3 "$tmp/err")"
		;;
	*) other=$((other + 1)); echo "run $i: status $rc after $ms ms: $(head -c 300 "$tmp/out") $(tail -n 3 "$tmp/err")" ;;
	esac
done
median=-
if [ ${#times[@]} -gt 0 ]; then
	median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
fi
echo "agent-boots: $n runs: $ended ended, $hung hung, $other failed otherwise; median $median ms"
echo "agent-boots: $ended passed, $((hung + other)) failed"
[ $((hung + other)) -eq 0 ]
