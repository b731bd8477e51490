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

/* Is the status one without content (RFC 9110 sections 6.4.1, 15.2, 15.3.5,
 * 15.4.5)? libmicrohttpd 0.9.75 sends no body with 1xx and 204 whatever the
 * response; a 304 needs the care of hnd_not_modified. */
static bool
no_content(unsigned int status)
{
	return (status >= 100 && status < 200) || status == 204 || status == 304;
}

/*
 * The whole selection: decide, then build or reuse what is queued in the
 * response's place. *queue_ret is the response itself or a response of
 * ours; the return value is HND_RELEASE when the caller owns a reference
 * to it (a per-request response: a gzip stream, a HEAD response), else 0.
 * res receives the outcome. On a failure the identity response is queued
 * and the reason is MHDGZ_SKIP_ERROR; *queue_ret is NULL (nothing can be
 * queued) only where that identity response is one of ours and could not
 * be built, after the response itself took a coded stream in place.
 */
int
hnd_select(struct mhdgz *gz, const struct hnd_request *rq, unsigned int status,
	   struct MHD_Response *response, struct MHD_Response **queue_ret, struct hnd_result *res)
{
	struct hnd_entry *e;
	struct hnd_facts f;
	struct hnd_facts_ctx fc;
	struct hnd_decision d;
	struct MHD_Response *v = NULL;
	uint64_t decide_len;
	uint8_t sniff_buf[HND_SNIFF_NBYTES];
	const uint8_t *sniff = NULL;
	size_t sniff_len = 0;
	uint64_t in_len = 0, out_len = 0, coded_len = MHDGZ_NBYTES_UNKNOWN;
	int release = 0;
	bool padded = false; /* what is queued carries length-hiding padding */
	struct hnd_request rq_padded;
	bool dcz_release; /* hnd_dcz_select made a per-request response */
	char vary_buf[256], *vary_heap = NULL;
	struct hnd_stripe *st = hnd_stripe_of(gz);
	struct MHD_Response *fields;
	bool in_place = false; /* the response itself carries the coded stream */

	*queue_ret = response;
	res->body_nbytes = res->coded_nbytes = MHDGZ_NBYTES_UNKNOWN;
	res->coding = GZ_CODING_GZIP;
	res->dcz = false;
	hnd_count_in(st, HND_C_RESPONSES, 1);
	e = hnd_table_lookup(&gz->table, response);
	if (!e) {
		d.reason = MHDGZ_SKIP_UNTRACKED;
		goto done;
	}
	pthread_mutex_lock(&e->lock);
	if (hnd_padded(gz, e, GZ_CODING_GZIP) &&
	    (hnd_accept_read(&rq->acc)->zstd != 0 || rq->acc.br != 0 || rq->acc.dcz != 0)) {
		/* Length hiding pads the gzip member only: a response that
		 * asks for it is never sent zstd, br or dcz, which would go
		 * out unpadded. Those codings count as refused ("q=0"), so
		 * the choice is gzip or identity. */
		rq_padded = *rq;
		rq_padded.acc.zstd = rq_padded.acc.br = rq_padded.acc.dcz = 0;
		rq = &rq_padded;
	}
	fields = hnd_identity_fields(e);
	hnd_read_facts(fields, &f, &fc);
	f.mhd_flags = e->mhd_flags;
	atomic_store(&e->te_chunked, f.te_chunked);
	f.dict_vary = hnd_dict_url_matches(gz, rq->url);
	if (e->kind == HND_BUFFER) {
		sniff = e->body;
		sniff_len = e->body_len;
	} else if (e->kind == HND_FD && !f.content_type && fd_sniff(e, sniff_buf, &sniff_len)) {
		sniff = sniff_buf;
	}
	hnd_decide(gz, e->opt_out, status, &f, sniff, sniff_len, e->body_len, &rq->acc, &d);
	f.coding = d.coding;
	decide_len = e->body_len;
	/* Variants get Vary: Accept-Encoding as they are built; the response
	 * itself only when it is queued itself (below), so a response that is
	 * only ever sent compressed is not modified at all. */
	if (d.vary && hnd_vary_token(&f))
		hnd_vary_for_variant(&f, &fc, vary_buf, sizeof vary_buf, &vary_heap);
	if (e->body_len != MHD_SIZE_UNKNOWN)
		in_len = out_len = e->body_len;
	if (status == 304 && (d.reason == MHDGZ_SKIP_STATUS && d.vary) &&
	    hnd_dcz_select(gz, e, rq, &d, &f, &v, &coded_len, &dcz_release)) {
		/* RFC 9842: the 304 of the dcz 200 this client would get. */
		*queue_ret = v;
		release = HND_RELEASE;
		coded_len = MHDGZ_NBYTES_UNKNOWN;
	} else if ((d.reason == MHDGZ_COMPRESSED || d.reason == MHDGZ_SKIP_NOT_ACCEPTED) &&
		   hnd_dcz_select(gz, e, rq, &d, &f, &v, &coded_len, &dcz_release)) {
		/* RFC 9842: compressed against the client's dictionary; cached
		 * per dictionary, and a HEAD gets the same response. */
		*queue_ret = v;
		out_len = coded_len;
		d.reason = MHDGZ_COMPRESSED;
		f.coding = GZ_CODING_ZSTD;
		res->dcz = true;
	} else if (d.reason == MHDGZ_COMPRESSED && hnd_whole_body(e) && rq->head &&
		   !e->coded[f.coding].rep && !(rq->flags & HND_REQ_NO_CACHE) &&
		   !(gz->content_digest && f.content_digest) &&
		   hnd_coded_len_known(gz, e, &f, &coded_len)) {
		/* HEAD of a body whose gzip length its strong ETag tells (or an
		 * uncached response's last compression): the fields and that
		 * length, no compression. */
		if (coded_len == HND_MEMO_NOT_SMALLER) {
			d.reason = MHDGZ_SKIP_NOT_SMALLER;
			coded_len = MHDGZ_NBYTES_UNKNOWN;
		} else {
			v = hnd_fields_response(gz, fields, &f, coded_len, HND_REP_GZIP);
			if (v) {
				*queue_ret = v;
				release = HND_RELEASE;
				out_len = coded_len;
				padded = hnd_padded(gz, e, f.coding);
			} else {
				hnd_count(gz, HND_C_FAILURES, 1);
				d.reason = MHDGZ_SKIP_ERROR;
				coded_len = MHDGZ_NBYTES_UNKNOWN;
			}
		}
	} else if (d.reason == MHDGZ_COMPRESSED && hnd_whole_body(e)) {
		/* Compressed whole and cached; a HEAD gets the same response,
		 * whose Content-Length libmicrohttpd sends without the body. */
		bool fresh;

		d.reason = hnd_gzip_representation(gz, e, &f, rq->flags & HND_REQ_NO_CACHE, &v,
						   &fresh);
		if (d.reason == MHDGZ_COMPRESSED) {
			*queue_ret = v;
			if (fresh)
				release = HND_RELEASE;
			out_len = coded_len = e->coded[f.coding].rep_len;
			padded = e->coded[f.coding].padded;
		}
	} else if (d.reason == MHDGZ_COMPRESSED && rq->head) {
		/* HEAD of a stream: the fields GET would send, with the length
		 * GET's gzip stream would have where it can be learnt cheaply. */
		bool ll = hnd_low_latency(e, &f);
		uint64_t len = MHD_SIZE_UNKNOWN;

		if (hnd_gzip_stream_length(gz, e, f.etag, ll, f.coding, &len) != 0)
			len = MHD_SIZE_UNKNOWN;
		v = hnd_fields_response(gz, fields, &f, len, HND_REP_GZIP);
		in_len = out_len = 0;
		if (v) {
			*queue_ret = v;
			release = HND_RELEASE;
			if (len != MHD_SIZE_UNKNOWN) {
				res->coded_nbytes = len;
				padded = hnd_padded(gz, e, f.coding);
			}
		} else {
			hnd_count(gz, HND_C_FAILURES, 1);
			d.reason = MHDGZ_SKIP_ERROR;
		}
	} else if (d.reason == MHDGZ_COMPRESSED && e->kind == HND_CALLBACK &&
		   e->body_len == MHD_SIZE_UNKNOWN && !e->response_queued && !e->fields) {
		/* The first queue of an application's reader of unknown size:
		 * the coded stream in its own response (hnd_stream.c); on a
		 * failure the response as it is. */
		hnd_count(gz, HND_C_COMPRESSIONS, 1);
		in_len = out_len = 0;
		if (hnd_stream_in_place(gz, e, response, &f, hnd_low_latency(e, &f),
					gz->content_digest && f.content_digest) == 0) {
			padded = hnd_padded(gz, e, f.coding);
			in_place = true;
		} else {
			hnd_count(gz, HND_C_FAILURES, 1);
			d.reason = MHDGZ_SKIP_ERROR;
		}
	} else if (d.reason == MHDGZ_COMPRESSED) {
		/* Streams: a fresh gzip stream per queue (per connection); the
		 * bytes are counted as they are produced. */
		v = hnd_gzip_stream_new(gz, e, fields, &f, hnd_low_latency(e, &f),
					gz->content_digest && f.content_digest);
		hnd_count(gz, HND_C_COMPRESSIONS, 1);
		if (v) {
			*queue_ret = v;
			/* Our creation reference goes to the caller, who drops it
			 * after queueing (libmicrohttpd then holds its own). */
			release = HND_RELEASE;
			in_len = out_len = 0;
			padded = hnd_padded(gz, e, f.coding);
		} else {
			hnd_count(gz, HND_C_FAILURES, 1);
			d.reason = MHDGZ_SKIP_ERROR;
		}
	} else if (status == 304) {
		bool fresh;

		v = hnd_not_modified(gz, e, &f, sniff, sniff_len, decide_len, &rq->acc, d.gzip_304,
				     &fresh);
		if (v) {
			*queue_ret = v;
			if (fresh)
				release = HND_RELEASE;
		}
	}
	if (*queue_ret == response && e->kind == HND_FD) {
		bool fresh;

		v = hnd_file_identity(gz, e, &f, rq->head, &fresh);
		if (v) {
			*queue_ret = v;
			if (fresh)
				release = HND_RELEASE;
		}
	}
	if (*queue_ret == response && rq->head && e->body_len == MHD_SIZE_UNKNOWN &&
	    !no_content(status)) {
		/* HEAD of an identity stream of unknown length: libmicrohttpd
		 * 0.9.75 would follow the headers with a last chunk. */
		v = hnd_fields_response(gz, fields, &f, MHD_SIZE_UNKNOWN, HND_REP_IDENTITY);
		if (v) {
			*queue_ret = v;
			release = HND_RELEASE;
		}
	}
	if (*queue_ret == response && e->fields && !in_place) {
		/* Identity after the response took a coded stream in place:
		 * never the response a second time, a stream of its own. */
		v = no_content(status) ? hnd_fields_response(gz, fields, &f, MHD_SIZE_UNKNOWN,
							      HND_REP_IDENTITY)
				       : hnd_identity_stream(gz, e, &f);
		*queue_ret = v; /* NULL: nothing can be queued (MHD_NO) */
		release = v ? HND_RELEASE : 0;
		if (!v) {
			hnd_count(gz, HND_C_FAILURES, 1);
			d.reason = MHDGZ_SKIP_ERROR;
		}
	}
	if (*queue_ret == response && !in_place) {
		/* Merge Vary into the response only before libmicrohttpd first
		 * has it: afterwards another thread may be reading its fields. */
		if (f.vary_add && !e->vary_done && !e->response_queued &&
		    hnd_merge_vary(response, &f, &fc) == 0)
			e->vary_done = true;
	}
	if (*queue_ret == response)
		e->response_queued = true;
	if (e->body_len != MHD_SIZE_UNKNOWN) {
		res->body_nbytes = e->body_len;
		if (d.reason != MHDGZ_COMPRESSED)
			res->coded_nbytes = e->body_len;
		else if (hnd_whole_body(e))
			res->coded_nbytes = coded_len;
	}
	if (no_content(status))
		res->coded_nbytes = 0; /* whatever the 200 it stands for */
	pthread_mutex_unlock(&e->lock);
	gz_free(vary_heap);
	hnd_count_in(st, HND_C_BYTES_IN, in_len);
	hnd_count_in(st, HND_C_BYTES_OUT, out_len);
	if (d.reason == MHDGZ_COMPRESSED) {
		hnd_count_in(st, HND_C_COMPRESSED, 1);
		hnd_count_in(st, HND_C_CODED0 + f.coding, 1);
		res->coding = f.coding;
	}
	if (d.reason == MHDGZ_COMPRESSED && padded)
		hnd_count_in(st, HND_C_PADDED, 1);
done:
	hnd_count_in(st, HND_C_REASON0 + d.reason, 1);
	res->reason = d.reason;
	return release;
}

MHDGZ_API enum MHD_Result
mhdgz_queue_response_ex(struct mhdgz *gz, struct MHD_Connection *connection, const char *method,
			unsigned int status_code, struct MHD_Response *response,
			struct mhdgz_outcome *outcome)
{
	return mhdgz_queue_response_url(gz, connection, method, NULL, status_code, response,
					outcome);
}

MHDGZ_API enum MHD_Result
mhdgz_queue_response_url(struct mhdgz *gz, struct MHD_Connection *connection, const char *method,
			 const char *url, unsigned int status_code, struct MHD_Response *response,
			 struct mhdgz_outcome *outcome)
{
	struct hnd_request rq = { .flags = 0 };
	struct hnd_result res = { .reason = MHDGZ_SKIP_UNTRACKED,
				  .body_nbytes = MHDGZ_NBYTES_UNKNOWN,
				  .coded_nbytes = MHDGZ_NBYTES_UNKNOWN };
	struct MHD_Response *q = response;
	enum MHD_Result ret;
	int release = 0;

	if (!connection || !response || (outcome && outcome->size != sizeof *outcome))
		return MHD_NO;
	if (gz) {
		rq.head = method && strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
		hnd_accept_lazy(&rq.acc, connection); /* read if the decision asks */
		rq.url = url;
		if (url && atomic_load_explicit(&gz->dicts, memory_order_acquire)) {
			rq.avail_dict = MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
								    "Available-Dictionary");
			rq.dict_id = MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
								 "Dictionary-ID");
		}
		release = hnd_select(gz, &rq, status_code, response, &q, &res);
	}
	/* No response at all only where memory ran out building one. */
	ret = q ? MHD_queue_response(connection, status_code, q) : MHD_NO;
	if (release == HND_RELEASE)
		MHD_destroy_response(q);
	if (outcome) {
		outcome->reason = res.reason;
		outcome->coding = res.reason != MHDGZ_COMPRESSED ? "identity"
				  : res.dcz                      ? "dcz"
								 : gz_coding_name(res.coding);
		outcome->body_nbytes = res.body_nbytes;
		outcome->coded_nbytes = res.coded_nbytes;
	}
	return ret;
}

MHDGZ_API enum MHD_Result
mhdgz_queue_response(struct mhdgz *gz, struct MHD_Connection *connection, unsigned int status_code,
		     struct MHD_Response *response)
{
	return mhdgz_queue_response_ex(gz, connection, NULL, status_code, response, NULL);
}
