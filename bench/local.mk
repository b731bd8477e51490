# bench/local.mk: the GzipHandler benchmarks, make bench (then bench/verdict.sh), bench-full, bench-e2e, bench-passthru(-ir), bench-ir (included by the top-level Makefile.am; paths are from the top).
# --- bench/: the GzipHandler benchmarks, never part of make check ----------
# bench_handler links the convenience libraries (not the installed library)
# to reach the raw backend interface for its reference rows; bh_alloc.c
# defines malloc and friends to count allocations process-wide. It decodes
# with the tests' independent decoder (tests/testutil.c, zlib).
noinst_PROGRAMS += bench/bench_handler
bench_bench_handler_SOURCES = bench/bench.h bench/bench_handler.c bench/bh_common.c bench/bh_alloc.c \
	bench/bh_runner.c bench/bh_verify.c bench/bh_stream.c bench/bh_events.c bench/bh_dict.c \
	tests/testutil.c \
	tests/testutil.h
bench_bench_handler_CPPFLAGS = $(HND_CPPFLAGS) -I$(top_srcdir)/examples/payload \
	-I$(top_srcdir)/tests -DBH_DICT_DIR='"$(top_srcdir)/tests/dict"'
bench_bench_handler_CFLAGS = $(AM_CFLAGS) $(MHD_CFLAGS) $(tests_dec_cflags)
bench_bench_handler_LDADD = handler/libmhdgz_hnd.la examples/payload/libpayload.la $(MHD_LIBS) \
	$(tests_dec_libs)
# passthru: one server whose in-memory responses go through libmicrohttpd
# alone (--plain) or through mhdgz (make bench-passthru). Links
# the installed library, as an application does.
noinst_PROGRAMS += bench/passthru
bench_passthru_SOURCES = bench/passthru.c
bench_passthru_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/examples/payload
bench_passthru_CFLAGS = $(AM_CFLAGS) $(MHD_CFLAGS)
bench_passthru_LDADD = handler/libmhdgz.la examples/payload/libpayload.la $(MHD_LIBS)
EXTRA_DIST += tests/dict/jquery-3.7.0.min.js tests/dict/jquery-3.7.1.min.js \
	tests/dict/LICENSE.txt tests/dict/README.md
EXTRA_DIST += bench/benchlib.sh bench/e2e.sh bench/passthru.sh bench/passthru_ir.sh bench/fileprof.sh bench/ircount.sh bench/verdict.sh bench/README.md bench/compare.sh \
	bench/compare/outbytes.go bench/compare/kpzstd/kpzstd_test.go bench/compare.svg

# make bench: the default rows in 1-2 minutes on 2 cores; make bench-full:
# every backend x level. Override on the command line, e.g.
# make bench BENCH_FLAGS='--count 10 --benchtime 1s --filter S20k'.
BENCH_FLAGS = --count 5 --benchtime 0.2s
BENCH_FULL_FLAGS = --count 3 --benchtime 0.5s
BENCH_STAMP = $$(date +%Y%m%d-%H%M%S)
.PHONY: bench bench-full bench-e2e bench-passthru bench-passthru-ir bench-ir bench-compare bench-files
# The program prints measurements only; bench/verdict.sh reads its output
# file and prints the comparisons and the targets' verdicts.
bench: bench/bench_handler
	@$(MKDIR_P) bench/results
	out=bench/results/bench-$(BENCH_STAMP).txt; \
	bench/bench_handler $(BENCH_FLAGS) --out $$out && \
	$(SHELL) $(top_srcdir)/bench/verdict.sh $$out
bench-full: bench/bench_handler
	@$(MKDIR_P) bench/results
	out=bench/results/bench-full-$(BENCH_STAMP).txt; \
	bench/bench_handler --full $(BENCH_FULL_FLAGS) --out $$out && \
	$(SHELL) $(top_srcdir)/bench/verdict.sh $$out
# gzserve beside nginx (bench/e2e.sh), then the pass-through cases
# against plain libmicrohttpd (bench/passthru.sh), into one report.
bench-e2e: examples/gzserve/gzserve bench/passthru
	@$(MKDIR_P) bench/results
	out=bench/results/bench-e2e-$(BENCH_STAMP).txt; \
	$(SHELL) $(top_srcdir)/bench/e2e.sh examples/gzserve/gzserve $$out && \
	PASSTHRU_ROUNDS=$${PASSTHRU_ROUNDS:-$${E2E_ROUNDS:-3}} \
	PASSTHRU_DURATION=$${PASSTHRU_DURATION:-$${E2E_DURATION:-2}} \
	$(SHELL) $(top_srcdir)/bench/passthru.sh bench/passthru $$out
# Pass-through against plain libmicrohttpd: bench/passthru --plain and
# bench/passthru (mhdgz) side by side under wrk, interleaved, as ratios.
bench-passthru: bench/passthru
	@$(MKDIR_P) bench/results
	$(SHELL) $(top_srcdir)/bench/passthru.sh bench/passthru bench/results/bench-passthru-$(BENCH_STAMP).txt
# The same cases under callgrind: instructions per request, load-independent.
bench-passthru-ir: bench/passthru
	$(SHELL) $(top_srcdir)/bench/passthru_ir.sh bench/passthru
# gzserve --root per request, load-independent: system calls (strace) and
# instructions (callgrind), identity at 2k, then gzip with the file cache
# off and on (bench/fileprof.sh).
bench-files: examples/gzserve/gzserve
	$(SHELL) $(top_srcdir)/bench/fileprof.sh examples/gzserve/gzserve 2k --no-compress
	for size in 2k 20k 100k; do \
	  PROF_HEADER='Accept-Encoding: gzip' $(SHELL) $(top_srcdir)/bench/fileprof.sh \
	    examples/gzserve/gzserve $$size --cache-size 0 && \
	  PROF_HEADER='Accept-Encoding: gzip' $(SHELL) $(top_srcdir)/bench/fileprof.sh \
	    examples/gzserve/gzserve $$size --cache-size 33554432 || exit 1; \
	done
# Instructions per op under callgrind: handler overhead without load noise.
bench-ir: bench/bench_handler
	$(SHELL) $(top_srcdir)/bench/ircount.sh bench/bench_handler

# Go gziphandler's and gzhttp's own benchmarks beside ours, interleaved
# (bench/compare.sh; needs golang-go and the two handlers' Debian source
# packages, see bench/README.md).
bench-compare: bench/bench_handler
	@$(MKDIR_P) bench/results
	$(SHELL) $(top_srcdir)/bench/compare.sh bench/bench_handler $(top_srcdir) \
		bench/results/compare-$(BENCH_STAMP)
