/* hnd_queue.c: select and queue: the decision applied to a response and a request. */
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "gz_alloc.h"
#include "hnd_stats.h"
#include "hnd_negotiate.h"
#include "hnd_plan.h"
#include "hnd_queue.h"
#include "hnd_entry.h"
#include "hnd_store.h"
#include "hnd_handle.h"
#include "hnd_headers.h"
#include "hnd_repr.h"
#include "hnd_stream.h"
#include "hnd_pad.h"
#include "hnd_dict.h"

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

/* What one queue call builds and reports: the plan's outcome. */
struct build {
	struct mhdgz *gz;
	struct hnd_entry *e;
	const struct hnd_request *rq;
	unsigned int status;           /* what is queued */
	unsigned int asked;            /* the application's status */
	struct MHD_Response *response; /* the application's */
	struct MHD_Response *fields;   /* its identity fields (hnd_identity_fields) */
	struct hnd_facts f;
	struct hnd_plan p;
	enum mhdgz_reason reason;
	struct MHD_Response *v; /* what is queued; NULL: nothing can be */
	int release;            /* HND_RELEASE: the caller drops v after queueing */
	uint64_t in_len, out_len, coded_len;
	bool padded;   /* what is queued carries length-hiding padding */
	bool in_place; /* the response itself carries the coded stream */
	bool dcz;
};

/* A builder that could not build: count it, send identity. */
static void
failed(struct build *b)
{
	hnd_count(b->gz, HND_C_FAILURES, 1);
	b->reason = MHDGZ_SKIP_ERROR;
}

/* A response of ours for this queue alone (true), or failed. */
static bool
fresh(struct build *b, struct MHD_Response *v)
{
	if (!v) {
		failed(b);
		return false;
	}
	b->v = v;
	b->release = HND_RELEASE;
	return true;
}

/* RFC 9842: coded against the client's dictionary, kept per dictionary (a
 * HEAD gets the same response), or the 304 of that 200. false: dcz does
 * not make it smaller, or failed; the plan without it stands. */
static bool
build_dcz(struct build *b)
{
	bool is_304 = b->status == 304, release;
	struct MHD_Response *v;
	uint64_t len;

	if (!hnd_dcz_build(b->gz, b->e, b->p.dict, is_304, b->rq->flags & HND_REQ_NO_CACHE, &b->f,
			   &v, &len, &release))
		return false;
	b->v = v;
	if (is_304) {
		b->release = HND_RELEASE;
		return true;
	}
	b->out_len = b->coded_len = len;
	b->reason = MHDGZ_COMPRESSED;
	b->f.coding = GZ_CODING_ZSTD;
	b->dcz = true;
	return true;
}

/* Coded whole: the kept representation, built over the store's body or a
 * new compression (a HEAD gets the same response, whose Content-Length
 * libmicrohttpd sends without the body). */
static void
build_whole(struct build *b)
{
	struct hnd_coded *k = &b->e->coded[b->f.coding];
	struct MHD_Response *v;

	b->reason = hnd_gzip_representation(b->gz, b->e, &b->f, b->rq->flags & HND_REQ_NO_CACHE,
					    &v);
	if (b->reason != MHDGZ_COMPRESSED)
		return;
	b->v = v;
	b->out_len = b->coded_len = k->body->len;
	b->padded = hnd_padded(b->gz, b->e, b->f.coding);
}

/* HEAD of a body coded whole: its fields with the length the store knows. */
static void
build_whole_fields(struct build *b)
{
	if (fresh(b, hnd_fields_response(b->gz, b->fields, &b->f, b->p.coded_len, HND_REP_GZIP))) {
		b->out_len = b->coded_len = b->p.coded_len;
		b->padded = hnd_padded(b->gz, b->e, b->f.coding);
	}
}

/* store_len, the plan's hnd_plan_in known_len: what the store knows of e's coded
 * length; nothing when e keeps its coded response (a HEAD gets it) or
 * with HND_REQ_NO_CACHE. */
static enum hnd_known
store_len(void *cls, enum gz_coding coding, uint64_t *len_ret)
{
	struct build *b = cls;
	const struct hnd_coded *k = &b->e->coded[coding];

	if ((b->rq->flags & HND_REQ_NO_CACHE) || hnd_coded_live(k) ||
	    !hnd_coded_len_known(b->gz, b->e, b->f.etag, coding, HND_SM_WHOLE, len_ret))
		return HND_KNOWN_NOTHING;
	return *len_ret == HND_STORE_NOT_SMALLER ? HND_KNOWN_NOT_SMALLER : HND_KNOWN_LEN;
}

/* HEAD of a coded stream: the fields GET would send, with the length
 * GET's stream would have where it can be learnt cheaply. */
static void
build_stream_fields(struct build *b)
{
	uint64_t len = MHD_SIZE_UNKNOWN;

	if (hnd_gzip_stream_length(b->gz, b->e, b->f.etag, b->p.low_latency, b->f.coding, &len) !=
	    0)
		len = MHD_SIZE_UNKNOWN;
	b->in_len = b->out_len = 0;
	if (fresh(b, hnd_fields_response(b->gz, b->fields, &b->f, len, HND_REP_GZIP)) &&
	    len != MHD_SIZE_UNKNOWN) {
		b->coded_len = len;
		b->padded = hnd_padded(b->gz, b->e, b->f.coding);
	}
}

/* A coded stream, per queue (per connection), in the response itself or
 * in one of its own; its bytes are counted as they are produced. */
static void
build_stream(struct build *b)
{
	uint64_t charge;
	int rc = hnd_coder_charge(b->gz, b->f.coding, b->p.low_latency, &charge);

	/* Past the coder budget: identity (the response, or its identity
	 * stream), the representation still varying. */
	if (rc != 0) {
		if (rc > 0)
			b->reason = MHDGZ_SKIP_MEMORY;
		else
			failed(b);
		return;
	}
	hnd_count(b->gz, HND_C_COMPRESSIONS, 1);
	b->in_len = b->out_len = 0;
	if (b->p.kind == HND_PLAN_STREAM_IN_PLACE) {
		/* on a failure the response as it is */
		if (hnd_stream_in_place(b->gz, b->e, b->response, &b->f, b->p.low_latency,
					b->p.digest, charge) < 0) {
			failed(b);
			return;
		}
		b->in_place = true;
	} else {
		/* our creation reference goes to the caller, who drops it
		 * after queueing (libmicrohttpd then holds its own) */
		if (!fresh(b, hnd_gzip_stream_new(b->gz, b->e, b->fields, &b->f, b->p.low_latency,
						  b->p.digest, charge)))
			return;
	}
	b->padded = hnd_padded(b->gz, b->e, b->f.coding);
}

/* A 412 (RFC 9110 section 15.5.13): no content and none of the
 * representation's fields, with the response's libmicrohttpd flags. */
static void
build_precondition_failed(struct build *b)
{
	struct MHD_Response *v = MHD_create_response_from_buffer_with_free_callback_cls(0, NULL,
											NULL, NULL);

	if (v && b->f.mhd_flags &&
	    MHD_set_response_options(v, b->f.mhd_flags, MHD_RO_END) != MHD_YES) {
		MHD_destroy_response(v);
		v = NULL;
	}
	if (fresh(b, v))
		b->in_len = b->out_len = 0;
	else
		b->v = NULL; /* never the resource's body under a 412 */
}

/* The 304 a precondition gave (RFC 9110 section 15.4.5) of a response the
 * application coded itself or ranged, which the plan sends as it is: its
 * fields without Content-Encoding and Content-Range, and the length of its
 * 200 where the response is that 200 (test_preconditions_304, "/coded"). */
static bool
build_precondition_304(struct build *b)
{
	bool ranged = b->asked == 206 || b->f.content_range;

	if (b->asked == 304 ||
	    !((b->f.content_encoding && b->p.d.reason == MHDGZ_SKIP_ENCODED) || ranged))
		return false;
	fresh(b, hnd_fields_response(b->gz, b->fields, &b->f,
				     ranged ? MHD_SIZE_UNKNOWN : b->e->body_len,
				     HND_REP_NOT_MODIFIED));
	return true;
}

static void
build_not_modified(struct build *b)
{
	struct MHD_Response *v;

	if (build_precondition_304(b))
		return;
	v = hnd_not_modified(b->gz, b->e, &b->f, &b->p.d200, b->p.d.gzip_304);
	if (v)
		b->v = v;
}

/* Identity: the response itself, or, where that is not what
 * libmicrohttpd should send, a response of ours with its fields: a file's
 * own identity response (inline or sendfile), a HEAD of a stream of
 * unknown length (0.9.75 would follow the fields with a last chunk), and
 * any queue after the response took a coded stream in place. */
static void
build_identity(struct build *b)
{
	struct hnd_entry *e = b->e;
	bool fresh_rep;

	if (b->v != b->response || b->in_place)
		return;
	if (e->kind == HND_FD) {
		struct MHD_Response *v = hnd_file_identity(b->gz, e, &b->f, b->rq->head,
							   &fresh_rep);

		if (v) {
			b->v = v;
			if (fresh_rep)
				b->release = HND_RELEASE;
			return;
		}
	}
	if (b->rq->head && e->body_len == MHD_SIZE_UNKNOWN && !no_content(b->status)) {
		struct MHD_Response *v = hnd_fields_response(b->gz, b->fields, &b->f,
							     MHD_SIZE_UNKNOWN, HND_REP_IDENTITY);

		if (v) {
			b->v = v;
			b->release = HND_RELEASE;
		}
		if (v || !e->fields)
			return;
	}
	if (e->fields) {
		/* never the response a second time: a stream of its own */
		b->v = no_content(b->status) || b->rq->head
			       ? hnd_fields_response(b->gz, b->fields, &b->f, MHD_SIZE_UNKNOWN,
						     HND_REP_IDENTITY)
			       : hnd_identity_stream(b->gz, e, &b->f);
		b->release = b->v ? HND_RELEASE : 0;
		if (!b->v)
			failed(b);
	}
}

/* The plan's inputs for e, read under e->lock. */
static void
plan_in(struct build *b, struct hnd_plan_in *in, uint8_t *sniff_buf)
{
	struct hnd_entry *e = b->e;

	*in = (struct hnd_plan_in){ .status = b->status,
				    .rq = b->rq,
				    .f = &b->f,
				    .kind = e->kind,
				    .body_len = e->body_len,
				    .opt_out = e->opt_out,
				    .padded = hnd_padded(b->gz, e, GZ_CODING_GZIP),
				    .low_latency = e->low_latency,
				    .fresh = !e->response_queued && !e->fields,
				    .known_len = store_len,
				    .known_cls = b,
				    .precondition_failed = b->status ==
								   MHD_HTTP_PRECONDITION_FAILED &&
							   b->status != b->asked };
	if (e->kind == HND_BUFFER) {
		in->sniff = e->body;
		in->sniff_len = e->body_len;
	} else if (e->kind == HND_FD && !b->f.content_type &&
		   fd_sniff(e, sniff_buf, &in->sniff_len)) {
		in->sniff = sniff_buf;
	}
}

/* One builder per plan kind, then the identity response where none was
 * built. */
static void
build_planned(struct build *b)
{
	switch (b->p.kind) {
	case HND_PLAN_DCZ:
		break;
	case HND_PLAN_WHOLE:
		build_whole(b);
		break;
	case HND_PLAN_WHOLE_FIELDS:
		build_whole_fields(b);
		break;
	case HND_PLAN_STREAM_FIELDS:
		build_stream_fields(b);
		break;
	case HND_PLAN_STREAM_IN_PLACE:
	case HND_PLAN_STREAM:
		build_stream(b);
		break;
	case HND_PLAN_NOT_MODIFIED:
		build_not_modified(b);
		break;
	case HND_PLAN_PRECONDITION_FAILED:
		build_precondition_failed(b);
		break;
	case HND_PLAN_IDENTITY:
		break;
	}
	if (b->p.kind != HND_PLAN_PRECONDITION_FAILED)
		build_identity(b);
}

/* The identity and coded lengths the outcome reports. e->lock held. */
static void
result_lengths(const struct build *b, struct hnd_result *res)
{
	const struct hnd_entry *e = b->e;

	if (e->body_len != MHD_SIZE_UNKNOWN) {
		res->body_nbytes = e->body_len;
		if (b->reason != MHDGZ_COMPRESSED)
			res->coded_nbytes = e->body_len;
		else if (b->p.whole)
			res->coded_nbytes = b->coded_len;
	}
	if (b->p.kind == HND_PLAN_STREAM_FIELDS && b->reason == MHDGZ_COMPRESSED)
		res->coded_nbytes = b->coded_len; /* where a HEAD learnt it */
	if (no_content(b->status) || b->p.kind == HND_PLAN_PRECONDITION_FAILED)
		res->coded_nbytes = 0; /* whatever the 200 it stands for */
}

/* The counters of a queue that found its entry, and the coding it chose. */
static void
count_built(const struct build *b, struct hnd_stripe *st, struct hnd_result *res)
{
	hnd_count_in(st, HND_C_BYTES_IN, b->in_len);
	hnd_count_in(st, HND_C_BYTES_OUT, b->out_len);
	if (b->reason == MHDGZ_COMPRESSED) {
		hnd_count_in(st, HND_C_COMPRESSED, 1);
		hnd_count_in(st, HND_C_CODED0 + b->f.coding, 1);
		hnd_count_in(st, HND_C_CODED_IN0 + b->f.coding, b->in_len);
		hnd_count_in(st, HND_C_CODED_OUT0 + b->f.coding, b->out_len);
		res->coding = b->f.coding;
		res->dcz = b->dcz;
	}
	if (b->reason == MHDGZ_COMPRESSED && b->padded)
		hnd_count_in(st, HND_C_PADDED, 1);
}

/*
 * The whole selection: plan, then build what the plan says in the
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
	struct build b; /* set field by field: this runs for every response */
	struct hnd_facts_ctx fc;
	struct hnd_plan_in in;
	uint8_t sniff_buf[HND_SNIFF_NBYTES];
	char vary_buf[256], *vary_heap = NULL;
	struct hnd_stripe *st = hnd_stripe_of(gz);
	struct hnd_entry *e;

	b.gz = gz;
	b.rq = rq;
	b.status = b.asked = status;
	b.response = response;
	b.v = response;
	b.release = 0;
	b.in_len = b.out_len = 0;
	b.coded_len = MHDGZ_NBYTES_UNKNOWN;
	b.padded = b.in_place = b.dcz = false;
	res->body_nbytes = res->coded_nbytes = MHDGZ_NBYTES_UNKNOWN;
	res->coding = GZ_CODING_GZIP;
	res->dcz = false;
	hnd_count_in(st, HND_C_RESPONSES, 1);
	e = b.e = hnd_table_lookup(&gz->table, response);
	if (!e) {
		b.reason = MHDGZ_SKIP_UNTRACKED;
		goto done;
	}
	pthread_mutex_lock(&e->lock);
	e->queued = true;
	b.fields = hnd_identity_fields(e);
	hnd_read_facts(b.fields, &b.f, &fc);
	b.f.mhd_flags = e->mhd_flags;
	atomic_store(&e->te_chunked, b.f.te_chunked);
	e->resource = b.f.etag ? hnd_store_resource(rq->url) : 0;
	if (rq->preconditions && status >= 200 && status < 300) {
		unsigned int pre = hnd_preconditions(
			rq->preconditions, rq->get_or_head, b.f.etag,
			MHD_get_response_header(b.fields, MHD_HTTP_HEADER_LAST_MODIFIED));

		if (pre)
			b.status = pre;
	}
	plan_in(&b, &in, sniff_buf);
	in.dicts = atomic_load_explicit(&gz->dicts, memory_order_acquire);
	b.f.dict_vary = hnd_dict_url_matches(in.dicts, rq->url);
	hnd_plan(&gz->policy, &in, &b.p);
	b.reason = b.p.d.reason;
	b.f.coding = b.p.d.coding;
	/* Variants get Vary: Accept-Encoding as they are built; the response
	 * itself only when it is queued itself (below), so a response that is
	 * only ever sent compressed is not modified at all. */
	if (b.p.d.vary && hnd_vary_token(&b.f))
		hnd_vary_for_variant(&b.f, &fc, vary_buf, sizeof vary_buf, &vary_heap);
	if (e->body_len != MHD_SIZE_UNKNOWN)
		b.in_len = b.out_len = e->body_len;
	if (b.p.kind == HND_PLAN_DCZ && !build_dcz(&b)) {
		/* not smaller, or failed: the plan without the dictionary */
		in.no_dict = true;
		hnd_plan(&gz->policy, &in, &b.p);
	}
	build_planned(&b);
	if (b.v == response && !b.in_place) {
		/* Merge Vary into the response only before libmicrohttpd first
		 * has it: afterwards another thread may be reading its fields. */
		if (b.f.vary_add && !e->vary_done && !e->response_queued &&
		    hnd_merge_vary(response, &b.f, &fc) == 0)
			e->vary_done = true;
	}
	if (b.v == response)
		e->response_queued = true;
	result_lengths(&b, res);
	pthread_mutex_unlock(&e->lock);
	gz_free(vary_heap);
	count_built(&b, st, res);
done:
	hnd_count_in(st, HND_C_REASON0 + b.reason, 1);
	res->reason = b.reason;
	res->status = b.status;
	*queue_ret = b.v;
	return b.release;
}

MHDGZ_API enum MHD_Result
mhdgz_queue_response_ex(struct mhdgz *gz, struct MHD_Connection *connection,
			const struct mhdgz_request *req, unsigned int status_code,
			struct MHD_Response *response, struct mhdgz_outcome *outcome)
{
	static const struct mhdgz_request get = { .size = sizeof get };
	struct hnd_request rq = { .flags = 0 };
	struct hnd_result res = { .reason = MHDGZ_SKIP_UNTRACKED,
				  .status = status_code,
				  .body_nbytes = MHDGZ_NBYTES_UNKNOWN,
				  .coded_nbytes = MHDGZ_NBYTES_UNKNOWN };
	struct MHD_Response *q = response;
	enum MHD_Result ret;
	int release = 0;

	if (!req)
		req = &get;
	if (!connection || !response || req->size != sizeof *req ||
	    (req->flags & ~MHDGZ_REQUEST_PRECONDITIONS) ||
	    (outcome && outcome->size != sizeof *outcome))
		return MHD_NO;
	if (gz) {
		rq.head = req->method && strcmp(req->method, MHD_HTTP_METHOD_HEAD) == 0;
		rq.get_or_head = !req->method || rq.head ||
				 strcmp(req->method, MHD_HTTP_METHOD_GET) == 0;
		if (req->flags & MHDGZ_REQUEST_PRECONDITIONS)
			rq.preconditions = connection;
		hnd_accept_lazy(&rq.acc, connection); /* read if the decision asks */
		rq.url = req->url;
		if (req->url && atomic_load_explicit(&gz->dicts, memory_order_acquire)) {
			rq.avail_dict = MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
								    "Available-Dictionary");
			rq.dict_id = MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
								 "Dictionary-ID");
		}
		release = hnd_select(gz, &rq, status_code, response, &q, &res);
	}
	/* No response at all only where memory ran out building one. */
	ret = q ? MHD_queue_response(connection, res.status, q) : MHD_NO;
	if (release == HND_RELEASE)
		MHD_destroy_response(q);
	if (outcome) {
		outcome->reason = res.reason;
		outcome->coding = res.reason != MHDGZ_COMPRESSED ? "identity"
				  : res.dcz                      ? "dcz"
								 : gz_coding_name(res.coding);
		outcome->body_nbytes = res.body_nbytes;
		outcome->coded_nbytes = res.coded_nbytes;
		outcome->status = res.status;
	}
	return ret;
}

MHDGZ_API enum MHD_Result
mhdgz_queue_response(struct mhdgz *gz, struct MHD_Connection *connection, unsigned int status_code,
		     struct MHD_Response *response)
{
	return mhdgz_queue_response_ex(gz, connection, NULL, status_code, response, NULL);
}
