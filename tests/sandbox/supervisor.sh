#!/bin/bash
# One sandbox's supervisor (vmrund-sandbox) on a KVM host that runs Linux
# guests (scripts/on-kvm-host.sh decides where), driven through its API
# on its Unix socket with curl: commands that share the VM's state, one
# at a time and at once, stdin and signals, a command's timeout, an
# output flood and a fork bomb held to their limits, the files API (a
# file of 8 MiB and a directory as a tar, both ways), the output as
# Server-Sent Events, an Idempotency-Key that runs a command once, the
# sandbox's own life running out, and DELETE; after each sandbox no vmm,
# cgroup or run directory is left. Every curl has a deadline.
set -u
cd "$(dirname "$0")/../.."
. tests/e2e/lib.sh
e2e_init sandbox
. tests/sandbox/sbxlib.sh

start a --timeout 600
grep -h "snapshot\|ready in" "$tmp/a.log" | sed 's/^/    /'
expect "the sandbox starts: running, with its limits" 200 "j['state']=='running' and j['limits']['runtime']=='python' and j['time_left_s']>500"

# ---- commands ----
post '{"argv":["sh","-c","echo kept > state.txt; echo out; echo err >&2; exit 3"]}' "/commands?wait=60"
expect "a command: exit code, stdout, stderr" 201 "j['exit_code']==3 and j['stdout']=='out\n' and j['stderr']=='err\n' and j['end']=='exited' and j['id']==1"
post '{"argv":["cat","state.txt"]}' "/commands?wait=60"
expect "the next command sees what the last one left" 201 "j['stdout']=='kept\n'"
post '{"argv":["python3","-c","import os; print(os.getcwd(), os.getuid(), os.environ[\"GREETING\"])"],"cwd":"/tmp","env":{"GREETING":"hi"}}' "/commands?wait=60"
expect "cwd, env, and the sandbox user" 201 "j['stdout']=='/tmp 1000 hi\n' and j['request']['env']==['GREETING']"
post '{"argv":["python3","-c","print(input()[::-1])"],"stdin":"olleh\n"}' "/commands?wait=60"
expect "a foreground command's stdin" 201 "j['stdout']=='hello\n'"
# on a terminal: a tty as its stdin and stdout, of the size asked, and a
# foreground command's stdin ends with the terminal's end of file (^D)
post '{"argv":["python3","-c","import os, sys; print(os.isatty(0), os.isatty(1), *os.get_terminal_size()); print(sys.stdin.read().upper())"],"pty":{"cols":100,"rows":30},"stdin":"typed"}' "/commands?wait=60"
expect "a command on a terminal: a tty, its size, its input ended by ^D" 201 \
	"j['exit_code']==0 and 'True True 100 30' in j['stdout'] and 'TYPED' in j['stdout']"
post '{"argv":["ls"]}' "/commands?wait=60"
expect "a program of the image's manifest (busybox ls) runs" 201 "j['exit_code']==0 and 'state.txt' in j['stdout']"
# --without-pip: ensurepip's copy into the venv takes a minute of an
# emulated CPU; the system's pip serves the venv through its site packages
post '{"argv":["sh","-c","python3 -m venv --without-pip --system-site-packages venv && . venv/bin/activate && python -c \"import sys; print(sys.prefix)\" && python -m pip --version | cut -d\" \" -f1"],"timeout_s":120}' "/commands?wait=150"
expect "an agent's tools: a venv, and pip in it" 201 "j['exit_code']==0 and j['stdout']=='/workspace/venv\npip\n'"
post '{"argv":["sh","-c","git init -q repo && cd repo && echo a > f && git add f && git -c user.name=a -c user.email=a@b commit -q -m one && echo b > f && git diff --stat | tail -1 && test -s /etc/ssl/certs/ca-certificates.crt && echo certs"]}' "/commands?wait=60"
expect "git commits and diffs; the CA bundle is there" 201 "j['exit_code']==0 and '1 file changed' in j['stdout'] and j['stdout'].endswith('certs\n')"
post '{"argv":["/workspace/nope"]}' "/commands?wait=60"
expect "a program that is not there: not_found" 201 "j['end']=='not_found'"

# a background command waits on its stdin while others come and go
post '{"argv":["python3","-c","import sys\nfor l in sys.stdin: print(l.strip().upper(), flush=True)"],"background":true}' "/commands"
expect "a background command starts" 201 "j['state']=='running'"
bg=$(python3 -c "import json; print(json.load(open('$tmp/out'))['id'])" 2>/dev/null)
post '{"argv":["true"]}' "/commands?wait=60"
expect "another command runs beside it" 201 "j['exit_code']==0"
post '{"data":"first\n"}' "/commands/$bg/stdin"
expect "stdin to the background command" 200
curl -s -m 20 -N --unix-socket "$dir/api.sock" "http://sandbox/commands/$bg/events" >"$tmp/events" 2>/dev/null &
epid=$!
sleep 1
post '{"data":"second\n","close":true}' "/commands/$bg/stdin"
s "/commands/$bg?wait=60"
expect "closing its stdin ends it; its output is both lines" 200 "j['state']=='ended' and j['stdout']=='FIRST\nSECOND\n'"
wait $epid
grep -q '^event: stdout' "$tmp/events" && grep -q 'FIRST' "$tmp/events" && grep -q 'SECOND' "$tmp/events" &&
	grep -q '^event: exit' "$tmp/events" && ok "its events: output from the start, live, then exit" ||
	not_ok "events: $(head -c 400 "$tmp/events")"
s "/commands/$bg/events" -N
grep -q 'FIRST' "$tmp/out" && grep -q '^event: exit' "$tmp/out" && ok "the events are replayed after it ended" ||
	not_ok "replay: $(head -c 300 "$tmp/out")"

post '{"argv":["sh","-c","sleep 300"],"timeout_s":2}' "/commands?wait=60"
expect "a command past its timeout_s is killed, and says so" 201 "j['timed_out'] and j['signal']==9"
# a command's own limits: its cgroup's memory.max and RLIMIT_CPU, as a
# run stage's (what a Judge0 batch's forks run under)
post '{"argv":["python3","-c","b=[]\nwhile True: b.append(bytes([len(b) % 256]) * (1<<20))"],"limits":{"memory_mib":32},"timeout_s":30}' "/commands?wait=60"
expect "a command past its own memory_mib: killed, oom_killed" 201 "j['signal']==9 and j['oom_killed'] and not j['timed_out']"
post '{"argv":["python3","-c","while True: pass"],"limits":{"cpu_time_ms":1000},"timeout_s":30}' "/commands?wait=60"
expect "a command past its own cpu_time_ms: SIGXCPU, cpu_time_exceeded" 201 "j['signal']==24 and j['cpu_time_exceeded'] and j['usage']['cpu_ms']>=1000"
post '{"argv":["true"],"limits":{"memory_mib":0}}' "/commands?wait=60"
expect "limits out of range: 400" 400
post '{"argv":["sh","-c","sleep 300 & sleep 300"],"background":true}' "/commands"
sid=$(python3 -c "import json; print(json.load(open('$tmp/out'))['id'])" 2>/dev/null)
sleep 1
post '{"signal":"TERM"}' "/commands/$sid/signal"
expect "a signal to a command" 202
s "/commands/$sid?wait=60"
expect "it ended by that signal" 200 "j['signal']==15"
post '{"argv":["sh","-c","ps -o pid,args | grep -c \"[s]leep 300\""]}' "/commands?wait=60"
expect "no process of the killed commands is left in the guest" 201 "j['stdout'].strip()=='0'"
post '{"argv":["python3","-c","import sys\nwhile True: sys.stdout.write(\"x\"*65536)"],"timeout_s":5}' "/commands?wait=60"
expect "an output flood: kept to max_output, flagged, ended by its timeout" 201 "len(j['stdout'])==65536 and j['stdout_truncated'] and j['timed_out']"
post '{"argv":["python3","-c","import os\nn=0\ntry:\n  while True:\n    if os.fork()==0:\n      import time; time.sleep(30); os._exit(0)\n    n+=1\nexcept OSError as e:\n  print(\"stopped after\", n, e.errno)"],"timeout_s":60}' "/commands?wait=60"
expect "a fork bomb stops at the process limit, the sandbox unharmed" 201 "j['stdout'].startswith('stopped after') and j['stdout'].split()[-1]=='11'"
post '{"argv":["echo","still here"]}' "/commands?wait=60"
expect "the sandbox answers after the flood and the bomb" 201 "j['stdout']=='still here\n'"

# ---- idempotency ----
for i in 1 2; do
	post '{"argv":["sh","-c","echo run >> count.txt; wc -l < count.txt"]}' "/commands?wait=60" -H 'Idempotency-Key: once-1'
done
expect "the same Idempotency-Key and body again: the first command's answer" 200 "j['stdout'].strip()=='1'"
post '{"argv":["cat","count.txt"]}' "/commands?wait=60"
expect "the command ran once, counted inside the guest" 201 "j['stdout']=='run\n'"
post '{"argv":["true"]}' "/commands" -H 'Idempotency-Key: once-1'
expect "the same key with another body: 422" 422
s "/commands"
expect "the commands are listed" 200 "len(j['commands'])>=15 and all('id' in c for c in j['commands'])"

# ---- files ----
printf 'hello files' >"$tmp/small"
s "/files?path=notes/a.txt" -X PUT --data-binary @"$tmp/small"
expect "a write into a directory that is not there: 404" 404
post '{"path":"notes/deep"}' "/files/mkdir"
expect "mkdir -p" 200
s "/files?path=notes/a.txt&mode=0600" -X PUT --data-binary @"$tmp/small"
expect "a file written" 200 "j['size']==11"
s "/files?path=notes/a.txt"
[ "$code" = 200 ] && [ "$(cat "$tmp/out")" = "hello files" ] && ok "and read back" || not_ok "read ($code)"
s "/files/stat?path=/workspace/notes/a.txt"
expect "stat: name, type, size, mode" 200 "j['name']=='a.txt' and j['type']=='file' and j['size']==11 and j['mode']=='0600'"
s "/files/list?path=notes"
expect "list: the file and the directory" 200 "sorted((e['name'],e['type']) for e in j['entries'])==[('a.txt','file'),('deep','dir')]"
post '{"argv":["stat","-c","%U %a","notes/a.txt"]}' "/commands?wait=60"
expect "what the API wrote belongs to the sandbox user" 201 "j['stdout']=='sandbox 600\n'"
post '{"from":"notes/a.txt","to":"notes/deep/b.txt"}' "/files/rename"
expect "rename" 200
s "/files?path=notes/a.txt"
expect "the old name is gone" 404
s "/files?path=/proc/1/environ"
expect "a file the sandbox user may not read: 403" 403
s "/files?path=/etc/x" -X PUT --data-binary @"$tmp/small"
expect "a file the sandbox user may not write: 403 (read-only root) or 403" 403
head -c 8388608 /dev/urandom >"$tmp/big"
s "/files?path=big.bin" -X PUT --data-binary @"$tmp/big"
expect "8 MiB written" 200 "j['size']==8388608"
s "/files?path=big.bin"
[ "$code" = 200 ] && cmp -s "$tmp/out" "$tmp/big" && ok "8 MiB read back, the same bytes" || not_ok "big read ($code)"
mkdir -p "$tmp/tree/sub" && printf x >"$tmp/tree/a" && printf y >"$tmp/tree/sub/b" && tar -C "$tmp/tree" -cf "$tmp/up.tar" .
post '{"path":"up"}' "/files/mkdir"
s "/files/tar?path=up" -X PUT --data-binary @"$tmp/up.tar"
expect "a tar extracted into a directory, in the guest" 200
post '{"argv":["cat","up/a","up/sub/b"]}' "/commands?wait=60"
expect "its files are there" 201 "j['stdout']=='xy'"
s "/files/tar?path=up"
[ "$code" = 200 ] && [ "$(tar -xOf "$tmp/out" ./sub/b 2>/dev/null)" = y ] && ok "a directory downloaded as a tar" ||
	not_ok "tar download ($code)"
s "/files/tar?path=up" -X PUT --data-binary @"$tmp/small"
expect "something that is not a tar: 400" 400
post '{"path":"notes"}' "/files/remove"
expect "remove a tree" 200
s "/files/stat?path=notes"
expect "it is gone" 404

# ---- life ----
post '{"timeout_s":3}' "/timeout"
expect "its life shortened to 3 s" 200 "j['time_left_s']<=3"
sleep 5
for _ in $(seq 100); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
python3 -c "import json,sys; j=json.load(open('$dir/state.json')); sys.exit(0 if j['state']=='stopped' and 'time ran out' in j['reason'] else 1)" &&
	ok "its time ran out: stopped, with the reason" || not_ok "state after the timeout: $(cat "$dir/state.json")"
gone "after its time ran out"

start b --timeout 600
grep -h "snapshot\|ready in" "$tmp/b.log" | sed 's/^/    /'
expect "a second sandbox starts" 200 "j['state']=='running'"
grep -q "snapshot .* found" "$tmp/b.log" && ok "it was restored from the runtime's snapshot" ||
	not_ok "the second sandbox was not restored: $(grep snapshot "$tmp/b.log")"
post '{"argv":["python3","-c","import time; time.sleep(300)"],"background":true}' "/commands"
s "/" -X DELETE
expect "DELETE stops it" 202 "j['state']=='stopping'"
wait "$spid"
[ $? = 0 ] && ok "the supervisor exits 0" || not_ok "supervisor status"
python3 -c "import json,sys; j=json.load(open('$dir/state.json')); sys.exit(0 if j['state']=='stopped' and j['reason']=='deleted' else 1)" &&
	ok "deleted: stopped, the reason said" || not_ok "state after DELETE: $(cat "$dir/state.json")"
gone "after DELETE"

# a spec the policy refuses: the supervisor says why and stops
dir=$tmp/c
mkdir -p "$dir"
printf '{"runtime":"python","limits":{"memory_mib":999999}}' >"$dir/request.json"
timeout -k 5 60 "$SBX" "$dir" "$PWD/build/bin/vmm" "$PWD/build/guest" "" >"$tmp/c.log" 2>&1
st=$?
[ $st = 1 ] && grep -q "exceeds the policy" "$tmp/c.log" && grep -q '"state":"stopped"' "$dir/state.json" &&
	ok "a spec past the policy: one line, stopped, exit 1" || not_ok "refused spec: $st $(cat "$tmp/c.log")"

[ "$fail" -eq 0 ] || for f in "$tmp"/a.log "$tmp"/b.log; do tail -n 30 "$f" | cut -c1-300 | sed "s|^|    $(basename "$f"): |"; done
finish sandbox
