/* hnd_upload.h: request bodies (hnd_upload.c): what the rest of the library and the tests name. */
#ifndef HND_UPLOAD_H
#define HND_UPLOAD_H

#include "hnd_public.h"

/* A short lowercase name of a refusal ("ok", "too-large", ...; "unknown"
 * out of range): struct mhdgz_upload_info refusal_name. */
const char *hnd_upload_refusal_name(enum mhdgz_upload_refusal refusal);

#endif /* HND_UPLOAD_H */
