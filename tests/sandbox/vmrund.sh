#!/bin/bash
# Sandboxes through vmrund's /v1/sandboxes on a KVM host that runs Linux
# guests (scripts/on-kvm-host.sh decides where): create with metadata,
# commands and files passed through to the sandbox's supervisor (a 1 MiB
# upload streamed and read back), two tenants that cannot see each
# other's sandboxes, commands or files, the tenant's ceilings (429, 400),
# an Idempotency-Key that runs a command once across a kill -9 of
# vmrund, a background command and its output adopted by the next vmrund
# after kill -9 and after SIGTERM, a pause that outlives a kill -9 of
# vmrund and a resume, the workspace's diff from a checkpoint and from
# the start (GET .../diff, vmrun sandbox diff), forks and a verification
# run bound to a reviewed digest (expect_digest), a life shortened until
# it runs out,
# and DELETE; at the end no supervisor, vmm, cgroup or directory is left.
# Then vmrund --local and `vmrun sandbox` (create, exec, cp, cat, ls,
# timeout, pause, resume, kill) on its socket.
# Every curl has a deadline.
set -u
cd "$(dirname "$0")/../.."
. tests/e2e/lib.sh
e2e_init vmrund-sandbox
PORT=$((20000 + RANDOM % 20000))
BASE=http://127.0.0.1:$PORT
KA=key-sandbox-tenant-a-0123456789
KB=key-sandbox-tenant-b-0123456789
mkdir -p "$tmp/etc" "$tmp/lib"
printf 'tenant a sandboxes=2 max_sandbox_timeout_s=900 rate=100\ntenant b sandboxes=1 rate=100\nkey %s a\nkey %s b\n' \
	"$KA" "$KB" >"$tmp/etc/keys"
chmod 600 "$tmp/etc/keys"
cat >"$tmp/etc/vmrund.conf" <<CONF
listen = 127.0.0.1:$PORT
state_db = $tmp/lib/state.db
run_dir = $tmp/lib/runs
keys = $tmp/etc/keys
audit_log = $tmp/lib/audit.jsonl
slots = 1
CONF
# the snapshots: this test's own, which its sandboxes restore (and pause against)
export VMRUN_CACHE=$tmp/cache
start_vmrund() {
	build/bin/vmrund --config "$tmp/etc/vmrund.conf" >>"$tmp/vmrund.log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do curl -fs -m 2 "$BASE/healthz" >/dev/null 2>&1 && return 0; sleep 0.1; done
	not_ok "vmrund did not start: $(tail -5 "$tmp/vmrund.log")"
	finish vmrund-sandbox
	exit 1
}
# c KEY PATH [CURL ARGS...]: a request as a tenant; status in $code.
c() {
	local key=$1 path=$2
	shift 2
	code=$(curl -s -m 150 -o "$tmp/out" -w '%{http_code}' -H "Authorization: Bearer $key" "$@" "$BASE$path" \
		2>"$tmp/err")
}
post() { c "$1" "$3" -X POST -H 'Content-Type: application/json' --data-binary "$2" "${@:4}"; }
# jq rather than python for the answers: under the emulated host's TCG a
# python start costs a second.
jj() { jq -e "$1" "$tmp/out" >/dev/null 2>&1; }
expect() { if [ "$code" = "$2" ] && { [ -z "${3:-}" ] || jj "$3"; }; then ok "$1"; else
	echo "    status $code" >>"$tmp/err"; not_ok "$1"; fi; }
field() { jq -r "$1" "$tmp/out" 2>/dev/null; }
supervisors() { pgrep -f "build/bin/vmrund-sandbox" | tr '\n' ' '; }

start_vmrund
t0=$(date +%s%N)
post "$KA" '{"runtime":"python","timeout_s":600,"metadata":{"user":"u1","task":"t-7"},"limits":{"max_output":1048576}}' /v1/sandboxes
echo "    create to running: $(( ($(date +%s%N) - t0) / 1000000 )) ms"
expect "create: 201, running, with its metadata and limits" 201 '.state=="running" and .metadata=={"user":"u1","task":"t-7"} and .runtime=="python" and .time_left_s>500 and .tenant=="a"'
id=$(field .id)
c "$KA" "/v1/sandboxes/$id"
expect "GET: running, with what its supervisor says and its usage (cgroup, workspace)" 200 \
	".id==\"$id\" and .state==\"running\" and .commands==0 and .usage.cpu_ms>0 and .usage.memory_bytes>0 and .usage.disk_bytes>0"

# ---- commands and files, passed through ----
post "$KA" '{"argv":["sh","-c","echo kept > state.txt; echo out; exit 3"]}' "/v1/sandboxes/$id/commands?wait=60"
expect "a command through vmrund: exit code and stdout" 201 '.exit_code==3 and .stdout=="out\n"'
post "$KA" '{"argv":["cat","state.txt"]}' "/v1/sandboxes/$id/commands?wait=60"
expect "the next command sees what the last one left" 201 '.stdout=="kept\n"'
head -c 1048576 /dev/urandom >"$tmp/blob"
c "$KA" "/v1/sandboxes/$id/files?path=blob.bin" -X PUT --data-binary "@$tmp/blob"
expect "a 1 MiB upload, streamed through vmrund" 200 '.size==1048576'
c "$KA" "/v1/sandboxes/$id/files?path=blob.bin"
[ "$code" = 200 ] && cmp -s "$tmp/out" "$tmp/blob" && ok "read back whole" || not_ok "read back ($code)"
c "$KA" "/v1/sandboxes/$id/files/list?path=."
expect "list through vmrund" 200 '[.entries[].name] | contains(["blob.bin","state.txt"])'
c "$KA" "/v1/sandboxes/$id/files?path=blob.bin" -X PUT
expect "an upload without Content-Length: 411" 411

# a background command whose output goes on while vmrund restarts
post "$KA" '{"argv":["python3","-u","-c","import time\nfor i in range(100000):\n print(i); time.sleep(0.2)"],"background":true,"timeout_s":600}' \
	"/v1/sandboxes/$id/commands"
expect "a background command" 201
bg=$(field .id)
# a command with an Idempotency-Key: it counts its runs in the guest
once='{"argv":["sh","-c","echo x >> runs.txt; wc -l < runs.txt"]}'
post "$KA" "$once" "/v1/sandboxes/$id/commands?wait=60" -H 'Idempotency-Key: once-1'
expect "a keyed command runs" 201 '.stdout=="1\n"'
cid=$(field .id)
post "$KA" "$once" "/v1/sandboxes/$id/commands?wait=60" -H 'Idempotency-Key: once-1'
expect "sent again with its key: the same command, not run again" 200 ".id==$cid and .stdout==\"1\\n\""

echo "    ($SECONDS s: commands and files)"
# ---- tenants ----
for p in "/v1/sandboxes/$id" "/v1/sandboxes/$id/commands" "/v1/sandboxes/$id/files?path=state.txt"; do
	c "$KB" "$p"
	expect "tenant b reaching a's sandbox ($p): 404" 404
done
post "$KB" "$once" "/v1/sandboxes/$id/commands?wait=60"
expect "tenant b running a command in a's sandbox: 404" 404
c "$KB" "/v1/sandboxes/$id" -X DELETE
expect "tenant b deleting a's sandbox: 404" 404
c "$KB" /v1/sandboxes
expect "tenant b's list does not have it" 200 '.sandboxes==[]'
c "$KA" /v1/sandboxes
expect "tenant a's list has it" 200 "[.sandboxes[].id]==[\"$id\"]"
post "$KB" '{"timeout_s":60}' /v1/sandboxes
expect "tenant b's sandbox" 201
idb=$(field .id)
post "$KB" '{"timeout_s":60}' /v1/sandboxes
expect "tenant b's second sandbox: 429, its ceiling (sandboxes=1)" 429 '.message|contains("sandboxes")'
post "$KB" '{"timeout_s":120}' "/v1/sandboxes/$idb/timeout"
expect "its own sandbox's life set again" 200 '.time_left_s>100'
c "$KB" "/v1/sandboxes/$idb" -X DELETE
expect "DELETE: stopped, deleted" 200 '.state=="stopped" and .reason=="deleted" and .ended_at!=null'
post "$KB" '{"timeout_s":3601}' /v1/sandboxes
expect "a life past the tenant's max_sandbox_timeout_s: 400" 400 '.message|contains("max_sandbox_timeout_s")'
post "$KB" '{"runtime":"cobol"}' /v1/sandboxes
expect "an unknown runtime: 400" 400 '.message|contains("cobol")'
post "$KB" '{"argv":["true"]}' /v1/sandboxes
expect "a command in the create body: 400" 400

echo "    ($SECONDS s: tenants)"
# ---- vmrund killed, and stopped, while the sandbox runs ----
sleep 1
kill -9 "$pid"
wait "$pid" 2>/dev/null
sup=$(supervisors)
[ -n "$sup" ] && ok "kill -9 of vmrund: the supervisor runs on ($sup)" || not_ok "no supervisor after kill -9"
start_vmrund
grep -q "1 adopted" "$tmp/vmrund.log" && ok "the new vmrund adopts it" || not_ok "adopted: $(tail -3 "$tmp/vmrund.log")"
c "$KA" "/v1/sandboxes/$id"
expect "after the restart: running" 200 '.state=="running"'
post "$KA" "$once" "/v1/sandboxes/$id/commands?wait=60" -H 'Idempotency-Key: once-1'
expect "the keyed command after kill -9: still the same one, run once" 200 ".id==$cid and .stdout==\"1\\n\""
post "$KA" '{"argv":["cat","runs.txt"]}' "/v1/sandboxes/$id/commands?wait=60"
expect "counted in the guest: one run" 201 '.stdout=="x\n"'
kill -TERM "$pid"
wait "$pid" 2>/dev/null
[ "$(supervisors)" = "$sup" ] && ok "SIGTERM of vmrund: the supervisor runs on" || not_ok "supervisors after SIGTERM: $(supervisors)"
start_vmrund
c "$KA" "/v1/sandboxes/$id/commands/$bg"
expect "the background command and its output are there after both restarts" 200 '.state=="running" and (.stdout|split("\n")|length)>10'
code=$(timeout 10 curl -s -N -m 5 -o "$tmp/out" -w '%{http_code}' -H "Authorization: Bearer $KA" \
	"$BASE/v1/sandboxes/$id/commands/$bg/events" 2>"$tmp/err")
n=$(grep -c '^event: stdout' "$tmp/out")
[ "$n" -gt 10 ] && ok "its events replay and go on live through vmrund ($n events in 5 s)" || not_ok "events: $n ($code)"

# ---- a pause across a kill -9 of vmrund ----
post "$KA" '{}' "/v1/sandboxes/$id/pause"
expect "POST .../pause: paused" 200 '.state=="paused"'
c "$KA" "/v1/sandboxes?state=paused"
expect "listed as paused" 200 "[.sandboxes[].id]==[\"$id\"]"
post "$KA" '{"argv":["true"]}' "/v1/sandboxes/$id/commands?wait=5"
expect "a command while paused: 409" 409
pgrep -x vmm >/dev/null && not_ok "paused: a vmm still runs" || ok "paused: no vmm runs"
kill -9 "$pid"
wait "$pid" 2>/dev/null
start_vmrund
c "$KA" "/v1/sandboxes/$id"
expect "after kill -9 and a restart of vmrund: still paused, its life left kept, no deadline" 200 \
	'.state=="paused" and .time_left_s>100 and .timeout_at==null and .paused_at!=null'
c "$KA" "/v1/sandboxes/$id/diff"
expect "the diff of a paused sandbox, read as it lies (no hold)" 200 \
	'.held_ms==null and .to=="now" and (.files|map(.path)|index("runs.txt"))'
post "$KA" '{}' "/v1/sandboxes/$id/resume"
expect "POST .../resume: running" 200 '.state=="running"'
c "$KA" "/v1/sandboxes/$id/commands/$bg"
n1=$(field '.stdout|split("\n")|length')
sleep 2
c "$KA" "/v1/sandboxes/$id/commands/$bg"
expect "the background command goes on after the resume" 200 ".state==\"running\" and (.stdout|split(\"\n\")|length)>$n1"
# ---- the workspace's diff, between a checkpoint and now (the agent held while it is read) ----
post "$KA" '{"argv":["sh","-c","mkdir -p d && printf \"a\\nb\\n\" > d/t.txt && echo v > victim && printf \"\\000\\001\" > bin && ln -s d/t.txt lnk"]}' \
	"/v1/sandboxes/$id/commands?wait=60"
expect "files to compare written" 201 '.exit_code==0'
post "$KA" '{"name":"cp-0"}' "/v1/sandboxes/$id/checkpoints"
expect "checkpoint cp-0" 201 '.name=="cp-0"'
post "$KA" '{"argv":["sh","-c","printf \"a\\nB\\nc\\n\" > d/t.txt && rm victim && printf \"\\000\\002\" > bin && ln -sfn bin lnk && head -c 300000 /dev/zero | tr \"\\000\" a > big.txt && echo new > new.txt"]}' \
	"/v1/sandboxes/$id/commands?wait=60"
expect "files changed after it" 201 '.exit_code==0'
c "$KA" "/v1/sandboxes/$id/diff?from=cp-0"
expect "GET .../diff?from=cp-0: added, modified, removed, binary, a link, a file over the text cap" 200 '
	(.files|map({(.path): .})|add) as $f | .summary.added==2 and .summary.modified==3 and .summary.removed==1
	and $f["d/t.txt"].status=="modified" and ($f["d/t.txt"].diff|contains("-b\n+B\n+c\n"))
	and $f["d/t.txt"].insertions==2 and $f["d/t.txt"].deletions==1
	and $f.victim.status=="removed" and $f.bin.binary and ($f.bin|has("diff")|not)
	and $f.lnk.target=="bin" and $f.lnk.old.target=="d/t.txt"
	and $f["big.txt"].size==300000 and ($f["big.txt"].diff_omitted|length>0)
	and $f["new.txt"].diff=="--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+new\n"
	and .complete and (.digest|length==64) and .to=="now"'
post "$KA" '{"argv":["cat","new.txt"]}' "/v1/sandboxes/$id/commands?wait=60"
expect "the sandbox goes on after the diff held it" 201 '.stdout=="new\n"'
c "$KB" "/v1/sandboxes/$id/diff?from=cp-0"
expect "another tenant cannot see the diff: 404" 404
c "$KA" "/v1/sandboxes/$id/diff?from=nope"
expect "a diff from no such checkpoint: 404" 404
VMRUN_API_KEY=$KA timeout -k 5 150 build/bin/vmrun sandbox --server "$BASE" diff --from cp-0 "$id" >"$tmp/diff.txt" 2>"$tmp/err"
grep -q '^ d/t.txt  *| 3 ++-$' "$tmp/diff.txt" && grep -q '^ 6 paths changed, 3 insertions(+), 2 deletions(-)$' "$tmp/diff.txt" &&
	grep -q '^+B$' "$tmp/diff.txt" && ok "vmrun sandbox diff prints it as git diff --stat and git diff" ||
	not_ok "vmrun sandbox diff: $(cat "$tmp/diff.txt" "$tmp/err")"
sed 's/^/    | /' "$tmp/diff.txt"
post "$KA" '{"name":"cp-1"}' "/v1/sandboxes/$id/checkpoints"
expect "a checkpoint through vmrund: 201, and it runs on" 201 '.name=="cp-1" and .running and .bytes>0'
c "$KA" "/v1/sandboxes/$id/diff?from=start&to=cp-1"
expect "the change from the start to cp-1, with its digest" 200 '.to=="cp-1" and (.files|map(.path)|index("new.txt")) and (.digest|length==64)'
digest=$(field .digest)
c "$KA" "/v1/sandboxes/$id/checkpoints/cp-1"
expect "cp-1 keeps that digest, complete" 200 ".digest==\"$digest\" and .complete"
c "$KB" "/v1/sandboxes/$id/checkpoints"
expect "another tenant cannot list them: 404" 404
c "$KA" "/v1/sandboxes/$id/checkpoints"
expect "its tenant lists them" 200 '[.checkpoints[].name]|sort==["cp-0","cp-1"]'
post "$KB" "{\"from_checkpoint\":\"$id/cp-1\"}" /v1/sandboxes
expect "another tenant cannot fork it: 404" 404
post "$KA" "{\"from_checkpoint\":\"$id/cp-1\",\"runtime\":\"bash\"}" /v1/sandboxes
expect "a fork with a runtime of its own: 400" 400 '.message|contains("runtime")'
post "$KA" "{\"from_checkpoint\":\"$id/cp-1\",\"expect_digest\":\"$(printf '0%.0s' $(seq 64))\"}" /v1/sandboxes
expect "a fork whose expect_digest is not cp-1's change: 409" 409 ".message|contains(\"$digest\")"
post "$KA" "{\"from_checkpoint\":\"$id/cp-1\",\"count\":1,\"expect_digest\":\"$digest\"}" /v1/sandboxes
expect "a fork of cp-1 (count 1) with the reviewed digest: 201, running" 201 '.sandboxes|length==1 and .[0].state=="running" and .[0].runtime=="python"'
fid=$(field '.sandboxes[0].id')
post "$KA" '{"argv":["cat","runs.txt"]}' "/v1/sandboxes/$fid/commands?wait=60"
expect "the fork has the workspace of the checkpoint" 201 '.stdout=="x\n"'
c "$KA" "/v1/sandboxes/$fid" -X DELETE
expect "the fork is deleted" 200 '.state=="stopped"'
# ---- a verification run: a fresh VM whose workspace is cp-1's ----
post "$KA" "{\"argv\":[\"cat\",\"new.txt\",\"d/t.txt\"],\"from_checkpoint\":\"$id/cp-1\",\"expect_digest\":\"$(printf 'f%.0s' $(seq 64))\"}" /v1/runs
expect "a verification run whose expect_digest is not cp-1's change: 409" 409
post "$KB" "{\"argv\":[\"true\"],\"from_checkpoint\":\"$id/cp-1\"}" /v1/runs
expect "another tenant's verification run from it: 404" 404
post "$KA" "{\"argv\":[\"cat\",\"new.txt\",\"d/t.txt\"],\"from_checkpoint\":\"$id/cp-1\",\"expect_digest\":\"$digest\",\"limits\":{\"timeout_s\":120}}" \
	"/v1/runs?wait=200"
expect "a verification run from cp-1 with the reviewed digest: its files, in a VM of its own" 200 \
	'.state=="succeeded" and .stdout=="new\na\nB\nc\n"'

echo "    ($SECONDS s: restarts)"
# ---- its life ----
post "$KA" '{"timeout_s":100000}' "/v1/sandboxes/$id/timeout"
expect "a life past the tenant's ceiling: 400" 400
post "$KA" '{"timeout_s":2}' "/v1/sandboxes/$id/timeout"
expect "its life shortened to 2 s" 200 '.time_left_s<=2'
for _ in $(seq 100); do
	c "$KA" "/v1/sandboxes/$id"
	jj '.state=="stopped"' && break
	sleep 0.2
done
expect "its time ran out: stopped, with the reason" 200 '.state=="stopped" and (.reason|contains("timeout_s"))'
post "$KA" '{"argv":["true"]}' "/v1/sandboxes/$id/commands?wait=5"
expect "a command in a stopped sandbox: 409" 409
sleep 1
[ -z "$(supervisors)" ] && ! pgrep -f build/bin/vmm >/dev/null && [ -z "$(ls -A "$tmp/lib/runs/sandboxes")" ] &&
	[ -z "$(find /sys/fs/cgroup/vmrun -mindepth 1 -maxdepth 1 -type d 2>/dev/null)" ] &&
	ok "nothing left: no supervisor, vmm, cgroup or sandbox directory" ||
	not_ok "leftovers: $(supervisors) $(pgrep -af build/bin/vmm) $(ls -A "$tmp/lib/runs/sandboxes") $(find /sys/fs/cgroup/vmrun -mindepth 1 -maxdepth 1 -type d 2>&1)"
kill -TERM "$pid"
wait "$pid" 2>/dev/null
grep -q "sandbox $id stopped: its time ran out" "$tmp/vmrund.log" && ok "vmrund's log says how it ended" ||
	not_ok "log: $(grep sandbox "$tmp/vmrund.log" | tail -3)"
# ---- vmrund --local and the CLI, as the README's local session ----
export XDG_RUNTIME_DIR=$tmp/xdg
mkdir -p "$XDG_RUNTIME_DIR"
build/bin/vmrund --local >>"$tmp/local.log" 2>&1 &
lpid=$!
for _ in $(seq 100); do [ -S "$XDG_RUNTIME_DIR/vmrun/vmrund.sock" ] && break; sleep 0.1; done
[ "$(stat -c %a "$XDG_RUNTIME_DIR/vmrun/vmrund.sock" 2>/dev/null)" = 600 ] && ok "vmrund --local: its socket, mode 0600" ||
	not_ok "local socket: $(ls -la "$XDG_RUNTIME_DIR/vmrun" 2>&1; tail -3 "$tmp/local.log")"
V="timeout -k 5 150 build/bin/vmrun sandbox"
lid=$($V create --timeout 120 --meta who=cli 2>"$tmp/err")
[ "${#lid}" = 32 ] && ok "vmrun sandbox create: its id" || not_ok "create: $lid $(cat "$tmp/err")"
out=$($V exec "$lid" -- sh -c 'echo hi; echo oops >&2; exit 7' 2>"$tmp/err"); st=$?
[ "$out" = hi ] && [ $st = 7 ] && [ "$(cat "$tmp/err")" = oops ] &&
	ok "vmrun sandbox exec: stdout, stderr, and its exit status" || not_ok "exec: $out, $st, $(cat "$tmp/err")"
[ "$(echo piped | $V exec -i "$lid" cat)" = piped ] && ok "exec -i: stdin to the command" || not_ok "exec -i"
printf 'line one\n' >"$tmp/f.txt"
$V cp "$tmp/f.txt" "$lid:f.txt" && [ "$($V cat "$lid" f.txt)" = "line one" ] &&
	ok "vmrun sandbox cp up, and cat" || not_ok "cp up / cat"
$V cp "$lid:f.txt" "$tmp/back.txt" && cmp -s "$tmp/f.txt" "$tmp/back.txt" && ok "vmrun sandbox cp down" ||
	not_ok "cp down"
mkdir -p "$tmp/tree/sub" && echo deep >"$tmp/tree/sub/d.txt"
tar -C "$tmp/tree" -c . | $V cp - "$lid:tree" && $V cp "$lid:tree" - | tar -t 2>/dev/null | grep -q 'sub/d.txt' &&
	ok "a directory both ways as a tar (cp -)" || not_ok "cp - tar"
$V ls | grep -q "^$lid  running " && ok "vmrun sandbox ls: it runs" || not_ok "ls: $($V ls 2>&1)"
[ "$($V pause "$lid" 2>"$tmp/err")" = paused ] && $V ls | grep -q "^$lid  paused " &&
	[ "$($V resume "$lid" 2>>"$tmp/err")" = running ] && [ "$($V cat "$lid" f.txt)" = "line one" ] &&
	ok "vmrun sandbox pause, ls says paused, resume: its files are there" || not_ok "pause/resume: $(cat "$tmp/err")"
left=$($V timeout "$lid" 300)
[ "${left:-0}" -ge 298 ] && ok "vmrun sandbox timeout: its life from now ($left s)" || not_ok "timeout: $left"
$V exec nosuchsandbox true 2>"$tmp/err"; st=$?
[ $st = 125 ] && grep -q "no sandbox" "$tmp/err" && ok "exec in an unknown sandbox: 125, the server's one line" ||
	not_ok "unknown sandbox: $st $(cat "$tmp/err")"
$V kill "$lid" && $V ls | grep -q "^$lid  stopped " && ok "vmrun sandbox kill: stopped" || not_ok "kill: $($V ls 2>&1)"
kill -TERM "$lpid"
wait "$lpid" 2>/dev/null
echo "    ($SECONDS s in all)"
finish vmrund-sandbox
