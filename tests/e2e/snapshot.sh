#!/bin/bash
# Warm starts through vmrun, on a KVM host that runs Linux guests
# (scripts/on-kvm-host.sh decides where): runs restored from one snapshot
# are each unique (RNG, UUIDs, clock, run id), 50 restores in a row all
# pass and leave nothing behind nor change the snapshot, and a corrupt,
# truncated or foreign snapshot is refused in one line and made again.
# Ends with "snapshot: N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
VMRUN=$PWD/build/bin/vmrun
VMM=$PWD/build/bin/vmm
DEADLINE=120   # seconds for one vmrun
RESTORES=${RESTORES:-50}
JAILED_VMM='^vmm --kvm-fd 3 '
pass=0
fail=0
tmp=$(mktemp -d /tmp/snapshot.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp/runs VMRUN_CACHE=$tmp/cache
mkdir -p "$TMPDIR"

ok() { echo "ok - $1"; pass=$((pass + 1)); }
not_ok() {
	echo "not ok - $1"
	fail=$((fail + 1))
	for f in "$tmp/out" "$tmp/err"; do [ -s "$f" ] && sed "s|^|    $(basename "$f"): |" "$f" | head -n 15; done
}
# v WANT_STATUS VMRUN_ARGS...: run vmrun under the test's deadline
v() {
	local want=$1
	shift
	timeout -k 5 $DEADLINE "$VMRUN" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq "$want" ]
}

v 0 snapshot && snap=$(cat "$tmp/out") && [ -f "$snap/state" ] && [ -f "$snap/memory" ] &&
	ok "vmrun snapshot: $snap ($(du -k "$snap/memory" | cut -f1) KiB of memory on disk)" ||
	{ not_ok "vmrun snapshot (status $rc)"; echo "snapshot: $pass passed, $fail failed"; exit 1; }

# ---- each restored run is unique -------------------------------------------
# (Python starts in ~10 s on the emulated host: one call reads both results.)
probe='head -c 16 /dev/urandom | od -An -tx1 | tr -d " \n"; echo
python3 -c "import uuid; print(uuid.uuid4())"
date +%s
echo "$VMRUN_RUN_ID"'
for i in 1 2; do
	v 0 --json -- sh -c "$probe"
	cp "$tmp/out" "$tmp/u$i.json"
	date +%s >"$tmp/u$i.now"
done
python3 - "$tmp" >"$tmp/u.txt" <<'PY'
import json, sys
for i in (1, 2):
    j = json.load(open(f"{sys.argv[1]}/u{i}.json"))
    now = int(open(f"{sys.argv[1]}/u{i}.now").read())
    out = (j["stdout"].split("\n") + [""] * 4)[:4]
    skew = int(out[2]) - now if out[2].isdigit() else "none"
    print(j["boot"], j["run_id"], out[0] or "none", out[1] or "none", skew, out[3] or "none")
PY
echo "# uniqueness: two runs restored from one snapshot"
n=0
while read -r boot id rnd uuid skew env; do
	n=$((n + 1))
	printf '#   run %s: boot %s, run_id %s\n#     urandom %s\n#     uuid4   %s\n' $n "$boot" "$id" "$rnd" "$uuid"
	printf '#     clock   %s s from the host (read after the run)\n#     VMRUN_RUN_ID %s\n' "$skew" "$env"
	eval "boot$n=\$boot id$n=\$id rnd$n=\$rnd uuid$n=\$uuid skew$n=\$skew env$n=\$env"
done <"$tmp/u.txt"
[ $n -eq 2 ] || not_ok "the uniqueness runs' results ($(cat "$tmp/u.txt"))"
[ "${boot1:-}" = restored ] && [ "${boot2:-}" = restored ] && ok "both runs were restored" ||
	not_ok "restored (boot: ${boot1:-} ${boot2:-})"
[ "${rnd1:-none}" != none ] && [ "$rnd1" != "${rnd2:-}" ] && ok "different /dev/urandom bytes" || not_ok "urandom repeated"
[ "${uuid1:-none}" != none ] && [ "$uuid1" != "${uuid2:-}" ] && ok "different uuid4s" || not_ok "uuid4 repeated"
skew_ok() { [ "$1" != none ] && [ "$1" -le 0 ] && [ "$1" -ge -30 ]; }
skew_ok "${skew1:-none}" && skew_ok "${skew2:-none}" &&
	ok "each guest's clock is the host's (read during the run, at most 30 s before the host's after it)" ||
	not_ok "clock (${skew1:-} s, ${skew2:-} s)"
[ "${env1:-}" = "${id1:-x}" ] && [ "${env2:-}" = "${id2:-x}" ] && ok "VMRUN_RUN_ID is each run's own id" ||
	not_ok "VMRUN_RUN_ID"

# ---- many restores from one snapshot ----------------------------------------
before=$(sha256sum "$snap/state" "$snap/memory")
failed=0
restored=0
t0=$(date +%s)
for i in $(seq "$RESTORES"); do
	[ $((i % 10)) -eq 0 ] && echo "# restore $i of $RESTORES, $(( $(date +%s) - t0 )) s so far"
	# grep, not Python: vmrun's JSON is one line with these fields as written
	if v 0 --json -- sh -c 'echo ok > out.txt; cat out.txt' && grep -qF '"stdout":"ok\n"' "$tmp/out"; then
		grep -qF '"boot":"restored"' "$tmp/out" && restored=$((restored + 1))
	else
		failed=$((failed + 1))
		[ $failed -le 3 ] && { echo "    restore $i: status $rc"; head -n 5 "$tmp/err" | sed 's/^/    /'; }
	fi
done
[ $failed -eq 0 ] && [ $restored -eq "$RESTORES" ] && ok "$RESTORES restores in a row: all passed, all restored" ||
	not_ok "$RESTORES restores: $failed failed, $restored restored"
[ "$before" = "$(sha256sum "$snap/state" "$snap/memory")" ] && ok "the snapshot's files are unchanged" ||
	not_ok "the snapshot changed"
left=$(ls -A "$TMPDIR")
procs=$(pgrep -f "$JAILED_VMM" || true)
cgroups=$(ls -d /sys/fs/cgroup/vmrun/*/ /sys/fs/cgroup/*/vmrun-*/ 2>/dev/null)
[ -z "$left" ] && [ -z "$procs" ] && [ -z "$cgroups" ] &&
	ok "nothing left behind: no run directory, socket, cgroup or vmm process" ||
	not_ok "leftovers: $left $procs $cgroups"

# ---- refused snapshots --------------------------------------------------------
# vmm itself, on copies: each refusal is one line that names the snapshot.
"$VMRUN" snapshot >/dev/null 2>&1   # the one the runs above used, whole again
truncate -s 64m "$tmp/ws.img" && mkfs.ext4 -q -F "$tmp/ws.img"
refuse() { # NAME MUTATION [VMM ARGS...]
	local name=$1 mutate=$2
	shift 2
	rm -rf "$tmp/bad" && cp -r "$snap" "$tmp/bad" && chmod -R u+w "$tmp/bad" && (cd "$tmp/bad" && eval "$mutate")
	timeout -k 5 60 "$VMM" --kernel "${KERNEL:-build/guest/vmlinux}" --memory 256 --cpus 1 \
		--disk build/guest/rootfs.ext4,ro --disk "$tmp/ws.img" --vsock-uds "$tmp/v.sock" \
		--cmdline "root=/dev/vda ro init=/init" --restore "$tmp/bad" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "snapshot $tmp/bad" "$tmp/err" &&
		ok "$name: refused in one line: $(cat "$tmp/err")" || not_ok "$name (status $rc)"
}
refuse "a flipped byte in the state" 'printf "\xff" | dd of=state bs=1 seek=200 conv=notrunc status=none'
refuse "a truncated state" 'truncate -s 100 state'
refuse "an empty state" ': > state'
refuse "a truncated memory file" 'truncate -s 1m memory'
refuse "another vmm build" 'printf "\x00\x00\x00\x00\x00\x00\x00\x00" | dd of=state bs=1 seek=16 conv=notrunc status=none'
KERNEL=build/payloads/reset.elf refuse "another kernel" ':'

# vmrun: the run that meets a corrupt snapshot in the cache ends in an
# error that says so (before its program ran), the snapshot is removed, and
# the next run makes it again and restores it.
printf '\xff' | dd of="$snap/state" bs=1 seek=300 conv=notrunc status=none
v 125 --json -v -- true
grep -qF '"termination":"vm_failed"' "$tmp/out" && grep -q '"message":"[^"]*snapshot' "$tmp/out" &&
	grep -q "refused by vmm: removed" "$tmp/err" && [ ! -e "$snap" ] &&
	ok "vmrun: a corrupt cached snapshot is refused and removed: $(grep -o '"message":"[^"]*"' "$tmp/out")" ||
	not_ok "vmrun with a corrupt snapshot (status $rc)"
v 0 --json -- true && grep -qF '"boot":"restored"' "$tmp/out" && [ -f "$snap/state" ] &&
	ok "the next run makes the snapshot again and restores it" || not_ok "after the corrupt snapshot (status $rc)"

echo "snapshot: $pass passed, $fail failed"
[ $fail -eq 0 ]
