/* check_suites.h: every Check suite and test case of the test binaries, for the one runner (tests/check_main.c). */
#ifndef CHECK_SUITES_H
#define CHECK_SUITES_H

#include <check.h>

/*
 * Per-test-case timeout in seconds for the suites that run a daemon.
 * Generous: the end-to-end tests make thousands of real requests and move
 * tens of MiB, and an ASan+UBSan build on a small machine is several times
 * slower than a plain one. Every wait inside a test is bounded well below
 * it, so a hang still fails.
 */
#ifndef CK_CASE_TIMEOUT
#define CK_CASE_TIMEOUT 300
#endif

/* check_core (src/ only): */
Suite *backend_suite(void); /* check_backend.c: one-shot round trips, levels, ENOSPC */
Suite *stream_suite(void);  /* check_stream.c: streaming, sync flushes, tiny windows */
Suite *alloc_suite(void);   /* check_alloc.c: allocator hook, fault injection */
Suite *pool_suite(void);    /* check_pool.c: the compressor pool */

/* check_handler: */
Suite *negotiate_suite(void); /* check_negotiate.c: pure functions, mhdgz_select() */
/* The "e2e" suite: buffer responses through a real daemon and libcurl. */
TCase *hnd_headers_tcase(void);  /* check_hnd_headers.c: headers kept, Vary, HEAD, 204/304 */
TCase *hnd_etag_tcase(void);     /* check_hnd_etag.c: ETag policies, conditional requests */
TCase *hnd_decision_tcase(void); /* check_hnd_decision.c: what is compressed and why not */
TCase *hnd_buffer_tcase(void);   /* check_hnd_buffer.c: shared, memory modes, stats, faults, backends */
TCase *hnd_threads_tcase(void);  /* check_hnd_threads.c: eight client threads at once */
TCase *hnd_wire_tcase(void);     /* check_hnd_wire.c: exact bytes, pipelining (raw socket) */

/* check_streaming: the suite "streaming_body", */
TCase *stream_roundtrip_tcase(void); /* check_hnd_stream_roundtrip.c: chunk sizes, backends */
TCase *stream_decision_tcase(void);  /* check_hnd_stream_decision.c: what is compressed, headers */
TCase *stream_file_tcase(void);      /* check_hnd_stream_file.c: file responses */
TCase *stream_edge_tcase(void);      /* check_hnd_stream_edge.c: short, empty, ETag, trailers */
/* and the suite "streaming_live": */
TCase *stream_reader_tcase(void);   /* check_hnd_stream_reader.c: readers returning 0, errors */
TCase *stream_latency_tcase(void);  /* check_hnd_stream_latency.c: SSE, flushes, API */
TCase *stream_shared_tcase(void);   /* check_hnd_stream_shared.c: one response, many clients */
TCase *stream_lifetime_tcase(void); /* check_hnd_stream_lifetime.c: disconnects, stops, HEAD */
TCase *stream_alloc_tcase(void);    /* check_hnd_stream_reader.c: allocation failures */
TCase *stream_memory_tcase(void);   /* check_hnd_stream_lifetime.c: 1 GiB in bounded memory */

/* check_faults: */
Suite *faults_suite(void); /* check_faults.c: allocation failures on files, 304s, Vary, streams */

/* check_gzserve: */
Suite *gzserve_suite(void); /* check_gzserve.c: the gzserve binary with libcurl */

#endif /* CHECK_SUITES_H */
