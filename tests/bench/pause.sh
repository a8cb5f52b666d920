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
#     process touching the same memory): resume / that (aim: <= 0.3x).
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

# setup NAME MIB TOUCH: a sandbox of MIB with TOUCH MiB held by a
# background process; prints the ms from the supervisor's start until the
# memory is touched.
setup() {
	local dir=$tmp/$1 t0
	mkdir -p "$dir"
	printf '{"runtime":"python","limits":{"memory_mib":%s}}' "$2" >"$dir/request.json"
	t0=$(date +%s%N)
	build/bin/vmrund-sandbox --timeout 900 "$dir" "$PWD/build/bin/vmm" "$PWD/build/guest" "" >"$dir.log" 2>&1 &
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
printf '%-8s %-8s %9s %11s %10s %10s %9s %14s %8s\n' guest touched "pause ms" "pages MiB" "state KiB" "disk MiB" \
	"resume ms" "create+setup ms" "ratio"
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
		$S -o /dev/null -X DELETE http://s/
		for _ in $(seq 200); do [ -z "$(ls -A "$TMPDIR")" ] && break; sleep 0.05; done
		base=$(setup "${name}b" "$mib" "$touch")
		S="curl -s -m 150 --unix-socket $tmp/${name}b/api.sock"
		$S -o /dev/null -X DELETE http://s/
		for _ in $(seq 200); do [ -z "$(ls -A "$TMPDIR")" ] && break; sleep 0.05; done
		awk -v m="${mib}M" -v t="${touch}M" -v p="$p" -v pg="$pages" -v st="$state" -v d="$disk" -v r="$r" -v b="$base" \
			'BEGIN { printf "%-8s %-8s %9d %11.1f %10.1f %10.1f %9d %14d %7.2fx\n", m, t, p, pg / 1048576, st / 1024, d / 1048576, r, b, r / b }'
	done
done
grep -h "paused in\|resumed in" "$tmp"/m*t*[0-9].log | sed 's/^/    /'
