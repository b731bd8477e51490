/* hnd_plan.h: what is sent for a queued response: the facts of its fields, the decision and the plan. No handle or entry state. */
#ifndef HND_PLAN_H
#define HND_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "gz_backend.h"
#include "hnd_mtype.h"
#include "hnd_negotiate.h"
#include "hnd_public.h"

struct mhdgz_dictionary;

enum hnd_kind {
	HND_BUFFER,   /* mhdgz_response_from_buffer*, _from_iovec (gathered) */
	HND_CALLBACK, /* mhdgz_response_from_callback */
	HND_FD,       /* mhdgz_response_from_fd* */
	HND_PIPE      /* mhdgz_response_from_pipe: read once, unknown size */
};

/* The handle's options the plan reads (struct mhdgz policy): set by
 * mhdgz_new, read-only after. */
struct hnd_policy {
	size_t min_nbytes;
	bool content_digest;    /* MHDGZ_F_CONTENT_DIGEST */
	struct hnd_types types; /* compress_types and skip_types */
	/* The codings offered (struct mhdgz_options codings), in the
	 * server's order of preference; zstd (where built), then gzip, by default. */
	enum gz_coding order[GZ_CODING_COUNT];
	size_t norder;
};

/* What the decision needs from the response's header fields. */
struct hnd_facts {
	const char *content_type;     /* NULL if absent */
	const char *content_encoding; /* NULL if absent */
	const char *etag;             /* NULL if absent */
	bool content_digest;          /* a Content-Digest field or trailer is present */
	bool content_range;           /* a Content-Range field is present */
	bool te_chunked;              /* the application frames it: Transfer-Encoding: chunked */
	bool no_transform;            /* Cache-Control has no-transform */
	bool vary_has_ae;             /* Vary already lists Accept-Encoding or "*" */
	bool vary_has_ad;             /* Vary already lists Available-Dictionary or "*" */
	unsigned int vary_count;      /* number of Vary fields */
	/* Set by the handler, not read from the response: the Vary value a
	 * variant adds, and whether it replaces the response's Vary fields;
	 * the libmicrohttpd response flags every variant gets. */
	const char *vary_add;
	bool vary_replace;
	/* Set by the handler: the request path matches a dictionary's
	 * pattern, so the Vary added names Available-Dictionary too (RFC
	 * 9842 section 6.2). */
	bool dict_vary;
	enum MHD_ResponseFlags mhd_flags;
	/* Set by the handler: the coding of the coded variants built from
	 * these facts (Content-Encoding, ETag suffix, caches); 0, gzip, as
	 * hnd_read_facts leaves it. */
	enum gz_coding coding;
};

/* The outcome: a reason, plus what the headers of either variant need. */
struct hnd_decision {
	enum mhdgz_reason reason;
	bool vary;             /* the representation depends on Accept-Encoding */
	bool gzip_304;         /* a 304 standing for a 200 that would be coded for this
			 * client (as far as the header fields tell) */
	enum gz_coding coding; /* with MHDGZ_COMPRESSED or gzip_304: which */
};

/* hnd_request flags: build a fresh gzip representation even if one is
 * cached (benchmarks, tests). */
#define HND_REQ_NO_CACHE 0x1u

/* What the selection needs from the request. */
struct hnd_request {
	struct hnd_accept acc;
	bool head;          /* HEAD: GET's header fields, no content */
	bool get_or_head;   /* GET or HEAD: a matching If-None-Match is a 304 */
	unsigned int flags; /* HND_REQ_* */
	/* MHDGZ_REQUEST_PRECONDITIONS: the connection whose conditional
	 * fields hnd_select evaluates (hnd_preconditions); NULL: none. */
	struct MHD_Connection *preconditions;
	/* RFC 9842 (hnd_dict.c): the request's path (NULL: not known, no
	 * dcz), its Available-Dictionary and Dictionary-ID fields (NULL:
	 * absent). Borrowed for the call. */
	const char *url;
	const char *avail_dict;
	const char *dict_id;
};

/* Policies of the decision (hnd_decide.c). A whole body (a buffer, or a
 * file up to HND_FD_WHOLE_MAX) is compressed once and cached with a
 * Content-Length; anything else is streamed per connection. */
bool hnd_whole_body(enum hnd_kind kind, uint64_t body_len);
/* A stream whose every chunk must reach the client at once: marked so, or
 * text/event-stream (marked: MHDGZ_RESPONSE_LOW_LATENCY). */
bool hnd_low_latency(bool marked, const struct hnd_facts *f);

void hnd_decide(const struct hnd_policy *pol, bool opt_out, unsigned int status,
		const struct hnd_facts *facts, const uint8_t *sniff, size_t sniff_len,
		uint64_t body_len, const struct hnd_accept *acc, struct hnd_decision *d);

/* What is sent in a queued response's place (hnd_plan). */
enum hnd_plan_kind {
	HND_PLAN_IDENTITY,           /* the identity representation (hnd_queue.c: the response
				   * itself, a file's identity response, or fields only) */
	HND_PLAN_DCZ,                /* coded whole against plan.dict (GET, HEAD, 304) */
	HND_PLAN_WHOLE,              /* coded whole, kept in the store (GET; HEAD whose
				      * length is not known: coded to learn it) */
	HND_PLAN_WHOLE_FIELDS,       /* HEAD of a body coded whole: fields and the length
				      * the store knows (plan.coded_len), no coding */
	HND_PLAN_STREAM_FIELDS,      /* HEAD of a coded stream: fields, its length if cheap */
	HND_PLAN_STREAM_IN_PLACE,    /* a coded stream in the response itself */
	HND_PLAN_STREAM,             /* a coded stream in a response of its own */
	HND_PLAN_NOT_MODIFIED,       /* a 304 standing for the 200 of plan.d200 */
	HND_PLAN_PRECONDITION_FAILED /* a 412 without content, never the body */
};

/* What is known of a coded length without coding (hnd_plan_in known_len). */
enum hnd_known {
	HND_KNOWN_NOTHING,    /* the body must be coded to know it */
	HND_KNOWN_LEN,        /* the length */
	HND_KNOWN_NOT_SMALLER /* the coding does not make the body smaller */
};

/* What the plan is made from: the request, the response's fields and
 * what its constructor told (the entry), no state of any cache but the
 * answer of known_len. */
struct hnd_plan_in {
	unsigned int status;
	const struct hnd_request *rq;
	const struct hnd_facts *f;
	const uint8_t *sniff; /* first bytes of an untyped body, or NULL */
	size_t sniff_len;
	enum hnd_kind kind;
	uint64_t body_len; /* MHD_SIZE_UNKNOWN for a stream of unknown size */
	bool opt_out;
	bool padded;              /* length hiding applies to its gzip body */
	bool low_latency;         /* MHDGZ_RESPONSE_LOW_LATENCY (the plan adds text/event-stream) */
	bool fresh;               /* never queued, no coded stream in it: may carry one in place */
	bool no_dict;             /* plan without dcz (its build found it not smaller) */
	bool precondition_failed; /* a 412 of hnd_preconditions: no representation */
	const struct mhdgz_dictionary *dicts; /* the handle's, newest first (NULL: none) */
	/* Where the coded length comes from: the store's answer for the
	 * planned coding (hnd_store.c), asked at most once, for a HEAD of a
	 * body coded whole, with *len_ret for HND_KNOWN_LEN. NULL: nothing
	 * is known. A function of the coding alone, so the plan stays a pure
	 * function of its inputs (test_plan_known_len, fuzz_decide). */
	enum hnd_known (*known_len)(void *cls, enum gz_coding coding, uint64_t *len_ret);
	void *known_cls;
};

struct hnd_plan {
	enum hnd_plan_kind kind;
	struct hnd_decision d;               /* the decision for this status */
	struct hnd_decision d200;            /* HND_PLAN_NOT_MODIFIED: the 200's */
	const struct hnd_accept *acc;        /* the codings planned on: rq's or acc_padded */
	struct hnd_accept acc_padded;        /* length hiding: the request's, gzip alone */
	const struct mhdgz_dictionary *dict; /* HND_PLAN_DCZ */
	bool whole;                          /* the body is coded whole, not streamed */
	uint64_t coded_len;                  /* HND_PLAN_WHOLE_FIELDS: the 200's coded length */
	bool digest;                         /* a Content-Digest of the coded body */
	bool low_latency;
};

/* The plan for one queue call: a pure function of in and the handle's
 * options (the request's Accept-Encoding lines are read on first use).
 * Pinned, table-driven, by test_plan (check_hnd_decision.c). */
void hnd_plan(const struct hnd_policy *pol, const struct hnd_plan_in *in, struct hnd_plan *p);

/* The ETag a gzip response carries under the policy. Writes a NUL-terminated
 * tag to buf (cap bytes) and returns it, returns etag itself when unchanged,
 * or NULL when the ETag is to be dropped (or does not fit: dropping is
 * always safe). */
const char *hnd_etag_for_gzip(enum mhdgz_etag_policy policy, const char *etag, char *buf,
			      size_t cap);
/* The same for a coding: MHDGZ_ETAG_SUFFIX appends "-" and the coding's
 * token ("x-gzip", "x-zstd", "x-br"). */
const char *hnd_etag_for_coding(enum mhdgz_etag_policy policy, const char *etag,
				enum gz_coding coding, char *buf, size_t cap);

/* Dictionaries (RFC 9842), pure: the handle's list (newest first) is an
 * input. */
/* Does url (NULL: no) match the pattern of a registered dictionary? Then
 * the response could be dcz, and its Vary names Available-Dictionary. */
bool hnd_dict_url_matches(const struct mhdgz_dictionary *dicts, const char *url);
/*
 * The dictionary a dcz response to this request would be coded against
 * (part of the plan, hnd_plan), if every RFC 9842 condition the request
 * and the fields show holds: dcz accepted in acc (explicitly, q not below
 * the ordinary choice's, not below an explicit identity), an
 * Available-Dictionary naming a registered dictionary whose pattern
 * matches rq->url (and whose id matches a Dictionary-ID sent), a whole
 * body of at least min_nbytes. d is the ordinary decision (MHDGZ_COMPRESSED
 * or MHDGZ_SKIP_NOT_ACCEPTED; or a 304's MHDGZ_SKIP_STATUS). NULL: none.
 */
const struct mhdgz_dictionary *hnd_dcz_plan(const struct hnd_policy *pol,
					    const struct mhdgz_dictionary *dicts,
					    const struct hnd_request *rq,
					    const struct hnd_accept *acc,
					    const struct hnd_decision *d, const struct hnd_facts *f,
					    bool whole, uint64_t body_len);
/* Match a request path against a dictionary pattern (the subset of
 * URLPattern pathname syntax hnd_dict.c accepts: literal characters and
 * '*', any run of characters). Exposed for the tests. */
bool hnd_dict_match(const char *pattern, const char *path);
/* Parse an Available-Dictionary value (RFC 8941 byte sequence, ":b64:")
 * into a SHA-256; false when malformed or not 32 bytes. */
bool hnd_dict_parse_hash(const char *value, uint8_t hash[32]);

#endif /* HND_PLAN_H */
