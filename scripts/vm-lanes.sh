#!/bin/bash
# vm-lanes.sh LANE [LANE...]: the suites that need a KVM host, each run by
# scripts/on-kvm-host.sh (which probes where it can run), in lanes. A
# LANE is a quoted list of suite names (below) run one after another,
# stopping at the first that fails; the lanes run side by side, each
# suite in an emulated KVM host of its own with one vCPU, so that two
# lanes keep two cores busy. Where this machine's own KVM runs Linux
# guests, suites run on it directly and share its /run/vmrun, so the lanes
# run one after another instead.
#
# Each line a suite prints comes out at once, prefixed by its lane's
# letter ("[a] "); at the end, one line per suite that ran, with its
# time and status, which make check's budget table takes up. Exits 0 when
# every suite passed, else with the first failed one's status.
set -u
cd "$(dirname "$0")/.."

# name|seconds|on-kvm-host flags|what|command
SUITES='
boot|300||vm tests|tests/vm/boot.sh
virtio|300||virtio tests|tests/vm/virtio.sh
agent|600||agent tests|tests/vm/agent.sh
e2e-warm|900||e2e tests (restored)|tests/e2e/run.sh warm
e2e-cold|900||e2e tests (cold)|tests/e2e/run.sh cold
snapshot|900||snapshot tests|tests/e2e/snapshot.sh
jail|300||jail tests|tests/e2e/jail.sh
runtimes|600||runtime tests|tests/e2e/runtimes.sh
source|1500||source mode tests|tests/e2e/source.sh
vmrund|600||vmrund vm tests|tests/vmrund/vm.sh
sandbox|600||sandbox tests|tests/sandbox/supervisor.sh
vmrund-sandbox|600||vmrund sandbox tests|tests/sandbox/vmrund.sh
sandbox-session|600||sandbox agent-session tests|tests/sandbox/session.sh
sandbox-pause|900||sandbox pause tests|tests/sandbox/pause.sh
sandbox-cluster|600||sandbox cluster tests|tests/sandbox/cluster.sh
sandbox-e2b|600||sandbox E2B SDK tests|tests/sandbox/e2b.sh
judge0|600||judge0 vm tests|tests/vmrund/judge0_vm.sh
net|900||network tests|tests/e2e/net.sh
payload|300|--any-kvm|payload tests|tests/payloads/run.sh
aarch64-vm|600|--arch aarch64|aarch64 vm tests|tests/vm/aarch64.sh
aarch64-e2e|900|--arch aarch64|aarch64 e2e tests|tests/e2e/aarch64.sh
eval-short|1200||eval (short)|tests/eval/run.sh short build/eval
eval-full|1500||eval (full)|tests/eval/run.sh full build/eval
'

[ $# -gt 0 ] || { echo "usage: $0 'SUITE...' ['SUITE...']" >&2; exit 2; }
for lane in "$@"; do
	for s in $lane; do
		grep -q "^$s|" <<<"$SUITES" || { echo "vm-lanes: no suite named $s" >&2; exit 2; }
	done
done

results=$(mktemp -d "${TMPDIR:-/tmp}/vm-lanes.XXXXXX")
trap 'rm -rf "$results"' EXIT

# run_lane LETTER SUITES: each suite in turn; "NAME SECONDS STATUS" lines
# into $results/LETTER.
run_lane() {
	local letter=$1 s line secs flags what cmd t0 st
	for s in $2; do
		line=$(grep "^$s|" <<<"$SUITES")
		IFS='|' read -r _ secs flags what cmd <<<"$line"
		t0=$(date +%s)
		# shellcheck disable=SC2086 # flags and cmd are word lists
		./scripts/on-kvm-host.sh $flags --limit "$secs" "$what" $cmd
		st=$?
		echo "$s $(( $(date +%s) - t0 )) $st" >>"$results/$letter"
		[ $st -eq 0 ] || return $st
	done
}

# Side by side only where every suite gets an emulated host of its own.
where=$(./scripts/on-kvm-host.sh --where)
letters=(a b c d e f g h)
pids=()
i=0
for lane in "$@"; do
	l=${letters[$i]}
	if [ "$where" = emulated ]; then
		run_lane "$l" "$lane" 2>&1 | sed -u "s/^/[$l] /" | tee "$results/$l.log" &
		pids+=($!)
	else
		run_lane "$l" "$lane" 2>&1 | sed -u "s/^/[$l] /" | tee "$results/$l.log"
	fi
	i=$((i + 1))
done
for p in "${pids[@]}"; do wait "$p"; done

st=0
failed=
for l in "${letters[@]:0:$#}"; do
	[ -f "$results/$l" ] || continue
	while read -r name secs s; do
		echo "check: vm $name $secs s, status $s (lane $l)"
		[ "$st" -ne 0 ] || st=$s
		[ "$s" -eq 0 ] || failed+=" $l"
	done <"$results/$l"
done
# A failed lane's own words last, where a log cut to its tail still
# shows them: what failed, and how the suite ended.
for l in $failed; do
	echo "check: lane $l failed; its failed checks, then its last lines:"
	grep -a 'not ok' "$results/$l.log" | head -n 12
	tail -n 8 "$results/$l.log"
done
exit "$st"
