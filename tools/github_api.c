/*
 * github_api.c
 *		GitHub's REST API for the issues and pull requests of the model's
 *		repositories (--github-repo, several comma-separated),
 *		as @octokit/openapi describes it (api.github.com.json):
 *		GET /repos/{owner}/{repo}/issues, /issues/{issue_number},
 *		/pulls, /pulls/{pull_number}.
 *
 * The contract: the issues list takes state (open by default, closed,
 * all), sort (created by default, updated, comments), direction (desc by
 * default), since (ISO 8601, on updated_at), per_page (1-100, default 30)
 * and page, and pages with a Link header (rel="next", "last", "first",
 * "prev"); pull requests are in it too, with their issue id and a
 * pull_request member.  The pulls list has no since.  Errors are GitHub's
 * {"message":…,"documentation_url":…,"status":"…"}: 404 Not Found, 401 Bad
 * credentials, 422 Validation Failed for a bad value.  GitHub ignores query
 * parameters it does not know; this simulator answers them 400 instead, so
 * that a client sending one shows, and answers 400 too for the documented
 * ones it does not model (milestone, labels, assignee …).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>

#include "api_int.h"

#define GH_DOCS "https://docs.github.com/rest"

static const char *const issue_params[] = {
	"milestone", "state", "assignee", "type", "creator", "mentioned", "issue_field_values",
	"labels", "sort", "direction", "since", "per_page", "page", NULL
};
static const char *const pull_params[] = {
	"state", "head", "base", "sort", "direction", "per_page", "page", NULL
};
static const char *const modelled[] = {
	"state", "sort", "direction", "since", "per_page", "page", NULL
};

static void
gh_error(struct evhttp_request *req, int code, const char *message, const char *field)
{
	sbuf		b;

	sb_init(&b);
	sb_puts(&b, "{\"message\":");
	sb_json_str(&b, message);
	if (field)
	{
		sb_puts(&b, ",\"errors\":[{\"resource\":\"Issue\",\"field\":");
		sb_json_str(&b, field);
		sb_puts(&b, ",\"code\":\"invalid\"}]");
	}
	sb_printf(&b, ",\"documentation_url\":\"%s\",\"status\":\"%d\"}", GH_DOCS, code);
	api_reply(req, code, b.data);
	sb_free(&b);
}

typedef struct gh_query
{
	int			state;			/* 0 open, 1 closed, 2 all */
	int			sort;			/* 0 created, 1 updated, 2 comments */
	int			asc;
	int64_t		since;
	int64_t		per_page;
	int64_t		page;
} gh_query;

static sim_model *sort_m;
static const gh_query *sort_q;

static int
cmp_gh(const void *a, const void *b)
{
	const sim_object *x = &sort_m->objs[*(const long *) a],
			   *y = &sort_m->objs[*(const long *) b];
	int64_t		kx = sort_q->sort == 1 ? x->updated_at : sort_q->sort == 2 ? x->quantity : x->created,
				ky = sort_q->sort == 1 ? y->updated_at : sort_q->sort == 2 ? y->quantity : y->created;
	int			c = kx < ky ? -1 : kx > ky ? 1 : x->number < y->number ? -1 : x->number > y->number;

	return sort_q->asc ? c : -c;
}

/* Parse and check the query; answers the error and returns -1. */
static int
parse_gh_query(struct evhttp_request *req, sim_params *ps, const char *const *accepted,
			   gh_query *q)
{
	const char *v;
	int			i;

	memset(q, 0, sizeof(*q));
	q->since = INT64_MIN;
	q->per_page = 30;
	q->page = 1;
	for (i = 0; i < ps->n; i++)
	{
		char		msg[160];

		if (!params_name_in(accepted, ps->p[i].name))
		{
			snprintf(msg, sizeof(msg), "Unknown parameter %s (GitHub ignores it; webhook-sim refuses it)",
					 ps->p[i].name);
			gh_error(req, 400, msg, NULL);
			return -1;
		}
		if (!params_name_in(modelled, ps->p[i].name))
		{
			snprintf(msg, sizeof(msg), "Parameter %s is not modelled by webhook-sim", ps->p[i].name);
			gh_error(req, 400, msg, NULL);
			return -1;
		}
	}
	if ((v = params_get(ps, "state")) != NULL &&
		(q->state = strcmp(v, "open") == 0 ? 0 : strcmp(v, "closed") == 0 ? 1 :
		 strcmp(v, "all") == 0 ? 2 : -1) < 0)
	{
		gh_error(req, 422, "Validation Failed", "state");
		return -1;
	}
	if ((v = params_get(ps, "sort")) != NULL &&
		(q->sort = strcmp(v, "created") == 0 ? 0 : strcmp(v, "updated") == 0 ? 1 :
		 strcmp(v, "comments") == 0 && accepted == issue_params ? 2 : -1) < 0)
	{
		gh_error(req, 422, "Validation Failed", "sort");
		return -1;
	}
	if ((v = params_get(ps, "direction")) != NULL)
	{
		if (strcmp(v, "asc") != 0 && strcmp(v, "desc") != 0)
		{
			gh_error(req, 422, "Validation Failed", "direction");
			return -1;
		}
		q->asc = strcmp(v, "asc") == 0;
	}
	if ((v = params_get(ps, "since")) != NULL && parse_iso_time(v, &q->since) != 0)
	{
		gh_error(req, 422, "Validation Failed", "since");
		return -1;
	}
	if ((v = params_get(ps, "per_page")) != NULL && parse_int64(v, 1, 100, &q->per_page) != 0)
	{
		gh_error(req, 422, "Validation Failed", "per_page");
		return -1;
	}
	if ((v = params_get(ps, "page")) != NULL && parse_int64(v, 1, 1000000, &q->page) != 0)
	{
		gh_error(req, 422, "Validation Failed", "page");
		return -1;
	}
	return 0;
}

/* The request's query with page=N, for the Link header. */
static void
page_url(sim_api *api, sbuf *b, const char *path, sim_params *ps, int64_t page)
{
	int			i,
				first = 1;

	sb_printf(b, "<http://%s:%d%s?", api->host, api->port, path);
	for (i = 0; i < ps->n; i++)
	{
		if (strcmp(ps->p[i].name, "page") == 0)
			continue;
		sb_printf(b, "%s%s=", first ? "" : "&", ps->p[i].name);
		for (const char *c = ps->p[i].value; *c; c++)
		{
			if ((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
				*c == '-' || *c == '_' || *c == '.' || *c == '~')
				sb_putc(b, *c);
			else
				sb_printf(b, "%%%02X", (unsigned char) *c);
		}
		first = 0;
	}
	sb_printf(b, "%spage=%lld>", first ? "" : "&", (long long) page);
}

static void
handle_list(sim_api *api, struct evhttp_request *req, const char *path, sim_params *ps,
			int pulls, int repo)
{
	sim_model  *m = api->model;
	gh_query	q;
	long	   *sel,
				n = 0,
				k,
				from,
				i;
	int64_t		last;
	sbuf		b,
				link;

	if (parse_gh_query(req, ps, pulls ? pull_params : issue_params, &q) != 0)
		return;
	sel = xcalloc((size_t) m->nobjs + 1, sizeof(long));
	for (k = 0; k < m->nobjs; k++)
	{
		const sim_object *o = &m->objs[k];

		if (!o->exists || (o->type != OT_PULL && (pulls || o->type != OT_ISSUE)) || o->repo != repo)
			continue;
		if ((q.state == 0 && o->status != 0) || (q.state == 1 && o->status != 1))
			continue;
		if (o->updated_at < q.since)
			continue;
		sel[n++] = k;
	}
	sort_m = m;
	sort_q = &q;
	qsort(sel, (size_t) n, sizeof(long), cmp_gh);
	last = n == 0 ? 1 : (n + q.per_page - 1) / q.per_page;
	from = (long) ((q.page - 1) * q.per_page);
	sb_init(&b);
	sb_init(&link);
	sb_putc(&b, '[');
	for (i = from; i < n && i < from + q.per_page; i++)
	{
		if (i > from)
			sb_putc(&b, ',');
		if (pulls)
			render_object(m, &b, &m->objs[sel[i]]);
		else
			render_gh_issue(m, &b, &m->objs[sel[i]]);
	}
	sb_putc(&b, ']');
	if (q.page < last)
	{
		page_url(api, &link, path, ps, q.page + 1);
		sb_puts(&link, "; rel=\"next\", ");
		page_url(api, &link, path, ps, last);
		sb_puts(&link, "; rel=\"last\"");
	}
	if (q.page > 1)
	{
		if (link.len)
			sb_puts(&link, ", ");
		page_url(api, &link, path, ps, 1);
		sb_puts(&link, "; rel=\"first\", ");
		page_url(api, &link, path, ps, q.page - 1);
		sb_puts(&link, "; rel=\"prev\"");
	}
	if (link.len)
		evhttp_add_header(evhttp_request_get_output_headers(req), "Link", link.data);
	api_reply(req, 200, b.data);
	sb_free(&b);
	sb_free(&link);
	free(sel);
}

/* An issue (or pull request) by its number in the repository. */
static long
find_number(const sim_model *m, const char *s, int pulls, int repo)
{
	int64_t		num;
	long		k;

	if (parse_int64(s, 1, INT64_MAX, &num) != 0)
		return -1;
	for (k = 0; k < m->nobjs; k++)
	{
		const sim_object *o = &m->objs[k];

		if (o->exists && o->number == num && o->repo == repo &&
			(o->type == OT_PULL || (!pulls && o->type == OT_ISSUE)))
			return k;
	}
	return -1;
}

static void
github_handle(sim_api *api, struct evhttp_request *req, const char *path, const char *query)
{
	sim_model  *m = api->model;
	size_t		rl = 0;
	int			repo = -1;
	const char *rest = path + strlen("/repos/");
	sim_params	ps;

	if (evhttp_request_get_command(req) != EVHTTP_REQ_GET)
	{
		gh_error(req, 404, "Not Found", NULL);
		return;
	}
	/* the model's repository the path names, if any */
	for (int i = 0; i < m->nrepos && repo < 0; i++)
	{
		rl = strlen(m->repos[i]);
		if (strncmp(rest, m->repos[i], rl) == 0 && rest[rl] == '/')
			repo = i;
	}
	if (repo < 0)
	{
		const char *sl = strchr(rest, '/');
		const char *end = sl ? strchr(sl + 1, '/') : NULL;
		char	   *other;

		if (api->gh_app == NULL || end == NULL)
		{
			/* another repository: 404, once a GitHub App's token passed */
			if (github_app_repo_access(api, req, NULL))
				gh_error(req, 404, "Not Found", NULL);
			return;
		}

		/*
		 * A repository granted to the token's installation that the model
		 * made nothing in: its lists are empty, its numbers 404; one not
		 * granted is 404 (github_app_repo_access answers).
		 */
		other = xstrndup(rest, (size_t) (end - rest));
		if (github_app_repo_access(api, req, other))
		{
			if (strcmp(end, "/issues") == 0 || strcmp(end, "/pulls") == 0)
				api_reply(req, 200, "[]");
			else
				gh_error(req, 404, "Not Found", NULL);
		}
		free(other);
		return;
	}
	/* a GitHub App reads with the token of an installation that has the repository */
	if (!github_app_repo_access(api, req, m->repos[repo]))
		return;
	rest += rl;
	if (params_parse(query, query ? strlen(query) : 0, &ps) != 0)
	{
		gh_error(req, 400, "Problems parsing the query string", NULL);
		return;
	}
	if (strcmp(rest, "/issues") == 0 || strcmp(rest, "/pulls") == 0)
		handle_list(api, req, path, &ps, rest[1] == 'p', repo);
	else if ((strncmp(rest, "/issues/", 8) == 0 || strncmp(rest, "/pulls/", 7) == 0) &&
			 strchr(rest + (rest[1] == 'p' ? 7 : 8), '/') == NULL)
	{
		int			pulls = rest[1] == 'p';
		long		k = find_number(m, rest + (pulls ? 7 : 8), pulls, repo);

		if (ps.n > 0)
			gh_error(req, 400, "Unknown parameter (GitHub ignores it; webhook-sim refuses it)", NULL);
		else if (k < 0)
			gh_error(req, 404, "Not Found", NULL);
		else
		{
			sbuf		b;

			sb_init(&b);
			if (pulls)
				render_object(m, &b, &m->objs[k]);
			else
				render_gh_issue(m, &b, &m->objs[k]);
			api_reply(req, 200, b.data);
			sb_free(&b);
		}
	}
	else
		gh_error(req, 404, "Not Found", NULL);
	params_free(&ps);
}

/* ---------- the provider ---------- */

static int
github_owns(const char *path)
{
	return strncmp(path, "/repos/", 7) == 0;
}

static void
github_reply_error(struct evhttp_request *req, int code, const char *message)
{
	gh_error(req, code, message, NULL);
}

/* Counters: GET of one issue or pull (its number), a list of them. */
static void
github_count(sim_api *api, struct evhttp_request *req, const char *path)
{
	const char *last = strrchr(path, '/');

	(void) req;
	if (strstr(path, "/issues/") || strstr(path, "/pulls/"))
		api_count(&api->fetches, last + 1);
	else if (strcmp(last, "/issues") == 0 || strcmp(last, "/pulls") == 0)
		api->lists++;
}

const sim_provider github_provider = {
	.name = "github",
	.owns = github_owns,
	.authorized = api_github_authorized,
	.reply_error = github_reply_error,
	.unauthorized = "Bad credentials",
	.count = github_count,
	.handle = github_handle,
	.limit = limits_github,
};
