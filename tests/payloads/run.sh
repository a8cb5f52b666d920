#!/bin/bash
# Self-checking tiny guest payloads, run by build/bin/vmm on the /dev/kvm of
# the machine this runs on. They run few kernel-mode instructions, so even a
# host whose KVM emulates guest kernel code (PVM) runs them; where there is
# no usable /dev/kvm at all, make runs this script on the emulated KVM host
# (scripts/on-kvm-host.sh --any-kvm). Each case checks the exit status and
# what the guest or the vmm printed, under a 60 s deadline.
set -u
cd "$(dirname "$0")/../.."
VMM=build/bin/vmm
P=build/payloads
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0

ok() { echo "ok - $1"; pass=$((pass + 1)); }
bad() { echo "not ok - $1: $2"; fail=$((fail + 1)); }

# run NAME EXPECTED_STATUS PATTERN_IN_OUTPUT VMM_ARGS...
run() {
	local name=$1 want=$2 pat=$3
	shift 3
	timeout 60 "$VMM" --accept-emulated-kvm --memory 16 "$@" >"$tmp/out" 2>"$tmp/err"
	local st=$?
	if [ "$st" != "$want" ]; then
		bad "$name" "exit $st, want $want; stderr: $(head -c 300 "$tmp/err")"
	elif [ -n "$pat" ] && ! grep -qE "$pat" "$tmp/out" "$tmp/err"; then
		bad "$name" "output lacks /$pat/: $(head -c 300 "$tmp/out" "$tmp/err")"
	else
		ok "$name"
	fi
}

run "ELF boot path and console" 0 '^payload: hello from the guest$' --kernel $P/hello.elf
run "UART, virtio-mmio identity and unclaimed PIO/MMIO self-check" 0 '^devices: PASS$' --kernel $P/devices.elf
run "reset ends the VM cleanly" 0 '' --kernel $P/reset.elf
run "triple fault is a guest failure" 2 'vmm: vCPU 0: .*(triple fault|internal error)' --kernel $P/triple.elf
run "two vCPUs start and tear down" 0 '^payload: hello' --kernel $P/hello.elf --cpus 2
run "32 vCPUs start and tear down" 0 '^payload: hello' --kernel $P/hello.elf --cpus 32
run "console none" 0 '' --kernel $P/hello.elf --console none
run "stats line" 0 '^vmm-stats probe_cycles_per_loop=[0-9]+ first_kvm_run_ns=[0-9]+' --kernel $P/reset.elf --stats
run "missing kernel file" 1 '^vmm: kernel /nonexistent: No such file or directory$' --kernel /nonexistent
run "kernel that is no image" 1 '^vmm: kernel: image is neither an ELF vmlinux nor a bzImage' --kernel Makefile
run "bad --memory" 1 "^vmm: --memory: '12x' is not a number" --kernel $P/hello.elf --memory 12x
run "too many vCPUs" 1 "^vmm: --cpus: '33'" --kernel $P/hello.elf --cpus 33
run "unknown option" 1 "^vmm: unknown option '--bogus'" --kernel $P/hello.elf --bogus
run "command line too long" 1 '^vmm: kernel command line is' --kernel $P/hello.elf --cmdline "$(head -c 3000 /dev/zero | tr '\0' a)"

# Arguments and files are checked before KVM is touched: with --kvm-fd on
# /dev/null, any KVM ioctl fails, so these errors can only come out as
# they do if vmm never reached KVM. (The last case shows that it would.)
# run_nokvm NAME STDERR_REGEX VMM_ARGS...: one error line, status 1.
run_nokvm() {
	local name=$1 re=$2
	shift 2
	timeout 60 "$VMM" --kvm-fd 9 --memory 16 "$@" 9</dev/null >"$tmp/out" 2>"$tmp/err"
	local st=$?
	if [ "$st" = 1 ] && grep -qE "$re" "$tmp/err" && [ "$(wc -l <"$tmp/err")" = 1 ]; then
		ok "before KVM: $name"
	else
		bad "before KVM: $name" "exit $st; stderr: $(head -c 300 "$tmp/err")"
	fi
}
touch "$tmp/exists"
run_nokvm "missing kernel file" '^vmm: kernel /nonexistent: No such file or directory$' --kernel /nonexistent
run_nokvm "kernel that is no image" '^vmm: kernel: image is neither an ELF vmlinux nor a bzImage' --kernel Makefile
run_nokvm "command line too long" '^vmm: kernel command line is longer than' --kernel $P/hello.elf \
	--cmdline "$(head -c 3000 /dev/zero | tr '\0' a)"
run_nokvm "missing disk" '^vmm: disk /nonexistent: No such file or directory$' --kernel $P/hello.elf --disk /nonexistent
run_nokvm "vsock socket path taken" "^vmm: .*$tmp/exists" --kernel $P/hello.elf --vsock-uds "$tmp/exists"
run_nokvm "console in a missing directory" '^vmm: console' --kernel $P/hello.elf --console /nonexistent/console
run_nokvm "(control) a good configuration reaches KVM" '^vmm: KVM_GET_API_VERSION' --kernel $P/hello.elf

# The seccomp filters: vmm-forbidden (vmm built with VMM_TEST_HOOKS) makes
# one call its vCPU filter forbids on vCPU 0, right after loading the filter
# and before the first KVM_RUN; the filter kills the whole process with
# SIGSYS (shell status 128+31), and the guest never printed a byte. (The
# outer redirection keeps bash's "Bad system call" notice off the output.)
{ timeout 60 build/tests/vmm-forbidden --accept-emulated-kvm --memory 16 --kernel $P/hello.elf \
	>"$tmp/out" 2>"$tmp/err"; } 2>/dev/null
st=$?
if [ "$st" = 159 ] && [ ! -s "$tmp/out" ]; then
	ok "a forbidden call on a vCPU thread kills vmm with SIGSYS"
else
	bad "seccomp test hook" "exit $st, want 159; stdout: $(head -c 200 "$tmp/out"); stderr: $(head -c 300 "$tmp/err")"
fi

# The console cap: exactly the limit is kept, then one marker line.
if timeout 60 "$VMM" --accept-emulated-kvm --memory 16 --kernel $P/flood.elf \
	--console "$tmp/console" --console-limit 1000 2>"$tmp/err"; then
	kept=$(tr -cd x <"$tmp/console" | wc -c)
	if [ "$kept" = 1000 ] && grep -q 'console limit of 1000 bytes reached' "$tmp/console" &&
		[ "$(wc -l <"$tmp/console")" -le 2 ]; then
		ok "console limit keeps 1000 of 20000 bytes"
	else
		bad "console limit" "kept $kept bytes: $(tail -c 200 "$tmp/console")"
	fi
else
	bad "console limit" "vmm failed: $(cat "$tmp/err")"
fi

# The console file is never opened through a symlink.
ln -s "$tmp/target" "$tmp/link"
run "console file refuses a symlink" 1 '^vmm: console: .*link' --kernel $P/hello.elf --console "$tmp/link"
[ ! -e "$tmp/target" ] || bad "console symlink" "target was created"

# stop_case NAME VMM SIG STDERR_REGEX MAX_MS: VMM runs the spinning
# payload; once it spins, SIG must end it with status 3, STDERR_REGEX, in
# under MAX_MS.
stop_case() {
	local name=$1 vmm=$2 sig=$3 re=$4 max=$5 pid st ms start
	timeout 60 "$vmm" --accept-emulated-kvm --memory 16 --kernel $P/spin.elf >"$tmp/out" 2>"$tmp/err" &
	pid=$!
	for _ in $(seq 50); do grep -q spinning "$tmp/out" && break; sleep 0.1; done
	start=$(date +%s%N)
	kill -"$sig" $pid
	wait $pid
	st=$?
	ms=$(( ($(date +%s%N) - start) / 1000000 ))
	if [ "$st" = 3 ] && grep -qE "$re" "$tmp/err" && [ "$(wc -l <"$tmp/err")" = 1 ] && [ "$ms" -lt "$max" ]; then
		ok "$name (${ms} ms)"
	else
		bad "$name" "exit $st after ${ms} ms: $(cat "$tmp/err")"
	fi
}

# SIGTERM and SIGINT stop a spinning guest promptly with status 3.
for sig in TERM INT; do
	stop_case "SIG$sig stops a spinning guest" "$VMM" $sig "^vmm: terminated by SIG$sig$" 2000
done

# A vCPU that never leaves KVM_RUN (vmm-stuck's vCPU 0 blocks its kick and
# ignores the stop while the guest spins) does not keep vmm alive: SIGTERM
# still ends it, after the 2 s join limit, naming the vCPU.
stop_case "SIGTERM ends vmm whose vCPU never leaves KVM_RUN" build/tests/vmm-stuck TERM \
	'^vmm: terminated by SIGTERM; vCPU 0 did not leave KVM_RUN within 2000 ms, exiting without teardown$' 6000

# Without --accept-emulated-kvm the host probe decides: hardware runs the
# payload; an emulating host is refused in one line that names the fix.
timeout 60 "$VMM" --memory 16 --kernel $P/hello.elf >"$tmp/out" 2>"$tmp/err"
st=$?
if grep -q 'instruction emulator' "$tmp/err"; then
	if [ "$st" = 1 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q 'tests/kvmhost/run' "$tmp/err"; then
		ok "emulating host refused in one line"
	else
		bad "emulating host refusal" "exit $st: $(cat "$tmp/err")"
	fi
elif [ "$st" = 0 ] && grep -q hello "$tmp/out"; then
	ok "hardware host accepted by the probe"
else
	bad "host probe" "exit $st: $(cat "$tmp/err")"
fi

# --probe: the same decision, and the guest never starts (hello prints
# nothing); with --accept-emulated-kvm it passes on either kind of host.
timeout 60 "$VMM" --probe --memory 16 --kernel $P/hello.elf >"$tmp/out" 2>"$tmp/err"
st=$?
if grep -q 'instruction emulator' "$tmp/err"; then
	[ "$st" = 1 ] && ok "--probe: an emulating host fails it, in one line" || bad "--probe refusal" "exit $st"
else
	[ "$st" = 0 ] && [ ! -s "$tmp/out" ] && ok "--probe: a hardware host passes it" || bad "--probe" "exit $st: $(cat "$tmp/err")"
fi
run "--probe never starts the guest" 0 '' --probe --kernel $P/hello.elf
grep -q hello "$tmp/out" && bad "--probe started the guest" "$(cat "$tmp/out")"

echo "payloads: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
