#!/bin/bash
# Tests of the jail around vmm (host/jail.c), on a KVM host that runs Linux
# guests (scripts/on-kvm-host.sh decides where), as root.
# Ends with "jail: N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
VMRUN=$PWD/build/bin/vmrun
pass=0
fail=0
tmp=$(mktemp -d /tmp/jail.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp/runs
mkdir -p "$TMPDIR"
ok() { echo "ok - $1"; pass=$((pass + 1)); }
not_ok() { echo "not ok - $1"; fail=$((fail + 1)); }
check() { if eval "$2"; then ok "$1"; else not_ok "$1"; fi; }
# checks on the running vmm are void without one
vcheck() { if [ -n "$pid" ] && eval "$2"; then ok "$1"; else not_ok "$1"; fi; }

# A run that lasts long enough to inspect its vmm from outside.
timeout -k 5 120 "$VMRUN" -v -c 2 -t 60 -- sleep 12 >"$tmp/out" 2>"$tmp/err" &
run=$!
cg=
for i in $(seq 100); do
	cg=$(ls -d /sys/fs/cgroup/vmrun/*/ 2>/dev/null | head -n 1)
	[ -n "$cg" ] && grep -q . "$cg/cgroup.procs" 2>/dev/null && break
	sleep 0.1
done
pid=$(head -n 1 "$cg/cgroup.procs" 2>/dev/null)
# let the vCPU threads start and load their filters, then take a snapshot
# of everything judged below while the run goes on
sleep 2
tasks=$(ls /proc/"$pid"/task 2>/dev/null)
snap=$tmp/snap
mkdir -p "$snap"
for t in $tasks; do cp /proc/$pid/task/$t/status "$snap/status.$t" 2>/dev/null; done
ls -l /proc/$pid/fd/ 2>/dev/null | awk 'NR > 1 {print $9, $11}' >"$snap/fds"
cat "$cg/memory.max" >"$snap/memory.max" 2>/dev/null
cat "$cg/pids.max" >"$snap/pids.max" 2>/dev/null
cat /proc/$pid/net/dev >"$snap/netdev" 2>/dev/null
echo "# vmm pid $pid, cgroup $cg, threads: $(echo $tasks)"
vcheck "vmm runs in the run's cgroup" '[ -n "$pid" ] && [ -d /proc/$pid ]'
vcheck "vmm has 3 threads (main + 2 vCPUs)" '[ $(echo $tasks | wc -w) -eq 3 ]'
all_status() { # FIELD VALUE: every thread's /proc status has it
	for t in $tasks; do grep -Eq "^$1:[[:space:]]+$2" "$snap/status.$t" || return 1; done
	[ -n "$tasks" ]
}
vcheck "every vmm thread shows Seccomp: 2 (filter mode)" 'all_status Seccomp 2'
vcheck "every vmm thread shows NoNewPrivs: 1" 'all_status NoNewPrivs 1'
uid=$(awk '/^Uid:/ {print $2}' "$snap/status.$pid")
vcheck "vmm runs as a non-zero uid ($uid) from the jail range" '[ -n "$uid" ] && [ "$uid" -ge 2000000 ]'
vcheck "no capabilities" 'grep -Eq "^CapEff:[[:space:]]+0+$" "$snap/status.$pid"'
vcheck "own mount namespace" '[ "$(readlink /proc/$pid/ns/mnt)" != "$(readlink /proc/self/ns/mnt)" ]'
vcheck "own network namespace" '[ "$(readlink /proc/$pid/ns/net)" != "$(readlink /proc/self/ns/net)" ]'
vcheck "own PID, IPC and UTS namespaces" 'for n in pid ipc uts; do [ "$(readlink /proc/$pid/ns/$n)" != "$(readlink /proc/self/ns/$n)" ] || exit 1; done'
vcheck "vmm is PID 1 of its namespace" 'grep -Eq "^NSpid:[[:space:]]+$pid[[:space:]]+1$" "$snap/status.$pid"'
vcheck "empty environment" '[ ! -s /proc/$pid/environ ]'
vcheck "the network namespace has no interface but lo" '[ "$(tail -n +3 "$snap/netdev" | cut -d: -f1 | tr -d " ")" = lo ]'
# Every fd is one the VM needs: its stdio, KVM objects, event fds, the
# images, the console, sockets.
bad_fds=$(while read -r n l; do case "$l" in
	*/null|*/vmm.err|/dev/kvm|anon_inode:kvm-vm|anon_inode:kvm-vcpu:*|anon_inode:\[eventfd\]|anon_inode:\[eventpoll\]|anon_inode:\[signalfd\]|*/rootfs.ext4|*/workspace.ext4|*/run/console|socket:*) ;;
	*) echo -n "$n=$l " ;; esac; done <"$snap/fds")
vcheck "only the expected fds are open ($(wc -l <"$snap/fds")): stdio, /dev/kvm, KVM, event fds, images, console, sockets${bad_fds:+ (unexpected: $bad_fds)}" '[ -z "$bad_fds" ] && [ -s "$snap/fds" ]'
vcheck "the root image is read-only and no host path is visible" '[ ! -e /proc/$pid/root/etc ] && [ ! -e /proc/$pid/root/tmp ] && [ ! -e /proc/$pid/root/dev ]'
vcheck "cgroup memory.max is guest memory + 64 MiB" '[ "$(cat $snap/memory.max)" = $(( (256 + 64) * 1048576 )) ]'
vcheck "cgroup pids.max is vCPUs + 8" '[ "$(cat $snap/pids.max)" = 10 ]'
wait $run
rc=$?
check "the run itself succeeded (status $rc)" '[ $rc -eq 0 ]'
grep -E "jail \(uid|^vmrun: (prepared|vmm started)" "$tmp/err" | sed "s/^/# /"
check "afterwards: the cgroup is gone" '[ ! -d "$cg" ]'
vcheck "afterwards: no process of uid $uid" '[ -n "$uid" ] && ! ps -e -o uid= | grep -qx " *$uid"'
check "afterwards: no run directory" '[ -z "$(ls -A "$TMPDIR")" ]'

# A forbidden syscall from a vCPU thread (the test build's hook) kills vmm
# with SIGSYS, and vmrun reports vm_failed.
if [ -x build/tests/vmm-forbidden ]; then
	mkdir -p "$tmp/bin"
	cp "$VMRUN" "$tmp/bin/vmrun"
	cp build/tests/vmm-forbidden "$tmp/bin/vmm"
	ln -s "$PWD/build/guest" "$tmp/guest"
	timeout -k 5 120 "$tmp/bin/vmrun" --json -- true >"$tmp/out" 2>"$tmp/err"
	rc=$?
	check "a forbidden syscall on a vCPU thread: vmm dies of SIGSYS, vm_failed (125)" \
		'[ $rc -eq 125 ] && grep -q "\"termination\":\"vm_failed\"" "$tmp/out" && grep -q SIGSYS "$tmp/out"'
	check "and nothing is left behind" '[ -z "$(ls -A "$TMPDIR")" ] && [ -z "$(ls -d /sys/fs/cgroup/vmrun/*/ 2>/dev/null)" ]'
else
	not_ok "build/tests/vmm-forbidden (the seccomp test build) is missing"
fi
# Finding 1 of issue 12: every path the caller names is opened with the
# caller's rights. Root acting for SUDO_UID 65534 (nobody), through the CLI.
chmod 755 "$tmp"
secret=$tmp/shadow
echo root-secret >"$secret"
chmod 600 "$secret"
as_nobody() { SUDO_UID=65534 SUDO_GID=65534 timeout -k 5 120 "$VMRUN" "$@" >"$tmp/out" 2>"$tmp/err"; }
as_nobody -i "$secret" -- cat
rc=$?
check "-i of a file the caller cannot read: refused before any VM (125), nothing shown" \
	'[ $rc -eq 125 ] && grep -q "stdin $secret: Permission denied" "$tmp/err" && ! grep -q root-secret "$tmp/out"'
as_nobody -a /root/.vmrun-jail-test -- true
rc=$?
check "-a where the caller may not create: refused (125), nothing made" \
	'[ $rc -eq 125 ] && grep -q "artifacts /root/.vmrun-jail-test: " "$tmp/err" && [ ! -e /root/.vmrun-jail-test ]'
printf 'max_memory 8192\n' >"$tmp/raise"
chmod 644 "$tmp/raise"
as_nobody --policy "$tmp/raise" -m 8192 -- true
rc=$?
check "a caller's --policy cannot raise a ceiling (125)" '[ $rc -eq 125 ] && grep -q "only root" "$tmp/err"'
mkdir -m 0777 "$tmp/mine"
as_nobody -a "$tmp/mine/out" -- sh -c 'mkdir artifacts/d && echo hi >artifacts/d/a.txt'
rc=$?
check "a run for the caller: its artifacts are the caller's (status $rc)" \
	'[ $rc -eq 0 ] && [ "$(stat -c %u:%g "$tmp/mine/out" "$tmp/mine/out/d" "$tmp/mine/out/d/a.txt" | sort -u)" = 65534:65534 ] &&
	 [ "$(cat "$tmp/mine/out/d/a.txt")" = hi ]'
check "and nothing of those runs is left behind" '[ -z "$(ls -A "$TMPDIR")" ]'
echo "jail: $pass passed, $fail failed"
[ $fail -eq 0 ]
