/* hnd_headers.c: header rewriting: the facts the decision reads, Vary merging, the fields copied to a variant. */
#include <stdio.h>
#include <string.h>

#include "gz_alloc.h"
#include "hnd_stats.h"
#include "hnd_negotiate.h"
#include "hnd_plan.h"
#include "hnd_handle.h"
#include "hnd_headers.h"
#include "hnd_dict.h"
#include "hnd_mtype.h"

/* Longest ETag rewritten; longer ones are dropped from gzip variants
 * (dropping a validator is always safe, only less efficient). */
#ifndef HND_ETAG_MAX
#define HND_ETAG_MAX 256
#endif

static enum MHD_Result
facts_iter(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct hnd_facts_ctx *c = cls;
	struct hnd_facts *f = c->f;
	size_t n;

	if (!value)
		return MHD_YES;
	n = strlen(key); /* lengths first: one compare of bytes per field at most */
	if (kind == MHD_FOOTER_KIND && hnd_ascii_is(key, n, "Content-Digest"))
		f->content_digest = true;
	if (kind != MHD_HEADER_KIND)
		return MHD_YES;
	if (hnd_ascii_is(key, n, MHD_HTTP_HEADER_CONTENT_TYPE)) {
		if (!f->content_type)
			f->content_type = value;
	} else if (hnd_ascii_is(key, n, MHD_HTTP_HEADER_CONTENT_ENCODING)) {
		/* Several lines: any non-identity one means already encoded. */
		if (!f->content_encoding || !hnd_ascii_eq(value, "identity"))
			f->content_encoding = value;
	} else if (hnd_ascii_is(key, n, MHD_HTTP_HEADER_ETAG)) {
		if (!f->etag)
			f->etag = value;
	} else if (hnd_ascii_is(key, n, MHD_HTTP_HEADER_CONTENT_RANGE)) {
		f->content_range = true;
	} else if (hnd_ascii_is(key, n, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
		f->te_chunked = hnd_list_has_token(value, "chunked");
	} else if (hnd_ascii_is(key, n, "Content-Digest")) {
		f->content_digest = true;
	} else if (hnd_ascii_is(key, n, MHD_HTTP_HEADER_CACHE_CONTROL)) {
		if (hnd_list_has_token(value, "no-transform"))
			f->no_transform = true;
	} else if (hnd_ascii_is(key, n, MHD_HTTP_HEADER_VARY)) {
		if (hnd_list_has_token(value, "accept-encoding") || hnd_list_has_token(value, "*"))
			f->vary_has_ae = true;
		if (hnd_list_has_token(value, "available-dictionary") ||
		    hnd_list_has_token(value, "*"))
			f->vary_has_ad = true;
		if (f->vary_count < HND_VARY_MAX) {
			c->vary[f->vary_count] = value;
			c->vary_key[f->vary_count] = key;
		}
		f->vary_count++;
	}
	return MHD_YES;
}

void
hnd_read_facts(struct MHD_Response *r, struct hnd_facts *f, struct hnd_facts_ctx *c)
{
	memset(f, 0, sizeof *f);
	c->f = f;
	MHD_get_response_headers(r, facts_iter, c);
}

/*
 * Merge "Accept-Encoding" into the response's Vary (RFC 9110 section
 * 12.5.5): one field "existing, Accept-Encoding", never a duplicate. Only
 * before the response is first queued: afterwards libmicrohttpd may be
 * reading its headers on another thread.
 */
const char *
hnd_vary_token(const struct hnd_facts *f)
{
	bool ae = f->vary_has_ae, ad = f->vary_has_ad || !f->dict_vary;

	if (ae && ad)
		return NULL;
	if (ae)
		return "Available-Dictionary";
	return ad ? "Accept-Encoding" : "Accept-Encoding, Available-Dictionary";
}

int
hnd_merge_vary(struct MHD_Response *r, const struct hnd_facts *f, const struct hnd_facts_ctx *c)
{
	char *copy[HND_VARY_MAX], *key[HND_VARY_MAX], *merged = NULL;
	const char *tok = hnd_vary_token(f);
	size_t i, n = f->vary_count, len;
	int rc = MHDGZ_ENOMEM;

	if (!tok)
		return 0;
	len = strlen(tok) + 1;
	if (n == 0 || n > HND_VARY_MAX)
		return MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, tok) == MHD_YES
			       ? 0
			       : MHDGZ_EMHD;
	/* Copy the old fields first: deleting a field frees its strings, and
	 * libmicrohttpd deletes by the exact name the field was added with. */
	memset(copy, 0, sizeof copy);
	memset(key, 0, sizeof key);
	for (i = 0; i < n; i++) {
		copy[i] = gz_strndup(c->vary[i], strlen(c->vary[i]));
		key[i] = gz_strndup(c->vary_key[i], strlen(c->vary_key[i]));
		if (!copy[i] || !key[i])
			goto out;
		len += strlen(copy[i]) + 2;
	}
	merged = gz_malloc(len);
	if (!merged)
		goto out;
	merged[0] = '\0';
	for (i = 0; i < n; i++) {
		if (copy[i][0] == '\0')
			continue;
		strcat(merged, copy[i]);
		strcat(merged, ", ");
	}
	strcat(merged, tok);
	rc = MHDGZ_EMHD;
	for (i = 0; i < n; i++) {
		if (MHD_del_response_header(r, key[i], copy[i]) != MHD_YES) {
			while (i-- > 0) /* put back what was deleted */
				(void)MHD_add_response_header(r, key[i], copy[i]);
			goto out;
		}
	}
	if (MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, merged) != MHD_YES) {
		/* Put the old fields back: better the old Vary than none. */
		for (i = 0; i < n; i++)
			(void)MHD_add_response_header(r, key[i], copy[i]);
		goto out;
	}
	rc = 0;
out:
	for (i = 0; i < n; i++) {
		gz_free(copy[i]);
		gz_free(key[i]);
	}
	gz_free(merged);
	/* No tidy merge (out of memory, or libmicrohttpd refused): a Vary
	 * field of its own means the same (RFC 9110 section 5.3), as for the
	 * variants; never an identity response without it. */
	if (rc < 0 && MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, tok) == MHD_YES)
		rc = 0;
	return rc;
}

/*
 * The Vary a variant carries when the response lacks Accept-Encoding in
 * its Vary: the response's Vary values joined with "Accept-Encoding", in
 * buf (cap bytes) or, if longer, in *heap (gz_free it). When neither
 * works (too many fields, no memory), "Accept-Encoding" is added as a
 * field of its own beside the old ones: a second Vary line means the same
 * (RFC 9110 section 5.3), it is only less tidy.
 */
void
hnd_vary_for_variant(struct hnd_facts *f, const struct hnd_facts_ctx *c, char *buf, size_t cap,
		     char **heap)
{
	const char *tok = hnd_vary_token(f);
	size_t i, len;
	char *out = buf;

	*heap = NULL;
	f->vary_add = tok;
	f->vary_replace = false;
	if (!tok)
		return;
	len = strlen(tok) + 1;
	if (f->vary_count == 0 || f->vary_count > HND_VARY_MAX)
		return;
	for (i = 0; i < f->vary_count; i++)
		len += strlen(c->vary[i]) + 2;
	if (len > cap) {
		*heap = gz_malloc(len);
		if (!*heap)
			return;
		out = *heap;
	}
	out[0] = '\0';
	for (i = 0; i < f->vary_count; i++) {
		if (c->vary[i][0] == '\0')
			continue;
		strcat(out, c->vary[i]);
		strcat(out, ", ");
	}
	strcat(out, tok);
	f->vary_add = out;
	f->vary_replace = true;
}

bool
hnd_is_digest_field(const char *name)
{
	/* RFC 9530 defines Content-Digest over the content as sent (after
	 * content coding) and Repr-Digest over the selected representation,
	 * whose coding is part of it; Digest (RFC 3230) and Content-MD5
	 * (RFC 1864) likewise describe the bytes they were computed from. */
	return hnd_ascii_eq(name, "Content-MD5") || hnd_ascii_eq(name, "Digest") ||
	       hnd_ascii_eq(name, "Content-Digest") || hnd_ascii_eq(name, "Repr-Digest");
}

struct copy_ctx {
	struct MHD_Response *to;
	unsigned int digests; /* integrity fields left out */
	bool coded;
	bool skip_vary;    /* the Vary fields are replaced by one merged field */
	bool framing;      /* v has content: the application's Transfer-Encoding is copied */
	bool not_modified; /* HND_REP_NOT_MODIFIED */
	bool failed;
};

/* Is this field of the identity representation left out of a coded one
 * (which copy_iter builds and drop_iter rewrites in place)? Integrity
 * fields, header or trailer, describe the identity bytes; Content-Encoding
 * is the coded one's own, the ETag rewritten, and byte ranges of the
 * identity body do not apply to the coded body. */
static bool
coded_leaves_out(enum MHD_ValueKind kind, const char *key)
{
	if (hnd_is_digest_field(key))
		return true;
	return kind == MHD_HEADER_KIND && (hnd_ascii_eq(key, MHD_HTTP_HEADER_CONTENT_ENCODING) ||
					   hnd_ascii_eq(key, MHD_HTTP_HEADER_ETAG) ||
					   hnd_ascii_eq(key, MHD_HTTP_HEADER_ACCEPT_RANGES));
}

/* Copy the fields of the identity response to a variant: all but
 * Content-Length (libmicrohttpd's, from the new body), a replaced Vary, a
 * Transfer-Encoding where there is no content, and for a coded variant what
 * coded_leaves_out says. */
static enum MHD_Result
copy_iter(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct copy_ctx *c = cls;
	enum MHD_Result ok;

	if (!value || (kind != MHD_HEADER_KIND && kind != MHD_FOOTER_KIND))
		return MHD_YES;
	if (c->coded && coded_leaves_out(kind, key)) {
		c->digests += hnd_is_digest_field(key);
		return MHD_YES;
	}
	if (c->not_modified && kind == MHD_HEADER_KIND &&
	    (hnd_ascii_eq(key, MHD_HTTP_HEADER_CONTENT_ENCODING) ||
	     hnd_ascii_eq(key, MHD_HTTP_HEADER_CONTENT_RANGE)))
		return MHD_YES;
	if (kind == MHD_FOOTER_KIND) {
		ok = MHD_add_response_footer(c->to, key, value);
	} else {
		if (hnd_ascii_eq(key, MHD_HTTP_HEADER_CONTENT_LENGTH))
			return MHD_YES;
		if (!c->framing && hnd_ascii_eq(key, MHD_HTTP_HEADER_TRANSFER_ENCODING))
			return MHD_YES;
		if (c->skip_vary && hnd_ascii_eq(key, MHD_HTTP_HEADER_VARY))
			return MHD_YES;
		ok = MHD_add_response_header(c->to, key, value);
	}
	if (ok != MHD_YES) {
		c->failed = true;
		return MHD_NO;
	}
	return MHD_YES;
}

int
hnd_copy_headers(struct mhdgz *gz, struct MHD_Response *r, struct MHD_Response *v,
		 const struct hnd_facts *f, enum hnd_rep rep, bool body)
{
	bool coded = rep == HND_REP_GZIP || rep == HND_REP_GZIP_304;
	struct copy_ctx c = { .to = v,
			      .coded = coded,
			      .skip_vary = f->vary_add && f->vary_replace,
			      .framing = body,
			      .not_modified = rep == HND_REP_NOT_MODIFIED };
	char buf[HND_ETAG_MAX];
	const char *etag;

	MHD_get_response_headers(r, copy_iter, &c);
	if (c.failed)
		return MHDGZ_EMHD;
	if (c.digests)
		hnd_count(gz, HND_C_DIGESTS_DROPPED, c.digests);
	/* Framing and protocol options the application set on its response
	 * (mhdgz_response_set_options): libmicrohttpd 0.9.75 cannot read them
	 * back, so the handler carries them to every response in its place. */
	if (f->mhd_flags != MHD_RF_NONE &&
	    MHD_set_response_options(v, f->mhd_flags, MHD_RO_END) != MHD_YES)
		return MHDGZ_EMHD;
	if (f->vary_add && MHD_add_response_header(v, MHD_HTTP_HEADER_VARY, f->vary_add) != MHD_YES)
		return MHDGZ_EMHD;
	if (!coded)
		return 0;
	etag = hnd_etag_for_coding(gz->etag_policy, f->etag, f->coding, buf, sizeof buf);
	if (etag && MHD_add_response_header(v, MHD_HTTP_HEADER_ETAG, etag) != MHD_YES)
		return MHDGZ_EMHD;
	return 0;
}

int
hnd_copy_fields(struct MHD_Response *r, struct MHD_Response *v)
{
	struct copy_ctx c = { .to = v, .framing = true };

	MHD_get_response_headers(r, copy_iter, &c);
	return c.failed ? MHDGZ_EMHD : 0;
}

struct drop_ctx {
	struct MHD_Response *r;
	unsigned int digests;
	bool skip_vary;
};

/* Delete from r each field of the original that the coded representation
 * leaves out (coded_leaves_out, and Content-Length and a replaced Vary, as
 * copy_iter). */
static enum MHD_Result
drop_iter(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct drop_ctx *c = cls;
	bool drop;

	if (!value || (kind != MHD_HEADER_KIND && kind != MHD_FOOTER_KIND))
		return MHD_YES;
	drop = coded_leaves_out(kind, key) ||
	       (kind == MHD_HEADER_KIND &&
		(hnd_ascii_eq(key, MHD_HTTP_HEADER_CONTENT_LENGTH) ||
		 (c->skip_vary && hnd_ascii_eq(key, MHD_HTTP_HEADER_VARY))));
	if (drop) {
		c->digests += hnd_is_digest_field(key);
		MHD_del_response_header(c->r, key, value);
	}
	return MHD_YES;
}

struct cl_ctx {
	char key[32], value[32];
	bool found;
};

static enum MHD_Result
cl_iter(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct cl_ctx *c = cls;

	if (kind != MHD_HEADER_KIND || !value ||
	    !hnd_ascii_eq(key, MHD_HTTP_HEADER_CONTENT_LENGTH) || strlen(key) >= sizeof c->key ||
	    strlen(value) >= sizeof c->value)
		return MHD_YES;
	memcpy(c->key, key, strlen(key) + 1); /* deleted by its exact spelling */
	memcpy(c->value, value, strlen(value) + 1);
	c->found = true;
	return MHD_NO;
}

/* Delete every Content-Length field of r (found one at a time: not while
 * iterating r). */
static void
drop_content_length(struct MHD_Response *r)
{
	for (unsigned int i = 0; i < 8; i++) {
		struct cl_ctx c = { .found = false };

		MHD_get_response_headers(r, cl_iter, &c);
		if (!c.found || MHD_del_response_header(r, c.key, c.value) != MHD_YES)
			return;
	}
}

/* The fields a coded representation adds: Vary, the ETag per policy,
 * Content-Encoding, the Trailer of the digest. Values point into f or buf. */
struct added {
	const char *key[4], *value[4];
	size_t n;
};

int
hnd_rewrite_coded(struct mhdgz *gz, struct MHD_Response *r, struct MHD_Response *orig,
		  const struct hnd_facts *f, bool digest)
{
	struct drop_ctx c = { .r = r, .skip_vary = f->vary_add && f->vary_replace };
	struct added a = { .n = 0 };
	char buf[HND_ETAG_MAX];
	const char *etag = hnd_etag_for_coding(gz->etag_policy, f->etag, f->coding, buf,
					       sizeof buf);
	size_t i;

	if (f->vary_add) {
		a.key[a.n] = MHD_HTTP_HEADER_VARY;
		a.value[a.n++] = f->vary_add;
	}
	if (etag) {
		a.key[a.n] = MHD_HTTP_HEADER_ETAG;
		a.value[a.n++] = etag;
	}
	a.key[a.n] = MHD_HTTP_HEADER_CONTENT_ENCODING;
	a.value[a.n++] = gz_coding_name(f->coding);
	if (digest) {
		a.key[a.n] = MHD_HTTP_HEADER_TRAILER;
		a.value[a.n++] = "Content-Digest";
	}
	/* Add first, so that a failure can be undone; then delete the
	 * originals, which cannot fail (an added value equal to an original
	 * one leaves one of the two, as the variant would carry). */
	for (i = 0; i < a.n; i++) {
		if (MHD_add_response_header(r, a.key[i], a.value[i]) != MHD_YES) {
			while (i-- > 0)
				MHD_del_response_header(r, a.key[i], a.value[i]);
			return MHDGZ_EMHD;
		}
	}
	MHD_get_response_headers(orig, drop_iter, &c);
	if (c.digests)
		hnd_count(gz, HND_C_DIGESTS_DROPPED, c.digests);
	/* The copy has no Content-Length (hnd_copy_fields): the
	 * application's own (libmicrohttpd 1.0 takes one with
	 * MHD_RF_INSANITY_HEADER_CONTENT_LENGTH) goes too, as the identity
	 * length of a body sent coded (in_place_app_content_length). */
	drop_content_length(r);
	return 0;
}

const char *
hnd_etag_for_gzip(enum mhdgz_etag_policy policy, const char *etag, char *buf, size_t cap)
{
	return hnd_etag_for_coding(policy, etag, GZ_CODING_GZIP, buf, cap);
}

const char *
hnd_etag_for_coding(enum mhdgz_etag_policy policy, const char *etag, enum gz_coding coding,
		    char *buf, size_t cap)
{
	bool weak;
	const char *op;
	size_t op_len;
	int n;

	if (!etag)
		return NULL;
	if (policy == MHDGZ_ETAG_DROP)
		return NULL;
	if (policy == MHDGZ_ETAG_KEEP)
		return etag;
	if (!hnd_etag_parse(etag, &weak, &op, &op_len) || weak)
		return etag; /* weak (or unparseable) validators may be shared */
	if (policy == MHDGZ_ETAG_WEAKEN)
		n = snprintf(buf, cap, "W/\"%.*s\"", (int)op_len, op);
	else
		n = snprintf(buf, cap, "\"%.*s-%s\"", (int)op_len, op, gz_coding_name(coding));
	if (n < 0 || (size_t)n >= cap)
		return NULL;
	return buf;
}
