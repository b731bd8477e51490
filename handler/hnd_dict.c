/* hnd_dict.c: compression dictionaries (RFC 9842): registration, Use-As-Dictionary, match patterns, dcz selection and its cache. */
/*
 * Why SHA-256 from nettle: it is already the handler's hash library
 * (Content-Digest, BREACH padding keys) and libmicrohttpd's TLS stack
 * pulls it in anyway; no new dependency.
 *
 * The dcz body of a response is built once per dictionary and kept on the
 * response's entry (a short list: a response is compressed against the
 * few dictionaries its clients hold). The plain zstd length of the same
 * body is computed with it once, for the bytes-saved counter.
 */
#include <stdio.h>
#include <string.h>

#include "hnd_internal.h"
#include "gz_dict.h"

/* Longest pattern and id accepted, in bytes (RFC 9842 caps id at 1024). */
#define HND_DICT_FIELD_MAX 1024
/* Most match-dest entries. */
#define HND_DICT_DEST_MAX 8

/* One dcz representation of an entry. */
struct hnd_dcz {
	struct hnd_dcz *next;
	const struct mhdgz_dictionary *dict;
	bool not_smaller;
	struct MHD_Response *rep; /* our reference */
	size_t rep_len;
	size_t plain_len; /* plain zstd of the same body, bytes */
};

/* Is the pattern one of the supported subset (see mhdgz.h)? */
static bool
pattern_ok(const char *p)
{
	size_t len = strlen(p), i;

	if (len == 0 || len > HND_DICT_FIELD_MAX || p[0] != '/')
		return false;
	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)p[i];

		if (ch <= 0x20 || ch >= 0x7f || strchr("\"\\:(){}?+#", ch))
			return false;
	}
	return true;
}

/* sf-string content without escapes: printable ASCII but '"' and '\\'. */
static bool
id_ok(const char *id)
{
	size_t len = strlen(id), i;

	if (len > HND_DICT_FIELD_MAX)
		return false;
	for (i = 0; i < len; i++)
		if (id[i] < 0x20 || id[i] > 0x7e || id[i] == '"' || id[i] == '\\')
			return false;
	return true;
}

static bool
dest_ok(const char *d)
{
	size_t len = strlen(d), i;

	if (len == 0 || len > 32)
		return false;
	for (i = 0; i < len; i++)
		if (!((d[i] >= 'a' && d[i] <= 'z') || d[i] == '-'))
			return false;
	return true;
}

static void
dict_free(struct mhdgz_dictionary *d)
{
	gz_zdict_free(d->zd);
	gz_free(d->match);
	gz_free(d->id);
	gz_free(d->field);
	gz_free(d);
}

/* The Use-As-Dictionary value (RFC 8941 dictionary): match, match-dest,
 * id. NULL without memory. */
static char *
make_field(const char *match, const char *const *dest, const char *id)
{
	size_t len = strlen(match) + sizeof "match=\"\"", i;
	char *f, *w;

	if (dest)
		for (i = 0; dest[i]; i++)
			len += strlen(dest[i]) + 4;
	len += sizeof ", match-dest=()";
	if (id)
		len += strlen(id) + sizeof ", id=\"\"";
	f = gz_malloc(len);
	if (!f)
		return NULL;
	w = f + sprintf(f, "match=\"%s\"", match);
	if (dest && dest[0]) {
		w += sprintf(w, ", match-dest=(");
		for (i = 0; dest[i]; i++)
			w += sprintf(w, "%s\"%s\"", i ? " " : "", dest[i]);
		w += sprintf(w, ")");
	}
	if (id)
		sprintf(w, ", id=\"%s\"", id);
	return f;
}

MHDGZ_API int
mhdgz_dictionary_add(struct mhdgz *gz, const void *data, size_t data_nbytes,
		     const struct mhdgz_dictionary_options *opts,
		     const struct mhdgz_dictionary **dict_ret)
{
	struct mhdgz_dictionary *d, *head;
	struct sha256_ctx ctx;
	const struct hnd_coder *z;
	size_t i;
	int rc;

	if (!gz || !data || !opts || opts->size != sizeof *opts || !opts->match ||
	    data_nbytes == 0 || data_nbytes > GZ_DICT_MAX_NBYTES || !pattern_ok(opts->match) ||
	    (opts->id && !id_ok(opts->id)))
		return MHDGZ_EINVAL;
	for (i = 0; opts->match_dest && opts->match_dest[i]; i++)
		if (i == HND_DICT_DEST_MAX || !dest_ok(opts->match_dest[i]))
			return MHDGZ_EINVAL;
	d = gz_calloc(1, sizeof *d);
	if (!d)
		return MHDGZ_ENOMEM;
	d->nbytes = data_nbytes;
	sha256_init(&ctx);
	sha256_update(&ctx, data_nbytes, data);
	sha256_digest(&ctx, sizeof d->hash, d->hash);
	rc = MHDGZ_ENOMEM;
	d->match = gz_strndup(opts->match, strlen(opts->match));
	if (opts->id) {
		d->id = gz_malloc(strlen(opts->id) + 3);
		if (d->id)
			sprintf(d->id, "\"%s\"", opts->id);
	}
	d->field = make_field(opts->match, opts->match_dest, opts->id);
	if (!d->match || (opts->id && !d->id) || !d->field)
		goto fail;
	z = &gz->coder[GZ_CODING_ZSTD];
	rc = gz_zdict_new(data, data_nbytes, z->be ? z->level : 0, d->hash, &d->zd);
	if (rc < 0)
		goto fail;
	/* Publish: the node is complete before it becomes visible. */
	head = atomic_load_explicit(&gz->dicts, memory_order_relaxed);
	do {
		d->next = head;
	} while (!atomic_compare_exchange_weak_explicit(&gz->dicts, &head, d, memory_order_release,
							memory_order_relaxed));
	if (dict_ret)
		*dict_ret = d;
	return 0;
fail:
	dict_free(d);
	return rc;
}

void
hnd_dicts_free(struct mhdgz *gz)
{
	struct mhdgz_dictionary *d = atomic_load(&gz->dicts), *next;

	for (; d; d = next) {
		next = d->next;
		dict_free(d);
	}
	atomic_store(&gz->dicts, NULL);
}

MHDGZ_API int
mhdgz_response_use_as_dictionary(struct MHD_Response *response, const struct mhdgz_dictionary *dict)
{
	if (!response || !dict)
		return MHDGZ_EINVAL;
	return MHD_add_response_header(response, "Use-As-Dictionary", dict->field) == MHD_YES
		       ? 0
		       : MHDGZ_EMHD;
}

/* Defined below. */
static const uint8_t *entry_bytes(struct hnd_entry *e, uint8_t **owned);

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
	if (e->response_queued || !hnd_whole_body(e) || e->body_len == 0) {
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
hnd_dict_url_matches(struct mhdgz *gz, const char *url)
{
	const struct mhdgz_dictionary *d;

	if (!url)
		return false;
	for (d = atomic_load_explicit(&gz->dicts, memory_order_acquire); d; d = d->next)
		if (hnd_dict_match(d->match, url))
			return true;
	return false;
}

/* The dictionary the request names and whose pattern matches its path. */
static const struct mhdgz_dictionary *
find_dict(const struct mhdgz *gz, const struct hnd_request *rq)
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
	for (d = atomic_load_explicit(&gz->dicts, memory_order_acquire); d; d = d->next) {
		if (memcmp(d->hash, hash, sizeof hash) != 0 || !hnd_dict_match(d->match, rq->url))
			continue;
		if (id && d->id && (strlen(d->id) != id_len || memcmp(d->id, id, id_len) != 0))
			continue;
		found = d;
	}
	return found;
}

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
	if (gz->content_digest && f->content_digest) {
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

const struct mhdgz_dictionary *
hnd_dcz_plan(const struct mhdgz *gz, const struct hnd_request *rq, const struct hnd_accept *acc,
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
	if (!whole || body_len < gz->min_nbytes || body_len == 0)
		return NULL;
	return find_dict(gz, rq);
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

void
hnd_dcz_free(struct hnd_entry *e)
{
	struct hnd_dcz *k = e->dcz, *next;

	for (; k; k = next) {
		next = k->next;
		if (k->rep)
			MHD_destroy_response(k->rep);
		gz_free(k);
	}
	e->dcz = NULL;
}
