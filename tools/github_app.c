/*
 * github_app.c
 *		GitHub as a GitHub App sees it, strictly, for webhook-sim: the app
 *		authenticates with a JWT it signs with its private key, exchanges it
 *		for an installation's access token, and reads a repository only with
 *		the token of an installation the repository was granted to.
 *
 * The contract (GitHub's docs "Generating a JSON Web Token (JWT) for a
 * GitHub App", "Generating an installation access token", and
 * @octokit/openapi for the shapes):
 *   - JWT: RS256 over header.claims with the app's key; iat an integer not
 *     in the future (60 s of clock skew allowed), exp an integer in the
 *     future and at most 10 minutes after iat, iss the app id (integer or
 *     string) or the client id.  Anything else is 401 with GitHub's message.
 *   - POST /app/installations/{id}/access_tokens (JWT) → 201 {token,
 *     expires_at, permissions, repository_selection}; 403 "This installation
 *     has been suspended"; 404 for an installation that was removed or
 *     never was.  Tokens expire (--github-token-ttl, an hour by default);
 *     after that a read with one is 401 Bad credentials.
 *   - GET /app/installations (JWT; per_page, page, since, outdated; Link
 *     pages) → [installation]; removed installations are not listed.
 *   - GET /installation/repositories (installation token; per_page, page)
 *     → {total_count, repositories, repository_selection}.
 *   - GET /repos/{owner}/{repo}/... with an installation token: 401 for an
 *     unknown or expired token or a removed installation, 403 for a
 *     suspended one, 404 for a repository not granted to it.
 * /_sim/github/installations[/{id}] shows the installations and (POST
 * state=active|suspended|removed) changes one, for tests.  Webhooks of a
 * github source carry the installation granted the repository, as
 * installation.id (how a GitHub App tells its installations apart).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "github_app_int.h"
#include "json.h"

static const char *const state_names[] = {"active", "suspended", "removed"};

/* ---------- answers ---------- */

static void
gh_reply_error(struct evhttp_request *req, int code, const char *message, const char *docs)
{
	api_github_error(req, code, message, docs);
}

/* ---------- the JWT ---------- */

/* base64url (padding optional) into a malloc'd buffer; NULL if malformed */
static unsigned char *
b64url_decode(const char *s, size_t len, size_t *outlen)
{
	unsigned char *out = xmalloc(len * 3 / 4 + 3);
	unsigned int acc = 0;
	int			bits = 0;
	size_t		n = 0;

	while (len > 0 && s[len - 1] == '=')
		len--;
	for (size_t i = 0; i < len; i++)
	{
		char		c = s[i];
		int			v = c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26 :
			c >= '0' && c <= '9' ? c - '0' + 52 : c == '-' ? 62 : c == '_' ? 63 : -1;

		if (v < 0)
		{
			free(out);
			return NULL;
		}
		acc = (acc << 6) | (unsigned int) v;
		bits += 6;
		if (bits >= 8)
		{
			bits -= 8;
			out[n++] = (unsigned char) (acc >> bits);
		}
	}
	if (bits >= 6)
	{
		free(out);
		return NULL;
	}
	*outlen = n;
	return out;
}

/* an integer claim: a JSON number without a fraction */
static int
int_claim(const jv *v, int64_t *out)
{
	if (v == NULL || v->type != JV_NUM || strpbrk(v->str, ".eE") != NULL)
		return -1;
	return parse_int64(v->str, INT64_MIN / 2, INT64_MAX / 2, out);
}

/*
 * Checks the request's Authorization: Bearer JWT; answers 401 with GitHub's
 * message and returns -1 when it is not the app's, valid now.
 */
static int
check_jwt(gh_app *app, struct evhttp_request *req)
{
	const char *auth = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
	const char *jwt,
			   *dot1,
			   *dot2;
	unsigned char *hdr = NULL,
			   *cl = NULL,
			   *sig = NULL;
	size_t		hlen,
				clen,
				slen;
	jv		   *h = NULL,
			   *c = NULL;
	const char *msg = NULL;
	const jv   *iss;
	int64_t		iat,
				exp,
				now = now_epoch();
	char		errbuf[64];
	EVP_MD_CTX *md = NULL;

	if (auth == NULL)
	{
		gh_reply_error(req, 401, "Requires authentication", GH_DOCS_APPS);
		app->jwt_refused++;
		return -1;
	}
	/* the scheme is case-insensitive (RFC 9110, 11.1): @octokit sends "bearer" */
	jwt = strncasecmp(auth, "Bearer ", 7) == 0 ? auth + 7 : NULL;
	dot1 = jwt ? strchr(jwt, '.') : NULL;
	dot2 = dot1 ? strchr(dot1 + 1, '.') : NULL;
	if (dot2 == NULL || strchr(dot2 + 1, '.') != NULL ||
		(hdr = b64url_decode(jwt, (size_t) (dot1 - jwt), &hlen)) == NULL ||
		(cl = b64url_decode(dot1 + 1, (size_t) (dot2 - dot1 - 1), &clen)) == NULL ||
		(sig = b64url_decode(dot2 + 1, strlen(dot2 + 1), &slen)) == NULL ||
		(h = jv_parse((char *) hdr, hlen, errbuf, sizeof(errbuf))) == NULL ||
		(c = jv_parse((char *) cl, clen, errbuf, sizeof(errbuf))) == NULL ||
		h->type != JV_OBJ || c->type != JV_OBJ)
		msg = "A JSON web token could not be decoded";
	else if (jv_string(jv_get(h, "alg")) == NULL || strcmp(jv_string(jv_get(h, "alg")), "RS256") != 0)
		msg = "A JSON web token could not be decoded";
	else
	{
		/* the signature before any claim is believed */
		md = EVP_MD_CTX_new();
		if (md == NULL || EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, app->key) != 1 ||
			EVP_DigestVerify(md, sig, slen, (const unsigned char *) jwt, (size_t) (dot2 - jwt)) != 1)
			msg = "A JSON web token could not be decoded";
	}
	if (msg == NULL && int_claim(jv_get(c, "iat"), &iat) != 0)
		msg = "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued";
	else if (msg == NULL && iat > now + GH_SKEW_S)
		msg = "'Issued at' claim ('iat') must be an Integer representing a time in the past";
	else if (msg == NULL && (int_claim(jv_get(c, "exp"), &exp) != 0 || exp <= now))
		msg = "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires";
	else if (msg == NULL && exp > iat + GH_MAX_JWT_S)
		msg = "'Expiration time' claim ('exp') is too far in the future";
	else if (msg == NULL)
	{
		const char *t;

		iss = jv_get(c, "iss");
		t = iss == NULL ? NULL : iss->type == JV_STR || iss->type == JV_NUM ? iss->str : NULL;
		if (t == NULL || !(strcmp(t, app->app_id) == 0 ||
						   (iss->type == JV_STR && app->client_id && strcmp(t, app->client_id) == 0)))
			msg = "'Issuer' claim ('iss') must be the app's ID or client ID";
	}
	EVP_MD_CTX_free(md);
	jv_free(h);
	jv_free(c);
	free(hdr);
	free(cl);
	free(sig);
	if (msg != NULL)
	{
		gh_reply_error(req, 401, msg, GH_DOCS_APPS);
		app->jwt_refused++;
		return -1;
	}
	return 0;
}

/* ---------- installation tokens ---------- */

static gh_installation *
find_installation(gh_app *app, const char *s)
{
	int64_t		id;

	if (parse_int64(s, 1, INT64_MAX, &id) != 0)
		return NULL;
	for (int i = 0; i < app->ninst; i++)
		if (app->inst[i].id == id)
			return &app->inst[i];
	return NULL;
}

/*
 * GitHub's primary rate limit, per installation (--github-rate-limit):
 * every request made with one of its tokens counts in the current window;
 * each answer says x-ratelimit-limit, -remaining, -used, -reset (epoch
 * seconds) and -resource, and once none remain the request is 403 "API
 * rate limit exceeded for installation ID N." with remaining 0 until the
 * reset ("Rate limits for the REST API").
 */
static int
rate_allow(gh_app *app, gh_installation *in, struct evhttp_request *req)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	int64_t		now = now_epoch();
	char		v[32];
	int			ok;

	if (in->window_start == 0 || now >= in->window_start + app->rate_window)
	{
		in->window_start = now;
		in->used = 0;
	}
	ok = in->used < app->rate_limit;
	if (ok)
		in->used++;
	snprintf(v, sizeof(v), "%d", app->rate_limit);
	evhttp_add_header(h, "x-ratelimit-limit", v);
	snprintf(v, sizeof(v), "%ld", (long) app->rate_limit - in->used);
	evhttp_add_header(h, "x-ratelimit-remaining", v);
	snprintf(v, sizeof(v), "%ld", in->used);
	evhttp_add_header(h, "x-ratelimit-used", v);
	snprintf(v, sizeof(v), "%lld", (long long) (in->window_start + app->rate_window));
	evhttp_add_header(h, "x-ratelimit-reset", v);
	evhttp_add_header(h, "x-ratelimit-resource", "core");
	if (!ok)
	{
		char		msg[96];

		in->rate_limited++;
		snprintf(msg, sizeof(msg), "API rate limit exceeded for installation ID %lld.", (long long) in->id);
		gh_reply_error(req, 403, msg,
					   "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api");
	}
	return ok;
}

/*
 * The installation of the request's token (Authorization: Bearer or
 * token), or NULL after answering 401/403 as GitHub does.
 */
static gh_installation *
token_installation(gh_app *app, struct evhttp_request *req)
{
	const char *auth = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
	const char *t = auth == NULL ? NULL : strncasecmp(auth, "Bearer ", 7) == 0 ? auth + 7 :
		strncasecmp(auth, "token ", 6) == 0 ? auth + 6 : NULL;
	int64_t		now = now_epoch();

	for (long i = 0; t != NULL && i < app->ntokens; i++)
	{
		gh_token   *k = &app->tokens[i];
		gh_installation *in = &app->inst[k->inst];

		if (strcmp(k->token, t) != 0)
			continue;
		if (k->expires_at <= now || in->state == GH_REMOVED)
			break;
		if (in->state == GH_SUSPENDED)
		{
			gh_reply_error(req, 403, "This installation has been suspended", GH_DOCS_APPS);
			return NULL;
		}
		if (app->rate_limit > 0 && !rate_allow(app, in, req))
			return NULL;
		return in;
	}
	gh_reply_error(req, 401, "Bad credentials", "https://docs.github.com/rest");
	return NULL;
}

/* POST /app/installations/{id}/access_tokens */
static void
create_token(sim_api *api, gh_app *app, struct evhttp_request *req, const char *idtext)
{
	gh_installation *in = find_installation(app, idtext);
	size_t		blen = 0;
	char	   *body = api_request_body(req, &blen);
	gh_token   *k;
	char		exp[32];
	sbuf		b;

	if (check_jwt(app, req) != 0)
		goto done;
	if (in == NULL || in->state == GH_REMOVED)
	{
		gh_reply_error(req, 404, "Not Found", GH_DOCS_TOKEN);
		goto done;
	}
	if (in->state == GH_SUSPENDED)
	{
		gh_reply_error(req, 403, "This installation has been suspended", GH_DOCS_TOKEN);
		goto done;
	}
	if (blen > 0)
	{
		char		errbuf[64];
		jv		   *v = jv_parse(body, blen, errbuf, sizeof(errbuf));
		const char *bad = NULL;

		if (v == NULL || v->type != JV_OBJ)
		{
			jv_free(v);
			gh_reply_error(req, 400, "Problems parsing JSON", GH_DOCS_TOKEN);
			goto done;
		}
		for (size_t i = 0; i < v->n && bad == NULL; i++)
			if (strcmp(v->keys[i], "repositories") != 0 && strcmp(v->keys[i], "repository_ids") != 0 &&
				strcmp(v->keys[i], "permissions") != 0)
				bad = v->keys[i];
		if (bad != NULL)
		{
			char		msg[200];

			snprintf(msg, sizeof(msg), "Invalid request.\n\n\"%.100s\" is not a permitted key.", bad);
			jv_free(v);
			gh_reply_error(req, 422, msg, GH_DOCS_TOKEN);
			goto done;
		}
		jv_free(v);
	}
	app->tokens = xrealloc(app->tokens, (size_t) (app->ntokens + 1) * sizeof(gh_token));
	k = &app->tokens[app->ntokens++];
	memcpy(k->token, "ghs_", 4);
	rng_token(&app->rng, k->token + 4, 36);
	k->inst = (int) (in - app->inst);
	k->expires_at = now_epoch() + app->token_ttl;
	in->tokens++;
	iso_time(k->expires_at, 1, exp, sizeof(exp));
	sb_init(&b);
	sb_printf(&b, "{\"token\":\"%s\",\"expires_at\":\"%s\","
			  "\"permissions\":{\"issues\":\"read\",\"pull_requests\":\"read\",\"metadata\":\"read\"},"
			  "\"repository_selection\":\"selected\"}", k->token, exp);
	api_reply(req, 201, b.data);
	sb_free(&b);
done:
	free(body);
	(void) api;
}

/* ---------- lists ---------- */

static void
render_user(sim_api *api, sbuf *b, const char *login, int64_t id, const char *type)
{
	sb_printf(b, "{\"login\":\"%s\",\"id\":%lld,\"node_id\":\"MDEyOk9yZ2FuaXphdGlvbjEyMzQ1Ng==\","
			  "\"avatar_url\":\"https://avatars.githubusercontent.com/u/%lld?v=4\",\"gravatar_id\":\"\","
			  "\"url\":\"http://%s:%d/users/%s\",\"html_url\":\"https://github.com/%s\","
			  "\"followers_url\":\"http://%s:%d/users/%s/followers\","
			  "\"following_url\":\"http://%s:%d/users/%s/following{/other_user}\","
			  "\"gists_url\":\"http://%s:%d/users/%s/gists{/gist_id}\","
			  "\"starred_url\":\"http://%s:%d/users/%s/starred{/owner}{/repo}\","
			  "\"subscriptions_url\":\"http://%s:%d/users/%s/subscriptions\","
			  "\"organizations_url\":\"http://%s:%d/users/%s/orgs\","
			  "\"repos_url\":\"http://%s:%d/users/%s/repos\","
			  "\"events_url\":\"http://%s:%d/users/%s/events{/privacy}\","
			  "\"received_events_url\":\"http://%s:%d/users/%s/received_events\","
			  "\"type\":\"%s\",\"site_admin\":false}",
			  login, (long long) id, (long long) id, api->host, api->port, login, login,
			  api->host, api->port, login, api->host, api->port, login, api->host, api->port, login,
			  api->host, api->port, login, api->host, api->port, login, api->host, api->port, login,
			  api->host, api->port, login, api->host, api->port, login, api->host, api->port, login, type);
}

/* the owner of the installation's first repository names its account */
static void
account_login(const gh_installation *in, char *out, size_t outlen)
{
	const char *sl = strchr(in->repos[0], '/');

	snprintf(out, outlen, "%.*s", (int) (sl - in->repos[0]), in->repos[0]);
}

static void
render_installation(sim_api *api, gh_app *app, sbuf *b, const gh_installation *in)
{
	char		login[128],
				created[32],
				susp[32];

	account_login(in, login, sizeof(login));
	iso_time(in->created, 1, created, sizeof(created));
	sb_printf(b, "{\"id\":%lld,\"account\":", (long long) in->id);
	render_user(api, b, login, 1000 + in->id, "Organization");
	sb_printf(b, ",\"repository_selection\":\"selected\","
			  "\"access_tokens_url\":\"http://%s:%d/app/installations/%lld/access_tokens\","
			  "\"repositories_url\":\"http://%s:%d/installation/repositories\","
			  "\"html_url\":\"https://github.com/organizations/%s/settings/installations/%lld\","
			  "\"app_id\":%s,\"client_id\":", api->host, api->port, (long long) in->id,
			  api->host, api->port, login, (long long) in->id, app->app_id);
	if (app->client_id)
		sb_json_str(b, app->client_id);
	else
		sb_puts(b, "null");
	sb_printf(b, ",\"app_slug\":\"webhook-sim-app\",\"target_id\":%lld,\"target_type\":\"Organization\","
			  "\"permissions\":{\"issues\":\"read\",\"pull_requests\":\"read\",\"metadata\":\"read\"},"
			  "\"events\":[\"issues\",\"pull_request\"],\"created_at\":\"%s\",\"updated_at\":\"%s\","
			  "\"single_file_name\":null,\"has_multiple_single_files\":false,\"single_file_paths\":[],"
			  "\"suspended_by\":", (long long) (1000 + in->id), created, created);
	if (in->state == GH_SUSPENDED)
	{
		render_user(api, b, "octocat", 583231, "User");
		iso_time(in->suspended_at, 1, susp, sizeof(susp));
		sb_printf(b, ",\"suspended_at\":\"%s\"}", susp);
	}
	else
		sb_puts(b, "null,\"suspended_at\":null}");
}

static void
render_repository(sim_api *api, sbuf *b, const char *full, int64_t id)
{
	const char *sl = strchr(full, '/');
	char		owner[128];
	const char *name = sl + 1;
	static const char *const urls[][2] = {
		{"archive_url", "/{archive_format}{/ref}"}, {"assignees_url", "/assignees{/user}"},
		{"blobs_url", "/git/blobs{/sha}"}, {"branches_url", "/branches{/branch}"},
		{"collaborators_url", "/collaborators{/collaborator}"}, {"comments_url", "/comments{/number}"},
		{"commits_url", "/commits{/sha}"}, {"compare_url", "/compare/{base}...{head}"},
		{"contents_url", "/contents/{+path}"}, {"contributors_url", "/contributors"},
		{"deployments_url", "/deployments"}, {"downloads_url", "/downloads"},
		{"events_url", "/events"}, {"forks_url", "/forks"},
		{"git_commits_url", "/git/commits{/sha}"}, {"git_refs_url", "/git/refs{/sha}"},
		{"git_tags_url", "/git/tags{/sha}"}, {"hooks_url", "/hooks"},
		{"issue_comment_url", "/issues/comments{/number}"}, {"issue_events_url", "/issues/events{/number}"},
		{"issues_url", "/issues{/number}"}, {"keys_url", "/keys{/key_id}"},
		{"labels_url", "/labels{/name}"}, {"languages_url", "/languages"},
		{"merges_url", "/merges"}, {"milestones_url", "/milestones{/number}"},
		{"notifications_url", "/notifications{?since,all,participating}"}, {"pulls_url", "/pulls{/number}"},
		{"releases_url", "/releases{/id}"}, {"stargazers_url", "/stargazers"},
		{"statuses_url", "/statuses/{sha}"}, {"subscribers_url", "/subscribers"},
		{"subscription_url", "/subscription"}, {"tags_url", "/tags"},
		{"teams_url", "/teams"}, {"trees_url", "/git/trees{/sha}"},
	};

	snprintf(owner, sizeof(owner), "%.*s", (int) (sl - full), full);
	sb_printf(b, "{\"id\":%lld,\"node_id\":\"R_kgDO%08lld\",\"name\":", (long long) id, (long long) id);
	sb_json_str(b, name);
	sb_puts(b, ",\"full_name\":");
	sb_json_str(b, full);
	sb_puts(b, ",\"owner\":");
	render_user(api, b, owner, 2000 + id, "Organization");
	sb_printf(b, ",\"private\":true,\"html_url\":\"https://github.com/%s\",\"description\":null,"
			  "\"fork\":false,\"url\":\"http://%s:%d/repos/%s\"", full, api->host, api->port, full);
	for (size_t i = 0; i < sizeof(urls) / sizeof(urls[0]); i++)
		sb_printf(b, ",\"%s\":\"http://%s:%d/repos/%s%s\"", urls[i][0], api->host, api->port, full, urls[i][1]);
	sb_printf(b, ",\"clone_url\":\"https://github.com/%s.git\",\"git_url\":\"git://github.com/%s.git\","
			  "\"ssh_url\":\"git@github.com:%s.git\",\"svn_url\":\"https://github.com/%s\","
			  "\"mirror_url\":null,\"homepage\":null,\"language\":\"C\",\"forks\":0,\"forks_count\":0,"
			  "\"stargazers_count\":0,\"watchers_count\":0,\"watchers\":0,\"size\":100,"
			  "\"default_branch\":\"main\",\"open_issues\":0,\"open_issues_count\":0,\"is_template\":false,"
			  "\"topics\":[],\"has_issues\":true,\"has_projects\":false,\"has_wiki\":false,\"has_pages\":false,"
			  "\"has_downloads\":true,\"has_discussions\":false,\"archived\":false,\"disabled\":false,"
			  "\"visibility\":\"private\",\"license\":null,"
			  "\"pushed_at\":\"2026-01-01T00:00:00Z\",\"created_at\":\"2025-01-01T00:00:00Z\","
			  "\"updated_at\":\"2026-01-01T00:00:00Z\"}", full, full, full, full);
}

/* per_page (1-100, 30) and page (from 1), GitHub's paging; -1 after a 422 */
static int
paging(struct evhttp_request *req, sim_params *ps, const char *const *accepted, int64_t *per_page,
	   int64_t *page)
{
	const char *v;

	*per_page = 30;
	*page = 1;
	for (int i = 0; i < ps->n; i++)
		if (!params_name_in(accepted, ps->p[i].name))
		{
			char		msg[160];

			snprintf(msg, sizeof(msg), "Unknown parameter %.60s (GitHub ignores it; webhook-sim refuses it)",
					 ps->p[i].name);
			gh_reply_error(req, 400, msg, GH_DOCS_APPS);
			return -1;
		}
	if (((v = params_get(ps, "per_page")) != NULL && parse_int64(v, 1, 100, per_page) != 0) ||
		((v = params_get(ps, "page")) != NULL && parse_int64(v, 1, 1000000, page) != 0))
	{
		gh_reply_error(req, 422, "Validation Failed", GH_DOCS_APPS);
		return -1;
	}
	return 0;
}

static void
link_header(sim_api *api, struct evhttp_request *req, const char *path, int64_t per_page, int64_t page,
			int64_t last)
{
	sbuf		l;

	sb_init(&l);
	if (page < last)
		sb_printf(&l, "<http://%s:%d%s?per_page=%lld&page=%lld>; rel=\"next\", "
				  "<http://%s:%d%s?per_page=%lld&page=%lld>; rel=\"last\"",
				  api->host, api->port, path, (long long) per_page, (long long) (page + 1),
				  api->host, api->port, path, (long long) per_page, (long long) last);
	if (page > 1)
		sb_printf(&l, "%s<http://%s:%d%s?per_page=%lld&page=1>; rel=\"first\", "
				  "<http://%s:%d%s?per_page=%lld&page=%lld>; rel=\"prev\"", l.len ? ", " : "",
				  api->host, api->port, path, (long long) per_page,
				  api->host, api->port, path, (long long) per_page, (long long) (page - 1));
	if (l.len)
		evhttp_add_header(evhttp_request_get_output_headers(req), "Link", l.data);
	sb_free(&l);
}

/* GET /app/installations */
static void
list_installations(sim_api *api, gh_app *app, struct evhttp_request *req, sim_params *ps)
{
	static const char *const accepted[] = {"per_page", "page", "since", "outdated", NULL};
	int64_t		per_page,
				page,
				since = INT64_MIN,
				n = 0,
				shown = 0;
	const char *v;
	sbuf		b;

	if (check_jwt(app, req) != 0 || paging(req, ps, accepted, &per_page, &page) != 0)
		return;
	if ((v = params_get(ps, "since")) != NULL && parse_iso_time(v, &since) != 0)
	{
		gh_reply_error(req, 422, "Validation Failed", GH_DOCS_APPS);
		return;
	}
	sb_init(&b);
	sb_putc(&b, '[');
	for (int i = 0; i < app->ninst; i++)
	{
		if (app->inst[i].state == GH_REMOVED || app->inst[i].created < since)
			continue;
		if (n >= (page - 1) * per_page && n < page * per_page)
		{
			if (shown++)
				sb_putc(&b, ',');
			render_installation(api, app, &b, &app->inst[i]);
		}
		n++;
	}
	sb_putc(&b, ']');
	link_header(api, req, "/app/installations", per_page, page, n == 0 ? 1 : (n + per_page - 1) / per_page);
	api_reply(req, 200, b.data);
	sb_free(&b);
}

/* GET /installation/repositories */
static void
list_repositories(sim_api *api, gh_app *app, struct evhttp_request *req, sim_params *ps)
{
	static const char *const accepted[] = {"per_page", "page", NULL};
	gh_installation *in;
	int64_t		per_page,
				page;
	sbuf		b;
	int			shown = 0;

	if (paging(req, ps, accepted, &per_page, &page) != 0 || (in = token_installation(app, req)) == NULL)
		return;
	sb_init(&b);
	sb_printf(&b, "{\"total_count\":%d,\"repository_selection\":\"selected\",\"repositories\":[", in->nrepos);
	for (int64_t k = (page - 1) * per_page; k < in->nrepos && k < page * per_page; k++)
	{
		if (shown++)
			sb_putc(&b, ',');
		render_repository(api, &b, in->repos[k], 5000 + in->id * 100 + k);
	}
	sb_puts(&b, "]}");
	link_header(api, req, "/installation/repositories", per_page, page,
				in->nrepos == 0 ? 1 : (in->nrepos + per_page - 1) / per_page);
	api_reply(req, 200, b.data);
	sb_free(&b);
}

/* ---------- entry points (api_int.h) ---------- */

static void
github_app_handle(sim_api *api, struct evhttp_request *req, const char *path, const char *query)
{
	gh_app	   *app = api->gh_app;
	enum evhttp_cmd_type method = evhttp_request_get_command(req);
	const char *pfx = "/app/installations/";
	sim_params	ps;

	if (app == NULL)
	{
		gh_reply_error(req, 404, "Not Found", "https://docs.github.com/rest");
		return;
	}
	if (params_parse(query, query ? strlen(query) : 0, &ps) != 0)
	{
		gh_reply_error(req, 400, "Problems parsing the query string", GH_DOCS_APPS);
		return;
	}
	if (strncmp(path, pfx, strlen(pfx)) == 0 && method == EVHTTP_REQ_POST)
	{
		const char *id = path + strlen(pfx);
		const char *slash = strchr(id, '/');

		if (slash != NULL && strcmp(slash, "/access_tokens") == 0 && slash > id)
		{
			char	   *idtext = xstrndup(id, (size_t) (slash - id));

			create_token(api, app, req, idtext);
			free(idtext);
		}
		else
			gh_reply_error(req, 404, "Not Found", GH_DOCS_APPS);
	}
	else if (strcmp(path, "/app/installations") == 0 && method == EVHTTP_REQ_GET)
		list_installations(api, app, req, &ps);
	else if (strcmp(path, "/installation/repositories") == 0 && method == EVHTTP_REQ_GET)
		list_repositories(api, app, req, &ps);
	else
		gh_reply_error(req, 404, "Not Found", "https://docs.github.com/rest");
	params_free(&ps);
}

int
github_app_repo_access(sim_api *api, struct evhttp_request *req, const char *repo)
{
	gh_installation *in;

	if (api->gh_app == NULL)
		return 1;
	if ((in = token_installation(api->gh_app, req)) == NULL)
		return 0;
	if (repo == NULL)
		return 1;
	for (int k = 0; k < in->nrepos; k++)
		if (strcmp(in->repos[k], repo) == 0)
			return 1;
	gh_reply_error(req, 404, "Not Found", "https://docs.github.com/rest");
	return 0;
}

/*
 * The installation a model's repository is granted to, as its tenant id
 * ("installation.id" of its webhooks): what /_sim/truth names as the
 * tenant of its issues and pull requests.  NULL without an app, or when no
 * installation that is not removed has it.
 */
const char *
github_app_repo_tenant(sim_api *api, const char *repo)
{
	static char buf[32];
	gh_app	   *app = api->gh_app;

	if (app == NULL)
		return NULL;
	for (int i = 0; i < app->ninst; i++)
		for (int k = 0; k < app->inst[i].nrepos; k++)
			if (app->inst[i].state != GH_REMOVED && strcmp(app->inst[i].repos[k], repo) == 0)
			{
				snprintf(buf, sizeof(buf), "%lld", (long long) app->inst[i].id);
				return buf;
			}
	return NULL;
}

void
github_app_sim(sim_api *api, struct evhttp_request *req, const char *path, const char *query)
{
	gh_app	   *app = api->gh_app;
	const char *pfx = "/_sim/github/installations";
	sbuf		b;

	if (app == NULL || strncmp(path, pfx, strlen(pfx)) != 0)
	{
		api_reply(req, 404, "{\"error\":\"no GitHub App here (--github-app)\"}");
		return;
	}
	path += strlen(pfx);
	if (*path == '/' && evhttp_request_get_command(req) == EVHTTP_REQ_POST)
	{
		gh_installation *in = find_installation(app, path + 1);
		sim_params	ps;
		const char *st;
		int			s = -1;

		if (params_parse(query, query ? strlen(query) : 0, &ps) != 0)
			ps.n = 0;
		st = params_get(&ps, "state");
		for (int i = 0; st && i < 3; i++)
			if (strcmp(st, state_names[i]) == 0)
				s = i;
		if (in == NULL || s < 0)
			api_reply(req, 400, "{\"error\":\"POST /_sim/github/installations/{known id}?state=active|suspended|removed\"}");
		else
		{
			if (s == GH_SUSPENDED && in->state != GH_SUSPENDED)
				in->suspended_at = now_epoch();
			in->state = (enum gh_state) s;
			sb_init(&b);
			sb_printf(&b, "{\"id\":%lld,\"state\":\"%s\"}", (long long) in->id, state_names[s]);
			api_reply(req, 200, b.data);
			sb_free(&b);
		}
		params_free(&ps);
		return;
	}
	if (*path != '\0')
	{
		api_reply(req, 404, "{\"error\":\"GET /_sim/github/installations\"}");
		return;
	}
	sb_init(&b);
	sb_printf(&b, "{\"jwt_refused\":%ld,\"installations\":[", app->jwt_refused);
	for (int i = 0; i < app->ninst; i++)
		sb_printf(&b, "%s{\"id\":%lld,\"state\":\"%s\",\"tokens\":%ld,\"rate_limited\":%ld}", i ? "," : "",
				  (long long) app->inst[i].id, state_names[app->inst[i].state], app->inst[i].tokens,
				  app->inst[i].rate_limited);
	sb_puts(&b, "]}");
	api_reply(req, 200, b.data);
	sb_free(&b);
}

void
api_github_app_event(sim_api *api, sim_event *ev)
{
	gh_app	   *app = api->gh_app;
	const gh_installation *in = NULL;
	const char *repo = api->model->repo;
	char		full[128];
	char		node[64];
	const char *p;
	sbuf		b;

	if (app == NULL || ev->body == NULL || ev->body_len < 2 || ev->body[0] != '{')
		return;
	/* the repository the event's repository member names (model.c writes it last but one) */
	p = strstr(ev->body, ",\"repository\":{");
	p = p ? strstr(p, "\"full_name\":\"") : NULL;
	if (p != NULL)
	{
		size_t		len;

		p += strlen("\"full_name\":\"");
		len = strcspn(p, "\"");
		if (len < sizeof(full))
		{
			memcpy(full, p, len);
			full[len] = '\0';
			repo = full;
		}
	}
	for (int i = 0; i < app->ninst && in == NULL; i++)
		for (int k = 0; k < app->inst[i].nrepos; k++)
			if (app->inst[i].state != GH_REMOVED && strcmp(app->inst[i].repos[k], repo) == 0)
			{
				in = &app->inst[i];
				break;
			}
	if (in == NULL)
		return;
	snprintf(node, sizeof(node), "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9u%lld", (long long) in->id);
	sb_init(&b);
	sb_printf(&b, "{\"installation\":{\"id\":%lld,\"node_id\":\"%s\"}%s", (long long) in->id, node,
			  ev->body[1] == '}' ? "" : ",");
	sb_putn(&b, ev->body + 1, ev->body_len - 1);
	free(ev->body);
	ev->body_len = b.len;
	ev->body = sb_steal(&b);
}

/* ---------- the provider ---------- */

static int
github_app_owns(const char *path)
{
	return strncmp(path, "/app/", 5) == 0 || strncmp(path, "/installation/", 14) == 0;
}

static void
github_app_reply_error(struct evhttp_request *req, int code, const char *message)
{
	gh_reply_error(req, code, message, "https://docs.github.com/rest");
}

/* not counted: the app's own calls are not reads of the provider's objects */
const sim_provider github_app_provider = {
	.name = "github_app",
	.owns = github_app_owns,
	.authorized = api_github_authorized,
	.reply_error = github_app_reply_error,
	.unauthorized = "Bad credentials",
	.handle = github_app_handle,
	.limit = limits_github,
};
