# examples/local.mk: the examples and gzserve (included by the top-level Makefile.am; paths are from the top).
# --- examples/ -------------------------------------------------------------
noinst_PROGRAMS += examples/minimal
examples_minimal_SOURCES = examples/minimal.c
examples_minimal_CFLAGS = $(AM_CFLAGS) $(MHD_CFLAGS)
examples_minimal_LDADD = handler/libmhdgz.la $(MHD_LIBS)

# Single-feature examples, each run by tests/examples_test.sh.
EXTRA_DIST += tests/examples_test.sh
noinst_PROGRAMS += examples/stream_low_latency examples/static_file examples/event_stream
examples_stream_low_latency_SOURCES = examples/stream_low_latency.c
examples_stream_low_latency_CFLAGS = $(AM_CFLAGS) $(MHD_CFLAGS)
examples_stream_low_latency_LDADD = handler/libmhdgz.la $(MHD_LIBS)
examples_static_file_SOURCES = examples/static_file.c
examples_static_file_CFLAGS = $(AM_CFLAGS) $(MHD_CFLAGS)
examples_static_file_LDADD = handler/libmhdgz.la $(MHD_LIBS)
examples_event_stream_SOURCES = examples/event_stream.c
examples_event_stream_CFLAGS = $(AM_CFLAGS) $(MHD_CFLAGS)
examples_event_stream_LDADD = handler/libmhdgz.la $(MHD_LIBS)

# The deterministic JSON payload of gzserve's demo, shared with the
# benchmarks and the gzserve tests (a library here, so nothing builds
# from another program's folder).
noinst_LTLIBRARIES += examples/payload/libpayload.la
examples_payload_libpayload_la_SOURCES = examples/payload/payload.c examples/payload/payload.h

# gzserve: the sample server (installed).
bin_PROGRAMS = examples/gzserve/gzserve
examples_gzserve_gzserve_SOURCES = examples/gzserve/gzserve.h examples/gzserve/main.c \
	examples/gzserve/respond.c examples/gzserve/files.c examples/gzserve/mime.c \
	examples/gzserve/demo.c examples/gzserve/log.c examples/gzserve/echo.c \
	examples/gzserve/dict.c examples/gzserve/options.c examples/gzserve/validate.c \
	examples/gzserve/siblings.c examples/gzserve/beneath.c \
	examples/gzserve/linger.c
# The demo's page, stylesheet and script are files of their own
# (examples/gzserve/demo/), made into C strings at build time.
nodist_examples_gzserve_gzserve_SOURCES = examples/gzserve/demo_assets.h
BUILT_SOURCES = examples/gzserve/demo_assets.h
CLEANFILES += examples/gzserve/demo_assets.h
GZSERVE_DEMO = examples/gzserve/demo/index.html examples/gzserve/demo/style.css \
	examples/gzserve/demo/app.js
EXTRA_DIST += examples/gzserve/embed.sh $(GZSERVE_DEMO)
examples/gzserve/demo_assets.h: $(top_srcdir)/examples/gzserve/embed.sh $(GZSERVE_DEMO:%=$(top_srcdir)/%)
	@$(MKDIR_P) examples/gzserve
	$(AM_V_GEN)sh $(top_srcdir)/examples/gzserve/embed.sh \
	  demo_index $(top_srcdir)/examples/gzserve/demo/index.html \
	  demo_css $(top_srcdir)/examples/gzserve/demo/style.css \
	  demo_js $(top_srcdir)/examples/gzserve/demo/app.js >$@.tmp && mv $@.tmp $@
examples_gzserve_gzserve_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/examples/payload \
	-I$(top_builddir)/examples/gzserve
# Also for a program built by name (make examples/gzserve/gzserve, make fuzz).
examples/gzserve/gzserve-demo.$(OBJEXT) examples/gzserve/tests_fuzz_fuzz_gzserve-demo.$(OBJEXT): \
	examples/gzserve/demo_assets.h
# zlib: crc32() of POST /echo's body (echo.c); libzstd, where built: the
# frame header of a .zst sibling (siblings.c).
examples_gzserve_gzserve_CFLAGS = $(AM_CFLAGS) $(MHD_CFLAGS) $(ZLIB_CFLAGS) $(ZSTD_CFLAGS)
examples_gzserve_gzserve_LDADD = handler/libmhdgz.la examples/payload/libpayload.la $(MHD_LIBS) \
	$(ZLIB_LIBS) $(ZSTD_LIBS)

dist_man1_MANS = examples/gzserve/gzserve.1
