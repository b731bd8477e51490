/* hnd_negotiate.h: Accept-Encoding and the lexical pieces of header fields: pure functions, no allocation. */
#ifndef HND_NEGOTIATE_H
#define HND_NEGOTIATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "gz_backend.h"
#include "hnd_public.h"

/* Bytes of an untyped body that the content sniff inspects (WHATWG MIME
 * sniffing looks at 512 as well). */
#ifndef HND_SNIFF_NBYTES
#define HND_SNIFF_NBYTES 512
#endif

/* Accept-Encoding, parsed: q-values in thousandths; -1 when not listed. */
struct hnd_accept {
	int gzip;     /* explicit gzip / x-gzip (highest if repeated) */
	int zstd;     /* explicit zstd */
	int br;       /* explicit br */
	int dcz;      /* explicit dcz (RFC 9842; "*" does not count: hnd_dict.c) */
	int identity; /* explicit identity */
	int star;     /* "*" */
	bool present; /* at least one Accept-Encoding line */
	/* Not read yet: the request whose lines hnd_accept_read() parses
	 * on first use (a response that is never compressed, an image, one
	 * opted out, never reads them); NULL once read. */
	struct MHD_Connection *lazy;
};

/* Parse lines into acc (read: lazy is NULL). */
void hnd_accept_parse(const char *const *lines, size_t count, struct hnd_accept *acc);
/* acc stands for conn's Accept-Encoding lines, read on first use. */
void hnd_accept_lazy(struct hnd_accept *acc, struct MHD_Connection *conn);
/* acc, its lines read if they were not yet (the one change a const acc
 * undergoes: a request's acc belongs to the thread queueing it). Every
 * hnd_accept_* query below calls it; read fields only through it. */
void hnd_accept_fill(struct hnd_accept *acc);
static inline const struct hnd_accept *
hnd_accept_read(const struct hnd_accept *acc)
{
	if (acc->lazy)
		hnd_accept_fill((struct hnd_accept *)acc); /* not const: hnd_accept_lazy */
	return acc;
}
/* Effective q of gzip (thousandths) from a parsed header. */
unsigned int hnd_accept_gzip_q(const struct hnd_accept *acc);
/* Whether gzip is the coding to use: acceptable and not less preferred
 * than an explicitly listed identity. */
bool hnd_accept_wants_gzip(const struct hnd_accept *acc);
/* Effective q (thousandths) of a coding: its explicit listing, else "*". */
unsigned int hnd_accept_q(const struct hnd_accept *acc, enum gz_coding coding);
/*
 * The coding to use among the norder offered in order (the server's
 * preference), RFC 9110 section 12.5.3: the highest q wins, equal q go to
 * the one first in order; none when that q is 0 or below an explicitly
 * listed identity's. Returns true and *coding_ret, or false (identity).
 * With order = { gzip } it is hnd_accept_wants_gzip.
 */
bool hnd_accept_choose(const struct hnd_accept *acc, const enum gz_coding *order, size_t norder,
		       enum gz_coding *coding_ret);

/* Split an entity-tag [W/]"opaque" at s into its weak flag and opaque-tag
 * (without quotes); the position after it, or NULL if malformed (RFC 9110
 * section 8.8.3: etagc = %x21 / %x23-7E / obs-text). */
const char *hnd_etag_parse(const char *s, bool *weak, const char **op, size_t *op_len);
/* Is the field one of the integrity fields computed over the content
 * (Content-MD5, Digest, Content-Digest, Repr-Digest; RFC 9530)? A coded
 * variant never carries a digest of other bytes. */
bool hnd_is_digest_field(const char *name);
/* Does a comma-separated header value contain token (case-insensitive)? */
bool hnd_list_has_token(const char *value, const char *token);
/* Content sniff of an untyped body: true for text-like. */
bool hnd_sniff_text(const uint8_t *body, size_t len);
/* An HTTP-date (RFC 9110 section 5.6.7), in any of its three forms, as
 * seconds since the epoch in *t_ret; false when v is NULL or no date.
 * Pinned by fuzz_etag (a date parsed, formatted as an IMF-fixdate, parses
 * back to the same second). */
bool hnd_parse_http_date(const char *v, time_t *t_ret);
/* Media type of a Content-Type value without parameters and whitespace:
 * returns a pointer into value and its length in *len_ret. */
const char *hnd_media_type(const char *value, size_t *len_ret);

/* The q-value, in thousandths, that Accept-Encoding lines give gzip (RFC
 * 9110 sections 12.4.2, 12.5.3; an explicit gzip or x-gzip over "*");
 * pinned by check_negotiate.c and fuzz_accept. */
unsigned int hnd_accept_gzip_q_lines(const char *const *lines, size_t count);
/* Whether an If-None-Match (weak != 0, RFC 9110 section 13.1.2) or
 * If-Match (strong, section 13.1.1) field value matches the resource's
 * ETag, taking W/"x" and the suffixed forms ("x-gzip", "x-dcz-...") the
 * ETag policies give as naming the resource "x"; "*" matches any. */
int hnd_etag_match(const char *field_value, const char *etag, int weak);

#endif /* HND_NEGOTIATE_H */
