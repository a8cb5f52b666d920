#!/bin/bash
# Source mode (vmrun --runtime NAME --source FILE... -- ARGS), on a KVM
# host that runs Linux guests (scripts/on-kvm-host.sh decides where): in
# every installed runtime, a program from tests/e2e/programs/ is copied in,
# compiled in the guest where the runtime compiles, and run with argv and
# stdin; it reads a workspace file and writes an artifact. Then a compile
# error in each compiled runtime, ended as such; each stage limit (CPU
# time, memory, wall clock) ending its stage; and refusals before any VM.
# Ends with "source: N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
. tests/e2e/lib.sh
e2e_init source
PROGRAMS=$PWD/tests/e2e/programs
DEADLINE=600
# Compilers under an emulated KVM host take tens of seconds: generous
# stage limits here, the manifests' own defaults are for real hardware.
SLOW="--timeout 290 --run-timeout 60"
slow() { grep -q '^compile: ' "build/guest/runtimes/$1.runtime" && echo "$SLOW --compile-timeout 220" || echo "$SLOW"; }
printf 'from stdin\nsecond line\n' >"$tmp/stdin-file"

program() {
	case $1 in
	py) echo hello.py ;; sh) echo hello.sh ;; js) echo hello.js ;; c) echo hello.c ;; cpp) echo hello.cpp ;;
	java) echo Main.java ;; go) echo hello.go ;; rs) echo hello.rs ;;
	esac
}

"$VMRUN" runtimes --json >"$tmp/list" || { echo "not ok - vmrun runtimes"; exit 1; }
runtimes=$(python3 -c "import json; [print(r['name'], r['extension']) for r in json.load(open('$tmp/list'))]")
want='hello
a b c
from stdin
from workspace'
while read -r rt ext; do
	prog=$(program "$ext")
	[ -n "$prog" ] || { not_ok "$rt: no test program for .$ext"; continue; }
	ws=$tmp/ws-$rt
	mkdir -p "$ws"
	echo "from workspace" >"$ws/in.txt"
	v --runtime "$rt" $(slow "$rt") --json -w "$ws" -a "$tmp/art-$rt" -i "$tmp/stdin-file" --source "$PROGRAMS/$prog" -- a "b c"
	rc=$?
	compiled=$(sed -n 's/^compile: .*/yes/p' "build/guest/runtimes/$rt.runtime")
	[ $rc -eq 0 ] && json "j['termination']=='exited' and j['run']['stdout']=='''$want\n''' and j['stdout']==j['run']['stdout'] and j['runtime']['name']=='$rt' and ((j['compile'] is not None and j['compile']['exit_code']==0) == ('$compiled'=='yes'))" &&
		[ "$(cat "$tmp/art-$rt/out.txt" 2>/dev/null)" = "made by $rt" ] &&
		ok "$rt: source mode $( [ -n "$compiled" ] && echo "compiles and ")runs $prog: argv, stdin, a workspace file, an artifact" ||
		not_ok "$rt: source mode (status $rc)"
	[ $rc -eq 0 ] && python3 -c "
import json; j=json.load(open('$tmp/out'))
c=j['compile']; print('# $rt:', ('compile %d ms, ' % c['duration_ms']) if c else '', 'run %d ms, boot %d ms, total %d ms' % (j['run']['duration_ms'], j['durations_ms']['boot'], j['durations_ms']['total']))"
done <<<"$runtimes"

# A compile error in each compiled runtime: its own termination, the
# compiler's status and diagnostics, and no run stage.
bad() {
	case $1 in
	c) printf 'int main(void) { return missing; }\n' >"$2/bad.c"; echo "bad.c 'missing' undeclared" ;;
	c++) printf 'int main() { return missing; }\n' >"$2/bad.cpp"; echo "bad.cpp 'missing' was not declared" ;;
	java) printf 'public class Main { public static void main(String[] a) { int x = "s"; } }\n' >"$2/Main.java"
		echo "Main.java incompatible types" ;;
	go) printf 'package main\n\nfunc main() { _ = missing }\n' >"$2/bad.go"; echo "bad.go undefined: missing" ;;
	rust) printf 'fn main() { let x: i32 = "s"; }\n' >"$2/bad.rs"; echo "bad.rs mismatched types" ;;
	esac
}
while read -r rt ext; do
	grep -q '^compile: ' "build/guest/runtimes/$rt.runtime" || continue
	mkdir -p "$tmp/bad-$rt"
	set -- $(bad "$rt" "$tmp/bad-$rt")
	[ $# -ge 2 ] || { not_ok "$rt: no compile-error program"; continue; }
	file=$1
	shift
	diag="$*"
	v --runtime "$rt" $(slow "$rt") --json --source "$tmp/bad-$rt/$file"
	rc=$?
	[ $rc -ne 0 ] && [ $rc -lt 124 ] &&
		json "j['termination']=='compile_error' and j['compile']['termination']=='exited' and j['compile']['exit_code']==$rc and j['run'] is None and '''$diag''' in j['compile']['stdout']+j['compile']['stderr'] and j['exit_code']==$rc" &&
		ok "$rt: a compile error is compile_error, with the compiler's status ($rc) and \"$diag\"" ||
		not_ok "$rt: compile error (status $rc)"
	if [ "$rt" = c ]; then
		cp "$tmp/out" "$tmp/compile-error.json"
		# streamed: the diagnostics on stderr, vmrun's line last
		v --runtime c $(slow c) --source "$tmp/bad-c/bad.c"
		rc=$?
		[ $rc -eq 1 ] && [ ! -s "$tmp/out" ] && grep -q "error: 'missing' undeclared" "$tmp/err" &&
			tail -n 1 "$tmp/err" | grep -q "^vmrun: compile_error: the compile stage failed with status 1$" &&
			ok "c: streamed, a compile error's diagnostics go to stderr, then vmrun's one line" ||
			not_ok "c: streamed compile error (status $rc)"
	fi
done <<<"$runtimes"
[ -f "$tmp/compile-error.json" ] && { echo "# the compile-error result (c):"; python3 -m json.tool "$tmp/compile-error.json" | sed 's/^/#   /'; }

# Stage limits, each ending its own stage (python: no compile stage; c:
# the run stage after a compile stage).
cat >"$tmp/spin.py" <<'PY'
while True:
    pass
PY
v --runtime python $SLOW --run-cpu-time 1 --json --source "$tmp/spin.py"
rc=$?
json "j['run']['cpu_time_exceeded'] and j['run']['termination']=='signaled' and j['run']['usage']['cpu_ms']>=900" &&
	ok "--run-cpu-time 1: the busy loop is killed at its CPU limit, flagged (status $rc)" || not_ok "CPU time limit (status $rc)"
cat >"$tmp/hog.py" <<'PY'
chunks = []
while True:
    chunks.append(bytearray(16 << 20))
PY
v --runtime python $SLOW --run-memory 64 --json --source "$tmp/hog.py"
rc=$?
json "j['run']['oom_killed'] and j['run']['termination']=='signaled' and j['limits']['memory_mib']>=64" &&
	ok "--run-memory 64: the stage's cgroup kills the allocation, flagged oom_killed (status $rc)" ||
	not_ok "memory limit (status $rc)"
printf '#include <unistd.h>\nint main(void) { sleep(600); return 0; }\n' >"$tmp/sleep.c"
v --runtime c --compile-timeout 220 --run-timeout 3 --json --source "$tmp/sleep.c"
rc=$?
[ $rc -eq 124 ] && json "j['termination']=='timeout' and j['compile']['exit_code']==0 and j['run']['termination']=='timeout' and 'the run stage exceeded its 3 s limit' in j['message'] and j['run']['duration_ms']<20000" &&
	ok "--run-timeout 3: the run stage times out after a good compile stage (124)" || not_ok "run-stage timeout (status $rc)"

# Refusals before any VM: one line, status 125.
v --source "$PROGRAMS/hello.py"
rc=$?
[ $rc -eq 125 ] && grep -qx "vmrun: --source needs --runtime (see \`vmrun runtimes\`)" "$tmp/err" &&
	ok "--source without --runtime: 125, one line" || not_ok "--source without --runtime (status $rc)"
v --runtime python --source "$tmp/nonexistent.py"
rc=$?
[ $rc -eq 125 ] && grep -q "^vmrun: error: --source $tmp/nonexistent.py: No such file or directory$" "$tmp/err" &&
	ok "a missing source file: 125, naming it" || not_ok "missing source (status $rc)"
v --runtime bash --compile-timeout 5 --source "$PROGRAMS/hello.sh"
rc=$?
[ $rc -eq 125 ] && grep -q "bash has no compile stage" "$tmp/err" &&
	ok "a compile limit for a runtime without a compile stage: refused" || not_ok "compile limit for bash (status $rc)"

finish source
