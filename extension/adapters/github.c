/*
 * github.c
 *		GitHub's REST read API for issues and pull requests of the
 *		repository named in the source's settings ("repo": "owner/name").
 *
 * The mirror keys issues by their global id, which the REST API cannot GET
 * directly, so this adapter lists only (GET /repos/{repo}/issues?since=,
 * Link pagination): a tie is quarantined as ambiguous, and sweeps repair
 * from the listed objects, which carry updated_at as their version.
 */
#include "postgres.h"

#include "provider.h"

static const WiTypeMap github_types[] = {
	{"issue", "issues", "$", "$[*]", "$.state", "$.updated_at", false},
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

static char *
github_list_url(const WiSource *src, const WiTypeMap *t, int64 since_epoch, const char *cursor)
{
	if (cursor != NULL)
		return NULL;
	return psprintf("%s/repos/%s/%s?state=all&sort=updated&direction=asc&per_page=100&since=%s",
					src->api_base, src->repo, t->collection, wi_url_escape(wi_iso_time(since_epoch)));
}

static char *
github_auth_header(const WiSource *src)
{
	return src->api_token ? psprintf("Authorization: Bearer %s", src->api_token) : NULL;
}

const WiAdapter wi_adapter_github = {
	"github", github_type_map, github_object_url, github_list_url, github_auth_header
};
