/* check_handler.c: the Check runner for the handler suites (tests/check_handler). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>

#include "check_handler.h"

int
main(void)
{
	SRunner *sr;
	int failed;

	/* libcurl's global state must be set up once, before any thread. */
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		fprintf(stderr, "curl_global_init failed\n");
		return EXIT_FAILURE;
	}
	sr = srunner_create(negotiate_suite());
	srunner_add_suite(sr, e2e_suite());
	/* CK_FORK (Check's default, overridable with CK_FORK=no): each test in
	 * its own process, so an installed allocator, a crash or a leak report
	 * belongs to one test. */
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	curl_global_cleanup();
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
