/* gz_dict.h: zstd compression with a prepared raw-content dictionary (RFC 9842 "dcz" bodies). */
#ifndef GZ_DICT_H
#define GZ_DICT_H

#include <stddef.h>
#include <stdint.h>

/*
 * A dictionary digested once for one compression level (a ZSTD_CDict of
 * the bytes as raw content: RFC 9842 section 4.3 uses the dictionary as
 * plain preceding bytes, never as a zstd-format dictionary), then used
 * read-only by any number of threads at once.
 */
struct gz_zdict;

/* Size of the dcz header (RFC 9842 section 4.3): the 8 bytes of a zstd
 * skippable frame of 32 bytes, then the dictionary's SHA-256. */
#define GZ_DCZ_HEADER_NBYTES 40
#define GZ_DCZ_HASH_NBYTES 32

/* Digest dict[0..dict_len) (copied) for level (0: the zstd backend's
 * default; else 1-19). 0 and *ret, GZ_EINVAL (level, or a dictionary
 * larger than GZ_DICT_MAX_NBYTES), GZ_ENOMEM, GZ_ENOTSUP without zstd.
 * hash is the dictionary's SHA-256 (the caller computes it), written into
 * every header. */
int gz_zdict_new(const void *dict, size_t dict_len, int level,
		 const uint8_t hash[GZ_DCZ_HASH_NBYTES], struct gz_zdict **ret);
/* NULL is a no-op. Not while another thread compresses with it. */
void gz_zdict_free(struct gz_zdict *d);
/* Largest dictionary accepted, in bytes: RFC 9842's window cap (128 MiB)
 * divided by 1.25, so that the window can hold all of it. */
#define GZ_DICT_MAX_NBYTES ((size_t)100 * 1024 * 1024)
/* The window a dcz body may use with a dictionary of dict_len bytes, in
 * bytes: RFC 9842 section 4.3, the larger of 8 MiB and 1.25 times the
 * dictionary, at most 128 MiB. */
uint64_t gz_dcz_window_max(size_t dict_len);
/* log2 of the window libzstd compresses a dcz body of in_len bytes with,
 * after dict_len bytes of dictionary (0: plain zstd under the same rule):
 * reaching the start of the dictionary from the end of the body where
 * the frame then declares a window within gz_dcz_window_max() (a body of
 * at most that size, whose single-segment frame declares its content
 * size as its window), else the largest power of two within it. At most
 * GZ_DCZ_WINDOW_LOG_MAX. */
#define GZ_DCZ_WINDOW_LOG_MAX 27
int gz_dcz_window_log(size_t dict_len, size_t in_len);
/* Worst-case size of a dcz body of in_len bytes (header included), or
 * SIZE_MAX when in_len is too large for a frame. */
size_t gz_dcz_bound(size_t in_len);
/*
 * Compress in[0..in_len) into out (out_cap bytes): with d, the dcz body
 * (the 40-byte header, then one zstd frame compressed against the
 * dictionary, window within gz_dcz_window_max(), content size pledged, no
 * checksum, no dictionary ID); with d NULL, a plain zstd frame at level
 * (0: default) under the same rules, which is what the stats compare
 * against. 0 and *out_len_ret, GZ_ENOSPC, GZ_ENOMEM, GZ_EBACKEND,
 * GZ_ENOTSUP without zstd. Thread-safe: a context per call.
 */
int gz_dcz_compress(const struct gz_zdict *d, int level, const void *in, size_t in_len, void *out,
		    size_t out_cap, size_t *out_len_ret);

#endif /* GZ_DICT_H */
