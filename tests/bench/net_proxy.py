#!/usr/bin/env python3
"""Throughput and connect latency through vmrun-proxy against a direct
connection, on the same host (tests/bench/net_proxy.sh runs it in the
client namespace of tests/net/lib.sh, with a raw TCP source on
11.0.0.2:9000 that answers every connection with one byte, then sends
what it is asked for).

    net_proxy.py PROXY

Prints the figures; asserts nothing (DESIGN: targets are read, not
timed tests).
"""
import os
import socket
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "net"))
from proxy_harness import finish, guest, start  # noqa: E402

PROXY = sys.argv[1]
SIZE = 256 << 20
ROUNDS = 200


def direct():
    s = socket.create_connection(("11.0.0.2", 9000))
    return s


def tunnel(px):
    s = guest(px)
    s.sendall(b"CONNECT ok.test:9000 HTTP/1.1\r\nHost: ok.test:9000\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    assert b" 200 " in head, head
    return s


def first_byte(open_):
    t0 = time.perf_counter()
    s = open_()
    s.sendall(b"0\n")
    assert s.recv(1) == b"!"
    dt = time.perf_counter() - t0
    s.close()
    return dt


def throughput(open_):
    s = open_()
    s.sendall(b"%d\n" % SIZE)
    assert s.recv(1) == b"!"
    got = 0
    t0 = time.perf_counter()
    while got < SIZE:
        b = s.recv(1 << 20)
        if not b:
            break
        got += len(b)
    dt = time.perf_counter() - t0
    s.close()
    return got / dt / (1 << 20)


def main():
    px = start(PROXY, ["rule-host ok.test:9000"], ["max-down %d" % (4 * SIZE), "tunnels 64"])
    try:
        lat_d = statistics.median(first_byte(direct) for _ in range(ROUNDS)) * 1000
        lat_p = statistics.median(first_byte(lambda: tunnel(px)) for _ in range(ROUNDS)) * 1000
        thr_d = max(throughput(direct) for _ in range(3))
        thr_p = max(throughput(lambda: tunnel(px)) for _ in range(3))
    finally:
        finish(px)
    print("bench-net: connect to first byte, median of %d: direct %.3f ms, through the proxy %.3f ms "
          "(added %.3f ms; target <= 2 ms)" % (ROUNDS, lat_d, lat_p, lat_p - lat_d))
    print("bench-net: throughput, %d MiB, best of 3: direct %.0f MiB/s, through the proxy %.0f MiB/s "
          "(%.2fx; target >= 0.8x)" % (SIZE >> 20, thr_d, thr_p, thr_p / thr_d))


main()
