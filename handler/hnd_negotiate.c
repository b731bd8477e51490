/* hnd_negotiate.c: Accept-Encoding, header value helpers, HTTP-dates, content sniffing and entity-tags. */
#define _GNU_SOURCE /* strptime, timegm */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gz_alloc.h"
#include "hnd_mtype.h"
#include "hnd_negotiate.h"

/* ------------------------------------------------------------------------ */
/* Lexical helpers (RFC 9110 section 5.6)                                  */

static inline bool
is_ows(char c)
{
	return c == ' ' || c == '\t';
}

/* Trim OWS from both ends of [*s, *s + *len). */
static void
trim(const char **s, size_t *len)
{
	while (*len && is_ows(**s)) {
		(*s)++;
		(*len)--;
	}
	while (*len && is_ows((*s)[*len - 1]))
		(*len)--;
}

/*
 * qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )  (RFC 9110
 * section 12.4.2). Returns thousandths, or -1 if malformed.
 */
static int
parse_qvalue(const char *s, size_t len)
{
	int q, scale = 100;
	size_t i;

	if (len == 0 || (s[0] != '0' && s[0] != '1'))
		return -1;
	q = (s[0] - '0') * 1000;
	if (len == 1)
		return q;
	if (s[1] != '.' || len > 5)
		return -1;
	for (i = 2; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		q += (s[i] - '0') * scale;
		scale /= 10;
	}
	return q > 1000 ? -1 : q;
}

/*
 * s[i] is the '"' opening a quoted-string (RFC 9110 section 5.6.4);
 * returns the index just past its closing '"', honouring backslash
 * escapes, or 0 when it is not closed within len.
 */
static size_t
quoted_end(const char *s, size_t len, size_t i)
{
	for (i++; i < len; i++) {
		if (s[i] == '\\')
			i++;
		else if (s[i] == '"')
			return i + 1;
	}
	return 0;
}

/*
 * One element of Accept-Encoding: codings = content-coding / "identity" /
 * "*", followed by optional ";" parameters of which only q is defined.
 * Returns false for a malformed element (ignored by the caller).
 */
static bool
parse_element(const char *s, size_t len, const char **tok, size_t *tok_len, int *q)
{
	size_t i = 0;

	*q = 1000;
	while (i < len && hnd_is_tchar(s[i]))
		i++;
	*tok = s;
	*tok_len = i;
	if (i == 0)
		return false;
	while (i < len) {
		size_t name, name_len, val, val_len;

		while (i < len && is_ows(s[i]))
			i++;
		if (i == len)
			break;
		if (s[i] != ';')
			return false;
		i++;
		while (i < len && is_ows(s[i]))
			i++;
		if (i == len || s[i] == ';')
			continue; /* an empty parameter ("gzip;q=0 ;"): nothing to read */
		name = i;
		while (i < len && hnd_is_tchar(s[i]))
			i++;
		name_len = i - name;
		while (i < len && is_ows(s[i]))
			i++;
		if (name_len == 0 || i == len || s[i] != '=')
			return false;
		i++;
		while (i < len && is_ows(s[i]))
			i++;
		val = i;
		if (i < len && s[i] == '"') {
			/* A quoted-string value (RFC 9110 section 5.6.4); q is a
			 * token, so a quoted q is malformed below. */
			i = quoted_end(s, len, i);
			if (i == 0)
				return false;
		} else {
			while (i < len && s[i] != ';' && !is_ows(s[i]))
				i++;
		}
		val_len = i - val;
		if (hnd_ascii_is(s + name, name_len, "q")) {
			*q = parse_qvalue(s + val, val_len);
			if (*q < 0)
				return false;
		}
		/* Other parameters are not defined for Accept-Encoding; skip them. */
	}
	return true;
}

/* One list element (untrimmed) into acc. */
static void
add_element(const char *el, size_t el_len, struct hnd_accept *acc)
{
	const char *tok;
	size_t tok_len;
	int q, *slot = NULL;

	trim(&el, &el_len);
	if (!el_len || !parse_element(el, el_len, &tok, &tok_len, &q))
		return;
	if (hnd_ascii_is(tok, tok_len, "gzip") || hnd_ascii_is(tok, tok_len, "x-gzip"))
		slot = &acc->gzip;
	else if (hnd_ascii_is(tok, tok_len, "zstd"))
		slot = &acc->zstd;
	else if (hnd_ascii_is(tok, tok_len, "br"))
		slot = &acc->br;
	else if (hnd_ascii_is(tok, tok_len, "dcz"))
		slot = &acc->dcz;
	else if (hnd_ascii_is(tok, tok_len, "identity"))
		slot = &acc->identity;
	else if (tok_len == 1 && tok[0] == '*')
		slot = &acc->star;
	/* Repeated codings: the most favourable listing counts. */
	if (slot && q > *slot)
		*slot = q;
}

/*
 * Elements end at commas outside quoted-strings. A '"' that is never
 * closed is an ordinary character (its element is malformed anyway), so
 * the elements after it, a refusal such as "gzip;q=0" among them, still
 * count; and no later '"' can close either (a scan from it meets the same
 * bytes in the same escape state), so the line is read once: linear time.
 */
static void
parse_line(const char *line, struct hnd_accept *acc)
{
	size_t len = strlen(line), i = 0, start = 0;
	bool quotes = true; /* a '"' may still open a quoted-string that closes */

	for (;;) {
		if (i == len || line[i] == ',') {
			add_element(line + start, i - start, acc);
			if (i == len)
				break;
			start = ++i;
		} else if (line[i] == '"' && quotes) {
			size_t q = quoted_end(line, len, i);

			if (q != 0) {
				i = q;
			} else {
				quotes = false;
				i++;
			}
		} else {
			i++;
		}
	}
}

/* No line read: every coding unlisted. */
static const struct hnd_accept accept_none = {
	.gzip = -1, .zstd = -1, .br = -1, .dcz = -1, .identity = -1, .star = -1
};

void
hnd_accept_parse(const char *const *lines, size_t count, struct hnd_accept *acc)
{
	size_t i;

	*acc = accept_none;
	for (i = 0; lines && i < count; i++) {
		if (!lines[i])
			continue;
		acc->present = true;
		parse_line(lines[i], acc);
	}
}

static void
raise_q(int *q, int other)
{
	if (other > *q)
		*q = other;
}

/* Parse every Accept-Encoding line as libmicrohttpd hands them over
 * (RFC 9110 section 5.3: all lines count, as one list); the name's
 * length, which libmicrohttpd knows, rules out nearly every other field
 * without a compare. */
static enum MHD_Result
accept_iter(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size, const char *value,
	    size_t value_size)
{
	struct hnd_accept *acc = cls;
	struct hnd_accept one;
	const char *lines[1] = { value };

	(void)kind, (void)value_size;
	if (!value || key_size != sizeof MHD_HTTP_HEADER_ACCEPT_ENCODING - 1 ||
	    !hnd_ascii_ieq(key, MHD_HTTP_HEADER_ACCEPT_ENCODING, key_size))
		return MHD_YES;
	hnd_accept_parse(lines, 1, &one);
	acc->present = true;
	/* A coding on several lines: its highest q counts. */
	raise_q(&acc->gzip, one.gzip);
	raise_q(&acc->zstd, one.zstd);
	raise_q(&acc->br, one.br);
	raise_q(&acc->dcz, one.dcz);
	raise_q(&acc->identity, one.identity);
	raise_q(&acc->star, one.star);
	return MHD_YES;
}

void
hnd_accept_lazy(struct hnd_accept *acc, struct MHD_Connection *conn)
{
	*acc = accept_none;
	acc->lazy = conn;
}

void
hnd_accept_fill(struct hnd_accept *acc)
{
	struct MHD_Connection *conn = acc->lazy;

	acc->lazy = NULL; /* the fields are accept_none's until the lines come */
	MHD_get_connection_values_n(conn, MHD_HEADER_KIND, accept_iter, acc);
}

unsigned int
hnd_accept_gzip_q(const struct hnd_accept *acc)
{
	acc = hnd_accept_read(acc);
	/* An explicit listing wins over "*" (RFC 9110 section 12.5.3). */
	if (acc->gzip >= 0)
		return (unsigned int)acc->gzip;
	if (acc->star >= 0)
		return (unsigned int)acc->star;
	return 0;
}

bool
hnd_accept_wants_gzip(const struct hnd_accept *acc)
{
	unsigned int q = hnd_accept_gzip_q(acc);

	acc = hnd_accept_read(acc); /* read by hnd_accept_gzip_q */
	if (q == 0)
		return false;
	/* A client that explicitly prefers identity gets it. */
	return acc->identity < 0 || q >= (unsigned int)acc->identity;
}

/* hnd_accept_q of an acc already read. */
static unsigned int
accept_q(const struct hnd_accept *acc, enum gz_coding coding)
{
	int q = coding == GZ_CODING_ZSTD ? acc->zstd : coding == GZ_CODING_BR ? acc->br : acc->gzip;

	/* An explicit listing wins over "*" (RFC 9110 section 12.5.3). */
	if (q >= 0)
		return (unsigned int)q;
	if (acc->star >= 0)
		return (unsigned int)acc->star;
	return 0;
}

unsigned int
hnd_accept_q(const struct hnd_accept *acc, enum gz_coding coding)
{
	return accept_q(hnd_accept_read(acc), coding);
}

bool
hnd_accept_choose(const struct hnd_accept *acc, const enum gz_coding *order, size_t norder,
		  enum gz_coding *coding_ret)
{
	unsigned int best_q = 0;
	size_t i, best = 0;

	acc = hnd_accept_read(acc);
	if (!acc->present)
		return false; /* every q is 0 */
	/* Strictly greater: among equal q-values the first in the server's
	 * order stays. */
	for (i = 0; i < norder; i++) {
		unsigned int q = accept_q(acc, order[i]);

		if (q > best_q) {
			best_q = q;
			best = i;
		}
	}
	if (best_q == 0)
		return false;
	/* A client that explicitly prefers identity gets it. */
	if (acc->identity >= 0 && best_q < (unsigned int)acc->identity)
		return false;
	*coding_ret = order[best];
	return true;
}

MHDGZ_API int
mhdgz_accept_coding(const char *const *lines, size_t count, const enum mhdgz_coding *offered,
		    size_t noffered, enum mhdgz_coding *coding_ret)
{
	struct hnd_accept acc;
	enum gz_coding order[GZ_CODING_COUNT], k;
	size_t i, n = 0;

	if (!offered || !coding_ret)
		return 0;
	for (i = 0; i < noffered && n < GZ_CODING_COUNT; i++)
		if ((unsigned int)offered[i] < GZ_CODING_COUNT)
			order[n++] = (enum gz_coding)offered[i];
	hnd_accept_parse(lines, count, &acc);
	if (!hnd_accept_choose(&acc, order, n, &k))
		return 0;
	*coding_ret = (enum mhdgz_coding)k;
	return 1;
}

unsigned int
hnd_accept_gzip_q_lines(const char *const *lines, size_t count)
{
	struct hnd_accept acc;

	hnd_accept_parse(lines, count, &acc);
	return hnd_accept_gzip_q(&acc);
}

/* ------------------------------------------------------------------------ */
/* Header value helpers                                                     */

bool
hnd_list_has_token(const char *value, const char *token)
{
	const char *p = value;

	while (p && *p) {
		const char *end = strchr(p, ',');
		const char *el = p;
		size_t len = end ? (size_t)(end - p) : strlen(p);

		trim(&el, &len);
		if (hnd_ascii_is(el, len, token))
			return true;
		p = end ? end + 1 : NULL;
	}
	return false;
}

const char *
hnd_media_type(const char *value, size_t *len_ret)
{
	const char *semi = strchr(value, ';');
	size_t start = 0, end = semi ? (size_t)(semi - value) : strlen(value);

	/* Indices rather than trim(): gcc 12's -Wdangling-pointer at -O2
	 * mistakes a pointer moved through its address for a dangling one. */
	while (start < end && is_ows(value[start]))
		start++;
	while (end > start && is_ows(value[end - 1]))
		end--;
	*len_ret = end - start;
	return value + start;
}

/*
 * A body without Content-Type is text-like when its first bytes hold no
 * "binary data byte" of the WHATWG MIME Sniffing standard (section 7.2):
 * 0x00-0x08, 0x0B, 0x0E-0x1A, 0x1C-0x1F. Bytes >= 0x80 are allowed (UTF-8).
 * Compressed formats start with such bytes in their first few bytes (gzip
 * 1f 8b 08 00, zstd 28 b5 2f fd ..., PNG 89 'PNG' 0d 0a 1a 0a, zip 'PK' 03 04),
 * JPEG ff d8 ff e0 00 ...), so they are caught by the same test.
 */
bool
hnd_sniff_text(const uint8_t *body, size_t len)
{
	size_t i, n = len < HND_SNIFF_NBYTES ? len : HND_SNIFF_NBYTES;

	for (i = 0; i < n; i++) {
		uint8_t b = body[i];
		if (b <= 0x08 || b == 0x0b || (b >= 0x0e && b <= 0x1a) || (b >= 0x1c && b <= 0x1f))
			return false;
	}
	return true;
}

/* ------------------------------------------------------------------------ */
/* Entity-tags (RFC 9110 section 8.8.3)                                     */


const char *
hnd_etag_parse(const char *s, bool *weak, const char **op, size_t *op_len)
{
	*weak = false;
	if (s[0] == 'W' && s[1] == '/') {
		*weak = true;
		s += 2;
	}
	if (*s != '"')
		return NULL;
	s++;
	*op = s;
	while (*s && *s != '"') {
		unsigned char c = (unsigned char)*s;
		if (c < 0x21 || c == 0x7f)
			return NULL;
		s++;
	}
	if (*s != '"')
		return NULL;
	*op_len = (size_t)(s - *op);
	return s + 1;
}

/* Does member opaque m denote the resource's opaque r, directly or as one
 * of the suffixed forms this library produces ("-gzip", "-zstd", "-br",
 * and dcz's "-dcz-" with 8 lowercase hex digits: hnd_dict.c)? */
static bool
opaque_match(const char *m, size_t m_len, const char *r, size_t r_len)
{
	enum gz_coding k;

	if (m_len == r_len && memcmp(m, r, r_len) == 0)
		return true;
	if (m_len <= r_len + 1 || memcmp(m, r, r_len) != 0 || m[r_len] != '-')
		return false;
	for (k = 0; k < GZ_CODING_COUNT; k++) {
		const char *name = gz_coding_name(k);

		if (m_len - r_len - 1 == strlen(name) &&
		    memcmp(m + r_len + 1, name, strlen(name)) == 0)
			return true;
	}
	if (m_len - r_len - 1 == 12 && memcmp(m + r_len + 1, "dcz-", 4) == 0) {
		size_t i;

		for (i = r_len + 5; i < m_len; i++)
			if (!((m[i] >= '0' && m[i] <= '9') || (m[i] >= 'a' && m[i] <= 'f')))
				return false;
		return true;
	}
	return false;
}

int
hnd_etag_match(const char *field_value, const char *etag, int weak)
{
	const char *p = field_value, *r_op;
	size_t r_len;
	bool r_weak;

	if (!field_value || !etag)
		return 0;
	while (is_ows(*p))
		p++;
	if (*p == '*') {
		const char *q = p + 1;
		while (is_ows(*q))
			q++;
		if (*q == '\0')
			return 1;
	}
	while (is_ows(*etag))
		etag++;
	if (!hnd_etag_parse(etag, &r_weak, &r_op, &r_len))
		return 0;
	if (!weak && r_weak)
		return 0;
	while (*p) {
		bool m_weak;
		const char *m_op, *next;
		size_t m_len;

		while (is_ows(*p) || *p == ',')
			p++;
		if (!*p)
			break;
		next = hnd_etag_parse(p, &m_weak, &m_op, &m_len);
		if (!next) {
			/* Malformed member: skip to the next comma. */
			p = strchr(p, ',');
			if (!p)
				break;
			continue;
		}
		if ((weak || !m_weak) && opaque_match(m_op, m_len, r_op, r_len))
			return 1;
		p = next;
	}
	return 0;
}

/* An HTTP-date (RFC 9110 section 5.6.7) in any of its three forms, which a
 * recipient must all accept: IMF-fixdate, the obsolete RFC 850 form (a
 * two-digit year, taken as the nearest such year not over 50 years ahead)
 * and asctime's. strptime and timegm do the parsing (hnd_negotiate.h). */
bool
hnd_parse_http_date(const char *v, time_t *t_ret)
{
	static const char *const forms[] = {
		"%a, %d %b %Y %H:%M:%S GMT", /* Sun, 06 Nov 1994 08:49:37 GMT */
		"%a, %d-%b-%y %H:%M:%S GMT", /* Sunday, 06-Nov-94 08:49:37 GMT */
		"%a %b %d %H:%M:%S %Y",      /* Sun Nov  6 08:49:37 1994 */
	};

	for (size_t i = 0; v && i < sizeof forms / sizeof forms[0]; i++) {
		struct tm tm;
		const char *end;

		memset(&tm, 0, sizeof tm);
		end = strptime(v, forms[i], &tm);
		if (!end || *end != '\0')
			continue;
		if (i == 1) {
			struct tm now;
			time_t t = time(NULL);
			int year;

			gmtime_r(&t, &now);
			year = now.tm_year + 1900 - (now.tm_year + 1900) % 100 + tm.tm_year % 100;
			if (year > now.tm_year + 1900 + 50)
				year -= 100;
			tm.tm_year = year - 1900;
		}
		*t_ret = timegm(&tm);
		return *t_ret != (time_t)-1;
	}
	return false;
}
