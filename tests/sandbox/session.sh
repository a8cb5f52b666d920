#!/bin/bash
# An AI coding agent's session in a sandbox, end to end, through vmrund on
# a KVM host that runs Linux guests (scripts/on-kvm-host.sh decides
# where), against the test's own package index in a network namespace
# (tests/net/lib.sh): a python sandbox allowed to reach that one index;
# a venv and `pip install` of a wheel the test builds itself, served as a
# PEP 503 index; a module and its tests written through the files API;
# the tests run and fail, a file is fixed, they run again and pass; a
# background HTTP server in the sandbox serves between commands; the
# workspace downloaded as a tar; DELETE, and nothing of it on the host.
# Each request and its answer is printed, abridged: the session's
# transcript. Every curl and every command has a deadline.
set -u
cd "$(dirname "$0")/../.."
. tests/e2e/lib.sh
. tests/net/lib.sh
e2e_init sandbox-session
trap 'kill "$pid" "$idx" 2>/dev/null; net_down; rm -rf "$tmp"' EXIT
pid= idx=
net_up || { echo "not ok - the test network"; exit 1; }
IN_NET="nsenter --net=/run/netns/$NET_CLI"
PORT=$((20000 + RANDOM % 20000))
BASE=http://127.0.0.1:$PORT
K=key-session-tenant-0123456789
mkdir -p "$tmp/etc" "$tmp/lib" "$tmp/index"
printf 'tenant agent sandboxes=1 rate=1000 burst=1000 net=any\nkey %s agent\n' "$K" >"$tmp/etc/keys"
chmod 600 "$tmp/etc/keys"
# root's word: the proxy resolves through the test's DNS server
printf 'net_resolver 11.0.0.2\n' >"$tmp/etc/policy"
cat >"$tmp/etc/vmrund.conf" <<CONF
listen = 127.0.0.1:$PORT
state_db = $tmp/lib/state.db
run_dir = $tmp/lib/runs
keys = $tmp/etc/keys
policy = $tmp/etc/policy
audit_log = $tmp/lib/audit.jsonl
slots = 1
CONF

# ---- the package index: a wheel built here, pages as PEP 503 has them ----
python3 - "$tmp/index" <<'PY' || { echo "not ok - building the wheel"; exit 1; }
import base64, hashlib, os, sys, zipfile
root = sys.argv[1]
files = {
    "greetlib/__init__.py": 'def greet(who):\n    return "hello, %s" % who\n',
    "greetlib-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: greetlib\nVersion: 1.0\n",
    "greetlib-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: vmrun-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
def digest(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
record = "".join("%s,%s,%d\n" % (n, digest(t.encode()), len(t.encode())) for n, t in files.items())
files["greetlib-1.0.dist-info/RECORD"] = record + "greetlib-1.0.dist-info/RECORD,,\n"
os.makedirs(root + "/files")
wheel = root + "/files/greetlib-1.0-py3-none-any.whl"
with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
    for n, t in files.items():
        z.writestr(n, t)
sha = hashlib.sha256(open(wheel, "rb").read()).hexdigest()
os.makedirs(root + "/simple/greetlib")
open(root + "/simple/index.html", "w").write('<!DOCTYPE html><html><body><a href="greetlib/">greetlib</a></body></html>\n')
open(root + "/simple/greetlib/index.html", "w").write(
    '<!DOCTYPE html><html><body><a href="../../files/greetlib-1.0-py3-none-any.whl#sha256=%s">'
    'greetlib-1.0-py3-none-any.whl</a></body></html>\n' % sha)
PY
ip netns exec "$NET_SRV" python3 -m http.server --bind 11.0.0.2 --directory "$tmp/index" 8000 \
	>"$tmp/index.log" 2>&1 &
idx=$!
for _ in $(seq 100); do
	$IN_NET curl -fs -m 2 -o /dev/null http://11.0.0.2:8000/simple/ && break
	sleep 0.1
done

$IN_NET build/bin/vmrund --config "$tmp/etc/vmrund.conf" >>"$tmp/vmrund.log" 2>&1 &
pid=$!
for _ in $(seq 100); do $IN_NET curl -fs -m 2 "$BASE/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
$IN_NET curl -fs -m 2 "$BASE/healthz" >/dev/null 2>&1 ||
	{ not_ok "vmrund did not start: $(tail -3 "$tmp/vmrund.log")"; finish sandbox-session; exit 1; }

# c PATH [CURL ARGS...]: a request, printed with its answer (abridged);
# status in $code, the answer in $tmp/out.
c() {
	local path=$1 what
	shift
	code=$($IN_NET curl -s -m 400 -o "$tmp/out" -w '%{http_code}' -H "Authorization: Bearer $K" "$@" \
		"$BASE$path" 2>"$tmp/err")
	what=$(printf '%s ' "$@" | sed -e 's/-X \([A-Z]*\) /\1 /' -e 's/-H [^ ]* //g' -e 's/--data-binary //')
	echo "    > ${what}$path" | cut -c1-160
	echo "    < $code $(abridged | tr -d '\0' | tr '\n' ' ' | cut -c1-200)"
}
# The answer in $tmp/out as the transcript shows it: a command by its
# result (the ends of its output), other JSON as it is, else its start.
abridged() {
	jq -c 'if type == "object" and has("request") then
			{id, state, "end": .end, exit_code, stdout: ((.stdout // "")[-90:]), stderr: ((.stderr // "")[-90:])}
			| with_entries(select(.value != null))
		else . end' "$tmp/out" 2>/dev/null || head -c 200 "$tmp/out"
}
post() { c "$2" -X POST -H 'Content-Type: application/json' --data-binary "$1"; }
jj() { jq -e "$1" "$tmp/out" >/dev/null 2>&1; }
# On a failure, a command's own output too (its last lines).
expect() { if [ "$code" = "$2" ] && { [ -z "${3:-}" ] || jj "$3"; }; then ok "$1"; else
	echo "    status $code" >>"$tmp/err"
	jq -r '(.stdout // "") + (.stderr // "")' "$tmp/out" 2>/dev/null | tail -n 8 | sed 's/^/    guest: /'
	not_ok "$1"; fi; }
field() { jq -r "$1" "$tmp/out" 2>/dev/null; }
# run JSON_ARGV [TIMEOUT_S]: a foreground command, waited for
run() { post "{\"argv\":$1,\"timeout_s\":${2:-120}}" "/v1/sandboxes/$id/commands?wait=${2:-120}"; }
put() { printf '%s' "$2" >"$tmp/body"; c "/v1/sandboxes/$id/files?path=$1" -X PUT --data-binary "@$tmp/body"; }

post '{"runtime":"python","timeout_s":900,"network":{"allow":["ok.test:8000"]},"metadata":{"agent":"session"}}' \
	/v1/sandboxes
expect "a python sandbox allowed to reach one package index" 201 '.state=="running"'
id=$(field .id)

run '["python3","-m","venv","--without-pip","--system-site-packages","venv"]'
expect "a venv (the image's python3-venv)" 201 '.exit_code==0'
# through sh: a program of the workspace is not on the image's manifest,
# which decides what a command's argv[0] may be
run '["sh","-c","venv/bin/python -m pip install --no-cache-dir --disable-pip-version-check --index-url http://ok.test:8000/simple/ --trusted-host ok.test greetlib"]' 300
expect "pip install from the test's PEP 503 index, through the proxy" 201 \
	'.exit_code==0 and (.stdout|contains("Successfully installed greetlib-1.0"))'
grep -q 'GET /files/greetlib-1.0-py3-none-any.whl' "$tmp/index.log" && ok "the index served the wheel" ||
	not_ok "the index's log: $(tail -3 "$tmp/index.log")"
run '["python3","-c","import urllib.request as u; u.urlopen(\"http://other.test/\", timeout=20)"]'
expect "a host the sandbox was not allowed: refused" 201 '.exit_code!=0 and (.stderr|contains("403"))'

post '{"path":"app"}' "/v1/sandboxes/$id/files/mkdir"
expect "mkdir app" 200
put app/calc.py $'def add(a, b):\n    return a - b\n'
expect "write the module (with a bug)" 200
put app/test_calc.py $'import unittest\nimport calc\nimport greetlib\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(calc.add(2, 3), 5)\n\n    def test_greet(self):\n        self.assertEqual(greetlib.greet("agent"), "hello, agent")\n\n\nif __name__ == "__main__":\n    unittest.main()\n'
expect "write its tests" 200
T='["sh","-c","cd app && ../venv/bin/python -m unittest -v test_calc"]'
run "$T"
expect "the tests run and fail: test_add fails, test_greet (the installed package) passes" 201 \
	'.exit_code==1 and (.stderr|test("test_add .*\\.\\.\\. FAIL")) and (.stderr|test("test_greet .*\\.\\.\\. ok")) and (.stderr|contains("FAILED (failures=1)"))'
c "/v1/sandboxes/$id/files?path=app/calc.py"
[ "$code" = 200 ] && grep -q 'a - b' "$tmp/out" && ok "read the module back" || not_ok "read back"
put app/calc.py $'def add(a, b):\n    return a + b\n'
expect "fix it" 200
run "$T"
expect "the tests run again and pass" 201 '.exit_code==0 and (.stderr|contains("OK"))'

post '{"argv":["python3","-m","http.server","8081","--bind","127.0.0.1"],"cwd":"app","background":true,"timeout_s":600}' \
	"/v1/sandboxes/$id/commands"
expect "a background HTTP server in the sandbox" 201
srv=$(field .id)
FETCH='["python3","-c","import time, urllib.request as u\nfor _ in range(150):\n  try:\n    print(u.build_opener(u.ProxyHandler({})).open(\"http://127.0.0.1:8081/calc.py\", timeout=5).read().decode(), end=\"\"); break\n  except OSError:\n    time.sleep(0.2)"]'
run "$FETCH"
expect "it serves" 201 '.exit_code==0 and (.stdout|contains("a + b"))'
run '["sh","-c","echo more >> app/notes.txt"]'
expect "another command" 201 '.exit_code==0'
run "$FETCH"
expect "it still serves, between commands" 201 '.exit_code==0 and (.stdout|contains("a + b"))'
c "/v1/sandboxes/$id/commands/$srv"
expect "the server's command is still running" 200 '.state=="running"'

c "/v1/sandboxes/$id/files/tar?path=."
mv "$tmp/out" "$tmp/ws.tar"
tar -tf "$tmp/ws.tar" >"$tmp/list" 2>/dev/null
calc=$(grep -m1 'app/calc.py$' "$tmp/list")
if [ "$code" = 200 ] && [ -n "$calc" ] && grep -q 'app/notes.txt$' "$tmp/list" &&
	grep -q 'site-packages/greetlib/__init__.py$' "$tmp/list" && tar -xOf "$tmp/ws.tar" "$calc" | grep -q 'a + b'; then
	ok "the workspace as a tar: the fixed module, the notes, the venv with greetlib ($(wc -l <"$tmp/list") entries)"
else
	not_ok "the workspace's tar ($code): $(grep -c . "$tmp/list") entries, $(grep -E 'calc|notes|greetlib' "$tmp/list" | tr '\n' ' ')"
fi

c "/v1/sandboxes/$id" -X DELETE
expect "DELETE: stopped, deleted" 200 '.state=="stopped" and .reason=="deleted"'
sleep 1
sup=$(pgrep -f build/bin/vmrund-sandbox)
[ -z "$sup" ] && ! pgrep -f build/bin/vmm >/dev/null && ! pgrep -f vmrun-proxy >/dev/null &&
	[ -z "$(ls -A "$tmp/lib/runs/sandboxes" 2>/dev/null)" ] &&
	[ -z "$(find /sys/fs/cgroup/vmrun -mindepth 1 -maxdepth 1 -type d 2>/dev/null)" ] &&
	ok "nothing left on the host: no supervisor, vmm, proxy, cgroup or directory" ||
	not_ok "leftovers: $sup $(pgrep -af 'build/bin/vmm|vmrun-proxy') $(ls -A "$tmp/lib/runs/sandboxes") $(find /sys/fs/cgroup/vmrun -mindepth 1 -maxdepth 1 -type d 2>&1)"
kill -TERM "$pid"
wait "$pid" 2>/dev/null
echo "    ($SECONDS s in all)"
finish sandbox-session
