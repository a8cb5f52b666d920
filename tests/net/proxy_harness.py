"""Start vmrun-proxy the way a run does (host/run/proxy_wire.h), for the tests
and the benchmark: its listening socket on fd 3, its control socket on
fd 4, the configuration records, the test's DNS server and a uid of its
own; and at the end, its audit."""
import fcntl
import os
import socket
import struct
import subprocess
import tempfile

AUDIT = struct.Struct("=254s16s160s24s16sHBB2xIQQq")
AUDIT_END = struct.Struct("=II")
HELPER_UID = 2999999
def start(proxy, rules, caps=(), ca=None):
    d = tempfile.mkdtemp(prefix="vmrun-proxy-test-")
    root = os.path.join(d, "root")
    os.mkdir(root, 0o555)
    path = os.path.join(d, "sock")
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lsock.bind(path)
    lsock.listen(64)
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    extra = ["ca-fd"] if ca else []
    for line in list(rules) + list(caps) + extra + ["dns 11.0.0.2", "ids %d %d" % (HELPER_UID, HELPER_UID), "end"]:
        mine.send(line.encode())
    lfd, cfd = os.dup(lsock.fileno()), os.dup(theirs.fileno())
    lfd2, cfd2 = fcntl.fcntl(lfd, fcntl.F_DUPFD, 20), fcntl.fcntl(cfd, fcntl.F_DUPFD, 20)
    cafd = fcntl.fcntl(os.open(ca, os.O_RDONLY), fcntl.F_DUPFD, 20) if ca else -1

    def fds():
        os.dup2(lfd2, 3)
        os.dup2(cfd2, 4)
        if cafd >= 0:
            os.dup2(cafd, 5)

    err = open(os.path.join(d, "err"), "w")
    p = subprocess.Popen([proxy, root], preexec_fn=fds, pass_fds=(3, 4, 5) if ca else (3, 4), stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=err, env={})
    for fd in (lfd, cfd, lfd2, cfd2) + ((cafd,) if ca else ()):
        os.close(fd)
    lsock.close()
    theirs.close()
    return {"p": p, "control": mine, "path": path, "dir": d, "root": root}


def finish(px):
    px["control"].shutdown(socket.SHUT_WR)
    px["control"].settimeout(10)
    audit = []
    while True:
        rec = px["control"].recv(4096)
        if len(rec) == AUDIT_END.size:
            break
        assert len(rec) == AUDIT.size, "record of %d bytes" % len(rec)
        f = AUDIT.unpack(rec)
        txt = lambda b: b.split(b"\0")[0].decode()
        addr = f[4]
        a = socket.inet_ntop(socket.AF_INET, addr[12:]) if addr[:12] == b"\0" * 10 + b"\xff\xff" \
            else socket.inet_ntop(socket.AF_INET6, addr)
        audit.append({"host": txt(f[0]), "method": txt(f[1]), "why": txt(f[2]), "end": txt(f[3]),
                      "address": a if f[7] else None, "port": f[5], "allowed": bool(f[6]),
                      "bytes_up": f[9], "bytes_down": f[10]})
    rc = px["p"].wait(10)
    err = open(os.path.join(px["dir"], "err")).read()
    return audit, rc, err


def guest(px):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(px["path"])
    return s


