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

/* ASCII lowercase of the eight bytes in w at once: 'A'..'Z' gain 0x20,
 * every other byte (non-ASCII ones included) stays. Per byte, its low
 * seven bits plus 0x3f (0x25) carry into bit 7 when they are at least 'A'
 * (above 'Z'), without carrying into the next byte. */
static inline uint64_t
lower8(uint64_t w)
{
	const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
	uint64_t low7 = w & ~high;
	uint64_t upper = ((low7 + ones * (0x80 - 'A')) ^ (low7 + ones * (0x80 - 'Z' - 1))) & ~w &
			 high;

	return w | (upper >> 2);
}

/* out[0..len) = s[0..len) in ASCII lowercase. */
static void
lower_copy(char *out, const char *s, size_t len)
{
	size_t i = 0;
	uint64_t w;

	for (; i + 8 <= len; i += 8) {
		memcpy(&w, s + i, 8);
		w = lower8(w);
		memcpy(out + i, &w, 8);
	}
	for (; i < len; i++)
		out[i] = hnd_lower(s[i]);
}

/* A hash of the (lowercase) bytes s[0..len), eight at a time: the slot of
 * an EXACT pattern. */
static uint64_t
type_hash(const char *s, size_t len)
{
	uint64_t h = (uint64_t)len * 0x9e3779b97f4a7c15ull, w;
	size_t i;

	for (; len >= 8; s += 8, len -= 8) {
		memcpy(&w, s, 8);
		h = (h ^ w) * 0x9e3779b97f4a7c15ull;
		h ^= h >> 29;
	}
	if (len > 0) {
		for (w = 0, i = 0; i < len; i++)
			w |= (uint64_t)(uint8_t)s[i] << (8 * i);
		h = (h ^ w) * 0x9e3779b97f4a7c15ull;
		h ^= h >> 29;
	}
	return h;
}

/* Index the compiled patterns: EXACT ones into the hash slots, the others
 * into wild. 0 or MHDGZ_ENOMEM. */
static int
typelist_index(struct hnd_typelist *tl)
{
	size_t nexact = 0, i, n;

	for (i = 0; i < tl->count; i++) {
		tl->pat[i].hash = type_hash(tl->pat[i].text, tl->pat[i].len);
		nexact += tl->pat[i].kind == HND_PAT_EXACT;
	}
	if (tl->count - nexact > 0) {
		tl->wild = gz_calloc(tl->count - nexact, sizeof *tl->wild);
		if (!tl->wild)
			return MHDGZ_ENOMEM;
	}
	if (nexact > 0) {
		for (n = 4; n < 2 * nexact + 1; n *= 2)
			;
		tl->slot = gz_calloc(n, sizeof *tl->slot);
		if (!tl->slot)
			return MHDGZ_ENOMEM;
		tl->nslots = n;
	}
	for (i = 0; i < tl->count; i++) {
		const struct hnd_pattern *p = &tl->pat[i];

		if (p->kind == HND_PAT_EXACT) {
			size_t k = tl->pat[i].hash & (tl->nslots - 1);

			while (tl->slot[k])
				k = (k + 1) & (tl->nslots - 1);
			tl->slot[k] = (uint32_t)i + 1;
		} else {
			tl->wild[tl->nwild++] = (uint32_t)i;
		}
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
	rc = typelist_index(tl);
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
	gz_free(tl->slot);
	gz_free(tl->wild);
	memset(tl, 0, sizeof *tl);
}

/* Every pattern in turn, case-insensitively: the lookup of a media type
 * longer than HND_TYPE_LOWER_MAX. One byte compared first, case folded by
 * | 0x20 (bytes equal ignoring ASCII case stay equal; a false "maybe" only
 * costs the strncasecmp that decides). */
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
			    strncasecmp(mt, p->text, len) == 0)
				return true;
			break;
		case HND_PAT_TYPE:
			if ((size_t)(slash - mt) == p->len &&
			    (mt[0] | 0x20) == (p->text[0] | 0x20) &&
			    strncasecmp(mt, p->text, p->len) == 0)
				return true;
			break;
		case HND_PAT_SUFFIX:
			if (len > p->len && (mt[len - 1] | 0x20) == (p->text[p->len - 1] | 0x20) &&
			    strncasecmp(mt + len - p->len, p->text, p->len) == 0)
				return true;
			break;
		}
	}
	return false;
}

void
hnd_mtype_prep(struct hnd_mtype *m, const char *mt, size_t len)
{
	m->mt = mt;
	m->len = len;
	m->slash = memchr(mt, '/', len);
	m->lowered = len <= sizeof m->lo;
	if (!m->lowered)
		return;
	/* Lowercased once, the type is compared bytewise with the patterns
	 * (lowercase since compile_pattern). */
	lower_copy(m->lo, mt, len);
	m->hash = type_hash(m->lo, len);
	if (m->slash)
		m->slash = m->lo + (m->slash - mt);
}

bool
hnd_typelist_match_prep(const struct hnd_typelist *tl, const struct hnd_mtype *m)
{
	const char *lo = m->lo, *slash = m->slash;
	size_t i, k, len = m->len;

	if (!slash)
		return false;
	if (!m->lowered)
		return typelist_scan(tl, m->mt, len, slash);
	/* An EXACT pattern is found by its hash (and matches only a type
	 * with its one slash); the others are few and tried in turn. */
	if (tl->nslots > 0) {
		for (k = m->hash & (tl->nslots - 1); tl->slot[k]; k = (k + 1) & (tl->nslots - 1)) {
			const struct hnd_pattern *p = &tl->pat[tl->slot[k] - 1];

			if (p->hash == m->hash && p->len == len && memcmp(lo, p->text, len) == 0)
				return true;
		}
	}
	for (i = 0; i < tl->nwild; i++) {
		const struct hnd_pattern *p = &tl->pat[tl->wild[i]];
		switch (p->kind) {
		case HND_PAT_ANY:
			return true;
		case HND_PAT_EXACT: /* in the slots */
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

bool
hnd_typelist_match(const struct hnd_typelist *tl, const char *mt, size_t len)
{
	struct hnd_mtype m;

	hnd_mtype_prep(&m, mt, len);
	return hnd_typelist_match_prep(tl, &m);
}
