#!/bin/bash
# Boots build/guest/vmlinux (and the bzImage) under build/bin/vmm to the
# root-mount attempt, with 1 and 2 vCPUs. Needs a KVM host that runs Linux
# guests (tests/vm/run.sh picks the local one or the emulated one).
# Without a root disk the kernel panics at the root mount, and panic=1 with
# reboot=k turns that into a keyboard-controller reset: a clean vmm exit.
set -u
cd "$(dirname "$0")/../.."
VMM=build/bin/vmm
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ROOT_MOUNT='VFS: Unable to mount root fs'

# boot NAME KERNEL CPUS EXTRA_PATTERN
boot() {
	local name=$1 kernel=$2 cpus=$3 pat=$4
	local start end st
	start=$(date +%s%N)
	timeout 300 "$VMM" --kernel "$kernel" --cpus "$cpus" --memory 256 \
		--cmdline "loglevel=6 printk.time=1" --console "$tmp/console" 2>"$tmp/err"
	st=$?
	end=$(date +%s%N)
	local wall_ms=$(( (end - start) / 1000000 ))
	# Kernel's own timestamp of the root-mount attempt.
	local at
	at=$(grep -m1 "$ROOT_MOUNT" "$tmp/console" | sed -n 's/^\[ *\([0-9.]*\)\].*/\1/p')
	if [ "$st" = 0 ] && grep -q "$ROOT_MOUNT" "$tmp/console" && grep -qE "$pat" "$tmp/console"; then
		echo "ok - $name: root-mount attempt at ${at:-?} s guest time, vmm wall ${wall_ms} ms (includes panic=1 delay)"
		pass=$((pass + 1))
	else
		echo "not ok - $name: exit $st; $(cat "$tmp/err")"
		tail -n 30 "$tmp/console" | sed 's/^/    console: /'
		fail=$((fail + 1))
	fi
	if [ "${VMTEST_SHOW_LOG:-}" = "$name" ] || [ -n "${VMTEST_SHOW_ALL_LOGS:-}" ]; then
		sed 's/^/    /' "$tmp/console"
	fi
}

boot "vmlinux, 1 vCPU" build/guest/vmlinux 1 'smp: Brought up 1 node, 1 CPU'
boot "vmlinux, 2 vCPUs" build/guest/vmlinux 2 'smp: Brought up 1 node, 2 CPUs'
boot "bzImage, 2 vCPUs" build/guest/bzImage 2 'smp: Brought up 1 node, 2 CPUs'

echo "vm boot tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
