/* hnd_dcz.c: dcz representations (RFC 9842): a response's body coded against a dictionary, and a response registered as one. */
/*
 * The dcz body of a response is built once per dictionary and kept on the
 * response's entry (a short list: a response is compressed against the
 * few dictionaries its clients hold). The plain zstd length of the same
 * body is computed with it once, for the bytes-saved counter.
 */
#include <stdio.h>
#include <string.h>

#include "gz_alloc.h"
#include <nettle/sha2.h>
#include "hnd_stats.h"
#include "hnd_plan.h"
#include "hnd_entry.h"
#include "hnd_handle.h"
#include "hnd_headers.h"
#include "hnd_repr.h"
#include "hnd_stream.h"
#include "hnd_dict.h"
#include "gz_dict.h"

/* The ETag of a dcz variant: the policy's, with "-dcz-" and 4 bytes of
 * the dictionary's hash under MHDGZ_ETAG_SUFFIX (a strong ETag names one
 * representation, and each dictionary gives other bytes). */
static const char *
dcz_etag(enum mhdgz_etag_policy policy, const char *etag, const uint8_t *hash, char *buf,
	 size_t cap)
{
	bool weak;
	const char *op;
	size_t op_len;
	int n;

	if (policy != MHDGZ_ETAG_SUFFIX || !etag || !hnd_etag_parse(etag, &weak, &op, &op_len) ||
	    weak)
		return hnd_etag_for_coding(policy, etag, GZ_CODING_ZSTD, buf, cap);
	n = snprintf(buf, cap, "\"%.*s-dcz-%02x%02x%02x%02x\"", (int)op_len, op, hash[0], hash[1],
		     hash[2], hash[3]);
	return n < 0 || (size_t)n >= cap ? NULL : buf;
}

/* The identity body of a whole-body entry: e->body, or the file read
 * through the entry's own reader into *owned (gz_free it). */
static const uint8_t *
entry_bytes(struct hnd_entry *e, uint8_t **owned)
{
	size_t len = (size_t)e->body_len, got = 0;
	uint8_t *buf;

	*owned = NULL;
	if (e->kind == HND_BUFFER)
		return e->body;
	buf = gz_malloc(len ? len : 1);
	if (!buf)
		return NULL;
	while (got < len) {
		ssize_t n = hnd_entry_read(e, got, (char *)buf + got, len - got);

		if (n <= 0) { /* an error, or shorter than announced */
			gz_free(buf);
			return NULL;
		}
		got += (size_t)n;
	}
	*owned = buf;
	return buf;
}

/* Build the dcz variant of e against dict into k. 0, MHDGZ_ENOSPC (not
 * smaller), or an error. */
static int
build(struct mhdgz *gz, struct hnd_entry *e, const struct hnd_facts *f, struct hnd_dcz *k)
{
	uint8_t *owned, *scratch = NULL;
	const uint8_t *body = entry_bytes(e, &owned);
	size_t len = (size_t)e->body_len, bound = gz_dcz_bound(len), out_len = 0, plain = 0;
	struct hnd_body *b = NULL;
	struct MHD_Response *v = NULL;
	struct hnd_facts vf = *f;
	char ebuf[300];
	const char *etag;
	int rc = MHDGZ_ENOMEM;

	if (!body)
		return e->kind == HND_BUFFER ? MHDGZ_EINVAL : MHDGZ_EBACKEND;
	if (bound == SIZE_MAX) {
		rc = MHDGZ_ENOSPC;
		goto out;
	}
	scratch = gz_malloc(bound);
	if (!scratch)
		goto out;
	rc = gz_dcz_compress(k->dict->zd, 0, body, len, scratch, bound, &out_len);
	if (rc < 0)
		goto out;
	if (out_len >= len) {
		rc = MHDGZ_ENOSPC;
		goto out;
	}
	/* The same body in plain zstd at the same level: what dcz saves. */
	if (gz_dcz_compress(NULL,
			    gz->coder[GZ_CODING_ZSTD].be ? gz->coder[GZ_CODING_ZSTD].level : 0,
			    body, len, scratch + out_len, bound - out_len, &plain) < 0)
		plain = 0;
	rc = MHDGZ_ENOMEM;
	b = hnd_body_new(scratch, out_len);
	if (!b)
		goto out;
	v = MHD_create_response_from_buffer_with_free_callback_cls(b->len, b->data, hnd_body_unref,
								   b);
	if (!v) {
		hnd_body_unref(b);
		goto out;
	}
	rc = MHDGZ_EMHD;
	vf.coding = GZ_CODING_ZSTD;
	vf.etag = NULL; /* ours below */
	if (hnd_copy_headers(gz, hnd_identity_fields(e), v, &vf, HND_REP_GZIP, true) < 0 ||
	    MHD_add_response_header(v, MHD_HTTP_HEADER_CONTENT_ENCODING, "dcz") != MHD_YES)
		goto out;
	etag = dcz_etag(gz->etag_policy, f->etag, k->dict->hash, ebuf, sizeof ebuf);
	if (etag && MHD_add_response_header(v, MHD_HTTP_HEADER_ETAG, etag) != MHD_YES)
		goto out;
	if (gz->policy.content_digest && f->content_digest) {
		struct sha256_ctx ctx;
		char field[HND_CONTENT_DIGEST_MAX];

		sha256_init(&ctx);
		sha256_update(&ctx, b->len, b->data);
		hnd_content_digest_value(&ctx, field);
		if (MHD_add_response_header(v, "Content-Digest", field) != MHD_YES)
			goto out;
	}
	k->rep = v;
	k->rep_len = b->len;
	k->plain_len = plain;
	v = NULL;
	rc = 0;
out:
	if (v)
		MHD_destroy_response(v); /* drops the body */
	gz_free(scratch);
	gz_free(owned);
	return rc;
}

bool
hnd_dcz_build(struct mhdgz *gz, struct hnd_entry *e, const struct mhdgz_dictionary *dict,
	      bool is_304, bool no_cache, const struct hnd_facts *f, struct MHD_Response **v_ret,
	      uint64_t *len_ret, bool *release_ret)
{
	struct hnd_dcz *k;
	bool fresh = false;
	int rc;

	*release_ret = false;
	for (k = e->dcz; k && k->dict != dict; k = k->next)
		;
	if (!k) {
		k = gz_calloc(1, sizeof *k);
		if (!k) {
			hnd_count(gz, HND_C_FAILURES, 1);
			return false;
		}
		k->dict = dict;
		k->next = e->dcz;
		e->dcz = k;
	}
	if (k->not_smaller)
		return false;
	if (!k->rep || no_cache || e->uncached) {
		struct hnd_dcz fresh_k = { .dict = dict };

		hnd_count(gz, HND_C_COMPRESSIONS, 1);
		rc = build(gz, e, f, &fresh_k);
		if (rc == MHDGZ_ENOSPC) {
			k->not_smaller = true;
			return false;
		}
		if (rc < 0) {
			hnd_count(gz, HND_C_FAILURES, 1);
			return false;
		}
		if (k->rep)
			MHD_destroy_response(k->rep);
		k->rep = fresh_k.rep;
		k->rep_len = fresh_k.rep_len;
		k->plain_len = fresh_k.plain_len;
		fresh = true;
	}
	if (is_304) {
		/* The 304 standing for this dcz 200: its fields, its ETag and
		 * length, no Content-Encoding (RFC 9110 section 15.4.5). */
		struct hnd_facts vf = *f;
		char ebuf[300];
		const char *etag = dcz_etag(gz->etag_policy, f->etag, dict->hash, ebuf,
					    sizeof ebuf);
		struct MHD_Response *v;

		vf.etag = NULL;
		vf.coding = GZ_CODING_ZSTD;
		v = hnd_fields_response(gz, hnd_identity_fields(e), &vf, k->rep_len,
					HND_REP_GZIP_304);
		if (v && etag &&
		    MHD_add_response_header(v, MHD_HTTP_HEADER_ETAG, etag) != MHD_YES) {
			MHD_destroy_response(v);
			v = NULL;
		}
		if (!v) {
			hnd_count(gz, HND_C_FAILURES, 1);
			return false;
		}
		*v_ret = v;
		*len_ret = 0;
		*release_ret = true;
		return true;
	}
	if (!fresh)
		hnd_count(gz, HND_C_CACHE_HITS, 1);
	hnd_count(gz, HND_C_DICT_HITS, 1);
	if (k->plain_len > k->rep_len)
		hnd_count(gz, HND_C_DICT_SAVED, k->plain_len - k->rep_len);
	*v_ret = k->rep;
	*len_ret = k->rep_len;
	return true;
}

MHDGZ_API int
mhdgz_dictionary_add_response(struct mhdgz *gz, struct MHD_Response *response,
			      const struct mhdgz_dictionary_options *opts,
			      const struct mhdgz_dictionary **dict_ret)
{
	const struct mhdgz_dictionary *d;
	struct hnd_entry *e;
	const uint8_t *body;
	uint8_t *owned;
	int rc;

	e = hnd_entry_locked(gz, response);
	if (!e)
		return MHDGZ_EINVAL;
	if (e->response_queued || !hnd_whole_body(e->kind, e->body_len) || e->body_len == 0) {
		rc = MHDGZ_EINVAL;
		goto out;
	}
	body = entry_bytes(e, &owned);
	if (!body) {
		rc = MHDGZ_EBACKEND;
		goto out;
	}
	rc = mhdgz_dictionary_add(gz, body, (size_t)e->body_len, opts, &d);
	gz_free(owned);
	if (rc == 0)
		rc = mhdgz_response_use_as_dictionary(response, d);
	if (rc == 0 && dict_ret)
		*dict_ret = d;
out:
	pthread_mutex_unlock(&e->lock);
	return rc;
}
