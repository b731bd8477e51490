/* hnd_dict.c: compression dictionaries (RFC 9842): registration, their Use-As-Dictionary field, their release. */
/*
 * Why SHA-256 from nettle: it is already the handler's hash library
 * (Content-Digest, BREACH padding keys) and libmicrohttpd's TLS stack
 * pulls it in anyway; no new dependency. Which dictionary a request may
 * use is the plan's (hnd_decide.c); its dcz body is hnd_dcz.c's.
 */
#include <stdio.h>
#include <string.h>

#include "gz_alloc.h"
#include <nettle/sha2.h>
#include <nettle/base64.h>
#include "hnd_stats.h"
#include "hnd_negotiate.h"
#include "hnd_plan.h"
#include "hnd_entry.h"
#include "hnd_handle.h"
#include "hnd_headers.h"
#include "hnd_repr.h"
#include "hnd_stream.h"
#include "hnd_dict.h"
#include "gz_dict.h"

/* Longest pattern and id accepted, in bytes (RFC 9842 caps id at 1024). */
#define HND_DICT_FIELD_MAX 1024
/* Most match-dest entries. */
#define HND_DICT_DEST_MAX 8


/* Is the pattern one of the supported subset (see mhdgz.h)? */
static bool
pattern_ok(const char *p)
{
	size_t len = strlen(p), i;

	if (len == 0 || len > HND_DICT_FIELD_MAX || p[0] != '/')
		return false;
	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)p[i];

		if (ch <= 0x20 || ch >= 0x7f || strchr("\"\\:(){}?+#", ch))
			return false;
	}
	return true;
}

/* sf-string content without escapes: printable ASCII but '"' and '\\'. */
static bool
id_ok(const char *id)
{
	size_t len = strlen(id), i;

	if (len > HND_DICT_FIELD_MAX)
		return false;
	for (i = 0; i < len; i++)
		if (id[i] < 0x20 || id[i] > 0x7e || id[i] == '"' || id[i] == '\\')
			return false;
	return true;
}

static bool
dest_ok(const char *d)
{
	size_t len = strlen(d), i;

	if (len == 0 || len > 32)
		return false;
	for (i = 0; i < len; i++)
		if (!((d[i] >= 'a' && d[i] <= 'z') || d[i] == '-'))
			return false;
	return true;
}

static void
dict_free(struct mhdgz_dictionary *d)
{
	gz_zdict_free(d->zd);
	gz_free(d->match);
	gz_free(d->id);
	gz_free(d->field);
	gz_free(d);
}

/* The Use-As-Dictionary value (RFC 8941 dictionary): match, match-dest,
 * id. NULL without memory. */
static char *
make_field(const char *match, const char *const *dest, const char *id)
{
	size_t len = strlen(match) + sizeof "match=\"\"", i;
	char *f, *w;

	if (dest)
		for (i = 0; dest[i]; i++)
			len += strlen(dest[i]) + 4;
	len += sizeof ", match-dest=()";
	if (id)
		len += strlen(id) + sizeof ", id=\"\"";
	f = gz_malloc(len);
	if (!f)
		return NULL;
	w = f + sprintf(f, "match=\"%s\"", match);
	if (dest && dest[0]) {
		w += sprintf(w, ", match-dest=(");
		for (i = 0; dest[i]; i++)
			w += sprintf(w, "%s\"%s\"", i ? " " : "", dest[i]);
		w += sprintf(w, ")");
	}
	if (id)
		sprintf(w, ", id=\"%s\"", id);
	return f;
}

MHDGZ_API int
mhdgz_dictionary_add(struct mhdgz *gz, const void *data, size_t data_nbytes,
		     const struct mhdgz_dictionary_options *opts,
		     const struct mhdgz_dictionary **dict_ret)
{
	struct mhdgz_dictionary *d, *head;
	struct sha256_ctx ctx;
	const struct hnd_coder *z;
	size_t i;
	int rc;

	if (!gz || !data || !opts || opts->size != sizeof *opts || !opts->match ||
	    data_nbytes == 0 || data_nbytes > GZ_DICT_MAX_NBYTES || !pattern_ok(opts->match) ||
	    (opts->id && !id_ok(opts->id)))
		return MHDGZ_EINVAL;
	for (i = 0; opts->match_dest && opts->match_dest[i]; i++)
		if (i == HND_DICT_DEST_MAX || !dest_ok(opts->match_dest[i]))
			return MHDGZ_EINVAL;
	d = gz_calloc(1, sizeof *d);
	if (!d)
		return MHDGZ_ENOMEM;
	d->nbytes = data_nbytes;
	sha256_init(&ctx);
	sha256_update(&ctx, data_nbytes, data);
	sha256_digest(&ctx, sizeof d->hash, d->hash);
	rc = MHDGZ_ENOMEM;
	d->match = gz_strndup(opts->match, strlen(opts->match));
	if (opts->id) {
		d->id = gz_malloc(strlen(opts->id) + 3);
		if (d->id)
			sprintf(d->id, "\"%s\"", opts->id);
	}
	d->field = make_field(opts->match, opts->match_dest, opts->id);
	if (!d->match || (opts->id && !d->id) || !d->field)
		goto fail;
	z = &gz->coder[GZ_CODING_ZSTD];
	rc = gz_zdict_new(data, data_nbytes, z->be ? z->level : 0, d->hash, &d->zd);
	if (rc < 0)
		goto fail;
	/* Publish: the node is complete before it becomes visible. */
	head = atomic_load_explicit(&gz->dicts, memory_order_relaxed);
	do {
		d->next = head;
	} while (!atomic_compare_exchange_weak_explicit(&gz->dicts, &head, d, memory_order_release,
							memory_order_relaxed));
	if (dict_ret)
		*dict_ret = d;
	return 0;
fail:
	dict_free(d);
	return rc;
}

void
hnd_dicts_free(struct mhdgz *gz)
{
	struct mhdgz_dictionary *d = atomic_load(&gz->dicts), *next;

	for (; d; d = next) {
		next = d->next;
		dict_free(d);
	}
	atomic_store(&gz->dicts, NULL);
}

MHDGZ_API int
mhdgz_response_use_as_dictionary(struct MHD_Response *response, const struct mhdgz_dictionary *dict)
{
	if (!response || !dict)
		return MHDGZ_EINVAL;
	return MHD_add_response_header(response, "Use-As-Dictionary", dict->field) == MHD_YES
		       ? 0
		       : MHDGZ_EMHD;
}
