/* testutil.h: shared test helpers: independent gunzip, payload generators, counting allocator. */
#ifndef TESTUTIL_H
#define TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

/* Payload kinds used across the suites. */
enum tu_kind { TU_TEXT, TU_JSON, TU_RANDOM };

/* Fill buf[0..len) deterministically (same kind, len, seed: same bytes). */
void tu_fill(uint8_t *buf, size_t len, enum tu_kind kind, uint32_t seed);
/* malloc'd payload of len bytes (len 0 gives a valid 1-byte block). */
uint8_t *tu_payload(size_t len, enum tu_kind kind, uint32_t seed);

/*
 * Decode one gzip member with zlib inflate (window bits 31), independent of
 * the code under test. Returns 0 and a malloc'd *out and *out_len on success
 * (inflate returned Z_STREAM_END and consumed every input byte), -1 on any
 * error (including trailing garbage).
 */
int tu_gunzip(const void *in, size_t in_len, uint8_t **out, size_t *out_len);

/*
 * Compress in[0..in_len) into one gzip member with zlib deflate (window
 * bits 31) at level (1-9), independent of the code under test (request
 * bodies for the upload tests). Returns 0 and a malloc'd *out, *out_len,
 * or -1.
 */
int tu_gzip(const void *in, size_t in_len, int level, uint8_t **out, size_t *out_len);

/* One gzip member of n zero bytes (about 1030:1) made in milliseconds
 * whatever n (1 MiB is deflated, the rest copied, see testutil.c): a
 * decompression bomb. Returns 0 and a malloc'd *out, *out_len, or -1. */
int tu_gzip_zeros(uint64_t n, uint8_t **out, size_t *out_len);

/* Check the fixed RFC 1952 header bytes (ID1 ID2 CM=8, FLG=0, MTIME=0) and
 * that CRC-32 and ISIZE in the trailer equal zlib's crc32() and the
 * length of orig. Returns 0 or -1. */
int tu_check_member(const uint8_t *gz, size_t gz_len, const uint8_t *orig, size_t orig_len);

/* 0 when gz[0..gz_len) is one gzip member that tu_gunzip decodes to
 * exactly orig[0..orig_len) and tu_check_member accepts; else -1. */
int tu_verify_member(const uint8_t *gz, size_t gz_len, const uint8_t *orig, size_t orig_len);

/*
 * Reference decoders of every content coding, independent of the code
 * under test: "gzip" (tu_gunzip), "zstd" (libzstd's decoder, one frame,
 * window at most 8 MiB as RFC 9659 requires: ZSTD_d_windowLogMax 23), "br"
 * (libbrotlidec). tu_decode returns 0 and a malloc'd *out / *out_len when
 * in[0..in_len) is exactly one complete frame or stream (no trailing
 * bytes), -1 otherwise or for a coding not compiled in.
 */
int tu_decode(const char *coding, const void *in, size_t in_len, uint8_t **out, size_t *out_len);
/* 0 when tu_decode(coding) of enc gives exactly orig[0..orig_len); else -1. */
int tu_verify_coded(const char *coding, const uint8_t *enc, size_t enc_len, const uint8_t *orig,
		    size_t orig_len);

/*
 * An incremental reference decoder: feed it a coded stream piece by piece
 * and read what it has decoded so far (to check that a sync flush made all
 * input decodable). tu_dec_new returns NULL for an unknown coding;
 * tu_dec_feed returns 0, or -1 on a decoding error or input after the end;
 * tu_dec_ended is nonzero once the frame or stream is complete.
 */
struct tu_dec;
struct tu_dec *tu_dec_new(const char *coding);
int tu_dec_feed(struct tu_dec *d, const uint8_t *in, size_t len);
const uint8_t *tu_dec_data(const struct tu_dec *d, size_t *len_ret);
int tu_dec_ended(const struct tu_dec *d);
void tu_dec_free(struct tu_dec *d);

/* How many backends the core has compiled in (gz_backends, NULL-terminated). */
size_t tu_backend_count(void);

/*
 * Counting, failure-injecting allocator installed with gz_alloc_set_hook (the
 * core of mhdgz_set_allocator, so the core suites can use it too).
 * tu_alloc_install(fail_at): the fail_at-th allocation from now (1-based)
 * fails and every other succeeds; 0 never fails. Counters are atomic.
 */
void tu_alloc_install(uint64_t fail_at);
void tu_alloc_uninstall(void);
uint64_t tu_alloc_count(void); /* allocations attempted since install */
int64_t tu_alloc_live(void);   /* blocks allocated and not yet freed */
int tu_alloc_failed(void);     /* nonzero once the injected failure fired */
/* Re-arm while installed (and while mhdgz memory is live): the k-th
 * allocation from now (1-based) fails; 0 disarms. Clears the fired flag;
 * the count and live counters carry on. */
void tu_alloc_fail_at(uint64_t k);

/* Resident set size of a process in KiB, from /proc/PID/statm (pid 0: this
 * process); -1 if it cannot be read. */
long tu_rss_kib(int pid);
/* Sleep at least us microseconds (restarted after signals). */
void tu_sleep_us(uint64_t us);

#endif /* TESTUTIL_H */
