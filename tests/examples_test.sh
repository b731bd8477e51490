#!/usr/bin/env bash
# examples_test.sh: the single-feature examples in examples/ end to end with the curl tool.
#
# Each example runs on 127.0.0.1 port 0 and prints "listening on
# http://127.0.0.1:PORT/". Bodies are checked byte for byte against what the
# example serves, gzip bodies decoded with gzip -dc (and python3's gzip
# module for one file), headers compared exactly. Every check prints one line
# ("ok N - what" or "not ok N - what: why"); the script ends with "N passed,
# M failed" and exits non-zero on any failure. Every curl has --max-time,
# every server runs under timeout(1), every wait is bounded, and every
# server is killed by the EXIT trap.
#
# EXAMPLES names the folder of the example binaries; by default examples/
# under the working directory (make check runs tests from the top build
# directory, VPATH or not), else next to this script.
set -u

if [ -z "${EXAMPLES:-}" ]; then
	EXAMPLES=$PWD/examples
	[ -x "$EXAMPLES/minimal" ] || EXAMPLES=$(cd "$(dirname "$0")/.." && pwd)/examples
fi
CURL=(curl -s -S --max-time 15)
. "$(dirname "$0")/testlib.sh"

tl_need curl
for e in minimal stream_low_latency static_file event_stream; do
	if [ ! -x "$EXAMPLES/$e" ]; then
		echo "$e not found in $EXAMPLES (set EXAMPLES)" >&2
		exit 1
	fi
done

tl_scratch examples_test
# same NAME FILE WANTFILE: byte-for-byte equal files.
same() {
	if cmp -s "$2" "$3"; then
		ok "$1"
	else
		nok "$1" "$(size "$2") bytes differ from the expected $(size "$3")"
	fi
}

# start NAME ARGS...: start example NAME (port first in ARGS) under
# timeout(1), wait (bounded) for its "listening on" line; sets PID and BASE.
start() {
	tl_start "$1" "$T/$1.err" timeout -s KILL 120 "$EXAMPLES/$1" "${@:2}"
}
# started NAME: the check that the example came up and printed its address.
started() {
	if grep -Eq '^listening on http://127\.0\.0\.1:[0-9]+/$' "$T/$1.out"; then
		ok "$1 prints 'listening on http://127.0.0.1:PORT/'"
	else
		nok "$1 prints its address" "'$(head -n 1 "$T/$1.out")'"
	fi
}
# stop NAME PID: SIGTERM (timeout(1) passes it on), wait up to 15 s, check
# the example exits 0. Not in a subshell: only this shell can wait.
stop() {
	tl_stop "$2"
	tl_exit_ok "$1: SIGTERM exits 0"
}

# gunzip_check NAME BODY WANT: BODY is gzip and decodes to exactly WANT.
gunzip_check() {
	if gzip -dc <"$2" >"$T/gunz" 2>"$T/gunz.err"; then
		same "$1" "$T/gunz" "$3"
	else
		nok "$1" "gzip -dc: $(head -n 1 "$T/gunz.err")"
	fi
}
# timed NAME URL [curl args...]: stream URL through curl -N, one line of
# "MILLISECONDS LINE" per non-empty body line into $T/NAME.lines.
timed() {
	local name=$1 url=$2 line
	shift 2
	"${CURL[@]}" -N "$@" "$url" 2>/dev/null | while IFS= read -r line; do
		[ -n "$line" ] && echo "$(($(date +%s%N) / 1000000)) $line"
	done >"$T/$name.lines"
}
# spread FILE A B: milliseconds between lines A and B of a timed file.
spread() {
	echo $(($(sed -n "${3}p" "$1" | cut -d' ' -f1) - $(sed -n "${2}p" "$1" | cut -d' ' -f1)))
}

# ---------------------------------------------------------------------------
# minimal: the two-call change; the connection stays alive.

printf '%s\n' '<!doctype html><title>mhdgz</title><p>Hello, compressed world. Hello, compressed world. Hello, compressed world.</p>' >"$T/minimal.want"
if start minimal 0; then
	M=$BASE
	MIN_PID=$PID
	started minimal
	fetch mid "$M/"
	eq "minimal identity: 200, type, no coding, Vary" \
		"$(status "$T/mid.h")|$(hdr "$T/mid.h" Content-Type)|$(hdr "$T/mid.h" Content-Encoding)|$(hdr "$T/mid.h" Vary)" \
		"200|text/html; charset=utf-8||Accept-Encoding"
	same "minimal identity body is the page" "$T/mid.body" "$T/minimal.want"
	eq "minimal identity Content-Length" "$(hdr "$T/mid.h" Content-Length)" "$(size "$T/minimal.want")"
	fetch mgz "$M/" -H 'Accept-Encoding: gzip'
	eq "minimal gzip: Content-Encoding, Vary" \
		"$(hdr "$T/mgz.h" Content-Encoding)|$(hdr "$T/mgz.h" Vary)" "gzip|Accept-Encoding"
	eq "minimal gzip Content-Length = compressed body" "$(hdr "$T/mgz.h" Content-Length)" \
		"$(size "$T/mgz.body")"
	gunzip_check "minimal gzip body decodes to the page" "$T/mgz.body" "$T/minimal.want"
	# Two URLs, one curl: the second must reuse the first connection.
	# num_connects is per transfer: 1 for the first (it connected), 0 for
	# the second (it reused that connection). Counted, not read from
	# curl -v, whose wording changed in curl 8.
	"${CURL[@]}" --compressed -o "$T/ka1" "$M/a" -o "$T/ka2" "$M/b" \
		-w '%{num_connects}\n' >"$T/ka.n"
	eq "minimal keep-alive: num_connects 1 then 0 (one connection for two URLs)" \
		"$(paste -sd ' ' "$T/ka.n")" "1 0"
	check "minimal keep-alive: both bodies are the page" \
		bash -c "cmp -s '$T/ka1' '$T/minimal.want' && cmp -s '$T/ka2' '$T/minimal.want'"
	stop minimal "$MIN_PID"
else
	nok "minimal starts" "see stderr above"
fi

# ---------------------------------------------------------------------------
# stream_low_latency: a callback body of unknown size, each line flushed.

for i in 1 2 3 4 5; do printf '{"line":%d,"of":5}\n' "$i"; done >"$T/lines.want"
if start stream_low_latency 0; then
	L=$BASE
	LL_PID=$PID
	started stream_low_latency
	fetch lgz "$L/" -H 'Accept-Encoding: gzip'
	eq "stream gzip: 200, type, Content-Encoding, Vary, chunked" \
		"$(status "$T/lgz.h")|$(hdr "$T/lgz.h" Content-Type)|$(hdr "$T/lgz.h" Content-Encoding)|$(hdr "$T/lgz.h" Vary)|$(hdr "$T/lgz.h" Transfer-Encoding)" \
		"200|application/x-ndjson|gzip|Accept-Encoding|chunked"
	eq "stream gzip: no Content-Length" "$(hdr "$T/lgz.h" Content-Length)" ""
	gunzip_check "stream gzip body decodes to the 5 lines" "$T/lgz.body" "$T/lines.want"
	fetch lid "$L/"
	eq "stream identity: no coding, Vary" \
		"$(hdr "$T/lid.h" Content-Encoding)|$(hdr "$T/lid.h" Vary)" "|Accept-Encoding"
	same "stream identity body is the 5 lines" "$T/lid.body" "$T/lines.want"
	# Produced 300 ms apart: flushed one by one, the 1st and the 5th reach
	# curl at least 600 ms apart (all at the end without the flush).
	timed lt "$L/" --compressed
	eq "stream: 5 lines through curl --compressed" "$(wc -l <"$T/lt.lines" | tr -d ' ')" 5
	if [ "$(wc -l <"$T/lt.lines")" -eq 5 ]; then
		gap=$(spread "$T/lt.lines" 1 5)
		check "stream: lines arrive as produced (1st to 5th: $gap ms)" test "$gap" -ge 600
		cut -d' ' -f2- "$T/lt.lines" >"$T/lt.text"
		same "stream: the lines, in order" "$T/lt.text" "$T/lines.want"
	fi
	stop stream_low_latency "$LL_PID"
else
	nok "stream_low_latency starts" "see stderr above"
fi

# ---------------------------------------------------------------------------
# static_file: a file by descriptor, ETag, If-None-Match, 304.

seq 1 6000 | sed 's/^/static line /' >"$T/file.txt"
if start static_file 0 "$T/file.txt"; then
	S=$BASE
	SF_PID=$PID
	started static_file
	fetch fid "$S/"
	etag=$(hdr "$T/fid.h" ETag)
	eq "static identity: 200, type, no coding, Vary" \
		"$(status "$T/fid.h")|$(hdr "$T/fid.h" Content-Type)|$(hdr "$T/fid.h" Content-Encoding)|$(hdr "$T/fid.h" Vary)" \
		"200|text/plain; charset=utf-8||Accept-Encoding"
	same "static identity body is the file" "$T/fid.body" "$T/file.txt"
	eq "static identity Content-Length" "$(hdr "$T/fid.h" Content-Length)" "$(size "$T/file.txt")"
	check "static: a strong ETag ($etag)" bash -c "[[ '$etag' =~ ^\\\"[0-9a-f-]+\\\"\$ ]]"
	fetch fgz "$S/" -H 'Accept-Encoding: gzip'
	eq "static gzip: Content-Encoding, Vary, W/ ETag" \
		"$(hdr "$T/fgz.h" Content-Encoding)|$(hdr "$T/fgz.h" Vary)|$(hdr "$T/fgz.h" ETag)" \
		"gzip|Accept-Encoding|W/$etag"
	gunzip_check "static gzip body decodes to the file (gzip -dc)" "$T/fgz.body" "$T/file.txt"
	if command -v python3 >/dev/null 2>&1; then
		check "static gzip body decodes to the file (python3 gzip)" python3 -c '
import gzip, sys
sys.exit(gzip.decompress(open(sys.argv[1], "rb").read()) != open(sys.argv[2], "rb").read())
' "$T/fgz.body" "$T/file.txt"
	fi
	fetch f304 "$S/" -H "If-None-Match: $etag"
	eq "static If-None-Match: 304 with the ETag and Vary, no body" \
		"$(status "$T/f304.h")|$(hdr "$T/f304.h" ETag)|$(hdr "$T/f304.h" Vary)|$(size "$T/f304.body")" \
		"304|$etag|Accept-Encoding|0"
	fetch f304g "$S/" -H "If-None-Match: W/$etag" -H 'Accept-Encoding: gzip'
	eq "static If-None-Match W/ (gzip client): 304 with the W/ ETag" \
		"$(status "$T/f304g.h")|$(hdr "$T/f304g.h" ETag)|$(hdr "$T/f304g.h" Vary)|$(size "$T/f304g.body")" \
		"304|W/$etag|Accept-Encoding|0"
	fetch fo "$S/" -H 'If-None-Match: "other"'
	eq "static If-None-Match mismatch: 200 with the file" "$(status "$T/fo.h")|$(size "$T/fo.body")" \
		"200|$(size "$T/file.txt")"
	fetch f412 "$S/" -H 'If-Match: "other"'
	eq "static If-Match mismatch: 412, empty" "$(status "$T/f412.h")|$(size "$T/f412.body")" "412|0"
	stop static_file "$SF_PID"
else
	nok "static_file starts" "see stderr above"
fi

# ---------------------------------------------------------------------------
# event_stream: suspended between events, resumed by a timer thread.

for i in 1 2 3 4 5; do printf 'id: %d\ndata: event %d of 5\n\n' "$i" "$i"; done >"$T/events.want"
if start event_stream 0; then
	E=$BASE
	ES_PID=$PID
	started event_stream
	fetch egz "$E/" -N -H 'Accept-Encoding: gzip'
	eq "events gzip: 200, type, Content-Encoding, Vary, chunked" \
		"$(status "$T/egz.h")|$(hdr "$T/egz.h" Content-Type)|$(hdr "$T/egz.h" Content-Encoding)|$(hdr "$T/egz.h" Vary)|$(hdr "$T/egz.h" Transfer-Encoding)" \
		"200|text/event-stream|gzip|Accept-Encoding|chunked"
	gunzip_check "events gzip body decodes to all 5 events" "$T/egz.body" "$T/events.want"
	fetch eid "$E/" -N
	eq "events identity: no coding, Vary" \
		"$(hdr "$T/eid.h" Content-Encoding)|$(hdr "$T/eid.h" Vary)" "|Accept-Encoding"
	same "events identity body is all 5 events" "$T/eid.body" "$T/events.want"
	# Four streams at once, each suspended and resumed on its own.
	cpids=()
	for i in 1 2 3 4; do
		"${CURL[@]}" -N --compressed -o "$T/ec$i" "$E/" &
		cpids+=($!)
	done
	cfail=0
	for p in "${cpids[@]}"; do
		wait "$p" || cfail=$((cfail + 1))
	done
	for i in 1 2 3 4; do
		cmp -s "$T/ec$i" "$T/events.want" || cfail=$((cfail + 1))
	done
	eq "events: 4 streams at once, every event in each" "$cfail" 0
	# One tick (200 ms) at least between events 2 to 5.
	timed et "$E/" --compressed
	eq "events: 10 lines through curl --compressed" "$(wc -l <"$T/et.lines" | tr -d ' ')" 10
	if [ "$(wc -l <"$T/et.lines")" -eq 10 ]; then
		gap=$(spread "$T/et.lines" 1 10)
		check "events arrive one by one (1st to 5th: $gap ms)" test "$gap" -ge 400
	fi
	stop event_stream "$ES_PID"
else
	nok "event_stream starts" "see stderr above"
fi

if grep -qi 'AddressSanitizer\|LeakSanitizer\|ThreadSanitizer\|runtime error' "$T"/*.err; then
	nok "no sanitizer reports" "$(grep -h -i -m1 'Sanitizer\|runtime error' "$T"/*.err)"
else
	ok "no sanitizer reports"
fi

tl_summary
