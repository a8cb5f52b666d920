#!/bin/bash
# The sandbox evaluation's attempts (make eval), on a KVM host that runs
# Linux guests (scripts/on-kvm-host.sh decides where). Every case is a real
# attempt through vmrun, as a tenant would make it; this script judges
# nothing. It writes what each case tried and what was observed, one JSON
# object per line, into OUT/cases.jsonl: vmrun's own result object, the
# host's view afterwards (what of the run is left), and the figure vmrun
# logs for its teardown. tests/eval/judge.py decides the verdicts from
# those fields and writes the report.
#   run.sh short|full OUT
# short: every case once, and one round of load (make check); full: the
# same, then LOAD_S seconds of load and TIMEOUT_RUNS more runs ended by their
# deadline, for the destruction-time distribution.
set -u
profile=${1:-short}
out=${2:-build/eval}
case $profile in short | full) ;; *) echo "usage: $0 short|full OUT" >&2; exit 2 ;; esac
cd "$(dirname "$0")/../.."
VMRUN=$PWD/build/bin/vmrun
ROOTFS=$PWD/build/guest/rootfs.ext4
DEADLINE=120                   # seconds for one vmrun; each asks for -t 60 or less
LOAD_S=${LOAD_S:-60}
TIMEOUT_RUNS=${TIMEOUT_RUNS:-20}
SLOTS=$(nproc)                 # runs this host can run at once; load runs 4x that
JAILED_VMM='^vmm --kvm-fd 3 '
RECORDS=/run/vmrun/runs
mkdir -p "$out"
out=$(cd "$out" && pwd)
cases=$out/cases.jsonl
: >"$cases"
tmp=$(mktemp -d /tmp/eval.XXXXXX)
trap 'umount "$tmp/small" 2>/dev/null; rm -rf "$tmp"' EXIT
export TMPDIR=$tmp/runs VMRUN_CACHE=$tmp/cache
mkdir -p "$TMPDIR"

# ---- recording ---------------------------------------------------------------

. tests/eval/lib.sh
# What of any run is on the host now: run directories, jailed vmm
# processes, cgroups, records of runs. One per line.
leftovers() {
	local dir=${1:-$TMPDIR}
	ls -A "$dir" 2>/dev/null | sed "s|^|run directory: $dir/|"
	# vmrund's workers make their run directories beneath its run_dir
	for d in "$tmp"/vmrund/lib/runs/vm "$tmp"/pressure/lib/runs/vm "$tmp"/sandboxes/lib/runs/vm \
		"$tmp"/sandboxes/lib/runs/sandboxes; do
		ls -A "$d" 2>/dev/null | sed "s|^|run directory: $d/|"
	done
	pgrep -f "$JAILED_VMM" | sed 's/^/vmm process: /'
	pgrep -f 'bin/vmrund-worker' | sed 's/^/vmrund worker: /'
	pgrep -f 'bin/vmrund-sandbox' | sed 's/^/sandbox supervisor: /'
	ls -d /sys/fs/cgroup/vmrun/*/ /sys/fs/cgroup/*/vmrun-*/ 2>/dev/null | sed 's/^/cgroup: /'
	ls -A "$RECORDS" 2>/dev/null | sed "s|^|run record: $RECORDS/|"
}

# attempt VMRUN_ARGS...: run vmrun -v --json under the deadline into
# $tmp/out and $tmp/err (or ${AT}out and ${AT}err, for runs in parallel);
# rc and ms are its status and wall time.
attempt() {
	local t0 at=${AT:-$tmp/}
	t0=$(date +%s%N)
	timeout -k 5 $DEADLINE "$VMRUN" -v --json "$@" <"$tmp/stdin" >"${at}out" 2>"${at}err"
	rc=$?
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
}
# The teardown figure vmrun logged in ERRFILE (null if none).
destroy_ms() {
	local d
	d=$(grep -o 'torn down [0-9]* ms after' "${1:-$tmp/err}" | tail -n 1 | tr -dc 0-9)
	echo "${d:-null}"
}
# vmrun's result object from OUTFILE, or null when it printed none.
result_of() {
	local f=${1:-$tmp/out}
	if [ "$(head -c 1 "$f" 2>/dev/null)" = "{" ]; then head -n 1 "$f"; else echo null; fi
}
# record ID CATEGORY EXPECTED ATTEMPT [FACTS]: one line of evidence for the
# attempt just made; FACTS is a JSON object of the case's own observations.
record() {
	local facts=${5:-"{}"}
	printf '{"id":%s,"category":%s,"expected":%s,"attempt":%s,"profile":%s,"status":%d,"wall_ms":%d,' \
		"$(jstr "$1")" "$(jstr "$2")" "$(jstr "$3")" "$(jstr "$4")" "$(jstr "$profile")" "$rc" "$ms" >>"$cases"
	printf '"destroy_ms":%s,"leftovers":%s,"facts":%s,"stderr_tail":%s,"result":%s}\n' "$(destroy_ms)" \
		"$(jlines "$(leftovers)")" "$facts" "$(jstr "$(grep -v '^  |' "$tmp/err" | tail -n 10)")" \
		"$(result_of)" >>"$cases"
	echo "case $1: status $rc after $ms ms"
}
: >"$tmp/stdin"

# ---- the warm-start snapshot every run restores (not a case) -----------------
timeout -k 5 $DEADLINE "$VMRUN" snapshot >"$tmp/out" 2>"$tmp/err" ||
	{ echo "eval: vmrun snapshot failed: $(tail -n 1 "$tmp/err")" >&2; exit 1; }

# ---- the test matrix ---------------------------------------------------------
mkdir -p "$tmp/ws"
echo "input" >"$tmp/ws/in.txt"
attempt -w "$tmp/ws" -a "$tmp/art" -- sh -c 'cat in.txt > artifacts/out.txt && echo more >> artifacts/out.txt'
record workspace_write filesystem allowed "write into the run's own /workspace and take it out as an artifact" \
	"{\"artifact\":$(jstr "$(cat "$tmp/art/out.txt" 2>/dev/null)")}"

# Another tenant's files: run A holds a token in its workspace while run B
# looks for it everywhere it can reach, by its host path too.
token_a="tenant-a-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')"
mkdir -p "$tmp/tenant-a"
echo "$token_a" >"$tmp/tenant-a/secret.txt"
timeout -k 5 $DEADLINE "$VMRUN" -w "$tmp/tenant-a" -- sh -c 'cat secret.txt >/dev/null; sleep 6' \
	>/dev/null 2>&1 &
a_pid=$!
sleep 2
attempt -t 20 -- sh -c "cat $tmp/tenant-a/secret.txt 2>&1; ls -d /workspace/../* 2>&1;
	grep -rs -l '$token_a' / --exclude-dir=proc --exclude-dir=sys 2>/dev/null | head -n 5; echo searched"
wait $a_pid
record other_tenant filesystem denied "read another tenant's workspace, by its host path and by searching the guest" \
	"{\"token\":$(jstr "$token_a")}"

secret="platform-secret-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')"
VMRUN_PLATFORM_TOKEN=$secret AWS_SECRET_ACCESS_KEY=$secret attempt -- sh -c \
	'env; cat /proc/cmdline; tr "\0" "\n" </proc/1/environ 2>&1; cat /proc/self/mountinfo; ls / /run 2>&1'
record platform_secrets secrets denied "find the platform's secrets (host environment, kernel command line, PID 1's environment, mounts)" \
	"{\"secret\":$(jstr "$secret")}"

# timeout, not wget -T: Debian 12's busybox wget (1.35) dies of SIGSEGV when
# -T is given and the connect fails, and a crashed probe shows nothing.
attempt -t 20 -- sh -c 'ip=10.0.2.2; nc -w 2 $ip 80 </dev/null; echo "nc $?"; timeout 5 wget -q -O - http://$ip/ 2>&1; echo "wget $?"'
record unauthorized_network network denied "connect to an address no policy allows (TCP 10.0.2.2:80)"

attempt -t 20 -- sh -c 'timeout 5 wget -q -O - http://169.254.169.254/latest/meta-data/ 2>&1; echo "wget $?";
	nc -w 2 127.0.0.1 22 </dev/null; echo "nc-local $?"'
record ssrf network denied "reach the cloud metadata service (169.254.169.254) and the host's loopback"

attempt -t 20 -- sh -c 'echo "uid $(id -u)"; su -c true root </dev/null >/dev/null 2>&1; echo "su $?";
	mount -t tmpfs none /mnt 2>/dev/null; echo "mount $?"; echo x 2>/dev/null >>/etc/passwd; echo "write_etc $?";
	touch /usr/bin/planted 2>/dev/null; echo "write_root $?"; unshare -r true 2>/dev/null; echo "unshare $?";
	nsenter -t 1 -m true 2>/dev/null; echo "nsenter $?"; dd if=/dev/vda of=/dev/null bs=512 count=1 2>/dev/null;
	echo "read_disk $?"'
record privilege_escalation privilege denied "become root or leave the sandbox user (su, mount, write /etc and the root image, user and mount namespaces, the raw disk)"

# CPU: the same work measured in a fixed wall time, without and with a quota.
spin='end=$(( $(date +%s) + 4 )); n=0; while [ "$(date +%s)" -lt $end ]; do n=$((n + 1)); done; echo $n'
attempt -t 20 -- sh -c "$spin"
free_n=$(head -n 1 "$tmp/out" | grep -o '"stdout":"[0-9]*' | tr -dc 0-9)
printf 'cpu_quota 25\n' >"$tmp/quota.policy"
attempt -t 20 --policy "$tmp/quota.policy" -- sh -c "$spin"
record cpu_quota limits limited "spin for 4 s under a 25% CPU quota (policy cpu_quota 25), against the same spin without one" \
	"{\"unlimited_iterations\":${free_n:-null},\"quota_pct\":25}"

attempt -t 30 -m 128 -- python3 -c 'a = []
while True: a.append(b"x" * (16 << 20))'
record memory limits killed "grow memory 16 MiB at a time, without end, in a 128 MiB guest"

attempt -t 2 -- sleep 100
record timeout limits stopped "sleep 100 under a 2 s limit"

attempt -t 5 -- sh -c 'f() { f | f & }; f; sleep 10'
record fork_bomb process limited "a fork bomb under a 5 s limit"

# -t 60: the guest's own 64 MiB through a pipe took 16-20 s under the
# emulated host, so a 20 s limit ended it by its deadline now and then.
attempt -t 60 -- sh -c 'yes vmrun | head -c 67108864'
record huge_output output limited "write 64 MiB to stdout (cap: 1 MiB per stream)"

attempt -t 3 -- sh -c 'trap "" TERM INT HUP; while :; do :; done'
record hung_process process stopped "a process that ignores SIGTERM and spins, under a 3 s limit"

attempt -t 20 -- sh -c 'sleep 100 & setsid sleep 100 & (trap "" HUP TERM; sleep 100) & echo started'
record leftover_children process stopped "exit at once, leaving three children running (one in its own session, one ignoring TERM)"

echo "mine" >"$tmp/canary"
attempt -t 20 -a "$tmp/trav-art" -- sh -c "cd artifacts && ln -s ../../../../../../$tmp/canary up && ln -s / root &&
	ln -s $tmp/canary abs && mkdir d && ln -s ../../.. d/deep && echo ok > plain"
record path_traversal artifacts denied "artifacts that are links out (relative .., absolute, a link to /) meant to be followed on the host" \
	"{\"copied\":$(jlines "$(cd "$tmp/trav-art" && find . -mindepth 1 | sort)"),\"links\":$(find "$tmp/trav-art" -type l | wc -l),\"canary\":$(jstr "$(cat "$tmp/canary")")}"

attempt -t 20 -- sh -c 'dd if=/dev/urandom of=/workspace/data bs=1M count=16 2>/dev/null; echo x > /tmp/t; ls -la /workspace'
image_gone=$( [ -z "$(ls -A "$TMPDIR")" ] && echo true || echo false)
attempt -t 20 -- sh -c 'ls -A /workspace /tmp'
record destroy_clears lifecycle cleared "write 16 MiB into /workspace and /tmp, then a fresh run looks for them" \
	"{\"run_dirs_empty_after_first\":$image_gone}"

# ---- fault injection ---------------------------------------------------------

# SIGKILL to vmrun mid-run: what it leaves, then what the next run sweeps.
# (vmrun itself, not under timeout: the kill must reach it.)
"$VMRUN" -t 60 -- sleep 100 >/dev/null 2>&1 &
k_pid=$!
for _ in $(seq 600); do pgrep -f "$JAILED_VMM" >/dev/null && break; sleep 0.1; done
sleep 1
kill -KILL $k_pid
wait $k_pid 2>/dev/null
sleep 1
before=$(leftovers)
attempt -t 20 -- true
record sigkill_vmrun lifecycle recovered "SIGKILL vmrun in the middle of a run, then start another run" \
	"{\"left_after_kill\":$(jlines "$before"),\"swept\":$(jstr "$(grep -o 'swept .*' "$tmp/err" | head -n 1)")}"

# The host's run directory full: TMPDIR on a 256 KiB file system, filled.
mkdir -p "$tmp/small"
if mount -t tmpfs -o size=256k tmpfs "$tmp/small"; then
	dd if=/dev/zero of="$tmp/small/fill" bs=4k 2>/dev/null
	TMPDIR=$tmp/small attempt -t 20 -- true
	record tmpdir_full fault failed_safe "run with the host's run directory (TMPDIR) on a full file system" \
		"{\"left_in_tmpdir\":$(jlines "$(ls -A "$tmp/small" | grep -vx fill)")}"
	umount "$tmp/small"
fi

# A corrupt root image: its superblock zeroed.
mkdir -p "$tmp/corrupt"
cp "$ROOTFS" "$tmp/corrupt/rootfs.ext4"
cp "$(dirname "$ROOTFS")/programs.txt" "$tmp/corrupt/programs.txt"
dd if=/dev/zero of="$tmp/corrupt/rootfs.ext4" bs=1024 seek=1 count=4 conv=notrunc 2>/dev/null
attempt -t 20 --cold --rootfs "$tmp/corrupt/rootfs.ext4" -- true
record corrupt_rootfs fault failed_safe "boot a root image whose superblock is zeroed"
rm -rf "$tmp/corrupt"

# The host out of memory in the run's cgroup: while the guest sleeps, the
# cgroup's memory.max is lowered to what vmm uses then plus 16 MiB; then
# the guest touches 160 MiB of its RAM. The host's OOM killer must end
# vmm there, and vmrun say so, leaving nothing.
"$VMRUN" -v --json -t 60 --cold -- python3 -c 'import time; time.sleep(6); a = bytearray(160 << 20); print("touched")' \
	<"$tmp/stdin" >"$tmp/out" 2>"$tmp/err" &
o_pid=$!
t0=$(date +%s%N)
cg=
for _ in $(seq 600); do
	vpid=$(pgrep -f "$JAILED_VMM" | head -n 1)
	[ -n "$vpid" ] && cg=/sys/fs/cgroup$(sed -n 's/^0:://p' "/proc/$vpid/cgroup" 2>/dev/null) && break
	sleep 0.1
done
lowered=null
sleep 1
if [ -n "$cg" ] && [ -f "$cg/memory.current" ]; then
	lowered=$(( $(cat "$cg/memory.current") + (16 << 20) ))
	echo "$lowered" >"$cg/memory.max" || lowered=null
fi
wait $o_pid
rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
record host_oom fault failed_safe "lower the run's cgroup memory.max to vmm's use + 16 MiB while the guest sleeps, then touch 160 MiB in the guest" \
	"{\"memory_max_set\":$lowered}"

# ---- attacks from a compromised guest kernel ------------------------------------
# The test-only guest (make eval-guest): its agent runs the command as guest
# root, its kernel has /dev/mem, and its root image holds the attack
# programs (tests/guest/ringattack.c, vsockattack.c). Each attack is one
# cold run of it; the root image must come out of every run unchanged.
EG=$PWD/build/eval-guest
eg_sum=$(sha256sum <"$EG/rootfs.ext4")
# guest_attack ID EXPECTED ATTEMPT ARGS...: the run and its record, with
# what vmm counted of the guest's device faults.
guest_attack() {
	local id=$1 expected=$2 what=$3
	shift 3
	attempt -t 60 --cold --kernel "$EG/vmlinux" --rootfs "$EG/rootfs.ext4" -- "$@"
	record "$id" guest_kernel "$expected" "$what" \
		"{\"root_image_unchanged\":$( [ "$(sha256sum <"$EG/rootfs.ext4")" = "$eg_sum" ] && echo true || echo false),\"vmm_faults\":$(jstr "$(grep -o "device faults, as vmm counted them: .*" "$tmp/err" | cut -d: -f2- | head -n 1)")}"
}
guest_attack guest_rings contained "from guest root, take virtio-rng from its driver and give it malformed queues and chains (sizes, rings outside RAM, descriptors out of range, loops, indirect, a jumping index, register garbage), then a valid request" \
	/usr/bin/ringattack rng
guest_attack guest_root_disk_write denied "from guest root, take the read-only root disk from its driver and send it writes, discards and out-of-range requests, then read sector 0 back" \
	/usr/bin/ringattack blk-ro
guest_attack vsock_flood contained "from guest root, 600 vsock connections to the host at once (the agent's port, the readiness port, unserved ports), then 600 connect-and-close" \
	/usr/bin/vsockattack flood 600
guest_attack agent_impersonation denied "from guest root, connect to the agent's port as a second agent and send a forged output and exit 0, while the real command prints 'genuine' and exits 7" \
	/usr/bin/vsockattack impersonate

# ---- vmrund: SIGKILL mid-run, and load through its API ---------------------------
VD=$tmp/vmrund
PORT=$((20000 + RANDOM % 20000))
BASE=http://127.0.0.1:$PORT
KEY=key-eval-0123456789abcdef
mkdir -p "$VD/etc" "$VD/lib"
printf 'tenant t concurrent=%d queued=256 rate=10000 callback=any\nkey %s t\n' "$((4 * SLOTS))" "$KEY" >"$VD/etc/keys"
chmod 600 "$VD/etc/keys"
printf 'listen = 127.0.0.1:%s\nstate_db = %s\nrun_dir = %s\nkeys = %s\naudit_log = %s\nslots = %d\n' \
	"$PORT" "$VD/lib/state.db" "$VD/lib/runs" "$VD/etc/keys" "$VD/lib/audit.jsonl" "$SLOTS" >"$VD/etc/vmrund.conf"
vmrund_start() {
	"$PWD/build/bin/vmrund" --config "$VD/etc/vmrund.conf" >>"$VD/vmrund.log" 2>&1 &
	vd_pid=$!
	for _ in $(seq 100); do curl -fs -m 2 "$BASE/healthz" >/dev/null 2>&1 && return 0; sleep 0.1; done
	echo "eval: vmrund did not answer /healthz: $(tail -n 3 "$VD/vmrund.log")" >&2
	return 1
}
# api METHOD PATH [BODY] > response; the run's JSON, compacted to one line.
api() {
	curl -s -m 30 -X "$1" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
		${3:+--data-binary "$3"} "$BASE$2" | python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)))' 2>/dev/null
}
run_id() { python3 -c 'import json, sys; print(json.loads(sys.stdin.read())["id"])' 2>/dev/null; }
run_state() { python3 -c 'import json, sys; print(json.loads(sys.stdin.read())["state"])' 2>/dev/null; }
# wait_terminal ID SECONDS: poll the run until it is no longer queued or
# running; its last JSON in $tmp/out.
wait_terminal() {
	local end=$(( $(date +%s) + $2 ))
	while :; do
		api GET "/v1/runs/$1" >"$tmp/out"
		case $(run_state <"$tmp/out") in queued | running | "") ;; *) return 0 ;; esac
		[ "$(date +%s)" -lt $end ] || return 1
		sleep 0.5
	done
}
if vmrund_start; then
	# SIGKILL to vmrund with a command running, then a restart.
	: >"$tmp/err"
	t0=$(date +%s%N)
	id=$(api POST /v1/runs '{"argv":["sh","-c","echo started; sleep 100"],"limits":{"timeout_s":60}}' | run_id)
	for _ in $(seq 600); do
		grep -aqs started "$VD/lib/runs/$id/output" && pgrep -f "$JAILED_VMM" >/dev/null && break
		sleep 0.2
	done
	kill -KILL "$vd_pid"
	wait "$vd_pid" 2>/dev/null
	sleep 1
	before=$(leftovers)
	vmrund_start
	wait_terminal "$id" 60
	rc=$?
	# the restarted vmrund gives a worker it finds still running a grace
	# period to destroy its VM itself before it sweeps
	for _ in $(seq 200); do [ -z "$(leftovers)" ] && break; sleep 0.1; done
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	record sigkill_vmrund lifecycle recovered "SIGKILL vmrund while a run's command runs, then restart it" \
		"{\"left_after_kill\":$(jlines "$before"),\"spool_left\":$( [ -e "$VD/lib/runs/$id" ] && echo true || echo false)}"

	# The longest artifact names a guest may leave (1014 and 1023 bytes),
	# then their tar: a 1014-byte name once sent vmrund's tar headers 512
	# bytes past their buffer, with the guest's bytes, and the heap out to
	# the client. Read back by Python's tarfile; vmrund must still answer.
	code='import os
for c, n in (("A", 246), ("B", 255)):
    p = "artifacts/" + "/".join([c * 255] * 3 + [c * n])
    os.makedirs(os.path.dirname(p), exist_ok=True)
    open(p, "w").write(c * 3)'
	t0=$(date +%s%N)
	id=$(api POST /v1/runs "$(python3 -c 'import json, sys; print(json.dumps({"argv": ["python3", "-c", sys.argv[1]],
		"keep_artifacts": True, "limits": {"timeout_s": 60}}))' "$code")" | run_id)
	wait_terminal "$id" 120
	rc=$?
	curl -s -m 30 -o "$tmp/tar" -H "Authorization: Bearer $KEY" "$BASE/v1/runs/$id/artifacts.tar"
	tar_facts=$(python3 - "$tmp/tar" <<'PY'
import json, sys, tarfile
facts = {"tar_bytes": 0, "members": None, "error": None}
try:
    data = open(sys.argv[1], "rb").read()
    facts["tar_bytes"] = len(data)
    with tarfile.open(sys.argv[1], "r:") as t:
        facts["members"] = [[m.name, t.extractfile(m).read().decode("latin-1")] for m in t.getmembers()]
        # what follows the last member: the two zero blocks and nothing else
        facts["tail_zero"] = not data[t.offset:].strip(b"\0")
except Exception as e:
    facts["error"] = str(e)[:200]
print(json.dumps(facts))
PY
)
	healthz=$(curl -s -m 10 -o /dev/null -w '%{http_code}' "$BASE/healthz")
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	record artifact_tar_names service contained "leave artifacts with the longest names allowed (1014 and 1023 bytes, components of 255) and fetch their tar from vmrund" \
		"{\"tar\":$tar_facts,\"healthz\":$(jstr "$healthz")}"

	# Judge0's callback_url aimed at the host: loopback and metadata
	# literals in every spelling a resolver takes, and a name that
	# resolves to loopback (localhost), with a listener on the host's
	# loopback that records whatever reaches it. The tenant may call any
	# host name (callback=any); the deny set must hold all the same.
	LPORT=$((41000 + RANDOM % 9000))
	python3 -c 'import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def handle_one_request(self):
        open(sys.argv[2], "a").write("hit\n")
        self.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")
srv = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H)
print("ready", flush=True)
srv.serve_forever()' "$LPORT" "$tmp/callback_hits" >"$tmp/listener.log" 2>&1 &
	listener=$!
	for _ in $(seq 50); do grep -q ready "$tmp/listener.log" 2>/dev/null && break; sleep 0.1; done
	t0=$(date +%s%N)
	codes=
	for u in "http://127.0.0.1:$LPORT/" "http://2130706433:$LPORT/" "http://0x7f.1:$LPORT/" "http://[::1]:$LPORT/" \
		"http://[::ffff:127.0.0.1]:$LPORT/" "http://169.254.169.254/latest/meta-data/"; do
		c=$(curl -s -m 30 -o /dev/null -w '%{http_code}' -H "X-Auth-Token: $KEY" -H 'Content-Type: application/json' \
			-d "{\"source_code\":\"print(1)\",\"language_id\":71,\"callback_url\":\"$u\"}" \
			"$BASE/judge0/submissions?base64_encoded=false")
		codes="$codes${codes:+,}$(jstr "$u $c")"
	done
	tok=$(curl -s -m 30 -H "X-Auth-Token: $KEY" -H 'Content-Type: application/json' \
		-d "{\"source_code\":\"print(1)\",\"language_id\":71,\"callback_url\":\"http://localhost:$LPORT/\"}" \
		"$BASE/judge0/submissions?base64_encoded=false" | python3 -c 'import json, sys; print(json.load(sys.stdin)["token"])' 2>/dev/null)
	id=${tok//-/}
	wait_terminal "$id" 120
	rc=$?
	refused=false
	for _ in $(seq 100); do
		grep -q "run $id: callback http://localhost:$LPORT/ refused" "$VD/vmrund.log" && refused=true && break
		sleep 0.1
	done
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	kill "$listener" 2>/dev/null
	wait "$listener" 2>/dev/null
	record judge0_callback_ssrf network denied "Judge0 callbacks aimed at the host's loopback (six spellings) and the metadata address, and at a name that resolves to loopback, with a listener there" \
		"{\"literals\":[$codes],\"name_refused\":$refused,\"listener_hits\":$(cat "$tmp/callback_hits" 2>/dev/null | wc -l),\"token\":$(jstr "$tok")}"

	# A judged problem's contestant snoops: test 0 leaves its input in
	# /workspace and /tmp, and every test looks for what a test must not
	# see: those files, a checker's files (answer.txt, output.txt) by name
	# anywhere, and a secret that only test 0's expected output and test
	# 1's stdin hold, in every file of the places data could land. Each
	# test is a fork of the compiled VM, and the expected outputs stay on
	# the host: every test should print "clean".
	secret="judge-secret-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')"
	snoop='import os, sys
secret = sys.argv[1].encode()
data = sys.stdin.read()
hits = []
for d in ("/workspace", "/tmp"):
    for n in ("leak",):
        if os.path.exists(os.path.join(d, n)):
            hits.append("left:" + os.path.join(d, n))
for root, dirs, files in os.walk("/"):
    if root in ("/proc", "/sys", "/dev"):
        dirs[:] = []
        continue
    for n in files:
        p = os.path.join(root, n)
        if n in ("answer.txt", "output.txt", "input.txt"):
            hits.append("name:" + p)
        if root.startswith(("/workspace", "/tmp", "/root", "/home", "/var", "/run", "/mnt", "/srv", "/opt", "/etc")):
            try:
                if os.path.getsize(p) < (1 << 20) and secret in open(p, "rb").read() and p != "/workspace/main.py":
                    hits.append("secret:" + p)
            except OSError:
                pass
open("/workspace/leak", "w").write(data)
open("/tmp/leak", "w").write(data)
print("found " + " ".join(sorted(set(hits))) if hits else "clean")'
	t0=$(date +%s%N)
	body=$(python3 -c 'import json, sys
src = sys.argv[1].replace("sys.argv[1]", repr(sys.argv[2]))
print(json.dumps({"runtime": "python", "files": [{"name": "main.py", "content": src}],
                  "tests": [{"stdin": "first test", "expected_output": "clean " + sys.argv[2]},
                            {"stdin": sys.argv[2], "expected_output": "clean"},
                            {"stdin": "third", "expected_output": "clean"}],
                  "checker": {"type": "tokens"}, "limits": {"timeout_s": 60}}))' "$snoop" "$secret")
	curl -s -m 600 -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' --data-binary "$body" \
		"$BASE/v1/judge" >"$tmp/judged"
	rc=$?
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	: >"$tmp/out"
	record judge_contestant_snoop filesystem denied "a judged problem's contestant looks for the files another test left, a checker's files and the expected output's secret, in each of three tests" \
		"{\"judged\":$(python3 -c 'import json, sys
try:
    print(json.dumps(json.load(open(sys.argv[1]))))
except Exception as e:
    print(json.dumps({"error": str(e)[:200]}))' "$tmp/judged")}"

	# Hostile Judge0 additional_files: a deflate bomb (12 MiB of zeros in
	# 12 KB, each file under the 8192 KB a file may take, the whole past
	# Judge0's 10240 KB), a name that climbs out with "..", a link to the host's
	# /etc/passwd, and more files than a workspace takes. Each must be
	# 422 at submission, with the reason, before anything is written or
	# run; vmrund must answer in bounded time and not grow with what the
	# bomb would extract to.
	rss0=$(awk '/^VmRSS/ {print $2}' "/proc/$vd_pid/status" 2>/dev/null || echo 0)
	t0=$(date +%s%N)
	# one python for the four bodies: its start costs a second on an
	# emulated host
	python3 -c 'import base64, io, json, sys, zipfile
def zipped(fill):
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", zipfile.ZIP_DEFLATED) as z:
        fill(z)
    return base64.b64encode(b.getvalue()).decode()
def bomb(z):
    zero = bytes(1 << 20)
    for name in ("zeros1", "zeros2"):
        i = zipfile.ZipInfo(name)
        i.compress_type = zipfile.ZIP_DEFLATED
        with z.open(i, "w", force_zip64=True) as f:
            for _ in range(6):
                f.write(zero)
def climb(z):
    z.writestr("ok.txt", "fine\n")
    z.writestr("../../../../etc/cron.d/vmrun-escape", "* * * * * root touch /tmp/escaped\n")
def link(z):
    i = zipfile.ZipInfo("passwd")
    i.external_attr = 0o120777 << 16
    z.writestr(i, "/etc/passwd")
def many(z):
    for k in range(300):
        z.writestr("f%d" % k, "x")
for kind, fill in (("bomb", bomb), ("climb", climb), ("link", link), ("many", many)):
    with open(sys.argv[1] + "." + kind, "w") as f:
        json.dump({"source_code": "print(1)", "language_id": 71, "additional_files": zipped(fill)}, f)' "$tmp/zipbody"
	answers=
	for kind in bomb climb link many; do
		c=$(curl -s -m 60 -o "$tmp/zipanswer" -w '%{http_code}' -H "X-Auth-Token: $KEY" -H 'Content-Type: application/json' \
			--data-binary @"$tmp/zipbody.$kind" "$BASE/judge0/submissions?base64_encoded=false")
		answers="$answers${answers:+,}{\"kind\":$(jstr "$kind"),\"code\":$(jstr "$c"),\"zip_bytes\":$(stat -c %s "$tmp/zipbody.$kind"),\"body\":$(jstr "$(head -c 400 "$tmp/zipanswer")")}"
	done
	rc=0
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	rss1=$(awk '/^VmRSS/ {print $2}' "/proc/$vd_pid/status" 2>/dev/null || echo 0)
	healthz=$(curl -s -m 10 -o /dev/null -w '%{http_code}' "$BASE/healthz")
	: >"$tmp/out"
	record judge0_zip_bomb service denied "Judge0 additional_files: a deflate bomb (12 MiB of zeros in 12 KB), a name with .. climbing to /etc/cron.d, a link to /etc/passwd, 300 files" \
		"{\"answers\":[$answers],\"rss_kib\":[$rss0,$rss1],\"healthz\":$(jstr "$healthz")}"

	# The problem setter's programs misbehave: an interactor that floods
	# the contestant's stdin and never ends, and a checker that floods
	# both its streams and then sleeps. Each is bounded by its own time
	# and the output cap; the judge must answer internal_error (no verdict
	# from a broken setter program is trusted), in bounded time, with
	# bounded answers, and vmrund must not grow with what they wrote.
	rss() { awk '/^VmRSS/ {print $2}' "/proc/$vd_pid/status" 2>/dev/null || echo 0; }
	rss0=$(rss)
	t0=$(date +%s%N)
	flood='import sys
chunk = "9" * 65536 + "\n"
while True:
    sys.stdout.write(chunk)'
	checker='import sys, time
for _ in range(80):
    sys.stdout.write("o" * 65536)
    sys.stderr.write("e" * 65536)
time.sleep(3600)'
	body=$(python3 -c 'import json, sys
print(json.dumps({"runtime": "python", "files": [{"name": "main.py", "content": "import sys\nfor line in sys.stdin:\n    print(len(line), flush=True)\n"}],
                  "interactor": {"runtime": "python", "files": [{"name": "i.py", "content": sys.argv[1]}]},
                  "tests": [{"stdin": "1"}], "limits": {"timeout_s": 2}}))' "$flood")
	curl -s -m 150 -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' --data-binary "$body" \
		"$BASE/v1/judge" >"$tmp/judged_i"
	body=$(python3 -c 'import json, sys
print(json.dumps({"runtime": "python", "files": [{"name": "main.py", "content": "print(1)"}],
                  "checker": {"type": "program", "runtime": "python", "files": [{"name": "c.py", "content": sys.argv[1]}]},
                  "tests": [{"stdin": "1"}], "limits": {"timeout_s": 2}}))' "$checker")
	curl -s -m 150 -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' --data-binary "$body" \
		"$BASE/v1/judge" >"$tmp/judged_c"
	rc=$?
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	healthz=$(curl -s -m 10 -o /dev/null -w '%{http_code}' "$BASE/healthz")
	: >"$tmp/out"
	record judge_setter_flood service limited "a judged problem's interactor floods the contestant and never ends; a checker floods both streams, then sleeps" \
		"{\"interactor\":$(python3 -c 'import json, os, sys
def view(p):
    try:
        j = json.load(open(p))
        return {"verdict": j.get("verdict"), "message": j.get("message"), "bytes": os.path.getsize(p),
                "tests": [{"verdict": t["verdict"], "message": t["message"]} for t in j.get("tests", [])]}
    except Exception as e:
        return {"error": str(e)[:200], "bytes": os.path.getsize(p) if os.path.exists(p) else 0}
print(json.dumps(view(sys.argv[1])) + ",\"checker\":" + json.dumps(view(sys.argv[2])))' "$tmp/judged_i" "$tmp/judged_c"),\"rss_kib\":[$rss0,$(rss)],\"healthz\":$(jstr "$healthz"),\"vmrund_log\":$(jstr "$(tail -n 12 "$VD/vmrund.log" | cut -c1-240)")}"

	# Load through the API (the full profile): 4x the slots at once, each
	# polled to its end.
	if [ "$profile" = full ]; then
		ids=()
		t0=$(date +%s%N)
		for i in $(seq $((4 * SLOTS))); do
			ids+=("$(api POST /v1/runs '{"argv":["sh","-c","echo load; sleep 1"],"limits":{"timeout_s":20}}' | run_id)")
		done
		for i in "${!ids[@]}"; do
			wait_terminal "${ids[$i]}" 300
			rc=$?
			ms=$(( ($(date +%s%N) - t0) / 1000000 ))
			record "load_api.$((i + 1))" load completed "one of $((4 * SLOTS)) runs posted at once to vmrund's API ($SLOTS slots, 4x)"
		done
	fi
	kill -TERM "$vd_pid"
	wait "$vd_pid" 2>/dev/null
else
	rc=1 ms=0
	: >"$tmp/out"
	tail -n 5 "$VD/vmrund.log" >"$tmp/err"
	record vmrund_start lifecycle started "start vmrund for its cases (no judge: an error)"
fi

# ---- vmrund under one tenant's pressure: room and connections ---------------
# A vmrund of its own: two slots on a node with room for 1 GiB of guest
# memory, so that room and not slots decides. Each case polls against a
# deadline of its own (every curl has its -m too), so that a vmrund that
# stops answering or a run that never starts ends the case, not the
# evaluation.
PD=$tmp/pressure
mkdir -p "$PD/etc" "$PD/lib"
printf 'tenant t concurrent=4 queued=16 rate=10000\nkey %s t\n' "$KEY" >"$PD/etc/keys"
chmod 600 "$PD/etc/keys"
printf 'listen = 127.0.0.1:%s\nstate_db = %s\nrun_dir = %s\nkeys = %s\naudit_log = %s\nslots = 2\nnode_memory_mib = 1024\nnode_disk_mib = 1024\nmax_connections_per_address = 4\nrequest_head_timeout_s = 3\nmax_streams_per_tenant = 2\n' \
	"$PORT" "$PD/lib/state.db" "$PD/lib/runs" "$PD/etc/keys" "$PD/lib/audit.jsonl" >"$PD/etc/vmrund.conf"
VD=$PD
if vmrund_start; then
	# A tenant's two runs of 768 MiB must run one after the other, and a
	# run larger than the node must be refused at submission (once, each
	# such run pinned its memory and workspace whatever was left; /run was
	# a tmpfs they filled). One Python process submits and polls: under an
	# emulated host each process started costs seconds, and the first run
	# must still be running when the second is looked at.
	t0=$(date +%s%N)
	: >"$tmp/out"
	adm_facts=$(timeout -k 5 200 python3 - "$BASE" "$KEY" "$tmp" <<'PY'
import json, sys, time, urllib.error, urllib.request
base, key, tmp = sys.argv[1:4]
def call(method, path, body=None):
    req = urllib.request.Request(base + path, method=method, data=json.dumps(body).encode() if body else None,
                                 headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)
    except (OSError, ValueError):
        return 0, None
def until(rid, states, deadline):
    while True:
        _, run = call("GET", "/v1/runs/" + rid)
        if (run and run.get("state") in states) or time.time() > deadline:
            return run
        time.sleep(0.2)
deadline = time.time() + 150
_, a = call("POST", "/v1/runs", {"argv": ["sh", "-c", "sleep 6"], "limits": {"timeout_s": 60, "memory_mib": 768}})
_, b = call("POST", "/v1/runs", {"argv": ["true"], "limits": {"timeout_s": 60, "memory_mib": 768}})
facts = {"a": None, "b_while_a_ran": "", "big_status": "", "big": None}
if a and b:
    ended = ("succeeded", "failed", "timed_out", "cancelled", "lost")
    if until(a["id"], ("running",) + ended, deadline).get("state") == "running":
        facts["b_while_a_ran"] = (call("GET", "/v1/runs/" + b["id"])[1] or {}).get("state", "")
    facts["a"] = until(a["id"], ended, deadline)
    open(tmp + "/out", "w").write(json.dumps(until(b["id"], ended, deadline)) + "\n")
status, facts["big"] = call("POST", "/v1/runs", {"argv": ["true"], "limits": {"memory_mib": 2048}})
facts["big_status"] = str(status)
print(json.dumps(facts))
PY
)
	rc=$?
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	record admission_by_size service admitted "two runs of 768 MiB on a node with room for 1024 and two free slots, then one of 2048 MiB" \
		"${adm_facts:-null}"

	# One address's connections: 4 from 127.0.0.2 that dribble their heads
	# a byte a second, a 5th from there, a request from 127.0.0.1 while they
	# hold; then one tenant's two open output streams of a running run and
	# a third. Once, one address or one tenant could hold every connection
	# vmrund had.
	t0=$(date +%s%N)
	conn_facts=$(timeout -k 5 60 python3 - "$PORT" <<'PY'
import json, socket, sys, threading, time
port = int(sys.argv[1])
req = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
def answer(src):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(src, 0))
        s.sendall(req)
        return s.recv(64).decode("latin-1")
    except OSError:
        return ""
held = [socket.create_connection(("127.0.0.1", port), timeout=5, source_address=("127.0.0.2", 0)) for _ in range(4)]
cut = [None] * 4
def dribble(i, s):
    t0 = time.time()
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    s.settimeout(1)
    while time.time() - t0 < 15:
        try:
            s.sendall(b"a")
            if s.recv(64) == b"":
                cut[i] = round(time.time() - t0, 1)
                return
        except socket.timeout:
            continue
        except OSError:
            cut[i] = round(time.time() - t0, 1)
            return
threads = [threading.Thread(target=dribble, args=(i, s)) for i, s in enumerate(held)]
for t in threads:
    t.start()
time.sleep(0.5)
fifth, other = answer("127.0.0.2"), answer("127.0.0.1")
for t in threads:
    t.join()
print(json.dumps({"fifth": fifth[:15], "other": other[:15], "cut_s": cut}))
PY
)
	# The streams: two of one run opened at once and held (each counted
	# from its answer's head), then a third; the run then ends them.
	: >"$tmp/out"
	stream_facts=$(timeout -k 5 150 python3 - "$PORT" "$KEY" "$tmp" <<'PY'
import http.client, json, sys, time
port, key, tmp = int(sys.argv[1]), sys.argv[2], sys.argv[3]
auth = {"Authorization": "Bearer " + key, "Content-Type": "application/json", "Connection": "close"}
def call(method, path, body=None, timeout=30):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request(method, path, body=json.dumps(body) if body else None, headers=auth)
    return c, c.getresponse()
facts = {"third_stream": "", "streams_ended": 0}
_, r = call("POST", "/v1/runs", {"argv": ["sh", "-c", "echo up; sleep 10"], "limits": {"timeout_s": 60}})
rid = json.load(r)["id"]
held = [call("GET", f"/v1/runs/{rid}/output", timeout=120)[1] for _ in range(2)]
_, third = call("GET", f"/v1/runs/{rid}/output", timeout=10)
facts["third_stream"] = str(third.status)
third.close()
facts["streams_ended"] = sum(h.status == 200 and b"event: end" in h.read() for h in held)
deadline = time.time() + 60
while True:
    _, r = call("GET", "/v1/runs/" + rid)
    run = json.load(r)
    if run.get("state") not in ("queued", "running") or time.time() > deadline:
        break
    time.sleep(0.3)
open(tmp + "/out", "w").write(json.dumps(run) + "\n")
print(json.dumps(facts))
PY
)
	rc=$?
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	record connection_exhaustion service limited "one address holds 4 connections dribbling their heads (limit 4, head deadline 3 s), opens a 5th; another address asks meanwhile; one tenant opens a 3rd output stream (limit 2)" \
		"{\"conn\":${conn_facts:-null},\"streams\":${stream_facts:-null}}"
	kill -TERM "$vd_pid"
	wait "$vd_pid" 2>/dev/null
else
	rc=1 ms=0
	: >"$tmp/out"
	tail -n 5 "$VD/vmrund.log" >"$tmp/err"
	record pressure_vmrund_start lifecycle started "start the pressure cases' vmrund (no judge: an error)"
fi

# ---- sandboxes: another tenant's, escapes, their life, a forging guest ------
# A vmrund of its own with two tenants (a: $KEY, b: $KEY_B, whose sandboxes
# live at most 60 s); tests/eval/sandbox_cases.py makes the attempts, one
# JSON file of what it saw per case, recorded here once every sandbox is
# gone. The forged answers come from a sandbox on the test-only guest
# whose agent forges them (make eval-guest: $(BUILD)/eval-forge).
SD=$tmp/sandboxes
KEY_B=key-eval-b-0123456789abcdef
SBX_CASES="sandbox_other_tenant:tenancy:denied:tenant b reaches for tenant a's sandbox: its view, commands (run, stdin, signal, events), files (read, list, stat, tar, write, mkdir, remove, rename), its life and DELETE
sandbox_cgroup_escape:process:stopped:a command leaves children every way it can (setsid, ignoring TERM, orphaned, nohup) and tries to leave its guest cgroup, then its timeout (and, once more, SIGKILL) ends it
sandbox_outlives_time:lifecycle:stopped:a sandbox with 20 s to live whose commands ignore TERM and spin, asking for a life past its tenant's ceiling
sandbox_forged_files:guest_kernel:contained:a guest whose agent forges file answers: a listing past the host's most, names with / and .., a stat of the largest numbers, stray frames of no operation, a read past its credit"
mkdir -p "$SD/etc" "$SD/lib" "$SD/cases"
printf 'tenant a sandboxes=2 rate=10000\ntenant b sandboxes=1 max_sandbox_timeout_s=60 rate=10000\nkey %s a\nkey %s b\n' \
	"$KEY" "$KEY_B" >"$SD/etc/keys"
chmod 600 "$SD/etc/keys"
printf 'listen = 127.0.0.1:%s\nstate_db = %s\nrun_dir = %s\nkeys = %s\naudit_log = %s\nslots = 1\n' \
	"$PORT" "$SD/lib/state.db" "$SD/lib/runs" "$SD/etc/keys" "$SD/lib/audit.jsonl" >"$SD/etc/vmrund.conf"
VD=$SD
if vmrund_start; then
	timeout -k 5 900 python3 tests/eval/sandbox_cases.py "$SD/cases" "$BASE" "$KEY" "$KEY_B" \
		"$PWD/build/bin/vmrund-sandbox" "$PWD/build/bin/vmm" "$PWD/build/eval-forge" >"$SD/cases.log" 2>&1
	sbx_rc=$?
	kill -TERM "$vd_pid"
	wait "$vd_pid" 2>/dev/null
	while IFS=: read -r id category expected what; do
		f=$SD/cases/$id.json
		rc=$sbx_rc ms=$(jq -r '.ms // 0' "$f" 2>/dev/null || echo 0)
		jq -c '.result' "$f" >"$tmp/out" 2>/dev/null || : >"$tmp/out"
		tail -n 5 "$SD/cases.log" >"$tmp/err"
		record "$id" "$category" "$expected" "$what" \
			"$(jq -c '.facts' "$f" 2>/dev/null || echo '{"setup":"the case wrote nothing"}')"
	done <<<"$SBX_CASES"
else
	rc=1 ms=0
	: >"$tmp/out"
	tail -n 5 "$SD/vmrund.log" >"$tmp/err"
	record sandbox_vmrund_start lifecycle started "start the sandbox cases' vmrund (no judge: an error)"
fi

# ---- load --------------------------------------------------------------------
# load_round N: N runs at once, each its own record line.
load_round() {
	local i pids=()
	for i in $(seq "$1"); do
		(
			AT=$tmp/load$i. attempt -t 20 -- sh -c 'echo load; sleep 1'
			echo "$rc $ms" >"$tmp/load$i.rc"
		) &
		pids+=($!)
	done
	wait "${pids[@]}"
	for i in $(seq "$1"); do
		read -r rc ms <"$tmp/load$i.rc"
		cp "$tmp/load$i.out" "$tmp/out"
		cp "$tmp/load$i.err" "$tmp/err"
		record "load_$round.$i" load completed "one of $1 runs at once ($SLOTS slots, 4x), round $round"
	done
}
round=1
load_round $((4 * SLOTS))
if [ "$profile" = full ]; then
	end=$(( $(date +%s) + LOAD_S ))
	while [ "$(date +%s)" -lt $end ]; do
		round=$((round + 1))
		load_round $((4 * SLOTS))
	done
	for i in $(seq "$TIMEOUT_RUNS"); do
		attempt -t 2 -- sleep 100
		record "timeout_$i" limits stopped "sleep 100 under a 2 s limit (destruction-time sample $i)"
	done
fi
echo "eval ($profile): $(wc -l <"$cases") cases recorded in $cases"
