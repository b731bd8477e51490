/* respond.c: gzserve's responses queued through the handler, and its error pages. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gzserve.h"

/* A coding's token, a static string (mhdgz_coding_info). */
const char *
coding_name(enum mhdgz_coding coding)
{
	struct mhdgz_coding_info ci = { .size = sizeof ci };

	return mhdgz_coding_info(NULL, coding, &ci) == 0 ? ci.name : "other";
}

/*
 * Queue r through the handler with the request's method (so a HEAD gets
 * exactly GET's header fields), its path (for RFC 9842 dictionaries) and,
 * for a resource with validators (rq->preconditions), the conditional
 * fields evaluated by the handler (a 304 or a 412 without content in r's
 * place); record status, identity body size and the coding that went out
 * for the access log, from what the handler reports: nothing here
 * re-implements its decision.
 */
enum MHD_Result
queue(struct req *rq, struct MHD_Connection *conn, unsigned int status, struct MHD_Response *r,
      uint64_t body_nbytes)
{
	struct mhdgz_outcome o = { .size = sizeof o };
	char path[1024];
	size_t plen = strcspn(rq->uri, "?");
	struct mhdgz_request req = { .size = sizeof req,
				     .method = rq->method,
				     .url = plen < sizeof path ? path : NULL,
				     .flags = rq->preconditions ? MHDGZ_REQUEST_PRECONDITIONS : 0 };
	enum MHD_Result ret;

	if (plen < sizeof path) { /* a longer one: no dictionary */
		memcpy(path, rq->uri, plen);
		path[plen] = '\0';
	}
	ret = mhdgz_queue_response_ex(rq->s->gz, conn, &req, status, r, &o);
	rq->coding = o.coding;
	if (o.reason == MHDGZ_SKIP_ENCODED) { /* a precompressed sibling: a static name */
		const char *ce = MHD_get_response_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING);

		rq->coding = "other";
		for (int k = 0; ce && k < MHDGZ_CODING_COUNT; k++)
			if (strcasecmp(ce, coding_name((enum mhdgz_coding)k)) == 0)
				rq->coding = coding_name((enum mhdgz_coding)k);
	}
	rq->status = o.status;
	rq->body_nbytes = o.body_nbytes != MHDGZ_NBYTES_UNKNOWN ? o.body_nbytes : body_nbytes;
	return ret;
}

/* queue(), then drop the caller's reference to a response made for this
 * request alone. NULL (out of memory) makes libmicrohttpd close the
 * connection. */
enum MHD_Result
respond(struct req *rq, struct MHD_Connection *conn, unsigned int status, struct MHD_Response *r,
	uint64_t body_nbytes)
{
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	ret = queue(rq, conn, status, r, body_nbytes);
	MHD_destroy_response(r);
	return ret;
}

/* A small HTML page for status, titled with libmicrohttpd's reason
 * phrase, with one more header field when field is not NULL. */
enum MHD_Result
respond_page(struct req *rq, struct MHD_Connection *conn, unsigned int status, const char *field,
	     const char *value)
{
	const char *phrase = MHD_get_reason_phrase_for(status);
	char body[192];
	int n = snprintf(body, sizeof body, "<!doctype html><title>%u %s</title><h1>%u %s</h1>\n",
			 status, phrase, status, phrase);
	struct MHD_Response *r = mhdgz_response_from_buffer(rq->s->gz, (size_t)n, body,
							    MHD_RESPMEM_MUST_COPY);

	if (r) {
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
					"text/html; charset=utf-8");
		if (field)
			MHD_add_response_header(r, field, value);
	}
	return respond(rq, conn, status, r, (uint64_t)n);
}

enum MHD_Result
respond_error(struct req *rq, struct MHD_Connection *conn, unsigned int status)
{
	if (status == MHD_HTTP_SERVICE_UNAVAILABLE)
		return respond_page(rq, conn, status, MHD_HTTP_HEADER_CONNECTION, "close");
	return respond_page(rq, conn, status, status == 405 ? MHD_HTTP_HEADER_ALLOW : NULL,
			    "GET, HEAD");
}
