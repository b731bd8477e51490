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

/* One test of a test case: _i runs over [from, to); to 0: a plain test
 * (one run, _i 0). */
struct ck_test {
	const TTest *test;
	int from, to;
};

#define CK_MAX_TESTS 12

/* A test case: its name, its timeout in seconds (0: Check's default) and
 * its tests, up to the first empty row. */
struct ck_case {
	const char *name;
	int timeout_s;
	struct ck_test tests[CK_MAX_TESTS];
};

/* The suite name made of cases[0..n) (check_main.c). */
Suite *ck_suite(const char *name, const struct ck_case *cases, size_t n);

/* check_core (src/ only): */
Suite *backend_suite(void); /* check_backend.c: one-shot round trips, levels, ENOSPC */
Suite *stream_suite(void);  /* check_stream.c: streaming, sync flushes, tiny windows */
Suite *alloc_suite(void);   /* check_alloc.c: allocator hook, fault injection */
Suite *pool_suite(void);    /* check_pool.c: the compressor pool */
Suite *pump_suite(void);    /* check_pump.c: the stream pump (gz_stream.c) */
Suite *codings_suite(void); /* check_codings.c: zstd and brotli backends, reference decoders */
Suite *inflate_suite(void); /* check_inflate.c: the request body inflater (gz_inflate.c) */

/* check_handler: */
Suite *negotiate_suite(void); /* check_negotiate.c: pure functions, the selection */
/* The "e2e" suite: buffer responses through a real daemon and libcurl. */
struct ck_case hnd_headers_case(void);  /* check_hnd_headers.c: headers kept, Vary, HEAD, 204/304 */
struct ck_case hnd_etag_case(void);     /* check_hnd_etag.c: ETag policies, conditional requests */
struct ck_case hnd_decision_case(void); /* check_hnd_decision.c: what is compressed and why not */
struct ck_case
hnd_buffer_case(void); /* check_hnd_buffer.c: shared, memory modes, stats, faults, backends */
struct ck_case hnd_threads_case(void); /* check_hnd_threads.c: eight client threads at once */
struct ck_case hnd_wire_case(void);    /* check_hnd_wire.c: exact bytes, pipelining (raw socket) */
struct ck_case hnd_ctors_case(void);   /* check_hnd_ctors.c: every body constructor twin */
struct ck_case hnd_memo_case(void);    /* check_hnd_memo.c: gzip lengths by strong ETag */
struct ck_case hnd_filecache_case(void); /* check_hnd_filecache.c: coded files across responses */
struct ck_case hnd_store_case(void);     /* check_hnd_store.c: the store of coded bytes, unit */
struct ck_case hnd_breach_case(void);    /* check_hnd_breach.c: BREACH length hiding */
struct ck_case hnd_breach_attack_case(void); /* check_hnd_breach.c: the attack, 200 trials */
struct ck_case hnd_codings_case(void);       /* check_hnd_codings.c: zstd, br: negotiation, rules */
struct ck_case hnd_upload_case(void);        /* check_hnd_upload.c: gzip request bodies, limits */
struct ck_case hnd_dict_case(void);          /* check_hnd_dict.c: RFC 9842 dictionaries, dcz */
/* The "fidelity" suite: what mhdgz queues differs from the application's
 * response only by its coding, on the wire (raw socket, pipelined). */
Suite *fidelity_suite(void); /* check_hnd_fidelity.c: HEAD, 1xx/204/304, 206, flags, digests */

/* check_streaming: the suite "streaming_body", */
struct ck_case
stream_roundtrip_case(void); /* check_hnd_stream_roundtrip.c: chunk sizes, backends */
struct ck_case
stream_decision_case(void); /* check_hnd_stream_decision.c: what is compressed, headers */
struct ck_case stream_file_case(void); /* check_hnd_stream_file.c: file responses */
struct ck_case stream_edge_case(void); /* check_hnd_stream_edge.c: short, empty, ETag, trailers */
/* and the suite "streaming_live": */
struct ck_case
stream_reader_case(void); /* check_hnd_stream_reader.c: readers returning 0, errors */
struct ck_case stream_latency_case(void); /* check_hnd_stream_latency.c: SSE, flushes, API */
struct ck_case stream_shared_case(void); /* check_hnd_stream_shared.c: one response, many clients */
struct ck_case
stream_lifetime_case(void);              /* check_hnd_stream_lifetime.c: disconnects, stops, HEAD */
struct ck_case stream_alloc_case(void);  /* check_hnd_stream_reader.c: allocation failures */
struct ck_case stream_memory_case(void); /* check_hnd_stream_lifetime.c: 1 GiB in bounded memory */

/* check_faults: */
Suite *faults_suite(void); /* check_faults.c: allocation failures on files, 304s, Vary, streams */

/* check_gzserve: */
Suite *gzserve_suite(void); /* check_gzserve.c: the gzserve binary with libcurl */

#endif /* CHECK_SUITES_H */
