/* gz_stream.c: the stream pump: one gzip member from a pull source, with stall, low-latency and paced sync flushes. */
#include "config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "gz_alloc.h"
#include "gz_error.h"
#include "gz_stream.h"

/* Monotonic microseconds, for the paced pump's flush bound. */
static uint64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int
gz_pump_init(struct gz_pump *p, struct gz_pool *pool, size_t in_cap, unsigned int flags)
{
	int rc;

	if (!p || !pool || in_cap == 0)
		return GZ_EINVAL;
	memset(p, 0, sizeof *p);
	if (!(gz_pool_backend(pool)->caps & GZ_CAP_STREAM))
		return GZ_EINVAL;
	p->pool = pool;
	p->low_latency = flags & GZ_PUMP_LOW_LATENCY;
	p->paced = flags & GZ_PUMP_PACED;
	if (p->paced)
		p->last_out_us = now_us();
	p->in_cap = in_cap;
	p->in = gz_malloc(in_cap);
	if (!p->in)
		return GZ_ENOMEM;
	rc = gz_pool_get(pool, &p->c);
	if (rc < 0) {
		gz_free(p->in);
		p->in = NULL;
		return rc;
	}
	return 0;
}

int
gz_pump_set_comment(struct gz_pump *p, size_t comment_nbytes)
{
	if (!p || !p->c || comment_nbytes == 0 || p->out_total > 0 || p->hdr_len > 0 ||
	    p->c->be->coding != GZ_CODING_GZIP)
		return GZ_EINVAL;
	p->comment_nbytes = comment_nbytes;
	return 0;
}

/* The compressor goes back as soon as it has nothing more to do. */
static void
pump_release(struct gz_pump *p)
{
	if (p->c) {
		gz_pool_put(p->pool, p->c);
		p->c = NULL;
	}
}

void
gz_pump_fini(struct gz_pump *p)
{
	if (!p)
		return;
	pump_release(p);
	gz_free(p->in);
	p->in = NULL;
}

static ssize_t
pump_fail(struct gz_pump *p, int err)
{
	pump_release(p);
	p->err = err;
	return err;
}

/* The loop of gz_pump_read over out[0 .. out_cap): returns the bytes
 * written or an error; *flushed when a sync flush completed. Output that
 * is the member's header alone does not count as output for the paced
 * flush bound (the data is still held). */
static ssize_t
pump_fill(struct gz_pump *p, gz_source_fn src, void *cls, uint8_t *out, size_t out_cap,
	  bool *end_ret, bool *flushed)
{
	size_t n = 0;
	bool pulled = false; /* the source was called in this read */

	while (n < out_cap) {
		struct gz_io io;
		enum gz_flush flush;
		size_t in_before, out_before;
		int rc;

		if (p->in_len == 0 && !p->eof && !p->flushing && pulled && p->paced) {
			/* One source call per read: hand over what there is, or
			 * flush what has been held too long. */
			if ((n > 0 && !(p->out_total == 0 && n <= sizeof p->held)) ||
			    !p->unflushed || now_us() - p->last_out_us < GZ_PUMP_FLUSH_US)
				break;
			p->flushing = true;
		} else if (p->in_len == 0 && !p->eof && !p->flushing) {
			ssize_t r;

			/* A low-latency chunk goes out before the next is asked for. */
			if (n > 0 && p->low_latency)
				break;
			pulled = true;
			r = src(cls, p->in, p->in_cap);
			if (r == GZ_SOURCE_END) {
				p->eof = true;
			} else if (r < 0) {
				/* Never a fake trailer after a failed source. */
				return pump_fail(p, GZ_ESOURCE);
			} else if (r == 0) {
				/* No data yet, perhaps for long (a log tail): flush
				 * what the compressor holds once, then hand over what
				 * there is. */
				if (!p->unflushed)
					break;
				p->flushing = true;
			} else {
				p->in_off = 0;
				p->in_len = (size_t)r;
				p->in_total += (uint64_t)r;
				p->flushing = p->low_latency;
				p->unflushed = true;
			}
		}
		flush = p->eof ? GZ_FLUSH_FINISH : p->flushing ? GZ_FLUSH_SYNC : GZ_FLUSH_NONE;
		io.in = p->in + p->in_off;
		io.in_len = p->in_len;
		io.out = out + n;
		io.out_cap = out_cap - n;
		in_before = io.in_len;
		out_before = io.out_cap;
		rc = p->c->be->stream(p->c, &io, flush);
		if (rc < 0)
			return pump_fail(p, GZ_EBACKEND);
		p->in_off += in_before - io.in_len;
		p->in_len = io.in_len;
		n += out_before - io.out_cap;
		if (rc == GZ_STREAM_END) {
			p->done = true;
			*end_ret = true;
			pump_release(p);
			break;
		}
		if (p->flushing && io.in_len == 0 && io.out_cap > 0) {
			p->flushing = false; /* flush complete */
			*flushed = true;
			p->unflushed = false;
			continue;
		}
		/* Input left, room to write, nothing done: the compressor is
		 * broken, and looping would never end. */
		if (io.in_len == in_before && io.out_cap == out_before && io.out_cap > 0 &&
		    flush == GZ_FLUSH_NONE && io.in_len > 0)
			return pump_fail(p, GZ_EBACKEND);
	}
	return (ssize_t)n;
}

/*
 * The state machine. Each round either pulls a source chunk (when the
 * input is used up, the source has not ended and no sync flush is pending;
 * for a paced pump only once per read, after which it returns or, held past
 * GZ_PUMP_FLUSH_US, flushes) or advances the compressor with the flush the
 * state calls for: FINISH after the end, SYNC while a flush is pending (a
 * stall, every chunk in low-latency mode, the paced bound), NONE otherwise.
 * A sync flush is complete when the compressor has consumed all input and
 * still has output space (gz_backend.h). The loop is pump_fill; around it,
 * a paced member's header alone is held back for the read with more.
 */
ssize_t
gz_pump_read(struct gz_pump *p, gz_source_fn src, void *cls, uint8_t *out, size_t out_cap,
	     bool *end_ret)
{
	size_t hl = p->held_len - p->held_off; /* a paced member's header, held */
	bool flushed = false;
	ssize_t n;

	*end_ret = false;
	if (p->done) {
		*end_ret = true;
		return 0;
	}
	if (p->err)
		return p->err;
	if (!p->c)
		return GZ_EINVAL;
	if (p->comment_nbytes && p->hdr_sent < GZ_HEADER_NBYTES + p->comment_nbytes) {
		/* The backend's header first (into hdr), then the rewritten
		 * one, alone in its reads. */
		size_t left;
		int rc;

		while (p->hdr_len < GZ_HEADER_NBYTES) {
			n = pump_fill(p, src, cls, p->hdr + p->hdr_len,
				      GZ_HEADER_NBYTES - p->hdr_len, end_ret, &flushed);
			if (n < 0)
				return n;
			if (n == 0) /* a member is longer than its header */
				return *end_ret ? pump_fail(p, GZ_EBACKEND) : 0;
			p->hdr_len += (size_t)n;
		}
		left = GZ_HEADER_NBYTES + p->comment_nbytes - p->hdr_sent;
		n = (ssize_t)(left < out_cap ? left : out_cap);
		rc = gz_header_comment(p->hdr, p->comment_nbytes, p->hdr_sent, out, (size_t)n);
		if (rc < 0)
			return pump_fail(p, rc);
		p->hdr_sent += (size_t)n;
		goto out;
	}
	if (hl > 0 && out_cap <= hl) { /* no room for more: part of it */
		memcpy(out, p->held + p->held_off, out_cap);
		p->held_off += out_cap;
		n = (ssize_t)out_cap;
		goto out;
	}
	n = pump_fill(p, src, cls, out + hl, out_cap - hl, end_ret, &flushed);
	if (n < 0)
		return n;
	if (hl > 0 && n == 0 && !*end_ret)
		return 0; /* still nothing past the header: it waits on */
	if (hl == 0 && p->paced && p->out_total == 0 && n > 0 && (size_t)n <= sizeof p->held &&
	    !flushed && !p->flushing && !*end_ret) {
		/* The member's header alone (the compressor holds the data):
		 * not worth a chunk of its own; the read with more sends it
		 * first. */
		memcpy(p->held, out, (size_t)n);
		p->held_len = (size_t)n;
		p->held_off = 0;
		return 0;
	}
	memcpy(out, p->held + p->held_off, hl);
	p->held_off += hl;
	n += (ssize_t)hl;
out:
	if (p->held_off == p->held_len)
		p->held_len = p->held_off = 0;
	p->out_total += (uint64_t)n;
	if (p->paced && n > 0)
		p->last_out_us = now_us();
	return n;
}
