# What the supervisor's tests share (supervisor.sh, pause.sh), sourced
# after tests/e2e/lib.sh's e2e_init: start a sandbox under $tmp, call its
# API, check answers, and check that nothing of it is left.
# shellcheck shell=bash
SBX=$PWD/build/bin/vmrund-sandbox
export VMRUN_CACHE=$tmp/cache   # the snapshots: this test's own (the first sandbox makes it)

# start NAME [ARGS...]: a sandbox in $tmp/NAME (the python runtime), its
# pid in $spid; waits (bounded) until it is running.
start() {
	local name=$1
	shift
	dir=$tmp/$name
	mkdir -p "$dir"
	printf '{"runtime":"python","limits":{"max_output":65536}}' >"$dir/request.json"
	"$SBX" "$@" "$dir" "$PWD/build/bin/vmm" "$PWD/build/guest" "" >"$tmp/$name.log" 2>&1 &
	spid=$!
	for _ in $(seq 300); do [ -S "$dir/api.sock" ] && break; sleep 0.1; done
	s "/?wait=120"
}
# s PATH [CURL ARGS...]: a request to the sandbox in $dir; status in $code.
s() {
	local path=$1 t0
	shift
	t0=$(date +%s%N)
	code=$(curl -s -m 150 --unix-socket "$dir/api.sock" -o "$tmp/out" -w '%{http_code}' "$@" "http://sandbox$path" \
		2>"$tmp/err")
	t0=$(( ($(date +%s%N) - t0) / 1000000 ))
	[ "$t0" -lt 3000 ] || echo "    ($t0 ms: $path)"
}
post() { s "$2" -X POST -H 'Content-Type: application/json' --data-binary "$1" "${@:3}"; }
expect() { if [ "$code" = "$2" ] && { [ -z "${3:-}" ] || json "$3"; }; then ok "$1"; else
	echo "    status $code" >>"$tmp/err"; not_ok "$1"; fi; }
# gone NAME: the supervisor has exited, and no vmm, cgroup or run
# directory of it is left.
gone() {
	for _ in $(seq 100); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
	! kill -0 "$spid" 2>/dev/null && ! pgrep -f build/bin/vmm >/dev/null && [ -z "$(ls -A "$TMPDIR")" ] &&
		[ -z "$(find /sys/fs/cgroup/vmrun -mindepth 1 -maxdepth 1 -type d 2>/dev/null)" ] &&
		ok "$1: the supervisor exited, no vmm, cgroup or run directory is left" ||
		not_ok "$1: leftovers: $(pgrep -af build/bin/vmm) $(ls -A "$TMPDIR") $(find /sys/fs/cgroup/vmrun -mindepth 1 -maxdepth 1 -type d 2>&1)"
}

