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
};


/* What a static site needs, looked up before /etc/mime.types so the web's
 * core extensions get the same type whatever the system's media-types
 * version says (older ones map .js to application/javascript, and a minimal
 * system has no /etc/mime.types at all). */
static const struct {
	const char *ext;
	const char *type;
} builtin_mimes[] = {
	{ "html", "text/html" },
	{ "htm", "text/html" },
	{ "css", "text/css" },
	{ "js", "text/javascript" },
	{ "mjs", "text/javascript" },
	{ "json", "application/json" },
	{ "map", "application/json" },
	{ "webmanifest", "application/manifest+json" },
	{ "txt", "text/plain" },
	{ "md", "text/markdown" },
	{ "csv", "text/csv" },
	{ "xml", "application/xml" },
	{ "svg", "image/svg+xml" },
	{ "wasm", "application/wasm" },
	{ "png", "image/png" },
	{ "jpg", "image/jpeg" },
	{ "jpeg", "image/jpeg" },
	{ "gif", "image/gif" },
	{ "webp", "image/webp" },
	{ "avif", "image/avif" },
	{ "ico", "image/vnd.microsoft.icon" },
	{ "pdf", "application/pdf" },
	{ "zip", "application/zip" },
	{ "gz", "application/gzip" },
	{ "woff", "font/woff" },
	{ "woff2", "font/woff2" },
	{ "ttf", "font/ttf" },
	{ "otf", "font/otf" },
	{ "mp4", "video/mp4" },
	{ "webm", "video/webm" },
	{ "mp3", "audio/mpeg" },
	{ "ogg", "audio/ogg" },
};

static int
mime_cmp(const void *a, const void *b)
{
	return strcmp(((const struct mime *)a)->ext, ((const struct mime *)b)->ext);
}

/* Read /etc/mime.types ("type ext ext ..." lines) into a sorted table for
 * the extensions the built-in table lacks. A missing file is not an error. */
int
mime_load(struct server *s, const char *file)
{
	FILE *f = fopen(file, "r");
	char line[1024];
	size_t cap = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof line, f)) {
		char *save = NULL, *type, *ext;

		if (line[0] == '#')
			continue;
		type = strtok_r(line, " \t\r\n", &save);
		if (!type || !strchr(type, '/'))
			continue;
		while ((ext = strtok_r(NULL, " \t\r\n", &save))) {
			char *p;

			if (s->nmimes == cap) {
				struct mime *m;

				cap = cap ? cap * 2 : 1024;
				m = realloc(s->mimes, cap * sizeof *m);
				if (!m)
					goto fail;
				s->mimes = m;
			}
			s->mimes[s->nmimes].ext = strdup(ext);
			s->mimes[s->nmimes].type = strdup(type);
			if (!s->mimes[s->nmimes].ext || !s->mimes[s->nmimes].type) {
				free(s->mimes[s->nmimes].ext);
				free(s->mimes[s->nmimes].type);
				goto fail;
			}
			for (p = s->mimes[s->nmimes].ext; *p; p++)
				*p = (char)tolower((unsigned char)*p);
			s->nmimes++;
		}
	}
	fclose(f);
	if (s->nmimes)
		qsort(s->mimes, s->nmimes, sizeof *s->mimes, mime_cmp);
	return 0;
fail:
	fclose(f);
	return -1;
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
	struct mime key = { .ext = low }, *m;
	size_t i;

	for (i = 0; ext[i] && i < sizeof low - 1; i++)
		low[i] = (char)tolower((unsigned char)ext[i]);
	if (ext[i])
		return NULL;
	low[i] = '\0';
	for (i = 0; i < sizeof builtin_mimes / sizeof builtin_mimes[0]; i++)
		if (strcmp(builtin_mimes[i].ext, low) == 0)
			return builtin_mimes[i].type;
	if (s->nmimes) {
		m = bsearch(&key, s->mimes, s->nmimes, sizeof *s->mimes, mime_cmp);
		if (m)
			return m->type;
	}
	return NULL;
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
