#!/bin/sh
# passthru.sh: make bench-passthru: what mhdgz costs a response it passes through, against plain libmicrohttpd (wrk, interleaved, ratios).
#
# Usage: bench/passthru.sh [PASSTHRU_BIN [OUTFILE]]
#   PASSTHRU_BIN  the bench/passthru server (default bench/passthru)
#   OUTFILE       also append the report there (bench/e2e.sh can pass its own)
# Environment (all optional):
#   PASSTHRU_ROUNDS          interleaved rounds (default 3)
#   PASSTHRU_DURATION        seconds per wrk run (default 2); 4 cases x 2
#                            servers per round, so ~50 s at the defaults
#   PASSTHRU_CONNECTIONS     wrk connections, keep-alive (default 32)
#   PASSTHRU_THREADS         wrk threads (default 2)
#   PASSTHRU_SERVER_THREADS  the servers' --threads (default 2)
#
# Starts the server twice, once --plain (libmicrohttpd alone) and once
# through mhdgz (default options), checks each case's response once (status,
# Content-Encoding, Vary), then in every round runs wrk against each case on
# both servers, one after the other (which goes first alternates per round),
# and prints per case the median requests/s of each, the median of the
# per-round ratios mhdgz/plain against its target (>= 0.97, /reused
# >= 0.95: bench/README.md), and each server's
# CPU time per request (user + system, from /proc):
#   /fresh   a 30 KiB JSON body built per request, a client without
#            Accept-Encoding                                  >= 0.97
#   /png     a per-request image/png (an excluded type), gzip client >= 0.97
#   /off     /fresh with compression turned off for the response, gzip
#            client                                           >= 0.97
#   /reused  one response reused for every request: through mhdgz its cached
#            gzip variant (gzip client), plain its identity   >= 0.95
# then the same figures as Go benchmark lines, one per round
# (BenchmarkE2E_Passthru_<case>/<mode>-N). Client and server share the
# machine: on 2 CPUs the figures measure the pair, and other work on a
# shared machine moves them; the per-round ratios cancel slow drift.
set -eu
. "$(dirname "$0")/benchlib.sh"

BIN=${1:-bench/passthru}
OUTFILE=${2:-}
ROUNDS=${PASSTHRU_ROUNDS:-3}
DURATION=${PASSTHRU_DURATION:-2}
CONNS=${PASSTHRU_CONNECTIONS:-32}
THREADS=${PASSTHRU_THREADS:-2}
SRV_THREADS=${PASSTHRU_SERVER_THREADS:-2}
CASES="fresh png off reused"

if ! command -v wrk >/dev/null 2>&1; then
	echo "bench-passthru: wrk is not installed (apt-get install wrk); skipped" >&2
	exit 0
fi
if [ ! -x "$BIN" ]; then
	echo "bench-passthru: $BIN not found; build it first (make bench/passthru)" >&2
	exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mhdgz-passthru.XXXXXX")
pid_plain=
pid_mhdgz=
cleanup() {
	bl_stop "$pid_plain"
	bl_stop "$pid_mhdgz"
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'cleanup; exit 1' HUP INT PIPE TERM

# start MODE ARGS...: the server on 127.0.0.1 port 0 (bl_start); sets
# pid_MODE and url_MODE.
start() {
	mode=$1
	shift
	bl_start "bench-passthru: $BIN $*" "$tmp/$mode.out" "$tmp/$mode.err" \
		"$BIN" --port 0 --threads "$SRV_THREADS" "$@"
	eval "pid_$mode=\$BL_PID url_$mode=\$BL_URL"
}

# The request header a case's client sends ("" for none).
case_header() {
	case $1 in
	fresh) echo "" ;;
	*) echo "Accept-Encoding: gzip" ;;
	esac
}

# wrk reports rounded totals; this script prints the exact ones.
bl_wrk_script "$tmp/report.lua" PT

# check MODE CASE WANT_CE WANT_VARY: one request with curl, its status,
# Content-Encoding and Vary as this benchmark needs them; the size of the
# response on the wire goes to $tmp/wire.MODE.CASE.
check() {
	eval "u=\$url_$1"
	h=$(case_header "$2")
	if [ -n "$h" ]; then
		set -- "$@" -H "$h"
	fi
	sz=$(curl -s -D "$tmp/hdr" -o /dev/null -w '%{http_code} %{size_header} %{size_download}' \
		${5:+"$5"} ${6:+"$6"} "$u/$2" 2>/dev/null || echo "0 0 0")
	code=${sz%% *}
	ce=$(sed -n 's/^[Cc]ontent-[Ee]ncoding: *\([^[:space:]]*\).*/\1/p' "$tmp/hdr")
	vary=$(sed -n 's/^[Vv]ary: *\([^[:space:]]*\).*/\1/p' "$tmp/hdr")
	if [ "$code" != 200 ] || [ "$ce" != "$3" ] || [ "$vary" != "$4" ]; then
		echo "bench-passthru: $1 /$2: status $code, Content-Encoding '$ce', Vary '$vary';" \
			"expected 200, '$3', '$4'" >&2
		exit 1
	fi
	rest=${sz#* }
	echo $((${rest% *} + ${rest#* })) >"$tmp/wire.$1.$2"
}

# The CPU time in clock ticks a process has used (user + system, all its
# threads; proc(5) fields 14 and 15).
cpu_ticks() {
	sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'
}

# run MODE CASE ROUND: one wrk run against one server (the other idles),
# with the server's CPU ticks around it; appends "CASE MODE ROUND req/s
# server-cpu-ns/request" to $tmp/rps and a Go benchmark line to $tmp/lines.
run() {
	eval "u=\$url_$1 p=\$pid_$1"
	h=$(case_header "$2")
	t0=$(cpu_ticks "$p")
	res=$(timeout $((DURATION + 20)) wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" \
		-s "$tmp/report.lua" ${h:+-H} ${h:+"$h"} "$u/$2" | sed -n 's/^PT //p')
	t1=$(cpu_ticks "$p")
	if [ -z "$res" ]; then
		echo "bench-passthru: wrk failed for $1 /$2" >&2
		exit 1
	fi
	# shellcheck disable=SC2086
	set -- "$1" "$2" "$3" $res
	nreq=$4 secs=$5 bytes=$6 errs=$7
	if [ "$errs" != 0 ]; then
		echo "bench-passthru: $1 /$2: $errs wrk errors" >&2
		exit 1
	fi
	rps=$(awk -v n="$nreq" -v s="$secs" 'BEGIN { printf "%.1f", n / s }')
	cpuns=$(awk -v n="$nreq" -v t=$((t1 - t0)) -v hz="$hz" \
		'BEGIN { printf "%.0f", n ? t * 1e9 / hz / n : 0 }')
	echo "$2 $1 $3 $rps $cpuns" >>"$tmp/rps"
	awk -v c="$2" -v m="$1" -v cpu="$ncpu" -v n="$nreq" -v s="$secs" -v b="$bytes" \
		-v w="$(cat "$tmp/wire.$1.$2")" -v cpuns="$cpuns" 'BEGIN {
		fmt = "BenchmarkE2E_Passthru_%s/%s-%s %10d %12.0f ns/op %10.2f MB/s %8d wire-B/op"
		printf fmt " %8d server-cpu-ns/op\n", c, m, cpu, n, n ? s * 1e9 / n : 0,
			b / s / 1e6, w, cpuns }' >>"$tmp/lines"
}

# summary: per case, the medians of each server's req/s and CPU per
# request, and of the per-round ratios mhdgz/plain (the verdict's figure).
summary() {
	bl_report "#  case     client                plain-req/s  mhdgz-req/s  ratio  target  verdict   per round  server CPU us/req: plain mhdgz"
	for c in $CASES; do
		case $c in
		fresh) client="no Accept-Encoding" target=0.97 ;;
		reused) client="Accept-Encoding:gzip" target=0.95 ;;
		*) client="Accept-Encoding:gzip" target=0.97 ;;
		esac
		line=$(awk -v c="$c" -v t="$target" -v cl="$client" '
			function median(a, n,    i, j, x) {
				for (i = 2; i <= n; i++)
					for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
						x = a[j]; a[j] = a[j - 1]; a[j - 1] = x
					}
				return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
			}
			$1 == c && $2 == "plain" { p[$3] = $4; pc[$3] = $5 }
			$1 == c && $2 == "mhdgz" { m[$3] = $4; mc[$3] = $5 }
			END {
				n = 0
				for (r = 1; (r in p); r++) {
					n++
					pv[n] = p[r]; mv[n] = m[r]; rv[n] = m[r] / p[r]
					pcv[n] = pc[r]; mcv[n] = mc[r]
					rs = rs sprintf("%s%.2f", n > 1 ? " " : "", m[r] / p[r])
				}
				ratio = median(rv, n)
				printf "  /%-7s %-20s %12.0f %12.0f %6.3f  >= %s  %-8s (%s)  %12.1f %6.1f\n",
					c, cl, median(pv, n), median(mv, n), ratio, t,
					(ratio >= t ? "met" : "not met"), rs, median(pcv, n) / 1000,
					median(mcv, n) / 1000
			}' "$tmp/rps")
		bl_report "$line"
	done
}

ncpu=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
: >"$tmp/rps"
: >"$tmp/lines"

start plain --plain
start mhdgz
# The wire each case must show (and the first gzip request of /reused
# builds mhdgz's cached variant, before anything is timed).
for c in $CASES; do
	check plain "$c" "" ""
done
check mhdgz fresh "" "Accept-Encoding"
check mhdgz png "" ""
check mhdgz off "" ""
check mhdgz reused gzip "Accept-Encoding"

bl_report "# bench-passthru: $BIN --threads $SRV_THREADS, --plain (libmicrohttpd alone) against mhdgz (default options)"
bl_report "# wrk -t$THREADS -c$CONNS -d${DURATION}s, keep-alive, one server at a time, $ROUNDS interleaved rounds; $(uname -m), $ncpu CPUs"
bl_report "# $(date -u '+%Y-%m-%d %H:%M UTC'); $(uptime | sed 's/^ *//')"
r=1
while [ "$r" -le "$ROUNDS" ]; do
	for c in $CASES; do
		if [ $((r % 2)) -eq 1 ]; then
			run plain "$c" "$r"
			run mhdgz "$c" "$r"
		else
			run mhdgz "$c" "$r"
			run plain "$c" "$r"
		fi
	done
	r=$((r + 1))
done

summary
bl_report "# ratio = median of the per-round ratios mhdgz/plain req/s; server CPU = the server process's user+system time per request (median)"
bl_report "# client and servers share the machine: on a shared 2-CPU machine the wall-time ratios are indicative (make bench-passthru-ir counts instructions)"
while IFS= read -r l; do bl_report "$l"; done <"$tmp/lines"
bl_report "# ns/op = wall time / requests at the run's connections; MB/s = bytes read by wrk; wire-B/op = one response as curl saw it"
bl_report "# $(uptime | sed 's/^ *//')"
