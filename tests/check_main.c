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

Suite *
ck_suite(const char *name, const struct ck_case *cases, size_t n)
{
	Suite *s = suite_create(name);

	for (size_t i = 0; i < n; i++) {
		TCase *tc = tcase_create(cases[i].name);

		if (cases[i].timeout_s > 0)
			tcase_set_timeout(tc, cases[i].timeout_s);
		for (size_t k = 0; k < CK_MAX_TESTS && cases[i].tests[k].test; k++) {
			const struct ck_test *t = &cases[i].tests[k];

			tcase_add_loop_test(tc, t->test, t->from, t->to ? t->to : 1);
		}
		suite_add_tcase(s, tc);
	}
	return s;
}

/* A suite made of test cases from several files: each part returns one. */
/* Most cases one composed suite holds. */
#define CK_MAX_PARTS 16

struct composed {
	const char *name;
	struct ck_case (*parts[CK_MAX_PARTS])(void); /* up to the first NULL */
};

static const struct composed composed[] = {
#ifdef CHECK_BIN_HANDLER
	/* buffer responses through a real daemon and libcurl */
	{ "e2e",
	  { hnd_headers_case, hnd_etag_case, hnd_decision_case, hnd_buffer_case, hnd_threads_case,
	    hnd_wire_case, hnd_ctors_case, hnd_memo_case, hnd_filecache_case, hnd_store_case,
	    hnd_breach_case, hnd_breach_attack_case, hnd_codings_case, hnd_upload_case,
	    hnd_dict_case } },
#endif
#ifdef CHECK_BIN_STREAMING
	{ "streaming_body",
	  { stream_roundtrip_case, stream_decision_case, stream_file_case, stream_edge_case } },
	{ "streaming_live",
	  { stream_reader_case, stream_latency_case, stream_shared_case, stream_lifetime_case,
	    stream_alloc_case, stream_memory_case } },
#endif
	{ NULL, { NULL } },
};

static Suite *
composed_suite(const struct composed *c)
{
	struct ck_case cases[CK_MAX_PARTS];
	size_t n = 0;

	while (n < CK_MAX_PARTS && c->parts[n]) {
		cases[n] = c->parts[n]();
		n++;
	}
	return ck_suite(c->name, cases, n);
}

static Suite *(*const suites[])(void) = {
#ifdef CHECK_BIN_CORE
	backend_suite,
	stream_suite,
	alloc_suite,
	pool_suite,
	pump_suite,
	codings_suite,
	inflate_suite,
#endif
#ifdef CHECK_BIN_HANDLER
	negotiate_suite,
	fidelity_suite,
#endif
#ifdef CHECK_BIN_FAULTS
	faults_suite,
#endif
#ifdef CHECK_BIN_GZSERVE
	gzserve_suite,
#endif
	NULL,
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
	for (size_t i = 0; suites[i]; i++)
		srunner_add_suite(sr, suites[i]());
	for (const struct composed *c = composed; c->name; c++)
		srunner_add_suite(sr, composed_suite(c));
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
