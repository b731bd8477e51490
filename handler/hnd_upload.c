/* hnd_upload.c: request bodies: Content-Encoding read, gzip inflated within limits (gz_inflate), refusals. */
#include <stdio.h>
#include <string.h>

#include "gz_inflate.h"
#include "gz_alloc.h"
#include "hnd_stats.h"
#include "hnd_handle.h"
#include "hnd_upload.h"
#include "hnd_mtype.h"

/* The refusal response's body, "STATUS Reason\n", in bytes at most. */
#define HND_REFUSAL_BODY_CAP 96

struct mhdgz_upload {
	struct mhdgz *gz; /* a reference, for the counters */
	mhdgz_upload_data_fn data_fn;
	void *data_cls;
	struct gz_inflate *inf; /* gzip bodies; NULL for identity */
	const char *coding;     /* "gzip", "identity", NULL: unsupported */
	uint64_t max_decoded;   /* identity: bytes; UINT64_MAX for none */
	uint64_t in_nbytes;     /* identity: bytes read and passed on */
	uint64_t out_nbytes;    /* identity: bytes the callback accepted */
	uint64_t discarded;     /* bytes consumed after the refusal's piece */
	enum mhdgz_upload_refusal refusal;
	unsigned int status; /* 0 while accepted */
	bool completed;      /* mhdgz_upload_finish counted it */
};

/* What the Content-Encoding fields of a request name. */
struct hnd_codings {
	unsigned int gzip; /* gzip or x-gzip elements */
	bool other;        /* an element that is neither those nor identity */
};

/* One field value: a comma-separated list of codings (RFC 9110 section
 * 5.6.1: empty elements and OWS around them are allowed). */
static void
scan_codings(const char *v, struct hnd_codings *c)
{
	while (v && *v) {
		const char *start, *end;

		while (*v == ',' || *v == ' ' || *v == '\t')
			v++;
		start = v;
		while (*v && *v != ',')
			v++;
		end = v;
		while (end > start && (end[-1] == ' ' || end[-1] == '\t'))
			end--;
		if (end == start || hnd_ascii_is(start, (size_t)(end - start), "identity"))
			continue;
		if (hnd_ascii_is(start, (size_t)(end - start), "gzip") ||
		    hnd_ascii_is(start, (size_t)(end - start), "x-gzip"))
			c->gzip++;
		else
			c->other = true;
	}
}

static enum MHD_Result
each_field(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	(void)kind;
	if (key && hnd_ascii_eq(key, MHD_HTTP_HEADER_CONTENT_ENCODING))
		scan_codings(value, cls);
	return MHD_YES;
}

/* The request's Content-Length if it is a plain decimal number that fits,
 * else UINT64_MAX (absent, chunked, or left to libmicrohttpd to refuse). */
static uint64_t
content_length(struct MHD_Connection *connection)
{
	const char *v = MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
						    MHD_HTTP_HEADER_CONTENT_LENGTH);
	uint64_t n = 0;

	if (!v || !*v)
		return UINT64_MAX;
	for (; *v >= '0' && *v <= '9'; v++) {
		if (n > (UINT64_MAX - 9) / 10)
			return UINT64_MAX;
		n = n * 10 + (uint64_t)(*v - '0');
	}
	return *v ? UINT64_MAX : n;
}

static unsigned int
status_of(enum mhdgz_upload_refusal why)
{
	switch (why) {
	case MHDGZ_UPLOAD_OK:
		return 0;
	case MHDGZ_UPLOAD_CODING:
		return MHD_HTTP_UNSUPPORTED_MEDIA_TYPE;
	case MHDGZ_UPLOAD_TOO_LARGE:
	case MHDGZ_UPLOAD_RATIO:
	case MHDGZ_UPLOAD_MEMBERS:
		return MHD_HTTP_CONTENT_TOO_LARGE;
	case MHDGZ_UPLOAD_MALFORMED:
	case MHDGZ_UPLOAD_TRUNCATED:
		return MHD_HTTP_BAD_REQUEST;
	default:
		return MHD_HTTP_INTERNAL_SERVER_ERROR;
	}
}

/* The data callback's answer as a status: 0, 400-599, else 500. */
static unsigned int
app_status(unsigned int st)
{
	if (st == 0 || (st >= 400 && st <= 599))
		return st;
	return MHD_HTTP_INTERNAL_SERVER_ERROR;
}

static void
refuse(struct mhdgz_upload *up, enum mhdgz_upload_refusal why, unsigned int status)
{
	up->refusal = why;
	up->status = status ? status : status_of(why);
	hnd_count(up->gz, HND_C_UPLOAD_REFUSED0 + why, 1);
}

static int
upload_sink(void *cls, const uint8_t *p, size_t n)
{
	struct mhdgz_upload *up = cls;

	return (int)app_status(up->data_fn(up->data_cls, p, n));
}

MHDGZ_API int
mhdgz_upload_new(struct mhdgz *gz, struct MHD_Connection *connection,
		 const struct mhdgz_upload_options *opts, mhdgz_upload_data_fn data_fn,
		 void *data_cls, struct mhdgz_upload **up_ret)
{
	struct mhdgz_upload_options o;
	struct hnd_codings codings = { 0, false };
	struct mhdgz_upload *up;

	if (!gz || !connection || !data_fn || !up_ret || (opts && opts->size != sizeof o))
		return MHDGZ_EINVAL;
	memset(&o, 0, sizeof o);
	if (opts)
		o = *opts;
	up = gz_calloc(1, sizeof *up);
	if (!up)
		return MHDGZ_ENOMEM;
	up->data_fn = data_fn;
	up->data_cls = data_cls;
	up->max_decoded = o.max_decoded_nbytes ? o.max_decoded_nbytes
					       : MHDGZ_UPLOAD_DEFAULT_MAX_DECODED_NBYTES;
	MHD_get_connection_values(connection, MHD_HEADER_KIND, each_field, &codings);
	if (!codings.other && codings.gzip == 1) {
		struct gz_inflate_limits lim = {
			.max_out = up->max_decoded == MHDGZ_UPLOAD_UNLIMITED ? 0 : up->max_decoded,
			.ratio = o.max_ratio ? o.max_ratio : MHDGZ_UPLOAD_DEFAULT_MAX_RATIO,
			.ratio_burst = o.ratio_burst_nbytes
					       ? o.ratio_burst_nbytes
					       : MHDGZ_UPLOAD_DEFAULT_RATIO_BURST_NBYTES,
			.max_members = o.max_members ? o.max_members
						     : MHDGZ_UPLOAD_DEFAULT_MAX_MEMBERS,
		};
		int rc = gz_inflate_new(&lim,
					o.chunk_nbytes ? o.chunk_nbytes
						       : MHDGZ_UPLOAD_DEFAULT_CHUNK_NBYTES,
					upload_sink, up, &up->inf);

		if (rc < 0) {
			gz_free(up);
			return rc;
		}
		up->coding = "gzip";
	} else if (!codings.other && codings.gzip == 0) {
		up->coding = "identity";
	}
	hnd_gz_ref(gz);
	up->gz = gz;
	hnd_count(gz, HND_C_UPLOADS, 1);
	if (up->inf)
		hnd_count(gz, HND_C_UPLOADS_GZIP, 1);
	if (!up->coding)
		refuse(up, MHDGZ_UPLOAD_CODING, 0);
	else if (!up->inf && up->max_decoded != MHDGZ_UPLOAD_UNLIMITED) {
		uint64_t len = content_length(connection);

		if (len != UINT64_MAX && len > up->max_decoded)
			refuse(up, MHDGZ_UPLOAD_TOO_LARGE, 0);
	}
	*up_ret = up;
	return 0;
}

/* The inflater stopped: the refusal that says why. */
static void
refuse_inflate(struct mhdgz_upload *up)
{
	static const enum mhdgz_upload_refusal of_stop[] = {
		[GZ_INF_RUNNING] = MHDGZ_UPLOAD_NOMEM, /* not reached */
		[GZ_INF_MAX_OUT] = MHDGZ_UPLOAD_TOO_LARGE,
		[GZ_INF_RATIO] = MHDGZ_UPLOAD_RATIO,
		[GZ_INF_MEMBERS] = MHDGZ_UPLOAD_MEMBERS,
		[GZ_INF_BAD_DATA] = MHDGZ_UPLOAD_MALFORMED,
		[GZ_INF_TRUNCATED] = MHDGZ_UPLOAD_TRUNCATED,
		[GZ_INF_SINK] = MHDGZ_UPLOAD_APPLICATION,
		[GZ_INF_NOMEM] = MHDGZ_UPLOAD_NOMEM,
	};
	enum gz_inflate_stop why = gz_inflate_stopped(up->inf);

	refuse(up, of_stop[why],
	       why == GZ_INF_SINK ? (unsigned int)gz_inflate_sink_rc(up->inf) : 0);
}

MHDGZ_API unsigned int
mhdgz_upload_feed(struct mhdgz_upload *up, const char *upload_data, size_t *upload_data_size)
{
	size_t n = 0;

	if (upload_data_size) {
		n = *upload_data_size;
		*upload_data_size = 0;
	}
	if (!up)
		return MHD_HTTP_INTERNAL_SERVER_ERROR;
	if (up->status && n > MHDGZ_UPLOAD_DISCARD_NBYTES - up->discarded) {
		/* Past the discard bound: nothing consumed, so the access
		 * handler returns MHD_NO and libmicrohttpd closes
		 * (test_upload_discard_bound). */
		*upload_data_size = n;
		return up->status;
	}
	if (up->status) {
		up->discarded += n;
		return up->status;
	}
	if (n == 0 || !upload_data)
		return 0;
	if (up->inf) {
		struct gz_inflate_counts a, b;

		gz_inflate_get_counts(up->inf, &a);
		if (gz_inflate_feed(up->inf, (const uint8_t *)upload_data, n) < 0)
			refuse_inflate(up);
		gz_inflate_get_counts(up->inf, &b);
		hnd_count(up->gz, HND_C_UPLOAD_BYTES_IN, b.in_nbytes - a.in_nbytes);
		hnd_count(up->gz, HND_C_UPLOAD_BYTES_OUT, b.out_nbytes - a.out_nbytes);
	} else if (n > up->max_decoded - up->in_nbytes) {
		refuse(up, MHDGZ_UPLOAD_TOO_LARGE, 0);
	} else {
		unsigned int st = app_status(up->data_fn(up->data_cls, upload_data, n));

		up->in_nbytes += n;
		hnd_count(up->gz, HND_C_UPLOAD_BYTES_IN, n);
		if (st) {
			refuse(up, MHDGZ_UPLOAD_APPLICATION, st);
		} else {
			up->out_nbytes += n;
			hnd_count(up->gz, HND_C_UPLOAD_BYTES_OUT, n);
		}
	}
	return up->status;
}

MHDGZ_API unsigned int
mhdgz_upload_finish(struct mhdgz_upload *up)
{
	if (!up)
		return MHD_HTTP_INTERNAL_SERVER_ERROR;
	if (up->status || up->completed)
		return up->status;
	if (up->inf && gz_inflate_finish(up->inf) < 0) {
		refuse_inflate(up);
		return up->status;
	}
	up->completed = true;
	hnd_count(up->gz, HND_C_UPLOAD_REFUSED0 + MHDGZ_UPLOAD_OK, 1);
	return 0;
}

static const char *const hnd_refusal_names[MHDGZ_UPLOAD_REFUSAL_COUNT] = {
	[MHDGZ_UPLOAD_OK] = "ok",
	[MHDGZ_UPLOAD_CODING] = "coding",
	[MHDGZ_UPLOAD_TOO_LARGE] = "too-large",
	[MHDGZ_UPLOAD_RATIO] = "ratio",
	[MHDGZ_UPLOAD_MEMBERS] = "members",
	[MHDGZ_UPLOAD_MALFORMED] = "malformed",
	[MHDGZ_UPLOAD_TRUNCATED] = "truncated",
	[MHDGZ_UPLOAD_APPLICATION] = "application",
	[MHDGZ_UPLOAD_NOMEM] = "nomem",
};

const char *
hnd_upload_refusal_name(enum mhdgz_upload_refusal refusal)
{
	if ((unsigned int)refusal >= MHDGZ_UPLOAD_REFUSAL_COUNT)
		return "unknown";
	return hnd_refusal_names[refusal];
}

MHDGZ_API int
mhdgz_upload_get_info(const struct mhdgz_upload *up, struct mhdgz_upload_info *info)
{
	if (!up || !info || info->size != sizeof *info)
		return MHDGZ_EINVAL;
	info->coding = up->coding;
	info->refusal = up->refusal;
	info->refusal_name = hnd_upload_refusal_name(up->refusal);
	info->status = up->status;
	if (up->inf) {
		struct gz_inflate_counts c;

		gz_inflate_get_counts(up->inf, &c);
		info->encoded_nbytes = c.in_nbytes;
		info->decoded_nbytes = c.out_nbytes;
		info->members = c.members;
	} else {
		/* Identity: a piece the callback refused was read, not
		 * accepted. */
		info->encoded_nbytes = up->in_nbytes;
		info->decoded_nbytes = up->out_nbytes;
		info->members = 0;
	}
	return 0;
}

MHDGZ_API struct MHD_Response *
mhdgz_upload_refusal_response(unsigned int status_code)
{
	const char *phrase = MHD_get_reason_phrase_for(status_code);
	char body[HND_REFUSAL_BODY_CAP];
	struct MHD_Response *r;
	int n;

	n = snprintf(body, sizeof body, "%u %s\n", status_code,
		     phrase && *phrase ? phrase : "Request Body Refused");
	if (n < 0 || (size_t)n >= sizeof body)
		return NULL;
	r = MHD_create_response_from_buffer((size_t)n, body, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return NULL;
	if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8") !=
		    MHD_YES ||
	    (status_code == MHD_HTTP_UNSUPPORTED_MEDIA_TYPE &&
	     MHD_add_response_header(r, MHD_HTTP_HEADER_ACCEPT_ENCODING, "gzip") != MHD_YES)) {
		MHD_destroy_response(r);
		return NULL;
	}
	return r;
}

MHDGZ_API void
mhdgz_upload_free(struct mhdgz_upload *up)
{
	if (!up)
		return;
	gz_inflate_free(up->inf);
	hnd_gz_unref(up->gz);
	gz_free(up);
}
