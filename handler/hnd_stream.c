/* hnd_stream.c: streaming responses: per-connection gzip streams over content readers and files. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "gz_alloc.h"
#include "hnd_internal.h"

/* Input buffer of a file stream in bytes: large enough that pread() and the
 * compressor's per-call overhead vanish, small enough to keep a thousand
 * concurrent streams under 32 MiB of input buffers. */
#ifndef HND_FD_BLOCK
#define HND_FD_BLOCK (32 * 1024)
#endif

/*
 * One gzip stream: the state of one connection sending a compressed
 * streaming response. libmicrohttpd calls stream_read with its buffer; we
 * fill it from the source (the user's reader or the file) through a
 * streaming compressor taken from the compressor pool, which goes back as soon
 * as the trailer is written or the connection ends.
 */
struct hnd_stream {
	struct mhdgz *gz;
	struct hnd_entry *e;      /* holds a reference */
	struct gz_compressor *c;  /* NULL once returned to the pool */
	int fd;                   /* HND_FD: our own duplicate; else -1 */
	uint64_t src_pos;         /* source bytes read so far */
	uint8_t *in;              /* source bytes not yet compressed */
	size_t in_cap, in_off, in_len;
	uint64_t out_total;       /* compressed bytes produced */
	bool low_latency;         /* sync-flush every source chunk */
	bool flushing;            /* a sync flush is not complete yet */
	bool unflushed;           /* input given since the last sync flush */
	bool eof;                 /* the source ended: finish the member */
	bool done;                /* the trailer has been written */
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

static void
stream_release_compressor(struct hnd_stream *st)
{
	if (st->c) {
		gz_pool_put(st->gz->stream_pool, st->c);
		st->c = NULL;
	}
}

static ssize_t
stream_fail(struct hnd_stream *st)
{
	stream_release_compressor(st);
	hnd_count(st->gz, HND_C_FAILURES, 1);
	return MHD_CONTENT_READER_END_WITH_ERROR;
}

static ssize_t
stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct hnd_stream *st = cls;
	size_t n = 0;

	(void)pos; /* compressed bytes sent so far; we track the source */
	if (st->done)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (!st->c)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	while (n < max) {
		struct gz_io io;
		enum gz_flush flush;
		size_t in_before, out_before;
		int rc;

		if (st->in_len == 0 && !st->eof && !st->flushing) {
			ssize_t r;

			/* A low-latency chunk goes out before we wait for the next. */
			if (n > 0 && st->low_latency)
				break;
			r = source_read(st->e, st->fd, st->src_pos, (char *)st->in, st->in_cap);
			if (r == MHD_CONTENT_READER_END_OF_STREAM) {
				st->eof = true;
			} else if (r < 0) {
				/* The user's error, or a file read failure: end the
				 * response with an error, never a fake trailer. */
				return stream_fail(st);
			} else if (r == 0) {
				/* No data yet. What the compressor holds would wait
				 * for the next data, which may be far off (a log
				 * tail): sync-flush it once, then hand over what we
				 * have; never an empty chunk (libmicrohttpd calls
				 * again). */
				if (!st->unflushed)
					break;
				st->flushing = true;
			} else {
				st->in_off = 0;
				st->in_len = (size_t)r;
				st->src_pos += (uint64_t)r;
				st->flushing = st->low_latency;
				st->unflushed = true;
			}
		}
		flush = st->eof ? GZ_FLUSH_FINISH : st->flushing ? GZ_FLUSH_SYNC : GZ_FLUSH_NONE;
		io.in = st->in + st->in_off;
		io.in_len = st->in_len;
		io.out = (uint8_t *)buf + n;
		io.out_cap = max - n;
		in_before = io.in_len;
		out_before = io.out_cap;
		rc = st->c->be->stream(st->c, &io, flush);
		if (rc < 0)
			return stream_fail(st);
		st->in_off += in_before - io.in_len;
		st->in_len = io.in_len;
		n += out_before - io.out_cap;
		if (rc == GZ_STREAM_END) {
			st->done = true;
			stream_release_compressor(st);
			break;
		}
		if (st->flushing && io.in_len == 0 && io.out_cap > 0) {
			st->flushing = false; /* flush complete */
			st->unflushed = false;
			continue;
		}
		if (io.in_len == in_before && io.out_cap == out_before && io.out_cap > 0 &&
		    flush == GZ_FLUSH_NONE && io.in_len > 0)
			return stream_fail(st); /* no progress with room: broken */
	}
	st->out_total += n;
	if (n == 0 && st->done)
		return MHD_CONTENT_READER_END_OF_STREAM;
	return (ssize_t)n;
}

static void
stream_free(void *cls)
{
	struct hnd_stream *st = cls;

	/* Abandoned (client gone) or finished: the compressor goes back now. */
	stream_release_compressor(st);
	hnd_count(st->gz, HND_C_BYTES_IN, st->src_pos);
	hnd_count(st->gz, HND_C_BYTES_OUT, st->out_total);
	if (st->fd >= 0)
		close(st->fd);
	gz_free(st->in);
	hnd_entry_unref(st->e);
	gz_free(st);
}

struct MHD_Response *
hnd_stream_variant(struct mhdgz *gz, struct hnd_entry *e, bool low_latency)
{
	struct hnd_stream *st;
	struct MHD_Response *v;

	st = gz_calloc(1, sizeof *st);
	if (!st)
		return NULL;
	st->gz = gz;
	st->e = e;
	st->fd = -1;
	st->low_latency = low_latency;
	st->in_cap = e->kind == HND_CALLBACK ? e->block_size : HND_FD_BLOCK;
	st->in = gz_malloc(st->in_cap);
	if (!st->in)
		goto fail;
	if (e->kind == HND_FD) {
		st->fd = dup(e->fd);
		if (st->fd < 0)
			goto fail;
	}
	if (gz_pool_get(gz->stream_pool, &st->c) < 0)
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
	stream_release_compressor(st);
	if (st->fd >= 0)
		close(st->fd);
	gz_free(st->in);
	gz_free(st);
	return NULL;
}
