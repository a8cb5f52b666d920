#!/usr/bin/env python3
"""make bench-vmrund: vmrund's figures, printed and never asserted.

  vmrund.py api                 p50/p99 of requests denied before any VM
                                (no key: 401; an unknown runtime: 400;
                                Judge0's API: a 422 and a token not
                                found), on
                                one kept-alive connection and on fresh ones
  vmrund.py overload            queue latency at 4x overload, with the
                                stand-in worker (0.5 s runs, 2 slots)
  vmrund.py judge [N]           N tests of one C program: POST /v1/judge
                                (one compile, a fork of it per test) against
                                N Judge0 submissions of the same program
                                one by one (a compile each) and in batches
                                of 20 (one compile, as /v1/judge), side by
                                side; needs a KVM host that boots Linux
  vmrund.py saturation [N]      runs per second at saturation with the real
                                worker (N runs of `true`, slots = CPUs),
                                against `vmrun -- true` in a shell loop;
                                needs a KVM host that boots Linux

Each starts its own vmrund on loopback with a config and keys in a temp
directory, and stops it; with VMRUN_BENCH_STORE set (a postgresql:// URI)
that vmrund keeps its state there instead of in SQLite
(tests/bench/queue.sh starts such a server for the API's figures)."""
import http.client, json, os, random, shutil, signal, statistics, subprocess, sys, tempfile, threading, time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
KEY = "bench-key-0123456789abcdef"


def start(tmp, worker=None, slots=2, queue_max=1024, concurrent=1024):
    port = random.randint(20000, 40000)
    os.makedirs(tmp + "/etc")
    with open(tmp + "/etc/keys", "w") as f:
        f.write("tenant bench concurrent=%d queued=100000 rate=1000000 burst=1000000\nkey %s bench\n"
                % (concurrent, KEY))
    os.chmod(tmp + "/etc/keys", 0o600)
    conf = ["listen = 127.0.0.1:%d" % port, "state_db = %s/state.db" % tmp, "run_dir = %s/runs" % tmp,
            "keys = %s/etc/keys" % tmp, "audit_log =", "slots = %d" % slots, "queue_max = %d" % queue_max]
    if worker:
        conf.append("worker = " + worker)
    if os.environ.get("VMRUN_BENCH_STORE"):
        conf.append("store = " + os.environ["VMRUN_BENCH_STORE"])
    with open(tmp + "/etc/vmrund.conf", "w") as f:
        f.write("\n".join(conf) + "\n")
    p = subprocess.Popen([ROOT + "/build/bin/vmrund", "--config", tmp + "/etc/vmrund.conf"],
                         stdout=subprocess.DEVNULL, stderr=open(tmp + "/log", "w"))
    for _ in range(200):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/healthz")
            if c.getresponse().status == 200:
                return p, port
        except OSError:
            time.sleep(0.05)
    sys.exit("bench-vmrund: vmrund did not start: " + open(tmp + "/log").read())


def stop(p):
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=120)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def call(conn, method, path, body=None, key=True):
    h = {"Content-Type": "application/json"}
    if key:
        h["Authorization"] = "Bearer " + KEY
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
    r = conn.getresponse()
    return r.status, r.read()


def api(tmp):
    p, port = start(tmp)
    try:
        for name, method, path, body, key, want in [
            ("no key (401)", "GET", "/v1/runs/" + "0" * 32, None, False, 401),
            ("unknown runtime (400)", "POST", "/v1/runs", {"runtime": "cobol", "argv": ["x"]}, True, 400),
            # Judge0's API: a submission refused by its checks, a token
            # looked up in the store
            ("judge0 language (422)", "POST", "/judge0/submissions?base64_encoded=false",
             {"source_code": "x", "language_id": 9999}, True, 422),
            ("judge0 token (404)", "GET", "/judge0/submissions/" + "00000000-0000-0000-0000-000000000000", None, True,
             404),
        ]:
            for mode in ("kept-alive", "fresh"):
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                ms = []
                for i in range(2200):
                    if mode == "fresh":
                        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                    t0 = time.perf_counter()
                    st, _ = call(conn, method, path, body, key)
                    ms.append((time.perf_counter() - t0) * 1000)
                    if st != want:
                        sys.exit("bench-vmrund: %s answered %d" % (name, st))
                    if mode == "fresh":
                        conn.close()
                ms = ms[200:]   # warm-up
                print("bench-vmrund api: %-22s %-10s n=%d p50 %.3f ms p99 %.3f ms" %
                      (name, mode, len(ms), pct(ms, 0.5), pct(ms, 0.99)))
    finally:
        stop(p)


def submit(port, body):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    st, out = call(conn, "POST", "/v1/runs", body)
    if st != 202:
        sys.exit("bench-vmrund: POST answered %d %s" % (st, out[:200]))
    return json.loads(out)["id"]


def wait_all(port, ids, limit_s):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    end = time.time() + limit_s
    runs = {}
    while ids and time.time() < end:
        for i in list(ids):
            st, out = call(conn, "GET", "/v1/runs/" + i)
            j = json.loads(out)
            if j["state"] not in ("queued", "running"):
                runs[i] = j
                ids.remove(i)
        time.sleep(0.05)
    if ids:
        sys.exit("bench-vmrund: %d runs had not ended after %d s" % (len(ids), limit_s))
    return runs


def overload(tmp):
    run_s, slots, secs = 0.5, 2, 5
    service = slots / run_s                      # runs per second the slots serve
    rate = 4 * service
    p, port = start(tmp, worker=ROOT + "/tests/vmrund/standin_worker.py", slots=slots)
    try:
        ids = []
        t0 = time.time()
        for k in range(int(rate * secs)):
            while time.time() < t0 + k / rate:
                time.sleep(0.001)
            ids.append(submit(port, {"argv": ["sleep", str(run_s)]}))
        runs = wait_all(port, list(ids), 600)
        q = [runs[i]["queue_ms"] for i in ids]
        print("bench-vmrund overload: %d runs of %.1f s at %.0f/s into %d slots (4x their %.0f/s): queue_ms p50 %d "
              "p99 %d max %d; the last waited %d ms (ideal, with no overhead: %d)" %
              (len(ids), run_s, rate, slots, service, pct(q, 0.5), pct(q, 0.99), max(q), q[-1],
               int((len(ids) / service - secs) * 1000)))
    finally:
        stop(p)


def saturation(tmp, n):
    cpus = os.cpu_count() or 1
    p, port = start(tmp, slots=cpus)
    try:
        t0 = time.time()
        ids = [submit(port, {"argv": ["true"]}) for _ in range(n)]
        runs = wait_all(port, list(ids), 1800)
        wall = time.time() - t0
        bad = [i for i in ids if runs[i]["state"] != "succeeded"]
        if bad:
            sys.exit("bench-vmrund: %d runs did not succeed: %s" % (len(bad), runs[bad[0]].get("message")))
        med = statistics.median(runs[i]["durations_ms"]["total"] for i in ids) / 1000
    finally:
        stop(p)
    t0 = time.time()
    for _ in range(n):
        subprocess.run([ROOT + "/build/bin/vmrun", "--", "true"], check=True, stdout=subprocess.DEVNULL)
    loop = time.time() - t0
    print("bench-vmrund saturation: %d runs of true, %d slots: vmrund %.2f runs/s (%.1f s), median run %.2f s, "
          "so slots/median %.2f runs/s: %.2fx of it; vmrun in a shell loop %.2f runs/s (%.1f s)" %
          (n, cpus, n / wall, wall, med, cpus / med, (n / wall) / (cpus / med), n / loop, loop))


SUM_C = ("#include <stdio.h>\nint main(void){long a,b;if(scanf(\"%ld %ld\",&a,&b)!=2)return 2;"
         "printf(\"%ld\\n\",a+b);return 0;}")


def judge0(conn, tests, batched):
    """tests as Judge0 submissions of SUM_C, one POST each or in batches of
    20, polled until every one ended Accepted: the seconds that took."""
    tokens = []
    t0 = time.time()
    subs = [{"source_code": SUM_C, "language_id": 50, "stdin": t["stdin"], "expected_output": t["expected_output"]}
            for t in tests]
    for k in range(0, len(subs), 20 if batched else 1):
        if batched:
            st, out = call(conn, "POST", "/judge0/submissions/batch?base64_encoded=false", {"submissions": subs[k:k + 20]})
        else:
            st, out = call(conn, "POST", "/judge0/submissions?base64_encoded=false", subs[k])
        if st != 201:
            sys.exit("bench-vmrund judge: a Judge0 submission answered %d %s" % (st, out[:300]))
        tokens += [x["token"] for x in json.loads(out)] if batched else [json.loads(out)["token"]]
    left = list(tokens)
    while left:
        time.sleep(0.5)
        for chunk in [left[k:k + 20] for k in range(0, len(left), 20)]:
            st, out = call(conn, "GET", "/judge0/submissions/batch?base64_encoded=false&fields=token,status_id&tokens="
                           + ",".join(chunk))
            if st != 200:
                sys.exit("bench-vmrund judge: a Judge0 batch GET answered %d %s" % (st, out[:300]))
            for s in json.loads(out)["submissions"]:
                if s and s["status_id"] > 2:
                    if s["status_id"] != 3:
                        sys.exit("bench-vmrund judge: a submission ended %d" % s["status_id"])
                    left.remove(s["token"])
    return time.time() - t0


def judge(tmp, n):
    # the sandboxes checkpoint against snapshots of this benchmark's own
    os.environ["VMRUN_CACHE"] = tmp + "/cache"
    p, port = start(tmp, slots=2)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
        tests = [{"stdin": "%d %d\n" % (i, 2 * i), "expected_output": "%d\n" % (3 * i)} for i in range(n)]
        # once each way first: the snapshots both restore are made then
        call(conn, "POST", "/v1/judge", {"runtime": "c", "files": [{"name": "sum.c", "content": SUM_C}],
                                         "tests": tests[:1]})
        t0 = time.time()
        st, out = call(conn, "POST", "/v1/judge", {"runtime": "c", "files": [{"name": "sum.c", "content": SUM_C}],
                                                   "tests": tests, "limits": {"timeout_s": 10}})
        judged = time.time() - t0
        j = json.loads(out)
        if st != 200 or j["verdict"] != "accepted":
            sys.exit("bench-vmrund judge: /v1/judge answered %d %s" % (st, out[:300]))
        print("bench-vmrund judge: %d tests of one C program through /v1/judge: %.1f s (its compile %.1f s, then %.0f ms "
              "a test)" % (n, judged, j["compile"]["ms"] / 1000, (judged * 1000 - j["compile"]["ms"]) / n), flush=True)
        alone = judge0(conn, tests, batched=False)
        print("bench-vmrund judge: the same %d tests as Judge0 submissions one by one (a compile each, 2 slots): "
              "%.1f s; /v1/judge took %.2fx of their time" % (n, alone, judged / alone), flush=True)
        batched = judge0(conn, tests, batched=True)
        print("bench-vmrund judge: the same %d tests as Judge0 batches of 20 (one compile for the program, a fork of "
              "it per submission, 2 slots): %.1f s, %.2fx of one by one" % (n, batched, batched / alone), flush=True)
    finally:
        stop(p)


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "api"
    tmp = tempfile.mkdtemp(prefix="bench-vmrund.")
    try:
        if what == "api":
            api(tmp)
        elif what == "overload":
            overload(tmp)
        elif what == "judge":
            judge(tmp, int(sys.argv[2]) if len(sys.argv) > 2 else 100)
        elif what == "saturation":
            saturation(tmp, int(sys.argv[2]) if len(sys.argv) > 2 else 8)
        else:
            sys.exit("usage: vmrund.py api|overload|judge [N]|saturation [N]")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


main()
