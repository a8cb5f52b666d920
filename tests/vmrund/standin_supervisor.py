#!/usr/bin/python3
"""A stand-in for vmrund-sandbox (host/sandbox/supervisor.h), for the
tests of vmrund's side of sandboxes that need no VM (tests/vmrund/
cluster.sh): the same arguments, the same state.json, the same API on
DIR/api.sock, with "commands" that it answers itself, given as argv or
as bash's -c script (what E2B's SDK sends): `echo TEXT` prints TEXT
(`>&2` at its end: to stderr), `exit N` exits N, `cat` echoes its stdin
until it is closed, `sleep S` waits S seconds; anything else exits 0
with no output. A command past its timeout_s is killed (timed_out), and
a signal ends one that runs. Files and directories are kept in memory,
under absolute paths (relative ones under /workspace).
Its life runs out as the real one's does (with --on-timeout pause it
pauses then, and with --shared it parks); SIGTERM and DELETE stop it.

    standin_supervisor.py [--timeout S] [--max-timeout S] [--on-timeout stop|pause] [--pause-ttl S]
                          DIR VMM GUEST POLICY

A pause is a state only: paused until /resume; with --shared SHARED (a
snapshot_dir's sandboxes/ID) it parks instead: its files and command
count go to SHARED/paused/standin.json (its SHA-256 in sandbox.sum, as
the real one's table), state.json says paused (its
pause_ttl_s's end as timeout_at_ms) and it exits. --from-paused
SHARED/paused starts it from there ("resuming", then "running"); a
missing or damaged one ends it failed, with the reason. POST
/checkpoints {"name"} keeps its files in KEEP/checkpoints/NAME (KEEP:
SHARED, else DIR) with a checkpoint.json, listed by GET /checkpoints and
deleted by DELETE /checkpoints/NAME; --from-checkpoint starts from one.
GET / says a usage (10 ms of CPU a command, 64 MiB, the files' bytes).
"""
import argparse
import base64
import hashlib
import http.server
import json
import os
import posixpath
import shutil
import signal
import socketserver
import sys
import threading
import time
import urllib.parse

p = argparse.ArgumentParser()
p.add_argument("--timeout", type=float, default=300)
p.add_argument("--max-timeout", type=float, default=0)
p.add_argument("--on-timeout", choices=["stop", "pause"], default="stop")
p.add_argument("--pause-ttl", type=float, default=0)
p.add_argument("--max-checkpoints", type=int, default=16)
p.add_argument("--max-checkpoint-mib", type=int, default=16384)
p.add_argument("--shared")
p.add_argument("--from-paused")
p.add_argument("--resume-timeout", type=float, default=0)
p.add_argument("--from-checkpoint")
p.add_argument("--owner")
p.add_argument("dir")
p.add_argument("vmm")
p.add_argument("guest")
p.add_argument("policy")
a = p.parse_args()
os.setsid()
lock = threading.Lock()
st = {"state": "starting", "reason": "", "deadline": time.time() + a.timeout}
cmds, keys, files = [], {}, {}
dirs = {"/", "/workspace", "/tmp"}
cv = threading.Condition(lock)
live = {}   # a command's id: its stdin waiting and the signal sent to it, while it runs


def norm(p):
    return posixpath.normpath(p if p.startswith("/") else "/workspace/" + p)


def script_of(argv):
    if argv == ["/bin/bash", "-i", "-l"]:
        return "interactive"   # E2B's pty.create: a shell that reads its terminal
    if len(argv) == 4 and argv[:3] == ["/bin/bash", "-l", "-c"]:
        return argv[3]
    if len(argv) == 3 and argv[:2] == ["/bin/bash", "-c"]:
        return argv[2]
    return " ".join(argv) if argv[:1] == ["echo"] else ""


def run_cmd(c):
    """Command c's life, in a thread of its own (c's fields under lock)."""
    script, me = script_of(c["request"].get("argv") or []), live[c["id"]]
    end_at = time.time() + float(c["request"].get("timeout_s") or 60)
    words, code = script.split(), 0

    def out(stream, text):
        with cv:
            c[stream] += text
            cv.notify_all()

    def wait(until, more=lambda: False):
        # until a signal, the timeout, the time given, or more() says so
        with cv:
            while not me["signal"] and not more() and time.time() < min(end_at, until):
                cv.wait(0.05)
    if words[:1] == ["echo"] and script.endswith(" >&2"):
        out("stderr", script[5:-4] + "\n")
    elif words[:1] == ["echo"]:
        out("stdout", script[5:] + "\n")
    elif words[:1] == ["exit"] and len(words) == 2:
        code = int(words[1])
    elif script == "cat":
        while True:
            wait(float("inf"), lambda: me["stdin"] or me["closed"])
            with cv:
                data, me["stdin"] = me["stdin"], ""
            if data:
                out("stdout", data)
            elif me["closed"] or me["signal"] or time.time() >= end_at:
                break
    elif words[:1] == ["sleep"] and len(words) == 2:
        wait(time.time() + float(words[1]))
    elif script == "interactive":
        # each line typed runs: "stty size", "echo TEXT" and "exit N" as above, the rest echoed
        line = ""
        while True:
            wait(float("inf"), lambda: me["stdin"] or me["closed"])
            with cv:
                data, me["stdin"] = me["stdin"], ""
            if not data and (me["closed"] or me["signal"] or time.time() >= end_at):
                break
            out("stdout", data.replace("\r", "\r\n"))   # the terminal's echo
            line += data.replace("\r", "\n")
            done = False
            while "\n" in line:
                cmd, line = line.split("\n", 1)
                if "get_terminal_size" in cmd:
                    pty = c["request"].get("pty") or {}
                    out("stdout", me.get("size") or "%d %d\n" % (pty.get("rows", 0), pty.get("cols", 0)))
                elif cmd.startswith("echo "):
                    out("stdout", cmd[5:] + "\n")
                elif cmd.startswith("exit"):
                    code, done = int(cmd[4:] or 0), True
            if done:
                break
    elif script == "stty size":
        pty = c["request"].get("pty") or {}
        out("stdout", me.get("size") or "%d %d\n" % (pty.get("rows", 0), pty.get("cols", 0)))
    with cv:
        timed_out = not me["signal"] and time.time() >= end_at
        sig = me["signal"] or (9 if timed_out else 0)
        c.update(state="ended", end="signaled" if sig else "exited", exit_code=None if sig else code,
                 signal=sig or None, timed_out=timed_out)
        live.pop(c["id"], None)
        cv.notify_all()


def save(state, reason=None):
    st["state"] = state
    if reason is not None:
        st["reason"] = reason
    doc = {"state": state, "reason": st["reason"], "pid": os.getpid(),
           "timeout_at_ms": int(st["deadline"] * 1000)}
    tmp = os.path.join(a.dir, "state.json.tmp")
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.rename(tmp, os.path.join(a.dir, "state.json"))


def stop(reason):
    with lock:
        if st["state"] != "stopped":
            save("stopped", reason)
    threading.Timer(0.2, lambda: os._exit(0)).start()


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, code, body, ctype="application/json"):
        data = body if isinstance(body, bytes) else (json.dumps(body) + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def where(self):
        u = urllib.parse.urlsplit(self.path)
        return u.path, urllib.parse.parse_qs(u.query)

    def view(self):
        # usage as the real one reads it from its cgroup and workspace
        used = sum(len(v) for v in files.values())
        return {"id": "standin", "state": st["state"], "reason": st["reason"], "commands": len(cmds),
                "commands_running": 0, "guest_faults": 0,
                "time_left_s": max(0.0, st["deadline"] - time.time()),
                "usage": {"cpu_ms": 10 * len(cmds), "memory_bytes": 64 << 20, "memory_peak_bytes": 64 << 20,
                          "disk_bytes": used}}

    def do_GET(self):
        path, q = self.where()
        if path == "/":
            return self.answer(200, self.view())
        if path == "/checkpoints":
            d = os.path.join(a.shared or a.dir, "checkpoints")
            names = sorted(n for n in (os.listdir(d) if os.path.isdir(d) else [])
                           if os.path.exists(os.path.join(d, n, "checkpoint.json")))
            return self.answer(200, {"checkpoints": [{"name": n, "complete": True} for n in names]})
        if path == "/files":
            name = norm(q.get("path", [""])[0])
            if name not in files:
                return self.answer(404, {"message": "no such file"})
            return self.answer(200, files[name], "application/octet-stream")
        parts = path.strip("/").split("/")
        if len(parts) >= 2 and parts[0] == "commands" and parts[1].isdigit() and 0 < int(parts[1]) <= len(cmds):
            c = cmds[int(parts[1]) - 1]
            if len(parts) == 3 and parts[2] == "events":
                return self.events(c)
            with lock:
                return self.answer(200, dict(c))
        if path == "/commands":
            with lock:
                return self.answer(200, {"commands": [dict(c) for c in cmds]})
        if path in ("/files/stat", "/files/list"):
            return self.file_read(path[7:], norm(q.get("path", [""])[0]))
        return self.answer(404, {"message": "no such endpoint"})

    def do_DELETE(self):
        path, _ = self.where()
        if path.startswith("/checkpoints/"):
            d = os.path.join(a.shared or a.dir, "checkpoints", os.path.basename(path))
            if not os.path.exists(os.path.join(d, "checkpoint.json")):
                return self.answer(404, {"message": "no such checkpoint"})
            shutil.rmtree(d)
            return self.answer(200, {"name": os.path.basename(path)})
        self.answer(202, dict(self.view(), state="stopping"))
        stop("deleted")

    def do_POST(self):
        path, _ = self.where()
        raw = self.body()
        try:
            b = json.loads(raw or b"{}")
        except ValueError:
            return self.answer(400, {"message": "malformed JSON"})
        if path == "/timeout":
            with lock:
                st["deadline"] = time.time() + float(b["timeout_s"])
                save(st["state"])
            return self.answer(200, self.view())
        if path == "/pause" and a.shared:
            with lock:
                if st["state"] != "running":
                    return self.answer(409, {"message": "the sandbox is not running"})
                if not ours():
                    return self.answer(409, {"message": "another node holds this sandbox now"})
                park()
            self.answer(200, self.view())
            threading.Timer(0.2, lambda: os._exit(0)).start()
            return
        if path == "/checkpoints":
            name = b.get("name", "")
            d = os.path.join(a.shared or a.dir, "checkpoints", name)
            with lock:
                os.makedirs(d)
                keep(d)
                with open(os.path.join(d, "checkpoint.json"), "w") as f:
                    json.dump({"name": name, "created_ms": int(time.time() * 1000), "bytes": 1, "next_cmd": 1}, f)
            return self.answer(201, {"name": name})
        if path in ("/pause", "/resume"):
            with lock:
                want, then = ("running", "paused") if path == "/pause" else ("paused", "running")
                if st["state"] != want:
                    return self.answer(409, {"message": "the sandbox is not " + want})
                if path == "/resume" and st.get("timed_out"):
                    # paused by its timeout: a life anew
                    st["timed_out"] = False
                    st["deadline"] = time.time() + (b.get("timeout_s") or a.timeout)
                save(then)
            return self.answer(200, self.view())
        if path == "/commands":
            key = self.headers.get("Idempotency-Key")
            with lock:
                if key in keys:
                    return self.answer(200, cmds[keys[key] - 1])
                c = {"id": len(cmds) + 1, "request": b, "state": "running", "end": None, "exit_code": None,
                     "signal": None, "timed_out": False, "stdout": "", "stderr": ""}
                cmds.append(c)
                live[c["id"]] = {"stdin": b.get("stdin") or "", "closed": not b.get("background"), "signal": 0}
                if key:
                    keys[key] = c["id"]
            t = threading.Thread(target=run_cmd, args=(c,), daemon=True)
            t.start()
            if not b.get("background"):
                t.join()
            with lock:
                return self.answer(201, dict(c))
        parts = path.strip("/").split("/")
        if len(parts) == 3 and parts[0] == "commands" and parts[1].isdigit() and parts[2] in ("stdin", "signal", "resize"):
            with cv:
                if not 0 < int(parts[1]) <= len(cmds):
                    return self.answer(404, {"message": "no such command"})
                me = live.get(int(parts[1]))
                if parts[2] == "resize":
                    # a terminal's size: the stand-in keeps the last one, which "stty size" says
                    if not me or "pty" not in cmds[int(parts[1]) - 1]["request"]:
                        return self.answer(409, {"message": "no terminal, or it has ended"})
                    me["size"] = "%d %d\n" % (b.get("rows", 0), b.get("cols", 0))
                    return self.answer(200, {"ok": True})
                if not me or (parts[2] == "stdin" and me["closed"]):
                    return self.answer(409, {"message": "the command has ended, or its stdin is closed"})
                if parts[2] == "stdin":
                    me["stdin"] += b.get("data") or ""
                    me["closed"] = bool(b.get("close"))
                else:
                    me["signal"] = int(b.get("signal") or 15)
                cv.notify_all()
            return self.answer(202 if parts[2] == "signal" else 200, {"ok": True})
        if path in ("/files/mkdir", "/files/remove", "/files/rename"):
            return self.file_change(path[7:], b)
        return self.answer(404, {"message": "no such endpoint"})

    def do_PUT(self):
        path, q = self.where()
        if path != "/files":
            return self.answer(404, {"message": "no such endpoint"})
        data = self.body()
        name = norm(q.get("path", [""])[0])
        with lock:
            if name in dirs:
                return self.answer(400, {"message": "a directory"})
            files[name] = data
            d = posixpath.dirname(name)
            while d not in dirs:
                dirs.add(d)
                d = posixpath.dirname(d)
        return self.answer(200, {"path": q.get("path", [""])[0], "size": len(data)})

    def events(self, c):
        """The command's output as it comes, then its exit: the real one's SSE."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        sent = {"stdout": 0, "stderr": 0}
        while True:
            with cv:
                while c["state"] != "ended" and all(len(c[k]) == sent[k] for k in sent):
                    cv.wait(0.5)
                chunks = [(k, c[k][sent[k]:]) for k in sent if len(c[k]) > sent[k]]
                for k, _ in chunks:
                    sent[k] = len(c[k])
                ended = c["state"] == "ended" and all(len(c[k]) == sent[k] for k in sent)
                end = dict(c)
            text = "".join("event: %s\ndata: %s\n\n" % (k, json.dumps({"stage": "run", "text": t})) for k, t in chunks)
            if ended:
                text += "event: exit\ndata: %s\n\n" % json.dumps(end)
            try:
                self.wfile.write(text.encode())
                self.wfile.flush()
            except OSError:
                return
            if ended:
                return

    def entry(self, p):
        is_dir = p in dirs
        return {"name": posixpath.basename(p) or "/", "type": "dir" if is_dir else "file",
                "size": 4096 if is_dir else len(files[p]), "mode": "0755" if is_dir else "0644",
                "mtime": "2026-12-07T00:00:00.000Z"}

    def file_read(self, op, p):
        with lock:
            if p not in dirs and p not in files:
                return self.answer(404, {"message": "no such file or directory"})
            if op == "stat":
                return self.answer(200, self.entry(p))
            if p not in dirs:
                return self.answer(400, {"message": "not a directory"})
            kids = sorted(k for k in dirs | set(files) if k != p and posixpath.dirname(k) == p)
            return self.answer(200, {"entries": [self.entry(k) for k in kids], "truncated": False})

    def file_change(self, op, b):
        with lock:
            p = norm(b.get("from" if op == "rename" else "path") or "")
            if op == "mkdir":
                if p in files:
                    return self.answer(409, {"message": "a file is there"})
                while p not in dirs:
                    dirs.add(p)
                    p = posixpath.dirname(p)
                return self.answer(200, {"ok": True})
            if p not in dirs and p not in files:
                return self.answer(404, {"message": "no such file or directory"})
            under = [k for k in dirs | set(files) if k == p or k.startswith(p + "/")]
            to = norm(b.get("to") or "") if op == "rename" else None
            for k in under:
                moved = to + k[len(p):] if to else None
                if k in files:
                    data = files.pop(k)
                    if moved:
                        files[moved] = data
                else:
                    dirs.discard(k)
                    if moved:
                        dirs.add(moved)
            return self.answer(200, {"ok": True})


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def keep(d):
    doc = {"files": {k: base64.b64encode(v).decode() for k, v in files.items()}, "cmds": cmds,
           "left": max(0.0, st["deadline"] - time.time())}
    text = json.dumps(doc).encode()
    with open(os.path.join(d, "standin.json"), "wb") as f:
        f.write(text)
    # the sum vmrund looks for (run_pause.h's RUN_PARKED_SUM): parked whole
    with open(os.path.join(d, "sandbox.sum"), "w") as f:
        f.write(hashlib.sha256(text).hexdigest() + "\n")


def ours():
    """Whether the snapshot dir's owner token is still ours (run_pause.h)."""
    try:
        with open(os.path.join(a.shared, "owner")) as f:
            return not a.owner or f.read() == a.owner
    except OSError:
        return not a.owner


def park():
    d = os.path.join(a.shared, "paused")
    os.makedirs(d, exist_ok=True)
    keep(d)
    st["deadline"] = time.time() + a.pause_ttl if a.pause_ttl else 0
    save("paused", "parked: any node of the cluster may resume it")


def unpark():
    try:
        with open(os.path.join(a.from_paused or a.from_checkpoint, "standin.json")) as f:
            doc = json.load(f)
        files.update({k: base64.b64decode(v) for k, v in doc["files"].items()})
        cmds.extend(doc["cmds"])
        st["deadline"] = time.time() + (a.resume_timeout or (a.from_paused and doc["left"]) or a.timeout)
    except (OSError, ValueError, KeyError) as e:
        save("failed", "the parked sandbox cannot be read: %s" % e.__class__.__name__)
        sys.exit(1)


signal.signal(signal.SIGTERM, lambda *_: stop("the supervisor was told to stop (SIGTERM)"))
with lock:
    save("resuming" if a.from_paused else "starting", "")
    if a.from_paused or a.from_checkpoint:
        unpark()
srv = Server(os.path.join(a.dir, "api.sock"), Handler)
with lock:
    save("running")
threading.Thread(target=srv.serve_forever, daemon=True).start()
while True:
    time.sleep(0.1)
    if st["deadline"] and time.time() > st["deadline"]:
        if a.on_timeout == "pause" and a.shared:
            with lock:
                park()
            os._exit(0)
        if st.get("timed_out"):
            stop("it stayed paused longer than its pause_ttl_s")
            continue
        if a.on_timeout == "pause":
            # paused where it is, as the real one pauses on its node
            with lock:
                st["deadline"] = time.time() + a.pause_ttl if a.pause_ttl else 0
                st["timed_out"] = True
                save("paused", "its time ran out (timeout_s): paused")
            continue
        stop("its time ran out (timeout_s)")
