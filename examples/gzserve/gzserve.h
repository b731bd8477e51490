/* gzserve.h: what gzserve's files share: configuration, server, request, calls. */
#ifndef GZSERVE_H
#define GZSERVE_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include <microhttpd.h>
#include <mhdgz.h>

/* /events: how many events, and the milliseconds between them (defaults
 * of --events, --event-ms). */
#define GZS_EVENTS 10
#define GZS_EVENT_MS 1000
/* How long SIGINT/SIGTERM waits for requests in flight before stopping the
 * daemon anyway, in milliseconds: long enough for a large download on a
 * local network, short enough that a stuck client cannot hold a restart. */
#ifndef GZS_GRACE_MS
#define GZS_GRACE_MS 10000
#endif
/* Default --cache-size in bytes: the coded bodies of a few thousand
 * typical text files (a 20 KiB page codes to ~5 KiB). */
#define GZS_CACHE_SIZE_DEFAULT (32u * 1024 * 1024)
/* Most --dictionary options. */
#define GZS_DICT_MAX 16

struct config {
	const char *bind;
	unsigned int port;
	const char *root;
	enum mhdgz_backend backend;
	int level;
	bool level_set;
	size_t min_size;
	bool min_size_set;
	char *types_buf;    /* the --types argument, split in place */
	const char **types; /* NULL-terminated, or NULL for the default */
	unsigned int threads;
	unsigned int events;   /* /events: how many (--events) */
	unsigned int event_ms; /* /events: milliseconds apart (--event-ms) */
	bool precompressed;
	const char *codings; /* --codings, as given, parsed by mhdgz_new() */
	enum mhdgz_etag_policy etag;
	size_t length_hiding; /* --length-hiding: most padding bytes; 0: off */
	bool no_compress;
	bool quiet;
	size_t cache_size;   /* --cache-size: bytes of the file cache; 0: off */
	bool cache_size_set; /* --cache-size given */
	size_t coder_memory; /* --coder-memory: bytes; 0: the library's default */
	/* --dictionary FILE --dictionary-match PATTERN (dict.c), in order. */
	const char *dict_file[GZS_DICT_MAX];
	const char *dict_match[GZS_DICT_MAX];
	size_t ndict;
};

struct demo;   /* demo.c */
struct mime;   /* mime.c */
struct events; /* demo.c */

struct server {
	struct config cfg;
	struct mhdgz *gz;
	int level; /* the level in use, for /stats */
	/* The codings offered, in the server's order (mhdgz_coding_info() ranks);
	 * for --precompressed, the siblings looked for. */
	enum mhdgz_coding order[MHDGZ_CODING_COUNT];
	size_t norder;
	struct MHD_Daemon *daemon;
	char *root;      /* realpath of --root; NULL in demo mode */
	size_t root_len; /* 0 when the root is "/" */
	int root_fd;     /* the root directory: every file is opened beneath it */
	struct mime *mimes;
	size_t nmimes;
	struct demo *demos;
	size_t ndemos;
	struct dict_demo *dict_demo; /* dict.c: the /dict/ demo (demo mode) */
	/* cfg.dict_file[i] as registered, and what fstat() said of it then */
	const struct mhdgz_dictionary *dicts[GZS_DICT_MAX];
	struct stat dict_st[GZS_DICT_MAX];

	atomic_uint_fast64_t requests;
	atomic_int in_flight;
	/* Connections open, and the most libmicrohttpd accepts (set from
	 * RLIMIT_NOFILE); limit_warned: the limit message is out. */
	atomic_int conns;
	unsigned int conn_limit;
	unsigned int file_limit; /* connections that may be serving a file (main.c) */
	unsigned long nofile;
	atomic_bool limit_warned;

	/* The event ticker: streams waiting for their next event, suspended. */
	pthread_mutex_t tick_lock;
	pthread_cond_t tick_cond;
	pthread_t tick_thread;
	bool stopping; /* under tick_lock: no new waits, wake every stream */
	struct events *waiting;
};

/* One request: created by the URI log callback (the first thing
 * libmicrohttpd tells us about a request, with the URI exactly as sent),
 * freed when the request completes, after its access log line. */
struct req {
	struct server *s;
	char *uri; /* raw request target */
	char method[16];
	uint64_t start_us;
	uint64_t sock_start; /* bytes written on the socket before this request */
	bool sock_known;
	bool seen;          /* the access handler ran once (headers received) */
	bool preconditions; /* queue() asks the handler to evaluate If-* fields */
	bool linger;        /* answered before its body: linger.c closes it */
	unsigned int status;
	uint64_t body_nbytes; /* identity body bytes of the response */
	const char *coding;
	_Atomic uint64_t stream_nbytes; /* /events: bytes produced so far */
	bool streamed;
	/* POST /echo (echo.c): the request body being read, its decoded
	 * bytes and their CRC-32 so far. */
	bool echo;
	struct mhdgz_upload *upload; /* freed by on_completed */
	uint64_t echo_nbytes;
	unsigned long echo_crc;
};

/* options.c: the command line. parse_options fills cfg or exits (0 for
 * --help, 2 with a message for anything invalid); bad_option prints
 * "gzserve: MESSAGE" and the --help hint, and exits 2. */
void parse_options(int argc, char **argv, struct config *cfg);
__attribute__((format(printf, 1, 2), noreturn)) void bad_option(const char *fmt, ...);

/* log.c: per-request context and the access log. */
uint64_t now_us(void);
void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn);
void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
		  enum MHD_RequestTerminationCode toe);
/* libmicrohttpd's printf format and its arguments: the attribute lets
 * -Wformat-nonliteral accept the vsnprintf of a caller's format. */
__attribute__((format(printf, 2, 0))) void on_mhd_log(void *cls, const char *fmt, va_list ap);

/* respond.c: queueing through the handler. */
const char *coding_name(enum mhdgz_coding coding);
enum MHD_Result queue(struct req *rq, struct MHD_Connection *conn, unsigned int status,
		      struct MHD_Response *r, uint64_t body_nbytes);
enum MHD_Result respond(struct req *rq, struct MHD_Connection *conn, unsigned int status,
			struct MHD_Response *r, uint64_t body_nbytes);
/* A small HTML page for status, with one more header field (field NULL:
 * none); respond_error: the page, with Allow for a 405. */
enum MHD_Result respond_page(struct req *rq, struct MHD_Connection *conn, unsigned int status,
			     const char *field, const char *value);
enum MHD_Result respond_error(struct req *rq, struct MHD_Connection *conn, unsigned int status);

/* demo.c: the built-in demo, /events, /stats, and the event ticker (which
 * runs in both modes; it costs a sleeping thread). */
int demo_init(struct server *s);
void demo_fini(struct server *s);
enum MHD_Result serve_demo(struct req *rq, struct MHD_Connection *conn, const char *path,
			   const char *method);
int ticker_start(struct server *s);
void ticker_stop(struct server *s);
void ticker_join(struct server *s);

/* echo.c: POST /echo in demo mode. echo_path: is the target /echo?
 * echo_begin: the access handler's first call; echo_request: the later
 * ones. */
bool echo_path(const struct req *rq);
enum MHD_Result echo_begin(struct req *rq, struct MHD_Connection *conn);
enum MHD_Result echo_request(struct req *rq, struct MHD_Connection *conn, const char *upload,
			     size_t *upload_len);

/* linger.c: the lingering close of a connection answered before its
 * body (linger_add, from the request completed callback); has_body,
 * refuse_body: a body nothing reads, answered before it. */
void linger_add(const struct server *s, struct MHD_Connection *conn);
bool has_body(struct MHD_Connection *conn);
enum MHD_Result refuse_body(struct req *rq, struct MHD_Connection *conn, unsigned int status,
			    const char *allow);

/* dict.c: RFC 9842 dictionaries: --dictionary files, and the demo's
 * /dict/. dict_init: 0 or -1 (message printed). dict_serve: true when the
 * path is one of the demo's, *ret then set. dict_of_file: the
 * dictionary whose --dictionary FILE is the file st describes (the same
 * device, inode, size and mtime as when read), or NULL. */
struct dict_demo;
int dict_init(struct server *s);
const struct mhdgz_dictionary *dict_of_file(const struct server *s, const struct stat *st);
void dict_fini(struct server *s);
bool dict_serve(struct req *rq, struct MHD_Connection *conn, const char *path, const char *method,
		enum MHD_Result *ret);

/* mime.c: media types of file names. */
int mime_load(struct server *s, const char *file);
void mime_free(struct server *s);
void mime_type(const struct server *s, const char *name, char *out, size_t cap);

/* validate.c: a file's validators and the conditional and range request
 * fields (RFC 9110; each function says what it returns). */
void file_etag(const struct stat *st, char *out, size_t cap);
void http_date(time_t t, char *out, size_t cap);
int parse_range(const char *v, uint64_t len, uint64_t *first_ret, uint64_t *last_ret);
bool if_range_ok(struct MHD_Connection *conn, const char *etag, const char *lastmod,
		 bool etag_shared, bool coded);

/* files.c: the files under --root; a target's path beneath it (fuzz_gzserve). */
enum MHD_Result serve_file(struct req *rq, struct MHD_Connection *conn, const char *method);
unsigned int target_to_relpath(const char *target, char **rel_ret, bool *slash_ret);

/* beneath.c: rel (relative to the root, no "." or ".." segments; "" for
 * the root itself) opened read-only beneath the root, any type, *st its
 * fstat: the descriptor, or -1 and *status_ret (404, 403). */
int open_in_root(const struct server *s, const char *rel, struct stat *st,
		 unsigned int *status_ret);

/* siblings.c: the coding the request's Accept-Encoding lines prefer
 * among offered (mhdgz_accept_coding): true and *coding_ret, or false. */
bool preferred_coding(struct MHD_Connection *conn, const enum mhdgz_coding *offered,
		      size_t noffered, enum mhdgz_coding *coding_ret);
/* siblings.c: --precompressed. The sibling of rel (whose fstat is
 * file_st) to send: its descriptor (and *st, *coding_ret), or -1 for
 * FILE; *any_ret: some sibling is usable (the response varies). */
int choose_precompressed(const struct server *s, struct MHD_Connection *conn, const char *rel,
			 const struct stat *file_st, struct stat *st, enum mhdgz_coding *coding_ret,
			 bool *any_ret);

#endif /* GZSERVE_H */
