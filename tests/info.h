/* info.h: the tests' one-line predicates over mhdgz_backend_info() and mhdgz_coding_info(): compiled in, and the name. */
#ifndef TESTS_INFO_H
#define TESTS_INFO_H

#include <strings.h>

#include "mhdgz.h"

/* Whether a backend is compiled in (0 for an unknown value). */
static inline int
tu_backend_available(enum mhdgz_backend b)
{
	struct mhdgz_backend_info bi = { .size = sizeof bi };

	return mhdgz_backend_info(b, &bi) == 0 && bi.available;
}

/* A backend's name, compiled in or not ("unknown" for an unknown value). */
static inline const char *
tu_backend_name(enum mhdgz_backend b)
{
	struct mhdgz_backend_info bi = { .size = sizeof bi };

	return mhdgz_backend_info(b, &bi) == 0 ? bi.name : "unknown";
}

/* A backend by name, case-insensitive, as an application looks it up (the
 * loop over the enum mhdgz.h describes): 0 and *b_ret, MHDGZ_ENOTSUP for
 * one not compiled in, MHDGZ_EINVAL for NULL or an unknown name. */
static inline int
tu_backend_from_name(const char *name, enum mhdgz_backend *b_ret)
{
	for (int b = MHDGZ_BACKEND_ZLIB; name && b <= MHDGZ_BACKEND_ISAL; b++) {
		struct mhdgz_backend_info bi = { .size = sizeof bi };

		if (mhdgz_backend_info((enum mhdgz_backend)b, &bi) == 0 &&
		    strcasecmp(bi.name, name) == 0) {
			if (!bi.available)
				return MHDGZ_ENOTSUP;
			*b_ret = (enum mhdgz_backend)b;
			return 0;
		}
	}
	return MHDGZ_EINVAL;
}

/* A backend's levels (mn, mx, df; each may be NULL): 0, or MHDGZ_ENOTSUP
 * for one not compiled in, MHDGZ_EINVAL for an unknown value. */
static inline int
tu_backend_levels(enum mhdgz_backend b, int *mn, int *mx, int *df)
{
	struct mhdgz_backend_info bi = { .size = sizeof bi };
	int rc = mhdgz_backend_info(b, &bi);

	if (rc < 0 || !bi.available)
		return rc < 0 ? rc : MHDGZ_ENOTSUP;
	if (mn)
		*mn = bi.level_min;
	if (mx)
		*mx = bi.level_max;
	if (df)
		*df = bi.level_default;
	return 0;
}

/* A coding's levels, as tu_backend_levels. */
static inline int
tu_coding_levels(enum mhdgz_coding c, int *mn, int *mx, int *df)
{
	struct mhdgz_coding_info ci = { .size = sizeof ci };
	int rc = mhdgz_coding_info(NULL, c, &ci);

	if (rc < 0 || !ci.available)
		return rc < 0 ? rc : MHDGZ_ENOTSUP;
	if (mn)
		*mn = ci.level_min;
	if (mx)
		*mx = ci.level_max;
	if (df)
		*df = ci.level_default;
	return 0;
}

/* The codings a handler offers, in its order of preference (by rank), as
 * the order a caller of mhdgz_accept_coding() passes: how many. */
static inline size_t
tu_codings(const struct mhdgz *gz, enum mhdgz_coding *order, size_t cap)
{
	size_t n = 0;

	for (int c = 0; gz && c < MHDGZ_CODING_COUNT; c++) {
		struct mhdgz_coding_info ci = { .size = sizeof ci };

		if (mhdgz_coding_info(gz, (enum mhdgz_coding)c, &ci) == 0 && ci.enabled) {
			if ((size_t)ci.rank < cap)
				order[ci.rank] = (enum mhdgz_coding)c;
			n++;
		}
	}
	return n;
}

/* Whether a coding is compiled in (0 for an unknown value). */
static inline int
tu_coding_available(enum mhdgz_coding c)
{
	struct mhdgz_coding_info ci = { .size = sizeof ci };

	return mhdgz_coding_info(NULL, c, &ci) == 0 && ci.available;
}

/* A coding's token ("unknown" for an unknown value). */
static inline const char *
tu_coding_name(enum mhdgz_coding c)
{
	struct mhdgz_coding_info ci = { .size = sizeof ci };

	return mhdgz_coding_info(NULL, c, &ci) == 0 ? ci.name : "unknown";
}

/* The request of a queue call with this method and nothing else. */
#define TU_REQ(m) (&(struct mhdgz_request){ .size = sizeof(struct mhdgz_request), .method = (m) })

/* The same, asking the queue call to evaluate the preconditions. */
#define TU_REQ_PRE(m)                                                                              \
	(&(struct mhdgz_request){ .size = sizeof(struct mhdgz_request),                            \
				  .method = (m),                                                   \
				  .flags = MHDGZ_REQUEST_PRECONDITIONS })

#endif /* TESTS_INFO_H */
