/* hnd_stream.c: the libmicrohttpd side of streams: a content reader over the core's stream pump, the first bytes of a stream of unknown size, and the identity reader. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "gz_alloc.h"
#include <nettle/sha2.h>
#include "hnd_stats.h"
#include "hnd_plan.h"
#include "hnd_entry.h"
#include "hnd_store.h"
#include "hnd_handle.h"
#include "hnd_headers.h"
#include "hnd_repr.h"
#include "hnd_stream.h"
#include "hnd_pad.h"
#include "gz_stream.h"

/*
 * One gzip stream: the state of one connection sending a compressed
 * streaming response. libmicrohttpd calls stream_read with its buffer; the
 * core's pump (gz_stream.h) fills it from the source (the user's reader or
 * the file) and gives its compressor back to the pool the moment the
 * trailer is written. What is left here is libmicrohttpd's vocabulary.
 */
struct hnd_stream {
	struct mhdgz *gz;
	struct hnd_entry *e;   /* holds a reference */
	int fd;                /* HND_FD: our own duplicate; else -1 */
	bool failed;           /* counted once */
	struct hnd_prefix pre; /* padded: bytes read to key the padding, sent first */
	size_t pre_off;        /* of them, bytes given to the pump */
	struct gz_pump pump;
	enum gz_coding coding; /* of the pump's pool */
	/* HND_FD: the entry's strong ETag, to remember the gzip length once
	 * the member is complete (hnd_store.c); "" for none. */
	char etag[HND_STORE_ETAG_MAX + 1];
	uint64_t resource; /* the entry's when made (read without its lock later) */
	/* Content-Digest trailer: the SHA-256 of the gzip bytes so far. */
	bool digest;
	struct sha256_ctx sha;
	struct MHD_Response *v; /* the stream's response, for the trailer */
	bool in_place;          /* v is the entry's own response: no reference */
	/* Length hiding (hnd_pad.c): nothing goes out until the key's bytes
	 * are in the prefix; then the pump writes the member's header with
	 * the padding as its comment (gz_pump_set_comment). pad_on: wanted;
	 * pad: its bytes once known; pc: keyed with the ETag at creation. */
	bool pad_on, pad_keyed;
	size_t pad;
	struct hnd_pad_ctx pc;
	uint64_t charge; /* on the coder budget until the compressor goes back */
};

int
hnd_coder_charge(struct mhdgz *gz, enum gz_coding coding, bool low_latency, uint64_t *charge_ret)
{
	uint64_t charge, live = atomic_load(&gz->coder_live);
	int rc = gz_pool_state_nbytes(hnd_stream_pool(gz, coding, low_latency), &charge);

	if (rc < 0)
		return rc;
	do {
		if (gz->coder_budget != UINT64_MAX &&
		    (charge > gz->coder_budget || live > gz->coder_budget - charge))
			return 1;
	} while (!atomic_compare_exchange_weak(&gz->coder_live, &live, live + charge));
	*charge_ret = charge;
	return 0;
}

void
hnd_coder_uncharge(struct mhdgz *gz, uint64_t charge)
{
	atomic_fetch_sub(&gz->coder_live, charge);
}

/* The pump gave its compressor back (its end, or a failure): so does the
 * stream its charge (test_coder_budget, check_hnd_stream_lifetime.c). */
static void
stream_uncharge(struct hnd_stream *st)
{
	if (st->charge && !st->pump.c) {
		hnd_coder_uncharge(st->gz, st->charge);
		st->charge = 0;
	}
}

/* The identity response is the application's own: its reader's return
 * goes to libmicrohttpd unchanged, which ends the response at an early
 * END_OF_STREAM as it would without mhdgz (sized_reader_ends_early_wire). */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max);

ssize_t
hnd_entry_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct hnd_entry *e = cls;

	/* Set before libmicrohttpd first had the response, never changed. */
	if (e->in_place)
		return stream_read(e->in_place, pos, buf, max);
	if (e->kind == HND_CALLBACK)
		return hnd_callback_read(e, pos, buf, max);
	return hnd_source_read(e, e->fd, pos, buf, max);
}

/* The reader of an identity stream in a response of its own. */
static ssize_t
identity_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	return hnd_callback_read(cls, pos, buf, max);
}

static void
identity_free(void *cls)
{
	hnd_entry_unref(cls);
}

struct MHD_Response *
hnd_identity_stream(struct mhdgz *gz, struct hnd_entry *e, const struct hnd_facts *f)
{
	struct MHD_Response *v;

	atomic_fetch_add(&e->refs, 1);
	v = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, e->block_size, identity_read, e,
					      identity_free);
	if (!v) {
		hnd_entry_unref(e);
		return NULL;
	}
	if (hnd_copy_headers(gz, hnd_identity_fields(e), v, f, HND_REP_IDENTITY, true) < 0) {
		MHD_destroy_response(v); /* drops the reference */
		return NULL;
	}
	return v;
}

/* The prefix first, then the source from where the prefix ended. Returns
 * bytes, 0, or MHD_CONTENT_READER_END_*. */
static ssize_t
prefix_then_source(struct hnd_stream *st, uint64_t pos, uint8_t *buf, size_t max)
{
	if (st->pre_off < st->pre.len) {
		size_t n = st->pre.len - st->pre_off;

		if (n > max)
			n = max;
		memcpy(buf, st->pre.buf + st->pre_off, n);
		st->pre_off += n;
		return (ssize_t)n;
	}
	if (st->pre.failed)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	if (st->pre.eof)
		return MHD_CONTENT_READER_END_OF_STREAM;
	return hnd_source_read(st->e, st->fd, pos, (char *)buf, max);
}

/* The pump's source: libmicrohttpd's reader codes in, the core's out. */
static ssize_t
stream_source(void *cls, uint8_t *buf, size_t max)
{
	struct hnd_stream *st = cls;
	ssize_t n = prefix_then_source(st, st->pump.in_total, buf, max);

	if (n == MHD_CONTENT_READER_END_OF_STREAM)
		return GZ_SOURCE_END;
	if (n < 0)
		return GZ_SOURCE_ERROR;
	return n;
}

/* Bytes read at a time for the prefix and the key: a reader's block. */
static size_t
read_block(const struct hnd_entry *e)
{
	return e->kind == HND_CALLBACK ? e->block_size : HND_FD_BLOCK;
}

/*
 * Length hiding: read the bytes the padding is keyed on into the prefix
 * (the pump sends them first): the first HND_PAD_KEY_NBYTES of the body,
 * or all of it, or what came before an error; for a low-latency reader
 * (not a file, which never stalls) only its first call, so that it gains
 * no latency. An application's reader or a pipe is called once per call
 * here, as libmicrohttpd would call it once per read: its connection's
 * thread serves its other connections between the calls
 * (pad_key_interleaves, check_hnd_stream_latency.c). The prefix has
 * room for it (pad_prepare). Returns 1 once keyed, 0 when the source has
 * no data now or was called once already (call again).
 */
static int
pad_key(struct hnd_stream *st)
{
	struct hnd_entry *e = st->e;
	size_t blk = read_block(e);
	bool one_call = st->pump.low_latency && e->kind != HND_FD;
	bool paced = e->kind != HND_FD;
	unsigned int calls = 0;

	while (!st->pre.eof && !st->pre.failed && st->pre.len < HND_PAD_KEY_NBYTES &&
	       !(one_call && st->pre.len > 0)) {
		ssize_t n;

		if (paced && calls++ > 0)
			return 0;
		n = hnd_source_read(e, st->fd, st->pre.len, (char *)st->pre.buf + st->pre.len, blk);
		if (n == MHD_CONTENT_READER_END_OF_STREAM)
			st->pre.eof = true;
		else if (n < 0)
			st->pre.failed = true;
		else if (n == 0)
			return 0;
		else
			st->pre.len += (size_t)n;
	}
	hnd_pad_update(&st->pc, st->pre.buf, st->pre.len);
	st->pad = hnd_pad_end(st->gz, &st->pc);
	st->pad_keyed = true;
	return 1;
}

/* What length hiding needs, allocated when the stream is made so that a
 * failure still serves identity: the prefix grown to hold the key's bytes
 * (its contents kept). 0 or MHDGZ_ENOMEM (st->pre unchanged). */
static int
pad_prepare(struct hnd_stream *st)
{
	size_t cap = HND_PAD_KEY_NBYTES + read_block(st->e);
	uint8_t *buf;

	if (st->pre.len > HND_PAD_KEY_NBYTES) /* keyed on what is held: nothing to read */
		cap = st->pre.len;
	buf = gz_malloc(cap);
	if (!buf)
		return MHDGZ_ENOMEM;
	if (st->pre.len)
		memcpy(buf, st->pre.buf, st->pre.len);
	gz_free(st->pre.buf);
	st->pre.buf = buf;
	return 0;
}

static ssize_t
stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct hnd_stream *st = cls;
	bool end = false;
	ssize_t n;

	(void)pos; /* compressed bytes sent so far; the pump tracks the source */
	if (st->pad_on && !st->pad_keyed) {
		if (pad_key(st) == 0)
			return 0; /* the key's bytes are not all in yet */
		if (gz_pump_set_comment(&st->pump, st->pad) < 0)
			st->pad = 0; /* sent unpadded rather than not at all */
	}
	n = gz_pump_read(&st->pump, stream_source, st, (uint8_t *)buf, max, &end);
	stream_uncharge(st);
	if (n < 0) {
		/* The user's error, a file read failure or a compressor failure:
		 * end the response with an error, never a fake trailer. */
		if (!st->failed) {
			st->failed = true;
			hnd_count(st->gz, HND_C_FAILURES, 1);
		}
		return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	if (n == 0 && end) {
		if (st->digest) {
			/* The member is whole: its digest goes in the trailer,
			 * which libmicrohttpd sends after this last call (a
			 * response of one connection, so no other reader). */
			char field[HND_CONTENT_DIGEST_MAX];

			st->digest = false;
			hnd_content_digest_value(&st->sha, field);
			if (MHD_add_response_footer(st->v, "Content-Digest", field) != MHD_YES) {
				hnd_count(st->gz, HND_C_FAILURES, 1);
				return MHD_CONTENT_READER_END_WITH_ERROR;
			}
		}
		return MHD_CONTENT_READER_END_OF_STREAM;
	}
	/* The bytes sent, the padded header among them. */
	if (st->digest && n > 0)
		sha256_update(&st->sha, (size_t)n, (const uint8_t *)buf);
	/* 0 without the end: no data yet and everything flushed; never an
	 * empty chunk (libmicrohttpd calls again). */
	return n;
}

/* Remember a file stream's coded length under its strong ETag (the stream
 * runs without its entry's lock: the entry's own name is not written). */
static void
stream_len_put(const struct hnd_stream *st, uint64_t len)
{
	struct mhdgz *gz = st->gz;
	struct hnd_store_key k;
	struct hnd_store_val v = { .len = len };

	if (!hnd_store_key_etag(&k, st->etag, st->e->body_len, st->resource))
		return;
	hnd_store_key_coding(&k, st->coding, gz->coder[st->coding].level, st->pad_on,
			     st->pump.low_latency ? HND_SM_STREAM_LL : HND_SM_STREAM, NULL);
	hnd_store_put(gz, &k, &v, -1);
}

static void
stream_free(void *cls)
{
	struct hnd_stream *st = cls;
	struct hnd_entry *e = st->e;
	bool in_place = st->in_place;
	uint64_t out_total = st->pump.out_total; /* the padding among them */

	/* Abandoned (client gone) or finished: the compressor goes back now. */
	if (st->pump.done && st->etag[0]) /* a file's whole member: its length */
		stream_len_put(st, out_total);
	hnd_count(st->gz, HND_C_BYTES_IN, st->pump.in_total);
	hnd_count(st->gz, HND_C_BYTES_OUT, out_total);
	hnd_count(st->gz, HND_C_CODED_IN0 + st->coding, st->pump.in_total);
	hnd_count(st->gz, HND_C_CODED_OUT0 + st->coding, out_total);
	gz_pump_fini(&st->pump);
	stream_uncharge(st);
	hnd_prefix_fini(&st->pre);
	if (st->fd >= 0)
		close(st->fd);
	gz_free(st);
	if (!in_place)
		hnd_entry_unref(e);
}


/* A stream of e coded as f says, not yet in a response; NULL on failure. */
static struct hnd_stream *
stream_new(struct mhdgz *gz, struct hnd_entry *e, const struct hnd_facts *f, bool low_latency,
	   uint64_t charge)
{
	const char *etag = f->etag;
	enum gz_coding coding = f->coding;
	struct hnd_stream *st;

	st = gz_calloc(1, sizeof *st);
	if (!st) {
		hnd_coder_uncharge(gz, charge);
		return NULL;
	}
	st->charge = charge;
	st->gz = gz;
	st->e = e;
	st->fd = -1;
	st->coding = coding;
	/* Only a file gives the same bytes every time (a reader may stall,
	 * which adds flushes); the store names lengths by strong ETags only. */
	if (e->kind == HND_FD && etag && strlen(etag) < sizeof st->etag)
		memcpy(st->etag, etag, strlen(etag) + 1);
	st->resource = e->resource;
	st->pad_on = hnd_padded(gz, e, coding);
	if (st->pad_on)
		hnd_pad_begin(gz, HND_PAD_STREAM, etag, HND_PAD_KEY_NBYTES, &st->pc);
	if (e->kind == HND_FD) {
		st->fd = fcntl(e->fd, F_DUPFD_CLOEXEC, 0); /* not inherited by children */
		if (st->fd < 0)
			goto fail;
	}
	if (st->pad_on && pad_prepare(st) < 0)
		goto fail;
	/* An application's reader or pipe may block or always be ready: paced
	 * (one call per libmicrohttpd read, bytes out after each); a file is
	 * read as fast as it compresses, and its coded bytes stay those its
	 * computed length says (hnd_stream_len.c). */
	if (gz_pump_init(&st->pump, hnd_stream_pool(gz, coding, low_latency),
			 e->kind == HND_CALLBACK ? e->block_size : HND_FD_BLOCK,
			 (low_latency ? GZ_PUMP_LOW_LATENCY : 0) |
				 (e->kind == HND_FD ? 0 : GZ_PUMP_PACED)) < 0)
		goto fail;
	return st;
fail:
	gz_pump_fini(&st->pump);
	stream_uncharge(st);
	hnd_prefix_fini(&st->pre);
	if (st->fd >= 0)
		close(st->fd);
	gz_free(st);
	return NULL;
}

static void
stream_digest(struct hnd_stream *st, struct MHD_Response *v)
{
	st->digest = true;
	st->v = v;
	sha256_init(&st->sha);
}

struct MHD_Response *
hnd_gzip_stream_new(struct mhdgz *gz, struct hnd_entry *e, struct MHD_Response *r,
		    const struct hnd_facts *f, bool low_latency, bool digest, uint64_t charge)
{
	struct hnd_stream *st = stream_new(gz, e, f, low_latency, charge);
	struct MHD_Response *v;

	if (!st)
		return NULL;
	atomic_fetch_add(&e->refs, 1);
	v = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, HND_FD_BLOCK, stream_read, st,
					      stream_free);
	if (!v) {
		stream_free(st); /* drops the reference just taken */
		return NULL;
	}
	if (hnd_copy_headers(gz, r, v, f, HND_REP_GZIP, true) < 0 ||
	    MHD_add_response_header(v, MHD_HTTP_HEADER_CONTENT_ENCODING,
				    gz_coding_name(f->coding)) != MHD_YES)
		goto fail_v;
	if (digest) {
		stream_digest(st, v);
		if (MHD_add_response_header(v, MHD_HTTP_HEADER_TRAILER, "Content-Digest") !=
		    MHD_YES)
			goto fail_v;
	}
	return v;
fail_v:
	MHD_destroy_response(v); /* frees st */
	return NULL;
}

/*
 * The application's response carries the stream itself: libmicrohttpd
 * keeps it, and with it everything its reader may touch (a footer added to
 * it, say), for as long as it reads, whenever the application drops its
 * own reference; its footers go out in the coded stream's trailer
 * (test_in_place_footers, check_hnd_stream_lifetime.c). Queued again, it
 * is never given out a second time: later queues get responses of their
 * own built from the fields kept here.
 */
int
hnd_stream_in_place(struct mhdgz *gz, struct hnd_entry *e, struct MHD_Response *r,
		    const struct hnd_facts *f, bool low_latency, bool digest, uint64_t charge)
{
	struct hnd_stream *st = stream_new(gz, e, f, low_latency, charge);
	struct MHD_Response *orig;

	if (!st)
		return MHDGZ_ENOMEM;
	st->in_place = true;
	orig = MHD_create_response_from_buffer_with_free_callback_cls(0, NULL, NULL, NULL);
	if (!orig || hnd_copy_fields(r, orig) < 0 ||
	    hnd_rewrite_coded(gz, r, orig, f, digest) < 0) {
		if (orig)
			MHD_destroy_response(orig);
		stream_free(st);
		return MHDGZ_EMHD;
	}
	if (digest)
		stream_digest(st, r);
	e->fields = orig;
	e->in_place = st;
	e->in_place_free = stream_free;
	return 0;
}

void
hnd_prefix_fini(struct hnd_prefix *px)
{
	gz_free(px->buf);
	memset(px, 0, sizeof *px);
}
