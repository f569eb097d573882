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

#include "credentials.h"
#include "provider.h"

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

const WiAdapter wi_adapter_github = {
	"github", github_type_map, github_object_url, github_list_url, github_auth_header, NULL, 0, NULL, NULL
};
