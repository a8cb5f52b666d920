#!/usr/bin/env python3
"""The network tests' servers, run inside the test's server namespace.

    servers.py CERT KEY ADDR:PORT[:tls] ...

Each ADDR:PORT gets a threaded HTTP/1.1 server (TLS with CERT and KEY when
':tls' follows). Every server answers:
  /hello        "hello from HOST" (HOST as the request's Host header says)
  /headers      the request's headers, one "Name: value" per line
  /bytes?n=N    N bytes of 'x' (for caps and the benchmark)
  /simple/...   a PEP 503 index page, as pip reads it
and logs each request's headers to stdout, one JSON object per line, so
that a test can show what reached the server (a secret header) and what
did not. Prints "ready" once every socket listens.
"""
import http.server
import json
import socketserver
import ssl
import sys
import threading
import urllib.parse


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        print(json.dumps({"server": self.server.name, "path": self.path,
                          "headers": dict(self.headers.items())}), flush=True)
        host = (self.headers.get("Host") or "").split(":")[0]
        if url.path == "/hello":
            body = ("hello from %s\n" % host).encode()
        elif url.path == "/headers":
            body = "".join("%s: %s\n" % kv for kv in self.headers.items()).encode()
        elif url.path == "/bytes":
            n = int(urllib.parse.parse_qs(url.query).get("n", ["0"])[0])
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            chunk = b"x" * 65536
            while n > 0:
                self.wfile.write(chunk[:min(n, len(chunk))])
                n -= min(n, len(chunk))
            return
        elif url.path.startswith("/simple/"):
            body = b"<!DOCTYPE html><html><body><a href=\"demo-1.0.tar.gz\">demo-1.0.tar.gz</a></body></html>\n"
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    cert, key = sys.argv[1], sys.argv[2]
    servers = []
    for spec in sys.argv[3:]:
        parts = spec.split(":")
        addr, port, tls = parts[0], int(parts[1]), len(parts) > 2 and parts[2] == "tls"
        s = Server((addr, port), Handler)
        s.name = spec
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert, key)
            s.socket = ctx.wrap_socket(s.socket, server_side=True)
        servers.append(s)
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
