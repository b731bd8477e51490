# tests/local.mk: the make check programs and scripts (included by the top-level Makefile.am; paths are from the top).
# --- tests/ ----------------------------------------------------------------
# Every Check binary is built from the one runner, tests/check_main.c, with
# the CHECK_BIN_* that names its suites (tests/check_suites.h); the HTTP
# suites share one harness (tests/harness.c).
# The reference decoders (tests/testutil.c) of zstd and br link libzstd and
# libbrotlidec when those codings are built (bench/local.mk uses them too).
tests_dec_cflags = $(ZLIB_CFLAGS) $(ZSTD_CFLAGS) $(BROTLI_CFLAGS)
tests_dec_libs = $(ZLIB_LIBS) $(ZSTD_LIBS) $(BROTLI_LIBS)
if ENABLE_TESTS
tests_common = tests/testutil.c tests/testutil.h tests/check_main.c tests/check_suites.h
tests_harness = $(tests_common) tests/harness.c tests/harness.h tests/info.h
tests_hnd_cflags = $(AM_CFLAGS) $(CHECK_CFLAGS) $(MHD_CFLAGS) $(CURL_CFLAGS) $(tests_dec_cflags)
tests_hnd_ldadd = handler/libmhdgz_hnd.la $(CHECK_LIBS) $(CURL_LIBS) $(MHD_LIBS) $(tests_dec_libs)
# check_core: the compression core alone (src/ headers only, no libcurl).
TESTS += tests/check_core
check_PROGRAMS += tests/check_core
tests_check_core_SOURCES = $(tests_common) tests/check_backend.c tests/check_stream.c \
	tests/check_pool.c tests/check_alloc.c tests/check_pump.c tests/check_codings.c \
	tests/check_inflate.c
tests_check_core_CPPFLAGS = $(CORE_CPPFLAGS) -DCHECK_BIN_CORE
tests_check_core_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(tests_dec_cflags)
tests_check_core_LDADD = src/libmhdgz_core.la $(CHECK_LIBS) $(tests_dec_libs)
# check_handler: negotiation without a daemon, and buffer responses end to end (suite e2e).
TESTS += tests/check_handler
check_PROGRAMS += tests/check_handler
tests_check_handler_SOURCES = $(tests_harness) tests/check_negotiate.c \
	tests/check_hnd_headers.c tests/check_hnd_etag.c tests/check_hnd_decision.c \
	tests/check_hnd_buffer.c tests/check_hnd_threads.c tests/check_hnd_wire.c \
	tests/check_hnd_ctors.c tests/check_hnd_fidelity.c tests/check_hnd_memo.c \
	tests/check_hnd_breach.c tests/check_hnd_filecache.c tests/check_hnd_store.c \
	tests/check_hnd_codings.c \
	tests/check_hnd_upload.c tests/check_hnd_dict.c
tests_check_handler_CPPFLAGS = $(HND_CPPFLAGS) -DCHECK_BIN_HANDLER
# libdeflate directly too: the application's own compressors of
# test_set_allocator_libdeflate_own (check_negotiate.c).
tests_check_handler_CFLAGS = $(tests_hnd_cflags) $(LIBDEFLATE_CFLAGS)
tests_check_handler_LDADD = $(tests_hnd_ldadd) $(LIBDEFLATE_LIBS)
# check_streaming: streaming responses (callback and file bodies) end to end.
TESTS += tests/check_streaming
check_PROGRAMS += tests/check_streaming
tests_check_streaming_SOURCES = $(tests_harness) tests/stream_harness.c tests/stream_harness.h \
	tests/check_hnd_stream_roundtrip.c tests/check_hnd_stream_decision.c \
	tests/check_hnd_stream_file.c tests/check_hnd_stream_edge.c \
	tests/check_hnd_stream_reader.c tests/check_hnd_stream_latency.c \
	tests/check_hnd_stream_shared.c tests/check_hnd_stream_lifetime.c
tests_check_streaming_CPPFLAGS = $(HND_CPPFLAGS) -DCHECK_BIN_STREAMING
tests_check_streaming_CFLAGS = $(tests_hnd_cflags)
tests_check_streaming_LDADD = $(tests_hnd_ldadd)
# check_faults: allocation failures on the file, 304, Vary and pooled
# stream paths end to end (check_handler and check_streaming cover the rest).
TESTS += tests/check_faults
check_PROGRAMS += tests/check_faults
tests_check_faults_SOURCES = $(tests_harness) tests/check_faults.c
tests_check_faults_CPPFLAGS = $(HND_CPPFLAGS) -DCHECK_BIN_FAULTS
tests_check_faults_CFLAGS = $(tests_hnd_cflags)
tests_check_faults_LDADD = $(tests_hnd_ldadd)
# gzserve end to end with the curl command-line tool and with libcurl;
# GZSERVE finds the binary in a VPATH build.
TESTS += tests/gzserve_test.sh tests/check_gzserve
# The single-feature examples end to end with the curl command-line tool.
TESTS += tests/examples_test.sh
check_PROGRAMS += tests/check_gzserve
tests_check_gzserve_SOURCES = $(tests_harness) tests/check_gzserve.c
tests_check_gzserve_CPPFLAGS = $(HND_CPPFLAGS) -I$(top_srcdir)/examples/payload -DCHECK_BIN_GZSERVE
tests_check_gzserve_CFLAGS = $(tests_hnd_cflags)
tests_check_gzserve_LDADD = examples/payload/libpayload.la $(tests_hnd_ldadd)
endif
TEST_EXTENSIONS = .sh
SH_LOG_COMPILER = bash
AM_TESTS_ENVIRONMENT = GZSERVE='$(abs_top_builddir)/examples/gzserve/gzserve'; export GZSERVE; \
	LIBMHDGZ_SO='$(abs_top_builddir)/handler/.libs/libmhdgz.so'; export LIBMHDGZ_SO;
EXTRA_DIST += tests/gzserve_test.sh tests/testlib.sh
