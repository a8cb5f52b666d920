# What the e2e scripts share, sourced after they cd to the repository:
# VMRUN, a scratch directory $tmp (removed on exit) with vmrun's run
# directories under $TMPDIR (checked for leftovers by no_leftovers), the
# pass/fail counters, and ok/not_ok, which shows $tmp/out and $tmp/err of
# the failed case. NAME is the script's name for its temp directory.
# shellcheck shell=bash
e2e_init() {
	VMRUN=$PWD/build/bin/vmrun
	pass=0
	fail=0
	tmp=$(mktemp -d "/tmp/$1.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	export TMPDIR=$tmp/runs
	mkdir -p "$TMPDIR"
	: >"$tmp/stdin"
}
ok() { echo "ok - $1"; pass=$((pass + 1)); }
not_ok() {
	echo "not ok - $1"
	fail=$((fail + 1))
	for f in "$tmp/out" "$tmp/err"; do
		[ -s "$f" ] && sed "s|^|    $(basename "$f"): |" "$f" | cut -c1-300 | head -n 15
	done
	return 0
}
# vmrun with a deadline ($DEADLINE s), stdin from $tmp/stdin, output to $tmp/out and $tmp/err.
v() { timeout -k 5 "$DEADLINE" "$VMRUN" "$@" <"$tmp/stdin" >"$tmp/out" 2>"$tmp/err"; }
# Whether the JSON in $tmp/out makes the python expression (over j) true.
# One python for all of a script's checks, started at the first: under
# an emulated KVM host's TCG each python start costs a second or more.
# The expression goes base64'd, so that any character of it arrives as
# written; a python that went away answers false, never hangs.
json() {
	if [ -z "${JSON_PY_PID:-}" ] || ! kill -0 "$JSON_PY_PID" 2>/dev/null; then
		coproc JSON_PY { python3 -u -c '
import base64, json, sys
for line in sys.stdin:
    path, expr = line.split("\t", 1)
    try:
        j = json.load(open(path))
        ok = bool(eval(base64.b64decode(expr).decode()))
    except Exception:
        ok = False
    print(1 if ok else 0, flush=True)
' 2>/dev/null; }
	fi
	local r=
	printf '%s\t%s\n' "$tmp/out" "$(printf %s "$1" | base64 -w0)" >&"${JSON_PY[1]}" 2>/dev/null &&
		read -r r <&"${JSON_PY[0]}"
	[ "$r" = 1 ]
}
# No run directory left behind, and the summary line: the script's status.
finish() {
	local left
	left=$(ls -A "$TMPDIR")
	[ -z "$left" ] && ok "no run directory left behind" || not_ok "leftovers: $left"
	echo "$1: $pass passed, $fail failed"
	[ "$fail" -eq 0 ]
}
