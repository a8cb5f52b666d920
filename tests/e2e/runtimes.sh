#!/bin/bash
# The language runtimes (rootfs/runtimes/, vmrun --runtime), on a KVM host
# that runs Linux guests (scripts/on-kvm-host.sh decides where): argv mode
# in a runtime (sh, gcc and what it built); a runtime's allowlist does not
# offer another's programs; `vmrun runtimes` lists them. Also
# prints (not asserts) boot to HELLO in the smallest and the largest image.
# Ends with "runtimes: N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
. tests/e2e/lib.sh
e2e_init runtimes
DEADLINE=120

echo "from stdin" >"$tmp/stdin-file"
# Argv mode in a runtime: the program and its arguments as given (source
# mode, which covers every runtime, is tests/e2e/source.sh).
ws=$tmp/ws
mkdir -p "$ws"
echo "from workspace" >"$ws/in.txt"
cp tests/e2e/programs/hello.c "$ws/main.c"
v --runtime c -t 120 -w "$ws" -a "$tmp/art" -i "$tmp/stdin-file" -- \
	sh -c 'gcc -o /tmp/prog main.c && exec /tmp/prog "$@"' main a b
rc=$?
[ $rc -eq 0 ] && [ "$(cat "$tmp/out")" = "$(printf 'hello\na b\nfrom stdin\nfrom workspace')" ] &&
	[ "$(cat "$tmp/art/out.txt" 2>/dev/null)" = "made by c" ] &&
	ok "c in argv mode: sh, gcc and the program it built, argv, stdin, a workspace file, an artifact" ||
	not_ok "c in argv mode (status $rc)"

v --runtime javascript -- python3 -c 1
rc=$?
[ $rc -eq 127 ] && grep -q "python3: no such program in the guest image" "$tmp/err" &&
	ok "javascript's allowlist does not offer python3 (127, no VM)" || not_ok "javascript without python3 (status $rc)"
v --runtime bash -- node -e 1
rc=$?
[ $rc -eq 127 ] && ok "bash's allowlist does not offer node (127)" || not_ok "bash without node (status $rc)"
v --runtime py -- node -e 1
rc=$?
[ $rc -eq 127 ] && ok "python (by its alias py) does not offer node (127)" || not_ok "python without node (status $rc)"
v --runtime golang -- gcc --version
rc=$?
[ $rc -eq 127 ] && grep -q "gcc: no such program in the guest image" "$tmp/err" &&
	ok "go (by its alias golang) offers no C compiler (127)" || not_ok "go without gcc (status $rc)"
v --runtime ruby -- true
rc=$?
[ $rc -eq 125 ] && grep -q "no such runtime (installed: bash, c, c++, go, java, javascript, python, rust)" "$tmp/err" &&
	ok "an unknown runtime: 125, naming the installed ones" || not_ok "unknown runtime (status $rc)"

"$VMRUN" runtimes >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && [ "$(awk '{print $1}' "$tmp/out" | tr '\n' ' ')" = "bash c c++ go java javascript python rust " ] &&
	grep -q "^python  *3\.11\." "$tmp/out" && grep -q "^java  *17\." "$tmp/out" && grep -q "^go  *1\.19\." "$tmp/out" &&
	grep -q "^rust  *1\.63\." "$tmp/out" && ok "vmrun runtimes lists them with versions" || not_ok "vmrun runtimes"
"$VMRUN" runtimes --json >"$tmp/out" 2>"$tmp/err" &&
	json '[r["name"] for r in j]==["bash","c","c++","go","java","javascript","python","rust"] and "js" in j[5]["aliases"] and "cpp" in j[2]["aliases"] and "golang" in j[3]["aliases"] and "rs" in j[7]["aliases"]' &&
	ok "vmrun runtimes --json" || not_ok "vmrun runtimes --json"

# Boot to HELLO, smallest image against largest: printed, not judged.
for rt in $(cd build/guest/runtimes && ls -S ./*.ext4 | sed -n '$p; 1p' | sed 's|^\./||; s|\.ext4$||'); do
	size=$(stat -c %s build/guest/runtimes/$rt.ext4)
	boots=
	for i in 1 2 3; do
		v --runtime $rt --json -- true &&
			boots="$boots $(python3 -c "import json; print(json.load(open('$tmp/out'))['durations_ms']['boot'])")"
	done
	echo "# boot to HELLO, $rt ($((size / 1048576)) MiB image):$boots ms"
done

finish runtimes
