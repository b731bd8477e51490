/* options.c: gzserve's command line: --help, each option's parsing and range, exit 2 on anything invalid. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gzserve.h"

/* ------------------------------------------------------------------------ */
/* Options                                                                  */

static void
usage(FILE *f)
{
	fprintf(f,
		"Usage: gzserve [OPTION]...\n"
		"A small HTTP server on libmicrohttpd whose responses are gzip-compressed by\n"
		"mhdgz. Without --root it serves a built-in demo: / (index page), /2k.json,\n"
		"/20k.json, /100k.json (the benchmark payloads), /events (server-sent events,\n"
		"one a second for 10 s), /stats (the handler's counters as JSON), /204\n"
		"(an empty 204 No Content), POST /echo (the decoded length and CRC-32 of\n"
		"the request body, sent identity or with Content-Encoding: gzip) and /dict/\n"
		"(RFC 9842: /dict/app.v1.js is a dictionary, /dict/app.v2.js goes dcz to a\n"
		"client holding it).\n"
		"\n"
		"  --bind ADDR       IPv4 or IPv6 address to listen on (default 127.0.0.1)\n"
		"  --port N          TCP port, 0-65535 (default 8080); 0 picks a free port.\n"
		"                    The address is printed on stdout as\n"
		"                    'listening on http://ADDR:PORT/'\n"
		"  --root DIR        serve the files under DIR instead of the demo: index.html\n"
		"                    for directories, no listings, ETag/Last-Modified\n"
		"                    revalidation, single byte ranges\n"
		"  --backend NAME    compressor: zlib, libdeflate or isal (default libdeflate)\n"
		"  --level N         compression level in the backend's range: zlib 1-9,\n"
		"                    libdeflate 1-12, isal 1-4 (igzip 0-3; default 6, 5, 2)\n"
		"  --min-size BYTES  bodies smaller than this are sent uncompressed (default\n"
		"                    %u; 0 compresses every non-empty body)\n"
		"  --types LIST      comma-separated media types to compress, replacing the\n"
		"                    default text-like list: type/subtype, type/*, */*+suffix\n"
		"                    (e.g. 'text/*,application/json,*/*+xml')\n"
		"  --events N        /events: send N events, 1-1000000 (default 10)\n"
		"  --event-ms MS     /events: milliseconds between events (0-3600000, default\n"
		"                    1000)\n"
		"  --threads N       libmicrohttpd thread pool size, 1-1024 (default: the\n"
		"                    number of CPUs)\n"
		"  --codings LIST    content codings offered, in the server's order of\n"
		"                    preference (it breaks ties of the client's q-values):\n"
		"                    comma-separated gzip, zstd, br (default: gzip)\n"
		"  --precompressed   with --root: send FILE.gz, FILE.zst or FILE.br for FILE\n"
		"                    when the client accepts that coding (those of --codings,\n"
		"                    chosen as on the fly), with FILE's Content-Type and the\n"
		"                    Content-Encoding (like nginx's gzip_static, brotli_static)\n"
		"  --etag POLICY     the strong ETag of a compressed response: weak (W/\"x\",\n"
		"                    the default), suffix (\"x-gzip\"), drop, or keep\n"
		"  --length-hiding N pad every gzip response with 1 to N bytes (1-%u) in its\n"
		"                    gzip header, a length keyed on the body: BREACH\n"
		"                    mitigation for pages holding a secret next to reflected\n"
		"                    input (default: off; libmhdgz's default N is %u)\n"
		"  --no-compress     never compress on the fly (precompressed files still go)\n"
		"  --cache-size BYTES with --root: keep up to BYTES of compressed file bodies\n"
		"                    for reuse, keyed by each file's identity and times, so a\n"
		"                    file version is compressed once (default %u; 0: off,\n"
		"                    and then no coded body is kept anywhere: every request\n"
		"                    compresses)\n"
		"  --keep-size BYTES with --root: keep up to BYTES of file responses in memory\n"
		"                    (their coded bodies and 512 bytes each counted; a file\n"
		"                    up to %u bytes and a quarter of BYTES less 512, not\n"
		"                    changed in the last 2 s), each checked per request (its\n"
		"                    device, inode, size and times) unless inotify reports\n"
		"                    no change since its last check, so a changed file is\n"
		"                    not served stale; the counts are printed at exit\n"
		"                    (default %u; 0: off; not with --precompressed or\n"
		"                    --dictionary)\n"
		"  --recheck-ms MS   with --root: the longest a kept response goes without\n"
		"                    its check while change notification reports nothing\n"
		"                    (0-3600000, default %u; 0: check every request): what\n"
		"                    inotify does not report (Linux native AIO writes) is\n"
		"                    served stale at most this long\n"
		"  --dictionary FILE --dictionary-match PATTERN\n"
		"                    RFC 9842: FILE's bytes are a dictionary for requests whose\n"
		"                    path matches PATTERN ('/' first, '*' any run): a client\n"
		"                    that sends its SHA-256 as Available-Dictionary and accepts\n"
		"                    dcz gets dcz (repeatable, up to 16)\n"
		"  --quiet           no access log and no libmicrohttpd messages. The log\n"
		"                    is one line per request on stderr: method, target,\n"
		"                    status, body bytes (uncompressed), bytes sent on the\n"
		"                    socket (headers included; - if unknown), coding\n"
		"                    (gzip, zstd, br, dcz or identity), microseconds\n"
		"  --help            this text\n"
		"\n"
		"SIGINT or SIGTERM stops accepting, lets requests in flight finish (up to\n"
		"%d s; open /events streams are ended at once, with a complete gzip\n"
		"member) and exits 0. Exit status 2: invalid option; 1: cannot start.\n",
		MHDGZ_DEFAULT_MIN_NBYTES, MHDGZ_LENGTH_HIDING_MAX_LIMIT,
		MHDGZ_DEFAULT_LENGTH_HIDING_MAX, GZS_CACHE_SIZE_DEFAULT, GZS_KEEP_FILE_MAX,
		GZS_KEEP_SIZE_DEFAULT, GZS_RECHECK_MS_DEFAULT, GZS_GRACE_MS / 1000);
}

void
bad_option(const char *fmt, ...)
{
	va_list ap;

	fputs("gzserve: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'gzserve --help'.\n", stderr);
	exit(2);
}

/* A whole decimal number in [min, max], or exit 2 naming the option. */
static unsigned long long
number_arg(const char *opt, const char *v, unsigned long long min, unsigned long long max)
{
	unsigned long long n;
	char *end;

	errno = 0;
	if (!*v || *v == '-' || *v == '+' || isspace((unsigned char)*v))
		bad_option("%s: '%s' is not a number", opt, v);
	n = strtoull(v, &end, 10);
	if (*end || errno == ERANGE)
		bad_option("%s: '%s' is not a number", opt, v);
	if (n < min || n > max)
		bad_option("%s: %s is out of range (%llu-%llu)", opt, v, min, max);
	return n;
}

/* Split a --types list into a NULL-terminated array; patterns themselves
 * are checked by mhdgz_new(). */
static void
types_arg(struct config *cfg, const char *v)
{
	char *save = NULL, *tok;
	size_t n = 0, cap = 8;

	free(cfg->types_buf);
	free(cfg->types);
	cfg->types_buf = strdup(v);
	cfg->types = malloc(cap * sizeof *cfg->types);
	if (!cfg->types_buf || !cfg->types)
		bad_option("out of memory");
	for (tok = strtok_r(cfg->types_buf, ", \t", &save); tok;
	     tok = strtok_r(NULL, ", \t", &save)) {
		if (n + 1 == cap) {
			const char **t = realloc(cfg->types, (cap *= 2) * sizeof *t);
			if (!t)
				bad_option("out of memory");
			cfg->types = t;
		}
		cfg->types[n++] = tok;
	}
	if (n == 0)
		bad_option("--types: empty list (use --no-compress to compress nothing)");
	cfg->types[n] = NULL;
}

/* --codings: the list as mhdgz_new() takes it, and its codings in order
 * for --precompressed. */
static void
codings_arg(struct config *cfg, const char *v)
{
	const char *p = v;

	cfg->codings = v;
	cfg->norder = 0;
	for (;;) {
		size_t len;
		int k;

		p += strspn(p, " \t");
		len = strcspn(p, ", \t");
		for (k = 0; k < MHDGZ_CODING_COUNT; k++)
			if (len == strlen(mhdgz_coding_name((enum mhdgz_coding)k)) &&
			    strncasecmp(p, mhdgz_coding_name((enum mhdgz_coding)k), len) == 0)
				break;
		if (k == MHDGZ_CODING_COUNT)
			bad_option("--codings: '%.*s' is not gzip, zstd or br", (int)len, p);
		for (size_t i = 0; i < cfg->norder; i++)
			if (cfg->order[i] == (enum mhdgz_coding)k)
				bad_option("--codings: %s listed twice", mhdgz_coding_name(k));
		if (!mhdgz_coding_available((enum mhdgz_coding)k))
			bad_option("--codings: '%s' was not compiled into this libmhdgz",
				   mhdgz_coding_name(k));
		cfg->order[cfg->norder++] = (enum mhdgz_coding)k;
		p += len;
		p += strspn(p, " \t");
		if (*p == '\0')
			return;
		if (*p != ',')
			bad_option("--codings: '%s' is not a comma-separated list", v);
		p++;
	}
}

void
parse_options(int argc, char **argv, struct config *cfg)
{
	enum {
		O_BIND = 256,
		O_PORT,
		O_ROOT,
		O_BACKEND,
		O_LEVEL,
		O_MIN_SIZE,
		O_TYPES,
		O_THREADS,
		O_EVENTS,
		O_EVENT_MS,
		O_PRECOMPRESSED,
		O_CODINGS,
		O_ETAG,
		O_LENGTH_HIDING,
		O_NO_COMPRESS,
		O_CACHE_SIZE,
		O_KEEP_SIZE,
		O_RECHECK_MS,
		O_DICTIONARY,
		O_DICTIONARY_MATCH,
		O_QUIET,
		O_HELP
	};
	static const struct option longopts[] = {
		{ "bind", required_argument, NULL, O_BIND },
		{ "port", required_argument, NULL, O_PORT },
		{ "root", required_argument, NULL, O_ROOT },
		{ "backend", required_argument, NULL, O_BACKEND },
		{ "level", required_argument, NULL, O_LEVEL },
		{ "min-size", required_argument, NULL, O_MIN_SIZE },
		{ "types", required_argument, NULL, O_TYPES },
		{ "threads", required_argument, NULL, O_THREADS },
		{ "events", required_argument, NULL, O_EVENTS },
		{ "event-ms", required_argument, NULL, O_EVENT_MS },
		{ "precompressed", no_argument, NULL, O_PRECOMPRESSED },
		{ "codings", required_argument, NULL, O_CODINGS },
		{ "etag", required_argument, NULL, O_ETAG },
		{ "length-hiding", required_argument, NULL, O_LENGTH_HIDING },
		{ "no-compress", no_argument, NULL, O_NO_COMPRESS },
		{ "cache-size", required_argument, NULL, O_CACHE_SIZE },
		{ "keep-size", required_argument, NULL, O_KEEP_SIZE },
		{ "recheck-ms", required_argument, NULL, O_RECHECK_MS },
		{ "dictionary", required_argument, NULL, O_DICTIONARY },
		{ "dictionary-match", required_argument, NULL, O_DICTIONARY_MATCH },
		{ "quiet", no_argument, NULL, O_QUIET },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	const char *level_arg = NULL;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int c, rc, lmin, lmax;

	cfg->bind = "127.0.0.1";
	cfg->port = 8080;
	cfg->backend = MHDGZ_BACKEND_DEFAULT;
	cfg->threads = ncpu > 0 ? (unsigned int)(ncpu > 1024 ? 1024 : ncpu) : 1;
	cfg->etag = MHDGZ_ETAG_WEAKEN;
	cfg->cache_size = GZS_CACHE_SIZE_DEFAULT;
	cfg->keep_size = GZS_KEEP_SIZE_DEFAULT;
	cfg->recheck_ms = GZS_RECHECK_MS_DEFAULT;
	cfg->order[0] = MHDGZ_CODING_GZIP;
	cfg->norder = 1;
	cfg->events = GZS_EVENTS;
	cfg->event_ms = GZS_EVENT_MS;
	opterr = 0; /* our own messages, and exit 2 */
	while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
		switch (c) {
		case O_BIND:
			cfg->bind = optarg;
			break;
		case O_PORT:
			cfg->port = (unsigned int)number_arg("--port", optarg, 0, 65535);
			break;
		case O_ROOT:
			cfg->root = optarg;
			break;
		case O_BACKEND:
			rc = mhdgz_backend_from_name(optarg, &cfg->backend);
			if (rc == MHDGZ_ENOTSUP)
				bad_option("--backend: '%s' was not compiled into this libmhdgz",
					   optarg);
			if (rc != 0)
				bad_option("--backend: '%s' is not zlib, libdeflate or isal",
					   optarg);
			break;
		case O_LEVEL:
			level_arg = optarg;
			break;
		case O_MIN_SIZE:
			cfg->min_size = (size_t)number_arg("--min-size", optarg, 0, SIZE_MAX);
			cfg->min_size_set = true;
			break;
		case O_TYPES:
			types_arg(cfg, optarg);
			break;
		case O_THREADS:
			cfg->threads = (unsigned int)number_arg("--threads", optarg, 1, 1024);
			break;
		case O_EVENTS:
			cfg->events = (unsigned int)number_arg("--events", optarg, 1, 1000000);
			break;
		case O_EVENT_MS:
			cfg->event_ms = (unsigned int)number_arg("--event-ms", optarg, 0, 3600000);
			break;
		case O_PRECOMPRESSED:
			cfg->precompressed = true;
			break;
		case O_CODINGS:
			codings_arg(cfg, optarg);
			break;
		case O_ETAG:
			if (strcmp(optarg, "weak") == 0)
				cfg->etag = MHDGZ_ETAG_WEAKEN;
			else if (strcmp(optarg, "suffix") == 0)
				cfg->etag = MHDGZ_ETAG_SUFFIX;
			else if (strcmp(optarg, "drop") == 0)
				cfg->etag = MHDGZ_ETAG_DROP;
			else if (strcmp(optarg, "keep") == 0)
				cfg->etag = MHDGZ_ETAG_KEEP;
			else
				bad_option("--etag: '%s' is not weak, suffix, drop or keep",
					   optarg);
			break;
		case O_LENGTH_HIDING:
			cfg->length_hiding = (size_t)number_arg("--length-hiding", optarg, 1,
								MHDGZ_LENGTH_HIDING_MAX_LIMIT);
			break;
		case O_NO_COMPRESS:
			cfg->no_compress = true;
			break;
		case O_CACHE_SIZE:
			cfg->cache_size = (size_t)number_arg("--cache-size", optarg, 0, SIZE_MAX);
			cfg->cache_size_set = true;
			break;
		case O_KEEP_SIZE:
			cfg->keep_size = (size_t)number_arg("--keep-size", optarg, 0, SIZE_MAX);
			cfg->keep_size_set = true;
			break;
		case O_RECHECK_MS:
			cfg->recheck_ms = (unsigned int)number_arg("--recheck-ms", optarg, 0,
								   3600000);
			cfg->recheck_ms_set = true;
			break;
		case O_DICTIONARY:
			if (cfg->ndict == GZS_DICT_MAX)
				bad_option("--dictionary: at most %d", GZS_DICT_MAX);
			if (cfg->ndict && !cfg->dict_match[cfg->ndict - 1])
				bad_option("--dictionary %s needs a --dictionary-match",
					   cfg->dict_file[cfg->ndict - 1]);
			cfg->dict_file[cfg->ndict++] = optarg;
			break;
		case O_DICTIONARY_MATCH:
			if (!cfg->ndict || cfg->dict_match[cfg->ndict - 1])
				bad_option("--dictionary-match follows a --dictionary");
			cfg->dict_match[cfg->ndict - 1] = optarg;
			break;
		case O_QUIET:
			cfg->quiet = true;
			break;
		case O_HELP:
			usage(stdout);
			exit(0);
		case ':':
			bad_option("%s needs a value", argv[optind - 1]);
		default:
			if (optopt)
				bad_option("unknown option '-%c'", optopt);
			bad_option("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		bad_option("unexpected argument '%s'", argv[optind]);
	if (cfg->ndict && !cfg->dict_match[cfg->ndict - 1])
		bad_option("--dictionary %s needs a --dictionary-match",
			   cfg->dict_file[cfg->ndict - 1]);
	if (cfg->precompressed && !cfg->root)
		bad_option("--precompressed needs --root");
	/* Both act on file responses only: in the demo they would do nothing. */
	if (cfg->cache_size_set && !cfg->root)
		bad_option("--cache-size needs --root");
	if (cfg->keep_size_set && !cfg->root)
		bad_option("--keep-size needs --root");
	if (cfg->recheck_ms_set && !cfg->root)
		bad_option("--recheck-ms needs --root");
	/* A kept response would bypass the choice of a sibling or of a
	 * dictionary: asked for explicitly, say so (the default just stays
	 * off). */
	if (cfg->keep_size_set && cfg->keep_size && cfg->precompressed)
		bad_option("--keep-size does not work with --precompressed (use --keep-size 0)");
	if (cfg->keep_size_set && cfg->keep_size && cfg->ndict)
		bad_option("--keep-size does not work with --dictionary (use --keep-size 0)");
	/* The level's range depends on the backend, whichever came first. */
	if (level_arg) {
		if (mhdgz_backend_levels(cfg->backend, &lmin, &lmax, NULL) != 0)
			bad_option("--backend: not available");
		cfg->level = (int)number_arg("--level", level_arg, (unsigned long long)lmin,
					     (unsigned long long)lmax);
		cfg->level_set = true;
	}
}
