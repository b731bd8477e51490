/* hnd_conditional.c: conditional requests: the 304 response and mhdgz_evaluate_preconditions. */
#include <string.h>
#include <strings.h>

#include "hnd_stats.h"
#include "hnd_plan.h"
#include "hnd_entry.h"
#include "hnd_memo.h"
#include "hnd_handle.h"
#include "hnd_repr.h"
#include "hnd_stream.h"

/*
 * The response to queue for a 304 standing for the 200 this client would
 * get (RFC 9110 section 15.4.5): that 200's header fields, and its length
 * or none, since a 304 may state no other (section 8.6), while
 * libmicrohttpd 0.9.75 sends a Content-Length with every 304 of known size
 * (and chunked framing, body bytes included, with one of unknown size).
 *
 * A 200 that would be gzip (gzip_client, and the response compresses):
 * for a body compressed whole, the 304 response shares the gzip body
 * (never sent with a 304) to get its size; for a file streamed compressed
 * (up to HND_HEAD_LENGTH_MAX) the gzip length is computed once; for any
 * other stream the length is not known, and the 304 has none
 * (hnd_fields_response: head-only with libmicrohttpd 1.0, closing the
 * connection with 0.9.75). A 200 that would be identity: the response
 * itself, unless it has no length (a stream of unknown size): then a 304
 * without length, framed likewise. An empty response queued for the
 * 304 says Content-Length: 0, as it would without mhdgz. NULL on failure
 * (the caller queues the response itself). e->lock held.
 */
struct MHD_Response *
hnd_not_modified(struct mhdgz *gz, struct hnd_entry *e, const struct hnd_facts *f,
		 const struct hnd_decision *d200, bool gzip_client, bool *fresh_ret)
{
	struct MHD_Response *v;
	struct hnd_coded *k = &e->coded[f->coding];
	bool gzip = gzip_client && !k->not_smaller;
	uint64_t len = MHD_SIZE_UNKNOWN;

	*fresh_ret = false;
	if (gzip && e->body_len != 0) {
		gzip = d200->reason == MHDGZ_COMPRESSED;
		/* An uncached entry keeps no 304 either: its length is that of
		 * this queue's compression (a file may have changed since). */
		if (gzip && hnd_whole_body(e->kind, e->body_len) && k->rep_304 && !e->uncached) {
			return k->rep_304;
		} else if (gzip && hnd_whole_body(e->kind, e->body_len) && !k->rep &&
			   hnd_coded_len_known(gz, e, f, &len)) {
			/* Its length is known by its strong ETag: no compression. */
			if (len == HND_MEMO_NOT_SMALLER) {
				gzip = false;
			} else if (e->uncached) {
				v = hnd_fields_response(gz, hnd_identity_fields(e), f, len,
							HND_REP_GZIP_304);
				if (!v)
					hnd_count(gz, HND_C_FAILURES, 1);
				*fresh_ret = v != NULL;
				return v;
			} else {
				k->rep_304 = hnd_fields_response(gz, hnd_identity_fields(e), f, len,
								 HND_REP_GZIP_304);
				if (!k->rep_304)
					hnd_count(gz, HND_C_FAILURES, 1);
				return k->rep_304;
			}
		} else if (gzip && hnd_whole_body(e->kind, e->body_len)) {
			bool fresh;

			if (hnd_gzip_representation(gz, e, f, false, &v, &fresh) !=
			    MHDGZ_COMPRESSED) {
				gzip = false; /* not smaller, or failed: the 200 is identity */
			} else if (fresh) {
				/* An uncached response: the 200's fields and the
				 * length of this compression, for this queue. */
				uint64_t coded_len = k->rep_len;

				MHD_destroy_response(v);
				v = hnd_fields_response(gz, hnd_identity_fields(e), f, coded_len,
							HND_REP_GZIP_304);
				if (!v)
					hnd_count(gz, HND_C_FAILURES, 1);
				*fresh_ret = v != NULL;
				return v;
			} else {
				if (!k->rep_304) {
					atomic_fetch_add(&k->body->refs, 1);
					if (hnd_build_response(gz, hnd_identity_fields(e), f,
							       k->body, HND_REP_GZIP_304,
							       &k->rep_304) < 0)
						hnd_count(gz, HND_C_FAILURES, 1);
				}
				return k->rep_304;
			}
		}
	}
	if (gzip && e->body_len == 0) {
		/* An empty response stands for the 304 itself. */
		if (gz->etag_policy == MHDGZ_ETAG_KEEP || !f->etag)
			return e->response;
		if (!k->rep_304 && hnd_build_response(gz, hnd_identity_fields(e), f, NULL,
						      HND_REP_GZIP_304, &k->rep_304) < 0)
			hnd_count(gz, HND_C_FAILURES, 1);
		return k->rep_304;
	}
	if (gzip) { /* a stream: its gzip length, where a file gives it */
		if (!k->rep_304) {
			if (hnd_gzip_stream_length(gz, e, f->etag,
						   hnd_low_latency(e->low_latency, f), f->coding,
						   &len) != 0)
				len = MHD_SIZE_UNKNOWN;
			k->rep_304 = hnd_fields_response(gz, hnd_identity_fields(e), f, len,
							 HND_REP_GZIP_304);
			if (!k->rep_304)
				hnd_count(gz, HND_C_FAILURES, 1);
		}
		return k->rep_304;
	}
	if (e->body_len != MHD_SIZE_UNKNOWN)
		return e->response;
	if (!e->rep_304_identity) {
		e->rep_304_identity = hnd_fields_response(gz, hnd_identity_fields(e), f,
							  MHD_SIZE_UNKNOWN, HND_REP_IDENTITY);
		if (!e->rep_304_identity)
			hnd_count(gz, HND_C_FAILURES, 1);
	}
	return e->rep_304_identity;
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
	struct precond_ctx c = { .etag = etag };

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
