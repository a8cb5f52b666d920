#!/bin/bash
# vmrund's Judge0 API with the stand-in worker (tests/vmrund/standin_worker.py
# ends each "standin:" program as told): tests/vmrund/judge0_client.py's
# cases (what Judge0's SDK does on construction, base64, wait, fields,
# batches, every status, Rails' 422s, authentication), then the queue's
# limit in Judge0's words. No VM: the real programs are tests/vmrund/vm.sh's.
set -u
cd "$(dirname "$0")/../.."
. tests/e2e/lib.sh
. tests/vmrund/lib.sh
e2e_init vmrund-judge0
PORT=$((20000 + RANDOM % 20000))
BASE=http://127.0.0.1:$PORT/judge0
KA=key-alice-0123456789abcdef
KB=key-bob-0123456789abcdef00
KT=key-tiny-0123456789abcdef0
mkdir -p "$tmp/etc" "$tmp/lib" "$tmp/guest/runtimes"
vmrund_conf "guest_dir = $tmp/guest" "worker = $PWD/tests/vmrund/standin_worker.py" "slots = 4" "queue_max = 30" <<KEYS
tenant alice concurrent=4 queued=40 rate=1000 burst=1000 net=any
tenant bob concurrent=2 queued=5 rate=1000 burst=1000
tenant tiny concurrent=1 queued=1 rate=1000 burst=1000
key $KA alice
key $KB bob
key $KT tiny
KEYS
# Three runtimes as the image build describes them: the languages the API
# offers are the installed ones (c++'s image runs the Multi-file program).
printf 'name: python\nversion: 3.11.2\nextension: py\nrun: python3 {file} {args}\n' >"$tmp/guest/runtimes/python.runtime"
printf 'name: c\nversion: 12.2.0\nextension: c\ncompile: gcc -O2 -o /tmp/prog {files}\nrun: /tmp/prog {args}\n' \
	>"$tmp/guest/runtimes/c.runtime"
printf 'name: c++\nversion: 12.2.0\nextension: cpp\ncompile: g++ -O2 -o /tmp/prog {files}\nrun: /tmp/prog {args}\n' \
	>"$tmp/guest/runtimes/c++.runtime"
vmrund_start

timeout -k 5 200 python3 tests/vmrund/judge0_client.py "$BASE" "$KA" standin "$KB" >"$tmp/client" 2>&1
cat "$tmp/client"
client_checks "$tmp/client" "the Judge0 client"

# The queue's limit: one runs (asleep), one waits, the third is refused
# as Judge0 refuses it when its queue is full.
c() { code=$(curl -s -m 20 -o "$tmp/out" -w '%{http_code}' -H "X-Auth-Token: $KT" "$@" 2>"$tmp/err"); }
sleepy='{"source_code":"standin:{\"sleep\":3}","language_id":71}'
for i in 1 2 3; do
	c -H 'Content-Type: application/json' -d "$sleepy" "$BASE/submissions?base64_encoded=false"
	codes="${codes:-}$code "
done
[ "$codes" = "201 201 503 " ] && json "j=={'error':'queue is full','message':j['message']}" &&
	ok "the tenant's queue full: 503 {\"error\": \"queue is full\"}" || not_ok "queue full: $codes $(cat "$tmp/out")"
# without a key, where no tenant is anonymous: 401
code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "$BASE/languages")
[ "$code" = 401 ] && ok "no X-Auth-Token: 401" || not_ok "no key: $code"
# a submission is a run of the native API: the same run, by its id
tok=$(curl -s -m 5 -H "X-Auth-Token: $KA" -H 'Content-Type: application/json' \
	-d '{"source_code":"standin:{}","language_id":71}' "$BASE/submissions?base64_encoded=false" |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
code=$(curl -s -m 5 -o "$tmp/out" -w '%{http_code}' -H "Authorization: Bearer $KA" \
	"http://127.0.0.1:$PORT/v1/runs/${tok//-/}")
[ "$code" = 200 ] && json "j['id']=='${tok//-/}' and j['state'] in ('queued','running','succeeded')" &&
	ok "a token's run in the native API (GET /v1/runs/ID)" || not_ok "native view of $tok: $code $(head -c 300 "$tmp/out")"
# the native API lists the tenant's runs, these among them
code=$(curl -s -m 5 -o "$tmp/out" -w '%{http_code}' -H "Authorization: Bearer $KA" \
	"http://127.0.0.1:$PORT/v1/runs?limit=2&offset=1")
[ "$code" = 200 ] && json "len(j['runs'])==2 and j['total']>20 and j['offset']==1 and j['limit']==2 and all(r['tenant']=='alice' for r in j['runs'])" &&
	ok "GET /v1/runs?limit=2&offset=1: a page of the tenant's runs, with the total" || not_ok "GET /v1/runs: $code"
code=$(curl -s -m 5 -o "$tmp/out" -w '%{http_code}' -H "Authorization: Bearer $KA" "http://127.0.0.1:$PORT/v1/runs?limit=101")
[ "$code" = 400 ] && ok "GET /v1/runs?limit=101: 400" || not_ok "limit=101: $code"
# GET /statistics: the tenant's own submissions, Judge0's shape; kept 10
# minutes unless invalidate_cache=true (heeded once the answer is a
# second old)
st() { code=$(curl -s -m 20 -o "$tmp/out" -w '%{http_code}' -H "X-Auth-Token: $KA" "$BASE/statistics$1"); }
st ""
n0=$(python3 -c 'import json; print(json.load(open("'"$tmp/out"'"))["submissions"]["total"])' 2>/dev/null)
[ "$code" = 200 ] && json "set(j)=={'created_at','cached_until','submissions','languages','statuses','database'} and j['submissions']['total']>=3 and j['submissions']['today']==j['submissions']['total'] and len(j['submissions']['last_30_days'])==30 and j['languages'][0]['language']=={'id':71,'name':'Python (3.11.2)'} and all(s['status']['name'] for s in j['statuses']) and j['database']['size_in_bytes']>0 and j['database']['size_pretty'].endswith(('bytes','kB','MB'))" &&
	ok "GET /statistics: the tenant's submissions by language, status and day, Judge0's shape" ||
	not_ok "statistics: $code $(head -c 600 "$tmp/out")"
curl -s -m 5 -o /dev/null -H "X-Auth-Token: $KA" -H 'Content-Type: application/json' \
	-d '{"source_code":"standin:{}","language_id":71}' "$BASE/submissions?base64_encoded=false"
st ""
[ "$code" = 200 ] && json "j['submissions']['total']==$n0" && sleep 1.1 && st "?invalidate_cache=true" &&
	[ "$code" = 200 ] && json "j['submissions']['total']==$n0+1" &&
	ok "...kept until invalidate_cache=true counts again" || not_ok "statistics' cache: $code $(head -c 300 "$tmp/out")"
c "$BASE/statistics"
[ "$code" = 200 ] && json "j['submissions']['total']<$n0" &&
	ok "...another tenant's statistics count its own submissions only" || not_ok "statistics of tenant t: $code"
kill -TERM "$pid"
wait "$pid"
[ "$fail" -eq 0 ] || tail -n 20 "$tmp/vmrund.log" | sed 's/^/    vmrund.log: /'
finish "vmrund judge0 tests"
