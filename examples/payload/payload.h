/* payload.h: the deterministic JSON payload shared by gzserve's demo and the benchmarks. */
#ifndef PAYLOAD_H
#define PAYLOAD_H

#include <stddef.h>
#include <stdint.h>

/*
 * A realistic API response: a JSON object listing orders (ids, UUIDs,
 * timestamps, customers with names and e-mail addresses, line items with
 * prices, tags and a free-text note), the kind of body a JSON API spends
 * most of its bytes on. It compresses like real API output (repeated keys,
 * varied values), unlike lorem ipsum or random bytes.
 *
 * The bytes are a pure function of the size asked for: no clock, locale or
 * platform dependence, so every build, benchmark run and gzserve instance
 * serves the same document.
 *
 * Documents of different sizes share their records: the document of n
 * bytes is the larger ones' bytes up to its last record, which is the same
 * record with its "note" cut to length so the whole is exactly n bytes and
 * valid JSON (RFC 8259, UTF-8). So the benchmark sizes below are, apart
 * from their last record, prefixes of the whole document, and each is a
 * complete JSON text a browser's JSON.parse() accepts.
 *
 * Not installed: a convenience library (examples/payload/libpayload.la)
 * linked into gzserve, the benchmarks and the gzserve tests.
 */

/** Size of the whole document in bytes (128 KiB). */
#define PAYLOAD_JSON_NBYTES ((size_t)128 * 1024)

/** The benchmark sizes (Go gziphandler's 2k/20k/100k), in bytes. */
#define PAYLOAD_JSON_2K ((size_t)2048)
#define PAYLOAD_JSON_20K ((size_t)20480)
#define PAYLOAD_JSON_100K ((size_t)102400)

/** Smallest size payload_json_sized() can make, in bytes (one record). */
#define PAYLOAD_JSON_MIN_NBYTES ((size_t)1024)

/**
 * Build the document of exactly @a nbytes bytes.
 *
 * @param nbytes size in bytes, at least PAYLOAD_JSON_MIN_NBYTES.
 * @param buf_ret receives a malloc()ed buffer of @a nbytes bytes (not
 *        NUL-terminated), owned by the caller (free()); untouched on error.
 * @return @a nbytes, or 0 if @a nbytes is too small or allocation failed.
 * @note Thread-safe.
 */
size_t payload_json_sized(size_t nbytes, uint8_t **buf_ret);

/**
 * The whole document: payload_json_sized(PAYLOAD_JSON_NBYTES, buf_ret).
 *
 * @return PAYLOAD_JSON_NBYTES, or 0 if allocation failed.
 */
size_t payload_json(uint8_t **buf_ret);

#endif /* PAYLOAD_H */
