/* hnd_conditional.c: conditional requests: the 304 response and mhdgz_evaluate_preconditions. */
#include <string.h>
#include <strings.h>

#include "hnd_internal.h"

/*
 * The response to queue for a 304 to a gzip-accepting client: the fields
 * of the 200 it validates (RFC 9110 section 15.4.5), so the ETag is the
 * gzip one, and no other representation metadata (no Content-Encoding).
 * libmicrohttpd 0.9.75 sends a Content-Length with every 304 of known size
 * (chunked framing with one of unknown size), while section 8.6 allows only
 * the 200's: so for a body compressed whole, the 304 variant shares the
 * gzip body (never sent with a 304) to get its size. Without a body (the
 * usual empty 304 response, or a stream) the variant is empty, with the
 * gzip ETag: libmicrohttpd then says "Content-Length: 0", as it does for
 * any empty 304 (caches ignore a 304's Content-Length, RFC 9111 section
 * 3.2). When the 200 would be identity (small, not compressible, known not
 * to shrink): the response itself. Called with e->lock.
 */
struct MHD_Response *
hnd_not_modified(struct mhdgz *gz, struct hnd_entry *e, const struct hnd_facts *f,
	     const uint8_t *sniff, size_t sniff_len, const struct hnd_accept *acc)
{
	struct hnd_decision d200;
	struct MHD_Response *v;

	if (e->not_smaller)
		return e->response;
	if (e->body_len != 0) {
		hnd_decide(gz, e->opt_out, 200, f, sniff, sniff_len, e->body_len, acc, &d200);
		if (d200.reason != MHDGZ_COMPRESSED)
			return e->response;
		if (hnd_whole_body(e)) {
			if (hnd_gzip_representation(gz, e, f, false, &v) != MHDGZ_COMPRESSED)
				return e->response;
			if (!e->rep_304) {
				atomic_fetch_add(&e->gzip_body->refs, 1);
				if (hnd_build_response(gz, e->response, f, e->gzip_body, false,
						  &e->rep_304) < 0)
					hnd_count(gz, HND_C_FAILURES, 1);
			}
			return e->rep_304 ? e->rep_304 : e->response;
		}
	}
	if (gz->etag_policy == MHDGZ_ETAG_KEEP)
		return e->response;
	if (!e->rep_304 &&
	    hnd_build_response(gz, e->response, f, NULL, false, &e->rep_304) < 0)
		hnd_count(gz, HND_C_FAILURES, 1);
	return e->rep_304 ? e->rep_304 : e->response;
}

struct precond_ctx {
	const char *etag;
	bool if_match, if_match_ok;
	bool if_none_match, if_none_match_hit;
};

static enum MHD_Result
precond_iter(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct precond_ctx *c = cls;

	(void)kind;
	if (!value)
		return MHD_YES;
	/* Several lines of a list field form one list: any member counts. */
	if (strcasecmp(key, MHD_HTTP_HEADER_IF_MATCH) == 0) {
		c->if_match = true;
		if (mhdgz_etag_match(value, c->etag ? c->etag : "", 0))
			c->if_match_ok = true;
	} else if (strcasecmp(key, MHD_HTTP_HEADER_IF_NONE_MATCH) == 0) {
		c->if_none_match = true;
		if (mhdgz_etag_match(value, c->etag ? c->etag : "", 1))
			c->if_none_match_hit = true;
	}
	return MHD_YES;
}

MHDGZ_API unsigned int
mhdgz_evaluate_preconditions(struct MHD_Connection *connection, const char *method,
			     const char *etag)
{
	struct precond_ctx c = {.etag = etag};

	if (!connection || !method)
		return 0;
	MHD_get_connection_values(connection, MHD_HEADER_KIND, precond_iter, &c);
	/* RFC 9110 section 13.2.2: If-Match first, then If-None-Match. A
	 * resource without ETag matches only "*" (handled by etag_match). */
	if (c.if_match && !c.if_match_ok)
		return MHD_HTTP_PRECONDITION_FAILED;
	if (c.if_none_match && c.if_none_match_hit)
		return (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)
			       ? MHD_HTTP_NOT_MODIFIED
			       : MHD_HTTP_PRECONDITION_FAILED;
	return 0;
}
