#!/bin/bash
# The language runtimes (rootfs/runtimes/, vmrun --runtime), on a KVM host
# that runs Linux guests (scripts/on-kvm-host.sh decides where): in each
# one, a program from the workspace prints hello, its argv and its stdin,
# reads a workspace file and writes an artifact (c, c++, java, go and rust
# compile it in the guest first, with their manifests' compile and run
# commands); a compile error in each compiler; a runtime's allowlist
# does not offer another's programs; `vmrun runtimes` lists them. Also
# prints (not asserts) boot to HELLO in the smallest and the largest image.
# Ends with "runtimes: N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
VMRUN=$PWD/build/bin/vmrun
DEADLINE=120
pass=0
fail=0
tmp=$(mktemp -d /tmp/runtimes.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp/runs
mkdir -p "$TMPDIR"
ok() { echo "ok - $1"; pass=$((pass + 1)); }
not_ok() {
	echo "not ok - $1"
	fail=$((fail + 1))
	for f in "$tmp/out" "$tmp/err"; do [ -s "$f" ] && sed "s|^|    $(basename "$f"): |" "$f" | head -n 15; done
}
v() { timeout -k 5 $DEADLINE "$VMRUN" "$@" <"$tmp/stdin" >"$tmp/out" 2>"$tmp/err"; }
json() { python3 -c "import json,sys; j=json.load(open('$tmp/out')); sys.exit(0 if ($1) else 1)" 2>/dev/null; }

echo "from stdin" >"$tmp/stdin-file"
: >"$tmp/stdin"
want=$(printf 'hello\na b\nfrom stdin\nfrom workspace')
for rt in python bash javascript c c++ java go rust; do
	ws=$tmp/ws-$rt
	mem=256
	mkdir -p "$ws"
	echo "from workspace" >"$ws/in.txt"
	case $rt in
	python)
		cat >"$ws/main.py" <<'PY'
import sys
print("hello")
print(" ".join(sys.argv[1:]))
print(sys.stdin.read().strip())
print(open("in.txt").read().strip())
open("artifacts/out.txt", "w").write("made by python\n")
PY
		cmd="python3 main.py a b" ;;
	bash)
		cat >"$ws/main.sh" <<'SH'
echo hello
echo "$*"
read -r line; echo "$line"
cat in.txt
echo "made by bash" >artifacts/out.txt
SH
		cmd="bash main.sh a b" ;;
	javascript)
		cat >"$ws/main.js" <<'JS'
const fs = require("fs");
console.log("hello");
console.log(process.argv.slice(2).join(" "));
console.log(fs.readFileSync(0, "utf8").trim());
console.log(fs.readFileSync("in.txt", "utf8").trim());
fs.writeFileSync("artifacts/out.txt", "made by javascript\n");
JS
		cmd="node main.js a b" ;;
	c)
		cat >"$ws/main.c" <<'C'
#include <stdio.h>
int main(int argc, char **argv)
{
	char line[64];
	puts("hello");
	printf("%s %s\n", argv[1], argv[2]);
	if (fgets(line, sizeof(line), stdin))
		fputs(line, stdout);
	FILE *f = fopen("in.txt", "r"), *o = fopen("artifacts/out.txt", "w");
	if (!f || !o || !fgets(line, sizeof(line), f))
		return 1;
	fputs(line, stdout);
	fputs("made by c\n", o);
	return fclose(o) != 0;
}
C
		cmd="sh -c 'gcc -std=c17 -O2 -o /tmp/prog main.c && exec /tmp/prog \"\$@\"' main a b" ;;
	c++)
		cat >"$ws/main.cpp" <<'CPP'
#include <fstream>
#include <iostream>
#include <string>
int main(int argc, char **argv)
{
	std::string line;
	std::cout << "hello\n" << argv[1] << " " << argv[2] << "\n";
	std::getline(std::cin, line);
	std::cout << line << "\n";
	std::ifstream in("in.txt");
	std::getline(in, line);
	std::cout << line << "\n";
	std::ofstream("artifacts/out.txt") << "made by c++\n";
	return argc == 3 ? 0 : 1;
}
CPP
		cmd="sh -c 'g++ -std=c++17 -O2 -o /tmp/prog main.cpp && exec /tmp/prog \"\$@\"' main a b" ;;
	java)
		cat >"$ws/Main.java" <<'JAVA'
import java.nio.file.Files;
import java.nio.file.Path;
public class Main {
	public static void main(String[] args) throws Exception {
		System.out.println("hello");
		System.out.println(String.join(" ", args));
		System.out.println(new String(System.in.readAllBytes()).trim());
		System.out.println(Files.readString(Path.of("in.txt")).trim());
		Files.writeString(Path.of("artifacts/out.txt"), "made by java\n");
	}
}
JAVA
		# java, go and rust get their compile-memory, as source mode would.
		mem=512
		cmd="sh -c 'javac -J-XX:TieredStopAtLevel=1 -d /tmp/classes Main.java && exec java -cp /tmp/classes Main \"\$@\"' main a b" ;;
	go)
		cat >"$ws/main.go" <<'GO'
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

func main() {
	fmt.Println("hello")
	fmt.Println(strings.Join(os.Args[1:], " "))
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	fmt.Println(strings.TrimSpace(line))
	b, err := os.ReadFile("in.txt")
	if err != nil {
		os.Exit(1)
	}
	fmt.Println(strings.TrimSpace(string(b)))
	if os.WriteFile("artifacts/out.txt", []byte("made by go\n"), 0o644) != nil {
		os.Exit(1)
	}
}
GO
		mem=512
		cmd="sh -c 'go build -o /tmp/prog main.go && exec /tmp/prog \"\$@\"' main a b" ;;
	rust)
		cat >"$ws/main.rs" <<'RS'
use std::io::Read;
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    println!("hello");
    println!("{}", args.join(" "));
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    println!("{}", s.trim());
    println!("{}", std::fs::read_to_string("in.txt").unwrap().trim());
    std::fs::write("artifacts/out.txt", "made by rust\n").unwrap();
}
RS
		mem=512
		cmd="sh -c 'rustc --edition 2021 -O -C strip=debuginfo -o /tmp/prog main.rs && exec /tmp/prog \"\$@\"' main a b" ;;
	esac
	eval "set -- $cmd"
	v --runtime $rt -t 120 -m $mem -w "$ws" -a "$tmp/art-$rt" -i "$tmp/stdin-file" -- "$@"
	rc=$?
	[ $rc -eq 0 ] && [ "$(cat "$tmp/out")" = "$want" ] && [ "$(cat "$tmp/art-$rt/out.txt" 2>/dev/null)" = "made by $rt" ] &&
		ok "$rt: hello, argv, stdin, a workspace file and an artifact" || not_ok "$rt (status $rc)"
done

# A compile error: each compiler's own status and diagnostic (source
# mode, with a stage of its own, is still to come).
mkdir -p "$tmp/bad"
printf 'int main(void) { return missing; }\n' >"$tmp/bad/bad.c"
printf 'public class Bad { public static void main(String[] a) { int x = missing; } }\n' >"$tmp/bad/Bad.java"
printf 'package main\n\nfunc main() { _ = missing }\n' >"$tmp/bad/bad.go"
printf 'fn main() { let _x = missing; }\n' >"$tmp/bad/bad.rs"
for rt in c java go rust; do
	mem=512
	case $rt in
	c) mem=256 want_rc=1 diag="error: 'missing' undeclared" cmd="gcc -c bad.c" ;;
	java) want_rc=1 diag="Bad.java:1: error: cannot find symbol"
		cmd="javac -J-XX:TieredStopAtLevel=1 -d /tmp/classes Bad.java" ;;
	go) want_rc=2 diag="./bad.go:3:19: undefined: missing" cmd="go build -o /tmp/prog bad.go" ;;
	rust) want_rc=1 diag="error[E0425]: cannot find value \`missing\` in this scope"
		cmd="rustc --edition 2021 -O -C strip=debuginfo -o /tmp/prog bad.rs" ;;
	esac
	# shellcheck disable=SC2086 # the command's words
	v --runtime $rt -t 120 -m $mem -w "$tmp/bad" -- $cmd
	rc=$?
	[ $rc -eq $want_rc ] && grep -qF -- "$diag" "$tmp/err" &&
		ok "$rt: a compile error is ${cmd%% *}'s: status $want_rc, its diagnostic" || not_ok "$rt compile error (status $rc)"
done

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

left=$(ls -A "$TMPDIR")
[ -z "$left" ] && ok "no run directory left behind" || not_ok "leftovers: $left"
echo "runtimes: $pass passed, $fail failed"
[ $fail -eq 0 ]
