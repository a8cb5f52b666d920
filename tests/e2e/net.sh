#!/bin/bash
# Network by policy, end to end, on a KVM host that runs Linux guests
# (scripts/on-kvm-host.sh decides where), against the test's own hosts in
# network namespaces (tests/net/lib.sh): vmrun runs in the client
# namespace, the proxy resolves through the test's dnsmasq. curl (bash
# image) and Python's urllib and a pip-style index fetch (python image)
# through the proxy; refusals as the guest sees them and in the result's
# "network" array; the ceiling; and with no --allow-net, no way out.
# Ends with "net: N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
. tests/e2e/lib.sh
. tests/net/lib.sh
e2e_init net
DEADLINE=180
trap 'net_down; rm -rf "$tmp"' EXIT
net_up || { echo "not ok - the test network"; exit 1; }
vn() { timeout -k 5 "$DEADLINE" nsenter --net=/run/netns/"$NET_CLI" "$VMRUN" -t 150 "$@" <"$tmp/stdin" >"$tmp/out" 2>"$tmp/err"; }

# root's word for the test: its DNS server, and the mirror's range
pol=$tmp/policy
printf 'net_resolver 11.0.0.2\nnet_ceiling_addr 10.9.0.0/24:8080\n' >"$pol"
ws=$tmp/ws
mkdir -p "$ws"
cp "$NET_DIR/ca.pem" "$ws/ca.pem"
cp tests/e2e/net/guest_net.py tests/e2e/net/no_net.py "$ws/"

# curl: allowed http and https, the mirror by address rule, and refusals
cat >"$ws/curl.sh" <<'SH'
c() { curl -sS --cacert ca.pem -o /dev/null -w '%{http_code}' "$@" 2>/dev/null; echo " $*"; }
curl -sS --cacert ca.pem http://ok.test/hello https://ok.test/hello
c http://mirror.test:8080/hello
c http://other.test/
c http://meta.test/latest/meta-data/
c http://lo.test/hello
c http://11.0.0.2/hello
c http://169.254.169.254/latest/
SH
vn --runtime bash --json --policy "$pol" -w "$ws" --allow-net ok.test --allow-net mirror.test:8080 \
	--allow-net meta.test --allow-net lo.test --allow-net-addr 10.9.0.2/32:8080 -- bash curl.sh
rc=$?
json "j['stdout'] == 'hello from ok.test\nhello from ok.test\n200 http://mirror.test:8080/hello\n403 http://other.test/\n403 http://meta.test/latest/meta-data/\n403 http://lo.test/hello\n403 http://11.0.0.2/hello\n403 http://169.254.169.254/latest/\n'" &&
	ok "curl: http and https to an allowed host, the private mirror by address rule; 403 for the rest" ||
	not_ok "curl through the proxy (status $rc)"
json "[(n['host'], n['allowed']) for n in j['network']] == [('ok.test', True), ('ok.test', True), ('mirror.test', True), ('other.test', False), ('meta.test', False), ('lo.test', False), ('11.0.0.2', False), ('169.254.169.254', False)]" &&
	ok "the result's network array: every decision, in order" || not_ok "the network array"
json "j['network'][1]['method'] == 'CONNECT' and j['network'][1]['port'] == 443 and j['network'][1]['address'] == '11.0.0.2' and j['network'][1]['bytes_down'] > 1000 and j['network'][1]['end'] == 'closed' and 'link-local' in j['network'][4]['why'] and j['network'][4]['address'] is None" &&
	ok "an allowed entry: method, port, address, bytes, end; a denied one: why, no address" ||
	not_ok "network entries' fields"
python3 -c "import json; j=json.load(open('$tmp/out')); print('    allowed:', json.dumps(j['network'][1])); print('    denied: ', json.dumps(j['network'][4]))"

# python: urllib (http, https), a pip-style index, refusals, SNI
vn --json --policy "$pol" -w "$ws" --allow-net ok.test --allow-net tls.test -- python3 guest_net.py
rc=$?
python3 -c "import json; j=json.load(open('$tmp/out')); print(j['stdout'], end='')" >"$tmp/lines" 2>/dev/null
n_ok=$(grep -c '^ok ' "$tmp/lines")
[ "$rc" = 0 ] && [ "$n_ok" = 7 ] && ! grep -q '^FAIL' "$tmp/lines" &&
	ok "python: urllib http and https, a pip-style index, 403s, a mismatched SNI refused ($n_ok checks)" ||
	{ sed 's/^/    /' "$tmp/lines"; grep -h 'vmrun:' "$tmp/err" | tail -n 3 | sed 's/^/    /'
	  not_ok "python through the proxy (status $rc, $n_ok ok: $(python3 -c "import json; print(json.load(open('$tmp/out')).get('message'))" 2>&1))"; }

# no --allow-net: no way out at all
vn --json -w "$ws" -- python3 no_net.py
rc=$?
python3 -c "import json; j=json.load(open('$tmp/out')); print(j['stdout'], end='')" >"$tmp/lines" 2>/dev/null
n_ok=$(grep -c '^ok ' "$tmp/lines")
[ "$rc" = 0 ] && [ "$n_ok" = 8 ] && ! grep -q '^FAIL' "$tmp/lines" && ! json "'network' in j" &&
	ok "no --allow-net: TCP, UDP, DNS and vsock all fail, no proxy variables, no network array" ||
	{ sed 's/^/    /' "$tmp/lines"; not_ok "no network (status $rc, $n_ok ok)"; }

# a secret header: the guest asks plain http://ok.test/, the proxy adds the
# header over TLS (verified against the test CA); nothing in the guest has it
secret=s3cr3t-$$-$RANDOM
printf '%s\n' "$secret" >"$tmp/secret"
cat >"$ws/secret.sh" <<'SH'
mkdir -p artifacts
{ curl -sSv http://ok.test/hello; curl -sSv http://tls.test/hello; env; cat /proc/[0-9]*/environ; } \
	>artifacts/dump.txt 2>&1
grep -c 'hello from' artifacts/dump.txt
SH
vn --runtime bash --json --policy "$pol" -w "$ws" -a "$tmp/art" --allow-net tls.test \
	--secret-header "ok.test:X-Api-Key=@$tmp/secret" --secret-ca "$NET_DIR/ca.pem" -- bash secret.sh
rc=$?
json "j['stdout'] == '2\n'" && ! grep -qF "$secret" "$tmp/out" "$tmp/art/dump.txt" &&
	grep -q "X-Api-Key.*$secret" "$NET_DIR/servers.log" &&
	! grep '"Host": "tls.test"' "$NET_DIR/servers.log" | grep -q X-Api-Key &&
	ok "secret header: reaches the TLS server, never another host, nowhere in the guest's output, env or disk" ||
	not_ok "secret header (status $rc)"
rm -rf "$tmp/art"

# the ceiling: an address rule needs root's policy to admit it; no VM starts
vn --allow-net-addr 10.9.0.2/32:8080 -- true
rc=$?
[ "$rc" = 125 ] && grep -q "beyond the policy's network ceiling" "$tmp/err" &&
	ok "--allow-net-addr beyond the ceiling: refused before any VM (125)" || not_ok "the ceiling (status $rc)"
vn --allow-net 10.0.0.1 -- true
rc=$?
[ "$rc" = 125 ] && grep -q "IP address" "$tmp/err" && ok "--allow-net with an IP literal: refused (125)" ||
	not_ok "--allow-net 10.0.0.1 (status $rc)"
finish net
