/* minimal.c: a complete libmicrohttpd server with gzip, showing the two-call change. */
#include <stdio.h>
#include <string.h>
#include <microhttpd.h>
#include <mhdgz.h>

static const char page[] = "<!doctype html><title>mhdgz</title><p>"
			   "Hello, compressed world. Hello, compressed world. Hello, compressed world."
			   "</p>\n";

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
	   const char *version, const char *upload, size_t *upload_len, void **req_cls)
{
	struct mhdgz *gz = cls;
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)url, (void)method, (void)version, (void)upload, (void)upload_len, (void)req_cls;
	/* was: MHD_create_response_from_buffer (...) */
	r = mhdgz_response_from_buffer(gz, strlen(page), (void *)page, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
	/* was: MHD_queue_response (...) */
	ret = mhdgz_queue_response(gz, conn, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

int
main(void)
{
	struct mhdgz_options opts = {.size = sizeof opts, .min_nbytes = 1};
	struct mhdgz *gz;
	struct MHD_Daemon *d;

	if (mhdgz_new(&opts, &gz) != 0)
		return 1;
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 8080, NULL, NULL, on_request, gz,
			     MHD_OPTION_END);
	if (!d)
		return 1;
	printf("listening on http://localhost:8080/ (Enter stops)\n");
	(void)getchar();
	MHD_stop_daemon(d);
	mhdgz_free(gz);
	return 0;
}
