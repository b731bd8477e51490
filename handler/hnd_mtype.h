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
	uint64_t hash; /* of text, ignoring ASCII case (hnd_negotiate.c) */
};

/* Lexical helpers shared by hnd_negotiate.c and hnd_mtype.c: ASCII
 * lowercase, and tchar (RFC 9110 section 5.6.2). */
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

struct hnd_typelist {
	struct hnd_pattern *pat;
	size_t count;
	/* The EXACT patterns by a hash of their text (open addressing, linear
	 * probing): an index into pat plus 1, 0 for an empty slot; nslots is a
	 * power of two above twice their number (0: none). A media type then
	 * costs one hash and a probe or two instead of a compare per pattern;
	 * the others (TYPE, SUFFIX, ANY), a few, are scanned from wild. */
	uint32_t *slot;
	size_t nslots;
	uint32_t *wild;
	size_t nwild;
};

int hnd_typelist_init(struct hnd_typelist *tl, const char *const *patterns);
void hnd_typelist_fini(struct hnd_typelist *tl);
/* Does the media type (type/subtype, no parameters) at mt[0..len) match? */
bool hnd_typelist_match(const struct hnd_typelist *tl, const char *mt, size_t len);

/* Longest media type lowercased on the stack for the lookup, in bytes; a
 * longer one is matched by a case-insensitive scan of every pattern. */
#ifndef HND_TYPE_LOWER_MAX
#define HND_TYPE_LOWER_MAX 128
#endif

/* A media type prepared once for the lookups in several lists (the skip
 * list, then the compress list): lowercased, hashed, its slash found. */
struct hnd_mtype {
	const char *mt; /* as given */
	size_t len;
	const char *slash; /* in lo when lowered, else in mt; NULL: none */
	bool lowered;      /* len <= HND_TYPE_LOWER_MAX: lo and hash are set */
	uint64_t hash;
	char lo[HND_TYPE_LOWER_MAX];
};
void hnd_mtype_prep(struct hnd_mtype *m, const char *mt, size_t len);
/* hnd_typelist_match of a prepared type. */
bool hnd_typelist_match_prep(const struct hnd_typelist *tl, const struct hnd_mtype *m);

extern const char *const hnd_default_compress_types[];
extern const char *const hnd_default_skip_types[];

#endif /* HND_MTYPE_H */
