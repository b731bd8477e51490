/* hnd_mtype.h: media type lists: compiled patterns and their lookup. */
#ifndef HND_MTYPE_H
#define HND_MTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* One compiled pattern: lowercase; kind says how to match. */
enum hnd_pat_kind {
	HND_PAT_EXACT,  /* "type/subtype" */
	HND_PAT_TYPE,   /* type, slash, asterisk: any subtype */
	HND_PAT_SUFFIX, /* asterisk/asterisk+suffix (RFC 6838 4.2.8) */
	HND_PAT_ANY     /* asterisk/asterisk: everything */
};

struct hnd_pattern {
	enum hnd_pat_kind kind;
	char *text; /* EXACT: "type/subtype"; TYPE: "type"; SUFFIX: "+suffix" */
	size_t len;
	uint64_t hash; /* of text (lowercase): lower_hash, hnd_mtype.c */
};

/* Lexical helpers shared by the handler's files: ASCII lowercase, tchar
 * (RFC 9110 section 5.6.2), ASCII case-insensitive compares. */
static inline char
hnd_lower(char c)
{
	return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

static inline bool
hnd_is_tchar(char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* ASCII lowercase of the eight bytes in w at once: 'A'..'Z' gain 0x20,
 * every other byte (non-ASCII ones included) stays. Per byte, its low
 * seven bits plus 0x3f (0x25) carry into bit 7 when they are at least 'A'
 * (above 'Z'), without carrying into the next byte. */
static inline uint64_t
hnd_lower8(uint64_t w)
{
	const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
	uint64_t low7 = w & ~high;
	uint64_t upper = ((low7 + ones * (0x80 - 'A')) ^ (low7 + ones * (0x80 - 'Z' - 1))) & ~w &
			 high;

	return w | (upper >> 2);
}

/* Are a[0..n) and b[0..n) the same in ASCII case-insensitively? Eight
 * bytes at a time (n is known: neither is read past it). */
static inline bool
hnd_ascii_ieq(const char *a, const char *b, size_t n)
{
	uint64_t x, y;
	size_t i;

	for (; n >= 8; a += 8, b += 8, n -= 8) {
		memcpy(&x, a, 8);
		memcpy(&y, b, 8);
		if (x != y && hnd_lower8(x) != hnd_lower8(y))
			return false;
	}
	for (x = y = 0, i = 0; i < n; i++) {
		x |= (uint64_t)(uint8_t)a[i] << (8 * i);
		y |= (uint64_t)(uint8_t)b[i] << (8 * i);
	}
	return x == y || hnd_lower8(x) == hnd_lower8(y);
}

/* Is a[0..alen) the NUL-terminated name b, in any ASCII case? (A token
 * or field name of known length against a constant.) */
static inline bool
hnd_ascii_is(const char *a, size_t alen, const char *b)
{
	return alen == strlen(b) && hnd_ascii_ieq(a, b, alen);
}

/* Are the NUL-terminated a and b the same in ASCII case-insensitively?
 * Field names, codings and media types are case-insensitive in ASCII
 * whatever the locale: the C library's strcasecmp() follows the process's
 * (LC_CTYPE), and in a Turkish one 'I' and 'i' are not the same letter
 * there (test_ae_locale). */
static inline bool
hnd_ascii_eq(const char *a, const char *b)
{
	return hnd_ascii_is(a, strlen(a), b);
}

/* A media type list compiled: its patterns, and the few that are not
 * EXACT (TYPE, SUFFIX, ANY) as indices into pat, tried in turn. */
struct hnd_typelist {
	struct hnd_pattern *pat;
	size_t count;
	uint32_t *wild;
	size_t nwild;
};

/* Compile a list (mhdgz_options.compress_types or skip_types): 0,
 * MHDGZ_EINVAL for a pattern that is not one, or MHDGZ_ENOMEM. */
int hnd_typelist_init(struct hnd_typelist *tl, const char *const *patterns);
void hnd_typelist_fini(struct hnd_typelist *tl);

/* Longest media type lowercased on the stack for the lookup, in bytes; a
 * longer one is matched by a case-insensitive scan of every pattern. */
#ifndef HND_TYPE_LOWER_MAX
#define HND_TYPE_LOWER_MAX 128
#endif

/* One EXACT pattern of either list in the index, with the verdict of both
 * lists for its type. */
struct hnd_exact {
	const struct hnd_pattern *p; /* NULL: an empty slot */
	bool compress;
};

/*
 * A handle's two lists and one index of their EXACT patterns by hash (open
 * addressing, linear probing; nslots a power of two above twice their
 * number, 0: none). Each indexed type carries the verdict of the two lists
 * together, decided when indexed: the skip list wins (an EXACT skip, or a
 * skip wildcard that matches it), else it is compressed. A type named
 * exactly then costs one lowercase-and-hash pass and a probe or two;
 * another is tried against the wildcards, the skip list's first.
 */
struct hnd_types {
	struct hnd_typelist compress;
	struct hnd_typelist skip;
	struct hnd_exact *slot;
	size_t nslots;
};

/* Index t->compress and t->skip, both compiled: 0 or MHDGZ_ENOMEM. */
int hnd_types_index(struct hnd_types *t);
/* Both lists and the index. */
void hnd_types_fini(struct hnd_types *t);
/* Is the media type (type/subtype, no parameters) at mt[0..len), in any
 * letter case, compressed: matched by no skip pattern and by a compress
 * pattern? */
bool hnd_types_compressible(const struct hnd_types *t, const char *mt, size_t len);

extern const char *const hnd_default_compress_types[];
extern const char *const hnd_default_skip_types[];

#endif /* HND_MTYPE_H */
