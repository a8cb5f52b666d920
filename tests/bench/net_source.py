#!/usr/bin/env python3
"""The benchmark's raw TCP source: on each connection, read one line (a
byte count), answer "!" and send that many bytes."""
import socket
import sys
import threading

CHUNK = b"x" * (1 << 20)


def serve(c):
    with c:
        n = int(c.makefile("rb").readline())
        c.sendall(b"!")
        while n > 0:
            k = min(n, len(CHUNK))
            c.sendall(CHUNK[:k])
            n -= k


s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(128)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
