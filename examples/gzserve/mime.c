/* mime.c: gzserve's media types: a built-in table, then /etc/mime.types. */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "gzserve.h"

/* A file extension and its media type. */
struct mime {
	char *ext; /* lowercase */
	char *type;
	int rank; /* 0: built in, 1: /etc/mime.types; the lower wins */
};

/* What a static site needs, in /etc/mime.types' own format and read
 * before it, so the web's core extensions get the same type whatever the
 * system's media-types version says (older ones map .js to
 * application/javascript, and a minimal system has no /etc/mime.types). */
static const char builtin_mimes[] =
	"text/html html htm\ntext/css css\ntext/javascript js mjs\n"
	"application/json json map\napplication/manifest+json webmanifest\n"
	"text/plain txt\ntext/markdown md\ntext/csv csv\napplication/xml xml\n"
	"image/svg+xml svg\napplication/wasm wasm\nimage/png png\nimage/jpeg jpg jpeg\n"
	"image/gif gif\nimage/webp webp\nimage/avif avif\nimage/vnd.microsoft.icon ico\n"
	"application/pdf pdf\napplication/zip zip\napplication/gzip gz\n"
	"font/woff woff\nfont/woff2 woff2\nfont/ttf ttf\nfont/otf otf\n"
	"video/mp4 mp4\nvideo/webm webm\naudio/mpeg mp3\naudio/ogg ogg\n";

static int
mime_cmp(const void *a, const void *b)
{
	const struct mime *x = a, *y = b;
	int c = strcmp(x->ext, y->ext);

	return c ? c : x->rank - y->rank;
}

/* Add one "type ext ext ..." line's extensions. 0, or -1 out of memory. */
static int
mime_line(struct server *s, char *line, int rank, size_t *cap)
{
	char *save = NULL, *type = strtok_r(line, " \t\r\n", &save), *ext;

	if (!type || type[0] == '#' || !strchr(type, '/'))
		return 0;
	while ((ext = strtok_r(NULL, " \t\r\n", &save))) {
		struct mime *m = s->mimes;

		if (s->nmimes == *cap) {
			*cap = *cap ? *cap * 2 : 1024;
			m = realloc(s->mimes, *cap * sizeof *m);
			if (!m)
				return -1;
			s->mimes = m;
		}
		m += s->nmimes;
		m->ext = strdup(ext);
		m->type = strdup(type);
		m->rank = rank;
		if (!m->ext || !m->type) {
			free(m->ext);
			free(m->type);
			return -1;
		}
		for (char *p = m->ext; *p; p++)
			*p = (char)tolower((unsigned char)*p);
		s->nmimes++;
	}
	return 0;
}

/* The built-in table, then file ("type ext ext ..." lines; a missing file
 * is not an error), into one table sorted by extension. */
int
mime_load(struct server *s, const char *file)
{
	char buf[sizeof builtin_mimes], line[1024], *save = NULL, *l;
	FILE *f = fopen(file, "r");
	size_t cap = 0;
	int rc = 0;

	memcpy(buf, builtin_mimes, sizeof buf);
	for (l = strtok_r(buf, "\n", &save); l && rc == 0; l = strtok_r(NULL, "\n", &save))
		rc = mime_line(s, l, 0, &cap);
	while (f && rc == 0 && fgets(line, sizeof line, f))
		rc = mime_line(s, line, 1, &cap);
	if (f)
		fclose(f);
	if (s->nmimes)
		qsort(s->mimes, s->nmimes, sizeof *s->mimes, mime_cmp);
	return rc;
}

void
mime_free(struct server *s)
{
	size_t i;

	for (i = 0; i < s->nmimes; i++) {
		free(s->mimes[i].ext);
		free(s->mimes[i].type);
	}
	free(s->mimes);
}

static const char *
mime_lookup_ext(const struct server *s, const char *ext)
{
	char low[64];
	struct mime key = { .ext = low, .rank = 0 }, *m;
	size_t i;

	for (i = 0; ext[i] && i < sizeof low - 1; i++)
		low[i] = (char)tolower((unsigned char)ext[i]);
	if (ext[i] || !s->nmimes)
		return NULL;
	low[i] = '\0';
	/* Rank 0 first: the built-in type, if any, else the file's. */
	m = bsearch(&key, s->mimes, s->nmimes, sizeof *s->mimes, mime_cmp);
	if (!m) {
		key.rank = 1;
		m = bsearch(&key, s->mimes, s->nmimes, sizeof *s->mimes, mime_cmp);
	}
	return m ? m->type : NULL;
}

/* The Content-Type for a file name: the longest listed extension wins
 * ("x.tar.gz" tries "tar.gz", then "gz"); text types are declared UTF-8. */
void
mime_type(const struct server *s, const char *name, char *out, size_t cap)
{
	const char *base = strrchr(name, '/'), *dot, *type = NULL;

	base = base ? base + 1 : name;
	for (dot = strchr(base, '.'); dot && !type; dot = strchr(dot + 1, '.'))
		type = mime_lookup_ext(s, dot + 1);
	if (!type)
		type = "application/octet-stream";
	if (strncmp(type, "text/", 5) == 0)
		snprintf(out, cap, "%s; charset=utf-8", type);
	else
		snprintf(out, cap, "%s", type);
}
