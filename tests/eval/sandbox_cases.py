#!/usr/bin/env python3
"""The evaluation's sandbox attempts (tests/eval/run.sh runs this; it
judges nothing). Each case writes what it observed into OUT/CASE.json:
{"ms": wall time, "facts": {...}, "result": the sandbox's last view}.

  sandbox_cases.py OUT BASE KEY_A KEY_B SUPERVISOR VMM FORGE_GUEST_DIR

BASE is a vmrund whose tenants a (KEY_A) and b (KEY_B) may each hold
sandboxes; SUPERVISOR, VMM and FORGE_GUEST_DIR start one sandbox directly
on the guest whose agent forges its file answers (tests/guest/files_forge.c).
Every request has a deadline; a case that cannot finish writes what it has.
"""
import http.client
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

OUT, BASE, KEY_A, KEY_B, SUPERVISOR, VMM, FORGE = sys.argv[1:8]


def call(key, method, path, body=None, raw=None, timeout=60):
    """(status, parsed JSON or bytes) of a request to vmrund as key."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(BASE + path, method=method, data=data,
                                 headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, text = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read()
    except OSError as e:
        return 0, str(e).encode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def write(case, t0, facts, result):
    with open(os.path.join(OUT, case + ".json"), "w") as f:
        json.dump({"ms": int((time.time() - t0) * 1000), "facts": facts, "result": result}, f)


def until_state(key, sid, states, seconds):
    end = time.time() + seconds
    while True:
        _, view = call(key, "GET", "/v1/sandboxes/" + sid)
        if not isinstance(view, dict) or view.get("state") in states or time.time() > end:
            return view if isinstance(view, dict) else None
        time.sleep(0.5)


def command(key, sid, argv, timeout_s=60, **more):
    body = dict(argv=argv, timeout_s=timeout_s, **more)
    return call(key, "POST", "/v1/sandboxes/%s/commands?wait=%d" % (sid, timeout_s + 30), body, timeout=timeout_s + 60)


def create(key, life, case, t0, facts):
    """A sandbox of key's with life seconds: its id, or None with the
    case's record written (it could not be attempted)."""
    st, a = call(key, "POST", "/v1/sandboxes", {"timeout_s": life}, timeout=200)
    if st == 201 and isinstance(a, dict):
        return a["id"]
    facts["setup"] = "sandbox: %s %s" % (st, a)
    write(case, t0, facts, None)
    return None


def other_tenant():
    """Tenant b reaches for tenant a's sandbox, its commands and files."""
    t0 = time.time()
    token = "sandbox-token-" + os.urandom(8).hex()
    facts = {"token": token, "statuses": {}, "token_seen": [], "a_after": None, "b_list": None}
    sid = create(KEY_A, 300, "sandbox_other_tenant", t0, facts)
    if not sid:
        return
    call(KEY_A, "PUT", "/v1/sandboxes/%s/files?path=secret.txt" % sid, raw=token.encode())
    st, cmd = call(KEY_A, "POST", "/v1/sandboxes/%s/commands" % sid,
                   {"argv": ["sh", "-c", "echo %s; cat" % token], "background": True, "timeout_s": 120})
    cid = str(cmd.get("id")) if isinstance(cmd, dict) else "1"
    tries = [
        ("get", "GET", "", None), ("commands", "GET", "/commands", None), ("command", "GET", "/commands/" + cid, None),
        ("events", "GET", "/commands/%s/events" % cid, None),
        ("run", "POST", "/commands?wait=30", {"argv": ["cat", "secret.txt"]}),
        ("stdin", "POST", "/commands/%s/stdin" % cid, {"data": "from b\n"}),
        ("signal", "POST", "/commands/%s/signal" % cid, {"signal": "KILL"}),
        ("read", "GET", "/files?path=secret.txt", None), ("list", "GET", "/files/list?path=.", None),
        ("stat", "GET", "/files/stat?path=secret.txt", None), ("tar", "GET", "/files/tar?path=.", None),
        ("write", "PUT", "/files?path=planted.txt", b"from b"),
        ("mkdir", "POST", "/files/mkdir", {"path": "planted"}),
        ("remove", "POST", "/files/remove", {"path": "secret.txt"}),
        ("rename", "POST", "/files/rename", {"from": "secret.txt", "to": "gone.txt"}),
        ("timeout", "POST", "/timeout", {"timeout_s": 1}), ("delete", "DELETE", "", None),
    ]
    for name, method, path, body in tries:
        raw = body if isinstance(body, bytes) else None
        st, ans = call(KEY_B, method, "/v1/sandboxes/" + sid + path, None if raw else body, raw=raw, timeout=20)
        facts["statuses"][name] = st
        if token in (json.dumps(ans) if not isinstance(ans, bytes) else ans.decode("latin-1")):
            facts["token_seen"].append(name)
    st, lst = call(KEY_B, "GET", "/v1/sandboxes")
    facts["b_list"] = [s.get("id") for s in lst.get("sandboxes", [])] if isinstance(lst, dict) else None
    # a's sandbox, as a sees it afterwards: still running, its file whole,
    # its command alive, nothing planted
    _, view = call(KEY_A, "GET", "/v1/sandboxes/" + sid)
    st, ans = command(KEY_A, sid, ["sh", "-c", "cat secret.txt; echo; ls"])
    _, c = call(KEY_A, "GET", "/v1/sandboxes/%s/commands/%s" % (sid, cid))
    facts["a_after"] = {"state": view.get("state") if isinstance(view, dict) else None,
                        "files": ans.get("stdout") if isinstance(ans, dict) else None,
                        "command": c.get("state") if isinstance(c, dict) else None}
    _, end = call(KEY_A, "DELETE", "/v1/sandboxes/" + sid, timeout=120)
    write("sandbox_other_tenant", t0, facts, end if isinstance(end, dict) else None)


ESCAPE = r'''
own=$(sed -n 's/^0:://p' /proc/self/cgroup)
echo "cgroup $own"
for g in /sys/fs/cgroup /sys/fs/cgroup/*; do
	[ -f "$g/cgroup.procs" ] && [ "$g" != "/sys/fs/cgroup$own" ] || continue
	echo $$ 2>/dev/null >"$g/cgroup.procs"; echo "move $g $?"
done
mkdir "/sys/fs/cgroup$own/child" 2>/dev/null; echo "mkdir_child $?"
setsid sh -c 'sleep 1000; : evalmark-setsid' </dev/null >/dev/null 2>&1 &
(trap "" TERM HUP INT; sh -c 'trap "" TERM HUP INT; sleep 1000; : evalmark-ignores') </dev/null >/dev/null 2>&1 &
sh -c '(sh -c "sleep 1000; : evalmark-orphan" &)' </dev/null >/dev/null 2>&1
nohup sh -c 'sleep 1000; : evalmark-nohup' </dev/null >/dev/null 2>&1 &
echo started
sleep 1000
'''
# The check names its own pattern in pieces, so that it does not find itself.
SURVIVORS = 'm=evalm; m=${m}ark; for p in /proc/[0-9]*; do grep -qs "$m" $p/cmdline && tr "\\0" " " <$p/cmdline && echo; done; echo checked'


def cgroup_escape():
    """A command leaves children behind in every way it can, and tries to
    move itself out of its guest cgroup, then its timeout kills it; the
    next commands look for anything of it still running."""
    t0 = time.time()
    facts = {}
    sid = create(KEY_A, 300, "sandbox_cgroup_escape", t0, facts)
    if not sid:
        return
    # another command's cgroup beside the escaper's, to move into
    call(KEY_A, "POST", "/v1/sandboxes/%s/commands" % sid, {"argv": ["sleep", "60"], "background": True})
    _, ran = command(KEY_A, sid, ["sh", "-c", ESCAPE], timeout_s=5)
    facts["escape"] = {k: ran.get(k) for k in ("stdout", "end", "exit_code", "signal", "timed_out")} \
        if isinstance(ran, dict) else str(ran)
    _, killed = call(KEY_A, "POST", "/v1/sandboxes/%s/commands" % sid,
                     {"argv": ["sh", "-c", ESCAPE], "background": True, "timeout_s": 300})
    time.sleep(3)
    if isinstance(killed, dict):
        call(KEY_A, "POST", "/v1/sandboxes/%s/commands/%s/signal" % (sid, killed["id"]), {"signal": "KILL"})
        facts["killed"] = until_command(sid, killed["id"])
    time.sleep(2)
    _, check = command(KEY_A, sid, ["sh", "-c", SURVIVORS])
    facts["survivors"] = check.get("stdout") if isinstance(check, dict) else None
    _, view = call(KEY_A, "GET", "/v1/sandboxes/" + sid)
    facts["state_after"] = view.get("state") if isinstance(view, dict) else None
    _, end = call(KEY_A, "DELETE", "/v1/sandboxes/" + sid, timeout=120)
    write("sandbox_cgroup_escape", t0, facts, end if isinstance(end, dict) else None)


def until_command(sid, cid, seconds=30):
    end = time.time() + seconds
    while True:
        _, c = call(KEY_A, "GET", "/v1/sandboxes/%s/commands/%s" % (sid, cid))
        if not isinstance(c, dict) or c.get("state") != "running" or time.time() > end:
            return {k: c.get(k) for k in ("state", "end", "signal", "stdout")} if isinstance(c, dict) else None
        time.sleep(0.3)


def outlives_time():
    """A sandbox with 20 s to live whose commands ignore every signal they
    can and spin: it must end at its time, with the reason."""
    t0 = time.time()
    facts = {}
    sid = create(KEY_B, 20, "sandbox_outlives_time", t0, facts)
    if not sid:
        return
    call(KEY_B, "POST", "/v1/sandboxes/%s/commands" % sid,
         {"argv": ["sh", "-c", 'trap "" TERM HUP INT; while :; do :; done'], "background": True, "timeout_s": 3600})
    call(KEY_B, "POST", "/v1/sandboxes/%s/commands" % sid,
         {"argv": ["sh", "-c", 'trap "" TERM HUP INT; setsid sh -c "trap \\"\\" TERM; sleep 100000" & sleep 100000'],
          "background": True, "timeout_s": 3600})
    # asking for more life than the tenant allows is refused
    st, _ = call(KEY_B, "POST", "/v1/sandboxes/%s/timeout" % sid, {"timeout_s": 100000})
    facts["longer_life_status"] = st
    view = until_state(KEY_B, sid, ("stopped", "lost"), 90)
    facts["seen_stopped_s"] = round(time.time() - t0, 1)
    write("sandbox_outlives_time", t0, facts, view)


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("sandbox", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def sock_call(sock, method, path, body=None, timeout=60):
    """(status, parsed JSON or bytes, body size) of a request to a
    supervisor's socket; (0, why, 0) when it did not answer in time."""
    c = UnixConnection(sock, timeout)
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = b""
        try:
            while len(data) < (16 << 20):
                piece = r.read(65536)
                if not piece:
                    break
                data += piece
        except (OSError, http.client.HTTPException) as e:
            return r.status, "cut: %s" % e.__class__.__name__, len(data)
        try:
            return r.status, json.loads(data), len(data)
        except ValueError:
            return r.status, data[:64].hex(), len(data)
    except (OSError, http.client.HTTPException) as e:
        return 0, str(e), 0
    finally:
        c.close()


def forged_files():
    """A sandbox on the forging guest: its answers to listings, stats and
    a read break every rule the host holds them to."""
    t0 = time.time()
    d = os.path.join(OUT, "forge-sandbox")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "request.json"), "w") as f:
        f.write("{}")
    log = open(os.path.join(OUT, "forge-supervisor.log"), "w")
    p = subprocess.Popen([SUPERVISOR, "--timeout", "300", d, VMM, FORGE, ""], stdout=log, stderr=log)
    sock = os.path.join(d, "api.sock")
    facts = {"answers": {}}
    for _ in range(600):
        if os.path.exists(sock):
            break
        time.sleep(0.1)
    st, view, _ = sock_call(sock, "GET", "/?wait=120", timeout=150)
    if st != 200 or not isinstance(view, dict) or view.get("state") != "running":
        facts["setup"] = "the forging sandbox did not start: %s %s" % (st, view)
        p.kill()
        p.wait()
        return write("sandbox_forged_files", t0, facts, None)
    before = view.get("guest_faults")
    for name, path in (("list", "/files/list?path=forge-list"), ("names", "/files/list?path=forge-names"),
                       ("stat", "/files/stat?path=forge-stat"), ("stat_name", "/files/stat?path=forge-stat-name"),
                       ("read", "/files?path=forge-read")):
        a0 = time.time()
        st, ans, n = sock_call(sock, "GET", path, timeout=60)
        if isinstance(ans, dict) and "entries" in ans:
            names = [e.get("name") for e in ans["entries"]]
            ans = {"entries": len(names), "truncated": ans.get("truncated"),
                   "bad_names": [x for x in names if "/" in x or x in (".", "..")][:5]}
        facts["answers"][name] = {"status": st, "answer": ans, "bytes": n, "ms": int((time.time() - a0) * 1000)}
    _, alive, _ = sock_call(sock, "POST", "/commands?wait=60", {"argv": ["echo", "alive"]}, timeout=90)
    facts["command_after"] = alive.get("stdout") if isinstance(alive, dict) else str(alive)
    _, view, _ = sock_call(sock, "GET", "/")
    facts["guest_faults"] = [before, view.get("guest_faults") if isinstance(view, dict) else None]
    facts["supervisor_rss_kib"] = rss_kib(p.pid)
    _, end, _ = sock_call(sock, "DELETE", "/", timeout=120)
    try:
        facts["supervisor_exit"] = p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        facts["supervisor_exit"] = "still running after DELETE"
        p.wait()
    log.close()
    with open(os.path.join(OUT, "forge-supervisor.log")) as f:
        facts["faults_logged"] = [line.strip() for line in f if "refused a" in line and "from the guest" in line][:8]
    write("sandbox_forged_files", t0, facts, end if isinstance(end, dict) else None)


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration, ValueError):
        return None


for case in (other_tenant, cgroup_escape, outlives_time, forged_files):
    try:
        case()
    except Exception as e:   # a case that broke says so in its record; the next still runs
        write("sandbox_" + case.__name__, time.time(), {"setup": "%s: %s" % (e.__class__.__name__, e)}, None)
