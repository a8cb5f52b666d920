#!/usr/bin/env python3
"""A stand-in for vmrund-worker in the scheduler and API tests: the same
contract (host/vmrund/spool.h: RUN_DIR/request.json in; output records and
result.json out; SIGTERM cancels) with no VM, so that queueing, fairness,
cancellation and restarts are tested in seconds on any machine. It runs
nothing of the request: argv ["sleep", "S"] sleeps S seconds, ["echo",
...] writes its words, ["say", ...] says them on stderr as the real
worker says what went wrong; the result says what it did. The real worker is
tested by tests/vmrund/vm.sh. It keeps the gate too: it asks vmrund
before the "command" starts, and only then writes its line to
standin.log, so the cluster test can count how often each run started.
argv ["boot", "S", ...] spends S seconds "booting" before the gate.
argv ["artifacts", PATH, TEXT, ...] leaves each TEXT at PATH under the
run's artifacts/ when the request keeps artifacts, and lists them in the
result as the real worker does (the guest chooses such names: the tar
endpoint's test gives it the longest ones allowed)."""
import base64, json, os, select, signal, socket, struct, sys, time

run_dir = sys.argv[1]
req = json.load(open(os.path.join(run_dir, "request.json")))
argv = req.get("argv") or ["echo", "source"]
_f = (req.get("files") or [{}])[0]
if not req.get("argv") and _f.get("encoding") == "base64" and \
        base64.b64decode(_f.get("content", "")).startswith(b"standin:"):
    argv = ["program"]   # a stand-in program: standin_program() below
out = os.open(os.path.join(run_dir, "output"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

cancelled = False
def on_term(sig, frame):
    global cancelled
    cancelled = True
signal.signal(signal.SIGTERM, on_term)

# "booting": argv ["boot", S, ...] waits S seconds first, then the rest
if argv[0] == "boot":
    end = time.time() + float(argv[1])
    while time.time() < end and not cancelled:
        time.sleep(0.02)
    argv = argv[2:] or ["echo"]

# The gate (host/vmrund/spool.h): may the command start?
gate = socket.socket(fileno=3)
go = False
if not cancelled:
    gate.send(b"command")
    while not cancelled:
        if select.select([gate], [], [], 0.05)[0]:
            go = gate.recv(16) == b"go"
            break
if not go:
    cancelled = True
else:
    # a marker for the tests: the command started here, and when
    with open(os.path.join(run_dir, "..", "..", "standin.log"), "a") as log:
        log.write("%s %s %.3f %s\n" % (os.path.basename(run_dir), os.getpid(), time.time(),
                                        os.path.basename(os.path.dirname(os.path.abspath(run_dir)))))

def emit(text, stream=4):
    data = text.encode()
    os.write(out, struct.pack("<BBHI", 2, stream, 0, len(data)) + data)

t0 = time.time()
stdout = ""
artifacts = []
if cancelled:
    pass
elif argv[0] == "sleep":
    end = t0 + float(argv[1])
    while time.time() < end and not cancelled:
        time.sleep(0.02)
elif argv[0] == "echo":
    stdout = " ".join(argv[1:]) + "\n"
    emit(stdout)
    emit("to stderr\n", 5)
elif argv[0] == "artifacts":
    for path, text in zip(argv[1::2], argv[2::2]):
        if req.get("keep_artifacts"):
            full = os.path.join(run_dir, "artifacts", path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as f:
                f.write(text)
        artifacts.append({"path": path, "size": len(text.encode())})
elif argv[0] == "nul":
    stdout = "a\0b"
    emit(stdout)
elif argv[0] == "say":
    # what the real worker says on its stderr (worker.log), e.g. a guest
    # console's tail; vmrund relays it into its own log
    print(" ".join(argv[1:]), file=sys.stderr, flush=True)
ms = int((time.time() - t0) * 1000)
result = {
    "run_id": "0" * 32, "termination": "signaled" if cancelled else "exited",
    "exit_code": None if cancelled else 0, "signal": "SIGKILL" if cancelled else None,
    "timed_out": False, "stdout": stdout, "stderr": "to stderr\n" if argv[0] == "echo" else "",
    # decided by the run, as the run library's result_outcome decides it
    "outcome": {"state": "failed" if cancelled else "succeeded", "limits_hit": []},
    "stdout_truncated": False, "stderr_truncated": False,
    "usage": {"cpu_ms": 0, "max_rss_kib": 0},
    "durations_ms": {"prepare": 0, "boot": 0, "run": ms, "teardown": 0, "extract": 0, "total": ms},
    "artifacts": artifacts, "artifacts_skipped": [], "message": "stand-in worker",
}
if argv[0] == "message":
    result["message"] = argv[1]


def standin_program():
    """The source's "standin:" JSON: compile_error (the compiler's
    output: the compile stage fails), stdout, stderr, echo_stdin, exit_code,
    signal, timed_out, cpu_time_exceeded, sleep (seconds first), oom_killed, stdout_truncated,
    cpu_ms, max_rss_kib, duration_ms, termination and message (a run the VM
    failed). None when the source is no such program."""
    files = req.get("files") or []
    if req.get("argv") or not files:
        return None
    f = files[0]
    text = base64.b64decode(f["content"]) if f.get("encoding") == "base64" else f["content"].encode()
    if not text.startswith(b"standin:"):
        return None
    return json.loads(text[8:])


def stage(p, compile_stage):
    """One stage's object as the run library writes it."""
    failed = compile_stage and "compile_error" in p
    out = p["compile_error"] if failed else "" if compile_stage else p.get("stdout", "")
    if not compile_stage and p.get("echo_stdin"):
        out = base64.b64decode(req.get("stdin", "")).decode(errors="replace")
    err = "" if compile_stage else p.get("stderr", "")
    sig = None if compile_stage else p.get("signal")
    timed_out = not compile_stage and p.get("timed_out", False)
    code = 1 if failed else None if sig or timed_out else 0 if compile_stage else p.get("exit_code", 0)
    kind = 1 if compile_stage else 2
    end = time.time() + (0 if compile_stage else p.get("sleep", 0))
    while time.time() < end and not cancelled:
        time.sleep(0.02)
    if out:
        os.write(out_fd, struct.pack("<BBHI", kind, 4, 0, len(out.encode())) + out.encode())
    if err:
        os.write(out_fd, struct.pack("<BBHI", kind, 5, 0, len(err.encode())) + err.encode())
    return {
        "termination": "timeout" if timed_out else "signaled" if sig else "exited",
        "exit_code": code, "signal": sig, "timed_out": timed_out, "stdout": out, "stderr": err,
        "stdout_truncated": not compile_stage and p.get("stdout_truncated", False), "stderr_truncated": False,
        "oom_killed": not compile_stage and p.get("oom_killed", False),
        "cpu_time_exceeded": not compile_stage and p.get("cpu_time_exceeded", False),
        "duration_ms": p.get("duration_ms", 5),
        "usage": {"cpu_ms": 0 if compile_stage else p.get("cpu_ms", 1),
                  "max_rss_kib": 0 if compile_stage else p.get("max_rss_kib", 2048)},
    }


out_fd = out
program = None if cancelled else standin_program()
if program is not None:
    comp = stage(program, True) if "compile_error" in program or program.get("compiles") else None
    run = None if comp and "compile_error" in program else stage(program, False)
    final = run or comp
    term = program.get("termination") or ("compile_error" if run is None else final["termination"])
    result.update({k: final[k] for k in ("exit_code", "signal", "timed_out", "stdout", "stderr",
                                         "stdout_truncated", "stderr_truncated", "usage")})
    result.update({"termination": term, "compile": comp, "run": run,
                   "message": program.get("message", ""),
                   "outcome": {"state": "succeeded" if term == "exited" and final["exit_code"] == 0 else
                               "timed_out" if term == "timeout" else "failed", "limits_hit": []}})
with open(os.path.join(run_dir, "result.json.tmp"), "w") as f:
    json.dump(result, f)
os.rename(os.path.join(run_dir, "result.json.tmp"), os.path.join(run_dir, "result.json"))
