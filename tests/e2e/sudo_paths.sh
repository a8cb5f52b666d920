#!/bin/bash
# vmrun as root for a sudo caller (SUDO_UID/SUDO_GID 65534) refuses the
# paths that lead into another process's files or mount namespace: /proc/1's
# memory map, /proc/PID/root, cwd and fd, also behind a symlink (issue 38,
# finding 2). All of it happens in the check stage, before any VM: vmrun is
# a copy in a scratch tree whose guest files are stand-ins and whose vmm is
# /bin/false, and TMPDIR is a directory vmrun refuses to work in for the
# caller, so that even a plan that passed would stop before the jail.
# Needs root (sudo's case); no KVM. Usage: tests/e2e/sudo_paths.sh
set -u
cd "$(dirname "$0")/../.." || exit 1
if [ "$(id -u)" != 0 ]; then
	echo "sudo_paths: needs root (it plays sudo's part); run it as root" >&2
	exit 1
fi
pass=0
fail=0
tmp=$(mktemp -d /tmp/sudo_paths.XXXXXX)
# A root process of our own: /proc/1 may be out of reach here for other
# reasons (another namespace's), this one is not, except by these checks.
sleep 300 &
pid=$!
trap 'kill $pid; rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
mkdir -p "$tmp/bin" "$tmp/guest" "$tmp/runs"
cp build/bin/vmrun "$tmp/bin/vmrun"
printf '#!/bin/false\n' >"$tmp/bin/vmm"
chmod 755 "$tmp/bin/vmm"
: >"$tmp/guest/vmlinux"
: >"$tmp/guest/rootfs.ext4"
printf '/usr/bin/cat\n' >"$tmp/guest/programs.txt"
printf 'hello\n' >"$tmp/input"
chmod 644 "$tmp/guest/"* "$tmp/input"
chown 65534:65534 "$tmp/runs"   # not root's: no run directory is made there for the caller
ln -s /proc/1/root "$tmp/into-1"
ln -s "/proc/$pid/root" "$tmp/into-pid"

ok() { echo "ok - $1"; pass=$((pass + 1)); }
not_ok() {
	echo "not ok - $1"
	sed "s/^/    err: /" "$tmp/err" | cut -c1-300 | head -n 5
	fail=$((fail + 1))
}
# vmrun as root for sudo's user 65534; stderr to $tmp/err; its status.
as_sudo() {
	SUDO_UID=65534 SUDO_GID=65534 TMPDIR="$tmp/runs" timeout -k 5 30 "$tmp/bin/vmrun" "$@" \
		</dev/null >/dev/null 2>"$tmp/err"
}
# refused WHAT ARGS...: exit 125 with one line naming WHAT, before any run directory.
refused() {
	local what=$1
	shift
	as_sudo "$@" -- cat
	local st=$?
	if [ "$st" = 125 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -qF -- "$what" "$tmp/err" &&
		! grep -q TMPDIR "$tmp/err"; then
		ok "refused: $*"
	else
		not_ok "refused: $* (status $st)"
	fi
}

refused "--stdin /proc/1/maps" --stdin /proc/1/maps
refused "--workspace /proc/1/root/etc" -w /proc/1/root/etc
refused "--stdin /proc/$pid/maps" --stdin "/proc/$pid/maps"
refused "--workspace /proc/$pid/root/etc" -w "/proc/$pid/root/etc"
refused "--workspace $tmp/into-pid/etc" -w "$tmp/into-pid/etc"
refused "--stdin /proc/self/root/etc/hostname" --stdin /proc/self/root/etc/hostname
refused "--stdin /proc/1/task/1/cwd/" --stdin /proc/1/task/1/cwd/
refused "--workspace /proc/thread-self/fd" -w /proc/thread-self/fd
refused "--workspace /proc/./1/../1/root" -w /proc/./1/../1/root
refused "--workspace $tmp/into-1/etc" -w "$tmp/into-1/etc"
refused "--kernel /proc/$pid/root/etc/hostname" --kernel "/proc/$pid/root/etc/hostname"
refused "--artifacts /proc/$pid/cwd/out" -a "/proc/$pid/cwd/out"

# The control: a file the caller may read passes the check stage, and the
# run stops at the run directory, as the scratch tree means it to.
as_sudo --stdin "$tmp/input" -- cat
st=$?
if [ "$st" = 125 ] && grep -q "TMPDIR $tmp/runs" "$tmp/err"; then
	ok "a readable --stdin passes the checks (stopped at TMPDIR)"
else
	not_ok "a readable --stdin passes the checks (status $st)"
fi
echo "sudo_paths: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
