/* fuzz_util.h: helpers shared by the libFuzzer targets: an input reader, line splitting, a hard check. */
#ifndef FUZZ_UTIL_H
#define FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * FZ_CHECK: an invariant of the code under test. A violation prints where
 * and why and aborts, which libFuzzer reports as a crash and saves the
 * input (crash-<sha1> under -artifact_prefix). Not assert(): it must hold
 * in every build, NDEBUG or not.
 */
#define FZ_CHECK(cond, ...)                                                                        \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: invariant failed: %s: ", __FILE__, __LINE__,       \
				#cond);                                                            \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* A cursor over the fuzz input: fixed-size fields come from the front,
 * and running out yields zeros (every input is a valid test case). */
struct fz {
	const uint8_t *p;
	size_t n; /* bytes left */
};

static inline uint8_t
fz_u8(struct fz *f)
{
	if (f->n == 0)
		return 0;
	f->n--;
	return *f->p++;
}

static inline uint16_t
fz_u16(struct fz *f)
{
	uint16_t hi = fz_u8(f);
	return (uint16_t)(hi << 8 | fz_u8(f));
}

/*
 * Split p[0..n) into at most max NUL-terminated lines at '\n' and at NUL
 * bytes (header values cannot hold either). *buf_ret receives the malloc'd
 * storage the lines point into (free it); returns the number of lines. A
 * trailing empty line after the last '\n' is not counted; an empty input
 * gives no lines.
 */
static inline size_t
fz_lines(const uint8_t *p, size_t n, char **buf_ret, const char **lines, size_t max)
{
	char *buf = malloc(n + 1);
	size_t count = 0, i, start = 0;

	if (!buf)
		abort();
	memcpy(buf, p, n);
	buf[n] = '\0';
	for (i = 0; i <= n && count < max; i++) {
		if (i < n && buf[i] != '\n' && buf[i] != '\0')
			continue;
		if (i == n && start == n)
			break;
		buf[i] = '\0';
		lines[count++] = buf + start;
		start = i + 1;
	}
	*buf_ret = buf;
	return count;
}

/* ASCII case-insensitive comparison of a[0..alen) with NUL-terminated b. */
static inline int
fz_ieq(const char *a, size_t alen, const char *b)
{
	size_t i;

	for (i = 0; i < alen; i++) {
		char x = a[i], y = b[i];
		if (y == '\0')
			return 0;
		if (x >= 'A' && x <= 'Z')
			x = (char)(x - 'A' + 'a');
		if (y >= 'A' && y <= 'Z')
			y = (char)(y - 'A' + 'a');
		if (x != y)
			return 0;
	}
	return b[alen] == '\0';
}

#endif /* FUZZ_UTIL_H */
