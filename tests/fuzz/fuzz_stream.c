/* fuzz_stream.c: libFuzzer target for the compressors and the stream pump: adversarial chunking, flushing, stalls and output windows, and one-shot compress(). */
/*
 * Every backend of every coding (gzip's, zstd, brotli) is fuzzed; each is
 * decoded by its reference decoder (tests/testutil.c: zlib inflate,
 * libzstd, libbrotlidec), "member" below standing for a zstd frame or a
 * brotli stream as well.
 *
 * Input: two bytes choose a streaming backend and its level, then a
 * program of operations, each an opcode byte and its operands:
 *
 *   op & 7 = 0, 1  feed the next L bytes (L from the opcode's high bits and
 *                  one more byte) with GZ_FLUSH_NONE, or (1) GZ_FLUSH_SYNC
 *   op & 7 = 2     feed a run: one byte repeated L times (compressible)
 *   op & 7 = 3     GZ_FLUSH_SYNC without new input (repeated flush)
 *   op & 7 = 4     output window: 1..256 bytes, or (high bit) 1..64 KiB
 *   op & 7 = 5     abandon the stream: the compressor goes back to the
 *                  compressor pool mid-member and a new member starts
 *   op & 7 = 6, 7  input window: later chunks are cut into pieces of
 *                  1..256 bytes, each a separate stream() call
 *
 * The stream ends with GZ_FLUSH_FINISH. Every stream() call gets its own
 * malloc'd input piece and output window of exactly the sizes given, so
 * AddressSanitizer catches a read or write outside them. Checked:
 *  - stream() never fails, and makes progress (no call loop without it);
 *  - after each completed sync flush (in_len 0, out_cap > 0), the
 *    reference decoder, fed everything produced so far, yields exactly the
 *    bytes consumed so far (the flush promise of gz_backend.h);
 *  - at the end the output is one member (for gzip with an RFC 1952
 *    header with MTIME 0 and no flags) that decodes to the input, with no
 *    trailing bytes;
 *    a further GZ_FLUSH_FINISH returns GZ_STREAM_END and writes nothing;
 *  - for every one-shot backend at a level from the input, compress() of
 *    the whole input round-trips, fits its bound(), and with a smaller
 *    output space either fits or returns GZ_ENOSPC; afterwards stream()
 *    refuses with GZ_EINVAL until reset().
 * Compressors come from compressor pools (idle cap 1) kept across inputs, so
 * reset() between members is exercised as well.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gz_error.h"
#include "gz_backend.h"
#include "gz_pool.h"
#include "gz_stream.h"
#include "fuzz_util.h"
#include "testutil.h"

/* gzip's backends, then the other codings' (zstd 1-19). */
#define FZ_MAX_BACKENDS 6
#define FZ_MAX_LEVELS 19
/* stream() calls without any progress before the target gives up. */
#define FZ_STALL_MAX 64

static struct gz_pool *pools[FZ_MAX_BACKENDS][FZ_MAX_LEVELS];
/* FZ_TRACE set in the environment: print every stream() call (to replay a
 * crash or timeout input by hand). */
static int trace = -1;

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

/* One member in progress and what it must decode to. */
struct member {
	const struct gz_backend *be;
	struct gz_pool *pool;
	struct gz_compressor *c;
	struct bytes in;    /* bytes consumed by the compressor */
	struct bytes out;   /* bytes it produced */
	struct tu_dec *dec; /* the independent decoder, fed out incrementally */
	size_t fed;         /* bytes of out given to dec */
	size_t out_win;     /* output window per call, bytes */
	size_t in_win;      /* input piece per call, bytes; 0 = whole chunk */
};

/* Backend bi of all the codings: gzip's registry, then the others'; NULL
 * past the end. */
static const struct gz_backend *
backend_at(size_t bi)
{
	size_t n = 0;

	while (gz_backends[n])
		n++;
	return bi < n ? gz_backends[bi] : gz_coding_backends[bi - n];
}

static struct gz_pool *
pool_of(const struct gz_backend *be, size_t bi, int level)
{
	struct gz_pool **p = &pools[bi][level - be->level_min];

	if (!*p && gz_pool_new(be, level, 1, p) != 0)
		abort();
	return *p;
}

static void
member_start(struct member *m)
{
	FZ_CHECK(gz_pool_get(m->pool, &m->c) == 0, "gz_pool_get failed");
	m->in.len = m->out.len = 0;
	m->fed = 0;
	m->dec = tu_dec_new(gz_coding_name(m->be->coding));
	if (!m->dec)
		abort();
}

static void
member_end(struct member *m)
{
	tu_dec_free(m->dec);
	m->dec = NULL;
	gz_pool_put(m->pool, m->c);
	m->c = NULL;
}

/* Feed the output not yet decoded to the decoder. */
static void
decode_more(struct member *m)
{
	/* Nothing produced yet: out.p is NULL, and NULL + 0 is undefined. */
	if (m->out.len == m->fed)
		return;
	FZ_CHECK(tu_dec_feed(m->dec, m->out.p + m->fed, m->out.len - m->fed) == 0,
		 "%s level %d: the reference decoder refuses the output (or bytes after its end)",
		 m->be->name, m->c->level);
	m->fed = m->out.len;
}

/* Everything consumed so far must decode from everything produced. */
static void
check_decodes(struct member *m, const char *when)
{
	size_t dec_len;
	const uint8_t *dec;

	decode_more(m);
	dec = tu_dec_data(m->dec, &dec_len);
	FZ_CHECK(dec_len == m->in.len && (m->in.len == 0 || memcmp(dec, m->in.p, m->in.len) == 0),
		 "%s level %d: after %s, %zu of %zu consumed bytes decode (or differ)", m->be->name,
		 m->c->level, when, dec_len, m->in.len);
}

/*
 * Give data[0..len) to the compressor with the flush mode, in pieces of
 * in_win bytes and output windows of out_win bytes, until the mode's
 * completion condition holds. Returns the last stream() result.
 */
static int
run(struct member *m, const uint8_t *data, size_t len, enum gz_flush flush)
{
	size_t off = 0;
	int rc = 0;

	do {
		size_t piece = len - off;
		uint8_t *in;
		struct gz_io io;
		bool last;
		unsigned int stall = 0;

		if (m->in_win && piece > m->in_win)
			piece = m->in_win;
		last = off + piece == len;
		in = malloc(piece ? piece : 1);
		if (!in)
			abort();
		if (piece)
			memcpy(in, data + off, piece);
		io.in = in;
		io.in_len = piece;
		for (;;) {
			uint8_t *out = malloc(m->out_win);
			size_t in_before = io.in_len, used;
			enum gz_flush f = last ? flush : GZ_FLUSH_NONE;

			if (!out)
				abort();
			io.out = out;
			io.out_cap = m->out_win;
			rc = m->be->stream(m->c, &io, f);
			FZ_CHECK(rc == 0 || rc == GZ_STREAM_END, "%s level %d: stream() = %d",
				 m->be->name, m->c->level, rc);
			FZ_CHECK(io.out == out + (m->out_win - io.out_cap) &&
					 io.out_cap <= m->out_win,
				 "%s: output window bookkeeping", m->be->name);
			if (trace)
				fprintf(stderr,
					"stream(in %zu, out %zu, flush %d) = %d: used %zu, made %zu\n",
					in_before, m->out_win, (int)f, rc, in_before - io.in_len,
					m->out_win - io.out_cap);
			used = in_before - io.in_len;
			bytes_add(&m->in, io.in - used, used);
			bytes_add(&m->out, out, m->out_win - io.out_cap);
			free(out);
			if (used || io.out_cap < m->out_win)
				stall = 0;
			else
				FZ_CHECK(++stall < FZ_STALL_MAX,
					 "%s level %d: no progress (flush %d)", m->be->name,
					 m->c->level, (int)f);
			if (f == GZ_FLUSH_FINISH) {
				FZ_CHECK(rc == 0 || io.in_len == 0, "ended with input left");
				if (rc == GZ_STREAM_END)
					break;
			} else {
				FZ_CHECK(rc == 0, "%s: GZ_STREAM_END without FINISH", m->be->name);
				if (io.in_len == 0 && (f == GZ_FLUSH_NONE || io.out_cap > 0))
					break;
			}
		}
		free(in);
		off += piece;
	} while (off < len);
	if (flush == GZ_FLUSH_SYNC)
		check_decodes(m, "a sync flush");
	return rc;
}

static void
finish(struct member *m)
{
	uint8_t spare[16];
	struct gz_io io = { NULL, 0, spare, sizeof spare };
	const uint8_t *o;

	FZ_CHECK(run(m, NULL, 0, GZ_FLUSH_FINISH) == GZ_STREAM_END, "no end");
	FZ_CHECK(m->be->stream(m->c, &io, GZ_FLUSH_FINISH) == GZ_STREAM_END &&
			 io.out_cap == sizeof spare,
		 "%s: a call after the end wrote or did not say end", m->be->name);
	o = m->out.p;
	FZ_CHECK(m->be->coding != GZ_CODING_GZIP ||
			 (m->out.len >= 18 && o[0] == 0x1f && o[1] == 0x8b && o[2] == 8 &&
			  o[3] == 0 && (o[4] | o[5] | o[6] | o[7]) == 0),
		 "%s: not an RFC 1952 header with FLG 0 and MTIME 0", m->be->name);
	/* decode_more refuses bytes after the end. */
	decode_more(m);
	FZ_CHECK(tu_dec_ended(m->dec), "%s level %d: member does not end", m->be->name,
		 m->c->level);
	check_decodes(m, "the trailer");
}

/* One-shot compress() of all of data with every one-shot backend. */
static void
oneshot(const uint8_t *data, size_t len, uint8_t lv, uint16_t short_cap)
{
	size_t bi;

	for (bi = 0; backend_at(bi) && bi < FZ_MAX_BACKENDS; bi++) {
		const struct gz_backend *be = backend_at(bi);
		int level = be->level_min + lv % (be->level_max - be->level_min + 1);
		struct gz_pool *pool = pool_of(be, bi, level);
		struct gz_compressor *c;
		size_t bound, out_len = 0, cap;
		uint8_t *out;
		int rc;

		if (!(be->caps & GZ_CAP_ONESHOT))
			continue;
		FZ_CHECK(gz_pool_get(pool, &c) == 0, "gz_pool_get");
		bound = gz_bound(c, len);
		out = malloc(bound);
		if (!out)
			abort();
		rc = be->compress(c, data, len, out, bound, &out_len);
		FZ_CHECK(rc == 0 && out_len <= bound, "%s level %d: compress() = %d, %zu of %zu",
			 be->name, level, rc, out_len, bound);
		FZ_CHECK(tu_verify_coded(gz_coding_name(be->coding), out, out_len, data, len) == 0,
			 "%s level %d: compress() output does not round-trip", be->name, level);
		free(out);
		/* Too little space: ENOSPC or a correct fit, never more. */
		cap = short_cap % (bound + 1);
		out = malloc(cap ? cap : 1);
		if (!out)
			abort();
		rc = be->compress(c, data, len, out, cap, &out_len);
		FZ_CHECK(rc == GZ_ENOSPC || (rc == 0 && out_len <= cap),
			 "%s level %d: compress() into %zu bytes = %d", be->name, level, cap, rc);
		free(out);
		if (be->caps & GZ_CAP_STREAM) {
			uint8_t b[8];
			struct gz_io io = { data, len, b, sizeof b };
			FZ_CHECK(be->stream(c, &io, GZ_FLUSH_NONE) == GZ_EINVAL,
				 "%s: stream() after compress() without reset()", be->name);
		}
		gz_pool_put(pool, c); /* resets */
	}
}

/*
 * The stream pump (gz_stream.c) over the last member's bytes: a source that
 * cuts them as the input's own bytes say (a 0 byte: "no data now", at most
 * 64 times), low-latency or not, an output window from the input. Checked:
 * the pump never fails on a good source and always makes progress; after
 * a read that returned with the source stalled, the output so far decodes
 * to every byte given (the stall flush); the whole output is one member
 * decoding to exactly the bytes; the compressor is back in its pool once
 * the trailer is written, before gz_pump_fini.
 */
struct pump_src {
	const uint8_t *p;
	size_t n, pos;
	const uint8_t *script;
	size_t slen, si;
	unsigned int stalls;
};

static ssize_t
pump_src_read(void *cls, uint8_t *buf, size_t max)
{
	struct pump_src *s = cls;
	uint8_t b = s->slen ? s->script[s->si++ % s->slen] : 1;
	size_t want;

	if (s->pos == s->n)
		return GZ_SOURCE_END;
	if (b == 0 && s->stalls < 64) {
		s->stalls++;
		return 0;
	}
	want = 1 + (size_t)b * 31;
	if (want > max)
		want = max;
	if (want > s->n - s->pos)
		want = s->n - s->pos;
	memcpy(buf, s->p + s->pos, want);
	s->pos += want;
	return (ssize_t)want;
}

static void
pump_pass(struct gz_pool *pool, const uint8_t *p, size_t n, const uint8_t *script, size_t slen,
	  bool low_latency, size_t win)
{
	struct pump_src s = { .p = p, .n = n, .script = script, .slen = slen };
	struct gz_pump pump;
	struct tu_dec *d = tu_dec_new(gz_coding_name(gz_pool_backend(pool)->coding));
	uint8_t *out = malloc(win);
	const uint8_t *dec;
	size_t dec_len = 0, rounds = 0;
	bool end = false;

	if (!out || !d)
		abort();
	FZ_CHECK(gz_pump_init(&pump, pool, 1024, low_latency ? GZ_PUMP_LOW_LATENCY : 0) == 0,
		 "gz_pump_init failed");
	while (!end) {
		ssize_t k = gz_pump_read(&pump, pump_src_read, &s, out, win, &end);

		FZ_CHECK(k >= 0, "gz_pump_read: %zd", k);
		FZ_CHECK(++rounds < 16 * (n + 64) + 4096, "the pump makes no progress");
		FZ_CHECK(tu_dec_feed(d, out, (size_t)k) == 0, "the reference decoder refuses it");
		dec = tu_dec_data(d, &dec_len);
		if (k == 0 && !end)
			FZ_CHECK(dec_len == s.pos && (dec_len == 0 || memcmp(dec, p, dec_len) == 0),
				 "stalled: %zu decoded bytes, %zu given", dec_len, s.pos);
	}
	FZ_CHECK(tu_dec_ended(d), "the member is not complete");
	dec = tu_dec_data(d, &dec_len);
	FZ_CHECK(dec_len == n && (n == 0 || memcmp(dec, p, n) == 0),
		 "the pump's member decodes to %zu bytes, not the %zu given", dec_len, n);
	FZ_CHECK(pump.c == NULL, "the compressor was not returned at the trailer");
	gz_pump_fini(&pump);
	tu_dec_free(d);
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz f = { data, size };
	const struct gz_backend *stream_be[FZ_MAX_BACKENDS];
	size_t stream_bi[FZ_MAX_BACKENDS], nstream = 0, bi;
	struct member m;
	struct bytes all = { 0 };
	uint8_t sel = fz_u8(&f), lv = fz_u8(&f);
	int level;

	if (trace < 0)
		trace = getenv("FZ_TRACE") != NULL;
	for (bi = 0; backend_at(bi) && bi < FZ_MAX_BACKENDS; bi++)
		if (backend_at(bi)->caps & GZ_CAP_STREAM) {
			stream_be[nstream] = backend_at(bi);
			stream_bi[nstream++] = bi;
		}
	FZ_CHECK(nstream > 0, "no streaming backend");
	memset(&m, 0, sizeof m);
	m.be = stream_be[sel % nstream];
	level = m.be->level_min + lv % (m.be->level_max - m.be->level_min + 1);
	if (trace)
		fprintf(stderr, "%s level %d\n", m.be->name, level);
	m.pool = pool_of(m.be, stream_bi[sel % nstream], level);
	m.out_win = 4096;
	member_start(&m);
	while (f.n > 0) {
		uint8_t op = fz_u8(&f);
		size_t len;

		switch (op & 7) {
		case 0:
		case 1:
			len = (size_t)(op >> 3) << 8 | fz_u8(&f);
			if (len > f.n)
				len = f.n;
			bytes_add(&all, f.p, len);
			run(&m, f.p, len, (op & 7) == 1 ? GZ_FLUSH_SYNC : GZ_FLUSH_NONE);
			f.p += len;
			f.n -= len;
			break;
		case 2: {
			uint8_t *run_buf;
			uint8_t b = fz_u8(&f);

			len = ((size_t)(op >> 3) << 8 | fz_u8(&f)) * 4;
			run_buf = malloc(len ? len : 1);
			if (!run_buf)
				abort();
			memset(run_buf, b, len);
			bytes_add(&all, run_buf, len);
			run(&m, run_buf, len, GZ_FLUSH_NONE);
			free(run_buf);
			break;
		}
		case 3:
			run(&m, NULL, 0, GZ_FLUSH_SYNC);
			break;
		case 4:
			m.out_win = (op & 0x80) ? 1 + (size_t)fz_u16(&f) % 65536
						: 1 + (size_t)fz_u8(&f);
			break;
		case 5:
			member_end(&m);
			member_start(&m);
			all.len = 0;
			break;
		default:
			m.in_win = (op & 0x80) ? 0 : 1 + (size_t)fz_u8(&f);
			break;
		}
	}
	finish(&m);
	FZ_CHECK(m.in.len == all.len && (all.len == 0 || memcmp(m.in.p, all.p, all.len) == 0),
		 "consumed bytes differ from the bytes given");
	member_end(&m);
	pump_pass(m.pool, all.p ? all.p : (const uint8_t *)"", all.len, data, size > 64 ? 64 : size,
		  sel & 0x80, lv & 1 ? 1 + lv % 17 : 4096);
	oneshot(all.p ? all.p : (const uint8_t *)"", all.len, lv, (uint16_t)(sel << 8 | lv));
	free(all.p);
	free(m.in.p);
	free(m.out.p);
	return 0;
}
