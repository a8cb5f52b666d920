#!/bin/bash
# bench-net: vmrun-proxy's throughput and added connect latency against a
# direct connection, in the test's namespaces (tests/net/lib.sh). The
# guest's side of a real run adds vsock and the guest's forwarder; this
# measures the proxy itself, the part the policy adds. Needs root.
set -u
cd "$(dirname "$0")/../.."
. tests/net/lib.sh
trap net_down EXIT
net_up || exit 1
ip netns exec "$NET_SRV" python3 tests/bench/net_source.py 11.0.0.2 9000 >"$NET_DIR/source.log" 2>&1 &
NET_PIDS="$NET_PIDS $!"
net_wait_ready "$NET_DIR/source.log" || exit 1
timeout 300 ip netns exec "$NET_CLI" python3 tests/bench/net_proxy.py build/bin/vmrun-proxy
