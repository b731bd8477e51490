/* fuzz_etag.c: libFuzzer target for the preconditions' parsers: hnd_etag_match, hnd_etag_for_gzip, hnd_parse_http_date. */
/*
 * Input: one byte of options (bit 0: weak comparison; bits 1-7: the cap
 * handed to hnd_etag_for_gzip), then lines: the first is the resource's
 * ETag, the second an If-None-Match/If-Match field value, the rest single
 * entity-tags from which a list is built. Checked for every input:
 *  - hnd_etag_match() returns 0 or 1, and "*" matches any ETag;
 *  - for a well-formed ETag E, hnd_etag_for_gzip() follows its policy
 *    (DROP: NULL; KEEP: E itself; a weak E: E itself; else a NUL-terminated
 *    tag within the cap or NULL when it does not fit), and the tag the
 *    library gave a gzip response validates against E: the "-gzip" suffix
 *    under strong and weak comparison, the weak form under weak comparison
 *    only (RFC 9110 section 8.8.3.2); E matches itself under weak
 *    comparison, and under strong comparison exactly when it is strong;
 *  - a list matches exactly when one of its members matches alone;
 *  - a line hnd_parse_http_date() accepts as a date from 1970 to 9999,
 *    formatted as an IMF-fixdate (strftime), parses back to the same
 *    second.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hnd_negotiate.h"
#include "hnd_plan.h"
#include "fuzz_util.h"

#define FZ_MAX_LINES 16
/* Large enough for any tag built from a fuzz input of the default
 * -max_len plus the "W/" or "-gzip" decoration. */
#define FZ_TAG_CAP 8192

/* Is s (no leading OWS) one well-formed entity-tag, [W/]"etagc*", and
 * nothing else? etagc = %x21 / %x23-7E / obs-text (RFC 9110 8.8.3). */
static bool
well_formed(const char *s, bool *weak)
{
	*weak = false;
	if (s[0] == 'W' && s[1] == '/') {
		*weak = true;
		s += 2;
	}
	if (*s++ != '"')
		return false;
	for (; *s && *s != '"'; s++) {
		unsigned char c = (unsigned char)*s;
		if (c < 0x21 || c == 0x7f)
			return false;
	}
	return s[0] == '"' && s[1] == '\0';
}

static int
match(const char *field, const char *etag, int weak)
{
	int m = hnd_etag_match(field, etag, weak);

	FZ_CHECK(m == 0 || m == 1, "hnd_etag_match returned %d", m);
	return m;
}

static void
check_policies(const char *etag, size_t cap)
{
	static char buf[FZ_TAG_CAP];
	bool weak, ok = well_formed(etag, &weak);
	const char *t;
	int pol;

	FZ_CHECK(hnd_etag_for_gzip(MHDGZ_ETAG_DROP, etag, buf, cap) == NULL, "DROP kept a tag");
	FZ_CHECK(hnd_etag_for_gzip(MHDGZ_ETAG_KEEP, etag, buf, cap) == etag, "KEEP changed it");
	FZ_CHECK(hnd_etag_for_gzip(MHDGZ_ETAG_WEAKEN, NULL, buf, cap) == NULL, "NULL etag");
	if (!ok)
		return;
	FZ_CHECK(match(etag, etag, 1) == 1, "%s does not match itself (weak)", etag);
	FZ_CHECK(match(etag, etag, 0) == !weak, "%s vs itself, strong comparison", etag);
	FZ_CHECK(match("*", etag, 0) == 1 && match(" * ", etag, 1) == 1, "'*' vs %s", etag);
	for (pol = MHDGZ_ETAG_WEAKEN; pol <= MHDGZ_ETAG_SUFFIX; pol++) {
		memset(buf, 'Z', cap);
		t = hnd_etag_for_gzip((enum mhdgz_etag_policy)pol, etag, buf, cap);
		if (weak) {
			FZ_CHECK(t == etag, "weak %s rewritten under policy %d", etag, pol);
			continue;
		}
		if (!t)
			continue; /* did not fit in cap bytes: dropped, always safe */
		FZ_CHECK(t == buf, "policy %d returned a foreign pointer", pol);
		FZ_CHECK(memchr(buf, '\0', cap) != NULL, "policy %d: no NUL within %zu", pol, cap);
		if (pol == MHDGZ_ETAG_WEAKEN) {
			FZ_CHECK(strlen(t) == strlen(etag) + 2 && strncmp(t, "W/", 2) == 0 &&
					 strcmp(t + 2, etag) == 0,
				 "WEAKEN(%s) = %s", etag, t);
			FZ_CHECK(match(t, etag, 1) == 1, "WEAKEN(%s) = %s fails weak", etag, t);
			FZ_CHECK(match(t, etag, 0) == 0, "WEAKEN(%s) = %s passes strong", etag, t);
		} else {
			size_t l = strlen(etag);
			FZ_CHECK(strlen(t) == l + 5 && strncmp(t, etag, l - 1) == 0 &&
					 strcmp(t + l - 1, "-gzip\"") == 0,
				 "SUFFIX(%s) = %s", etag, t);
			FZ_CHECK(match(t, etag, 0) == 1, "SUFFIX(%s) = %s fails strong", etag, t);
			FZ_CHECK(match(t, etag, 1) == 1, "SUFFIX(%s) = %s fails weak", etag, t);
		}
	}
}

/* A date v parses to, formatted as an IMF-fixdate, parses back to it
 * (years 1970 to 9999: what the fixdate's four digits can say). */
static void
check_date(const char *v)
{
	time_t t, t2;
	struct tm tm;
	char out[64];

	if (!hnd_parse_http_date(v, &t) || t < 0 || t >= (time_t)253402300800)
		return;
	gmtime_r(&t, &tm);
	strftime(out, sizeof out, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	FZ_CHECK(hnd_parse_http_date(out, &t2) && t2 == t, "\"%s\" -> %lld -> \"%s\"", v,
		 (long long)t, out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz f = { data, size };
	uint8_t opt = fz_u8(&f);
	int weak = opt & 1;
	size_t cap = (size_t)(opt >> 1), n, i, len = 1;
	const char *lines[FZ_MAX_LINES];
	char *buf, *list;
	const char *etag;
	int any = 0, m;

	n = fz_lines(f.p, f.n, &buf, lines, FZ_MAX_LINES);
	etag = n > 0 ? lines[0] : "\"x\"";
	if (cap == 0)
		cap = FZ_TAG_CAP; /* also the roomy case */

	check_policies(etag, cap);
	if (n > 1) {
		(void)match(lines[1], etag, weak);
		(void)match(lines[1], lines[1], weak);
	}
	FZ_CHECK(match(NULL, etag, weak) == 0 && match(etag, NULL, weak) == 0, "NULL matched");
	for (i = 0; i < n; i++)
		check_date(lines[i]);

	/* A list of single well-formed members matches iff one member does. */
	for (i = 2; i < n; i++)
		len += strlen(lines[i]) + 2;
	list = malloc(len);
	if (!list)
		abort();
	list[0] = '\0';
	for (i = 2; i < n; i++) {
		bool w;

		if (!well_formed(lines[i], &w))
			continue;
		if (list[0])
			strcat(list, ", ");
		strcat(list, lines[i]);
		any |= match(lines[i], etag, weak);
	}
	m = match(list, etag, weak);
	FZ_CHECK(m == any, "list '%s' vs '%s' (weak %d): %d, members say %d", list, etag, weak, m,
		 any);
	free(list);
	free(buf);
	return 0;
}
