#!/bin/sh
# Runs each libFuzzer harness for a fixed time and prints one summary line
# per harness. Usage: run.sh SECONDS BUILD_DIR HARNESS...
# For harness fuzz_NAME the work corpus is BUILD_DIR/fuzz/corpus-NAME, the
# seeds (if any) BUILD_DIR/fuzz/seeds-NAME, crash artifacts BUILD_DIR/fuzz/,
# the full log BUILD_DIR/fuzz/NAME.log. Exits non-zero if any harness found
# a crash, leak, timeout or out-of-memory input.
set -u
secs=$1
build=$2
shift 2
status=0
for bin in "$@"; do
	name=$(basename "$bin")
	short=${name#fuzz_}
	corpus=$build/fuzz/corpus-$short
	seeds=$build/fuzz/seeds-$short
	log=$build/fuzz/$short.log
	mkdir -p "$corpus"
	[ -d "$seeds" ] || seeds=
	before=$(ls "$build"/fuzz/ | grep -cE '^(crash|leak|timeout|oom)-')
	"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$build/fuzz/" \
		"$corpus" $seeds >"$log" 2>&1
	rc=$?
	after=$(ls "$build"/fuzz/ | grep -cE '^(crash|leak|timeout|oom)-')
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
	units=$(ls "$corpus" | wc -l)
	found=$((after - before))
	[ "$found" -lt 0 ] && found=0
	echo "$name: ${execs:-?} executions in ${secs} s (${rate:-?}/s), corpus $units inputs, exit $rc, new crash artifacts $found (log: $log)"
	if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
		status=1
		grep -E 'ERROR|SUMMARY|invariant|Test unit written' "$log" | head -n 20 >&2
	fi
done
[ "$status" -eq 0 ] && echo "fuzz: no crashes" || echo "fuzz: CRASHES FOUND (see above)" >&2
exit "$status"
