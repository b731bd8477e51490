/* hnd_response.c: buffer responses: the response table, gzip variants, select and queue. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "gz_alloc.h"
#include "hnd_internal.h"

/* Longest ETag rewritten; longer ones are dropped from gzip variants
 * (dropping a validator is always safe, only less efficient). */
#ifndef HND_ETAG_MAX
#define HND_ETAG_MAX 256
#endif

/* Most Vary field lines merged into one; more are left as they are and
 * Accept-Encoding is added as a field of its own. */
#ifndef HND_VARY_MAX
#define HND_VARY_MAX 8
#endif

/* Files up to this many bytes are compressed whole when first queued (a
 * gzip 200 with Content-Length, cached with the response); larger ones are
 * compressed as a stream per connection, in bounded memory. 1 MiB of
 * text is ~3 ms of libdeflate level 6. */
#ifndef HND_FD_WHOLE_MAX
#define HND_FD_WHOLE_MAX (1024 * 1024)
#endif

/* First size of the response table (buckets, power of two). */
#ifndef HND_TABLE_MIN
#define HND_TABLE_MIN 64
#endif

/* ------------------------------------------------------------------------ */
/* Statistics                                                               */

static _Thread_local unsigned int hnd_stripe_id = ~0u;
static atomic_uint hnd_stripe_next;

void
hnd_count(struct mhdgz *gz, enum hnd_counter which, uint64_t n)
{
	if (hnd_stripe_id == ~0u)
		hnd_stripe_id = atomic_fetch_add(&hnd_stripe_next, 1) % HND_STAT_STRIPES;
	atomic_fetch_add_explicit(&gz->stats[hnd_stripe_id].c[which], n, memory_order_relaxed);
}

/* ------------------------------------------------------------------------ */
/* The response table: response pointer -> entry                            */

static size_t
table_slot(const struct hnd_table *t, const void *key)
{
	uint64_t h = (uint64_t)(uintptr_t)key * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 32) & (t->nbuckets - 1);
}

int
hnd_table_init(struct hnd_table *t)
{
	t->bucket = gz_calloc(HND_TABLE_MIN, sizeof *t->bucket);
	if (!t->bucket)
		return MHDGZ_ENOMEM;
	t->nbuckets = HND_TABLE_MIN;
	t->count = 0;
	if (pthread_mutex_init(&t->lock, NULL) != 0) {
		gz_free(t->bucket);
		return MHDGZ_ENOMEM;
	}
	return 0;
}

void
hnd_table_fini(struct hnd_table *t)
{
	pthread_mutex_destroy(&t->lock);
	gz_free(t->bucket);
	t->bucket = NULL;
}

/* Double the bucket array; on allocation failure keep the old one (longer
 * chains are slower, not wrong). Called with the lock held. */
static void
table_grow(struct hnd_table *t)
{
	size_t i, old_n = t->nbuckets;
	struct hnd_entry **old = t->bucket, **nb = gz_calloc(old_n * 2, sizeof *nb);

	if (!nb)
		return;
	t->bucket = nb;
	t->nbuckets = old_n * 2;
	for (i = 0; i < old_n; i++) {
		struct hnd_entry *e = old[i], *next;
		for (; e; e = next) {
			size_t s = table_slot(t, e->response);
			next = e->next;
			e->next = nb[s];
			nb[s] = e;
		}
	}
	gz_free(old);
}

static void
table_insert(struct hnd_table *t, struct hnd_entry *e)
{
	size_t s;

	pthread_mutex_lock(&t->lock);
	if (t->count >= t->nbuckets)
		table_grow(t);
	s = table_slot(t, e->response);
	e->next = t->bucket[s];
	t->bucket[s] = e;
	t->count++;
	pthread_mutex_unlock(&t->lock);
}

static void
table_remove(struct hnd_table *t, struct hnd_entry *e)
{
	struct hnd_entry **pp;

	pthread_mutex_lock(&t->lock);
	for (pp = &t->bucket[table_slot(t, e->response)]; *pp; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			t->count--;
			break;
		}
	}
	pthread_mutex_unlock(&t->lock);
}

static struct hnd_entry *
table_lookup(struct hnd_table *t, const struct MHD_Response *r)
{
	struct hnd_entry *e;

	pthread_mutex_lock(&t->lock);
	for (e = t->bucket[table_slot(t, r)]; e; e = e->next)
		if (e->response == r)
			break;
	pthread_mutex_unlock(&t->lock);
	return e;
}

/* ------------------------------------------------------------------------ */
/* Creating and freeing tracked responses                                   */

static void
entry_free(struct hnd_entry *e)
{
	if (e->gz_variant)
		MHD_destroy_response(e->gz_variant);
	if (e->etag_variant)
		MHD_destroy_response(e->etag_variant);
	if (e->fd_variant)
		MHD_destroy_response(e->fd_variant);
	free(e->owned_libc); /* check-style: libc, the caller's malloc'd MUST_FREE buffer */
	gz_free(e->owned_gz);
	if (e->kind == HND_CALLBACK && e->crfc)
		e->crfc(e->crc_cls);
	if (e->kind == HND_FD && e->fd >= 0)
		close(e->fd);
	pthread_mutex_destroy(&e->read_lock);
	pthread_mutex_destroy(&e->lock);
	gz_free(e);
}

void
hnd_entry_unref(struct hnd_entry *e)
{
	if (atomic_fetch_sub(&e->refs, 1) == 1)
		entry_free(e);
}

/* libmicrohttpd's free callback of a tracked response: its last reference
 * is gone, and its address may be reused by the next response. */
static void
entry_release(void *cls)
{
	struct hnd_entry *e = cls;

	if (e->response) /* NULL if MHD_create_* itself failed */
		table_remove(&e->gz->table, e);
	hnd_entry_unref(e);
}

/* A new entry holding one reference (the response's). */
static struct hnd_entry *
entry_new(struct mhdgz *gz, enum hnd_kind kind)
{
	struct hnd_entry *e = gz_calloc(1, sizeof *e);

	if (!e)
		return NULL;
	if (pthread_mutex_init(&e->lock, NULL) != 0) {
		gz_free(e);
		return NULL;
	}
	if (pthread_mutex_init(&e->read_lock, NULL) != 0) {
		pthread_mutex_destroy(&e->lock);
		gz_free(e);
		return NULL;
	}
	e->gz = gz;
	e->kind = kind;
	e->fd = -1;
	atomic_init(&e->refs, 1);
	return e;
}

MHDGZ_API struct MHD_Response *
mhdgz_response_from_buffer(struct mhdgz *gz, size_t size, void *buffer,
			   enum MHD_ResponseMemoryMode mode)
{
	struct hnd_entry *e = NULL;
	struct MHD_Response *r;

	if (!gz || (size > 0 && !buffer))
		goto fail;
	if (mode != MHD_RESPMEM_PERSISTENT && mode != MHD_RESPMEM_MUST_COPY &&
	    mode != MHD_RESPMEM_MUST_FREE)
		goto fail;
	e = entry_new(gz, HND_BUFFER);
	if (!e)
		goto fail;
	e->body_len = size;
	if (mode == MHD_RESPMEM_MUST_COPY && size > 0) {
		e->owned_gz = gz_malloc(size);
		if (!e->owned_gz)
			goto fail;
		memcpy(e->owned_gz, buffer, size);
		e->body = e->owned_gz;
	} else {
		if (mode == MHD_RESPMEM_MUST_FREE)
			e->owned_libc = buffer;
		e->body = buffer;
	}
	/* The response reads the body from the entry's copy (or the caller's
	 * persistent buffer); the free callback releases both together. */
	r = MHD_create_response_from_buffer_with_free_callback_cls(size, (void *)e->body,
								   entry_release, e);
	if (!r)
		goto fail;
	e->response = r;
	table_insert(&gz->table, e);
	return r;
fail:
	if (e)
		entry_free(e); /* frees a MUST_FREE buffer too */
	else if (mode == MHD_RESPMEM_MUST_FREE)
		free(buffer); /* check-style: libc, the caller's MUST_FREE buffer */
	return NULL;
}

MHDGZ_API struct MHD_Response *
mhdgz_response_from_callback(struct mhdgz *gz, uint64_t size, size_t block_size,
			     MHD_ContentReaderCallback crc, void *crc_cls,
			     MHD_ContentReaderFreeCallback crfc)
{
	struct hnd_entry *e;
	struct MHD_Response *r;

	if (!gz || !crc || block_size == 0)
		return NULL;
	e = entry_new(gz, HND_CALLBACK);
	if (!e)
		return NULL;
	e->body_len = size;
	e->crc = crc;
	e->crc_cls = crc_cls;
	e->block_size = block_size;
	/* Our reader forwards to the user's, so the free callback gets the
	 * entry; the user's crfc runs when the entry's last reference goes. */
	r = MHD_create_response_from_callback(size, block_size, hnd_entry_read, e, entry_release);
	if (!r) {
		entry_free(e); /* crfc not set yet: not called, as documented */
		return NULL;
	}
	e->crfc = crfc;
	e->response = r;
	table_insert(&gz->table, e);
	return r;
}

MHDGZ_API struct MHD_Response *
mhdgz_response_from_fd_at_offset64(struct mhdgz *gz, uint64_t size, int fd, uint64_t offset)
{
	struct hnd_entry *e = NULL;
	struct MHD_Response *r;

	if (!gz || fd < 0 || size == MHD_SIZE_UNKNOWN || offset > (uint64_t)INT64_MAX ||
	    size > (uint64_t)INT64_MAX - offset)
		goto fail;
	e = entry_new(gz, HND_FD);
	if (!e)
		goto fail;
	e->body_len = size;
	e->fd = fd;
	e->offset = offset;
	/* The tracked response reads the file itself (pread) so its lifetime is
	 * visible to us; identity queues use an fd response of libmicrohttpd's
	 * (sendfile) on a duplicate of fd, built at queue time. */
	r = MHD_create_response_from_callback(size, 32 * 1024, hnd_entry_read, e, entry_release);
	if (!r)
		goto fail;
	e->response = r;
	table_insert(&gz->table, e);
	return r;
fail:
	if (e)
		entry_free(e); /* closes fd */
	else if (fd >= 0)
		close(fd);
	return NULL;
}

MHDGZ_API struct MHD_Response *
mhdgz_response_from_fd(struct mhdgz *gz, size_t size, int fd)
{
	return mhdgz_response_from_fd_at_offset64(gz, size, fd, 0);
}

MHDGZ_API int
mhdgz_response_set_low_latency(struct mhdgz *gz, struct MHD_Response *response)
{
	struct hnd_entry *e;

	if (!gz || !response)
		return MHDGZ_EINVAL;
	e = table_lookup(&gz->table, response);
	if (!e || e->kind == HND_BUFFER)
		return MHDGZ_EINVAL;
	pthread_mutex_lock(&e->lock);
	e->low_latency = true;
	pthread_mutex_unlock(&e->lock);
	return 0;
}

MHDGZ_API int
mhdgz_response_set_identity(struct mhdgz *gz, struct MHD_Response *response)
{
	struct hnd_entry *e;

	if (!gz || !response)
		return MHDGZ_EINVAL;
	e = table_lookup(&gz->table, response);
	if (!e)
		return MHDGZ_EINVAL;
	pthread_mutex_lock(&e->lock);
	e->opt_out = true;
	pthread_mutex_unlock(&e->lock);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Reading and rewriting response headers                                   */

struct facts_ctx {
	struct hnd_facts *f;
	const char *vary[HND_VARY_MAX];     /* values of the Vary fields */
	const char *vary_key[HND_VARY_MAX]; /* their names, as the user spelled them */
};

static enum MHD_Result
facts_iter(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct facts_ctx *c = cls;
	struct hnd_facts *f = c->f;

	if (kind != MHD_HEADER_KIND || !value)
		return MHD_YES;
	if (!f->content_type && strcasecmp(key, MHD_HTTP_HEADER_CONTENT_TYPE) == 0)
		f->content_type = value;
	else if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_ENCODING) == 0) {
		/* Several lines: any non-identity one means already encoded. */
		if (!f->content_encoding || strcasecmp(value, "identity") != 0)
			f->content_encoding = value;
	} else if (!f->etag && strcasecmp(key, MHD_HTTP_HEADER_ETAG) == 0)
		f->etag = value;
	else if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_RANGE) == 0)
		f->content_range = true;
	else if (strcasecmp(key, MHD_HTTP_HEADER_CACHE_CONTROL) == 0) {
		if (hnd_list_has_token(value, "no-transform"))
			f->no_transform = true;
	} else if (strcasecmp(key, MHD_HTTP_HEADER_VARY) == 0) {
		if (hnd_list_has_token(value, "accept-encoding") || hnd_list_has_token(value, "*"))
			f->vary_has_ae = true;
		if (f->vary_count < HND_VARY_MAX) {
			c->vary[f->vary_count] = value;
			c->vary_key[f->vary_count] = key;
		}
		f->vary_count++;
	}
	return MHD_YES;
}

static void
read_facts(struct MHD_Response *r, struct hnd_facts *f, struct facts_ctx *c)
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
static int
merge_vary(struct MHD_Response *r, const struct hnd_facts *f, const struct facts_ctx *c)
{
	char *copy[HND_VARY_MAX], *key[HND_VARY_MAX], *merged = NULL;
	size_t i, n = f->vary_count, len = sizeof "Accept-Encoding";
	int rc = MHDGZ_ENOMEM;

	if (f->vary_has_ae)
		return 0;
	if (n == 0 || n > HND_VARY_MAX)
		return MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, "Accept-Encoding") == MHD_YES
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
	strcat(merged, "Accept-Encoding");
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
	if (rc < 0 && MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, "Accept-Encoding") == MHD_YES)
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
static void
vary_for_variant(struct hnd_facts *f, const struct facts_ctx *c, char *buf, size_t cap,
		 char **heap)
{
	size_t i, len = sizeof "Accept-Encoding";
	char *out = buf;

	*heap = NULL;
	f->vary_add = "Accept-Encoding";
	f->vary_replace = false;
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
	strcat(out, "Accept-Encoding");
	f->vary_add = out;
	f->vary_replace = true;
}

struct copy_ctx {
	struct MHD_Response *to;
	bool coded;
	bool skip_vary; /* the Vary fields are replaced by one merged field */
	bool failed;
};

/* Copy the fields of the identity response to a variant. A gzip variant
 * drops the ones the coding changes: Content-Encoding, Content-Length (set
 * by libmicrohttpd from the new body), ETag (rewritten) and Accept-Ranges
 * (byte ranges of the identity body do not apply to the gzip body). */
static enum MHD_Result
copy_iter(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct copy_ctx *c = cls;
	enum MHD_Result ok;

	if (!value)
		return MHD_YES;
	if (kind == MHD_FOOTER_KIND) {
		ok = MHD_add_response_footer(c->to, key, value);
	} else if (kind == MHD_HEADER_KIND) {
		if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
			return MHD_YES;
		if (c->skip_vary && strcasecmp(key, MHD_HTTP_HEADER_VARY) == 0)
			return MHD_YES;
		if (c->coded && (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_ENCODING) == 0 ||
				 strcasecmp(key, MHD_HTTP_HEADER_ETAG) == 0 ||
				 strcasecmp(key, MHD_HTTP_HEADER_ACCEPT_RANGES) == 0))
			return MHD_YES;
		ok = MHD_add_response_header(c->to, key, value);
	} else {
		return MHD_YES;
	}
	if (ok != MHD_YES) {
		c->failed = true;
		return MHD_NO;
	}
	return MHD_YES;
}

int
hnd_copy_headers(struct mhdgz *gz, struct MHD_Response *r, struct MHD_Response *v,
		 const struct hnd_facts *f, bool coded)
{
	struct copy_ctx c = {.to = v, .coded = coded, .skip_vary = f->vary_add && f->vary_replace};
	char buf[HND_ETAG_MAX];
	const char *etag;

	MHD_get_response_headers(r, copy_iter, &c);
	if (c.failed)
		return MHDGZ_EMHD;
	if (f->vary_add && MHD_add_response_header(v, MHD_HTTP_HEADER_VARY, f->vary_add) != MHD_YES)
		return MHDGZ_EMHD;
	if (!coded)
		return 0;
	etag = hnd_etag_for_gzip(gz->etag_policy, f->etag, buf, sizeof buf);
	if (etag && MHD_add_response_header(v, MHD_HTTP_HEADER_ETAG, etag) != MHD_YES)
		return MHDGZ_EMHD;
	return 0;
}

/*
 * A compressed body, shared by reference: the gzip variant and the 304
 * variant (which libmicrohttpd sends without it, but whose size gives the
 * 304 the 200's Content-Length) point at the same bytes.
 */
struct hnd_body {
	atomic_uint refs;
	size_t len; /* bytes at data */
	uint8_t data[];
};

static void
body_unref(void *cls)
{
	struct hnd_body *b = cls;

	if (atomic_fetch_sub(&b->refs, 1) == 1)
		gz_free(b);
}

/*
 * Build a buffer variant of r: body b (one reference passes in; NULL for
 * none), r's fields, Content-Encoding: gzip when coded (a 304 variant has
 * the gzip ETag but no Content-Encoding), the ETag per policy.
 */
static int
build_variant(struct mhdgz *gz, struct MHD_Response *r, const struct hnd_facts *f,
	      struct hnd_body *b, bool coded, struct MHD_Response **ret)
{
	struct MHD_Response *v;

	v = MHD_create_response_from_buffer_with_free_callback_cls(
		b ? b->len : 0, b ? b->data : NULL, b ? body_unref : NULL, b);
	if (!v) {
		if (b)
			body_unref(b);
		return MHDGZ_ENOMEM;
	}
	if (hnd_copy_headers(gz, r, v, f, true) < 0)
		goto fail;
	if (coded && MHD_add_response_header(v, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip") != MHD_YES)
		goto fail;
	*ret = v;
	return 0;
fail:
	MHD_destroy_response(v); /* drops the body reference */
	return MHDGZ_EMHD;
}

/*
 * Compress body into a new exactly-sized hnd_body. The compressor's scratch
 * space (kept across uses in the compressor pool) takes the worst-case output,
 * so a pooled compressor allocates only the result.
 */
static int
compress_body(struct mhdgz *gz, const uint8_t *body, size_t body_len, struct hnd_body **out_ret)
{
	struct gz_compressor *c;
	size_t bound, out_len = 0;
	struct hnd_body *out;
	int rc;

	rc = gz_pool_get(gz->pool, &c);
	if (rc < 0)
		return rc;
	bound = gz_bound(c, body_len);
	rc = gz_compressor_scratch(c, bound);
	if (rc < 0)
		goto out;
	rc = c->be->compress(c, body, body_len, c->scratch, bound, &out_len);
	if (rc < 0)
		goto out;
	if (out_len >= body_len) {
		rc = MHDGZ_ENOSPC; /* not smaller: the caller serves identity */
		goto out;
	}
	out = gz_malloc(sizeof *out + out_len);
	if (!out) {
		rc = MHDGZ_ENOMEM;
		goto out;
	}
	atomic_init(&out->refs, 1);
	out->len = out_len;
	memcpy(out->data, c->scratch, out_len);
	*out_ret = out;
out:
	gz_pool_put(gz->pool, c);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Select and queue                                                         */

/* A file small enough to compress whole: the gzip 200 then has a
 * Content-Length (HEAD and 304 can carry it), is cached like a buffer's,
 * and uses the whole-buffer backend. */
static bool
whole_body(const struct hnd_entry *e)
{
	return e->kind == HND_BUFFER || (e->kind == HND_FD && e->body_len <= HND_FD_WHOLE_MAX);
}

/* Read a file entry's body into a new buffer (gz_free it). The file is
 * read now; a cached gzip variant keeps what it held at the first queue. */
static int
read_file(struct hnd_entry *e, uint8_t **buf_ret)
{
	size_t len = (size_t)e->body_len, got = 0;
	uint8_t *buf = gz_malloc(len ? len : 1);

	if (!buf)
		return MHDGZ_ENOMEM;
	while (got < len) {
		ssize_t n = pread(e->fd, buf + got, len - got, (off_t)(e->offset + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) { /* error, or shorter than announced */
			gz_free(buf);
			return MHDGZ_EBACKEND;
		}
		got += (size_t)n;
	}
	*buf_ret = buf;
	return 0;
}

/* The gzip variant of e, built or reused. Returns 0 and the variant, or the
 * reason it could not be had (NOT_SMALLER, ERROR). Called with e->lock. */
static enum mhdgz_reason
gzip_variant(struct mhdgz *gz, struct hnd_entry *e, const struct hnd_facts *f, bool no_cache,
	     struct MHD_Response **v_ret)
{
	struct hnd_body *out = NULL;
	struct MHD_Response *v = NULL;
	int rc;

	if (!no_cache) {
		if (e->not_smaller)
			return MHDGZ_SKIP_NOT_SMALLER;
		if (e->gz_variant) {
			hnd_count(gz, HND_C_CACHE_HITS, 1);
			*v_ret = e->gz_variant;
			return MHDGZ_COMPRESSED;
		}
	}
	hnd_count(gz, HND_C_COMPRESSIONS, 1);
	if (e->kind == HND_FD) {
		uint8_t *file = NULL;
		rc = read_file(e, &file);
		if (rc == 0)
			rc = compress_body(gz, file, (size_t)e->body_len, &out);
		gz_free(file);
	} else {
		rc = compress_body(gz, e->body, (size_t)e->body_len, &out);
	}
	if (rc == MHDGZ_ENOSPC) {
		e->not_smaller = true;
		return MHDGZ_SKIP_NOT_SMALLER;
	}
	if (rc == 0)
		rc = build_variant(gz, e->response, f, out, true, &v);
	if (rc < 0) {
		hnd_count(gz, HND_C_FAILURES, 1);
		return MHDGZ_SKIP_ERROR;
	}
	if (e->gz_variant)
		MHD_destroy_response(e->gz_variant);
	e->gz_variant = v;
	e->gz_variant_len = out->len;
	e->gz_body = out; /* borrowed: the variant holds the reference */
	*v_ret = v;
	return MHDGZ_COMPRESSED;
}

/* The identity response of a file entry: libmicrohttpd's own fd response
 * (sendfile) on a duplicate of the file descriptor, cached. NULL on
 * failure: the caller then queues the tracked response, which reads the
 * file itself. Called with e->lock. */
static struct MHD_Response *
fd_identity(struct mhdgz *gz, struct hnd_entry *e, const struct hnd_facts *f)
{
	struct MHD_Response *v;
	int fd;

	if (e->fd_variant)
		return e->fd_variant;
	fd = dup(e->fd);
	if (fd < 0)
		return NULL;
	v = MHD_create_response_from_fd_at_offset64(e->body_len, fd, e->offset);
	if (!v) {
		close(fd);
		return NULL;
	}
	if (hnd_copy_headers(gz, e->response, v, f, false) < 0) {
		MHD_destroy_response(v);
		return NULL;
	}
	e->fd_variant = v;
	return v;
}

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

/* Is this stream one whose every chunk must reach the client at once? */
static bool
is_low_latency(const struct hnd_entry *e, const struct hnd_facts *f)
{
	const char *mt;
	size_t len;

	if (e->low_latency)
		return true;
	if (!f->content_type)
		return false;
	mt = hnd_media_type(f->content_type, &len);
	return len == 17 && strncasecmp(mt, "text/event-stream", 17) == 0;
}

/*
 * The response to queue for a 304 to a gzip-accepting client: the fields
 * of the 200 it validates (RFC 9110 section 15.4.5), so the ETag is the
 * gzip one, and no other representation metadata (no Content-Encoding).
 * libmicrohttpd 0.9.75 sends a Content-Length with every 304 of known size
 * (chunked framing with one of unknown size), while section 8.6 allows only
 * the 200's: so for a body compressed whole, the 304 variant shares the
 * gzip body (never sent with a 304) to get its size. Without a body (the
 * usual empty 304 response, or a stream) the variant is empty, with the
 * gzip ETag: libmicrohttpd then says "Content-Length: 0", as it does for
 * any empty 304 (caches ignore a 304's Content-Length, RFC 9111 section
 * 3.2). When the 200 would be identity (small, not compressible, known not
 * to shrink): the response itself. Called with e->lock.
 */
static struct MHD_Response *
not_modified(struct mhdgz *gz, struct hnd_entry *e, const struct hnd_facts *f,
	     const uint8_t *sniff, size_t sniff_len, const struct hnd_accept *acc)
{
	struct hnd_decision d200;
	struct MHD_Response *v;

	if (e->not_smaller)
		return e->response;
	if (e->body_len != 0) {
		hnd_decide(gz, e->opt_out, 200, f, sniff, sniff_len, e->body_len, acc, &d200);
		if (d200.reason != MHDGZ_COMPRESSED)
			return e->response;
		if (whole_body(e)) {
			if (gzip_variant(gz, e, f, false, &v) != MHDGZ_COMPRESSED)
				return e->response;
			if (!e->etag_variant) {
				atomic_fetch_add(&e->gz_body->refs, 1);
				if (build_variant(gz, e->response, f, e->gz_body, false,
						  &e->etag_variant) < 0)
					hnd_count(gz, HND_C_FAILURES, 1);
			}
			return e->etag_variant ? e->etag_variant : e->response;
		}
	}
	if (gz->etag_policy == MHDGZ_ETAG_KEEP)
		return e->response;
	if (!e->etag_variant &&
	    build_variant(gz, e->response, f, NULL, false, &e->etag_variant) < 0)
		hnd_count(gz, HND_C_FAILURES, 1);
	return e->etag_variant ? e->etag_variant : e->response;
}

static int
select_parsed(struct mhdgz *gz, const struct hnd_accept *acc, unsigned int flags,
	      unsigned int status, struct MHD_Response *response, struct MHD_Response **queue_ret,
	      enum mhdgz_reason *reason_ret)
{
	struct hnd_entry *e;
	struct hnd_facts f;
	struct facts_ctx fc;
	struct hnd_decision d;
	uint8_t sniff_buf[HND_SNIFF_NBYTES];
	const uint8_t *sniff = NULL;
	size_t sniff_len = 0;
	uint64_t in_len = 0, out_len = 0;
	int release = 0;
	char vary_buf[256], *vary_heap = NULL;

	*queue_ret = response;
	hnd_count(gz, HND_C_RESPONSES, 1);
	e = table_lookup(&gz->table, response);
	if (!e) {
		d.reason = MHDGZ_SKIP_UNTRACKED;
		goto done;
	}
	pthread_mutex_lock(&e->lock);
	read_facts(response, &f, &fc);
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
		vary_for_variant(&f, &fc, vary_buf, sizeof vary_buf, &vary_heap);
	if (e->body_len != MHD_SIZE_UNKNOWN)
		in_len = out_len = e->body_len;
	if (d.reason == MHDGZ_COMPRESSED && whole_body(e)) {
		struct MHD_Response *v;
		d.reason = gzip_variant(gz, e, &f, flags & MHDGZ_REQ_NO_CACHE, &v);
		if (d.reason == MHDGZ_COMPRESSED) {
			*queue_ret = v;
			out_len = e->gz_variant_len;
		}
	} else if (d.reason == MHDGZ_COMPRESSED) {
		/* Streams: a fresh gzip stream per queue (per connection); the
		 * bytes are counted as they are produced. */
		struct MHD_Response *v = hnd_stream_variant(gz, e, is_low_latency(e, &f));

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
		*queue_ret = not_modified(gz, e, &f, sniff, sniff_len, acc);
	}
	if (*queue_ret == response && e->kind == HND_FD) {
		struct MHD_Response *v = fd_identity(gz, e, &f);
		if (v)
			*queue_ret = v;
	}
	if (*queue_ret == response) {
		/* Merge Vary into the response only before libmicrohttpd first
		 * has it: afterwards another thread may be reading its fields. */
		if (f.vary_add && !e->vary_done && !e->response_queued &&
		    merge_vary(response, &f, &fc) == 0)
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

/* ------------------------------------------------------------------------ */
/* Conditional requests                                                     */

struct precond_ctx {
	const char *etag;
	bool if_match, if_match_ok;
	bool if_none_match, if_none_match_hit;
};

static enum MHD_Result
precond_iter(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct precond_ctx *c = cls;

	(void)kind;
	if (!value)
		return MHD_YES;
	/* Several lines of a list field form one list: any member counts. */
	if (strcasecmp(key, MHD_HTTP_HEADER_IF_MATCH) == 0) {
		c->if_match = true;
		if (mhdgz_etag_match(value, c->etag ? c->etag : "", 0))
			c->if_match_ok = true;
	} else if (strcasecmp(key, MHD_HTTP_HEADER_IF_NONE_MATCH) == 0) {
		c->if_none_match = true;
		if (mhdgz_etag_match(value, c->etag ? c->etag : "", 1))
			c->if_none_match_hit = true;
	}
	return MHD_YES;
}

MHDGZ_API unsigned int
mhdgz_evaluate_preconditions(struct MHD_Connection *connection, const char *method,
			     const char *etag)
{
	struct precond_ctx c = {.etag = etag};

	if (!connection || !method)
		return 0;
	MHD_get_connection_values(connection, MHD_HEADER_KIND, precond_iter, &c);
	/* RFC 9110 section 13.2.2: If-Match first, then If-None-Match. A
	 * resource without ETag matches only "*" (handled by etag_match). */
	if (c.if_match && !c.if_match_ok)
		return MHD_HTTP_PRECONDITION_FAILED;
	if (c.if_none_match && c.if_none_match_hit)
		return (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)
			       ? MHD_HTTP_NOT_MODIFIED
			       : MHD_HTTP_PRECONDITION_FAILED;
	return 0;
}
