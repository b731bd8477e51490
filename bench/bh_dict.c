/* bh_dict.c: make bench's dictionary rows: dcz (RFC 9842) against zstd and gzip alone, bytes and time, on the payload's two halves and on two jQuery releases. */
/*
 * One op is one whole-body compression as the handler does it on a cache
 * miss: dcz through gz_dcz_compress with the prepared dictionary (a fresh
 * context per call, as hnd_dict.c), zstd alone through the same call
 * without one (the figure dict_bytes_saved is counted against), gzip
 * through the default gzip backend at level 6. Every output is decoded
 * and compared once before it is timed (libzstd with the dictionary as raw
 * content, tests/testutil.c's gzip decoder). Lines start "dict-row", with
 * no ": " (bench/verdict.sh reads "key: value" header lines).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nettle/sha2.h>

#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include "bench.h"
#include "gz_dict.h"
#include "testutil.h"

enum { D_GZIP, D_ZSTD, D_DCZ, D_N };
static const char *const d_name[D_N] = { "gzip-6", "zstd-3", "dcz-3" };

static double
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* One compression of in by method m into out (cap bytes); its length. */
static size_t
compress_one(int m, const struct gz_zdict *zd, struct gz_compressor *gzc, const uint8_t *in,
	     size_t in_len, uint8_t *out, size_t cap)
{
	size_t n = 0;
	int rc;

	if (m == D_GZIP)
		rc = gzc->be->compress(gzc, in, in_len, out, cap, &n);
	else
		rc = gz_dcz_compress(m == D_DCZ ? zd : NULL, 3, in, in_len, out, cap, &n);
	if (rc < 0)
		die("dict rows: %s failed: %s", d_name[m], mhdgz_strerror(rc));
	return n;
}

static void
verify(int m, const uint8_t *enc, size_t enc_len, const uint8_t *dict, size_t dict_len,
       const uint8_t *orig, size_t orig_len)
{
	uint8_t *dec = NULL;
	size_t dec_len = 0;

	if (m == D_GZIP) {
		if (tu_decode("gzip", enc, enc_len, &dec, &dec_len) != 0)
			die("dict rows: gzip output does not decode");
	} else {
		ZSTD_DCtx *dc = ZSTD_createDCtx();
		size_t skip = m == D_DCZ ? GZ_DCZ_HEADER_NBYTES : 0, r;

		dec = malloc(orig_len + 1);
		if (!dc || !dec)
			die("dict rows: out of memory");
		if (m == D_DCZ && ZSTD_isError(ZSTD_DCtx_loadDictionary_advanced(
					  dc, dict, dict_len, ZSTD_dlm_byRef, ZSTD_dct_rawContent)))
			die("dict rows: libzstd refused the dictionary");
		r = ZSTD_decompressDCtx(dc, dec, orig_len + 1, enc + skip, enc_len - skip);
		if (ZSTD_isError(r))
			die("dict rows: %s output does not decode: %s", d_name[m],
			    ZSTD_getErrorName(r));
		dec_len = r;
		ZSTD_freeDCtx(dc);
	}
	if (dec_len != orig_len || memcmp(dec, orig, orig_len) != 0)
		die("dict rows: %s output decodes to other bytes", d_name[m]);
	free(dec);
}

static void
rows(const char *name, const uint8_t *dict, size_t dict_len, const uint8_t *in, size_t in_len)
{
	uint8_t hash[SHA256_DIGEST_SIZE];
	struct sha256_ctx ctx;
	struct gz_zdict *zd = NULL;
	struct gz_compressor *gzc = NULL;
	size_t cap = gz_dcz_bound(in_len) + 1024, len[D_N];
	uint8_t *buf = malloc(cap);
	double ns[D_N];
	int m, rc;

	sha256_init(&ctx);
	sha256_update(&ctx, dict_len, dict);
	sha256_digest(&ctx, sizeof hash, hash);
	rc = gz_zdict_new(dict, dict_len, 3, hash, &zd);
	if (rc == 0)
		rc = gz_compressor_new(gz_backend_default(), 6, &gzc);
	if (rc < 0 || !buf)
		die("dict rows: setup failed");
	for (m = 0; m < D_N; m++) {
		double t0, t;
		uint64_t n = 0;

		len[m] = compress_one(m, zd, gzc, in, in_len, buf, cap);
		verify(m, buf, len[m], dict, dict_len, in, in_len);
		t0 = now_ns();
		do { /* bounded: 0.2 s or 2000 ops */
			compress_one(m, zd, gzc, in, in_len, buf, cap);
			n++;
			t = now_ns();
		} while (t - t0 < 2e8 && n < 2000);
		ns[m] = (t - t0) / (double)n;
	}
	for (m = 0; m < D_N; m++)
		out("dict-row %-22s %-7s in %7zu B  dict %7zu B  out %7zu B  %6.2f%% of zstd  "
		    "%10.0f ns/op\n",
		    name, d_name[m], in_len, m == D_DCZ ? dict_len : (size_t)0, len[m],
		    100.0 * (double)len[m] / (double)len[D_ZSTD], ns[m]);
	gz_compressor_free(gzc);
	gz_zdict_free(zd);
	free(buf);
}

static uint8_t *
read_all(const char *path, size_t *len_ret)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)n)) && fread(buf, 1, (size_t)n, f) == (size_t)n) {
		*len_ret = (size_t)n;
	} else {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

void
bh_dict_rows(void)
{
	size_t big = BH_NSIZES - 1, half, l1 = 0, l2 = 0;
	uint8_t *v1, *v2;

	if (bh_opt.have_filter && regexec(&bh_opt.filter, "DictRows", 0, NULL, 0) != 0)
		return;
	out("\n# dictionary rows (RFC 9842 dcz): one whole-body compression per op\n");
	half = bh_body_len[big] / 2;
	if (half)
		rows("payload-2nd-half", bh_body[big], half, bh_body[big] + half,
		     bh_body_len[big] - half);
	v1 = read_all(BH_DICT_DIR "/jquery-3.7.0.min.js", &l1);
	v2 = read_all(BH_DICT_DIR "/jquery-3.7.1.min.js", &l2);
	if (v1 && v2)
		rows("jquery-3.7.1.min.js", v1, l1, v2, l2);
	else
		out("# dict rows: %s/jquery-3.7.*.min.js not readable: skipped\n", BH_DICT_DIR);
	free(v1);
	free(v2);
}
