#!/usr/bin/env python3
# codings_check.py: tests/interop.sh's Python check of zstd and br: Python's own decoders
# (Debian's python3-zstandard and python3-brotli; gzip for gzip) on what gzserve sends for
# "Accept-Encoding: <coding>", every fixed demo endpoint on one keep-alive
# connection, compared with the identity bodies in REF.
#
# Usage: codings_check.py BASE REF CODING PATH...
# Prints one "PASS python: ..." or "FAIL python: ..." line.
import http.client, os, sys, urllib.parse
base, ref, coding, paths = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
try:
    if coding == "zstd":
        import zstandard
        decode = lambda b: zstandard.ZstdDecompressor().decompressobj().decompress(b)
    elif coding == "gzip":
        import gzip
        decode = gzip.decompress
    else:
        import brotli
        decode = brotli.decompress
except ImportError as e:
    print(f"FAIL python: {coding} decoder module ({e})")
    sys.exit(0)
u = urllib.parse.urlsplit(base)
conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
bad = []
for p in paths:
    conn.request("GET", p, headers={"Accept-Encoding": coding})
    r = conn.getresponse()
    body = r.read()
    name = "index.html" if p == "/" else p[1:]
    with open(os.path.join(ref, name), "rb") as f:
        want = f.read()
    if r.status != 200 or r.getheader("Content-Encoding") != coding:
        bad.append(f"{p}: {r.status} {r.getheader('Content-Encoding')}")
    elif decode(body) != want:
        bad.append(f"{p}: decoded bytes differ")
    elif int(r.getheader("Content-Length", "-1")) != len(body) or len(body) >= len(want):
        bad.append(f"{p}: length {len(body)} of {len(want)}")
conn.close()
if bad:
    print(f"FAIL python: {coding} on one keep-alive connection ({'; '.join(bad)})")
else:
    print(f"PASS python: {coding} on one keep-alive connection, every fixed endpoint decodes to its identity bytes")
