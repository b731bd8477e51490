/* check_handler.h: the handler test suites (negotiation, API, end to end) run by check_handler. */
#ifndef CHECK_HANDLER_H
#define CHECK_HANDLER_H

#include <check.h>

/*
 * Per-test timeout in seconds. Generous: the end-to-end tests make
 * thousands of real HTTP requests, and an ASan+UBSan build on a small
 * machine is several times slower than a plain one. A hang still fails.
 */
#ifndef TH_TIMEOUT
#define TH_TIMEOUT 300
#endif

/* check_negotiate.c: the pure functions (Accept-Encoding, ETags, names,
 * backends, option validation) and mhdgz_select() without a daemon. */
Suite *negotiate_suite(void);
/* check_e2e.c: a real libmicrohttpd daemon on 127.0.0.1 and libcurl. */
Suite *e2e_suite(void);

#endif /* CHECK_HANDLER_H */
