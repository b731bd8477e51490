#!/bin/sh
# ircount.sh: instructions per op of the GzipHandler and Raw S rows (callgrind, load-independent).
#
# Usage: bench/ircount.sh [BENCH_HANDLER]   (default bench/bench_handler)
#
# Wall and CPU times move with whatever else the machine runs; instruction
# counts do not. For each backend at its default level and each size this
# runs the GzipHandler and Raw S rows under valgrind's callgrind, counting
# only the timed loop (--toggle-collect=worker_run), and prints instructions
# per op and the handler's share over the raw compress call. Caveats:
# instructions are not time (cache misses and memory bandwidth are not in
# them), and callgrind counts each iteration of a "rep stos/movs" string
# instruction, so large memset/memcpy (zlib's 64 KiB hash clear) weigh more
# than they cost. About a minute.
set -eu

BIN=${1:-bench/bench_handler}
command -v valgrind >/dev/null 2>&1 || {
	echo "ircount: valgrind is not installed" >&2
	exit 0
}
tmp=$(mktemp "${TMPDIR:-/tmp}/mhdgz-ir.XXXXXX")
trap 'rm -f "$tmp"' EXIT

ir_per_op() { # NAME N -> instructions per op
	valgrind --tool=callgrind --toggle-collect=worker_run --callgrind-out-file=/dev/null \
		"$BIN" --benchtime "$2x" --filter "^$1\$" >/dev/null 2>"$tmp"
	sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$tmp" | awk -v n="$2" '{ printf "%.0f", $1 / n }'
}

# Each backend at its default level, as the program's header states it
# ("default-levels: libdeflate=6 isal=2 zlib=6"), from one quick run.
cfgs=$("$BIN" --benchtime 1x --filter '^BenchmarkRaw_S2k/' 2>/dev/null |
	sed -n 's/^default-levels: //p' | tr ' ' '\n' | sed 's|=|/level=|')
[ -n "$cfgs" ] || {
	echo "ircount: $BIN printed no default-levels line" >&2
	exit 1
}

printf '# %-34s %12s %12s %9s\n' "row" "handler" "raw" "overhead"
for cfg in $cfgs; do
	for size in 2k 20k 100k; do
		case $size in 2k) n=200 ;; 20k) n=40 ;; *) n=10 ;; esac
		h=$(ir_per_op "BenchmarkGzipHandler_S$size/$cfg" $n)
		r=$(ir_per_op "BenchmarkRaw_S$size/$cfg" $n)
		[ -n "$h" ] && [ -n "$r" ] || continue
		printf '  %-34s %12s %12s %8s%%\n' "S$size/$cfg" "$h" "$r" \
			"$(awk -v h="$h" -v r="$r" 'BEGIN { printf "%+.1f", (h / r - 1) * 100 }')"
	done
done
echo "# instructions per op (callgrind, timed loop only)"
