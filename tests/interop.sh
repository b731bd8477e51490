#!/usr/bin/env bash
# interop.sh: real clients (headless Chromium, curl, wget, Python) decode everything gzserve sends.
#
# Against examples/gzserve/gzserve on 127.0.0.1, port 0:
#  - the built-in demo: Chromium (Debian's chromium, driven by playwright-core
#    from npm, tests/interop/browser.js) loads the page: HTML, CSS and
#    JavaScript arrive gzip-compressed, the script runs, the stylesheet
#    applies, fetch('/100k.json') parses, an EventSource gets events in
#    order as they happen, a screenshot is written. curl --compressed,
#    wget --compression=gzip and Python's http.client + gzip
#    (tests/interop/http_check.py) decode every demo endpoint to the bytes
#    of its identity response, HEAD and GET agree, and a keep-alive
#    sequence with 204, 304, HEAD and GET shares one connection;
#  - a --root tree with FILE.gz beside FILE (--precompressed): the same
#    page in Chromium, FILE.gz's own bytes on the wire, decoding to FILE;
#  - the demo with --length-hiding 512 (BREACH padding in the gzip header
#    comment): curl --compressed, Python (gzip and zlib) and Chromium (page,
#    script, stylesheet, fetch, EventSource) decode every padded body.
#  - the demo with its default codings (zstd, then gzip): a browser's
#    Accept-Encoding gets zstd, "gzip" and "zstd;q=0.5, gzip" gzip, each
#    decoded by the zstd and gzip tools; then as below. The checks above
#    are gzip's and run with --codings gzip, but --length-hiding, which
#    sends a browser gzip under the default codings (padding is gzip's);
#  - zstd and br: the demo with --codings zstd,br,gzip, with
#    --codings br,gzip and with gzip alone: Chromium and a second engine,
#    Firefox ESR (Debian's firefox-esr, driven over WebDriver BiDi by
#    puppeteer-core, tests/interop/firefox.js), both advertising br and
#    zstd, get every resource in that coding, the page runs, the events
#    arrive; curl --compressed and Python (python3-zstandard,
#    python3-brotli, gzip) decode every fixed endpoint to its identity
#    bytes; the page's /stats chart is checked in Chromium;
#  - RFC 9842: the demo's /dict/ page, and a 10 MB --dictionary beneath
#    --root that advertises itself: Chromium stores it and gets the next
#    version as dcz (tests/interop/dict_root.js); zstd -D and
#    python3-zstandard decode that body.
#
# Each check prints one line, "PASS client: what" or "FAIL client: what
# (why)"; the script ends with "N passed, M failed" and exits 1 on any
# failure. A client that is not installed fails its checks, it is not
# skipped. Needs: chromium, firefox-esr, nodejs + npm (the npm registry
# once, for playwright-core and puppeteer-core into
# tests/interop/node_modules), curl, wget, python3 with python3-brotli and
# python3-zstandard, gzip. Bounded: every client runs under timeout(1) or its own timeout,
# the whole script under INTEROP_TIMEOUT (240 s); a run takes 20-45 s.
# Loopback only; the servers it starts are killed on exit.
#
# Environment: GZSERVE the binary (default examples/gzserve/gzserve beside this
# script's parent, or in the current build tree); INTEROP_OUT the output
# folder (default tests/interop-out under the current directory): logs,
# screenshots, the bodies compared; CHROMIUM the browser (/usr/bin/chromium).
set -u

# The whole run is bounded: this script runs itself under timeout(1), and a
# run cut short still ends with its counts (plus one failure for the cut).
LIMIT_S=${INTEROP_TIMEOUT:-240}
if [ -z "${INTEROP_INNER:-}" ]; then
	export INTEROP_INNER=1
	tee_log=$(mktemp "${TMPDIR:-/tmp}/interop-log.XXXXXX")
	timeout -k 10 "$LIMIT_S" bash "$0" "$@" | tee "$tee_log"
	rc=${PIPESTATUS[0]}
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		echo "FAIL interop.sh: finished (timed out after $LIMIT_S s)"
		echo "$(grep -c '^PASS' "$tee_log") passed, $(($(grep -c '^FAIL' "$tee_log") + 1)) failed"
	fi
	rm -f "$tee_log"
	exit "$rc"
fi

SRCDIR=$(cd "$(dirname "$0")" && pwd)
. "$SRCDIR/testlib.sh"
if [ -z "${GZSERVE:-}" ]; then
	GZSERVE=$PWD/examples/gzserve/gzserve
	[ -x "$GZSERVE" ] || GZSERVE=$SRCDIR/../examples/gzserve/gzserve
fi
OUT=${INTEROP_OUT:-$PWD/tests/interop-out}
export CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
export FIREFOX=${FIREFOX:-/usr/bin/firefox-esr}
# Debian's python3: a pyenv or venv python on PATH is not what CI has.
PYTHON=/usr/bin/python3
[ -x "$PYTHON" ] || PYTHON=python3
NODE_DIR=$SRCDIR/interop
T_START=$SECONDS

# Demo endpoints with fixed bodies; the file in $REF is the path without
# its slash, index.html for "/".
FIXED=(/ /style.css /app.js /2k.json /20k.json /100k.json)
EVENTS=10 # GZS_EVENTS in gzserve.c: /events sends 10, 1 s apart
CURL=(curl -s -S --max-time 10 --noproxy '*')
WGET=(wget --no-proxy --timeout=10 --tries=1 --compression=gzip)

NPASS=0
NFAIL=0
pass() {
	NPASS=$((NPASS + 1))
	echo "PASS $1"
}
fail() {
	NFAIL=$((NFAIL + 1))
	echo "FAIL $1 ($2)"
}
# have CLIENT CMD: CMD is installed, or CLIENT's checks fail as one line.
have() {
	if command -v "$2" >/dev/null 2>&1 || [ -x "$2" ]; then
		return 0
	fi
	fail "$1: not installed" "$2 not found; .ci/run installs it with apt-get"
	return 1
}

# run_driver WHAT SECONDS CMD...: run a driver printing PASS/FAIL lines,
# count them; a driver that does not finish (crash, timeout) is a failure.
run_driver() {
	local what=$1 secs=$2 rc log
	shift 2
	log=$(mktemp "$T/driver.XXXXXX")
	# In the background so that cleanup can stop it: timeout(1) runs it in
	# a process group of its own and passes a TERM on to all of it.
	timeout -k 5 "$secs" "$@" >"$log" 2>"$log.err" &
	PIDS+=($!)
	wait $!
	rc=$?
	while IFS= read -r line; do
		case $line in
		PASS*) NPASS=$((NPASS + 1)); echo "$line" ;;
		FAIL*) NFAIL=$((NFAIL + 1)); echo "$line" ;;
		*) echo "  $line" ;;
		esac
	done <"$log"
	if [ "$rc" -ne 0 ]; then
		fail "$what: finished" "exit status $rc$([ "$rc" -eq 124 ] && echo ", timed out after $secs s"): $(tail -n 3 "$log.err" | tr '\n' ' ')"
	fi
}

mkdir -p "$OUT"
T=$(mktemp -d "${TMPDIR:-/tmp}/interop.XXXXXX")
PIDS=()
cleanup() {
	local p
	# TERM first: a driver's timeout(1) passes it on to the browser.
	for p in "${PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null
	done
	sleep 0.2
	for p in "${PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null
	done
	wait 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start NAME ARGS...: gzserve on 127.0.0.1 port 0, its access log in
# $OUT/NAME.log; waits (at most 10 s) for its "listening on" line; sets BASE.
start() {
	tl_start "$1" "$OUT/$1.log" "$GZSERVE" --bind 127.0.0.1 --port 0 "${@:2}"
}

# headers FILE: the representation headers of a dumped header block, lower
# case, sorted: what a HEAD must repeat from its GET (RFC 9110 9.3.2).
headers() {
	tr -d '\r' <"$1" | grep -iE '^(HTTP/|content-type|content-encoding|content-length|transfer-encoding|vary|etag|cache-control|last-modified|accept-ranges):' |
		sed -E 's/^([^:]*):/\L\1:/' | sort
}
status_line() { tr -d '\r' <"$1" | head -n 1 | cut -d' ' -f2; }
coding() { tr -d '\r' <"$1" | sed -n 's/^[Cc]ontent-[Ee]ncoding: *//p' | tail -n 1; }

# events FILE: the n of each event, one per line, if every id matches.
events() {
	tr -d '\r' <"$1" | awk '
		/^id: / { id = $2 }
		/^data: / { if (match($0, /"n":[0-9]+/)) { n = substr($0, RSTART + 4, RLENGTH - 4); if (n != id) bad = 1; print n } }
		END { exit bad }'
}
# Events with the server's timestamps removed: the rest must be identical.
strip_times() { sed -E 's/"elapsed_ms":[0-9]+//' "$1"; }

refname() { if [ "$1" = / ]; then echo index.html; else echo "${1#/}"; fi; }

echo "# interop: gzserve $GZSERVE, output in $OUT"
if [ ! -x "$GZSERVE" ]; then
	fail "gzserve: built" "$GZSERVE not found (build it, or set GZSERVE)"
	echo "$NPASS passed, $NFAIL failed"
	exit 1
fi
rm -rf "${OUT:?}/demo" "$OUT/root" "$OUT"/*.png

# --- the demo ---------------------------------------------------------------
# gzip alone: these checks are gzip's (the default codings are below).
if ! start demo --codings gzip; then
	fail "gzserve: demo started" "$(tail -n 3 "$OUT/demo.log" | tr '\n' ' ')"
	echo "$NPASS passed, $NFAIL failed"
	exit 1
fi
echo "# demo on $BASE"
D=$OUT/demo
REF=$D/identity
mkdir -p "$REF" "$D/curl" "$D/wget"

HAVE_CURL=0 HAVE_WGET=0 HAVE_PY=0 HAVE_BROWSER=1
have curl curl && HAVE_CURL=1
have wget wget && HAVE_WGET=1
have python "$PYTHON" && HAVE_PY=1
have chromium "$CHROMIUM" || HAVE_BROWSER=0
have node node || HAVE_BROWSER=0
have npm npm || HAVE_BROWSER=0

# /events runs 9 s: start every client's copy now, check them at the end.
EV_PIDS=()
if [ "$HAVE_CURL" = 1 ]; then
	"${CURL[@]}" --max-time 20 -N -D "$D/events.identity.h" -o "$D/events.identity" "$BASE/events" &
	EV_PIDS+=($!)
	"${CURL[@]}" --max-time 20 -N --compressed -D "$D/events.curl.h" -o "$D/events.curl" "$BASE/events" &
	EV_PIDS+=($!)
fi
if [ "$HAVE_WGET" = 1 ]; then
	"${WGET[@]}" -q -S -O "$D/events.wget" "$BASE/events" 2>"$D/events.wget.h" &
	EV_PIDS+=($!)
fi
PIDS+=("${EV_PIDS[@]}")

# The identity bodies every client's decoded bytes are compared with: curl
# sends no Accept-Encoding unless told to.
if [ "$HAVE_CURL" = 1 ]; then
	for p in "${FIXED[@]}"; do
		f=$(refname "$p")
		if "${CURL[@]}" -D "$REF/$f.h" -o "$REF/$f" "$BASE$p" &&
			[ "$(status_line "$REF/$f.h")" = 200 ] && [ -z "$(coding "$REF/$f.h")" ]; then
			pass "curl: $p identity reference ($(wc -c <"$REF/$f") bytes)"
		else
			fail "curl: $p identity reference" "status $(status_line "$REF/$f.h"), coding '$(coding "$REF/$f.h")'"
		fi
	done
fi

# --- curl --------------------------------------------------------------------
if [ "$HAVE_CURL" = 1 ]; then
	for p in "${FIXED[@]}"; do
		f=$(refname "$p")
		"${CURL[@]}" --compressed -D "$D/curl/$f.h" -o "$D/curl/$f" "$BASE$p"
		if [ "$(coding "$D/curl/$f.h")" != gzip ]; then
			fail "curl: $p --compressed decodes to the identity bytes" "Content-Encoding '$(coding "$D/curl/$f.h")'"
		elif ! cmp -s "$D/curl/$f" "$REF/$f"; then
			fail "curl: $p --compressed decodes to the identity bytes" "$(wc -c <"$D/curl/$f") bytes differ from $REF/$f"
		else
			pass "curl: $p --compressed decodes to the identity bytes"
		fi
	done
	for p in "${FIXED[@]}" /stats /204 /nonexistent; do
		bad=""
		for enc in --compressed ""; do
			# shellcheck disable=SC2086 # $enc is one option or none
			"${CURL[@]}" $enc -I -o "$T/head.h" "$BASE$p"
			# shellcheck disable=SC2086
			"${CURL[@]}" $enc -D "$T/get.h" -o /dev/null "$BASE$p"
			if [ "$p" = /stats ]; then
				# Its counters, so its length, change between requests.
				sed -i '/^[Cc]ontent-[Ll]ength/d' "$T/head.h" "$T/get.h"
			fi
			if ! diff <(headers "$T/head.h") <(headers "$T/get.h") >"$T/diff"; then
				bad="$bad ${enc:-identity}: $(grep '^[<>]' "$T/diff" | tr '\n' ' ')"
			fi
		done
		if [ -z "$bad" ]; then pass "curl: HEAD/GET parity $p (gzip and identity)"; else fail "curl: HEAD/GET parity $p" "$bad"; fi
	done
	if "${CURL[@]}" --compressed "$BASE/stats" | grep -q '^{"version":".*}}$'; then
		pass "curl: /stats is JSON"
	else
		fail "curl: /stats is JSON" "unexpected body"
	fi
	# Keep-alive: five exchanges in one curl run share its connection cache;
	# num_connects is 1 for the first and 0 for a reused connection.
	ETAG=$(tr -d '\r' <"$D/curl/2k.json.h" | sed -n 's/^[Ee][Tt]ag: *//p')
	W=(-w '%{http_code}/%{num_connects} ')
	seq_got=$("${CURL[@]}" --compressed -o /dev/null "${W[@]}" "$BASE/2k.json" \
		--next --max-time 10 --compressed -o /dev/null "${W[@]}" "$BASE/204" \
		--next --max-time 10 --compressed -o /dev/null "${W[@]}" -H "If-None-Match: $ETAG" "$BASE/2k.json" \
		--next --max-time 10 --compressed -o /dev/null "${W[@]}" -I "$BASE/2k.json" \
		--next --max-time 10 --compressed -o "$D/curl/keepalive.2k.json" "${W[@]}" "$BASE/2k.json")
	if [ "$seq_got" = "200/1 204/0 304/0 200/0 200/0 " ] && cmp -s "$D/curl/keepalive.2k.json" "$REF/2k.json"; then
		pass "curl: keep-alive GET/204/304/HEAD/GET on one connection"
	else
		fail "curl: keep-alive GET/204/304/HEAD/GET on one connection" "status/new connections: $seq_got"
	fi
fi

# --- wget ----------------------------------------------------------------------
if [ "$HAVE_WGET" = 1 ]; then
	if ! wget --help 2>/dev/null | grep -q -- '--compression='; then
		fail "wget: --compression=gzip" "this wget has no --compression option"
	else
		for p in "${FIXED[@]}"; do
			f=$(refname "$p")
			"${WGET[@]}" -q -S -O "$D/wget/$f" "$BASE$p" 2>"$D/wget/$f.h"
			if ! grep -qi '^ *Content-Encoding: gzip' "$D/wget/$f.h"; then
				fail "wget: $p --compression=gzip decodes to the identity bytes" "not sent gzip"
			elif ! cmp -s "$D/wget/$f" "$REF/$f"; then
				fail "wget: $p --compression=gzip decodes to the identity bytes" "$(wc -c <"$D/wget/$f") bytes differ"
			else
				pass "wget: $p --compression=gzip decodes to the identity bytes"
			fi
		done
		# --spider sends HEAD.
		bad=""
		for p in "${FIXED[@]}" /204; do
			"${WGET[@]}" -q -S --spider "$BASE$p" 2>"$T/head.h"
			"${WGET[@]}" -q -S -O /dev/null "$BASE$p" 2>"$T/get.h"
			sed -i 's/^ *//' "$T/head.h" "$T/get.h"
			diff -q <(headers "$T/head.h") <(headers "$T/get.h") >/dev/null || bad="$bad $p"
		done
		if [ -z "$bad" ]; then pass "wget: HEAD (--spider)/GET parity, every fixed endpoint and /204"; else fail "wget: HEAD/GET parity" "differ:$bad"; fi
		# wget cannot send If-None-Match or mix HEAD into a run: GET, 204, GET.
		"${WGET[@]}" -S -O "$T/wget-seq" "$BASE/2k.json" "$BASE/204" "$BASE/100k.json" >"$T/wget-seq.log" 2>&1
		st=$(sed -n 's/^ *HTTP\/1\.1 \([0-9]*\).*/\1/p' "$T/wget-seq.log" | tr '\n' ' ')
		reused=$(grep -c '^Reusing existing connection' "$T/wget-seq.log")
		if [ "$st" = "200 204 200 " ] && [ "$reused" = 2 ]; then
			pass "wget: keep-alive GET/204/GET on one connection"
		else
			fail "wget: keep-alive GET/204/GET on one connection" "statuses $st, $reused reused"
		fi
	fi
fi

# --- Python http.client + gzip ----------------------------------------------------
if [ "$HAVE_PY" = 1 ] && [ "$HAVE_CURL" = 1 ]; then
	run_driver python 60 "$PYTHON" "$SRCDIR/interop/http_check.py" demo "$BASE" "$REF"
elif [ "$HAVE_PY" = 1 ]; then
	fail "python: demo checks" "they compare with curl's identity bodies, and curl is missing"
fi

# --- Chromium --------------------------------------------------------------------
# playwright-core from package-lock.json, once, into tests/interop/ (or
# into $OUT/node when the source tree is read-only); never a browser download.
npm_ready() {
	local dir=$NODE_DIR
	if [ ! -f "$dir/node_modules/playwright-core/package.json" ] && [ ! -w "$dir" ]; then
		dir=$OUT/node
		mkdir -p "$dir"
		cp "$NODE_DIR/package.json" "$NODE_DIR/package-lock.json" "$dir/"
	fi
	NODE_MODULES=$dir/node_modules
	[ -f "$NODE_MODULES/playwright-core/package.json" ] &&
		[ -f "$NODE_MODULES/puppeteer-core/package.json" ] && return 0
	(cd "$dir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 timeout 180 \
		npm ci --no-audit --no-fund --loglevel=error) >"$OUT/npm.log" 2>&1
}
if [ "$HAVE_BROWSER" = 1 ]; then
	if npm_ready; then
		pass "node: playwright-core installed ($(sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' "$NODE_MODULES/playwright-core/package.json"))"
		# browser.js finds it here also when it is not beside it.
		export NODE_PATH=$NODE_MODULES
	else
		fail "node: playwright-core installed" "npm ci failed, see $OUT/npm.log"
		HAVE_BROWSER=0
	fi
fi
if [ "$HAVE_BROWSER" = 1 ]; then
	run_driver "browser[demo]" 90 node "$NODE_DIR/browser.js" \
		"{\"name\":\"demo\",\"base\":\"$BASE\",\"out\":\"$OUT\",\"events\":true}"
fi

# --- /events, fetched in the background since the start ----------------------------
if [ "${#EV_PIDS[@]}" -gt 0 ]; then
	wait "${EV_PIDS[@]}"
	want=$(seq 1 "$EVENTS" | tr '\n' ' ')
	for c in identity curl wget; do
		[ -f "$D/events.$c.h" ] || continue
		got=$(events "$D/events.$c" | tr '\n' ' ')
		enc=$(tr -d '\r' <"$D/events.$c.h" | sed -n 's/^ *[Cc]ontent-[Ee]ncoding: *//p')
		if [ "$c" = identity ]; then
			if [ "$got" = "$want" ] && [ -z "$enc" ]; then pass "curl: /events identity: $EVENTS events in order"; else fail "curl: /events identity" "events '$got', coding '$enc'"; fi
			continue
		fi
		what="$c: /events gzip: $EVENTS events in order, identical to identity but for their times"
		if [ "$enc" != gzip ]; then
			fail "$what" "Content-Encoding '$enc'"
		elif [ "$got" != "$want" ]; then
			fail "$what" "events '$got'"
		elif ! cmp -s <(strip_times "$D/events.$c") <(strip_times "$D/events.identity"); then
			fail "$what" "bodies differ"
		else
			pass "$what"
		fi
	done
fi

# --- a --root tree with precompressed files --------------------------------------------
# The demo's page, stylesheet, script and 100k.json with FILE.gz beside each
# (gzip -9: other bytes than gzserve's own compressor makes), 20k.json without.
R=$OUT/root
if [ "$HAVE_CURL" = 1 ]; then
	mkdir -p "$R"
	for f in index.html style.css app.js 100k.json 20k.json; do
		cp "$REF/$f" "$R/$f"
	done
	for f in index.html style.css app.js 100k.json; do
		gzip -9 -n -k "$R/$f"
	done
	if ! start root --root "$R" --precompressed --codings gzip; then
		fail "gzserve: --root --precompressed started" "$(tail -n 3 "$OUT/root.log" | tr '\n' ' ')"
	else
		echo "# --root $R --precompressed on $BASE"
		for f in index.html style.css app.js 100k.json 20k.json; do
			p=/$f
			[ "$f" = index.html ] && p=/
			what="curl: --precompressed $p"
			"${CURL[@]}" -H 'Accept-Encoding: gzip' -D "$T/raw.h" -o "$T/raw" "$BASE$p"
			"${CURL[@]}" --compressed -o "$T/dec" "$BASE$p"
			"${CURL[@]}" -D "$T/id.h" -o "$T/id" "$BASE$p"
			if [ "$(coding "$T/raw.h")" != gzip ]; then
				fail "$what" "Content-Encoding '$(coding "$T/raw.h")'"
			elif [ -f "$R/$f.gz" ] && ! cmp -s "$T/raw" "$R/$f.gz"; then
				fail "$what is $f.gz as is" "other bytes on the wire"
			elif ! cmp -s "$T/dec" "$R/$f" || ! cmp -s "$T/id" "$R/$f" || [ -n "$(coding "$T/id.h")" ]; then
				fail "$what decodes to $f" "decoded or identity body differs"
			elif [ -f "$R/$f.gz" ]; then
				pass "$what is $f.gz as is, decodes to $f, identity is $f"
			else
				pass "$what compressed on the fly, decodes to $f, identity is $f"
			fi
			"${CURL[@]}" -H 'Accept-Encoding: gzip' -I -o "$T/head.h" "$BASE$p"
			if diff -q <(headers "$T/head.h") <(headers "$T/raw.h") >/dev/null; then
				pass "curl: --precompressed HEAD/GET parity $p"
			else
				fail "curl: --precompressed HEAD/GET parity $p" "$(diff <(headers "$T/head.h") <(headers "$T/raw.h") | grep '^[<>]' | tr '\n' ' ')"
			fi
		done
		if [ "$HAVE_WGET" = 1 ]; then
			bad=""
			for f in index.html style.css app.js 100k.json 20k.json; do
				p=/$f
				[ "$f" = index.html ] && p=/
				"${WGET[@]}" -q -O "$T/w" "$BASE$p" 2>/dev/null && cmp -s "$T/w" "$R/$f" || bad="$bad $p"
			done
			if [ -z "$bad" ]; then pass "wget: --precompressed files decode to the originals"; else fail "wget: --precompressed files decode to the originals" "differ:$bad"; fi
		fi
		[ "$HAVE_PY" = 1 ] && run_driver python 60 "$PYTHON" "$SRCDIR/interop/http_check.py" root "$BASE" "$R"
		if [ "$HAVE_BROWSER" = 1 ]; then
			sizes=""
			for f in index.html style.css app.js 100k.json; do
				p=/$f
				[ "$f" = index.html ] && p=/
				sizes="$sizes${sizes:+,}\"$p\":$(wc -c <"$R/$f.gz")"
			done
			run_driver "browser[precompressed]" 90 node "$NODE_DIR/browser.js" \
				"{\"name\":\"precompressed\",\"base\":\"$BASE\",\"out\":\"$OUT\",\"events\":false,\"gzSizes\":{$sizes}}"
		fi
	fi
fi

# --- the demo with --length-hiding: padded gzip headers --------------------------------
# The default codings: length hiding refuses zstd (the padding is gzip's),
# so a browser's Accept-Encoding gets gzip too.
if [ "$HAVE_CURL" = 1 ]; then
	if ! start padded --length-hiding 512; then
		fail "gzserve: --length-hiding 512 started" "$(tail -n 3 "$OUT/padded.log" | tr '\n' ' ')"
	else
		echo "# --length-hiding 512 on $BASE"
		for p in "${FIXED[@]}"; do
			f=$(refname "$p")
			what="curl: --length-hiding $p: a browser's Accept-Encoding gets gzip padded (FLG FCOMMENT), --compressed decodes to the identity bytes"
			"${CURL[@]}" -H 'Accept-Encoding: gzip, deflate, br, zstd' -D "$T/raw.h" -o "$T/raw" "$BASE$p"
			"${CURL[@]}" --compressed -o "$T/dec" "$BASE$p"
			flg=$(od -An -tx1 -j3 -N1 "$T/raw" | tr -d ' ')
			if [ "$(coding "$T/raw.h")" != gzip ] || [ "$flg" != 10 ]; then
				fail "$what" "Content-Encoding '$(coding "$T/raw.h")', FLG $flg"
			elif ! cmp -s "$T/dec" "$REF/$f"; then
				fail "$what" "$(wc -c <"$T/dec") decoded bytes differ from $REF/$f"
			else
				pass "$what"
			fi
		done
		[ "$HAVE_PY" = 1 ] && run_driver python 60 "$PYTHON" "$SRCDIR/interop/http_check.py" padded "$BASE" "$REF"
		if [ "$HAVE_BROWSER" = 1 ]; then
			run_driver "browser[padded]" 90 node "$NODE_DIR/browser.js" \
				"{\"name\":\"padded\",\"base\":\"$BASE\",\"out\":\"$OUT\",\"events\":true}"
		fi
	fi
fi
# --- the default codings, zstd and br ------------------------------------------
# The demo with its default codings (zstd, then gzip), then offering zstd
# first, br first, gzip alone: with every q-value 1 (curl's and Chromium's
# Accept-Encoding) the server's order picks the coding.
HAVE_FF=$HAVE_BROWSER
[ "$HAVE_BROWSER" = 1 ] && { have firefox "$FIREFOX" || HAVE_FF=0; }
for order in default zstd,br,gzip br,gzip gzip; do
	want=${order%%,*} tag=${order%%,*}
	args=(--codings "$order")
	[ "$order" = default ] && want=zstd tag=default args=()
	[ "$HAVE_CURL" = 1 ] || break
	if ! start "codings-$tag" "${args[@]}"; then
		fail "gzserve: --codings $order started" "$(tail -n 3 "$OUT/codings-$tag.log" | tr '\n' ' ')"
		continue
	fi
	echo "# demo --codings $order on $BASE"
	if [ "$order" = default ]; then
		# A browser's list gets zstd; "gzip" and "zstd;q=0.5, gzip" get
		# gzip; each decodes with the zstd or gzip tool to the identity
		# bytes.
		bad=""
		for c in 'zstd|gzip, deflate, br, zstd' 'gzip|gzip' 'gzip|zstd;q=0.5, gzip'; do
			"${CURL[@]}" -H "Accept-Encoding: ${c#*|}" -D "$T/d.h" -o "$T/d" "$BASE/100k.json"
			if [ "$(coding "$T/d.h")" != "${c%%|*}" ]; then
				bad="$bad '${c#*|}':coding=$(coding "$T/d.h")"
			elif ! { if [ "${c%%|*}" = zstd ]; then zstd -q -d -c "$T/d"; else gzip -d -c "$T/d"; fi; } |
				cmp -s - "$REF/100k.json"; then
				bad="$bad '${c#*|}':bytes"
			fi
		done
		if [ -z "$bad" ]; then
			pass "curl: default codings: a browser's Accept-Encoding gets zstd, gzip and zstd;q=0.5, gzip get gzip; zstd -d and gzip -d decode them"
		else
			fail "curl: default codings" "$bad"
		fi
	fi
	mkdir -p "$OUT/$tag"
	bad=""
	for p in "${FIXED[@]}"; do
		f=$(refname "$p")
		"${CURL[@]}" --compressed -D "$T/c.h" -o "$OUT/$tag/$f" "$BASE$p"
		if [ "$(coding "$T/c.h")" != "$want" ]; then
			bad="$bad $p:coding=$(coding "$T/c.h")"
		elif ! cmp -s "$OUT/$tag/$f" "$REF/$f"; then
			bad="$bad $p:bytes"
		fi
	done
	if [ -z "$bad" ]; then
		pass "curl[$tag]: --compressed gets $want for every fixed endpoint, decodes to the identity bytes"
	else
		fail "curl[$tag]: --compressed gets $want" "$bad"
	fi
	if [ "$HAVE_PY" = 1 ]; then
		run_driver python 30 "$PYTHON" "$SRCDIR/interop/codings_check.py" "$BASE" "$REF" "$want" "${FIXED[@]}"
	fi
	if [ "$HAVE_BROWSER" = 1 ]; then
		run_driver "browser[$tag]" 90 node "$NODE_DIR/browser.js" \
			"{\"name\":\"$tag\",\"base\":\"$BASE\",\"out\":\"$OUT\",\"events\":true,\"coding\":\"$want\"}"
	fi
	if [ "$HAVE_FF" = 1 ]; then
		run_driver "firefox[$tag]" 90 node "$NODE_DIR/firefox.js" \
			"{\"name\":\"$tag\",\"base\":\"$BASE\",\"coding\":\"$want\"}"
	fi
	kill "$PID" 2>/dev/null
done

# --- RFC 9842: headless Chromium and dcz ----------------------------------
# The demo's /dict/ page fetches /dict/app.v1.js (Use-As-Dictionary,
# max-age), then /dict/app.v2.js: Chromium 156 treats a loopback origin as
# secure, keeps v1 as a dictionary and asks for v2 with "dcb, dcz" and
# Available-Dictionary; v2 must arrive as dcz (the access log says so),
# decode, and run (appVersion 2). Chromium's own flags, no driver:
# --dump-dom after --virtual-time-budget lets the page's fetches finish;
# the request headers it sent are read from its --log-net-log.
if have chromium "$CHROMIUM"; then
	if start dcz --codings zstd,gzip; then
		timeout -k 5 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu \
			--user-data-dir="$T/dcz-profile" --virtual-time-budget=8000 \
			--log-net-log="$OUT/dcz-netlog.json" --dump-dom "$BASE/dict/" >"$OUT/dcz.dom" 2>"$T/dcz.err"
		if grep -Eq '^GET /dict/app\.v2\.js 200 [0-9]+ [0-9-]+ dcz ' "$OUT/dcz.log"; then
			pass "chromium: /dict/app.v2.js arrived as dcz (access log)"
		else
			fail "chromium: /dict/app.v2.js as dcz" "$(grep 'app.v2' "$OUT/dcz.log" | head -n 1)"
		fi
		if grep -q 'ran: appVersion 2' "$OUT/dcz.dom" && grep -q 'dict_hits 1,' "$OUT/dcz.dom"; then
			pass "chromium: v2 decoded and ran; /stats dict_hits 1 ($(grep -o 'app.v2.js: [^<]*wire' "$OUT/dcz.dom"))"
		else
			fail "chromium: v2 decoded and ran" "$(grep -A2 'id="out"' "$OUT/dcz.dom" | tr '\n' ' ')"
		fi
		if grep -q 'available-dictionary: :' "$OUT/dcz-netlog.json" &&
			grep -q 'Accept-Encoding: gzip, deflate, br, zstd, dcb, dcz' "$OUT/dcz-netlog.json"; then
			pass "chromium: sent Available-Dictionary and dcz in Accept-Encoding (net log)"
		else
			fail "chromium: request headers" "no Available-Dictionary in $OUT/dcz-netlog.json"
		fi
		kill "$PID" 2>/dev/null
	else
		fail "gzserve: dcz demo started" "$(tail -n 3 "$OUT/dcz.log" | tr '\n' ' ')"
	fi
fi

# --- RFC 9842 from --root: a dictionary over 8 MiB ----------------------------------
# --root with --dictionary FILE beneath it: FILE (lib.v1.js, 10 MB of
# script) advertises itself on its own response (Use-As-Dictionary,
# max-age); Chromium (tests/interop/dict_root.js, real time: it stores a
# dictionary asynchronously) fetches it, then lib.v2.js (the first 600 KB
# of v1 with a few edits: its matches lie 10 MB back, beyond an 8 MiB
# window, so only a frame that reaches the whole dictionary finds them)
# with Available-Dictionary and gets dcz (the access log too), which
# decodes and runs; the same dcz body decodes with zstd -D and
# python3-zstandard, and is under a tenth of v2's plain zstd.
if [ "$HAVE_CURL" = 1 ]; then
	RD=$OUT/dictroot
	rm -rf "$RD"
	mkdir -p "$RD"
	awk 'BEGIN { srand(9842); for (i = 0; i < 105000; i++) { s = ""; for (k = 0; k < 6; k++) s = s sprintf("%08x", int(rand() * 4294967296));
		printf "globalThis.f%d = function (x) { return x + \"%s\"; };\n", i, s } print "globalThis.appVersion = 1;" }' >"$RD/lib.v1.js"
	head -c 600000 "$RD/lib.v1.js" | sed '$d; s/return x + "\(00\)/return x - "\1/' >"$RD/lib.v2.js"
	echo 'globalThis.appVersion = 2;' >>"$RD/lib.v2.js"
	echo '<!doctype html><title>dcz from --root</title>' >"$RD/index.html"
	if start dictroot --root "$RD" --dictionary "$RD/lib.v1.js" --dictionary-match '/lib.*.js'; then
		if [ "$HAVE_BROWSER" = 1 ]; then
			run_driver "chromium[dictroot]" 60 node "$NODE_DIR/dict_root.js" "$BASE" "$(wc -c <"$RD/lib.v2.js")"
			if grep -Eq '^GET /lib\.v1\.js 200 [0-9]+ [0-9-]+ zstd ' "$OUT/dictroot.log" &&
				grep -Eq '^GET /lib\.v2\.js 200 [0-9]+ [0-9-]+ dcz ' "$OUT/dictroot.log"; then
				pass "chromium: --root: lib.v1.js (10 MB, the dictionary) as zstd, then lib.v2.js as dcz (access log)"
			else
				fail "chromium: --root: v1, then v2 as dcz" "$(grep 'GET /lib' "$OUT/dictroot.log" | tr '\n' ' ')"
			fi
		fi
		ad=$("$PYTHON" -c 'import base64, hashlib, sys; print(base64.b64encode(hashlib.sha256(open(sys.argv[1], "rb").read()).digest()).decode())' "$RD/lib.v1.js")
		"${CURL[@]}" -H 'Accept-Encoding: gzip, deflate, br, zstd, dcz' -H "Available-Dictionary: :$ad:" \
			-D "$T/dr.h" -o "$T/dr.dcz" "$BASE/lib.v2.js"
		"${CURL[@]}" -H 'Accept-Encoding: zstd' -o "$T/dr.zst" "$BASE/lib.v2.js"
		if [ "$(coding "$T/dr.h")" = dcz ] &&
			tail -c +41 "$T/dr.dcz" | zstd -q -d -D "$RD/lib.v1.js" | cmp -s - "$RD/lib.v2.js" &&
			[ $(($(wc -c <"$T/dr.dcz") * 10)) -lt "$(wc -c <"$T/dr.zst")" ]; then
			pass "curl: --root dcz of lib.v2.js decodes with zstd -D, $(wc -c <"$T/dr.dcz") bytes against zstd's $(wc -c <"$T/dr.zst")"
		else
			fail "curl: --root dcz of lib.v2.js" "coding '$(coding "$T/dr.h")', $(wc -c <"$T/dr.dcz") bytes, zstd $(wc -c <"$T/dr.zst")"
		fi
		if [ "$HAVE_PY" = 1 ] && "$PYTHON" -c '
import sys, zstandard
d = zstandard.ZstdCompressionDict(open(sys.argv[1], "rb").read(), dict_type=zstandard.DICT_TYPE_RAWCONTENT)
body = open(sys.argv[2], "rb").read()
sys.exit(zstandard.ZstdDecompressor(dict_data=d).decompress(body[40:]) != open(sys.argv[3], "rb").read())' \
			"$RD/lib.v1.js" "$T/dr.dcz" "$RD/lib.v2.js" 2>"$T/dr.py"; then
			pass "python: --root dcz of lib.v2.js decodes with zstandard and the 10 MB dictionary"
		else
			fail "python: --root dcz with zstandard" "$(tail -n 1 "$T/dr.py")"
		fi
		kill "$PID" 2>/dev/null
	else
		fail "gzserve: --root --dictionary started" "$(tail -n 3 "$OUT/dictroot.log" | tr '\n' ' ')"
	fi
fi

echo "# $((SECONDS - T_START)) s; logs, bodies and screenshots in $OUT"
echo "$NPASS passed, $NFAIL failed"
[ "$NFAIL" -eq 0 ]
