/* fuzz_inflate.c: libFuzzer target for the request body inflater (gz_inflate.c): any bytes, any pieces, any limits, checked against zlib. */
/*
 * Input: a byte of limits, a byte of piece sizes, a mode byte, then the
 * body:
 *
 *   limits   bits 0-2: max_out (none, 1, 100, 4096, 65536, 1 MiB, 8 MiB, 0x1000);
 *            bits 3-4: ratio (none, 2, 200, 1033), burst 0 or 4096 (bit 5);
 *            bits 6-7: max_members (none, 1, 2, 16)
 *   pieces   the body is fed in pieces of 1 + (pieces x k) mod 4099 bytes
 *            (k counting up), so 1-byte and odd pieces mix with large ones;
 *            the output space is 1 + pieces x 61 bytes (1..15556)
 *   mode     0x80 clear: the rest is the body as it is;
 *            0x80 set: the rest is split into up to four payloads at its
 *            0xFF bytes, each deflated into a gzip member by zlib (level
 *            mode & 7 + 1), back to back; then, if mode bit 3 is set, the
 *            body is cut to (mode >> 4) sixteenths of its length (a
 *            truncated member, or nothing)
 *
 * The reference is zlib's own inflate (window bits 31) over the whole body,
 * member after member, up to FZ_REF_CAP output bytes. Checked:
 *  - every piece the sink gets is 1..out_cap bytes, and everything it got
 *    is the reference's output from the start;
 *  - the counters: decoded bytes = bytes the sink got; encoded bytes <=
 *    bytes fed; members_done <= members;
 *  - GZ_OK after gz_inflate_finish only if the reference decodes the whole
 *    body, to exactly the same bytes and number of members;
 *  - a body the reference decodes, within the limits, is accepted (or
 *    stopped by the ratio, which depends on the pieces);
 *  - each stop has its cause: max_out delivered exactly max_out bytes of a
 *    longer decoding; members only past max_members; ratio only past the
 *    burst; bad data or truncated only where the reference fails too;
 *  - an error is final: another feed and finish return it again.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "gz_error.h"
#include "gz_inflate.h"
#include "fuzz_util.h"

/* Most reference output kept, bytes: beyond it only a prefix is compared. */
#define FZ_REF_CAP (16u << 20)

/* A growing byte buffer. */
struct bytes {
	uint8_t *p;
	size_t len, cap;
};

static void
bytes_add(struct bytes *b, const uint8_t *p, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n)
			cap *= 2;
		b->p = realloc(b->p, cap);
		if (!b->p)
			abort();
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
}

/* zlib over the whole body, member after member. Returns 1 when every
 * member is whole and nothing else follows, 0 otherwise; *big when the
 * output passed FZ_REF_CAP (then out holds only the first bytes). */
static int
ref_inflate(const uint8_t *in, size_t n, struct bytes *out, unsigned int *members, bool *big)
{
	z_stream zs;
	size_t off = 0;
	int ok = 1;

	*members = 0;
	*big = false;
	memset(&zs, 0, sizeof zs);
	if (inflateInit2(&zs, 31) != Z_OK)
		abort();
	while (off < n && ok) {
		(*members)++;
		zs.next_in = (Bytef *)(uintptr_t)(in + off);
		zs.avail_in = (uInt)(n - off);
		for (;;) {
			uint8_t buf[16384];
			int rc;

			zs.next_out = buf;
			zs.avail_out = sizeof buf;
			rc = inflate(&zs, Z_NO_FLUSH);
			if (out->len < FZ_REF_CAP)
				bytes_add(out, buf, sizeof buf - zs.avail_out);
			else if (zs.avail_out < sizeof buf)
				*big = true;
			if (rc == Z_STREAM_END)
				break;
			if (rc != Z_OK) {
				ok = 0;
				break;
			}
		}
		off = n - zs.avail_in;
		inflateReset(&zs);
	}
	inflateEnd(&zs);
	return ok;
}

struct sink {
	struct bytes got;
	size_t out_cap;
};

static int
sink_fn(void *cls, const uint8_t *p, size_t n)
{
	struct sink *s = cls;

	FZ_CHECK(n >= 1 && n <= s->out_cap, "piece of %zu bytes, out_cap %zu", n, s->out_cap);
	bytes_add(&s->got, p, n);
	return 0;
}

/* The body of a "built" input: members of the payloads, then the cut. */
static void
build(struct fz *f, uint8_t mode, struct bytes *body)
{
	const uint8_t *p = f->p, *end = f->p + f->n;
	int parts = 0;

	while (parts < 4) {
		const uint8_t *q = memchr(p, 0xFF, (size_t)(end - p));
		const uint8_t *stop = q ? q : end;
		z_stream zs;
		uint8_t buf[8192];
		int rc;

		memset(&zs, 0, sizeof zs);
		if (deflateInit2(&zs, (mode & 7) + 1, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY) !=
		    Z_OK)
			abort();
		zs.next_in = (Bytef *)(uintptr_t)p;
		zs.avail_in = (uInt)(stop - p);
		do {
			zs.next_out = buf;
			zs.avail_out = sizeof buf;
			rc = deflate(&zs, Z_FINISH);
			bytes_add(body, buf, sizeof buf - zs.avail_out);
		} while (rc == Z_OK);
		FZ_CHECK(rc == Z_STREAM_END, "deflate %d", rc);
		deflateEnd(&zs);
		parts++;
		if (!q)
			break;
		p = q + 1;
	}
	if (mode & 8)
		body->len = body->len * (mode >> 4) / 16;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t max_outs[8] = { 0, 1, 100, 4096, 65536, 1u << 20, 8u << 20, 0x1000 };
	static const uint32_t ratios[4] = { 0, 2, 200, 1033 };
	static const uint32_t max_members[4] = { 0, 1, 2, 16 };
	struct fz f = { data, size };
	uint8_t lb = fz_u8(&f), pb = fz_u8(&f), mode = fz_u8(&f);
	struct gz_inflate_limits lim = {
		.max_out = max_outs[lb & 7],
		.ratio = ratios[(lb >> 3) & 3],
		.ratio_burst = (lb & 0x20) ? 4096 : 0,
		.max_members = max_members[lb >> 6],
	};
	struct sink s = { .out_cap = 1 + (size_t)pb * 61 };
	struct bytes body = { 0 }, ref = { 0 };
	struct gz_inflate *z = NULL;
	struct gz_inflate_counts c;
	const uint8_t *in;
	size_t in_len, off = 0, k = 1;
	unsigned int ref_members;
	bool big;
	int ref_ok, rc = GZ_OK, rc2;
	enum gz_inflate_stop why;

	if (mode & 0x80) {
		build(&f, mode, &body);
		in = body.p;
		in_len = body.len;
	} else {
		in = f.p;
		in_len = f.n;
	}
	ref_ok = ref_inflate(in, in_len, &ref, &ref_members, &big);

	if (gz_inflate_new(&lim, s.out_cap, sink_fn, &s, &z) != GZ_OK)
		abort();
	while (off < in_len && rc == GZ_OK) {
		size_t n = 1 + (size_t)pb * k++ % 4099;

		if (n > in_len - off)
			n = in_len - off;
		rc = gz_inflate_feed(z, in + off, n);
		off += n;
	}
	if (rc == GZ_OK)
		rc = gz_inflate_finish(z);
	gz_inflate_get_counts(z, &c);
	why = gz_inflate_stopped(z);

	FZ_CHECK(c.out_nbytes == s.got.len, "counted %llu, sink got %zu",
		 (unsigned long long)c.out_nbytes, s.got.len);
	FZ_CHECK(c.in_nbytes <= in_len, "consumed %llu of %zu", (unsigned long long)c.in_nbytes,
		 in_len);
	FZ_CHECK(c.members_done <= c.members, "%u done of %u", c.members_done, c.members);
	{
		size_t cmp = s.got.len < ref.len ? s.got.len : ref.len;

		FZ_CHECK(big || s.got.len <= ref.len, "got %zu, zlib %zu", s.got.len, ref.len);
		FZ_CHECK(cmp == 0 || memcmp(s.got.p, ref.p, cmp) == 0, "bytes differ from zlib's");
	}
	switch (rc) {
	case GZ_OK:
		FZ_CHECK(why == GZ_INF_RUNNING, "OK but stopped %d", why);
		FZ_CHECK(
			ref_ok && (big ? s.got.len >= ref.len : s.got.len == ref.len) &&
				c.members == ref_members,
			"accepted what zlib does not decode the same (ok %d, %zu vs %zu, %u vs %u)",
			ref_ok, s.got.len, ref.len, c.members, ref_members);
		FZ_CHECK(c.in_nbytes == in_len, "accepted with %llu of %zu bytes consumed",
			 (unsigned long long)c.in_nbytes, in_len);
		break;
	case GZ_ELIMIT:
		if (why == GZ_INF_MAX_OUT)
			FZ_CHECK(lim.max_out && c.out_nbytes == lim.max_out &&
					 (big || ref.len > lim.max_out),
				 "max_out %llu: delivered %llu of %zu",
				 (unsigned long long)lim.max_out, (unsigned long long)c.out_nbytes,
				 ref.len);
		else if (why == GZ_INF_MEMBERS)
			FZ_CHECK(lim.max_members && c.members == lim.max_members &&
					 ref_members > lim.max_members,
				 "members stop at %u (cap %u, zlib %u)", c.members, lim.max_members,
				 ref_members);
		else
			FZ_CHECK(why == GZ_INF_RATIO && lim.ratio &&
					 c.out_nbytes + s.out_cap > lim.ratio_burst,
				 "ratio stop %d at %llu", why, (unsigned long long)c.out_nbytes);
		break;
	case GZ_EDATA:
		FZ_CHECK(why == GZ_INF_BAD_DATA || why == GZ_INF_TRUNCATED, "EDATA with %d", why);
		FZ_CHECK(!ref_ok, "refused what zlib decodes");
		break;
	default:
		FZ_CHECK(0, "unexpected result %d", rc);
	}
	/* A body zlib decodes within every limit is accepted (a ratio stop
	 * aside: it depends on where the pieces fall). */
	if (ref_ok && !big && (!lim.max_out || ref.len <= lim.max_out) &&
	    (!lim.max_members || ref_members <= lim.max_members) && why != GZ_INF_RATIO)
		FZ_CHECK(rc == GZ_OK, "zlib decodes it within the limits, result %d (%d)", rc, why);
	/* Final. */
	if (rc != GZ_OK) {
		rc2 = gz_inflate_feed(z, (const uint8_t *)"\x1f\x8b", 2);
		FZ_CHECK(rc2 == rc, "feed after %d gave %d", rc, rc2);
		rc2 = gz_inflate_finish(z);
		FZ_CHECK(rc2 == rc, "finish after %d gave %d", rc, rc2);
	}
	gz_inflate_free(z);
	free(s.got.p);
	free(body.p);
	free(ref.p);
	return 0;
}
