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

/* Check the fixed RFC 1952 header bytes (ID1 ID2 CM=8, FLG=0, MTIME=0) and
 * that CRC-32 and ISIZE in the trailer equal zlib's crc32() and the
 * length of orig. Returns 0 or -1. */
int tu_check_member(const uint8_t *gz, size_t gz_len, const uint8_t *orig, size_t orig_len);

/* 0 when gz[0..gz_len) is one gzip member that tu_gunzip decodes to
 * exactly orig[0..orig_len) and tu_check_member accepts; else -1. */
int tu_verify_member(const uint8_t *gz, size_t gz_len, const uint8_t *orig, size_t orig_len);

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
