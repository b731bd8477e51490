/* hnd_internal.h: the handler's internal types: handle, response table, negotiation, decision. */
#ifndef HND_INTERNAL_H
#define HND_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mhdgz.h"
#include "gz_backend.h"
#include "gz_pool.h"

/* Default idle cap of the writer pool: enough for a thread pool of 16
 * workers to never miss, while bounding idle memory (zlib level 6 state is
 * ~268 KiB, libdeflate's up to ~1 MiB at level 10-12). */
#ifndef HND_POOL_IDLE_CAP
#define HND_POOL_IDLE_CAP 16
#endif

/* Bytes of an untyped body that the content sniff inspects (WHATWG MIME
 * sniffing looks at 512 as well). */
#ifndef HND_SNIFF_NBYTES
#define HND_SNIFF_NBYTES 512
#endif

/* Counters are striped over this many cache lines so threads of a pool do
 * not bounce one line between cores; reads sum the stripes. */
#ifndef HND_STAT_STRIPES
#define HND_STAT_STRIPES 8
#endif

/* ------------------------------------------------------------------------ */
/* Statistics                                                               */

enum hnd_counter {
	HND_C_RESPONSES,
	HND_C_COMPRESSED,
	HND_C_BYTES_IN,
	HND_C_BYTES_OUT,
	HND_C_COMPRESSIONS,
	HND_C_FAILURES,
	HND_C_CACHE_HITS,
	HND_C_REASON0, /* + enum mhdgz_reason */
	HND_C_COUNT = HND_C_REASON0 + MHDGZ_REASON_COUNT
};

struct hnd_stripe {
	_Atomic uint64_t c[HND_C_COUNT];
} __attribute__((aligned(64)));

void hnd_count(struct mhdgz *gz, enum hnd_counter which, uint64_t n);

/* ------------------------------------------------------------------------ */
/* Media type lists                                                          */

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
};

struct hnd_typelist {
	struct hnd_pattern *pat;
	size_t count;
};

int hnd_typelist_init(struct hnd_typelist *tl, const char *const *patterns);
void hnd_typelist_fini(struct hnd_typelist *tl);
/* Does the media type (type/subtype, no parameters) at mt[0..len) match? */
bool hnd_typelist_match(const struct hnd_typelist *tl, const char *mt, size_t len);

extern const char *const hnd_default_compress_types[];
extern const char *const hnd_default_skip_types[];

/* ------------------------------------------------------------------------ */
/* The handle                                                               */

struct hnd_entry;

struct hnd_table {
	pthread_mutex_t lock;
	struct hnd_entry **bucket;
	size_t nbuckets; /* power of two */
	size_t count;
};

int hnd_table_init(struct hnd_table *t);
void hnd_table_fini(struct hnd_table *t);

struct mhdgz {
	const struct gz_backend *be;
	int level;
	size_t min_size;
	enum mhdgz_etag_policy etag_policy;
	struct hnd_typelist compress_types;
	struct hnd_typelist skip_types;
	struct gz_pool *pool;
	struct hnd_table table;
	struct hnd_stripe stats[HND_STAT_STRIPES];
};

/* ------------------------------------------------------------------------ */
/* Negotiation (hnd_negotiate.c): pure functions, no allocation.           */

/* Accept-Encoding, parsed: q-values in thousandths; -1 when not listed. */
struct hnd_accept {
	int gzip;     /* explicit gzip / x-gzip (highest if repeated) */
	int identity; /* explicit identity */
	int star;     /* "*" */
	bool present; /* at least one Accept-Encoding line */
};

void hnd_accept_parse(const char *const *lines, size_t count, struct hnd_accept *acc);
/* Effective q of gzip (thousandths) from a parsed header. */
unsigned int hnd_accept_gzip_q(const struct hnd_accept *acc);
/* Whether gzip is the coding to use: acceptable and not less preferred
 * than an explicitly listed identity. */
bool hnd_accept_wants_gzip(const struct hnd_accept *acc);

/* Does a comma-separated header value contain token (case-insensitive)? */
bool hnd_list_has_token(const char *value, const char *token);
/* Content sniff of an untyped body: true for text-like. */
bool hnd_sniff_text(const uint8_t *body, size_t len);
/* Media type of a Content-Type value without parameters and whitespace:
 * returns a pointer into value and its length in *len_ret. */
const char *hnd_media_type(const char *value, size_t *len_ret);

/* ------------------------------------------------------------------------ */
/* The decision (hnd_decide.c)                                              */

/* What the decision needs from the response's header fields. */
struct hnd_facts {
	const char *content_type;     /* NULL if absent */
	const char *content_encoding; /* NULL if absent */
	const char *etag;             /* NULL if absent */
	bool content_range;           /* a Content-Range field is present */
	bool no_transform;            /* Cache-Control has no-transform */
	bool vary_has_ae;             /* Vary already lists Accept-Encoding or "*" */
	unsigned int vary_count;      /* number of Vary fields */
};

/* The outcome: a reason, plus what the headers of either variant need. */
struct hnd_decision {
	enum mhdgz_reason reason;
	bool vary;      /* the representation depends on Accept-Encoding */
	bool etag_only; /* no body coding, but the ETag must be the gzip one (304) */
};

void hnd_decide(const struct mhdgz *gz, bool opt_out, unsigned int status,
		const struct hnd_facts *facts, const uint8_t *body, size_t body_len,
		const struct hnd_accept *acc, struct hnd_decision *d);

/* The ETag a gzip response carries under the policy. Writes a NUL-terminated
 * tag to buf (cap bytes) and returns it, returns etag itself when unchanged,
 * or NULL when the ETag is to be dropped (or does not fit: dropping is
 * always safe). */
const char *hnd_etag_for_gzip(enum mhdgz_etag_policy policy, const char *etag, char *buf,
			      size_t cap);

#endif /* HND_INTERNAL_H */
