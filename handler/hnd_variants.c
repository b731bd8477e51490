/* hnd_variants.c: the responses queued in an application response's place: the gzip representation, HEAD responses, the identity response of a file. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gz_alloc.h"
#include "gz_pool.h"
#include <nettle/sha2.h>
#include <nettle/base64.h>
#include "hnd_stats.h"
#include "hnd_plan.h"
#include "hnd_entry.h"
#include "hnd_store.h"
#include "hnd_handle.h"
#include "hnd_headers.h"
#include "hnd_repr.h"
#include "hnd_pad.h"


/* r's fields on v as rep says; body: v has content. 0 or MHDGZ_EMHD. */
static int
rep_headers(struct mhdgz *gz, struct MHD_Response *r, struct MHD_Response *v,
	    const struct hnd_facts *f, enum hnd_rep rep, bool body)
{
	if (hnd_copy_headers(gz, r, v, f, rep, body) < 0)
		return MHDGZ_EMHD;
	if (rep == HND_REP_GZIP && MHD_add_response_header(v, MHD_HTTP_HEADER_CONTENT_ENCODING,
							   gz_coding_name(f->coding)) != MHD_YES)
		return MHDGZ_EMHD;
	return 0;
}

int
hnd_build_response(struct mhdgz *gz, struct MHD_Response *r, const struct hnd_facts *f,
		   struct hnd_body *b, enum hnd_rep rep, struct MHD_Response **ret)
{
	struct MHD_Response *v;

	v = MHD_create_response_from_buffer_with_free_callback_cls(b ? b->len : 0,
								   b ? b->data : NULL,
								   b ? hnd_body_unref : NULL, b);
	if (!v) {
		if (b)
			hnd_body_unref(b);
		return MHDGZ_ENOMEM;
	}
	if (rep_headers(gz, r, v, f, rep, rep != HND_REP_GZIP_304) < 0) {
		MHD_destroy_response(v); /* drops the body reference */
		return MHDGZ_EMHD;
	}
	*ret = v;
	return 0;
}

#ifdef HAVE_MHD_HEAD_ONLY
/*
 * libmicrohttpd 1.0: a head-only response (MHD_RF_HEAD_ONLY_RESPONSE) gets
 * neither an automatic Content-Length nor Transfer-Encoding and takes an
 * explicit Content-Length; libmicrohttpd frames nothing after its header
 * block, so the connection stays open for the next request. Where the
 * application's own response would be close-delimited (its flags forbid
 * chunked framing: MHD_RF_HTTP_1_0_COMPATIBLE_STRICT, MHD_RF_HTTP_1_0_SERVER)
 * and its length is unknown, the HEAD or 304 closes as its own would. Pinned
 * by test_head_every_kind, test_no_content_statuses and
 * test_bodyless_pipelined (check_hnd_fidelity.c).
 */
struct MHD_Response *
hnd_fields_response(struct mhdgz *gz, struct MHD_Response *r, const struct hnd_facts *f,
		    uint64_t size, enum hnd_rep rep)
{
	const enum MHD_ResponseFlags close_delimited = MHD_RF_HTTP_1_0_COMPATIBLE_STRICT |
						       MHD_RF_HTTP_1_0_SERVER;
	struct MHD_Response *v = MHD_create_response_empty(MHD_RF_HEAD_ONLY_RESPONSE);
	char num[24];

	if (!v)
		return NULL;
	if (rep_headers(gz, r, v, f, rep, false) < 0)
		goto fail;
	/* rep_headers set the application's flags, which replace the
	 * response's: head-only again, before any Content-Length. */
	if (MHD_set_response_options(v, f->mhd_flags | MHD_RF_HEAD_ONLY_RESPONSE, MHD_RO_END) !=
	    MHD_YES)
		goto fail;
	if (size != MHD_SIZE_UNKNOWN) {
		snprintf(num, sizeof num, "%llu", (unsigned long long)size);
		if (MHD_add_response_header(v, MHD_HTTP_HEADER_CONTENT_LENGTH, num) != MHD_YES)
			goto fail;
	} else if ((f->mhd_flags & close_delimited) &&
		   MHD_add_response_header(v, MHD_HTTP_HEADER_CONNECTION, "close") != MHD_YES) {
		goto fail;
	}
	return v;
fail:
	MHD_destroy_response(v);
	return NULL;
}
#else
/* The content reader of a HEAD response: libmicrohttpd never calls it for
 * HEAD; should it ever, the response ends with an error, never with bytes
 * that were not asked for. */
static ssize_t
head_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)cls;
	(void)pos;
	(void)buf;
	(void)max;
	return MHD_CONTENT_READER_END_WITH_ERROR;
}

/* libmicrohttpd 0.9.75: a callback response whose reader never runs. */
struct MHD_Response *
hnd_fields_response(struct mhdgz *gz, struct MHD_Response *r, const struct hnd_facts *f,
		    uint64_t size, enum hnd_rep rep)
{
	struct MHD_Response *v = MHD_create_response_from_callback(size, 1024, head_read, NULL,
								   NULL);

	if (!v)
		return NULL;
	if (rep_headers(gz, r, v, f, rep, false) < 0)
		goto fail;
	/* Unknown length: libmicrohttpd 0.9.75 frames it as chunked and
	 * writes the last chunk after the HEAD headers, which a kept-alive
	 * client reads as the next status line; HTTP/1.0-compatible framing
	 * sends neither a length nor a chunk and closes the connection. */
	if (size == MHD_SIZE_UNKNOWN &&
	    MHD_set_response_options(v, f->mhd_flags | MHD_RF_HTTP_1_0_COMPATIBLE_STRICT,
				     MHD_RO_END) != MHD_YES)
		goto fail;
	return v;
fail:
	MHD_destroy_response(v);
	return NULL;
}
#endif

/*
 * Compress body into a new exactly-sized hnd_body. The compressor's scratch
 * space (kept across uses in the compressor pool) takes the worst-case output,
 * so a pooled compressor allocates only the result. With *pad nonzero (gzip
 * only), the member's header carries a comment of that many bytes (length
 * hiding; the core writes it, gz_compress_member); "not smaller" is judged
 * on the bytes sent, padding included.
 */
static int
compress_body(struct mhdgz *gz, enum gz_coding coding, const uint8_t *body, size_t body_len,
	      size_t *pad, struct hnd_body **out_ret)
{
	struct gz_pool *pool = hnd_pool(gz, coding, false);
	struct gz_compressor *c;
	size_t bound, out_len = 0;
	struct hnd_body *out;
	int rc;

	rc = gz_pool_get(pool, &c);
	if (rc < 0)
		return rc;
	bound = gz_bound(c, body_len) + *pad;
	rc = gz_compressor_scratch(c, bound);
	if (rc < 0)
		goto out;
	/* the padding as the member header's comment (the core's) */
	rc = gz_compress_member(c, body, body_len, *pad, c->scratch, bound, &out_len);
	if (rc < 0)
		goto out;
	if (out_len >= body_len) {
		rc = MHDGZ_ENOSPC; /* not smaller: the caller serves identity */
		goto out;
	}
	out = hnd_body_new(c->scratch, out_len);
	if (!out) {
		rc = MHDGZ_ENOMEM;
		goto out;
	}
	*out_ret = out;
out:
	gz_pool_put(pool, c);
	return rc;
}

void
hnd_content_digest_value(struct sha256_ctx *ctx, char field[HND_CONTENT_DIGEST_MAX])
{
	uint8_t digest[SHA256_DIGEST_SIZE];

	sha256_digest(ctx, sizeof digest, digest);
	memcpy(field, "sha-256=:", 9);
	base64_encode_raw(field + 9, sizeof digest, digest);
	memcpy(field + 9 + BASE64_ENCODE_RAW_LENGTH(SHA256_DIGEST_SIZE), ":", 2);
}

/* RFC 9530 Content-Digest of the gzip bytes b, added to v. 0 or
 * MHDGZ_EMHD. */
static int
add_content_digest(struct MHD_Response *v, const struct hnd_body *b)
{
	struct sha256_ctx ctx;
	char field[HND_CONTENT_DIGEST_MAX];

	sha256_init(&ctx);
	sha256_update(&ctx, b->len, b->data);
	hnd_content_digest_value(&ctx, field);
	return MHD_add_response_header(v, "Content-Digest", field) == MHD_YES ? 0 : MHDGZ_EMHD;
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

/* Drop e's responses built over a body the store no longer holds. */
static void
drop_stale(struct hnd_coded *k)
{
	if (k->rep)
		MHD_destroy_response(k->rep);
	if (k->rep_304)
		MHD_destroy_response(k->rep_304);
	k->rep = k->rep_304 = NULL;
	k->body = NULL;
	k->pending = false;
}

/* The coded variant of e in f->coding: the entry's response while the
 * store holds its body (no lock taken), else built over the store's body
 * or a new compression (which goes to the store). Returns 0 and the
 * variant, or the reason it could not be had (NOT_SMALLER, ERROR). Called
 * with e->lock. */
enum mhdgz_reason
hnd_gzip_representation(struct mhdgz *gz, struct hnd_entry *e, const struct hnd_facts *f,
			bool no_cache, struct MHD_Response **v_ret)
{
	struct hnd_coded *k = &e->coded[f->coding];
	bool padded = hnd_padded(gz, e, f->coding);
	struct hnd_body *out = NULL;
	struct MHD_Response *v = NULL;
	struct hnd_store_val got;
	bool pending = false;
	size_t pad = 0;
	int rc;

	/* At its second use a body is offered to the store; one it does not
	 * take (over the budget) is not kept. */
	if (!no_cache && hnd_coded_live(k) &&
	    (!k->pending || hnd_store_entry_offer(gz, e, f->coding, k->body))) {
		struct hnd_stripe *st = hnd_stripe_of(gz);

		k->pending = false;
		hnd_count_in(st, HND_C_CACHE_HITS, 1);
		hnd_count_in(st, HND_C_STORE_HITS, 1);
		*v_ret = k->rep;
		return MHDGZ_COMPRESSED;
	}
	drop_stale(k);
	if (!no_cache && hnd_store_entry_get(gz, e, NULL, f->coding, HND_SM_WHOLE, &got)) {
		if (got.len == HND_STORE_NOT_SMALLER)
			return MHDGZ_SKIP_NOT_SMALLER;
		out = got.body; /* made by an earlier queue, or another response on the file */
	}
	if (out) {
		rc = 0;
	} else if (e->kind == HND_FD) {
		struct hnd_store_key version;
		bool versioned = hnd_store_entry_version(gz, e, &version); /* before the read */
		uint8_t *file = NULL;

		hnd_count(gz, HND_C_COMPRESSIONS, 1);
		rc = read_file(e, &file);
		if (rc == 0) {
			pad = padded ? hnd_pad_of_body(gz, file, (size_t)e->body_len) : 0;
			rc = compress_body(gz, f->coding, file, (size_t)e->body_len, &pad, &out);
		}
		gz_free(file);
		if (rc == 0 || rc == MHDGZ_ENOSPC)
			pending = hnd_store_entry_put(gz, e, f->etag, f->coding, HND_SM_WHOLE, out,
						      rc == 0 ? out->len : HND_STORE_NOT_SMALLER,
						      versioned ? &version : NULL);
	} else {
		hnd_count(gz, HND_C_COMPRESSIONS, 1);
		pad = padded ? hnd_pad_of_body(gz, e->body, (size_t)e->body_len) : 0;
		rc = compress_body(gz, f->coding, e->body, (size_t)e->body_len, &pad, &out);
		if (rc == 0 || rc == MHDGZ_ENOSPC)
			pending = hnd_store_entry_put(gz, e, f->etag, f->coding, HND_SM_WHOLE, out,
						      rc == 0 ? out->len : HND_STORE_NOT_SMALLER,
						      NULL);
	}
	if (rc == MHDGZ_ENOSPC)
		return MHDGZ_SKIP_NOT_SMALLER;
	if (rc == 0) {
		k->body = out; /* borrowed once rep holds the reference */
		rc = hnd_build_response(gz, hnd_identity_fields(e), f, out, HND_REP_GZIP, &v);
	}
	if (rc == 0 && gz->policy.content_digest && f->content_digest) {
		rc = add_content_digest(v, out);
		if (rc < 0)
			MHD_destroy_response(v); /* drops the body */
	}
	if (rc < 0) {
		k->body = NULL;
		hnd_count(gz, HND_C_FAILURES, 1);
		return MHDGZ_SKIP_ERROR;
	}
	k->rep = v;
	k->pending = pending;
	*v_ret = v;
	return MHDGZ_COMPRESSED;
}

/* A free callback for a buffer gz_malloc'd (its cls). */
static void
free_file_copy(void *cls)
{
	gz_free(cls);
}

/* The identity response of a file entry's GET up to HND_FD_INLINE_MAX
 * bytes: the file read now (pread) into a buffer response, which
 * libmicrohttpd sends with its header in one sendmsg (one segment for a
 * small file), where its fd response sends the header, then sendfile()s
 * the body: two segments, and a descriptor duplicated and closed per
 * response. Built per queue, so, like libmicrohttpd's fd response, each
 * queue sends what the file holds then. NULL on failure (a short file
 * included): the caller then takes the sendfile path, which reports a
 * short file as libmicrohttpd does. Called with e->lock. */
static struct MHD_Response *
inline_identity(struct mhdgz *gz, struct hnd_entry *e, const struct hnd_facts *f)
{
	struct MHD_Response *v;
	uint8_t *buf;

	if (read_file(e, &buf) != 0)
		return NULL;
	v = MHD_create_response_from_buffer_with_free_callback_cls((size_t)e->body_len, buf,
								   free_file_copy, buf);
	if (!v) {
		gz_free(buf);
		return NULL;
	}
	if (hnd_copy_headers(gz, hnd_identity_fields(e), v, f, HND_REP_IDENTITY, true) < 0) {
		MHD_destroy_response(v); /* frees buf */
		return NULL;
	}
	return v;
}

/* The identity response of a file entry: for a GET of a small file, the
 * file read into memory (inline_identity, per queue: *fresh_ret set, the
 * caller drops its reference after queueing); otherwise libmicrohttpd's own
 * fd response (sendfile) on a duplicate of the file descriptor, cached.
 * NULL on failure: the caller then queues the tracked response, which
 * reads the file itself. Called with e->lock. */
struct MHD_Response *
hnd_file_identity(struct mhdgz *gz, struct hnd_entry *e, const struct hnd_facts *f, bool head,
		  bool *fresh_ret)
{
	struct MHD_Response *v;
	int fd;

	*fresh_ret = false;
	if (!head && e->body_len <= HND_FD_INLINE_MAX) {
		v = inline_identity(gz, e, f);
		if (v) {
			*fresh_ret = true;
			return v;
		}
	}
	if (e->sendfile_rep)
		return e->sendfile_rep;
	/* Close-on-exec: a child the application starts must not inherit it. */
	fd = fcntl(e->fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return NULL;
	v = MHD_create_response_from_fd_at_offset64(e->body_len, fd, e->offset);
	if (!v) {
		close(fd);
		return NULL;
	}
	if (hnd_copy_headers(gz, hnd_identity_fields(e), v, f, HND_REP_IDENTITY, true) < 0) {
		MHD_destroy_response(v);
		return NULL;
	}
	e->sendfile_rep = v;
	return v;
}
