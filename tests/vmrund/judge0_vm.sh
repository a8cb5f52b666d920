#!/bin/bash
# vmrund's Judge0 API with its real worker, on a KVM host that runs Linux
# guests (scripts/on-kvm-host.sh decides where): what Judge0's SDK does,
# and every status Judge0 gives from what a real program does, each
# submission in its own VM (tests/vmrund/judge0_client.py, its vm cases);
# then problems judged from one compile (tests/vmrund/problem_client.py);
# then Piston's interactive WebSocket as Piston's CLI speaks it
# (tests/vmrund/piston_ws_client.js), keyless as that CLI is.
set -u
cd "$(dirname "$0")/../.."
. tests/e2e/lib.sh
. tests/vmrund/lib.sh
e2e_init judge0-vm
PORT=$((20000 + RANDOM % 20000))
K=key-judge-0123456789abcdef
vmrund_conf "audit_log = $tmp/lib/audit.jsonl" "slots = 2" "anonymous_tenant = t" <<KEYS
tenant t concurrent=2 queued=40 rate=100
key $K t
KEYS
# the warm-start snapshots: this test's own (the host's cache is read-only
# here), which the problems' sandboxes restore and checkpoint against
export VMRUN_CACHE=$tmp/cache
vmrund_start
t0=$(date +%s)
timeout -k 5 500 python3 tests/vmrund/judge0_client.py "http://127.0.0.1:$PORT/judge0" "$K" vm 2>&1 | tee "$tmp/client"
echo "    ($(( $(date +%s) - t0 )) s for the client's submissions)"
client_checks "$tmp/client" "the Judge0 client"
# Problems judged from one compile: sandboxes of the tenant's, a fork
# of the compiled one per test.
t0=$(date +%s)
timeout -k 5 500 python3 tests/vmrund/problem_client.py "http://127.0.0.1:$PORT" "$K" 50 2>&1 | tee "$tmp/problems"
echo "    ($(( $(date +%s) - t0 )) s for the problems)"
client_checks "$tmp/problems" "the problem client"
t0=$(date +%s)
PISTON_CLIENT_DIR=$PWD/build/npm timeout -k 5 400 node tests/vmrund/piston_ws_client.js "http://127.0.0.1:$PORT" vm \
	2>&1 | tee "$tmp/ws"
echo "    ($(( $(date +%s) - t0 )) s for the WebSocket sessions)"
client_checks "$tmp/ws" "the WebSocket client"
ls "$tmp/lib/runs/sandboxes" 2>/dev/null | grep -q . && not_ok "sandboxes left: $(ls "$tmp/lib/runs/sandboxes")" ||
	ok "every sandbox of the problems and sessions is gone"
kill -TERM "$pid"
wait "$pid"
[ $? = 0 ] && ok "vmrund stops on SIGTERM" || not_ok "vmrund exit status"
[ "$fail" -eq 0 ] || tail -n 60 "$tmp/vmrund.log" | cut -c1-300 | sed 's/^/    vmrund.log: /'
finish "judge0 vm tests"
