/*
 * shopify_graphql.c
 *		Shopify's GraphQL Admin API for orders, as strictly as the simulator
 *		can speak it: POST /admin/api/{version}/graphql.json with
 *		{"query", "variables", "operationName"}, QueryRoot.order(id:) and
 *		QueryRoot.orders(first:, after:, sortKey:, query:) with their
 *		connection (nodes, edges, pageInfo), and the cost extension of
 *		every answer with a leaky bucket per shop (THROTTLED when a query
 *		costs more than is left in its shop's).
 *
 * A query is parsed and validated before it runs, as GraphQL servers do:
 * a field its type does not have is answered with Shopify's error shape
 * ({"errors": [{"message": "Field 'x' doesn't exist on type 'Order'",
 * "locations", "path", "extensions": {"code": "undefinedField", ...}}]}),
 * so are unknown arguments, missing selections and undeclared or
 * mistyped variables.  Fields Shopify has and the simulator does not model
 * are answered as unknown ones: a client that needs one shows.  The table
 * of what is modelled (schema[] below) is served at /_sim/shopify/schema
 * and checked against Shopify's published Admin schema by the contract
 * test (regress/contract/shopify_graphql.mjs).
 *
 * Costs follow Shopify's calculation: scalars and enums 0, an object 1, a
 * connection 2 plus first times its node's cost; the requested cost is
 * taken from the bucket (after it refilled at the restore rate since the
 * last query), and a query that costs more than the bucket holds is
 * answered THROTTLED (HTTP 200) and costs nothing.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>

#include "api_int.h"
#include "json.h"
#include "sign.h"

#include "shopify_graphql_int.h"

/* ---------- running it ---------- */

typedef struct order_page
{
	long	   *idx;			/* model indices of the page's orders */
	long		n;
	int			has_next;
	int			has_prev;
} order_page;

typedef struct rctx
{
	sim_api    *api;
	gql_doc    *doc;
	const jv   *vars;
	gql_error  *err;
	const char *path[GQL_MAX_DEPTH + 2];
	int			npath;
	int			sort_updated;	/* the page's sort: UPDATED_AT, else ID */
	double		cost;			/* actual */
} rctx;

/* An argument's value as text (a variable's from variables), or NULL for null/absent. */
static const char *
arg_text(rctx *r, gql_field *f, const char *name)
{
	for (int k = 0; k < f->nargs; k++)
		if (strcmp(f->args[k].name, name) == 0)
		{
			if (f->args[k].kind == GV_NULL)
				return NULL;
			if (f->args[k].kind == GV_VAR)
				return r->vars ? jv_scalar_text(jv_get(r->vars, f->args[k].text)) : NULL;
			return f->args[k].text;
		}
	return NULL;
}

static void
run_error(rctx *r, gql_field *f, const char *message, const char *code)
{
	add_error(r->err, message, f->line, f->col, r->path, r->npath, code, NULL, NULL);
}

/* Cursors are opaque to clients: base64 of "sort value:id", as Shopify's base64 JSON. */
static void
make_cursor(const sim_object *o, int sort_updated, char *out, size_t len)
{
	char		raw[96];
	char		enc[140];

	snprintf(raw, sizeof(raw), "%lld:%s", (long long) (sort_updated ? o->updated_at : 0), o->id);
	base64_encode((const unsigned char *) raw, strlen(raw), enc);
	snprintf(out, len, "%s", enc);
}

static int
parse_cursor(const char *c, int64_t *key, char *id, size_t idlen)
{
	unsigned char raw[128];
	int			n;
	long long	k;
	int			used = 0;

	if (strlen(c) > 160)
		return -1;
	n = base64_decode(c, strlen(c), raw);
	if (n <= 0 || n >= (int) sizeof(raw) - 1)
		return -1;
	raw[n] = '\0';
	if (sscanf((char *) raw, "%lld:%n", &k, &used) != 1 || used == 0 || raw[used] == '\0' ||
		strlen((char *) raw + used) >= idlen)
		return -1;
	*key = k;
	snprintf(id, idlen, "%s", (char *) raw + used);
	for (const char *p = id; *p; p++)
		if (!isdigit((unsigned char) *p))
			return -1;
	return 0;
}

static const sim_model *sort_model;
static int	sort_by_updated;

static int
cmp_orders(const void *a, const void *b)
{
	const sim_object *x = &sort_model->objs[*(const long *) a];
	const sim_object *y = &sort_model->objs[*(const long *) b];

	if (sort_by_updated && x->updated_at != y->updated_at)
		return x->updated_at < y->updated_at ? -1 : 1;
	return id_cmp(x->id, y->id);
}

/* search syntax: updated_at:>='ISO' or updated_at:>'ISO' (quotes optional); 0 or -1 */
static int
parse_search(const char *q, int64_t *min, int *strict)
{
	char		buf[80];
	size_t		n;
	const char *v;

	while (*q == ' ')
		q++;
	if (strncmp(q, "updated_at:>=", 13) == 0)
	{
		*strict = 0;
		v = q + 13;
	}
	else if (strncmp(q, "updated_at:>", 12) == 0)
	{
		*strict = 1;
		v = q + 12;
	}
	else
		return -1;
	n = strlen(v);
	while (n > 0 && v[n - 1] == ' ')
		n--;
	if (n >= 2 && (v[0] == '\'' || v[0] == '"') && v[n - 1] == v[0])
	{
		v++;
		n -= 2;
	}
	if (n == 0 || n >= sizeof(buf))
		return -1;
	memcpy(buf, v, n);
	buf[n] = '\0';
	return parse_iso_time(buf, min);
}

/* Lists the orders page of orders(...): 0, or -1 with the error added. */
static int
list_orders(rctx *r, gql_field *f, order_page *pg, long *first_out)
{
	sim_model  *m = r->api->model;
	const char *v;
	int64_t		first = 0,
				min = INT64_MIN,
				ckey = 0;
	int			strict = 0;
	char		cid[SIM_ID_LEN] = "";
	long	   *all;
	long		nall = 0,
				start = 0;

	memset(pg, 0, sizeof(*pg));
	if (arg_text(r, f, "last") || arg_text(r, f, "before") || arg_text(r, f, "savedSearchId"))
	{
		run_error(r, f, "webhook-sim models forward paging only (first, after)", "notModelled");
		return -1;
	}
	if ((v = arg_text(r, f, "reverse")) != NULL && strcmp(v, "false") != 0)
	{
		run_error(r, f, "webhook-sim models reverse: false only", "notModelled");
		return -1;
	}
	if ((v = arg_text(r, f, "first")) == NULL)
	{
		run_error(r, f, "you must provide one of first or last", "BAD_REQUEST");
		return -1;
	}
	if (parse_int64(v, 0, INT64_MAX, &first) != 0 || first < 1 || first > 250)
	{
		run_error(r, f, "The first argument must be between 1 and 250", "BAD_REQUEST");
		return -1;
	}
	r->sort_updated = 0;
	if ((v = arg_text(r, f, "sortKey")) != NULL)
	{
		if (strcmp(v, "UPDATED_AT") == 0)
			r->sort_updated = 1;
		else if (strcmp(v, "ID") != 0)
		{
			run_error(r, f, "webhook-sim models sortKey UPDATED_AT and ID only", "notModelled");
			return -1;
		}
	}
	if ((v = arg_text(r, f, "query")) != NULL && *v && parse_search(v, &min, &strict) != 0)
	{
		run_error(r, f, "webhook-sim models the search terms updated_at:>='…' and updated_at:>'…' only",
				  "notModelled");
		return -1;
	}
	if ((v = arg_text(r, f, "after")) != NULL && parse_cursor(v, &ckey, cid, sizeof(cid)) != 0)
	{
		run_error(r, f, "Invalid cursor for current pagination sort.", "BAD_REQUEST");
		return -1;
	}
	all = xcalloc((size_t) m->nobjs + 1, sizeof(long));
	for (long k = 0; k < m->nobjs; k++)
	{
		const sim_object *o = &m->objs[k];

		if (o->type != OT_ORDER || !o->exists || o->deleted || shopify_order_hidden(r->api, o))
			continue;
		/* a shop's token lists that shop's orders only */
		if (shopify_request_shop > 0 && o->account != shopify_request_shop)
			continue;
		if (o->updated_at < min || (strict && o->updated_at == min))
			continue;
		all[nall++] = k;
	}
	sort_model = m;
	sort_by_updated = r->sort_updated;
	qsort(all, (size_t) nall, sizeof(long), cmp_orders);
	if (cid[0])
	{
		/* after the cursor's position in this sort */
		for (start = 0; start < nall; start++)
		{
			const sim_object *o = &m->objs[all[start]];
			int			c = r->sort_updated && o->updated_at != ckey ? (o->updated_at < ckey ? -1 : 1)
				: id_cmp(o->id, cid);

			if (c > 0)
				break;
		}
		pg->has_prev = start > 0;
	}
	pg->n = nall - start < first ? nall - start : (long) first;
	pg->idx = xcalloc((size_t) pg->n + 1, sizeof(long));
	memcpy(pg->idx, all + start, sizeof(long) * (size_t) pg->n);
	pg->has_next = start + pg->n < nall;
	*first_out = (long) first;
	free(all);
	return 0;
}

static void render_sel(rctx *r, sbuf *out, const char *type, const void *obj, gql_field *parent);

static void
render_money(sbuf *out, int64_t minor)
{
	sb_printf(out, "\"%lld.%02lld\"", (long long) (minor / 100), (long long) (minor % 100));
}

static void
render_time_or_null(sbuf *out, int set, int64_t t)
{
	char		iso[40];

	if (!set)
	{
		sb_puts(out, "null");
		return;
	}
	iso_time(t, 1, iso, sizeof(iso));
	sb_printf(out, "\"%s\"", iso);
}

/* One order field's value (Order, MoneyBag and MoneyV2 all stand on the order). */
static void
render_order_field(rctx *r, sbuf *out, const char *type, const sim_object *o, gql_field *f)
{
	const char *n = f->name;
	const char *st = obj_status_name(o);

	if (strcmp(type, "MoneyBag") == 0)
	{
		r->cost += 1;
		render_sel(r, out, "MoneyV2", o, f);
	}
	else if (strcmp(type, "MoneyV2") == 0)
	{
		if (strcmp(n, "amount") == 0)
			render_money(out, o->amount);
		else
			sb_printf(out, "\"%s\"", currency_name(o));
	}
	else if (strcmp(n, "id") == 0)
		sb_printf(out, "\"gid://shopify/Order/%s\"", o->id);
	else if (strcmp(n, "legacyResourceId") == 0)
		sb_printf(out, "\"%s\"", o->id);
	else if (strcmp(n, "name") == 0)
		sb_printf(out, "\"#%ld\"", o->number);
	else if (strcmp(n, "createdAt") == 0)
		render_time_or_null(out, 1, o->created);
	else if (strcmp(n, "updatedAt") == 0)
		render_time_or_null(out, 1, o->updated_at);
	else if (strcmp(n, "displayFinancialStatus") == 0)
	{
		sb_putc(out, '"');
		for (const char *p = st; *p; p++)
			sb_putc(out, (char) toupper((unsigned char) *p));
		sb_putc(out, '"');
	}
	else if (strcmp(n, "totalPriceSet") == 0)
	{
		r->cost += 1;
		render_sel(r, out, "MoneyBag", o, f);
	}
	else if (strcmp(n, "currencyCode") == 0)
		sb_printf(out, "\"%s\"", currency_name(o));
	else if (strcmp(n, "cancelledAt") == 0)
		render_time_or_null(out, strcmp(st, "voided") == 0, o->updated_at);
	else if (strcmp(n, "closedAt") == 0)
		sb_puts(out, "null");
	else
		sb_puts(out, "null");
}

static void
render_page(rctx *r, sbuf *out, const char *type, const order_page *pg, gql_field *f)
{
	sim_model  *m = r->api->model;
	char		cur[160];

	if (strcmp(f->name, "nodes") == 0 || strcmp(f->name, "edges") == 0)
	{
		int			edges = f->name[0] == 'e';

		sb_putc(out, '[');
		for (long i = 0; i < pg->n; i++)
		{
			if (i)
				sb_putc(out, ',');
			r->cost += 1;
			render_sel(r, out, edges ? "OrderEdge" : "Order", &m->objs[pg->idx[i]], f);
		}
		sb_putc(out, ']');
	}
	else if (strcmp(f->name, "pageInfo") == 0)
	{
		r->cost += 1;
		render_sel(r, out, "PageInfo", pg, f);
	}
	else if (strcmp(type, "PageInfo") == 0)
	{
		if (strcmp(f->name, "hasNextPage") == 0)
			sb_puts(out, pg->has_next ? "true" : "false");
		else if (strcmp(f->name, "hasPreviousPage") == 0)
			sb_puts(out, pg->has_prev ? "true" : "false");
		else if (pg->n == 0)
			sb_puts(out, "null");
		else
		{
			make_cursor(&m->objs[pg->idx[strcmp(f->name, "startCursor") == 0 ? 0 : pg->n - 1]],
						r->sort_updated, cur, sizeof(cur));
			sb_json_str(out, cur);
		}
	}
}

/*
 * AppInstallation (the app's installation in the shop asked: its id and
 * accessScopes) and AccessScope (handle, description); obj is NULL for the
 * installation, the scope's handle for an AccessScope.
 */
static void
render_installation(rctx *r, sbuf *out, const char *type, const char *handle, gql_field *f)
{
	if (strcmp(type, "AccessScope") == 0)
	{
		if (strcmp(f->name, "handle") == 0)
			sb_json_str(out, handle);
		else
		{
			char		d[160];

			snprintf(d, sizeof(d), "%s the shop's %s", strncmp(handle, "write_", 6) == 0 ? "Modify" : "Read",
					 strchr(handle, '_') ? strchr(handle, '_') + 1 : handle);
			sb_json_str(out, d);
		}
	}
	else if (strcmp(f->name, "id") == 0)
		sb_printf(out, "\"gid://shopify/AppInstallation/%d\"", 1000 + shopify_request_shop);
	else
	{
		/* accessScopes: one AccessScope per granted handle */
		const char *p = r->api->shopify_scopes;
		int			first = 1;

		sb_putc(out, '[');
		while (*p)
		{
			const char *e = strchr(p, ',');
			size_t		n = e ? (size_t) (e - p) : strlen(p);
			char		h[80];

			if (n > 0 && n < sizeof(h))
			{
				memcpy(h, p, n);
				h[n] = '\0';
				if (!first)
					sb_putc(out, ',');
				first = 0;
				r->cost += 1;
				render_sel(r, out, "AccessScope", h, f);
			}
			p += n;
			if (*p == ',')
				p++;
		}
		sb_putc(out, ']');
	}
}

static void
render_root_field(rctx *r, sbuf *out, gql_field *f)
{
	sim_model  *m = r->api->model;

	if (strcmp(f->name, "order") == 0)
	{
		const char *gid = arg_text(r, f, "id");
		const char *pre = "gid://shopify/Order/";
		long		k = -1;
		char		msg[300];

		if (gid == NULL || strncmp(gid, "gid://shopify/", 14) != 0 || strchr(gid + 14, '/') == NULL)
		{
			snprintf(msg, sizeof(msg), "Invalid global id '%.200s'", gid ? gid : "");
			run_error(r, f, msg, "argumentLiteralsIncompatible");
			sb_puts(out, "null");
			return;
		}
		r->cost += 1;
		if (strncmp(gid, pre, strlen(pre)) == 0)
		{
			k = model_find_object(m, OT_ORDER, gid + strlen(pre));
			idmap_put(&r->api->fetches, gid + strlen(pre),
					  idmap_get(&r->api->fetches, gid + strlen(pre)) < 0 ? 1
					  : idmap_get(&r->api->fetches, gid + strlen(pre)) + 1);
		}
		/* an order older than the app may see is null, as a deleted one is */
		if (k < 0 || m->objs[k].deleted || !m->objs[k].exists || shopify_order_hidden(r->api, &m->objs[k]) ||
			(shopify_request_shop > 0 && m->objs[k].account != shopify_request_shop))
			sb_puts(out, "null");
		else
			render_sel(r, out, "Order", &m->objs[k], f);
	}
	else if (strcmp(f->name, "currentAppInstallation") == 0)
	{
		r->cost += 1;
		r->api->scope_queries++;
		render_sel(r, out, "AppInstallation", NULL, f);
	}
	else if (strcmp(f->name, "orders") == 0)
	{
		order_page	pg;
		long		first;

		if (list_orders(r, f, &pg, &first) != 0)
		{
			sb_puts(out, "null");
			return;
		}
		r->api->lists++;
		r->cost += 2;
		render_sel(r, out, "OrderConnection", &pg, f);
		free(pg.idx);
	}
}

/*
 * Renders parent's selection on obj (of type) as a JSON object, each field
 * under its alias.  obj: NULL for QueryRoot, the order for Order, MoneyBag
 * and MoneyV2, the order of an OrderEdge, an order_page for the connection
 * and PageInfo.
 */
static void
render_sel(rctx *r, sbuf *out, const char *type, const void *obj, gql_field *parent)
{
	sb_putc(out, '{');
	for (int i = 0; i < parent->nsel; i++)
	{
		gql_field  *f = &parent->sel[i];

		if (i)
			sb_putc(out, ',');
		sb_json_str(out, f->alias ? f->alias : f->name);
		sb_putc(out, ':');
		r->path[r->npath++] = f->alias ? f->alias : f->name;
		if (strcmp(f->name, "__typename") == 0)
			sb_printf(out, "\"%s\"", type);
		else if (strcmp(type, "QueryRoot") == 0)
			render_root_field(r, out, f);
		else if (strcmp(type, "AppInstallation") == 0 || strcmp(type, "AccessScope") == 0)
			render_installation(r, out, type, (const char *) obj, f);
		else if (strcmp(type, "OrderConnection") == 0 || strcmp(type, "PageInfo") == 0)
			render_page(r, out, type, (const order_page *) obj, f);
		else if (strcmp(type, "OrderEdge") == 0)
		{
			if (strcmp(f->name, "cursor") == 0)
			{
				char		cur[160];

				make_cursor((const sim_object *) obj, r->sort_updated, cur, sizeof(cur));
				sb_json_str(out, cur);
			}
			else
				render_sel(r, out, "Order", obj, f);
		}
		else
			render_order_field(r, out, type, (const sim_object *) obj, f);
		r->npath--;
	}
	sb_putc(out, '}');
}

/*
 * The requested cost of parent's selection on type: an object 1, a
 * connection 2 plus its selection, in which each list field (nodes, edges)
 * costs `each` (the connection's first) times its element's cost.
 */
static double
requested_cost(rctx *r, const char *type, gql_field *parent, double each)
{
	double		c = 0;

	for (int i = 0; i < parent->nsel; i++)
	{
		gql_field  *f = &parent->sel[i];
		const gql_fdef *d = strcmp(f->name, "__typename") == 0 ? NULL : field_def(type, f->name);

		if (d == NULL || !is_object_type(d->returns))
			continue;
		if (strcmp(d->returns, "OrderConnection") == 0)
		{
			const char *v = arg_text(r, f, "first");
			int64_t		first = 0;

			if (v == NULL || parse_int64(v, 0, 100000, &first) != 0)
				first = 0;
			c += 2 + requested_cost(r, d->returns, f, (double) first);
		}
		else if (d->list)
			c += each * (1 + requested_cost(r, d->returns, f, 0));
		else
			c += 1 + requested_cost(r, d->returns, f, 0);
	}
	return c;
}

static void
cost_extension(sbuf *out, double requested, double actual, int have_actual, const sim_api *api,
			   const struct gql_bucket *b)
{
	sb_printf(out, "\"extensions\":{\"cost\":{\"requestedQueryCost\":%.0f,\"actualQueryCost\":", requested);
	if (have_actual)
		sb_printf(out, "%.0f", actual);
	else
		sb_puts(out, "null");
	sb_printf(out, ",\"throttleStatus\":{\"maximumAvailable\":%.1f,\"currentlyAvailable\":%.0f,"
			  "\"restoreRate\":%.1f}}}", api->gql_max, b->level, api->gql_rate);
}

static void
reply_errors(struct evhttp_request *req, gql_error *e, const char *cost_json)
{
	sbuf		b;

	sb_init(&b);
	sb_puts(&b, "{\"errors\":[");
	sb_puts(&b, e->json.data ? e->json.data : "");
	sb_putc(&b, ']');
	if (cost_json)
	{
		sb_putc(&b, ',');
		sb_puts(&b, cost_json);
	}
	sb_putc(&b, '}');
	api_reply(req, 200, b.data);
	sb_free(&b);
}

void
shopify_graphql_handle(sim_api *api, struct evhttp_request *req, const char *version)
{
	size_t		len;
	char	   *body = api_request_body(req, &len);
	char		jerr[200];
	jv		   *in = NULL;
	const char *query;
	const jv   *vars;
	gql_doc		doc;
	lexer		lx;
	gql_error	err;
	vctx		vc;
	rctx		rc;
	sbuf		out,
				cost;
	double		requested,
				now;
	struct gql_bucket *bucket;
	char		opname[140];
	const char *ctype = evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Type");

	memset(&doc, 0, sizeof(doc));
	memset(&err, 0, sizeof(err));
	sb_init(&err.json);
	sb_init(&out);
	sb_init(&cost);
	evhttp_add_header(evhttp_request_get_output_headers(req), "X-Shopify-API-Version", version);

	if (ctype == NULL || strncmp(ctype, "application/json", 16) != 0)
	{
		api_reply(req, 415, "{\"errors\":\"Unsupported Media Type: send application/json\"}");
		goto done;
	}
	in = jv_parse(body ? body : "", len, jerr, sizeof(jerr));
	query = jv_string(jv_get(in, "query"));
	vars = jv_get(in, "variables");
	if (in == NULL || in->type != JV_OBJ || query == NULL ||
		(vars != NULL && vars->type != JV_OBJ && vars->type != JV_NULL))
	{
		api_reply(req, 400, "{\"errors\":{\"query\":\"Required parameter missing or invalid\"}}");
		goto done;
	}
	if (vars != NULL && vars->type == JV_NULL)
		vars = NULL;

	memset(&lx, 0, sizeof(lx));
	lx.s = query;
	lx.n = strlen(query);
	lx.line = 1;
	if (parse_document(&lx, &doc) != 0)
	{
		add_error(&err, lx.err, lx.err_line, lx.err_col, NULL, 0, NULL, NULL, NULL);
		reply_errors(req, &err, NULL);
		goto done;
	}

	/* validation: the whole document, before anything runs or costs */
	snprintf(opname, sizeof(opname), "query%s%.120s", doc.op_name ? " " : "", doc.op_name ? doc.op_name : "");
	memset(&vc, 0, sizeof(vc));
	vc.doc = &doc;
	vc.vars = vars;
	vc.err = &err;
	vc.path[vc.npath++] = opname;
	validate_sel(&vc, "QueryRoot", &doc.root);
	for (int i = 0; i < doc.nvars; i++)
		if (!doc.vars[i].used)
		{
			char		msg[300];

			snprintf(msg, sizeof(msg), "Variable $%s is declared by %s but not used", doc.vars[i].name,
					 doc.op_name ? doc.op_name : "anonymous query");
			add_error(&err, msg, 1, 1, vc.path, 1, "variableNotUsed", NULL, NULL);
		}
	if (err.n > 0)
	{
		reply_errors(req, &err, NULL);
		goto done;
	}

	/* the bucket: refilled since the last query, then asked for the requested cost */
	memset(&rc, 0, sizeof(rc));
	rc.api = api;
	rc.doc = &doc;
	rc.vars = vars;
	rc.err = &err;
	rc.path[rc.npath++] = opname;
	requested = requested_cost(&rc, "QueryRoot", &doc.root, 1);
	now = now_monotonic();
	/* the shop's own bucket: another shop's queries cost it nothing */
	bucket = &api->gql[shopify_request_shop >= 0 && shopify_request_shop <= api->nshops ? shopify_request_shop : 0];
	bucket->level += (now - bucket->at) * api->gql_rate;
	if (bucket->level > api->gql_max)
		bucket->level = api->gql_max;
	bucket->at = now;
	if (requested > GQL_MAX_COST)
	{
		char		msg[200];

		snprintf(msg, sizeof(msg), "Query cost is %.0f, which exceeds the single query max cost limit (%d).",
				 requested, GQL_MAX_COST);
		add_error(&err, msg, 0, 0, NULL, 0, "MAX_COST_EXCEEDED", NULL, NULL);
		cost_extension(&cost, requested, 0, 0, api, bucket);
		reply_errors(req, &err, cost.data);
		goto done;
	}
	if (requested > bucket->level)
	{
		api->gql_throttled++;
		add_error(&err, "Throttled", 0, 0, NULL, 0, "THROTTLED", NULL, NULL);
		cost_extension(&cost, requested, 0, 0, api, bucket);
		reply_errors(req, &err, cost.data);
		goto done;
	}

	sb_puts(&out, "{\"data\":");
	render_sel(&rc, &out, "QueryRoot", NULL, &doc.root);
	/* what the query cost in the end is taken; the rest of the request is refunded */
	bucket->level -= rc.cost < requested ? rc.cost : requested;
	if (err.n > 0)
	{
		cost_extension(&cost, requested, rc.cost, 1, api, bucket);
		reply_errors(req, &err, cost.data);
		goto done;
	}
	sb_putc(&out, ',');
	cost_extension(&out, requested, rc.cost, 1, api, bucket);
	sb_putc(&out, '}');
	api_reply(req, 200, out.data);

done:
	doc_free(&doc);
	if (in)
		jv_free(in);
	free(body);
	sb_free(&err.json);
	sb_free(&out);
	sb_free(&cost);
}
