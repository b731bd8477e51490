/* bh_common.c: the bench's shared state (rows, options, payload slices, the output file) and the helpers every bench file calls: out, die, nginx_params. It calls no other bench file. */
/*
 * The bench's files depend one way: bench_handler.c (main, the rows, the
 * options) calls the runner (bh_runner.c), the verification (bh_verify.c)
 * and the extra rows (bh_events.c, bh_dict.c); the runner and the
 * verification call bh_stream.c; all of them use this file and
 * bh_alloc.c, which call none of them.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "config.h"

#include <stdarg.h>
#include <stdlib.h>

#include "bench.h"
#include "payload.h"

const char *const bh_kind_name[K_COUNT] = {
	[K_HANDLER] = "GzipHandler",     [K_RAW] = "Raw",
	[K_CACHED] = "Cached",           [K_UNPOOLED] = "Unpooled",
	[K_SMALLWIN] = "RawSmallWindow", [K_IDENTITY] = "Identity",
	[K_PLAIN] = "PlainMHD",          [K_PADDED] = "Padded",
	[K_STREAM] = "Stream",
};

const size_t bh_size[BH_NSIZES] = { PAYLOAD_JSON_2K, PAYLOAD_JSON_20K, PAYLOAD_JSON_100K };
const char *const bh_size_name[BH_NSIZES] = { "2k", "20k", "100k" };

/* The payload slices, one per size. */
uint8_t *bh_body[BH_NSIZES];
size_t bh_body_len[BH_NSIZES];

struct bh_opts bh_opt;
int bh_online_cpus;
struct bh_cfg *bh_cfgs;

FILE *bh_out_file;

void
out(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	if (bh_out_file) {
		va_start(ap, fmt);
		vfprintf(bh_out_file, fmt, ap);
		va_end(ap);
	}
}

void
die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("bench_handler: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/*
 * zlib parameters sized to a known body length as nginx's gzip filter does
 * (ngx_http_gzip_filter_module.c): halve the window (and the hash, via
 * memLevel) while the body is smaller than half the window minus zlib's
 * 262-byte lookahead, so every match distance the body can use is still in
 * the window. Returns 0 if the defaults (15, 8) stand. zlib refuses
 * windowBits 8 with the gzip wrapper, hence the floor of 9.
 */
int
nginx_params(size_t len, int *wbits_ret, int *memlevel_ret)
{
	int wbits = 15, memlevel = 8;

	while (wbits > 9 && len < ((size_t)1 << (wbits - 1)) - 262) {
		wbits--;
		memlevel--;
	}
	if (memlevel < 1)
		memlevel = 1;
	*wbits_ret = wbits;
	*memlevel_ret = memlevel;
	return wbits != 15;
}
