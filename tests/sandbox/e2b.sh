#!/bin/bash
# E2B's own SDK (npm e2b, pinned by the Makefile), unchanged, driving real
# sandboxes through vmrund on a KVM host that runs Linux guests
# (scripts/on-kvm-host.sh decides where), with only E2B_API_URL,
# E2B_SANDBOX_URL and E2B_API_KEY set: tests/vmrund/e2b_envd.js with
# VM=1 (its commands run in the guest under /bin/bash, and read and write
# the files the SDK wrote and reads; a terminal typed to), two tenants
# that cannot reach each other's envd, a pause and a resume with a
# background process, and the SDK's errors. Every call has a deadline.
set -u
cd "$(dirname "$0")/../.."
. tests/e2e/lib.sh
. tests/vmrund/lib.sh
e2e_init sandbox-e2b
SDK=$PWD/build/npm-e2b/node_modules/e2b
[ -f "$SDK/package.json" ] || { echo "e2b.sh: no E2B SDK at $SDK (make $SDK/package.json)" >&2; exit 1; }
PORT=$((20000 + RANDOM % 20000))
BASE=http://127.0.0.1:$PORT
KA=key-e2b-tenant-a-0123456789abc
KB=key-e2b-tenant-b-0123456789abc
mkdir -p "$tmp/lib"
vmrund_conf "audit_log = $tmp/lib/audit.jsonl" "slots = 1" <<KEYS
tenant a sandboxes=3 rate=1000 burst=1000
tenant b sandboxes=1 rate=1000 burst=1000
key $KA a
key $KB b
KEYS
export VMRUN_CACHE=$tmp/cache
vmrund_start || { not_ok "vmrund did not start: $(tail -5 "$tmp/vmrund.log")"; finish sandbox-e2b; exit 1; }

t0=$SECONDS
E2B_API_URL=$BASE/e2b E2B_SANDBOX_URL=$BASE/e2b E2B_API_KEY=$KA VM=1 timeout -k 5 500 \
	node tests/vmrund/e2b_envd.js "$SDK" "$KB" >"$tmp/client" 2>&1
sed 's/^/    /' "$tmp/client" | grep -v '^    ok - '
client_checks "$tmp/client" "the E2B SDK script"
echo "    (the SDK script: $((SECONDS - t0)) s)"

sleep 2   # the SDK's kills stop the supervisors: vmrund's SIGTERM leaves sandboxes running
kill -TERM "$pid"
wait "$pid" 2>/dev/null
left=$(pgrep -f "build/bin/vmrund-sandbox.*$tmp" | wc -l)
[ "$left" = 0 ] && ok "no supervisor left" || not_ok "$left supervisors left"
[ "$fail" -eq 0 ] || tail -n 30 "$tmp/vmrund.log" | sed 's/^/    vmrund.log: /'
echo "    ($SECONDS s in all)"
finish sandbox-e2b
