#!/bin/sh
# VM tests of the guest agent, on a KVM host that runs Linux guests
# (scripts/on-kvm-host.sh decides where). Each case boots the real root
# image (read-only vda, /init = the agent, no workspace disk: the agent
# uses a tmpfs) with tests/vm/agent_client.c as the host side, and checks
# the command's output, its end, vmm's exit and the guest console.
# Ends with "agent: N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
B=build
pass=0
fail=0
tmp=$(mktemp -d /tmp/vmrun-agent.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
ALLOW=$B/guest/programs.txt
VM_DEADLINE=90   # seconds for one guest; a boot takes ~5 s on the emulated KVM host

# run NAME EXPECTED_STATUS STDOUT_REGEX [client options] -- PROGRAM ARGS
# (STDOUT_REGEX "EMPTY": no output at all)
run() {
	name=$1 want=$2 re=$3
	shift 3
	uds=$tmp/v.sock
	$B/tests/agent_client "$uds" "$@" >"$tmp/out" 2>"$tmp/err" &
	client=$!
	start=$(date +%s%N)
	# The deadline: a guest that never resets is killed (TERM, KILL 5 s
	# later), and so is a client still waiting after it.
	timeout -k 5 $VM_DEADLINE $B/bin/vmm --kernel $B/guest/vmlinux --memory 256 --disk $B/guest/rootfs.ext4,ro \
		--vsock-uds "$uds" --console "$tmp/console" --cmdline "root=/dev/vda ro init=/init" 2>"$tmp/vmm.err"
	vrc=$?
	late=""
	[ $vrc -ne 124 ] && [ $vrc -ne 137 ] || late=" (vmm killed at its $VM_DEADLINE s deadline)"
	[ -z "$late" ] || kill $client 2>/dev/null
	wait $client
	rc=$?
	ms=$(( ($(date +%s%N) - start) / 1000000 ))
	if [ "$re" = EMPTY ]; then out_ok() { [ ! -s "$tmp/out" ]; }; else out_ok() { grep -Eq "$re" "$tmp/out"; }; fi
	if [ $rc -eq "$want" ] && [ $vrc -eq 0 ] && out_ok && ! grep -q 'vmrun-agent:' "$tmp/console"; then
		echo "ok - $name ($ms ms; $(grep -o 'hello .*' "$tmp/err"))"
		pass=$((pass + 1))
	else
		echo "not ok - $name: status $rc (want $want), vmm $vrc$late, stdout /$re/:"
		sed 's/^/    out: /' "$tmp/out" | head -n 20
		sed 's/^/    err: /' "$tmp/err" "$tmp/vmm.err" | head -n 20
		tr -d '\r' <"$tmp/console" | sed 's/^/    console: /' | tail -n 30
		fail=$((fail + 1))
	fi
}

grep -v '^/usr/bin/id$' "$ALLOW" >"$tmp/no-id"
run "python3 -c 'print(1)' end to end" 0 '^1$' "$ALLOW" -- python3 -c 'print(1)'
run "exit status passed through" 3 EMPTY "$ALLOW" -- sh -c 'exit 3'
run "killed by a signal: 128+9" 137 EMPTY "$ALLOW" -- sh -c 'kill -9 $$'
run "runs as sandbox (uid 1000) in /workspace" 0 '^1000 1000 /workspace$' "$ALLOW" -- sh -c 'echo $(id -u) $(id -g) $(pwd)'
run "environment is exactly PATH HOME LANG PYTHONIOENCODING VMRUN_RUN_ID and the grant" 0 \
	'^HOME=/workspace LANG=C.UTF-8 PATH=/usr/local/bin:/usr/bin:/bin PYTHONIOENCODING=utf-8 VMRUN_RUN_ID=[0-9a-f]{32} X=granted$' \
	"$ALLOW" -e X=granted -- python3 -c 'import os; print(" ".join(sorted(k + "=" + v for k, v in os.environ.items())))'
run "the root file system is read-only" 0 'Read-only file system' "$ALLOW" -- sh -c 'touch /x 2>&1; true'
run "stdin reaches the command" 0 '^3 lines$' "$ALLOW" -i "$tmp/no-id" -- sh -c 'head -n 3 | wc -l | sed "s/$/ lines/"'
run "a program outside the allowlist is denied (126)" 126 EMPTY "$tmp/no-id" -- id
run "a program that does not exist: 127" 127 EMPTY "$ALLOW" -- no-such-program
run "output over the cap is cut and flagged" 0 '^x{100}$' "$ALLOW" -o 100 -- sh -c 'yes x | head -c 100000 | tr -d "\n"; echo'
grep -q 'stdout_truncated=1' "$tmp/err" && { echo "ok - truncation flagged in EXIT"; pass=$((pass + 1)); } ||
	{ echo "not ok - truncation not flagged"; fail=$((fail + 1)); }
run "processes left behind are killed, the run ends at once" 0 '^started$' "$ALLOW" -- sh -c 'sleep 1000 & echo started'
echo "agent: $pass passed, $fail failed"
[ $fail -eq 0 ]
