/* check_alloc.c: Check suite for the core allocator hook: gz_alloc_set_hook, fault injection, warm paths. */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gz_error.h"
#include "gz_alloc.h"
#include "gz_backend.h"
#include "check_suites.h"
#include "testutil.h"

/* Bodies used by the work done after creation, in bytes. */
#define WORK_LEN 30000

/* Case _i -> (backend, one of min/default/max level). */
static void
case_at(int i, const struct gz_backend **be_ret, int *level_ret)
{
	const struct gz_backend *be = gz_backends[i / 3];
	const int levels[] = { be->level_min, be->level_default, be->level_max };

	*be_ret = be;
	*level_ret = levels[i % 3];
}

/* A second, minimal allocator to see which hook is in use. */
static uint64_t my_mallocs, my_frees;
static void *my_cls_seen;

static void *
my_malloc(size_t n, void *cls)
{
	my_mallocs++;
	my_cls_seen = cls;
	return malloc(n);
}

static void
my_free(void *p, void *cls)
{
	my_frees++;
	my_cls_seen = cls;
	free(p);
}

START_TEST(test_set_allocator_einval)
{
	/* One function without the other is refused (the public wrapper's
	 * struct size check is tested in check_negotiate.c). */
	ck_assert_int_eq(gz_alloc_set_hook(NULL, my_free, NULL), GZ_EINVAL);
	ck_assert_int_eq(gz_alloc_set_hook(my_malloc, NULL, NULL), GZ_EINVAL);

	/* None of those took effect: the default allocator is still in use. */
	my_mallocs = 0;
	gz_free(gz_malloc(10));
	ck_assert_uint_eq(my_mallocs, 0);

	/* EINVAL wins over EBUSY: the argument is checked first. */
	{
		void *p = gz_malloc(1);

		ck_assert_int_eq(gz_alloc_set_hook(my_malloc, NULL, NULL), GZ_EINVAL);
		gz_free(p);
	}
}
END_TEST

START_TEST(test_set_allocator_hook)
{
	int tag;
	void *p;

	my_mallocs = my_frees = 0;
	ck_assert_int_eq(gz_alloc_set_hook(my_malloc, my_free, &tag), 0);
	p = gz_malloc(100);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(my_mallocs, 1);
	ck_assert_ptr_eq(my_cls_seen, &tag);
	ck_assert_int_eq(gz_alloc_live(), 1);
	gz_free(p);
	ck_assert_uint_eq(my_frees, 1);
	ck_assert_int_eq(gz_alloc_live(), 0);

	/* zlib's and libdeflate's state come through the hook too. */
	{
		struct gz_compressor *c = NULL;
		size_t i;

		for (i = 0; gz_backends[i]; i++) {
			uint64_t before = my_mallocs;

			ck_assert_int_eq(gz_compressor_new(gz_backends[i],
							   gz_backends[i]->level_default, &c),
					 0);
			ck_assert_uint_gt(my_mallocs, before);
			gz_compressor_free(c);
			ck_assert_uint_eq(my_frees, my_mallocs);
		}
	}

	/* NULL restores malloc/free. */
	ck_assert_int_eq(gz_alloc_set_hook(NULL, NULL, NULL), 0);
	my_mallocs = 0;
	gz_free(gz_malloc(100));
	ck_assert_uint_eq(my_mallocs, 0);
	ck_assert_int_eq(gz_alloc_live(), 0);
}
END_TEST

/* No switch while a block made by the current allocator is live. */
START_TEST(test_set_allocator_ebusy)
{
	const struct gz_backend *be = gz_backends[_i];
	struct gz_compressor *c = NULL;
	void *p;

	tu_alloc_install(0);
	ck_assert_int_eq(gz_compressor_new(be, be->level_default, &c), 0);
	ck_assert_int_gt(gz_alloc_live(), 0);
	ck_assert_int_eq(gz_alloc_set_hook(NULL, NULL, NULL), GZ_EBUSY);
	ck_assert_int_eq(gz_alloc_set_hook(my_malloc, my_free, NULL), GZ_EBUSY);
	/* Still the counting allocator: the refused calls changed nothing. */
	p = gz_malloc(8);
	ck_assert_int_eq(tu_alloc_live(), gz_alloc_live());
	gz_free(p);
	gz_compressor_free(c);
	ck_assert_int_eq(tu_alloc_live(), 0);
	ck_assert_int_eq(gz_alloc_live(), 0);
	ck_assert_int_eq(gz_alloc_set_hook(my_malloc, my_free, NULL), 0);
	ck_assert_int_eq(gz_alloc_set_hook(NULL, NULL, NULL), 0);
}
END_TEST

START_TEST(test_alloc_helpers)
{
	char *s;
	void *p;
	uint8_t *z;
	size_t i;

	tu_alloc_install(0);
	/* Overflowing count * size fails without asking the allocator. */
	ck_assert_ptr_null(gz_calloc(SIZE_MAX / 2, 4));
	ck_assert_ptr_null(gz_calloc(SIZE_MAX, SIZE_MAX));
	ck_assert_uint_eq(tu_alloc_count(), 0);

	z = gz_calloc(100, 3);
	ck_assert_ptr_nonnull(z);
	for (i = 0; i < 300; i++)
		ck_assert_uint_eq(z[i], 0);
	gz_free(z);

	/* 0 bytes still gives a unique block, so NULL always means failure. */
	p = gz_malloc(0);
	ck_assert_ptr_nonnull(p);
	gz_free(p);
	p = gz_calloc(0, 10);
	ck_assert_ptr_nonnull(p);
	gz_free(p);
	gz_free(NULL);

	s = gz_strndup("hello", 3);
	ck_assert_str_eq(s, "hel");
	gz_free(s);
	s = gz_strndup("hi", 10);
	ck_assert_str_eq(s, "hi");
	gz_free(s);
	s = gz_strndup("", 0);
	ck_assert_str_eq(s, "");
	gz_free(s);

	p = gz_zalloc(NULL, 10, 20);
	ck_assert_ptr_nonnull(p);
	memset(p, 1, 200);
	gz_zfree(NULL, p);
	ck_assert_uint_eq(tu_alloc_count(), 7);

	/* Failures are passed through as NULL. */
	tu_alloc_install(1);
	ck_assert_ptr_null(gz_malloc(10));
	tu_alloc_install(1);
	ck_assert_ptr_null(gz_calloc(2, 10));
	tu_alloc_install(1);
	ck_assert_ptr_null(gz_strndup("abc", 3));
	tu_alloc_install(1);
	ck_assert_ptr_null(gz_zalloc(NULL, 2, 2));
	ck_assert_int_eq(tu_alloc_live(), 0);
	ck_assert_int_eq(gz_alloc_live(), 0);
	tu_alloc_uninstall();
}
END_TEST

/* Allocations a compressor's creation makes, exactly (zlib 1.2.13 and
 * 1.3.1: the five blocks of deflateInit2; libdeflate: one block, through its
 * per-compressor allocator where libdeflate_alloc_compressor_ex exists, else
 * through the process-wide one the hook routed; ISA-L: the level buffer for
 * levels 1-3), each plus the instance itself. test_fault_injection fails
 * each of them in turn on either libdeflate path. */
static uint64_t
expected_create_allocs(const struct gz_backend *be, int level)
{
	if (be == &gz_backend_zlib)
		return 1 + 5;
#ifdef HAVE_LIBDEFLATE
	if (be == &gz_backend_libdeflate)
		return 1 + 1;
#endif
	return level == 1 ? 1 : 1 + 1; /* isal: no level buffer at igzip level 0 */
}

START_TEST(test_create_counts)
{
	const struct gz_backend *be;
	struct gz_compressor *c = NULL;
	int level;

	case_at(_i, &be, &level);
	tu_alloc_install(0);
	ck_assert_int_eq(gz_compressor_new(be, level, &c), 0);
	ck_assert_uint_eq(tu_alloc_count(), expected_create_allocs(be, level));
	ck_assert_int_eq(tu_alloc_live(), (int64_t)expected_create_allocs(be, level));
	ck_assert_int_eq(gz_alloc_live(), tu_alloc_live());
	gz_compressor_free(c);
	ck_assert_int_eq(tu_alloc_live(), 0);
	ck_assert_int_eq(gz_alloc_live(), 0);
	tu_alloc_uninstall();
}
END_TEST

/* What a compressor is used for after creation: one-shot, and a streamed
 * member with sync flushes where supported. Returns 0 or the first error. */
static int
do_work(struct gz_compressor *c, const uint8_t *body, uint8_t *out, size_t out_cap)
{
	size_t out_len = 0;
	int rc;

	rc = c->be->compress(c, body, WORK_LEN, out, out_cap, &out_len);
	if (rc < 0)
		return rc;
	if (tu_check_member(out, out_len, body, WORK_LEN) != 0)
		return -100;
	if (c->be->caps & GZ_CAP_STREAM) {
		struct gz_io io = {
			.in = body, .in_len = WORK_LEN / 2, .out = out, .out_cap = out_cap
		};

		rc = c->be->reset(c);
		if (rc < 0)
			return rc;
		rc = c->be->stream(c, &io, GZ_FLUSH_SYNC);
		if (rc < 0)
			return rc;
		io.in_len = WORK_LEN - WORK_LEN / 2;
		rc = c->be->stream(c, &io, GZ_FLUSH_NONE);
		if (rc < 0)
			return rc;
		do
			rc = c->be->stream(c, &io, GZ_FLUSH_FINISH);
		while (rc == 0);
		if (rc != GZ_STREAM_END)
			return rc < 0 ? rc : -101;
		if (tu_check_member(out, (size_t)(io.out - out), body, WORK_LEN) != 0)
			return -102;
	}
	return 0;
}

/* Make each allocation of create + work fail in turn: a clean error,
 * nothing left allocated, and success once no failure is injected. */
START_TEST(test_fault_injection)
{
	const struct gz_backend *be;
	struct gz_compressor *sentinel = (struct gz_compressor *)(uintptr_t)0x1;
	struct gz_compressor *c = NULL;
	uint8_t *body = tu_payload(WORK_LEN, TU_TEXT, 3);
	size_t out_cap = WORK_LEN * 2 + 1024;
	uint8_t *out = malloc(out_cap);
	uint64_t k, kk;
	int level, rc;

	case_at(_i, &be, &level);
	ck_assert_ptr_nonnull(out);

	tu_alloc_install(0);
	ck_assert_int_eq(gz_compressor_new(be, level, &c), 0);
	ck_assert_int_eq(do_work(c, body, out, out_cap), 0);
	k = tu_alloc_count();
	gz_compressor_free(c);
	ck_assert_int_eq(tu_alloc_live(), 0);
	ck_assert_uint_eq(k, expected_create_allocs(be, level));

	for (kk = 1; kk <= k; kk++) {
		tu_alloc_install(kk);
		c = sentinel;
		rc = gz_compressor_new(be, level, &c);
		if (rc == 0) {
			/* Only reachable if work allocated, which it must not;
			 * still exercise the error path cleanly. */
			rc = do_work(c, body, out, out_cap);
			gz_compressor_free(c);
			ck_abort_msg("%s level %d: allocation %llu happened after creation (rc %d)",
				     be->name, level, (unsigned long long)kk, rc);
		}
		ck_assert_msg(rc == GZ_ENOMEM || rc == GZ_EBACKEND,
			      "%s level %d, failing allocation %llu: rc %d", be->name, level,
			      (unsigned long long)kk, rc);
		/* Every allocation here is a state block; all report ENOMEM. */
		ck_assert_int_eq(rc, GZ_ENOMEM);
		ck_assert_ptr_eq(c, sentinel);
		ck_assert_int_eq(tu_alloc_failed(), 1);
		ck_assert_int_eq(tu_alloc_live(), 0);
		ck_assert_int_eq(gz_alloc_live(), 0);
	}

	/* One past the last allocation: nothing fails. */
	tu_alloc_install(k + 1);
	ck_assert_int_eq(gz_compressor_new(be, level, &c), 0);
	ck_assert_int_eq(do_work(c, body, out, out_cap), 0);
	ck_assert_int_eq(tu_alloc_failed(), 0);
	gz_compressor_free(c);
	ck_assert_int_eq(tu_alloc_live(), 0);
	tu_alloc_uninstall();
	free(out);
	free(body);
}
END_TEST

/* After warm-up (one large body and one small one: zlib makes its
 * small-body stream at the first small body), compressing allocates
 * nothing: 100 one-shot compressions of varied bodies, and 100 streamed
 * members, with one compressor. */
START_TEST(test_warm_no_alloc)
{
	const struct gz_backend *be;
	struct gz_compressor *c = NULL;
	const size_t max_len = 100000;
	uint8_t *body = tu_payload(max_len, TU_JSON, 8);
	size_t out_cap, out_len = 0;
	uint8_t *out;
	uint64_t warm;
	int level, i;

	case_at(_i, &be, &level);
	tu_alloc_install(0);
	ck_assert_int_eq(gz_compressor_new(be, level, &c), 0);
	out_cap = gz_bound(c, max_len);
	out = malloc(out_cap); /* the test's own buffer, not through the hook */
	ck_assert_ptr_nonnull(out);
	ck_assert_int_eq(c->be->compress(c, body, max_len, out, out_cap, &out_len), 0);
	ck_assert_int_eq(c->be->compress(c, body, 1000, out, out_cap, &out_len), 0);
	warm = tu_alloc_count();

	for (i = 0; i < 100; i++) {
		size_t len = (size_t)i * 997 % max_len;

		ck_assert_int_eq(c->be->compress(c, body, len, out, out_cap, &out_len), 0);
		ck_assert_int_eq(tu_check_member(out, out_len, body, len), 0);
	}
	ck_assert_uint_eq(tu_alloc_count(), warm);

	if (c->be->caps & GZ_CAP_STREAM) {
		for (i = 0; i < 100; i++) {
			size_t len = (size_t)i * 1009 % max_len;
			struct gz_io io = {
				.in = body, .in_len = len / 3, .out = out, .out_cap = out_cap
			};
			int rc;

			ck_assert_int_eq(c->be->reset(c), 0);
			ck_assert_int_eq(c->be->stream(c, &io, GZ_FLUSH_SYNC), 0);
			io.in_len = len - len / 3;
			ck_assert_int_eq(c->be->stream(c, &io, GZ_FLUSH_NONE), 0);
			do
				rc = c->be->stream(c, &io, GZ_FLUSH_FINISH);
			while (rc == 0);
			ck_assert_int_eq(rc, GZ_STREAM_END);
			ck_assert_int_eq(tu_check_member(out, (size_t)(io.out - out), body, len),
					 0);
		}
		ck_assert_uint_eq(tu_alloc_count(), warm);
	}
	gz_compressor_free(c);
	ck_assert_int_eq(tu_alloc_live(), 0);
	tu_alloc_uninstall();
	free(out);
	free(body);
}
END_TEST

/* A scratch growth that fails keeps the old scratch. */
START_TEST(test_scratch_enomem)
{
	struct gz_compressor *c = NULL;
	uint8_t *old;

	tu_alloc_install(0);
	ck_assert_int_eq(gz_compressor_new(&gz_backend_zlib, 1, &c), 0);
	ck_assert_int_eq(gz_compressor_scratch(c, 100), 0);
	old = c->scratch;
	tu_alloc_fail_at(1);
	ck_assert_int_eq(gz_compressor_scratch(c, 200), GZ_ENOMEM);
	ck_assert_int_eq(tu_alloc_failed(), 1);
	ck_assert_ptr_eq(c->scratch, old);
	ck_assert_uint_eq(c->scratch_cap, 100);
	gz_compressor_free(c);
	ck_assert_int_eq(tu_alloc_live(), 0);
	tu_alloc_uninstall();
}
END_TEST

Suite *
alloc_suite(void)
{
	int nb = (int)tu_backend_count();
	const struct ck_case cases[] = {
		{ "hook",
		  0,
		  { { test_set_allocator_einval, 0, 0 },
		    { test_set_allocator_hook, 0, 0 },
		    { test_set_allocator_ebusy, 0, nb },
		    { test_alloc_helpers, 0, 0 } } },
		{ "faults",
		  60,
		  { { test_create_counts, 0, nb * 3 },
		    { test_fault_injection, 0, nb * 3 },
		    { test_scratch_enomem, 0, 0 } } },
		{ "warm", 60, { { test_warm_no_alloc, 0, nb * 3 } } },
	};

	return ck_suite("alloc", cases, sizeof cases / sizeof cases[0]);
}
