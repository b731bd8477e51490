/* gz_error.c: mhdgz_strerror(), the names of the MHDGZ_E* codes. */
#include "config.h"

#define MHDGZ_CORE_ONLY
#include "mhdgz.h"

MHDGZ_API const char *
mhdgz_strerror(int err)
{
	/* Static strings only: callers may keep the pointer forever. */
	switch (err) {
	case MHDGZ_OK:
		return "success";
	case MHDGZ_ENOMEM:
		return "out of memory";
	case MHDGZ_EINVAL:
		return "invalid argument";
	case MHDGZ_EBACKEND:
		return "compression library error";
	case MHDGZ_ENOSPC:
		return "output does not fit in the space given";
	case MHDGZ_ENOTSUP:
		return "backend or capability not compiled in";
	case MHDGZ_EMHD:
		return "libmicrohttpd refused a call";
	case MHDGZ_EBUSY:
		return "resource in use";
	default:
		return "unknown error";
	}
}
