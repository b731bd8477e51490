/* gz_error.c: gz_strerror(), the names of the core's GZ_E* codes. */
#include "config.h"

#include <stddef.h>

#include "gz_error.h"

const char *
gz_strerror(int err)
{
	/* Static strings only: callers may keep the pointer forever. */
	switch (err) {
	case GZ_OK:
		return "success";
	case GZ_ENOMEM:
		return "out of memory";
	case GZ_EINVAL:
		return "invalid argument";
	case GZ_EBACKEND:
		return "compression library error";
	case GZ_ENOSPC:
		return "output does not fit in the space given";
	case GZ_ENOTSUP:
		return "backend or capability not compiled in";
	case GZ_EBUSY:
		return "resource in use";
	default:
		return NULL;
	}
}
