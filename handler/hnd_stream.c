/* hnd_stream.c: the libmicrohttpd side of streams: a content reader over the core's stream pump, and the identity reader. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "hnd_internal.h"
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
	struct hnd_prefix pre; /* bytes read at queue time, sent first */
	size_t pre_off;        /* of them, bytes given to the pump */
	struct gz_pump pump;
	/* HND_FD: the entry's strong ETag, to remember the gzip length once
	 * the member is complete (hnd_memo.c); "" for none. */
	char etag[HND_MEMO_ETAG_MAX];
};

/* Read the source at pos into buf: the user's reader or the file.
 * Returns bytes, 0 (no data yet), or MHD_CONTENT_READER_END_*. */
static ssize_t
source_read(struct hnd_entry *e, int fd, uint64_t pos, char *buf, size_t max)
{
	ssize_t n;

	if (e->body_len != MHD_SIZE_UNKNOWN) {
		if (pos >= e->body_len)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (max > e->body_len - pos)
			max = (size_t)(e->body_len - pos);
	}
	if (e->kind == HND_PIPE) {
		/* A pipe is read once, in order: pos is where it stands. */
		pthread_mutex_lock(&e->read_lock);
		do
			n = read(e->fd, buf, max);
		while (n < 0 && errno == EINTR);
		pthread_mutex_unlock(&e->read_lock);
		if (n == 0)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK
				       ? 0
				       : MHD_CONTENT_READER_END_WITH_ERROR;
		return n;
	}
	if (e->kind == HND_CALLBACK) {
		/* libmicrohttpd never runs one response's reader on two threads
		 * at once (it holds the response's mutex around the call);
		 * streams of one entry keep that promise, so a reader with
		 * state (a FILE * it seeks, say) works as it did before. */
		pthread_mutex_lock(&e->read_lock);
		n = e->crc(e->crc_cls, pos, buf, max);
		pthread_mutex_unlock(&e->read_lock);
		/* Ending before the announced size is an error, as it is for
		 * libmicrohttpd: never a complete-looking short body. */
		if (n == MHD_CONTENT_READER_END_OF_STREAM && e->body_len != MHD_SIZE_UNKNOWN)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		return n;
	}
	do
		n = pread(fd, buf, max, (off_t)(e->offset + pos));
	while (n < 0 && errno == EINTR);
	/* A file shorter than promised cannot be completed: error, not a
	 * silently truncated body. */
	if (n <= 0)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	return n;
}

ssize_t
hnd_entry_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct hnd_entry *e = cls;

	return source_read(e, e->fd, pos, buf, max);
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
	return source_read(st->e, st->fd, pos, (char *)buf, max);
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

static ssize_t
stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct hnd_stream *st = cls;
	bool end;
	ssize_t n;

	(void)pos; /* compressed bytes sent so far; the pump tracks the source */
	n = gz_pump_read(&st->pump, stream_source, st, (uint8_t *)buf, max, &end);
	if (n < 0) {
		/* The user's error, a file read failure or a compressor failure:
		 * end the response with an error, never a fake trailer. */
		if (!st->failed) {
			st->failed = true;
			hnd_count(st->gz, HND_C_FAILURES, 1);
		}
		return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	if (n == 0 && end)
		return MHD_CONTENT_READER_END_OF_STREAM;
	/* 0 without the end: no data yet and everything flushed; never an
	 * empty chunk (libmicrohttpd calls again). */
	return n;
}

static void
stream_free(void *cls)
{
	struct hnd_stream *st = cls;

	/* Abandoned (client gone) or finished: the compressor goes back now. */
	if (st->pump.done && st->etag[0]) /* a file's whole member: its length */
		hnd_memo_put(&st->gz->memo, st->etag, st->e->body_len,
			     st->pump.low_latency ? HND_MEMO_STREAM_LL : HND_MEMO_STREAM,
			     st->pump.out_total);
	hnd_count(st->gz, HND_C_BYTES_IN, st->pump.in_total);
	hnd_count(st->gz, HND_C_BYTES_OUT, st->pump.out_total);
	gz_pump_fini(&st->pump);
	hnd_prefix_fini(&st->pre);
	if (st->fd >= 0)
		close(st->fd);
	hnd_entry_unref(st->e);
	gz_free(st);
}

struct MHD_Response *
hnd_gzip_stream_new(struct mhdgz *gz, struct hnd_entry *e, const char *etag, bool low_latency,
		    struct hnd_prefix *pre)
{
	struct hnd_stream *st;
	struct MHD_Response *v;

	st = gz_calloc(1, sizeof *st);
	if (!st)
		return NULL;
	st->gz = gz;
	st->e = e;
	st->fd = -1;
	/* Only a file gives the same bytes every time (a reader may stall,
	 * which adds flushes); hnd_memo_put takes strong ETags only. */
	if (e->kind == HND_FD && etag && strlen(etag) < sizeof st->etag)
		memcpy(st->etag, etag, strlen(etag) + 1);
	if (pre) { /* the prefix moves into the stream */
		st->pre = *pre;
		memset(pre, 0, sizeof *pre);
	}
	if (e->kind == HND_FD) {
		st->fd = fcntl(e->fd, F_DUPFD_CLOEXEC, 0); /* not inherited by children */
		if (st->fd < 0)
			goto fail;
	}
	if (gz_pump_init(&st->pump, low_latency ? gz->event_pool : gz->stream_pool,
			 e->kind == HND_CALLBACK ? e->block_size : HND_FD_BLOCK, low_latency) < 0)
		goto fail;
	atomic_fetch_add(&e->refs, 1);
	v = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, HND_FD_BLOCK, stream_read, st,
					      stream_free);
	if (!v) {
		stream_free(st); /* drops the reference just taken */
		return NULL;
	}
	return v;
fail:
	gz_pump_fini(&st->pump);
	if (pre) /* back to the caller, who still owns it on failure */
		*pre = st->pre;
	if (st->fd >= 0)
		close(st->fd);
	gz_free(st);
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* The first bytes of a stream of unknown size                              */

int
hnd_prefix_read(struct hnd_entry *e, size_t want, bool one_call, struct hnd_prefix *px)
{
	size_t cap;

	memset(px, 0, sizeof *px);
	if (want == 0)
		return 0;
	/* The reader is called with block_size bytes of room, as
	 * libmicrohttpd calls it (a reader may need that much for one item). */
	cap = want - 1 + e->block_size;
	px->buf = gz_malloc(cap);
	if (!px->buf)
		return MHDGZ_ENOMEM;
	/* Bounded: every round either adds bytes or ends (end, error, no data
	 * now, or the one call of a low-latency stream), and stops once want
	 * bytes are held. */
	while (px->len < want) {
		ssize_t n = source_read(e, e->fd, px->len, (char *)px->buf + px->len,
					e->block_size);

		if (n == MHD_CONTENT_READER_END_OF_STREAM) {
			px->eof = true;
			break;
		}
		if (n < 0) {
			px->failed = true;
			break;
		}
		px->len += (size_t)n;
		if (n == 0 || one_call)
			break;
	}
	return 0;
}

void
hnd_prefix_fini(struct hnd_prefix *px)
{
	gz_free(px->buf);
	memset(px, 0, sizeof *px);
}

/* An identity stream replaying a prefix, then reading on. */
static ssize_t
identity_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	return prefix_then_source(cls, pos, (uint8_t *)buf, max);
}

static void
identity_free(void *cls)
{
	struct hnd_stream *st = cls;

	hnd_prefix_fini(&st->pre);
	hnd_entry_unref(st->e);
	gz_free(st);
}

struct MHD_Response *
hnd_identity_stream_new(struct mhdgz *gz, struct hnd_entry *e, struct hnd_prefix *pre)
{
	struct hnd_stream *st = gz_calloc(1, sizeof *st);
	struct MHD_Response *v;

	if (!st)
		return NULL;
	st->gz = gz;
	st->e = e;
	st->fd = -1;
	atomic_fetch_add(&e->refs, 1);
	v = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, e->block_size, identity_read, st,
					      identity_free);
	if (!v) {
		hnd_entry_unref(e);
		gz_free(st);
		return NULL;
	}
	st->pre = *pre; /* moves in only on success */
	memset(pre, 0, sizeof *pre);
	return v;
}

/* A pump's source reading an entry directly (HEAD: no libmicrohttpd
 * connection reads it). A reader with no data now ends the count: the
 * length cannot be known without waiting. */
struct count_src {
	struct hnd_entry *e;
	struct gz_pump *pump;
	bool stalled;
};

static ssize_t
count_source(void *cls, uint8_t *buf, size_t max)
{
	struct count_src *cs = cls;
	ssize_t n = source_read(cs->e, cs->e->fd, cs->pump->in_total, (char *)buf, max);

	if (n == MHD_CONTENT_READER_END_OF_STREAM)
		return GZ_SOURCE_END;
	if (n == 0)
		cs->stalled = true;
	if (n <= 0)
		return GZ_SOURCE_ERROR;
	return n;
}

/* The length by compressing: what hnd_gzip_stream_length() does on a miss. */
static int
stream_length(struct mhdgz *gz, struct hnd_entry *e, bool low_latency, uint64_t *len_ret)
{
	struct gz_pump pump;
	struct count_src cs = { .e = e, .pump = &pump };
	uint8_t out[HND_FD_BLOCK / 2];
	uint64_t total = 0;
	bool end = false;
	int rc;

	if (e->body_len == MHD_SIZE_UNKNOWN || e->body_len > HND_HEAD_LENGTH_MAX)
		return MHDGZ_ENOTSUP;
	/* The same input block and flush policy as a GET's stream, so the
	 * same bytes: libmicrohttpd's buffer size only cuts them differently. */
	/* A HEAD never runs the application's reader (it may be costly or
	 * have effects); only a file is read to learn the length. */
	if (e->kind != HND_FD)
		return MHDGZ_ENOTSUP;
	/* The pool the stream itself would use: same settings, same bytes. */
	rc = gz_pump_init(&pump, low_latency ? gz->event_pool : gz->stream_pool,
			  e->kind == HND_CALLBACK ? e->block_size : HND_FD_BLOCK, low_latency);
	if (rc < 0)
		return rc;
	/* Bounded: every round consumes input or writes output, and the
	 * input is at most body_len bytes. */
	while (!end) {
		ssize_t n = gz_pump_read(&pump, count_source, &cs, out, sizeof out, &end);

		if (n < 0) {
			rc = cs.stalled ? MHDGZ_EBUSY : MHDGZ_EBACKEND;
			break;
		}
		total += (uint64_t)n;
	}
	gz_pump_fini(&pump);
	if (!end)
		return rc;
	*len_ret = total;
	return 0;
}

int
hnd_gzip_stream_length(struct mhdgz *gz, struct hnd_entry *e, const char *etag, bool low_latency,
		       uint64_t *len_ret)
{
	enum hnd_memo_mode mode = low_latency ? HND_MEMO_STREAM_LL : HND_MEMO_STREAM;
	int rc;

	/* Known for this response (the file as it was at the first count, as
	 * for a body compressed whole), or for its strong ETag. */
	if (e->kind == HND_FD && e->stream_len[low_latency]) {
		*len_ret = e->stream_len[low_latency];
		return 0;
	}
	if (e->kind == HND_FD && hnd_memo_get(&gz->memo, etag, e->body_len, mode, len_ret))
		return 0;
	rc = stream_length(gz, e, low_latency, len_ret);
	if (rc == 0) {
		hnd_count(gz, HND_C_COMPRESSIONS, 1);
		hnd_memo_put(&gz->memo, etag, e->body_len, mode, *len_ret);
		e->stream_len[low_latency] = *len_ret;
	}
	return rc;
}
