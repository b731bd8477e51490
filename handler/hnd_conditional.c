/* hnd_conditional.c: conditional requests: RFC 9110 section 13.2.2 preconditions and the 304 response. */
#include <string.h>
#include <time.h>

#include "hnd_stats.h"
#include "hnd_negotiate.h"
#include "hnd_plan.h"
#include "hnd_entry.h"
#include "hnd_store.h"
#include "hnd_handle.h"
#include "hnd_repr.h"
#include "hnd_stream.h"
#include "hnd_mtype.h"

/*
 * The response to queue for a 304 standing for the 200 this client would
 * get (RFC 9110 section 15.4.5): that 200's header fields, and its length
 * or none, since a 304 may state no other (section 8.6), while
 * libmicrohttpd 0.9.75 sends a Content-Length with every 304 of known size
 * (and chunked framing, body bytes included, with one of unknown size).
 *
 * A 200 that would be gzip (gzip_client, and the response compresses):
 * for a body compressed whole, the 304 response states the coded length
 * the store knows (hnd_store.c: the entry's, its file version's or its
 * strong ETag's), or that of the body coded now; for a file streamed compressed
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
		 const struct hnd_decision *d200, bool gzip_client)
{
	struct hnd_coded *k = &e->coded[f->coding];
	struct MHD_Response *v;
	bool gzip = gzip_client && e->body_len != 0 ? d200->reason == MHDGZ_COMPRESSED
						    : gzip_client;
	uint64_t len = MHD_SIZE_UNKNOWN;

	if (gzip && e->body_len != 0 && hnd_whole_body(e->kind, e->body_len)) {
		/* The 200's coded length: known to the store (no compression),
		 * or by coding the body now (kept for the 200 too). */
		if (k->rep_304) /* a length: the entry's bytes do not change */
			return k->rep_304;
		if (!hnd_coded_len_known(gz, e, f->etag, f->coding, HND_SM_WHOLE, &len)) {
			if (hnd_gzip_representation(gz, e, f, false, &v) == MHDGZ_COMPRESSED)
				len = k->body->len;
			else
				len = HND_STORE_NOT_SMALLER; /* or failed: the 200 is identity */
		}
		gzip = len != HND_STORE_NOT_SMALLER;
		if (gzip) {
			k->rep_304 = hnd_fields_response(gz, hnd_identity_fields(e), f, len,
							 HND_REP_GZIP_304);
			if (!k->rep_304)
				hnd_count(gz, HND_C_FAILURES, 1);
			return k->rep_304;
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

/* The conditional fields of a request; several lines of a list field
 * form one list, so any member of any line counts. */
struct precond_ctx {
	const char *etag;
	const char *if_modified_since, *if_unmodified_since;
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
	if (hnd_ascii_eq(key, MHD_HTTP_HEADER_IF_MATCH)) {
		c->if_match = true;
		if (hnd_etag_match(value, c->etag ? c->etag : "", 0))
			c->if_match_ok = true;
	} else if (hnd_ascii_eq(key, MHD_HTTP_HEADER_IF_NONE_MATCH)) {
		c->if_none_match = true;
		if (hnd_etag_match(value, c->etag ? c->etag : "", 1))
			c->if_none_match_hit = true;
	} else if (hnd_ascii_eq(key, MHD_HTTP_HEADER_IF_MODIFIED_SINCE)) {
		c->if_modified_since = value;
	} else if (hnd_ascii_eq(key, MHD_HTTP_HEADER_IF_UNMODIFIED_SINCE)) {
		c->if_unmodified_since = value;
	}
	return MHD_YES;
}

/* RFC 9110 section 13.2.2, steps 1-4. A resource without ETag matches only
 * "*" (hnd_etag_match); a date field that is not one valid HTTP-date, or a
 * resource without Last-Modified, leaves its step out. */
unsigned int
hnd_preconditions(struct MHD_Connection *connection, bool get_or_head, const char *etag,
		  const char *last_modified)
{
	struct precond_ctx c = { .etag = etag };
	time_t lm, t;
	bool have_lm;

	if (!connection)
		return 0;
	MHD_get_connection_values(connection, MHD_HEADER_KIND, precond_iter, &c);
	have_lm = hnd_parse_http_date(last_modified, &lm);
	if (c.if_match ? !c.if_match_ok
		       : have_lm && hnd_parse_http_date(c.if_unmodified_since, &t) && lm > t)
		return MHD_HTTP_PRECONDITION_FAILED;
	if (c.if_none_match)
		return !c.if_none_match_hit ? 0
		       : get_or_head        ? MHD_HTTP_NOT_MODIFIED
					    : MHD_HTTP_PRECONDITION_FAILED;
	if (get_or_head && have_lm && hnd_parse_http_date(c.if_modified_since, &t) && lm <= t)
		return MHD_HTTP_NOT_MODIFIED;
	return 0;
}
