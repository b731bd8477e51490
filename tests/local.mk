# tests/local.mk: the make check programs and scripts (included by the top-level Makefile.am; paths are from the top).
# --- tests/ ----------------------------------------------------------------
if ENABLE_TESTS
TESTS += tests/check_core tests/check_handler
check_PROGRAMS += tests/check_core tests/check_handler
tests_common = tests/testutil.c tests/testutil.h
tests_check_core_SOURCES = $(tests_common) tests/check_core.c tests/check_core.h \
	tests/check_backend.c tests/check_stream.c tests/check_pool.c tests/check_alloc.c
tests_check_core_CPPFLAGS = $(CORE_CPPFLAGS)
tests_check_core_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(ZLIB_CFLAGS)
tests_check_core_LDADD = src/libmhdgz_core.la $(CHECK_LIBS) $(ZLIB_LIBS)
tests_check_handler_SOURCES = $(tests_common) tests/check_handler.c tests/check_handler.h \
	tests/check_negotiate.c tests/check_e2e.c
tests_check_handler_CPPFLAGS = $(HND_CPPFLAGS)
tests_check_handler_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(MHD_CFLAGS) $(CURL_CFLAGS) $(ZLIB_CFLAGS)
tests_check_handler_LDADD = handler/libmhdgz_hnd.la $(CHECK_LIBS) $(CURL_LIBS) $(MHD_LIBS) $(ZLIB_LIBS)
# check_streaming: streaming responses (callback and file bodies) end to end.
TESTS += tests/check_streaming
check_PROGRAMS += tests/check_streaming
tests_check_streaming_SOURCES = $(tests_common) tests/check_streaming.c \
	tests/check_streaming.h tests/check_streaming_body.c tests/check_streaming_live.c \
	tests/stream_util.c tests/stream_util.h
tests_check_streaming_CPPFLAGS = $(HND_CPPFLAGS)
tests_check_streaming_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(MHD_CFLAGS) $(CURL_CFLAGS) $(ZLIB_CFLAGS)
tests_check_streaming_LDADD = handler/libmhdgz_hnd.la $(CHECK_LIBS) $(CURL_LIBS) $(MHD_LIBS) $(ZLIB_LIBS)
# check_faults: allocation failures on the file, 304, Vary and pooled
# stream paths end to end (check_e2e and check_streaming cover the rest).
TESTS += tests/check_faults
check_PROGRAMS += tests/check_faults
tests_check_faults_SOURCES = $(tests_common) tests/check_faults.c tests/stream_util.c \
	tests/stream_util.h
tests_check_faults_CPPFLAGS = $(HND_CPPFLAGS)
tests_check_faults_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(MHD_CFLAGS) $(CURL_CFLAGS) $(ZLIB_CFLAGS)
tests_check_faults_LDADD = handler/libmhdgz_hnd.la $(CHECK_LIBS) $(CURL_LIBS) $(MHD_LIBS) $(ZLIB_LIBS)
# gzserve end to end with the curl command-line tool and with libcurl;
# GZSERVE finds the binary in a VPATH build.
TESTS += tests/gzserve_test.sh tests/check_gzserve
# The single-feature examples end to end with the curl command-line tool.
TESTS += tests/examples_test.sh
check_PROGRAMS += tests/check_gzserve
tests_check_gzserve_SOURCES = tests/check_gzserve.c $(tests_common)
tests_check_gzserve_CPPFLAGS = $(HND_CPPFLAGS) -I$(top_srcdir)/examples/payload
tests_check_gzserve_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(MHD_CFLAGS) $(CURL_CFLAGS) $(ZLIB_CFLAGS)
tests_check_gzserve_LDADD = handler/libmhdgz_hnd.la examples/payload/libpayload.la $(CHECK_LIBS) $(CURL_LIBS) $(MHD_LIBS) $(ZLIB_LIBS)
endif
TEST_EXTENSIONS = .sh
SH_LOG_COMPILER = bash
AM_TESTS_ENVIRONMENT = GZSERVE='$(abs_top_builddir)/examples/gzserve/gzserve'; export GZSERVE;
EXTRA_DIST += tests/gzserve_test.sh

