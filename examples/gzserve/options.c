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
		"                    comma-separated gzip, zstd, br (default: gzip; mhdgz_new\n"
		"                    reads the list and refuses what it cannot offer)\n"
		"  --precompressed   with --root: send FILE.gz, FILE.zst or FILE.br for FILE\n"
		"                    when the client accepts that coding (those of --codings,\n"
		"                    chosen as on the fly), with FILE's Content-Type and the\n"
		"                    Content-Encoding (like nginx's gzip_static, brotli_static);\n"
		"                    only a sibling at least as new as FILE, and a .zst whose\n"
		"                    window is at most 8 MiB\n"
		"  --etag POLICY     the strong ETag of a compressed response: weak (W/\"x\",\n"
		"                    the default), suffix (\"x-gzip\"), drop, or keep\n"
		"  --length-hiding N pad every gzip response with 1 to N bytes (1-%u) in its\n"
		"                    gzip header, a length keyed on the body: BREACH\n"
		"                    mitigation for pages holding a secret next to reflected\n"
		"                    input (default: off; libmhdgz's default N is %u)\n"
		"  --no-compress     never compress on the fly (precompressed files still go)\n"
		"  --cache-size BYTES with --root: the library's file cache: keep up to BYTES\n"
		"                    of compressed file bodies for reuse, keyed by each\n"
		"                    file's identity and times, so a file version is\n"
		"                    compressed once (default %u; 0: off, every request\n"
		"                    compresses)\n"
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
		MHDGZ_DEFAULT_LENGTH_HIDING_MAX, GZS_CACHE_SIZE_DEFAULT, GZS_GRACE_MS / 1000);
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

/* --backend NAME: mhdgz_backend_from_name() tells unknown from not built. */
static void
backend_arg(struct config *cfg, const char *v)
{
	int rc = mhdgz_backend_from_name(v, &cfg->backend);

	if (rc == MHDGZ_ENOTSUP)
		bad_option("--backend: '%s' was not compiled into this libmhdgz", v);
	if (rc != 0)
		bad_option("--backend: '%s' is not zlib, libdeflate or isal", v);
}

static void
etag_arg(struct config *cfg, const char *v)
{
	static const struct {
		const char *name;
		enum mhdgz_etag_policy policy;
	} policies[] = { { "weak", MHDGZ_ETAG_WEAKEN },
			 { "suffix", MHDGZ_ETAG_SUFFIX },
			 { "drop", MHDGZ_ETAG_DROP },
			 { "keep", MHDGZ_ETAG_KEEP } };

	for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++)
		if (strcmp(v, policies[i].name) == 0) {
			cfg->etag = policies[i].policy;
			return;
		}
	bad_option("--etag: '%s' is not weak, suffix, drop or keep", v);
}

/* --dictionary FILE, each followed by its --dictionary-match PATTERN. */
static void
dict_arg(struct config *cfg, const char *file, const char *match)
{
	if (file) {
		if (cfg->ndict == GZS_DICT_MAX)
			bad_option("--dictionary: at most %d", GZS_DICT_MAX);
		if (cfg->ndict && !cfg->dict_match[cfg->ndict - 1])
			bad_option("--dictionary %s needs a --dictionary-match",
				   cfg->dict_file[cfg->ndict - 1]);
		cfg->dict_file[cfg->ndict++] = file;
		return;
	}
	if (!cfg->ndict || cfg->dict_match[cfg->ndict - 1])
		bad_option("--dictionary-match follows a --dictionary");
	cfg->dict_match[cfg->ndict - 1] = match;
}

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
	O_DICTIONARY,
	O_DICTIONARY_MATCH,
	O_QUIET,
	O_HELP
};

/* One option c (getopt_long's value) with its argument v. */
static void
take_option(struct config *cfg, int c, const char *v, const char **level_arg)
{
	switch (c) {
	case O_BIND:
		cfg->bind = v;
		break;
	case O_PORT:
		cfg->port = (unsigned int)number_arg("--port", v, 0, 65535);
		break;
	case O_ROOT:
		cfg->root = v;
		break;
	case O_BACKEND:
		backend_arg(cfg, v);
		break;
	case O_LEVEL:
		*level_arg = v;
		break;
	case O_MIN_SIZE:
		cfg->min_size = (size_t)number_arg("--min-size", v, 0, SIZE_MAX);
		cfg->min_size_set = true;
		break;
	case O_TYPES:
		types_arg(cfg, v);
		break;
	case O_THREADS:
		cfg->threads = (unsigned int)number_arg("--threads", v, 1, 1024);
		break;
	case O_EVENTS:
		cfg->events = (unsigned int)number_arg("--events", v, 1, 1000000);
		break;
	case O_EVENT_MS:
		cfg->event_ms = (unsigned int)number_arg("--event-ms", v, 0, 3600000);
		break;
	case O_PRECOMPRESSED:
		cfg->precompressed = true;
		break;
	case O_CODINGS: /* parsed by mhdgz_new(), once (main.c) */
		cfg->codings = v;
		break;
	case O_ETAG:
		etag_arg(cfg, v);
		break;
	case O_LENGTH_HIDING:
		cfg->length_hiding = (size_t)number_arg("--length-hiding", v, 1,
							MHDGZ_LENGTH_HIDING_MAX_LIMIT);
		break;
	case O_NO_COMPRESS:
		cfg->no_compress = true;
		break;
	case O_CACHE_SIZE:
		cfg->cache_size = (size_t)number_arg("--cache-size", v, 0, SIZE_MAX);
		cfg->cache_size_set = true;
		break;
	case O_DICTIONARY:
	case O_DICTIONARY_MATCH:
		dict_arg(cfg, c == O_DICTIONARY ? v : NULL, v);
		break;
	case O_QUIET:
		cfg->quiet = true;
		break;
	}
}

/* What no single option can tell: options that need another, and the
 * level's range, which depends on the backend whichever came first. */
static void
check_options(struct config *cfg, const char *level_arg)
{
	int lmin, lmax;

	if (cfg->ndict && !cfg->dict_match[cfg->ndict - 1])
		bad_option("--dictionary %s needs a --dictionary-match",
			   cfg->dict_file[cfg->ndict - 1]);
	if (cfg->precompressed && !cfg->root)
		bad_option("--precompressed needs --root");
	/* It acts on file responses only: in the demo it would do nothing. */
	if (cfg->cache_size_set && !cfg->root)
		bad_option("--cache-size needs --root");
	if (level_arg) {
		if (mhdgz_backend_levels(cfg->backend, &lmin, &lmax, NULL) != 0)
			bad_option("--backend: not available");
		cfg->level = (int)number_arg("--level", level_arg, (unsigned long long)lmin,
					     (unsigned long long)lmax);
		cfg->level_set = true;
	}
}

void
parse_options(int argc, char **argv, struct config *cfg)
{
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
		{ "dictionary", required_argument, NULL, O_DICTIONARY },
		{ "dictionary-match", required_argument, NULL, O_DICTIONARY_MATCH },
		{ "quiet", no_argument, NULL, O_QUIET },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	const char *level_arg = NULL;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int c;

	cfg->bind = "127.0.0.1";
	cfg->port = 8080;
	cfg->backend = MHDGZ_BACKEND_DEFAULT;
	cfg->threads = ncpu > 0 ? (unsigned int)(ncpu > 1024 ? 1024 : ncpu) : 1;
	cfg->etag = MHDGZ_ETAG_WEAKEN;
	cfg->cache_size = GZS_CACHE_SIZE_DEFAULT;
	cfg->events = GZS_EVENTS;
	cfg->event_ms = GZS_EVENT_MS;
	opterr = 0; /* our own messages, and exit 2 */
	while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
		if (c == O_HELP) {
			usage(stdout);
			exit(0);
		}
		if (c == ':')
			bad_option("%s needs a value", argv[optind - 1]);
		if (c < O_BIND) {
			if (optopt)
				bad_option("unknown option '-%c'", optopt);
			bad_option("unknown option '%s'", argv[optind - 1]);
		}
		take_option(cfg, c, optarg, &level_arg);
	}
	if (optind < argc)
		bad_option("unexpected argument '%s'", argv[optind]);
	check_options(cfg, level_arg);
}
