/* check_hnd_store.c: unit tests of the store of coded bytes and lengths (hnd_store.c): keys, LRU at the budget, freshness, body lifetime, not-smaller items, exact counters. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hnd_handle.h" /* first: mhdgz.h as the library sees it; the store */
#include "hnd_store.h"
#include "check_suites.h"
#include "harness.h"
#include "testutil.h"

/* A handle whose store has budget bytes (0: the default, no file
 * versions) and remembers files changed just now (racy_ns 0). */
static struct mhdgz *
st_gz(size_t budget)
{
	struct mhdgz_options o = th_opts();
	struct mhdgz *gz;

	o.limits.store_nbytes = budget;
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	gz->store.racy_ns = 0;
	return gz;
}

/* A response-named key coded gzip at level 6, whole. */
static void
st_key(struct hnd_store_key *k, uint64_t id)
{
	hnd_store_key_response(k, id);
	hnd_store_key_coding(k, GZ_CODING_GZIP, 6, false, HND_SM_WHOLE, NULL);
}

/* A body of len bytes, each c. */
static struct hnd_body *
st_body(size_t len, int c)
{
	struct hnd_body *b = hnd_body_new(NULL, len);

	ck_assert_ptr_nonnull(b);
	memset(b->data, c, len);
	return b;
}

/* Put body b (or a length) under k; the caller keeps its reference. */
static bool
st_put(struct mhdgz *gz, const struct hnd_store_key *k, struct hnd_body *b, uint64_t len)
{
	struct hnd_store_val v = { .body = b, .len = b ? b->len : len };

	return hnd_store_put(gz, k, &v, -1);
}

/* Is k held? Drops the reference a hit returns. */
static bool
st_has(struct mhdgz *gz, const struct hnd_store_key *k)
{
	struct hnd_store_val v;

	if (!hnd_store_get(gz, k, &v))
		return false;
	if (v.body)
		hnd_body_unref(v.body);
	return true;
}

/*
 * Every key field tells two keys apart: the name's kind, the response id,
 * each field of a file version, an ETag's identity length and text, and
 * the coding part (coding, level, padding, mode, dictionary). Each variant
 * put beside the base misses the base's value and hits its own. A weak, a
 * malformed and a too long ETag name nothing.
 */
START_TEST(test_store_key_fields)
{
	struct mhdgz *gz = st_gz(0);
	struct hnd_store_key base, k;
	const struct mhdgz_dictionary *dict = (const void *)&base; /* only compared */
	char path[] = "/tmp/mhdgz-st-XXXXXX", tag[200];
	int fd = mkstemp(path);
	uint64_t len;
	struct hnd_store_val v;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "abc", 3), 3);
	/* the response name and the coding part */
	st_key(&base, 7);
	ck_assert(hnd_store_key_eq(&base, &base));
	st_key(&k, 7);
	ck_assert(hnd_store_key_eq(&base, &k));
	st_key(&k, 8);
	ck_assert(!hnd_store_key_eq(&base, &k));
	for (int field = 0; field < 5; field++) {
		st_key(&k, 7);
		hnd_store_key_coding(&k, field == 0 ? GZ_CODING_ZSTD : GZ_CODING_GZIP,
				     field == 1 ? 9 : 6, field == 2,
				     field == 3 ? HND_SM_STREAM : HND_SM_WHOLE,
				     field == 4 ? dict : NULL);
		ck_assert_msg(!hnd_store_key_eq(&base, &k), "coding field %d", field);
	}
	/* a file version: each field */
	ck_assert(hnd_store_key_file(&base, fd, 0, 3));
	hnd_store_key_coding(&base, GZ_CODING_GZIP, 6, false, HND_SM_WHOLE, NULL);
	for (int field = 0; field < 9; field++) {
		ck_assert(hnd_store_key_file(&k, fd, 0, 3));
		hnd_store_key_coding(&k, GZ_CODING_GZIP, 6, false, HND_SM_WHOLE, NULL);
		ck_assert(hnd_store_key_eq(&base, &k));
		switch (field) {
		case 0:
			k.u.file.dev++;
			break;
		case 1:
			k.u.file.ino++;
			break;
		case 2:
			k.u.file.size++;
			break;
		case 3:
			k.u.file.mtime_s++;
			break;
		case 4:
			k.u.file.mtime_ns++;
			break;
		case 5:
			k.u.file.ctime_s++;
			break;
		case 6:
			k.u.file.ctime_ns++;
			break;
		case 7:
			k.u.file.offset++;
			break;
		default:
			k.u.file.len++;
			break;
		}
		ck_assert_msg(!hnd_store_key_eq(&base, &k), "file field %d", field);
	}
	ck_assert(!hnd_store_key_file(&k, -1, 0, 3));
	/* a response id is not a file version, nor an ETag */
	st_key(&k, 7);
	ck_assert(!hnd_store_key_eq(&base, &k));
	/* ETags: strong ones only, the identity length part of the key */
	ck_assert(hnd_store_key_etag(&base, "\"e1\"", 100, 0));
	hnd_store_key_coding(&base, GZ_CODING_GZIP, 6, false, HND_SM_WHOLE, NULL);
	ck_assert(hnd_store_key_etag(&k, "\"e1\"", 101, 0));
	hnd_store_key_coding(&k, GZ_CODING_GZIP, 6, false, HND_SM_WHOLE, NULL);
	ck_assert(!hnd_store_key_eq(&base, &k));
	ck_assert(hnd_store_key_etag(&k, "\"e2\"", 100, 0));
	hnd_store_key_coding(&k, GZ_CODING_GZIP, 6, false, HND_SM_WHOLE, NULL);
	ck_assert(!hnd_store_key_eq(&base, &k));
	ck_assert(hnd_store_key_etag(&k, "\"e1\"", 100, hnd_store_resource("/a")));
	hnd_store_key_coding(&k, GZ_CODING_GZIP, 6, false, HND_SM_WHOLE, NULL);
	ck_assert(!hnd_store_key_eq(&base, &k)); /* another resource's */
	ck_assert_uint_ne(hnd_store_resource("/a"), hnd_store_resource("/b"));
	ck_assert_uint_eq(hnd_store_resource(NULL), 0);
	ck_assert(hnd_store_key_etag(&k, "\"e1x\"", 100, 0)); /* a longer tag, same prefix */
	hnd_store_key_coding(&k, GZ_CODING_GZIP, 6, false, HND_SM_WHOLE, NULL);
	ck_assert(!hnd_store_key_eq(&base, &k));
	ck_assert(!hnd_store_key_etag(&k, "W/\"e1\"", 100, 0));
	ck_assert(!hnd_store_key_etag(&k, "e1", 100, 0));
	ck_assert(!hnd_store_key_etag(&k, NULL, 100, 0));
	memset(tag, 'a', sizeof tag);
	tag[0] = '"';
	tag[HND_STORE_ETAG_MAX - 1] = '"';
	tag[HND_STORE_ETAG_MAX] = '\0';
	ck_assert(hnd_store_key_etag(&k, tag, 1, 0)); /* the longest */
	tag[HND_STORE_ETAG_MAX - 1] = 'a';
	tag[HND_STORE_ETAG_MAX] = '"';
	tag[HND_STORE_ETAG_MAX + 1] = '\0';
	ck_assert(!hnd_store_key_etag(&k, tag, 1, 0)); /* one byte more */
	/* through the store: the base's length, a variant's own */
	ck_assert(st_put(gz, &base, NULL, 40));
	ck_assert(hnd_store_key_etag(&k, "\"e1\"", 100, 0));
	hnd_store_key_coding(&k, GZ_CODING_GZIP, 6, true, HND_SM_WHOLE, NULL);
	ck_assert(!st_has(gz, &k));
	ck_assert(st_put(gz, &k, NULL, 41));
	ck_assert(hnd_store_get(gz, &base, &v));
	ck_assert_ptr_null(v.body);
	ck_assert_uint_eq(v.len, 40);
	ck_assert(hnd_store_get(gz, &k, &v));
	ck_assert_uint_eq(v.len, 41);
	len = th_stats(gz).store_nbytes;
	ck_assert_uint_eq(len, 2 * HND_STORE_ITEM_OVERHEAD);
	close(fd);
	unlink(path);
	mhdgz_free(gz);
}
END_TEST

/*
 * LRU at the budget: room for three 1000-byte bodies; A, B, C put, A
 * looked up (most recent), D put: B, the least recently used, goes and
 * nothing else; then E: C goes. The bytes held are exact, never above
 * the budget; an item over the whole budget is refused.
 */
START_TEST(test_store_lru)
{
	const size_t item = 1000 + HND_STORE_ITEM_OVERHEAD;
	struct mhdgz *gz = st_gz(3 * item);
	struct hnd_store_key k[5];
	struct hnd_body *b[5];
	struct mhdgz_stats st;

	for (int i = 0; i < 5; i++) {
		st_key(&k[i], 100 + (uint64_t)i);
		b[i] = st_body(1000, 'a' + i);
	}
	for (int i = 0; i < 3; i++)
		ck_assert(st_put(gz, &k[i], b[i], 0));
	ck_assert_uint_eq(th_stats(gz).store_nbytes, 3 * item);
	ck_assert(st_has(gz, &k[0]));
	ck_assert(st_put(gz, &k[3], b[3], 0));
	st = th_stats(gz);
	ck_assert_uint_eq(st.store_evictions, 1);
	ck_assert_uint_eq(st.store_nbytes, 3 * item);
	ck_assert(!hnd_store_holds(b[1]));
	ck_assert(hnd_store_holds(b[0]) && hnd_store_holds(b[2]) && hnd_store_holds(b[3]));
	ck_assert(st_put(gz, &k[4], b[4], 0));
	ck_assert(!hnd_store_holds(b[2]));
	ck_assert(!st_has(gz, &k[1]));
	ck_assert(!st_has(gz, &k[2]));
	ck_assert(st_has(gz, &k[0]));
	ck_assert(st_has(gz, &k[3]));
	ck_assert(st_has(gz, &k[4]));
	st = th_stats(gz);
	ck_assert_uint_eq(st.store_evictions, 2);
	ck_assert_uint_eq(st.store_nbytes, 3 * item);
	/* over the whole budget: refused, nothing evicted */
	{
		struct hnd_body *big = st_body(3 * item, 'z');
		struct hnd_store_key kb;

		st_key(&kb, 200);
		ck_assert(!st_put(gz, &kb, big, 0));
		ck_assert(!hnd_store_holds(big));
		hnd_body_unref(big);
	}
	ck_assert_uint_eq(th_stats(gz).store_evictions, 2);
	/* dropped: its bytes go from the count */
	hnd_store_drop(gz, &k[0]);
	ck_assert(!hnd_store_holds(b[0]));
	ck_assert_uint_eq(th_stats(gz).store_nbytes, 2 * item);
	for (int i = 0; i < 5; i++)
		hnd_body_unref(b[i]);
	mhdgz_free(gz);
}
END_TEST

/*
 * The freshness rule, the store's one: a file version changed less than
 * racy_ns ago is not remembered (its change time, or its modification
 * time); one older is; a file that changed after its key was taken is not
 * (the fd is stat'ed again); file versions are off without a budget.
 */
START_TEST(test_store_fresh)
{
	struct mhdgz *gz = st_gz(1024 * 1024), *off = st_gz(0);
	char path[] = "/tmp/mhdgz-st-XXXXXX";
	int fd = mkstemp(path);
	struct hnd_store_key k;
	struct timespec old[2] = { { .tv_sec = 1000000000 }, { .tv_sec = 1000000000 } };

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "abcdef", 6), 6);
	gz->store.racy_ns = HND_STORE_RACY_NS;
	/* written just now: ctime and mtime recent */
	ck_assert(hnd_store_key_file(&k, fd, 0, 6));
	ck_assert(!hnd_store_fresh(&gz->store, &k));
	ck_assert(!st_put(gz, &k, NULL, 5));
	/* mtime set back: the change time is still recent */
	ck_assert_int_eq(futimens(fd, old), 0);
	ck_assert(hnd_store_key_file(&k, fd, 0, 6));
	ck_assert(!hnd_store_fresh(&gz->store, &k));
	/* both old enough: remembered */
	k.u.file.ctime_s -= 10;
	ck_assert(hnd_store_fresh(&gz->store, &k));
	k.u.file.mtime_s = k.u.file.ctime_s + 9; /* a recent mtime alone */
	ck_assert(hnd_store_fresh(&gz->store, &k) == false);
	/* the rule off (tests): fresh; changed since the key: refused */
	gz->store.racy_ns = 0;
	ck_assert(hnd_store_key_file(&k, fd, 0, 6));
	hnd_store_key_coding(&k, GZ_CODING_GZIP, 6, false, HND_SM_WHOLE, NULL);
	ck_assert(hnd_store_fresh(&gz->store, &k));
	ck_assert_int_eq(pwrite(fd, "x", 1, 6), 1); /* the size changes */
	{
		struct hnd_store_val v = { .len = 5 };

		ck_assert(!hnd_store_put(gz, &k, &v, fd));
		ck_assert(hnd_store_key_file(&k, fd, 0, 6));
		hnd_store_key_coding(&k, GZ_CODING_GZIP, 6, false, HND_SM_WHOLE, NULL);
		ck_assert(hnd_store_put(gz, &k, &v, fd));
		ck_assert(st_has(gz, &k));
		/* no budget given: file versions are not remembered */
		ck_assert(!hnd_store_put(off, &k, &v, fd));
		ck_assert(!st_has(off, &k));
	}
	close(fd);
	unlink(path);
	mhdgz_free(gz);
	mhdgz_free(off);
}
END_TEST

/*
 * A body's lifetime: a response sending it (a reference taken by a
 * lookup) while the store evicts it at once: the bytes stay intact until
 * the response lets go (AddressSanitizer sees it freed then, not before),
 * and the store no longer holds it.
 */
START_TEST(test_store_refcount)
{
	const size_t item = 4000 + HND_STORE_ITEM_OVERHEAD;
	struct mhdgz *gz = st_gz(item);
	struct hnd_store_key k1, k2;
	struct hnd_body *b1 = st_body(4000, 'q'), *b2 = st_body(4000, 'r');
	struct hnd_store_val sending;

	st_key(&k1, 1);
	st_key(&k2, 2);
	ck_assert(st_put(gz, &k1, b1, 0));
	hnd_body_unref(b1); /* the store's reference alone */
	ck_assert(hnd_store_get(gz, &k1, &sending));
	ck_assert_ptr_eq(sending.body, b1);
	ck_assert(hnd_store_holds(sending.body));
	ck_assert(st_put(gz, &k2, b2, 0)); /* evicts k1 */
	ck_assert_uint_eq(th_stats(gz).store_evictions, 1);
	ck_assert(!hnd_store_holds(sending.body));
	ck_assert_uint_eq(atomic_load(&sending.body->refs), 1);
	for (size_t i = 0; i < 4000; i++)
		ck_assert_int_eq(sending.body->data[i], 'q');
	hnd_body_unref(sending.body); /* sent: freed now */
	ck_assert(!st_has(gz, &k1));
	hnd_body_unref(b2);
	ck_assert(hnd_store_holds(b2)); /* the store's reference keeps it */
	mhdgz_free(gz);
}
END_TEST

/* "Not smaller" is an item of its own: no body, HND_STORE_NOT_SMALLER,
 * charged its overhead; replaced in place by a later put of the key. */
START_TEST(test_store_not_smaller)
{
	struct mhdgz *gz = st_gz(0);
	struct hnd_store_key k;
	struct hnd_store_val v;
	struct hnd_body *b = st_body(10, 'n');

	st_key(&k, 5);
	ck_assert(st_put(gz, &k, NULL, HND_STORE_NOT_SMALLER));
	ck_assert(hnd_store_get(gz, &k, &v));
	ck_assert_ptr_null(v.body);
	ck_assert_uint_eq(v.len, HND_STORE_NOT_SMALLER);
	ck_assert_uint_eq(th_stats(gz).store_nbytes, HND_STORE_ITEM_OVERHEAD);
	ck_assert(st_put(gz, &k, b, 0));
	ck_assert(hnd_store_get(gz, &k, &v));
	ck_assert_ptr_eq(v.body, b);
	ck_assert_uint_eq(v.len, 10);
	hnd_body_unref(v.body);
	ck_assert_uint_eq(th_stats(gz).store_nbytes, HND_STORE_ITEM_OVERHEAD + 10);
	hnd_body_unref(b);
	mhdgz_free(gz);
}
END_TEST

/*
 * The counters, exact, through responses: a buffer response queued five
 * times (the first compresses, the second offers the body to the store,
 * hnd_store_entry_offer, and reuses it, as the next three do: four hits;
 * a response queued once takes no lock of the store), a second
 * one with the same strong ETag made per request (its HEAD's length by the
 * ETag: a hit; its first lookup under its own name is skipped), a budget
 * too small for the body (stored nowhere: every queue compresses, no
 * eviction of what is not there).
 */
START_TEST(test_store_counters)
{
	enum { LEN = 20000 };
	uint8_t *body = tu_payload(LEN, TU_JSON, 41);
	struct th_route rt[] = {
		{ .path = "/s",
		  .status = 200,
		  .body = body,
		  .body_len = LEN,
		  .hdr = { "Content-Type", "application/json", "ETag", "\"s1\"" },
		  .flags = TH_RT_SHARED },
		{ .path = "/p",
		  .status = 200,
		  .body = body,
		  .body_len = LEN,
		  .hdr = { "Content-Type", "application/json", "ETag", "\"s1\"" } },
	};
	struct mhdgz_options o = { .size = sizeof o };
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	struct mhdgz_stats st;
	char err[512];
	uint64_t gz_len = 0;

	for (int small = 0; small < 2; small++) {
		o.limits.store_nbytes = small ? 1000 : 0;
		th_site_start(&s, &o, rt, N_ELEMS(rt), 0);
		for (int i = 0; i < 5; i++) {
			TH_REQ(h, &s, 0, "/s", th_h_gzip, &rs);
			TH_OK("shared", th_v_gzip(&rs, 200, body, LEN, TH_E));
			gz_len = rs.body_len;
			th_reply_free(&rs);
		}
		TH_REQ(h, &s, TH_HEAD, "/p", th_h_gzip, &rs);
		TH_OK("HEAD", th_v_content_length(&rs, gz_len, TH_E));
		th_reply_free(&rs);
		st = th_stats(s.gz);
		if (!small) {
			ck_assert_uint_eq(st.compressions, 1);
			ck_assert_uint_eq(st.store_hits, 5); /* four reuses, the HEAD */
			ck_assert_uint_eq(st.store_misses, 0);
			ck_assert_uint_eq(st.store_evictions, 0);
			/* the shared body under its response, its length under the ETag */
			ck_assert_uint_eq(st.store_nbytes, gz_len + 2 * HND_STORE_ITEM_OVERHEAD);
		} else {
			/* the store takes no body (over the budget): each GET
			 * compresses; the ETag's length (an item of 128 bytes)
			 * is what fits: the HEAD's hit */
			ck_assert_uint_eq(st.compressions, 5);
			ck_assert_uint_eq(st.store_hits, 1);
			ck_assert_uint_eq(st.store_misses, 0);
			ck_assert_uint_eq(st.store_evictions, 0);
			ck_assert_uint_eq(st.store_nbytes, HND_STORE_ITEM_OVERHEAD);
		}
		ck_assert_uint_eq(st.failures, 0);
		th_site_stop(&s);
	}
	curl_easy_cleanup(h);
	free(body);
}
END_TEST

struct ck_case
hnd_store_case(void)
{
	return (struct ck_case){ "store",
				 CK_CASE_TIMEOUT,
				 { { test_store_key_fields, 0, 0 },
				   { test_store_lru, 0, 0 },
				   { test_store_fresh, 0, 0 },
				   { test_store_refcount, 0, 0 },
				   { test_store_not_smaller, 0, 0 },
				   { test_store_counters, 0, 0 } } };
}
