#!/bin/sh
# verdict.sh: the comparisons and the performance targets, computed from bench_handler's output (make bench runs it).
#
# Usage: bench/verdict.sh [FILE]   (default: standard input)
#
# bench_handler prints measurements only: the header ("key: value" lines,
# Go's configuration format), one Benchmark line per row with the medians
# (ns/op, MB/s, out-B/op, B/op, allocs/op, cpu-ns/op, mhdgz-allocs/op,
# mhdgz-B/op) and the load average at the end. This script reads those
# lines and prints:
#
#  - a summary of the GzipHandler S rows, each backend against zlib at the
#    same level (ISA-L against zlib level 1), by wall time, CPU time and
#    compressed size;
#  - PASS / FAIL / INCONCLUSIVE / SKIP lines for the targets (handler
#    overhead over the raw call; allocations per op, process-wide and
#    mhdgz's own; P/S scaling; libdeflate-6 against zlib-6) and INFO lines
#    (the small-window zlib proposal, the compressor pool, the cache).
#
# Ratios use wall time, as the rows do; the CPU-time ratio follows in
# brackets, because on a machine with other work the wall times of two rows
# measured at different moments are disturbed differently. P/S is judged
# only when independent raw compressors on their own threads scaled too.
# The exit status is 0 whatever the verdicts (one target, 3 allocations per
# op process-wide, is out of reach with libmicrohttpd 0.9.75; see
# bench/README.md), 1 if the input has no Benchmark line. Rerun it on any
# file in bench/results/.
set -eu

[ $# -le 1 ] || {
	echo "usage: verdict.sh [FILE]" >&2
	exit 2
}

awk '
function key(kind, be, level, size, threads) {
	return kind SUBSEP be SUBSEP level SUBSEP size SUBSEP threads
}
function has(k) { return (k SUBSEP "ns/op") in m }
function v(k, unit) { return m[k SUBSEP unit] + 0 }
# x/ref, 0 if ref is 0 (a column missing from an older output file).
function div(x, ref) { return ref ? x / ref : 0 }
# "+12.3% (1.14x slower)" for the ratio x/ref.
function rel(x, ref,    r) {
	if (!ref)
		return "-"
	r = x / ref
	return sprintf("%+.1f%% (%.2fx %s)", (r - 1) * 100, r < 1 ? 1 / r : r,
		r < 1 ? "faster" : "slower")
}
function check(ok, text) {
	printf "%s %s\n", ok ? "PASS" : "FAIL", text
	if (ok)
		npass++
	else
		nfail++
}

/^default-backend: / { dflt = $2 }
/^default-levels: / {
	for (i = 2; i <= NF; i++) {
		split($i, kv, "=")
		nbe++
		be_name[nbe] = kv[1]
		be_level[kv[1]] = kv[2]
	}
}
/^ncpu: / { ncpu = $2 + 0 }
/^smallwindow-[0-9a-z]*: / {
	s = $1
	sub(/^smallwindow-/, "", s)
	sub(/:$/, "", s)
	split($2, a, "=")
	sw_wbits[s] = a[2]
	split($3, a, "=")
	sw_memlevel[s] = a[2]
}
/^# loadavg at the end: / { have_load = 1; load_end = $6 + 0 }
/^Benchmark/ {
	# BenchmarkKIND_{S,P}SIZE/BACKEND/level=L-N
	name = $1
	threads = name
	sub(/.*-/, "", threads)
	sub(/-[0-9]+$/, "", name)
	split(name, part, "/")
	kind = part[1]
	sub(/^Benchmark/, "", kind)
	size = kind
	sub(/_.*/, "", kind)
	sub(/^[^_]*_/, "", size)
	sp = substr(size, 1, 1)
	size = substr(size, 2)
	be = part[2]
	level = part[3]
	sub(/^level=/, "", level)
	if (sp == "S")
		threads = 0
	else
		pthreads[threads] = 1
	k = key(kind, be, level, size, threads)
	for (i = 3; i < NF; i += 2)
		m[k SUBSEP $(i + 1)] = $i
	nrows++
	row_key[nrows] = k
	row_kind[nrows] = kind
	row_be[nrows] = be
	row_level[nrows] = level
	row_size[nrows] = size
	row_threads[nrows] = threads
}

END {
	if (nrows == 0) {
		print "verdict: no Benchmark line in the input" > "/dev/stderr"
		exit 1
	}
	if (nbe == 0 || ncpu == 0)
		print "verdict: no default-levels or ncpu line (an older bench_handler?): " \
			"the per-backend targets are left out" > "/dev/stderr"
	nsz = split("2k 20k 100k", sizes, " ")
	split("25 10 10", limit, " ")

	print ""
	print "# Summary: GzipHandler S rows (medians), each backend against zlib at the"
	print "# same level (ISA-L\047s levels 1-4 against zlib level 1). Wall time as in the"
	print "# rows, CPU time of the process per op (less disturbed by other load), and"
	print "# the compressed size; negative = faster / smaller."
	printf "# %-4s %-5s %-10s %10s %-22s %10s %-22s %7s %s\n", "size", "level", "backend",
		"ns/op", "wall vs zlib", "cpu-ns/op", "cpu vs zlib", "out-B", "size vs zlib"
	for (s = 1; s <= nsz; s++) {
		for (i = 1; i <= nrows; i++) {
			if (row_kind[i] != "GzipHandler" || row_threads[i] != 0 ||
			    row_size[i] != sizes[s])
				continue
			c = row_key[i]
			zl = row_be[i] == "isal" ? 1 : row_level[i]
			z = key("GzipHandler", "zlib", zl, sizes[s], 0)
			if (!has(z) || z == c) {
				printf "# %-4s %-5d %-10s %10.0f %-22s %10.0f %-22s %7.0f %s\n",
					sizes[s], row_level[i], row_be[i], v(c, "ns/op"),
					has(z) ? "(reference)" : "(no zlib row)", v(c, "cpu-ns/op"), "",
					v(c, "out-B/op"), ""
				continue
			}
			printf "# %-4s %-5d %-10s %10.0f %-22s %10.0f %-22s %7.0f %+.1f%%%s\n",
				sizes[s], row_level[i], row_be[i], v(c, "ns/op"),
				rel(v(c, "ns/op"), v(z, "ns/op")), v(c, "cpu-ns/op"),
				rel(v(c, "cpu-ns/op"), v(z, "cpu-ns/op")), v(c, "out-B/op"),
				(v(c, "out-B/op") / v(z, "out-B/op") - 1) * 100,
				zl != row_level[i] ? " (vs zlib-1)" : ""
		}
	}

	# The P thread count the P/S target uses: 2 if measured, else the largest.
	pt = 0
	for (t in pthreads)
		if (t + 0 > pt)
			pt = t + 0
	if (2 in pthreads)
		pt = 2

	print ""
	print "# Targets, from this run (medians; S rows unless stated):"
	if (have_load && ncpu > 0 && load_end > 0.5 * ncpu)
		printf "# note: load average %.1f on %d CPUs: other processes competed for the\n" \
			"# CPUs, so wall-time figures (and P/S above all) are disturbed; see the\n" \
			"# CPU-time ratios.\n", load_end, ncpu

	# 1. Handler overhead over the raw compress call, each default level.
	for (b = 1; b <= nbe; b++) {
		be = be_name[b]
		l = be_level[be]
		for (s = 1; s <= nsz; s++) {
			h = key("GzipHandler", be, l, sizes[s], 0)
			r = key("Raw", be, l, sizes[s], 0)
			if (!has(h) || !has(r))
				continue
			over = (v(h, "ns/op") / v(r, "ns/op") - 1) * 100
			check(over <= limit[s] + 0,
				sprintf("handler-overhead %s/level=%d %s: %+.1f%% over raw " \
					"(%.0f vs %.0f ns/op; CPU time %+.1f%%; limit %+.0f%%)",
					be, l, sizes[s], over, v(h, "ns/op"), v(r, "ns/op"),
					(div(v(h, "cpu-ns/op"), v(r, "cpu-ns/op")) - 1) * 100, limit[s]))
		}
	}
	# 2. Allocations per op, process-wide, and the share through mhdgz.
	for (b = 1; b <= nbe; b++) {
		be = be_name[b]
		l = be_level[be]
		for (s = 1; s <= nsz; s++) {
			h = key("GzipHandler", be, l, sizes[s], 0)
			if (!has(h))
				continue
			check(v(h, "allocs/op") <= 3,
				sprintf("allocs/op %s/level=%d %s: %.1f process-wide = " \
					"%.1f mhdgz (%.0f B) + %.1f libmicrohttpd (limit 3)",
					be, l, sizes[s], v(h, "allocs/op"), v(h, "mhdgz-allocs/op"),
					v(h, "mhdgz-B/op"), v(h, "allocs/op") - v(h, "mhdgz-allocs/op")))
		}
	}
	# 2b. What mhdgz itself allocates (the part this library controls).
	for (b = 1; b <= nbe; b++) {
		be = be_name[b]
		l = be_level[be]
		h = key("GzipHandler", be, l, sizes[1], 0)
		if (!has(h))
			continue
		check(v(h, "mhdgz-allocs/op") <= 3,
			sprintf("allocs/op by mhdgz itself %s/level=%d: %.1f (the gzip " \
				"variant\047s entry and body; limit 3)", be, l, v(h, "mhdgz-allocs/op")))
	}
	# 3. P/S on 2 CPUs at 20k and 100k.
	for (b = 1; b <= nbe && pt > 0; b++) {
		be = be_name[b]
		l = be_level[be]
		for (s = 2; s <= nsz; s++) {
			h = key("GzipHandler", be, l, sizes[s], 0)
			p = key("GzipHandler", be, l, sizes[s], pt)
			if (!has(h) || !has(p))
				continue
			if (pt < 2 || ncpu < 2) {
				printf "SKIP P/S %s %s: needs 2 CPUs and --cpu 2\n", be, sizes[s]
				nskip++
				continue
			}
			r = key("Raw", be, l, sizes[s], pt)
			z = key("Raw", be, l, sizes[s], 0)
			ps = v(p, "ns/op") / v(h, "ns/op")
			# If independent compressors on their own threads do not scale
			# either, the CPUs were not free: the run cannot tell whether
			# the handler serialises.
			if (ps > 0.6 && has(r) && has(z) && v(r, "ns/op") / v(z, "ns/op") > 0.7) {
				printf "INCONCLUSIVE P/S %s/level=%d %s: %.2f with %d threads " \
					"(P %.0f, S %.0f ns/op), but the raw compress call alone " \
					"scaled only %.2f: the CPUs were busy (limit 0.60)\n",
					be, l, sizes[s], ps, pt, v(p, "ns/op"), v(h, "ns/op"),
					v(r, "ns/op") / v(z, "ns/op")
				ninconclusive++
				continue
			}
			check(ps <= 0.6,
				sprintf("P/S %s/level=%d %s: %.2f with %d threads (P %.0f, S %.0f " \
					"ns/op; raw compress alone %.2f; limit 0.60)",
					be, l, sizes[s], ps, pt, v(p, "ns/op"), v(h, "ns/op"),
					has(r) && has(z) ? v(r, "ns/op") / v(z, "ns/op") : 0))
		}
	}
	# 4. libdeflate-6 against zlib-6: speed and size.
	for (s = 2; s <= nsz; s++) {
		h = key("GzipHandler", "libdeflate", 6, sizes[s], 0)
		z = key("GzipHandler", "zlib", 6, sizes[s], 0)
		if (!has(h) || !has(z))
			continue
		check(v(z, "ns/op") / v(h, "ns/op") >= 1.4 && v(h, "out-B/op") <= v(z, "out-B/op"),
			sprintf("libdeflate-6 vs zlib-6 %s: %.2fx faster (CPU time %.2fx; " \
				"limit 1.40x), %.0f vs %.0f out-B (%+.1f%%; limit 0%%)",
				sizes[s], v(z, "ns/op") / v(h, "ns/op"),
				div(v(z, "cpu-ns/op"), v(h, "cpu-ns/op")), v(h, "out-B/op"),
				v(z, "out-B/op"), (v(h, "out-B/op") / v(z, "out-B/op") - 1) * 100))
	}
	# 5. Small bodies: nginx-sized zlib parameters against the raw call.
	for (i = 1; i <= nrows; i++) {
		if (row_kind[i] != "RawSmallWindow" || row_threads[i] != 0)
			continue
		c = row_key[i]
		r = key("Raw", row_be[i], row_level[i], row_size[i], 0)
		if (!has(r))
			continue
		printf "INFO small-body %s/level=%d %s: windowBits %d, memLevel %d instead of " \
			"15, 8: %+.1f%% wall, %+.1f%% CPU time, %.0f vs %.0f out-B\n",
			row_be[i], row_level[i], row_size[i], sw_wbits[row_size[i]],
			sw_memlevel[row_size[i]], (v(c, "ns/op") / v(r, "ns/op") - 1) * 100,
			(div(v(c, "cpu-ns/op"), v(r, "cpu-ns/op")) - 1) * 100, v(c, "out-B/op"),
			v(r, "out-B/op")
	}
	# Informational: the pool and the cache, for the default backend.
	for (s = 1; s <= nsz && dflt != ""; s++) {
		l = be_level[dflt]
		h = key("GzipHandler", dflt, l, sizes[s], 0)
		p = key("Unpooled", dflt, l, sizes[s], 0)
		r = key("Cached", dflt, l, sizes[s], 0)
		if (has(h) && has(p))
			printf "INFO pool %s/level=%d %s: pooled %.0f, unpooled %.0f ns/op " \
				"(%.2fx; CPU %.2fx); %.0f vs %.0f B/op, %.1f vs %.1f allocs/op\n",
				dflt, l, sizes[s], v(h, "ns/op"), v(p, "ns/op"),
				v(p, "ns/op") / v(h, "ns/op"), div(v(p, "cpu-ns/op"), v(h, "cpu-ns/op")),
				v(h, "B/op"), v(p, "B/op"), v(h, "allocs/op"), v(p, "allocs/op")
		if (has(h) && has(r))
			printf "INFO cache %s/level=%d %s: a cache hit costs %.0f ns/op, " \
				"%.1f allocs/op (%.0fx cheaper than compressing)\n",
				dflt, l, sizes[s], v(r, "ns/op"), v(r, "allocs/op"),
				v(h, "ns/op") / v(r, "ns/op")
	}
	# Informational: what BREACH length hiding costs, for the default backend.
	for (s = 1; s <= nsz && dflt != ""; s++) {
		l = be_level[dflt]
		h = key("GzipHandler", dflt, l, sizes[s], 0)
		p = key("Padded", dflt, l, sizes[s], 0)
		if (has(h) && has(p))
			printf "INFO length hiding %s/level=%d %s: %.0f vs %.0f ns/op (%+.1f%%; " \
				"CPU %+.1f%%), %.0f vs %.0f out-B/op (%+.0f B, %+.1f%%)\n",
				dflt, l, sizes[s], v(p, "ns/op"), v(h, "ns/op"),
				(v(p, "ns/op") / v(h, "ns/op") - 1) * 100,
				(div(v(p, "cpu-ns/op"), v(h, "cpu-ns/op")) - 1) * 100, v(p, "out-B/op"),
				v(h, "out-B/op"), v(p, "out-B/op") - v(h, "out-B/op"),
				(v(p, "out-B/op") / v(h, "out-B/op") - 1) * 100
	}
	printf "\n# verdict: %d PASS, %d FAIL, %d INCONCLUSIVE, %d SKIP\n",
		npass, nfail, ninconclusive, nskip
}
' "${1:--}"
