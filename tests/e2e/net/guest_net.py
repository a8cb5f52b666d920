# Run in the guest (python image) by tests/e2e/net.sh with --allow-net
# ok.test and tls.test: the clients a task would use, through the proxy
# the environment names. One "ok NAME" or "FAIL NAME: why" line each.
import os
import socket
import ssl
import urllib.error
import urllib.request
from html.parser import HTMLParser

CA = "ca.pem"   # the test CA, copied into the workspace


def line(name, cond, why=""):
    print(("ok %s" % name) if cond else ("FAIL %s: %s" % (name, why)), flush=True)


line("proxy variables set", os.environ.get("HTTPS_PROXY") == "http://127.0.0.1:3128" and
     os.environ.get("http_proxy") == "http://127.0.0.1:3128", dict(os.environ))

# urllib, as most Python code fetches: http_proxy/https_proxy from the environment
try:
    body = urllib.request.urlopen("http://ok.test/hello", timeout=20).read().decode()
    line("python urllib http", body == "hello from ok.test\n", body)
except Exception as e:
    line("python urllib http", False, repr(e))
ctx = ssl.create_default_context(cafile=CA)
try:
    body = urllib.request.urlopen("https://ok.test/hello", context=ctx, timeout=20).read().decode()
    line("python urllib https (CONNECT)", body == "hello from ok.test\n", body)
except Exception as e:
    line("python urllib https (CONNECT)", False, repr(e))


# pip's way: the simple index over HTTPS through HTTPS_PROXY, links parsed
class Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.links += [v for k, v in attrs if k == "href"]


try:
    page = urllib.request.urlopen("https://tls.test/simple/demo/", context=ctx, timeout=20).read().decode()
    p = Links()
    p.feed(page)
    line("pip-style index over https", p.links == ["demo-1.0.tar.gz"], page)
except Exception as e:
    line("pip-style index over https", False, repr(e))

# refusals, as the guest sees them
for url, what in (("http://other.test/hello", "not in the allowlist"), ("http://11.0.0.2/hello", "IP address")):
    try:
        urllib.request.urlopen(url, timeout=20)
        line("refused: " + url, False, "it was fetched")
    except urllib.error.HTTPError as e:
        line("refused: " + url, e.code == 403 and what in e.read().decode(), e.code)
    except Exception as e:
        line("refused: " + url, False, repr(e))

# a ClientHello naming another host than the CONNECT one
s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
s.sendall(b"CONNECT ok.test:443 HTTP/1.1\r\nHost: ok.test:443\r\n\r\n")
head = b""
while b"\r\n\r\n" not in head:
    b = s.recv(1)
    if not b:
        break
    head += b
try:
    nctx = ssl.create_default_context(cafile=CA)
    t = nctx.wrap_socket(s, server_hostname="tls.test")
    t.sendall(b"GET /hello HTTP/1.1\r\nHost: tls.test\r\n\r\n")
    line("mismatched SNI refused", False, t.recv(100))
except (ssl.SSLError, OSError):
    line("mismatched SNI refused", b" 200 " in head, head)
