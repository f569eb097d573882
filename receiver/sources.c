/*
 * sources.c
 *		The in-memory snapshot of enabled sources and their secrets.
 *
 * A snapshot is built from one result of rcv_sources_query and replaced as
 * a whole when the database says the sources changed (NOTIFY) or on SIGHUP.
 * Requests use it only synchronously, while verifying, so the old snapshot
 * can be freed the moment the new one is installed.  Secrets are decoded
 * once here (Standard Webhooks' whsec_ base64) and wiped when freed.
 */
#include "sources.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"

/*
 * One row per (source, secret), so no array literal has to be parsed in C;
 * the hmac settings are read by jsonb operators, as C reads no JSON.
 */
const char *const rcv_sources_query =
"SELECT r.name, r.kind, r.tolerance_seconds,"
" r.settings->>'header', r.settings->>'prefix', r.settings->>'encoding',"
" r.settings->>'timestamp_header', r.settings->>'template', r.settings->>'id_header',"
" s.secret"
" FROM webhook_inbox.receiver_sources() r"
" LEFT JOIN LATERAL unnest(r.signing_secrets) WITH ORDINALITY AS s(secret, ord) ON true"
" ORDER BY r.name, s.ord";

enum
{
	COL_NAME, COL_KIND, COL_TOLERANCE, COL_HEADER, COL_PREFIX, COL_ENCODING,
	COL_TS_HEADER, COL_TEMPLATE, COL_ID_HEADER, COL_SECRET, NCOLS
};

static rcv_sources *current;

/* Copy of a nullable column; NULL for SQL NULL. */
static char *
col(const PGresult *res, int row, int c)
{
	if (PQgetisnull(res, row, c))
		return NULL;
	return strdup(PQgetvalue(res, row, c));
}

static int
cmp_source(const void *a, const void *b)
{
	return strcmp(((const rcv_source *) a)->name, ((const rcv_source *) b)->name);
}

/* Fill src's verification settings from its first row. */
static void
fill_source(rcv_source *src, const PGresult *res, int row)
{
	rcv_verifier *v = &src->verifier;
	char	   *enc = col(res, row, COL_ENCODING);

	src->name = col(res, row, COL_NAME);
	src->kind = col(res, row, COL_KIND);
	v->scheme = src->kind ? rcv_scheme_lookup(src->kind) : NULL;
	v->tolerance = atoi(PQgetvalue(res, row, COL_TOLERANCE));
	v->hmac_header = col(res, row, COL_HEADER);
	v->hmac_prefix = col(res, row, COL_PREFIX);
	v->hmac_ts_header = col(res, row, COL_TS_HEADER);
	v->hmac_template = col(res, row, COL_TEMPLATE);
	v->hmac_id_header = col(res, row, COL_ID_HEADER);
	v->hmac_encoding = RCV_ENC_HEX;
	if (enc && strcmp(enc, "base64") == 0)
		v->hmac_encoding = RCV_ENC_BASE64;
	else if (enc && strcmp(enc, "hex") != 0)
		src->problem = "settings.encoding must be hex or base64";
	free(enc);
}

/*
 * rcv_sources_from_result
 *		Build a snapshot from a result of rcv_sources_query.
 *
 * A source that cannot verify anything (unknown kind, bad settings, no
 * decodable secret) is kept with its problem set, so that its deliveries
 * get 503 (the provider retries until an operator fixes it) rather than
 * 404 or 401.  Returns NULL if out of memory or the result has the wrong
 * shape.
 */
rcv_sources *
rcv_sources_from_result(const PGresult *res)
{
	rcv_sources *s = NULL;
	int			nrows = PQntuples(res);

	if (PQnfields(res) != NCOLS)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		goto err;
	s->items = calloc((size_t) (nrows > 0 ? nrows : 1), sizeof(rcv_source));
	if (s->items == NULL)
		goto err;
	for (int row = 0; row < nrows; row++)
	{
		rcv_source *src;
		const char *secret;

		/* rows come grouped by name: a new name starts a new source */
		if (s->n == 0 ||
			strcmp(s->items[s->n - 1].name, PQgetvalue(res, row, COL_NAME)) != 0)
		{
			int			nsecrets = 1;

			/* this source's rows: as many as it has secrets */
			while (row + nsecrets < nrows &&
				   strcmp(PQgetvalue(res, row + nsecrets, COL_NAME),
						  PQgetvalue(res, row, COL_NAME)) == 0)
				nsecrets++;
			src = &s->items[s->n++];
			fill_source(src, res, row);
			if (src->name == NULL || src->kind == NULL)
				goto err;
			src->verifier.secrets = calloc((size_t) nsecrets, sizeof(rcv_secret));
			if (src->verifier.secrets == NULL)
				goto err;
		}
		src = &s->items[s->n - 1];
		if (PQgetisnull(res, row, COL_SECRET) || src->verifier.scheme == NULL)
			continue;
		secret = PQgetvalue(res, row, COL_SECRET);
		if (src->verifier.scheme->decode_secret(secret,
												&src->verifier.secrets[src->verifier.nsecrets]) == 0)
			src->verifier.nsecrets++;
		else
			rcv_log(RCV_LOG_WARNING, "source %s: a signing secret could not be decoded and is ignored",
					src->name);
	}
	for (int i = 0; i < s->n; i++)
	{
		rcv_source *src = &s->items[i];
		const char *problem = NULL;

		if (src->problem == NULL && rcv_verifier_check(&src->verifier, &problem) != 0)
			src->problem = problem;
		if (src->problem)
			rcv_log(RCV_LOG_WARNING, "source %s (kind %s) cannot verify deliveries: %s",
					src->name, src->kind, src->problem);
	}
	qsort(s->items, (size_t) s->n, sizeof(rcv_source), cmp_source);
	return s;
err:
	rcv_sources_free(s);
	return NULL;
}

const rcv_source *
rcv_sources_find(const rcv_sources *s, const char *name)
{
	rcv_source	key;

	if (s == NULL || s->n == 0)
		return NULL;
	key.name = (char *) name;
	return bsearch(&key, s->items, (size_t) s->n, sizeof(rcv_source), cmp_source);
}

/* Free a snapshot, wiping the key bytes of every secret first. */
void
rcv_sources_free(rcv_sources *s)
{
	if (s == NULL)
		return;
	for (int i = 0; s->items && i < s->n; i++)
	{
		rcv_source *src = &s->items[i];
		rcv_verifier *v = &src->verifier;

		for (int k = 0; k < v->nsecrets; k++)
			rcv_secret_free(&v->secrets[k]);
		free(v->secrets);
		free(v->hmac_header);
		free(v->hmac_prefix);
		free(v->hmac_ts_header);
		free(v->hmac_template);
		free(v->hmac_id_header);
		free(src->name);
		free(src->kind);
	}
	free(s->items);
	free(s);
}

void
rcv_sources_install(rcv_sources *s)
{
	rcv_sources_free(current);
	current = s;
}

/* NULL until the first successful load. */
const rcv_sources *
rcv_sources_current(void)
{
	return current;
}
