#!/bin/sh
# passthru_ir.sh: make bench-passthru-ir: instructions per request of bench/passthru, plain and through mhdgz (callgrind, load-independent).
#
# Usage: bench/passthru_ir.sh [PASSTHRU_BIN]   (default bench/passthru)
# Environment: PROF_N1, PROF_N2 (default 100 and 600 requests).
#
# For each case of make bench-passthru (/fresh without Accept-Encoding,
# /png, /off and /reused with "Accept-Encoding: gzip") and each server
# (--plain, mhdgz), runs the server with one thread under valgrind's
# callgrind, sends N1 and then N2 keep-alive GETs from one curl on one
# connection, and prints (count(N2) - count(N1)) / (N2 - N1): the
# instructions per request with start-up, shutdown and the connection
# subtracted, and mhdgz's extra over plain. Instructions are not time
# (system calls, the kernel's copies and cache misses are not in them, and
# callgrind counts every iteration of "rep movs/stos", so libmicrohttpd's
# zeroing of its connection memory weighs more than it costs), but they do
# not move with the machine's load. About two minutes.
set -eu

BIN=${1:-bench/passthru}
N1=${PROF_N1:-100}
N2=${PROF_N2:-600}
command -v valgrind >/dev/null 2>&1 || {
	echo "passthru-ir: valgrind is not installed" >&2
	exit 0
}
# A libtool wrapper script is run through libtool, so valgrind sees the
# program itself (run from the build directory).
LTEXEC=
[ -x ./libtool ] && LTEXEC="./libtool --mode=execute"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mhdgz-ptir.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# count CASE N [--plain]: instructions of a server run serving N requests.
count() {
	c=$1
	n=$2
	shift 2
	hdr="Accept-Encoding: gzip"
	[ "$c" = fresh ] && hdr="X-Prof: 1"
	: >"$tmp/out"
	$LTEXEC valgrind --tool=callgrind --callgrind-out-file=/dev/null "$BIN" --threads 1 "$@" \
		>"$tmp/out" 2>"$tmp/tool" &
	spid=$!
	i=0
	url=
	while [ $i -lt 600 ]; do
		url=$(sed -n 's|^listening on \(http://[^ ]*/\)$|\1|p' "$tmp/out" | head -n 1)
		[ -n "$url" ] && break
		sleep 0.1
		i=$((i + 1))
	done
	if [ -z "$url" ]; then
		echo "passthru-ir: $BIN did not start under valgrind" >&2
		kill -TERM $spid 2>/dev/null || :
		exit 1
	fi
	i=0
	: >"$tmp/curlcfg"
	while [ $i -lt "$n" ]; do
		printf 'url = "%s%s"\noutput = "/dev/null"\n' "$url" "$c" >>"$tmp/curlcfg"
		i=$((i + 1))
	done
	curl -s -H "$hdr" -K "$tmp/curlcfg" || : # the count below shows a failure
	kill -TERM $spid
	i=0
	while kill -0 $spid 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -KILL $spid 2>/dev/null || : # then no count: reported below
	wait $spid || :
	sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$tmp/tool"
}

per_request() { # CASE [--plain]
	a=$(count "$1" "$N1" ${2:+"$2"})
	b=$(count "$1" "$N2" ${2:+"$2"})
	if [ -z "$a" ] || [ -z "$b" ]; then
		echo "passthru-ir: no instruction count for /$1 ${2:-}" >&2
		exit 1
	fi
	awk -v a="$a" -v b="$b" -v n=$((N2 - N1)) 'BEGIN { printf "%.0f", (b - a) / n }'
}

printf '# %-8s %12s %12s %10s\n' case plain mhdgz extra
for c in fresh png off reused; do
	p=$(per_request "$c" --plain)
	m=$(per_request "$c")
	printf '  /%-8s %11s %12s %+10d (%+.1f %%)\n' "$c" "$p" "$m" $((m - p)) \
		"$(awk -v p="$p" -v m="$m" 'BEGIN { print (m / p - 1) * 100 }')"
done
echo "# instructions per request (callgrind, server --threads 1, $N1 and $N2 keep-alive requests)"
