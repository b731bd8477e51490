/* check_negotiate.c: table-driven tests of mhdgz's pure functions, option validation and the selection without a connection. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <dlfcn.h>
#include <limits.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "hnd_handle.h" /* mhdgz.h, and hnd_select() */
#include "hnd_negotiate.h"
#include "hnd_queue.h"
#include "check_suites.h"
#include "info.h"
#include "testutil.h"

#if defined(HAVE_LIBDEFLATE) && defined(HAVE_LIBDEFLATE_ALLOC_COMPRESSOR_EX)
#include <libdeflate.h>
#define TEST_LIBDEFLATE_OWN 1
#endif

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* ===================================================================== */
/*                 Accept-Encoding (RFC 9110 section 12.5.3)             */
/* ===================================================================== */

/*
 * Expectations, written down once:
 *
 *  - No Accept-Encoding header (count 0) means identity only: 0. An empty
 *    field value means "no content coding wanted": 0 (RFC 9110 12.5.3).
 *  - An explicit "gzip" or "x-gzip" element decides, whatever "*" says.
 *    "*" gives its q to gzip only when gzip is not listed.
 *  - qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ) (RFC 9110
 *    12.4.2). An element whose q does not match that grammar (four
 *    decimals, "abc", "-1", "1.0001", "2", ".5", "", missing "=") is
 *    malformed and ignored as a whole: it neither grants nor refuses
 *    gzip, so "gzip;q=abc" gives 0 (nothing grants gzip), and
 *    "gzip;q=abc, *;q=0.2" gives 200 (gzip is then not listed, "*" applies).
 *  - OWS (spaces and tabs) around elements and around ";" is allowed and
 *    must parse. Whitespace around "=" is not in the grammar (no BWS in
 *    parameters, RFC 9110 5.6.6): a lenient parser accepts it, a strict one
 *    ignores the element; we only test a case where both agree.
 *  - Empty list elements (",,gzip,,") are allowed by the #rule (5.6.1).
 *  - Lines are C strings: an embedded NUL ends the value there.
 *  - An empty parameter ("gzip;q=0 ;") is skipped. A parameter value may
 *    be a quoted-string (5.6.4): commas and ';' inside it separate
 *    nothing; q must be a token. A '"' never closed on its line splits
 *    nothing either way: its element is malformed, the others count.
 */
struct ae_case {
	const char *lines[4];
	size_t count;
	unsigned int q;
};

static const struct ae_case ae_cases[] = {
	/* absent, empty */
	{ { NULL }, 0, 0 },
	{ { "gzip" }, 0, 0 }, /* count 0 wins over a non-NULL array */
	{ { "" }, 1, 0 },
	{ { NULL }, 1, 0 },
	/* plain codings, case */
	{ { "gzip" }, 1, 1000 },
	{ { "GZIP;Q=0.5" }, 1, 500 },
	{ { "GzIp" }, 1, 1000 },
	{ { "gzip;Q=0.5" }, 1, 500 },
	{ { "x-gzip" }, 1, 1000 },
	{ { "X-GZIP;q=0.25" }, 1, 250 },
	{ { "identity" }, 1, 0 },
	{ { "identity;q=0" }, 1, 0 },
	{ { "br, deflate" }, 1, 0 },
	{ { "br, deflate, gzip" }, 1, 1000 },
	{ { "gzipx" }, 1, 0 },
	{ { "gzi" }, 1, 0 },
	{ { "xgzip" }, 1, 0 },
	{ { "gzip-foo" }, 1, 0 },
	/* "*" */
	{ { "*" }, 1, 1000 },
	{ { "*;q=0.3" }, 1, 300 },
	{ { "*;q=0" }, 1, 0 },
	{ { "gzip;q=0, *" }, 1, 0 },
	{ { "*, gzip;q=0" }, 1, 0 },
	{ { "x-gzip;q=0, *" }, 1, 0 },
	{ { "gzip;q=0.5, *" }, 1, 500 },
	{ { "*;q=0.9, gzip;q=0.1" }, 1, 100 },
	{ { "identity;q=0, *;q=0" }, 1, 0 },
	{ { "br, *;q=0.4" }, 1, 400 },
	/* q-value grammar */
	{ { "gzip;q=1.000" }, 1, 1000 },
	{ { "gzip;q=1" }, 1, 1000 },
	{ { "gzip;q=1." }, 1, 1000 },
	{ { "gzip;q=0.001" }, 1, 1 },
	{ { "gzip;q=0.01" }, 1, 10 },
	{ { "gzip;q=0.999" }, 1, 999 },
	{ { "gzip;q=0" }, 1, 0 },
	{ { "gzip;q=0.000" }, 1, 0 },
	{ { "gzip;q=0." }, 1, 0 },
	/* malformed q: the element is ignored */
	{ { "gzip;q=0.0001" }, 1, 0 },
	{ { "gzip;q=0.0001, *;q=0.6" }, 1, 600 },
	{ { "gzip;q=0.9999, *;q=0.6" }, 1, 600 },
	{ { "gzip;q=1.0000, *;q=0.6" }, 1, 600 },
	{ { "gzip;q=abc" }, 1, 0 },
	{ { "gzip;q=abc, *;q=0.2" }, 1, 200 },
	{ { "gzip;q=-1" }, 1, 0 },
	{ { "gzip;q=-1, *;q=0.3" }, 1, 300 },
	{ { "gzip;q=1.0001" }, 1, 0 },
	{ { "gzip;q=1.0001, *" }, 1, 1000 },
	{ { "gzip;q=2" }, 1, 0 },
	{ { "gzip;q=2, *;q=0.1" }, 1, 100 },
	{ { "gzip;q=1.5, *;q=0.1" }, 1, 100 },
	{ { "gzip;q=.5, *;q=0.1" }, 1, 100 },
	{ { "gzip;q=, *;q=0.4" }, 1, 400 },
	{ { "gzip;q, *;q=0.4" }, 1, 400 },
	{ { "gzip;q=0.5x, *;q=0.4" }, 1, 400 },
	{ { "*;q=abc" }, 1, 0 },
	{ { "*;q=abc, gzip;q=0.7" }, 1, 700 },
	/* whitespace: spaces and tabs around elements and ';' */
	{ { " \tgzip\t ;\t q=0.7 \t" }, 1, 700 },
	{ { "deflate ,\tgzip ; q=0.25" }, 1, 250 },
	{ { "\tgzip\t" }, 1, 1000 },
	{ { "br ,\t*\t;q=0.5" }, 1, 500 },
	{ { "gzip\t;\tq = 0" }, 1, 0 }, /* BWS around '=': 0 strict or lenient */
	/* empty list elements */
	{ { ",,,gzip,,," }, 1, 1000 },
	{ { " , ,\t, *;q=0.8 , ," }, 1, 800 },
	/* multiple lines */
	{ { "deflate", "gzip;q=0.8" }, 2, 800 },
	{ { "gzip;q=0", "*" }, 2, 0 },
	{ { "*", "gzip;q=0" }, 2, 0 },
	{ { "*;q=0.5", "x-gzip;q=0.4" }, 2, 400 },
	{ { "br", "deflate", "*;q=0.3" }, 3, 300 },
	{ { "br", "identity" }, 2, 0 },
	{ { NULL, "gzip" }, 2, 1000 },
	{ { "br", NULL, "gzip;q=0.6" }, 3, 600 },
	{ { "gzip", "br" }, 1, 1000 }, /* count limits the lines read */
	{ { "br", "gzip" }, 1, 0 },
	/* empty parameters ("OWS ;" with nothing after) are skipped: a
	 * refusal written with a stray ';' still refuses */
	{ { "gzip;q=0 ;, *" }, 1, 0 },
	{ { "gzip;q=0;, *" }, 1, 0 },
	{ { "gzip;;q=0.4" }, 1, 400 },
	{ { "*;q=0.3, gzip;q=0 ;" }, 1, 0 },
	/* quoted-string parameter values: a comma or ';' inside is not a
	 * separator, and a coding named inside is not an element */
	{ { "x;p=\"a,gzip\"" }, 1, 0 },
	{ { "x;p=\"a,gzip;q=0\", *" }, 1, 1000 },
	{ { "x;p=\"a, gzip\", *;q=0.2" }, 1, 200 },
	{ { "x;p=\"a\\\",gzip\", *;q=0.2" }, 1, 200 },
	{ { "gzip;p=\"x;q=0\";q=0.6" }, 1, 600 },
	{ { "gzip;q=\"0\", *;q=0.2" }, 1, 200 }, /* q is a token */
	/* an unterminated quote: its element is malformed, the rest counts */
	{ { "x;p=\"open, gzip" }, 1, 1000 },
	{ { "x;p=\"open, gzip;q=0, *" }, 1, 0 },
	{ { "gzip;p=\"open, *;q=0.2" }, 1, 200 },
	/* embedded NUL: the C string ends there */
	{ { "br\0gzip" }, 1, 0 },
	{ { "gzip\0;q=0" }, 1, 1000 },
};

START_TEST(test_ae_table)
{
	const struct ae_case *c = &ae_cases[_i];
	unsigned int q = hnd_accept_gzip_q_lines(c->count ? c->lines : (_i == 0 ? NULL : c->lines),
						 c->count);

	ck_assert_msg(q == c->q,
		      "case %d: lines[0]=\"%s\" lines[1]=\"%s\" count=%zu: want %u got %u", _i,
		      c->lines[0] ? c->lines[0] : "(null)", c->lines[1] ? c->lines[1] : "(null)",
		      c->count, c->q, q);
}
END_TEST

/*
 * Linear time on hostile lines: 16 MiB of commas, of commas with spaces
 * and tabs, of ";q=1" parameters on one element, and of quotes that never
 * close, each parsed once. Linear, each parse takes milliseconds (well
 * under a second with sanitizers); a quadratic parse (a rescan per
 * element or per quote: about 10^14 byte steps here) runs for hours, so
 * the case's timeout (CK_CASE_TIMEOUT) fails it. No clock is read: the
 * result does not depend on the machine's speed or load.
 */
START_TEST(test_ae_commas)
{
	size_t len = 16u * 1024 * 1024;
	char *s = malloc(len + 1);
	const char *lines[1];

	ck_assert_ptr_nonnull(s);
	memset(s, ',', len);
	s[len] = '\0';
	lines[0] = s;
	ck_assert_uint_eq(hnd_accept_gzip_q_lines(lines, 1), 0);
	/* Same with tabs and spaces between the commas. */
	for (size_t i = 0; i < len; i += 3) {
		s[i] = ' ';
		if (i + 1 < len)
			s[i + 1] = '\t';
	}
	ck_assert_uint_eq(hnd_accept_gzip_q_lines(lines, 1), 0);
	/* ";q=" parameters on one element: malformed, ignored. */
	memcpy(s, "br", 2);
	for (size_t i = 2; i + 4 <= len; i += 4)
		memcpy(s + i, ";q=1", 4);
	s[len - (len - 2) % 4] = '\0';
	ck_assert_uint_eq(hnd_accept_gzip_q_lines(lines, 1), 0);
	/* '"' and '\\' pairs, then commas: quotes that never close (each
	 * escapes the next quote) and elements after them. */
	for (size_t i = 0; i + 2 <= len; i += 2)
		memcpy(s + i, "\"\\", 2);
	memcpy(s + len - 8, ",,,,gzip", 8);
	s[len] = '\0';
	ck_assert_uint_eq(hnd_accept_gzip_q_lines(lines, 1), 1000);
	free(s);
}
END_TEST

/* 1000 lines of "br" then a gzip: every line is read. */
START_TEST(test_ae_many_lines)
{
	static const char *lines[1001];

	for (int i = 0; i < 1000; i++)
		lines[i] = "br";
	lines[1000] = "gzip;q=0.125";
	ck_assert_uint_eq(hnd_accept_gzip_q_lines(lines, 1001), 125);
	ck_assert_uint_eq(hnd_accept_gzip_q_lines(lines, 1000), 0);
}
END_TEST

/*
 * Field names, codings and media types are case-insensitive in ASCII
 * whatever the process's locale: in a Turkish one the C library's
 * strcasecmp() takes 'I' and 'i' for different letters (tolower('I') is
 * not 'i' there), so "GZIP", "IDENTITY" or a long media type in capitals
 * compared through it did not match. Checked where such a locale is
 * installed (LOCPATH counts) and strcasecmp() is the C library's.
 */
START_TEST(test_ae_locale)
{
	static const char *const locales[] = { "tr_TR.UTF-8", "tr_TR.ISO-8859-9", "az_AZ.UTF-8",
					       NULL };
	const char *const gzip_caps[] = { "GZIP" };
	const char *const ident_caps[] = { "IDENTITY;q=1, gzip;q=0.5" };
	const enum mhdgz_coding offered[] = { MHDGZ_CODING_GZIP };
	enum mhdgz_coding k = MHDGZ_CODING_ZSTD;
	const char *const skip[] = { NULL };
	char type[160];
	struct hnd_types t;
	locale_t loc = (locale_t)0;
	size_t i;

#ifdef __SANITIZE_ADDRESS__
	/* Its strcasecmp() ignores the locale, and glibc keeps a loaded
	 * locale's name for good, a leak to LeakSanitizer. */
	return;
#endif
	for (i = 0; locales[i] && !loc; i++)
		loc = newlocale(LC_ALL_MASK, locales[i], (locale_t)0);
	if (!loc)
		return;
	uselocale(loc);
	if (strcasecmp("I", "i") == 0) { /* another sanitizer's strcasecmp, say */
		uselocale(LC_GLOBAL_LOCALE);
		freelocale(loc);
		return;
	}
	ck_assert_uint_eq(hnd_accept_gzip_q_lines(gzip_caps, 1), 1000);
	ck_assert_int_eq(mhdgz_accept_coding(gzip_caps, 1, offered, 1, &k), 1);
	ck_assert_int_eq(k, MHDGZ_CODING_GZIP);
	ck_assert_int_eq(mhdgz_accept_coding(ident_caps, 1, offered, 1, &k), 0);
	/* A media type longer than HND_TYPE_LOWER_MAX is matched by a scan. */
	ck_assert_int_eq(hnd_typelist_init(&t.compress, hnd_default_compress_types), 0);
	ck_assert_int_eq(hnd_typelist_init(&t.skip, skip), 0);
	ck_assert_int_eq(hnd_types_index(&t), 0);
	memset(type, 'I', sizeof type);
	memcpy(type, "TEXT/", 5);
	ck_assert(hnd_types_compressible(&t, type, sizeof type));
	memcpy(type, "IMAGE/", 6);
	memcpy(type + sizeof type - 5, "+JSON", 5);
	ck_assert(hnd_types_compressible(&t, type, sizeof type));
	hnd_types_fini(&t);
	uselocale(LC_GLOBAL_LOCALE);
	freelocale(loc);
}
END_TEST

/* ===================================================================== */
/*        ETag comparison (RFC 9110 sections 8.8.3, 13.1.1, 13.1.2)      */
/* ===================================================================== */

/*
 * weak = 1: If-None-Match (weak comparison: W/ ignored on both sides).
 * weak = 0: If-Match (strong: both sides must be strong and equal).
 * The library's transformations of a strong "x": W/"x" (WEAKEN) and
 * "x-gzip" (SUFFIX) denote the same resource state, so a client echoing
 * them must match; a weak W/"x-gzip" only under weak comparison.
 * weak = %s"W/" is case-sensitive (RFC 9110 8.8.3), so w/"x" is malformed.
 * etagc admits ',' but not SP or DQUOTE: a list like "a, "x" has no
 * defined reading (how a parser resynchronises is its own business) and
 * is not tested.
 */
struct etag_case {
	const char *field;
	const char *etag;
	int weak;
	int match;
};

static const struct etag_case etag_cases[] = {
	/* weak comparison */
	{ "\"x\"", "\"x\"", 1, 1 },
	{ "W/\"x\"", "\"x\"", 1, 1 },
	{ "\"x\"", "W/\"x\"", 1, 1 },
	{ "W/\"x\"", "W/\"x\"", 1, 1 },
	{ "\"y\"", "\"x\"", 1, 0 },
	{ "W/\"y\"", "\"x\"", 1, 0 },
	{ "\"x-gzip\"", "\"x\"", 1, 1 },
	{ "W/\"x-gzip\"", "\"x\"", 1, 1 },
	{ "\"x-gzip\"", "\"x-gzip\"", 1, 1 },
	{ "\"xx\"", "\"x\"", 1, 0 },
	{ "\"\"", "\"x\"", 1, 0 },
	{ "\"\"", "\"\"", 1, 1 },
	{ "\"X\"", "\"x\"", 1, 0 }, /* opaque-tags are case-sensitive */
	{ "*", "\"x\"", 1, 1 },
	{ "*", "W/\"x\"", 1, 1 },
	{ "\"a\", \"x\"", "\"x\"", 1, 1 },
	{ "\"a\" ,W/\"x\"", "\"x\"", 1, 1 },
	{ "\"a\",\"b\",\"c\"", "\"x\"", 1, 0 },
	{ "  \"x\"  ", "\"x\"", 1, 1 },
	{ "\t\"a\"\t,\t\"x\"\t", "\"x\"", 1, 1 },
	{ "\"a\", W/\"x-gzip\", \"b\"", "\"x\"", 1, 1 },
	{ "\"a,b\"", "\"a,b\"", 1, 1 }, /* ',' is an etagc */
	{ "\"a,b\"", "\"a\"", 1, 0 },
	/* malformed elements never match; a valid element after one still can */
	{ "x", "\"x\"", 1, 0 },
	{ "\"x", "\"x\"", 1, 0 },
	{ "W/x", "\"x\"", 1, 0 },
	{ "w/\"x\"", "\"x\"", 1, 0 },
	{ "W/ \"x\"", "\"x\"", 1, 0 },
	{ "", "\"x\"", 1, 0 },
	{ ",", "\"x\"", 1, 0 },
	{ ", ,", "\"x\"", 1, 0 },
	{ "foo, \"x\"", "\"x\"", 1, 1 },
	{ "\"a\", foo", "\"x\"", 1, 0 },
	/* strong comparison */
	{ "\"x\"", "\"x\"", 0, 1 },
	{ "W/\"x\"", "\"x\"", 0, 0 },
	{ "\"x\"", "W/\"x\"", 0, 0 },
	{ "W/\"x\"", "W/\"x\"", 0, 0 },
	{ "\"x-gzip\"", "\"x\"", 0, 1 },
	{ "W/\"x-gzip\"", "\"x\"", 0, 0 },
	{ "\"y\"", "\"x\"", 0, 0 },
	{ "*", "\"x\"", 0, 1 },
	{ "\"a\", \"x\"", "\"x\"", 0, 1 },
	{ "W/\"x\", \"x-gzip\"", "\"x\"", 0, 1 },
	{ "W/\"x\", \"y\"", "\"x\"", 0, 0 },
	{ " \t\"x\"\t ", "\"x\"", 0, 1 },
	{ "x", "\"x\"", 0, 0 },
	{ "\"x", "\"x\"", 0, 0 },
	{ "", "\"x\"", 0, 0 },
};

START_TEST(test_etag_table)
{
	const struct etag_case *c = &etag_cases[_i];
	int m = hnd_etag_match(c->field, c->etag, c->weak);

	ck_assert_msg(m == c->match, "case %d: field '%s' etag '%s' %s: want %d got %d", _i,
		      c->field, c->etag, c->weak ? "weak" : "strong", c->match, m);
}
END_TEST

START_TEST(test_etag_null)
{
	ck_assert_int_eq(hnd_etag_match(NULL, "\"x\"", 1), 0);
	ck_assert_int_eq(hnd_etag_match(NULL, "\"x\"", 0), 0);
}
END_TEST

/* A long list is scanned to its end. */
START_TEST(test_etag_long_list)
{
	size_t cap = 64 * 1024, len = 0;
	char *s = malloc(cap);

	ck_assert_ptr_nonnull(s);
	while (len + 16 < cap - 8)
		len += (size_t)snprintf(s + len, cap - len, "\"t%zu\", ", len);
	memcpy(s + len, "\"x\"", 4);
	ck_assert_int_eq(hnd_etag_match(s, "\"x\"", 1), 1);
	ck_assert_int_eq(hnd_etag_match(s, "\"x\"", 0), 1);
	s[len] = '\0';
	ck_assert_int_eq(hnd_etag_match(s, "\"x\"", 1), 0);
	free(s);
}
END_TEST

/* ===================================================================== */
/*                   Names, errors, version, backends                    */
/* ===================================================================== */

START_TEST(test_reason_names)
{
	const char *names[MHDGZ_REASON_COUNT];

	for (int r = 0; r < MHDGZ_REASON_COUNT; r++) {
		names[r] = mhdgz_reason_name((enum mhdgz_reason)r);
		ck_assert_msg(names[r] != NULL, "reason %d has no name", r);
		ck_assert_msg(names[r][0] != '\0', "reason %d has an empty name", r);
		ck_assert_msg(strcmp(names[r], "unknown") != 0, "reason %d is 'unknown'", r);
		for (const char *p = names[r]; *p; p++)
			ck_assert_msg(!(*p >= 'A' && *p <= 'Z'),
				      "reason %d name '%s' not lowercase", r, names[r]);
		for (int o = 0; o < r; o++)
			ck_assert_msg(strcmp(names[r], names[o]) != 0,
				      "reasons %d and %d share the name '%s'", o, r, names[r]);
	}
	/* The two names the header quotes. */
	ck_assert_str_eq(mhdgz_reason_name(MHDGZ_COMPRESSED), "compressed");
	ck_assert_str_eq(mhdgz_reason_name(MHDGZ_SKIP_NOT_ACCEPTED), "not-accepted");
	ck_assert_str_eq(mhdgz_reason_name(MHDGZ_REASON_COUNT), "unknown");
	ck_assert_str_eq(mhdgz_reason_name((enum mhdgz_reason)(MHDGZ_REASON_COUNT + 100)),
			 "unknown");
	ck_assert_str_eq(mhdgz_reason_name((enum mhdgz_reason) - 1), "unknown");
}
END_TEST

START_TEST(test_strerror)
{
	static const int codes[] = { MHDGZ_ENOMEM,  MHDGZ_EINVAL, MHDGZ_EBACKEND, MHDGZ_ENOSPC,
				     MHDGZ_ENOTSUP, MHDGZ_EMHD,   MHDGZ_EBUSY };
	const char *msgs[N_ELEMS(codes)];

	ck_assert_ptr_nonnull(mhdgz_strerror(MHDGZ_OK));
	for (size_t i = 0; i < N_ELEMS(codes); i++) {
		msgs[i] = mhdgz_strerror(codes[i]);
		ck_assert_msg(msgs[i] != NULL, "code %d: NULL", codes[i]);
		ck_assert_msg(msgs[i][0] != '\0', "code %d: empty", codes[i]);
		ck_assert_msg(strcmp(msgs[i], "unknown error") != 0, "code %d: unknown", codes[i]);
		ck_assert_msg(strcmp(msgs[i], mhdgz_strerror(MHDGZ_OK)) != 0, "code %d: same as OK",
			      codes[i]);
		for (size_t j = 0; j < i; j++)
			ck_assert_msg(strcmp(msgs[i], msgs[j]) != 0, "codes %d and %d: same text",
				      codes[i], codes[j]);
	}
	ck_assert_str_eq(mhdgz_strerror(MHDGZ_OK), "success");
	ck_assert_str_eq(mhdgz_strerror(MHDGZ_ENOMEM), "out of memory");
	ck_assert_str_eq(mhdgz_strerror(MHDGZ_EINVAL), "invalid argument");
	ck_assert_str_eq(mhdgz_strerror(MHDGZ_EBACKEND), "compression library error");
	ck_assert_str_eq(mhdgz_strerror(MHDGZ_ENOSPC), "output does not fit in the space given");
	ck_assert_str_eq(mhdgz_strerror(MHDGZ_ENOTSUP), "backend or capability not compiled in");
	ck_assert_str_eq(mhdgz_strerror(MHDGZ_EMHD), "libmicrohttpd refused a call");
	ck_assert_str_eq(mhdgz_strerror(MHDGZ_EBUSY), "resource in use");
	ck_assert_str_eq(mhdgz_strerror(-8), "unknown error");
	ck_assert_str_eq(mhdgz_strerror(-1000), "unknown error");
	ck_assert_str_eq(mhdgz_strerror(INT_MIN), "unknown error");
	ck_assert_str_eq(mhdgz_strerror(1), "unknown error");
}
END_TEST

START_TEST(test_version)
{
	ck_assert_str_eq(mhdgz_version(), MHDGZ_VERSION_STRING);
}
END_TEST

#ifdef HAVE_ISAL
#define TH_HAVE_ISAL 1
#else
#define TH_HAVE_ISAL 0
#endif
#ifdef HAVE_LIBDEFLATE
#define TH_HAVE_LIBDEFLATE 1
#else
#define TH_HAVE_LIBDEFLATE 0
#endif

START_TEST(test_backends)
{
	enum mhdgz_backend b;
	int mn, mx, df;

	ck_assert_int_eq(tu_backend_available(MHDGZ_BACKEND_DEFAULT), 1);
	ck_assert_int_eq(tu_backend_available(MHDGZ_BACKEND_ZLIB), 1);
	ck_assert_int_eq(tu_backend_available(MHDGZ_BACKEND_LIBDEFLATE), TH_HAVE_LIBDEFLATE);
	ck_assert_int_eq(tu_backend_available(MHDGZ_BACKEND_ISAL), TH_HAVE_ISAL);
	ck_assert_int_eq(tu_backend_available((enum mhdgz_backend)4), 0);
	ck_assert_int_eq(tu_backend_available((enum mhdgz_backend) - 1), 0);

	ck_assert_str_eq(tu_backend_name(MHDGZ_BACKEND_ZLIB), "zlib");
	ck_assert_str_eq(tu_backend_name(MHDGZ_BACKEND_LIBDEFLATE), "libdeflate");
	ck_assert_str_eq(tu_backend_name(MHDGZ_BACKEND_ISAL), "isal");
	{
		struct mhdgz_backend_info bi = { .size = sizeof bi };

		ck_assert_int_eq(mhdgz_backend_info((enum mhdgz_backend)4, &bi), MHDGZ_EINVAL);
		ck_assert_int_eq(mhdgz_backend_info((enum mhdgz_backend) - 1, &bi), MHDGZ_EINVAL);
		ck_assert_int_eq(mhdgz_backend_info(MHDGZ_BACKEND_ZLIB, NULL), MHDGZ_EINVAL);
		bi.size = 1;
		ck_assert_int_eq(mhdgz_backend_info(MHDGZ_BACKEND_ZLIB, &bi), MHDGZ_EINVAL);
	}

	b = (enum mhdgz_backend)77;
	ck_assert_int_eq(tu_backend_from_name("zlib", &b), 0);
	ck_assert_int_eq(b, MHDGZ_BACKEND_ZLIB);
	if (TH_HAVE_LIBDEFLATE) {
		ck_assert_int_eq(tu_backend_from_name("LibDeflate", &b), 0);
		ck_assert_int_eq(b, MHDGZ_BACKEND_LIBDEFLATE);
	} else {
		ck_assert_int_eq(tu_backend_from_name("LibDeflate", &b), MHDGZ_ENOTSUP);
	}
	ck_assert_int_eq(tu_backend_from_name("ZLIB", &b), 0);
	ck_assert_int_eq(b, MHDGZ_BACKEND_ZLIB);
	b = (enum mhdgz_backend)77;
	if (TH_HAVE_ISAL) {
		ck_assert_int_eq(tu_backend_from_name("ISAL", &b), 0);
		ck_assert_int_eq(b, MHDGZ_BACKEND_ISAL);
	} else {
		ck_assert_int_eq(tu_backend_from_name("isal", &b), MHDGZ_ENOTSUP);
		ck_assert_int_eq(b, 77);
	}
	b = (enum mhdgz_backend)77;
	ck_assert_int_eq(tu_backend_from_name("brotli", &b), MHDGZ_EINVAL);
	ck_assert_int_eq(tu_backend_from_name("", &b), MHDGZ_EINVAL);
	ck_assert_int_eq(tu_backend_from_name("zlibx", &b), MHDGZ_EINVAL);
	ck_assert_int_eq(tu_backend_from_name("zli", &b), MHDGZ_EINVAL);
	ck_assert_int_eq(tu_backend_from_name(NULL, &b), MHDGZ_EINVAL);
	ck_assert_int_eq(b, 77);
	/* Round trip of every available backend's name. */
	for (int i = 1; i <= 3; i++) {
		if (!tu_backend_available((enum mhdgz_backend)i))
			continue;
		ck_assert_int_eq(tu_backend_from_name(tu_backend_name((enum mhdgz_backend)i), &b),
				 0);
		ck_assert_int_eq(b, i);
	}

	mn = mx = df = -100;
	ck_assert_int_eq(tu_backend_levels(MHDGZ_BACKEND_ZLIB, &mn, &mx, &df), 0);
	ck_assert_int_eq(mn, 1);
	ck_assert_int_eq(mx, 9);
	ck_assert_int_eq(df, 6);
	if (TH_HAVE_LIBDEFLATE) {
		ck_assert_int_eq(tu_backend_levels(MHDGZ_BACKEND_LIBDEFLATE, &mn, &mx, &df), 0);
		ck_assert_int_eq(mn, 1);
		ck_assert_int_eq(mx, 12);
		ck_assert_int_eq(df, 5);
		/* DEFAULT is libdeflate. */
		mn = mx = df = -100;
		ck_assert_int_eq(tu_backend_levels(MHDGZ_BACKEND_DEFAULT, &mn, &mx, &df), 0);
		ck_assert_int_eq(mn, 1);
		ck_assert_int_eq(mx, 12);
		ck_assert_int_eq(df, 5);
		ck_assert_str_eq(tu_backend_name(MHDGZ_BACKEND_DEFAULT), "libdeflate");
	} else {
		ck_assert_int_eq(tu_backend_levels(MHDGZ_BACKEND_LIBDEFLATE, &mn, &mx, &df),
				 MHDGZ_ENOTSUP);
		/* DEFAULT is the next in preference: ISA-L, else zlib. */
		ck_assert_str_eq(tu_backend_name(MHDGZ_BACKEND_DEFAULT),
				 TH_HAVE_ISAL ? "isal" : "zlib");
	}
	ck_assert_int_eq(tu_backend_levels(MHDGZ_BACKEND_ZLIB, NULL, NULL, NULL), 0);
	mx = -100;
	ck_assert_int_eq(tu_backend_levels(MHDGZ_BACKEND_ZLIB, NULL, &mx, NULL), 0);
	ck_assert_int_eq(mx, 9);
	mn = mx = df = -100;
	if (TH_HAVE_ISAL) {
		ck_assert_int_eq(tu_backend_levels(MHDGZ_BACKEND_ISAL, &mn, &mx, &df), 0);
		ck_assert_int_eq(mn, 1);
		ck_assert_int_eq(mx, 4);
		ck_assert_int_eq(df, 2);
	} else {
		ck_assert_int_eq(tu_backend_levels(MHDGZ_BACKEND_ISAL, &mn, &mx, &df),
				 MHDGZ_ENOTSUP);
	}
	ck_assert_int_lt(tu_backend_levels((enum mhdgz_backend)4, &mn, &mx, &df), 0);
}
END_TEST

/* ===================================================================== */
/*                        mhdgz_new() validation                         */
/* ===================================================================== */

struct new_case {
	enum mhdgz_backend backend;
	int level;
	unsigned int flags;
	int etag_policy;
	int needs; /* 1 / -1: only when ISA-L is / is not compiled in; 2 / -2: libdeflate */
	int want;
};

static const struct new_case new_cases[] = {
	{ MHDGZ_BACKEND_DEFAULT, 0, 0, 0, 0, 0 },
	{ MHDGZ_BACKEND_DEFAULT, 12, 0, 0, 2, 0 },
	{ MHDGZ_BACKEND_DEFAULT, 13, 0, 0, 0, MHDGZ_EINVAL },
	{ MHDGZ_BACKEND_DEFAULT, -1, 0, 0, 0, MHDGZ_EINVAL },
	{ MHDGZ_BACKEND_ZLIB, 0, 0, 0, 0, 0 },
	{ MHDGZ_BACKEND_ZLIB, 1, 0, 0, 0, 0 },
	{ MHDGZ_BACKEND_ZLIB, 9, 0, 0, 0, 0 },
	{ MHDGZ_BACKEND_ZLIB, 10, 0, 0, 0, MHDGZ_EINVAL },
	{ MHDGZ_BACKEND_ZLIB, -1, 0, 0, 0, MHDGZ_EINVAL },
	{ MHDGZ_BACKEND_LIBDEFLATE, 0, 0, 0, 2, 0 },
	{ MHDGZ_BACKEND_LIBDEFLATE, 1, 0, 0, 2, 0 },
	{ MHDGZ_BACKEND_LIBDEFLATE, 12, 0, 0, 2, 0 },
	{ MHDGZ_BACKEND_LIBDEFLATE, 13, 0, 0, 2, MHDGZ_EINVAL },
	{ MHDGZ_BACKEND_LIBDEFLATE, -5, 0, 0, 2, MHDGZ_EINVAL },
	{ MHDGZ_BACKEND_LIBDEFLATE, 0, 0, 0, -2, MHDGZ_ENOTSUP },
	{ MHDGZ_BACKEND_ISAL, 0, 0, 0, 1, 0 },
	{ MHDGZ_BACKEND_ISAL, 1, 0, 0, 1, 0 },
	{ MHDGZ_BACKEND_ISAL, 4, 0, 0, 1, 0 },
	{ MHDGZ_BACKEND_ISAL, 5, 0, 0, 1, MHDGZ_EINVAL },
	{ MHDGZ_BACKEND_ISAL, -1, 0, 0, 1, MHDGZ_EINVAL },
	{ MHDGZ_BACKEND_ISAL, 0, 0, 0, -1, MHDGZ_ENOTSUP },
	{ (enum mhdgz_backend)4, 0, 0, 0, 0, MHDGZ_EINVAL },
	{ (enum mhdgz_backend) - 1, 0, 0, 0, 0, MHDGZ_EINVAL },
	{ MHDGZ_BACKEND_ZLIB, 0, MHDGZ_F_NO_POOL, 0, 0, 0 },
	{ MHDGZ_BACKEND_DEFAULT, 0, 0, MHDGZ_ETAG_SUFFIX, 0, 0 },
	{ MHDGZ_BACKEND_DEFAULT, 0, 0, MHDGZ_ETAG_DROP, 0, 0 },
	{ MHDGZ_BACKEND_DEFAULT, 0, 0, MHDGZ_ETAG_KEEP, 0, 0 },
	{ MHDGZ_BACKEND_DEFAULT, 0, 0, 4, 0, MHDGZ_EINVAL },
	{ MHDGZ_BACKEND_DEFAULT, 0, 0, -1, 0, MHDGZ_EINVAL },
};

START_TEST(test_new_table)
{
	const struct new_case *c = &new_cases[_i];
	struct mhdgz_options o;
	struct mhdgz *gz = (struct mhdgz *)&o; /* sentinel: untouched on error */
	int rc;

	if ((c->needs == 1 && !TH_HAVE_ISAL) || (c->needs == -1 && TH_HAVE_ISAL) ||
	    (c->needs == 2 && !TH_HAVE_LIBDEFLATE) || (c->needs == -2 && TH_HAVE_LIBDEFLATE))
		return;
	memset(&o, 0, sizeof o);
	o.size = sizeof o;
	o.gzip.backend = c->backend;
	o.gzip.level = c->level;
	o.flags = c->flags;
	o.etag_policy = (enum mhdgz_etag_policy)c->etag_policy;
	rc = mhdgz_new(&o, &gz);
	ck_assert_msg(rc == c->want,
		      "case %d (backend %d level %d flags %u etag %d): want %d got %d", _i,
		      c->backend, c->level, c->flags, c->etag_policy, c->want, rc);
	if (rc == 0) {
		ck_assert_ptr_nonnull(gz);
		ck_assert_ptr_ne(gz, (struct mhdgz *)&o);
		mhdgz_free(gz);
	} else {
		ck_assert_ptr_eq(gz, (struct mhdgz *)&o);
	}
}
END_TEST

START_TEST(test_new_misc)
{
	struct mhdgz_options o;
	struct mhdgz *gz = NULL;
	static const char *const bad_types[][2] = {
		{ "text", NULL },
		{ "", NULL },
		{ "/json", NULL },
		{ "text/", NULL },
		{ "*/json", NULL },
		/* found by tests/fuzz/fuzz_types: a second slash was accepted */
		{ "A.A//", NULL },
		{ "text/plain/x", NULL },
		{ "*/*+a/b", NULL },
	};
	static const char *const good_types[] = { "text/*", "*/*+json", "application/x-a", "*/*",
						  NULL };

	/* NULL opts: all defaults. */
	ck_assert_int_eq(mhdgz_new(NULL, &gz), 0);
	ck_assert_ptr_nonnull(gz);
	mhdgz_free(gz);
	mhdgz_free(NULL);

	memset(&o, 0, sizeof o);
	o.size = sizeof o;
	ck_assert_int_eq(mhdgz_new(&o, NULL), MHDGZ_EINVAL);
	ck_assert_int_eq(mhdgz_new(NULL, NULL), MHDGZ_EINVAL);

	/* Unknown sizes. */
	gz = NULL;
	o.size = 0;
	ck_assert_int_eq(mhdgz_new(&o, &gz), MHDGZ_EINVAL);
	o.size = sizeof o + 8;
	ck_assert_int_eq(mhdgz_new(&o, &gz), MHDGZ_EINVAL);
	o.size = sizeof o - 1;
	ck_assert_int_eq(mhdgz_new(&o, &gz), MHDGZ_EINVAL);
	o.size = 1;
	ck_assert_int_eq(mhdgz_new(&o, &gz), MHDGZ_EINVAL);
	ck_assert_ptr_null(gz);

	/* min_size and pool_idle_cap take any value. */
	o.size = sizeof o;
	o.min_nbytes = 1;
	o.limits.pool_idle_cap = 1;
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	mhdgz_free(gz);
	o.min_nbytes = (size_t)-1;
	o.limits.pool_idle_cap = 1000;
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	mhdgz_free(gz);

	/* Stream and event window settings: 9-15 and 1-9, 0 the default. */
	{
		const int bad[][4] = { { 8, 0, 0, 0 },  { 16, 0, 0, 0 }, { 0, 10, 0, 0 },
				       { 0, -1, 0, 0 }, { 0, 0, 8, 0 },  { 0, 0, 16, 0 },
				       { 0, 0, 0, 10 }, { 0, 0, 0, -3 } };

		memset(&o, 0, sizeof o);
		o.size = sizeof o;
		for (size_t i = 0; i < N_ELEMS(bad); i++) {
			gz = NULL;
			o.gzip.stream_window_bits = bad[i][0];
			o.gzip.stream_mem_level = bad[i][1];
			o.gzip.event_window_bits = bad[i][2];
			o.gzip.event_mem_level = bad[i][3];
			ck_assert_int_eq(mhdgz_new(&o, &gz), MHDGZ_EINVAL);
			ck_assert_ptr_null(gz);
		}
		o.gzip.stream_window_bits = 9;
		o.gzip.stream_mem_level = 9;
		o.gzip.event_window_bits = 15;
		o.gzip.event_mem_level = 1;
		ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
		mhdgz_free(gz);
	}

	/* Media type patterns. */
	memset(&o, 0, sizeof o);
	o.size = sizeof o;
	o.compress_types = good_types;
	o.skip_types = good_types;
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	mhdgz_free(gz);
	for (size_t i = 0; i < N_ELEMS(bad_types); i++) {
		gz = NULL;
		o.compress_types = bad_types[i];
		o.skip_types = NULL;
		ck_assert_msg(mhdgz_new(&o, &gz) == MHDGZ_EINVAL, "compress_types '%s' accepted",
			      bad_types[i][0]);
		ck_assert_ptr_null(gz);
		o.compress_types = NULL;
		o.skip_types = bad_types[i];
		ck_assert_msg(mhdgz_new(&o, &gz) == MHDGZ_EINVAL, "skip_types '%s' accepted",
			      bad_types[i][0]);
		ck_assert_ptr_null(gz);
	}
}
END_TEST

START_TEST(test_stats_api)
{
	struct mhdgz *gz;
	struct mhdgz_stats st;

	ck_assert_int_eq(mhdgz_new(NULL, &gz), 0);
	memset(&st, 0xff, sizeof st);
	st.size = sizeof st;
	ck_assert_int_eq(mhdgz_get_stats(gz, &st), 0);
	ck_assert_uint_eq(st.responses, 0);
	ck_assert_uint_eq(st.compressed, 0);
	for (int r = 0; r < MHDGZ_REASON_COUNT; r++)
		ck_assert_uint_eq(st.reasons[r], 0);
	ck_assert_uint_eq(st.bytes_in, 0);
	ck_assert_uint_eq(st.bytes_out, 0);
	ck_assert_uint_eq(st.compressions, 0);
	ck_assert_uint_eq(st.failures, 0);
	ck_assert_uint_eq(st.cache_hits, 0);
	ck_assert_int_eq(mhdgz_get_stats(NULL, &st), MHDGZ_EINVAL);
	ck_assert_int_eq(mhdgz_get_stats(gz, NULL), MHDGZ_EINVAL);
	st.size = 0;
	ck_assert_int_eq(mhdgz_get_stats(gz, &st), MHDGZ_EINVAL);
	st.size = sizeof st + 8;
	ck_assert_int_eq(mhdgz_get_stats(gz, &st), MHDGZ_EINVAL);
	mhdgz_free(gz);
}
END_TEST

static void *
na_malloc(size_t n, void *cls)
{
	(void)cls;
	return malloc(n);
}

static void
na_free(void *p, void *cls)
{
	(void)cls;
	free(p);
}

START_TEST(test_set_allocator)
{
	struct mhdgz_allocator a = { .size = sizeof a, .malloc_fn = na_malloc, .free_fn = na_free };
	struct mhdgz *gz;

	ck_assert_int_eq(mhdgz_set_allocator(NULL), 0);
	a.size = 0;
	ck_assert_int_eq(mhdgz_set_allocator(&a), MHDGZ_EINVAL);
	a.size = sizeof a - 1;
	ck_assert_int_eq(mhdgz_set_allocator(&a), MHDGZ_EINVAL);
	a.size = sizeof a + 8;
	ck_assert_int_eq(mhdgz_set_allocator(&a), MHDGZ_EINVAL);
	a.size = sizeof a;
	a.malloc_fn = NULL;
	ck_assert_int_eq(mhdgz_set_allocator(&a), MHDGZ_EINVAL);
	a.malloc_fn = na_malloc;
	a.free_fn = NULL;
	ck_assert_int_eq(mhdgz_set_allocator(&a), MHDGZ_EINVAL);
	a.free_fn = na_free;

	/* The counting allocator sees the handler's memory, and refuses to be
	 * replaced while it is live. */
	tu_alloc_install(0);
	ck_assert_int_eq(mhdgz_new(NULL, &gz), 0);
	ck_assert_int_gt(tu_alloc_count(), 0);
	ck_assert_int_gt(tu_alloc_live(), 0);
	ck_assert_int_eq(mhdgz_set_allocator(&a), MHDGZ_EBUSY);
	ck_assert_int_eq(mhdgz_set_allocator(NULL), MHDGZ_EBUSY);
	mhdgz_free(gz);
	ck_assert_int_eq(tu_alloc_live(), 0);
	ck_assert_int_eq(mhdgz_set_allocator(&a), 0);
	ck_assert_int_eq(mhdgz_set_allocator(NULL), 0);
}
END_TEST

/* Every allocation of mhdgz_new() failing in turn: clean failure, no leak. */
START_TEST(test_new_faults)
{
	uint64_t k;
	struct mhdgz_options o;

	memset(&o, 0, sizeof o);
	o.size = sizeof o;
	o.gzip.backend = (enum mhdgz_backend)_i;   /* loop 0..2: default, zlib, libdeflate */
	if (!tu_backend_available(o.gzip.backend)) /* configure --without-<lib> */
		return;
	for (k = 1; k <= 10000; k++) {
		struct mhdgz *gz = NULL;
		int rc, fired;

		tu_alloc_install(k);
		rc = mhdgz_new(&o, &gz);
		fired = tu_alloc_failed();
		if (rc == 0) {
			ck_assert_ptr_nonnull(gz);
			mhdgz_free(gz);
		} else {
			ck_assert_msg(rc == MHDGZ_ENOMEM, "k=%llu: rc %d", (unsigned long long)k,
				      rc);
			ck_assert_msg(fired, "k=%llu: failed without an injected failure",
				      (unsigned long long)k);
			ck_assert_ptr_null(gz);
		}
		ck_assert_msg(tu_alloc_live() == 0, "k=%llu: %lld blocks leaked",
			      (unsigned long long)k, (long long)tu_alloc_live());
		tu_alloc_uninstall();
		if (!fired)
			break;
	}
	ck_assert_msg(k > 1 && k <= 10000, "k=%llu", (unsigned long long)k);
}
END_TEST

/* ===================================================================== */
/*       the selection (hnd_select) and response API (no daemon)        */
/* ===================================================================== */

static const char *
resp_hdr(struct MHD_Response *r, const char *name)
{
	return MHD_get_response_header(r, name);
}

struct hcount {
	const char *name;
	int n;
};

static enum MHD_Result
count_cb(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct hcount *hc = cls;

	(void)kind;
	(void)value;
	if (strcasecmp(key, hc->name) == 0)
		hc->n++;
	return MHD_YES;
}

static int
resp_hdr_count(struct MHD_Response *r, const char *name)
{
	struct hcount hc = { name, 0 };

	MHD_get_response_headers(r, count_cb, &hc);
	return hc.n;
}

/* A request without a connection: its Accept-Encoding lines and the
 * selection's flags. */
struct sel_req {
	const char *const *ae;
	size_t n;
	unsigned int flags; /* HND_REQ_* */
};

static struct sel_req
req_of(const char *const *lines, size_t count)
{
	return (struct sel_req){ .ae = lines, .n = count, .flags = 0 };
}

/* The selection without a connection: hnd_select(), what
 * mhdgz_queue_response_ex() runs before MHD_queue_response(). */
static int
select_of(struct mhdgz *gz, const struct sel_req *rq, unsigned int status, struct MHD_Response *r,
	  struct MHD_Response **q, enum mhdgz_reason *why)
{
	struct hnd_request hr = { .head = false, .flags = rq->flags };
	struct hnd_result res;
	int rc;

	hnd_accept_parse(rq->ae, rq->n, &hr.acc);
	rc = hnd_select(gz, &hr, status, r, q, &res);
	if (why)
		*why = res.reason;
	return rc;
}

static struct mhdgz_stats
stats_of(struct mhdgz *gz)
{
	struct mhdgz_stats st;

	memset(&st, 0, sizeof st);
	st.size = sizeof st;
	ck_assert_int_eq(mhdgz_get_stats(gz, &st), 0);
	return st;
}

static const char *const ae_gzip[] = { "gzip" };

START_TEST(test_select_identity_and_variant)
{
	struct mhdgz *gz;
	uint8_t *body = tu_payload(8192, TU_TEXT, 1);
	struct MHD_Response *r, *q = NULL, *v1, *v2;
	struct sel_req none = req_of(NULL, 0), yes = req_of(ae_gzip, 1);
	enum mhdgz_reason why = MHDGZ_REASON_COUNT;
	struct mhdgz_stats st;

	ck_assert_int_eq(mhdgz_new(NULL, &gz), 0);
	r = mhdgz_response_from_buffer(gz, 8192, body, MHD_RESPMEM_PERSISTENT);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(MHD_add_response_header(r, "Content-Type", "text/plain"), MHD_YES);
	ck_assert_int_eq(MHD_add_response_header(r, "ETag", "\"v1\""), MHD_YES);

	/* No Accept-Encoding: the response itself, with Vary added. */
	ck_assert_int_eq(select_of(gz, &none, 200, r, &q, &why), 0);
	ck_assert_ptr_eq(q, r);
	ck_assert_int_eq(why, MHDGZ_SKIP_NOT_ACCEPTED);
	ck_assert_ptr_nonnull(resp_hdr(r, "Vary"));
	ck_assert_str_eq(resp_hdr(r, "Vary"), "Accept-Encoding");
	ck_assert_str_eq(resp_hdr(r, "ETag"), "\"v1\"");
	ck_assert_ptr_null(resp_hdr(r, "Content-Encoding"));

	/* gzip: a distinct variant with the gzip headers. */
	ck_assert_int_eq(select_of(gz, &yes, 200, r, &v1, &why), 0);
	ck_assert_int_eq(why, MHDGZ_COMPRESSED);
	ck_assert_ptr_nonnull(v1);
	ck_assert_ptr_ne(v1, r);
	ck_assert_int_eq(resp_hdr_count(v1, "Content-Encoding"), 1);
	ck_assert_str_eq(resp_hdr(v1, "Content-Encoding"), "gzip");
	ck_assert_int_eq(resp_hdr_count(v1, "Vary"), 1);
	ck_assert_str_eq(resp_hdr(v1, "Vary"), "Accept-Encoding");
	ck_assert_str_eq(resp_hdr(v1, "ETag"), "W/\"v1\"");
	ck_assert_str_eq(resp_hdr(v1, "Content-Type"), "text/plain");
	/* The identity response is not modified by building the variant. */
	ck_assert_ptr_null(resp_hdr(r, "Content-Encoding"));
	ck_assert_str_eq(resp_hdr(r, "ETag"), "\"v1\"");
	ck_assert_int_eq(resp_hdr_count(r, "Vary"), 1);

	/* Second call: the same variant, a cache hit. */
	ck_assert_int_eq(select_of(gz, &yes, 200, r, &v2, NULL), 0);
	ck_assert_ptr_eq(v2, v1);
	st = stats_of(gz);
	ck_assert_uint_eq(st.responses, 3);
	ck_assert_uint_eq(st.compressions, 1);
	ck_assert_uint_eq(st.cache_hits, 1);
	ck_assert_uint_eq(st.compressed, 2);
	ck_assert_uint_eq(st.reasons[MHDGZ_COMPRESSED], 2);
	ck_assert_uint_eq(st.reasons[MHDGZ_SKIP_NOT_ACCEPTED], 1);
	ck_assert_uint_eq(st.bytes_in, 3 * 8192);

	/* HND_REQ_NO_CACHE: rebuilt (the pointer may or may not be reused). */
	yes.flags = HND_REQ_NO_CACHE;
	ck_assert_int_eq(select_of(gz, &yes, 200, r, &v2, &why), 0);
	ck_assert_int_eq(why, MHDGZ_COMPRESSED);
	ck_assert_ptr_ne(v2, r);
	ck_assert_str_eq(resp_hdr(v2, "Content-Encoding"), "gzip");
	st = stats_of(gz);
	ck_assert_uint_eq(st.compressions, 2);
	ck_assert_uint_eq(st.cache_hits, 1);
	ck_assert_uint_eq(st.compressed, 3);
	/* And the replacement is the cached one from now on. */
	yes.flags = 0;
	ck_assert_int_eq(select_of(gz, &yes, 200, r, &v1, &why), 0);
	ck_assert_ptr_eq(v1, v2);
	st = stats_of(gz);
	ck_assert_uint_eq(st.compressions, 2);
	ck_assert_uint_eq(st.cache_hits, 2);

	/* Another handler does not know the response: queued unchanged. */
	{
		struct mhdgz *gz2;
		struct MHD_Response *q2 = NULL;

		ck_assert_int_eq(mhdgz_new(NULL, &gz2), 0);
		ck_assert_int_eq(select_of(gz2, &yes, 200, r, &q2, &why), 0);
		ck_assert_ptr_eq(q2, r);
		ck_assert_int_eq(why, MHDGZ_SKIP_UNTRACKED);
		mhdgz_free(gz2);
	}

	/* Destroying the response releases the variant too (ASan checks). */
	MHD_destroy_response(r);
	mhdgz_free(gz);
	free(body);
}
END_TEST

/* The flags of a response are fixed once it is queued: its variants and
 * streams were made with them. mhdgz_response_set_flags then refuses other
 * flags with MHDGZ_EBUSY, and the next queue plans as the first did. */
START_TEST(test_set_flags_after_queue)
{
	static const char *const codings_gzip = "gzip";
	struct mhdgz_options o = { .size = sizeof o, .codings = codings_gzip };
	struct mhdgz *gz;
	uint8_t *body = tu_payload(8192, TU_TEXT, 3);
	struct MHD_Response *r, *q = NULL;
	struct sel_req yes = req_of(ae_gzip, 1);
	enum mhdgz_reason why = MHDGZ_REASON_COUNT;

	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	r = mhdgz_response_from_buffer(gz, 8192, body, MHD_RESPMEM_PERSISTENT);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(MHD_add_response_header(r, "Content-Type", "text/plain"), MHD_YES);
	ck_assert_int_eq(mhdgz_response_set_flags(gz, r, MHDGZ_RESPONSE_NO_LENGTH_HIDING), 0);
	ck_assert_int_eq(select_of(gz, &yes, 200, r, &q, &why), 0);
	ck_assert_int_eq(why, MHDGZ_COMPRESSED);
	ck_assert_int_eq(mhdgz_response_set_flags(gz, r, MHDGZ_RESPONSE_IDENTITY), MHDGZ_EBUSY);
	ck_assert_int_eq(mhdgz_response_set_flags(gz, r, 0), MHDGZ_EBUSY);
	/* The flags it has, set again (a reused response set up the same
	 * way for each request): nothing changes, nothing to refuse. */
	ck_assert_int_eq(mhdgz_response_set_flags(gz, r, MHDGZ_RESPONSE_NO_LENGTH_HIDING), 0);
	ck_assert_int_eq(select_of(gz, &yes, 200, r, &q, &why), 0);
	ck_assert_int_eq(why, MHDGZ_COMPRESSED);
	ck_assert_str_eq(resp_hdr(q, "Content-Encoding"), "gzip");
	MHD_destroy_response(r);
	mhdgz_free(gz);
	free(body);
}
END_TEST

START_TEST(test_select_bad_args)
{
	struct mhdgz *gz;
	uint8_t *body = tu_payload(4096, TU_TEXT, 2);
	struct MHD_Response *r;
	struct mhdgz_outcome o = { .size = sizeof o - 1 };

	ck_assert_int_eq(mhdgz_new(NULL, &gz), 0);
	r = mhdgz_response_from_buffer(gz, 4096, body, MHD_RESPMEM_PERSISTENT);
	ck_assert_ptr_nonnull(r);
	MHD_add_response_header(r, "Content-Type", "text/plain");

	/* Queue with NULL arguments or an unknown outcome size: MHD_NO, no
	 * crash, nothing queued. */
	ck_assert_int_eq(mhdgz_queue_response(gz, NULL, 200, r), MHD_NO);
	ck_assert_int_eq(mhdgz_queue_response(NULL, NULL, 200, r), MHD_NO);
	ck_assert_int_eq(mhdgz_queue_response(gz, NULL, 200, NULL), MHD_NO);
	ck_assert_int_eq(mhdgz_queue_response_ex(gz, NULL, TU_REQ("GET"), 200, r, &o), MHD_NO);
	ck_assert_int_eq(mhdgz_queue_response_ex(gz, NULL, TU_REQ("GET"), 200, NULL, NULL), MHD_NO);

	MHD_destroy_response(r);
	mhdgz_free(gz);
	free(body);
}
END_TEST

/*
 * The shared library loaded with dlopen() by a program that was not linked
 * with it (a plugin host, Python's ctypes): glibc places such a library's
 * thread-locals in static TLS space only when the library asks for it
 * (initial-exec accesses), and then needs room for its whole TLS block in
 * the few hundred bytes it keeps spare; otherwise dlopen() fails with
 * "cannot allocate memory in static TLS block". LIBMHDGZ_SO names the
 * library (make check sets it); a build without one has nothing to load.
 */
START_TEST(test_dlopen)
{
	const char *so = getenv("LIBMHDGZ_SO");
	int (*new_fn)(const struct mhdgz_options *, struct mhdgz **);
	void (*free_fn)(struct mhdgz *);
	struct mhdgz *gz = NULL;
	void *h;

	if (!so)
		so = "handler/.libs/libmhdgz.so";
	if (access(so, R_OK) != 0)
		return; /* --disable-shared */
	h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	ck_assert_msg(h != NULL, "dlopen: %s", dlerror());
	*(void **)&new_fn = dlsym(h, "mhdgz_new");
	*(void **)&free_fn = dlsym(h, "mhdgz_free");
	ck_assert_ptr_nonnull(new_fn);
	ck_assert_ptr_nonnull(free_fn);
	ck_assert_int_eq(new_fn(NULL, &gz), 0);
	ck_assert_ptr_nonnull(gz);
	free_fn(gz);
}
END_TEST

START_TEST(test_response_api)
{
	struct mhdgz *gz, *gz2;
	struct MHD_Response *r, *u;
	char *owned;

	ck_assert_int_eq(mhdgz_new(NULL, &gz), 0);
	ck_assert_int_eq(mhdgz_new(NULL, &gz2), 0);

	/* Size 0 with a NULL buffer is allowed. */
	r = mhdgz_response_from_buffer(gz, 0, NULL, MHD_RESPMEM_PERSISTENT);
	ck_assert_ptr_nonnull(r);
	MHD_destroy_response(r);
	/* NULL buffer with a size: NULL. */
	ck_assert_ptr_null(mhdgz_response_from_buffer(gz, 10, NULL, MHD_RESPMEM_PERSISTENT));
	ck_assert_ptr_null(mhdgz_response_from_buffer(gz, 10, NULL, MHD_RESPMEM_MUST_COPY));
	/* NULL handler: NULL, and a MUST_FREE buffer is still the caller's, as
	 * with libmicrohttpd (ASan would see a double free, LSan a leak). */
	owned = strdup("owned buffer");
	ck_assert_ptr_null(mhdgz_response_from_buffer(NULL, strlen(owned), owned,
						      MHD_RESPMEM_MUST_FREE));
	free(owned);

	/* set_identity: only for responses of this handler. */
	r = mhdgz_response_from_buffer(gz, 5, "hello", MHD_RESPMEM_PERSISTENT);
	ck_assert_ptr_nonnull(r);
	u = MHD_create_response_from_buffer(5, "hello", MHD_RESPMEM_PERSISTENT);
	ck_assert_ptr_nonnull(u);
	ck_assert_int_eq(mhdgz_response_set_flags(gz, r, MHDGZ_RESPONSE_IDENTITY), 0);
	ck_assert_int_eq(mhdgz_response_set_flags(gz2, r, MHDGZ_RESPONSE_IDENTITY), MHDGZ_EINVAL);
	ck_assert_int_eq(mhdgz_response_set_flags(gz, u, MHDGZ_RESPONSE_IDENTITY), MHDGZ_EINVAL);
	ck_assert_int_eq(mhdgz_response_set_flags(NULL, r, MHDGZ_RESPONSE_IDENTITY), MHDGZ_EINVAL);
	ck_assert_int_eq(mhdgz_response_set_flags(gz, NULL, MHDGZ_RESPONSE_IDENTITY), MHDGZ_EINVAL);
	MHD_destroy_response(u);
	MHD_destroy_response(r);

	/* MUST_FREE and MUST_COPY bodies released with the response. */
	owned = strdup("owned buffer 2");
	r = mhdgz_response_from_buffer(gz, strlen(owned), owned, MHD_RESPMEM_MUST_FREE);
	ck_assert_ptr_nonnull(r);
	MHD_destroy_response(r);
	r = mhdgz_response_from_buffer(gz, 5, "hello", MHD_RESPMEM_MUST_COPY);
	ck_assert_ptr_nonnull(r);
	MHD_destroy_response(r);

	mhdgz_free(gz2);
	mhdgz_free(gz);
}
END_TEST

/*
 * The decision, case by case and in its documented order (enum
 * mhdgz_reason): each case adds one more "no" that comes earlier in the
 * order than the one the previous case exercised, and checks that the
 * earliest wins. vary: 1 the response must carry Vary: Accept-Encoding
 * after the call, 0 it must not, -1 not checked.
 */
enum { SB_TEXT, SB_RANDOM, SB_BINARY };

struct sel_case {
	const char *name;
	unsigned int status;
	size_t len;
	int kind;           /* SB_* */
	const char *hdr[7]; /* name, value pairs, NULL-terminated */
	int ae;             /* 1: Accept-Encoding: gzip */
	int untracked, opt_out;
	enum mhdgz_reason want;
	int vary;
};

static const struct sel_case sel_cases[] = {
	{ "plain",
	  200,
	  4096,
	  SB_TEXT,
	  { "Content-Type", "text/plain" },
	  1,
	  0,
	  0,
	  MHDGZ_COMPRESSED,
	  1 },
	{ "cache-control other",
	  200,
	  4096,
	  SB_TEXT,
	  { "Content-Type", "text/plain", "Cache-Control", "public, max-age=60" },
	  1,
	  0,
	  0,
	  MHDGZ_COMPRESSED,
	  1 },
	{ "content-encoding identity",
	  200,
	  4096,
	  SB_TEXT,
	  { "Content-Type", "text/plain", "Content-Encoding", "identity" },
	  1,
	  0,
	  0,
	  MHDGZ_COMPRESSED,
	  1 },
	{ "not smaller",
	  200,
	  4096,
	  SB_RANDOM,
	  { "Content-Type", "text/plain" },
	  1,
	  0,
	  0,
	  MHDGZ_SKIP_NOT_SMALLER,
	  -1 },
	{ "small",
	  200,
	  1023,
	  SB_RANDOM,
	  { "Content-Type", "text/plain" },
	  1,
	  0,
	  0,
	  MHDGZ_SKIP_SMALL,
	  0 }, /* identity for every client: no Vary (RFC 9110 section 12.5.5) */
	{ "small text",
	  200,
	  1023,
	  SB_TEXT,
	  { "Content-Type", "text/plain" },
	  1,
	  0,
	  0,
	  MHDGZ_SKIP_SMALL,
	  0 },
	{ "exactly min_size",
	  200,
	  1024,
	  SB_TEXT,
	  { "Content-Type", "text/plain" },
	  1,
	  0,
	  0,
	  MHDGZ_COMPRESSED,
	  1 },
	{ "not accepted",
	  200,
	  2048,
	  SB_TEXT,
	  { "Content-Type", "text/plain" },
	  0,
	  0,
	  0,
	  MHDGZ_SKIP_NOT_ACCEPTED,
	  1 },
	{ "type",
	  200,
	  1023,
	  SB_TEXT,
	  { "Content-Type", "image/png" },
	  0,
	  0,
	  0,
	  MHDGZ_SKIP_TYPE,
	  0 },
	{ "empty",
	  200,
	  0,
	  SB_TEXT,
	  { "Content-Type", "image/png" },
	  0,
	  0,
	  0,
	  MHDGZ_SKIP_EMPTY,
	  -1 },
	{ "no-transform",
	  200,
	  0,
	  SB_TEXT,
	  { "Content-Type", "text/plain", "Cache-Control", "no-transform" },
	  1,
	  0,
	  0,
	  MHDGZ_SKIP_NO_TRANSFORM,
	  0 },
	{ "no-transform in a list, any case",
	  200,
	  4096,
	  SB_TEXT,
	  { "Content-Type", "text/plain", "Cache-Control", "public, No-Transform, max-age=5" },
	  1,
	  0,
	  0,
	  MHDGZ_SKIP_NO_TRANSFORM,
	  0 },
	{ "encoded",
	  200,
	  4096,
	  SB_TEXT,
	  { "Content-Type", "text/plain", "Content-Encoding", "br", "Cache-Control",
	    "no-transform" },
	  1,
	  0,
	  0,
	  MHDGZ_SKIP_ENCODED,
	  0 },
	{ "encoded gzip",
	  200,
	  4096,
	  SB_TEXT,
	  { "Content-Type", "text/plain", "Content-Encoding", "gzip" },
	  1,
	  0,
	  0,
	  MHDGZ_SKIP_ENCODED,
	  0 },
	{ "range 206",
	  206,
	  4096,
	  SB_TEXT,
	  { "Content-Type", "text/plain", "Content-Encoding", "br" },
	  1,
	  0,
	  0,
	  MHDGZ_SKIP_RANGE,
	  -1 },
	{ "content-range on 200",
	  200,
	  4096,
	  SB_TEXT,
	  { "Content-Type", "text/plain", "Content-Range", "bytes 0-4095/8000" },
	  1,
	  0,
	  0,
	  MHDGZ_SKIP_RANGE,
	  -1 },
	{ "status 204",
	  204,
	  4096,
	  SB_TEXT,
	  { "Content-Type", "text/plain" },
	  1,
	  0,
	  0,
	  MHDGZ_SKIP_STATUS,
	  -1 },
	{ "status 304",
	  304,
	  4096,
	  SB_TEXT,
	  { "Content-Type", "text/plain" },
	  1,
	  0,
	  0,
	  MHDGZ_SKIP_STATUS,
	  -1 },
	{ "status 101",
	  101,
	  4096,
	  SB_TEXT,
	  { "Content-Type", "text/plain" },
	  1,
	  0,
	  0,
	  MHDGZ_SKIP_STATUS,
	  -1 },
	{ "status 199 before range",
	  199,
	  4096,
	  SB_TEXT,
	  { "Content-Type", "text/plain", "Content-Range", "bytes 0-1/2" },
	  1,
	  0,
	  0,
	  MHDGZ_SKIP_STATUS,
	  -1 },
	{ "opt-out",
	  204,
	  4096,
	  SB_TEXT,
	  { "Content-Type", "text/plain" },
	  1,
	  0,
	  1,
	  MHDGZ_SKIP_OPT_OUT,
	  0 },
	{ "opt-out of a compressible one",
	  200,
	  4096,
	  SB_TEXT,
	  { "Content-Type", "text/plain" },
	  1,
	  0,
	  1,
	  MHDGZ_SKIP_OPT_OUT,
	  0 },
	{ "untracked",
	  200,
	  4096,
	  SB_TEXT,
	  { "Content-Type", "text/plain" },
	  1,
	  1,
	  0,
	  MHDGZ_SKIP_UNTRACKED,
	  0 },
	/* other statuses with content are compressed */
	{ "status 404",
	  404,
	  4096,
	  SB_TEXT,
	  { "Content-Type", "text/html" },
	  1,
	  0,
	  0,
	  MHDGZ_COMPRESSED,
	  1 },
	{ "status 500",
	  500,
	  4096,
	  SB_TEXT,
	  { "Content-Type", "application/json" },
	  1,
	  0,
	  0,
	  MHDGZ_COMPRESSED,
	  1 },
	{ "status 201",
	  201,
	  4096,
	  SB_TEXT,
	  { "Content-Type", "text/plain" },
	  1,
	  0,
	  0,
	  MHDGZ_COMPRESSED,
	  1 },
	/* sniffing without a Content-Type */
	{ "sniff text", 200, 4096, SB_TEXT, { NULL }, 1, 0, 0, MHDGZ_COMPRESSED, 1 },
	{ "sniff binary", 200, 4096, SB_BINARY, { NULL }, 1, 0, 0, MHDGZ_SKIP_TYPE, 0 },
};

/* A compressible body that no sniffer takes for text: a PNG signature,
 * then NULs and small binary runs. */
static void
fill_binary(uint8_t *b, size_t len)
{
	static const uint8_t sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };

	for (size_t i = 0; i < len; i++)
		b[i] = (uint8_t)((i % 64) < 48 ? 0 : (i * 7) & 0x0f);
	memcpy(b, sig, len < 8 ? len : 8);
}

START_TEST(test_select_reasons)
{
	struct mhdgz *gz;
	struct mhdgz_stats st;
	uint64_t want[MHDGZ_REASON_COUNT] = { 0 }, selects = 0, gzip_304s = 0;

	ck_assert_int_eq(mhdgz_new(NULL, &gz), 0);
	for (size_t i = 0; i < N_ELEMS(sel_cases); i++) {
		const struct sel_case *c = &sel_cases[i];
		uint8_t *body = malloc(c->len ? c->len : 1);
		struct MHD_Response *r, *q = NULL;
		struct sel_req rq = c->ae ? req_of(ae_gzip, 1) : req_of(NULL, 0);
		enum mhdgz_reason why = MHDGZ_REASON_COUNT;
		int rc;

		ck_assert_ptr_nonnull(body);
		if (c->kind == SB_BINARY)
			fill_binary(body, c->len);
		else
			tu_fill(body, c->len, c->kind == SB_TEXT ? TU_TEXT : TU_RANDOM,
				(uint32_t)i);
		if (c->untracked)
			r = MHD_create_response_from_buffer(c->len, body, MHD_RESPMEM_PERSISTENT);
		else
			r = mhdgz_response_from_buffer(gz, c->len, body, MHD_RESPMEM_PERSISTENT);
		ck_assert_ptr_nonnull(r);
		for (int h = 0; c->hdr[h]; h += 2)
			ck_assert_int_eq(MHD_add_response_header(r, c->hdr[h], c->hdr[h + 1]),
					 MHD_YES);
		if (c->opt_out)
			ck_assert_int_eq(mhdgz_response_set_flags(gz, r, MHDGZ_RESPONSE_IDENTITY),
					 0);
		rc = select_of(gz, &rq, c->status, r, &q, &why);
		ck_assert_msg(rc == 0, "%s: rc %d", c->name, rc);
		ck_assert_msg(why == c->want, "%s: want reason %s, got %s", c->name,
			      mhdgz_reason_name(c->want), mhdgz_reason_name(why));
		want[c->want]++;
		if (c->want == MHDGZ_COMPRESSED) {
			ck_assert_msg(q != r, "%s: compressed but the identity was returned",
				      c->name);
			ck_assert_msg(resp_hdr_count(q, "Content-Encoding") == 1,
				      "%s: %d Content-Encoding fields", c->name,
				      resp_hdr_count(q, "Content-Encoding"));
			ck_assert_str_eq(resp_hdr(q, "Content-Encoding"), "gzip");
			ck_assert_msg(resp_hdr_count(q, "Vary") == 1, "%s: Vary count", c->name);
			ck_assert_str_eq(resp_hdr(q, "Vary"), "Accept-Encoding");
		} else if (c->status == 304 && c->ae && !c->untracked && !c->opt_out) {
			/* A 304 standing for a gzip 200 carries that 200's fields
			 * (and, libmicrohttpd's side, its length), never a
			 * Content-Encoding of its own (RFC 9110 sections 15.4.5,
			 * 8.6). */
			ck_assert_msg(q != r, "%s: the 304 of a gzip 200 is the response itself",
				      c->name);
			ck_assert_int_eq(resp_hdr_count(q, "Content-Encoding"), 0);
			ck_assert_str_eq(resp_hdr(q, "Vary"), "Accept-Encoding");
			ck_assert_str_eq(resp_hdr(q, "Content-Type"), "text/plain");
			gzip_304s++; /* its length came from compressing the body */
		} else {
			ck_assert_msg(q == r, "%s: not compressed but a variant was returned",
				      c->name);
		}
		if (c->vary == 1 && c->want == MHDGZ_COMPRESSED) {
			/* The response itself gets its Vary when it is queued
			 * itself: select it for a client without gzip. */
			struct sel_req none = req_of(NULL, 0);

			ck_assert_msg(resp_hdr(r, "Vary") == NULL,
				      "%s: response modified though only its variant was queued",
				      c->name);
			ck_assert_int_eq(select_of(gz, &none, c->status, r, &q, &why), 0);
			ck_assert_msg(q == r && why == MHDGZ_SKIP_NOT_ACCEPTED,
				      "%s: identity select", c->name);
			want[MHDGZ_SKIP_NOT_ACCEPTED]++;
			selects++;
		}
		if (c->vary == 1) {
			ck_assert_msg(resp_hdr(r, "Vary") != NULL, "%s: identity lacks Vary",
				      c->name);
			ck_assert_str_eq(resp_hdr(r, "Vary"), "Accept-Encoding");
		} else if (c->vary == 0) {
			ck_assert_msg(resp_hdr(r, "Vary") == NULL, "%s: unexpected Vary '%s'",
				      c->name, resp_hdr(r, "Vary"));
		}
		MHD_destroy_response(r);
		free(body);
	}
	st = stats_of(gz);
	ck_assert_uint_eq(st.responses, N_ELEMS(sel_cases) + selects);
	for (int r = 0; r < MHDGZ_REASON_COUNT; r++)
		ck_assert_msg(st.reasons[r] == want[r], "reason %s: want %llu got %llu",
			      mhdgz_reason_name((enum mhdgz_reason)r), (unsigned long long)want[r],
			      (unsigned long long)st.reasons[r]);
	ck_assert_uint_eq(st.compressed, want[MHDGZ_COMPRESSED]);
	/* A body found not smaller was built and discarded: whether that
	 * counts as a compression the header leaves open. */
	ck_assert_uint_ge(st.compressions, want[MHDGZ_COMPRESSED]);
	ck_assert_uint_le(st.compressions,
			  want[MHDGZ_COMPRESSED] + want[MHDGZ_SKIP_NOT_SMALLER] + gzip_304s);
	ck_assert_uint_ge(st.compressions, want[MHDGZ_COMPRESSED] + gzip_304s);
	ck_assert_uint_eq(st.failures, 0);
	mhdgz_free(gz);
}
END_TEST

/* Every backend and a few levels: the variant is built and cached. */
START_TEST(test_select_backends)
{
	static const struct {
		enum mhdgz_backend be;
		int level;
		unsigned int flags;
	} cfg[] = {
		{ MHDGZ_BACKEND_ZLIB, 1, 0 },
		{ MHDGZ_BACKEND_ZLIB, 9, MHDGZ_F_NO_POOL },
		{ MHDGZ_BACKEND_LIBDEFLATE, 1, 0 },
		{ MHDGZ_BACKEND_LIBDEFLATE, 12, MHDGZ_F_NO_POOL },
		{ MHDGZ_BACKEND_ISAL, 1, 0 },
		{ MHDGZ_BACKEND_ISAL, 4, 0 },
	};
	uint8_t *body = tu_payload(100000, TU_JSON, 3);

	for (size_t i = 0; i < N_ELEMS(cfg); i++) {
		struct mhdgz_options o;
		struct mhdgz *gz;
		struct MHD_Response *r, *q;
		struct sel_req rq = req_of(ae_gzip, 1);
		enum mhdgz_reason why;

		if (!tu_backend_available(cfg[i].be))
			continue;
		memset(&o, 0, sizeof o);
		o.size = sizeof o;
		o.gzip.backend = cfg[i].be;
		o.gzip.level = cfg[i].level;
		o.flags = cfg[i].flags;
		ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
		r = mhdgz_response_from_buffer(gz, 100000, body, MHD_RESPMEM_PERSISTENT);
		ck_assert_ptr_nonnull(r);
		MHD_add_response_header(r, "Content-Type", "application/json");
		for (int n = 0; n < 3; n++) {
			ck_assert_int_eq(select_of(gz, &rq, 200, r, &q, &why), 0);
			ck_assert_msg(why == MHDGZ_COMPRESSED, "%s level %d: %s",
				      tu_backend_name(cfg[i].be), cfg[i].level,
				      mhdgz_reason_name(why));
		}
		MHD_destroy_response(r);
		mhdgz_free(gz);
	}
	free(body);
}
END_TEST

/* Compressor pool counters: one compressor serves sequential compressions;
 * MHDGZ_F_NO_POOL creates one per compression and keeps none (loop). */
START_TEST(test_select_pool_stats)
{
	enum { N = 10 };
	struct mhdgz_options o;
	struct mhdgz *gz;
	uint8_t *body = tu_payload(20000, TU_TEXT, 5);
	struct sel_req rq = req_of(ae_gzip, 1);
	struct mhdgz_stats st;

	memset(&o, 0, sizeof o);
	o.size = sizeof o;
	o.flags = _i ? MHDGZ_F_NO_POOL : 0;
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	for (int i = 0; i < N; i++) {
		struct MHD_Response *r, *q;
		enum mhdgz_reason why;

		r = mhdgz_response_from_buffer(gz, 20000, body, MHD_RESPMEM_PERSISTENT);
		ck_assert_ptr_nonnull(r);
		MHD_add_response_header(r, "Content-Type", "text/plain");
		ck_assert_int_eq(select_of(gz, &rq, 200, r, &q, &why), 0);
		ck_assert_int_eq(why, MHDGZ_COMPRESSED);
		MHD_destroy_response(r);
	}
	st = stats_of(gz);
	ck_assert_uint_eq(st.compressions, N);
	ck_assert_uint_eq(st.pool_gets, N);
	ck_assert_uint_eq(st.pool_misses, _i ? N : 1);
	ck_assert_uint_eq(st.pool_idle, _i ? 0 : 1);
	mhdgz_free(gz);
	free(body);
}
END_TEST

#ifdef TEST_LIBDEFLATE_OWN
/* The application's process-wide libdeflate allocator, and mhdgz's
 * (mhdgz_set_allocator), each counted apart. ld_gz_big counts mhdgz's
 * blocks of LD_BIG_NBYTES or more: at 20 kB bodies only a libdeflate
 * compressor's state is that big (hundreds of KiB at level 5). */
#define LD_BIG_NBYTES (64u * 1024)
static _Atomic uint64_t ld_app_mallocs, ld_app_frees;
static _Atomic uint64_t ld_gz_mallocs, ld_gz_frees, ld_gz_big;

static void *
ld_app_malloc(size_t n)
{
	atomic_fetch_add(&ld_app_mallocs, 1);
	return malloc(n);
}

static void
ld_app_free(void *p)
{
	if (p)
		atomic_fetch_add(&ld_app_frees, 1);
	free(p);
}

static void *
ld_gz_malloc(size_t n, void *cls)
{
	(void)cls;
	atomic_fetch_add(&ld_gz_mallocs, 1);
	if (n >= LD_BIG_NBYTES)
		atomic_fetch_add(&ld_gz_big, 1);
	return malloc(n);
}

static void
ld_gz_free(void *p, void *cls)
{
	(void)cls;
	atomic_fetch_add(&ld_gz_frees, 1);
	free(p);
}

/* A counter's value (a function, so that a failed check prints its name). */
static uint64_t
ld_n(_Atomic uint64_t *counter)
{
	return atomic_load(counter);
}

/* The application's compressor at level 6: compresses body exactly as
 * libdeflate does, checked by an independent decoder. */
static void
ld_app_compress(struct libdeflate_compressor *c, const uint8_t *body, size_t len)
{
	size_t cap = libdeflate_gzip_compress_bound(c, len), n;
	uint8_t *out = malloc(cap);

	ck_assert_ptr_nonnull(out);
	n = libdeflate_gzip_compress(c, body, len, out, cap);
	ck_assert_uint_gt(n, 0);
	ck_assert_int_eq(tu_verify_member(out, n, body, len), 0);
	free(out);
}

/*
 * With libdeflate_alloc_compressor_ex, mhdgz's allocator reaches its own
 * libdeflate compressors only: the application's libdeflate compressors,
 * made before and after mhdgz_new() with plain libdeflate_alloc_compressor,
 * keep the process-wide allocator the application chose (counted:
 * ld_app_*), and mhdgz's allocator sees none of their allocations or
 * frees; the compressor mhdgz makes for a compression through its pool is
 * allocated (and freed) through mhdgz's allocator, never the
 * application's. Global state is restored at the end.
 */
START_TEST(test_set_allocator_libdeflate_own)
{
	const struct mhdgz_allocator a = { .size = sizeof a,
					   .malloc_fn = ld_gz_malloc,
					   .free_fn = ld_gz_free };
	const size_t len = 20000;
	uint8_t *body = tu_payload(len, TU_TEXT, 7);
	struct libdeflate_compressor *before, *after;
	struct mhdgz_options o;
	struct mhdgz *gz = NULL;
	struct sel_req rq = req_of(ae_gzip, 1);
	struct MHD_Response *r, *q;
	enum mhdgz_reason why;
	uint64_t gz_m;

	atomic_store(&ld_app_mallocs, 0);
	atomic_store(&ld_app_frees, 0);
	atomic_store(&ld_gz_mallocs, 0);
	atomic_store(&ld_gz_frees, 0);
	atomic_store(&ld_gz_big, 0);
	/* The application's own choice for its libdeflate, then mhdgz's. */
	libdeflate_set_memory_allocator(ld_app_malloc, ld_app_free);
	ck_assert_int_eq(mhdgz_set_allocator(&a), 0);

	before = libdeflate_alloc_compressor(6);
	ck_assert_ptr_nonnull(before);
	ck_assert_uint_eq(ld_n(&ld_app_mallocs), 1);
	ck_assert_uint_eq(ld_n(&ld_gz_mallocs), 0);

	memset(&o, 0, sizeof o);
	o.size = sizeof o;
	o.gzip.backend = MHDGZ_BACKEND_LIBDEFLATE;
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	ck_assert_uint_gt(ld_n(&ld_gz_mallocs), 0); /* the handle */
	ck_assert_uint_eq(ld_n(&ld_app_mallocs), 1);

	gz_m = ld_n(&ld_gz_mallocs);
	after = libdeflate_alloc_compressor(6);
	ck_assert_ptr_nonnull(after);
	ld_app_compress(before, body, len);
	ld_app_compress(after, body, len);
	ck_assert_uint_eq(ld_n(&ld_app_mallocs), 2);
	ck_assert_uint_eq(ld_n(&ld_gz_mallocs) - gz_m, 0);
	ck_assert_uint_eq(ld_n(&ld_gz_frees), 0);

	/* mhdgz's own libdeflate compressor: one, made for this compression
	 * (a pool miss), through mhdgz's allocator alone. */
	r = mhdgz_response_from_buffer(gz, len, body, MHD_RESPMEM_PERSISTENT);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(MHD_add_response_header(r, "Content-Type", "text/plain"), MHD_YES);
	ck_assert_int_eq(select_of(gz, &rq, 200, r, &q, &why), 0);
	ck_assert_int_eq(why, MHDGZ_COMPRESSED);
	ck_assert_uint_eq(stats_of(gz).pool_misses, 1);
	ck_assert_uint_eq(ld_n(&ld_gz_big), 1);
	ck_assert_uint_gt(ld_n(&ld_gz_mallocs), gz_m);
	ck_assert_uint_eq(ld_n(&ld_app_mallocs), 2);
	MHD_destroy_response(r);
	mhdgz_free(gz);
	/* Every block of mhdgz's, libdeflate's state among them, went back
	 * through mhdgz's free; none through the application's. */
	ck_assert_uint_eq(ld_n(&ld_gz_frees), ld_n(&ld_gz_mallocs));
	ck_assert_uint_eq(ld_n(&ld_app_frees), 0);

	gz_m = ld_n(&ld_gz_mallocs);
	libdeflate_free_compressor(before);
	libdeflate_free_compressor(after);
	ck_assert_uint_eq(ld_n(&ld_app_frees), 2);
	ck_assert_uint_eq(ld_n(&ld_gz_mallocs) - gz_m, 0);
	ck_assert_uint_eq(ld_n(&ld_gz_frees), ld_n(&ld_gz_mallocs));

	ck_assert_int_eq(mhdgz_set_allocator(NULL), 0);
	libdeflate_set_memory_allocator(malloc, free);
	free(body);
}
END_TEST
#define TEST_LIBDEFLATE_OWN_FN test_set_allocator_libdeflate_own
#else
/* NULL: an empty row, which ends a test case's list (tests/check_suites.h). */
#define TEST_LIBDEFLATE_OWN_FN NULL
#endif /* TEST_LIBDEFLATE_OWN */

/* Trimming through the handler: mhdgz_trim() keeps the low watermark (the
 * one idle compressor here), never trims with MHDGZ_POOL_TRIM_NEVER, and
 * NULL is a no-op. The trimming itself: tests/check_pool.c. Loop: default
 * period, 1 ms period, never. */
START_TEST(test_select_pool_trim)
{
	const unsigned int periods[] = { 0, 1, MHDGZ_POOL_TRIM_NEVER };
	struct mhdgz_options o;
	struct mhdgz *gz;
	uint8_t *body = tu_payload(20000, TU_TEXT, 5);
	struct sel_req rq = req_of(ae_gzip, 1);
	struct MHD_Response *r, *q;
	enum mhdgz_reason why;
	struct mhdgz_stats st;

	memset(&o, 0, sizeof o);
	o.size = sizeof o;
	o.limits.pool_trim_ms = periods[_i];
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	r = mhdgz_response_from_buffer(gz, 20000, body, MHD_RESPMEM_PERSISTENT);
	ck_assert_ptr_nonnull(r);
	MHD_add_response_header(r, "Content-Type", "text/plain");
	ck_assert_int_eq(select_of(gz, &rq, 200, r, &q, &why), 0);
	ck_assert_int_eq(why, MHDGZ_COMPRESSED);
	MHD_destroy_response(r);
	tu_sleep_us(2000);
	ck_assert_uint_eq(mhdgz_trim(gz), 0);
	ck_assert_uint_eq(mhdgz_trim(NULL), 0);
	st = stats_of(gz);
	ck_assert_uint_eq(st.pool_idle, 1);
	ck_assert_uint_eq(st.pool_trims, 0);
	mhdgz_free(gz);
	free(body);
}
END_TEST

/* Allocation failures inside response creation and select_of(). */
START_TEST(test_select_faults)
{
	struct mhdgz_options o;
	struct mhdgz *gz;
	uint8_t *body = tu_payload(20000, TU_TEXT, 4);
	struct sel_req rq = req_of(ae_gzip, 1);
	struct mhdgz_stats st;
	uint64_t k, errors = 0, created_failed = 0;

	memset(&o, 0, sizeof o);
	o.size = sizeof o;
	o.gzip.backend = (enum mhdgz_backend)(_i % 3);
	o.flags = _i >= 3 ? MHDGZ_F_NO_POOL : 0;
	if (!tu_backend_available(o.gzip.backend)) { /* configure --without-<lib> */
		free(body);
		return;
	}
	tu_alloc_install(0);
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	for (k = 1; k <= 5000; k++) {
		struct MHD_Response *r, *q = NULL;
		enum mhdgz_reason why = MHDGZ_REASON_COUNT;
		int fired;
		uint8_t *owned = malloc(20000);

		ck_assert_ptr_nonnull(owned);
		memcpy(owned, body, 20000);
		tu_alloc_fail_at(k);
		r = mhdgz_response_from_buffer(gz, 20000, owned, MHD_RESPMEM_MUST_FREE);
		if (r == NULL) {
			ck_assert_msg(tu_alloc_failed(), "k=%llu: NULL response without a failure",
				      (unsigned long long)k);
			tu_alloc_fail_at(0);
			created_failed++;
			free(owned); /* still ours on failure, as with libmicrohttpd */
			continue;
		}
		MHD_add_response_header(r, "Content-Type", "text/plain");
		ck_assert_int_eq(select_of(gz, &rq, 200, r, &q, &why), 0);
		fired = tu_alloc_failed();
		tu_alloc_fail_at(0);
		if (why == MHDGZ_COMPRESSED) {
			ck_assert_ptr_ne(q, r);
			ck_assert_str_eq(resp_hdr(q, "Content-Encoding"), "gzip");
		} else {
			ck_assert_msg(why == MHDGZ_SKIP_ERROR, "k=%llu: reason %s",
				      (unsigned long long)k, mhdgz_reason_name(why));
			ck_assert_msg(fired, "k=%llu: error without an injected failure",
				      (unsigned long long)k);
			ck_assert_ptr_eq(q, r);
			ck_assert_ptr_null(resp_hdr(r, "Content-Encoding"));
			errors++;
		}
		MHD_destroy_response(r);
		if (!fired)
			break;
	}
	ck_assert_msg(k <= 5000, "no allocation-free request after 5000 tries");
	ck_assert_msg(errors + created_failed > 0, "no failure was injected");
	st = stats_of(gz);
	ck_assert_uint_eq(st.reasons[MHDGZ_SKIP_ERROR], errors);
	ck_assert_uint_eq(st.failures, errors);
	ck_assert_uint_eq(st.responses, k - created_failed);
	mhdgz_free(gz);
	ck_assert_msg(tu_alloc_live() == 0, "%lld blocks leaked", (long long)tu_alloc_live());
	tu_alloc_uninstall();
	free(body);
}
END_TEST

Suite *
negotiate_suite(void)
{
	const struct ck_case cases[] = {
		{ "accept-encoding",
		  CK_CASE_TIMEOUT,
		  { { test_ae_table, 0, (int)N_ELEMS(ae_cases) },
		    { test_ae_commas, 0, 0 },
		    { test_ae_many_lines, 0, 0 },
		    { test_ae_locale, 0, 0 } } },
		{ "etag",
		  CK_CASE_TIMEOUT,
		  { { test_etag_table, 0, (int)N_ELEMS(etag_cases) },
		    { test_etag_null, 0, 0 },
		    { test_etag_long_list, 0, 0 } } },
		{ "api",
		  CK_CASE_TIMEOUT,
		  { { test_reason_names, 0, 0 },
		    { test_strerror, 0, 0 },
		    { test_version, 0, 0 },
		    { test_backends, 0, 0 },
		    { test_new_table, 0, (int)N_ELEMS(new_cases) },
		    { test_new_misc, 0, 0 },
		    { test_stats_api, 0, 0 },
		    { test_set_allocator, 0, 0 },
		    { test_new_faults, 0, 3 },
		    { test_response_api, 0, 0 },
		    { test_dlopen, 0, 0 } } },
		{ "select",
		  CK_CASE_TIMEOUT,
		  { { test_select_identity_and_variant, 0, 0 },
		    { test_select_bad_args, 0, 0 },
		    { test_set_flags_after_queue, 0, 0 },
		    { test_select_reasons, 0, 0 },
		    { test_select_backends, 0, 0 },
		    { test_select_pool_stats, 0, 2 },
		    { test_select_pool_trim, 0, 3 },
		    { test_select_faults, 0, 6 },
		    { TEST_LIBDEFLATE_OWN_FN, 0, 0 } } },
	};

	return ck_suite("negotiate", cases, sizeof cases / sizeof cases[0]);
}
