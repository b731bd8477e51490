#!/usr/bin/env bash
# gzserve_test.sh: end-to-end tests of examples/gzserve/gzserve on 127.0.0.1 port 0 with the curl command-line tool.
#
# Every check prints one line ("ok N - what" or "not ok N - what: why"); the
# script ends with "N passed, M failed" and exits non-zero on any failure.
# Every curl has --max-time, every wait is bounded, and every server this
# script starts is killed by the EXIT trap.
#
# GZSERVE names the binary (make check sets it, for VPATH builds); by default
# ../examples/gzserve/gzserve next to this script.
set -u

GZSERVE=${GZSERVE:-$(cd "$(dirname "$0")/.." && pwd)/examples/gzserve/gzserve}
CURL=(curl -s -S --max-time 15)
. "$(dirname "$0")/testlib.sh"

tl_need curl
if [ ! -x "$GZSERVE" ]; then
	echo "gzserve not found at $GZSERVE (set GZSERVE)" >&2
	exit 1
fi

tl_scratch gzserve_test
# start NAME ARGS...: start gzserve on port 0, wait (bounded) for its
# "listening on" line; sets PID and BASE. Returns non-zero if it did not come up.
start() {
	tl_start "$1" "$T/$1.err" "$GZSERVE" --port 0 "${@:2}"
}

# headers without Date (and the Content-Length/Transfer-Encoding framing
# kept): for HEAD/GET parity.
headers_nodate() {
	tr -d '\r' <"$1" | grep -v -i '^date:' | grep -v '^$'
}
gunzip_to() {
	gzip -dc <"$1" >"$2" 2>/dev/null
}
have_python() {
	command -v python3 >/dev/null 2>&1
}
# have_codings LIST: this gzserve's libmhdgz offers every coding of LIST
# (mhdgz_new() accepts the list, so a server with it comes up).
have_codings() {
	start "probe-$RANDOM" --codings "$1" --quiet 2>/dev/null || return 1
	tl_stop "$PID"
	return 0
}
# concurrent TAG NAME ARGS1 WANT1 ... ARGS4 WANT4: 16 curl clients at once,
# client i with the (i mod 4)th "curl args" (split on blanks) and body file;
# one check that every client succeeded with exactly its body.
concurrent() {
	local tag=$1 name=$2 i k fail=0 pids=() args
	shift 2
	for i in $(seq 1 16); do
		k=$((2 * (i % 4) + 1))
		read -r -a args <<<"${!k}"
		"${CURL[@]}" -o "$T/$tag$i.body" "${args[@]}" &
		pids+=($!)
	done
	for i in "${pids[@]}"; do
		wait "$i" || fail=$((fail + 1))
	done
	for i in $(seq 1 16); do
		k=$((2 * (i % 4) + 2))
		cmp -s "$T/$tag$i.body" "${!k}" || fail=$((fail + 1))
	done
	eq "$name" "$fail" 0
}
# head_parity URL CODING: HEAD has GET's header fields (hg.h) and no body.
head_parity() {
	local url=$1 ae=$2 n
	n=$("${CURL[@]}" -I -D "$T/hh.h" -o /dev/null -w '%{size_download}' \
		-H "Accept-Encoding: $ae" "$url")
	if diff <(headers_nodate "$T/hg.h") <(headers_nodate "$T/hh.h") >"$T/hdiff"; then
		ok "HEAD ${url#"$BASE"} ($ae) has GET's headers"
	else
		nok "HEAD ${url#"$BASE"} ($ae) has GET's headers" "$(tr '\n' ' ' <"$T/hdiff")"
	fi
	eq "HEAD ${url#"$BASE"} ($ae) has no body" "$n" 0
}
# cl_304 NAME H304 H200: a 304 carries no Content-Length but its 200's
# (RFC 9110 section 8.6).
cl_304() {
	local a b
	a=$(hdr "$2" Content-Length)
	b=$(hdr "$3" Content-Length)
	if [ -z "$a" ] || [ "$a" = "$b" ]; then
		ok "$1: Content-Length '${a:-none}' is the 200's"
	else
		nok "$1: Content-Length is the 200's" "304 has '$a', 200 has '${b:-none}'"
	fi
}
valid_json() {
	python3 -c 'import json, sys; json.load(open(sys.argv[1], "rb"))' "$1" 2>/dev/null
}

# ---------------------------------------------------------------------------
# Options: every invalid value is rejected with a message and exit code 2.

bad_opt() {
	local name=$1 rc
	shift
	timeout 10 "$GZSERVE" "$@" >"$T/opt.out" 2>"$T/opt.err"
	rc=$?
	if [ "$rc" = 2 ] && [ -s "$T/opt.err" ] && grep -q '^gzserve: ' "$T/opt.err"; then
		ok "rejects $name (exit 2: $(head -n 1 "$T/opt.err"))"
	else
		nok "rejects $name" "exit $rc, stderr '$(head -n 1 "$T/opt.err")'"
	fi
}
bad_opt "--port 70000" --port 70000
bad_opt "--port abc" --port abc
bad_opt "--port -1" --port -1
bad_opt "--level 13 (libdeflate 1-12)" --level 13
bad_opt "--level 0 with zlib" --backend zlib --level 0
bad_opt "--level x" --level x
bad_opt "--backend brotli" --backend brotli
bad_opt "--etag strong" --etag strong
bad_opt "--threads 0" --threads 0
bad_opt "--length-hiding 0" --length-hiding 0
bad_opt "--length-hiding 65537" --length-hiding 65537
bad_opt "--min-size -5" --min-size -5
bad_opt "--min-size 12k" --min-size 12k
bad_opt "--types with a bad pattern" --types 'text/html,notatype'
bad_opt "--root on a missing directory" --root "$T/does-not-exist"
bad_opt "--bind not-an-address" --bind not-an-address
bad_opt "--precompressed without --root" --precompressed
bad_opt "an unknown option" --frobnicate
bad_opt "a missing value" --port
bad_opt "a stray argument" stray
bad_opt "--codings deflate" --codings deflate
bad_opt "--codings gzip,gzip" --codings gzip,gzip
bad_opt "--codings with an empty item" --codings 'zstd,,gzip'
bad_opt "--codings empty" --codings ''
bad_opt "--cache-size x" --cache-size x
bad_opt "--cache-size -1" --cache-size -1
bad_opt "--cache-size without --root" --cache-size 1000
bad_opt "--coder-memory 0" --coder-memory 0
bad_opt "--coder-memory x" --coder-memory x
bad_opt "--dictionary without --dictionary-match" --dictionary /etc/hostname
bad_opt "--dictionary-match without --dictionary" --dictionary-match '/*'
bad_opt "two --dictionary, the first without a match" --dictionary a --dictionary b --dictionary-match '/*'

timeout 10 "$GZSERVE" --help >"$T/help.out" 2>&1
rc=$?
eq "--help exits 0" "$rc" 0
missing=""
for o in --bind --port --root --backend --level --min-size --types --threads \
	--precompressed --codings --etag --no-compress --cache-size --coder-memory --dictionary \
	--dictionary-match --events --event-ms --length-hiding --quiet --help; do
	grep -q -- "$o" "$T/help.out" || missing="$missing $o"
done
eq "--help documents every option" "${missing:-none}" none

# ---------------------------------------------------------------------------
# The demo

if ! start demo; then
	nok "demo server starts" "see stderr above"
	echo "$NPASS passed, $NFAIL failed"
	exit 1
fi
DEMO_PID=$PID
D=$BASE
check "prints 'listening on http://127.0.0.1:PORT/'" \
	grep -Eq '^listening on http://127\.0\.0\.1:[0-9]+/$' "$T/demo.out"
# A port already taken: exit 1; stderr ends with the refusal, after
# libmicrohttpd's reason, and has no line of a server that started.
dport=${D%/}
dport=${dport##*:}
timeout 10 "$GZSERVE" --bind 127.0.0.1 --port "$dport" >"$T/taken.out" 2>"$T/taken.err"
rc=$?
eq "a port in use: exit 1, the refusal last, no start-up line, nothing on stdout" \
	"$rc|$(tail -n 1 "$T/taken.err")|$(grep -c 'connections (RLIMIT' "$T/taken.err")|$(cat "$T/taken.out")" \
	"1|gzserve: cannot listen on 127.0.0.1 port $dport|0|"

# name path content-type size (or - when not fixed)
DEMO_ENDPOINTS="index|/|text/html; charset=utf-8|-
css|/style.css|text/css; charset=utf-8|-
js|/app.js|text/javascript; charset=utf-8|-
p2k|/2k.json|application/json|2048
p20k|/20k.json|application/json|20480
p100k|/100k.json|application/json|102400"

while IFS='|' read -r name path type want; do
	fetch "$name.id" "$D$path"
	fetch "$name.gz" "$D$path" -H 'Accept-Encoding: gzip'
	fetch "$name.cc" "$D$path" --compressed
	ce=$(hdr "$T/$name.id.h" Content-Encoding)
	eq "$path identity: 200, no Content-Encoding" "$(status "$T/$name.id.h") ${ce:-none}" "200 none"
	eq "$path Content-Type" "$(hdr "$T/$name.id.h" Content-Type)" "$type"
	eq "$path identity Content-Length = body" "$(hdr "$T/$name.id.h" Content-Length)" \
		"$(size "$T/$name.id.body")"
	if [ "$want" != - ]; then
		eq "$path is exactly $want bytes" "$(size "$T/$name.id.body")" "$want"
	fi
	eq "$path identity has Vary: Accept-Encoding" "$(hdr "$T/$name.id.h" Vary)" "Accept-Encoding"
	eq "$path gzip: Content-Encoding" "$(hdr "$T/$name.gz.h" Content-Encoding)" gzip
	eq "$path gzip: Vary" "$(hdr "$T/$name.gz.h" Vary)" "Accept-Encoding"
	eq "$path gzip: Content-Length = compressed body" "$(hdr "$T/$name.gz.h" Content-Length)" \
		"$(size "$T/$name.gz.body")"
	if gunzip_to "$T/$name.gz.body" "$T/$name.gunz" && cmp -s "$T/$name.gunz" "$T/$name.id.body"; then
		ok "$path gzip body inflates to the identity body"
	else
		nok "$path gzip body inflates to the identity body" "differs"
	fi
	check "$path gzip is smaller" test "$(size "$T/$name.gz.body")" -lt "$(size "$T/$name.id.body")"
	check "$path curl --compressed body = identity body" cmp -s "$T/$name.cc.body" "$T/$name.id.body"
	etag_id=$(hdr "$T/$name.id.h" ETag)
	etag_gz=$(hdr "$T/$name.gz.h" ETag)
	if [[ "$etag_id" =~ ^\"[^\"]+\"$ ]] && [ "$etag_gz" = "W/$etag_id" ]; then
		ok "$path ETag strong for identity, W/ form for gzip ($etag_id)"
	else
		nok "$path ETag forms" "identity '$etag_id', gzip '$etag_gz'"
	fi
	eq "$path Cache-Control" "$(hdr "$T/$name.id.h" Cache-Control)" "no-cache"
done <<<"$DEMO_ENDPOINTS"

# The default codings (no --codings): zstd before gzip where built. A
# browser's Accept-Encoding gets zstd, "gzip" and "zstd;q=0.5, gzip" get
# gzip; each body decodes to the identity body byte for byte.
if have_codings zstd && command -v zstd >/dev/null 2>&1; then
	n=0
	for c in 'zstd|gzip, deflate, br, zstd' 'gzip|gzip' 'gzip|zstd;q=0.5, gzip'; do
		n=$((n + 1))
		fetch "dc$n" "$D/100k.json" -H "Accept-Encoding: ${c#*|}"
		eq "default codings: '${c#*|}' gets ${c%%|*}, Vary" \
			"$(hdr "$T/dc$n.h" Content-Encoding)|$(hdr "$T/dc$n.h" Vary)" "${c%%|*}|Accept-Encoding"
		if [ "${c%%|*}" = zstd ]; then
			zstd -q -d -c "$T/dc$n.body" >"$T/dc$n.dec"
		else
			gunzip_to "$T/dc$n.body" "$T/dc$n.dec"
		fi
		check "default codings: '${c#*|}': decodes to the identity body" \
			cmp -s "$T/dc$n.dec" "$T/p100k.id.body"
	done
else
	echo "SKIP: default codings (gzserve without zstd, or no zstd command)"
fi

if have_python; then
	for n in p2k p20k p100k; do
		check "$n body is valid JSON" valid_json "$T/$n.id.body"
	done
else
	echo "# python3 not found: JSON validity of the payloads not checked"
fi
for ref in /style.css /app.js /2k.json /20k.json /100k.json /events /stats; do
	check "index links $ref" grep -q "\"$ref\"" "$T/index.id.body"
done
check "app.js writes the js-ok marker" grep -q "js-ok" "$T/js.id.body"
check "style.css sets the body background" grep -q "background-color: #f4f1ea" "$T/css.id.body"
fetch idx2 "$D/index.html" --compressed
check "/index.html is the index page" cmp -s "$T/idx2.body" "$T/index.id.body"

# /stats: JSON, not cached, counts what happened so far.
fetch stats "$D/stats" --compressed
eq "/stats Content-Type" "$(hdr "$T/stats.h" Content-Type)" "application/json"
eq "/stats Cache-Control" "$(hdr "$T/stats.h" Cache-Control)" "no-store"
check "/stats counts compressed responses" grep -Eq '"compressed":[1-9][0-9]*,' "$T/stats.body"
check "/stats has every reason" grep -q '"not-accepted":' "$T/stats.body"
if have_python; then
	check "/stats is valid JSON" valid_json "$T/stats.body"
fi

# Errors.
fetch e404 "$D/nope"
eq "unknown path: 404 text/html" "$(status "$T/e404.h") $(hdr "$T/e404.h" Content-Type)" \
	"404 text/html; charset=utf-8"
check "404 has an HTML body" grep -q "404 Not Found" "$T/e404.body"
fetch e405 "$D/100k.json" -X POST -d 'x=1'
eq "POST: 405 with Allow" "$(status "$T/e405.h") $(hdr "$T/e405.h" Allow)" "405 GET, HEAD"
check "405 has an HTML body" grep -q "405 Method Not Allowed" "$T/e405.body"
fetch e405d "$D/" -X DELETE
eq "DELETE: 405" "$(status "$T/e405d.h")" 405

# POST /echo: the decoded length and CRC-32 of a request body sent identity
# or gzip (mhdgz_upload_*), with mhdgz(3)'s command (REQUEST BODIES); gzip -lv gives the
# CRC-32 of the file.
cp "$T/p100k.id.body" "$T/body.json"
gzip -9 -k -f "$T/body.json"
crc=$(gzip -lv "$T/body.json.gz" | awk 'NR == 2 { print $2 }')
gzlen=$(size "$T/body.json.gz")
fetch echo1 "$D/echo" --data-binary @"$T/body.json.gz" -H 'Content-Encoding: gzip'
eq "POST /echo gzip: 200" "$(status "$T/echo1.h")" 200
eq "POST /echo gzip: the decoded length and CRC-32" "$(cat "$T/echo1.body")" \
	"{\"coding\":\"gzip\",\"encoded_nbytes\":$gzlen,\"decoded_nbytes\":102400,\"members\":1,\"crc32\":\"$crc\"}"
fetch echo2 "$D/echo" --data-binary @"$T/body.json"
eq "POST /echo identity: the length and CRC-32" "$(cat "$T/echo2.body")" \
	"{\"coding\":\"identity\",\"encoded_nbytes\":102400,\"decoded_nbytes\":102400,\"members\":0,\"crc32\":\"$crc\"}"
cat "$T/body.json.gz" "$T/body.json.gz" >"$T/two.gz"
fetch echo3 "$D/echo" --data-binary @"$T/two.gz" -H 'Content-Encoding: x-gzip'
check "POST /echo, two members: 204800 bytes in 2 members" \
	grep -q '"decoded_nbytes":204800,"members":2,' "$T/echo3.body"
# br without Expect (curl sends 100 KiB at once): 415 at once, before the
# body, which is not read; the connection closes lingering (linger.c), so
# the next request takes a new one; with "Expect: 100-continue", 415
# before any body byte.
"${CURL[@]}" -D "$T/echo4.h" -o "$T/echo4.body" --data-binary @"$T/body.json" \
	-H 'Content-Encoding: br' "$D/echo" --next -s -S --max-time 15 -o "$T/echo4n.body" \
	-w '%{num_connects}' "$D/2k.json" >"$T/echo4.n"
eq "POST /echo br: 415 with Accept-Encoding: gzip, Connection: close" \
	"$(status "$T/echo4.h") $(hdr "$T/echo4.h" Accept-Encoding) $(hdr "$T/echo4.h" Connection)" \
	"415 gzip close"
eq "POST /echo br: the next request on a new connection" \
	"$(cat "$T/echo4.n")|$(size "$T/echo4n.body")" "1|2048"
fetch echo4e "$D/echo" --data-binary @"$T/body.json" -H 'Content-Encoding: br' \
	-H 'Expect: 100-continue' --expect100-timeout 15 -w '%{size_upload}' >"$T/echo4e.n"
eq "POST /echo br, Expect: 100-continue: 415 and no body byte sent" \
	"$(status "$T/echo4e.h") $(hdr "$T/echo4e.h" Connection) $(cat "$T/echo4e.n")" "415 close 0"
# br declaring 100 GB, nothing sent: 415 at once (not a body read first).
dport=${D##*:}
dport=${dport%%/*}
echo4big=$(exec 3<>"/dev/tcp/127.0.0.1/$dport" &&
	printf 'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Encoding: br\r\nContent-Length: 100000000000\r\n\r\n' >&3 &&
	timeout 10 head -c 12 <&3)
eq "POST /echo br, Content-Length 100 GB: 415 before any body byte" "$echo4big" "HTTP/1.1 415"
head -c $((gzlen - 4)) "$T/body.json.gz" >"$T/trunc.gz"
fetch echo5 "$D/echo" --data-binary @"$T/trunc.gz" -H 'Content-Encoding: gzip'
eq "POST /echo truncated gzip: 400" "$(status "$T/echo5.h")" 400
head -c $((64 << 20)) /dev/zero | gzip -9 >"$T/zeros.gz"
fetch echo6 "$D/echo" --data-binary @"$T/zeros.gz" -H 'Content-Encoding: gzip'
eq "POST /echo, 64 MiB of zeros in $(size "$T/zeros.gz") bytes: 413" "$(status "$T/echo6.h")" 413
fetch echo7 "$D/echo"
eq "GET /echo: 405 with Allow: POST" "$(status "$T/echo7.h") $(hdr "$T/echo7.h" Allow)" "405 POST"
check "access log line for POST /echo" grep -Eq '^POST /echo 200 [0-9]+ ' "$T/demo.err"
check "access log line for a refused POST /echo: the refusal's 27 body bytes" \
	grep -Eq '^POST /echo 415 27 ' "$T/demo.err"

# Lingering close (linger.c; RFC 9112 section 9.6): a body answered
# before it is read is discarded up to 1 MiB after the answer (each close
# logs the bytes), so a client still sending reads the answer, not a reset.
# Python's http.client sends the whole body before it reads (no Expect):
# 1 MB of br gets its 415; a raw client sending 64 MiB, reading as it
# sends, gets the complete answer and the server reads at most 1 MiB of it.
linger_py() {
	python3 "$T/linger.py" "$@" 2>&1
}
cat >"$T/linger.py" <<'PY'
import http.client, select, socket, sys, time
port, method, path, n = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
hdrs = dict(h.split(": ", 1) for h in sys.argv[6:])
if sys.argv[5] == "client":
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    try:
        c.connect()
        me = c.sock.getsockname()[1]
        c.request(method, path, body=b"x" * n, headers=hdrs)
        r = c.getresponse()
        print(r.status, len(r.read()), r.getheader("Connection"), me)
    except OSError as e:
        print(type(e).__name__, 0)
    sys.exit(0)
s = socket.create_connection(("127.0.0.1", port), timeout=15)
me = s.getsockname()[1]
s.sendall(("%s %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n" % (method, path,
           "".join(k + ": " + v + "\r\n" for k, v in hdrs.items()), n)).encode())
s.setblocking(False)
# Reads the answer and its end while sending, and sends on after it
# until the server closes (a reset): bounded by n bytes and 30 s.
got, sent, chunk, end, reading = b"", 0, b"x" * 65536, time.time() + 30, True
while time.time() < end and (reading or sent < n):
    r, w, _ = select.select([s] if reading else [], [s] if sent < n else [], [], 1)
    if r:
        try:
            d = s.recv(65536)
        except OSError:
            d = b""
        got += d
        reading = bool(d)
    elif w:
        try:
            sent += s.send(chunk[:min(len(chunk), n - sent)])
        except BlockingIOError:
            pass
        except OSError:
            sent = n  # reset
head, _, body = got.partition(b"\r\n\r\n")
cl = [l.split(b":")[1].strip() for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
print(head.split(b" ")[1].decode() if head else "none",
      "complete" if cl and int(cl[0]) == len(body) else "incomplete", me)
PY
# linger_bytes ERRFILE: the bytes discarded by the lingering close of the
# client whose port ends linger_py's last output (LOUT), logged in ERRFILE
# (waits, bounded, for the thread to log it).
linger_bytes() {
	local i p=${LOUT##* }
	for i in $(seq 1 100); do
		grep -q "lingering close: .* (client port $p)" "$1" && break
		sleep 0.1
	done
	sed -n "s/.*lingering close: \([0-9]*\) bytes discarded (client port $p)$/\1/p" "$1"
}
# lpy ARGS: linger_py's output into LOUT.
lpy() {
	LOUT=$(linger_py "$@")
}
if have_python; then
	lpy "$dport" POST /echo 1000000 client 'Content-Encoding: br'
	eq "POST /echo, 1 MB of br from http.client (no Expect): 415 answer, not a reset" \
		"${LOUT% *}" "415 27 close"
	check "... what was left of the 1 MB after the answer discarded" \
		test "$(linger_bytes "$T/demo.err")" -le 1000000
	lpy "$dport" POST /echo $((64 << 20)) raw 'Content-Encoding: br'
	eq "POST /echo, 64 MiB of br from a raw client: the complete 415" "${LOUT% *}" \
		"415 complete"
	eq "... the server read 1 MiB of it after the answer, no more" \
		"$(linger_bytes "$T/demo.err")" 1048576
	lpy "$dport" POST /echo $((80 << 20)) raw
	eq "POST /echo, identity over the 64 MiB limit, raw: the complete 413" "${LOUT% *}" \
		"413 complete"
	eq "... the server read 1 MiB of it after the answer, no more" \
		"$(linger_bytes "$T/demo.err")" 1048576
else
	echo "# python3 not found: lingering close not tested"
fi

# HEAD/GET parity: the same header fields, no body.
for path in / /100k.json /2k.json; do
	for ae in identity gzip; do
		fetch hg "$D$path" -H "Accept-Encoding: $ae"
		head_parity "$D$path" "$ae"
	done
done

# Conditional requests.
etag=$(hdr "$T/p100k.id.h" ETag)
fetch c1 "$D/100k.json" -H "If-None-Match: $etag"
eq "If-None-Match (identity ETag): 304" "$(status "$T/c1.h")" 304
eq "304 carries the ETag" "$(hdr "$T/c1.h" ETag)" "$etag"
eq "304 carries Vary" "$(hdr "$T/c1.h" Vary)" "Accept-Encoding"
eq "304 has no body" "$(size "$T/c1.body")" 0
cl_304 "identity 304" "$T/c1.h" "$T/p100k.id.h"
fetch c2 "$D/100k.json" -H "If-None-Match: W/$etag" -H 'Accept-Encoding: gzip'
eq "If-None-Match (gzip W/ ETag), gzip client: 304" "$(status "$T/c2.h")" 304
eq "gzip client's 304 carries the W/ ETag" "$(hdr "$T/c2.h" ETag)" "W/$etag"
eq "gzip client's 304 carries Vary" "$(hdr "$T/c2.h" Vary)" "Accept-Encoding"
cl_304 "gzip client's 304" "$T/c2.h" "$T/p100k.gz.h"
fetch c3 "$D/100k.json" -H 'If-None-Match: "something-else"' -H 'Accept-Encoding: gzip'
eq "If-None-Match mismatch: 200 gzip" "$(status "$T/c3.h") $(hdr "$T/c3.h" Content-Encoding)" "200 gzip"
fetch c4 "$D/100k.json" -H 'If-Match: "something-else"'
eq "If-Match mismatch: 412" "$(status "$T/c4.h")" 412

# /events through a gzip-decoding client: at least 3 events, arriving one
# by one (about a second apart), not all at the end.
fetch evh "$D/events" -I
( "${CURL[@]}" -N --compressed -H 'Accept-Encoding: gzip' --max-time 4.5 -D "$T/ev.h" "$D/events" 2>/dev/null |
	while IFS= read -r line; do
		case $line in data:*) echo "$(date +%s%N) $line" ;; esac
	done >"$T/ev.lines" )
nev=$(wc -l <"$T/ev.lines" | tr -d ' ')
eq "/events: Content-Type" "$(hdr "$T/ev.h" Content-Type)" "text/event-stream"
eq "/events: Content-Encoding gzip, chunked" \
	"$(hdr "$T/ev.h" Content-Encoding) $(hdr "$T/ev.h" Transfer-Encoding)" "gzip chunked"
check "/events: >= 3 events within 4.5 s (got $nev)" test "$nev" -ge 3
if [ "$nev" -ge 3 ]; then
	t1=$(sed -n 1p "$T/ev.lines" | cut -d' ' -f1)
	t3=$(sed -n 3p "$T/ev.lines" | cut -d' ' -f1)
	gap=$(((t3 - t1) / 1000000))
	check "/events: events arrive one by one (1st to 3rd: ${gap} ms)" test "$gap" -ge 1000
	seq_ok=$(awk '{ if ($0 !~ "\"n\":" NR ",") bad = 1 } END { print bad ? "no" : "yes" }' "$T/ev.lines")
	eq "/events: events in order" "$seq_ok" yes
fi
"${CURL[@]}" -N --max-time 2.5 "$D/events" -o "$T/evid.body" 2>/dev/null
check "/events identity: events arrive too" grep -q '^data: {"n":2,' "$T/evid.body"

# 16 concurrent clients, all bodies verified.
concurrent cc "16 concurrent clients: every body correct" \
	"--compressed $D/100k.json" "$T/p100k.id.body" "$D/20k.json" "$T/p20k.id.body" \
	"--compressed $D/" "$T/index.id.body" "--compressed $D/2k.json" "$T/p2k.id.body"

# The access log: method, target, status, body bytes, bytes sent, coding, time.
check "access log line for a gzip response" \
	grep -Eq '^GET /100k\.json 200 102400 [0-9]+ gzip [0-9]+us$' "$T/demo.err"
check "access log line for an identity response" \
	grep -Eq '^GET /100k\.json 200 102400 [0-9-]+ identity [0-9]+us$' "$T/demo.err"
check "access log line for a 405" grep -Eq '^POST /100k\.json 405 ' "$T/demo.err"
sent=$(awk '$1 == "GET" && $2 == "/100k.json" && $6 == "gzip" { print $5; exit }' "$T/demo.err")
if [ -n "$sent" ] && [ "$sent" != - ]; then
	check "access log: gzip bytes sent ($sent) < body bytes" test "$sent" -lt 102400
fi

# SIGTERM with a request in flight: the request completes, exit status 0.
( "${CURL[@]}" -N --compressed --max-time 20 "$D/events" >"$T/term.body" 2>/dev/null
  echo $? >"$T/term.rc" ) &
cpid=$!
sleep 1.5
tl_stop "$DEMO_PID"
wait "$cpid"
tl_exit_ok "SIGTERM with /events in flight: exit 0"
eq "the in-flight /events completed cleanly (curl exit 0)" "$(cat "$T/term.rc")" 0
check "the in-flight /events got its events" grep -q '^data: {"n":1,' "$T/term.body"
check "stopped server refuses connections" \
	bash -c "! curl -s --max-time 3 -o /dev/null '$D/' 2>/dev/null"
if grep -qi 'AddressSanitizer\|LeakSanitizer\|runtime error' "$T/demo.err"; then
	nok "demo server: no sanitizer reports" "$(grep -i -m1 'Sanitizer\|runtime error' "$T/demo.err")"
fi

# ---------------------------------------------------------------------------
# Other demo configurations

if start suffix --etag suffix --backend zlib --level 9 --quiet; then
	fetch sx "$BASE/20k.json" -H 'Accept-Encoding: gzip'
	etag=$(hdr "$T/sx.h" ETag)
	check "--etag suffix: gzip ETag is \"x-gzip\" ($etag)" bash -c "[[ '$etag' =~ ^\\\"[0-9a-f]+-gzip\\\"\$ ]]"
	fetch sx304 "$BASE/20k.json" -H 'Accept-Encoding: gzip' -H "If-None-Match: $etag"
	eq "--etag suffix: If-None-Match with the suffixed ETag: 304" "$(status "$T/sx304.h")" 304
	gunzip_to "$T/sx.body" "$T/sx.gunz"
	check "--backend zlib --level 9: body inflates" cmp -s "$T/sx.gunz" "$T/p20k.id.body"
	check "--quiet: no access log" test ! -s "$T/suffix.err"
	tl_stop "$PID"
	tl_exit_ok "--etag suffix server: SIGTERM exit 0"
else
	nok "--etag suffix server starts" "see stderr"
fi

if start nocomp --no-compress; then
	fetch nc "$BASE/100k.json" -H 'Accept-Encoding: gzip'
	eq "--no-compress: identity to a gzip client" \
		"$(hdr "$T/nc.h" Content-Encoding)|$(size "$T/nc.body")" "|102400"
	tl_stop "$PID"
	tl_exit_ok "--no-compress server: SIGTERM exit 0"
else
	nok "--no-compress server starts" "see stderr"
fi

# --cache-size: the library's file cache. A file version is compressed
# once; a file rewritten in place (same size, mtime set back) is never
# served stale. The wait lets the first version age past the cache's 2 s
# window for files changed just now, so that it is kept (library tests
# count the hits; here the bytes must be right).
mkdir -p "$T/croot"
awk 'BEGIN { for (i = 0; i < 1500; i++) printf "line %05d of version A\n", i }' >"$T/croot/v.txt"
awk 'BEGIN { for (i = 0; i < 1500; i++) printf "line %05d of version B\n", i }' >"$T/cB.txt"
touch -d '2001-01-01 00:00:00' "$T/croot/v.txt"
if start cache --root "$T/croot" --cache-size 1048576 --quiet; then
	sleep 2.5
	cache_ok=yes
	for i in 1 2 3; do
		fetch cA "$BASE/v.txt" -H 'Accept-Encoding: gzip'
		gunzip_to "$T/cA.body" "$T/cA.dec"
		cmp -s "$T/cA.dec" "$T/croot/v.txt" || cache_ok="no (GET $i)"
	done
	eq "--cache-size: version A, gzip, three GETs" "$cache_ok" yes
	cat "$T/cB.txt" >"$T/croot/v.txt" # in place: the same inode and size
	touch -d '2001-01-01 00:00:00' "$T/croot/v.txt"
	fetch cB "$BASE/v.txt" -H 'Accept-Encoding: gzip'
	gunzip_to "$T/cB.body" "$T/cB.dec"
	eq "--cache-size: rewritten in place (same size and mtime): the new bytes" \
		"$(hdr "$T/cB.h" Content-Encoding)|$(cmp -s "$T/cB.dec" "$T/cB.txt" && echo same)" \
		"gzip|same"
	# Its ETag changed (the change time is in it), so no length
	# remembered under the old one reaches a HEAD: GET's length.
	"${CURL[@]}" -I -D "$T/cBh.h" -o /dev/null -H 'Accept-Encoding: gzip' "$BASE/v.txt"
	eq "--cache-size: rewritten in place: a new ETag, HEAD has GET's length" \
		"$([ "$(hdr "$T/cA.h" ETag)" != "$(hdr "$T/cB.h" ETag)" ] && echo new)|$(hdr "$T/cBh.h" Content-Length)" \
		"new|$(size "$T/cB.body")"
	tl_stop "$PID"
	tl_exit_ok "--cache-size server: SIGTERM exit 0"
else
	nok "--cache-size server starts" "see stderr"
fi

# --length-hiding: every gzip body padded in its header comment (FLG 0x10),
# the same body twice the same bytes, decoding to the identity body.
if start lh --length-hiding 100 --quiet; then
	fetch lh1 "$BASE/20k.json" -H 'Accept-Encoding: gzip'
	fetch lh2 "$BASE/20k.json" -H 'Accept-Encoding: gzip'
	eq "--length-hiding: FLG is FCOMMENT" "$(od -An -tx1 -j3 -N1 "$T/lh1.body" | tr -d ' ')" 10
	check "--length-hiding: the same body, the same bytes" cmp -s "$T/lh1.body" "$T/lh2.body"
	gunzip_to "$T/lh1.body" "$T/lh1.gunz"
	check "--length-hiding: gzip -d gives the identity body" cmp -s "$T/lh1.gunz" "$T/p20k.id.body"
	fetch lh3 "$BASE/20k.json" --compressed
	check "--length-hiding: curl --compressed decodes it" cmp -s "$T/lh3.body" "$T/p20k.id.body"
	fetch lhs "$BASE/stats"
	check "--length-hiding: /stats counts padded responses" grep -Eq '"padded":[3-9],' "$T/lhs.body"
	tl_stop "$PID"
	tl_exit_ok "--length-hiding server: SIGTERM exit 0"
else
	nok "--length-hiding server starts" "see stderr"
fi

if start minsz --min-size 200000 --types 'application/json' --threads 1; then
	fetch ms "$BASE/100k.json" -H 'Accept-Encoding: gzip'
	eq "--min-size 200000: 100k.json not compressed" "$(hdr "$T/ms.h" Content-Encoding)" ""
	fetch mt "$BASE/" -H 'Accept-Encoding: gzip'
	eq "--types application/json: HTML not compressed" "$(hdr "$T/mt.h" Content-Encoding)" ""
	tl_stop "$PID"
	tl_exit_ok "--min-size server: SIGTERM exit 0"
else
	nok "--min-size server starts" "see stderr"
fi

# ---------------------------------------------------------------------------
# Static files

W=$T/www
mkdir -p "$W/sub" "$W/nodir" "$W/assets"
echo "TOP-SECRET-OUTSIDE-ROOT" >"$T/secret.txt"
{
	echo '<!doctype html><html><head><title>root</title><link rel="stylesheet" href="/assets/site.css"></head><body>'
	for i in $(seq 1 200); do echo "<p>Paragraph $i of the static index page.</p>"; done
	echo '</body></html>'
} >"$W/index.html"
sed 's/static index/sub index/' "$W/index.html" >"$W/sub/index.html"
for i in $(seq 1 150); do echo ".c$i { margin: ${i}px; color: #$((i % 10))$((i % 10))$((i % 10)); }"; done >"$W/assets/site.css"
for i in $(seq 1 150); do echo "function f$i(x) { return x * $i + console.log('f$i'); }"; done >"$W/assets/app.js"
{
	echo '['
	for i in $(seq 1 300); do echo "{\"id\": $i, \"name\": \"item $i\", \"ok\": true},"; done
	echo '{"id": 0}]'
} >"$W/data.json"
{
	echo '<svg xmlns="http://www.w3.org/2000/svg" width="100" height="100">'
	for i in $(seq 1 100); do echo "<circle cx=\"$i\" cy=\"$i\" r=\"$((i % 7 + 1))\" fill=\"#abcdef\"/>"; done
	echo '</svg>'
} >"$W/logo.svg"
head -c 20000 /dev/urandom >"$T/rand"
{ printf '\x89PNG\r\n\x1a\n'; cat "$T/rand"; } >"$W/photo.png"
{ printf '\xff\xd8\xff\xe0'; cat "$T/rand"; } >"$W/photo.jpg"
{ printf 'PK\x03\x04'; cat "$T/rand"; } >"$W/bundle.zip"
seq 1 30000 >"$W/big.txt"
# Ten seconds old: its Last-Modified is a strong validator (If-Range below).
touch -d "@$(($(date +%s) - 10))" "$W/big.txt"
seq 1 30000 >"$W/future.txt"
touch -d '+2 hours' "$W/future.txt"
: >"$W/empty.txt"
seq 1 20000 | sed 's/^/precompressed line /' >"$W/pre.txt"
gzip -9 -n -c "$W/pre.txt" >"$W/pre.txt.gz"
cp "$W/data.json" "$W/pre-only-gz-missing.json"
ln -s ../secret.txt "$W/leak.txt"
ln -s "$T" "$W/outside"
ln -s data.json "$W/alias.json"
mkfifo "$W/fifo.txt" 2>/dev/null

# gzip alone: the precompressed and negotiation tests below are gzip's.
if ! start static --root "$W" --precompressed --threads 2 --codings gzip; then
	nok "static server starts" "see stderr above"
	echo "$NPASS passed, $NFAIL failed"
	exit 1
fi
S=$BASE
STATIC_PID=$PID

# path | Content-Type | compressed for a gzip client?
STATIC_FILES="/index.html|text/html; charset=utf-8|yes
/assets/site.css|text/css; charset=utf-8|yes
/assets/app.js|text/javascript; charset=utf-8|yes
/data.json|application/json|yes
/logo.svg|image/svg+xml|yes
/big.txt|text/plain; charset=utf-8|yes
/photo.png|image/png|no
/photo.jpg|image/jpeg|no
/bundle.zip|application/zip|no"

while IFS='|' read -r path type compressed; do
	file="$W${path}"
	fetch sid "$S$path"
	fetch sgz "$S$path" -H 'Accept-Encoding: gzip, deflate, br'
	eq "$path: 200 $type" "$(status "$T/sid.h") $(hdr "$T/sid.h" Content-Type)" "200 $type"
	check "$path identity body = file" cmp -s "$T/sid.body" "$file"
	eq "$path identity Content-Length" "$(hdr "$T/sid.h" Content-Length)" "$(size "$file")"
	eq "$path Accept-Ranges" "$(hdr "$T/sid.h" Accept-Ranges)" bytes
	check "$path has Last-Modified" test -n "$(hdr "$T/sid.h" Last-Modified)"
	etag=$(hdr "$T/sid.h" ETag)
	check "$path has a strong ETag ($etag)" bash -c "[[ '$etag' =~ ^\\\"[0-9a-f-]+\\\"\$ ]]"
	if [ "$compressed" = yes ]; then
		eq "$path gzip: Content-Encoding, Vary" \
			"$(hdr "$T/sgz.h" Content-Encoding)|$(hdr "$T/sgz.h" Vary)" "gzip|Accept-Encoding"
		eq "$path gzip: ETag W/ form" "$(hdr "$T/sgz.h" ETag)" "W/$etag"
		eq "$path gzip: no Accept-Ranges" "$(hdr "$T/sgz.h" Accept-Ranges)" ""
		if gunzip_to "$T/sgz.body" "$T/sgz.gunz" && cmp -s "$T/sgz.gunz" "$file"; then
			ok "$path gzip body inflates to the file"
		else
			nok "$path gzip body inflates to the file" "differs"
		fi
		eq "$path identity has Vary" "$(hdr "$T/sid.h" Vary)" "Accept-Encoding"
	else
		eq "$path not compressed for a gzip client" \
			"$(hdr "$T/sgz.h" Content-Encoding)|$(hdr "$T/sgz.h" Vary)" "|"
		check "$path body = file for a gzip client" cmp -s "$T/sgz.body" "$file"
	fi
done <<<"$STATIC_FILES"

fetch empty "$S/empty.txt" --compressed
eq "empty file: 200, 0 bytes, identity" \
	"$(status "$T/empty.h") $(size "$T/empty.body") $(hdr "$T/empty.h" Content-Encoding)" "200 0 "

# Directories: index.html, redirect to the slash form, no listings.
fetch d1 "$S/"
check "/ serves index.html" cmp -s "$T/d1.body" "$W/index.html"
fetch d2 "$S/sub"
eq "/sub: 301 to /sub/" "$(status "$T/d2.h") $(hdr "$T/d2.h" Location)" "301 /sub/"
fetch d2q "$S/sub?x=1"
eq "/sub?x=1: 301 keeps the query" "$(hdr "$T/d2q.h" Location)" "/sub/?x=1"
# Location is built from the path beneath the root, never the raw target:
# "//evil.example" must not send the client to another host.
mkdir -p "$W/evil.example" "$W/a b%"
fetch d2e "$S/" --path-as-is --request-target '//evil.example'
eq "//evil.example: 301 to /evil.example/, not the scheme-relative //evil.example/" \
	"$(status "$T/d2e.h")|$(hdr "$T/d2e.h" Location)" "301|/evil.example/"
fetch d2f "$S/" --path-as-is --request-target '//sub//?x=1#f'
eq "//sub// is the directory's own path: 200" "$(status "$T/d2f.h")" 200
fetch d2g "$S/" --path-as-is --request-target 'http://evil.example//a%20b%25?q=1'
eq "a name with a space and a %: Location percent-encoded again, query kept" \
	"$(status "$T/d2g.h")|$(hdr "$T/d2g.h" Location)" "301|/a%20b%25/?q=1"
fetch d3 "$S/sub/" --compressed
check "/sub/ serves sub/index.html" cmp -s "$T/d3.body" "$W/sub/index.html"
fetch d4 "$S/nodir/"
eq "directory without index.html: 403, no listing" "$(status "$T/d4.h")" 403
fetch d5 "$S/assets/"
eq "/assets/ (no index.html): 403" "$(status "$T/d5.h")" 403
check "no listing of /assets/" bash -c "! grep -q site.css '$T/d5.body'"
fetch a1 "$S/alias.json"
eq "symlink inside the root is served" "$(status "$T/a1.h")" 200
fetch nf "$S/missing.html"
eq "missing file: 404" "$(status "$T/nf.h") $(hdr "$T/nf.h" Content-Type)" "404 text/html; charset=utf-8"
fetch pm "$S/data.json" -X PUT -d x
eq "PUT: 405 with Allow" "$(status "$T/pm.h") $(hdr "$T/pm.h" Allow)" "405 GET, HEAD"
# A body sent to a file is not read: 405 (413 for GET) before it, then
# the lingering close (linger.c).
if have_python; then
	sport=${S##*:}
	sport=${sport%%/*}
	lpy "$sport" POST /data.json 1000000 client
	eq "POST 1 MB to a file from http.client: 405 answer, not a reset" \
		"$(echo "$LOUT" | cut -d' ' -f1,3)" "405 close"
	lpy "$sport" GET /data.json 1000000 client
	eq "GET with 1 MB of body from http.client: 413 answer, not a reset" \
		"$(echo "$LOUT" | cut -d' ' -f1,3)" "413 close"
	lpy "$sport" POST /data.json $((64 << 20)) raw
	eq "POST 64 MiB to a file from a raw client: the complete 405" "${LOUT% *}" \
		"405 complete"
	eq "... the server read 1 MiB of it after the answer, no more" \
		"$(linger_bytes "$T/static.err")" 1048576
fi
fetch ff "$S/fifo.txt"
eq "a FIFO in the tree: 403 (and no hang)" "$(status "$T/ff.h")" 403

# Path traversal: every attempt refused with 403 or 404, never the secret.
TRAVERSALS='/../secret.txt
/../../secret.txt
/sub/../../secret.txt
/%2e%2e/secret.txt
/%2E%2E/secret.txt
/.%2e/secret.txt
/%2e./secret.txt
/sub/%2e%2e/%2e%2e/secret.txt
/..%2fsecret.txt
/..%2Fsecret.txt
/sub%2f..%2f..%2fsecret.txt
/%2e%2e%2fsecret.txt
/..%5csecret.txt
/..%5Csecret.txt
/%5c..%5csecret.txt
/..\secret.txt
/data.json%00.png
/%00
/leak.txt
/outside/secret.txt
/%2fetc%2fpasswd
//etc/passwd
/sub/./../../secret.txt'
while IFS= read -r t; do
	"${CURL[@]}" --path-as-is -o "$T/tr.body" -w '%{http_code}' "$S$t" >"$T/tr.code" 2>/dev/null
	code=$(cat "$T/tr.code")
	if { [ "$code" = 403 ] || [ "$code" = 404 ]; } && ! grep -q TOP-SECRET "$T/tr.body"; then
		ok "traversal refused: $t ($code)"
	else
		nok "traversal refused: $t" "status $code"
	fi
done <<<"$TRAVERSALS"
# The same through an absolute-form request target.
code=$("${CURL[@]}" --path-as-is -o "$T/tr.body" -w '%{http_code}' \
	--request-target "http://x/../secret.txt" "$S/" 2>/dev/null)
if { [ "$code" = 403 ] || [ "$code" = 404 ]; } && ! grep -q TOP-SECRET "$T/tr.body"; then
	ok "traversal refused: absolute-form target ($code)"
else
	nok "traversal refused: absolute-form target" "status $code"
fi

# HEAD/GET parity on files.
for path in /big.txt /photo.png /index.html; do
	for ae in identity gzip; do
		fetch hg "$S$path" -H "Accept-Encoding: $ae"
		head_parity "$S$path" "$ae"
	done
done

# Conditional requests on files.
fetch b "$S/big.txt"
etag=$(hdr "$T/b.h" ETag)
lm=$(hdr "$T/b.h" Last-Modified)
fetch b1 "$S/big.txt" -H "If-None-Match: $etag"
eq "file If-None-Match: 304, ETag, Vary, no body" \
	"$(status "$T/b1.h")|$(hdr "$T/b1.h" ETag)|$(hdr "$T/b1.h" Vary)|$(size "$T/b1.body")" \
	"304|$etag|Accept-Encoding|0"
cl_304 "file identity 304" "$T/b1.h" "$T/b.h"
fetch b2 "$S/big.txt" -H "If-None-Match: W/$etag" -H 'Accept-Encoding: gzip'
eq "file If-None-Match W/ (gzip client): 304 with the W/ ETag and Vary" \
	"$(status "$T/b2.h")|$(hdr "$T/b2.h" ETag)|$(hdr "$T/b2.h" Vary)" "304|W/$etag|Accept-Encoding"
fetch bgz "$S/big.txt" -H 'Accept-Encoding: gzip'
cl_304 "file gzip 304" "$T/b2.h" "$T/bgz.h"
fetch b3 "$S/big.txt" -H "If-Modified-Since: $lm"
eq "If-Modified-Since = Last-Modified: 304" "$(status "$T/b3.h")" 304
# The obsolete RFC 850 and asctime forms of the same date (RFC 9110
# section 5.6.7: a recipient must accept all three).
lm850=$(LC_ALL=C date -u -d "$lm" '+%A, %d-%b-%y %H:%M:%S GMT')
lmasc=$(LC_ALL=C date -u -d "$lm" '+%a %b %e %H:%M:%S %Y')
fetch b3a "$S/big.txt" -H "If-Modified-Since: $lm850"
fetch b3b "$S/big.txt" -H "If-Modified-Since: $lmasc"
fetch b3c "$S/big.txt" -H "If-Modified-Since: Sunday, 06-Nov-94 08:49:37 GMT"
eq "If-Modified-Since as RFC 850 ($lm850) and asctime ($lmasc): 304; 1994: 200" \
	"$(status "$T/b3a.h") $(status "$T/b3b.h") $(status "$T/b3c.h")" "304 304 200"
fetch b4 "$S/big.txt" -H "If-Modified-Since: Mon, 01 Jan 2001 00:00:00 GMT"
eq "If-Modified-Since in the past: 200" "$(status "$T/b4.h")" 200
fetch b5 "$S/big.txt" -H "If-Modified-Since: $lm" -H 'If-None-Match: "other"'
eq "If-None-Match takes precedence over If-Modified-Since: 200" "$(status "$T/b5.h")" 200
# If-Unmodified-Since (RFC 9110 section 13.1.4, section 13.2.2 step 2):
# 412 when the file changed after it, ignored under If-Match or when not a
# date. big.txt is sent as it is, pre.txt as its sibling pre.txt.gz.
past='Mon, 01 Jan 2001 00:00:00 GMT'
for f in big.txt pre.txt; do
	fetch bu0 "$S/$f" -H 'Accept-Encoding: gzip' -I
	fetch bu1 "$S/$f" -H "If-Unmodified-Since: $past" -H 'Accept-Encoding: gzip'
	fetch bu2 "$S/$f" -H "If-Unmodified-Since: $(hdr "$T/bu0.h" Last-Modified)" \
		-H 'Accept-Encoding: gzip'
	fetch bu3 "$S/$f" -H "If-Unmodified-Since: $past" -H 'If-Match: *'
	fetch bu4 "$S/$f" -H 'If-Unmodified-Since: yesterday'
	fetch bu5 "$S/$f" -H "If-Unmodified-Since: $past" -H 'If-None-Match: *'
	eq "$f If-Unmodified-Since: past 412, Last-Modified 200, under If-Match 200, not a date 200, before If-None-Match 412" \
		"$(status "$T/bu1.h") $(status "$T/bu2.h") $(status "$T/bu3.h") $(status "$T/bu4.h") $(status "$T/bu5.h")" \
		"412 200 200 200 412"
done
# An empty file's 304 carries its 200's fields: the same strong ETag, no
# Vary (an empty body is never coded), for a gzip client too.
fetch be "$S/empty.txt" -H 'Accept-Encoding: gzip'
fetch be1 "$S/empty.txt" -H 'Accept-Encoding: gzip' -H "If-None-Match: $(hdr "$T/be.h" ETag)"
eq "empty file, gzip client: 304 with the 200's ETag, no Vary, as the 200" \
	"$(status "$T/be1.h")|$(hdr "$T/be1.h" ETag)|$(hdr "$T/be1.h" Vary)|$(hdr "$T/be.h" Vary)" \
	"304|$(hdr "$T/be.h" ETag)||"
fetch b6 "$S/photo.png" -H "If-None-Match: $(hdr "$T/b.h" ETag)"
eq "another file's ETag does not match: 200" "$(status "$T/b6.h")" 200

# Ranges: single ranges are 206 identity; multiple ranges get the whole body.
len=$(size "$W/big.txt")
fetch r1 "$S/big.txt" -r 0-99 -H 'Accept-Encoding: gzip'
eq "Range 0-99: 206, Content-Range, Content-Length 100, identity" \
	"$(status "$T/r1.h")|$(hdr "$T/r1.h" Content-Range)|$(hdr "$T/r1.h" Content-Length)|$(hdr "$T/r1.h" Content-Encoding)" \
	"206|bytes 0-99/$len|100|"
check "Range 0-99: the first 100 bytes" cmp -s "$T/r1.body" <(head -c 100 "$W/big.txt")
fetch r2 "$S/big.txt" -r 1000-
eq "Range 1000-: 206 to the end" "$(status "$T/r2.h")|$(hdr "$T/r2.h" Content-Range)" \
	"206|bytes 1000-$((len - 1))/$len"
check "Range 1000-: bytes" cmp -s "$T/r2.body" <(tail -c +1001 "$W/big.txt")
fetch r3 "$S/big.txt" -r -50
eq "Range -50: the last 50 bytes" "$(status "$T/r3.h")|$(hdr "$T/r3.h" Content-Range)" \
	"206|bytes $((len - 50))-$((len - 1))/$len"
check "Range -50: bytes" cmp -s "$T/r3.body" <(tail -c 50 "$W/big.txt")
fetch r4 "$S/big.txt" -r 100-99999999
eq "Range past the end is clipped" "$(hdr "$T/r4.h" Content-Range)" "bytes 100-$((len - 1))/$len"
fetch r5 "$S/big.txt" -r "$len-"
eq "Range starting at the length: 416 with Content-Range */len" \
	"$(status "$T/r5.h")|$(hdr "$T/r5.h" Content-Range)" "416|bytes */$len"
fetch r6 "$S/big.txt" -r 0-1,5-6
eq "multiple ranges: 200 with the whole body" "$(status "$T/r6.h")|$(size "$T/r6.body")" "200|$len"
fetch r7 "$S/big.txt" -r 0-9 -H "If-Range: $etag"
eq "If-Range with the current ETag: 206" "$(status "$T/r7.h")" 206
fetch r8 "$S/big.txt" -r 0-9 -H 'If-Range: "stale"'
eq "If-Range with another ETag: 200 whole" "$(status "$T/r8.h")|$(size "$T/r8.body")" "200|$len"
lastmod=$(hdr "$T/r7.h" Last-Modified)
fetch r9 "$S/big.txt" -r 0-9 -H "If-Range: $lastmod"
eq "If-Range with the Last-Modified value: 206" "$(status "$T/r9.h")|$(size "$T/r9.body")" "206|10"
# The gzip 200 carries the same date: a client that accepts gzip may hold
# gzip bytes, and a range is of the identity body.
fetch r9g "$S/big.txt" -r 0-9 -H "If-Range: $lastmod" -H 'Accept-Encoding: gzip'
eq "If-Range with the date from a gzip-accepting client: 200 whole" \
	"$(status "$T/r9g.h")|$(hdr "$T/r9g.h" Content-Range)" "200|"
# RFC 9110 section 13.1.5: a date applies only when it is exactly the
# Last-Modified value; the same instant in asctime's form is another value.
asctime=$(TZ=UTC date -d "$lastmod" '+%a %b %e %H:%M:%S %Y')
fetch r10 "$S/big.txt" -r 0-9 -H "If-Range: $asctime"
eq "If-Range with another form of that date: 200 whole" \
	"$(status "$T/r10.h")|$(size "$T/r10.body")" "200|$len"
# RFC 9110 section 8.8.2.1: a modification time after now (a file touched
# into the future) is sent as now, never later than Date; such a date, of
# a second not over yet, is weak (section 8.8.2.2) and If-Range ignores it
# (section 13.1.5 step 1).
fetch r11 "$S/future.txt" -r 0-9
flm=$(hdr "$T/r11.h" Last-Modified)
fdate=$(hdr "$T/r11.h" Date)
check "Last-Modified of a future file is not after Date ($flm, $fdate)" \
	test "$(date -d "$flm" +%s)" -le "$(date -d "$fdate" +%s)"
fetch r12 "$S/future.txt" -r 0-9 -H "If-Range: $flm"
eq "If-Range with a weak date: 200 whole" "$(status "$T/r12.h")|$(size "$T/r12.body")" \
	"200|$(size "$W/future.txt")"
fetch r7g "$S/big.txt" -r 0-9 -H "If-Range: $etag" -H 'Accept-Encoding: gzip'
eq "206 carries the Vary its 200 would carry" "$(status "$T/r7g.h")|$(hdr "$T/r7g.h" Vary)" \
	"206|Accept-Encoding"
static_pid=$PID
if start keep --root "$W" --etag keep --quiet; then
	fetch k1 "$BASE/big.txt" -H 'Accept-Encoding: gzip'
	ketag=$(hdr "$T/k1.h" ETag)
	eq "--etag keep: the gzip 200 keeps the strong ETag" "$(hdr "$T/k1.h" Content-Encoding)|${ketag:0:1}" \
		'gzip|"'
	fetch k2 "$BASE/big.txt" -r 50- -H "If-Range: $ketag" -H 'Accept-Encoding: gzip'
	eq "--etag keep: If-Range with the shared ETag is refused: 200, the whole body" \
		"$(status "$T/k2.h")|$(hdr "$T/k2.h" Content-Range)" "200|"
	tl_stop "$PID"
else
	nok "--etag keep server starts" "see stderr"
fi
PID=$static_pid
fetch r9 "$S/big.txt" -r 0-9 -I
eq "HEAD ignores Range" "$(status "$T/r9.h")" 200
fetch r10 "$S/big.txt" -H 'Range: lines=1-2'
eq "another range unit: 200" "$(status "$T/r10.h")" 200

# Precompressed FILE.gz.
gzlen=$(size "$W/pre.txt.gz")
fetch p1 "$S/pre.txt" -H 'Accept-Encoding: gzip'
eq "precompressed: 200 gzip, FILE's type, Vary, the .gz's length" \
	"$(status "$T/p1.h")|$(hdr "$T/p1.h" Content-Encoding)|$(hdr "$T/p1.h" Content-Type)|$(hdr "$T/p1.h" Vary)|$(hdr "$T/p1.h" Content-Length)" \
	"200|gzip|text/plain; charset=utf-8|Accept-Encoding|$gzlen"
check "precompressed: the body is FILE.gz byte for byte" cmp -s "$T/p1.body" "$W/pre.txt.gz"
fetch p2 "$S/pre.txt"
eq "precompressed, client without gzip: FILE, with Vary" \
	"$(hdr "$T/p2.h" Content-Encoding)|$(hdr "$T/p2.h" Vary)" "|Accept-Encoding"
check "precompressed, client without gzip: body = FILE" cmp -s "$T/p2.body" "$W/pre.txt"
pe1=$(hdr "$T/p1.h" ETag)
pe2=$(hdr "$T/p2.h" ETag)
check "precompressed: its own strong ETag ($pe1 vs $pe2)" \
	bash -c "[[ '$pe1' =~ ^\\\"[0-9a-f-]+\\\"\$ ]] && [ '$pe1' != '$pe2' ]"
fetch p3 "$S/pre.txt" -H 'Accept-Encoding: gzip' -H "If-None-Match: $pe1"
eq "precompressed: If-None-Match with the .gz ETag: 304 with that ETag" \
	"$(status "$T/p3.h")|$(hdr "$T/p3.h" ETag)|$(hdr "$T/p3.h" Vary)" "304|$pe1|Accept-Encoding"
cl_304 "precompressed 304" "$T/p3.h" "$T/p1.h"
# As the handler's 304 of a body it codes (RFC 9110 section 15.4.5).
eq "precompressed 304: no Content-Encoding, FILE's type" \
	"$(hdr "$T/p3.h" Content-Encoding)|$(hdr "$T/p3.h" Content-Type)" "|text/plain; charset=utf-8"
fetch p4 "$S/pre.txt" --compressed
check "precompressed: curl --compressed gets FILE" cmp -s "$T/p4.body" "$W/pre.txt"
fetch p5 "$S/pre.txt" -H 'Accept-Encoding: gzip;q=0'
eq "precompressed: gzip;q=0 gets identity" "$(hdr "$T/p5.h" Content-Encoding)" ""
# Every Accept-Encoding line counts (RFC 9110 section 5.3), as in the
# library: gzip named on the 20th of 20 lines, or refused there.
ae20=()
for i in $(seq 1 19); do ae20+=(-H "Accept-Encoding: x-unknown-$i"); done
fetch p6 "$S/pre.txt" "${ae20[@]}" -H 'Accept-Encoding: gzip'
eq "precompressed: gzip on the 20th Accept-Encoding line gets FILE.gz" \
	"$(hdr "$T/p6.h" Content-Encoding)|$(hdr "$T/p6.h" Content-Length)" "gzip|$gzlen"
fetch p7 "$S/pre.txt" -H 'Accept-Encoding: *' "${ae20[@]}" -H 'Accept-Encoding: gzip;q=0'
eq "precompressed: * on the 1st line, gzip;q=0 on the 21st: identity" \
	"$(hdr "$T/p7.h" Content-Encoding)" ""
fetch p6 "$S/pre.txt" -H 'Accept-Encoding: gzip' -r 0-9
eq "precompressed: a Range gets the whole .gz" "$(status "$T/p6.h")|$(size "$T/p6.body")" "200|$gzlen"
# A sibling older than FILE was made from an older FILE: never sent (FILE
# is coded on the fly instead); one as new as FILE is.
seq 1 20000 | sed 's/^/stale sibling line /' >"$W/stale.txt"
seq 1 20000 | sed 's/^/an older version /' | gzip -n -c >"$W/stale.txt.gz"
touch -d '2001-01-01 00:00:00' "$W/stale.txt.gz"
fetch p8 "$S/stale.txt" -H 'Accept-Encoding: gzip'
gunzip_to "$T/p8.body" "$T/p8.dec"
eq "precompressed: a sibling older than FILE is not sent: FILE coded on the fly" \
	"$(hdr "$T/p8.h" Content-Encoding)|$(cmp -s "$T/p8.dec" "$W/stale.txt" && echo FILE)" "gzip|FILE"
touch -r "$W/stale.txt" "$W/stale.txt.gz"
fetch p9 "$S/stale.txt" -H 'Accept-Encoding: gzip'
check "precompressed: a sibling with FILE's modification time is sent" \
	cmp -s "$T/p9.body" "$W/stale.txt.gz"

# 16 concurrent clients on files.
concurrent sc "16 concurrent clients on files: every body correct" \
	"--compressed $S/big.txt" "$W/big.txt" "$S/photo.png" "$W/photo.png" \
	"--compressed $S/pre.txt" "$W/pre.txt" "--compressed $S/data.json" "$W/data.json"

# Keep-alive: several requests on one connection, bodies right.
"${CURL[@]}" --compressed -o "$T/ka1" "$S/big.txt" -o "$T/ka2" "$S/data.json" \
	-o "$T/ka3" "$S/photo.png" -w '%{num_connects} ' >"$T/ka.n" 2>/dev/null
check "keep-alive sequence: bodies correct" \
	bash -c "cmp -s '$T/ka1' '$W/big.txt' && cmp -s '$T/ka2' '$W/data.json' && cmp -s '$T/ka3' '$W/photo.png'"
eq "keep-alive sequence: one connection" "$(tr -d ' \n' <"$T/ka.n")" "100"

check "access log line for a file" grep -Eq '^GET /big\.txt 200 [0-9]+ [0-9-]+ gzip [0-9]+us$' "$T/static.err"
check "access log line for a 206" grep -Eq '^GET /big\.txt 206 100 ' "$T/static.err"
# A sibling's log line names FILE's size as its body bytes, as a body coded
# on the fly does, for its 200 and its 304.
prelen=$(size "$W/pre.txt")
check "access log: a sibling's 200 names FILE's size and gzip" \
	grep -Eq "^GET /pre\.txt 200 $prelen [0-9]+ gzip " "$T/static.err"
check "access log: a sibling's 304 names FILE's size" \
	grep -Eq "^GET /pre\.txt 304 $prelen " "$T/static.err"

tl_stop "$STATIC_PID"
tl_exit_ok "static server: SIGTERM exit 0"

# ---------------------------------------------------------------------------
# --codings: zstd and br beside gzip, on the fly and precompressed
# FILE.zst / FILE.br siblings; the client's q-values decide, --codings's
# order breaks ties. Needs a gzserve built with both (configure summary).
if have_codings zstd,br,gzip && command -v zstd >/dev/null 2>&1; then
	seq 1 20000 | sed 's/^/sibling line /' >"$W/sib.txt"
	gzip -9 -n -c "$W/sib.txt" >"$W/sib.txt.gz"
	zstd -q -19 -c "$W/sib.txt" >"$W/sib.txt.zst"
	if command -v brotli >/dev/null 2>&1; then
		brotli -q 11 -c "$W/sib.txt" >"$W/sib.txt.br"
	fi
	if start codings --root "$W" --precompressed --codings 'zstd, br, gzip' --etag suffix; then
		C=$BASE
		# On the fly: ties go to zstd, q-values decide, each decodes.
		fetch co1 "$C/big.txt" -H 'Accept-Encoding: gzip, deflate, br, zstd'
		eq "--codings: a browser's tie gets zstd" "$(hdr "$T/co1.h" Content-Encoding)|$(hdr "$T/co1.h" Vary)" \
			"zstd|Accept-Encoding"
		check "--codings: the zstd body decodes to the file" \
			bash -c "zstd -q -d -c '$T/co1.body' | cmp -s - '$W/big.txt'"
		eq "--codings: the zstd ETag suffix" "$(hdr "$T/co1.h" ETag | sed 's/.*-//')" 'zstd"'
		fetch co2 "$C/big.txt" -H 'Accept-Encoding: zstd;q=0.5, br;q=0.9, gzip;q=0.1'
		eq "--codings: q-values decide (br)" "$(hdr "$T/co2.h" Content-Encoding)" br
		fetch co3 "$C/big.txt" --compressed
		check "--codings: curl --compressed decodes what it gets" cmp -s "$T/co3.body" "$W/big.txt"
		fetch co4 "$C/big.txt" -H 'Accept-Encoding: gzip'
		eq "--codings: a gzip client gets gzip" "$(hdr "$T/co4.h" Content-Encoding)" gzip
		fetch co5 "$C/big.txt" -H 'Accept-Encoding: identity, zstd;q=0.5'
		eq "--codings: identity preferred" "$(hdr "$T/co5.h" Content-Encoding)" ""
		fetch co6 "$C/big.txt" -H 'Accept-Encoding: zstd' -I
		eq "--codings: HEAD carries GET's coding and length" \
			"$(hdr "$T/co6.h" Content-Encoding)|$(hdr "$T/co6.h" Content-Length)" \
			"zstd|$(size "$T/co1.body")"
		# Precompressed siblings: the chosen coding's file, byte for byte.
		fetch cs1 "$C/sib.txt" -H 'Accept-Encoding: gzip, br, zstd'
		eq "precompressed zstd sibling: 200 zstd, FILE's type, Vary" \
			"$(status "$T/cs1.h")|$(hdr "$T/cs1.h" Content-Encoding)|$(hdr "$T/cs1.h" Content-Type)|$(hdr "$T/cs1.h" Vary)" \
			"200|zstd|text/plain; charset=utf-8|Accept-Encoding"
		check "precompressed zstd sibling: the body is FILE.zst" cmp -s "$T/cs1.body" "$W/sib.txt.zst"
		fetch cs2 "$C/sib.txt" -H 'Accept-Encoding: gzip'
		check "precompressed: a gzip client gets FILE.gz" cmp -s "$T/cs2.body" "$W/sib.txt.gz"
		if [ -f "$W/sib.txt.br" ]; then
			fetch cs3 "$C/sib.txt" -H 'Accept-Encoding: br, zstd;q=0.5'
			eq "precompressed br sibling: Content-Encoding br" "$(hdr "$T/cs3.h" Content-Encoding)" br
			check "precompressed br sibling: the body is FILE.br" cmp -s "$T/cs3.body" "$W/sib.txt.br"
		fi
		fetch cs4 "$C/sib.txt" -H 'Accept-Encoding: identity'
		check "precompressed: identity gets FILE" cmp -s "$T/cs4.body" "$W/sib.txt"
		fetch cs5 "$C/sib.txt" --compressed
		check "precompressed: curl --compressed gets FILE" cmp -s "$T/cs5.body" "$W/sib.txt"
		# Only gzip's sibling: a zstd client gets the file compressed on
		# the fly instead (the .gz is not for it).
		fetch cs6 "$C/pre.txt" -H 'Accept-Encoding: zstd'
		eq "a .gz sibling only: a zstd client gets zstd on the fly" \
			"$(hdr "$T/cs6.h" Content-Encoding)" zstd
		check "a .gz sibling only: the zstd body decodes to FILE" \
			bash -c "zstd -q -d -c '$T/cs6.body' | cmp -s - '$W/pre.txt'"
		# A .zst sibling needing a window over 8 MiB (RFC 9659) is not
		# sent: --long=27 through a pipe says 128 MiB; 8 MiB is.
		seq 1 20000 | sed 's/^/window line /' >"$W/win.txt"
		zstd -q --long=27 -c <"$W/win.txt" >"$W/win.txt.zst"
		gzip -n -c "$W/win.txt" >"$W/win.txt.gz"
		fetch cw1 "$C/win.txt" -H 'Accept-Encoding: zstd, gzip'
		check "a .zst sibling with a 128 MiB window is not sent: FILE.gz instead" \
			cmp -s "$T/cw1.body" "$W/win.txt.gz"
		zstd -q -19 -c <"$W/win.txt" >"$W/win.txt.zst"
		fetch cw2 "$C/win.txt" -H 'Accept-Encoding: zstd, gzip'
		check "a .zst sibling with an 8 MiB window is sent" cmp -s "$T/cw2.body" "$W/win.txt.zst"
		check "access log names zstd" grep -Eq '^GET /big\.txt 200 [0-9]+ [0-9-]+ zstd [0-9]+us$' "$T/codings.err"
		check "access log names a zstd sibling" grep -Eq '^GET /sib\.txt 200 [0-9]+ [0-9-]+ zstd ' "$T/codings.err"
		tl_stop "$PID"
	else
		nok "--codings server starts" "see stderr"
	fi
	# The demo with --codings: /stats counts each coding.
	if start dcod --codings br,gzip --quiet; then
		fetch dc1 "$BASE/100k.json" -H 'Accept-Encoding: gzip, br'
		eq "demo --codings br,gzip: br" "$(hdr "$T/dc1.h" Content-Encoding)" br
		fetch dc2 "$BASE/stats"
		check "/stats counts br responses" grep -q '"coded":{"gzip":0,"zstd":0,"br":1}' "$T/dc2.body"
		tl_stop "$PID"
	else
		nok "demo --codings server starts" "see stderr"
	fi
else
	echo "SKIP: --codings (gzserve without zstd/br, or no zstd command)"
fi
# --dictionary (RFC 9842): a client that holds the dictionary
# (its SHA-256 as Available-Dictionary) and accepts dcz gets dcz: the
# 40-byte header, then zstd against the dictionary (decoded here with the
# zstd CLI, -D); any other gets the ordinary coding, with the same Vary.
if have_codings zstd,gzip && command -v zstd >/dev/null 2>&1 && have_python; then
	seq 1 3000 | sed 's/^/function f(x) { return x + /; s/$/; }/' >"$W/lib.v1.js"
	sed 's/return x + 1\(.\)0;/return x - 1\10;/' "$W/lib.v1.js" >"$W/lib.v2.js"
	ad=$(python3 -c 'import base64, hashlib, sys; print(base64.b64encode(hashlib.sha256(open(sys.argv[1], "rb").read()).digest()).decode())' "$W/lib.v1.js")
	if timeout 10 "$GZSERVE" --root "$W" --dictionary "$T/missing.js" --dictionary-match '/*' >"$T/dm.out" 2>&1; then
		nok "--dictionary of a missing file fails" "exit 0"
	else
		check "--dictionary of a missing file fails, saying why" grep -q '^gzserve: --dictionary .*missing.js' "$T/dm.out"
	fi
	if start dict --root "$W" --codings zstd,gzip --dictionary "$W/lib.v1.js" --dictionary-match '/lib.*.js' --etag suffix; then
		fetch dz1 "$BASE/lib.v2.js" -H 'Accept-Encoding: gzip, br, zstd, dcz' -H "Available-Dictionary: :$ad:"
		eq "--dictionary: dcz, Vary on both fields" "$(status "$T/dz1.h")|$(hdr "$T/dz1.h" Content-Encoding)|$(hdr "$T/dz1.h" Vary)" \
			"200|dcz|Accept-Encoding, Available-Dictionary"
		eq "--dictionary: the dcz magic" "$(head -c 8 "$T/dz1.body" | od -An -tx1 | tr -d ' \n')" 5e2a4d1820000000
		eq "--dictionary: then the dictionary's SHA-256" "$(head -c 40 "$T/dz1.body" | tail -c 32 | base64)" "$ad"
		check "--dictionary: the dcz body decodes with zstd -D to v2" \
			bash -c "tail -c +41 '$T/dz1.body' | zstd -q -d -D '$W/lib.v1.js' | cmp -s - '$W/lib.v2.js'"
		fetch dz2 "$BASE/lib.v2.js" -H 'Accept-Encoding: zstd'
		check "--dictionary: dcz is smaller than zstd" test "$(size "$T/dz1.body")" -lt "$(size "$T/dz2.body")"
		fetch dz3 "$BASE/lib.v2.js" -H 'Accept-Encoding: zstd, dcz' -H 'Available-Dictionary: :AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=:'
		eq "--dictionary: an unknown hash gets zstd, same Vary" "$(hdr "$T/dz3.h" Content-Encoding)|$(hdr "$T/dz3.h" Vary)" \
			"zstd|Accept-Encoding, Available-Dictionary"
		cp "$W/lib.v2.js" "$W/other.js"
		fetch dz4 "$BASE/other.js" -H 'Accept-Encoding: zstd, dcz' -H "Available-Dictionary: :$ad:"
		eq "--dictionary: a path the pattern does not match gets zstd" "$(hdr "$T/dz4.h" Content-Encoding)" zstd
		check "access log names dcz" grep -Eq '^GET /lib\.v2\.js 200 [0-9]+ [0-9-]+ dcz ' "$T/dict.err"
		# FILE beneath the root advertises itself, so that a browser
		# stores it (RFC 9842 section 2.1), kept fresh for an hour; its
		# 304 too; another file, and a range of FILE, do not.
		fetch du1 "$BASE/lib.v1.js" -H 'Accept-Encoding: gzip, deflate, br, zstd'
		eq "--dictionary FILE beneath the root: Use-As-Dictionary, Cache-Control, zstd" \
			"$(hdr "$T/du1.h" Use-As-Dictionary)|$(hdr "$T/du1.h" Cache-Control)|$(hdr "$T/du1.h" Content-Encoding)" \
			'match="/lib.*.js"|max-age=3600|zstd'
		check "--dictionary FILE beneath the root: the body decodes to FILE" \
			bash -c "zstd -q -d -c '$T/du1.body' | cmp -s - '$W/lib.v1.js'"
		fetch du2 "$BASE/lib.v1.js" -H "If-None-Match: $(hdr "$T/du1.h" ETag)" -H 'Accept-Encoding: gzip, deflate, br, zstd'
		eq "--dictionary FILE beneath the root: its 304 advertises it too" \
			"$(status "$T/du2.h")|$(hdr "$T/du2.h" Use-As-Dictionary)" '304|match="/lib.*.js"'
		fetch du3 "$BASE/lib.v2.js"
		fetch du4 "$BASE/lib.v1.js" -r 0-9
		eq "--dictionary: another file, or a range of FILE, does not" \
			"$(hdr "$T/du3.h" Use-As-Dictionary)|$(status "$T/du4.h")|$(hdr "$T/du4.h" Use-As-Dictionary)" '|206|'
		tl_stop "$PID"
	else
		nok "--dictionary server starts" "see stderr"
	fi
	# The demo's /dict/: v1 advertised, v2 as dcz, counted in /stats.
	if start ddemo --codings zstd,gzip --quiet; then
		fetch dd1 "$BASE/dict/app.v1.js"
		eq "demo /dict/app.v1.js advertises itself" "$(hdr "$T/dd1.h" Use-As-Dictionary)|$(hdr "$T/dd1.h" Cache-Control)" \
			'match="/dict/app.*.js"|max-age=3600'
		ad=$(python3 -c 'import base64, hashlib, sys; print(base64.b64encode(hashlib.sha256(open(sys.argv[1], "rb").read()).digest()).decode())' "$T/dd1.body")
		fetch dd2 "$BASE/dict/app.v2.js" -H 'Accept-Encoding: gzip, zstd, dcz' -H "Available-Dictionary: :$ad:"
		eq "demo /dict/app.v2.js as dcz" "$(hdr "$T/dd2.h" Content-Encoding)" dcz
		fetch dd3 "$BASE/dict/app.v2.js"
		check "demo: the dcz body decodes to v2" \
			bash -c "tail -c +41 '$T/dd2.body' | zstd -q -d -D '$T/dd1.body' | cmp -s - '$T/dd3.body'"
		fetch dd4 "$BASE/stats"
		check "/stats counts the dictionary hit" grep -q '"dict_hits":1,' "$T/dd4.body"
		fetch dd5 "$BASE/dict/"
		check "demo /dict/ page" grep -q 'Compression dictionary transport' "$T/dd5.body"
		tl_stop "$PID"
	else
		nok "demo --codings zstd,gzip starts" "see stderr"
	fi
else
	echo "SKIP: --dictionary (gzserve without zstd, or no zstd command or python3)"
fi
# --- the descriptor budget --------------------------------------------------
# With RLIMIT_NOFILE 64: 16 connections, 8 of them serving files (main.c).
# 20 slow readers of a 5 MB file: up to 8 stream it, the others get 503 (and
# the connection closes) rather than taking descriptors an open or accept()
# then lacks; new clients meanwhile get an answer at once, not a stalled
# accept(); once the slow ones are gone, the file again.
if command -v prlimit >/dev/null 2>&1; then
	mkdir -p "$T/fdroot"
	yes "alpha beta gamma delta epsilon zeta eta theta" | head -c 5000000 >"$T/fdroot/big.txt"
	if tl_start fdlimit "$T/fdlimit.err" prlimit --nofile=64:64 "$GZSERVE" --port 0 \
		--root "$T/fdroot"; then
		check "64 descriptors: 16 connections, 8 serving files" \
			grep -q 'up to 16 connections, 8 of them serving files (RLIMIT_NOFILE 64)' \
			"$T/fdlimit.err"
		slow=()
		for i in $(seq 1 20); do
			curl -s --limit-rate 2k --max-time 8 -H 'Accept-Encoding: gzip' -o /dev/null \
				-w '%{http_code}\n' "$BASE/big.txt" >"$T/fdslow.$i" 2>/dev/null &
			slow+=($!)
		done
		sleep 1.5
		answered=0
		for i in 1 2 3; do
			code=$(curl -s --max-time 3 -o /dev/null -w '%{http_code}' -r 0-9 "$BASE/big.txt")
			case $code in 206 | 503) answered=$((answered + 1)) ;; esac
		done
		eq "new clients answered while 20 slow readers hold" "$answered" 3
		wait "${slow[@]}" 2>/dev/null
		# 200 for at most the 8 the file limit allows (fewer, even none,
		# when more connections were open before their request came), 503
		# for the rest, none unanswered
		n200=$(grep -l -x 200 "$T"/fdslow.* | wc -l | tr -d ' ')
		eq "the slow readers: at most 8 streamed, the rest 503, none unanswered" \
			"$(cat "$T"/fdslow.* | sort -u | grep -v -x -e 200 -e 503 | wc -l)|$((n200 <= 8))" \
			"0|1"
		eq "the file again once they left" \
			"$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' -r 0-9 "$BASE/big.txt")" 206
		tl_stop "$PID"
	else
		nok "gzserve under RLIMIT_NOFILE 64 starts" "see $T/fdlimit.err"
	fi
else
	echo "SKIP: the descriptor budget (no prlimit)"
fi
# --- the coder budget -------------------------------------------------------
# --coder-memory 64 MiB: 200 clients reading a 32 MiB file slowly as br
# (a 4 KiB receive buffer each, headers read, then nothing) hold at most
# 64 MiB of compressor state: the streams past it go identity, and
# gzserve's RSS stays at most 150 MB (without the budget each br stream
# holds its compressor: 200 of them, over 1 GB); a new small request is
# answered meanwhile. The exact count is test_coder_budget's.
cat >"$T/slowbr.py" <<'PY'
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
socks, codings = [], {}
for i in range(n):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(20)
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET /big.txt HTTP/1.1\r\nHost: x\r\nAccept-Encoding: br\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head and len(head) < 8192:
        d = s.recv(1)
        if not d:
            break
        head += d
    ce = [l.split(b":", 1)[1].strip().decode() for l in head.split(b"\r\n")
          if l.lower().startswith(b"content-encoding:")]
    c = ce[0] if ce else "identity"
    codings[c] = codings.get(c, 0) + 1
    socks.append(s)
print(" ".join("%s=%d" % kv for kv in sorted(codings.items())), flush=True)
sys.stdin.readline()  # held until the test has looked (bounded by its timeout)
PY
if have_python && [ "$(ulimit -Hn)" -ge 2048 ] && have_codings br; then
	mkdir -p "$T/brroot"
	head -c 24000000 /dev/urandom | base64 >"$T/brroot/big.txt"
	echo small >"$T/brroot/small.txt"
	if start coder --root "$T/brroot" --codings br --coder-memory 67108864 --quiet; then
		cport=${BASE##*:}
		cport=${cport%%/*}
		mkfifo "$T/slowbr.in"
		timeout 120 python3 "$T/slowbr.py" "$cport" 200 <"$T/slowbr.in" >"$T/slowbr.out" &
		spid=$!
		exec 7>"$T/slowbr.in"
		for i in $(seq 1 600); do
			[ -s "$T/slowbr.out" ] && break
			sleep 0.1
		done
		rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$PID/status")
		small=$(curl -s --max-time 10 "$BASE/small.txt")
		exec 7>&-
		wait "$spid"
		read -r -a got <"$T/slowbr.out"
		nbr=0
		nid=0
		for kv in "${got[@]}"; do
			case $kv in br=*) nbr=${kv#br=} ;; identity=*) nid=${kv#identity=} ;; esac
		done
		eq "200 slow br readers under --coder-memory 64 MiB: some br, the rest identity" \
			"$((nbr + nid))|$((nbr >= 1 && nbr <= 64 * 1048576 / 262144))|$((nid >= 1))" \
			"200|1|1"
		check "... gzserve's RSS at most 150 MB while they hold (${rss:-?} KiB)" \
			test "${rss:-999999999}" -le 146484
		eq "... a new small request answered meanwhile" "$small" small
		tl_stop "$PID"
	else
		nok "gzserve --coder-memory starts" "see $T/coder.err"
	fi
else
	echo "SKIP: the coder budget (no python3, br, or hard RLIMIT_NOFILE under 2048)"
fi
if grep -qi 'AddressSanitizer\|LeakSanitizer\|runtime error' "$T"/*.err; then
	nok "no sanitizer reports" "$(grep -h -i -m1 'Sanitizer\|runtime error' "$T"/*.err)"
else
	ok "no sanitizer reports"
fi

tl_summary
