/* check_streaming.c: the Check runner for the streaming-response suites (tests/check_streaming). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>

#include "check_streaming.h"

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
	sr = srunner_create(streaming_body_suite());
	srunner_add_suite(sr, streaming_live_suite());
	/* CK_FORK (Check's default): each test in its own process, with its own
	 * daemon, so a crash, a hang or a leak report belongs to one test. */
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	curl_global_cleanup();
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
