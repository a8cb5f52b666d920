#!/bin/bash
# vmrund's Judge0 API with its real worker, on a KVM host that runs Linux
# guests (scripts/on-kvm-host.sh decides where): what Judge0's SDK does,
# and every status Judge0 gives from what a real program does, each
# submission in its own VM (tests/vmrund/judge0_client.py, its vm cases);
# then problems judged from one compile (tests/vmrund/problem_client.py).
set -u
cd "$(dirname "$0")/../.."
. tests/e2e/lib.sh
e2e_init judge0-vm
PORT=$((20000 + RANDOM % 20000))
K=key-judge-0123456789abcdef
mkdir -p "$tmp/etc"
printf 'tenant t concurrent=2 queued=40 rate=100\nkey %s t\n' "$K" >"$tmp/etc/keys"
chmod 600 "$tmp/etc/keys"
cat >"$tmp/etc/vmrund.conf" <<CONF
listen = 127.0.0.1:$PORT
state_db = $tmp/lib/state.db
run_dir = $tmp/lib/runs
keys = $tmp/etc/keys
audit_log = $tmp/lib/audit.jsonl
slots = 2
CONF
# the warm-start snapshots: this test's own (the host's cache is read-only
# here), which the problems' sandboxes restore and checkpoint against
export VMRUN_CACHE=$tmp/cache
build/bin/vmrund --config "$tmp/etc/vmrund.conf" >"$tmp/vmrund.log" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -fs -m 2 "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
t0=$(date +%s)
timeout -k 5 500 python3 tests/vmrund/judge0_client.py "http://127.0.0.1:$PORT/judge0" "$K" vm >"$tmp/client" 2>&1
cat "$tmp/client"
echo "    ($(( $(date +%s) - t0 )) s for the client's submissions)"
pass=$((pass + $(grep -c '^ok' "$tmp/client")))
fail=$((fail + $(grep -c '^not ok' "$tmp/client")))
grep -q '^not ok\|^ok' "$tmp/client" || not_ok "the Judge0 client ran no check"
# Problems judged from one compile: sandboxes of the tenant's, a fork
# of the compiled one per test.
t0=$(date +%s)
timeout -k 5 500 python3 tests/vmrund/problem_client.py "http://127.0.0.1:$PORT" "$K" 12 >"$tmp/problems" 2>&1
cat "$tmp/problems"
echo "    ($(( $(date +%s) - t0 )) s for the problems)"
pass=$((pass + $(grep -c '^ok' "$tmp/problems")))
fail=$((fail + $(grep -c '^not ok' "$tmp/problems")))
grep -q '^not ok\|^ok' "$tmp/problems" || not_ok "the problem client ran no check"
ls "$tmp/lib/runs/sandboxes" 2>/dev/null | grep -q . && not_ok "sandboxes left: $(ls "$tmp/lib/runs/sandboxes")" ||
	ok "every sandbox of the problems is gone"
kill -TERM "$pid"
wait "$pid"
[ $? = 0 ] && ok "vmrund stops on SIGTERM" || not_ok "vmrund exit status"
[ "$fail" -eq 0 ] || tail -n 60 "$tmp/vmrund.log" | cut -c1-300 | sed 's/^/    vmrund.log: /'
finish "judge0 vm tests"
