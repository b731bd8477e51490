/* fuzz_accept.c: libFuzzer target for the Accept-Encoding parser (mhdgz_accept_gzip_q, hnd_accept_parse). */
/*
 * The input is split into header lines at '\n' and NUL. Checked for every
 * input, besides the sanitizers' own checks:
 *  - every q-value is -1 (not listed) or 0..1000, mhdgz_accept_gzip_q() is
 *    0..1000 and equals hnd_accept_gzip_q() of the parse;
 *  - parsing the lines together equals merging the parses of each line (what
 *    mhdgz_queue_response() does, line by line, while hnd_accept_parse()
 *    of the lines parses them together), equals parsing them joined by commas into one line
 *    (RFC 9110 section 5.3: a list field's lines combine with commas), and
 *    NULL entries between lines change nothing;
 *  - hnd_accept_wants_gzip() implies an acceptable gzip not less preferred
 *    than an explicit identity;
 *  - the parse equals a reference built from POSIX regular expressions for
 *    the grammar of RFC 9110 sections 12.4.2 and 12.5.3 (with the leniency
 *    the library documents: OWS around "=", unknown parameters skipped, the
 *    most favourable listing of a repeated coding counting).
 */
#include <regex.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hnd_internal.h"
#include "fuzz_util.h"

/* Most lines taken from one input. */
#define FZ_MAX_LINES 64

#define TCHAR "[-!#$%&'*+.^_`|~0-9A-Za-z]"

/* One list element: a coding, then parameters "; name = value" with OWS.
 * A value runs to the next ';' or whitespace. */
static const char re_element_src[] = "^" TCHAR "+([ \t]*;[ \t]*" TCHAR
				     "+[ \t]*=[ \t]*[^; \t]*)*[ \t]*$";
/* qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ) */
static const char re_qvalue_src[] = "^(0(\\.[0-9]{0,3})?|1(\\.0{0,3})?)$";

static regex_t re_element, re_qvalue;

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

/* Parse one element (trimmed copy, NUL-terminated) into ref. */
static void
ref_element(char *el, struct hnd_accept *ref)
{
	char *p, *tok_end;
	size_t tok_len;
	int q = 1000, *slot = NULL;

	if (regexec(&re_element, el, 0, NULL, 0) != 0)
		return; /* malformed: ignored */
	tok_end = el + strspn(el, "-!#$%&'*+.^_`|~0123456789"
				  "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz");
	tok_len = (size_t)(tok_end - el);
	/* Values cannot hold ';' (the regex stops them there), so the
	 * parameters split cleanly on it. */
	p = strchr(tok_end, ';');
	while (p) {
		char *name = p + 1, *next = strchr(name, ';'), *eq, *val, *end;

		if (next)
			*next = '\0';
		eq = strchr(name, '=');
		FZ_CHECK(eq != NULL, "regex let a parameter without '=' through");
		*eq = '\0';
		while (is_ows(*name))
			name++;
		end = name + strlen(name);
		while (end > name && is_ows(end[-1]))
			*--end = '\0';
		val = eq + 1;
		while (is_ows(*val))
			val++;
		end = val + strlen(val);
		while (end > val && is_ows(end[-1]))
			*--end = '\0';
		if (fz_ieq(name, strlen(name), "q")) {
			if (regexec(&re_qvalue, val, 0, NULL, 0) != 0)
				return; /* a bad q makes the element malformed */
			q = ref_qvalue(val);
		}
		p = next;
	}
	if (fz_ieq(el, tok_len, "gzip") || fz_ieq(el, tok_len, "x-gzip"))
		slot = &ref->gzip;
	else if (fz_ieq(el, tok_len, "identity"))
		slot = &ref->identity;
	else if (tok_len == 1 && el[0] == '*')
		slot = &ref->star;
	if (slot && q > *slot)
		*slot = q;
}

static void
ref_parse(const char *const *lines, size_t n, struct hnd_accept *ref)
{
	size_t i;

	ref->gzip = ref->identity = ref->star = -1;
	ref->present = false;
	for (i = 0; i < n; i++) {
		char *copy, *el, *save = NULL;

		if (!lines[i])
			continue;
		ref->present = true;
		copy = strdup(lines[i]);
		if (!copy)
			abort();
		/* strtok_r drops empty elements, which the grammar allows and
		 * ignores anyway. */
		for (el = strtok_r(copy, ",", &save); el; el = strtok_r(NULL, ",", &save)) {
			char *end;

			while (is_ows(*el))
				el++;
			end = el + strlen(el);
			while (end > el && is_ows(end[-1]))
				*--end = '\0';
			if (*el)
				ref_element(el, ref);
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
	if (regcomp(&re_element, re_element_src, REG_EXTENDED | REG_NOSUB) != 0 ||
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
	q = mhdgz_accept_gzip_q(lines, n);
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
	check_same(&all, &j, "lines vs comma-joined");
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
