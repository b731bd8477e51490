/* gz_inflate.c: a gzip request body inflated chunk by chunk within limits (zlib). */
#include <limits.h>
#include <stdbool.h>
#include <string.h>

#include <zlib.h>

#include "gz_alloc.h"
#include "gz_error.h"
#include "gz_inflate.h"

/* Decoded bytes per sink call when the caller does not say: big enough
 * that the per-call cost of inflate() and the sink vanishes, small enough
 * that a thousand uploads at once hold 16 MiB of output buffers. */
#ifndef GZ_INFLATE_OUT_CAP
#define GZ_INFLATE_OUT_CAP (16 * 1024)
#endif

/* zlib's window bits for a gzip wrapper only (15 + 16): a zlib or raw
 * deflate stream is not "gzip" (RFC 9110 section 8.4.1.3). */
#define GZ_INFLATE_WBITS 31

struct gz_inflate {
	z_stream zs;
	bool zs_ready;  /* inflateInit2 succeeded */
	bool in_member; /* a member has begun and not ended */
	struct gz_inflate_limits lim;
	gz_inflate_sink sink;
	void *cls;
	uint8_t *out;
	size_t out_cap;
	struct gz_inflate_counts n;
	enum gz_inflate_stop stop;
	int err; /* the final error once stopped, else 0 */
	int sink_rc;
};

int
gz_inflate_new(const struct gz_inflate_limits *lim, size_t out_cap, gz_inflate_sink sink, void *cls,
	       struct gz_inflate **ret)
{
	struct gz_inflate *z;

	if (!sink || !ret)
		return GZ_EINVAL;
	z = gz_calloc(1, sizeof *z);
	if (!z)
		return GZ_ENOMEM;
	if (lim)
		z->lim = *lim;
	z->sink = sink;
	z->cls = cls;
	z->out_cap = out_cap ? out_cap : GZ_INFLATE_OUT_CAP;
	if (z->out_cap > UINT_MAX)
		z->out_cap = UINT_MAX;
	z->out = gz_malloc(z->out_cap);
	if (!z->out)
		goto nomem;
	z->zs.zalloc = gz_zalloc;
	z->zs.zfree = gz_zfree;
	if (inflateInit2(&z->zs, GZ_INFLATE_WBITS) != Z_OK)
		goto nomem;
	z->zs_ready = true;
	*ret = z;
	return GZ_OK;
nomem:
	gz_inflate_free(z);
	return GZ_ENOMEM;
}

void
gz_inflate_free(struct gz_inflate *z)
{
	if (!z)
		return;
	if (z->zs_ready)
		inflateEnd(&z->zs);
	gz_free(z->out);
	gz_free(z);
}

static int
stop(struct gz_inflate *z, int err, enum gz_inflate_stop why)
{
	z->err = err;
	z->stop = why;
	return err;
}

/* Would total decoded bytes break the ratio limit? Only past the burst;
 * a product that does not fit in 64 bits is above any total. */
static bool
over_ratio(const struct gz_inflate *z, uint64_t total)
{
	uint64_t r = z->lim.ratio;

	if (r == 0 || total <= z->lim.ratio_burst)
		return false;
	if (z->n.in_nbytes > UINT64_MAX / r)
		return false;
	return total > r * z->n.in_nbytes;
}

/* Give out[0..n) to the sink. */
static int
deliver(struct gz_inflate *z, size_t n)
{
	int src = z->sink(z->cls, z->out, n);

	if (src != 0) {
		z->sink_rc = src;
		return stop(z, GZ_ESINK, GZ_INF_SINK);
	}
	z->n.out_nbytes += n;
	return GZ_OK;
}

int
gz_inflate_feed(struct gz_inflate *z, const uint8_t *in, size_t len)
{
	/* more: the last inflate() filled the output space, so it may hold
	 * output that needs no more input (a long match): call it again. */
	bool more = false;

	if (!z)
		return GZ_EINVAL;
	if (z->err)
		return z->err;
	while (len > 0 || more) {
		size_t room, took, produced;
		uint64_t total;
		int rc;

		if (!z->in_member) {
			if (len == 0)
				break;
			if (z->lim.max_members && z->n.members >= z->lim.max_members)
				return stop(z, GZ_ELIMIT, GZ_INF_MEMBERS);
			z->n.members++;
			z->in_member = true;
		}
		/* Never decode more than one byte past max_out: that byte
		 * tells "over the limit" without a large overshoot. */
		room = z->out_cap;
		if (z->lim.max_out && z->lim.max_out - z->n.out_nbytes < room)
			room = (size_t)(z->lim.max_out - z->n.out_nbytes) + 1;
		took = len > UINT_MAX ? UINT_MAX : len;
		z->zs.next_in = (Bytef *)(uintptr_t)in;
		z->zs.avail_in = (uInt)took;
		z->zs.next_out = z->out;
		z->zs.avail_out = (uInt)room;
		rc = inflate(&z->zs, Z_NO_FLUSH);
		took -= z->zs.avail_in;
		in += took;
		len -= took;
		z->n.in_nbytes += took;
		produced = room - z->zs.avail_out;
		more = z->zs.avail_out == 0;
		if (rc == Z_MEM_ERROR)
			return stop(z, GZ_ENOMEM, GZ_INF_NOMEM);
		if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
			return stop(z, GZ_EDATA, GZ_INF_BAD_DATA);
		if (rc == Z_BUF_ERROR && took == 0 && produced == 0 && len > 0)
			return stop(z, GZ_EDATA, GZ_INF_BAD_DATA); /* no progress possible */
		total = z->n.out_nbytes + produced;
		if (z->lim.max_out && total > z->lim.max_out) {
			/* The bytes up to the limit go out first, so that a
			 * refused body has delivered exactly max_out bytes. */
			if (produced > 1 && deliver(z, produced - 1) < 0)
				return z->err;
			return stop(z, GZ_ELIMIT, GZ_INF_MAX_OUT);
		}
		if (over_ratio(z, total))
			return stop(z, GZ_ELIMIT, GZ_INF_RATIO);
		if (produced && deliver(z, produced) < 0)
			return z->err;
		if (rc == Z_STREAM_END) {
			z->n.members_done++;
			z->in_member = false;
			more = false;
			if (inflateReset(&z->zs) != Z_OK)
				return stop(z, GZ_EDATA, GZ_INF_BAD_DATA);
		}
	}
	return GZ_OK;
}

int
gz_inflate_finish(struct gz_inflate *z)
{
	if (!z)
		return GZ_EINVAL;
	if (z->err)
		return z->err;
	if (z->in_member)
		return stop(z, GZ_EDATA, GZ_INF_TRUNCATED);
	return GZ_OK;
}

void
gz_inflate_get_counts(const struct gz_inflate *z, struct gz_inflate_counts *c)
{
	*c = z->n;
}

enum gz_inflate_stop
gz_inflate_stopped(const struct gz_inflate *z)
{
	return z->stop;
}

int
gz_inflate_sink_rc(const struct gz_inflate *z)
{
	return z->sink_rc;
}
