/* testutil.c: shared test helpers (gunzip via zlib, payloads, counting allocator). */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

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
