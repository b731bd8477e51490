"""http_check.py: tests/interop.sh's Python client: http.client + gzip against gzserve.

Usage: python3 http_check.py demo BASE_URL REF_DIR
       python3 http_check.py padded BASE_URL REF_DIR
       python3 http_check.py root BASE_URL ROOT_DIR

demo: every demo endpoint with Accept-Encoding: gzip decodes to the bytes of
      REF_DIR/<name> (identity bodies fetched by curl), HEAD/GET parity,
      /events as 10 ordered events, /stats as JSON, and a keep-alive sequence
      of 200/204/304/HEAD/GET on one connection.
padded: gzserve --length-hiding N: every demo endpoint's gzip body carries
      its padding in the header comment (FLG FCOMMENT, 1..N bytes), decodes
      with gzip.decompress and with zlib (wbits 31) to REF_DIR/<name>, twice
      the same bytes; then every demo check.
root: gzserve --root ROOT_DIR --precompressed: a FILE with a FILE.gz beside it
      is sent as exactly FILE.gz's bytes, decoding to FILE; one without is
      compressed on the fly.

Prints one line per check, "PASS python: ..." or "FAIL python: ...", and exits
0 once every check has run; any other exit means the script itself broke.
Python 3.11 standard library only (Debian 12's python3).
"""

import gzip
import http.client
import json
import os
import sys
import threading
import urllib.parse
import zlib

# Per socket operation, in seconds; interop.sh bounds the whole run too.
TIMEOUT_S = 10
# Demo endpoints with fixed bodies (the file name in REF_DIR is the path
# without its slash; "/" is index.html).
FIXED = ["/", "/style.css", "/app.js", "/2k.json", "/20k.json", "/100k.json"]
# The headers a HEAD must repeat from its GET (RFC 9110 section 9.3.2).
PARITY = ["content-type", "content-encoding", "content-length", "transfer-encoding", "vary",
          "etag", "cache-control", "last-modified", "accept-ranges"]
EVENTS = 10  # GZS_EVENTS in gzserve.c

failures = 0
lock = threading.Lock()


def report(ok, what, detail=None):
    global failures
    with lock:
        if not ok:
            failures += 1
        line = ("PASS" if ok else "FAIL") + " python: " + what
        print(line + (f" ({detail})" if detail and not ok else ""), flush=True)


def check(what, fn):
    """Run fn(); None or True passes, a string is the failure's reason."""
    try:
        detail = fn()
    except Exception as err:  # one check's failure, not the script's
        detail = f"{type(err).__name__}: {err}"
    report(detail is None or detail is True, what, detail)


def ref_name(path):
    return "index.html" if path == "/" else path.lstrip("/")


def connect(base):
    u = urllib.parse.urlsplit(base)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=TIMEOUT_S)


def fetch(conn, method, path, headers=None):
    """One exchange on conn: (response, raw body bytes, headers as a dict)."""
    conn.request(method, path, headers=headers or {})
    res = conn.getresponse()
    body = res.read()
    return res, body, {k.lower(): v for k, v in res.getheaders()}


def gzip_get(conn, path):
    res, raw, h = fetch(conn, "GET", path, {"Accept-Encoding": "gzip"})
    if h.get("content-encoding") != "gzip":
        raise AssertionError(f"{path}: status {res.status}, Content-Encoding "
                             f"{h.get('content-encoding')}")
    return res, raw, h, gzip.decompress(raw)


def parse_events(body):
    """The n of each event in a text/event-stream body, checking id == n."""
    ns = []
    for block in body.decode("utf-8").split("\n\n"):
        if not block.strip():
            continue
        fields = dict(line.split(": ", 1) for line in block.split("\n") if ": " in line)
        d = json.loads(fields["data"])
        if fields.get("id") != str(d["n"]) or d["of"] != EVENTS:
            raise AssertionError(f"bad event {block!r}")
        ns.append(d["n"])
    return ns


def demo(base, ref_dir):
    # /events takes 9 s (10 events, 1 s apart): run it beside everything else.
    def events():
        conn = connect(base)
        try:
            res, raw, h, body = gzip_get(conn, "/events")
            ns = parse_events(body)
            if ns != list(range(1, EVENTS + 1)):
                return f"events {ns}"
            if h.get("transfer-encoding") != "chunked":
                return f"Transfer-Encoding {h.get('transfer-encoding')}"
        finally:
            conn.close()
    ev = threading.Thread(target=check, args=(f"/events gzip: {EVENTS} events in order", events))
    ev.start()

    conn = connect(base)
    for path in FIXED:
        def body_ok(path=path):
            with open(os.path.join(ref_dir, ref_name(path)), "rb") as f:
                ref = f.read()
            res, raw, h, body = gzip_get(conn, path)
            if res.status != 200 or body != ref:
                return f"status {res.status}, {len(body)} decoded bytes vs {len(ref)}"
            if int(h["content-length"]) != len(raw):
                return f"Content-Length {h['content-length']}, {len(raw)} bytes came"
            if "accept-encoding" not in h.get("vary", "").lower():
                return f"Vary {h.get('vary')}"
            # http.client's default Accept-Encoding is identity.
            res, ident, h = fetch(conn, "GET", path)
            if ident != ref or "content-encoding" in h:
                return f"identity: {len(ident)} bytes, Content-Encoding {h.get('content-encoding')}"
        check(f"{path} gzip decodes to the identity bytes", body_ok)

    for path in FIXED + ["/stats", "/204", "/events", "/nonexistent"]:
        def parity(path=path):
            bad = []
            for ae in ("gzip", "identity"):
                hres, hbody, hh = fetch(conn, "HEAD", path, {"Accept-Encoding": ae})
                if hbody:
                    bad.append(f"{ae}: HEAD sent {len(hbody)} body bytes")
                if path == "/events":
                    # A GET would stream for 9 s: take its headers, then hang up.
                    c2 = connect(base)
                    c2.request("GET", path, headers={"Accept-Encoding": ae})
                    gres = c2.getresponse()
                    gh = {k.lower(): v for k, v in gres.getheaders()}
                    c2.close()
                else:
                    gres, _, gh = fetch(conn, "GET", path, {"Accept-Encoding": ae})
                if hres.status != gres.status:
                    bad.append(f"{ae}: status HEAD {hres.status} GET {gres.status}")
                # /stats: its counters, so its length, change between requests.
                # /events has no length: its HEAD carries no framing field
                # (Transfer-Encoding is fixed only while generating, RFC 9110
                # section 9.3.2) and closes the connection (libmicrohttpd
                # 0.9.75 cannot frame it otherwise). Its coding is decided on
                # its first bytes, which a HEAD does not read: the HEAD omits
                # Content-Encoding and ETag, and says nothing else.
                no_len = path == "/events"
                if no_len and hh.get("connection", "").lower() != "close":
                    bad.append(f"{ae}: HEAD of a stream: Connection {hh.get('connection')!r}")
                bad += [f"{ae}: {k}: HEAD {hh.get(k)!r} GET {gh.get(k)!r}" for k in PARITY
                        if hh.get(k) != gh.get(k)
                        and not (path == "/stats" and k == "content-length")
                        and not (no_len and k in ("transfer-encoding", "content-encoding", "etag")
                                 and hh.get(k) is None)]
            return "; ".join(bad) or None
        check(f"HEAD/GET parity {path} (gzip and identity)", parity)

    def stats():
        res, raw, h = fetch(conn, "GET", "/stats", {"Accept-Encoding": "gzip"})
        body = gzip.decompress(raw) if h.get("content-encoding") == "gzip" else raw
        doc = json.loads(body)
        if res.status != 200 or "compressed" not in doc:
            return f"status {res.status}, {body[:80]!r}"
    check("/stats is JSON", stats)
    conn.close()

    # Keep-alive: one HTTPConnection, one socket, six exchanges. http.client
    # reconnects silently when a response closes, so the socket's local
    # port is compared after each one.
    def keepalive():
        with open(os.path.join(ref_dir, "2k.json"), "rb") as f:
            ref = f.read()
        c = connect(base)
        c.connect()
        port = c.sock.getsockname()[1]
        seen = []
        try:
            _, _, h, body = gzip_get(c, "/2k.json")
            etag = h["etag"]
            steps = [
                ("GET", "/204", {"Accept-Encoding": "gzip"}, 204),
                ("GET", "/2k.json", {"Accept-Encoding": "gzip", "If-None-Match": etag}, 304),
                ("HEAD", "/2k.json", {"Accept-Encoding": "gzip"}, 200),
                ("GET", "/2k.json", {"Accept-Encoding": "gzip"}, 200),
                ("GET", "/204", {}, 204),
            ]
            for method, path, hdrs, want in steps:
                res, raw, h = fetch(c, method, path, hdrs)
                seen.append(res.status)
                if res.status != want:
                    return f"{method} {path}: {res.status}, want {want} (so far {seen})"
                if res.will_close or c.sock is None or c.sock.getsockname()[1] != port:
                    return f"{method} {path}: the connection closed (so far {seen})"
                if want in (204, 304) and raw:
                    return f"{method} {path}: {want} with {len(raw)} body bytes"
                if want == 304 and h.get("etag") != etag:
                    return f"304 ETag {h.get('etag')}, the 200 had {etag}"
                if method == "GET" and want == 200 and gzip.decompress(raw) != ref:
                    return "the last GET decodes to other bytes"
        finally:
            c.close()
    check("keep-alive GET/204/304/HEAD/GET/204 on one connection", keepalive)
    ev.join(TIMEOUT_S + EVENTS)


def root(base, root_dir):
    conn = connect(base)
    for name in sorted(os.listdir(root_dir)):
        if name.endswith(".gz"):
            continue
        path = "/" + name

        def served(path=path, name=name):
            with open(os.path.join(root_dir, name), "rb") as f:
                ref = f.read()
            res, raw, h, body = gzip_get(conn, path)
            if body != ref:
                return f"{len(body)} decoded bytes vs {len(ref)}"
            gz = os.path.join(root_dir, name + ".gz")
            if os.path.exists(gz):
                with open(gz, "rb") as f:
                    if raw != f.read():
                        return "the gzip body is not the bytes of " + name + ".gz"
            res, ident, h = fetch(conn, "GET", path)
            if ident != ref or "content-encoding" in h:
                return f"identity: {len(ident)} bytes, Content-Encoding {h.get('content-encoding')}"
        what = (f"{path} is {name}.gz as is" if os.path.exists(os.path.join(root_dir, name + ".gz"))
                else f"{path} compressed on the fly")
        check(f"--precompressed: {what}, decodes to {name}", served)
    conn.close()


def padded(base, ref_dir):
    conn = connect(base)
    for path in FIXED:
        def one(path=path):
            with open(os.path.join(ref_dir, ref_name(path)), "rb") as f:
                ref = f.read()
            _, raw, _, body = gzip_get(conn, path)
            _, again, _, _ = gzip_get(conn, path)
            if raw[3] != 0x10:
                return f"FLG {raw[3]:#x}, want FCOMMENT (0x10)"
            end = raw.index(b"\0", 10)
            if raw[10:end].strip(b" ") or not 1 <= end - 10 + 1 <= 65536:
                return f"comment of {end - 10 + 1} bytes is not padding"
            if body != ref or zlib.decompress(raw, 31) != ref:
                return f"decodes to {len(body)} bytes, not {ref_name(path)}"
            if again != raw:
                return "a second GET gives other bytes"
            return None
        check(f"{path} padded ({ref_name(path)}): decodes with gzip and zlib, stable", one)
    conn.close()
    demo(base, ref_dir)


def main():
    mode, base, folder = sys.argv[1:4]
    {"demo": demo, "padded": padded, "root": root}[mode](base, folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
