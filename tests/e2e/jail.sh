#!/bin/bash
# Tests of the jail around vmm (host/run/jail.c), on a KVM host that runs Linux
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
# the run's cgroup holds the workspace's helper for a moment before vmm:
# wait (bounded) for vmm itself
cg=
pid=
for i in $(seq 300); do
	cg=$(ls -d /sys/fs/cgroup/vmrun/*/ 2>/dev/null | head -n 1)
	pid=$(head -n 1 "$cg/cgroup.procs" 2>/dev/null)
	[ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = vmm ] && break
	pid=
	sleep 0.1
done
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
# guest + vmm's own 64 MiB + the 64 MiB workspace, which is the run's too
vcheck "cgroup memory.max is guest memory + 64 MiB + the workspace disk" '[ "$(cat $snap/memory.max)" = $(( (256 + 64 + 64) * 1048576 )) ]'
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
# Rootless (issue 12): vmrun as nobody, no capability, /dev/kvm reachable
# through a node only this test's mount namespace binds, and a cgroup v2
# subtree delegated the way systemd's user manager does (owned by the
# user, which runs from a child of it).
if [ -f /sys/fs/cgroup/cgroup.controllers ] && command -v setpriv >/dev/null; then
	rl=$tmp/rootless
	mkdir -m 0777 "$rl" "$rl/runs"
	mknod -m 0666 "$rl/kvm" c 10 232
	dcg=/sys/fs/cgroup/vmrun-rootless-test.$$
	mkdir "$dcg" "$dcg/shell"
	chown -R 65534:65534 "$dcg"
	as_rootless() { # CGROUP VMRUN-ARGS...
		local where=$1
		shift
		timeout -k 5 120 tests/e2e/rootless-as.sh "$rl/kvm" "$where" "$rl/runs" "$VMRUN" "$@" >"$tmp/out" 2>"$tmp/err"
	}
	jail_json() { python3 -c "import json,sys; print(json.dumps(json.load(open('$tmp/out'))['jail'], separators=(',', ':')))" 2>/dev/null; }
	mkdir -m 0777 "$rl/ws"
	echo data >"$rl/ws/in.txt"
	chmod 644 "$rl/ws/in.txt"
	as_rootless "$dcg/shell" --json -w "$rl/ws" -a "$rl/out" -- sh -c 'id -u; cp in.txt artifacts/copy.txt'
	rc=$?
	echo "# rootless run: status $rc, jail $(jail_json)"
	check "rootless with a delegated cgroup: the run works (status $rc)" \
		'[ $rc -eq 0 ] && python3 -c "import json; assert json.load(open(\"$tmp/out\"))[\"stdout\"] == \"1000\\n\""'
	check "its JSON reports the layers: rootless, a user namespace, the delegated cgroup" \
		'[ "$(jail_json)" = "{\"mode\":\"rootless\",\"uid\":\"caller\",\"namespaces\":[\"user\",\"mount\",\"pid\",\"network\",\"ipc\",\"uts\"],\"cgroup\":\"v2-delegated\",\"seccomp\":true,\"no_new_privs\":true}" ]'
	# vmm really runs in the delegated cgroup, with root's limits
	timeout -k 5 120 tests/e2e/rootless-as.sh "$rl/kvm" "$dcg/shell" "$rl/runs" "$VMRUN" -t 60 -- sleep 8 \
		>/dev/null 2>&1 &
	rlrun=$!
	rcg= rpid= ruid= rns=
	# 60 s: a loaded emulated host boots slowly. The first pid in the
	# cgroup may be the jail's short-lived setup process, gone before it
	# is read: wait for vmm itself, its status and namespace read.
	for i in $(seq 600); do
		rcg=$(ls -d "$dcg"/vmrun/*/ 2>/dev/null | head -n 1)
		for p in $(cat "$rcg/cgroup.procs" 2>/dev/null); do
			ruid=$(awk '/^Uid:/ {print $2}' /proc/$p/status 2>/dev/null)
			rns=$(readlink /proc/$p/ns/user 2>/dev/null)
			[ -n "$ruid" ] && [ -n "$rns" ] && [ "$(cat /proc/$p/comm 2>/dev/null)" = vmm ] && rpid=$p && break
		done
		[ -n "$rpid" ] && break
		sleep 0.1
	done
	rmem=$(cat "$rcg/memory.max" 2>/dev/null)
	wait $rlrun
	check "rootless vmm runs in the delegated cgroup (pid ${rpid:-none}, uid ${ruid:-?}, memory.max ${rmem:-?})" \
		'[ -n "$rpid" ] && [ "$ruid" = 65534 ] && [ "$rmem" = $(( (256 + 64 + 64) * 1048576 )) ] &&
		 [ -n "$rns" ] && [ "$rns" != "$(readlink /proc/self/ns/user)" ]'
	check "its artifacts are nobody's" '[ "$(stat -c %u "$rl/out/copy.txt" 2>/dev/null)" = 65534 ] && [ "$(cat "$rl/out/copy.txt")" = data ]'
	# vmrund --local as that user, as the README's local session: its
	# socket in the user's runtime directory, a sandbox made, a command
	# run in it as the sandbox user, the sandbox killed
	mkdir -m 0700 "$rl/xdg"
	chown 65534:65534 "$rl/xdg"
	timeout -k 5 200 tests/e2e/rootless-as.sh "$rl/kvm" "$dcg/shell" "$rl/runs" sh -c '
		export XDG_RUNTIME_DIR=$1
		"$2/vmrund" --local >"$1/local.log" 2>&1 &
		for _ in $(seq 100); do [ -S "$1/vmrun/vmrund.sock" ] && break; sleep 0.1; done
		id=$("$2/vmrun" sandbox create --timeout 120) && "$2/vmrun" sandbox exec "$id" -- sh -c "id -u; echo hi" &&
			"$2/vmrun" sandbox kill "$id"
		st=$?; kill $!; wait; exit $st' sh "$rl/xdg" "$(dirname "$VMRUN")" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	cat "$rl/xdg/local.log" >>"$tmp/err" 2>/dev/null   # shown if it fails
	check "rootless vmrund --local: a sandbox made, a command run in it, killed (status $rc)" \
		'[ $rc -eq 0 ] && [ "$(cat "$tmp/out")" = "$(printf "1000\nhi")" ] && grep -q "stopped: deleted" "$rl/xdg/local.log" &&
		 [ "$(stat -c %u "$rl/xdg/vmrun/state.db")" = 65534 ] && [ -z "$(ls -A "$rl/xdg/vmrun/runs/sandboxes")" ]'
	as_rootless /sys/fs/cgroup -- true
	rc=$?
	check "rootless without a delegated cgroup: refused in one line (125)" \
		'[ $rc -eq 125 ] && [ $(wc -l <"$tmp/err") -eq 1 ] && grep -q "no cgroup v2 subtree delegated to uid 65534" "$tmp/err"'
	as_rootless /sys/fs/cgroup --json --allow-weaker-jail -- true
	rc=$?
	check "--allow-weaker-jail runs it, and the JSON says cgroup none (status $rc)" \
		'[ $rc -eq 0 ] && jail_json | grep -q "\"cgroup\":\"none\""'
	check "and nothing of the rootless runs is left behind" \
		'[ -z "$(ls -A "$rl/runs")" ] && [ -z "$(ls -d "$dcg"/vmrun/*/ 2>/dev/null)" ]'
	rmdir "$dcg/vmrun" "$dcg/shell" "$dcg" 2>/dev/null
else
	not_ok "rootless: needs cgroup v2 at /sys/fs/cgroup and setpriv"
fi
echo "jail: $pass passed, $fail failed"
[ $fail -eq 0 ]
