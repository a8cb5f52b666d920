#!/bin/bash
# A sandbox that moves between nodes (issue 42's second part), on a KVM
# host that runs Linux guests (scripts/on-kvm-host.sh decides where): two
# vmrund nodes that share a PostgreSQL server this script starts
# (tests/vmrund/pg.sh) and a snapshot dir. A sandbox on node 1 with a
# background server, a command still printing and a file is paused: its
# VM is parked in the snapshot dir, node 1's supervisor exits and the
# sandbox is paused on no node. Node 1 is killed (kill -9). Node 2
# resumes it: the server answers, the command finishes with all its
# output, the file is there, the guest's clock is the host's, its command
# ids go on. Parked again, one of its kept outputs altered: the resume is
# refused with the reason and the sandbox is failed, nothing of it runs.
# A second sandbox with a checkpoint whose node is killed is resumable
# from it: node 2 resumes it there (the workspace as the checkpoint kept
# it, the diff from its own start), and node 1, back, stops the
# supervisor its death had left running.
# At the end no supervisor, vmm, cgroup or directory is left. Every curl
# has a deadline.
set -u
cd "$(dirname "$0")/../.."
. tests/e2e/lib.sh
. tests/vmrund/pg.sh
e2e_init sandbox-cluster
declare -a pids ports
trap 'pg_cleanup; for p in ${pids[@]:-}; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
K=key-sandbox-cluster-0123456789
mkdir -p "$tmp/etc" "$tmp/shared"
printf 'tenant a sandboxes=2 max_sandbox_timeout_s=900 rate=100\nkey %s a\n' "$K" >"$tmp/etc/keys"
chmod 600 "$tmp/etc/keys"
pg_start "$tmp/pg" || { not_ok "no PostgreSQL server"; finish sandbox-cluster; exit 1; }
for n in 1 2; do
	ports[$n]=$((20000 + RANDOM % 20000))
	cat >"$tmp/etc/node$n.conf" <<CONF
listen = 127.0.0.1:${ports[$n]}
store = $PG_URI
node = node$n
lease_s = 3
state_db = $tmp/node$n.db
run_dir = $tmp/lib/node$n
keys = $tmp/etc/keys
audit_log = $tmp/node$n.audit.jsonl
snapshot_dir = $tmp/shared
slots = 1
CONF
done
# the snapshots: this test's own, which both nodes restore from
export VMRUN_CACHE=$tmp/cache
base() { echo "http://127.0.0.1:${ports[$1]}"; }
start_node() {
	build/bin/vmrund --config "$tmp/etc/node$1.conf" >>"$tmp/node$1.log" 2>&1 &
	pids[$1]=$!
	for _ in $(seq 100); do curl -fs -m 2 "$(base "$1")/healthz" >/dev/null 2>&1 && return 0; sleep 0.1; done
	not_ok "node $1 did not start: $(tail -5 "$tmp/node$1.log")"
	finish sandbox-cluster
	exit 1
}
# c NODE PATH [CURL ARGS...]: a request to node NODE; status in $code.
c() {
	local n=$1 path=$2
	shift 2
	code=$(curl -s -m 150 -o "$tmp/out" -w '%{http_code}' -H "Authorization: Bearer $K" "$@" "$(base "$n")$path" \
		2>"$tmp/err")
}
post() { c "$1" "$3" -X POST -H 'Content-Type: application/json' --data-binary "$2" "${@:4}"; }
jj() { jq -e "$1" "$tmp/out" >/dev/null 2>&1; }
expect() { if [ "$code" = "$2" ] && { [ -z "${3:-}" ] || jj "$3"; }; then ok "$1"; else
	echo "    status $code" >>"$tmp/err"; not_ok "$1"; fi; }
field() { jq -r "$1" "$tmp/out" 2>/dev/null; }
cmd() { post "$1" "{\"argv\":[\"sh\",\"-c\",\"$2\"]}" "/v1/sandboxes/$id/commands?wait=60"; }
# parked: until the store has it paused on no node (10 s)
parked() {
	for _ in $(seq 100); do
		c "$1" "/v1/sandboxes/$id"
		[ "$(field .node)" = null ] && [ "$(field .state)" = paused ] && return 0
		sleep 0.1
	done
	return 1
}

start_node 1
start_node 2
post 1 '{"runtime":"python","timeout_s":900,"limits":{"max_output":1048576}}' /v1/sandboxes
expect "a sandbox created on node 1" 201 '.state=="running" and .node=="node1"'
id=$(field .id)
cmd 1 "echo before > kept.txt"
expect "a file written" 201 '.exit_code==0'
post 1 '{"argv":["python3","-m","http.server","8000","--bind","127.0.0.1"],"background":true,"timeout_s":1200}' \
	"/v1/sandboxes/$id/commands"
expect "a background server starts" 201 '.state=="running"'
fetch='{"argv":["python3","-c","import urllib.request as u, time\nfor i in range(150):\n  try: print(u.urlopen(\"http://127.0.0.1:8000/kept.txt\", timeout=5).read().decode().strip()); break\n  except OSError: time.sleep(0.2)"],"timeout_s":60}'
post 1 "$fetch" "/v1/sandboxes/$id/commands?wait=60"
expect "it answers" 201 '.stdout=="before\n"'
post 1 '{"argv":["sh","-c","for i in $(seq 1 40); do echo line $i; sleep 0.1; done; echo done"],"background":true}' \
	"/v1/sandboxes/$id/commands"
expect "a command that prints for a while starts" 201 '.state=="running"'
cid=$(field .id)
sleep 1

t0=$(date +%s%N)
post 1 '{}' "/v1/sandboxes/$id/pause"
expect "paused on node 1 ($(( ($(date +%s%N) - t0) / 1000000 )) ms)" 200 '.state=="paused"'
parked 1 && [ -s "$tmp/shared/sandboxes/$id/paused/pages" ] && [ -s "$tmp/shared/sandboxes/$id/paused/sandbox.json" ] &&
	[ -n "$(ls "$tmp/shared/bases")" ] && ok "parked: paused on no node, its VM in the snapshot dir, its base kept once" ||
	not_ok "parked: $(cat "$tmp/out"; ls -R "$tmp/shared" | head -20)"
du -sh --count-links "$tmp/shared/sandboxes/$id/paused" "$tmp/shared/bases" | sed 's/^/    /'
for _ in $(seq 50); do pgrep -f "build/bin/vmrund-sandbox.*$id" >/dev/null || break; sleep 0.1; done
! pgrep -f "build/bin/vmrund-sandbox.*$id" >/dev/null && ! pgrep -x vmm >/dev/null &&
	ok "node 1's supervisor exited and no vmm runs: a parked sandbox costs disk only" ||
	not_ok "left on node 1: $(pgrep -af 'vmrund-sandbox|vmm')"
kill -9 "${pids[1]}"
wait "${pids[1]}" 2>/dev/null
ok "node 1 killed (kill -9)"

t0=$(date +%s%N)
post 2 '{}' "/v1/sandboxes/$id/resume"
expect "node 2 resumes it ($(( ($(date +%s%N) - t0) / 1000000 )) ms)" 200 '.state=="running"'
c 2 "/v1/sandboxes/$id"
expect "it runs on node 2, its life what it had left" 200 '.state=="running" and .node=="node2" and .time_left_s>300 and .time_left_s<895'
post 2 "$fetch" "/v1/sandboxes/$id/commands?wait=60"
expect "the background server answers again" 201 '.stdout=="before\n"'
c 2 "/v1/sandboxes/$id/commands/$cid?wait=60"
expect "the command that was printing finished with all its output" 200 \
	".state==\"ended\" and .exit_code==0 and .stdout==([range(1;41)|\"line \(.)\n\"]|join(\"\"))+\"done\n\""
c 2 "/v1/sandboxes/$id/commands/$cid/events" -N
[ "$code" = 200 ] && grep -q '^event: exit' "$tmp/out" && [ "$(grep -c 'line ' "$tmp/out")" -ge 40 ] &&
	ok "its events from node 2: every line, then its exit" || not_ok "events ($code)"
cmd 2 "cat kept.txt; date +%s"
host=$(date +%s)
expect "the file is there" 201 '.stdout|startswith("before\n")'
guest=$(field .stdout | sed -n 2p)
d=$((host - ${guest:-0}))
[ "${d#-}" -le 5 ] && ok "the guest's clock is the host's ($d s apart)" || not_ok "clock: guest $guest, host $host"
[ "$(field .id)" -gt "$cid" ] && ok "its command ids go on (now $(field .id))" || not_ok "command id $(field .id)"
[ ! -e "$tmp/shared/sandboxes/$id/paused" ] && [ -z "$(ls -A "$tmp/lib/node1/sandboxes" 2>/dev/null)" ] &&
	ok "the parked files went once it ran; node 1 holds nothing of it" ||
	not_ok "left: $(ls "$tmp/shared/sandboxes/$id" "$tmp/lib/node1/sandboxes")"

# parked again, one of its outputs altered: refused, failed, nothing runs
post 2 '{}' "/v1/sandboxes/$id/pause"
expect "paused again on node 2" 200 '.state=="paused"'
parked 2 || not_ok "not parked again: $(cat "$tmp/out")"
f="$tmp/shared/sandboxes/$id/paused/cmds/$cid.out"
[ -s "$f" ] && printf 'X' | dd of="$f" bs=1 seek=20 conv=notrunc status=none
start_node 1
post 1 '{}' "/v1/sandboxes/$id/resume"
expect "node 1 (back) refuses to resume an altered one: 500 with the reason" 500 '.message|test("altered")'
c 2 "/v1/sandboxes/$id"
expect "the sandbox is failed, with that reason" 200 '.state=="failed" and (.reason|test("altered"))'

# a running sandbox with a checkpoint whose node dies: resumable from it
post 1 '{"runtime":"python","timeout_s":600}' /v1/sandboxes
expect "a second sandbox, on node 1" 201 '.node=="node1"'
id=$(field .id)
cmd 1 "echo one > f"
post 2 '{"name":"cp1"}' "/v1/sandboxes/$id/checkpoints"
expect "a checkpoint of it, taken through node 2, in the snapshot dir" 201 '.name=="cp1"'
[ -d "$tmp/shared/sandboxes/$id/checkpoints/cp1" ] || not_ok "no checkpoint in the snapshot dir"
cmd 1 "echo two > g"
kill -9 "${pids[1]}"
wait "${pids[1]}" 2>/dev/null
for _ in $(seq 150); do c 2 "/v1/sandboxes/$id"; [ "$(field .state)" = resumable ] && break; sleep 0.1; done
expect "node 1 killed: its sandbox is resumable from its checkpoint, on no node" 200 \
	".state==\"resumable\" and .resumable_from==\"$id/cp1\" and .node==null and (.reason|test(\"node node1\"))"
post 2 '{}' "/v1/sandboxes/$id/resume"
expect "node 2 resumes it from the checkpoint" 200 '.state=="running"'
cmd 2 "cat f; ls g 2>/dev/null; echo end"
expect "its workspace is the checkpoint's: what came after it is not there" 201 '.stdout=="one\nend\n"'
c 2 "/v1/sandboxes/$id/diff?from=start"
expect "its diff is still from its own start" 200 '[.files[].path]==["f"]'
# node 1's old supervisor still runs its VM (its vmrund is down): a
# pause parks nothing, the sandbox being node 2's now (the owner token)
code=$(curl -s -m 150 --unix-socket "$tmp/lib/node1/sandboxes/$id/api.sock" -o "$tmp/out" -w '%{http_code}' \
	-X POST -H 'Content-Type: application/json' -d '{}' http://s/pause 2>"$tmp/err")
[ "$code" = 200 ] && [ ! -e "$tmp/shared/sandboxes/$id/paused" ] &&
	grep -q "another node holds this sandbox now" "$tmp/lib/node1/sandboxes/$id/supervisor.log" &&
	ok "node 1's old supervisor, paused, parks nothing over node 2's sandbox (its owner token is not the one there)" ||
	not_ok "old supervisor's pause ($code): $(ls "$tmp/shared/sandboxes/$id"; tail -3 "$tmp/lib/node1/sandboxes/$id/supervisor.log")"
start_node 1
for _ in $(seq 100); do [ "$(pgrep -fc "build/bin/vmrund-sandbox.*$id")" = 1 ] && break; sleep 0.1; done
post 1 "{\"from_checkpoint\":\"$id/cp1\",\"argv\":[\"cat\",\"f\"],\"limits\":{\"timeout_s\":120}}" '/v1/runs?wait=200'
expect "a verification run from its checkpoint, through node 1, which does not hold it" 200 \
	'.state=="succeeded" and .stdout=="one\n"'
[ "$(pgrep -fc "build/bin/vmrund-sandbox.*$id")" = 1 ] &&
	ok "node 1, back, stopped the supervisor its death left running: one VM of it runs" ||
	not_ok "supervisors of $id: $(pgrep -af "vmrund-sandbox.*$id")"
c 1 "/v1/sandboxes/$id" -X DELETE
expect "deleted through node 1" 200 '.state=="stopped"'
sleep 0.5
! pgrep -f build/bin/vmrund-sandbox >/dev/null && ! pgrep -x vmm >/dev/null && [ ! -e "$tmp/shared/sandboxes/$id" ] &&
	[ -z "$(find /sys/fs/cgroup/vmrun -mindepth 1 -maxdepth 1 -type d 2>/dev/null)" ] &&
	[ -z "$(find "$tmp/lib/node1/sandboxes" "$tmp/lib/node2/sandboxes" -mindepth 1 2>/dev/null)" ] &&
	ok "nothing runs or is left: no supervisor, vmm, cgroup, or directory on either node or in the snapshot dir" ||
	not_ok "leftovers: $(pgrep -af 'vmrund-sandbox|vmm'; ls -R "$tmp/shared/sandboxes" "$tmp/lib" | head)"
# what each node said, when a check failed: their logs go with the
# emulated host
if [ "$fail" -gt 0 ]; then
	for n in 1 2; do tail -n 25 "$tmp/node$n.log" | cut -c1-300 | sed "s/^/    node$n.log: /"; done
fi
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
# a node that does not stop within 30 s is a failure, not the suite's time
for _ in $(seq 300); do
	alive=
	for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
	[ -z "$alive" ] && break
	sleep 0.1
done
if [ -n "$alive" ]; then
	not_ok "a node did not stop on SIGTERM within 30 s:$alive"
	for p in $alive; do kill -KILL "$p" 2>/dev/null; done
fi
wait 2>/dev/null
echo "    ($SECONDS s in all)"
finish sandbox-cluster
