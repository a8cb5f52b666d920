#!/bin/sh
# Runs each libFuzzer harness for a fixed time and prints one summary line
# per harness. Usage: run.sh SECONDS BUILD_DIR HARNESS...
# For harness fuzz_NAME the work corpus is BUILD_DIR/fuzz/corpus-NAME, the
# seeds (if any) BUILD_DIR/fuzz/seeds-NAME, crash artifacts
# BUILD_DIR/fuzz/NAME-crash-* (leak-, timeout-, oom- alike), the full log
# BUILD_DIR/fuzz/NAME.log. Exits non-zero if any harness found a crash,
# leak, timeout or out-of-memory input.
# FUZZ_JOBS harnesses run at once (default: the number of CPUs): each is
# one process, so on 2 cores make check's smoke run takes half the time.
set -u
secs=$1
build=$2
shift 2
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}

# The artifacts a harness has left so far (its own prefix: harnesses that
# run side by side do not count each other's).
artifacts() {
	ls "$build/fuzz/" | grep -cE "^$1-(crash|leak|timeout|oom)-"
}

# One harness; its summary line into NAME.summary, its status into
# NAME.status (0, or 1 for a crash or a non-zero exit).
run_one() {
	bin=$1
	name=$(basename "$bin")
	short=${name#fuzz_}
	corpus=$build/fuzz/corpus-$short
	seeds=$build/fuzz/seeds-$short
	log=$build/fuzz/$short.log
	mkdir -p "$corpus"
	[ -d "$seeds" ] || seeds=
	before=$(artifacts "$short")
	"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$build/fuzz/$short-" \
		"$corpus" $seeds >"$log" 2>&1
	rc=$?
	found=$(($(artifacts "$short") - before))
	[ "$found" -lt 0 ] && found=0
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
	units=$(ls "$corpus" | wc -l)
	echo "$name: ${execs:-?} executions in ${secs} s (${rate:-?}/s), corpus $units inputs, exit $rc, new crash artifacts $found (log: $log)" \
		>"$build/fuzz/$short.summary"
	if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
		echo 1 >"$build/fuzz/$short.status"
	else
		echo 0 >"$build/fuzz/$short.status"
	fi
}

mkdir -p "$build/fuzz"
running=0
for bin in "$@"; do
	run_one "$bin" &
	running=$((running + 1))
	if [ "$running" -ge "$jobs" ]; then
		wait
		running=0
	fi
done
wait

status=0
for bin in "$@"; do
	short=$(basename "$bin")
	short=${short#fuzz_}
	cat "$build/fuzz/$short.summary" 2>/dev/null || echo "$bin: no summary (did it start?)"
	if [ "$(cat "$build/fuzz/$short.status" 2>/dev/null)" != 0 ]; then
		status=1
		grep -E 'ERROR|SUMMARY|invariant|Test unit written' "$build/fuzz/$short.log" | head -n 20 >&2
	fi
	rm -f "$build/fuzz/$short.summary" "$build/fuzz/$short.status"
done
[ "$status" -eq 0 ] && echo "fuzz: no crashes" || echo "fuzz: CRASHES FOUND (see above)" >&2
exit "$status"
