#!/bin/sh
# fileprof.sh: gzserve --root per-request cost, load-independent: system calls (strace -c -f) and instructions (callgrind) per request.
#
# Usage: bench/fileprof.sh [GZSERVE [SIZE [ARGS...]]]
#   GZSERVE  the gzserve binary (default examples/gzserve/gzserve)
#   SIZE     2k, 20k or 100k: the payload file requested (default 2k)
#   ARGS     gzserve options (default --no-compress)
# Environment: PROF_HEADER, a request header (e.g. 'Accept-Encoding: gzip').
#
# Runs gzserve --root over the payload file, sends N1 and then N2
# keep-alive GETs from one curl on one connection, under each tool, and
# prints (count(N2) - count(N1)) / (N2 - N1): the per-request cost with
# start-up, shutdown and connection setup subtracted. Wall times move with
# the machine's load; these counts do not (callgrind's instruction counts
# are not time: cache misses and system call latency are not in them).
set -eu

GZSERVE=${1:-examples/gzserve/gzserve}
SIZE=${2:-2k}
[ $# -ge 2 ] && shift 2 || shift $#
[ $# -gt 0 ] || set -- --no-compress
N1=${PROF_N1:-100}
N2=${PROF_N2:-600}
HDR=${PROF_HEADER:-X-Prof: 1}
# A libtool wrapper script is run through libtool, so valgrind sees the
# program itself (run from the build directory).
LTEXEC=
[ -x ./libtool ] && LTEXEC="./libtool --mode=execute"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mhdgz-prof.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
[ -n "${PROF_KEEP:-}" ] && trap - EXIT
mkdir "$tmp/root"

# wait_url FILE: the URL gzserve prints on its first line.
wait_url() {
	i=0
	while [ $i -lt 300 ]; do
		u=$(sed -n 's|^listening on \(http://[^ ]*/\)$|\1|p' "$1" 2>/dev/null | head -n 1)
		[ -n "$u" ] && { echo "$u"; return 0; }
		sleep 0.1
		i=$((i + 1))
	done
	echo "fileprof: gzserve did not start" >&2
	exit 1
}

# The payload, from the demo (the same bytes as make bench-e2e).
"$GZSERVE" --port 0 --quiet >"$tmp/demo.out" 2>&1 &
dpid=$!
url=$(wait_url "$tmp/demo.out")
curl -s -o "$tmp/root/$SIZE.json" "${url}$SIZE.json"
kill -TERM $dpid
wait $dpid || :
# The file cache (--cache-size) keeps a file's coded body only once the
# file is 2 s old.
sleep 2

# run TOOL N: gzserve under TOOL, N requests; prints the tool's count.
run() {
	: >"$tmp/out"
	t=$1
	shift
	case $t in
	strace) strace -f -c -o "$tmp/tool" "$GZSERVE" --port 0 --quiet --threads 1 \
			--root "$tmp/root" "$@" >"$tmp/out" 2>&1 & ;;
	callgrind) $LTEXEC valgrind --tool=callgrind --callgrind-out-file=/dev/null \
			"$GZSERVE" --port 0 --quiet --threads 1 --root "$tmp/root" "$@" \
			>"$tmp/out" 2>"$tmp/tool" & ;;
	esac
}
count() { # TOOL N [ARGS] -> count
	tool=$1
	n=$2
	shift 2
	run "$tool" "$@"
	spid=$!
	url=$(wait_url "$tmp/out")
	i=0
	: >"$tmp/curlcfg"
	while [ $i -lt "$n" ]; do
		printf 'url = "%s%s.json"\noutput = "/dev/null"\n' "$url" "$SIZE" >>"$tmp/curlcfg"
		i=$((i + 1))
	done
	curl -s -H "$HDR" -K "$tmp/curlcfg"
	# The server's pid is the tool's child; SIGTERM the tool's process
	# group member that is gzserve.
	gpid=$(pgrep -P $spid -f gzserve || echo $spid)
	kill -TERM "$gpid" 2>/dev/null || :
	wait $spid || :
	case $tool in
	strace) awk '$NF == "total" { print $(NF - 2) }' "$tmp/tool" ;;
	callgrind) sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$tmp/tool" ;;
	esac
}

for tool in strace callgrind; do
	command -v "$([ $tool = strace ] && echo strace || echo valgrind)" >/dev/null 2>&1 || continue
	a=$(count $tool "$N1" "$@")
	b=$(count $tool "$N2" "$@")
	echo "$tool $SIZE $*: $(awk -v a="$a" -v b="$b" -v n=$((N2 - N1)) \
		'BEGIN { printf "%.1f", (b - a) / n }') per request"
done
