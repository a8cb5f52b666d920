#!/bin/bash
# End-to-end tests of vmrun, used as a user would, on a KVM host that runs
# Linux guests (scripts/on-kvm-host.sh decides where).
#   run.sh warm   every run restores the warm-start snapshot (made first by
#                 `vmrun snapshot`), as vmrun does by default
#   run.sh cold   every run boots from scratch (--cold)
# The same cases, the same expected results, either way.
# Ends with "e2e (MODE): N passed, N failed".
set -u
mode=${1:-warm}
case $mode in
cold) MODE_ARGS=(--cold) BOOT=cold ;;
warm) MODE_ARGS=() BOOT=restored ;;
*) echo "usage: $0 [warm|cold]" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/../.."
VMRUN=$PWD/build/bin/vmrun
DEADLINE=120   # seconds for one vmrun; each asks for -t 30 or less
JAILED_VMM='^vmm --kvm-fd 3 '   # the command line vmrun gives every jailed vmm
pass=0
fail=0
tmp=$(mktemp -d /tmp/e2e.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp/runs   # vmrun's run directories, checked for leftovers
export VMRUN_CACHE=$tmp/cache   # the snapshots: this test's own
mkdir -p "$TMPDIR"

ok() { echo "ok - $1"; pass=$((pass + 1)); }
not_ok() {
	echo "not ok - $1"
	fail=$((fail + 1))
	for f in "$tmp/out" "$tmp/err"; do [ -s "$f" ] && sed "s|^|    $(basename "$f"): |" "$f" | head -n 15; done
}
# v NAME WANT_STATUS VMRUN_ARGS...: run vmrun, keep stdout/stderr, check the status
v() {
	local name=$1 want=$2
	shift 2
	local t0=$(date +%s%N)
	# The test's own deadline, beyond vmrun's: a vmrun that hangs is
	# killed (TERM, KILL 5 s later) and the case fails.
	timeout -k 5 $DEADLINE "$VMRUN" "${MODE_ARGS[@]}" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ $rc -ne 124 ] || [ "$want" -eq 124 ] || echo "vmrun was killed at the test's $DEADLINE s deadline" >>"$tmp/err"
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	[ "$rc" -eq "$want" ]
}
# json FIELD EXPR: evaluate a python expression on the JSON in $tmp/out (as j)
json() { python3 -c "import json,sys; j=json.load(open('$tmp/out')); sys.exit(0 if ($1) else 1)" 2>/dev/null; }

if [ "$mode" = warm ]; then
	timeout -k 5 $DEADLINE "$VMRUN" snapshot >"$tmp/out" 2>"$tmp/err"
	rc=$?
	snap=$(cat "$tmp/out")
	[ $rc -eq 0 ] && [ -f "$snap/state" ] && [ -f "$snap/memory" ] && [ "${snap#"$VMRUN_CACHE"/snapshots/}" != "$snap" ] &&
		ok "vmrun snapshot made $snap" || not_ok "vmrun snapshot (status $rc)"
fi
v "echo" 0 -- echo hello world && [ "$(cat "$tmp/out")" = "hello world" ] &&
	ok "echo: stdout passed through, exit 0 ($ms ms)" || not_ok "echo (status $rc)"
v "exit" 7 -- sh -c 'exit 7' && ok "exit status 7 passed through" || not_ok "exit status (got $rc)"
v "stderr" 0 -- sh -c 'echo out; echo err >&2' && [ "$(cat "$tmp/out")" = out ] && grep -qx err "$tmp/err" &&
	ok "stdout and stderr kept apart" || not_ok "stdout/stderr"
printf 'line one\nline two\nline three\n' >"$tmp/in"
v "stdin" 0 -i "$tmp/in" -- sort -r && [ "$(head -n 1 "$tmp/out")" = "line two" ] &&
	ok "--stdin reaches the command" || not_ok "stdin"
v "signal" 143 -- sh -c 'kill -TERM $$' && ok "death by SIGTERM: 143" || not_ok "signal (got $rc)"
v "json signal" 137 --json -- sh -c 'kill -KILL $$' && json 'j["termination"]=="signaled" and j["signal"]=="SIGKILL" and j["exit_code"] is None' &&
	ok "--json reports signaled/SIGKILL" || not_ok "json signal"
v "timeout" 124 -t 2 -- sleep 100 && [ "$ms" -lt 6000 ] && ok "--timeout 2 on sleep 100: 124 after $ms ms" ||
	not_ok "timeout (status $rc after $ms ms)"
v "json timeout" 124 --json -t 2 -- sleep 100 && json 'j["termination"]=="timeout" and j["timed_out"] is True and j["outcome"]=={"state":"timed_out","limits_hit":["timeout"]}' &&
	ok "--json reports the timeout" || not_ok "json timeout"
printf 'allow /usr/bin/python3\n' >"$tmp/policy"
v "denied" 126 --policy "$tmp/policy" -v -- sh -c true && [ "$ms" -lt 1000 ] && ! grep -q 'vmm started' "$tmp/err" &&
	ok "a program outside the allowlist: 126 without booting a VM ($ms ms)" || not_ok "denied (status $rc, $ms ms)"
v "not found" 127 --json -- no-such-program && json 'j["termination"]=="not_found"' &&
	ok "an unknown program: 127, not_found" || not_ok "not found (status $rc)"
v "relative" 126 -- ./run.sh && ok "a workspace program is not allowlisted: 126" || not_ok "relative (status $rc)"
SECRET=hunter2 v "secret" 0 -- env && ! grep -q SECRET "$tmp/out" && ! grep -q hunter2 "$tmp/out" &&
	[ "$(cut -d= -f1 "$tmp/out" | sort | tr '\n' ' ')" = "HOME LANG PATH PYTHONIOENCODING VMRUN_RUN_ID " ] &&
	ok "no host variable reaches the guest; env is exactly PATH HOME LANG PYTHONIOENCODING VMRUN_RUN_ID" || not_ok "environment"
v "grant" 0 -e GREETING=hi -e LANG=C -- env && grep -qx GREETING=hi "$tmp/out" && grep -qx LANG=C "$tmp/out" &&
	ok "--env grants appear (and may replace a default)" || not_ok "env grants"
v "cap" 0 --json --max-output 100 -- sh -c 'yes | head -c 5000; yes e | head -c 50 >&2' &&
	json 'len(j["stdout"])==100 and j["stdout_truncated"] and not j["stderr_truncated"] and len(j["stderr"])==50' &&
	ok "--max-output caps and flags each stream" || not_ok "output cap"
v "python" 0 -- python3 -c 'import sys; print(sys.version_info[:2])' && [ "$(cat "$tmp/out")" = "(3, 11)" ] &&
	ok "python3 runs" || not_ok "python3"
v "json shape" 0 --json -- true && json 'set(j)=={"run_id","termination","exit_code","signal","timed_out","stdout","stderr","stdout_truncated","stderr_truncated","durations_ms","usage","artifacts","artifacts_skipped","limits","jail","message","boot","outcome"} and j["boot"]=="'$BOOT'" and j["outcome"]=={"state":"succeeded","limits_hit":[]} and set(j["durations_ms"])=={"prepare","boot","run","teardown","extract","total"}' &&
	ok "--json has every field of DESIGN's result object, the jail layers, boot $BOOT" || not_ok "json shape"
v "bad option" 125 --memory lots -- true && [ "$(wc -l <"$tmp/err")" -eq 1 ] && ok "a bad value: one line, 125" ||
	not_ok "bad option (status $rc)"
v "ceiling" 125 --memory 65536 -- true && grep -q ceiling "$tmp/err" && ok "a request past the policy's ceiling is refused" ||
	not_ok "ceiling (status $rc)"

# workspace in, artifacts out, hostile artifacts skipped
mkdir -p "$tmp/ws/sub"
echo data >"$tmp/ws/sub/in.txt"
v "artifacts" 0 --json -w "$tmp/ws" -a "$tmp/art" -- sh -c '
	cat sub/in.txt > artifacts/copy.txt && mkdir artifacts/d && echo x > artifacts/d/x &&
	ln -s /etc/passwd artifacts/link && mkfifo artifacts/fifo && truncate -s 500M artifacts/sparse &&
	id -u > artifacts/uid && chmod 4755 artifacts/uid' &&
	[ "$(cat "$tmp/art/copy.txt")" = data ] && [ "$(cat "$tmp/art/d/x")" = x ] && [ ! -e "$tmp/art/link" ] &&
	[ ! -e "$tmp/art/fifo" ] && [ ! -e "$tmp/art/sparse" ] && [ "$(stat -c %a "$tmp/art/uid")" = 755 ] &&
	json 'sorted(s["path"] for s in j["artifacts_skipped"])==["fifo","link","sparse"] and all(s["reason"] for s in j["artifacts_skipped"])' &&
	ok "workspace copied in; artifacts out; symlink, FIFO, sparse file skipped with reasons; setuid dropped" ||
	not_ok "artifacts"
ln -s /etc "$tmp/ws/evil"
v "ws symlink" 125 -w "$tmp/ws" -- true && grep -q 'evil' "$tmp/err" && ok "a symlink in --workspace is refused, named" ||
	not_ok "workspace symlink (status $rc)"
rm "$tmp/ws/evil"

# two runs at once never see each other's files
mkdir -p "$tmp/a" "$tmp/b"
echo a >"$tmp/a/only-a"
echo b >"$tmp/b/only-b"
# -t 30: two cold boots at once on the emulated host's one vCPU took more
# than the default 10 s limit now and then; the case is about isolation.
timeout -k 5 $DEADLINE "$VMRUN" "${MODE_ARGS[@]}" -t 30 -w "$tmp/a" -- sh -c 'ls; sleep 1' >"$tmp/out-a" 2>&1 &
timeout -k 5 $DEADLINE "$VMRUN" "${MODE_ARGS[@]}" -t 30 -w "$tmp/b" -- sh -c 'ls; sleep 1' >"$tmp/out-b" 2>&1
wait
grep -q only-a "$tmp/out-a" && ! grep -q only-b "$tmp/out-a" && grep -q only-b "$tmp/out-b" && ! grep -q only-a "$tmp/out-b" &&
	ok "two runs at once see only their own workspace" || { cat "$tmp/out-a" "$tmp/out-b"; not_ok "isolation"; }

# Ctrl-C: the VM dies, nothing is left
"$VMRUN" "${MODE_ARGS[@]}" -- sleep 100 >"$tmp/out" 2>"$tmp/err" &
pid=$!
sleep 3
kill -INT $pid
# a bounded wait: a vmrun still there after 60 s is killed and fails
for _ in $(seq 600); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
kill -KILL $pid 2>/dev/null && echo "vmrun ignored SIGINT for 60 s and was killed" >>"$tmp/err"
wait $pid
rc=$?
[ $rc -eq 125 ] && grep -q interrupted "$tmp/err" && ok "SIGINT ends the run (125, interrupted)" || not_ok "sigint (status $rc)"

# vmrun's deadline does not depend on vmm: with vmm-stuck, whose vCPU 0
# ignores kicks and stops (like one that never leaves KVM_RUN), the run
# still ends at its limit, the cgroup is killed and nothing is left.
mkdir -p "$tmp/stuck/bin"
cp "$VMRUN" "$tmp/stuck/bin/vmrun"
cp build/tests/vmm-stuck "$tmp/stuck/bin/vmm"
ln -s "$PWD/build/guest" "$tmp/stuck/guest"
VMRUN=$tmp/stuck/bin/vmrun v "stuck vCPU" 124 --json --cold -t 3 -- sleep 100 &&
	json 'j["termination"]=="timeout"' && [ "$ms" -lt 15000 ] &&
	! pgrep -f "$JAILED_VMM" >/dev/null &&
	ok "a vmm whose vCPU never stops: the run still ends at its 3 s limit, 124 after $ms ms" ||
	not_ok "stuck vCPU (status $rc after $ms ms)"

# Two runs driven from one process through the run library: one cancelled
# through its eventfd while the other exits, then a third (tests/vm/two_runs.c).
timeout -k 5 $DEADLINE build/tests/two_runs "$PWD/build" >"$tmp/out" 2>"$tmp/err"
rc=$?
sed 's/^/# /' "$tmp/out"
[ $rc -eq 0 ] && ok "two runs from one process, one cancelled, then a third" || not_ok "two_runs (status $rc)"

# nothing left behind by any of the runs above
left=$(ls -A "$TMPDIR")
procs=$(pgrep -f "$JAILED_VMM" || true)
cgroups=$(ls -d /sys/fs/cgroup/vmrun/*/ /sys/fs/cgroup/*/vmrun-*/ 2>/dev/null)
[ -z "$left" ] && [ -z "$procs" ] && [ -z "$cgroups" ] &&
	ok "no run directory, image, socket, cgroup or vmm process left behind" ||
	{ echo "    left: $left procs: $procs cgroups: $cgroups"; not_ok "leftovers"; }
echo "e2e ($mode): $pass passed, $fail failed"
[ $fail -eq 0 ]
