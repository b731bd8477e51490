/* gz_error.h: the core's error codes (0 OK, negative error, positive a normal event) and their names. */
#ifndef GZ_ERROR_H
#define GZ_ERROR_H

/*
 * The core's own vocabulary: the handler maps these to the public
 * MHDGZ_E* codes, which have the same values (checked at compile time in
 * handler/), so a code passes through unchanged. -6 is the handler's own
 * (libmicrohttpd refused a call) and never produced here.
 */
#define GZ_OK 0
#define GZ_ENOMEM (-1)   /* an allocation failed */
#define GZ_EINVAL (-2)   /* an argument is invalid (level out of range, ...) */
#define GZ_EBACKEND (-3) /* the compression library reported an error */
#define GZ_ENOSPC (-4)   /* the output does not fit in the space given */
#define GZ_ENOTSUP (-5)  /* backend or capability not compiled in */
#define GZ_EBUSY (-7)    /* resource in use */
/* A stream's source reported an error (gz_stream.h). Internal: the handler
 * turns it into an error end of the response, never a public code. */
#define GZ_ESOURCE (-100)

/* A static English message for a GZ_E* code; NULL for a code the core
 * does not produce (the handler then names its own). */
const char *gz_strerror(int err);

#endif /* GZ_ERROR_H */
