#!/bin/sh
# e2e.sh: make bench-e2e: gzserve on 127.0.0.1 (port 0) driven by wrk, gzip and identity.
#
# Usage: bench/e2e.sh [GZSERVE [OUTFILE]]
#   GZSERVE   the gzserve binary (default examples/gzserve/gzserve)
#   OUTFILE   also write the report there
# Environment (all optional):
#   E2E_DURATION     seconds per case (default 3); 12 cases, so ~45 s in all
#   E2E_CONNECTIONS  wrk connections, keep-alive (default 16)
#   E2E_THREADS      wrk threads (default 1; the server gets the rest)
#   E2E_SERVER_ARGS  extra gzserve options, e.g. '--backend zlib --level 6'
#
# For each of /2k.json /20k.json /100k.json, with and without
# "Accept-Encoding: gzip", prints requests/s (wrk), the bytes of one
# response on the wire (status line, headers, body with chunked framing;
# measured with curl) and its body size,
# plus the same figures as Go benchmark lines. Two servers, one after the
# other:
#   demo   gzserve's built-in demo keeps one response per path, so after the
#          first request every gzip response is the cached variant: the
#          server as it serves static content, compression not included;
#   files  gzserve --root over the same three files written to a temporary
#          directory: a file response per request, compressed per request
#          (as a stream; with libdeflate, gzserve streams with zlib, see
#          mhdgz.h "Streaming"), so compression is in every gzip request.
# Client and server share the machine: on 2 CPUs the figures measure the
# pair, not the server alone.
set -eu

GZSERVE=${1:-examples/gzserve/gzserve}
OUTFILE=${2:-}
DURATION=${E2E_DURATION:-3}
CONNS=${E2E_CONNECTIONS:-16}
THREADS=${E2E_THREADS:-1}
SERVER_ARGS=${E2E_SERVER_ARGS:-}

if ! command -v wrk >/dev/null 2>&1; then
	echo "bench-e2e: wrk is not installed (apt-get install wrk); skipped" >&2
	exit 0
fi
if [ ! -x "$GZSERVE" ]; then
	echo "bench-e2e: $GZSERVE not found; build it first (make examples/gzserve/gzserve)" >&2
	exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mhdgz-e2e.XXXXXX")
pid=
cleanup_server() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || :
		# gzserve lets requests in flight finish; bound the wait.
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		kill -KILL "$pid" 2>/dev/null || :
	fi
}
cleanup() {
	cleanup_server
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

# start_server ARGS...: start gzserve, wait (at most 10 s) for its
# "listening on http://127.0.0.1:PORT/" line; sets pid and url.
start_server() {
	: >"$tmp/server.out"
	"$GZSERVE" --bind 127.0.0.1 --port 0 --quiet "$@" >"$tmp/server.out" 2>"$tmp/server.err" &
	pid=$!
	url=
	i=0
	while [ $i -lt 100 ]; do
		url=$(sed -n 's|^listening on \(http://[^ ]*/\)$|\1|p' "$tmp/server.out" | head -n 1)
		[ -n "$url" ] && break
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "bench-e2e: gzserve exited:" >&2
			cat "$tmp/server.err" >&2
			exit 1
		fi
		sleep 0.1
		i=$((i + 1))
	done
	if [ -z "$url" ]; then
		echo "bench-e2e: gzserve did not report its address within 10 s" >&2
		exit 1
	fi
	url=${url%/}
}

stop_server() {
	cleanup_server
	pid=
}

# wrk reports rounded totals; this script prints the exact ones.
cat >"$tmp/report.lua" <<'EOF'
done = function(summary, latency, requests)
	local secs = summary.duration / 1e6
	local errs = summary.errors.connect + summary.errors.read + summary.errors.write
		+ summary.errors.status + summary.errors.timeout
	io.write(string.format("E2E %d %.6f %d %d %d\n", summary.requests, secs,
		summary.bytes, errs, latency:percentile(50)))
end
EOF

report() {
	if [ -n "$OUTFILE" ]; then
		printf '%s\n' "$*" | tee -a "$OUTFILE"
	else
		printf '%s\n' "$*"
	fi
}

# run_cases KIND: the six cases against $url.
run_cases() {
	kind=$1
	report "# $1: gzserve $SERVER_ARGS ${2:-} at $url"
	report "# wrk -t$THREADS -c$CONNS -d${DURATION}s, keep-alive"
	report "# $(uptime | sed 's/^ *//')"
	report "# path        coding      req/s    wire-B/req    body-B   p50-latency-us  errors"
	for size in 2k 20k 100k; do
		for coding in gzip identity; do
			if [ "$coding" = gzip ]; then
				set -- -H "Accept-Encoding: gzip"
			else
				set --
			fi
			# One response's size: on the wire (status line and headers,
			# plus the body with any chunked framing, kept by --raw) and
			# its body. wrk's own byte count cannot give this: it includes
			# the responses still in flight when the run stops.
			sz=$(curl -s --raw -o "$tmp/one" -w '%{size_header} %{size_download}' "$@" \
				"$url/$size.json" 2>/dev/null || echo "0 0")
			body=${sz#* }
			wire=$(( ${sz% *} + $(wc -c <"$tmp/one") ))
			res=$(timeout $((DURATION + 20)) wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" \
				-s "$tmp/report.lua" "$@" "$url/$size.json" | sed -n 's/^E2E //p')
			if [ -z "$res" ]; then
				echo "bench-e2e: wrk failed for /$size.json ($coding)" >&2
				exit 1
			fi
			# shellcheck disable=SC2086
			set -- $res
			nreq=$1 secs=$2 bytes=$3 errs=$4 p50=$5
			rps=$(awk -v n="$nreq" -v s="$secs" 'BEGIN { printf "%.1f", n / s }')
			bpr=$wire
			nsop=$(awk -v n="$nreq" -v s="$secs" 'BEGIN { printf "%.0f", n ? s * 1e9 / n : 0 }')
			# MB/s: wrk's bytes read per second (as wrk counts them).
			mbs=$(awk -v b="$bytes" -v s="$secs" 'BEGIN { printf "%.2f", b / s / 1e6 }')
			report "$(printf '  /%-9s %-9s %9s %12s %9s %15s %7s' "$size.json" "$coding" \
				"$rps" "$bpr" "$body" "$p50" "$errs")"
			fmt='BenchmarkE2E_%s/%s/%s-%s %10s %12s ns/op %10s MB/s'
			fmt="$fmt %10s wire-B/op %10s body-B/op"
			# shellcheck disable=SC2059 # the format is ours
			lines="$lines$(printf "$fmt" "$size" "$kind" "$coding" "$ncpu" "$nreq" \
				"$nsop" "$mbs" "$bpr" "$body")
"
		done
	done
}

[ -n "$OUTFILE" ] && : >"$OUTFILE"
ncpu=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
lines=

# shellcheck disable=SC2086 # SERVER_ARGS is a list of words on purpose
start_server $SERVER_ARGS
run_cases demo "(built-in demo, cached responses)"
# The same three bodies as files, for the per-request compression run.
mkdir "$tmp/root"
for size in 2k 20k 100k; do
	curl -s -o "$tmp/root/$size.json" "$url/$size.json"
done
stop_server

# shellcheck disable=SC2086
start_server $SERVER_ARGS --root "$tmp/root"
run_cases files "--root (file responses, compressed per request)"
stop_server

report "# ns/op = wall time / requests at $CONNS connections; MB/s = bytes read by wrk"
printf '%s' "$lines" | while IFS= read -r l; do report "$l"; done
