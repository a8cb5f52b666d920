#!/bin/bash
# Boots build/guest/vmlinux (and the bzImage) under build/bin/vmm to the
# root-mount attempt, with 1 and 2 vCPUs. Needs a KVM host that runs Linux
# guests (scripts/on-kvm-host.sh picks the local one or the emulated one).
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
VERBOSE="loglevel=7 printk.time=1"

# boot NAME KERNEL CPUS CMDLINE PATTERN...: every PATTERN must be on the console.
boot() {
	local name=$1 kernel=$2 cpus=$3 cmdline=$4
	shift 4
	rm -f "$tmp/at" "$tmp/console"
	local start st
	start=$(date +%s%N)
	# The console is read as it comes, to time the root-mount line.
	# The deadline: TERM at 120 s, KILL 5 s later; the console so far is
	# printed below.
	timeout -k 5 120 "$VMM" --kernel "$kernel" --cpus "$cpus" --memory 256 --cmdline "$cmdline" \
		2>"$tmp/err" | while IFS= read -r line; do
		line=${line%$'\r'}   # the 8250 console ends lines with CR LF
		printf '%s\n' "$line" >>"$tmp/console"
		case $line in *"$ROOT_MOUNT"*) [ -e "$tmp/at" ] || date +%s%N >"$tmp/at" ;; esac
	done
	st=${PIPESTATUS[0]}
	local wall_ms=$(( ($(date +%s%N) - start) / 1000000 ))
	local missing=""
	touch "$tmp/console"
	for pat in "$ROOT_MOUNT" "$@"; do
		grep -qE "$pat" "$tmp/console" || missing="$missing /$pat/"
	done
	if [ "$st" = 0 ] && [ -z "$missing" ]; then
		local at_ms=$(( ($(cat "$tmp/at") - start) / 1000000 ))
		echo "ok - $name: root-mount attempt ${at_ms} ms after vmm start; vmm exited 0 after ${wall_ms} ms"
		pass=$((pass + 1))
	else
		local late=""
		[ "$st" != 124 ] && [ "$st" != 137 ] || late=" (killed at its 120 s deadline)"
		echo "not ok - $name: exit $st$late, missing:$missing; $(cat "$tmp/err")"
		tail -n 30 "$tmp/console" | sed 's/^/    console: /'
		fail=$((fail + 1))
	fi
	if [ -n "${VMTEST_SHOW_LOGS:-}" ]; then
		sed 's/^/    /' "$tmp/console"
	fi
}

boot "vmlinux, 1 vCPU" build/guest/vmlinux 1 "$VERBOSE" 'smp: Brought up 1 node, 1 CPU$' \
	'printk: console \[ttyS0\] enabled' 'clocksource: Switched to clocksource kvm-clock'
boot "vmlinux, 2 vCPUs" build/guest/vmlinux 2 "$VERBOSE" 'smp: Brought up 1 node, 2 CPUs$' \
	'smpboot: Total of 2 processors activated'
boot "bzImage, 2 vCPUs" build/guest/bzImage 2 "$VERBOSE" 'smp: Brought up 1 node, 2 CPUs$'
# The boot as vmrun will run it: the default quiet command line. The
# verbose boots above spend most of their time pushing the log through the
# UART one byte per exit; this one times the boot itself.
boot "vmlinux, 1 vCPU, quiet (timing)" build/guest/vmlinux 1 "printk.time=1"

echo "boot: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
