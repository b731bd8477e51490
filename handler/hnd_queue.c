/* hnd_queue.c: select and queue: the decision applied to a response and a request. */
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "hnd_internal.h"

/* First bytes of a file entry for the sniff of an untyped file, read once. */
static bool
fd_sniff(struct hnd_entry *e, uint8_t *buf, size_t *len)
{
	size_t want = e->body_len < HND_SNIFF_NBYTES ? (size_t)e->body_len : HND_SNIFF_NBYTES;
	ssize_t n = pread(e->fd, buf, want, (off_t)e->offset);

	if (n < 0)
		return false;
	*len = (size_t)n;
	return true;
}

static int
select_parsed(struct mhdgz *gz, const struct hnd_accept *acc, unsigned int flags,
	      unsigned int status, struct MHD_Response *response, struct MHD_Response **queue_ret,
	      enum mhdgz_reason *reason_ret)
{
	struct hnd_entry *e;
	struct hnd_facts f;
	struct hnd_facts_ctx fc;
	struct hnd_decision d;
	uint8_t sniff_buf[HND_SNIFF_NBYTES];
	const uint8_t *sniff = NULL;
	size_t sniff_len = 0;
	uint64_t in_len = 0, out_len = 0;
	int release = 0;
	char vary_buf[256], *vary_heap = NULL;

	*queue_ret = response;
	hnd_count(gz, HND_C_RESPONSES, 1);
	e = hnd_table_lookup(&gz->table, response);
	if (!e) {
		d.reason = MHDGZ_SKIP_UNTRACKED;
		goto done;
	}
	pthread_mutex_lock(&e->lock);
	hnd_read_facts(response, &f, &fc);
	if (e->kind == HND_BUFFER) {
		sniff = e->body;
		sniff_len = e->body_len;
	} else if (e->kind == HND_FD && !f.content_type && fd_sniff(e, sniff_buf, &sniff_len)) {
		sniff = sniff_buf;
	}
	hnd_decide(gz, e->opt_out, status, &f, sniff, sniff_len, e->body_len, acc, &d);
	/* Variants get Vary: Accept-Encoding as they are built; the response
	 * itself only when it is queued itself (below), so a response that is
	 * only ever sent compressed is not modified at all. */
	if (d.vary && !f.vary_has_ae)
		hnd_vary_for_variant(&f, &fc, vary_buf, sizeof vary_buf, &vary_heap);
	if (e->body_len != MHD_SIZE_UNKNOWN)
		in_len = out_len = e->body_len;
	if (d.reason == MHDGZ_COMPRESSED && hnd_whole_body(e)) {
		struct MHD_Response *v;
		d.reason = hnd_gzip_representation(gz, e, &f, flags & MHDGZ_REQ_NO_CACHE, &v);
		if (d.reason == MHDGZ_COMPRESSED) {
			*queue_ret = v;
			out_len = e->gzip_rep_len;
		}
	} else if (d.reason == MHDGZ_COMPRESSED) {
		/* Streams: a fresh gzip stream per queue (per connection); the
		 * bytes are counted as they are produced. */
		struct MHD_Response *v = hnd_gzip_stream_new(gz, e, hnd_low_latency(e, &f));

		hnd_count(gz, HND_C_COMPRESSIONS, 1);
		if (v && hnd_copy_headers(gz, response, v, &f, true) == 0 &&
		    MHD_add_response_header(v, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip") == MHD_YES) {
			*queue_ret = v;
			/* Our creation reference goes to the caller, who drops it
			 * after queueing (libmicrohttpd then holds its own). */
			release = MHDGZ_RELEASE;
			in_len = out_len = 0;
		} else {
			if (v)
				MHD_destroy_response(v);
			hnd_count(gz, HND_C_FAILURES, 1);
			d.reason = MHDGZ_SKIP_ERROR;
		}
	} else if (d.etag_only) {
		*queue_ret = hnd_not_modified(gz, e, &f, sniff, sniff_len, acc);
	}
	if (*queue_ret == response && e->kind == HND_FD) {
		struct MHD_Response *v = hnd_sendfile_identity(gz, e, &f);
		if (v)
			*queue_ret = v;
	}
	if (*queue_ret == response) {
		/* Merge Vary into the response only before libmicrohttpd first
		 * has it: afterwards another thread may be reading its fields. */
		if (f.vary_add && !e->vary_done && !e->response_queued &&
		    hnd_merge_vary(response, &f, &fc) == 0)
			e->vary_done = true;
		e->response_queued = true;
	}
	pthread_mutex_unlock(&e->lock);
	gz_free(vary_heap);
	hnd_count(gz, HND_C_BYTES_IN, in_len);
	hnd_count(gz, HND_C_BYTES_OUT, out_len);
	if (d.reason == MHDGZ_COMPRESSED)
		hnd_count(gz, HND_C_COMPRESSED, 1);
done:
	hnd_count(gz, HND_C_REASON0 + d.reason, 1);
	if (reason_ret)
		*reason_ret = d.reason;
	return release;
}

MHDGZ_API int
mhdgz_select(struct mhdgz *gz, const struct mhdgz_request *req, unsigned int status_code,
	     struct MHD_Response *response, struct MHD_Response **queue_ret,
	     enum mhdgz_reason *reason_ret)
{
	struct hnd_accept acc;

	if (queue_ret)
		*queue_ret = response;
	if (!gz || !req || !response || !queue_ret || req->size != sizeof *req)
		return MHDGZ_EINVAL;
	hnd_accept_parse(req->accept_encoding, req->accept_encoding_count, &acc);
	return select_parsed(gz, &acc, req->flags, status_code, response, queue_ret, reason_ret);
}

/* Parse every Accept-Encoding line as libmicrohttpd hands them over. */
static enum MHD_Result
accept_iter(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct hnd_accept *acc = cls;
	struct hnd_accept one;
	const char *lines[1] = {value};

	(void)kind;
	if (!value || strcasecmp(key, MHD_HTTP_HEADER_ACCEPT_ENCODING) != 0)
		return MHD_YES;
	hnd_accept_parse(lines, 1, &one);
	acc->present = true;
	if (one.gzip > acc->gzip)
		acc->gzip = one.gzip;
	if (one.identity > acc->identity)
		acc->identity = one.identity;
	if (one.star > acc->star)
		acc->star = one.star;
	return MHD_YES;
}

MHDGZ_API enum MHD_Result
mhdgz_queue_response(struct mhdgz *gz, struct MHD_Connection *connection,
		     unsigned int status_code, struct MHD_Response *response)
{
	struct hnd_accept acc;
	struct MHD_Response *q = response;
	enum MHD_Result ret;
	int release = 0;

	if (!connection || !response)
		return MHD_NO;

	if (gz) {
		hnd_accept_parse(NULL, 0, &acc);
		MHD_get_connection_values(connection, MHD_HEADER_KIND, accept_iter, &acc);
		release = select_parsed(gz, &acc, 0, status_code, response, &q, NULL);
	}
	ret = MHD_queue_response(connection, status_code, q);
	if (release == MHDGZ_RELEASE)
		MHD_destroy_response(q);
	return ret;
}
