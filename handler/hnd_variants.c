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
#include "hnd_memo.h"
#include "hnd_filecache.h"
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

/* The coded variant of e in f->coding, built or reused (one cache per
 * coding). Returns 0 and the variant, or the reason it could not be had
 * (NOT_SMALLER, ERROR). Called with e->lock. */
enum mhdgz_reason
hnd_gzip_representation(struct mhdgz *gz, struct hnd_entry *e, const struct hnd_facts *f,
			bool no_cache, struct MHD_Response **v_ret, bool *fresh_ret)
{
	struct hnd_coded *k = &e->coded[f->coding];
	bool padded = hnd_padded(gz, e, f->coding);
	enum hnd_memo_mode mode = HND_MEMO_MODE(HND_MEMO_WHOLE, f->coding, padded);
	struct hnd_body *out = NULL;
	struct MHD_Response *v = NULL;
	size_t pad = 0;
	struct hnd_fc_key fck;
	bool fc_on, fc_padded = false;
	/* no_cache (benchmarks): built afresh, then kept as usual; an
	 * uncached entry: built afresh and never kept. */
	bool reuse = !no_cache && !e->uncached, keep_it = !e->uncached;
	int rc;

	*fresh_ret = false;
	if (reuse) {
		if (k->not_smaller)
			return MHDGZ_SKIP_NOT_SMALLER;
		if (k->rep) {
			hnd_count(gz, HND_C_CACHE_HITS, 1);
			*v_ret = k->rep;
			return MHDGZ_COMPRESSED;
		}
	}
	/* An uncached entry's body is compressed without its lock: many
	 * requests for one shared response compress at once, as they would
	 * with a response each. What is read meanwhile does not change (the
	 * body, the descriptor, the facts in f); the response's fields are
	 * copied below, under the lock again. */
	if (!keep_it)
		pthread_mutex_unlock(&e->lock);
	/* A file's coded bytes may be remembered from another response on
	 * the same file version (hnd_filecache.c). */
	fc_on = e->kind == HND_FD && gz->filecache.ready && !no_cache &&
		hnd_fc_key_of(gz, e, f->coding, padded, &fck);
	if (fc_on && hnd_fc_get(gz, &fck, &out, &fc_padded)) {
		rc = out ? 0 : MHDGZ_ENOSPC; /* NULL: remembered as not smaller */
		pad = fc_padded;
		fc_on = false; /* nothing to remember */
	} else if (e->kind == HND_FD) {
		uint8_t *file = NULL;

		hnd_count(gz, HND_C_COMPRESSIONS, 1);
		rc = read_file(e, &file);
		if (rc == 0) {
			pad = padded ? hnd_pad_of_body(gz, file, (size_t)e->body_len) : 0;
			rc = compress_body(gz, f->coding, file, (size_t)e->body_len, &pad, &out);
		}
		gz_free(file);
		if (fc_on && (rc == 0 || rc == MHDGZ_ENOSPC))
			hnd_fc_put(gz, e, &fck, rc == 0 ? out : NULL, pad != 0);
	} else {
		hnd_count(gz, HND_C_COMPRESSIONS, 1);
		pad = padded ? hnd_pad_of_body(gz, e->body, (size_t)e->body_len) : 0;
		rc = compress_body(gz, f->coding, e->body, (size_t)e->body_len, &pad, &out);
	}
	if (!keep_it)
		pthread_mutex_lock(&e->lock);
	if (rc == MHDGZ_ENOSPC) {
		k->not_smaller = true;
		hnd_memo_put(&gz->memo, f->etag, e->body_len, mode, HND_MEMO_NOT_SMALLER);
		return MHDGZ_SKIP_NOT_SMALLER;
	}
	if (rc == 0)
		rc = hnd_build_response(gz, hnd_identity_fields(e), f, out, HND_REP_GZIP, &v);
	if (rc == 0 && gz->policy.content_digest && f->content_digest) {
		rc = add_content_digest(v, out);
		if (rc < 0)
			MHD_destroy_response(v); /* drops the body */
	}
	if (rc < 0) {
		hnd_count(gz, HND_C_FAILURES, 1);
		return MHDGZ_SKIP_ERROR;
	}
	hnd_memo_put(&gz->memo, f->etag, e->body_len, mode, out->len);
	if (!keep_it) { /* this queue's alone: dropped once it is sent */
		k->rep_len = out->len;
		k->padded = pad != 0;
		k->len_known = e->kind == HND_BUFFER; /* a file may change */
		*fresh_ret = true;
		*v_ret = v;
		return MHDGZ_COMPRESSED;
	}
	if (k->rep)
		MHD_destroy_response(k->rep);
	k->rep = v;
	k->rep_len = out->len;
	k->padded = pad != 0;
	k->body = out; /* borrowed: the variant holds the reference */
	*v_ret = v;
	return MHDGZ_COMPRESSED;
}

bool
hnd_coded_len_known(struct mhdgz *gz, const struct hnd_entry *e, const struct hnd_facts *f,
		    uint64_t *len_ret)
{
	const struct hnd_coded *k = &e->coded[f->coding];
	bool padded = hnd_padded(gz, e, f->coding);

	if (hnd_memo_get(&gz->memo, f->etag, e->body_len,
			 HND_MEMO_MODE(HND_MEMO_WHOLE, f->coding, padded), len_ret))
		return true;
	if (!e->uncached || e->kind != HND_BUFFER)
		return false;
	if (k->not_smaller) {
		*len_ret = HND_MEMO_NOT_SMALLER;
		return true;
	}
	if (!k->len_known)
		return false;
	*len_ret = k->rep_len;
	return true;
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
