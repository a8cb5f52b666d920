#!/bin/bash
# Judge0's callback_url, made by vmrund (never the guest), with the
# stand-in worker: vmrund runs in a network namespace of the test's
# (tests/net/lib.sh: test hosts on 11.0.0.2, a "private mirror" on
# 10.9.0.2, the metadata address, names for each and one for loopback),
# and each callback is a PUT to a receiver the test runs
# (tests/vmrund/callback_server.py). Delivered where the tenant's rules
# admit it; refused at submission for an address in the deny set, at
# delivery for a name that resolves into it; tried 3 times where nothing
# answers. Needs root. Every curl has a deadline.
set -u
cd "$(dirname "$0")/../.."
. tests/e2e/lib.sh
. tests/net/lib.sh
. tests/vmrund/lib.sh
e2e_init vmrund-judge0-callback
pid=
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; net_down; rm -rf /etc/netns/$NET_CLI "$tmp"' EXIT
net_up || { not_ok "the test network did not come up"; finish "judge0 callback tests"; }
# vmrund resolves as the namespace's hosts do: through the test's dnsmasq
mkdir -p "/etc/netns/$NET_CLI"
echo "nameserver 11.0.0.2" >"/etc/netns/$NET_CLI/resolv.conf"
S="ip netns exec $NET_SRV" C="ip netns exec $NET_CLI"
$S python3 tests/vmrund/callback_server.py "$tmp/received" 11.0.0.2:8090 10.9.0.2:8090 >"$tmp/srv.log" 2>&1 &
NET_PIDS="$NET_PIDS $!"
$C python3 tests/vmrund/callback_server.py "$tmp/loopback" 127.0.0.1:8090 >"$tmp/lo.log" 2>&1 &
NET_PIDS="$NET_PIDS $!"
net_wait_ready "$tmp/srv.log" && net_wait_ready "$tmp/lo.log" || not_ok "the receivers did not start"

PORT=$((20000 + RANDOM % 20000))
BASE=http://127.0.0.1:$PORT/judge0
KA=key-calls-0123456789abcdef
KM=key-mirror-0123456789abcde
KN=key-nocall-0123456789abcde
mkdir -p "$tmp/etc" "$tmp/lib" "$tmp/guest/runtimes"
vmrund_conf "guest_dir = $tmp/guest" "audit_log =" "worker = $PWD/tests/vmrund/standin_worker.py" "slots = 4" <<KEYS
tenant calls callback=any
tenant mirror callback=mirror.test:8090 callback_addr=10.9.0.2/32:8090
tenant nocall
key $KA calls
key $KM mirror
key $KN nocall
KEYS
printf 'name: python\nversion: 3.11.2\nextension: py\nrun: python3 {file} {args}\n' >"$tmp/guest/runtimes/python.runtime"
# shellcheck disable=SC2086 # $C is words: ip netns exec NS
vmrund_start $C

# submit KEY URL: the answer's status in $code, its body in $tmp/out
submit() {
	code=$($C curl -s -m 10 -o "$tmp/out" -w '%{http_code}' -H "X-Auth-Token: $1" -H 'Content-Type: application/json' \
		-d "{\"source_code\":\"standin:{\\\"stdout\\\":\\\"called back\\\"}\",\"language_id\":71,\"callback_url\":\"$2\"}" \
		"$BASE/submissions?base64_encoded=false" 2>"$tmp/err")
}
token() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$tmp/out" 2>/dev/null; }
# wait_line FILE PATTERN: at most 20 s for a line matching PATTERN
wait_line() { for _ in $(seq 200); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }

submit "$KA" "http://ok.test:8090/judge0/cb?x=1"
expect_tok=$(token)
[ "$code" = 201 ] && wait_line "$tmp/received" "$expect_tok" && python3 - "$tmp/received" "$expect_tok" <<'PY' &&
import base64, json, sys
line = [json.loads(l) for l in open(sys.argv[1]) if sys.argv[2] in l][0]
b = json.loads(line["body"])
assert line["method"] == "PUT" and line["path"] == "/judge0/cb?x=1" and line["at"] == "11.0.0.2:8090", line
assert line["type"] == "application/json", line
assert set(b) == {"token", "time", "memory", "stdout", "stderr", "compile_output", "message", "status"}, b
assert b["token"] == sys.argv[2] and b["status"] == {"id": 3, "description": "Accepted"}, b
assert b["stdout"] == "Y2FsbGVkIGJhY2s=\n", b   # base64, as Judge0's callback sends it
PY
	ok "a callback: PUT of the default fields in base64 to the URL, once the run ended" ||
	not_ok "callback to ok.test: $code $(cat "$tmp/out") $(cat "$tmp/received" 2>&1)"

submit "$KM" "http://mirror.test:8090/private"
[ "$code" = 201 ] && wait_line "$tmp/received" '"at": "10.9.0.2:8090"' &&
	ok "a private address the tenant's callback_addr names: called" ||
	not_ok "callback to mirror.test: $code $(cat "$tmp/out")"

submit "$KA" "http://127.0.0.1:8090/"
[ "$code" = 422 ] && grep -q 'loopback' "$tmp/out" &&
	ok "a loopback address: 422 at submission, naming the deny set" || not_ok "127.0.0.1: $code $(cat "$tmp/out")"
submit "$KA" "http://169.254.169.254/latest/meta-data/"
[ "$code" = 422 ] && grep -q 'metadata' "$tmp/out" &&
	ok "the metadata address: 422 at submission" || not_ok "169.254.169.254: $code $(cat "$tmp/out")"
submit "$KN" "http://ok.test:8090/"
[ "$code" = 422 ] && grep -q 'setting callback is not allowed' "$tmp/out" &&
	ok "a tenant without callback rules: Judge0's \"setting callback is not allowed\"" ||
	not_ok "nocall: $code $(cat "$tmp/out")"
submit "$KM" "http://ok.test:8090/"
[ "$code" = 422 ] && grep -q "not a destination this tenant's callbacks may reach" "$tmp/out" &&
	ok "a host outside the tenant's callback rules: 422" || not_ok "mirror to ok.test: $code $(cat "$tmp/out")"
submit "$KA" "ftp://ok.test/"
[ "$code" = 422 ] && grep -q 'not a valid URL' "$tmp/out" && ok "not an http(s) URL: 422" ||
	not_ok "ftp: $code $(cat "$tmp/out")"

# names that resolve into the deny set: accepted, refused when called
submit "$KA" "http://lo.test:8090/rebind"
lo=$(token)
submit "$KA" "http://meta.test/latest/meta-data/"
meta=$(token)
wait_line "$tmp/vmrund.log" "run ${lo//-/}: callback .*refused: lo.test: every address is refused: 127.0.0.1 is loopback" &&
	wait_line "$tmp/vmrund.log" "run ${meta//-/}: callback .*refused: meta.test: .*169.254.169.254 is link-local" &&
	ok "names that resolve to loopback and metadata: refused when called, said in the log" ||
	not_ok "lo.test/meta.test: $(grep callback "$tmp/vmrund.log")"
[ ! -s "$tmp/loopback" ] && ! grep -q '169.254' "$tmp/received" && ok "...and nothing reached loopback or metadata" ||
	not_ok "a callback got through: $(cat "$tmp/loopback" 2>&1)"

# nothing listening: three tries, then given up (said)
submit "$KA" "http://ok.test:8099/"
down=$(token)
wait_line "$tmp/vmrund.log" "run ${down//-/}: callback http://ok.test:8099/ failed 3 times" &&
	ok "a receiver that does not answer: tried 3 times, said in the log" ||
	not_ok "3 tries: $(grep "${down//-/}" "$tmp/vmrund.log")"
$C curl -s -m 5 "http://127.0.0.1:$PORT/metrics" >"$tmp/metrics"
grep -q 'vmrund_judge0_callbacks_total{result="sent"} 2' "$tmp/metrics" &&
	grep -q 'vmrund_judge0_callbacks_total{result="refused"} 2' "$tmp/metrics" &&
	grep -q 'vmrund_judge0_callbacks_total{result="failed"} 1' "$tmp/metrics" &&
	ok "/metrics counts callbacks sent, refused and failed" || not_ok "metrics: $(grep callbacks "$tmp/metrics")"
kill -TERM "$pid"
wait "$pid"
[ $? = 0 ] && ok "vmrund stops on SIGTERM" || not_ok "vmrund's exit status"
[ "$fail" -eq 0 ] || tail -n 20 "$tmp/vmrund.log" | sed 's/^/    vmrund.log: /'
finish "judge0 callback tests"
