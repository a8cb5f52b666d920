#!/bin/bash
# make bench-pause: a sandbox's pause and resume, side by side in one run,
# on a KVM host that runs Linux guests (scripts/on-kvm-host.sh decides
# where), for guests of 256 MiB and 1 GiB with 16 MiB and 128 MiB touched
# since their start (a background process that holds them):
#   - pause: POST /pause until answered (the agent's PAUSED, vmm's save,
#     the commit), and what was written: the pages file, the state file;
#     the workspace's used bytes beside (the image itself stays in place);
#   - resume: POST /resume until answered (the checks, vmm's start, the
#     pages laid over, the agent's READY);
#   - against creating the sandbox and repeating its setup (the same
#     process touching the same memory): resume / that (aim: <= 0.3x);
#   - a checkpoint: POST /checkpoints until answered, and how long the
#     VM was stopped (from the agent's PAUSED to its READY);
#   - a fork of 4 from a checkpoint of a 256 MiB guest with 16 MiB
#     touched: the time to all four running, and their vmms' summed PSS,
#     against 4 sandboxes created and set up one by one;
#   - the workspace's diff (2000 text files and a 16 MiB one, 202 paths
#     changed): GET /diff from a checkpoint to now, and how long the agent
#     was held for it; from the start to that checkpoint;
#   - a pause that parks the VM in a snapshot dir (--shared, a cluster's
#     snapshot_dir), 256 MiB with 16 and 128 MiB touched: POST /pause
#     until answered and until the supervisor is gone, what the park
#     keeps (its base apart, kept once for all), and a resume by another
#     supervisor (--from-paused: another node's) until it runs.
# Anchor: E2B, about 4 s per GB to pause, about 1 s to resume.
# Every request has a deadline.
set -u
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d /tmp/bench-pause.XXXXXX)
export VMRUN_CACHE=$tmp/cache TMPDIR=$tmp/runs
mkdir -p "$TMPDIR"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait; rm -rf "$tmp"' EXIT
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
die() { echo "bench-pause: $*" >&2; exit 1; }

# setup NAME MIB TOUCH [OPTION...]: a sandbox of MIB with TOUCH MiB held
# by a background process, the supervisor given the options; prints the ms
# from the supervisor's start until the memory is touched.
setup() {
	local dir=$tmp/$1 t0
	mkdir -p "$dir"
	printf '{"runtime":"python","limits":{"memory_mib":%s}}' "$2" >"$dir/request.json"
	t0=$(date +%s%N)
	build/bin/vmrund-sandbox --timeout 900 "${@:4}" "$dir" "$PWD/build/bin/vmm" "$PWD/build/guest" "" >"$dir.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 6000); do [ -S "$dir/api.sock" ] && break; sleep 0.01; done
	S="curl -s -m 150 --unix-socket $dir/api.sock"
	$S 'http://s/?wait=120' | grep -q '"state":"running"' ||
		die "sandbox $1 did not start: $(cat "$dir/state.json" 2>&1) $(tail -3 "$dir.log")"
	$S -o /dev/null -d '{"argv":["python3","-c","b = bytearray('"$3"' << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint(\"ready\", flush=True)\nimport time\ntime.sleep(1e6)"],"background":true,"timeout_s":900}' \
		'http://s/commands'
	for _ in $(seq 1200); do $S 'http://s/commands/1' | grep -q '"stdout":"ready' && break; sleep 0.05; done
	$S 'http://s/commands/1' | grep -q '"stdout":"ready' || die "sandbox $1: the memory was not touched"
	ms "$t0"
}

build/bin/vmrun -- true >/dev/null 2>&1 || die "vmrun -- true failed"   # the snapshot
printf '%-8s %-8s %9s %10s %10s %9s %9s %16s %7s %16s\n' guest touched "pause ms" "pages MiB" "state KiB" \
	"disk MiB" "resume ms" "create+setup ms" ratio "checkpoint (stop)"
for mib in 256 1024; do
	for touch in 16 128; do
		name=m${mib}t$touch
		setup "$name" "$mib" "$touch" >/dev/null
		t0=$(date +%s%N)
		$S -o "$tmp/out" -X POST 'http://s/pause'
		p=$(ms "$t0")
		grep -q '"state":"paused"' "$tmp/out" || die "$name: pause: $(cat "$tmp/out")"
		pd=$(echo "$TMPDIR"/vmrun-*/sock/pause)
		pages=$(stat -c %s "$pd/pages")
		state=$(stat -c %s "$pd/state")
		# the workspace's written bytes (it is allocated whole: its data extents)
		disk=$(python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
n = at = 0
while True:
    try:
        d = os.lseek(fd, at, os.SEEK_DATA)
    except OSError:
        break
    at = os.lseek(fd, d, os.SEEK_HOLE)
    n += at - d
print(n)' "$(dirname "$(dirname "$pd")")/workspace.ext4")
		t0=$(date +%s%N)
		$S -o "$tmp/out" -X POST 'http://s/resume'
		r=$(ms "$t0")
		grep -q '"state":"running"' "$tmp/out" || die "$name: resume: $(cat "$tmp/out")"
		$S 'http://s/commands/1' | grep -q '"state":"running"' || die "$name: the process did not survive"
		t0=$(date +%s%N)
		$S -o "$tmp/out" -d '{"name":"b"}' 'http://s/checkpoints'
		c=$(ms "$t0")
		stop=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["stopped_ms"])' "$tmp/out") ||
			die "$name: checkpoint: $(cat "$tmp/out")"
		$S -o /dev/null -X DELETE http://s/
		for _ in $(seq 200); do [ -z "$(ls -A "$TMPDIR")" ] && break; sleep 0.05; done
		base=$(setup "${name}b" "$mib" "$touch")
		S="curl -s -m 150 --unix-socket $tmp/${name}b/api.sock"
		$S -o /dev/null -X DELETE http://s/
		for _ in $(seq 200); do [ -z "$(ls -A "$TMPDIR")" ] && break; sleep 0.05; done
		awk -v m="${mib}M" -v t="${touch}M" -v p="$p" -v pg="$pages" -v st="$state" -v d="$disk" -v r="$r" -v b="$base" \
			-v c="$c" -v cs="$stop" 'BEGIN { printf "%-8s %-8s %9d %10.1f %10.1f %9.1f %9d %16d %6.2fx %9d (%4d)\n",
				m, t, p, pg / 1048576, st / 1024, d / 1048576, r, b, r / b, c, cs }'
	done
done
grep -h "paused in\|resumed in" "$tmp"/m*t*[0-9].log | sed 's/^/    /'

pss() {   # the summed PSS of every vmm, in MiB
	local kib=0 p
	for p in $(pgrep -x vmm); do
		kib=$((kib + $(awk '/^Pss:/ { print $2 }' "/proc/$p/smaps_rollup" 2>/dev/null || echo 0)))
	done
	echo $((kib / 1024))
}
gone() { for _ in $(seq 200); do pgrep -x vmm >/dev/null || return 0; sleep 0.05; done; }
setup parent 256 16 >/dev/null
$S -o "$tmp/out" -d '{"name":"f"}' 'http://s/checkpoints'
grep -q '"name":"f"' "$tmp/out" || die "checkpoint: $(cat "$tmp/out")"
$S -o /dev/null -X DELETE http://s/
gone
t0=$(date +%s%N)
for n in 1 2 3 4; do
	mkdir -p "$tmp/fork$n"
	cp "$tmp/parent/request.json" "$tmp/fork$n/"
	build/bin/vmrund-sandbox --timeout 900 --from-checkpoint "$tmp/parent/checkpoints/f" "$tmp/fork$n" \
		"$PWD/build/bin/vmm" "$PWD/build/guest" "" >"$tmp/fork$n.log" 2>&1 &
	pids+=($!)
done
for n in 1 2 3 4; do
	for _ in $(seq 6000); do [ -S "$tmp/fork$n/api.sock" ] && break; sleep 0.01; done
	curl -s -m 150 --unix-socket "$tmp/fork$n/api.sock" 'http://s/?wait=120' | grep -q '"state":"running"' ||
		die "fork $n did not start: $(tail -3 "$tmp/fork$n.log")"
done
forks_ms=$(ms "$t0")
sleep 2
forks_pss=$(pss)
for n in 1 2 3 4; do curl -s -m 60 --unix-socket "$tmp/fork$n/api.sock" -o /dev/null -X DELETE http://s/; done
gone
t0=$(date +%s%N)
for n in 1 2 3 4; do setup "sep$n" 256 16 >/dev/null; done
sep_ms=$(ms "$t0")
sleep 2
sep_pss=$(pss)
for n in 1 2 3 4; do curl -s -m 60 --unix-socket "$tmp/sep$n/api.sock" -o /dev/null -X DELETE http://s/; done
echo "fork of 4 (256M, 16M touched): all running in $forks_ms ms, summed PSS $forks_pss MiB;" \
	"4 separate, created and set up: $sep_ms ms, summed PSS $sep_pss MiB"

$S -o /dev/null -X DELETE http://s/ 2>/dev/null
setup diff 256 16 >/dev/null
$S -o "$tmp/out" -d '{"argv":["python3","-c","import os\nos.mkdir(\"src\")\nfor i in range(2000):\n  open(\"src/f%d.txt\" % i, \"w\").write(\"\\n\".join(str(j) for j in range(i, i + 40)) + \"\\n\")\nopen(\"blob\", \"wb\").write(os.urandom(16 << 20))"],"timeout_s":600}' \
	'http://s/commands?wait=600'
grep -q '"exit_code":0' "$tmp/out" || die "diff: the files: $(cat "$tmp/out")"
$S -o /dev/null -d '{"name":"d0"}' 'http://s/checkpoints'
$S -o "$tmp/out" -d '{"argv":["python3","-c","import os\nfor i in range(0, 2000, 10):\n  open(\"src/f%d.txt\" % i, \"a\").write(\"changed\\n\")\nos.remove(\"src/f1.txt\")\nopen(\"src/new.txt\", \"w\").write(\"new\\n\")"],"timeout_s":600}' \
	'http://s/commands?wait=600'
grep -q '"exit_code":0' "$tmp/out" || die "diff: the changes: $(cat "$tmp/out")"
t0=$(date +%s%N)
$S -o "$tmp/out" 'http://s/diff?from=d0'
now_ms=$(ms "$t0")
read -r n held < <(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(len(j["files"]), j["held_ms"])' "$tmp/out") ||
	die "diff: $(head -c 300 "$tmp/out")"
t0=$(date +%s%N)
$S -o "$tmp/out" 'http://s/diff?from=start&to=d0'
cp_ms=$(ms "$t0")
m=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["files"]))' "$tmp/out") || die "diff: $(head -c 300 "$tmp/out")"
echo "diff of a workspace of 2000 text files and a 16 MiB one: checkpoint to now $now_ms ms ($n paths changed," \
	"the agent held $held ms); start to checkpoint $cp_ms ms ($m paths)"
$S -o /dev/null -X DELETE http://s/

for touch in 16 128; do
	name=park$touch
	shared=$tmp/shared/sandboxes/$name
	mkdir -p "$shared"
	setup "$name" 256 "$touch" --shared "$shared" >/dev/null
	sup=${pids[-1]}
	t0=$(date +%s%N)
	$S -o "$tmp/out" -X POST 'http://s/pause'
	p=$(ms "$t0")
	grep -q '"state":"paused"' "$tmp/out" || die "$name: pause: $(cat "$tmp/out")"
	for _ in $(seq 1200); do kill -0 "$sup" 2>/dev/null || break; sleep 0.05; done
	kill -0 "$sup" 2>/dev/null && die "$name: the supervisor did not end once parked"
	g=$(ms "$t0")
	kept=$(du -s --block-size=1 --exclude=base "$shared/paused" | cut -f1)
	mkdir -p "$tmp/${name}r"
	cp "$tmp/$name/request.json" "$tmp/${name}r/"
	t0=$(date +%s%N)
	build/bin/vmrund-sandbox --timeout 900 --from-paused "$shared/paused" --shared "$shared" "$tmp/${name}r" \
		"$PWD/build/bin/vmm" "$PWD/build/guest" "" >"$tmp/${name}r.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 6000); do [ -S "$tmp/${name}r/api.sock" ] && break; sleep 0.01; done
	S="curl -s -m 150 --unix-socket $tmp/${name}r/api.sock"
	$S 'http://s/?wait=120' | grep -q '"state":"running"' || die "$name: not resumed: $(tail -3 "$tmp/${name}r.log")"
	r=$(ms "$t0")
	$S 'http://s/commands/1' | grep -q '"state":"running"' || die "$name: the process did not survive the move"
	$S -o /dev/null -X DELETE http://s/
	gone
	awk -v t="$touch" -v p="$p" -v g="$g" -v k="$kept" -v r="$r" 'BEGIN { printf "parked (256M, %sM touched): " \
		"POST /pause %d ms (its supervisor gone at %d ms), %.1f MiB kept (the base apart); resumed by another " \
		"supervisor in %d ms\n", t, p, g, k / 1048576, r }'
done
