/* check_core.c: runner for the core (src/) suites: backends, streaming, allocator, pool. */
#include "config.h"

#include <check.h>
#include <stdlib.h>

#include "check_core.h"

int
main(void)
{
	SRunner *sr = srunner_create(backend_suite());
	int failed;

	srunner_add_suite(sr, stream_suite());
	srunner_add_suite(sr, alloc_suite());
	srunner_add_suite(sr, pool_suite());
	/* CK_ENV: CK_VERBOSITY, CK_FORK, CK_RUN_SUITE and CK_RUN_CASE apply. */
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
