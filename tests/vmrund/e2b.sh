#!/bin/bash
# vmrund's E2B control API with E2B's own SDK (npm e2b, the Makefile's
# pin), unchanged, given only E2B_API_URL, E2B_SANDBOX_URL and
# E2B_API_KEY (tests/vmrund/e2b_client.js), against sandboxes whose
# supervisor is the stand-in (tests/vmrund/standin_supervisor.py): no VM.
# Then the answers the SDK reads its errors from, by curl.
set -u
cd "$(dirname "$0")/../.."
. tests/e2e/lib.sh
. tests/vmrund/lib.sh
e2e_init vmrund-e2b
SDK=$PWD/build/npm-e2b/node_modules/e2b
[ -f "$SDK/package.json" ] || { echo "e2b.sh: no E2B SDK at $SDK (make $SDK/package.json)" >&2; exit 1; }
PORT=$((20000 + RANDOM % 20000))
BASE=http://127.0.0.1:$PORT/e2b
KA=key-alice-0123456789abcdef
KB=key-bob-0123456789abcdef00
mkdir -p "$tmp/etc" "$tmp/lib" "$tmp/guest/runtimes"
vmrund_conf "guest_dir = $tmp/guest" "e2b_domain = sandboxes.test" "sandbox_supervisor = $PWD/tests/vmrund/standin_supervisor.py" <<KEYS
tenant alice rate=1000 burst=1000 sandboxes=8
tenant bob rate=1000 burst=1000 sandboxes=2
key $KA alice
key $KB bob
KEYS
printf 'name: python\nversion: 3.11.2\nextension: py\nrun: python3 {file} {args}\n' >"$tmp/guest/runtimes/python.runtime"
vmrund_start || not_ok "vmrund did not start"

E2B_API_URL=$BASE E2B_SANDBOX_URL=$BASE E2B_API_KEY=$KA timeout -k 5 120 node tests/vmrund/e2b_client.js "$SDK" "$KB" \
	>"$tmp/client" 2>&1
cat "$tmp/client"
client_checks "$tmp/client" "the E2B SDK script"
E2B_API_URL=$BASE E2B_SANDBOX_URL=$BASE E2B_API_KEY=$KA timeout -k 5 120 node tests/vmrund/e2b_envd.js "$SDK" "$KB" \
	>"$tmp/envd" 2>&1
cat "$tmp/envd"
client_checks "$tmp/envd" "the E2B SDK's commands and files (envd)"

# What the SDK reads from the answers, which the script cannot show
c() { code=$(curl -s -m 20 -o "$tmp/out" -w '%{http_code}' -H "X-API-Key: $KA" "$@" 2>"$tmp/err"); }
c -X DELETE "$BASE/sandboxes/0123456789abcdef0123456789abcdef"
expect "an unknown sandbox: 404 with E2B's body, {code: 404, message}" 404 \
	"j['code']==404 and 'not found' in j['message']"
c -X POST -H 'Content-Type: application/json' -d '{"templateID":"base","mcp":{}}' "$BASE/v2/sandboxes"
expect "a field vmrun does not offer: 400, named, not ignored" 400 "j['code']==400 and j['message'].startswith('mcp:')"
c -X POST -H 'Content-Type: application/json' -d '{"allow_internet_access":true}' "$BASE/v2/sandboxes"
expect "internet access for a tenant whose runs reach no host: 403" 403 "'allow_internet_access' in j['message']"
c -X PUT -H 'Content-Type: application/json' -d '{}' "$BASE/sandboxes/0123456789abcdef0123456789abcdef/network"
expect "what vmrun does not do: E2B's error, 501" 501 "j['code']==501"
code=$(curl -s -m 5 -o "$tmp/out" -w '%{http_code}' "$BASE/v2/sandboxes")
[ "$code" = 401 ] && json "j['code']==401 and j['message']" && ok "no key: 401, in E2B's shape" ||
	not_ok "no key: $code $(cat "$tmp/out")"
c -X POST -H 'Content-Type: text/plain' -d 'x' "$BASE/v2/sandboxes"
expect "vmrund's own refusals under the prefix are E2B's too (415 with its code)" 415 "j['code']==415"

# envd's Connect framing, by hand: a sandbox made by curl, its token from the answer
c -X POST -H 'Content-Type: application/json' -d '{"templateID":"base"}' "$BASE/v2/sandboxes"
expect "a Sandbox answer carries its envdAccessToken (64 hex digits)" 201 \
	"len(j['envdAccessToken'])==64 and int(j['envdAccessToken'],16)>=0"
SID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sandboxID"])' "$tmp/out")
TOKEN=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["envdAccessToken"])' "$tmp/out")
frames() { python3 tests/vmrund/connect_call.py "$BASE/$1" "$SID" "$TOKEN" "$2" ${3:-} >"$tmp/frames"; }
fj() { python3 -c 'import json,sys; L=open(sys.argv[1]).read().split("\n")[:-1]; st=int(L[0]); F=[json.loads(x) for x in L[1:]]
sys.exit(0 if ('"$1"') else 1)' "$tmp/frames" && ok "$2" || { sed 's/^/    /' "$tmp/frames"; not_ok "$2"; }; }
frames process.Process/Start '{"process":{"cmd":"/bin/bash","args":["-l","-c","echo framed"]}}'
fj "st==200 and F[0]=={'flags':0,'msg':{'event':{'start':{'pid':F[0]['msg']['event']['start']['pid']}}}} and \
F[1]['msg']['event']['data']['stdout']=='ZnJhbWVkCg==' and F[2]['msg']['event']['end']['exitCode']==0 and \
F[2]['msg']['event']['end']['status']=='exit status 0' and F[-1]=={'flags':2,'msg':{}} and len(F)==4" \
	"Start: 200, then start, data (base64), end, and the end-of-stream frame {} flagged 2, each enveloped"
frames process.Process/Start '{"process":{"cmd":"/bin/bash","args":["-l","-c","echo on a terminal"]},"pty":{"size":{"cols":80,"rows":24}}}'
fj "st==200 and F[1]['msg']['event']['data']=={'pty':'b24gYSB0ZXJtaW5hbAo='} and F[-1]=={'flags':2,'msg':{}}" \
	"Start with a pty: what the command writes is the terminal's (data.pty)"
frames process.Process/Start '{"process":{"cmd":"/bin/bash"},"pty":{"cols":80}}'
fj "st==200 and len(F)==1 and F[0]['msg']['error']['code']=='invalid_argument'" "a pty without its size: invalid_argument"
frames process.Process/Start '' 0100000002
fj "st==200 and F[0]['flags']==2 and F[0]['msg']['error']['code']=='invalid_argument'" \
	"a compressed envelope: invalid_argument, in the end frame"
python3 tests/vmrund/connect_call.py "$BASE/process.Process/Start" "$SID" "$(printf %064d 0)" '{}' >"$tmp/frames"
fj "st==200 and F[0]['msg']['error']['code']=='unauthenticated'" "Start with a token that opens nothing: unauthenticated"
u() { code=$(curl -s -m 20 -o "$tmp/out" -w '%{http_code}' -H "E2b-Sandbox-Id: $SID" -H "X-Access-Token: $TOKEN" \
	-H 'Content-Type: application/json' "$@" 2>"$tmp/err"); }
u -d '{"path":"nowhere"}' "$BASE/filesystem.Filesystem/Stat"
expect "a unary call's error: Connect's status and body (404, not_found)" 404 "j['code']=='not_found'"
frames filesystem.Filesystem/WatchDir '{"path":"nowhere"}'
fj "st==200 and len(F)==1 and F[0]['flags']==2 and F[0]['msg']['error']['code']=='not_found'" \
	"WatchDir of no directory: not_found in its end frame, before any start"
u -d '{"path":"."}' "$BASE/filesystem.Filesystem/CreateWatcher"
expect "CreateWatcher (envd's polling watchers, which the SDK does not call): unimplemented, and why" 501 \
	"j['code']=='unimplemented' and 'WatchDir' in j['message']"
u -d '{}' -H 'Authorization: Basic cm9vdDo=' "$BASE/process.Process/List"
expect "user root (the SDK's Basic header): permission_denied, never run as another" 403 \
	"j['code']=='permission_denied' and 'root' in j['message']"
u "$BASE/health"
expect "/health of a running sandbox: 204" 204
# by host name, as the SDK addresses envd with E2B_DOMAIN: PORT-ID.DOMAIN, at the root
ROOT=${BASE%/e2b}
code=$(curl -s -m 20 -o "$tmp/out" -w '%{http_code}' -H "Host: 49983-$SID.sandboxes.test" -H "X-Access-Token: $TOKEN" \
	-H 'Content-Type: application/json' -d '{"path":"."}' "$ROOT/filesystem.Filesystem/Stat" 2>"$tmp/err")
expect "envd by host name (49983-ID.e2b_domain): Stat of the home" 200 \
	"j['entry']['path']=='/workspace' and j['entry']['type']=='FILE_TYPE_DIRECTORY'"
code=$(curl -s -m 20 -o "$tmp/out" -w '%{http_code}' -H "Host: 49983-$SID.sandboxes.test" "$ROOT/v1/runs" 2>"$tmp/err")
expect "a sandbox's host name serves envd alone: 404 for the rest" 404
u -X DELETE -H "X-API-Key: $KA" "$BASE/sandboxes/$SID"
u "$BASE/health"
expect "/health of a killed one: 502, which the SDK reads as its end" 502
kill -TERM "$pid"
wait "$pid"
[ "$fail" -eq 0 ] || tail -n 20 "$tmp/vmrund.log" | sed 's/^/    vmrund.log: /'
finish "vmrund e2b tests"
