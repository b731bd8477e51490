/* testutil.c: shared test helpers (reference decoders, payloads, counting allocator). */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#ifdef HAVE_ZSTD
#include <zstd.h>
#endif
#ifdef HAVE_BROTLI
#include <brotli/decode.h>
#endif

#include "gz_alloc.h"
#include "gz_backend.h"
#include "testutil.h"

static uint32_t
tu_rand(uint32_t *s)
{
	/* xorshift32: deterministic, not cryptographic */
	uint32_t x = *s ? *s : 0x9e3779b9u;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	*s = x;
	return x;
}

static const char *const tu_words[] = {
	"the",      "quick", "brown",         "fox",     "jumps",    "over",
	"lazy",     "dog",   "compression",   "header",  "response", "content",
	"encoding", "gzip",  "vary",          "accept",  "server",   "client",
	"request",  "body",  "libmicrohttpd", "deflate", "member",   "window",
};

void
tu_fill(uint8_t *buf, size_t len, enum tu_kind kind, uint32_t seed)
{
	uint32_t s = seed * 2654435761u + 1;
	size_t i = 0;
	char tmp[160];

	if (kind == TU_RANDOM) {
		for (i = 0; i < len; i++)
			buf[i] = (uint8_t)(tu_rand(&s) >> 24);
		return;
	}
	while (i < len) {
		int n;
		if (kind == TU_TEXT) {
			const char *w =
				tu_words[tu_rand(&s) % (sizeof tu_words / sizeof tu_words[0])];
			n = snprintf(tmp, sizeof tmp, "%s%s", w,
				     (tu_rand(&s) % 11 == 0) ? ".\n" : " ");
		} else {
			uint32_t id = tu_rand(&s) % 100000;
			n = snprintf(
				tmp, sizeof tmp,
				"{\"id\":%u,\"name\":\"%s %s\",\"active\":%s,\"score\":%u.%02u},",
				id, tu_words[id % 24], tu_words[(id / 24) % 24],
				(id & 1) ? "true" : "false", id % 1000, id % 100);
		}
		for (int k = 0; k < n && i < len; k++)
			buf[i++] = (uint8_t)tmp[k];
	}
}

uint8_t *
tu_payload(size_t len, enum tu_kind kind, uint32_t seed)
{
	uint8_t *p = malloc(len ? len : 1);
	if (p)
		tu_fill(p, len, kind, seed);
	return p;
}

int
tu_gzip(const void *in, size_t in_len, int level, uint8_t **out, size_t *out_len)
{
	z_stream zs;
	uLong cap;
	uint8_t *buf;
	int rc;

	memset(&zs, 0, sizeof zs);
	if (deflateInit2(&zs, level, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -1;
	cap = deflateBound(&zs, (uLong)in_len);
	buf = malloc(cap ? cap : 1);
	if (!buf) {
		deflateEnd(&zs);
		return -1;
	}
	zs.next_in = (Bytef *)(uintptr_t)in;
	zs.avail_in = (uInt)in_len;
	zs.next_out = buf;
	zs.avail_out = (uInt)cap;
	rc = deflate(&zs, Z_FINISH);
	*out_len = cap - zs.avail_out;
	deflateEnd(&zs);
	if (rc != Z_STREAM_END) {
		free(buf);
		return -1;
	}
	*out = buf;
	return 0;
}

/* The zeros of tu_gzip_zeros are deflated once per this many bytes. */
#define TU_ZEROS_CHUNK ((size_t)1 << 20)

int
tu_gzip_zeros(uint64_t n, uint8_t **out, size_t *out_len)
{
	/*
	 * After Z_FULL_FLUSH deflate forgets its history, so every further
	 * chunk of zeros compresses to the same bytes: they are made once
	 * (and checked once) and copied, and the trailer (CRC-32 by
	 * crc32_combine, ISIZE) is written here. 1 GiB costs milliseconds,
	 * not the seconds deflate would take.
	 */
	uint8_t *zero = calloc(1, TU_ZEROS_CHUNK), *buf = NULL, *first = NULL;
	uint64_t chunks = n / TU_ZEROS_CHUNK, k;
	size_t rem = (size_t)(n % TU_ZEROS_CHUNK), cap, len = 0, first_len, clen = 0;
	uLong crc_chunk, crc = crc32(0, NULL, 0);
	z_stream zs;
	int ok = 0;

	memset(&zs, 0, sizeof zs);
	if (!zero || deflateInit2(&zs, 9, Z_DEFLATED, 31, 8, Z_RLE) != Z_OK) {
		free(zero);
		return -1;
	}
	cap = (size_t)(chunks + 1) * (deflateBound(&zs, TU_ZEROS_CHUNK) / 256 + 64) + 4096;
	first_len = deflateBound(&zs, TU_ZEROS_CHUNK) + 64;
	buf = malloc(cap);
	first = malloc(first_len);
	if (!buf || !first)
		goto done;
	crc_chunk = crc32(crc32(0, NULL, 0), zero, (uInt)TU_ZEROS_CHUNK);
	for (k = 0; k < chunks; k++) {
		if (k < 2) { /* deflate the first two; they must agree after the header */
			zs.next_in = zero;
			zs.avail_in = (uInt)TU_ZEROS_CHUNK;
			zs.next_out = first;
			zs.avail_out = (uInt)first_len;
			if (deflate(&zs, Z_FULL_FLUSH) != Z_OK || zs.avail_in != 0)
				goto done;
			if (k == 0) {
				size_t m = first_len - zs.avail_out;

				memcpy(buf, first, m);
				len = m;
				continue;
			}
			clen = first_len - zs.avail_out;
			if (clen > len || memcmp(buf + len - clen, first, clen) != 0)
				goto done; /* not the same bytes: the trick does not hold */
		}
		if (len + clen > cap)
			goto done;
		memcpy(buf + len, first, clen);
		len += clen;
	}
	for (k = 0; k < chunks; k++)
		crc = crc32_combine(crc, crc_chunk, (z_off_t)TU_ZEROS_CHUNK);
	crc = crc32_combine(crc, crc32(crc32(0, NULL, 0), zero, (uInt)rem), (z_off_t)rem);
	zs.next_in = zero;
	zs.avail_in = (uInt)rem;
	zs.next_out = buf + len;
	zs.avail_out = (uInt)(cap - len);
	if (deflate(&zs, Z_FINISH) != Z_STREAM_END)
		goto done;
	len = cap - zs.avail_out;
	for (k = 0; k < 4; k++) { /* RFC 1952 trailer, little-endian */
		buf[len - 8 + k] = (uint8_t)(crc >> (8 * k));
		buf[len - 4 + k] = (uint8_t)(n >> (8 * k));
	}
	ok = 1;
done:
	deflateEnd(&zs);
	free(zero);
	free(first);
	if (!ok) {
		free(buf);
		return -1;
	}
	*out = buf;
	*out_len = len;
	return 0;
}

int
tu_gunzip(const void *in, size_t in_len, uint8_t **out, size_t *out_len)
{
	z_stream zs;
	size_t cap = in_len * 4 + 64, len = 0;
	uint8_t *buf = malloc(cap);
	int rc;

	if (!buf)
		return -1;
	memset(&zs, 0, sizeof zs);
	if (inflateInit2(&zs, 31) != Z_OK) {
		free(buf);
		return -1;
	}
	zs.next_in = (Bytef *)(uintptr_t)in;
	zs.avail_in = (uInt)in_len;
	for (;;) {
		if (len == cap) {
			uint8_t *nb = realloc(buf, cap * 2);
			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
		zs.next_out = buf + len;
		zs.avail_out = (uInt)(cap - len);
		rc = inflate(&zs, Z_NO_FLUSH);
		len = cap - zs.avail_out;
		if (rc == Z_STREAM_END) {
			int ok = zs.avail_in == 0;
			inflateEnd(&zs);
			if (!ok)
				break;
			*out = buf;
			*out_len = len;
			return 0;
		}
		if (rc != Z_OK && !(rc == Z_BUF_ERROR && len == cap))
			break;
	}
	inflateEnd(&zs);
	free(buf);
	return -1;
}

int
tu_check_member(const uint8_t *gz, size_t gz_len, const uint8_t *orig, size_t orig_len)
{
	uint32_t crc, isize;

	if (gz_len < 18)
		return -1;
	if (gz[0] != 0x1f || gz[1] != 0x8b || gz[2] != 8 || gz[3] != 0)
		return -1;
	if (gz[4] | gz[5] | gz[6] | gz[7])
		return -1;
	crc = (uint32_t)gz[gz_len - 8] | (uint32_t)gz[gz_len - 7] << 8 |
	      (uint32_t)gz[gz_len - 6] << 16 | (uint32_t)gz[gz_len - 5] << 24;
	isize = (uint32_t)gz[gz_len - 4] | (uint32_t)gz[gz_len - 3] << 8 |
		(uint32_t)gz[gz_len - 2] << 16 | (uint32_t)gz[gz_len - 1] << 24;
	if (crc != (uint32_t)crc32(0L, orig, (uInt)orig_len))
		return -1;
	if (isize != (uint32_t)orig_len)
		return -1;
	return 0;
}

static _Atomic uint64_t tu_count;
static _Atomic uint64_t tu_fail_at;
static _Atomic int64_t tu_live;
static _Atomic int tu_fired;

static void *
tu_malloc(size_t n, void *cls)
{
	uint64_t k = atomic_fetch_add(&tu_count, 1) + 1;
	void *p;

	(void)cls;
	if (k == atomic_load(&tu_fail_at)) {
		atomic_store(&tu_fired, 1);
		return NULL;
	}
	p = malloc(n);
	if (p)
		atomic_fetch_add(&tu_live, 1);
	return p;
}

static void
tu_free(void *p, void *cls)
{
	(void)cls;
	atomic_fetch_sub(&tu_live, 1);
	free(p);
}

void
tu_alloc_install(uint64_t fail_at)
{
	atomic_store(&tu_count, 0);
	atomic_store(&tu_fail_at, fail_at);
	atomic_store(&tu_fired, 0);
	atomic_store(&tu_live, 0);
	(void)gz_alloc_set_hook(tu_malloc, tu_free, NULL);
}

void
tu_alloc_uninstall(void)
{
	(void)gz_alloc_set_hook(NULL, NULL, NULL);
}

uint64_t
tu_alloc_count(void)
{
	return atomic_load(&tu_count);
}

int64_t
tu_alloc_live(void)
{
	return atomic_load(&tu_live);
}

int
tu_alloc_failed(void)
{
	return atomic_load(&tu_fired);
}

void
tu_alloc_fail_at(uint64_t k)
{
	atomic_store(&tu_fail_at, 0);
	atomic_store(&tu_fired, 0);
	if (k)
		atomic_store(&tu_fail_at, atomic_load(&tu_count) + k);
}

int
tu_verify_member(const uint8_t *gz, size_t gz_len, const uint8_t *orig, size_t orig_len)
{
	uint8_t *dec = NULL;
	size_t dec_len = 0;
	int ok;

	if (tu_gunzip(gz, gz_len, &dec, &dec_len) != 0)
		return -1;
	ok = dec_len == orig_len && memcmp(dec, orig, orig_len) == 0;
	free(dec);
	return ok && tu_check_member(gz, gz_len, orig, orig_len) == 0 ? 0 : -1;
}

size_t
tu_backend_count(void)
{
	size_t n = 0;

	while (gz_backends[n])
		n++;
	return n;
}

/* RFC 9659 section 3: a decoder may refuse windows over 8 MiB; ours does. */
#define TU_ZSTD_WINDOW_LOG_MAX 23

struct tu_dec {
	int coding; /* 0 gzip, 1 zstd, 2 br */
	uint8_t *buf;
	size_t len, cap;
	int ended, failed;
	z_stream zs;
#ifdef HAVE_ZSTD
	ZSTD_DCtx *zd;
#endif
#ifdef HAVE_BROTLI
	BrotliDecoderState *bd;
#endif
};

struct tu_dec *
tu_dec_new(const char *coding)
{
	struct tu_dec *d = calloc(1, sizeof *d);

	if (!d || !coding)
		goto fail;
	d->cap = 4096;
	d->buf = malloc(d->cap);
	if (!d->buf)
		goto fail;
	if (strcmp(coding, "gzip") == 0) {
		if (inflateInit2(&d->zs, 31) != Z_OK)
			goto fail;
		d->coding = 0;
		return d;
	}
#ifdef HAVE_ZSTD
	if (strcmp(coding, "zstd") == 0) {
		d->coding = 1;
		d->zd = ZSTD_createDCtx();
		if (!d->zd || ZSTD_isError(ZSTD_DCtx_setParameter(d->zd, ZSTD_d_windowLogMax,
								  TU_ZSTD_WINDOW_LOG_MAX)))
			goto fail;
		return d;
	}
#endif
#ifdef HAVE_BROTLI
	if (strcmp(coding, "br") == 0) {
		d->coding = 2;
		d->bd = BrotliDecoderCreateInstance(NULL, NULL, NULL);
		if (!d->bd)
			goto fail;
		return d;
	}
#endif
fail:
	if (d) {
#ifdef HAVE_ZSTD
		ZSTD_freeDCtx(d->zd);
#endif
		free(d->buf);
		free(d);
	}
	return NULL;
}

/* Room for at least extra more bytes of output. */
static int
tu_dec_reserve(struct tu_dec *d, size_t extra)
{
	while (d->cap - d->len < extra) {
		uint8_t *nb = realloc(d->buf, d->cap * 2);

		if (!nb)
			return -1;
		d->buf = nb;
		d->cap *= 2;
	}
	return 0;
}

/* Room for at least one more byte of output. */
static int
tu_dec_grow(struct tu_dec *d)
{
	return tu_dec_reserve(d, 1);
}

int
tu_dec_feed(struct tu_dec *d, const uint8_t *in, size_t len)
{
	if (d->failed)
		return -1;
	if (len == 0)
		return 0;
	if (d->ended)
		return d->failed = -1;
	if (d->coding == 0) {
		d->zs.next_in = (Bytef *)(uintptr_t)in;
		d->zs.avail_in = (uInt)len;
		while (d->zs.avail_in > 0 || d->len == d->cap) {
			int rc;

			if (tu_dec_grow(d) < 0)
				return d->failed = -1;
			d->zs.next_out = d->buf + d->len;
			d->zs.avail_out = (uInt)(d->cap - d->len);
			rc = inflate(&d->zs, Z_SYNC_FLUSH);
			d->len = d->cap - d->zs.avail_out;
			if (rc == Z_STREAM_END) {
				d->ended = 1;
				return d->zs.avail_in ? (d->failed = -1) : 0;
			}
			if (rc == Z_BUF_ERROR && d->len < d->cap)
				return 0;
			if (rc != Z_OK && rc != Z_BUF_ERROR)
				return d->failed = -1;
		}
		return 0;
	}
#ifdef HAVE_ZSTD
	if (d->coding == 1) {
		ZSTD_inBuffer ib = { in, len, 0 };

		for (;;) {
			ZSTD_outBuffer ob;
			size_t r;

			if (tu_dec_grow(d) < 0)
				return d->failed = -1;
			ob.dst = d->buf + d->len;
			ob.size = d->cap - d->len;
			ob.pos = 0;
			r = ZSTD_decompressStream(d->zd, &ob, &ib);
			d->len += ob.pos;
			if (ZSTD_isError(r))
				return d->failed = -1;
			if (r == 0) {
				/* One frame, and nothing after it. */
				d->ended = 1;
				return ib.pos < ib.size ? (d->failed = -1) : 0;
			}
			if (ib.pos == ib.size && ob.pos < ob.size)
				return 0;
		}
	}
#endif
#ifdef HAVE_BROTLI
	if (d->coding == 2) {
		size_t avail_in = len;
		const uint8_t *next_in = in;

		/* Output through BrotliDecoderTakeOutput: with an output window
		 * of its own, libbrotlidec 1.0.9 can stop at the window's end
		 * and then report NEEDS_MORE_INPUT with decoded bytes still in
		 * its ring buffer. */
		for (;;) {
			size_t avail_out = 0;
			BrotliDecoderResult r = BrotliDecoderDecompressStream(d->bd, &avail_in,
									      &next_in, &avail_out,
									      NULL, NULL);

			while (BrotliDecoderHasMoreOutput(d->bd)) {
				size_t n = 0;
				const uint8_t *p = BrotliDecoderTakeOutput(d->bd, &n);

				if (tu_dec_reserve(d, n) < 0)
					return d->failed = -1;
				memcpy(d->buf + d->len, p, n);
				d->len += n;
			}
			if (r == BROTLI_DECODER_RESULT_SUCCESS) {
				d->ended = 1;
				return avail_in ? (d->failed = -1) : 0;
			}
			if (r == BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT)
				return 0;
			if (r != BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT)
				return d->failed = -1;
		}
	}
#endif
	return d->failed = -1;
}

const uint8_t *
tu_dec_data(const struct tu_dec *d, size_t *len_ret)
{
	*len_ret = d->len;
	return d->buf;
}

int
tu_dec_ended(const struct tu_dec *d)
{
	return d->ended && !d->failed;
}

void
tu_dec_free(struct tu_dec *d)
{
	if (!d)
		return;
	if (d->coding == 0)
		inflateEnd(&d->zs);
#ifdef HAVE_ZSTD
	ZSTD_freeDCtx(d->zd);
#endif
#ifdef HAVE_BROTLI
	if (d->bd)
		BrotliDecoderDestroyInstance(d->bd);
#endif
	free(d->buf);
	free(d);
}

int
tu_decode(const char *coding, const void *in, size_t in_len, uint8_t **out, size_t *out_len)
{
	struct tu_dec *d = tu_dec_new(coding);

	if (!d)
		return -1;
	if (tu_dec_feed(d, in, in_len) < 0 || !tu_dec_ended(d)) {
		tu_dec_free(d);
		return -1;
	}
	/* The buffer moves out; the decoder goes. */
	*out = d->buf;
	*out_len = d->len;
	d->buf = NULL;
	tu_dec_free(d);
	return 0;
}

int
tu_verify_coded(const char *coding, const uint8_t *enc, size_t enc_len, const uint8_t *orig,
		size_t orig_len)
{
	uint8_t *dec = NULL;
	size_t dec_len = 0;
	int ok;

	if (strcmp(coding, "gzip") == 0)
		return tu_verify_member(enc, enc_len, orig, orig_len);
	if (tu_decode(coding, enc, enc_len, &dec, &dec_len) != 0)
		return -1;
	ok = dec_len == orig_len && (orig_len == 0 || memcmp(dec, orig, orig_len) == 0);
	free(dec);
	return ok ? 0 : -1;
}

long
tu_rss_kib(int pid)
{
	char path[64];
	long size_pages = 0, rss_pages = -1;
	FILE *f;

	if (pid)
		snprintf(path, sizeof path, "/proc/%d/statm", pid);
	else
		snprintf(path, sizeof path, "/proc/self/statm");
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &size_pages, &rss_pages) != 2)
		rss_pages = -1;
	fclose(f);
	return rss_pages < 0 ? -1 : rss_pages * (sysconf(_SC_PAGESIZE) / 1024);
}

void
tu_sleep_us(uint64_t us)
{
	struct timespec ts = { .tv_sec = (time_t)(us / 1000000u),
			       .tv_nsec = (long)(us % 1000000u) * 1000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}
