/* fuzz_accept.c: libFuzzer target for the Accept-Encoding parser (hnd_accept_gzip_q_lines, hnd_accept_parse). */
/*
 * The input is split into header lines at '\n' and NUL. Checked for every
 * input, besides the sanitizers' own checks:
 *  - every q-value is -1 (not listed) or 0..1000, hnd_accept_gzip_q_lines() is
 *    0..1000 and equals hnd_accept_gzip_q() of the parse;
 *  - parsing the lines together equals merging the parses of each line (what
 *    mhdgz_queue_response() does, line by line, while hnd_accept_parse()
 *    of the lines parses them together), equals parsing them joined by
 *    commas into one line when no line leaves a '"' open (RFC 9110
 *    section 5.3: a list field's lines combine with commas), and NULL
 *    entries between lines change nothing;
 *  - hnd_accept_wants_gzip() implies an acceptable gzip not less preferred
 *    than an explicit identity;
 *  - the parse equals a reference built from POSIX regular expressions for
 *    the grammar of RFC 9110 sections 12.4.2 and 12.5.3 (with the leniency
 *    the library documents: OWS around "=", unknown and empty parameters
 *    skipped, quoted-string values, a '"' never closed splitting nothing,
 *    the most favourable listing of a repeated coding counting).
 */
#include <regex.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hnd_negotiate.h"
#include "fuzz_util.h"

/* Most lines taken from one input. */
#define FZ_MAX_LINES 64

#define TCHAR "[-!#$%&'*+.^_`|~0-9A-Za-z]"

/* A parameter value: a quoted-string (RFC 9110 section 5.6.4, backslash
 * escapes), or a run of characters up to the next ';' or whitespace that
 * does not start with '"', or nothing. */
#define VALUE "(\"([^\"\\\\]|\\\\.)*\"|[^; \t\"][^; \t]*|)"
/* One parameter after a coding, anchored where the last one ended:
 * ";" with OWS, then "name = value" or nothing (an empty parameter). */
static const char re_param_src[] = "^[ \t]*;[ \t]*((" TCHAR "+)[ \t]*=[ \t]*" VALUE ")?";
/* qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ) */
static const char re_qvalue_src[] = "^(0(\\.[0-9]{0,3})?|1(\\.0{0,3})?)$";

static regex_t re_param, re_qvalue;

static bool
is_ows(char c)
{
	return c == ' ' || c == '\t';
}

/* Thousandths of a qvalue the regex accepted: "0.5" -> 500. */
static int
ref_qvalue(const char *s)
{
	int q = (s[0] - '0') * 1000, scale = 100;

	if (s[1] == '.')
		for (s += 2; *s; s++, scale /= 10)
			q += (*s - '0') * scale;
	return q;
}

/* Parse one element (trimmed copy, NUL-terminated) into ref: a token,
 * then parameters matched one by one with re_param, then OWS only. */
static void
ref_element(char *el, struct hnd_accept *ref)
{
	size_t tok_len = strspn(el, "-!#$%&'*+.^_`|~0123456789"
				    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz");
	char *p = el + tok_len;
	int q = 1000, *slot = NULL;

	if (tok_len == 0)
		return; /* malformed: ignored */
	for (;;) {
		regmatch_t m[5];

		if (regexec(&re_param, p, 5, m, 0) != 0 || m[0].rm_eo == 0)
			break;
		/* m[2]: name, m[3]: value; a q must be a qvalue token. */
		if (m[1].rm_so >= 0 &&
		    fz_ieq(p + m[2].rm_so, (size_t)(m[2].rm_eo - m[2].rm_so), "q")) {
			char val[64];
			size_t vlen = (size_t)(m[3].rm_eo - m[3].rm_so);

			if (vlen >= sizeof val)
				return;
			memcpy(val, p + m[3].rm_so, vlen);
			val[vlen] = '\0';
			if (regexec(&re_qvalue, val, 0, NULL, 0) != 0)
				return; /* a bad q makes the element malformed */
			q = ref_qvalue(val);
		}
		p += m[0].rm_eo;
	}
	while (is_ows(*p))
		p++;
	if (*p)
		return; /* something else follows: malformed */
	if (fz_ieq(el, tok_len, "gzip") || fz_ieq(el, tok_len, "x-gzip"))
		slot = &ref->gzip;
	else if (fz_ieq(el, tok_len, "identity"))
		slot = &ref->identity;
	else if (tok_len == 1 && el[0] == '*')
		slot = &ref->star;
	if (slot && q > *slot)
		*slot = q;
}

/* Index just past the quoted-string opening at s[i], or 0 if it is never
 * closed. */
static size_t
ref_quote_end(const char *s, size_t i)
{
	for (i++; s[i]; i++) {
		if (s[i] == '\\' && s[i + 1])
			i++;
		else if (s[i] == '\\')
			return 0;
		else if (s[i] == '"')
			return i + 1;
	}
	return 0;
}

/* Does every '"' of line close? (a list that can be joined to another by
 * a comma without changing either: RFC 9110 section 5.3 assumes it) */
static bool
ref_quotes_balanced(const char *line)
{
	for (size_t i = 0; line[i]; i++) {
		if (line[i] == '"') {
			size_t e = ref_quote_end(line, i);

			if (e == 0)
				return false;
			i = e - 1;
		}
	}
	return true;
}

static void
ref_parse(const char *const *lines, size_t n, struct hnd_accept *ref)
{
	size_t i;

	ref->gzip = ref->identity = ref->star = -1;
	ref->present = false;
	for (i = 0; i < n; i++) {
		char *copy;
		size_t start = 0, k = 0;

		if (!lines[i])
			continue;
		ref->present = true;
		copy = strdup(lines[i]);
		if (!copy)
			abort();
		/* Elements end at commas outside closed quoted-strings; empty
		 * ones are allowed and ignored. */
		for (;;) {
			bool last = copy[k] == '\0';

			if (last || copy[k] == ',') {
				char *el = copy + start, *end = copy + k;

				copy[k] = '\0';
				while (is_ows(*el))
					el++;
				while (end > el && is_ows(end[-1]))
					*--end = '\0';
				if (*el)
					ref_element(el, ref);
				if (last)
					break;
				start = ++k;
				continue;
			}
			if (copy[k] == '"') {
				size_t e = ref_quote_end(copy, k);

				if (e != 0) {
					k = e;
					continue;
				}
			}
			k++;
		}
		free(copy);
	}
}

static void
check_range(const struct hnd_accept *a, const char *what)
{
	FZ_CHECK(a->gzip >= -1 && a->gzip <= 1000, "%s: gzip q %d", what, a->gzip);
	FZ_CHECK(a->identity >= -1 && a->identity <= 1000, "%s: identity q %d", what, a->identity);
	FZ_CHECK(a->star >= -1 && a->star <= 1000, "%s: star q %d", what, a->star);
}

static void
check_same(const struct hnd_accept *a, const struct hnd_accept *b, const char *what)
{
	FZ_CHECK(a->gzip == b->gzip && a->identity == b->identity && a->star == b->star &&
			 a->present == b->present,
		 "%s: gzip %d/%d identity %d/%d star %d/%d present %d/%d", what, a->gzip, b->gzip,
		 a->identity, b->identity, a->star, b->star, a->present, b->present);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (regcomp(&re_param, re_param_src, REG_EXTENDED) != 0 ||
	    regcomp(&re_qvalue, re_qvalue_src, REG_EXTENDED | REG_NOSUB) != 0)
		abort();
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *lines[FZ_MAX_LINES], *sparse[2 * FZ_MAX_LINES + 1];
	char *buf, *joined, *jp;
	struct hnd_accept all, merged, one, ref, j, s;
	size_t n, i, jlen = 1;
	unsigned int q;
	bool wants;

	n = fz_lines(data, size, &buf, lines, FZ_MAX_LINES);

	hnd_accept_parse(lines, n, &all);
	check_range(&all, "parse");
	FZ_CHECK(all.present == (n > 0), "present %d with %zu lines", all.present, n);
	q = hnd_accept_gzip_q_lines(lines, n);
	FZ_CHECK(q <= 1000, "q %u", q);
	FZ_CHECK(q == hnd_accept_gzip_q(&all), "q %u vs %u", q, hnd_accept_gzip_q(&all));
	wants = hnd_accept_wants_gzip(&all);
	if (wants)
		FZ_CHECK(q > 0 && (all.identity < 0 || q >= (unsigned int)all.identity),
			 "wants gzip at q %u with identity %d", q, all.identity);
	else
		FZ_CHECK(q == 0 || (all.identity >= 0 && q < (unsigned int)all.identity),
			 "refuses gzip at q %u with identity %d", q, all.identity);

	/* Line by line, merged as mhdgz_queue_response() merges them. */
	hnd_accept_parse(NULL, 0, &merged);
	for (i = 0; i < n; i++) {
		hnd_accept_parse(&lines[i], 1, &one);
		check_range(&one, "one line");
		merged.present = true;
		if (one.gzip > merged.gzip)
			merged.gzip = one.gzip;
		if (one.identity > merged.identity)
			merged.identity = one.identity;
		if (one.star > merged.star)
			merged.star = one.star;
	}
	check_same(&all, &merged, "together vs line by line");

	/* The lines joined with commas into one. */
	for (i = 0; i < n; i++)
		jlen += strlen(lines[i]) + 1;
	joined = malloc(jlen);
	if (!joined)
		abort();
	jp = joined;
	for (i = 0; i < n; i++) {
		size_t l = strlen(lines[i]);
		if (i)
			*jp++ = ',';
		memcpy(jp, lines[i], l);
		jp += l;
	}
	*jp = '\0';
	{
		const char *one_line[1] = { joined };
		hnd_accept_parse(one_line, n ? 1 : 0, &j);
	}
	/* A '"' left open on one line would swallow the next once joined:
	 * the equality holds for lines that are lists on their own. */
	{
		bool balanced = true;

		for (i = 0; i < n && balanced; i++)
			balanced = ref_quotes_balanced(lines[i]);
		if (balanced)
			check_same(&all, &j, "lines vs comma-joined");
	}
	free(joined);

	/* NULL entries are skipped. */
	for (i = 0; i < n; i++) {
		sparse[2 * i] = NULL;
		sparse[2 * i + 1] = lines[i];
	}
	sparse[2 * n] = NULL;
	hnd_accept_parse(sparse, 2 * n + 1, &s);
	check_same(&all, &s, "with NULL entries");

	ref_parse(lines, n, &ref);
	check_same(&all, &ref, "library vs regex reference");

	free(buf);
	return 0;
}
