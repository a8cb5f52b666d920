#!/bin/bash
# vmrund with its real worker, on a KVM host that runs Linux guests
# (scripts/on-kvm-host.sh decides where): a native run with stdin, output
# and kept artifacts (list, one file, the tar), a source-mode run, the
# Piston execute endpoint, and a cancel while the VM runs, after which no
# vmm, cgroup or run directory is left. Every curl has a deadline.
set -u
cd "$(dirname "$0")/../.."
. tests/e2e/lib.sh
. tests/vmrund/lib.sh
e2e_init vmrund-vm
PORT=$((20000 + RANDOM % 20000))
BASE=http://127.0.0.1:$PORT
K=key-vm-test-0123456789abcdef
vmrund_conf "audit_log = $tmp/lib/audit.jsonl" "slots = 2" "anonymous_tenant = t" <<KEYS
tenant t concurrent=2 queued=8 rate=100 net=any
key $K t
KEYS
vmrund_start
c() { code=$(curl -s -m 280 -o "$tmp/out" -w '%{http_code}' -H "Authorization: Bearer $K" "$@" 2>"$tmp/err"); }
post() { c -X POST -H 'Content-Type: application/json' --data-binary "$1" "$BASE$2"; }

c "$BASE/readyz"
expect "/readyz: KVM and the images are usable" 200
t0=$(date +%s%N)
post '{"argv":["python3","-c","import sys; print(sys.stdin.read().upper()); print(\"e\", file=sys.stderr); open(\"/workspace/artifacts/a.txt\",\"w\").write(\"art\")"],"stdin":"from stdin","keep_artifacts":true,"limits":{"timeout_s":120}}' "/v1/runs?wait=200"
echo "    a native run through vmrund: $(( ($(date +%s%N) - t0) / 1000000 )) ms, boot $(python3 -c "import json; print(json.load(open('$tmp/out'))['durations_ms']['boot'])" 2>/dev/null) ms"
expect "a native run: stdin, stdout, stderr, succeeded" 200 "j['state']=='succeeded' and j['stdout']=='FROM STDIN\n' and j['stderr']=='e\n' and j['jail']['seccomp'] and j['jail']['uid']=='own'"
id=$(python3 -c "import json; print(json.load(open('$tmp/out'))['id'])" 2>/dev/null)
c "$BASE/v1/runs/$id/artifacts"
expect "its artifacts are listed" 200 "[a['path'] for a in j['artifacts']]==['a.txt']"
c "$BASE/v1/runs/$id/artifacts/a.txt"
[ "$code" = 200 ] && [ "$(cat "$tmp/out")" = art ] && ok "one artifact by its path" || not_ok "artifact file ($code)"
c "$BASE/v1/runs/$id/artifacts/../../state.db"
[ "$code" = 404 ] && ok "a path out of the artifacts: 404" || not_ok "escape ($code)"
c "$BASE/v1/runs/$id/artifacts.tar"
[ "$code" = 200 ] && tar -xOf "$tmp/out" a.txt 2>/dev/null | grep -qx art && ok "all artifacts as a tar" || not_ok "tar ($code)"

post '{"runtime":"python","files":[{"name":"main.py","content":"print(input()[::-1])"}],"stdin":"olleh\n","run":{"timeout_s":60}}' "/v1/runs?wait=200"
expect "source mode through the native API" 200 "j['state']=='succeeded' and j['run']['stdout']=='hello\n'"

# Network rules per run: the guest's request to a host the run does not
# allow is refused by its proxy before any lookup (nothing leaves), and
# the decision comes back in the run's network array.
post '{"argv":["python3","-c","import urllib.request as u, urllib.error as e\ntry:\n u.urlopen(\"http://other.test/\")\nexcept e.HTTPError as x:\n print(x.code)"],"network":{"allow":["allowed.test"]},"limits":{"timeout_s":120}}' "/v1/runs?wait=200"
expect "network rules per run: the proxy refuses another host, and the network array says so" 200 "j['state']=='succeeded' and j['stdout']=='403\n' and [(n['host'], n['allowed'], n['why']) for n in j['network']]==[('other.test', False, 'not in the allowlist')]"
grep -q '"network_decisions":\[{"host":"other.test"' "$tmp/lib/audit.jsonl" 2>/dev/null &&
	ok "the audit log has the run's network decisions" || not_ok "network decisions in the audit log: $(tail -c 600 "$tmp/lib/audit.jsonl" 2>&1)"

# The pauses: stdout and stderr are two pipes with no order between
# them, so output keeps the order of writes that are apart in time.
t0=$(date +%s%N)
c -X POST -H 'Content-Type: application/json' --data-binary '{"language":"py","version":"3.x","files":[{"content":"import sys, time\nprint(1+1, flush=True)\ntime.sleep(0.5)\nprint(\"e\", file=sys.stderr, flush=True)\ntime.sleep(0.5)\nprint(3, flush=True)\nsys.exit(3)"}],"run_timeout":60000,"compile_timeout":10000}' "$BASE/api/v2/execute"
echo "    a Piston execute: $(( ($(date +%s%N) - t0) / 1000000 )) ms"
expect "Piston execute: language, version, run stage with code, status and the streams interleaved in output" 200 "j['language']=='python' and j['run']['stdout']=='2\n3\n' and j['run']['stderr']=='e\n' and j['run']['output']=='2\ne\n3\n' and j['run']['code']==3 and j['run']['status']=='RE' and 'compile' not in j"

# A Piston request past the policy's ceilings (the built-in max_timeout
# of 300 s: the run's is 10 s of boot plus the stages') is refused when
# it is submitted, before any VM, and never stored.
c -X POST -H 'Content-Type: application/json' --data-binary '{"language":"py","version":"3.x","files":[{"content":"print(1)"}],"run_timeout":400000}' "$BASE/api/v2/execute"
expect "Piston execute past the policy's ceiling: 400 at submission, naming it" 400 "'exceeds the policy' in j['message'] and '410' in j['message']"

# An existing Piston client, unchanged (its own ok/not ok lines).
PISTON_CLIENT_DIR=$PWD/build/npm timeout -k 5 400 node tests/vmrund/piston_client.js "$BASE" >"$tmp/pc" 2>&1
cat "$tmp/pc"
client_checks "$tmp/pc" "the Piston client"


# A run that timed out leaves no run directory: the run library's
# progress lines and the guest console's tail go into vmrund's log under
# its id.
post '{"argv":["sleep","100"],"limits":{"timeout_s":3}}' "/v1/runs?wait=120"
expect "a run past its timeout: timed_out" 200 "j['state']=='timed_out'"
id=$(python3 -c "import json; print(json.load(open('$tmp/out'))['id'])" 2>/dev/null)
grep -q "^vmrund: run $id: vmrund-worker: vmm started" "$tmp/vmrund.log" &&
	ok "its progress lines are in vmrund's log" || not_ok "no progress lines of run $id in vmrund.log"
# and vmm's answer when asked, before the kill, what its devices were
# doing: here the agent's connection, with the request delivered
grep -q "^vmrund: run $id: vmrund-worker: vmm's state: vsock: irq [0-9]*, status 0xf .*to guest [1-9][0-9]*, .*conn [0-9]*->[0-9]* established" \
	"$tmp/vmrund.log" && ok "vmm's device state at the timeout is in vmrund's log" ||
	not_ok "no vsock state line of run $id in vmrund.log"

post '{"argv":["sleep","100"],"limits":{"timeout_s":200}}' "/v1/runs"
id=$(python3 -c "import json; print(json.load(open('$tmp/out'))['id'])" 2>/dev/null)
for _ in $(seq 300); do
	c "$BASE/v1/runs/$id"
	json "j['state']=='running'" && [ -s "$tmp/lib/runs/$id/vm-id" ] && break
	sleep 0.2
done
sleep 3
vmid=$(cat "$tmp/lib/runs/$id/vm-id" 2>/dev/null)
c -X DELETE "$BASE/v1/runs/$id"
expect "cancel while the VM runs: cancelled" 200 "j['state']=='cancelled'"
sleep 1
[ -n "$vmid" ] && [ ! -e "/sys/fs/cgroup/vmrun/$vmid" ] && ! pgrep -f "build/bin/vmm" >/dev/null &&
	[ ! -e "$tmp/lib/runs/$id" ] && [ -z "$(ls -A /run/vmrun/runs)" ] && [ -z "$(ls -A "$tmp/lib/runs/vm")" ] &&
	ok "after the cancel: no vmm, no cgroup, no run directory (vmrund's or the run library's)" ||
	not_ok "leftovers after cancel (vm $vmid): $(pgrep -af build/bin/vmm) $(ls -A "$tmp/lib/runs" "$tmp/lib/runs/vm" /run/vmrun/runs)"
# kill -9 with a command running (past the gate: its first output is in
# the run directory): the worker destroys its VM (its parent died), and
# the restarted vmrund ends the run lost, since the command may have had
# effects, and sweeps what is left.
post '{"argv":["python3","-c","import time; print(\"started\", flush=True); time.sleep(100)"],"limits":{"timeout_s":200}}' "/v1/runs"
id=$(python3 -c "import json; print(json.load(open('$tmp/out'))['id'])" 2>/dev/null)
for _ in $(seq 300); do
	grep -aqs started "$tmp/lib/runs/$id/output" && pgrep -f build/bin/vmm >/dev/null && break
	sleep 0.2
done
vmid=$(cat "$tmp/lib/runs/$id/vm-id" 2>/dev/null)
kill -9 "$pid"
wait "$pid" 2>/dev/null
vmrund_start
c "$BASE/v1/runs/$id"
expect "kill -9 while a command runs, restart: the run ended lost, with a message" 200 "j['state']=='lost' and 'stopped while the run was running' in j['message']"
for _ in $(seq 50); do pgrep -f build/bin/vmm >/dev/null || break; sleep 0.2; done
[ -n "$vmid" ] && [ ! -e "/sys/fs/cgroup/vmrun/$vmid" ] && ! pgrep -f build/bin/vmm >/dev/null &&
	[ ! -e "$tmp/lib/runs/$id" ] && [ -z "$(ls -A /run/vmrun/runs)" ] && [ -z "$(ls -A "$tmp/lib/runs/vm")" ] &&
	ok "after the restart: no vmm, cgroup or run directory of the lost run" ||
	not_ok "leftovers after kill -9 (vm $vmid): $(pgrep -af build/bin/vmm) $(ls -A "$tmp/lib/runs" "$tmp/lib/runs/vm" /run/vmrun/runs)"
kill -TERM "$pid"
wait "$pid"
[ $? = 0 ] && ok "vmrund stops on SIGTERM" || not_ok "vmrund exit status"
# What went wrong, where something did: vmrund's log has each failed or
# timed-out run's progress and console lines (its directory is gone).
[ "$fail" -eq 0 ] || tail -n 60 "$tmp/vmrund.log" | cut -c1-300 | sed 's/^/    vmrund.log: /'
finish "vmrund vm tests"
