#!/usr/bin/env python3
"""vmrun-proxy as a run starts it, with this script as the guest.

    proxy_guest.py PROXY CA-FILE OUT-DIR NET-DIR

Run as root in the client namespace of tests/net/lib.sh. Starts PROXY
with its listening socket and control socket (host/run/proxy_wire.h), the
rules below and the test's DNS server, checks its jail in /proc, then
makes the requests a guest would make through vmm (each connection to
the Unix socket is one guest connection), and at the end reads the
audit. Prints one "ok NAME" or "FAIL NAME: why" per check; exits 1 if
any failed. The audit goes to OUT-DIR/audit.json for the caller.
"""
import json
import os
import socket
import ssl
import sys
import time

from proxy_harness import HELPER_UID, finish, guest, start as start_proxy

PROXY, CA, OUT, NET_DIR = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
failed = []


def check(name, cond, why=""):
    print(("ok %s" % name) if cond else ("FAIL %s: %s" % (name, why)), flush=True)
    if not cond:
        failed.append(name)



def read_all(s):
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except (socket.timeout, ConnectionResetError, ssl.SSLError):
        pass
    return out


def http(px, request):
    s = guest(px)
    try:
        s.sendall(request.encode())
    except (BrokenPipeError, ConnectionResetError):
        pass   # a refusal (a cap's 503) may come and close before the request is sent
    r = read_all(s)
    s.close()
    return r.decode(errors="replace")


def tls_get(px, host, port, sni, path="/hello"):
    s = guest(px)
    s.sendall(("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host, port, host, port)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        if not b:
            return "no answer to CONNECT"
        head += b
    if b" 200 " not in head.split(b"\r\n")[0]:
        return head.decode(errors="replace")
    ctx = ssl.create_default_context(cafile=CA)
    ctx.check_hostname = False   # a mismatched SNI is the proxy's to catch
    try:
        t = ctx.wrap_socket(s, server_hostname=sni)
        t.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path, host)).encode())
        return read_all(t).decode(errors="replace")
    except (ssl.SSLError, OSError) as e:
        return "TLS failed: %s" % e


def jail_of(pid):
    st = dict(l.split(":", 1) for l in open("/proc/%d/status" % pid).read().splitlines() if ":" in l)
    return {k: st[k].split() for k in ("Uid", "Gid", "Groups", "Seccomp", "NoNewPrivs", "CapEff")}


def main():
    px = start_proxy(PROXY, ["rule-host ok.test", "rule-host tls.test", "rule-host *.sub.test", "rule-host meta.test",
                "rule-host lo.test", "rule-host mirror.test:8080"])
    time.sleep(0.3)
    j = jail_of(px["p"].pid)
    check("jail: own uid", j["Uid"] == [str(HELPER_UID)] * 4, j["Uid"])
    check("jail: no groups", j["Groups"] == [], j["Groups"])
    check("jail: seccomp filter", j["Seccomp"] == ["2"], j["Seccomp"])
    check("jail: no_new_privs", j["NoNewPrivs"] == ["1"], j["NoNewPrivs"])
    check("jail: no capabilities", int(j["CapEff"][0], 16) == 0, j["CapEff"])
    try:
        root = os.readlink("/proc/%d/root" % px["p"].pid)
    except OSError as e:
        root = str(e)
    check("jail: empty root", root == px["root"], root)

    r = http(px, "GET http://ok.test/hello HTTP/1.1\r\nHost: ok.test\r\n\r\n")
    check("http allowed", r.startswith("HTTP/1.") and "hello from ok.test" in r, r[:200])
    r = tls_get(px, "ok.test", 443, "ok.test")
    check("https CONNECT allowed", "hello from ok.test" in r, r[:200])
    r = http(px, "GET http://other.test/hello HTTP/1.1\r\n\r\n")
    check("not allowed: 403", r.startswith("HTTP/1.1 403") and "not in the allowlist" in r, r[:200])
    r = http(px, "GET http://meta.test/latest/meta-data/ HTTP/1.1\r\n\r\n")
    check("metadata through an allowed name: 403", r.startswith("HTTP/1.1 403") and "169.254.169.254" in r, r[:200])
    r = http(px, "GET http://lo.test/hello HTTP/1.1\r\n\r\n")
    check("loopback through an allowed name: 403", r.startswith("HTTP/1.1 403") and "loopback" in r, r[:200])
    r = http(px, "GET http://mirror.test:8080/hello HTTP/1.1\r\n\r\n")
    check("private through an allowed name: 403", r.startswith("HTTP/1.1 403") and "private" in r, r[:200])
    r = http(px, "GET http://11.0.0.2/hello HTTP/1.1\r\n\r\n")
    check("IP literal: 403", r.startswith("HTTP/1.1 403") and "IP address" in r, r[:200])
    r = http(px, "GET http://169.254.169.254/latest/ HTTP/1.1\r\n\r\n")
    check("metadata literal: 403", r.startswith("HTTP/1.1 403"), r[:200])
    r = tls_get(px, "ok.test", 443, "tls.test")
    check("mismatched SNI refused", "hello" not in r, r[:200])
    r = http(px, "GET http://nx.sub.test/ HTTP/1.1\r\n\r\n")
    check("allowed name that does not resolve: 403", r.startswith("HTTP/1.1 403") and "resolve" in r, r[:200])
    audit, rc, err = finish(px)
    check("proxy exited 0", rc == 0, "status %s, stderr %r" % (rc, err))
    check("audit: one entry per request", len(audit) == 10, len(audit))
    allowed = [a for a in audit if a["allowed"]]
    check("audit: two allowed", len(allowed) == 2 and allowed[0]["address"] == "11.0.0.2" and
          allowed[0]["bytes_down"] > 0 and allowed[0]["end"] == "closed", allowed)
    sni = [a for a in audit if "does not match" in a["why"]]
    check("audit: the SNI refusal", len(sni) == 1 and not sni[0]["allowed"], audit)

    # an address rule lets the mirror through, on its port only
    px = start_proxy(PROXY, ["rule-host mirror.test:8080", "rule-addr 10.9.0.2/32:8080"])
    r = http(px, "GET http://mirror.test:8080/hello HTTP/1.1\r\n\r\n")
    check("--allow-net-addr: the private mirror", "hello from mirror.test" in r, r[:200])
    audit, rc, err = finish(px)
    check("--allow-net-addr: audit", len(audit) == 1 and audit[0]["allowed"] and
          audit[0]["address"] == "10.9.0.2", audit)
    json.dump(audit, open(os.path.join(OUT, "audit.json"), "w"))

    # "*" (Judge0's enable_network, a tenant's any): every name on 80 and
    # 443, and still never an IP literal, a private, loopback or metadata
    # address, or another port
    px = start_proxy(PROXY, ["rule-host *"])
    r = http(px, "GET http://ok.test/hello HTTP/1.1\r\nHost: ok.test\r\n\r\n")
    check("any host: a name", "hello from ok.test" in r, r[:200])
    r = http(px, "GET http://other.test/hello HTTP/1.1\r\n\r\n")
    check("any host: another name", r.startswith("HTTP/1.1 200"), r[:200])
    r = tls_get(px, "tls.test", 443, "tls.test")
    check("any host: https", "hello from tls.test" in r, r[:200])
    r = http(px, "GET http://meta.test/latest/meta-data/ HTTP/1.1\r\n\r\n")
    check("any host: metadata by name, 403", r.startswith("HTTP/1.1 403") and "169.254.169.254" in r, r[:200])
    r = http(px, "GET http://lo.test/hello HTTP/1.1\r\n\r\n")
    check("any host: loopback by name, 403", r.startswith("HTTP/1.1 403") and "loopback" in r, r[:200])
    r = http(px, "GET http://mirror.test:80/hello HTTP/1.1\r\n\r\n")
    check("any host: private by name, 403", r.startswith("HTTP/1.1 403") and "private" in r, r[:200])
    r = http(px, "GET http://ok.test:8080/hello HTTP/1.1\r\n\r\n")
    check("any host: another port, 403", r.startswith("HTTP/1.1 403") and "not in the allowlist" in r, r[:200])
    r = http(px, "GET http://11.0.0.2/hello HTTP/1.1\r\n\r\n")
    check("any host: an IP literal, 403", r.startswith("HTTP/1.1 403") and "IP address" in r, r[:200])
    audit, rc, err = finish(px)
    check("any host: audit", rc == 0 and len(audit) == 8 and [a["allowed"] for a in audit] == [True] * 3 + [False] * 5,
          (rc, audit, err))

    # address rules for metadata and loopback get past the policy, not
    # past the dial guard: refused at connect(), no byte reaches the
    # metadata server (127.0.0.2: 127.0.0.1 is lo's own address, which
    # the policy itself refuses already)
    px = start_proxy(PROXY, ["rule-host meta.test", "rule-addr 169.254.169.254/32", "rule-addr 127.0.0.0/8"])
    r = http(px, "GET http://meta.test/latest/meta-data/ HTTP/1.1\r\n\r\n")
    check("dial guard: metadata an address rule allows", r.startswith("HTTP/1.1 403") and
          "refused at connect: 169.254.169.254 is link-local" in r, r[:200])
    r = http(px, "GET http://127.0.0.2/hello HTTP/1.1\r\n\r\n")
    check("dial guard: loopback an address rule allows", r.startswith("HTTP/1.1 403") and
          "127.0.0.2 is loopback" in r, r[:200])
    r = http(px, "GET http://[::ffff:127.0.0.2]/hello HTTP/1.1\r\n\r\n")
    check("dial guard: loopback, IPv4-mapped", r.startswith("HTTP/1.1 403") and "127.0.0.2 is loopback" in r,
          r[:200])
    audit, rc, err = finish(px)
    check("dial guard: proxy exited 0, nothing allowed", rc == 0 and len(audit) == 3 and
          not any(a["allowed"] for a in audit), (rc, audit, err))

    # caps in the real process: tunnels at once, and bytes down
    px = start_proxy(PROXY, ["rule-host ok.test"], ["tunnels 1", "max-down 100000"])
    hold = guest(px)
    time.sleep(0.2)
    r = http(px, "GET http://ok.test/hello HTTP/1.1\r\n\r\n")
    check("cap: tunnels at once", r.startswith("HTTP/1.1 503"), r[:200])
    hold.close()
    time.sleep(0.2)
    r = http(px, "GET http://ok.test/bytes?n=1000000 HTTP/1.1\r\n\r\n")
    check("cap: bytes down", len(r) <= 100000, len(r))
    audit, rc, err = finish(px)
    check("cap: audit", any(a["end"] == "down_cap" for a in audit), audit)
    # a secret header: plain HTTP from the guest, TLS to ok.test:443 with
    # the header; the guest's own header of that name is dropped
    secret = "s3cr3t-%d" % os.getpid()
    px = start_proxy(PROXY, ["rule-host ok.test:443", "rule-host tls.test", "secret ok.test:X-Api-Key " + secret],
                     ca=CA)
    r = http(px, "GET http://ok.test/hello HTTP/1.1\r\nHost: ok.test\r\nX-Api-Key: forged\r\n\r\n")
    check("secret: the response comes back", "hello from ok.test" in r, r[:300])
    check("secret: not in the response the guest got", secret not in r, r[:300])
    r = http(px, "GET http://tls.test/hello HTTP/1.1\r\nHost: tls.test\r\n\r\n")
    check("secret: another host gets plain HTTP", "hello from tls.test" in r, r[:300])
    audit, rc, err = finish(px)
    log = [json.loads(l) for l in open(os.path.join(NET_DIR, "servers.log")) if l.startswith("{")]
    tls = [e for e in log if e["server"] == "11.0.0.2:443:tls" and e["headers"].get("Host") == "ok.test"]
    check("secret: it reached the TLS server", tls and tls[-1]["headers"].get("X-Api-Key") == secret, tls[-1:])
    check("secret: the guest's forged header did not", all("forged" not in json.dumps(e) for e in tls), tls)
    other = [e for e in log if e["headers"].get("Host") == "tls.test"]
    check("secret: never sent to another host", other and all("X-Api-Key" not in e["headers"] for e in other),
          other)
    check("secret: audit", len(audit) == 2 and audit[0]["port"] == 443 and audit[0]["end"] == "closed" and
          audit[0]["allowed"] and secret not in json.dumps(audit), audit)
    # without the test CA, the server's certificate is refused
    px = start_proxy(PROXY, ["rule-host ok.test:443", "secret ok.test:X-Api-Key " + secret])
    r = http(px, "GET http://ok.test/hello HTTP/1.1\r\nHost: ok.test\r\n\r\n")
    check("secret: an unverified server gets nothing", r.startswith("HTTP/1.1 502") and "verify failed" in r, r[:300])
    audit, rc, err = finish(px)
    check("secret: the refusal audited", len(audit) == 1 and "certificate verify failed" in audit[0]["why"], audit)
    return 1 if failed else 0


sys.exit(main())
