/* respond.c: gzserve's responses queued through the handler, and its error pages. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gzserve.h"

static enum MHD_Result
ae_iter(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct ae_lines *ae = cls;

	(void)kind;
	if (!value || strcasecmp(key, MHD_HTTP_HEADER_ACCEPT_ENCODING) != 0)
		return MHD_YES;
	if (ae->n == ae->cap) { /* every line counts (RFC 9110 section 5.3) */
		size_t cap = ae->cap ? 2 * ae->cap : 8;
		const char **v = realloc(ae->v, cap * sizeof *v);

		if (!v) {
			ae->failed = true;
			return MHD_NO;
		}
		ae->v = v;
		ae->cap = cap;
	}
	ae->v[ae->n++] = value;
	return MHD_YES;
}

int
accept_encoding(struct MHD_Connection *conn, struct ae_lines *ae)
{
	memset(ae, 0, sizeof *ae);
	MHD_get_connection_values(conn, MHD_HEADER_KIND, ae_iter, ae);
	return ae->failed ? -1 : 0;
}

void
ae_lines_free(struct ae_lines *ae)
{
	free(ae->v);
	memset(ae, 0, sizeof *ae);
}

bool
preferred_coding(struct MHD_Connection *conn, const enum mhdgz_coding *offered, size_t noffered,
		 enum mhdgz_coding *coding_ret)
{
	struct ae_lines ae;
	bool ok = accept_encoding(conn, &ae) == 0 &&
		  mhdgz_accept_coding(ae.v, ae.n, offered, noffered, coding_ret);

	ae_lines_free(&ae); /* whatever accept_encoding returned */
	return ok;
}

/*
 * Queue r through the handler with the request's method (so a HEAD gets
 * exactly GET's header fields), and record status, identity body size and
 * the coding that went out for the access log, from what the handler
 * reports: nothing here re-implements its decision.
 */
enum MHD_Result
queue(struct req *rq, struct MHD_Connection *conn, unsigned int status, struct MHD_Response *r,
      uint64_t body_nbytes)
{
	struct mhdgz_outcome o = { .size = sizeof o };
	enum MHD_Result ret;

	char path[1024];
	size_t plen = strcspn(rq->uri, "?");

	/* The path, for RFC 9842 dictionary matching (a longer one: none). */
	if (plen < sizeof path) {
		memcpy(path, rq->uri, plen);
		path[plen] = '\0';
	}
	ret = mhdgz_queue_response_url(rq->s->gz, conn, rq->method,
				       plen < sizeof path ? path : NULL, status, r, &o);
	rq->coding = o.coding;
	if (o.reason == MHDGZ_SKIP_ENCODED) { /* a precompressed sibling */
		const char *ce = MHD_get_response_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING);

		rq->coding = "other";
		for (int k = 0; ce && k < MHDGZ_CODING_COUNT; k++)
			if (strcasecmp(ce, mhdgz_coding_name((enum mhdgz_coding)k)) == 0)
				rq->coding = mhdgz_coding_name((enum mhdgz_coding)k);
	}
	rq->status = status;
	rq->body_nbytes = o.body_nbytes != MHDGZ_NBYTES_UNKNOWN ? o.body_nbytes : body_nbytes;
	rq->coded_nbytes = o.coded_nbytes;
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

/* A small HTML body for an error status. */
enum MHD_Result
respond_error(struct req *rq, struct MHD_Connection *conn, unsigned int status)
{
	static const struct {
		unsigned int status;
		const char *body;
	} pages[] = {
		{ 400, "<!doctype html><title>400 Bad Request</title><h1>400 Bad Request</h1>\n" },
		{ 403, "<!doctype html><title>403 Forbidden</title><h1>403 Forbidden</h1>\n" },
		{ 404, "<!doctype html><title>404 Not Found</title><h1>404 Not Found</h1>\n" },
		{ 405, "<!doctype html><title>405 Method Not Allowed</title>"
		       "<h1>405 Method Not Allowed</h1><p>GET and HEAD only.</p>\n" },
		{ 412, "<!doctype html><title>412 Precondition Failed</title>"
		       "<h1>412 Precondition Failed</h1>\n" },
		{ 416, "<!doctype html><title>416 Range Not Satisfiable</title>"
		       "<h1>416 Range Not Satisfiable</h1>\n" },
		{ 500, "<!doctype html><title>500 Internal Server Error</title>"
		       "<h1>500 Internal Server Error</h1>\n" },
	};
	const char *body = pages[sizeof pages / sizeof pages[0] - 1].body;
	struct MHD_Response *r;
	size_t i;

	for (i = 0; i < sizeof pages / sizeof pages[0]; i++)
		if (pages[i].status == status)
			body = pages[i].body;
	r = mhdgz_response_from_buffer(rq->s->gz, strlen(body), (void *)body,
				       MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
	if (status == 405)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	return respond(rq, conn, status, r, strlen(body));
}
