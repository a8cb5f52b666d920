#!/usr/bin/python3
"""One Connect server-stream call, by hand, as Connect's JSON protocol
frames it (for tests/vmrund/e2b.sh): the request is one envelope (a
flags byte, a big-endian uint32 length, the JSON), the answer a series
of them, the last flagged 0x02 (EndStreamResponse). Prints the HTTP
status, then each frame as {"flags": F, "msg": JSON}, one a line; a body
that is not whole frames prints {"torn": N} with its bytes left.

    connect_call.py URL SANDBOX_ID TOKEN JSON [RAW_BODY_HEX]
"""
import json
import struct
import sys
import urllib.error
import urllib.request

url, sid, token, msg = sys.argv[1:5]
body = bytes.fromhex(sys.argv[5]) if len(sys.argv) > 5 else \
    struct.pack(">BI", 0, len(msg.encode())) + msg.encode()
rq = urllib.request.Request(url, data=body, method="POST", headers={
    "Content-Type": "application/connect+json", "Connect-Protocol-Version": "1",
    "Connect-Timeout-Ms": "20000", "E2b-Sandbox-Id": sid, "X-Access-Token": token})
try:
    with urllib.request.urlopen(rq, timeout=30) as r:
        status, data = r.status, r.read()
except urllib.error.HTTPError as e:
    status, data = e.code, e.read()
print(status)
while data:
    if len(data) < 5 or len(data) < 5 + struct.unpack(">I", data[1:5])[0]:
        print(json.dumps({"torn": len(data)}))
        break
    n = struct.unpack(">I", data[1:5])[0]
    print(json.dumps({"flags": data[0], "msg": json.loads(data[5:5 + n])}))
    data = data[5 + n:]
