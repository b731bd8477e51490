# tests/reliability.mk: make interop, make valgrind and make soak (included by the top-level Makefile.am; paths are from the top).
# make interop: real clients (headless Chromium, curl, wget, Python) against
# gzserve. Not in TESTS: it needs packages the README's test command does not
# install (chromium, nodejs, npm, wget, python3; see tests/interop.sh).
EXTRA_DIST += tests/interop.sh tests/interop/browser.js tests/interop/http_check.py \
	tests/interop/codings_check.py tests/interop/firefox.js tests/interop/dict_root.js \
	tests/interop/package.json tests/interop/package-lock.json
.PHONY: interop
interop: examples/gzserve/gzserve
	GZSERVE='$(abs_top_builddir)/examples/gzserve/gzserve' bash $(top_srcdir)/tests/interop.sh


# --- make valgrind: Check suites under valgrind memcheck --------------------
# Each BINARY:SUITE[:CASE] of VALGRIND_TESTS runs in-process (CK_FORK=no)
# under memcheck with --leak-check=full; any error or definite/indirect
# leak fails it. VALGRIND_JOBS run at once (memcheck runs a process on one
# core). Logs in tests/valgrind-logs/. The longest run (pool threads:
# memcheck serialises the threads) goes first.
VALGRIND_JOBS = 2
VALGRIND_TESTS = tests/check_core:pool tests/check_core:backend tests/check_handler:e2e \
	tests/check_core:codings:space tests/check_core:codings:pump tests/check_core:codings:alloc \
	tests/check_core:alloc tests/check_core:stream tests/check_handler:negotiate
EXTRA_DIST += tests/valgrind.sh
.PHONY: valgrind
if ENABLE_TESTS
valgrind: tests/check_core$(EXEEXT) tests/check_handler$(EXEEXT)
	bash $(srcdir)/tests/valgrind.sh --jobs $(VALGRIND_JOBS) --logs tests/valgrind-logs \
	  $(VALGRIND_TESTS)
else
valgrind:
	@echo "make valgrind needs the test suites (configure without --disable-tests)" >&2; exit 1
endif

# --- make soak: gzserve under wrk, bounded (tests/soak.sh) ------------------
# SOAK_SECONDS of load on two gzserve processes (demo and a static tree) on
# the loopback, SOAK_CONNECTIONS wrk connections and SOAK_STREAMS /events
# clients; checks errors, memory growth, the pool and the counters.
SOAK_SECONDS = 60
SOAK_CONNECTIONS = 64
SOAK_STREAMS = 24
EXTRA_DIST += tests/soak.sh tests/soak.lua
.PHONY: soak
soak: examples/gzserve/gzserve$(EXEEXT)
	bash $(srcdir)/tests/soak.sh --seconds $(SOAK_SECONDS) --connections $(SOAK_CONNECTIONS) \
	  --streams $(SOAK_STREAMS) examples/gzserve/gzserve$(EXEEXT) $(srcdir)/tests/soak.lua

# --- make soak-streams: concurrent gzip event streams (tests/soak_streams.sh) --
# SOAK_STREAMS_N /events streams at once against gzserve, each decoded by
# tests/stream_load.py (Python asyncio, loopback): every event delivered,
# no errors, server RSS under 1 GiB, then the pools trimmed back. About
# 20 s for 1,000 streams; 10,000 took 17 s of load (DESIGN.md, Load test).
SOAK_STREAMS_N = 1000
EXTRA_DIST += tests/soak_streams.sh tests/stream_load.py
.PHONY: soak-streams
soak-streams: examples/gzserve/gzserve$(EXEEXT)
	bash $(srcdir)/tests/soak_streams.sh --streams $(SOAK_STREAMS_N) examples/gzserve/gzserve$(EXEEXT)

# --- make check-upstream: libmicrohttpd's own tests through mhdgz (tests/upstream.sh) --
# The installed libmicrohttpd's source package (apt-get source; root may
# enable deb-src from this machine's apt sources), its src/testcurl
# programs compiled with tests/upstream/mhdgz_twins.h force-included
# (constructors and MHD_queue_response through mhdgz), linked against the
# system libmicrohttpd and this tree's libmhdgz, with this tree's CC,
# CFLAGS and LDFLAGS (a sanitizer build gives sanitized programs). Each
# runs plain, through mhdgz (a), through mhdgz with libcurl asking for
# gzip (b), and asking for gzip without mhdgz (ctl-b), in a network
# namespace of its own. Cached (source, configure, programs) in
# tests/upstream-build/. UPSTREAM_FLAGS adds options (tests/upstream.sh:
# --only ERE, --timeout SEC, --jobs N, --equivalents, --light).
UPSTREAM_FLAGS =
EXTRA_DIST += tests/upstream.sh tests/upstream/mhdgz_twins.h
.PHONY: check-upstream clean-upstream
check-upstream: handler/libmhdgz.la
	bash $(srcdir)/tests/upstream.sh --top-srcdir $(top_srcdir) --top-builddir $(top_builddir) \
	  --cc '$(CC)' --cflags '$(CFLAGS)' --ldflags '$(LDFLAGS)' $(UPSTREAM_FLAGS)
distclean-local: clean-upstream
clean-upstream:
	-rm -rf tests/upstream-build
