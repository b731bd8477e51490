/* check_main.c: the one Check runner; each test binary builds it with the CHECK_BIN_* of the suites it links. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "check_suites.h"

#ifndef CHECK_BIN_CORE
/* Only the core binary goes without libcurl (it builds with -I src alone). */
#include <curl/curl.h>
#define CHECK_USES_CURL 1
#endif

#if defined(CHECK_BIN_HANDLER) || defined(CHECK_BIN_STREAMING)
/* A suite of test cases made by parts[0..n), each with the daemon
 * suites' timeout. */
static Suite *
suite_of(const char *name, TCase *(*const *parts)(void), size_t n)
{
	Suite *s = suite_create(name);

	for (size_t i = 0; i < n; i++) {
		TCase *tc = parts[i]();

		tcase_set_timeout(tc, CK_CASE_TIMEOUT);
		suite_add_tcase(s, tc);
	}
	return s;
}
#define SUITE_OF(name, parts) suite_of((name), (parts), sizeof(parts) / sizeof((parts)[0]))
#endif

#ifdef CHECK_BIN_HANDLER
static Suite *
e2e_suite(void)
{
	static TCase *(*const parts[])(void) = {
		hnd_headers_tcase, hnd_etag_tcase,    hnd_decision_tcase,
		hnd_buffer_tcase,  hnd_threads_tcase, hnd_wire_tcase,
	};

	return SUITE_OF("e2e", parts);
}
#endif

#ifdef CHECK_BIN_STREAMING
static Suite *
streaming_body_suite(void)
{
	static TCase *(*const parts[])(void) = {
		stream_roundtrip_tcase, stream_decision_tcase, stream_file_tcase, stream_edge_tcase,
	};

	return SUITE_OF("streaming_body", parts);
}

static Suite *
streaming_live_suite(void)
{
	static TCase *(*const parts[])(void) = {
		stream_reader_tcase,   stream_latency_tcase, stream_shared_tcase,
		stream_lifetime_tcase, stream_alloc_tcase,   stream_memory_tcase,
	};

	return SUITE_OF("streaming_live", parts);
}
#endif

static Suite *(*const suites[])(void) = {
#ifdef CHECK_BIN_CORE
	backend_suite, stream_suite, alloc_suite, pool_suite,
#endif
#ifdef CHECK_BIN_HANDLER
	negotiate_suite, e2e_suite,
#endif
#ifdef CHECK_BIN_STREAMING
	streaming_body_suite, streaming_live_suite,
#endif
#ifdef CHECK_BIN_FAULTS
	faults_suite,
#endif
#ifdef CHECK_BIN_GZSERVE
	gzserve_suite,
#endif
};

int
main(void)
{
	SRunner *sr;
	int failed;

#ifdef CHECK_USES_CURL
	/* libcurl's global state must be set up once, before any thread. */
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		fprintf(stderr, "curl_global_init failed\n");
		return EXIT_FAILURE;
	}
	/* A peer that closes mid-write (gzserve on SIGTERM, a raw-socket
	 * test) must fail a check, not kill the runner. */
	signal(SIGPIPE, SIG_IGN);
#endif
	sr = srunner_create(NULL);
	for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++)
		srunner_add_suite(sr, suites[i]());
	/* CK_ENV: CK_VERBOSITY, CK_FORK (Check's default: each test in its
	 * own process, so an installed allocator, a crash or a leak report
	 * belongs to one test), CK_RUN_SUITE and CK_RUN_CASE apply. */
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
#ifdef CHECK_USES_CURL
	curl_global_cleanup();
#endif
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
