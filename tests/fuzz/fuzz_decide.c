/* fuzz_decide.c: libFuzzer target for the whole decision: mhdgz_response_from_buffer, fuzzed headers, hnd_select. */
/*
 * Input: four bytes (handler configuration, status, flags, body repeat
 * count), then lines up to a line "--": a line "A..." is an
 * Accept-Encoding line (value after the A), a line "name:value" a
 * response header; the bytes after "--\n" are the body (repeated, to
 * reach min_size with compressible data). Four handlers with different
 * backends, levels, min_size, ETag policies and type lists live across
 * inputs (as in a server).
 *
 * libmicrohttpd cannot give a body back, so the compressed bytes are not
 * decoded here (fuzz_stream and the Check suites do that); checked:
 *  - hnd_select() returns 0 for a buffer response, a reason in range,
 *    never MHDGZ_SKIP_ERROR (no allocation fails here);
 *  - the reason is the one of a reference decision written from the
 *    documented order (mhdgz(3), what gets compressed) over the response's
 *    fields as libmicrohttpd stored them, and hnd_decide() on those facts
 *    agrees; hnd_plan() on them decides the same, twice alike, with the
 *    kind that decision gives a buffer (a 304's 200 as the reference's); "compressed" may become "not-smaller" only when the handler's
 *    backend really does not shrink the body;
 *  - a gzip variant has exactly one Content-Encoding: gzip, no
 *    Content-Length or Accept-Ranges, the ETag of the policy, and every
 *    other field of the response; an identity queue is the response
 *    itself (a 304 may queue the variant standing for the gzip 200);
 *  - whenever the representation varies, what is queued carries Vary with
 *    accept-encoding exactly once (or "*");
 *  - counters: one response and one reason per call, bytes in and out,
 *    compressed bodies smaller, no failures; a second call gives the same
 *    reason and reuses the variant (unless HND_REQ_NO_CACHE);
 *  - destroying the response empties the handler's response table; no
 *    leak (LeakSanitizer).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hnd_mtype.h"
#include "hnd_negotiate.h"
#include "hnd_plan.h"
#include "hnd_queue.h"
#include "hnd_entry.h"
#include "hnd_handle.h"
#include "fuzz_util.h"
#include "../info.h"

#define FZ_MAX_LINES 48
#define FZ_MAX_AE 16
#define FZ_MAX_HDRS 32
/* Largest body built from an input, in bytes (compression per input must
 * stay fast). */
#define FZ_BODY_MAX 16384
/* HND_ETAG_MAX of hnd_response.c: longer ETags are dropped from variants. */
#define FZ_ETAG_CAP 256

#define N_GZ 4
static struct mhdgz *gzs[N_GZ];

static const unsigned int statuses[] = { 200, 200, 200, 201, 203, 204, 206, 301, 304,
					 304, 404, 410, 500, 100, 101, 199, 299, 599 };

/* ------------------------------------------------------------------------ */
/* The reference: the documented decision, written independently.           */

struct ref_facts {
	const char *ct;   /* first Content-Type */
	const char *etag; /* first ETag */
	bool encoded;     /* a Content-Encoding line other than "identity" */
	bool range;       /* a Content-Range line */
	bool no_transform;
	bool vary_ae; /* a Vary line lists accept-encoding or "*" */
	unsigned int vary_lines;
};

static bool
is_ows(char c)
{
	return c == ' ' || c == '\t';
}

/* Does the comma-separated list hold token (case-insensitive)? */
static bool
list_has(const char *v, const char *token)
{
	while (*v) {
		const char *e = strchr(v, ',');
		size_t len = e ? (size_t)(e - v) : strlen(v);

		while (len && is_ows(*v)) {
			v++;
			len--;
		}
		while (len && is_ows(v[len - 1]))
			len--;
		if (fz_ieq(v, len, token))
			return true;
		if (!e)
			break;
		v = e + 1;
	}
	return false;
}

static unsigned int
list_count(const char *v, const char *token)
{
	unsigned int n = 0;
	char *copy = strdup(v), *save = NULL, *t;

	if (!copy)
		abort();
	for (t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		size_t len;
		while (is_ows(*t))
			t++;
		len = strlen(t);
		while (len && is_ows(t[len - 1]))
			len--;
		n += fz_ieq(t, len, token);
	}
	free(copy);
	return n;
}

static enum MHD_Result
ref_iter(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct ref_facts *f = cls;

	if (kind != MHD_HEADER_KIND || !value)
		return MHD_YES;
	if (!strcasecmp(key, "Content-Type") && !f->ct)
		f->ct = value;
	else if (!strcasecmp(key, "ETag") && !f->etag)
		f->etag = value;
	else if (!strcasecmp(key, "Content-Encoding") && strcasecmp(value, "identity") != 0)
		f->encoded = true;
	else if (!strcasecmp(key, "Content-Range"))
		f->range = true;
	else if (!strcasecmp(key, "Cache-Control") && list_has(value, "no-transform"))
		f->no_transform = true;
	else if (!strcasecmp(key, "Vary")) {
		f->vary_lines++;
		if (list_has(value, "accept-encoding") || list_has(value, "*"))
			f->vary_ae = true;
	}
	return MHD_YES;
}

/* The store's answer a HEAD's plan asks for (hnd_plan_in known_len):
 * fixed by the body length, so the fuzzer covers every answer. */
struct fz_known {
	bool known, not_smaller;
	uint64_t len;
	unsigned int asked;
};

static enum hnd_known
fz_known_len(void *cls, enum gz_coding coding, uint64_t *len_ret)
{
	struct fz_known *k = cls;

	(void)coding;
	k->asked++;
	if (!k->known)
		return HND_KNOWN_NOTHING;
	if (k->not_smaller)
		return HND_KNOWN_NOT_SMALLER;
	*len_ret = k->len;
	return HND_KNOWN_LEN;
}

/* The HEAD of the GET planned as get: where the store knows the coded
 * length of a body coded whole (asked once), the fields with it, or
 * identity when not smaller; the body coded when it does not know; any
 * other plan the GET's, without asking. */
static void
plan_head(const struct hnd_policy *pol, const struct hnd_plan_in *get_in,
	  const struct hnd_plan *get, size_t len)
{
	struct hnd_request hrq = *get_in->rq;
	struct hnd_plan_in in = *get_in;
	struct fz_known k = { .known = len & 1, .not_smaller = len & 2, .len = len / 2 };
	struct hnd_plan p;

	hrq.head = true;
	in.rq = &hrq;
	in.known_len = fz_known_len;
	in.known_cls = &k;
	hnd_plan(pol, &in, &p);
	if (get->kind == HND_PLAN_WHOLE && !get->digest) {
		FZ_CHECK(k.asked == 1, "a HEAD asked the store %u times", k.asked);
		FZ_CHECK(p.kind == (!k.known        ? HND_PLAN_WHOLE
				    : k.not_smaller ? HND_PLAN_IDENTITY
						    : HND_PLAN_WHOLE_FIELDS),
			 "HEAD plan %d with the store's answer %d/%llu", (int)p.kind, k.known,
			 (unsigned long long)k.len);
		FZ_CHECK(p.kind != HND_PLAN_WHOLE_FIELDS || p.coded_len == k.len,
			 "HEAD length %llu, the store's %llu", (unsigned long long)p.coded_len,
			 (unsigned long long)k.len);
	} else {
		FZ_CHECK(k.asked == 0 && p.kind == get->kind && p.d.reason == get->d.reason,
			 "HEAD plan %d (asked %u), GET's %d", (int)p.kind, k.asked, (int)get->kind);
	}
}

/* WHATWG MIME Sniffing 7.2 binary data bytes in the first 512 bytes. */
static bool
ref_text(const uint8_t *b, size_t len)
{
	size_t i;

	for (i = 0; i < len && i < 512; i++)
		if (b[i] <= 8 || b[i] == 11 || (b[i] >= 14 && b[i] <= 26) ||
		    (b[i] >= 28 && b[i] <= 31))
			return false;
	return true;
}

static bool
ref_compressible(const struct mhdgz *gz, const char *ct, const uint8_t *body, size_t len)
{
	size_t l;
	const char *mt;

	if (ct) {
		l = strcspn(ct, ";");
		mt = ct;
		while (l && is_ows(*mt)) {
			mt++;
			l--;
		}
		while (l && is_ows(mt[l - 1]))
			l--;
		if (l > 0) /* the lists' verdict itself: fuzz_types */
			return hnd_types_compressible(&gz->policy.types, mt, l);
	}
	/* Untyped: sniffed, and text goes through the lists as text/plain. */
	return ref_text(body, len) && hnd_types_compressible(&gz->policy.types, "text/plain", 10);
}

/* The documented order; *vary: the representation depends on
 * Accept-Encoding. */
static enum mhdgz_reason
ref_decide(const struct mhdgz *gz, bool opt_out, unsigned int status, const struct ref_facts *f,
	   const uint8_t *body, size_t len, bool wants, bool *vary)
{
	*vary = false;
	if (opt_out)
		return MHDGZ_SKIP_OPT_OUT;
	if ((status >= 100 && status <= 199) || status == 204)
		return MHDGZ_SKIP_STATUS;
	if (status == 206 || f->range) {
		/* The Vary its 200 would carry (RFC 9110 section 15.3.7). */
		*vary = !f->encoded && !f->no_transform && ref_compressible(gz, f->ct, body, len);
		return MHDGZ_SKIP_RANGE;
	}
	if (f->encoded)
		return MHDGZ_SKIP_ENCODED;
	if (f->no_transform)
		return MHDGZ_SKIP_NO_TRANSFORM;
	if (status == 304) {
		/* Stands for the 200: Vary unless that 200 is identity for
		 * every client (a type not compressible, an untyped body that
		 * sniffs binary, a length below min_nbytes; an empty response
		 * stands for a 200 of any length). */
		*vary = ref_compressible(gz, f->ct, body, len) &&
			!(len != 0 && len < gz->policy.min_nbytes);
		return MHDGZ_SKIP_STATUS;
	}
	if (len == 0)
		return MHDGZ_SKIP_EMPTY;
	if (!ref_compressible(gz, f->ct, body, len))
		return MHDGZ_SKIP_TYPE;
	/* Below min_nbytes it is identity for every client: no Vary. */
	*vary = len >= gz->policy.min_nbytes;
	if (!wants)
		return MHDGZ_SKIP_NOT_ACCEPTED;
	if (len < gz->policy.min_nbytes)
		return MHDGZ_SKIP_SMALL;
	return MHDGZ_COMPRESSED;
}

/* ------------------------------------------------------------------------ */
/* Checks on what is queued                                                 */

struct hdr_count {
	const char *name;
	unsigned int n;
	const char *first;
	unsigned int ae; /* accept-encoding tokens over all lines (Vary) */
	bool star;
};

static enum MHD_Result
count_iter(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct hdr_count *c = cls;

	if (kind != MHD_HEADER_KIND || strcasecmp(key, c->name) != 0)
		return MHD_YES;
	if (!c->n++)
		c->first = value;
	if (value) {
		c->ae += list_count(value, "accept-encoding");
		c->star |= list_has(value, "*");
	}
	return MHD_YES;
}

static struct hdr_count
count_hdr(struct MHD_Response *r, const char *name)
{
	struct hdr_count c = { name, 0, NULL, 0, false };

	MHD_get_response_headers(r, count_iter, &c);
	return c;
}

/* Every field of r other than those the coding changes is on v; the
 * integrity fields computed over the identity bytes never are (RFC 9530). */
struct copied_ctx {
	struct MHD_Response *v;
	bool ok;
	const char *missing;
};

static enum MHD_Result
copied_iter(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct copied_ctx *c = cls;
	static const char *const changed[] = { "Content-Encoding", "Content-Length", "ETag",
					       "Accept-Ranges", "Vary" };
	struct hdr_count h;
	size_t i;

	if (kind != MHD_HEADER_KIND || !value)
		return MHD_YES;
	for (i = 0; i < sizeof changed / sizeof changed[0]; i++)
		if (!strcasecmp(key, changed[i]))
			return MHD_YES;
	h = count_hdr(c->v, key);
	if (hnd_is_digest_field(key)) {
		if (h.n != 0) {
			c->ok = false;
			c->missing = "absence of an identity digest";
		}
		return MHD_YES;
	}
	if (h.n == 0) {
		c->ok = false;
		c->missing = key;
	}
	return MHD_YES;
}

/* v stands for the gzip representation: coded (a body variant) or not (the
 * empty variant a 304 queues for the gzip ETag). */
static void
check_variant(const struct mhdgz *gz, struct MHD_Response *r, struct MHD_Response *v,
	      const struct ref_facts *f, bool coded)
{
	struct hdr_count ce = count_hdr(v, "Content-Encoding"), et = count_hdr(v, "ETag");
	struct copied_ctx cc = { v, true, NULL };
	char buf[FZ_ETAG_CAP];
	const char *want;

	if (coded)
		FZ_CHECK(ce.n == 1 && !strcmp(ce.first, "gzip"),
			 "variant Content-Encoding: %u lines", ce.n);
	else
		FZ_CHECK(ce.n == 0, "the 304 variant has a Content-Encoding");
	FZ_CHECK(count_hdr(v, "Content-Length").n == 0, "variant has a Content-Length field");
	FZ_CHECK(count_hdr(v, "Accept-Ranges").n == 0, "variant has Accept-Ranges");
	want = hnd_etag_for_gzip(gz->etag_policy, f->etag, buf, sizeof buf);
	if (want)
		FZ_CHECK(et.n == 1 && !strcmp(et.first, want), "variant ETag '%s', want '%s'",
			 et.first ? et.first : "(none)", want);
	else
		FZ_CHECK(et.n == 0, "variant ETag '%s', want none", et.first);
	MHD_get_response_headers(r, copied_iter, &cc);
	FZ_CHECK(cc.ok, "variant lacks the response's %s", cc.missing);
}

/* ------------------------------------------------------------------------ */

static int
make_gz(struct mhdgz **gz, enum mhdgz_backend be, int level, unsigned int flags, size_t min_size,
	enum mhdgz_etag_policy pol, const char *const *ct, const char *const *skip, size_t cap)
{
	struct mhdgz_options o;

	memset(&o, 0, sizeof o);
	o.size = sizeof o;
	o.gzip.backend = be;
	o.gzip.level = level;
	o.flags = flags;
	o.min_nbytes = min_size;
	o.etag_policy = pol;
	o.compress_types = ct;
	o.skip_types = skip;
	o.limits.pool_idle_cap = cap;
	o.codings = "gzip"; /* the reference decision is gzip's */
	return mhdgz_new(&o, gz);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char *const ct1[] = { "text/*", "*/*+json", "application/x-fz", NULL };
	static const char *const skip1[] = { "text/csv", "*/*+zip", NULL };
	static const char *const any[] = { "*/*", NULL };
	static const char *const none[] = { NULL };
	bool isal = tu_backend_available(MHDGZ_BACKEND_ISAL);

	(void)argc;
	(void)argv;
	if (make_gz(&gzs[0], MHDGZ_BACKEND_DEFAULT, 0, 0, 0, MHDGZ_ETAG_WEAKEN, NULL, NULL, 0) ||
	    make_gz(&gzs[1], MHDGZ_BACKEND_ZLIB, 1, 0, 1, MHDGZ_ETAG_SUFFIX, ct1, skip1, 0) ||
	    make_gz(&gzs[2], isal ? MHDGZ_BACKEND_ISAL : MHDGZ_BACKEND_ZLIB, isal ? 1 : 9,
		    MHDGZ_F_NO_POOL, 16, MHDGZ_ETAG_DROP, NULL, NULL, 0) ||
	    make_gz(&gzs[3], MHDGZ_BACKEND_LIBDEFLATE, 1, 0, 100, MHDGZ_ETAG_KEEP, any, none, 1))
		abort();
	return 0;
}

static struct mhdgz_stats
stats_of(struct mhdgz *gz)
{
	struct mhdgz_stats st;

	memset(&st, 0, sizeof st);
	st.size = sizeof st;
	FZ_CHECK(mhdgz_get_stats(gz, &st) == 0, "mhdgz_get_stats");
	return st;
}

/* Does the backend shrink the body? (The handler said it does not.) */
static bool
shrinks(const struct mhdgz *gz, const uint8_t *body, size_t len)
{
	struct gz_compressor *c;
	size_t bound, out_len = 0;
	uint8_t *out;
	int rc;

	FZ_CHECK(gz_compressor_new(gz->be, gz->level, &c) == 0, "gz_compressor_new");
	bound = gz_bound(c, len);
	out = malloc(bound);
	if (!out)
		abort();
	rc = c->be->compress(c, body, len, out, bound, &out_len);
	FZ_CHECK(rc == 0, "compress: %d", rc);
	free(out);
	gz_compressor_free(c);
	return out_len < len;
}

/* One hnd_select() (the selection mhdgz_queue_response_ex runs) with
 * every check on its result. */
static enum mhdgz_reason
select_once(struct mhdgz *gz, struct MHD_Response *r, const struct hnd_request *req,
	    unsigned int status, const struct ref_facts *f, const uint8_t *body, size_t len,
	    bool opt_out, bool wants, bool first, struct MHD_Response **q_ret)
{
	struct mhdgz_stats s0 = stats_of(gz), s1;
	struct MHD_Response *q = NULL;
	enum mhdgz_reason why = MHDGZ_REASON_COUNT, want;
	struct hnd_facts hf;
	struct hnd_decision hd;
	bool vary;
	int rc;

	{
		struct hnd_result res;

		rc = hnd_select(gz, req, status, r, &q, &res);
		why = res.reason;
	}
	s1 = stats_of(gz);
	FZ_CHECK(rc == 0, "hnd_select returned %d for a buffer response", rc);
	FZ_CHECK((unsigned int)why < MHDGZ_SKIP_ERROR, "reason %d (%s)", why,
		 mhdgz_reason_name(why));

	/* The reference, and hnd_decide() fed the reference's facts. */
	want = ref_decide(gz, opt_out, status, f, body, len, wants, &vary);
	memset(&hf, 0, sizeof hf);
	hf.content_type = f->ct;
	hf.content_encoding = f->encoded ? "x-fz" : NULL;
	hf.etag = f->etag;
	hf.content_range = f->range;
	hf.no_transform = f->no_transform;
	hf.vary_has_ae = f->vary_ae;
	hf.vary_count = f->vary_lines;
	hnd_decide(&gz->policy, opt_out, status, &hf, body, len, len, &req->acc, &hd);
	FZ_CHECK(hd.reason == want && hd.vary == vary,
		 "hnd_decide says %s (vary %d), reference %s (vary %d)",
		 mhdgz_reason_name(hd.reason), hd.vary, mhdgz_reason_name(want), vary);
	/* The plan on the same facts (a buffer: coded whole, or identity, or
	 * the 304 of its 200): its decision is hnd_decide's, its kind follows
	 * from it alone, and planning again gives the same. */
	{
		struct hnd_plan_in in = { .status = status,
					  .rq = req,
					  .f = &hf,
					  .sniff = body,
					  .sniff_len = len,
					  .kind = HND_BUFFER,
					  .body_len = len,
					  .opt_out = opt_out,
					  .fresh = first };
		struct hnd_plan p, p2;
		bool vary200;

		hnd_plan(&gz->policy, &in, &p);
		hnd_plan(&gz->policy, &in, &p2);
		FZ_CHECK(p.d.reason == hd.reason && p.d.vary == hd.vary &&
				 p.d.gzip_304 == hd.gzip_304,
			 "plan decides %s (vary %d), hnd_decide %s (vary %d)",
			 mhdgz_reason_name(p.d.reason), p.d.vary, mhdgz_reason_name(hd.reason),
			 hd.vary);
		FZ_CHECK(p.kind == p2.kind && p.d.reason == p2.d.reason &&
				 p.d.coding == p2.d.coding,
			 "two plans differ");
		FZ_CHECK(p.whole, "a buffer planned as a stream");
		FZ_CHECK(p.kind == (status == 304                    ? HND_PLAN_NOT_MODIFIED
				    : p.d.reason == MHDGZ_COMPRESSED ? HND_PLAN_WHOLE
								     : HND_PLAN_IDENTITY),
			 "plan kind %d for %s, status %u", (int)p.kind,
			 mhdgz_reason_name(p.d.reason), status);
		FZ_CHECK(status != 304 || !p.d.gzip_304 || len == 0 ||
				 (p.d200.reason == MHDGZ_COMPRESSED) ==
					 (ref_decide(gz, opt_out, 200, f, body, len, wants,
						     &vary200) == MHDGZ_COMPRESSED),
			 "a 304's 200 planned unlike the reference's 200");
		plan_head(&gz->policy, &in, &p, len);
	}
	if (want == MHDGZ_COMPRESSED && why == MHDGZ_SKIP_NOT_SMALLER)
		FZ_CHECK(!shrinks(gz, body, len), "not-smaller, but %s shrinks the body",
			 gz->be->name);
	else
		FZ_CHECK(why == want, "select says %s, reference %s (status %u)",
			 mhdgz_reason_name(why), mhdgz_reason_name(want), status);

	/* What is queued. */
	if (why == MHDGZ_COMPRESSED) {
		FZ_CHECK(q != r, "compressed, yet the response itself");
		check_variant(gz, r, q, f, true);
	} else if (q != r) {
		/* Only the 304 of a 200 that would be gzip: it carries that
		 * 200's fields (and length), with or without an ETag. */
		FZ_CHECK(status == 304 && wants, "a variant queued for %s, status %u",
			 mhdgz_reason_name(why), status);
		check_variant(gz, r, q, f, count_hdr(q, "Content-Encoding").n > 0);
	}
	if (vary && (q != r || first)) {
		struct hdr_count v = count_hdr(q, "Vary");
		if (f->vary_ae)
			FZ_CHECK(v.ae >= 1 || v.star, "the response's Vary lost accept-encoding");
		else
			FZ_CHECK(v.ae == 1 && !v.star,
				 "queued Vary: %u accept-encoding tokens over %u lines", v.ae, v.n);
	}

	/* Counters. */
	FZ_CHECK(s1.responses == s0.responses + 1, "responses +%llu",
		 (unsigned long long)(s1.responses - s0.responses));
	FZ_CHECK(s1.reasons[why] == s0.reasons[why] + 1, "reason not counted");
	FZ_CHECK(s1.compressed == s0.compressed + (why == MHDGZ_COMPRESSED), "compressed count");
	FZ_CHECK(s1.failures == s0.failures, "a failure without an allocation failure");
	FZ_CHECK(s1.bytes_in == s0.bytes_in + len, "bytes_in");
	if (why == MHDGZ_COMPRESSED)
		FZ_CHECK(s1.bytes_out - s0.bytes_out < len, "compressed %llu of %zu bytes",
			 (unsigned long long)(s1.bytes_out - s0.bytes_out), len);
	else
		FZ_CHECK(s1.bytes_out == s0.bytes_out + len, "identity bytes_out");
	FZ_CHECK(s1.compressions - s0.compressions <= 1, "compressions");
	if (first && (why == MHDGZ_COMPRESSED || why == MHDGZ_SKIP_NOT_SMALLER))
		FZ_CHECK(s1.compressions == s0.compressions + 1 && s1.cache_hits == s0.cache_hits,
			 "a fresh response compressed without counting it");
	*q_ret = q;
	return why;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz in = { data, size };
	uint8_t cfg = fz_u8(&in), st = fz_u8(&in), fl = fz_u8(&in), rep = fz_u8(&in);
	struct mhdgz *gz = gzs[cfg % N_GZ];
	unsigned int status = (st & 0x80) ? 100 + (unsigned int)(st & 0x7f) * 4 + cfg % 4
					  : statuses[st % (sizeof statuses / sizeof statuses[0])];
	enum MHD_ResponseMemoryMode mode = (enum MHD_ResponseMemoryMode)(fl % 3);
	bool opt_out = fl & 0x4, no_cache = fl & 0x8, twice = fl & 0x10;
	const char *lines[FZ_MAX_LINES], *ae[FZ_MAX_AE];
	const uint8_t *part = in.p;
	size_t part_len = in.n, nlines, nae = 0, i, len, unit;
	char *buf;
	uint8_t *body;
	struct MHD_Response *r, *q1, *q2;
	struct hnd_request req;
	struct ref_facts f;
	enum mhdgz_reason why1, why2;
	bool wants;

	/* Header lines end at "--\n"; the rest is the body. */
	for (i = 0; i + 3 <= in.n; i++)
		if ((i == 0 || in.p[i - 1] == '\n') && !memcmp(in.p + i, "--\n", 3)) {
			part_len = i;
			break;
		}
	nlines = fz_lines(part, part_len, &buf, lines, FZ_MAX_LINES);
	unit = part_len < in.n ? in.n - part_len - 3 : 0;
	len = unit * (1 + rep % 16);
	if (len > FZ_BODY_MAX)
		len = FZ_BODY_MAX - FZ_BODY_MAX % (unit ? unit : 1);
	body = malloc(len ? len : 1);
	if (!body)
		abort();
	for (i = 0; i < len; i++)
		body[i] = part[part_len + 3 + i % unit];

	r = mhdgz_response_from_buffer(gz, len, body, mode);
	FZ_CHECK(r != NULL, "mhdgz_response_from_buffer failed");
	if (mode == MHD_RESPMEM_MUST_FREE) {
		/* Owned by the response now; keep a copy for the checks. */
		uint8_t *copy = malloc(len ? len : 1);
		if (!copy)
			abort();
		memcpy(copy, body, len);
		body = copy;
	}
	for (i = 0; i < nlines; i++) {
		char *colon;

		if (lines[i][0] == 'A') {
			if (nae < FZ_MAX_AE)
				ae[nae++] = lines[i] + 1;
			continue;
		}
		colon = strchr(lines[i], ':');
		if (!colon || colon == lines[i])
			continue;
		*colon = '\0';
		/* libmicrohttpd refuses some; the reference reads what it kept. */
		(void)MHD_add_response_header(r, lines[i], colon + 1);
	}
	if (opt_out)
		FZ_CHECK(mhdgz_response_set_flags(gz, r, MHDGZ_RESPONSE_IDENTITY) == 0,
			 "set_identity");
	memset(&f, 0, sizeof f);
	MHD_get_response_headers(r, ref_iter, &f);

	memset(&req, 0, sizeof req);
	hnd_accept_parse(nae ? ae : NULL, nae, &req.acc);
	wants = hnd_accept_wants_gzip(&req.acc);

	why1 = select_once(gz, r, &req, status, &f, body, len, opt_out, wants, true, &q1);
	if (getenv("FZ_TRACE"))
		fprintf(stderr, "handler %d, status %u, %zu lines, body %zu bytes: %s\n",
			cfg % N_GZ, status, nlines, len, mhdgz_reason_name(why1));
	if (twice) {
		struct mhdgz_stats s0 = stats_of(gz), s1;

		req.flags = no_cache ? HND_REQ_NO_CACHE : 0;
		why2 = select_once(gz, r, &req, status, &f, body, len, opt_out, wants, false, &q2);
		s1 = stats_of(gz);
		FZ_CHECK(why2 == why1 || (no_cache && why1 == MHDGZ_SKIP_NOT_SMALLER),
			 "second call: %s, first %s", mhdgz_reason_name(why2),
			 mhdgz_reason_name(why1));
		if (why1 == MHDGZ_COMPRESSED && !no_cache)
			FZ_CHECK(q2 == q1 && s1.cache_hits == s0.cache_hits + 1 &&
					 s1.compressions == s0.compressions,
				 "the gzip variant was not reused");
	}
	MHD_destroy_response(r);
	FZ_CHECK(hnd_table_count(&gz->table) == 0, "%zu entries left in the response table",
		 hnd_table_count(&gz->table));
	free(body);
	free(buf);
	return 0;
}
