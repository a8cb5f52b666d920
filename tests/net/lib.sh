# The network tests' own little internet, in namespaces this test makes
# (sourced by tests/net/*.sh; needs root, ip, dnsmasq, openssl, python3).
#
#   $NET_SRV  the test hosts: veth 11.0.0.2/24 (not in the proxy's deny
#             set: "public" here, though nothing routes it anywhere
#             else), 169.254.169.254 (the metadata address) and 10.9.0.2
#             (a "private mirror") on the same link; dnsmasq on
#             11.0.0.2:53; HTTP on :80 of each, HTTPS on 11.0.0.2:443
#             with a certificate for ok.test and tls.test from a CA the
#             test makes; HTTP on 10.9.0.2:8080
#   $NET_CLI  where vmrun and its proxy run: veth 11.0.0.1/24 and routes
#             to the two other addresses only; HTTP on its own 127.0.0.1:80
#             (the "host's loopback" a rebinding name points at)
# Names: ok.test, tls.test, other.test -> 11.0.0.2; meta.test ->
# 169.254.169.254; lo.test -> 127.0.0.1; mirror.test -> 10.9.0.2.
# Nothing has a default route: no packet can leave the two namespaces.

NET_SRV=vmrt-srv-$$
NET_CLI=vmrt-cli-$$
NET_DIR=
NET_PIDS=

net_down() {
	for p in $NET_PIDS; do kill "$p" 2>/dev/null; done
	for p in $NET_PIDS; do wait "$p" 2>/dev/null; done
	ip netns del "$NET_SRV" 2>/dev/null
	ip netns del "$NET_CLI" 2>/dev/null
	[ -n "$NET_DIR" ] && rm -rf "$NET_DIR"
	return 0
}

# The test CA and a certificate for ok.test and tls.test signed by it.
net_ca() {
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=vmrun test CA" \
		-keyout "$NET_DIR/ca.key" -out "$NET_DIR/ca.pem" 2>/dev/null &&
	openssl req -newkey rsa:2048 -nodes -subj "/CN=ok.test" -keyout "$NET_DIR/srv.key" \
		-out "$NET_DIR/srv.csr" 2>/dev/null &&
	printf 'subjectAltName=DNS:ok.test,DNS:tls.test\n' > "$NET_DIR/san.ext" &&
	openssl x509 -req -in "$NET_DIR/srv.csr" -CA "$NET_DIR/ca.pem" -CAkey "$NET_DIR/ca.key" \
		-CAcreateserial -days 2 -extfile "$NET_DIR/san.ext" -out "$NET_DIR/srv.pem" 2>/dev/null
}

# Wait (at most 10 s) for a line "ready" in file $1.
net_wait_ready() {
	for _ in $(seq 100); do
		grep -q '^ready' "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "net: $1 never became ready:" >&2
	cat "$1" >&2
	return 1
}

net_up() {
	here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	NET_DIR=$(mktemp -d /tmp/vmrun-net-XXXXXX)
	net_ca || { echo "net: openssl failed" >&2; return 1; }
	ip netns add "$NET_SRV" && ip netns add "$NET_CLI" &&
	ip link add vmrt-s$$ netns "$NET_SRV" type veth peer name vmrt-c$$ netns "$NET_CLI" || return 1
	local s="ip netns exec $NET_SRV" c="ip netns exec $NET_CLI"
	$s ip link set lo up && $s ip link set vmrt-s$$ up &&
	$s ip addr add 11.0.0.2/24 dev vmrt-s$$ &&
	$s ip addr add 169.254.169.254/32 dev vmrt-s$$ &&
	$s ip addr add 10.9.0.2/32 dev vmrt-s$$ &&
	$s ip route add 11.0.0.1/32 dev vmrt-s$$ 2>/dev/null
	$c ip link set lo up && $c ip link set vmrt-c$$ up &&
	$c ip addr add 11.0.0.1/24 dev vmrt-c$$ &&
	$c ip route add 169.254.169.254/32 dev vmrt-c$$ &&
	$c ip route add 10.9.0.2/32 dev vmrt-c$$ || return 1
	$s dnsmasq --keep-in-foreground --no-resolv --no-hosts --no-poll --bind-interfaces \
		--listen-address=11.0.0.2 --port=53 --pid-file= --user=root --log-facility=- \
		--address=/ok.test/11.0.0.2 --address=/tls.test/11.0.0.2 --address=/other.test/11.0.0.2 \
		--address=/meta.test/169.254.169.254 --address=/lo.test/127.0.0.1 \
		--address=/mirror.test/10.9.0.2 > "$NET_DIR/dnsmasq.log" 2>&1 &
	NET_PIDS="$NET_PIDS $!"
	$s python3 "$here/servers.py" "$NET_DIR/srv.pem" "$NET_DIR/srv.key" 11.0.0.2:80 11.0.0.2:443:tls \
		169.254.169.254:80 10.9.0.2:8080 > "$NET_DIR/servers.log" 2>&1 &
	NET_PIDS="$NET_PIDS $!"
	$c python3 "$here/servers.py" "$NET_DIR/srv.pem" "$NET_DIR/srv.key" 127.0.0.1:80 \
		> "$NET_DIR/loopback.log" 2>&1 &
	NET_PIDS="$NET_PIDS $!"
	net_wait_ready "$NET_DIR/servers.log" && net_wait_ready "$NET_DIR/loopback.log" || return 1
	for _ in $(seq 50); do
		grep -q "started" "$NET_DIR/dnsmasq.log" && return 0
		sleep 0.1
	done
	echo "net: dnsmasq did not start:" >&2
	cat "$NET_DIR/dnsmasq.log" >&2
	return 1
}
