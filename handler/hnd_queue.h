/* hnd_queue.h: the selection: the plan for a queued response, built. */
#ifndef HND_QUEUE_H
#define HND_QUEUE_H

#include "hnd_plan.h"

struct mhdgz;

/* hnd_select's result: the caller owns a reference to *queue_ret. */
#define HND_RELEASE 1

/* What the selection did (struct mhdgz_outcome without the coding name). */
struct hnd_result {
	enum mhdgz_reason reason;
	unsigned int status;   /* the status queued (a precondition's 304 or 412) */
	uint64_t body_nbytes;  /* identity body, or MHDGZ_NBYTES_UNKNOWN */
	uint64_t coded_nbytes; /* body as coded, or MHDGZ_NBYTES_UNKNOWN */
	enum gz_coding coding; /* with MHDGZ_COMPRESSED: the coding */
	bool dcz;              /* with MHDGZ_COMPRESSED: dcz (coding then zstd) */
};

/* The decision applied: the response to queue in *queue_ret (response
 * itself or one of ours), HND_RELEASE when the caller must destroy it after
 * queueing, else 0. Never fails (identity, MHDGZ_SKIP_ERROR). What
 * mhdgz_queue_response_ex runs before MHD_queue_response; tests, fuzzers
 * and the bench call it without a connection. */
int hnd_select(struct mhdgz *gz, const struct hnd_request *rq, unsigned int status,
	       struct MHD_Response *response, struct MHD_Response **queue_ret,
	       struct hnd_result *res);

#endif /* HND_QUEUE_H */
