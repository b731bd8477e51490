/* respond.c: gzserve's responses queued through the handler, and its error pages. */
#define _GNU_SOURCE
#include <string.h>
#include <strings.h>

#include "gzserve.h"

static enum MHD_Result
ae_iter(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct ae_lines *ae = cls;

	(void)kind;
	if (value && strcasecmp(key, MHD_HTTP_HEADER_ACCEPT_ENCODING) == 0 && ae->n < GZS_AE_MAX)
		ae->v[ae->n++] = value;
	return MHD_YES;
}

void
accept_encoding(struct MHD_Connection *conn, struct ae_lines *ae)
{
	ae->n = 0;
	MHD_get_connection_values(conn, MHD_HEADER_KIND, ae_iter, ae);
}

/*
 * Queue r through the handler; record status, identity body size and the
 * coding that went out for the log. This is mhdgz_queue_response() written
 * out (see mhdgz_select()) to learn which response was queued.
 */
enum MHD_Result
queue(struct req *rq, struct MHD_Connection *conn, unsigned int status, struct MHD_Response *r,
      uint64_t body_nbytes)
{
	struct ae_lines ae;
	struct mhdgz_request mreq;
	struct MHD_Response *q = r;
	const char *ce;
	enum MHD_Result ret;
	int rc;

	accept_encoding(conn, &ae);
	memset(&mreq, 0, sizeof mreq);
	mreq.size = sizeof mreq;
	mreq.accept_encoding = ae.v;
	mreq.accept_encoding_count = ae.n;
	rc = mhdgz_select(rq->s->gz, &mreq, status, r, &q, NULL);
	if (rc < 0)
		q = r;
	ce = MHD_get_response_header(q, MHD_HTTP_HEADER_CONTENT_ENCODING);
	rq->coding = ce ? "gzip" : "identity";
	if (ce && strcasecmp(ce, "gzip") != 0)
		rq->coding = "other";
	rq->status = status;
	rq->body_nbytes = body_nbytes;
	/* libmicrohttpd 0.9.75 writes a chunked body's last chunk
	 * ("0\r\n\r\n") after the headers even for HEAD; on a kept-alive
	 * connection the client would read it as the next status line. A
	 * HEAD of a chunked response (the event stream, a gzip stream, both
	 * made for this request alone) closes the connection instead. */
	if (strcmp(rq->method, MHD_HTTP_METHOD_HEAD) == 0 && (rc == MHDGZ_RELEASE || rq->streamed))
		(void)MHD_add_response_header(q, MHD_HTTP_HEADER_CONNECTION, "close");
	ret = MHD_queue_response(conn, status, q);
	if (rc == MHDGZ_RELEASE)
		MHD_destroy_response(q); /* a stream made for this request */
	return ret;
}

/* queue(), then drop the caller's reference to a response made for this
 * request alone. NULL (out of memory) makes libmicrohttpd close the
 * connection. */
enum MHD_Result
respond(struct req *rq, struct MHD_Connection *conn, unsigned int status,
	struct MHD_Response *r, uint64_t body_nbytes)
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
		{400, "<!doctype html><title>400 Bad Request</title><h1>400 Bad Request</h1>\n"},
		{403, "<!doctype html><title>403 Forbidden</title><h1>403 Forbidden</h1>\n"},
		{404, "<!doctype html><title>404 Not Found</title><h1>404 Not Found</h1>\n"},
		{405, "<!doctype html><title>405 Method Not Allowed</title>"
		      "<h1>405 Method Not Allowed</h1><p>GET and HEAD only.</p>\n"},
		{412, "<!doctype html><title>412 Precondition Failed</title>"
		      "<h1>412 Precondition Failed</h1>\n"},
		{416, "<!doctype html><title>416 Range Not Satisfiable</title>"
		      "<h1>416 Range Not Satisfiable</h1>\n"},
		{500, "<!doctype html><title>500 Internal Server Error</title>"
		      "<h1>500 Internal Server Error</h1>\n"},
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

