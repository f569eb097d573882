/*
 * shopify_api.c
 *		Shopify's Admin API for orders: the GraphQL endpoint
 *		POST /admin/api/{version}/graphql.json (shopify_graphql.c), and the
 *		legacy REST API, as its documentation describes
 *		it: GET /admin/api/{version}/orders/{id}.json and
 *		GET /admin/api/{version}/orders.json with its query parameters and
 *		cursor pagination (Link header with page_info, rel="next" and
 *		rel="previous").
 *
 * The list's default is status=open (cancelled orders need status=cancelled
 * or any); deleted orders are gone from lists and answer 404.  A page_info
 * request takes only limit (and fields) besides it.  Shopify ignores query
 * parameters it does not know; this simulator answers them 400 instead
 * (with Shopify's {"errors":…} shape) so that a client sending one shows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>

#include "api_int.h"

static const char *const order_params[] = {
	"attribution_app_id", "created_at_max", "created_at_min", "fields", "financial_status",
	"fulfillment_status", "ids", "limit", "page_info", "processed_at_max", "processed_at_min",
	"since_id", "status", "updated_at_max", "updated_at_min", NULL
};
static const char *const order_implemented[] = {
	"limit", "page_info", "since_id", "status", "updated_at_max", "updated_at_min", NULL
};

static void
shop_error(struct evhttp_request *req, int code, const char *param, const char *message)
{
	sbuf		b;

	sb_init(&b);
	if (param)
	{
		sb_puts(&b, "{\"errors\":{");
		sb_json_str(&b, param);
		sb_puts(&b, ":");
		sb_json_str(&b, message);
		sb_puts(&b, "}}");
	}
	else
	{
		sb_puts(&b, "{\"errors\":");
		sb_json_str(&b, message);
		sb_putc(&b, '}');
	}
	api_reply(req, code, b.data);
	sb_free(&b);
}

typedef struct order_filter
{
	int64_t		min;			/* updated_at >= min */
	int64_t		max;			/* updated_at <= max */
	int			status;			/* 0 open, 1 cancelled, 2 closed, 3 any */
	char		since_id[SIM_ID_LEN];	/* id > since_id, or "" */
} order_filter;

static int
order_visible(const sim_model *m, long k, const order_filter *f)
{
	const sim_object *o = &m->objs[k];
	int			cancelled = strcmp(obj_status_name(o), "voided") == 0;

	if (!o->exists || o->deleted || o->updated_at < f->min || o->updated_at > f->max)
		return 0;
	if (f->since_id[0] && id_cmp(o->id, f->since_id) <= 0)
		return 0;
	switch (f->status)
	{
		case 0:
			return !cancelled;
		case 1:
			return cancelled;
		case 2:
			return 0;			/* no order is closed (archived) here */
		default:
			return 1;
	}
}

/* page_info: "<dir>.<min>.<max>.<status>.<since_id>.<cursor id>", dir n or p. */
static void
link_to(sim_api *api, sbuf *link, const char *path, long limit, const order_filter *f,
		char dir, const char *cursor, const char *rel)
{
	if (link->len)
		sb_puts(link, ", ");
	sb_printf(link, "<http://%s:%d%s?limit=%ld&page_info=%c.%lld.%lld.%d.%s.%s>; rel=\"%s\"",
			  api->host, api->port, path, limit, dir, (long long) f->min, (long long) f->max,
			  f->status, f->since_id[0] ? f->since_id : "0", cursor, rel);
}

static int
parse_page_info(const char *s, order_filter *f, char *dir, char *cursor, size_t cursor_len)
{
	long long	mn,
				mx;
	int			st,
				used = 0;
	char		since[SIM_ID_LEN],
				cur[SIM_ID_LEN];

	if (sscanf(s, "%c.%lld.%lld.%d.%40[0-9].%40[0-9]%n", dir, &mn, &mx, &st, since, cur, &used) != 6 ||
		s[used] != '\0' || (*dir != 'n' && *dir != 'p') || st < 0 || st > 3)
		return -1;
	f->min = mn;
	f->max = mx;
	f->status = st;
	snprintf(f->since_id, sizeof(f->since_id), "%s", strcmp(since, "0") == 0 ? "" : since);
	snprintf(cursor, cursor_len, "%s", cur);
	return 0;
}

static void
handle_list(sim_api *api, struct evhttp_request *req, const char *path, sim_params *ps)
{
	sim_model  *m = api->model;
	order_filter f;
	const char *v;
	char		dir = 'n',
				cursor[SIM_ID_LEN] = "";
	int64_t		lim = 50,
				t;
	long		i,
				got = 0,
			   *page,
				start;
	int			more_after = 0,
				more_before = 0;
	sbuf		b,
				link;

	memset(&f, 0, sizeof(f));
	f.min = INT64_MIN;
	f.max = INT64_MAX;
	for (i = 0; i < ps->n; i++)
	{
		if (!params_name_in(order_params, ps->p[i].name))
		{
			shop_error(req, 400, ps->p[i].name,
					   "unknown parameter (Shopify ignores it; webhook-sim refuses it)");
			return;
		}
		if (!params_name_in(order_implemented, ps->p[i].name))
		{
			shop_error(req, 400, ps->p[i].name, "parameter not modelled by webhook-sim");
			return;
		}
	}
	if ((v = params_get(ps, "limit")) != NULL && parse_int64(v, 1, 250, &lim) != 0)
	{
		shop_error(req, 400, "limit", "must be between 1 and 250");
		return;
	}
	if ((v = params_get(ps, "page_info")) != NULL)
	{
		for (i = 0; i < ps->n; i++)
			if (strcmp(ps->p[i].name, "limit") != 0 && strcmp(ps->p[i].name, "page_info") != 0)
			{
				shop_error(req, 400, "page_info",
						   "page_info cannot be combined with parameters other than limit and fields");
				return;
			}
		if (parse_page_info(v, &f, &dir, cursor, sizeof(cursor)) != 0)
		{
			shop_error(req, 400, "page_info", "Invalid value.");
			return;
		}
	}
	else
	{
		if ((v = params_get(ps, "updated_at_min")) != NULL && parse_iso_time(v, &f.min) != 0)
		{
			shop_error(req, 400, "updated_at_min", "must be an ISO 8601 time");
			return;
		}
		if ((v = params_get(ps, "updated_at_max")) != NULL && parse_iso_time(v, &f.max) != 0)
		{
			shop_error(req, 400, "updated_at_max", "must be an ISO 8601 time");
			return;
		}
		if ((v = params_get(ps, "since_id")) != NULL)
		{
			if (parse_int64(v, 0, INT64_MAX, &t) != 0)
			{
				shop_error(req, 400, "since_id", "must be an integer");
				return;
			}
			snprintf(f.since_id, sizeof(f.since_id), "%lld", (long long) t);
		}
		if ((v = params_get(ps, "status")) != NULL)
		{
			f.status = strcmp(v, "open") == 0 ? 0 : strcmp(v, "cancelled") == 0 ? 1 :
				strcmp(v, "closed") == 0 ? 2 : strcmp(v, "any") == 0 ? 3 : -1;
			if (f.status < 0)
			{
				shop_error(req, 400, "status", "must be one of open, closed, cancelled, any");
				return;
			}
		}
	}

	/* orders by id ascending; a cursor is the id at the page's edge */
	start = 0;
	if (cursor[0])
	{
		start = m->nby_id;
		for (i = 0; i < m->nby_id; i++)
			if (id_cmp(m->objs[m->by_id[i]].id, cursor) >= 0)
			{
				start = i;
				break;
			}
	}
	page = xcalloc((size_t) lim, sizeof(long));
	if (dir == 'n')
	{
		if (cursor[0] && start < m->nby_id && strcmp(m->objs[m->by_id[start]].id, cursor) == 0)
			start++;
		for (i = 0; i < start && !more_before; i++)
			more_before = order_visible(m, m->by_id[i], &f);
		for (i = start; i < m->nby_id; i++)
		{
			if (!order_visible(m, m->by_id[i], &f))
				continue;
			if (got == lim)
			{
				more_after = 1;
				break;
			}
			page[got++] = m->by_id[i];
		}
	}
	else
	{
		for (i = start - 1; i >= 0; i--)
		{
			if (!order_visible(m, m->by_id[i], &f))
				continue;
			if (got == lim)
			{
				more_before = 1;
				break;
			}
			page[got++] = m->by_id[i];
		}
		for (i = 0; i < got / 2; i++)
		{
			long		x = page[i];

			page[i] = page[got - 1 - i];
			page[got - 1 - i] = x;
		}
		for (i = start; i < m->nby_id && !more_after; i++)
			more_after = order_visible(m, m->by_id[i], &f);
	}
	sb_init(&b);
	sb_init(&link);
	sb_puts(&b, "{\"orders\":[");
	for (i = 0; i < got; i++)
	{
		if (i)
			sb_putc(&b, ',');
		render_object(m, &b, &m->objs[page[i]]);
	}
	sb_puts(&b, "]}");
	if (got > 0 && more_before)
		link_to(api, &link, path, (long) lim, &f, 'p', m->objs[page[0]].id, "previous");
	if (got > 0 && more_after)
		link_to(api, &link, path, (long) lim, &f, 'n', m->objs[page[got - 1]].id, "next");
	if (link.len)
		evhttp_add_header(evhttp_request_get_output_headers(req), "Link", link.data);
	api_reply(req, 200, b.data);
	sb_free(&b);
	sb_free(&link);
	free(page);
}

void
shopify_handle(sim_api *api, struct evhttp_request *req, const char *path, const char *query)
{
	const char *p;
	size_t		n;
	sim_params	ps;

	p = strncmp(path, "/admin/api/", 11) == 0 ? strchr(path + 11, '/') : NULL;
	if (p && strcmp(p, "/graphql.json") == 0)
	{
		char	   *version = xstrndup(path + 11, (size_t) (p - (path + 11)));

		if (evhttp_request_get_command(req) != EVHTTP_REQ_POST)
			shop_error(req, 405, NULL, "Method Not Allowed");
		else
			shopify_graphql_handle(api, req, version);
		free(version);
		return;
	}
	if (evhttp_request_get_command(req) != EVHTTP_REQ_GET)
	{
		shop_error(req, 405, NULL, "Method Not Allowed");
		return;
	}
	if (params_parse(query, query ? strlen(query) : 0, &ps) != 0)
	{
		shop_error(req, 400, NULL, "Invalid query string");
		return;
	}
	p = strncmp(path, "/admin/api/", 11) == 0 ? strchr(path + 11, '/') : NULL;
	if (p && strcmp(p, "/orders.json") == 0)
		handle_list(api, req, path, &ps);
	else if (p && strncmp(p, "/orders/", 8) == 0 && (n = strlen(p)) > 13 &&
			 strcmp(p + n - 5, ".json") == 0 && strchr(p + 8, '/') == NULL)
	{
		char	   *id = xstrndup(p + 8, n - 8 - 5);
		long		k = model_find_object(api->model, OT_ORDER, id);
		int			i;

		for (i = 0; i < ps.n; i++)
			if (strcmp(ps.p[i].name, "fields") != 0)
				break;
		if (i < ps.n)
			shop_error(req, 400, ps.p[i].name, "unknown parameter (Shopify ignores it; webhook-sim refuses it)");
		else if (k < 0 || api->model->objs[k].deleted)
			shop_error(req, 404, NULL, "Not Found");
		else
		{
			sbuf		b;

			sb_init(&b);
			sb_puts(&b, "{\"order\":");
			render_object(api->model, &b, &api->model->objs[k]);
			sb_putc(&b, '}');
			api_reply(req, 200, b.data);
			sb_free(&b);
		}
		free(id);
	}
	else
		shop_error(req, 404, NULL, "Not Found");
	params_free(&ps);
}
