# tests/fuzz/local.mk: the libFuzzer targets and make fuzz (included by the top-level Makefile.am; paths are from the top).
# --- tests/fuzz/: libFuzzer targets, built and run only by `make fuzz` -----
# The targets need every library object instrumented for libFuzzer's
# coverage, and clang, whatever CC is. So `make fuzz` configures this source
# tree a second time, in tests/fuzz/build/, with CC=$(FUZZ_CC),
# CFLAGS=$(FUZZ_CFLAGS) (coverage, AddressSanitizer, UBSan) and
# --enable-fuzz-targets, and has that build make the targets with the rules
# below: the convenience libraries src/libmhdgz_core.la and
# handler/libmhdgz_hnd.la come from the library's own source lists, and each
# target links them with -fsanitize=fuzzer. This build is untouched.
#
# A configure refuses a source tree that is also configured in place, and
# make would take that tree's objects through VPATH: in an in-tree build
# the second configure runs on tests/fuzz/tree/, a fresh `make distdir` copy
# of the sources (times kept, so only what changed is rebuilt).
#
# `make fuzz` then runs every target FUZZ_SECONDS (default 60) on its seed
# corpus tests/fuzz/corpus/TARGET/ (read only); new inputs collect in this
# build's tests/fuzz/work/, failing ones in tests/fuzz/artifacts/.
# FUZZ_JOBS targets run at once (one core each); FUZZ_FLAGS adds libFuzzer
# options, e.g. make fuzz FUZZ_SECONDS=600 FUZZ_JOBS=2 FUZZ_TARGETS=fuzz_stream.
FUZZ_TARGETS = fuzz_accept fuzz_decide fuzz_types fuzz_etag fuzz_stream fuzz_inflate fuzz_gzserve
FUZZ_SECONDS = 60
FUZZ_JOBS = 1
FUZZ_FLAGS =
FUZZ_CFLAGS = -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined \
	-fno-sanitize-recover=undefined
FUZZ_BUILD = tests/fuzz/build
FUZZ_TREE = tests/fuzz/tree
# --disable-shared: the targets link the convenience libraries only.
FUZZ_CONFIGURE_FLAGS = --enable-fuzz-targets --disable-tests --disable-fuzz --disable-shared \
	--with-libdeflate=$(have_libdeflate) --with-isal=$(have_isal) \
	--with-zstd=$(have_zstd) --with-brotli=$(have_brotli)

EXTRA_DIST += tests/fuzz/run.sh tests/fuzz/corpus tests/fuzz/fuzz_accept.dict \
	tests/fuzz/fuzz_decide.dict tests/fuzz/fuzz_types.dict tests/fuzz/fuzz_etag.dict

# The targets themselves, defined only in the build that make fuzz
# configures (their sources are distributed either way).
if FUZZ_TARGETS
noinst_PROGRAMS += tests/fuzz/fuzz_accept tests/fuzz/fuzz_decide tests/fuzz/fuzz_types \
	tests/fuzz/fuzz_etag tests/fuzz/fuzz_stream tests/fuzz/fuzz_inflate tests/fuzz/fuzz_gzserve
fuzz_hnd_cflags = $(AM_CFLAGS) $(MHD_CFLAGS)
fuzz_hnd_ldadd = handler/libmhdgz_hnd.la $(MHD_LIBS)
tests_fuzz_fuzz_accept_SOURCES = tests/fuzz/fuzz_accept.c tests/fuzz/fuzz_util.h
tests_fuzz_fuzz_accept_CPPFLAGS = $(HND_CPPFLAGS)
tests_fuzz_fuzz_accept_CFLAGS = $(fuzz_hnd_cflags)
tests_fuzz_fuzz_accept_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_accept_LDADD = $(fuzz_hnd_ldadd)
tests_fuzz_fuzz_decide_SOURCES = tests/fuzz/fuzz_decide.c tests/fuzz/fuzz_util.h tests/info.h
tests_fuzz_fuzz_decide_CPPFLAGS = $(HND_CPPFLAGS)
tests_fuzz_fuzz_decide_CFLAGS = $(fuzz_hnd_cflags)
tests_fuzz_fuzz_decide_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_decide_LDADD = $(fuzz_hnd_ldadd)
tests_fuzz_fuzz_types_SOURCES = tests/fuzz/fuzz_types.c tests/fuzz/fuzz_util.h
tests_fuzz_fuzz_types_CPPFLAGS = $(HND_CPPFLAGS)
tests_fuzz_fuzz_types_CFLAGS = $(fuzz_hnd_cflags)
tests_fuzz_fuzz_types_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_types_LDADD = $(fuzz_hnd_ldadd)
tests_fuzz_fuzz_etag_SOURCES = tests/fuzz/fuzz_etag.c tests/fuzz/fuzz_util.h
tests_fuzz_fuzz_etag_CPPFLAGS = $(HND_CPPFLAGS)
tests_fuzz_fuzz_etag_CFLAGS = $(fuzz_hnd_cflags)
tests_fuzz_fuzz_etag_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_etag_LDADD = $(fuzz_hnd_ldadd)
# fuzz_stream reaches the core only; it decodes every coding with the
# tests' reference decoders (tests/testutil.c).
tests_fuzz_fuzz_stream_SOURCES = tests/fuzz/fuzz_stream.c tests/fuzz/fuzz_util.h \
	tests/testutil.c tests/testutil.h
tests_fuzz_fuzz_stream_CPPFLAGS = $(CORE_CPPFLAGS) -I$(top_srcdir)/tests
tests_fuzz_fuzz_stream_CFLAGS = $(AM_CFLAGS) $(tests_dec_cflags)
tests_fuzz_fuzz_stream_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_stream_LDADD = src/libmhdgz_core.la $(tests_dec_libs)
# fuzz_inflate: the request body inflater (src/gz_inflate.c), against zlib.
tests_fuzz_fuzz_inflate_SOURCES = tests/fuzz/fuzz_inflate.c tests/fuzz/fuzz_util.h
tests_fuzz_fuzz_inflate_CPPFLAGS = $(CORE_CPPFLAGS)
tests_fuzz_fuzz_inflate_CFLAGS = $(AM_CFLAGS) $(ZLIB_CFLAGS)
tests_fuzz_fuzz_inflate_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_inflate_LDADD = src/libmhdgz_core.la $(tests_dec_libs)
# fuzz_gzserve: gzserve's parsers, with gzserve's sources but its main.c.
tests_fuzz_fuzz_gzserve_SOURCES = tests/fuzz/fuzz_gzserve.c tests/fuzz/fuzz_util.h \
	examples/gzserve/gzserve.h examples/gzserve/respond.c examples/gzserve/files.c \
	examples/gzserve/mime.c examples/gzserve/demo.c examples/gzserve/log.c \
	examples/gzserve/echo.c examples/gzserve/dict.c examples/gzserve/options.c \
	examples/gzserve/validate.c examples/gzserve/siblings.c examples/gzserve/beneath.c \
	examples/gzserve/linger.c
nodist_tests_fuzz_fuzz_gzserve_SOURCES = examples/gzserve/demo_assets.h
tests_fuzz_fuzz_gzserve_CPPFLAGS = $(AM_CPPFLAGS) \
	-I$(top_srcdir)/examples/gzserve -I$(top_builddir)/examples/gzserve \
	-I$(top_srcdir)/examples/payload
tests_fuzz_fuzz_gzserve_CFLAGS = $(AM_CFLAGS) $(MHD_CFLAGS) $(ZLIB_CFLAGS) $(ZSTD_CFLAGS)
tests_fuzz_fuzz_gzserve_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_gzserve_LDADD = handler/libmhdgz_hnd.la examples/payload/libpayload.la \
	$(MHD_LIBS) $(ZLIB_LIBS) $(ZSTD_LIBS)
endif

.PHONY: fuzz fuzz-build
if HAVE_FUZZ
# Configures $(FUZZ_BUILD) when it is new or the configure command changed
# (FUZZ_CC, FUZZ_CFLAGS, this tree's backends), then lets its make bring
# the FUZZ_TARGETS up to date.
fuzz-build:
	@$(MKDIR_P) $(FUZZ_BUILD)
	$(AM_V_GEN)if test -f $(top_srcdir)/config.status; then \
	  $(MAKE) $(AM_MAKEFLAGS) distdir distdir=$(FUZZ_TREE) >/dev/null || exit 1; \
	  src='$(abs_top_builddir)/$(FUZZ_TREE)'; \
	else \
	  src='$(abs_top_srcdir)'; \
	fi; \
	cmd="$$src/configure -q CC='$(FUZZ_CC)' CFLAGS='$(FUZZ_CFLAGS)' $(FUZZ_CONFIGURE_FLAGS)"; \
	if test ! -f $(FUZZ_BUILD)/config.status || \
	   test "x`cat $(FUZZ_BUILD)/configure.cmd 2>/dev/null`" != "x$$cmd"; then \
	  echo "fuzz: configuring $(FUZZ_BUILD): $$cmd"; \
	  rm -f $(FUZZ_BUILD)/configure.cmd; \
	  (cd $(FUZZ_BUILD) && eval "$$cmd") || exit 1; \
	  echo "$$cmd" >$(FUZZ_BUILD)/configure.cmd; \
	fi; \
	progs=; for t in $(FUZZ_TARGETS); do progs="$$progs tests/fuzz/$$t$(EXEEXT)"; done; \
	cd $(FUZZ_BUILD) && $(MAKE) $(AM_MAKEFLAGS) $$progs
fuzz: fuzz-build
	bash $(srcdir)/tests/fuzz/run.sh --seconds $(FUZZ_SECONDS) --jobs $(FUZZ_JOBS) \
	  --src $(srcdir)/tests/fuzz --bin $(FUZZ_BUILD)/tests/fuzz --dir tests/fuzz $(FUZZ_TARGETS)
else
fuzz fuzz-build:
	@echo "make fuzz needs clang with libFuzzer (apt-get install clang libclang-rt-14-dev)," >&2
	@echo "then configure again (FUZZ_CC=... to name another compiler)." >&2
	@exit 1
endif
clean-local: clean-fuzz
clean-fuzz:
	-rm -rf $(FUZZ_BUILD) $(FUZZ_TREE) tests/fuzz/logs tests/fuzz/work tests/fuzz/artifacts
	-rm -rf tests/valgrind-logs
