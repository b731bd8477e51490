/* hnd_public.h: the public header as the library itself sees it: its functions exported. */
#ifndef HND_PUBLIC_H
#define HND_PUBLIC_H

#include "config.h"

/* Exported: the public functions (the rest is hidden by
 * -fvisibility=hidden and the linker version script). */
#ifdef MHDGZ_HAVE_VISIBILITY
#define MHDGZ_API __attribute__((visibility("default")))
#endif
#include "mhdgz.h"

#endif /* HND_PUBLIC_H */
