#!/bin/sh
# bench/compare.sh: make bench-compare: mhdgz's GzipHandler rows beside Go gziphandler's and gzhttp's own benchmarks and klauspost's zstd encoder, interleaved, as ratios.
#
# Usage: bench/compare.sh BENCH_HANDLER SRCDIR OUT_PREFIX
#
# Builds the BenchmarkGzipHandler_{S,P}{2k,20k,100k} test binaries of Go's
# github.com/NYTimes/gziphandler and github.com/klauspost/compress/gzhttp
# from the sources Debian packages install under /usr/share/gocode
# (golang-go, golang-github-nytimes-gziphandler-dev,
# golang-github-klauspost-compress-dev; GOPATH mode, nothing downloaded),
# and bench/compare/outbytes.go, which measures the gzip body each of the
# two serves; and bench/compare/kpzstd (kp-zstd): klauspost's zstd
# encoder at gzhttp's zstd setting (SpeedFastest) behind a handler of the
# same shape, for a client sending "Accept-Encoding: zstd". Then it runs
# ROUNDS rounds; each round runs the three Go binaries and BENCH_HANDLER
# (its GzipHandler rows, --count 1: every backend at its default level,
# zstd 1-6, br, and the default handler for a browser's and a gzip-only
# client) once each, in an order that rotates from round to round, on the
# same payload: gziphandler's own testdata/benchmark.json, sliced to
# 2048/20480/102400 bytes by all. Per round, each mhdgz row's ns/op is
# divided by gzhttp's, gziphandler's and kp-zstd's for the same
# benchmark; the table gives the medians of those per-round ratios (below
# 1: mhdgz takes less time), the median times, and the output bytes of
# each against gzhttp's gzip and kp-zstd's zstd.
#
# Writes OUT_PREFIX.txt (the table; also printed), OUT_PREFIX.raw (every
# benchmark line of every round), OUT_PREFIX.dat and, when gnuplot is
# installed, OUT_PREFIX.svg: time/op and output bytes per size for each
# contender (S rows).
#
# Environment: COMPARE_ROUNDS (default 5), COMPARE_BENCHTIME (Go's
# -test.benchtime and bench_handler's --benchtime, default 0.3s),
# COMPARE_FILTER (bench_handler rows, a regex; default the GzipHandler
# rows), GOCODE (default /usr/share/gocode).
set -eu

if [ $# -ne 3 ]; then
	echo "usage: $0 BENCH_HANDLER SRCDIR OUT_PREFIX" >&2
	exit 2
fi
BH=$1
SRCDIR=$2
OUT=$3
ROUNDS=${COMPARE_ROUNDS:-5}
BT=${COMPARE_BENCHTIME:-0.3s}
FILTER=${COMPARE_FILTER:-'^BenchmarkGzipHandler_[SP](2|20|100)k/'}
GOCODE=${GOCODE:-/usr/share/gocode}
GH=$GOCODE/src/github.com/NYTimes/gziphandler
KP=$GOCODE/src/github.com/klauspost/compress/gzhttp
KZ=$SRCDIR/bench/compare/kpzstd
PAYLOAD=$GH/testdata/benchmark.json

if ! command -v go >/dev/null || [ ! -f "$GH/gzip_test.go" ] || [ ! -f "$KP/compress_test.go" ] ||
	[ ! -f "$GOCODE/src/github.com/klauspost/compress/zstd/encoder.go" ]; then
	echo "bench-compare needs Go and the two handlers' sources from Debian:" >&2
	echo "  apt-get install golang-go golang-github-nytimes-gziphandler-dev golang-github-klauspost-compress-dev gnuplot-nox" >&2
	exit 2
fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export GO111MODULE=off GOPATH="$GOCODE" GOCACHE="$WORK/gocache" GOFLAGS=
echo "building the Go benchmarks (GOPATH=$GOCODE, $(go version | cut -d' ' -f3))" >&2
(cd "$GH" && go test -c -o "$WORK/gziphandler.test" .)
(cd "$KP" && go test -c -o "$WORK/gzhttp.test" .)
(cd "$KZ" && go test -c -o "$WORK/kpzstd.test" .)
go build -o "$WORK/outbytes" "$SRCDIR/bench/compare/outbytes.go"
"$WORK/outbytes" "$PAYLOAD" >"$WORK/outbytes.txt"

: >"$OUT.raw"
# One contender's benchmark lines, tagged "ROUND CONTENDER".
run_one() {
	round=$1
	who=$2
	case $who in
	gziphandler | gzhttp)
		dir=$GH
		[ "$who" = gzhttp ] && dir=$KP
		(cd "$dir" && "$WORK/$who.test" -test.run '^$' -test.bench '^BenchmarkGzipHandler_[SP](2|20|100)k$' \
			-test.benchmem -test.benchtime "$BT") |
			awk -v r="$round" -v w="$who" '/^BenchmarkGzipHandler_/ { print r, w, $0 }' >>"$OUT.raw"
		;;
	kpzstd)
		KPZSTD_PAYLOAD=$PAYLOAD "$WORK/kpzstd.test" -test.run '^$' \
			-test.bench '^BenchmarkGzipHandler_[SP](2|20|100)k$' -test.benchmem -test.benchtime "$BT" |
			awk -v r="$round" '/^BenchmarkGzipHandler_/ { print r, "kpzstd", $0 }' >>"$OUT.raw"
		;;
	mhdgz)
		"$BH" --payload "$PAYLOAD" --filter "$FILTER" --count 1 --benchtime "$BT" |
			awk -v r="$round" '/^BenchmarkGzipHandler_/ { print r, "mhdgz", $0 }' >>"$OUT.raw"
		;;
	esac
}

i=1
while [ "$i" -le "$ROUNDS" ]; do
	echo "round $i of $ROUNDS" >&2
	case $((i % 4)) in
	1) order="gziphandler gzhttp kpzstd mhdgz" ;;
	2) order="gzhttp kpzstd mhdgz gziphandler" ;;
	3) order="kpzstd mhdgz gziphandler gzhttp" ;;
	*) order="mhdgz gziphandler gzhttp kpzstd" ;;
	esac
	for who in $order; do
		run_one "$i" "$who"
	done
	i=$((i + 1))
done

{
	echo "# make bench-compare, $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -m), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
	echo "# payload: $PAYLOAD ($(wc -c <"$PAYLOAD") bytes), rounds: $ROUNDS, benchtime: $BT, $(go version | cut -d' ' -f3)"
	echo "# loadavg at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
	# shellcheck disable=SC2016 # awk program
	awk -v outbytes="$WORK/outbytes.txt" '
	function median(list, n,    a, i, j, t) {
		n = split(list, a, " ")
		for (i = 2; i <= n; i++)
			for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {
				t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
			}
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	function nsop(    k) {
		for (k = 4; k <= NF; k++)
			if ($(k + 1) == "ns/op")
				return $k
		return ""
	}
	BEGIN {
		while ((getline line < outbytes) > 0) {
			split(line, f, " ")
			ob[f[1] "," f[2]] = f[3]
		}
	}
	{
		round = $1; who = $2; name = $3
		sub(/-[0-9]+$/, "", name)             # GOMAXPROCS suffix
		sub(/^BenchmarkGzipHandler_/, "", name)
		bench = name; sub(/\/.*/, "", bench) # S2k ...
		row = who == "mhdgz" ? substr(name, length(bench) + 2) : who
		t = nsop()
		ns[round, bench, row] = t
		times[bench, row] = times[bench, row] " " t
		for (k = 4; k <= NF; k++)
			if ($(k + 1) == "out-B/op")
				ob[(who == "mhdgz" ? "mhdgz " row : who) "," bench] = $k
		if (who == "mhdgz")
			rows[row] = 1
		benches[bench] = 1
		if (round > nrounds) nrounds = round
	}
	END {
		split("S2k S20k S100k P2k P20k P100k", order, " ")
		size["2k"] = 2048; size["20k"] = 20480; size["100k"] = 102400
		# kp-zstd reports its own out-B/op; keyed by bytes as the others.
		for (s in size)
			if (("kpzstd,S" s) in ob)
				ob["kpzstd," size[s]] = ob["kpzstd,S" s] + 0
		printf "%-6s %-30s %10s %7s %9s %9s %9s %8s %8s\n", "bench", "contender", "ns/op", "out-B", "t/gzhttp", "t/gzhdlr", "t/kpzstd", "o/gzhttp", "o/kpzstd"
		for (o = 1; o <= 6; o++) {
			b = order[o]
			if (!(b in benches)) continue
			sz = substr(b, 2)
			for (c = 1; c <= 3; c++) {
				who = c == 1 ? "gziphandler" : c == 2 ? "gzhttp" : "kpzstd"
				printf "%-6s %-30s %10.0f %7s\n", b, who, median(times[b, who]), ob[who "," size[sz]]
			}
			for (row in rows) {
				r1 = ""; r2 = ""; r3 = ""
				for (r = 1; r <= nrounds; r++) {
					if ((r, b, row) in ns && ns[r, b, "gzhttp"] > 0)
						r1 = r1 " " ns[r, b, row] / ns[r, b, "gzhttp"]
					if ((r, b, row) in ns && ns[r, b, "gziphandler"] > 0)
						r2 = r2 " " ns[r, b, row] / ns[r, b, "gziphandler"]
					if ((r, b, row) in ns && ns[r, b, "kpzstd"] > 0)
						r3 = r3 " " ns[r, b, row] / ns[r, b, "kpzstd"]
				}
				out = ob["mhdgz " row "," b]
				kp = ob["gzhttp," size[sz]]
				kz = ob["kpzstd," size[sz]]
				printf "%-6s %-30s %10.0f %7s %8.2fx %8.2fx %8.2fx %+7.1f%% %+7.1f%%\n", b, "mhdgz " row, median(times[b, row]), out, median(r1), median(r2), r3 == "" ? 0 : median(r3), kp ? 100 * (out - kp) / kp : 0, kz ? 100 * (out - kz) / kz : 0
				dat = dat sprintf("%s %s %.0f %s\n", b, "mhdgz_" row, median(times[b, row]), out)
			}
			for (c = 1; c <= 3; c++) {
				who = c == 1 ? "gziphandler" : c == 2 ? "gzhttp" : "kpzstd"
				dat = dat sprintf("%s %s %.0f %s\n", b, who, median(times[b, who]), ob[who "," size[sz]])
			}
		}
		printf "%s", dat > "/dev/stderr"
	}' "$OUT.raw" 2>"$OUT.dat"
} | tee "$OUT.txt"

if command -v gnuplot >/dev/null; then
	# S rows: time/op and output bytes per size, one line per contender.
	awk '$1 ~ /^S/ { sub(/^S/, "", $1); print $2, $1, $3 / 1000, $4 }' "$OUT.dat" | sort -k1,1 -s >"$WORK/plot.dat"
	gnuplot <<EOF
set terminal svg size 900,420 font "sans,11" noenhanced
set output "$OUT.svg"
set multiplot layout 1,2 title "GzipHandler S rows, benchmark.json sliced (make bench-compare, medians of $ROUNDS rounds)"
set xtics ("2k" 0, "20k" 1, "100k" 2)
set xrange [-0.3:2.3]
set key top left
set ylabel "time/op, microseconds"
set logscale y
plot for [w in "$(cut -d' ' -f1 "$WORK/plot.dat" | uniq | tr '\n' ' ')"] \
	"< awk -v w=" . w . " '\$1 == w { print (\$2 == \"2k\" ? 0 : \$2 == \"20k\" ? 1 : 2), \$3 }' $WORK/plot.dat" \
	using 1:2 with linespoints title w
unset logscale y
set ylabel "output bytes / input bytes, %"
plot for [w in "$(cut -d' ' -f1 "$WORK/plot.dat" | uniq | tr '\n' ' ')"] \
	"< awk -v w=" . w . " '\$1 == w { s = (\$2 == \"2k\" ? 2048 : \$2 == \"20k\" ? 20480 : 102400); print (\$2 == \"2k\" ? 0 : \$2 == \"20k\" ? 1 : 2), 100 * \$4 / s }' $WORK/plot.dat" \
	using 1:2 with linespoints title w
unset multiplot
EOF
	echo "chart: $OUT.svg" >&2
fi
