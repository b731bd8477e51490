/* gz_backend.c: the backend registry and compressor creation (level check, instance allocation). */
#include "config.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gz_error.h"
#include "gz_alloc.h"
#include "gz_backend.h"

/* Preference order: libdeflate is the fastest whole-buffer backend at
 * zlib-like ratios; ISA-L is faster still but tops out near zlib level 2;
 * zlib is the one every system has and the only other streaming backend. */
const struct gz_backend *const gz_backends[] = {
#ifdef HAVE_LIBDEFLATE
	&gz_backend_libdeflate,
#endif
#ifdef HAVE_ISAL
	&gz_backend_isal,
#endif
	&gz_backend_zlib,
	NULL,
};

const struct gz_backend *const gz_coding_backends[] = {
#ifdef HAVE_ZSTD
	&gz_backend_zstd,
#endif
#ifdef HAVE_BROTLI
	&gz_backend_brotli,
#endif
	NULL,
};

const struct gz_backend *
gz_backend_for_coding(enum gz_coding coding)
{
	size_t i;

	if (coding == GZ_CODING_GZIP)
		return gz_backend_default();
	for (i = 0; gz_coding_backends[i]; i++)
		if (gz_coding_backends[i]->coding == coding)
			return gz_coding_backends[i];
	return NULL;
}

const char *
gz_coding_name(enum gz_coding coding)
{
	switch (coding) {
	case GZ_CODING_GZIP:
		return "gzip";
	case GZ_CODING_ZSTD:
		return "zstd";
	case GZ_CODING_BR:
		return "br";
	default:
		return NULL;
	}
}

const struct gz_backend *
gz_backend_find(const char *name)
{
	size_t i;

	if (!name)
		return NULL;
	for (i = 0; gz_backends[i]; i++)
		if (strcmp(gz_backends[i]->name, name) == 0)
			return gz_backends[i];
	return NULL;
}

const struct gz_backend *
gz_backend_default(void)
{
	return gz_backends[0];
}

const struct gz_backend *
gz_backend_by_id(int id)
{
	size_t i;

	for (i = 0; gz_backends[i]; i++)
		if (gz_backends[i]->id == id)
			return gz_backends[i];
	return NULL;
}

const struct gz_backend *
gz_stream_backend(const struct gz_backend *be)
{
	return (be->caps & GZ_CAP_STREAM) ? be : &gz_backend_zlib;
}

int
gz_stream_level(const struct gz_backend *be, int level)
{
	const struct gz_backend *sb = gz_stream_backend(be);

	return level > sb->level_max   ? sb->level_max
	       : level < sb->level_min ? sb->level_min
				       : level;
}

int
gz_compressor_new(const struct gz_backend *be, int level, struct gz_compressor **c_ret)
{
	return gz_compressor_new_win(be, level, 0, 0, c_ret);
}

int
gz_compressor_new_win(const struct gz_backend *be, int level, int window_bits, int mem_level,
		      struct gz_compressor **c_ret)
{
	struct gz_compressor *c;
	int rc;

	if (!be || !c_ret || be->inst_nbytes < sizeof *c)
		return GZ_EINVAL;
	/* Never clamp: a level the caller did not ask for is a silent
	 * configuration error. */
	if (level < be->level_min || level > be->level_max)
		return GZ_EINVAL;
	if ((window_bits != 0 &&
	     (window_bits < GZ_WINDOW_BITS_MIN || window_bits > GZ_WINDOW_BITS_MAX)) ||
	    (mem_level != 0 && (mem_level < GZ_MEM_LEVEL_MIN || mem_level > GZ_MEM_LEVEL_MAX)))
		return GZ_EINVAL;
	c = gz_calloc(1, be->inst_nbytes);
	if (!c)
		return GZ_ENOMEM;
	c->be = be;
	c->level = level;
	c->pool_next = NULL;
	c->scratch = NULL;
	c->scratch_cap = 0;
	c->window_bits = window_bits;
	c->mem_level = mem_level;
	rc = be->init(c);
	if (rc < 0) {
		/* init cleaned up after itself; only the instance is left. */
		gz_free(c);
		return rc;
	}
	*c_ret = c;
	return 0;
}

void
gz_compressor_free(struct gz_compressor *c)
{
	if (!c)
		return;
	c->be->fini(c);
	gz_free(c->scratch);
	gz_free(c);
}

int
gz_compressor_scratch(struct gz_compressor *c, size_t nbytes)
{
	uint8_t *p;

	if (c->scratch_cap >= nbytes)
		return 0;
	/* Grow only, to exactly what is asked: the scratch lives as long as
	 * the (pooled) compressor, so rounding up would be held for good. The
	 * contents are scratch, so no copy. */
	p = gz_malloc(nbytes);
	if (!p)
		return GZ_ENOMEM;
	gz_free(c->scratch);
	c->scratch = p;
	c->scratch_cap = nbytes;
	return 0;
}

/* RFC 1952 section 2.3.1: ID1 ID2 CM FLG; FLG's bits. */
#define GZ_FLG_FTEXT 0x01u
#define GZ_FLG_FCOMMENT 0x10u

int
gz_header_comment(const uint8_t *hdr, size_t comment_nbytes, size_t from, uint8_t *out, size_t n)
{
	size_t total = GZ_HEADER_NBYTES + comment_nbytes, i;

	/* Only a plain member header: the comment would go after any FEXTRA
	 * and FNAME and before FHCRC, which these backends never write. */
	if (comment_nbytes == 0 || hdr[0] != 0x1f || hdr[1] != 0x8b || hdr[2] != 8 ||
	    (hdr[3] & ~GZ_FLG_FTEXT) != 0 || from > total || n > total - from)
		return GZ_EINVAL;
	for (i = 0; i < n; i++) {
		size_t at = from + i;

		if (at < GZ_HEADER_NBYTES)
			out[i] = at == 3 ? (uint8_t)(hdr[3] | GZ_FLG_FCOMMENT) : hdr[at];
		else
			out[i] = at == total - 1 ? 0 : ' ';
	}
	return 0;
}

int
gz_compress_member(struct gz_compressor *c, const void *in, size_t in_len, size_t comment_nbytes,
		   uint8_t *out, size_t out_cap, size_t *out_len_ret)
{
	uint8_t hdr[GZ_HEADER_NBYTES];
	size_t len;
	int rc;

	if (comment_nbytes == 0)
		return c->be->compress(c, in, in_len, out, out_cap, out_len_ret);
	if (c->be->coding != GZ_CODING_GZIP || out_cap < comment_nbytes)
		return GZ_EINVAL;
	/* The member goes comment_nbytes further on; its header then moves
	 * to the front, rewritten, and the comment fills the gap. */
	rc = c->be->compress(c, in, in_len, out + comment_nbytes, out_cap - comment_nbytes, &len);
	if (rc < 0)
		return rc;
	if (len < GZ_HEADER_NBYTES)
		return GZ_EBACKEND;
	memcpy(hdr, out + comment_nbytes, sizeof hdr);
	rc = gz_header_comment(hdr, comment_nbytes, 0, out, GZ_HEADER_NBYTES + comment_nbytes);
	if (rc < 0)
		return rc;
	*out_len_ret = len + comment_nbytes;
	return 0;
}
