/* fuzz_types.c: libFuzzer target for media type lists: hnd_typelist_init, hnd_types_compressible, hnd_media_type. */
/*
 * Input: one byte k (patterns: k % 8), then lines: the first k are the
 * patterns of a list (as struct mhdgz_options.compress_types), the rest
 * Content-Type values. Checked for every input:
 *  - hnd_typelist_init() returns 0 exactly when every pattern is
 *    well-formed per the grammar mhdgz.h documents ("type/subtype",
 *    "type/" "*", "*" "/" "*" "+suffix", "*" "/" "*"; type, subtype and
 *    suffix RFC 9110 tokens without '*' and '/'; Content-Type parameters
 *    and OWS ignored), else MHDGZ_EINVAL; on success it holds k patterns;
 *  - hnd_media_type() returns a slice of its argument without OWS at
 *    either end and without ';';
 *  - hnd_types_compressible() of each value, with the list as the
 *    compress list beside the default skip list, as the skip list beside
 *    the default compress list, and for the two default lists, equals a
 *    reference working from the pattern strings (matched by the compress
 *    list and not by the skip list), and does not depend on letter case.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gz_alloc.h"
#include "hnd_mtype.h"
#include "hnd_negotiate.h"
#include "fuzz_util.h"

#define FZ_MAX_LINES 40
#define FZ_MAX_PATTERNS 7

enum ref_kind { REF_BAD, REF_EXACT, REF_TYPE, REF_SUFFIX, REF_ANY };

struct ref_pat {
	enum ref_kind kind;
	const char *s; /* EXACT: type/subtype; TYPE: type; SUFFIX: +suffix */
	size_t len;
};

static bool
tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c != '\0' && strchr("!#$%&'+-.^_`|~", c) != NULL); /* '*' left out */
}

/* A run of tchar (no '*') of at least one byte? */
static bool
token(const char *s, size_t len)
{
	size_t i;

	if (len == 0)
		return false;
	for (i = 0; i < len; i++)
		if (!tchar(s[i]))
			return false;
	return true;
}

/* The media type of a value: up to ';', OWS trimmed (own code, not the
 * library's). */
static const char *
ref_media_type(const char *v, size_t *len)
{
	size_t l = strcspn(v, ";");

	while (l && (*v == ' ' || *v == '\t')) {
		v++;
		l--;
	}
	while (l && (v[l - 1] == ' ' || v[l - 1] == '\t'))
		l--;
	*len = l;
	return v;
}

static struct ref_pat
ref_compile(const char *src)
{
	struct ref_pat p = { REF_BAD, NULL, 0 };
	size_t len;
	const char *s = ref_media_type(src, &len), *slash = memchr(s, '/', len);
	size_t tl, sl;

	if (!slash)
		return p;
	tl = (size_t)(slash - s);
	sl = len - tl - 1;
	if (len == 3 && memcmp(s, "*/*", 3) == 0) {
		p.kind = REF_ANY;
	} else if (len > 4 && memcmp(s, "*/*+", 4) == 0) {
		if (token(s + 4, len - 4)) {
			p.kind = REF_SUFFIX;
			p.s = s + 3;
			p.len = len - 3;
		}
	} else if (sl == 1 && slash[1] == '*') {
		if (token(s, tl)) {
			p.kind = REF_TYPE;
			p.s = s;
			p.len = tl;
		}
	} else if (token(s, tl) && token(slash + 1, sl)) {
		p.kind = REF_EXACT;
		p.s = s;
		p.len = len;
	}
	return p;
}

static bool
ieqn(const char *a, const char *b, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		char x = a[i], y = b[i];
		if (x >= 'A' && x <= 'Z')
			x = (char)(x + 32);
		if (y >= 'A' && y <= 'Z')
			y = (char)(y + 32);
		if (x != y)
			return false;
	}
	return true;
}

static bool
ref_match(const struct ref_pat *p, size_t n, const char *mt, size_t len)
{
	const char *slash = memchr(mt, '/', len);
	size_t i;

	if (!slash)
		return false;
	for (i = 0; i < n; i++) {
		switch (p[i].kind) {
		case REF_ANY:
			return true;
		case REF_EXACT:
			if (len == p[i].len && ieqn(mt, p[i].s, len))
				return true;
			break;
		case REF_TYPE:
			if ((size_t)(slash - mt) == p[i].len && ieqn(mt, p[i].s, p[i].len))
				return true;
			break;
		case REF_SUFFIX:
			if (len > p[i].len && ieqn(mt + len - p[i].len, p[i].s, p[i].len))
				return true;
			break;
		case REF_BAD:
			break;
		}
	}
	return false;
}

static struct hnd_types def_types;
static struct ref_pat ref_compress[64], ref_skip[64];
static size_t n_ref_compress, n_ref_skip;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (hnd_typelist_init(&def_types.compress, hnd_default_compress_types) != 0 ||
	    hnd_typelist_init(&def_types.skip, hnd_default_skip_types) != 0 ||
	    hnd_types_index(&def_types) != 0)
		abort();
	for (; hnd_default_compress_types[n_ref_compress]; n_ref_compress++)
		ref_compress[n_ref_compress] =
			ref_compile(hnd_default_compress_types[n_ref_compress]);
	for (; hnd_default_skip_types[n_ref_skip]; n_ref_skip++)
		ref_skip[n_ref_skip] = ref_compile(hnd_default_skip_types[n_ref_skip]);
	return 0;
}

/* The verdict of t for mt[0..len), in its letter case and with every
 * letter's case flipped, against the reference lists c (compress) and k
 * (skip). */
static void
check_verdict(const struct hnd_types *t, const struct ref_pat *c, size_t nc,
	      const struct ref_pat *k, size_t nk, const char *mt, size_t len, const char *what)
{
	bool m = hnd_types_compressible(t, mt, len),
	     r = ref_match(c, nc, mt, len) && !ref_match(k, nk, mt, len);
	char *flip = malloc(len + 1);
	size_t i;

	FZ_CHECK(m == r, "%s: '%.*s': library %d, reference %d", what, (int)len, mt, m, r);
	if (!flip)
		abort();
	for (i = 0; i < len; i++) {
		char ch = mt[i];
		flip[i] = (ch >= 'a' && ch <= 'z')   ? (char)(ch - 32)
			  : (ch >= 'A' && ch <= 'Z') ? (char)(ch + 32)
						     : ch;
	}
	flip[len] = '\0';
	FZ_CHECK(hnd_types_compressible(t, flip, len) == m, "%s: case changes '%.*s'", what,
		 (int)len, mt);
	free(flip);
}

/* The fuzzed list (compiled in tl, reference ref[0..k)) as the compress
 * list beside the default skip list, and as the skip list beside the
 * default compress list. Both share def_types' lists, so fini is by hand. */
static void
check_lists(const struct hnd_typelist *tl, const struct ref_pat *ref, size_t k, const char *mt,
	    size_t len)
{
	struct hnd_types as_c = { .compress = *tl, .skip = def_types.skip },
			 as_s = { .compress = def_types.compress, .skip = *tl };

	if (hnd_types_index(&as_c) != 0 || hnd_types_index(&as_s) != 0)
		abort();
	check_verdict(&as_c, ref, k, ref_skip, n_ref_skip, mt, len, "fuzzed compress list");
	check_verdict(&as_s, ref_compress, n_ref_compress, ref, k, mt, len, "fuzzed skip list");
	gz_free(as_c.slot);
	gz_free(as_s.slot);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz f = { data, size };
	size_t k = fz_u8(&f) % (FZ_MAX_PATTERNS + 1), n, i;
	const char *lines[FZ_MAX_LINES], *pats[FZ_MAX_PATTERNS + 1];
	struct ref_pat ref[FZ_MAX_PATTERNS];
	struct hnd_typelist tl;
	bool all_ok = true;
	char *buf;
	int rc;

	n = fz_lines(f.p, f.n, &buf, lines, FZ_MAX_LINES);
	if (k > n)
		k = n;
	for (i = 0; i < k; i++) {
		pats[i] = lines[i];
		ref[i] = ref_compile(lines[i]);
		all_ok &= ref[i].kind != REF_BAD;
	}
	pats[k] = NULL;

	rc = hnd_typelist_init(&tl, pats);
	FZ_CHECK(rc == 0 || rc == MHDGZ_EINVAL, "init returned %d", rc);
	if (rc == 0) {
		FZ_CHECK(all_ok, "a malformed pattern was accepted");
		FZ_CHECK(tl.count == k, "%zu patterns compiled of %zu", tl.count, k);
	} else {
		FZ_CHECK(!all_ok, "well-formed patterns refused");
		FZ_CHECK(tl.count == 0 && tl.pat == NULL, "failed init left patterns behind");
	}

	for (i = k; i < n; i++) {
		size_t len, rlen;
		const char *mt = hnd_media_type(lines[i], &len),
			   *rmt = ref_media_type(lines[i], &rlen);

		FZ_CHECK(mt == rmt && len == rlen, "media type of '%s': %zu@%td vs %zu@%td",
			 lines[i], len, mt - lines[i], rlen, rmt - lines[i]);
		FZ_CHECK(!memchr(mt, ';', len), "';' in a media type");
		if (rc == 0)
			check_lists(&tl, ref, k, mt, len);
		check_verdict(&def_types, ref_compress, n_ref_compress, ref_skip, n_ref_skip, mt,
			      len, "default lists");
	}
	if (rc == 0)
		hnd_typelist_fini(&tl);
	free(buf);
	return 0;
}
