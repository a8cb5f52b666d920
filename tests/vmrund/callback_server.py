#!/usr/bin/env python3
"""A Judge0 callback's receiver for tests/vmrund/judge0_callback.sh:
HTTP on each ADDR:PORT given, every request written to LOG as one JSON
line {"at", "method", "path", "body"}, answered 200. Prints "ready" once
listening. usage: callback_server.py LOG ADDR:PORT..."""
import http.server, json, sys, threading

log = sys.argv[1]
lock = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    def handle_one(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode(errors="replace")
        with lock, open(log, "a") as f:
            f.write(json.dumps({"at": "%s:%d" % self.server.server_address[:2], "method": self.command,
                                "path": self.path, "type": self.headers.get("Content-Type"),
                                "body": body}) + "\n")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_PUT = do_POST = do_GET = handle_one

    def log_message(self, *args):
        pass


for spec in sys.argv[2:]:
    host, port = spec.rsplit(":", 1)
    srv = http.server.ThreadingHTTPServer((host, int(port)), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
