#!/bin/sh
# Runs test programs one after another and closes with one summary line.
# Usage: run-all.sh NAME PROGRAM...  Each program prints its own cmocka (or
# "N passed, N failed") summary; this counts programs, and fails if any did.
set -u
name=$1
shift
pass=0
fail=0
for t in "$@"; do
	if "$t"; then
		pass=$((pass + 1))
	else
		echo "$name: FAILED: $t" >&2
		fail=$((fail + 1))
	fi
done
echo "$name: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
