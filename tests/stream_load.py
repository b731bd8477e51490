#!/usr/bin/env python3
"""stream_load.py: N concurrent gzip /events streams against gzserve, every stream decoded; reports server RSS, events, errors.

Loopback only, bounded in count (--streams) and time (--timeout, for the
whole run). Each client connects (at most --connect-burst connects in
flight, so the listen backlog is not flooded), sends one
"GET /events" with "Accept-Encoding: gzip", reads the chunked response,
inflates the gzip member as it arrives (zlib, wbits 31) and counts the
events ("id:" lines of complete server-sent events). A stream is good when
the response is 200 with Content-Encoding: gzip, the member ends (a
complete trailer: CRC-32 and length checked by zlib) and exactly --events
events decoded. The server's RSS (VmRSS of --pid) is sampled every 100 ms.

Output, one "key value" per line, then a verdict line:
  streams, good, events, errors (connect, HTTP, framing or timeout),
  decode_failures, peak_open (streams open at once), rss_before_kib,
  rss_peak_kib, rss_per_stream_kib ((peak - before) / peak_open).
Exit status: 0 when every stream is good, 1 otherwise, 2 for bad usage.
"""

import argparse
import asyncio
import resource
import sys
import time
import zlib


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


class Stats:
    def __init__(self):
        self.good = 0
        self.events = 0
        self.errors = 0
        self.decode_failures = 0
        self.open = 0
        self.peak_open = 0
        self.first_error = None

    def error(self, what):
        self.errors += 1
        if self.first_error is None:
            self.first_error = what


async def read_chunked(reader, sink):
    """Feed each chunk of a chunked body to sink; return at the last chunk."""
    while True:
        line = await reader.readline()
        if not line.endswith(b"\r\n"):
            raise ValueError("truncated chunk size")
        size = int(line.split(b";")[0], 16)
        if size == 0:
            # Trailer fields, then the empty line.
            while (await reader.readline()) not in (b"\r\n", b""):
                pass
            return
        sink(await reader.readexactly(size))
        if await reader.readexactly(2) != b"\r\n":
            raise ValueError("chunk not followed by CRLF")


async def one_stream(args, st, connect_gate):
    async with connect_gate:
        reader, writer = await asyncio.open_connection(args.host, args.port)
    st.open += 1
    st.peak_open = max(st.peak_open, st.open)
    try:
        writer.write(
            f"GET /events HTTP/1.1\r\nHost: {args.host}:{args.port}\r\n"
            "Accept-Encoding: gzip\r\nConnection: close\r\n\r\n".encode()
        )
        await writer.drain()
        status = await reader.readline()
        if not status.startswith(b"HTTP/1.1 200"):
            st.error(f"status {status!r}")
            return
        headers = {}
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b""):
                break
            k, _, v = line.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip().lower()
        if headers.get("content-encoding") != "gzip" or headers.get("transfer-encoding") != "chunked":
            st.error(f"headers {headers}")
            return
        inflater = zlib.decompressobj(31)
        text = bytearray()
        try:
            await read_chunked(reader, lambda b: text.extend(inflater.decompress(b)))
        except (ValueError, asyncio.IncompleteReadError) as e:
            st.error(f"framing: {e}")
            return
        except zlib.error as e:
            st.decode_failures += 1
            if st.first_error is None:
                st.first_error = f"decode: {e}"
            return
        if not inflater.eof or inflater.unused_data:
            st.decode_failures += 1
            if st.first_error is None:
                st.first_error = "decode: member incomplete or trailing bytes"
            return
        events = sum(1 for block in bytes(text).split(b"\n\n") if block.startswith(b"id: "))
        st.events += events
        if events != args.events:
            st.error(f"{events} events, expected {args.events}")
            return
        st.good += 1
    finally:
        st.open -= 1
        writer.close()


async def guarded(args, st, gate):
    try:
        await one_stream(args, st, gate)
    except (OSError, asyncio.IncompleteReadError) as e:
        st.error(f"{type(e).__name__}: {e}")


async def main_async(args):
    st = Stats()
    gate = asyncio.Semaphore(args.connect_burst)
    rss_before = rss_kib(args.pid) if args.pid else -1
    rss_peak = rss_before
    tasks = [asyncio.ensure_future(guarded(args, st, gate)) for _ in range(args.streams)]
    deadline = time.monotonic() + args.timeout
    while True:
        done = sum(t.done() for t in tasks)
        if args.pid:
            rss_peak = max(rss_peak, rss_kib(args.pid))
        if done == len(tasks) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    unfinished = [t for t in tasks if not t.done()]
    for t in unfinished:
        t.cancel()
    if unfinished:
        await asyncio.gather(*unfinished, return_exceptions=True)
        st.errors += len(unfinished)
        if st.first_error is None:
            st.first_error = f"{len(unfinished)} streams unfinished after {args.timeout} s"
    return st, rss_before, rss_peak


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pid", type=int, default=0, help="gzserve's pid, for its RSS")
    p.add_argument("--streams", type=int, default=1000)
    p.add_argument("--events", type=int, default=10, help="events each stream must carry")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds for the whole run")
    p.add_argument("--connect-burst", type=int, default=256, help="connects in flight at once")
    args = p.parse_args()
    if args.host not in ("127.0.0.1", "::1", "localhost"):
        p.error("loopback only")
    if not 1 <= args.streams <= 100000:
        p.error("--streams: 1-100000")

    # One descriptor per stream, plus some.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, args.streams + 256) if hard != resource.RLIM_INFINITY else args.streams + 256
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    if want < args.streams + 16:
        print(f"stream_load: RLIMIT_NOFILE hard limit {hard} is below {args.streams} streams",
              file=sys.stderr)

    t0 = time.monotonic()
    st, rss_before, rss_peak = asyncio.run(main_async(args))
    secs = time.monotonic() - t0
    per = (rss_peak - rss_before) / st.peak_open if st.peak_open and rss_before >= 0 else -1
    print(f"streams {args.streams}")
    print(f"good {st.good}")
    print(f"events {st.events}")
    print(f"errors {st.errors}")
    print(f"decode_failures {st.decode_failures}")
    print(f"peak_open {st.peak_open}")
    print(f"seconds {secs:.1f}")
    print(f"rss_before_kib {rss_before}")
    print(f"rss_peak_kib {rss_peak}")
    print(f"rss_per_stream_kib {per:.1f}")
    if st.first_error:
        print(f"first_error {st.first_error}")
    ok = st.good == args.streams and st.errors == 0 and st.decode_failures == 0
    print(f"verdict {'ok' if ok else 'FAIL'}: {st.good}/{args.streams} streams, "
          f"{st.events} events, {st.errors} errors, {st.decode_failures} decode failures")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
