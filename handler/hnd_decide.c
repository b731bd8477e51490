/* hnd_decide.c: the decision (compress or not, and why) and the plan built on it: what is sent in a queued response's place. */
#include <string.h>

#include <nettle/base64.h>
#include <nettle/sha2.h>

#include "hnd_mtype.h"
#include "hnd_negotiate.h"
#include "hnd_plan.h"
#include "hnd_dict.h"

/* Files up to this many bytes are compressed whole when first queued (a
 * gzip 200 with Content-Length, cached with the response); larger ones are
 * compressed as a stream per connection, in bounded memory. 1 MiB of
 * text is ~3 ms of libdeflate level 6. */
#ifndef HND_FD_WHOLE_MAX
#define HND_FD_WHOLE_MAX (1024 * 1024)
#endif

/* 1xx, 204 and 304 responses carry no content (RFC 9110 sections 6.4.1,
 * 15.3.5, 15.4.5). */
static bool
status_has_no_content(unsigned int status)
{
	return (status >= 100 && status < 200) || status == 204 || status == 304;
}

/* Is the media type compressible? Skip list first, then compress list; a
 * response without Content-Type is sniffed, and a text-like one goes
 * through the lists as text/plain (so a list that excludes text, or an
 * empty one, excludes it too). */
static bool
type_compressible(const struct hnd_policy *pol, const char *content_type, const uint8_t *sniff,
		  size_t sniff_len)
{
	const char *mt = NULL;
	size_t len = 0;

	if (content_type)
		mt = hnd_media_type(content_type, &len);
	if (len == 0) { /* untyped: sniff, or refuse what cannot be sniffed */
		if (!sniff || !hnd_sniff_text(sniff, sniff_len))
			return false;
		mt = "text/plain";
		len = sizeof "text/plain" - 1;
	}
	return hnd_types_compressible(&pol->types, mt, len);
}

/*
 * The decision. Early-outs in the order of enum mhdgz_reason; the first
 * that applies is the reason (a head-only response's, MHDGZ_SKIP_EMPTY or
 * for a 304 MHDGZ_SKIP_STATUS, is taken right after the status check).
 * Alongside, whether the representation varies with Accept-Encoding
 * (then both variants carry Vary: Accept-Encoding, RFC 9110 section
 * 12.5.5): it does for every response that would be compressed for some
 * client, i.e. that passes every check that does not look at the request.
 *
 * A 304 has no content, but it stands for the 200 the client has cached:
 * it carries the Vary and (for a gzip-accepting client) the ETag that 200
 * would carry (RFC 9110 section 15.4.5). Its body and size say nothing, so
 * only the header checks apply to it.
 *
 * sniff/sniff_len are the first bytes of the body for the content sniff of
 * an untyped response (NULL when they cannot be known without running the
 * application's reader, as for a content reader or a pipe: the queue call
 * never runs it, so an untyped stream is not compressed). body_len is
 * MHD_SIZE_UNKNOWN for a stream of unknown length: never small or empty,
 * whatever it turns out to be (min_nbytes does not apply to it).
 */
void
hnd_decide(const struct hnd_policy *pol, bool opt_out, unsigned int status,
	   const struct hnd_facts *f, const uint8_t *sniff, size_t sniff_len, uint64_t body_len,
	   const struct hnd_accept *acc, struct hnd_decision *d)
{
	bool is_304 = status == 304;
	bool encoded;

	d->vary = false;
	d->gzip_304 = false;
	d->coding = GZ_CODING_GZIP;
	if (opt_out) {
		d->reason = MHDGZ_SKIP_OPT_OUT;
		return;
	}
	if (status_has_no_content(status) && !is_304) {
		d->reason = MHDGZ_SKIP_STATUS;
		return;
	}
#ifdef HAVE_MHD_HEAD_ONLY
	/* A head-only response (MHD_RF_HEAD_ONLY_RESPONSE: empty, no automatic
	 * Content-Length, perhaps the application's own) describes a
	 * representation mhdgz never sees, coded or not: it goes out as it
	 * is, with no Vary or coded ETag, whatever the status
	 * (test_empty_head_only). */
	if (f->mhd_flags & MHD_RF_HEAD_ONLY_RESPONSE) {
		d->reason = is_304 ? MHDGZ_SKIP_STATUS : MHDGZ_SKIP_EMPTY;
		return;
	}
#endif
	encoded = f->content_encoding && !hnd_ascii_eq(f->content_encoding, "identity");
	if (status == 206 || f->content_range) {
		/* Ranges are of the identity body; but a 206 carries the Vary
		 * its 200 would carry (RFC 9110 section 15.3.7). */
		d->reason = MHDGZ_SKIP_RANGE;
		d->vary = !encoded && !f->no_transform &&
			  type_compressible(pol, f->content_type, sniff, sniff_len);
		return;
	}
	if (encoded) {
		d->reason = MHDGZ_SKIP_ENCODED;
		return;
	}
	if (f->no_transform) {
		d->reason = MHDGZ_SKIP_NO_TRANSFORM;
		return;
	}
	if (is_304) {
		/* The 304 of a 200 that is identity for every client carries
		 * no Vary either: an untyped body sniffed as for its 200 (a
		 * stream, which cannot be, is not coded), or a 200 below
		 * min_nbytes (an empty response queued for a 304 stands for a
		 * 200 of any length). */
		if (!type_compressible(pol, f->content_type, sniff, sniff_len) ||
		    (body_len != 0 && body_len != MHD_SIZE_UNKNOWN && body_len < pol->min_nbytes)) {
			d->reason = MHDGZ_SKIP_STATUS;
			return;
		}
		d->vary = true;
		d->gzip_304 = hnd_accept_choose(acc, pol->order, pol->norder, &d->coding);
		d->reason = MHDGZ_SKIP_STATUS;
		return;
	}
	if (body_len == 0) {
		d->reason = MHDGZ_SKIP_EMPTY;
		return;
	}
	if (!type_compressible(pol, f->content_type, sniff, sniff_len)) {
		d->reason = MHDGZ_SKIP_TYPE;
		return;
	}
	/* A body of known length below min_nbytes is identity for every
	 * client: it does not vary with Accept-Encoding (RFC 9110 section
	 * 12.5.5), and carries no Vary. */
	d->vary = body_len == MHD_SIZE_UNKNOWN || body_len >= pol->min_nbytes;
	if (!hnd_accept_choose(acc, pol->order, pol->norder, &d->coding)) {
		d->reason = MHDGZ_SKIP_NOT_ACCEPTED;
		return;
	}
	if (body_len < pol->min_nbytes) {
		d->reason = MHDGZ_SKIP_SMALL;
		return;
	}
	d->reason = MHDGZ_COMPRESSED;
}

/* A text/event-stream body: every event must reach the client at once. */
static bool
is_event_stream(const char *content_type)
{
	const char *mt;
	size_t len;

	if (!content_type)
		return false;
	mt = hnd_media_type(content_type, &len);
	return hnd_ascii_is(mt, len, "text/event-stream");
}

/* Dictionaries (RFC 9842): the one a dcz response would use. */

/* Glob match with '*' (any run, '/' included): the greedy scan that backs
 * up to the last '*' only, O(pattern x path) at worst. */
bool
hnd_dict_match(const char *p, const char *s)
{
	const char *star = NULL, *resume = NULL;

	while (*s) {
		if (*p == '*') {
			star = p++;
			resume = s;
		} else if (*p == *s) {
			p++;
			s++;
		} else if (star) {
			p = star + 1;
			s = ++resume;
		} else {
			return false;
		}
	}
	while (*p == '*')
		p++;
	return *p == '\0';
}

static bool
is_ows(char c)
{
	return c == ' ' || c == '\t';
}

bool
hnd_dict_parse_hash(const char *value, uint8_t hash[SHA256_DIGEST_SIZE])
{
	struct base64_decode_ctx ctx;
	uint8_t out[BASE64_DECODE_LENGTH(48)];
	size_t start = 0, end = strlen(value), out_len = sizeof out, i;

	while (start < end && is_ows(value[start]))
		start++;
	while (end > start && is_ows(value[end - 1]))
		end--;
	/* ":" base64 ":" (RFC 8941 section 3.3.5); 32 bytes are 43 or 44
	 * characters (with or without the padding). */
	if (end - start < 2 || value[start] != ':' || value[end - 1] != ':')
		return false;
	start++;
	end--;
	if (end - start != 43 && end - start != 44)
		return false;
	for (i = start; i < end; i++) {
		char c = value[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '+' || c == '/' || (c == '=' && i == end - 1)))
			return false;
	}
	base64_decode_init(&ctx);
	if (!base64_decode_update(&ctx, &out_len, out, end - start, value + start) ||
	    out_len != SHA256_DIGEST_SIZE)
		return false;
	/* Unpadded input leaves bits pending: nettle's final check would
	 * refuse it, and RFC 8941 parsers may accept it; the 32 bytes are
	 * complete either way. */
	memcpy(hash, out, SHA256_DIGEST_SIZE);
	return true;
}

bool
hnd_dict_url_matches(const struct mhdgz_dictionary *dicts, const char *url)
{
	const struct mhdgz_dictionary *d;

	if (!url)
		return false;
	for (d = dicts; d; d = d->next)
		if (hnd_dict_match(d->match, url))
			return true;
	return false;
}

/* The dictionary the request names and whose pattern matches its path. */
static const struct mhdgz_dictionary *
find_dict(const struct mhdgz_dictionary *dicts, const struct hnd_request *rq)
{
	const struct mhdgz_dictionary *d, *found = NULL;
	uint8_t hash[SHA256_DIGEST_SIZE];
	const char *id = NULL;
	size_t id_len = 0;

	if (!hnd_dict_parse_hash(rq->avail_dict, hash))
		return NULL;
	if (rq->dict_id) { /* an sf-string: compared in its serialized form */
		id = rq->dict_id;
		id_len = strlen(id);
		while (id_len && is_ows(*id)) {
			id++;
			id_len--;
		}
		while (id_len && is_ows(id[id_len - 1]))
			id_len--;
	}
	/* The list is newest first; the first registered wins: take the
	 * last that fits. */
	for (d = dicts; d; d = d->next) {
		if (memcmp(d->hash, hash, sizeof hash) != 0 || !hnd_dict_match(d->match, rq->url))
			continue;
		if (id && d->id && (strlen(d->id) != id_len || memcmp(d->id, id, id_len) != 0))
			continue;
		found = d;
	}
	return found;
}

const struct mhdgz_dictionary *
hnd_dcz_plan(const struct hnd_policy *pol, const struct mhdgz_dictionary *dicts,
	     const struct hnd_request *rq, const struct hnd_accept *acc,
	     const struct hnd_decision *d, const struct hnd_facts *f, bool whole, uint64_t body_len)
{
	bool is_304 = d->reason == MHDGZ_SKIP_STATUS;

	if (!f->dict_vary || !rq->url || !rq->avail_dict || hnd_accept_read(acc)->dcz <= 0)
		return NULL;
	/* An explicitly preferred identity wins, as over any coding. */
	if (acc->identity > acc->dcz)
		return NULL;
	/* A 304 stands for the 200 this client would get: dcz also when it
	 * accepts no other coding (the decision's vary: the resource is
	 * compressible at all). */
	if (is_304 && !d->vary)
		return NULL;
	if ((d->reason == MHDGZ_COMPRESSED || is_304) &&
	    (unsigned int)acc->dcz < hnd_accept_q(acc, d->coding))
		return NULL;
	if (!whole || body_len < pol->min_nbytes || body_len == 0)
		return NULL;
	return find_dict(dicts, rq);
}

/*
 * The plan. The decision for the status; a 304 is the 304 of the 200 this
 * request would get (its decision in d200). Length hiding pads gzip
 * members only: a padded response plans as if the client accepted
 * neither zstd, br nor dcz, which would go out unpadded, so the choice is
 * gzip or identity. A dictionary (RFC 9842) is one more coding choice,
 * over the ordinary one when the client accepts it at least as much. A
 * coded body is coded whole (a buffer, a file up to HND_FD_WHOLE_MAX) or
 * streamed; a HEAD of a stream gets its fields; an application's reader
 * of unknown size queued for the first time carries its stream itself. A
 * failed precondition (hnd_preconditions) plans a 412 without content.
 */
void
hnd_plan(const struct hnd_policy *pol, const struct hnd_plan_in *in, struct hnd_plan *p)
{
	const struct hnd_accept *acc;
	bool coded;

	/* Every field set here (no memset: this runs for every response). */
	p->kind = HND_PLAN_IDENTITY;
	p->d200 = (struct hnd_decision){ .reason = MHDGZ_SKIP_STATUS }; /* no 200 planned */
	p->dict = NULL;
	p->digest = p->low_latency = false;
	p->coded_len = MHDGZ_NBYTES_UNKNOWN;
	/* The request's lines are read on first use (a response that is
	 * never coded never reads them); a padded one plans on a copy. */
	acc = &in->rq->acc;
	if (in->padded && (hnd_accept_read(acc)->zstd != 0 || acc->br != 0 || acc->dcz != 0)) {
		p->acc_padded = *acc;
		p->acc_padded.zstd = p->acc_padded.br = p->acc_padded.dcz = 0;
		acc = &p->acc_padded;
	}
	p->acc = acc;
	p->whole = hnd_whole_body(in->kind, in->body_len);
	if (in->precondition_failed) {
		/* A 412 says nothing of the representation: none is sent. */
		p->kind = HND_PLAN_PRECONDITION_FAILED;
		p->d = (struct hnd_decision){ .reason = MHDGZ_SKIP_STATUS };
		return;
	}
	hnd_decide(pol, in->opt_out, in->status, in->f, in->sniff, in->sniff_len, in->body_len, acc,
		   &p->d);
	coded = p->d.reason == MHDGZ_COMPRESSED;
	if (!in->no_dict &&
	    (coded || p->d.reason == MHDGZ_SKIP_NOT_ACCEPTED ||
	     (in->status == 304 && p->d.reason == MHDGZ_SKIP_STATUS && p->d.vary))) {
		p->dict = hnd_dcz_plan(pol, in->dicts, in->rq, acc, &p->d, in->f, p->whole,
				       in->body_len);
		if (p->dict) {
			p->kind = HND_PLAN_DCZ;
			return;
		}
	}
	if (in->status == 304) {
		p->kind = HND_PLAN_NOT_MODIFIED;
		if (p->d.gzip_304 && in->body_len != 0)
			hnd_decide(pol, in->opt_out, 200, in->f, in->sniff, in->sniff_len,
				   in->body_len, acc, &p->d200);
		return;
	}
	if (!coded)
		return;
	p->digest = pol->content_digest && in->f->content_digest;
	if (p->whole) {
		/* A HEAD needs the length alone: the store's, when it knows
		 * it (a digest is of the coded bytes: those are coded). */
		enum hnd_known known = HND_KNOWN_NOTHING;
		uint64_t len = 0;

		if (in->rq->head && !p->digest && in->known_len)
			known = in->known_len(in->known_cls, p->d.coding, &len);
		if (known == HND_KNOWN_LEN) {
			p->kind = HND_PLAN_WHOLE_FIELDS;
			p->coded_len = len;
		} else if (known == HND_KNOWN_NOT_SMALLER) {
			p->kind = HND_PLAN_IDENTITY;
			p->d.reason = MHDGZ_SKIP_NOT_SMALLER;
		} else {
			p->kind = HND_PLAN_WHOLE;
		}
		return;
	}
	p->low_latency = hnd_low_latency(in->low_latency, in->f);
	if (in->rq->head)
		p->kind = HND_PLAN_STREAM_FIELDS;
	else if (in->kind == HND_CALLBACK && in->body_len == MHD_SIZE_UNKNOWN && in->fresh)
		p->kind = HND_PLAN_STREAM_IN_PLACE;
	else
		p->kind = HND_PLAN_STREAM;
}

/* A file small enough to compress whole: the gzip 200 then has a
 * Content-Length (HEAD and 304 can carry it), is cached like a buffer's,
 * and uses the whole-buffer backend. */
bool
hnd_whole_body(enum hnd_kind kind, uint64_t body_len)
{
	return kind == HND_BUFFER || (kind == HND_FD && body_len <= HND_FD_WHOLE_MAX);
}

/* Is this stream one whose every chunk must reach the client at once? */
bool
hnd_low_latency(bool marked, const struct hnd_facts *f)
{
	return marked || is_event_stream(f->content_type);
}
