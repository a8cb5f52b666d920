# What the vmrund scripts that run one vmrund on this machine share,
# sourced after tests/e2e/lib.sh's e2e_init (their $tmp, ok, not_ok,
# json), with $PORT set: its keys and configuration, its start, and the
# counting of checks.
# shellcheck shell=bash

# vmrund_conf [LINE...]: the keys file $tmp/etc/keys from stdin, mode
# 0600 (vmrund refuses keys that anyone but root may read), and
# $tmp/etc/vmrund.conf: listening on 127.0.0.1:$PORT, its state and runs
# under $tmp/lib, those keys, then each LINE.
vmrund_conf() {
	mkdir -p "$tmp/etc"
	cat >"$tmp/etc/keys"
	chmod 600 "$tmp/etc/keys"
	{
		printf '%s\n' "listen = 127.0.0.1:$PORT" "state_db = $tmp/lib/state.db" "run_dir = $tmp/lib/runs" \
			"keys = $tmp/etc/keys"
		if [ $# -gt 0 ]; then printf '%s\n' "$@"; fi
	} >"$tmp/etc/vmrund.conf"
}

# vmrund_start [WRAPPER...]: vmrund ($VMRUND, else build/bin/vmrund) on
# that configuration in the background, its pid in $pid, its output added
# to $tmp/vmrund.log; both it and the curls that wait for it run under
# WRAPPER when given (ip netns exec NS). 0 once /healthz answers, 1 when
# it has not within 10 s.
vmrund_start() {
	"$@" "${VMRUND:-$PWD/build/bin/vmrund}" --config "$tmp/etc/vmrund.conf" >>"$tmp/vmrund.log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do
		"$@" curl -fs -m 2 "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}

# expect NAME CODE [CONDITION]: ok when the last answer's status ($code)
# is CODE and its JSON ($tmp/out) makes CONDITION, a python expression
# over j, true.
expect() {
	if [ "$code" = "$2" ] && { [ -z "${3:-}" ] || json "$3"; }; then ok "$1"; else
		echo "    status $code" >>"$tmp/err"; not_ok "$1"; fi
}

# client_checks FILE WHO: the ok and not ok lines a client wrote to FILE
# counted as this script's; not ok when it wrote neither (WHO ran no
# check).
client_checks() {
	pass=$((pass + $(grep -c '^ok' "$1")))
	fail=$((fail + $(grep -c '^not ok' "$1")))
	grep -q '^not ok\|^ok' "$1" || not_ok "$2 ran no check"
}
