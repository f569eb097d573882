/*
 * verify.c
 *		`webhook-sim verify`: compare the database mirror of one source with
 *		the running simulator's truth and print every difference.
 *
 * Truth comes from GET <api>/_sim/truth; the mirror from
 * webhook_inbox.objects and webhook_inbox.occurrences joined to
 * webhook_inbox.sources by name.  Rules:
 *   - every truth object must be in the mirror with equal status and
 *     deleted flag; a deleted truth object may instead be absent, and its
 *     status is not compared; orders also compare version (numerically);
 *   - every truth occurrence must be in the mirror exactly once with equal
 *     amount and currency;
 *   - mirror objects and occurrences absent from the truth are differences;
 *   - all of it per tenant: an object or occurrence is (tenant, type, id),
 *     the tenant being the provider account that owns it (a Stripe Connect
 *     account; "" for the source's own account), so an account's object
 *     mirrored under another tenant is both missing and extra.  A line about
 *     a tenant's object names it: "subscription sub_1 of acct_…: …".
 * Exit 0 without differences, 1 with, 2 for bad usage or when the comparison
 * cannot run (database or simulator unreachable).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <libpq-fe.h>

#include "commands.h"
#include "json.h"
#include "util.h"

#define CMD "verify"

static void
verify_help(void)
{
	puts("Usage: webhook-sim verify --db CONNINFO --source NAME --api URL\n"
		 "\n"
		 "Compares webhook_inbox.objects and webhook_inbox.occurrences of source NAME\n"
		 "with the truth of the simulator at URL (its --listen address, e.g.\n"
		 "http://127.0.0.1:8081).  Prints one line per difference and a summary line.\n"
		 "Exit 0: no difference; 1: differences; 2: bad usage or comparison impossible.");
}

/* " of TENANT" for a tenant's object in a difference line, "" for the source's own. */
static const char *
of_tenant(const char *tenant)
{
	static char buf[300];

	if (tenant == NULL || tenant[0] == '\0')
		return "";
	snprintf(buf, sizeof(buf), " of %.280s", tenant);
	return buf;
}

static size_t
write_cb(char *ptr, size_t size, size_t nmemb, void *arg)
{
	sb_putn(arg, ptr, size * nmemb);
	return size * nmemb;
}

/* GET url into out; returns 0 on HTTP 200, else -1 with a reason printed. */
static int
http_get(const char *url, sbuf *out)
{
	CURL	   *curl = curl_easy_init();
	CURLcode	res;
	long		code = 0;
	int			rc = -1;

	if (curl == NULL)
	{
		fprintf(stderr, "webhook-sim verify: cannot initialise libcurl\n");
		return -1;
	}
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT, 60L);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	res = curl_easy_perform(curl);
	if (res != CURLE_OK)
		fprintf(stderr, "webhook-sim verify: GET %s: %s\n", url, curl_easy_strerror(res));
	else if (curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK || code != 200)
		fprintf(stderr, "webhook-sim verify: GET %s: HTTP %ld\n", url, code);
	else
		rc = 0;
	curl_easy_cleanup(curl);
	return rc;
}

/* Numeric equality of two decimal texts (versions are epoch seconds). */
static int
num_equal(const char *a, const char *b)
{
	return strtold(a, NULL) == strtold(b, NULL);
}

static int
truthy(const char *pgbool)
{
	return pgbool && pgbool[0] == 't';
}

int
cmd_verify(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"db", required_argument, NULL, 'd'},
		{"source", required_argument, NULL, 's'},
		{"api", required_argument, NULL, 'a'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}
	};
	const char *db = NULL,
			   *source = NULL,
			   *api = NULL;
	int			ch,
				rc = EXIT_USAGE;
	sbuf		url,
				body;
	jv		   *truth = NULL;
	PGconn	   *conn = NULL;
	PGresult   *objs = NULL,
			   *occs = NULL,
			   *src = NULL;
	id_map		mirror_obj,
				mirror_occ;
	char	   *obj_seen = NULL,
			   *occ_seen = NULL;
	long		diffs = 0,
				nobj = 0,
				nocc = 0;
	const jv   *tobjs,
			   *toccs;
	size_t		i;
	int			r;
	char		err[128];
	const char *params[1];

	sb_init(&url);
	sb_init(&body);
	memset(&mirror_obj, 0, sizeof(mirror_obj));
	memset(&mirror_occ, 0, sizeof(mirror_occ));
	opterr = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, ":h", longopts, NULL)) != -1)
	{
		switch (ch)
		{
			case 'h':
				verify_help();
				rc = 0;
				goto err;
			case 'd':
				db = optarg;
				break;
			case 's':
				source = optarg;
				break;
			case 'a':
				api = optarg;
				break;
			default:
				rc = option_error(CMD, argc, argv, ch);
				goto err;
		}
	}
	if (optind < argc)
	{
		rc = usage_error(CMD, "unexpected argument \"%s\"", argv[optind]);
		goto err;
	}
	if (db == NULL || source == NULL || api == NULL)
	{
		rc = usage_error(CMD, "--db, --source and --api are required");
		goto err;
	}

	/* the truth */
	sb_puts(&url, api);
	while (url.len > 0 && url.data[url.len - 1] == '/')
		url.data[--url.len] = '\0';
	sb_puts(&url, "/_sim/truth");
	curl_global_init(CURL_GLOBAL_DEFAULT);
	r = http_get(url.data, &body);
	curl_global_cleanup();
	if (r != 0)
		goto err;
	truth = jv_parse(body.data, body.len, err, sizeof(err));
	tobjs = jv_get(truth, "objects");
	toccs = jv_get(truth, "occurrences");
	if (truth == NULL || tobjs == NULL || tobjs->type != JV_ARR ||
		toccs == NULL || toccs->type != JV_ARR)
	{
		fprintf(stderr, "webhook-sim verify: %s is not a truth document\n", url.data);
		goto err;
	}

	/* the mirror */
	conn = PQconnectdb(db);
	if (PQstatus(conn) != CONNECTION_OK)
	{
		fprintf(stderr, "webhook-sim verify: cannot connect to the database: %s",
				PQerrorMessage(conn));
		goto err;
	}
	params[0] = source;
	src = PQexecParams(conn, "SELECT id FROM webhook_inbox.sources WHERE name = $1",
					   1, NULL, params, NULL, NULL, 0);
	objs = PQexecParams(conn,
						"SELECT o.object_type, o.object_id, o.status, o.version::text, o.deleted,"
						"       coalesce(to_jsonb(o) ->> 'tenant', '')"
						"  FROM webhook_inbox.objects o"
						"  JOIN webhook_inbox.sources s ON s.id = o.source_id"
						" WHERE s.name = $1",
						1, NULL, params, NULL, NULL, 0);
	occs = PQexecParams(conn,
						"SELECT c.kind, c.occurrence_id, c.amount::text, c.currency,"
						"       coalesce(to_jsonb(c) ->> 'tenant', '')"
						"  FROM webhook_inbox.occurrences c"
						"  JOIN webhook_inbox.sources s ON s.id = c.source_id"
						" WHERE s.name = $1",
						1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(src) != PGRES_TUPLES_OK || PQresultStatus(objs) != PGRES_TUPLES_OK ||
		PQresultStatus(occs) != PGRES_TUPLES_OK)
	{
		fprintf(stderr, "webhook-sim verify: cannot read the mirror: %s", PQerrorMessage(conn));
		goto err;
	}
	if (PQntuples(src) == 0)
	{
		printf("source %s: not in webhook_inbox.sources\n", source);
		diffs++;
	}

	for (r = 0; r < PQntuples(objs); r++)
	{
		sbuf		key;

		sb_init(&key);
		sb_printf(&key, "%s/%s/%s", PQgetvalue(objs, r, 5), PQgetvalue(objs, r, 0), PQgetvalue(objs, r, 1));
		idmap_put(&mirror_obj, key.data, r);
		sb_free(&key);
	}
	for (r = 0; r < PQntuples(occs); r++)
	{
		sbuf		key;
		long		prev;

		sb_init(&key);
		sb_printf(&key, "%s/%s/%s", PQgetvalue(occs, r, 4), PQgetvalue(occs, r, 0), PQgetvalue(occs, r, 1));
		prev = idmap_get(&mirror_occ, key.data);
		if (prev >= 0)
		{
			printf("occurrence %s %s%s: recorded more than once\n",
				   PQgetvalue(occs, r, 0), PQgetvalue(occs, r, 1), of_tenant(PQgetvalue(occs, r, 4)));
			diffs++;
		}
		else
			idmap_put(&mirror_occ, key.data, r);
		sb_free(&key);
	}
	obj_seen = xcalloc((size_t) PQntuples(objs) + 1, 1);
	occ_seen = xcalloc((size_t) PQntuples(occs) + 1, 1);

	for (i = 0; i < tobjs->n; i++)
	{
		const jv   *t = tobjs->items[i];
		const char *type = jv_string(jv_get(t, "type")),
				   *id = jv_string(jv_get(t, "id")),
				   *status = jv_string(jv_get(t, "status")),
				   *version = jv_scalar_text(jv_get(t, "version")),
				   *tenant = jv_string(jv_get(t, "tenant"));
		const jv   *del = jv_get(t, "deleted");
		int			tdel = del && del->type == JV_BOOL && del->boolean;
		sbuf		key;
		long		m;

		if (jv_string(jv_get(t, "source")) == NULL ||
			strcmp(jv_string(jv_get(t, "source")), source) != 0 ||
			type == NULL || id == NULL)
			continue;
		nobj++;
		if (tenant == NULL)
			tenant = "";
		sb_init(&key);
		sb_printf(&key, "%s/%s/%s", tenant, type, id);
		m = idmap_get(&mirror_obj, key.data);
		sb_free(&key);
		if (m < 0)
		{
			if (!tdel)
			{
				printf("%s %s%s: missing from the mirror (truth status %s)\n", type, id,
					   of_tenant(tenant), status ? status : "?");
				diffs++;
			}
			continue;
		}
		obj_seen[m] = 1;
		if (truthy(PQgetvalue(objs, (int) m, 4)) != tdel)
		{
			printf("%s %s%s: deleted differs: mirror %s, truth %s\n", type, id, of_tenant(tenant),
				   truthy(PQgetvalue(objs, (int) m, 4)) ? "true" : "false",
				   tdel ? "true" : "false");
			diffs++;
			continue;
		}
		if (tdel)
			continue;
		if (status && (PQgetisnull(objs, (int) m, 2) ||
					   strcmp(PQgetvalue(objs, (int) m, 2), status) != 0))
		{
			printf("%s %s%s: status differs: mirror %s, truth %s\n", type, id, of_tenant(tenant),
				   PQgetisnull(objs, (int) m, 2) ? "NULL" : PQgetvalue(objs, (int) m, 2), status);
			diffs++;
		}
		if (strcmp(type, "order") == 0 && version &&
			(PQgetisnull(objs, (int) m, 3) || !num_equal(PQgetvalue(objs, (int) m, 3), version)))
		{
			printf("%s %s%s: version differs: mirror %s, truth %s\n", type, id, of_tenant(tenant),
				   PQgetisnull(objs, (int) m, 3) ? "NULL" : PQgetvalue(objs, (int) m, 3), version);
			diffs++;
		}
	}
	for (r = 0; r < PQntuples(objs); r++)
		if (!obj_seen[r])
		{
			printf("%s %s%s: in the mirror but not in the truth\n",
				   PQgetvalue(objs, r, 0), PQgetvalue(objs, r, 1), of_tenant(PQgetvalue(objs, r, 5)));
			diffs++;
		}

	for (i = 0; i < toccs->n; i++)
	{
		const jv   *t = toccs->items[i];
		const char *kind = jv_string(jv_get(t, "kind")),
				   *id = jv_string(jv_get(t, "id")),
				   *amount = jv_scalar_text(jv_get(t, "amount")),
				   *currency = jv_string(jv_get(t, "currency")),
				   *tenant = jv_string(jv_get(t, "tenant"));
		sbuf		key;
		long		m;

		if (jv_string(jv_get(t, "source")) == NULL ||
			strcmp(jv_string(jv_get(t, "source")), source) != 0 ||
			kind == NULL || id == NULL)
			continue;
		nocc++;
		if (tenant == NULL)
			tenant = "";
		sb_init(&key);
		sb_printf(&key, "%s/%s/%s", tenant, kind, id);
		m = idmap_get(&mirror_occ, key.data);
		sb_free(&key);
		if (m < 0)
		{
			printf("occurrence %s %s%s: missing from the mirror\n", kind, id, of_tenant(tenant));
			diffs++;
			continue;
		}
		occ_seen[m] = 1;
		if (amount && (PQgetisnull(occs, (int) m, 2) ||
					   !num_equal(PQgetvalue(occs, (int) m, 2), amount)))
		{
			printf("occurrence %s %s%s: amount differs: mirror %s, truth %s\n", kind, id, of_tenant(tenant),
				   PQgetisnull(occs, (int) m, 2) ? "NULL" : PQgetvalue(occs, (int) m, 2), amount);
			diffs++;
		}
		if (currency && (PQgetisnull(occs, (int) m, 3) ||
						 strcmp(PQgetvalue(occs, (int) m, 3), currency) != 0))
		{
			printf("occurrence %s %s%s: currency differs: mirror %s, truth %s\n", kind, id, of_tenant(tenant),
				   PQgetisnull(occs, (int) m, 3) ? "NULL" : PQgetvalue(occs, (int) m, 3), currency);
			diffs++;
		}
	}
	for (r = 0; r < PQntuples(occs); r++)
	{
		sbuf		key;

		sb_init(&key);
		sb_printf(&key, "%s/%s/%s", PQgetvalue(occs, r, 4), PQgetvalue(occs, r, 0), PQgetvalue(occs, r, 1));
		/* duplicates were reported above; flag only rows of unknown keys */
		if (!occ_seen[idmap_get(&mirror_occ, key.data)])
		{
			printf("occurrence %s %s%s: in the mirror but not in the truth\n",
				   PQgetvalue(occs, r, 0), PQgetvalue(occs, r, 1), of_tenant(PQgetvalue(occs, r, 4)));
			diffs++;
			occ_seen[idmap_get(&mirror_occ, key.data)] = 1;
		}
		sb_free(&key);
	}

	printf("verify source=%s objects=%ld occurrences=%ld differences=%ld\n",
		   source, nobj, nocc, diffs);
	rc = diffs ? 1 : 0;

err:
	free(obj_seen);
	free(occ_seen);
	idmap_free(&mirror_obj);
	idmap_free(&mirror_occ);
	if (src)
		PQclear(src);
	if (objs)
		PQclear(objs);
	if (occs)
		PQclear(occs);
	if (conn)
		PQfinish(conn);
	jv_free(truth);
	sb_free(&url);
	sb_free(&body);
	return rc;
}
