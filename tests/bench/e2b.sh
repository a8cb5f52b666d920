#!/bin/bash
# make bench-e2b: the agent loop of tests/bench/e2b_loop.js (create, write
# a file, run it 20 times, read a file, kill) through E2B's SDK against
# vmrund and through vmrund's native API, side by side, on the KVM host
# scripts/on-kvm-host.sh found. Prints figures; asserts nothing.
set -eu
cd "$(dirname "$0")/../.."
SDK=$PWD/build/npm-e2b/node_modules/e2b
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-e2b.XXXXXX")
PORT=$((20000 + RANDOM % 20000))
KEY=key-bench-e2b-0123456789abcdef
mkdir -p "$tmp/etc" "$tmp/lib"
printf 'tenant bench sandboxes=2 rate=10000 burst=10000\nkey %s bench\n' "$KEY" >"$tmp/etc/keys"
chmod 600 "$tmp/etc/keys"
printf 'listen = 127.0.0.1:%s\nstate_db = %s/lib/state.db\nrun_dir = %s/lib/runs\nkeys = %s/etc/keys\naudit_log = %s/lib/audit.jsonl\nslots = 1\n' \
	"$PORT" "$tmp" "$tmp" "$tmp" "$tmp" >"$tmp/etc/vmrund.conf"
export VMRUN_CACHE=$tmp/cache
build/bin/vmrund --config "$tmp/etc/vmrund.conf" >>"$tmp/vmrund.log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do curl -fs -m 2 "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
echo "bench-e2b: $(nproc) CPUs, $(uname -m), ${VMRUN_KVM_HOST:-this host}"
E2B_API_URL=http://127.0.0.1:$PORT/e2b E2B_SANDBOX_URL=http://127.0.0.1:$PORT/e2b E2B_API_KEY=$KEY \
	timeout -k 5 800 node tests/bench/e2b_loop.js "$SDK" "http://127.0.0.1:$PORT" "$KEY" "${ROUNDS:-3}"
