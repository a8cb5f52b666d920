#!/bin/bash
# A sandbox's pause and resume (issue 42's first part), through its
# supervisor's API on a KVM host that runs Linux guests: a background
# server and a running command survive a pause (the VM is saved, its vmm
# gone, only files left), the command's output is all there after the
# resume, a file written before is there, the guest's clock is the
# host's; the time paused does not count against the sandbox's life,
# which a resume keeps; on_timeout pause; a saved state truncated, a page
# file altered, a workspace changed and a state of another snapshot are
# each refused with their reason (the sandbox is failed, nothing runs);
# PAUSE_CYCLES pause/resume cycles of one sandbox with work between them
# keep every file and process; a checkpoint stops it a moment and keeps
# its VM and workspace, listed, deleted; 4 forks of it, each unique; a
# checkpoint past max_checkpoint_mib is refused and nothing of it kept.
# Every curl has a deadline.
set -u
cd "$(dirname "$0")/../.."
. tests/e2e/lib.sh
e2e_init pause
. tests/sandbox/sbxlib.sh
CYCLES=${PAUSE_CYCLES:-20}

# The sandbox's run directory's files of its paused VM.
pause_dir() { echo "$TMPDIR"/vmrun-*/sock/pause; }
cmd() { post "{\"argv\":[\"sh\",\"-c\",\"$1\"]}" "/commands?wait=60"; }
pause() { post '{}' /pause; }
resume() { post "${1:-{\}}" /resume; }
vmm_count() { pgrep -xc vmm || true; }
flip() { python3 -c 'import sys; f=open(sys.argv[1],"r+b"); f.seek(int(sys.argv[2])); b=f.read(1); f.seek(int(sys.argv[2])); f.write(bytes([b[0]^0xff]))' "$@"; }

start a --timeout 600
expect "the sandbox starts" 200 "j['state']=='running' and j['pauses']==0"

cmd "echo before > kept.txt; date +%s > t0"
expect "a file written before the pause" 201 "j['exit_code']==0"
post '{"argv":["python3","-m","http.server","8000","--bind","127.0.0.1"],"background":true,"timeout_s":1200}' "/commands"
expect "a background server starts" 201 "j['state']=='running'"
fetch='{"argv":["python3","-c","import urllib.request as u, time\nfor i in range(150):\n  try: print(u.urlopen(\"http://127.0.0.1:8000/kept.txt\", timeout=5).read().decode().strip()); break\n  except OSError: time.sleep(0.2)"],"timeout_s":60}'
post "$fetch" "/commands?wait=60"
expect "it answers" 201 "j['stdout']=='before\n'"
post '{"argv":["sh","-c","for i in $(seq 1 40); do echo line $i; sleep 0.1; done; echo done"],"background":true}' "/commands"
expect "a command that prints for a while starts" 201 "j['state']=='running'"
cid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$tmp/out")
sleep 1

t0=$(date +%s%N)
pause
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
expect "POST /pause: paused ($ms ms)" 200 "j['state']=='paused' and j['time_left_s']>500"
left=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["time_left_s"])' "$tmp/out")
[ "$(vmm_count)" = 0 ] && ok "paused: no vmm runs" || not_ok "paused: a vmm still runs: $(pgrep -af build/bin/vmm)"
pd=$(pause_dir)
ls -la "$pd" | sed 's/^/    /'
[ -s "$pd/state" ] && [ -s "$pd/pages" ] && [ -s "$pd/workspace.sum" ] && ok "its state, pages and workspace sum are saved" ||
	not_ok "saved files: $(ls -la "$pd" 2>&1)"
s /
expect "GET / while paused says so" 200 "j['state']=='paused' and j['paused_at']"
cmd "true"
expect "a command while paused: 409" 409
post '{}' /pause
expect "a second pause: 409" 409

sleep 3
t0=$(date +%s%N)
resume
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
expect "POST /resume: running again ($ms ms), the 3 s paused not counted against its life" 200 \
	"j['state']=='running' and j['pauses']==1 and $left-2<j['time_left_s']<=$left"
s "/commands/$cid?wait=60"
expect "the command that ran through the pause finished with all its output" 200 \
	"j['exit_code']==0 and j['stdout']==''.join('line %d\n' % i for i in range(1,41))+'done\n'"
cmd "cat kept.txt"
expect "the file written before the pause is there" 201 "j['stdout']=='before\n'"
post "$fetch" "/commands?wait=60"
expect "the background server answers again" 201 "j['stdout']=='before\n'" || cat "$tmp/out"
cmd "date +%s"
host=$(date +%s)
expect "the guest's clock is the host's after the resume" 201 "abs(int(j['stdout'])-$host)<=5"

# ---- refusals: each leaves the sandbox failed, with its reason, and nothing runs ----
damage() {   # NAME SETUP: a fresh sandbox, paused, its saved state damaged by SETUP, then resumed
	local name=$1
	start "$name" --timeout 600
	cmd "echo x > f"
	pause
	pd=$(pause_dir)
	eval "$2"
	resume
}
refused() {   # WHAT REASON
	expect "$1: refused" 500 "'$2' in j['message']"
	gone "$1"
	cp "$dir/state.json" "$tmp/out"
	json "j['state']=='failed' and '$2' in j['reason']" && ok "$1: the sandbox is failed, with the reason" ||
		not_ok "$1: state $(cat "$tmp/out")"
}
s / -X DELETE
gone "the first sandbox"

damage b 'truncate -s -4096 "$pd/pages"'
refused "a truncated pages file" "truncated"
damage c 'flip "$pd/pages" $(( $(stat -c %s "$pd/pages") - 100 ))'
refused "an altered page" "checksum mismatch"
damage d 'truncate -s 100 "$pd/state"'
refused "a truncated state file" "truncated"
damage e 'flip "$pd/state" 100'
refused "an altered state file" "checksum"
damage f 'debugfs -w -R "write /etc/hostname extra" "$(echo "$TMPDIR"/vmrun-*/workspace.ext4)" >/dev/null 2>&1'
refused "a workspace changed while paused" "workspace image changed"
# another snapshot: g is paused; the snapshot cache is emptied and h
# makes a new one; g's pinned snapshot is replaced by h's
start g --timeout 600
pause
gdir=$(dirname "$(dirname "$(pause_dir)")")
gsave=$dir
gpid=$spid
rm -rf "$VMRUN_CACHE/snapshots"
start h --timeout 600
s / -X DELETE
for _ in $(seq 100); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
dir=$gsave
spid=$gpid
for f in state memory; do [ -e "$gdir/base/$f" ] && cp "$VMRUN_CACHE"/snapshots/*/"$f" "$gdir/base/$f"; done
resume
refused "a state paused from another snapshot" "another snapshot"

# ---- its life: on_timeout pause, pause_ttl_s ----
start t --timeout 4 --max-timeout 600 --on-timeout pause
for _ in $(seq 60); do s /; json "j['state']=='paused'" && break; sleep 0.5; done
expect "on_timeout pause: its time ran out and it paused" 200 "j['state']=='paused' and 'paused' in j['reason']"
resume '{"timeout_s":120}'
expect "a resume after its time ran out takes the timeout_s given" 200 "j['state']=='running' and 110<j['time_left_s']<=120"
pause
resume
expect "a later resume keeps the life it had left" 200 "j['state']=='running' and 100<j['time_left_s']<=120"
s / -X DELETE
gone "on_timeout pause"
start u --timeout 600 --pause-ttl 3
pause
expect "paused, with a pause_ttl_s of 3" 200 "j['state']=='paused'"
gone "paused past its pause_ttl_s"
grep -q '"state":"stopped".*pause_ttl_s' "$dir/state.json" && ok "it stopped, saying why" || not_ok "ttl: $(cat "$dir/state.json")"

# ---- PAUSE_CYCLES pause/resume cycles with work between them ----
# Each cycle's command checks, in the guest, that the counter went on
# through the pause, lists every file written so far and writes the next.
start k --timeout 1800
post '{"argv":["sh","-c","i=0; while true; do i=$((i+1)); echo $i > count; sleep 0.2; done"],"background":true,"timeout_s":1800}' "/commands"
counter=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$tmp/out")
cmd 'sleep 0.5; echo cycle 0 > f0; cat count > last'
t0=$(date +%s)
bad=
for i in $(seq "$CYCLES"); do
	c0=$(date +%s%N)
	pause
	[ "$code" = 200 ] || { bad="cycle $i: pause $code $(cat "$tmp/out")"; break; }
	c1=$(date +%s%N)
	resume
	[ "$code" = 200 ] || { bad="cycle $i: resume $code $(cat "$tmp/out")"; break; }
	echo "    cycle $i: paused in $(( (c1 - c0) / 1000000 )) ms, resumed in $(( ($(date +%s%N) - c1) / 1000000 )) ms"
	cmd 'sleep 0.5; test $(cat count) -gt $(cat last) || echo the counter stopped; cat f*; echo cycle '"$i"' > f'"$i"'; cat count > last'
	json "j['exit_code']==0 and sorted(j['stdout'].splitlines())==sorted('cycle %d' % n for n in range($i))" ||
		{ bad="cycle $i: $(cat "$tmp/out")"; break; }
done
[ -z "$bad" ] && ok "$CYCLES pause/resume cycles in $(( $(date +%s) - t0 )) s: every file there, the counter counting on" ||
	not_ok "the cycles: $bad"

# ---- a checkpoint: saved while the VM stops for a moment, then it goes on ----
cmd 'cat count > last'
t0=$(date +%s%N)
post '{"name":"c1"}' /checkpoints
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
expect "POST /checkpoints: 201 in $ms ms" 201 "j['name']=='c1' and j['bytes']>0 and j['running'] and j['stopped_ms']>0"
python3 -c 'import json,sys; print("    stopped for %d ms" % json.load(open(sys.argv[1]))["stopped_ms"])' "$tmp/out"
cmd 'sleep 0.5; test $(cat count) -gt $(cat last) && echo on'
expect "the sandbox goes on after the checkpoint, its counter counting" 201 "j['stdout']=='on\n'"
cp=$dir/checkpoints/c1
[ -s "$cp/state" ] && [ -s "$cp/pages" ] && [ -s "$cp/workspace.sum" ] && [ -s "$cp/workspace.ext4" ] &&
	[ -s "$cp/base/state" ] && [ -s "$cp/base/memory" ] && [ -s "$cp/checkpoint.json" ] &&
	ok "the checkpoint holds the VM's state, pages, workspace and the snapshot it is against" ||
	not_ok "checkpoint files: $(ls -laR "$cp" 2>&1 | head -20)"
post '{"name":"c1"}' /checkpoints
expect "a second checkpoint of that name: 409" 409
post '{"name":"../up"}' /checkpoints
expect "a name with a slash: 400" 400
s /checkpoints
expect "listed" 200 "[c['name'] for c in j['checkpoints']]==['c1']"

# ---- 4 forks of the checkpoint: each unique, each its own workspace ----
kdir=$dir
kpid=$spid
uniq='import os, uuid; print(uuid.uuid4(), os.urandom(16).hex())'
fork_ids=
for n in 1 2 3 4; do
	t0=$(date +%s%N)
	start "f$n" --timeout 600 --from-checkpoint "$kdir/checkpoints/c1"
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	expect "fork $n of c1 runs ($ms ms)" 200 "j['state']=='running'"
	eval "fpid$n=$spid"
	post "{\"argv\":[\"python3\",\"-c\",\"$uniq\"]}" "/commands?wait=60"
	echo "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["stdout"].strip())' "$tmp/out")" >>"$tmp/uniq"
	cmd 'cat f0; sleep 0.5; test $(cat count) -gt $(cat last) && echo counting; echo mine > fork'"$n"'; ls fork*'
	expect "fork $n: the parent's files, its counter running on, its own file alone" 201 \
		"j['stdout']=='cycle 0\ncounting\nfork$n\n'"
done
# a sandbox whose checkpoints may take 1 MiB: none fits, none is kept, it runs on
start cap --timeout 600 --max-checkpoint-mib 1
post '{"name":"big"}' /checkpoints
expect "a checkpoint past max_checkpoint_mib: 429, with the sizes" 429 "'max_checkpoint_mib 1' in j['message']"
s /checkpoints
expect "nothing of it is kept" 200 "j['checkpoints']==[]"
cmd 'echo on'
expect "the sandbox goes on" 201 "j['stdout']=='on\n'"
s / -X DELETE
for _ in $(seq 100); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
dir=$kdir
spid=$kpid
post "{\"argv\":[\"python3\",\"-c\",\"$uniq\"]}" "/commands?wait=60"
python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["stdout"].strip())' "$tmp/out" >>"$tmp/uniq"
sed 's/^/    /' "$tmp/uniq"
[ "$(cut -d' ' -f1 "$tmp/uniq" | sort -u | wc -l)" = 5 ] && [ "$(cut -d' ' -f2 "$tmp/uniq" | sort -u | wc -l)" = 5 ] &&
	ok "the parent and its 4 forks: 5 different uuid4s and urandom reads" || not_ok "forks not unique: $(cat "$tmp/uniq")"
cmd 'ls fork* 2>/dev/null | wc -l'
expect "the forks' files are not the parent's" 201 "j['stdout']=='0\n'"
for n in 1 2 3 4; do
	curl -s -m 60 --unix-socket "$tmp/f$n/api.sock" -o /dev/null -X DELETE http://sandbox/
	eval "p=\$fpid$n"
	for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$p" 2>/dev/null && not_ok "fork $n's supervisor did not exit"
done
s /checkpoints/c1 -X DELETE
expect "DELETE: gone" 200
s /checkpoints
expect "no checkpoint left" 200 "j['checkpoints']==[]"
post '{"name":"c1"}' /checkpoints
expect "a deleted checkpoint's name is not taken again: 409" 409 "'not taken twice' in j['message']"
s "/commands/$counter"
expect "the background counter ran through every cycle" 200 "j['state']=='running'"
s / -X DELETE
gone "after $CYCLES cycles and DELETE"

[ "$fail" -eq 0 ] || for f in "$tmp"/*.log; do tail -n 20 "$f" | cut -c1-300 | sed "s|^|    $(basename "$f"): |"; done
finish pause
