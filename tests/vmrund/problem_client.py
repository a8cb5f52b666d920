#!/usr/bin/env python3
"""Problems judged from one compile (POST /v1/judge, docs/judge.md), on
real VMs: a C program against many tests, all accepted; one wrong answer
found among them; a test that leaves a file for the next (which does not
find it: each test is a fork of the compiled VM); a compile error; a
time limit by CPU; an interpreted program (nothing to compile); a
checker program; an interactive problem (a guessing game: the
contestant must binary-search the interactor's number), solved, its
output file checked, and failed.

usage: problem_client.py BASE_URL KEY NTESTS
Prints "ok - ..." / "not ok - ..." lines; exits 1 when any failed."""
import json, sys, time, urllib.error, urllib.request

BASE, KEY, NTESTS = sys.argv[1], sys.argv[2], int(sys.argv[3])
failed = 0


def check(name, cond, detail=""):
    global failed
    print(("ok - " if cond else "not ok - ") + name)
    if not cond:
        failed += 1
        print("    " + str(detail)[:2000].replace("\n", "\n    "))
    sys.stdout.flush()


def judge(body, deadline=150):
    """POSTs one judge. The deadline is each judge's own, well inside the
    suite's, so a judge that hangs fails its own check by name."""
    req = urllib.request.Request(BASE + "/v1/judge", data=json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    t0 = time.time()
    try:
        with urllib.request.urlopen(req, timeout=deadline) as r:
            code, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        code, raw = e.code, e.read()
    except OSError as e:  # the deadline passed, or the connection broke
        return 0, "no answer after %.0f s: %s" % (time.time() - t0, e), int((time.time() - t0) * 1000)
    ms = int((time.time() - t0) * 1000)
    try:
        return code, json.loads(raw), ms
    except ValueError:
        return code, raw.decode(errors="replace"), ms


SUM = "#include <stdio.h>\nint main(void){long a,b;if(scanf(\"%ld %ld\",&a,&b)!=2)return 2;printf(\"%ld\\n\",a+b);return 0;}"
tests = [{"stdin": "%d %d\n" % (i, i * 7), "expected_output": "%d\n" % (i * 8)} for i in range(NTESTS)]
code, j, ms = judge({"runtime": "c", "files": [{"name": "sum.c", "content": SUM}], "tests": tests,
                     "limits": {"timeout_s": 10, "cpu_time_ms": 2000}, "parallel": 2})
check("%d tests of a C program, compiled once, two at a time: all accepted, in order" % NTESTS,
      code == 200 and j["verdict"] == "accepted" and j["summary"]["passed"] == NTESTS and
      all(t["verdict"] == "accepted" for t in j["tests"]) and j["compile"]["exit_code"] == 0 and
      [t["index"] for t in j["tests"]] == list(range(NTESTS)) and
      [t["stdout"] for t in j["tests"]] == [x["expected_output"] for x in tests], (code, j))
if code == 200:
    print("    (%d tests in %d ms: the compile %d ms, then %.0f ms a test)" %
          (NTESTS, ms, j["compile"]["ms"], (ms - j["compile"]["ms"]) / max(NTESTS, 1)))

bad = [dict(t) for t in tests[:4]]
bad[2]["expected_output"] = "-1\n"
code, j, ms = judge({"runtime": "c", "files": [{"name": "sum.c", "content": SUM}], "tests": bad})
check("one wrong answer found, at its test; the others accepted",
      code == 200 and j["verdict"] == "wrong_answer" and [t["verdict"] for t in j["tests"]] ==
      ["accepted", "accepted", "wrong_answer", "accepted"] and j["summary"]["failed"] == 1, (code, j))

LEAVE = ("#include <stdio.h>\n#include <unistd.h>\nint main(void){"
         "int seen = access(\"/workspace/mark\", F_OK) == 0 || access(\"/tmp/mark\", F_OK) == 0;"
         "FILE *f = fopen(\"/workspace/mark\", \"w\"); FILE *g = fopen(\"/tmp/mark\", \"w\");"
         "if (f) fclose(f); if (g) fclose(g); puts(seen ? \"seen\" : \"fresh\"); return 0;}")
code, j, ms = judge({"runtime": "c", "files": [{"name": "leave.c", "content": LEAVE}],
                     "tests": [{"expected_output": "fresh"}] * 3})
check("a test leaves files in /workspace and /tmp; the next does not find them (a fork each)",
      code == 200 and j["verdict"] == "accepted" and all(t["stdout"] == "fresh\n" for t in j["tests"]), (code, j))

code, j, ms = judge({"runtime": "c", "files": [{"name": "bad.c", "content": "int main(void){ return x; }"}],
                     "tests": [{"expected_output": ""}]})
check("a compile error: once, with gcc's words; no test run",
      code == 200 and j["verdict"] == "compile_error" and "undeclared" in j["compile"]["stderr"] and
      j["tests"] == [], (code, j))

SPIN = ("#include <stdio.h>\nint main(void){int n; if(scanf(\"%d\",&n)!=1) return 2;"
        "volatile unsigned long i=0; if(n) for(;;) i++; puts(\"quick\"); return 0;}")
code, j, ms = judge({"runtime": "c", "files": [{"name": "spin.c", "content": SPIN}],
                     "tests": [{"stdin": "0", "expected_output": "quick"}, {"stdin": "1", "expected_output": "quick"},
                               {"stdin": "0", "expected_output": "quick"}],
                     "limits": {"timeout_s": 3, "cpu_time_ms": 500}, "stop_on_first_failure": True})
check("a time limit (the wall clock's or the CPU's, said which); the tests after it skipped",
      code == 200 and j["verdict"] == "time_limit" and
      [t["verdict"] for t in j["tests"]] == ["accepted", "time_limit", "skipped"] and
      ("CPU time" in j["tests"][1]["message"] or "wall clock" in j["tests"][1]["message"]), (code, j))

code, j, ms = judge({"runtime": "python", "files": [{"name": "main.py", "content": "print(sum(map(float, input().split())))"}],
                     "tests": [{"stdin": "0.1 0.2", "expected_output": "0.3"}],
                     "checker": {"type": "floats", "epsilon": 1e-9}})
check("an interpreted program, nothing to compile; floats within epsilon",
      code == 200 and j["verdict"] == "accepted" and j["compile"] is None, (code, j))

# a problem with many right answers: any x y with x + y = n; the problem
# setter's checker (testlib's convention, python, in a VM of its own)
# reads the input, the contestant's output and the answer file
CHECKER = """import sys
n = int(open(sys.argv[1]).read())
try:
    x, y = map(int, open(sys.argv[2]).read().split())
except ValueError:
    print("wrong answer: not two numbers", file=sys.stderr); sys.exit(2)
if x + y != n:
    print("wrong answer: %d + %d is not %d" % (x, y, n), file=sys.stderr); sys.exit(1)
print("ok %d = %d + %d" % (n, x, y), file=sys.stderr)
"""
PAIR = "#include <stdio.h>\nint main(void){int n; scanf(\"%d\",&n); printf(\"%d %d\\n\", n / 2, n - n / 2);}"
checker = {"type": "program", "runtime": "python", "files": [{"name": "check.py", "content": CHECKER}]}
code, j, ms = judge({"runtime": "c", "files": [{"name": "pair.c", "content": PAIR}],
                     "tests": [{"stdin": "7"}, {"stdin": "10"}], "checker": checker})
check("a checker program in a VM of its own accepts answers of its own kind",
      code == 200 and j["verdict"] == "accepted" and [t["message"] for t in j["tests"]] == ["checker: ok 7 = 3 + 4",
                                                                                          "checker: ok 10 = 5 + 5"],
      (code, j))
BADPAIR = "#include <stdio.h>\nint main(void){int n; scanf(\"%d\",&n); printf(\"%d %d\\n\", n, 1);}"
code, j, ms = judge({"runtime": "c", "files": [{"name": "pair.c", "content": BADPAIR}],
                     "tests": [{"stdin": "7"}], "checker": checker})
check("...and finds a wrong one, in its own words",
      code == 200 and j["verdict"] == "wrong_answer" and j["tests"][0]["message"] == "checker: wrong answer: 7 + 1 is not 7",
      (code, j))

# An interactive problem: the interactor (the setter's, in python) holds
# a number from 1 to 1000000 (its input file); the contestant asks "? X"
# and hears "<", ">" or "="; more than 20 questions is a wrong answer. The
# interactor writes the number found to its output file, for the checker.
INTERACTOR = r"""
import sys
secret = int(open(sys.argv[1]).read())
for asked in range(1, 21):
    line = sys.stdin.readline().split()
    if len(line) != 2 or line[0] != "?":
        print("wrong answer: question %d is %r" % (asked, " ".join(line)), file=sys.stderr); sys.exit(1)
    x = int(line[1])
    print("<" if secret < x else ">" if secret > x else "=", flush=True)
    if x == secret:
        open(sys.argv[2], "w").write("%d\n" % x)
        print("ok found %d in %d questions" % (x, asked), file=sys.stderr); sys.exit(0)
print("wrong answer: not found in 20 questions", file=sys.stderr); sys.exit(1)
"""
SEARCH = r"""#include <stdio.h>
int main(void){ long lo = 1, hi = 1000000; char r[8];
 for (;;) { long mid = (lo + hi) / 2; printf("? %ld\n", mid); fflush(stdout);
  if (scanf("%7s", r) != 1) return 3;
  if (r[0] == '=') return 0; if (r[0] == '<') hi = mid - 1; else lo = mid + 1; } }"""
COUNT = r"""#include <stdio.h>
int main(void){ char r[8]; for (long x = 1;; x++) { printf("? %ld\n", x); fflush(stdout);
  if (scanf("%7s", r) != 1) return 0; if (r[0] == '=') return 0; } }"""
interactor = {"runtime": "python", "files": [{"name": "interactor.py", "content": INTERACTOR}]}
t0 = time.time()
code, j, ms = judge({"runtime": "c", "files": [{"name": "search.c", "content": SEARCH}], "interactor": interactor,
                     "tests": [{"stdin": "1\n"}, {"stdin": "777777\n", "expected_output": "777777\n"},
                               {"stdin": "500000\n", "expected_output": "499999\n"}],
                     "limits": {"timeout_s": 20}})
check("an interactive problem: binary search finds the interactor's number in every test",
      code == 200 and [t["message"] for t in j["tests"]][:2] == ["interactor: ok found 1 in 19 questions",
                                                                "interactor: ok found 777777 in 17 questions"] and
      j["tests"][1]["stdout"].count("?") == j["tests"][1]["interactor"]["stdout"].count("\n"), (code, j))
if code == 200:
    t = j["tests"][1]
    print("    (3 interactive tests in %d ms; test 1's talk, the contestant's questions and the interactor's answers:)"
          % ms)
    for q, a in zip(t["stdout"].splitlines(), t["interactor"]["stdout"].splitlines()):
        print("      %-10s %s" % (q, a))
    print("    interactor: %s" % t["interactor"]["stderr"].strip())
check("...the interactor's output file judged against the expected: a wrong answer where they differ",
      code == 200 and j["verdict"] == "wrong_answer" and
      [t["verdict"] for t in j["tests"]] == ["accepted"] * 2 + ["wrong_answer"] and
      j["tests"][2]["message"] == "the output differs from the expected", (code, j))
code, j, ms = judge({"runtime": "c", "files": [{"name": "count.c", "content": COUNT}], "interactor": interactor,
                     "tests": [{"stdin": "999\n"}], "limits": {"timeout_s": 20}})
check("...and a contestant that counts up fails where 20 questions are too few, in the interactor's words",
      code == 200 and j["verdict"] == "wrong_answer" and
      j["tests"][0]["message"] == "interactor: wrong answer: not found in 20 questions",
      (code, j))

code, j, ms = judge({"runtime": "cobol", "files": [{"name": "a.cob", "content": "x"}], "tests": [{}]})
check("a runtime that is not installed: 400", code == 400, (code, j))

print("# problem client: %d failed" % failed)
sys.exit(1 if failed else 0)
