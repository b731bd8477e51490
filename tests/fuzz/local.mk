# tests/fuzz/local.mk: the libFuzzer targets and make fuzz (included by the top-level Makefile.am; paths are from the top).
# --- tests/fuzz/: libFuzzer targets, built and run only by `make fuzz` -----
# Built with $(FUZZ_CC) (clang, found by configure) whatever CC is, so the
# default build is untouched: the library sources go into one archive
# instrumented for libFuzzer's coverage (-fsanitize=fuzzer-no-link) with
# AddressSanitizer and UBSan, and each target links it with libFuzzer.
# `make fuzz` runs every target FUZZ_SECONDS (default 60) on its seed corpus
# tests/fuzz/corpus/TARGET/ (read only); new inputs collect in the build
# tree's tests/fuzz/work/, failing ones in tests/fuzz/artifacts/.
# FUZZ_JOBS targets run at once (one core each); FUZZ_FLAGS adds libFuzzer
# options, e.g. make fuzz FUZZ_SECONDS=600 FUZZ_JOBS=2 FUZZ_TARGETS=fuzz_stream.
FUZZ_TARGETS = fuzz_accept fuzz_decide fuzz_types fuzz_etag fuzz_stream
FUZZ_SECONDS = 60
FUZZ_JOBS = 1
FUZZ_FLAGS =
FUZZ_CFLAGS = -g -O1 -std=gnu11 -fno-omit-frame-pointer \
	-fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CPPFLAGS = -I$(top_builddir) -I$(top_srcdir)/src -I$(top_srcdir)/handler \
	$(MHD_CFLAGS) $(ZLIB_CFLAGS) $(LIBDEFLATE_CFLAGS) $(ISAL_CFLAGS)
FUZZ_LIBS = $(MHD_LIBS) $(ZLIB_LIBS) $(LIBDEFLATE_LIBS) $(ISAL_LIBS) $(PTHREAD_LIBS) $(LIBS)
# gz_backend_isal.c compiles to nothing without HAVE_ISAL.
FUZZ_LIB_SRC = src/gz_alloc.c src/gz_error.c src/gz_backend.c src/gz_backend_zlib.c \
	src/gz_backend_libdeflate.c src/gz_backend_isal.c src/gz_pool.c src/gz_stream.c \
	handler/hnd_api.c handler/hnd_stats.c handler/hnd_table.c handler/hnd_response.c \
	handler/hnd_negotiate.c handler/hnd_decide.c handler/hnd_headers.c handler/hnd_variants.c \
	handler/hnd_conditional.c handler/hnd_queue.c handler/hnd_stream.c
FUZZ_LIB_HDR = src/gz_alloc.h src/gz_backend.h src/gz_error.h src/gz_pool.h src/gz_stream.h handler/hnd_internal.h \
	handler/mhdgz.h config.h
FUZZ_LIB = tests/fuzz/libmhdgz_fuzz.a
FUZZ_BINS = tests/fuzz/fuzz_accept$(EXEEXT) tests/fuzz/fuzz_decide$(EXEEXT) \
	tests/fuzz/fuzz_types$(EXEEXT) tests/fuzz/fuzz_etag$(EXEEXT) tests/fuzz/fuzz_stream$(EXEEXT)
# Each target: its own source plus the archive, linked with libFuzzer.
FUZZ_LINK = $(FUZZ_CC) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ \
	$(srcdir)/tests/fuzz/$(@F).c $(FUZZ_LIB) $(FUZZ_LIBS)
EXTRA_DIST += tests/fuzz/run.sh tests/fuzz/fuzz_util.h tests/fuzz/corpus \
	tests/fuzz/fuzz_accept.c tests/fuzz/fuzz_decide.c tests/fuzz/fuzz_types.c \
	tests/fuzz/fuzz_etag.c tests/fuzz/fuzz_stream.c tests/fuzz/fuzz_accept.dict \
	tests/fuzz/fuzz_decide.dict tests/fuzz/fuzz_types.dict tests/fuzz/fuzz_etag.dict
.PHONY: fuzz fuzz-build
if HAVE_FUZZ
$(FUZZ_LIB): $(FUZZ_LIB_SRC) $(FUZZ_LIB_HDR)
	@$(MKDIR_P) tests/fuzz/obj
	$(AM_V_GEN)rm -f $@ tests/fuzz/obj/*.o; \
	for f in $(FUZZ_LIB_SRC); do \
	  o=tests/fuzz/obj/`echo $$f | tr / _ | sed 's/\.c$$/.o/'`; \
	  $(FUZZ_CC) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link \
	    -c $(srcdir)/$$f -o $$o || exit 1; \
	done; \
	$(AR) cr $@ tests/fuzz/obj/*.o
tests/fuzz/fuzz_accept$(EXEEXT): tests/fuzz/fuzz_accept.c tests/fuzz/fuzz_util.h $(FUZZ_LIB)
	$(AM_V_CCLD)$(FUZZ_LINK)
tests/fuzz/fuzz_decide$(EXEEXT): tests/fuzz/fuzz_decide.c tests/fuzz/fuzz_util.h $(FUZZ_LIB)
	$(AM_V_CCLD)$(FUZZ_LINK)
tests/fuzz/fuzz_types$(EXEEXT): tests/fuzz/fuzz_types.c tests/fuzz/fuzz_util.h $(FUZZ_LIB)
	$(AM_V_CCLD)$(FUZZ_LINK)
tests/fuzz/fuzz_etag$(EXEEXT): tests/fuzz/fuzz_etag.c tests/fuzz/fuzz_util.h $(FUZZ_LIB)
	$(AM_V_CCLD)$(FUZZ_LINK)
tests/fuzz/fuzz_stream$(EXEEXT): tests/fuzz/fuzz_stream.c tests/fuzz/fuzz_util.h $(FUZZ_LIB)
	$(AM_V_CCLD)$(FUZZ_LINK)
fuzz-build: $(FUZZ_BINS)
fuzz: fuzz-build
	bash $(srcdir)/tests/fuzz/run.sh --seconds $(FUZZ_SECONDS) --jobs $(FUZZ_JOBS) \
	  --src $(srcdir)/tests/fuzz --dir tests/fuzz $(FUZZ_TARGETS)
else
fuzz fuzz-build:
	@echo "make fuzz needs clang with libFuzzer (apt-get install clang libclang-rt-14-dev)," >&2
	@echo "then configure again (FUZZ_CC=... to name another compiler)." >&2
	@exit 1
endif
clean-local: clean-fuzz
clean-fuzz:
	-rm -rf tests/fuzz/obj tests/fuzz/logs tests/fuzz/work tests/fuzz/artifacts
	-rm -f $(FUZZ_LIB) $(FUZZ_BINS)
	-rm -rf tests/valgrind-logs

