# examples/local.mk: the examples and gzserve (included by the top-level Makefile.am; paths are from the top).
# --- examples/ -------------------------------------------------------------
noinst_PROGRAMS += examples/minimal
examples_minimal_SOURCES = examples/minimal.c
examples_minimal_CFLAGS = $(AM_CFLAGS) $(MHD_CFLAGS)
examples_minimal_LDADD = handler/libmhdgz.la $(MHD_LIBS)

# gzserve: the sample server (installed); shares the benchmark payload.
bin_PROGRAMS = examples/gzserve
examples_gzserve_SOURCES = examples/gzserve.c bench/payload.c bench/payload.h
examples_gzserve_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/bench
examples_gzserve_CFLAGS = $(AM_CFLAGS) $(MHD_CFLAGS)
examples_gzserve_LDADD = handler/libmhdgz.la $(MHD_LIBS)

