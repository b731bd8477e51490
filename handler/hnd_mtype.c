/* hnd_mtype.c: the media type lists (compress and skip), compiled once per handle: exact patterns hashed, wildcards scanned. */
#include <string.h>
#include <strings.h>

#include "gz_alloc.h"
#include "hnd_mtype.h"
#include "hnd_negotiate.h"

/* ------------------------------------------------------------------------ */
/* Media type lists                                                          */

/* Text-like types: compress. text/ * covers text/html, css, plain, csv,
 * javascript, event-stream; the suffixes cover image/svg+xml,
 * application/ld+json, manifest+json, atom+xml, rss+xml and the like. */
const char *const hnd_default_compress_types[] = {
	"text/*",
	"application/json",
	"*/*+json",
	"application/javascript",
	"application/ecmascript",
	"application/x-javascript",
	"application/xml",
	"*/*+xml",
	"application/wasm",
	"application/x-ndjson",
	"application/graphql",
	"application/x-www-form-urlencoded",
	"application/rtf",
	"application/x-sh",
	"application/x-tar",
	"application/vnd.ms-fontobject",
	"font/ttf",
	"font/otf",
	"font/collection",
	"image/bmp",
	"image/x-icon",
	"image/vnd.microsoft.icon",
	NULL,
};

/* Already-compressed types: never compress (checked first). */
const char *const hnd_default_skip_types[] = {
	"image/png",
	"image/jpeg",
	"image/gif",
	"image/webp",
	"image/avif",
	"image/heic",
	"image/heif",
	"image/jxl",
	"audio/*",
	"video/*",
	"application/zip",
	"application/gzip",
	"application/x-gzip",
	"application/zstd",
	"application/x-bzip2",
	"application/x-xz",
	"application/x-7z-compressed",
	"application/vnd.rar",
	"application/x-rar-compressed",
	"application/x-brotli",
	"application/pdf",
	"font/woff",
	"font/woff2",
	NULL,
};

static int
compile_pattern(const char *src, struct hnd_pattern *p)
{
	size_t len, i;
	const char *slash;
	const char *s = hnd_media_type(src, &len);

	slash = memchr(s, '/', len);
	if (len < 3 || !slash || slash == s || slash == s + len - 1)
		return MHDGZ_EINVAL;
	/* One slash: '/' is no tchar, so a second one (type/sub/x, a/b//,
	 * the suffix of asterisk/asterisk+a/b) is malformed. */
	if (memchr(slash + 1, '/', (size_t)(s + len - slash - 1)))
		return MHDGZ_EINVAL;
	for (i = 0; i < len; i++)
		if (s[i] != '/' && !hnd_is_tchar(s[i]))
			return MHDGZ_EINVAL;
	if (len == 3 && memcmp(s, "*/*", 3) == 0) {
		p->kind = HND_PAT_ANY;
		s += len; /* empty text */
		len = 0;
	} else if (len > 4 && memcmp(s, "*/*+", 4) == 0) {
		p->kind = HND_PAT_SUFFIX;
		s += 3; /* keep "+suffix" */
		len -= 3;
	} else if (slash[1] == '*' && slash + 2 == s + len) {
		p->kind = HND_PAT_TYPE;
		len = (size_t)(slash - s);
	} else {
		p->kind = HND_PAT_EXACT;
	}
	if (p->kind != HND_PAT_ANY && memchr(s, '*', len))
		return MHDGZ_EINVAL;
	p->text = gz_strndup(s, len);
	if (!p->text)
		return MHDGZ_ENOMEM;
	for (i = 0; i < len; i++)
		p->text[i] = hnd_lower(p->text[i]);
	p->len = len;
	return 0;
}

/* One step of the hash of a type: eight bytes (the last ones zero-padded). */
static inline uint64_t
hash_step(uint64_t h, uint64_t w)
{
	h = (h ^ w) * 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 29);
}

/* out[0..len) = s[0..len) in ASCII lowercase, and the hash of those
 * lowercase bytes, eight at a time: the index key of an EXACT pattern. With
 * out NULL, s is lowercase already (a compiled pattern) and only hashed. */
static uint64_t
lower_hash(char *out, const char *s, size_t len)
{
	uint64_t h = (uint64_t)len * 0x9e3779b97f4a7c15ull, w;
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		memcpy(&w, s + i, 8);
		if (out) {
			w = hnd_lower8(w);
			memcpy(out + i, &w, 8);
		}
		h = hash_step(h, w);
	}
	if (i < len) {
		for (w = 0; i < len; i++) {
			char c = out ? (out[i] = hnd_lower(s[i])) : s[i];

			w |= (uint64_t)(uint8_t)c << (8 * (i & 7));
		}
		h = hash_step(h, w);
	}
	/* The slot is taken from the low bits, which a product mixes least:
	 * fold the high half in. */
	return h ^ (h >> 32);
}

/* Set aside the patterns that are not EXACT, and hash every pattern. 0 or
 * MHDGZ_ENOMEM. */
static int
typelist_wild(struct hnd_typelist *tl)
{
	size_t i;

	tl->wild = gz_calloc(tl->count, sizeof *tl->wild);
	if (!tl->wild)
		return MHDGZ_ENOMEM;
	for (i = 0; i < tl->count; i++) {
		tl->pat[i].hash = lower_hash(NULL, tl->pat[i].text, tl->pat[i].len);
		if (tl->pat[i].kind != HND_PAT_EXACT)
			tl->wild[tl->nwild++] = (uint32_t)i;
	}
	return 0;
}

int
hnd_typelist_init(struct hnd_typelist *tl, const char *const *patterns)
{
	size_t n = 0, i;
	int rc;

	memset(tl, 0, sizeof *tl);
	while (patterns[n])
		n++;
	if (n == 0)
		return 0;
	rc = MHDGZ_EINVAL;
	if (n >= UINT32_MAX)
		goto fail;
	rc = MHDGZ_ENOMEM;
	tl->pat = gz_calloc(n, sizeof *tl->pat);
	if (!tl->pat)
		goto fail;
	for (i = 0; i < n; i++) {
		rc = compile_pattern(patterns[i], &tl->pat[i]);
		if (rc < 0)
			goto fail;
		tl->count++;
	}
	rc = typelist_wild(tl);
	if (rc == 0)
		return 0;
fail:
	hnd_typelist_fini(tl);
	return rc;
}

void
hnd_typelist_fini(struct hnd_typelist *tl)
{
	size_t i;

	for (i = 0; i < tl->count; i++)
		gz_free(tl->pat[i].text);
	gz_free(tl->pat);
	gz_free(tl->wild);
	memset(tl, 0, sizeof *tl);
}

/* Every pattern in turn, case-insensitively: the lookup of a media type
 * longer than HND_TYPE_LOWER_MAX. One byte compared first, case folded by
 * | 0x20 (bytes equal ignoring ASCII case stay equal; a false "maybe" only
 * costs the hnd_ascii_ieq that decides). */
static bool
typelist_scan(const struct hnd_typelist *tl, const char *mt, size_t len, const char *slash)
{
	size_t i;

	for (i = 0; i < tl->count; i++) {
		const struct hnd_pattern *p = &tl->pat[i];
		switch (p->kind) {
		case HND_PAT_ANY:
			return true;
		case HND_PAT_EXACT:
			if (len == p->len && (mt[len - 1] | 0x20) == (p->text[len - 1] | 0x20) &&
			    hnd_ascii_ieq(mt, p->text, len))
				return true;
			break;
		case HND_PAT_TYPE:
			if ((size_t)(slash - mt) == p->len &&
			    (mt[0] | 0x20) == (p->text[0] | 0x20) &&
			    hnd_ascii_ieq(mt, p->text, p->len))
				return true;
			break;
		case HND_PAT_SUFFIX:
			if (len > p->len && (mt[len - 1] | 0x20) == (p->text[p->len - 1] | 0x20) &&
			    hnd_ascii_ieq(mt + len - p->len, p->text, p->len))
				return true;
			break;
		}
	}
	return false;
}

/* Does a wildcard of tl match the lowercase type lo[0..len), slash its
 * '/'? */
static bool
wild_match(const struct hnd_typelist *tl, const char *lo, size_t len, const char *slash)
{
	size_t i;

	for (i = 0; i < tl->nwild; i++) {
		const struct hnd_pattern *p = &tl->pat[tl->wild[i]];
		switch (p->kind) {
		case HND_PAT_ANY:
			return true;
		case HND_PAT_EXACT: /* in the index */
			break;
		case HND_PAT_TYPE:
			if ((size_t)(slash - lo) == p->len && memcmp(lo, p->text, p->len) == 0)
				return true;
			break;
		case HND_PAT_SUFFIX:
			if (len > p->len && memcmp(lo + len - p->len, p->text, p->len) == 0)
				return true;
			break;
		}
	}
	return false;
}

/* The slot of the type lo[0..len) with hash h: its entry, or the empty
 * slot where it would go. */
static struct hnd_exact *
exact_slot(const struct hnd_types *t, const char *lo, size_t len, uint64_t h)
{
	size_t k;

	for (k = h & (t->nslots - 1); t->slot[k].p; k = (k + 1) & (t->nslots - 1)) {
		const struct hnd_pattern *p = t->slot[k].p;

		if (p->hash == h && p->len == len && memcmp(lo, p->text, len) == 0)
			break;
	}
	return &t->slot[k];
}

/* Enter the EXACT patterns of tl not in the index yet, each with its
 * verdict: never compressed for the skip list; for the compress list,
 * compressed unless a skip wildcard matches it. */
static void
index_list(struct hnd_types *t, const struct hnd_typelist *tl, bool is_skip)
{
	size_t i;

	for (i = 0; i < tl->count; i++) {
		const struct hnd_pattern *p = &tl->pat[i];
		struct hnd_exact *x;

		if (p->kind != HND_PAT_EXACT)
			continue;
		x = exact_slot(t, p->text, p->len, p->hash);
		if (x->p)
			continue; /* named by the skip list already, or twice */
		x->p = p;
		x->compress = !is_skip &&
			      !wild_match(&t->skip, p->text, p->len, memchr(p->text, '/', p->len));
	}
}

int
hnd_types_index(struct hnd_types *t)
{
	size_t nexact = 0, i, n;

	for (i = 0; i < t->compress.count; i++)
		nexact += t->compress.pat[i].kind == HND_PAT_EXACT;
	for (i = 0; i < t->skip.count; i++)
		nexact += t->skip.pat[i].kind == HND_PAT_EXACT;
	t->slot = NULL;
	t->nslots = 0;
	if (nexact == 0)
		return 0;
	for (n = 4; n < 2 * nexact + 1; n *= 2)
		;
	t->slot = gz_calloc(n, sizeof *t->slot);
	if (!t->slot)
		return MHDGZ_ENOMEM;
	t->nslots = n;
	index_list(t, &t->skip, true);
	index_list(t, &t->compress, false);
	return 0;
}

void
hnd_types_fini(struct hnd_types *t)
{
	hnd_typelist_fini(&t->compress);
	hnd_typelist_fini(&t->skip);
	gz_free(t->slot);
	t->slot = NULL;
	t->nslots = 0;
}

bool
hnd_types_compressible(const struct hnd_types *t, const char *mt, size_t len)
{
	char lo[HND_TYPE_LOWER_MAX];
	const char *slash;
	uint64_t h;

	if (len > sizeof lo) {
		slash = memchr(mt, '/', len);
		return slash && !typelist_scan(&t->skip, mt, len, slash) &&
		       typelist_scan(&t->compress, mt, len, slash);
	}
	/* Lowercased once, the type is compared bytewise with the patterns
	 * (lowercase since compile_pattern). An indexed pattern has its one
	 * slash: a type found has one too. */
	h = lower_hash(lo, mt, len);
	if (t->nslots > 0) {
		const struct hnd_exact *x = exact_slot(t, lo, len, h);

		if (x->p)
			return x->compress;
	}
	slash = memchr(lo, '/', len);
	return slash && !wild_match(&t->skip, lo, len, slash) &&
	       wild_match(&t->compress, lo, len, slash);
}
