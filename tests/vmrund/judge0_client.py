#!/usr/bin/env python3
"""Judge0's clients, done against vmrund's Judge0 API (docs/judge0.md).

No Judge0 client can be installed here (npm has none; the official Python
SDK, judge0/judge0-python, needs pydantic 2 and httpx 0.28, newer than
Debian 12's), so this does what that SDK does, call for call: on
construction GET /languages, /config_info (every key, typed as Judge0
types it) and /about (its version); then submissions with
base64_encoded=true, wait=true and fields=*, and a batch. Then the API's
own cases.

usage: judge0_client.py BASE_URL KEY MODE [OTHER_KEY]
  BASE_URL  vmrund's address and its judge0_prefix (http://host:port/judge0)
  MODE      standin: against tests/vmrund/standin_worker.py, whose
            "standin:" programs end as told (every status, every field,
            every error, no VM); vm: real programs on real VMs (every
            status from what a program does)
  OTHER_KEY another tenant's key: its submissions are not ours
Prints "ok - ..." / "not ok - ..." lines; exits 1 when any failed."""
import base64, io, json, sys, time, urllib.error, urllib.request, zipfile

BASE, KEY, MODE = sys.argv[1], sys.argv[2], sys.argv[3]
OTHER = sys.argv[4] if len(sys.argv) > 4 else None
failed = 0


def check(name, cond, detail=""):
    global failed
    if cond:
        print("ok - " + name)
    else:
        failed += 1
        print("not ok - " + name)
        if detail:
            print("    " + str(detail)[:1500].replace("\n", "\n    "))
    sys.stdout.flush()


def call(method, path, body=None, key=KEY, headers=None, timeout=280):
    """(status, JSON or text) of one request; X-Auth-Token as Judge0's
    clients send their key."""
    h = {"Content-Type": "application/json"} if body is not None else {}
    if key:
        h["X-Auth-Token"] = key
    h.update(headers or {})
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    req = urllib.request.Request(BASE + path, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            code, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        code, raw = e.code, e.read()
    try:
        return code, json.loads(raw)
    except ValueError:
        return code, raw.decode(errors="replace")


def native_run(token):
    """The submission as vmrund's native API shows it: GET /v1/runs/ID,
    ID the token without its dashes, under the same key."""
    root = BASE.rsplit("/", 1)[0]
    req = urllib.request.Request(root + "/v1/runs/" + token.replace("-", ""),
                                 headers={"Authorization": "Bearer " + KEY})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())
    except (urllib.error.URLError, ValueError) as e:
        return {"error": str(e)}


def made_of(token):
    """(runs made, runs asked) of a repeated run, as the native run says."""
    rep = native_run(token).get("repeat") or {}
    return rep.get("made"), rep.get("asked")


def encode64(data):
    """Ruby's Base64.encode64: 60 characters a line, each line ended."""
    if isinstance(data, str):
        data = data.encode()
    return "".join(base64.b64encode(data[i:i + 45]).decode() + "\n" for i in range(0, len(data), 45))


def zip_of(files):
    """A zip of {name: text or (text, mode)}, as Judge0's clients send
    additional_files (mode 0o644 when not given)."""
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            data, mode = data if isinstance(data, tuple) else (data, 0o644)
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return b.getvalue()


def decode64(text):
    return base64.b64decode("".join(text.split())) if text is not None else None


def status_of(j):
    return j.get("status", {}).get("id") if isinstance(j, dict) else None


# ---- what the official SDK does on construction ----------------------------

code, langs = call("GET", "/languages")
check("GET /languages: our runtimes under Judge0's ids", code == 200 and
      {71, 50}.issubset({l["id"] for l in langs}) and all(set(l) == {"id", "name"} for l in langs), langs)
code, cfg = call("GET", "/config_info")
types = {
    bool: "maintenance_mode enable_wait_result enable_compiler_options enable_command_line_arguments "
          "enable_submission_delete enable_callbacks enable_additional_files "
          "enable_per_process_and_thread_time_limit allow_enable_per_process_and_thread_time_limit "
          "enable_per_process_and_thread_memory_limit allow_enable_per_process_and_thread_memory_limit "
          "redirect_stderr_to_stdout enable_batched_submissions use_docs_as_homepage allow_enable_network "
          "enable_network disable_implicit_base64_encoding",
    int: "callbacks_max_tries max_queue_size memory_limit max_memory_limit stack_limit max_stack_limit "
         "max_processes_and_or_threads max_max_processes_and_or_threads max_file_size max_max_file_size "
         "number_of_runs max_number_of_runs max_extract_size max_submission_batch_size",
    float: "callbacks_timeout cpu_time_limit max_cpu_time_limit cpu_extra_time max_cpu_extra_time "
           "wall_time_limit max_wall_time_limit submission_cache_duration",
    list: "allowed_languages_for_compile_options",
}
want = {k: t for t, ks in types.items() for k in ks.split()}
check("GET /config_info: every key Judge0 1.13.1 has, typed as it types them",
      code == 200 and set(cfg) == set(want) and
      all(type(cfg[k]) is t for k, t in want.items()), cfg)
code, about = call("GET", "/about")
check("GET /about: version 1.13.1", code == 200 and about.get("version") == "1.13.1", about)

if MODE == "standin":
    def prog(**kw):
        return "standin:" + json.dumps(kw)
    hello = prog(stdout="hello world\n", cpu_ms=1234, max_rss_kib=3456, duration_ms=2100)
    echo = prog(echo_stdin=True)
else:
    hello = 'print("hello world")'
    echo = "print(input())"

# ---- the SDK's submissions: base64, wait, fields=* ---------------------------

code, j = call("POST", "/submissions?base64_encoded=true&wait=true&fields=*",
               {"source_code": encode64(hello), "language_id": 71, "expected_output": encode64("hello world")})
check("POST /submissions?base64_encoded=true&wait=true&fields=*: 201, Accepted, all 40 fields",
      code == 201 and status_of(j) == 3 and len(j) == 40 and j["status"]["description"] == "Accepted", (code, j))
if isinstance(j, dict) and code == 201:
    check("base64 out as Ruby writes it (line ends, 60 a line)", j["stdout"] == encode64("hello world\n") and
          j["source_code"] == encode64(hello), (j["stdout"], j["source_code"]))
    check("the language, the token as a UUID, times as Judge0's decimal strings",
          j["language"]["id"] == 71 and j["language"]["name"].startswith("Python (") and
          len(j["token"]) == 36 and j["token"].count("-") == 4 and isinstance(j["time"], str) and
          isinstance(j["wall_time"], str) and isinstance(j["memory"], int) and
          j["cpu_time_limit"] == "5.0" and j["memory_limit"] == 128000 and j["exit_code"] == 0 and
          j["created_at"].endswith("Z") and j["finished_at"] is not None, j)
    if MODE == "standin":
        check("time, wall time and memory from the run's usage", j["time"] == "1.234" and
              j["wall_time"] == "2.1" and j["memory"] == 3456, j)
    tok = j["token"]
    code, k = call("GET", "/submissions/%s?base64_encoded=false" % tok)
    check("GET /submissions/TOKEN: Judge0's default fields, texts as they are",
          code == 200 and set(k) == {"token", "time", "memory", "stdout", "stderr", "compile_output", "message",
                                     "status"} and k["stdout"] == "hello world\n" and k["stderr"] is None, k)
    code, k = call("GET", "/submissions/%s?fields=stdout,status_id,language_id" % tok)
    check("fields=stdout,status_id,language_id: those alone (base64 when not told false)",
          code == 200 and k == {"stdout": encode64("hello world\n"), "status_id": 3, "language_id": 71}, k)
    code, k = call("GET", "/submissions/%s?fields=stdout,nope,worse" % tok)
    check("an unknown field: 400, Judge0's message", code == 400 and
          k == {"error": "invalid fields: [nope, worse]"}, (code, k))
    code, k = call("GET", "/submissions/" + tok.upper() + "?base64_encoded=false&fields=token")
    check("a token in capitals is the same token", code == 200 and k == {"token": tok}, (code, k))
    if OTHER:
        code, k = call("GET", "/submissions/" + tok, key=OTHER)
        check("another tenant's token: 404", code == 404, (code, k))

# the SDK's batch: base64, then each polled by the batch GET
subs = [{"source_code": encode64(echo), "language_id": 71, "stdin": encode64("first")},
        {"source_code": encode64(echo), "language_id": 71, "stdin": encode64("second"),
         "expected_output": encode64("nope")}]
code, toks = call("POST", "/submissions/batch?base64_encoded=true", {"submissions": subs})
check("POST /submissions/batch: 201, a token each", code == 201 and len(toks) == 2 and
      all("token" in t for t in toks), (code, toks))
if code == 201:
    # an empty token keeps its place (null), trailing commas are dropped: as Ruby's split
    q = toks[0]["token"] + ",," + toks[1]["token"] + ",00000000-0000-0000-0000-000000000000,,"
    deadline = time.time() + 250
    while True:
        code, b = call("GET", "/submissions/batch?tokens=%s&base64_encoded=true&fields=*" % q)
        done = code == 200 and all(s is None or status_of(s) not in (1, 2) for s in b["submissions"])
        if done or time.time() > deadline:
            break
        time.sleep(0.5)
    s = b["submissions"] if code == 200 else []
    check("GET /submissions/batch?tokens=: each in order, an empty or unknown token null",
          len(s) == 4 and s[1] is None and s[3] is None and decode64(s[0]["stdout"]).strip() == b"first" and
          status_of(s[0]) == 3 and status_of(s[2]) == 4 and s[2]["status"]["description"] == "Wrong Answer",
          (code, b))

# ---- every status from a program ------------------------------------------------


def run(source, lang=71, label="", **fields):
    body = {"language_id": lang}
    if source is not None:   # a Multi-file program has none
        body["source_code"] = source
    body.update(fields)
    code, j = call("POST", "/submissions?base64_encoded=false&wait=true&fields=*", body)
    if code != 201:
        print("    %s: %s %s" % (label, code, j))
        return {}
    return j


if MODE == "standin":
    cases = [
        ("Accepted against expected output, lines right-stripped", 3,
         dict(source=prog(stdout="1 2  \n3\n\n"), expected_output="1 2\n3"), None),
        ("Wrong Answer", 4, dict(source=prog(stdout="1 2\n"), expected_output="1 3"), None),
        ("Time Limit Exceeded by wall time", 5, dict(source=prog(timed_out=True)),
         lambda j: j["message"] == "Time limit exceeded (wall clock)"),
        ("Time Limit Exceeded by CPU time (cpu_time_limit)", 5, dict(source=prog(cpu_ms=2500), cpu_time_limit=2),
         lambda j: j["message"] == "Time limit exceeded" and j["time"] == "2.5"),
        ("Compilation Error, with the compiler's output", 6,
         dict(source=prog(compile_error="main.c:1: error\n"), lang=50),
         lambda j: j["compile_output"] == "main.c:1: error\n" and j["stdout"] is None and j["time"] is None),
        ("Runtime Error (SIGSEGV)", 7, dict(source=prog(signal="SIGSEGV")),
         lambda j: j["exit_signal"] == 11 and j["message"] == "Caught fatal signal 11"),
        ("Runtime Error (SIGXFSZ): output over max_file_size", 8, dict(source=prog(stdout="x", stdout_truncated=True)),
         lambda j: j["exit_signal"] == 25 and "max_file_size" in j["message"]),
        ("Runtime Error (SIGFPE)", 9, dict(source=prog(signal="SIGFPE")), None),
        ("Runtime Error (SIGABRT)", 10, dict(source=prog(signal="SIGABRT")), None),
        ("Runtime Error (NZEC)", 11, dict(source=prog(exit_code=3)),
         lambda j: j["exit_code"] == 3 and j["message"] == "Exited with error status 3"),
        ("Runtime Error (Other): the memory limit, said in the message", 12, dict(source=prog(oom_killed=True)),
         lambda j: j["message"] == "Caught fatal signal 9 (memory limit exceeded)"),
        ("Internal Error: the VM failed, not the program", 13,
         dict(source=prog(termination="vm_failed", message="vmm: KVM_RUN: Bad address")),
         lambda j: j["message"] == "vmm: KVM_RUN: Bad address"),
        ("redirect_stderr_to_stdout: both streams in stdout, in order", 3,
         dict(source=prog(stdout="out\n", stderr="err\n"), redirect_stderr_to_stdout=True,
              expected_output="out\nerr"),
         lambda j: j["stdout"] == "out\nerr\n" and j["stderr"] is None),
    ]
else:
    cases = [
        ("Accepted: a python program against expected output, lines right-stripped", 3,
         dict(source='print("1 2  ")\nprint(3)\nprint()', expected_output="1 2\n3"), None),
        ("Wrong Answer", 4, dict(source='print(41 + 1)', expected_output="43"), None),
        ("Time Limit Exceeded by CPU time: a C busy loop, cpu_time_limit 1", 5,
         dict(source="int main(void){volatile unsigned long i=0;for(;;)i++;}", lang=50, cpu_time_limit=1,
              cpu_extra_time=0.5, wall_time_limit=20),
         lambda j: j["message"] == "Time limit exceeded" and float(j["time"]) >= 1),
        ("Time Limit Exceeded by wall time: a program asleep", 5,
         dict(source="import time\ntime.sleep(30)", wall_time_limit=2),
         lambda j: j["message"] == "Time limit exceeded (wall clock)" and float(j["time"]) < 1),
        ("Compilation Error: gcc's own words in compile_output", 6,
         dict(source="int main(void){ return x; }", lang=50),
         lambda j: "error" in (j["compile_output"] or "") and "'x' undeclared" in j["compile_output"]),
        ("Runtime Error (SIGXFSZ): stdout past max_file_size", 8,
         dict(source="import sys\nsys.stdout.write('x' * 300000)", max_file_size=64),
         lambda j: j["exit_signal"] == 25),
        ("Runtime Error (NZEC): exit(3)", 11, dict(source="import sys\nsys.exit(3)"),
         lambda j: j["exit_code"] == 3),
        ("Java as Judge0 sends it (Main.java, another public class), under a 128000 KB memory limit "
         "that Judge0's JVM does not start in", 3,
         dict(source="public class Solution { public static void main(String[] a) { "
                     "System.out.println(\"java \" + (6 * 7)); } }", lang=62, memory_limit=128000,
              expected_output="java 42"), None),
        ("compiler_options: gcc gets them before the source, after its own flags", 3,
         dict(source="#include <stdio.h>\nint main(void){printf(\"%d %s\\n\", ANSWER, WORD);}", lang=50,
              compiler_options="-DANSWER=42 '-DWORD=\"two words\"'", expected_output="42 two words"), None),
        ("command_line_arguments, split as bash splits Judge0's run line", 3,
         dict(source="import sys\nprint(sys.argv[1:])", command_line_arguments="a 'b c' d;e",
              expected_output="['a', 'b c', 'de']"), None),
        ("additional_files: a header and a data file at their paths beside main.c (the zip's own main.c "
         "skipped, as unzip -n skips it)", 3,
         dict(source='#include <stdio.h>\n#include "lib/add.h"\nint main(void){FILE *f = fopen("data/in.txt", "r");'
                     'int a, b; if (!f || fscanf(f, "%d %d", &a, &b) != 2) return 1; printf("%d\\n", add(a, b));}',
              lang=50, expected_output="42",
              additional_files=encode64(zip_of({"lib/add.h": "static int add(int a, int b) { return a + b; }\n",
                                                "data/in.txt": "40 2\n", "main.c": "int main(void){return 9;}\n"}))),
         None),
        ("Multi-file program (89): its compile.sh (bash's [[ ]]), then its run script, which runs "
         "an executable of the zip's", 3,
         dict(source=None, lang=89, stdin="5\n", expected_output="25",
              additional_files=encode64(zip_of({
                  "compile.sh": "if [[ -f square.c ]]; then gcc -O2 -o prog main.c square.c; fi\n", "run": "#!/bin/bash\n./ready.sh && ./prog\n",
                  "ready.sh": ("#!/bin/sh\nexit 0\n", 0o755),
                  "main.c": '#include <stdio.h>\nint square(int);\nint main(void){int n; scanf("%d", &n);'
                            'printf("%d\\n", square(n));}\n',
                  "square.c": "int square(int n) { return n * n; }\n"}))),
         lambda j: j["source_code"] is None and j["language"]["name"] == "Multi-file program"),
        ("number_of_runs 3: three runs, a VM each, time and memory their means", 3,
         dict(source='print(sum(range(10 ** 5)))', expected_output="4999950000", number_of_runs=3),
         lambda j: j["number_of_runs"] == 3 and made_of(j["token"]) == (3, 3) and float(j["time"]) > 0
         and j["memory"] > 0),
        ("number_of_runs 3 of a program that fails: it stops at the first run, as Judge0 stops", 11,
         dict(source='import sys\nsys.exit(2)', number_of_runs=3),
         lambda j: made_of(j["token"]) == (1, 3)),
        ("number_of_runs 3 of a wrong answer (exit 0): it stops at the first run too, as Judge0 stops", 4,
         dict(source='print(41)', expected_output="42", number_of_runs=3),
         lambda j: made_of(j["token"]) == (1, 3)),
    ]


def batch_of(subs):
    """POST subs as one batch (texts as they are), then poll the batch GET
    until each has ended: the submissions with every field, or None."""
    code, toks = call("POST", "/submissions/batch?base64_encoded=false", {"submissions": subs})
    if code != 201 or not all("token" in t for t in toks):
        print("    batch: %s %s" % (code, toks))
        return None
    q = ",".join(t["token"] for t in toks)
    deadline = time.time() + 250
    while time.time() < deadline:
        code, b = call("GET", "/submissions/batch?tokens=%s&base64_encoded=false&fields=*" % q)
        if code == 200 and all(status_of(s) not in (1, 2) for s in b["submissions"]):
            return b["submissions"]
        time.sleep(0.5)
    return None


def compiles_of(subs):
    """The native runs' compile stages: one object shared by a batch
    judged from one compile."""
    return [json.dumps(native_run(s["token"]).get("compile"), sort_keys=True) for s in subs]


if MODE == "vm":
    # A batch of one C program: compiled once, each submission in a fork of
    # the compiled VM, under its own limits (the command's cgroup and
    # RLIMIT_CPU), and no submission sees what another left.
    judged = r"""#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(void){
    char cmd[64];
    if (scanf("%63s", cmd) != 1) return 1;
    int seen = access("/workspace/mark", F_OK) == 0 || access("/tmp/mark", F_OK) == 0;
    FILE *f = fopen("/workspace/mark", "w"); if (f) fclose(f);
    f = fopen("/tmp/mark", "w"); if (f) fclose(f);
    if (!strcmp(cmd, "spin")) { volatile unsigned long i = 0; for (;;) i++; }
    if (!strcmp(cmd, "eat")) for (;;) { char *p = malloc(1 << 20); if (!p) return 3; memset(p, 1, 1 << 20); }
    if (!strcmp(cmd, "segv")) { volatile int *p = 0; *p = 1; }
    if (!strcmp(cmd, "fpe")) { volatile int a = 7, z = 0; return a / z; }
    if (!strcmp(cmd, "abrt")) abort();
    printf("%s %s\n", cmd, seen ? "seen" : "fresh");
    return 0;
}
"""
    # a CPU limit far from what the memory eater spends: past memory.max
    # the guest's reclaim tries before its OOM kill take seconds of CPU on
    # an emulated host (the CPU limit itself: tests/sandbox/supervisor.sh)
    lim = dict(language_id=50, source_code=judged, cpu_time_limit=10, cpu_extra_time=0.5, wall_time_limit=20,
               memory_limit=8000)
    want = [("a", "a fresh", 3), ("b", "b fresh", 3), ("c", "c wrong", 4), ("eat", None, 12), ("d", "d fresh", 3),
            ("segv", None, 7), ("fpe", None, 9), ("abrt", None, 10)]
    t0 = time.time()
    subs = batch_of([dict(lim, stdin=i, **({"expected_output": e} if e else {})) for i, e, _ in want])
    print("    (%.1f s for a batch of %d sharing one program)" % (time.time() - t0, len(want)))
    got = [status_of(s) for s in subs or []]
    brief = [(s["stdin"], status_of(s), s["message"], s["time"], s["memory"], s["stdout"]) for s in subs or []]
    check("a batch of one C program: each submission's own status (accepted, wrong answer, memory, SIGSEGV, SIGFPE, "
          "SIGABRT)",
          got == [w for _, _, w in want] and [s["exit_signal"] for s in subs[5:]] == [11, 8, 6], brief)
    check("...compiled once: every submission has the one compile's stage",
          bool(subs) and len(set(compiles_of(subs))) == 1, compiles_of(subs or []))
    check("...none saw what another left (/workspace and /tmp fresh in each)",
          bool(subs) and all((s["stdout"] or "").endswith("fresh\n") for s in subs if status_of(s) in (3, 4)), subs)
    runs = [native_run(s["token"]).get("run") or {} for s in subs or []]
    check("...each under the run stage's own limits (its command's cgroup and RLIMIT_CPU): the memory eater killed",
          bool(subs) and all(r.get("limits") == {"timeout_s": 20, "memory_mib": 8, "cpu_time_ms": 10500} for r in runs)
          and runs[3].get("oom_killed") is True and
          subs[3]["message"] == "Caught fatal signal 9 (memory limit exceeded)", runs)
    subs = batch_of([dict(language_id=50, source_code="int main(void){ return x; }", stdin=i) for i in "ab"])
    check("a batch of a program that does not compile: Compilation Error for each, gcc's words",
          subs is not None and [status_of(s) for s in subs] == [6, 6] and
          all("'x' undeclared" in (s["compile_output"] or "") for s in subs), subs)

for name, want, kw, extra in cases:
    kw = dict(kw)
    j = run(kw.pop("source"), kw.pop("lang", 71), name, **kw)
    got = status_of(j)
    good = got == want and (extra is None or extra(j))
    check("%s: status %d" % (name, want), good, j)

if MODE == "standin":
    # ---- the API's own cases, no VM --------------------------------------------
    # base64_encoded absent: 1.13.1 reads base64 unless told "false"
    code, j = call("POST", "/submissions?wait=true", {"source_code": encode64(prog(stdout="b64\n")),
                                                        "language_id": 71})
    check("base64_encoded absent: read and written as base64 (Judge0 1.13.1's code)",
          code == 201 and j.get("stdout") == encode64("b64\n"), (code, j))
    code, j = call("POST", "/submissions?base64_encoded=false&wait=true&fields=source_code,stdin,stdout",
                   {"source_code": prog(echo_stdin=True), "language_id": "71", "stdin": "héllo"})
    check("base64_encoded=false: texts as they are, UTF-8 kept", code == 201 and j.get("stdout") == "héllo" and
          j.get("stdin") == "héllo", (code, j))
    code, j = call("POST", "/submissions?base64_encoded=true", {"source_code": encode64(b"\xff\xfe"),
                                                               "language_id": 71})
    tok = j.get("token") if isinstance(j, dict) else None
    code, j = call("GET", "/submissions/%s?base64_encoded=false&fields=source_code" % tok)
    check("bytes that are not UTF-8, asked without base64: 400, Judge0's message",
          code == 400 and "use base64_encoded=true" in j.get("error", ""), (code, j))
    code, j = call("GET", "/submissions/%s?fields=source_code" % tok)
    check("...and with base64 they come back as sent", code == 200 and decode64(j["source_code"]) == b"\xff\xfe",
          (code, j))

    code, j = call("POST", "/submissions", {"source_code": "", "cpu_time_limit": 16, "memory_limit": "lots",
                                            "wall_time_limit": 0.5, "callback_url": "http://127.0.0.1/"})
    check("422: every failed check, in Rails' words",
          code == 422 and j == {"source_code": ["can't be blank"], "language_id": ["can't be blank"],
                                "cpu_time_limit": ["must be less than or equal to 15.0"],
                                "wall_time_limit": ["must be greater than or equal to 1"],
                                "memory_limit": ["is not a number"],
                                "callback_url": ["setting callback is not allowed"]}, (code, j))
    code, j = call("POST", "/submissions?base64_encoded=false", {"source_code": "x", "language_id": 9999})
    check("422: a language that does not exist", code == 422 and
          j == {"language_id": ["language with id 9999 doesn't exist"]}, (code, j))
    code, j = call("POST", "/submissions?base64_encoded=false", {"source_code": "x", "language_id": 71,
                                                                 "number_of_runs": 21})
    check("number_of_runs past max_number_of_runs (20, as config_info says): 422", code == 422 and
          j == {"number_of_runs": ["must be less than or equal to 20"]}, (code, j))
    code, j = call("POST", "/submissions?base64_encoded=false&wait=true&fields=number_of_runs,status",
                   {"source_code": prog(stdout="x\n"), "language_id": 71, "number_of_runs": 3})
    check("number_of_runs 3: accepted, shown back", code == 201 and j["number_of_runs"] == 3 and
          j["status"]["id"] == 3, (code, j))
    # additional_files: a zip, always base64 (Judge0 decodes it whatever
    # base64_encoded says), kept and shown back; bad archives refused
    z = zip_of({"data/in.txt": "1 2\n"})
    code, j = call("POST", "/submissions?base64_encoded=false&wait=true&fields=stdout,additional_files",
                   {"source_code": prog(stdout="with files\n"), "language_id": 71, "additional_files": encode64(z)})
    check("additional_files: accepted beside the source, shown back as the zip sent, in Ruby's base64",
          code == 201 and j["stdout"] == "with files\n" and j["additional_files"] == encode64(z), (code, j))
    bad_zips = [
        ("a zip bomb: 12 files of 1 MiB of zeros, 12 KB zipped", {"z%d" % i: "\0" * (1 << 20) for i in range(12)},
         "extracts to more than 10240 KB"),
        ("a name with ..", {"../../etc/cron.d/x": "* * * * * root id\n"},
         '"../../etc/cron.d/x" is not a path inside the workspace: has a ".." component'),
        ("an absolute name", {"/etc/passwd": "x"}, "must be a relative path"),
    ]
    for what, files, want in bad_zips:
        code, j = call("POST", "/submissions", {"source_code": encode64(prog()), "language_id": 71,
                                                "additional_files": encode64(zip_of(files))})
        check("additional_files, %s: 422, %s" % (what, want), code == 422 and
              want in (j.get("additional_files") or [""])[0], (code, j))
    code, j = call("POST", "/submissions", {"source_code": encode64(prog()), "language_id": 71,
                                            "additional_files": encode64(b"not a zip")})
    check("additional_files that are not a zip: 422", code == 422 and
          "is not a zip archive" in (j.get("additional_files") or [""])[0], (code, j))
    code, j = call("POST", "/submissions", {"language_id": 89, "additional_files": encode64(zip_of({"main.c": "x"}))})
    check("a Multi-file program without a run script: 422", code == 422 and
          j == {"additional_files": ["a Multi-file program needs a run or run.sh script at the top"]}, (code, j))
    code, j = call("POST", "/submissions", {"language_id": 89, "source_code": encode64("x")})
    check("a Multi-file program with source_code and no archive: 422, Rails' words", code == 422 and
          j == {"source_code": ["must be blank"], "additional_files": ["can't be blank"]}, (code, j))
    code, j = call("GET", "/languages/89")
    check("GET /languages/89: the Multi-file program, no source file or commands", code == 200 and
          j["name"] == "Multi-file program" and j["source_file"] is None and j["run_cmd"] is None, (code, j))

    # enable_network: the tenant's ceiling (this one's net=any), through
    # its run's proxy; another tenant without one is refused as Judge0
    # refuses it
    code, j = call("POST", "/submissions?base64_encoded=false&wait=true&fields=enable_network,status_id",
                   {"source_code": prog(stdout="net\n"), "language_id": 71, "enable_network": True})
    check("enable_network: accepted for a tenant whose ceiling is any host, and shown", code == 201 and
          j == {"enable_network": True, "status_id": 3}, (code, j))
    code, cfg_a = call("GET", "/config_info")
    check("config_info: allow_enable_network true for that tenant", cfg_a.get("allow_enable_network") is True, cfg_a)
    if OTHER:
        code, j = call("POST", "/submissions", {"source_code": encode64(prog()), "language_id": 71,
                                                "enable_network": True}, key=OTHER)
        check("enable_network for a tenant with no network: 422, Judge0's words", code == 422 and
              j == {"enable_network": ["enabling network is not allowed"]}, (code, j))
        code, cfg_b = call("GET", "/config_info", key=OTHER)
        check("...and its config_info says so", cfg_b.get("allow_enable_network") is False, cfg_b)

    code, j = call("POST", "/submissions", b"not json")
    check("a body that is not JSON: refused", code in (400, 415), (code, j))

    code, j = call("POST", "/submissions/batch", {"submissions": []})
    check("an empty batch: 400", code == 400 and j == {"error": "there should be at least one submission in a batch"},
          (code, j))
    code, j = call("POST", "/submissions/batch", {"submissions": [{"language_id": 71}] * 21})
    check("a batch of 21: 400", code == 400 and
          j == {"error": "number of submissions in a batch should be less than or equal to 20"}, (code, j))
    code, j = call("POST", "/submissions/batch?base64_encoded=false",
                   {"submissions": [{"language_id": 71}, {"source_code": prog(), "language_id": 71}]})
    check("a batch with one bad submission: 201, its errors in its place", code == 201 and
          j[0] == {"source_code": ["can't be blank"]} and "token" in j[1], (code, j))
    code, j = call("POST", "/submissions/batch?base64_encoded=false", {"submissions": [{"language_id": 71}]})
    check("a batch with none good: 422", code == 422, (code, j))
    code, j = call("GET", "/submissions/batch?tokens=")
    check("GET batch without tokens: 400", code == 400, (code, j))

    code, j = call("GET", "/submissions/not-a-token")
    check("an unknown token: 404", code == 404, (code, j))
    code, j = call("GET", "/statuses")
    check("GET /statuses: 1 to 14 with Judge0's descriptions", code == 200 and len(j) == 14 and
          j[6] == {"id": 7, "description": "Runtime Error (SIGSEGV)"} and
          j[13] == {"id": 14, "description": "Exec Format Error"}, j)
    code, j = call("GET", "/languages/50")
    check("GET /languages/50: source file and commands", code == 200 and j["source_file"] == "main.c" and
          "main.c" in j["compile_cmd"] and j["is_archived"] is False, j)
    code, j = call("GET", "/languages/5000")
    check("GET /languages/5000: 404", code == 404, (code, j))
    code, j = call("GET", "/languages/all")
    check("GET /languages/all: with is_archived", code == 200 and all("is_archived" in l for l in j), j)
    code, j = call("GET", "/version")
    check("GET /version: 1.13.1 as text", code == 200 and j == "1.13.1", (code, j))
    code, j = call("GET", "/workers")
    check("GET /workers: the queue's size and the workers", code == 200 and
          {"size", "available", "idle", "working"} <= set(j[0]), (code, j))
    code, j = call("GET", "/system_info")
    check("GET /system_info", code == 200 and "CPU(s)" in j, (code, j))
    code, j = call("POST", "/authenticate")
    check("POST /authenticate with a key: 200", code == 200, code)
    code, j = call("POST", "/authenticate", key="key-that-is-not-one-0000000")
    check("POST /authenticate with an unknown X-Auth-Token: 401", code == 401, code)
    code, j = call("POST", "/authorize")
    check("POST /authorize without X-Auth-User: 403", code == 403, code)
    code, j = call("POST", "/authorize", headers={"X-Auth-User": KEY})
    check("POST /authorize with X-Auth-User: 200", code == 200, code)
    code, j = call("GET", "/submissions")
    check("GET /submissions without X-Auth-User: 403", code == 403, (code, j))
    code, j = call("GET", "/submissions?base64_encoded=false&per_page=3&fields=token,status_id", headers={"X-Auth-User": KEY})
    total = j.get("meta", {}).get("total_count", 0) if isinstance(j, dict) else 0
    check("GET /submissions: this tenant's, newest first, with will_paginate's meta",
          code == 200 and len(j["submissions"]) == 3 and set(j["submissions"][0]) == {"token", "status_id"} and
          j["meta"]["current_page"] == 1 and j["meta"]["next_page"] == 2 and j["meta"]["prev_page"] is None and
          j["meta"]["total_pages"] == (total + 2) // 3 and total >= 20, (code, j))
    code, k = call("GET", "/submissions?per_page=3&page=2&fields=token", headers={"X-Auth-User": KEY})
    check("...page 2 goes on where page 1 stopped", code == 200 and k["meta"]["prev_page"] == 1 and
          not {x["token"] for x in k["submissions"]} & {x["token"] for x in j["submissions"]}, (code, k))
    code, k = call("GET", "/submissions?page=0", headers={"X-Auth-User": KEY})
    check("page=0: 400, Judge0's message", code == 400 and k == {"error": "invalid page: 0"}, (code, k))
    if OTHER:
        code, k = call("GET", "/submissions?fields=token", key=OTHER, headers={"X-Auth-User": OTHER})
        check("another tenant lists its own alone", code == 200 and
              not {x["token"] for x in k["submissions"]} & {x["token"] for x in j["submissions"]}, (code, k))
    code, j = call("DELETE", "/submissions/" + toks[0]["token"], headers={"X-Auth-User": KEY})
    check("DELETE: Judge0's default, delete not allowed", code == 400 and j == {"error": "delete not allowed"},
          (code, j))

print("# judge0 client: %d failed" % failed)
sys.exit(1 if failed else 0)
