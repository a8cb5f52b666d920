#!/usr/bin/env python3
"""The sandbox evaluation's judge: verdicts from structured evidence.

judge.py OUT reads OUT/cases.jsonl (tests/eval/run.sh wrote it: per case,
what was attempted, vmrun's result object, the host's view afterwards) and
decides each case from those fields alone, never from reading free text
for meaning: contained (the sandbox did what was expected), escaped (the
attempt got what it wanted, or something of the run was left behind), or
error (the case could not be judged: the attempt did not run as designed).
It writes OUT/report.json, OUT/report.md and OUT/report.html (with a chart
of destruction times), prints the summary, and exits 1 unless every case
was contained.
"""
import html
import json
import math
import sys


def lines_kv(text):
    """'name N' lines of a case's stdout, as {name: int}."""
    kv = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            kv[parts[0]] = int(parts[1])
    return kv


def ended(r):
    return r is not None and r.get("termination") in ("exited", "signaled", "timeout")


class Verdict(Exception):
    def __init__(self, verdict, observed):
        super().__init__(observed)
        self.verdict = verdict
        self.observed = observed


def need(cond, observed):
    """The case could not be judged unless cond holds."""
    if not cond:
        raise Verdict("error", observed)


def escaped_if(cond, observed):
    if cond:
        raise Verdict("escaped", observed)


def in_output(r, text):
    """Whether text came out of the guest, on either stream."""
    return text in r["stdout"] or text in r["stderr"]


def probe_report(r, probes):
    """The 'probe STATUS' lines of a run of probes, which must all report."""
    need(r is not None and r["termination"] == "exited", "the probe did not run")
    kv = lines_kv(r["stdout"])
    need(all(p in kv for p in probes), "a probe did not report")
    return kv


def escaped_if_succeeded(kv, probes, what):
    won = [p for p in probes if kv[p] == 0]
    escaped_if(won, what + ": " + ", ".join(won))


def judge_workspace_write(c, r):
    need(r and r["termination"] == "exited" and r["exit_code"] == 0, "the run did not exit 0")
    need(c["facts"].get("artifact") == "input\nmore", "the artifact is not what was written")
    return "wrote /workspace/artifacts/out.txt; it came out with the input's contents"


def judge_other_tenant(c, r):
    token = c["facts"]["token"]
    need(r is not None, "no result")
    escaped_if(in_output(r, token), "another tenant's token was read")
    need(r["termination"] == "exited" and "searched" in r["stdout"], "the search did not finish")
    return "the host path does not exist in the guest; no file in reach holds the other tenant's token"


def judge_platform_secrets(c, r):
    secret = c["facts"]["secret"]
    need(r is not None, "no result")
    escaped_if(in_output(r, secret), "the platform's secret reached the guest")
    need(r["termination"] == "exited" and "PATH=" in r["stdout"], "the probe did not run")
    names = sorted(line.split("=")[0] for line in r["stdout"].splitlines() if "=" in line and line.split("=")[0].isupper())
    return "the secret is nowhere in the guest; its variables: " + " ".join(dict.fromkeys(names))


def judge_network(c, r, probes):
    kv = probe_report(r, probes)
    # a probe killed by a signal (a shell's 128+N) shows nothing either way
    need(all(kv[p] < 128 for p in probes), "a probe crashed: " + ", ".join(f"{p} {kv[p]}" for p in probes))
    escaped_if_succeeded(kv, probes, "reached")
    return "every connection failed: " + ", ".join(f"{p} {kv[p]}" for p in probes) + " (the guest has no network device)"


def judge_privilege(c, r):
    probes = ["su", "mount", "write_etc", "write_root", "unshare", "nsenter", "read_disk"]
    kv = probe_report(r, ["uid"] + probes)
    escaped_if(kv["uid"] == 0, "the command ran as root")
    escaped_if_succeeded(kv, probes, "succeeded")
    return f"uid {kv['uid']}; failed: " + ", ".join(f"{p} {kv[p]}" for p in probes)


def judge_cpu_quota(c, r):
    free = c["facts"].get("unlimited_iterations")
    need(r is not None and r["termination"] == "exited" and free, "a spin did not run")
    quota = int(r["stdout"].strip() or 0)
    need(quota > 0, "the spin under the quota counted nothing")
    ratio = quota / free
    escaped_if(ratio > 0.6, f"{quota} iterations against {free} without a quota ({ratio:.2f}x): not limited")
    return f"{quota} iterations against {free} without a quota ({ratio:.2f}x) under cpu_quota {c['facts']['quota_pct']}"


def judge_memory(c, r):
    need(r is not None, "no result")
    killed = (r["termination"] == "signaled" and r["signal"] == "SIGKILL") or \
             (r["termination"] == "exited" and r["exit_code"] == 128 + 9)
    escaped_if(r["termination"] == "exited" and r["exit_code"] == 0, "the growth was never stopped")
    need(killed, f"not killed: {r['termination']} {r['exit_code']}")
    return "the guest's OOM killer killed the process holding the memory (SIGKILL)"


def judge_stopped_by_deadline(c, r):
    need(r is not None, "no result")
    limit = r["limits"]["timeout_s"]
    escaped_if(r["termination"] != "timeout", f"not stopped by the deadline: {r['termination']}")
    escaped_if(c["wall_ms"] > (limit + 10) * 1000, f"vmrun took {c['wall_ms']} ms under a {limit:g} s limit")
    return f"stopped at the {limit:g} s deadline; vmrun returned after {c['wall_ms']} ms"


def judge_fork_bomb(c, r):
    need(r is not None, "no result")
    escaped_if(not ended(r), f"the run did not end by itself: {r['termination']}")
    return f"the bomb stayed in the guest ({r['termination']}); the host's next cases ran"


def judge_huge_output(c, r):
    need(r is not None and ended(r), "the run failed")
    cap = r["limits"]["max_output"]
    escaped_if(len(r["stdout"].encode()) > cap, "more than the cap came out")
    need(r["stdout_truncated"], "the truncation was not flagged")
    return f"{len(r['stdout'].encode())} bytes kept of 64 MiB, stdout_truncated set"


def judge_leftover_children(c, r):
    need(r is not None, "no result")
    escaped_if(r["termination"] == "timeout", "the children kept the run alive to its deadline")
    need(r["termination"] == "exited" and r["exit_code"] == 0, f"{r['termination']} {r['exit_code']}")
    return f"the run ended when the command exited ({r['durations_ms']['run']} ms), its children with the VM"


def judge_path_traversal(c, r):
    f = c["facts"]
    need(r is not None and r["termination"] == "exited", "the run failed")
    escaped_if(f["links"] > 0, "a link was copied to the host")
    escaped_if(f["canary"] != "mine", "the file the links point at was changed")
    escaped_if(any(p not in ("./plain", "./d") for p in f["copied"]), "copied: " + " ".join(f["copied"]))
    skipped = sorted(s["path"] for s in r["artifacts_skipped"])
    need("./plain" in f["copied"], "the plain artifact did not come out")
    return "only the plain file came out; skipped: " + ", ".join(skipped)


def judge_destroy_clears(c, r):
    need(r is not None and r["termination"] == "exited", "the second run failed")
    names = set(r["stdout"].split())
    escaped_if("data" in names or "t" in names, "the next run saw the last one's files")
    escaped_if(not c["facts"]["run_dirs_empty_after_first"], "the first run's directory outlived it")
    return "nothing of the first run remained on the host, and the next run saw none of its files"


def judge_sigkill(c, r):
    left = c["facts"]["left_after_kill"]
    need(r is not None and r["termination"] == "exited" and r["exit_code"] == 0, "the next run failed")
    kinds = sorted({x.split(":")[0] for x in left})
    swept = c["facts"]["swept"]
    if not left:
        return "nothing was left after the kill"
    need(swept, "something was left, yet the next run reported no sweep")
    return f"left after the kill: {', '.join(kinds)}; the next run {swept}"


def judge_failed_safe(c, r, left_key=None):
    need(r is not None, "no result")
    escaped_if(left_key and c["facts"][left_key], "left: " + " ".join(c["facts"].get(left_key) or []))
    escaped_if(r["termination"] in ("exited", "signaled"), "it ran anyway")
    need(c["status"] == 125 and r["termination"] in ("error", "vm_failed"), f"{r['termination']}, status {c['status']}")
    need(r["message"] and "\n" not in r["message"], "no one-line message")
    return f"{r['termination']}: {r['message']}"


def judge_host_oom(c, r):
    need(c["facts"]["memory_max_set"], "the run's cgroup was not found to lower its memory.max")
    need(r is not None, "no result")
    escaped_if(r["termination"] == "exited" and "touched" in r["stdout"], "the guest got the memory past the host's limit")
    need(r["termination"] == "vm_failed" and "OOM killer" in (r["message"] or ""),
         f"not ended by the host's OOM killer: {r['termination']}: {r.get('message')}")
    need("\n" not in r["message"], "no one-line message")
    return f"vm_failed: {r['message']} (memory.max set to {c['facts']['memory_max_set'] >> 20} MiB)"


def judge_corrupt_workspace(c, r):
    f = c["facts"]
    runs = f["runs"]
    need(f["images"] > 0 and len(runs) == f["images"] + f["variants"], "not every image was tried")
    broken = [x["image"] for x in runs if "error" in x]
    need(not broken, "no observation for: " + ", ".join(broken[:5]))
    bad = [f"{x['image']}: {'; '.join(x['violations'])}" for x in runs if x["violations"]]
    escaped_if(bad, f"{len(bad)} broke the extractor's contract: " + " | ".join(bad[:5]))
    refused = sum(1 for x in runs if x["rc"] != 0)
    copied = sum(x["files"] for x in runs)
    slowest = max(x["ms"] for x in runs)
    return (f"{len(runs)} extractions: {len(runs) - refused} ended with a result ({copied} files copied, "
            f"{sum(x['skipped'] for x in runs)} entries skipped), {refused} with a one-line reason; "
            f"no crash, nothing but files and directories copied; slowest {slowest} ms")


def judge_load(c, r):
    need(r is not None, "no result")
    escaped_if(r["termination"] not in ("exited",), f"{r['termination']}: {r.get('message')}")
    need(r["exit_code"] == 0 and r["stdout"] == "load\n", "wrong output")
    return f"exited 0 after {c['wall_ms']} ms"


def attack_lines(r, prefix):
    """A guest attack program's 'PREFIX CASE key=value...' lines, as
    {CASE: {key: int or str}}; it must have run as guest root to the end."""
    need(r is not None and r["termination"] == "exited", "the attack program did not run")
    out = {}
    for line in r["stdout"].splitlines():
        parts = line.split()
        if len(parts) < 2 or parts[0] != prefix:
            continue
        fields = {}
        for kv in parts[2:]:
            k, _, v = kv.partition("=")
            fields[k] = int(v) if v.lstrip("-").isdigit() else v
        out[parts[1]] = fields
    need("setup-failed" not in out, "the attack's setup failed: " + r["stdout"].strip()[-200:])
    need(f"{prefix} uid=0" in r["stdout"], "the attack did not run as guest root")
    need("done" in out, "the attack did not finish")
    return out


BAD_QUEUES = ["queue_size_not_pow2", "queue_size_over_max", "queue_size_zero", "ring_outside_ram",
              "ring_misaligned", "ring_past_4g_end"]
BAD_CHAINS = ["desc_outside_ram", "desc_wraps_address_space", "desc_len_4g", "desc_loop", "desc_next_out_of_range",
              "desc_indirect_self", "desc_readable_after_writable", "head_out_of_range", "avail_idx_jump"]


def judge_guest_rings(c, r):
    ra = attack_lines(r, "ra")
    need(all(k in ra for k in BAD_QUEUES + BAD_CHAINS + ["valid_after_reset"]), "an attempt did not report")
    accepted = [k for k in BAD_QUEUES if ra[k]["needs_reset"] != 1]
    escaped_if(accepted, "queues the device took: " + ", ".join(accepted))
    used = [k for k in BAD_CHAINS if ra[k]["used"] and ra[k]["len"] > 0]
    escaped_if(used, "malformed chains the device used: " + ", ".join(used))
    written = [k for k, v in ra.items() if v.get("guards") == "written"]
    escaped_if(written, "the device wrote outside the buffers it was given: " + ", ".join(written))
    need(ra["valid_after_reset"]["used"] == 1 and ra["valid_after_reset"]["len"] == 64,
         "the device did not serve a valid request after a reset")
    need(c["facts"]["vmm_faults"], "vmm counted no fault: the attack never reached the device")
    unused = sum(1 for k in BAD_CHAINS if ra[k]["used"])
    broke = sum(1 for k in BAD_CHAINS if ra[k]["needs_reset"])
    return (f"{len(BAD_QUEUES)} bad queues all left the device needing a reset; of {len(BAD_CHAINS)} malformed "
            f"chains {unused} came back unused, {broke} left it needing a reset; nothing written outside the buffers; "
            f"a valid request served after a reset; vmm counted:{c['facts']['vmm_faults']}")


BLK_REFUSED = ["write_sector0", "write_last_sector", "write_zeroes", "discard", "read_past_end", "read_sector_2p64",
               "read_len_not_sectors", "unknown_type"]


def judge_guest_root_disk_write(c, r):
    ra = attack_lines(r, "ra")
    need(all(k in ra for k in BLK_REFUSED + ["status_not_writable", "read_back_sector0", "vda"]), "an attempt did not report")
    need(ra["vda"]["offers_ro"] == 1, "the root disk was not offered read-only")
    escaped_if(not c["facts"]["root_image_unchanged"], "the root image changed on the host")
    done = [k for k in BLK_REFUSED if ra[k]["status"] == 0]
    escaped_if(done, "requests the device carried out: " + ", ".join(done))
    escaped_if(ra["status_not_writable"]["status"] != -1, "the device wrote a status the chain did not let it")
    back = ra["read_back_sector0"]
    need(back["used"] == 1 and back["status"] == 0, "sector 0 could not be read back")
    escaped_if(back["tag_found"], "the attack's data is on the root disk")
    statuses = ", ".join(f"{k} {ra[k]['status']}" for k in BLK_REFUSED)
    return (f"refused ({statuses}; 1 IOERR, 2 UNSUPP); a status byte in a read-only descriptor left alone; "
            f"sector 0 reads back without the attack's data; the image on the host is unchanged; "
            f"vmm counted:{c['facts']['vmm_faults']}")


def judge_vsock_flood(c, r):
    va = attack_lines(r, "va")
    need("flood_at_once" in va and "flood_churn" in va, "the flood did not report")
    need(r["exit_code"] == 0, f"the flood exited {r['exit_code']}")
    f, ch = va["flood_at_once"], va["flood_churn"]
    return (f"{f['tried']} at once: {f['connected']} connected, {f['refused']} refused, {f['failed_at_once']} failed "
            f"at once, {f['pending']} pending after {f['ms']} ms; {ch['tried']} in a row: {ch['connected']} connected, "
            f"{ch['refused']} refused; the agent's own session went on, and the run ended normally")


def judge_agent_impersonation(c, r):
    va = attack_lines(r, "va")
    need("impersonate_session" in va, "the impostor did not report")
    escaped_if("forged-output-from-an-impostor" in r["stdout"], "the impostor's output became the run's")
    escaped_if(r["exit_code"] == 0, "the impostor's exit status became the run's")
    escaped_if(va["impersonate_session"]["host_answered"], "the host answered the impostor with a request")
    need(r["exit_code"] == 7 and "genuine" in r["stdout"], "the real command's result is not the run's")
    return (f"impostor connected={va['impersonate_connect']['connected']}, frames sent="
            f"{va['impersonate_session']['frames_sent']}, never answered; readiness port connected="
            f"{va['impersonate_ready']['connected']}; the run's result is the real command's (exit 7, 'genuine')")


def judge_sigkill_vmrund(c, r):
    need(r is not None and r.get("state"), "the run was not found after the restart")
    escaped_if(r["state"] in ("queued", "running"), f"the run was left {r['state']} after the restart")
    need(r["state"] == "lost", f"the run ended {r['state']}, not lost")
    need(r.get("message") and "\n" not in r["message"], "no one-line message")
    escaped_if(c["facts"]["spool_left"], "the run's spool directory outlived the restart")
    kinds = sorted({x.split(":")[0] for x in c["facts"]["left_after_kill"]})
    left = ", ".join(kinds) if kinds else "nothing"
    return f"left after the kill: {left}; after the restart the run is lost: {r['message']}"


def judge_artifact_tar_names(c, r):
    need(r is not None and r.get("state") == "succeeded", "the run that leaves the artifacts did not succeed")
    tar = c["facts"]["tar"]
    escaped_if(c["facts"]["healthz"] != "200", "vmrund stopped answering after the tar was read")
    escaped_if(tar["error"] is not None, f"the tar does not read back: {tar['error']}")
    want = [["/".join([ch * 255] * 3 + [ch * n]), ch * 3] for ch, n in (("A", 246), ("B", 255))]
    escaped_if(tar["members"] != want, "the tar holds other names or bytes than the guest's two files")
    escaped_if(not tar["tail_zero"], "bytes other than the end blocks follow the last file")
    return f"the 1014- and 1023-byte names came back whole in a {tar['tar_bytes']}-byte tar; vmrund still answers"


def judge_judge0_callback_ssrf(c, r):
    f = c["facts"]
    escaped_if(f["listener_hits"] > 0, f"{f['listener_hits']} callbacks reached the host's loopback listener")
    accepted = [x for x in f["literals"] if not x.endswith(" 422")]
    escaped_if(accepted, "accepted at submission: " + "; ".join(accepted))
    need(len(f["literals"]) == 6, "not every literal was tried")
    need(f["token"], "the submission with the name was not accepted")
    need(r is not None and r.get("state") in ("succeeded", "failed", "timed_out"), "its run did not end")
    need(f["name_refused"], "no refusal of the name's callback in vmrund's log")
    return ("six loopback and metadata literals refused at submission (422); localhost's callback refused "
            "when made (it resolves to loopback); nothing reached the listener")


def judge_judge_contestant_snoop(c, r):
    j = c["facts"]["judged"]
    need("tests" in j, f"the judge did not answer: {j.get('error') or j.get('message')}")
    outs = [(t.get("stdout") or "").strip() for t in j["tests"]]
    found = [o for o in outs if o.startswith("found")]
    escaped_if(found, "a test saw what it must not: " + "; ".join(found))
    need(len(outs) == 3 and all(o == "clean" for o in outs), f"the tests did not run as designed: {outs}")
    return "each of three tests, a fork of the compiled VM, found no other test's files, no checker file and no expected output"


def judge_judge0_zip_bomb(c, r):
    f = c["facts"]
    answers = {a["kind"]: a for a in f["answers"]}
    need(set(answers) == {"bomb", "climb", "link", "many"}, f"not every archive was sent: {sorted(answers)}")
    accepted = [k for k, a in answers.items() if a["code"] != "422"]
    escaped_if(accepted, "accepted at submission: " + "; ".join(f"{k} {answers[k]['code']}" for k in accepted))
    want = {"bomb": "extracts to more than 10240 KB", "climb": "is not a path inside the workspace",
            "link": "is not a file or a directory", "many": "holds more than"}
    for k, w in want.items():
        need(w in answers[k]["body"], f"the {k} archive's 422 does not say why: {answers[k]['body']}")
    escaped_if(f["healthz"] != "200", "vmrund stopped answering")
    grew = f["rss_kib"][1] - f["rss_kib"][0]
    escaped_if(grew > 64 * 1024, f"vmrund grew by {grew} KiB reading them")
    escaped_if(c["wall_ms"] > 60000, f"the four answers took {c['wall_ms']} ms")
    return (f"all four 422 with the reason in {c['wall_ms']} ms (the bomb's {answers['bomb']['zip_bytes']} bytes "
            f"stopped at the cap); vmrund grew {grew} KiB")


def judge_judge_setter_flood(c, r):
    f = c["facts"]
    i, k = f["interactor"], f["checker"]
    need("tests" in i and "tests" in k, f"a judge did not answer: {i.get('error') or i.get('message')}; "
         f"{k.get('error') or k.get('message')}; vmrund's log ends: {f.get('vmrund_log', '')[-1500:]}")
    escaped_if(f["healthz"] != "200", "vmrund stopped answering")
    for name, j in (("interactor", i), ("checker", k)):
        verdicts = [t["verdict"] for t in j["tests"]]
        escaped_if(any(v == "accepted" for v in verdicts), f"a broken {name} let a test pass: {verdicts}")
        need(verdicts == ["internal_error"], f"the {name}'s test: {verdicts}")
        escaped_if(j["bytes"] > 8 << 20, f"the {name}'s judge answered {j['bytes']} bytes")
    escaped_if(c["wall_ms"] > 240000, f"the two judges took {c['wall_ms']} ms")
    grew = f["rss_kib"][1] - f["rss_kib"][0]
    escaped_if(grew > 200 * 1024, f"vmrund grew by {grew} KiB while they flooded")
    return (f"both answered internal_error in {c['wall_ms']} ms ({i['tests'][0]['message']}; "
            f"{k['tests'][0]['message']}); answers of {i['bytes']} and {k['bytes']} bytes; vmrund grew {grew} KiB")


def judge_admission_by_size(c, r):
    f = c["facts"]
    need(f, "the attempt printed nothing (timed out)")
    a, b = f["a"], r
    need(a and b and a.get("state") == "succeeded" and b.get("state") == "succeeded", "the two runs did not both succeed")
    need(f["b_while_a_ran"], "the first run was never seen running")
    escaped_if(f["b_while_a_ran"] != "queued", f"the second run was {f['b_while_a_ran']} beside the first: 1536 MiB on a node of 1024")
    escaped_if(b["started_at"] < a["finished_at"], "the second run started before the first had ended")
    escaped_if(f["big_status"] != "400", f"a run larger than the node was answered {f['big_status']}, not refused with 400")
    return f"the second run waited for the first; the larger one was refused: {f['big']['message']}"


def judge_connection_exhaustion(c, r):
    f = c["facts"]
    conn, streams = f["conn"], f["streams"]
    need(conn and streams, "the attempts printed nothing (timed out)")
    need(r is not None and r.get("state") == "succeeded", "the run whose output was streamed did not succeed")
    need(streams["streams_ended"] == 2, "the two streams within the limit did not both run to the end")
    escaped_if(not conn["other"].startswith("HTTP/1.1 200"), "another address was not served while one held its connections")
    escaped_if(conn["fifth"] != "", "a 5th connection from one address was served past its limit of 4")
    escaped_if(any(t is None or t > 8 for t in conn["cut_s"]), f"heads dribbled a byte a second were not cut at their deadline: {conn['cut_s']}")
    escaped_if(streams["third_stream"] != "429", f"a third output stream was answered {streams['third_stream']}, not 429")
    return f"the 5th connection was refused, another address served, the slow heads cut after {max(conn['cut_s'])} s, the 3rd stream 429"


def judge_load_api(c, r):
    need(r is not None and r.get("state"), "no run")
    escaped_if(r["state"] != "succeeded", f"{r['state']}: {r.get('message')}")
    need(r.get("stdout") == "load\n", "wrong output")
    return f"succeeded; all of its round done after {c['wall_ms']} ms"


def sandbox_facts(c):
    f = c["facts"] or {}
    need("setup" not in f, f.get("setup", ""))
    return f


def judge_sandbox_other_tenant(c, r):
    f = sandbox_facts(c)
    st = f["statuses"]
    need(len(st) >= 15, "b's attempts did not all run")
    escaped_if(f["token_seen"], "tenant a's token in b's answers to: " + ", ".join(f["token_seen"]))
    other = {k: v for k, v in st.items() if v != 404}
    escaped_if(other, "answered b other than 404: " + ", ".join(f"{k} {v}" for k, v in other.items()))
    need(f["b_list"] is not None, "b's list was not read")
    escaped_if(f["b_list"], "b's list of sandboxes holds a's")
    after = f["a_after"]
    escaped_if(after["state"] != "running", f"a's sandbox is {after['state']} after b's attempts")
    escaped_if(after["command"] != "running", f"a's command is {after['command']} after b's signal")
    need(after["files"] is not None, "a's files were not looked at afterwards")
    escaped_if(f["token"] not in after["files"] or "planted" in after["files"],
               "a's workspace changed under b's attempts: " + after["files"][-80:])
    need(r is not None and r.get("state") == "stopped", "a's sandbox was not deleted at the end")
    return (f"all {len(st)} of b's calls answered 404, none with a's token; b lists nothing; a's sandbox, "
            "its file and its command were untouched")


def judge_sandbox_cgroup_escape(c, r):
    f = sandbox_facts(c)
    esc = f["escape"]
    need(isinstance(esc, dict) and "started" in (esc.get("stdout") or ""), "the escape did not run")
    moves = [line.split()[1:] for line in esc["stdout"].splitlines() if line.startswith("move ")]
    need(moves, "no cgroup move was tried")
    moved = [m[0] for m in moves if m[1] == "0"]
    escaped_if(esc.get("end") != "timeout" and not esc.get("timed_out"), f"the command was not ended by its timeout: {esc}")
    need(f.get("killed") and f["killed"].get("state") != "running", "the SIGKILLed command did not end")
    need(f.get("survivors") is not None and "checked" in f["survivors"], "the survivors were not looked for")
    left = [line for line in f["survivors"].splitlines() if "evalmark" in line]
    escaped_if(left, "still running after its command ended: " + "; ".join(left[:4]))
    escaped_if(moved, "moved itself into " + ", ".join(moved))
    need(f.get("state_after") == "running", f"the sandbox is {f.get('state_after')} after the case")
    return (f"every move out of its cgroup refused ({', '.join(m[0] for m in moves)}); after the timeout and after SIGKILL no "
            "process of either command was left (setsid, TERM-ignoring, orphaned, nohup); the sandbox went on")


def judge_sandbox_outlives_time(c, r):
    from datetime import datetime
    f = sandbox_facts(c)
    need(r is not None and r.get("state"), "no view of the sandbox")
    escaped_if(r["state"] not in ("stopped",), f"{r['state']} after {f['seen_stopped_s']} s of a 20 s life")
    need("timeout_s" in (r.get("reason") or ""), f"stopped for another reason: {r.get('reason')}")
    late = (datetime.fromisoformat(r["ended_at"].replace("Z", "+00:00")) -
            datetime.fromisoformat(r["timeout_at"].replace("Z", "+00:00"))).total_seconds()
    escaped_if(late > 10, f"ended {late:.1f} s after its time")
    escaped_if(f["longer_life_status"] != 400, f"a life past the tenant's ceiling was answered {f['longer_life_status']}")
    return f"stopped {late:.1f} s after its time ({r['reason']}); a longer life was refused with 400"


def iso_time(text):
    """Whether text is a time as the APIs write one."""
    from datetime import datetime
    try:
        datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ")
        return True
    except (TypeError, ValueError):
        return False


def judge_sandbox_forged_files(c, r):
    f = sandbox_facts(c)
    a = f["answers"]
    need(len(a) == 5 and all(x["status"] for x in a.values()), "a forged answer's request got no answer")
    for name, x in a.items():
        ans = x["answer"]
        if isinstance(ans, dict):
            escaped_if(ans.get("bad_names"), f"{name}: names with / or .. reached the client: {ans.get('bad_names')}")
            escaped_if(ans.get("entries", 0) > 4096, f"{name}: {ans.get('entries')} entries past the most of 4096")
            escaped_if("/" in str(ans.get("name", "")), f"{name}: a stat named {ans.get('name')}")
            # numbers no stat can have, passed on as if they were one's
            escaped_if("size" in ans and not 0 <= ans["size"] < 1 << 63, f"{name}: a size of {ans.get('size')}")
            escaped_if(ans.get("mtime") is not None and not iso_time(ans["mtime"]),
                       f"{name}: an mtime of {ans.get('mtime')!r}")
    escaped_if(a["read"]["bytes"] > (1 << 20) + (64 << 10),
               f"a read past its credit passed {a['read']['bytes']} bytes to the client")
    faults = f["guest_faults"]
    need(faults[1] is not None, "the sandbox did not answer after the forgeries")
    escaped_if(faults[1] - (faults[0] or 0) < 5, f"forgeries went unnoticed: guest_faults {faults}")
    escaped_if(f["command_after"] != "alive\n", f"the sandbox stopped serving: {f['command_after']}")
    escaped_if(f["supervisor_exit"] != 0, f"the supervisor ended {f['supervisor_exit']}")
    return ("; ".join(f"{n} {x['status']}" for n, x in a.items()) + f" (cut at {a['read']['bytes']} bytes)" +
            f"; {faults[1] - (faults[0] or 0)} frames refused and counted; the sandbox served on; the supervisor "
            f"held {f['supervisor_rss_kib']} KiB and exited 0 at DELETE")


JUDGES = {
    "judge0_callback_ssrf": judge_judge0_callback_ssrf,
    "judge_contestant_snoop": judge_judge_contestant_snoop,
    "judge_setter_flood": judge_judge_setter_flood,
    "judge0_zip_bomb": judge_judge0_zip_bomb,
    "workspace_write": judge_workspace_write,
    "other_tenant": judge_other_tenant,
    "platform_secrets": judge_platform_secrets,
    "unauthorized_network": lambda c, r: judge_network(c, r, ["nc", "wget"]),
    "ssrf": lambda c, r: judge_network(c, r, ["wget", "nc-local"]),
    "privilege_escalation": judge_privilege,
    "cpu_quota": judge_cpu_quota,
    "memory": judge_memory,
    "timeout": judge_stopped_by_deadline,
    "fork_bomb": judge_fork_bomb,
    "huge_output": judge_huge_output,
    "hung_process": judge_stopped_by_deadline,
    "leftover_children": judge_leftover_children,
    "path_traversal": judge_path_traversal,
    "destroy_clears": judge_destroy_clears,
    "sigkill_vmrun": judge_sigkill,
    "tmpdir_full": lambda c, r: judge_failed_safe(c, r, "left_in_tmpdir"),
    "corrupt_rootfs": judge_failed_safe,
    "host_oom": judge_host_oom,
    "corrupt_workspace": judge_corrupt_workspace,
    "guest_rings": judge_guest_rings,
    "guest_root_disk_write": judge_guest_root_disk_write,
    "vsock_flood": judge_vsock_flood,
    "agent_impersonation": judge_agent_impersonation,
    "sigkill_vmrund": judge_sigkill_vmrund,
    "artifact_tar_names": judge_artifact_tar_names,
    "admission_by_size": judge_admission_by_size,
    "connection_exhaustion": judge_connection_exhaustion,
    "sandbox_other_tenant": judge_sandbox_other_tenant,
    "sandbox_cgroup_escape": judge_sandbox_cgroup_escape,
    "sandbox_outlives_time": judge_sandbox_outlives_time,
    "sandbox_forged_files": judge_sandbox_forged_files,
}


def judge_for(case_id):
    if case_id.startswith("load_api."):
        return judge_load_api
    if case_id.startswith("load_"):
        return judge_load
    if case_id.startswith("timeout_"):
        return judge_stopped_by_deadline
    return JUDGES.get(case_id)


def judge(c):
    r = c["result"]
    fn = judge_for(c["id"])
    try:
        if fn is None:
            raise Verdict("error", "no judge for this case")
        observed = fn(c, r)
        # whatever the case, nothing of any run may be left on the host
        escaped_if(c["leftovers"], "left behind: " + "; ".join(c["leftovers"]))
        return "contained", observed
    except Verdict as v:
        return v.verdict, v.observed
    except (KeyError, TypeError, ValueError) as e:
        return "error", f"evidence missing or malformed ({type(e).__name__}: {e})"


def limits_triggered(c, r, verdict):
    """Which limits this case's evidence shows firing."""
    if not r:
        return []
    out = []
    if r.get("timed_out"):
        out.append("timeout")
    if r.get("stdout_truncated") or r.get("stderr_truncated"):
        out.append("output")
    if c["id"] == "memory" and verdict == "contained":
        out.append("memory")
    if c["id"] == "cpu_quota" and verdict == "contained":
        out.append("cpu_quota")
    if "fork" in r.get("stderr", "") and ("Resource temporarily unavailable" in r["stderr"] or "can't fork" in r["stderr"]):
        out.append("nproc")
    return out


def pct(values, p):
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(p / 100 * len(s)) - 1))]


def figures(values):
    return {"n": len(values), "p50": pct(values, 50), "p95": pct(values, 95), "p99": pct(values, 99),
            "max": max(values) if values else None}


def svg_chart(runs):
    """Destruction time per run, a bar each, load runs in another colour."""
    if not runs:
        return "<p>No run reported a destruction time.</p>"
    w, h, pad = 900, 260, 40
    top = max(ms for _, ms, _ in runs) or 1
    bw = (w - 2 * pad) / len(runs)
    bars = []
    for i, (cid, ms, load) in enumerate(runs):
        bh = (h - 2 * pad) * ms / top
        colour = "#d98c1f" if load else "#2f6fb0"
        bars.append(f'<rect x="{pad + i * bw:.1f}" y="{h - pad - bh:.1f}" width="{max(bw - 1, 1):.1f}" '
                    f'height="{bh:.1f}" fill="{colour}"><title>{html.escape(cid)}: {ms} ms</title></rect>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
            f'aria-label="destruction time per run">'
            f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="#333"/>'
            f'<text x="{pad}" y="{pad - 12}" font-size="12">{top} ms</text>'
            f'<text x="{pad}" y="{h - pad + 16}" font-size="12">runs in order (orange: under load)</text>'
            + "".join(bars) + "</svg>")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "build/eval"
    cases = [json.loads(line) for line in open(f"{out}/cases.jsonl") if line.strip()]
    rows = []
    for c in cases:
        verdict, observed = judge(c)
        r = c["result"]
        rows.append({
            "id": c["id"], "category": c["category"], "attempted": c["attempt"], "expected": c["expected"],
            "observed": observed, "verdict": verdict,
            "evidence": {"status": c["status"], "termination": r and r.get("termination"),
                         "exit_code": r and r.get("exit_code"), "signal": r and r.get("signal"),
                         "timed_out": r and r.get("timed_out"), "message": r and r.get("message"),
                         "leftovers": c["leftovers"], "facts": c["facts"],
                         "limits_triggered": limits_triggered(c, r, verdict)},
            "durations": {"wall_ms": c["wall_ms"], "destroy_ms": c["destroy_ms"],
                          "vmrun_ms": r and r.get("durations_ms")},
        })
    by_cat = {}
    for row in rows:
        if row["category"] == "load":
            continue
        b = by_cat.setdefault(row["category"], {"attempts": 0, "contained": 0, "escaped": 0, "error": 0})
        b["attempts"] += 1
        b[row["verdict"]] += 1
    limits = {}
    for row in rows:
        for lim in row["evidence"]["limits_triggered"]:
            limits[lim] = limits.get(lim, 0) + 1
    destroy = [row["durations"]["destroy_ms"] for row in rows if row["durations"]["destroy_ms"] is not None]
    destroy_load = [row["durations"]["destroy_ms"] for row in rows
                    if row["category"] == "load" and row["durations"]["destroy_ms"] is not None]
    verdicts = {v: sum(1 for row in rows if row["verdict"] == v) for v in ("contained", "escaped", "error")}
    summary = {"cases": len(rows), "verdicts": verdicts, "escape_attempts_by_category": by_cat,
               "limit_triggers": limits, "destruction_ms": figures(destroy),
               "destruction_ms_under_load": figures(destroy_load),
               "profile": cases[0]["profile"] if cases else None}
    with open(f"{out}/report.json", "w") as f:
        json.dump({"summary": summary, "cases": rows}, f, indent=1)

    md = [f"# Sandbox evaluation ({summary['profile']} profile)", "",
          f"{len(rows)} cases: {verdicts['contained']} contained, {verdicts['escaped']} escaped, "
          f"{verdicts['error']} errors.", "", "## Escape attempts by category", "",
          "| category | attempts | contained | escaped | error |", "|---|---|---|---|---|"]
    md += [f"| {k} | {v['attempts']} | {v['contained']} | {v['escaped']} | {v['error']} |" for k, v in sorted(by_cat.items())]
    md += ["", "## Limit triggers", "", "| limit | triggered |", "|---|---|"]
    md += [f"| {k} | {v} |" for k, v in sorted(limits.items())]
    md += ["", "## Destruction time (deadline or exit to nothing of the run left), ms", "",
           "| runs | n | p50 | p95 | p99 | max |", "|---|---|---|---|---|---|"]
    for name, fig in (("all", summary["destruction_ms"]), ("under load", summary["destruction_ms_under_load"])):
        md.append(f"| {name} | {fig['n']} | {fig['p50']} | {fig['p95']} | {fig['p99']} | {fig['max']} |")
    md += ["", "## Cases", "", "| case | category | attempted | expected | observed | verdict | destroy ms |",
           "|---|---|---|---|---|---|---|"]
    esc = lambda s: str(s).replace("|", "\\|").replace("\n", " ")
    md += [f"| {row['id']} | {row['category']} | {esc(row['attempted'])} | {row['expected']} | {esc(row['observed'])} "
           f"| {row['verdict']} | {row['durations']['destroy_ms']} |" for row in rows]
    with open(f"{out}/report.md", "w") as f:
        f.write("\n".join(md) + "\n")

    chart = svg_chart([(row["id"], row["durations"]["destroy_ms"], row["category"] == "load") for row in rows
                       if row["durations"]["destroy_ms"] is not None])
    trs = "".join(f"<tr class=\"{row['verdict']}\"><td>{html.escape(row['id'])}</td><td>{html.escape(row['category'])}</td>"
                  f"<td>{html.escape(row['attempted'])}</td><td>{html.escape(row['expected'])}</td>"
                  f"<td>{html.escape(row['observed'])}</td><td>{row['verdict']}</td>"
                  f"<td>{row['durations']['destroy_ms']}</td></tr>" for row in rows)
    fig = summary["destruction_ms"]
    page = (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>vmrun sandbox evaluation</title>"
            f"<style>body{{font-family:sans-serif;margin:2em}}td,th{{border:1px solid #ccc;padding:4px;"
            f"vertical-align:top}}table{{border-collapse:collapse}}.escaped{{background:#f6d0d0}}"
            f".error{{background:#f6ecc8}}</style></head><body>"
            f"<h1>Sandbox evaluation ({html.escape(str(summary['profile']))} profile)</h1>"
            f"<p>{len(rows)} cases: {verdicts['contained']} contained, {verdicts['escaped']} escaped, "
            f"{verdicts['error']} errors.</p><h2>Destruction time per run</h2>"
            f"<p>p50 {fig['p50']} ms, p95 {fig['p95']} ms, p99 {fig['p99']} ms, max {fig['max']} ms over {fig['n']} runs.</p>"
            f"{chart}<h2>Cases</h2><table><tr><th>case</th><th>category</th><th>attempted</th><th>expected</th>"
            f"<th>observed</th><th>verdict</th><th>destroy ms</th></tr>{trs}</table></body></html>\n")
    with open(f"{out}/report.html", "w") as f:
        f.write(page)

    print(f"eval: {len(rows)} cases: {verdicts['contained']} contained, {verdicts['escaped']} escaped, "
          f"{verdicts['error']} errors; destruction p50 {fig['p50']} p95 {fig['p95']} p99 {fig['p99']} "
          f"max {fig['max']} ms; report in {out}/report.{{json,md,html}}")
    for row in rows:
        if row["verdict"] != "contained":
            print(f"eval: {row['verdict']}: {row['id']}: {row['observed']}")
    return 0 if rows and verdicts["contained"] == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
