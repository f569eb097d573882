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
#include "json.h"

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

/*
 * Shopify's 60-day window: "Only the last 60 days' worth of orders from a
 * store will be accessible by default.  To access older orders, request
 * the read_all_orders scope" (Admin API, Order).  Measured on the model's
 * clock, the simulator's now.
 */
#define SHOPIFY_ORDERS_WINDOW (60 * 86400)

int
shopify_order_hidden(const sim_api *api, const sim_object *o)
{
	return o->type == OT_ORDER && !api->shopify_all_orders &&
		o->created < api->model->clock - SHOPIFY_ORDERS_WINDOW;
}

static int
order_visible(const sim_api *api, long k, const order_filter *f)
{
	const sim_model *m = api->model;
	const sim_object *o = &m->objs[k];
	int			cancelled = strcmp(obj_status_name(o), "voided") == 0;

	if (!o->exists || o->deleted || o->updated_at < f->min || o->updated_at > f->max)
		return 0;
	/* older than the app may see: never listed */
	if (shopify_order_hidden(api, o))
		return 0;
	/* another shop's order is not listed at all */
	if (shopify_request_shop > 0 && o->account != shopify_request_shop)
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
			more_before = order_visible(api, m->by_id[i], &f);
		for (i = start; i < m->nby_id; i++)
		{
			if (!order_visible(api, m->by_id[i], &f))
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
			if (!order_visible(api, m->by_id[i], &f))
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
			more_after = order_visible(api, m->by_id[i], &f);
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

static void
shopify_handle(sim_api *api, struct evhttp_request *req, const char *path, const char *query)
{
	const char *p;
	size_t		n;
	sim_params	ps;

	if (api->nshops > 0 && shopify_request_shop == 0)
	{
		/* an app's shops are read each at its own domain, with its own token */
		shop_error(req, 401, NULL, "[API] Invalid API key or access token (unrecognized login or wrong password)");
		return;
	}
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
		else if (k < 0 || api->model->objs[k].deleted || shopify_order_hidden(api, &api->model->objs[k]) ||
				 (shopify_request_shop > 0 && api->model->objs[k].account != shopify_request_shop))
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

/* ---------- a Shopify app's shops ---------- */

/*
 * A public Shopify app installed in several shops (--shopify-shops): each
 * shop is its own origin, modelled as /shops/{shop}/ on this server, whose
 * Admin API answers only that shop's own access token and only that shop's
 * orders.  Offline tokens expire (expires_in, --shopify-token-ttl; Shopify's
 * expiring offline tokens last an hour) and are refreshed as
 * @shopify/shopify-api's refreshToken() does it: POST
 * /admin/oauth/access_token with application/json {client_id,
 * client_secret, refresh_token, grant_type: "refresh_token"}.  Every
 * refresh replaces the refresh token; the one it spent is refused after
 * that (400 {"error": "invalid_grant", ...}), which is how two concurrent
 * refreshes lose a shop.
 */

#define SHOP_REFRESH_TTL (90 * 86400)	/* a refresh token's life */

typedef struct shop_auth
{
	char		access[2][64];	/* the current token, and the one it replaced */
	double		access_exp[2];	/* monotonic seconds */
	char		refresh[64];
	double		refresh_exp;
	long		refreshes;		/* refreshes granted */
	long		refused;		/* refreshes refused (a spent token among them) */
	long		unauthorized;	/* Admin API requests answered 401 */
} shop_auth;

int			shopify_request_shop = 0;

static void
new_token(sim_api *api, const char *prefix, char *out, size_t len)
{
	char		tok[40];

	rng_token(&api->shop_rng, tok, 32);
	snprintf(out, len, "%s%s", prefix, tok);
}

void
shopify_shops_init(sim_api *api, const api_options *opt)
{
	double		now = now_monotonic();

	api->nshops = api->model ? api->model->nshops : 0;
	api->shop_token_ttl = opt->shopify_token_ttl > 0 ? opt->shopify_token_ttl : 3600;
	api->shop_client_id = xstrdup(opt->shopify_client_id ? opt->shopify_client_id : "sim-shopify-client-id");
	api->shop_client_secret = opt->shopify_client_secret ? xstrdup(opt->shopify_client_secret) : NULL;
	rng_seed(&api->shop_rng, opt->seed ^ 0x5b0b5b0bULL);
	api->shops = xcalloc((size_t) (api->nshops > 0 ? api->nshops : 1), sizeof(shop_auth));
	for (int i = 0; i < api->nshops; i++)
	{
		shop_auth  *a = &api->shops[i];

		new_token(api, "shpat_", a->access[0], sizeof(a->access[0]));
		a->access_exp[0] = now + api->shop_token_ttl;
		new_token(api, "shprt_", a->refresh, sizeof(a->refresh));
		a->refresh_exp = now + SHOP_REFRESH_TTL;
	}
}

void
shopify_shops_free(sim_api *api)
{
	free(api->shops);
	free(api->shop_client_id);
	free(api->shop_client_secret);
}

/* RFC 6749 §5.2's error shape, as Shopify's token endpoint answers */
static void
oauth_error(struct evhttp_request *req, int code, const char *error, const char *description)
{
	sbuf		b;

	sb_init(&b);
	sb_puts(&b, "{\"error\":");
	sb_json_str(&b, error);
	sb_puts(&b, ",\"error_description\":");
	sb_json_str(&b, description);
	sb_putc(&b, '}');
	api_reply(req, code, b.data);
	sb_free(&b);
}

static void
handle_token(sim_api *api, struct evhttp_request *req, shop_auth *a)
{
	static const char *const fields[] = {"client_id", "client_secret", "refresh_token", "grant_type", NULL};
	const char *ctype = evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Type");
	size_t		len;
	char	   *body = api_request_body(req, &len);
	char		jerr[200];
	jv		   *in = NULL;
	const char *grant;
	const char *client;
	const char *secret;
	const char *refresh;
	double		now = now_monotonic();
	sbuf		b;

	if (evhttp_request_get_command(req) != EVHTTP_REQ_POST)
	{
		oauth_error(req, 405, "invalid_request", "POST the token request");
		goto done;
	}
	if (ctype == NULL || strncmp(ctype, "application/json", 16) != 0)
	{
		oauth_error(req, 400, "invalid_request", "send the request as application/json");
		goto done;
	}
	in = jv_parse(body, len, jerr, sizeof(jerr));
	if (in == NULL || in->type != JV_OBJ)
	{
		oauth_error(req, 400, "invalid_request", "the body is not a JSON object");
		goto done;
	}
	for (size_t i = 0; i < in->n; i++)
		if (!params_name_in(fields, in->keys[i]))
		{
			/* Shopify ignores what it does not know; webhook-sim refuses it so that it shows */
			oauth_error(req, 400, "invalid_request", "unknown parameter (webhook-sim refuses it)");
			goto done;
		}
	grant = jv_string(jv_get(in, "grant_type"));
	client = jv_string(jv_get(in, "client_id"));
	secret = jv_string(jv_get(in, "client_secret"));
	refresh = jv_string(jv_get(in, "refresh_token"));
	if (grant == NULL || strcmp(grant, "refresh_token") != 0)
	{
		oauth_error(req, 400, "unsupported_grant_type",
					"webhook-sim models the refresh_token grant of expiring offline tokens only");
		goto done;
	}
	if (client == NULL || secret == NULL || strcmp(client, api->shop_client_id) != 0 ||
		api->shop_client_secret == NULL || strcmp(secret, api->shop_client_secret) != 0)
	{
		a->refused++;
		oauth_error(req, 400, "invalid_client", "Client authentication failed: wrong client_id or client_secret");
		goto done;
	}
	if (refresh == NULL || strcmp(refresh, a->refresh) != 0 || now >= a->refresh_exp)
	{
		a->refused++;
		oauth_error(req, 400, "invalid_grant", "The refresh token is invalid, expired, or was already used");
		goto done;
	}
	/* the refresh token is spent: a new one replaces it, and a new access token the current one */
	memcpy(a->access[1], a->access[0], sizeof(a->access[0]));
	a->access_exp[1] = a->access_exp[0];
	new_token(api, "shpat_", a->access[0], sizeof(a->access[0]));
	a->access_exp[0] = now + api->shop_token_ttl;
	new_token(api, "shprt_", a->refresh, sizeof(a->refresh));
	a->refresh_exp = now + SHOP_REFRESH_TTL;
	a->refreshes++;
	sb_init(&b);
	sb_puts(&b, "{\"access_token\":");
	sb_json_str(&b, a->access[0]);
	sb_puts(&b, ",\"scope\":");
	sb_json_str(&b, api->shopify_scopes);
	sb_printf(&b, ",\"expires_in\":%d,\"refresh_token\":", api->shop_token_ttl);
	sb_json_str(&b, a->refresh);
	sb_printf(&b, ",\"refresh_token_expires_in\":%d}", SHOP_REFRESH_TTL);
	api_reply(req, 200, b.data);
	sb_free(&b);
done:
	jv_free(in);
	free(body);
}

void
shopify_shop_handle(sim_api *api, struct evhttp_request *req, const char *path, const char *query)
{
	const char *p = path + strlen("/shops/");
	const char *slash = strchr(p, '/');
	char		shop[128];
	int			k;
	shop_auth  *a;
	const char *token;
	double		now = now_monotonic();

	if (slash == NULL || (size_t) (slash - p) >= sizeof(shop))
	{
		shop_error(req, 404, NULL, "Not Found");
		return;
	}
	memcpy(shop, p, (size_t) (slash - p));
	shop[slash - p] = '\0';
	k = model_shop_of(api->model, shop);
	if (k <= 0 || api->shops == NULL)
	{
		shop_error(req, 404, NULL, "Not Found");
		return;
	}
	a = &api->shops[k - 1];
	if (strcmp(slash, "/admin/oauth/access_token") == 0)
	{
		handle_token(api, req, a);
		return;
	}
	token = evhttp_find_header(evhttp_request_get_input_headers(req), "X-Shopify-Access-Token");
	if (token == NULL ||
		!((strcmp(token, a->access[0]) == 0 && now < a->access_exp[0]) ||
		  (a->access[1][0] && strcmp(token, a->access[1]) == 0 && now < a->access_exp[1])))
	{
		a->unauthorized++;
		shop_error(req, 401, NULL, "[API] Invalid API key or access token (unrecognized login or wrong password)");
		return;
	}
	shopify_request_shop = k;
	shopify_handle(api, req, slash, query);
	shopify_request_shop = 0;
}

/* GET /_sim/shopify/shops: the install (each shop's tokens now) and the counts */
void
shopify_shops_sim(sim_api *api, struct evhttp_request *req)
{
	double		now = now_monotonic();
	sbuf		b;

	sb_init(&b);
	sb_puts(&b, "{\"client_id\":");
	sb_json_str(&b, api->shop_client_id ? api->shop_client_id : "");
	sb_printf(&b, ",\"token_ttl\":%d,\"shops\":[", api->shop_token_ttl);
	for (int i = 0; i < api->nshops; i++)
	{
		shop_auth  *a = &api->shops[i];
		long		orders = 0;

		for (long k = 0; k < api->model->nobjs; k++)
			if (api->model->objs[k].type == OT_ORDER && api->model->objs[k].account == i + 1)
				orders++;
		sb_puts(&b, i ? ",{\"shop\":" : "{\"shop\":");
		sb_json_str(&b, api->model->shops[i]);
		sb_puts(&b, ",\"access_token\":");
		sb_json_str(&b, a->access[0]);
		sb_printf(&b, ",\"expires_in\":%.0f,\"refresh_token\":", a->access_exp[0] - now);
		sb_json_str(&b, a->refresh);
		sb_printf(&b, ",\"refresh_token_expires_in\":%.0f,\"refreshes\":%ld,\"refused\":%ld,"
				  "\"unauthorized\":%ld,\"orders\":%ld}",
				  a->refresh_exp - now, a->refreshes, a->refused, a->unauthorized, orders);
	}
	sb_puts(&b, "]}");
	api_reply(req, 200, b.data);
	sb_free(&b);
}

/* ---------- the provider ---------- */

static int
shopify_owns(const char *path)
{
	return strncmp(path, "/admin/", 7) == 0;
}

static int
shopify_authorized(sim_api *api, struct evhttp_request *req)
{
	const char *v = evhttp_find_header(evhttp_request_get_input_headers(req),
									   "X-Shopify-Access-Token");

	return v != NULL && strcmp(v, api->api_token) == 0;
}

static void
shopify_reply_error(struct evhttp_request *req, int code, const char *message)
{
	shop_error(req, code, NULL, message);
}

/* Counters: GET .../orders.json (a list) and .../orders/{id}.json (its id). */
static void
shopify_count(sim_api *api, struct evhttp_request *req, const char *path)
{
	const char *p;

	(void) req;
	if (strncmp(path, "/admin/api/", 11) != 0)
		return;
	p = strchr(path + strlen("/admin/api/"), '/');
	if (p && strcmp(p, "/orders.json") == 0)
		api->lists++;
	else if (p && strncmp(p, "/orders/", 8) == 0 && strlen(p) > 13)
	{
		char	   *id = xstrndup(p + 8, strlen(p) - 8 - 5);

		api_count(&api->fetches, id);
		free(id);
	}
}

const sim_provider shopify_provider = {
	.name = "shopify",
	.owns = shopify_owns,
	.authorized = shopify_authorized,
	.reply_error = shopify_reply_error,
	.unauthorized = "[API] Invalid API key or access token (unrecognized login or wrong password)",
	.count = shopify_count,
	.handle = shopify_handle,
};
