/* check_hnd_ctors.c: the constructor twins on failure: ownership stays the caller's, as with libmicrohttpd (their wire behaviour: check_hnd_fidelity.c). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_suites.h"
#include "harness.h"
#include "testutil.h"

/* Runs of the free callback. */
struct ct_fix {
	_Atomic int frees;
};

static struct ct_fix *ct_current;

static void
ct_free(void *arg)
{
	(void)arg;
	atomic_fetch_add(&ct_current->frees, 1);
}

/* On failure (no handler, a NULL body with a size) nothing changes hands,
 * as with libmicrohttpd: no free callback runs, and a pipe's descriptor is
 * still the caller's to close. */
START_TEST(test_twins_fail)
{
	struct ct_fix f = { 0 };
	struct MHD_IoVec iov = { .iov_base = NULL, .iov_len = 5 };
	int p[2];

	ct_current = &f;
	ck_assert_ptr_null(mhdgz_response_from_buffer_with_free_callback(NULL, 3, "abc", ct_free));
	ck_assert_ptr_null(mhdgz_response_from_buffer_with_free_callback_cls(NULL, 3, "abc",
									     ct_free, &f));
	ck_assert_ptr_null(mhdgz_response_from_iovec(NULL, &iov, 1, ct_free, &f));
	ck_assert_int_eq(atomic_load(&f.frees), 0);
	{
		struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);

		ck_assert_ptr_null(mhdgz_response_from_iovec(gz, &iov, 1, ct_free, &f));
		ck_assert_ptr_null(mhdgz_response_from_buffer_with_free_callback(gz, 3, NULL,
										 ct_free));
		ck_assert_int_eq(atomic_load(&f.frees), 0);
		mhdgz_free(gz);
	}
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_ptr_null(mhdgz_response_from_pipe(NULL, p[0]));
	ck_assert_int_ne(fcntl(p[0], F_GETFD), -1);
	ck_assert_int_eq(close(p[0]), 0);
	ck_assert_int_eq(close(p[1]), 0);
}
END_TEST

struct ck_case
hnd_ctors_case(void)
{
	return (struct ck_case){ "ctors", CK_CASE_TIMEOUT, { { test_twins_fail, 0, 0 } } };
}
