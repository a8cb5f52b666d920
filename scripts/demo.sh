#!/bin/bash
# make demo: the classic code-execution job through vmrun. A workspace with
# input.txt and work/check.py; check.py reads the input and writes
# artifacts/result.txt; vmrun runs it, prints its output, the artifact is
# copied out and shown. A second run shows the timeout being enforced.
# Needs a KVM host that runs Linux guests (scripts/on-kvm-host.sh picks one).
set -u
cd "$(dirname "$0")/.."
VMRUN=build/bin/vmrun
tmp=$(mktemp -d /tmp/vmrun-demo.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/ws/work"
printf '3 1 4 1 5 9 2 6 5 3 5\n' >"$tmp/ws/input.txt"
cat >"$tmp/ws/work/check.py" <<'PY'
import os, platform, statistics
numbers = [int(x) for x in open("input.txt").read().split()]
print(f"read {len(numbers)} numbers from input.txt on {platform.system()} {platform.release()}")
print(f"sum={sum(numbers)} mean={statistics.mean(numbers):.3f} max={max(numbers)}")
os.makedirs("artifacts", exist_ok=True)
with open("artifacts/result.txt", "w") as f:
    f.write(f"sorted: {sorted(numbers)}\n")
print("wrote artifacts/result.txt")
PY
echo "demo: \$ vmrun -w ws -a out -- python3 work/check.py"
start=$(date +%s%N)
$VMRUN -w "$tmp/ws" -a "$tmp/out" -- python3 work/check.py
st=$?
echo "demo: exit status $st after $(( ($(date +%s%N) - start) / 1000000 )) ms"
echo "demo: \$ cat out/result.txt"
cat "$tmp/out/result.txt" || st=1
echo "demo: \$ vmrun --json -t 3 -- python3 -c 'while True: pass'"
$VMRUN --json -t 3 -- python3 -c 'while True: pass'
t=$?
echo "demo: exit status $t (124: the 3 s limit was enforced and the VM killed)"
[ $st -eq 0 ] && [ $t -eq 124 ]
