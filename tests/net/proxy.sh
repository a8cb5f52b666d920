#!/bin/bash
# vmrun-proxy in its own jail against the test's little internet
# (tests/net/lib.sh), with tests/net/proxy_guest.py as the guest: the
# policy's refusals, rebinding, IP literals, SNI, caps, the audit and the
# jail itself. Needs no KVM; needs root (namespaces, the proxy's uid).
set -u
cd "$(dirname "$0")/../.."
if [ "$(id -u)" != 0 ]; then
	echo "SKIP tests/net/proxy.sh: needs root (network namespaces)"
	exit 77
fi
. tests/net/lib.sh
trap net_down EXIT
net_up || { echo "FAIL net setup"; exit 1; }
out=$(mktemp -d)
timeout 120 ip netns exec "$NET_CLI" python3 tests/net/proxy_guest.py build/bin/vmrun-proxy "$NET_DIR/ca.pem" "$out" "$NET_DIR"
rc=$?
[ -f "$out/audit.json" ] && echo "audit of the mirror request: $(cat "$out/audit.json")"
rm -rf "$out"
exit $rc
