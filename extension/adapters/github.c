/*
 * github.c
 *		GitHub's REST read API for issues and pull requests of the
 *		repository named in the source's settings ("repo": "owner/name"), as
 *		@octokit/openapi declares it.
 *
 * GET /repos/{repo}/issues takes state, sort, direction, since and per_page
 * (and pages with Link: rel="next"); it lists pull requests too, each with a
 * "pull_request" member, so issues are the items without one.
 * GET /repos/{repo}/pulls takes state, sort, direction and per_page but no
 * since: pull requests are listed in full by both layers.  (The issues list
 * names a pull request by its issue's id, not by the id its webhooks carry,
 * so it cannot repair the mirror's pull requests.)
 *
 * The mirror keys issues by their global id, which the REST API cannot GET
 * directly, so this adapter lists only: a tie is quarantined as ambiguous,
 * and sweeps repair from the listed objects, which carry updated_at as their
 * version.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "credentials.h"
#include "provider.h"
#include "ratelimit.h"
#include "step.h"

static const WiTypeMap github_types[] = {
	{"issue", "issues", "$", "$[*] ? (!(exists (@.pull_request)))", "$.state", "$.updated_at", false},
	{"pull_request", "pulls", "$", "$[*]", "$.state", "$.updated_at", false},
};

static bool
github_type_map(const WiSource *src, const char *object_type, WiTypeMap *out)
{
	if (src->repo == NULL)
		return false;
	for (int i = 0; i < lengthof(github_types); i++)
		if (strcmp(github_types[i].object_type, object_type) == 0)
		{
			*out = github_types[i];
			return true;
		}
	return false;
}

static char *
github_object_url(const WiSource *src, const WiTypeMap *t, const char *object_id)
{
	return NULL;
}

/* later pages come from the Link header only */
static char *
github_list_url(const WiSource *src, const WiTypeMap *t, int64 since_epoch, const char *cursor)
{
	if (cursor != NULL)
		return NULL;
	if (since_epoch == WI_LIST_ALL || strcmp(t->collection, "pulls") == 0)
		return psprintf("%s/repos/%s/%s?state=all&sort=updated&direction=asc&per_page=100",
						src->api_base, src->repo, t->collection);
	return psprintf("%s/repos/%s/%s?state=all&sort=updated&direction=asc&per_page=100&since=%s",
					src->api_base, src->repo, t->collection, wi_url_escape(wi_iso_time(since_epoch)));
}

static char *
github_auth_header(const WiSource *src)
{
	return src->api_token ? psprintf("Authorization: Bearer %s", src->api_token) : NULL;
}

/*
 * A read made for one tenant of the source.  A GitHub App source (one that
 * set_github_app() gave a key: settings.github_app_id) reads each
 * installation's repositories with that installation's token, minted and
 * cached by credentials.c; any other source, or the tenant "", reads with
 * its api_token as above.  The worker calls this, instead of auth_header,
 * once it knows the tenant of what it reads (the installation.id of the
 * deliveries); WAIT and FLAGGED leave the work queued, never tombstoned.
 */
char *
wi_github_tenant_auth_header(const WiSource *src, const char *tenant, int flags,
							 WiAuthStatus *status, char **reason)
{
	char	   *header = NULL;

	*status = wi_tenant_auth(src->id, tenant ? tenant : "", flags, &header, reason);
	if (*status == WI_AUTH_NONE)
		return github_auth_header(src);
	return *status == WI_AUTH_OK ? header : NULL;
}

/*
 * Whether source_id is a GitHub App source (set_github_app() gave it
 * settings.github_app_id): its tenants are installations, each read under
 * its own installation token, each over the repositories GitHub lists for
 * it.  Needs a transaction.
 */
bool
wi_github_is_app(int32 source_id)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(source_id)};
	bool		result = false;
	int			rc;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "webhook_inbox: SPI_connect failed");
	rc = SPI_execute_with_args("SELECT s.kind = 'github' AND s.settings ? 'github_app_id' "
							   "FROM webhook_inbox.sources s WHERE s.id = $1",
							   1, types, args, NULL, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "webhook_inbox: reading source %d failed: %s", source_id,
			 SPI_result_code_string(rc));
	if (SPI_processed == 1)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		result = !isnull && DatumGetBool(d);
	}
	SPI_finish();
	return result;
}

/*
 * The first page of the repositories an installation was granted: GET
 * /installation/repositories (installation token; per_page at most 100,
 * later pages by the Link header), answered {total_count,
 * repository_selection, repositories: [{full_name, ...}]}.
 */
char *
wi_github_repositories_url(const WiSource *src)
{
	return psprintf("%s/installation/repositories?per_page=100", src->api_base);
}

/* ---------- a GitHub App's installations ---------- */

#define GH_MAX_INSTALLATION_PAGES 10000

typedef struct GhDiscovery
{
	int32		source_id;
	WiSource   *src;
	bool		app;
	char	   *auth;			/* the app's JWT header */
	char	   *body;
	int			listed;
} GhDiscovery;

static void
gh_load_step(void *arg)
{
	GhDiscovery *d = (GhDiscovery *) arg;
	MemoryContext old = MemoryContextSwitchTo(wi_step_cxt());

	d->src = wi_source_load(d->source_id);
	d->app = d->src != NULL && strcmp(d->src->kind, "github") == 0 && d->src->api_base != NULL &&
		wi_github_is_app(d->source_id);
	MemoryContextSwitchTo(old);
}

static void
gh_jwt_step(void *arg)
{
	GhDiscovery *d = (GhDiscovery *) arg;
	MemoryContext old = MemoryContextSwitchTo(wi_step_cxt());

	d->auth = wi_github_app_jwt_header(d->source_id);
	MemoryContextSwitchTo(old);
}

/*
 * One page of GET /app/installations (an array of installations) into
 * webhook_inbox.tenants, each as its installation id, discovered by the
 * list; an id that is not a positive integer is no installation GitHub
 * lists and is refused with the page.
 */
static void
gh_page_step(void *arg)
{
	GhDiscovery *d = (GhDiscovery *) arg;
	Oid			t[2] = {INT4OID, TEXTOID};
	Datum		v[2] = {Int32GetDatum(d->source_id), CStringGetTextDatum(d->body)};
	char	   *bad;

	wi_spi_exec("SELECT CASE WHEN jsonb_typeof(d) IS DISTINCT FROM 'array' THEN 'the answer is not an array' "
				"ELSE (SELECT 'installation id ' || coalesce(i -> 'id', 'null')::text || ' is not a positive integer' "
				"FROM jsonb_array_elements(d) i "
				"WHERE jsonb_typeof(i -> 'id') IS DISTINCT FROM 'number' OR (i ->> 'id') !~ '^[1-9][0-9]{0,18}$' "
				"LIMIT 1) END FROM (SELECT $2::jsonb AS d, $1 AS s) x", 2, t, v, NULL, SPI_OK_SELECT);
	bad = wi_spi_first_text();
	if (bad != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("the list of installations is unusable: %s", bad)));
	wi_spi_exec("INSERT INTO webhook_inbox.tenants AS t (source_id, tenant, discovered_by) "
				"SELECT DISTINCT $1, i ->> 'id', 'list' FROM jsonb_array_elements($2::jsonb) i ORDER BY 2 "
				"ON CONFLICT (source_id, tenant) DO UPDATE SET last_seen = now()",
				2, t, v, NULL, SPI_OK_INSERT);
	d->listed += (int) SPI_processed;
}

/*
 * Lists a GitHub App source's installations (GET /app/installations, as
 * the app: its JWT; per_page 100, later pages by the Link header) into
 * webhook_inbox.tenants, so that an installation is swept even when every
 * one of its webhooks was lost.  Returns how many were listed, or -1 when
 * source_id is no GitHub App; *error says why a listing stopped short.
 * Removed installations are not listed (GitHub does not); a suspended one
 * is, and its token request flags it when it is swept.
 */
int
wi_github_discover(const WiSteps *steps, int32 source_id, char **error)
{
	GhDiscovery d;
	char	   *url;
	char	   *err;
	int			pages = 0;

	memset(&d, 0, sizeof(d));
	d.source_id = source_id;
	*error = NULL;
	if (wi_step_run(steps, gh_load_step, &d) != NULL || !d.app)
		return -1;
	if ((err = wi_step_run(steps, gh_jwt_step, &d)) != NULL)
	{
		*error = psprintf("tenant_credentials: %s", err);
		return 0;
	}
	url = psprintf("%s/app/installations?per_page=100", d.src->api_base);
	while (url != NULL && *error == NULL)
	{
		WiHttpRequest req;
		WiRate	   *r = wi_rate_for(source_id);
		WiPace		pace;

		if (++pages > GH_MAX_INSTALLATION_PAGES)
		{
			*error = psprintf("more than %d pages", GH_MAX_INSTALLATION_PAGES);
			break;
		}
		wi_http_init_request(&req, url, d.auth, source_id, d.src->api_base, NULL);
		/* the app's own request (its JWT), paced as the app's own unit */
		wi_request_pace(&pace, &wi_adapter_github, d.src, "", url);
		if ((*error = wi_rate_list_page(steps, r, &pace, &req, "listing installations")) != NULL)
			break;
		d.body = req.body.data;
		if ((err = wi_step_run(steps, gh_page_step, &d)) != NULL)
		{
			*error = psprintf("reading a page of installations failed: %s", err);
			break;
		}
		url = req.link_next ? pstrdup(req.link_next) : NULL;
	}
	explicit_bzero(d.auth, strlen(d.auth));
	return d.listed;
}

typedef struct GhApps
{
	int32	   *ids;
	int			n;
} GhApps;

static void
gh_apps_step(void *arg)
{
	GhApps	   *a = (GhApps *) arg;

	wi_spi_exec("SELECT s.id FROM webhook_inbox.sources s WHERE s.kind = 'github' AND s.enabled "
				"AND s.api_base IS NOT NULL AND s.flagged IS NULL AND s.settings ? 'github_app_id' "
				"ORDER BY s.id", 0, NULL, NULL, NULL, SPI_OK_SELECT);
	a->n = (int) SPI_processed;
	a->ids = MemoryContextAlloc(wi_step_cxt(), sizeof(int32) * Max(a->n, 1));
	for (int i = 0; i < a->n; i++)
	{
		bool		isnull;

		a->ids[i] = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
	}
}

/* In the worker, with the other tenants lists: every GitHub App's installations. */
void
wi_github_discover_due(const WiSteps *steps)
{
	GhApps		a = {NULL, 0};

	if (wi_step_run(steps, gh_apps_step, &a) != NULL)
		return;
	for (int i = 0; i < a.n && !wi_steps_stopping(steps); i++)
	{
		char	   *error;

		if (GetCurrentTimestamp() < wi_rate_for(a.ids[i])->not_before)
			continue;
		(void) wi_github_discover(steps, a.ids[i], &error);
		if (error != NULL)
			ereport(LOG,
					(errmsg("webhook_inbox: listing the installations of source %d stopped: %s",
							a.ids[i], error)));
	}
}

/*
 * GitHub meters an installation's token (and a plain token alike):
 * primary, 5,000 requests an hour at least (github/docs
 * primary-rate-limit-github-app-installations.md); secondary, 900 points a
 * minute per REST endpoint, a GET costing 1, and 100 requests at once
 * (docs "Rate limits for the REST API").  Each is a bucket that may go
 * burst at once and refills so that no window of its length ever holds
 * more than the limit: 1,000 at once and 4,000 over the hour, 100 at once
 * and 800 over the minute.  The endpoint is the path with its numbers as
 * placeholders (/repos/o/r/issues/{n}).  The 100 at once are more than
 * fetch_concurrency's maximum.
 */
static void
github_pace(const WiSource *src, const char *path, WiPace *out, bool *tenant_unit)
{
	StringInfoData e;

	(void) src;
	out->units[0].rate = (5000.0 - 1000.0) / 3600.0;
	out->units[0].burst = 1000;
	initStringInfo(&e);
	for (const char *p = path; *p != '\0' && *p != '?'; p++)
	{
		if (*p >= '0' && *p <= '9' && (p == path || p[-1] == '/'))
		{
			appendStringInfoString(&e, "{n}");
			while (p[1] >= '0' && p[1] <= '9')
				p++;
		}
		else
			appendStringInfoChar(&e, *p);
	}
	strlcpy(out->units[1].key, e.data, WI_PACE_KEY_LEN);
	out->units[1].rate = (900.0 - 100.0) / 60.0;
	out->units[1].burst = 100;
	*tenant_unit = true;
}

/*
 * What a GitHub source cannot see: the repositories of an App installation
 * that was deleted or suspended, or that lost a repository (its reads then
 * answer 404 for objects that still exist).
 */
static const WiHorizon github_horizons[] = {
	{"*", WI_HORIZON_TENANT, 0, NULL, NULL,
	"A GitHub App installation that was deleted, suspended or lost the repository: its reads answer 404 for issues that still exist."},
	{NULL}
};

const WiAdapter wi_adapter_github = {
	.kind = "github",
	.type_map = github_type_map,
	.object_url = github_object_url,
	.list_url = github_list_url,
	.auth_header = github_auth_header,
	.pace = github_pace,
	.horizons = github_horizons,
};
