/* hnd_headers.h: header fields: the facts read from a response, and the fields of a coded representation. */
#ifndef HND_HEADERS_H
#define HND_HEADERS_H

#include <stdbool.h>

#include "hnd_plan.h"
#include "hnd_public.h"

/* Most Vary field lines merged into one; more are left as they are and
 * Accept-Encoding is added as a field of its own. */
#ifndef HND_VARY_MAX
#define HND_VARY_MAX 8
#endif

struct hnd_facts_ctx {
	struct hnd_facts *f;
	const char *vary[HND_VARY_MAX];     /* values of the Vary fields */
	const char *vary_key[HND_VARY_MAX]; /* their names, as the user spelled them */
};

/* Read the facts of r's header fields (and its Vary fields into c). */
void hnd_read_facts(struct MHD_Response *r, struct hnd_facts *f, struct hnd_facts_ctx *c);
/* Merge "Accept-Encoding" into r's own Vary. Only before r is first queued. */
int hnd_merge_vary(struct MHD_Response *r, const struct hnd_facts *f,
		   const struct hnd_facts_ctx *c);
/* Set f->vary_add/vary_replace: the Vary a variant carries (in buf of cap
 * bytes, or in *heap, which the caller gz_frees). */
void hnd_vary_for_variant(struct hnd_facts *f, const struct hnd_facts_ctx *c, char *buf, size_t cap,
			  char **heap);
/* What a response built in another's place stands for: the gzip
 * representation (header fields rewritten for the coding, Content-Encoding
 * set; "gzip" here and below means the coding in struct hnd_facts
 * coding, gzip, zstd or br), a 304 for it (the same fields without Content-Encoding), the
 * identity representation (the fields as they are), or a HEAD whose coding
 * is not known. */
/* HND_REP_NOT_MODIFIED: identity fields for the 304 a precondition gave,
 * without the Content-Encoding or Content-Range of the response queued
 * (RFC 9110 section 15.4.5: a 304 restates no such metadata). */
enum hnd_rep { HND_REP_GZIP, HND_REP_GZIP_304, HND_REP_IDENTITY, HND_REP_NOT_MODIFIED };
/* Copy the fields (and trailers) of r to v as rep says: for the gzip
 * kinds, Content-Encoding, Content-Length, Accept-Ranges and integrity
 * fields dropped (counted) and the ETag per policy; for identity, all but
 * Content-Length. The application's Transfer-Encoding: chunked goes to a v
 * with content (body), so that libmicrohttpd frames it as it frames the
 * application's own (chunked, with its trailer), never to one without (a
 * HEAD or 304: no framing). Returns 0 or MHDGZ_EMHD (v is left for the
 * caller to destroy). Content-Encoding: gzip itself is the caller's to
 * add. */
int hnd_copy_headers(struct mhdgz *gz, struct MHD_Response *r, struct MHD_Response *v,
		     const struct hnd_facts *f, enum hnd_rep rep, bool body);
/* A copy of r's fields and trailers on v as they are (Content-Length
 * aside: libmicrohttpd's). 0 or MHDGZ_EMHD. */
int hnd_copy_fields(struct MHD_Response *r, struct MHD_Response *v);
/* Rewrite r's own fields into those of the coded representation that
 * hnd_copy_headers gives a variant (orig: a copy of them as they were, see
 * hnd_copy_fields), Content-Encoding set, and, with digest, a Trailer
 * field announcing Content-Digest. Only before libmicrohttpd first has r.
 * 0, or MHDGZ_EMHD with r's fields as they were. */
int hnd_rewrite_coded(struct mhdgz *gz, struct MHD_Response *r, struct MHD_Response *orig,
		      const struct hnd_facts *f, bool digest);

#endif /* HND_HEADERS_H */
