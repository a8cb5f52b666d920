#!/bin/sh
# The aarch64 VM tests, on an aarch64 KVM host (scripts/on-kvm-host.sh
# --arch aarch64 picks it; on x86_64 that is tests/kvmhost/run-aarch64,
# whose userland is busybox: this script is POSIX sh).
#
#   - the arm64 Image boots to the root-mount attempt with 1 and 2 vCPUs
#     (GIC, arch timer, PSCI CPU_ON, the UART from the device tree); with
#     no root disk it panics there, and panic=1 with reboot=k becomes a
#     PSCI SYSTEM_RESET: a clean vmm exit;
#   - the test guest boots from its virtio-blk disk, reads virtio-rng and
#     powers off through PSCI SYSTEM_OFF (vsock present, so its socket
#     file is removed at teardown under the main seccomp filter);
#   - the vCPU seccomp filter kills vmm-forbidden (SIGSYS, status 159), and
#     the filters' unit test passes with aarch64's syscall numbers.
#
# Every vmm runs under a deadline (timeout -s KILL). Times are guest-side
# (printk) and wall-clock, printed, never asserted. VMTEST_SHOW_LOGS=1
# prints every guest console.
set -u
cd "$(dirname "$0")/../.."
A64=build/aarch64
VMM=$A64/bin/vmm
IMAGE=build/aarch64/guest/Image
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ROOT_MOUNT='VFS: Unable to mount root fs'
DEADLINE=100   # a boot's; with the other cases' 60 and 120 s, within make's 600

ms_now() { awk '{ printf "%d\n", $1 * 1000 }' /proc/uptime; }

ok() { echo "ok - $1"; pass=$((pass + 1)); }
bad() {
	echo "not ok - $1"
	tail -n 25 "$tmp/console" 2>/dev/null | sed 's/^/    console: /'
	sed 's/^/    stderr: /' "$tmp/err" 2>/dev/null
	fail=$((fail + 1))
}

# run NAME CPUS VMM-ARGS...: boot, console to $tmp/console; sets st and wall.
run() {
	name=$1 cpus=$2
	shift 2
	rm -f "$tmp/console" "$tmp/err"
	start=$(ms_now)
	timeout -s KILL "$DEADLINE" "$VMM" --kernel "$IMAGE" --cpus "$cpus" --memory 256 \
		--console "$tmp/console" "$@" 2>"$tmp/err"
	st=$?
	wall=$(($(ms_now) - start))
	touch "$tmp/console"
	tr -d '\r' <"$tmp/console" >"$tmp/c" && mv "$tmp/c" "$tmp/console"
	[ -z "${VMTEST_SHOW_LOGS:-}" ] || sed 's/^/    /' "$tmp/console"
}

# expect NAME PATTERN...: vmm exited 0 and every PATTERN is on the console.
expect() {
	name=$1
	shift
	missing=""
	for pat in "$@"; do
		grep -qE "$pat" "$tmp/console" || missing="$missing /$pat/"
	done
	if [ "$st" = 0 ] && [ -z "$missing" ]; then
		return 0
	fi
	late=""
	[ "$st" != 137 ] || late=" (killed at its $DEADLINE s deadline)"
	bad "$name: exit $st$late, missing:$missing"
	return 1
}

# The guest's own time of its first line matching PATTERN, in ms.
guest_ms() {
	sed -n "s/^\[ *\([0-9]*\)\.\([0-9][0-9][0-9]\).*$1.*/\1\2/p" "$tmp/console" | head -n 1 | sed 's/^0*//'
}

VERBOSE="loglevel=7 printk.time=1"
for cpus in 1 2; do
	name="Image, $cpus vCPU(s), to the root-mount attempt"
	run "$name" "$cpus" --cmdline "$VERBOSE"
	plural=CPU
	[ "$cpus" = 1 ] || plural=CPUs
	# The GIC is the host's: a GICv3, or a GICv2 on hosts that have no v3.
	if expect "$name" "$ROOT_MOUNT" "smp: Brought up 1 node, $cpus $plural\$" '(GICv3: [0-9]+ SPIs implemented|GIC: )' \
		'arch_timer: cp15 timer\(s\) running at' 'psci: PSCIv[0-9.]+ detected in firmware' \
		'printk: console \[ttyS0\] enabled'; then
		ok "$name: root mount at $(guest_ms "$ROOT_MOUNT") ms guest time; vmm exited 0 after $wall ms"
	fi
done

# The quiet boot vmrun would run, timed: the verbose ones above push their
# log through the UART one exit per byte.
name="Image, 1 vCPU, quiet (timing)"
run "$name" 1 --cmdline "printk.time=1"
if expect "$name" "$ROOT_MOUNT"; then
	ok "$name: root mount at $(guest_ms "$ROOT_MOUNT") ms guest time; vmm exited 0 after $wall ms"
fi

name="test guest from its disk, 2 vCPUs: virtio-blk, virtio-rng, PSCI SYSTEM_OFF"
run "$name" 2 --disk "$A64/tests/hello.ext4,ro" --vsock-uds "$tmp/vsock" \
	--cmdline "root=/dev/vda ro rootfstype=ext4 init=/init printk.time=1"
if expect "$name" 'hello_init: running on 2 CPUs' 'hello_init: hwrng [0-9a-f]{32}$' 'reboot: Power down'; then
	if grep -q 'hello_init: FAIL' "$tmp/console" || [ -e "$tmp/vsock" ]; then
		bad "$name: a FAIL line, or the vsock socket left behind"
	else
		ok "$name: powered off after $wall ms"
	fi
fi

# A call the vCPU filter forbids, made right after loading it (the test
# hook in vmm-forbidden): the whole process dies of SIGSYS and the guest
# never printed a byte.
{ timeout -s KILL 60 "$A64/tests/vmm-forbidden" --kernel "$IMAGE" --memory 64 >"$tmp/out" 2>"$tmp/err"; } 2>/dev/null
st=$?
if [ "$st" = 159 ] && [ ! -s "$tmp/out" ]; then
	ok "a forbidden call on a vCPU thread kills vmm with SIGSYS"
else
	echo "not ok - seccomp test hook: exit $st, want 159; $(head -c 300 "$tmp/err")"
	fail=$((fail + 1))
fi

# The seccomp filters' unit test, built for aarch64 (its syscall numbers:
# epoll_pwait, unlinkat; its KVM request for a fault's pc), run through the
# arm64 loader and libraries build/aarch64/lib holds.
lib=$A64/lib
if timeout -s KILL 120 "$lib/ld-linux-aarch64.so.1" --library-path "$lib" "$A64/tests/test_seccomp_filter" \
	>"$tmp/unit" 2>&1; then
	ok "seccomp filters' unit test on aarch64: $(grep -o 'PASSED.*' "$tmp/unit" | tail -n 1)"
else
	echo "not ok - seccomp filters' unit test on aarch64"
	sed 's/^/    /' "$tmp/unit" | tail -n 40
	fail=$((fail + 1))
fi

echo "aarch64: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
