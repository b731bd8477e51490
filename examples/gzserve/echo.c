/* echo.c: gzserve's POST /echo (demo mode): a request body, identity or gzip, read through mhdgz_upload_*. */
/*
 * What to copy from here: a request body that may come with
 * "Content-Encoding: gzip" is read with mhdgz_upload_new() on the access
 * handler's first call, mhdgz_upload_feed() on each call with data and
 * mhdgz_upload_finish() on the final one; a refusal is answered with
 * mhdgz_upload_refusal_response(). Here the data callback only counts the
 * decoded bytes and their CRC-32; a real server would parse them.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "gzserve.h"

/* The data callback: every decoded byte, in order, as it is decoded. */
static unsigned int
echo_data(void *cls, const void *data, size_t nbytes)
{
	struct req *rq = cls;

	rq->echo_nbytes += nbytes;
	rq->echo_crc = crc32(rq->echo_crc, data, (uInt)nbytes);
	return 0;
}

/* Queue the refusal of the upload (a plain libmicrohttpd response: the
 * handler passes it through, counted as untracked). */
static enum MHD_Result
refuse(struct req *rq, struct MHD_Connection *conn, unsigned int status)
{
	struct MHD_Response *r = mhdgz_upload_refusal_response(status);
	const char *phrase = MHD_get_reason_phrase_for(status);
	/* Its body, for the access log: "STATUS PHRASE\n" (mhdgz.h). */
	int n = snprintf(NULL, 0, "%u %s\n", status,
			 phrase && *phrase ? phrase : "Request Body Refused");

	return respond(rq, conn, status, r, n > 0 ? (uint64_t)n : 0);
}

bool
echo_path(const struct req *rq)
{
	size_t n = strcspn(rq->uri, "?#");

	return n == 5 && memcmp(rq->uri, "/echo", 5) == 0;
}

enum MHD_Result
echo_begin(struct req *rq, struct MHD_Connection *conn)
{
	struct mhdgz_upload_info info = { .size = sizeof info };

	rq->echo = true;
	if (strcmp(rq->method, MHD_HTTP_METHOD_POST) != 0) /* 405 */
		return has_body(conn) ? refuse_body(rq, conn, 405, "POST") : MHD_YES;
	rq->echo_crc = crc32(0, NULL, 0);
	if (mhdgz_upload_new(rq->s->gz, conn, NULL, echo_data, rq, &rq->upload) != 0)
		return MHD_NO;
	/* A coding we cannot decode, or an identity Content-Length over the
	 * limit, is known now: refused before the body, which is not read;
	 * the connection then closes lingering (linger.c). */
	if (mhdgz_upload_get_info(rq->upload, &info) == 0 && info.status) {
		rq->linger = has_body(conn);
		return refuse(rq, conn, info.status);
	}
	return MHD_YES;
}

enum MHD_Result
echo_request(struct req *rq, struct MHD_Connection *conn, const char *upload, size_t *upload_len)
{
	struct mhdgz_upload_info info = { .size = sizeof info };
	unsigned int status;
	char body[256];
	int n;

	if (!rq->upload) /* not a POST, without a body */
		return respond_page(rq, conn, MHD_HTTP_METHOD_NOT_ALLOWED, MHD_HTTP_HEADER_ALLOW,
				    "POST");
	if (*upload_len) {
		/* After a refusal, up to MHDGZ_UPLOAD_DISCARD_NBYTES more are
		 * discarded; past them nothing is consumed: close. */
		mhdgz_upload_feed(rq->upload, upload, upload_len);
		return *upload_len ? MHD_NO : MHD_YES;
	}
	status = mhdgz_upload_finish(rq->upload);
	if (status)
		return refuse(rq, conn, status);
	mhdgz_upload_get_info(rq->upload, &info);
	n = snprintf(body, sizeof body,
		     "{\"coding\":\"%s\",\"encoded_nbytes\":%" PRIu64 ",\"decoded_nbytes\":%" PRIu64
		     ",\"members\":%u,\"crc32\":\"%08lx\"}\n",
		     info.coding, info.encoded_nbytes, rq->echo_nbytes, info.members,
		     (unsigned long)rq->echo_crc);
	if (n < 0 || (size_t)n >= sizeof body)
		return MHD_NO;
	{
		struct MHD_Response *r = mhdgz_response_from_buffer(rq->s->gz, (size_t)n, body,
								    MHD_RESPMEM_MUST_COPY);

		if (r) {
			MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
						"application/json");
			MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
		}
		return respond(rq, conn, MHD_HTTP_OK, r, (size_t)n);
	}
}
