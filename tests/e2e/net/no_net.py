# Run in the guest without --allow-net: every way out fails, and no proxy
# variable is set. One "ok NAME" or "FAIL NAME: why" line each.
import os
import socket


def line(name, cond, why=""):
    print(("ok %s" % name) if cond else ("FAIL %s: %s" % (name, why)), flush=True)


names = [k for k in os.environ if "proxy" in k.lower()]
line("no proxy variables", not names, names)
for addr in (("11.0.0.2", 80), ("127.0.0.1", 3128), ("169.254.169.254", 80), ("10.9.0.2", 8080)):
    try:
        socket.create_connection(addr, timeout=5).close()
        line("no way to %s:%d" % addr, False, "connected")
    except OSError as e:
        line("no way to %s:%d" % addr, True)
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.sendto(b"x", ("11.0.0.2", 53))
    line("no UDP out", False, "sent")
except OSError:
    line("no UDP out", True)
try:
    socket.getaddrinfo("ok.test", 80)
    line("no DNS", False, "resolved")
except OSError:
    line("no DNS", True)
try:
    v = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
    v.settimeout(5)
    v.connect((2, 3128))
    line("no vsock to the proxy port", False, "connected")
except OSError:
    line("no vsock to the proxy port", True)
