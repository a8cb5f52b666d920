#!/bin/bash
# vmrund on many machines: three nodes on this machine, each with its own
# port, run directory and node name, sharing one PostgreSQL server that
# this script starts (initdb in a temporary directory, loopback only;
# tests/vmrund/pg.sh). The stand-in worker (tests/vmrund/standin_worker.py)
# runs each "command", so the queue, the leases and the recovery are what
# is tested, in seconds, on any machine. The worker writes a line to
# standin.log each time a command starts, past the gate: how many times
# each run started is counted from it.
#
#   any node answers for any run (state, output, artifacts list)
#   a cancel sent to one node stops a run on another, within 1 s
#   tenant limits (queued + concurrent, concurrency, the request rate) hold
#     across nodes
#   50 runs round-robin, one node killed (SIGKILL) mid-way: every run ends
#     once, none starts twice, none is lost; the dead node's runs that had
#     not started run elsewhere, those that had end lost
#   the killed node comes back and sweeps its leftovers
#   PostgreSQL restarted under load, and down for longer than the lease:
#     the nodes carry on, every run ends
#   one sandbox driven through all three nodes (its calls forwarded to the
#     node that holds it, with the stand-in supervisor,
#     tests/vmrund/standin_supervisor.py), parked at its pause in the
#     snapshot dir and resumed by another node (two at once: one wins),
#     with its files and commands; a parked one deleted, one past its
#     pause_ttl_s, one that parked itself while its node was away; a
#     sandbox of the killed node ending lost, and one with a checkpoint
#     resumable from it and resumed by another node
# Runs as root (the keys file must be root's). Every wait has a deadline.
set -u
cd "$(dirname "$0")/../.."
. tests/e2e/lib.sh
. tests/vmrund/pg.sh
e2e_init vmrund-cluster
trap '[ -n "${KEEP:-}" ] && cp -r "$tmp" /tmp/cluster-kept; pg_cleanup; for p in ${pids[@]:-}; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
VMRUND=$PWD/build/bin/vmrund
KA=key-alice-0123456789abcdef
KL=key-lim-0123456789abcdef00
KP=key-pair-0123456789abcdef0
KS=key-slow-0123456789abcdef0
mkdir -p "$tmp/etc"
cat >"$tmp/etc/keys" <<KEYS
tenant alice concurrent=12 queued=200 rate=1000 burst=1000
tenant lim concurrent=1 queued=1 rate=1000 burst=1000
tenant pair concurrent=2 queued=20 rate=1000 burst=1000
tenant slow concurrent=1 queued=1 rate=0.01 burst=3
key $KA alice
key $KL lim
key $KP pair
key $KS slow
KEYS
chmod 600 "$tmp/etc/keys"

pg_start "$tmp/pg" || { echo "vmrund cluster: no PostgreSQL server"; exit 1; }
sql() { timeout -k 2 20 psql -X -q -At "$PG_URI" -c "$1" 2>>"$tmp/err"; }

declare -a pids ports
mkdir -p "$tmp/shared"   # the snapshot dir every node mounts
for n in 1 2 3; do
	ports[$n]=$((20000 + RANDOM % 20000))
	mkdir -p "$tmp/node$n"
	cat >"$tmp/node$n/vmrund.conf" <<CONF
listen = 127.0.0.1:${ports[$n]}
store = $PG_URI
node = node$n
lease_s = 3
state_db = $tmp/node$n/state.db
run_dir = $tmp/runs/node$n
keys = $tmp/etc/keys
audit_log = $tmp/node$n/audit.jsonl
worker = $PWD/tests/vmrund/standin_worker.py
sandbox_supervisor = $PWD/tests/vmrund/standin_supervisor.py
snapshot_dir = $tmp/shared
slots = 4
queue_max = 500
connection_timeout_s = 5
CONF
done
base() { echo "http://127.0.0.1:${ports[$1]}"; }

# start N: node N up and answering, or 1
start() {
	"$VMRUND" --config "$tmp/node$1/vmrund.conf" >>"$tmp/node$1/vmrund.log" 2>&1 &
	pids[$1]=$!
	for _ in $(seq 100); do
		curl -fs -m 2 "$(base "$1")/healthz" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}
# c NODE KEY ARGS...: curl to node NODE with the key; body to $tmp/out, status in $code
c() {
	local n=$1 key=$2
	shift 2
	code=$(curl -s -m 30 -o "$tmp/out" -w '%{http_code}' -H "Authorization: Bearer $key" "$@" 2>"$tmp/err")
}
post() { c "$1" "$2" -X POST -H 'Content-Type: application/json' --data-binary "$3" "$(base "$1")/v1/runs"; }
field() { python3 -c "import json,sys; print(json.load(open('$tmp/out')).get('$1'))" 2>/dev/null; }
state_on() { c "$1" "$2" "$(base "$1")/v1/runs/$3" && field state; }
# wait_state NODE KEY ID STATE...: until the run is in one of the states (30 s)
wait_state() {
	local n=$1 key=$2 id=$3
	shift 3
	local deadline=$((SECONDS + 30)) s
	while [ "$SECONDS" -lt "$deadline" ]; do
		s=$(state_on "$n" "$key" "$id")
		for want in "$@"; do [ "$s" = "$want" ] && return 0; done
		sleep 0.1
	done
	echo "    run $id is $s, not $*" >&2
	return 1
}
starts_of() { grep -c "^$1 " "$tmp/runs/standin.log" 2>/dev/null; }
# wait until the run's command started (standin.log), 30 s: the node's name
started_on() {
	local deadline=$((SECONDS + 30))
	while [ "$SECONDS" -lt "$deadline" ]; do
		grep -m1 "^$1 " "$tmp/runs/standin.log" 2>/dev/null | awk '{print $4}' | grep . && return 0
		sleep 0.05
	done
	return 1
}

mkdir -p "$tmp/runs"
: >"$tmp/runs/standin.log"
# Three nodes starting at once against a new database: the schema is
# applied once, by whichever takes the migration lock first.
for n in 1 2 3; do start "$n" & done
wait
up=0
for n in 1 2 3; do
	pids[$n]=$(pgrep -f -n "vmrund --config $tmp/node$n/vmrund.conf")
	curl -fs -m 2 "$(base "$n")/healthz" >/dev/null 2>&1 && up=$((up + 1))
done
[ "$up" = 3 ] && ok "three nodes started at once on one new database" || not_ok "only $up nodes up"
v=$(sql "select count(*) || ' ' || max(version) from vmrun_schema")
[ "${v%% *}" -ge 1 ] && [ "$(sql "select count(*) from vmrun_schema") " = "$(sql "select count(distinct version) from vmrun_schema") " ] &&
	ok "the schema's migrations applied once each (versions: $v)" || not_ok "schema: $v"

# ---- any node answers for any run -------------------------------------------
post 1 "$KA" '{"argv":["echo","across","nodes"]}'
id=$(field id)
wait_state 1 "$KA" "$id" succeeded && ok "a run submitted on node 1 succeeds" || not_ok "run on node 1"
ran=$(started_on "$id")
good=0
for n in 1 2 3; do
	[ "$(state_on "$n" "$KA" "$id")" = succeeded ] && good=$((good + 1))
done
[ "$good" = 3 ] && ok "GET on each of the three nodes returns it (it ran on $ran)" || not_ok "GET on $good of 3 nodes"
other=1
[ "$ran" = node1 ] && other=2
c "$other" "$KA" -N "$(base "$other")/v1/runs/$id/output"
grep -q 'across nodes' "$tmp/out" && grep -q 'event: end' "$tmp/out" &&
	ok "its output streams from node $other, which did not run it (from the store)" || not_ok "output on node $other"
c 3 - "$(base 3)/v1/runs/$id"
[ "$code" = 401 ] && ok "and not without a key" || not_ok "no key: $code"

# ---- an Idempotency-Key holds across nodes -------------------------------------
# the same keyed POST to the three nodes at once: one run, which each names
for n in 1 2 3; do
	curl -s -m 30 -o "$tmp/idem$n" -H "Authorization: Bearer $KA" -H 'Content-Type: application/json' \
		-H 'Idempotency-Key: across-1' --data-binary '{"argv":["echo","keyed","across"]}' \
		"$(base "$n")/v1/runs" &
done
wait
ids=$(for n in 1 2 3; do python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['id'])" "$tmp/idem$n" 2>/dev/null; done |
	sort -u)
[ "$(echo "$ids" | wc -w)" = 1 ] && wait_state 1 "$KA" "$ids" succeeded && [ "$(starts_of "$ids")" = 1 ] &&
	ok "the same keyed POST on three nodes at once: one run, started once" ||
	not_ok "keyed POST across nodes: runs '$(echo $ids)'"

# ---- cancel across nodes ------------------------------------------------------
post 2 "$KA" '{"argv":["sleep","30"]}'
id=$(field id)
holder=$(started_on "$id")
n=1
[ "$holder" = node1 ] && n=3
t0=$(date +%s%N)
c "$n" "$KA" -X DELETE "$(base "$n")/v1/runs/$id"
wait_state "$n" "$KA" "$id" cancelled
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "    cancel: sent to node $n, run on $holder: cancelled in $ms ms"
[ -n "$holder" ] && [ "$holder" != "node$n" ] && [ "$(state_on 1 "$KA" "$id")" = cancelled ] && [ "$ms" -lt 1000 ] &&
	ok "a cancel sent to node $n stops the run on $holder within 1 s ($ms ms)" || not_ok "cancel across nodes: $code, $ms ms"

# ---- tenant limits across nodes ----------------------------------------------
post 1 "$KL" '{"argv":["sleep","2"]}'
a=$code
l1=$(field id)
post 2 "$KL" '{"argv":["sleep","2"]}'
b=$code
l2=$(field id)
post 3 "$KL" '{"argv":["sleep","2"]}'
[ "$a" = 202 ] && [ "$b" = 202 ] && [ "$code" = 429 ] &&
	ok "a tenant's concurrent + queued (1 + 1) holds across nodes: 202, 202, then 429 on the third" ||
	not_ok "limit across nodes: $a $b $code"
c 1 "$KL" -X DELETE "$(base 1)/v1/runs/$l1"
c 1 "$KL" -X DELETE "$(base 1)/v1/runs/$l2"
ids=""
for i in $(seq 8); do
	post $(( (i % 3) + 1 )) "$KP" '{"argv":["boot","0.1","sleep","0.5"]}'
	ids="$ids $(field id)"
done
for id in $ids; do wait_state 1 "$KP" "$id" succeeded || break; done
peak=$(sql "select max(c) from (select (select count(*) from runs b where b.tenant='pair' and b.started_ms <= a.started_ms and b.finished_ms > a.started_ms) c from runs a where a.tenant='pair') t")
[ "$peak" = 2 ] && ok "a tenant's concurrency (2) holds across three nodes of 4 slots each: at most $peak ran at once" ||
	not_ok "concurrency across nodes: $peak at once"

# The request rate: a burst of 3 at 0.01/s for the cluster, spent one
# request on each node (any request counts: a GET of no run is a 404).
codes=""
for n in 1 2 3 1; do
	c "$n" "$KS" "$(base "$n")/v1/runs/00000000000000000000000000000000"
	codes="$codes $code"
done
[ "$codes" = " 404 404 404 429" ] && grep -q "request rate" "$tmp/out" &&
	ok "a tenant's request rate (burst 3) holds across nodes: 404 on each node, then 429" ||
	not_ok "rate across nodes:$codes $(cat "$tmp/out")"

# ---- one sandbox through three nodes ------------------------------------------
# It lives on node 1; nodes 2 and 3 forward its calls there (the address
# node 1 published in the store), streams and uploads included.
sx() { c "$1" "$2" "${@:4}" "$(base "$1")/v1/sandboxes$3"; }
sx 1 "$KA" "" -X POST -H 'Content-Type: application/json' --data-binary '{"timeout_s":120,"metadata":{"via":"node1"}}'
sid=$(field id)
[ "$code" = 201 ] && [ "$(field node)" = node1 ] && ok "a sandbox created on node 1 runs there" || not_ok "sandbox on node 1 ($code)"
sx 2 "$KA" "/$sid"
[ "$code" = 200 ] && [ "$(field state)" = running ] && ok "node 2 shows it, from the store" || not_ok "GET via node 2 ($code)"
sx 2 "$KA" "/$sid/commands?wait=10" -X POST -H 'Content-Type: application/json' --data-binary '{"argv":["echo","through","node2"]}'
[ "$code" = 201 ] && [ "$(field stdout)" = "through node2" ] && ok "a command through node 2, run on node 1" ||
	not_ok "command via node 2 ($code)"
cid=$(field id)
head -c 300000 /dev/urandom >"$tmp/blob"
sx 3 "$KA" "/$sid/files?path=blob" -X PUT --data-binary "@$tmp/blob"
[ "$code" = 200 ] && [ "$(field size)" = 300000 ] && ok "an upload through node 3, streamed to node 1" || not_ok "PUT via node 3 ($code)"
sx 2 "$KA" "/$sid/files?path=blob"
[ "$code" = 200 ] && cmp -s "$tmp/out" "$tmp/blob" && ok "read back through node 2" || not_ok "GET file via node 2 ($code)"
sx 3 "$KA" "/$sid/commands/$cid/events" -N
[ "$code" = 200 ] && grep -q '^event: exit' "$tmp/out" && grep -q 'through node2' "$tmp/out" &&
	ok "its events through node 3" || not_ok "events via node 3 ($code)"
sx 3 "$KL" "/$sid/commands?wait=10" -X POST -H 'Content-Type: application/json' --data-binary '{"argv":["echo","x"]}'
[ "$code" = 404 ] && ok "another tenant, through node 3: 404" || not_ok "another tenant via node 3 ($code)"
c 2 "$KA" -X POST -H 'Content-Type: application/json' -H 'X-Vmrun-Via: node9' --data-binary '{"argv":["echo"]}' \
	"$(base 2)/v1/sandboxes/$sid/commands"
[ "$code" = 502 ] && ok "a request forwarded once already is not forwarded again: 502" || not_ok "via twice ($code)"
sx 3 "$KA" "/$sid/timeout" -X POST -H 'Content-Type: application/json' --data-binary '{"timeout_s":60}'
[ "$code" = 200 ] && python3 -c "import json,sys; sys.exit(0 if json.load(open('$tmp/out'))['time_left_s']<=60 else 1)" &&
	ok "its life set through node 3" || not_ok "timeout via node 3 ($code)"
# E2B's API passes a change on the same way, with the key as E2B's SDK
# sends it (X-API-Key), and any node shows the sandbox
e2b() { code=$(curl -s -m 30 -o "$tmp/out" -w '%{http_code}' -H "X-API-Key: $KA" "${@:3}" "$(base "$1")/e2b$2" 2>"$tmp/err"); }
e2b 2 "/sandboxes/$sid/timeout" -X POST -H 'Content-Type: application/json' --data-binary '{"timeout":45}'
c2=$code
e2b 3 "/sandboxes/$sid"
[ "$c2" = 204 ] && [ "$code" = 200 ] && python3 -c "
import datetime, json, sys
j = json.load(open('$tmp/out'))
end = datetime.datetime.fromisoformat(j['endAt'].replace('Z', '+00:00')).timestamp()
sys.exit(0 if j['state'] == 'running' and 30 < end - datetime.datetime.now().timestamp() <= 46 else 1)" &&
	ok "E2B's setTimeout through node 2 (made on node 1), its end seen through node 3" ||
	not_ok "E2B timeout via node 2 ($c2), GET via node 3 ($code $(head -c 300 "$tmp/out"))"
# envd too: its token from a connect through node 2, a command's stream
# through node 3 and a file through node 2, each passed to node 1
e2b 2 "/v2/sandboxes/$sid/connect" -X POST -H 'Content-Type: application/json' --data-binary '{"timeout":60}'
token=$(python3 -c "import json; print(json.load(open('$tmp/out')).get('envdAccessToken', ''))" 2>/dev/null)
python3 tests/vmrund/connect_call.py "$(base 3)/e2b/process.Process/Start" "$sid" "$token" \
	'{"process":{"cmd":"/bin/bash","args":["-l","-c","echo through node 3"]}}' >"$tmp/frames"
python3 -c "
import base64, json, sys
L = open('$tmp/frames').read().split('\n')[:-1]
F = [json.loads(x) for x in L[1:]]
out = b''.join(base64.b64decode(f['msg']['event']['data']['stdout']) for f in F if 'data' in f['msg'].get('event', {}))
sys.exit(0 if L[0] == '200' and out == b'through node 3\n' and F[-1] == {'flags': 2, 'msg': {}} else 1)" &&
	ok "envd's Start through node 3 (its token made on node 2): streamed from node 1" ||
	not_ok "envd via node 3: $(head -c 400 "$tmp/frames")"
cid=$((cid + 1))   # that was the sandbox's next command
code=$(curl -s -m 30 -o "$tmp/out" -w '%{http_code}' -H "E2b-Sandbox-Id: $sid" -H "X-Access-Token: $token" \
	"$(base 2)/e2b/files?path=blob" 2>"$tmp/err")
[ "$code" = 200 ] && cmp -s "$tmp/out" "$tmp/blob" && ok "envd's /files through node 2" || not_ok "envd /files via node 2 ($code)"
sx 2 "$KA" "/$sid/pause" -X POST
[ "$code" = 200 ] && [ "$(field state)" = paused ] && ok "paused through node 2: paused on node 1" ||
	not_ok "pause via node 2 ($code)"
# parked: node 1's supervisor exits, the store has it paused on no node
for _ in $(seq 50); do sx 3 "$KA" "/$sid"; [ "$(field node)" = None ] && break; sleep 0.1; done
[ "$code" = 200 ] && [ "$(field state)" = paused ] && [ "$(field node)" = None ] &&
	[ -s "$tmp/shared/sandboxes/$sid/paused/standin.json" ] && [ ! -e "$tmp/runs/node1/sandboxes/$sid" ] &&
	! pgrep -f "standin_supervisor.py .*$sid" >/dev/null &&
	ok "node 3 sees it paused on no node: parked in the snapshot dir, node 1's supervisor and directory gone" ||
	not_ok "parked ($code $(cat "$tmp/out"))"
# two nodes asked to resume it at once: one claims it, the other says so
for n in 1 3; do
	curl -s -m 30 -o "$tmp/resume$n" -w '%{http_code}' -H "Authorization: Bearer $KA" -X POST \
		"$(base "$n")/v1/sandboxes/$sid/resume" >"$tmp/code$n" 2>/dev/null &
done
wait
codes="$(cat "$tmp/code1") $(cat "$tmp/code3")"
won=$( [ "$(cat "$tmp/code1")" = 200 ] && echo 1 || echo 3)
{ [ "$codes" = "200 409" ] || [ "$codes" = "409 200" ]; } &&
	ok "two nodes resume it at once: one does, the other answers 409 ($codes)" || not_ok "resume race: $codes"
sx 2 "$KA" "/$sid"
[ "$code" = 200 ] && [ "$(field state)" = running ] && [ "$(field node)" = "node$won" ] &&
	ok "it runs on node $won now, as node 2 sees it" || not_ok "after the resume: $(cat "$tmp/out")"
sx 2 "$KA" "/$sid/files?path=blob"
[ "$code" = 200 ] && cmp -s "$tmp/out" "$tmp/blob" && ok "its file came with it" || not_ok "file after the move ($code)"
sx 2 "$KA" "/$sid/commands?wait=10" -X POST -H 'Content-Type: application/json' --data-binary '{"argv":["echo","moved"]}'
[ "$code" = 201 ] && [ "$(field id)" = $((cid + 1)) ] && ok "and its commands: the next one is number $((cid + 1))" ||
	not_ok "command after the move ($code $(cat "$tmp/out"))"
[ ! -e "$tmp/shared/sandboxes/$sid/paused" ] && ok "the parked files went once it ran again" ||
	not_ok "parked files left: $(ls "$tmp/shared/sandboxes/$sid")"
sx 2 "$KA" "/$sid" -X DELETE
[ "$code" = 200 ] && [ "$(field state)" = stopped ] && [ "$(field reason)" = deleted ] &&
	ok "DELETE through node 2: stopped on node $won" || not_ok "DELETE via node 2 ($code)"
sleep 0.5
! pgrep -f "standin_supervisor.py .*$sid" >/dev/null && [ ! -e "$tmp/runs/node$won/sandboxes/$sid" ] &&
	[ ! -e "$tmp/shared/sandboxes/$sid" ] &&
	ok "its supervisor, its directory on node $won and in the snapshot dir are gone" || not_ok "sandbox $sid left"
# a parked one deleted, and one past its pause_ttl_s
sx 1 "$KA" "" -X POST -H 'Content-Type: application/json' --data-binary '{"timeout_s":120}'
sp=$(field id)
sx 1 "$KA" "/$sp/pause" -X POST
for _ in $(seq 50); do sx 2 "$KA" "/$sp"; [ "$(field node)" = None ] && break; sleep 0.1; done
sx 2 "$KA" "/$sp" -X DELETE
[ "$code" = 200 ] && [ "$(field state)" = stopped ] && [ ! -e "$tmp/shared/sandboxes/$sp" ] &&
	ok "a parked sandbox deleted through node 2: stopped, its files gone" || not_ok "parked DELETE ($code $(cat "$tmp/out"))"
sx 1 "$KA" "/$sp/resume" -X POST
[ "$code" = 409 ] && ok "and it resumes no more (409)" || not_ok "resume after delete ($code)"
sx 1 "$KA" "" -X POST -H 'Content-Type: application/json' --data-binary '{"timeout_s":120,"pause_ttl_s":1}'
sp=$(field id)
sx 1 "$KA" "/$sp/pause" -X POST
for _ in $(seq 100); do sx 3 "$KA" "/$sp"; [ "$(field state)" = stopped ] && break; sleep 0.1; done
[ "$(field state)" = stopped ] && field reason | grep -q pause_ttl_s && [ ! -e "$tmp/shared/sandboxes/$sp" ] &&
	ok "a parked sandbox past its pause_ttl_s (1 s) ends stopped, its files gone" || not_ok "parked ttl: $(cat "$tmp/out")"
# one that parks itself (its time runs out, on_timeout pause) while its
# node's vmrund is away, longer than the lease: parked, not lost
sx 1 "$KA" "" -X POST -H 'Content-Type: application/json' --data-binary '{"timeout_s":2,"on_timeout":"pause"}'
sp=$(field id)
kill -9 "${pids[1]}"
wait "${pids[1]}" 2>/dev/null
sleep 5
start 1 || not_ok "node 1 did not start again"
for _ in $(seq 100); do sx 2 "$KA" "/$sp"; [ "$(field node)" = None ] && break; sleep 0.1; done
[ "$(field state)" = paused ] && [ "$(field node)" = None ] && [ -s "$tmp/shared/sandboxes/$sp/paused/sandbox.sum" ] &&
	ok "one that parked itself while its node was away is parked, not lost" || not_ok "self-parked: $(cat "$tmp/out")"
sx 3 "$KA" "/$sp/resume" -X POST
[ "$code" = 200 ] && [ "$(field node)" = node3 ] && ok "and node 3 resumes it" || not_ok "resume self-parked ($code)"
sx 3 "$KA" "/$sp" -X DELETE
# one on node 2, which is killed below
sx 2 "$KA" "" -X POST -H 'Content-Type: application/json' --data-binary '{"timeout_s":600}'
sid2=$(field id)
[ "$code" = 201 ] && ok "a sandbox on node 2" || not_ok "sandbox on node 2 ($code)"
# and one with a checkpoint, in the snapshot dir, which outlives node 2
sx 2 "$KA" "" -X POST -H 'Content-Type: application/json' --data-binary '{"timeout_s":600}'
sid3=$(field id)
echo kept >"$tmp/kept"
sx 1 "$KA" "/$sid3/files?path=kept" -X PUT --data-binary "@$tmp/kept"
sx 1 "$KA" "/$sid3/checkpoints" -X POST -H 'Content-Type: application/json' --data-binary '{"name":"cp1"}'
[ "$code" = 201 ] && [ -s "$tmp/shared/sandboxes/$sid3/checkpoints/cp1/checkpoint.json" ] &&
	ok "a sandbox on node 2 with a checkpoint (taken through node 1), kept in the snapshot dir" ||
	not_ok "checkpoint on node 2 ($code)"

# ---- 50 runs round-robin, a node killed mid-way ------------------------------
# Each run "boots" for 1 s before its gate, then runs 3 s, and they come
# faster than the slots free, so claims are staggered: node 2 is killed
# the first time it holds runs on both sides of the gate (from the 8th
# submission on). Those past it must end lost; those before it must run
# elsewhere.
: >"$tmp/ids"
t_start=$(date +%s%N)
killed=0
for i in $(seq 50); do
	n=$(( (i % 3) + 1 ))
	[ "$killed" = 1 ] && [ "$n" = 2 ] && n=1
	post "$n" "$KA" '{"argv":["boot","1","sleep","3"]}'
	[ "$code" = 202 ] && field id >>"$tmp/ids" || echo "    submit $i to node $n: $code" >&2
	[ "$killed" = 1 ] || [ "$i" -lt 8 ] && continue
	hold=$(sql "select count(*) filter (where command_ms is not null) || ' ' || count(*) filter (where command_ms is null) from runs where node='node2' and state='running'")
	past=${hold% *}
	before=${hold#* }
	if { [ "${past:-0}" -gt 0 ] && [ "${before:-0}" -gt 0 ]; } || [ "$i" = 40 ]; then
		kill -9 "${pids[2]}"
		t_kill=$(date +%s%N)
		killed=1
		echo "    node 2 killed after submission $i, holding $past runs past the gate and $before before it"
	fi
done
accepted=$(wc -l <"$tmp/ids")
deadline=$((SECONDS + 60))
while [ "$SECONDS" -lt "$deadline" ]; do
	[ "$(sql "select count(*) from runs where state in ('queued','running')")" = 0 ] && break
	sleep 0.2
done
all_ms=$(( ($(date +%s%N) - t_start) / 1000000 ))
# what a node's death costs: one expire takes back all its runs at once,
# the lost ones stamped with that moment
death_ms=$(( $(sql "select coalesce(max(finished_ms), 0) from runs where state='lost' and message like '%node node2%'") - t_kill / 1000000 ))
echo "    node 2's runs were taken back $death_ms ms after its death (lease 3 s, dead nodes looked for each second)"
python3 - "$tmp/ids" "$tmp/runs/standin.log" "$PG_URI" >"$tmp/out" <<'PY'
import collections, subprocess, sys
ids = open(sys.argv[1]).read().split()
starts = collections.Counter(l.split()[0] for l in open(sys.argv[2]))
where = collections.defaultdict(list)
for l in open(sys.argv[2]):
    f = l.split()
    where[f[0]].append(f[3])
q = "select id, state from runs where id in (%s)" % ",".join("'%s'" % i for i in ids)
rows = dict(l.split("|") for l in subprocess.run(["psql", "-X", "-At", sys.argv[3], "-c", q],
            capture_output=True, text=True, timeout=20).stdout.split())
states = collections.Counter(rows.get(i, "missing") for i in ids)
twice = [i for i in ids if starts[i] > 1]
again = [i for i in ids if starts[i] == 1 and rows.get(i) == "succeeded" and where[i] != ["node2"]]
lost = [i for i in ids if rows.get(i) == "lost"]
# a lost run started on node 2 only; or never wrote its start at all,
# when node 2 was killed between its gate's "go" and the worker's line
lost_ok = all(where[i] in (["node2"], []) for i in lost)
print("states:", dict(states), "started twice:", len(twice), "lost ones started on node2 alone:", lost_ok)
ok = (len(ids) == 50 and states["missing"] == 0 and not twice and lost_ok
      and set(states) <= {"succeeded", "lost"} and states["succeeded"] + states["lost"] == 50
      and all(starts[i] == 1 for i in ids if rows.get(i) == "succeeded"))
sys.exit(0 if ok else 1)
PY
rc=$?
echo "    50 runs on 3 nodes, node 2 killed mid-way: $(cat "$tmp/out"); all ended in $all_ms ms"
[ "$rc" = 0 ] && ok "every one of the 50 runs ended exactly once, none started twice, none was lost from the store" ||
	not_ok "the 50 runs"
requeued=$(cat "$tmp"/node[13]/vmrund.log | grep -c 'queued again: the node that held it stopped')
nlost=$(sql "select count(*) from runs where state='lost'")
[ "${requeued:-0}" -gt 0 ] && [ "${nlost:-0}" -gt 0 ] &&
	ok "node 2's runs before the gate ran elsewhere ($requeued), those past it ended lost ($nlost)" ||
	not_ok "requeued $requeued, lost $nlost"
sx 1 "$KA" "/$sid2"
[ "$(field state)" = lost ] && field reason | grep -q "node node2" && [ ! -e "$tmp/shared/sandboxes/$sid2" ] &&
	ok "node 2's sandbox ended lost, the reason naming the node; its snapshot dir went" ||
	not_ok "sandbox of node 2: $(cat "$tmp/out")"
sx 3 "$KA" "/$sid3"
[ "$(field state)" = resumable ] && [ "$(field resumable_from)" = "$sid3/cp1" ] && [ "$(field node)" = None ] &&
	field reason | grep -q "node node2" &&
	ok "the one with a checkpoint is resumable, from $sid3/cp1, on no node" || not_ok "resumable: $(cat "$tmp/out")"
sx 3 "$KA" "/$sid3/resume" -X POST
[ "$code" = 200 ] && [ "$(field state)" = running ] && [ "$(field node)" = node3 ] &&
	ok "node 3 resumes it from its checkpoint" || not_ok "resume from checkpoint ($code $(cat "$tmp/out"))"
sx 1 "$KA" "/$sid3/files?path=kept"
[ "$code" = 200 ] && [ "$(cat "$tmp/out")" = kept ] && ok "its checkpoint's file is there" ||
	not_ok "file from checkpoint ($code)"
sx 1 "$KA" "/$sid3" -X DELETE
[ "$code" = 200 ] && [ ! -e "$tmp/shared/sandboxes/$sid3" ] && ok "deleted, its snapshot dir gone" ||
	not_ok "delete resumed ($code)"
# its workers died with it (their parent-death signal)
sleep 0.5
left=$(pgrep -f "standin_worker.py $tmp/runs/node2/" | wc -l)
[ "$left" = 0 ] && ok "no worker of the killed node is left" || not_ok "$left workers of node 2 left"

# ---- the killed node comes back ----------------------------------------------
mkdir -p "$tmp/runs/node2/0123456789abcdef0123456789abcdef"   # a leftover no run owns
start 2 && ok "node 2 starts again" || not_ok "node 2 did not start again"
# vm/ is the workers' own run directories (the run library's TMPDIR):
# it stays, and must be empty
left=$(ls -A "$tmp/runs/node2" | grep -v '^\.' | while read -r d; do
	if [ "$d" = vm ] || [ "$d" = sandboxes ]; then ls -A "$tmp/runs/node2/$d" | sed "s|^|$d/|"; continue; fi
	[ -e "$tmp/runs/node2/$d/output" ] || echo "$d"; done)
[ -z "$left" ] && ok "and swept its leftovers: only kept output is left in its run directory" || not_ok "left: $left"
! pgrep -f "standin_supervisor.py .*$sid2" >/dev/null && ok "and stopped the lost sandbox's supervisor" ||
	not_ok "the lost sandbox's supervisor runs on"
post 2 "$KA" '{"argv":["echo","back"]}'
id=$(field id)
wait_state 2 "$KA" "$id" succeeded && ok "and serves runs again" || not_ok "node 2 after restart"

# ---- PostgreSQL restarted under load -----------------------------------------
: >"$tmp/ids"
for i in $(seq 24); do
	post $(( (i % 3) + 1 )) "$KA" '{"argv":["boot","0.2","sleep","1"]}'
	field id >>"$tmp/ids"
done
sleep 0.5
t0=$(date +%s%N)
pg_restart && echo "    PostgreSQL restarted in $(( ($(date +%s%N) - t0) / 1000000 )) ms with runs in flight" ||
	not_ok "pg_restart"
for i in $(seq 50); do
	post $(( (i % 3) + 1 )) "$KA" '{"argv":["echo","after"]}'
	[ "$code" = 202 ] && break
	sleep 0.2
done
[ "$code" = 202 ] && field id >>"$tmp/ids" && ok "the nodes accept runs again after the restart, with no restart of theirs" ||
	not_ok "no node accepts runs after the restart: $code"
done_n=0
deadline=$((SECONDS + 60))
for id in $(cat "$tmp/ids"); do
	wait_state 1 "$KA" "$id" succeeded lost failed cancelled timed_out || break
	done_n=$((done_n + 1))
done
bad=$(sql "select count(*) from runs where id in ($(sed "s/.*/'&'/" "$tmp/ids" | paste -sd,)) and state <> 'succeeded'")
[ "$done_n" = "$(wc -l <"$tmp/ids")" ] && [ "$bad" = 0 ] &&
	ok "every run in flight during the restart ended, succeeded, its result written once the server was back" ||
	not_ok "after the restart: $done_n ended, $bad not succeeded"
# An outage longer than the lease (a crash: immediate stop, then 5 s
# down against a lease of 3 s): every node's lease runs out meanwhile, yet
# the runs in flight are not taken back when the server returns; their
# commands end during the outage and their results are written after it.
: >"$tmp/ids"
for i in $(seq 9); do
	post $(( (i % 3) + 1 )) "$KA" '{"argv":["boot","0.2","sleep","2"]}'
	field id >>"$tmp/ids"
done
for _ in $(seq 50); do
	[ "$(sql "select count(*) from runs where state = 'running' and command_ms is not null")" -ge 6 ] && break
	sleep 0.1
done
pg_stop && sleep 5 && pg_start "$tmp/pg" && echo "    PostgreSQL down for 5 s (lease 3 s) with runs in flight" ||
	not_ok "pg_stop, pg_start"
done_n=0
for id in $(cat "$tmp/ids"); do
	wait_state 1 "$KA" "$id" succeeded lost failed cancelled timed_out || break
	done_n=$((done_n + 1))
done
bad=$(sql "select count(*) from runs where id in ($(sed "s/.*/'&'/" "$tmp/ids" | paste -sd,)) and state <> 'succeeded'")
[ "$done_n" = 9 ] && [ "$bad" = 0 ] &&
	ok "after an outage longer than the lease, every run in flight ended succeeded, none taken back" ||
	not_ok "after the long outage: $done_n ended, $bad not succeeded ($(sql "select state, count(*) from runs where id in ($(sed "s/.*/'&'/" "$tmp/ids" | paste -sd,)) group by state" | paste -sd' '))"
twice=$(sort "$tmp/runs/standin.log" | awk '{print $1}' | uniq -d | wc -l)
[ "$twice" = 0 ] && ok "and no run of the whole test started twice" || not_ok "$twice runs started twice"
alive=0
for n in 1 2 3; do kill -0 "${pids[$n]}" 2>/dev/null && alive=$((alive + 1)); done
[ "$alive" = 3 ] && ok "all three nodes are still the same processes" || not_ok "$alive nodes alive"

for n in 1 2 3; do kill -TERM "${pids[$n]}" 2>/dev/null; done
for n in 1 2 3; do timeout 20 tail --pid="${pids[$n]}" -f /dev/null; done
echo "vmrund cluster: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
