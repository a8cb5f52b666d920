#!/bin/sh
# The e2e subset on an aarch64 KVM host (scripts/on-kvm-host.sh --arch
# aarch64; on x86_64, the emulated one, whose userland is busybox: this
# script is POSIX sh, and reads the JSON result with grep). vmrun, vmm, the
# agent, the kernel and the python root image are the arm64 builds in
# build/aarch64. The cases are tests/e2e/run.sh's, as a user would run
# them, with the same expected results; runs boot cold, since vmm takes no
# snapshot on aarch64 yet (vmrun's first run learns that and boots cold).
# Ends with "e2e (aarch64): N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
VMRUN=$PWD/build/aarch64/bin/vmrun
DEADLINE=45    # seconds for one vmrun (each asks for -t 10 or less); all of them within make's 900
pass=0
fail=0
tmp=$(mktemp -d /tmp/e2e.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp/runs   # vmrun's run directories, checked for leftovers
export VMRUN_CACHE=$tmp/cache
mkdir -p "$TMPDIR"

ms_now() { awk '{ printf "%d\n", $1 * 1000 }' /proc/uptime; }
ok() { echo "ok - $1"; pass=$((pass + 1)); }
not_ok() {
	echo "not ok - $1"
	fail=$((fail + 1))
	# the first lines (what went wrong) and the last (with -v, the guest's
	# console up to its end)
	for f in "$tmp/out" "$tmp/err"; do
		[ -s "$f" ] || continue
		if [ "$(wc -l <"$f")" -le 40 ]; then cat "$f"; else head -n 10 "$f"; echo ...; tail -n 30 "$f"; fi |
			sed "s|^|    $(basename "$f"): |"
	done
}
# v WANT_STATUS VMRUN_ARGS...: run vmrun under the test's own deadline,
# keep stdout and stderr, check the status; sets rc and ms.
v() {
	want=$1
	shift
	t0=$(ms_now)
	timeout -s KILL $DEADLINE "$VMRUN" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ $rc -ne 137 ] || echo "vmrun was killed at the test's $DEADLINE s deadline" >>"$tmp/err"
	ms=$(($(ms_now) - t0))
	[ "$rc" -eq "$want" ]
}
# has TEXT: the JSON result in $tmp/out holds TEXT verbatim.
has() { grep -qF -- "$1" "$tmp/out"; }

# The first run tries the warm start, learns that vmm refuses snapshots
# here, and boots cold; so does every later run, without trying again.
# -v: should it fail, its log and the guest's console say why.
v 0 -v --json -- echo hello world && has '"stdout":"hello world\n"' && has '"boot":"cold"' &&
	ok "echo: stdout passed through, exit 0, booted cold ($ms ms)" || not_ok "echo (status $rc)"
v 0 -v -- true && grep -q 'snapshot: .*aarch64.*booting cold' "$tmp/err" &&
	ok "the warm start is refused in one line and the run boots cold" || not_ok "snapshot fallback (status $rc)"
v 7 --cold -- sh -c 'exit 7' && ok "exit status 7 passed through" || not_ok "exit status (got $rc)"
v 0 --cold -- sh -c 'echo out; echo err >&2' && [ "$(cat "$tmp/out")" = out ] && [ "$(cat "$tmp/err")" = err ] &&
	ok "stdout and stderr kept apart" || not_ok "stdout/stderr"
printf 'line one\nline two\n' >"$tmp/in"
v 0 --cold -i "$tmp/in" -- cat && [ "$(cat "$tmp/out")" = "$(cat "$tmp/in")" ] &&
	ok "--stdin reaches the command" || not_ok "stdin"
v 143 --cold -- sh -c 'kill -TERM $$' && ok "death by SIGTERM: 143" || not_ok "signal (got $rc)"
v 124 --cold --json -t 3 -- sleep 100 && has '"termination":"timeout"' && has '"timed_out":true' &&
	ok "--timeout 3 on sleep 100: 124, timeout, after $ms ms" || not_ok "timeout (status $rc after $ms ms)"
v 126 --cold -v -- /sbin/reboot && ! grep -q 'vmm started' "$tmp/err" &&
	ok "a program outside the allowlist: 126 without booting a VM ($ms ms)" || not_ok "denied (status $rc)"
v 127 --cold --json -- no-such-program && has '"termination":"not_found"' &&
	ok "an unknown program: 127, not_found" || not_ok "not found (status $rc)"
v 0 --cold -- env && [ "$(cut -d= -f1 "$tmp/out" | sort | tr '\n' ' ')" = "HOME LANG PATH PYTHONIOENCODING VMRUN_RUN_ID " ] &&
	ok "no host variable reaches the guest; env is exactly PATH HOME LANG PYTHONIOENCODING VMRUN_RUN_ID" ||
	not_ok "environment"
v 0 --cold -- python3 -c 'import platform, ssl, sqlite3, json, hashlib; print(platform.machine())' &&
	[ "$(cat "$tmp/out")" = aarch64 ] && ok "python3 runs, on aarch64" || not_ok "python3"
v 0 --cold -c 2 -- nproc && [ "$(cat "$tmp/out")" = 2 ] && ok "--cpus 2: the guest runs on 2 CPUs" ||
	not_ok "two vCPUs"
# The device tree as the guest got it: the GIC the host gave (v3, or v2
# where it has no v3), one virtio-mmio node per device (root, workspace,
# vsock, rng), both CPUs.
v 0 --cold -c 2 -- sh -c 'd=/sys/firmware/devicetree/base; tr -d "\0" <$d/intc@8000000/compatible; echo
	ls -d $d/virtio_mmio@* | wc -l; ls -d $d/cpus/cpu@* | wc -l' &&
	case "$(cat "$tmp/out" | tr '\n' ' ')" in "arm,gic-v3 4 2 " | "arm,cortex-a15-gic 4 2 ") true ;; *) false ;; esac &&
	ok "the guest's device tree: $(head -n 1 "$tmp/out"), 4 virtio-mmio nodes, 2 CPUs" || not_ok "device tree"
mkdir -p "$tmp/ws/sub"
echo data >"$tmp/ws/sub/in.txt"
v 0 --cold --json -w "$tmp/ws" -a "$tmp/art" -- sh -c \
	'cat sub/in.txt > artifacts/copy.txt && ln -s /etc/passwd artifacts/link' &&
	[ "$(cat "$tmp/art/copy.txt" 2>/dev/null)" = data ] && [ ! -e "$tmp/art/link" ] && has '"path":"link"' &&
	ok "workspace copied in; artifacts out; a symlink skipped with its reason" || not_ok "artifacts"
v 0 --cold -- sh -c 'head -c 16 /dev/urandom | od -An -tx1' && first=$(cat "$tmp/out") &&
	v 0 --cold -- sh -c 'head -c 16 /dev/urandom | od -An -tx1' && [ "$first" != "$(cat "$tmp/out")" ] &&
	ok "two runs read different /dev/urandom bytes" || not_ok "urandom"

# Nothing left behind by any of the runs above.
left=$(ls -A "$TMPDIR")
# (busybox here has no pgrep: the command lines are read from /proc.)
# (A process may end between the glob and the read: its error is dropped.)
procs=$(for c in /proc/[0-9]*/cmdline; do { tr '\0' ' ' <"$c"; } 2>/dev/null; echo; done | grep '^vmm --kvm-fd 3 ')
cgroups=$(ls -d /sys/fs/cgroup/vmrun/*/ /sys/fs/cgroup/*/vmrun-*/ 2>/dev/null)
[ -z "$left" ] && [ -z "$procs" ] && [ -z "$cgroups" ] &&
	ok "no run directory, image, socket, cgroup or vmm process left behind" ||
	{ echo "    left: $left procs: $procs cgroups: $cgroups"; not_ok "leftovers"; }
echo "e2e (aarch64): $pass passed, $fail failed"
[ $fail -eq 0 ]
