/* check_streaming.h: the streaming-response test suites run by check_streaming. */
#ifndef CHECK_STREAMING_H
#define CHECK_STREAMING_H

#include <check.h>

/*
 * Per-test timeout in seconds. Generous for an ASan+UBSan build on a small
 * machine (the round trips move tens of MiB through a real daemon); every
 * wait inside a test is bounded well below it, so a hang still fails.
 */
#ifndef TS_TIMEOUT
#define TS_TIMEOUT 300
#endif

/* check_streaming_body.c: round trips (reader chunk sizes, backends, files),
 * headers and the decision for callback and file responses. */
Suite *streaming_body_suite(void);
/* check_streaming_live.c: readers returning 0 and errors, SSE and low
 * latency, shared responses, disconnects, HEAD, the 1 GiB stream. */
Suite *streaming_live_suite(void);

#endif /* CHECK_STREAMING_H */
