/*
 * stripe_api.c
 *		Stripe's v1 API as stripe-node types it: retrieve and list of
 *		subscriptions, payment_intents, invoices, customers, refunds,
 *		disputes, charges and checkout/sessions; the events API; Connect
 *		accounts.  POST /v1/refunds with idempotency keys is in
 *		stripe_refunds.c, the parameter checks both use in stripe_params.c.
 *
 * The contract, strictly (so that a wrong client cannot agree with us):
 *   - each list accepts exactly the parameters of its *ListParams interface
 *     (plus PaginationParams: limit, starting_after, ending_before); any
 *     other answers 400 parameter_unknown, as Stripe does.  A parameter the
 *     SDK declares but this simulator does not model answers 400
 *     parameter_unsupported (a simulator limit, never a silent no-op);
 *   - lists are newest first (created descending), with `has_more`,
 *     `object: "list"` and `url`; a cursor names an object of the list;
 *   - the subscription list leaves out canceled ones unless status is
 *     canceled, ended or all;
 *   - the customer list leaves out deleted customers, and a deleted customer
 *     is retrieved as {"id":…,"object":"customer","deleted":true};
 *   - /v1/events keeps 30 days, filters on created, type (with `*`
 *     wildcards) or types[] (at most 20, not with type);
 *   - POST bodies are application/x-www-form-urlencoded with nested
 *     metadata[key]=value; an Idempotency-Key is kept idempotency_ttl (24 h):
 *     the same key and parameters replay the first answer (with
 *     Idempotent-Replayed: true), other parameters get 400
 *     idempotency_error.  Stripe has no lookup by idempotency key;
 *   - Stripe Connect (--connect-accounts): connected accounts own every
 *     object, list and event, each visible only under the Stripe-Account
 *     header naming its account (or Stripe-Context, whose last segment
 *     names it); asked for without it, or under another account, an object
 *     is 404 resource_missing "No such subscription: 'sub_…'", exactly as
 *     a deleted one; the platform owns none.  Both headers at once are
 *     refused (stripe-node never sends both); an unknown account is 403.
 *     GET /v1/accounts lists the connected accounts (AccountListParams:
 *     created, expand, limit 1-100, starting_after, ending_before), newest
 *     first, and GET /v1/accounts/{id} retrieves one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "api_int.h"
#include "stripe_int.h"

#define MAX_TYPES 20

/* Parameters of each list, as stripe-node's *ListParams declare them. */
typedef struct list_spec
{
	const char *path;			/* after /v1/ */
	int			type;			/* obj_type, or -1 for events */
	const char *sdk_params;		/* space-separated, besides pagination */
	const char *implemented;	/* those modelled here */
} list_spec;

static const list_spec list_specs[] = {
	{"subscriptions", OT_SUB,
		"automatic_tax collection_method created current_period_end current_period_start "
		"customer customer_account expand plan price status test_clock",
	"created customer status"},
	{"payment_intents", OT_PI, "created customer customer_account expand", "created customer"},
	{"invoices", OT_INVOICE,
		"collection_method created customer customer_account due_date expand status subscription",
	"created customer status"},
	{"customers", OT_CUSTOMER, "created email expand test_clock", "created email"},
	{"refunds", OT_REFUND, "charge created expand payment_intent", "charge created payment_intent"},
	{"disputes", OT_DISPUTE, "charge created expand payment_intent", "charge created payment_intent"},
	{"charges", OT_CHARGE, "created customer expand payment_intent transfer_group",
	"created customer payment_intent"},
	{"checkout/sessions", OT_CHECKOUT,
		"created customer customer_account customer_details expand payment_intent payment_link "
		"status subscription",
	"created customer payment_intent status"},
	{"events", -1, "created delivery_success expand type types", "created type types"},
};

typedef struct list_query
{
	long		limit;
	const char *after;
	const char *before;
	int64_t		lo;				/* created >= lo */
	int64_t		hi;				/* created <= hi */
	const char *status;
	const char *customer;
	const char *payment_intent;
	const char *charge;
	const char *email;
	const char *type;
	const char *types[MAX_TYPES];
	int			ntypes;
	int			account;		/* the request's Connect account; 0: the platform */
} list_query;

/* Values of the parameters into q; answers the error and returns -1. */
static int
parse_query(struct evhttp_request *req, sim_params *ps, const list_spec *spec, list_query *q)
{
	int			i;
	int64_t		v;

	memset(q, 0, sizeof(*q));
	q->limit = 10;
	q->lo = INT64_MIN;
	q->hi = INT64_MAX;
	for (i = 0; i < ps->n; i++)
	{
		const char *name = ps->p[i].name,
				   *val = ps->p[i].value;

		if (strcmp(name, "limit") == 0)
		{
			if (parse_int64(val, 1, 100, &v) != 0)
			{
				stripe_msg(req, 400, "parameter_invalid_integer", "limit",
						   "Invalid limit: must be an integer between 1 and 100 (got %s)", val);
				return -1;
			}
			q->limit = (long) v;
		}
		else if (strcmp(name, "starting_after") == 0)
			q->after = val;
		else if (strcmp(name, "ending_before") == 0)
			q->before = val;
		else if (strcmp(name, "created") == 0)
		{
			if (parse_ts(req, name, val, &v) != 0)
				return -1;
			q->lo = q->lo > v ? q->lo : v;
			q->hi = q->hi < v ? q->hi : v;
		}
		else if (strncmp(name, "created[", 8) == 0)
		{
			const char *op = name + 8;

			if (parse_ts(req, name, val, &v) != 0)
				return -1;
			if (strcmp(op, "gt]") == 0)
				v++;
			else if (strcmp(op, "lt]") == 0)
				v--;
			if (op[0] == 'g')
				q->lo = q->lo > v ? q->lo : v;
			else
				q->hi = q->hi < v ? q->hi : v;
		}
		else if (strcmp(name, "status") == 0)
			q->status = val;
		else if (strcmp(name, "customer") == 0)
			q->customer = val;
		else if (strcmp(name, "payment_intent") == 0)
			q->payment_intent = val;
		else if (strcmp(name, "charge") == 0)
			q->charge = val;
		else if (strcmp(name, "email") == 0)
			q->email = val;
		else if (strcmp(name, "type") == 0)
			q->type = val;
		else if (strncmp(name, "types[", 6) == 0)
		{
			if (q->ntypes == MAX_TYPES)
			{
				stripe_msg(req, 400, NULL, "types",
						   "You may pass at most 20 event types in `types` (%s)", name);
				return -1;
			}
			q->types[q->ntypes++] = val;
		}
	}
	if (q->after && q->before)
	{
		stripe_msg(req, 400, NULL, NULL, "You may only specify one of these parameters: %s.",
				   "starting_after, ending_before");
		return -1;
	}
	if (q->type && q->ntypes)
	{
		stripe_msg(req, 400, NULL, "types", "You may only specify one of these parameters: %s.",
				   "type, types");
		return -1;
	}
	if (q->status)
	{
		const char *allowed = spec->type == OT_SUB ?
		"active all canceled ended incomplete incomplete_expired past_due paused trialing unpaid" :
		spec->type == OT_INVOICE ? "draft open paid uncollectible void" :
		"complete expired open";

		if (!one_of(q->status, allowed))
		{
			char		msg[256];

			snprintf(msg, sizeof(msg), "Invalid status: must be one of %s", allowed);
			api_stripe_error(req, 400, "invalid_request_error", NULL, "status", msg);
			return -1;
		}
	}
	return 0;
}

/* Stripe's type filter: an exact name, or a group with `*` wildcards. */
static int
type_matches(const char *pattern, const char *type)
{
	while (*pattern)
	{
		if (*pattern == '*')
		{
			pattern++;
			if (*pattern == '\0')
				return 1;
			for (; *type; type++)
				if (type_matches(pattern, type))
					return 1;
			return 0;
		}
		if (*pattern++ != *type++)
			return 0;
	}
	return *type == '\0';
}

static int
object_matches(const sim_model *m, const sim_object *o, const list_query *q)
{
	const char *st = obj_status_name(o);
	const char *pi = o->parent >= 0 ? m->objs[o->parent].id :
	o->type == OT_PI ? o->id : NULL;

	if (o->created < q->lo || o->created > q->hi)
		return 0;
	if (o->account != q->account)
		return 0;
	if (o->type == OT_CUSTOMER && o->deleted)
		return 0;
	if (o->type == OT_SUB)
	{
		if (q->status == NULL)
		{
			if (strcmp(st, "canceled") == 0)	/* only on request */
				return 0;
		}
		else if (strcmp(q->status, "all") == 0)
			;
		else if (strcmp(q->status, "ended") == 0)
		{
			if (strcmp(st, "canceled") != 0 && strcmp(st, "incomplete_expired") != 0)
				return 0;
		}
		else if (strcmp(q->status, st) != 0)
			return 0;
	}
	else if (q->status && (st == NULL || strcmp(q->status, st) != 0))
		return 0;
	if (q->customer && strcmp(q->customer, o->customer) != 0)
		return 0;
	if (q->payment_intent && (pi == NULL || strcmp(q->payment_intent, pi) != 0))
		return 0;
	if (q->charge && (o->charge < 0 || strcmp(q->charge, m->objs[o->charge].id) != 0))
		return 0;
	if (q->email)
	{
		char		email[80];

		snprintf(email, sizeof(email), "%s@example.com", o->id + 4);
		if (strcmp(q->email, email) != 0)
			return 0;
	}
	return 1;
}

static int
event_matches(const sim_stored_event *e, const list_query *q, int64_t oldest)
{
	int			i;

	if (e->created < oldest || e->created < q->lo || e->created > q->hi)
		return 0;
	if (e->account != q->account)
		return 0;
	if (q->type && !type_matches(q->type, e->type))
		return 0;
	if (q->ntypes)
	{
		for (i = 0; i < q->ntypes; i++)
			if (strcmp(q->types[i], e->type) == 0)
				return 1;
		return 0;
	}
	return 1;
}

/* A list's entries in creation order, with the filter of one request. */
typedef struct list_view
{
	sim_model  *m;
	const list_spec *spec;
	const list_query *q;
	int64_t		oldest;			/* events: retention */
} list_view;

static long
view_count(const list_view *v)
{
	return v->spec->type < 0 ? v->m->nevents : v->m->norder[v->spec->type];
}

static int
view_matches(const list_view *v, long pos)
{
	if (v->spec->type < 0)
		return event_matches(&v->m->events[pos], v->q, v->oldest);
	return object_matches(v->m, &v->m->objs[v->m->order[v->spec->type][pos]], v->q);
}

static void
view_render(const list_view *v, long pos, sbuf *b)
{
	if (v->spec->type < 0)
		sb_puts(b, v->m->events[pos].body);
	else
		render_object(v->m, b, &v->m->objs[v->m->order[v->spec->type][pos]]);
}

/* Position of a cursor id in the view, or -1. */
static long
view_find(const list_view *v, const char *id)
{
	long		k;

	if (v->spec->type < 0)
		return idmap_get(&v->m->event_ids, id);
	k = model_find_object(v->m, (obj_type) v->spec->type, id);
	return k < 0 ? -1 : v->m->objs[k].pos;
}

/*
 * The page: up to limit matching positions from start on, stepping step
 * (1 or -1) within [0, n), appended to page; whether one more matched.
 */
static int
collect_page(const list_view *v, long start, int step, long n, long limit, long *page, long *got)
{
	long		i;

	for (i = start; i >= 0 && i < n; i += step)
	{
		if (!view_matches(v, i))
			continue;
		if (*got == limit)
			return 1;
		page[(*got)++] = i;
	}
	return 0;
}

static const char *
noun(const list_spec *spec)
{
	return spec->type < 0 ? "event" : obj_type_name((obj_type) spec->type);
}

static void
handle_list(sim_api *api, struct evhttp_request *req, const list_spec *spec, sim_params *ps,
			int account)
{
	list_query	q;
	list_view	v;
	long		n,
				pos,
				got = 0,
			   *page;
	int			has_more = 0;
	sbuf		b;

	if (check_names(req, ps, spec->sdk_params, spec->implemented, 1) != 0 ||
		parse_query(req, ps, spec, &q) != 0)
		return;
	q.account = account;
	v.m = api->model;
	v.spec = spec;
	v.q = &q;
	v.oldest = now_epoch() - STRIPE_EVENT_RETENTION;
	n = view_count(&v);
	page = xcalloc((size_t) q.limit, sizeof(long));
	if (q.after || q.before)
	{
		const char *cur = q.after ? q.after : q.before;

		pos = view_find(&v, cur);
		if (pos < 0)
		{
			char		msg[256];

			snprintf(msg, sizeof(msg), "No such %s: '%s'", noun(spec), cur);
			api_stripe_error(req, 400, "invalid_request_error", "resource_missing",
							 q.after ? "starting_after" : "ending_before", msg);
			free(page);
			return;
		}
	}
	else
		pos = n;
	if (q.before)
	{
		/* the page just newer than the cursor, still shown newest first */
		long		i;

		has_more = collect_page(&v, pos + 1, 1, n, q.limit, page, &got);
		for (i = 0; i < got / 2; i++)
		{
			long		t = page[i];

			page[i] = page[got - 1 - i];
			page[got - 1 - i] = t;
		}
	}
	else
		has_more = collect_page(&v, pos - 1, -1, n, q.limit, page, &got);
	sb_init(&b);
	sb_puts(&b, "{\"object\":\"list\",\"data\":[");
	for (pos = 0; pos < got; pos++)
	{
		if (pos)
			sb_putc(&b, ',');
		view_render(&v, page[pos], &b);
	}
	sb_printf(&b, "],\"has_more\":%s,\"url\":\"/v1/%s\"}", has_more ? "true" : "false", spec->path);
	api_reply(req, 200, b.data);
	sb_free(&b);
	free(page);
}

static void
handle_retrieve(sim_api *api, struct evhttp_request *req, const list_spec *spec,
				const char *id, sim_params *ps, int account)
{
	sim_model  *m = api->model;
	long		k;
	sbuf		b;

	if (check_names(req, ps, "expand", "", 0) != 0)
		return;
	sb_init(&b);
	if (spec->type < 0)
	{
		k = idmap_get(&m->event_ids, id);
		if (k >= 0 && m->events[k].created >= now_epoch() - STRIPE_EVENT_RETENTION &&
			m->events[k].account == account)
			sb_puts(&b, m->events[k].body);
		else
			k = -1;
	}
	else
	{
		k = model_find_object(m, (obj_type) spec->type, id);
		/* another account's object is missing, as a deleted one is */
		if (k >= 0 && m->objs[k].account != account)
			k = -1;
		if (k >= 0)
			render_object(m, &b, &m->objs[k]);
	}
	if (k < 0)
	{
		char		msg[256];

		snprintf(msg, sizeof(msg), "No such %s: '%s'", noun(spec), id);
		api_stripe_error(req, 404, "invalid_request_error", "resource_missing", "id", msg);
	}
	else
		api_reply(req, 200, b.data);
	sb_free(&b);
}

/* ---------- Connect ---------- */

/*
 * The account a request acts for: Stripe-Account, or the last segment of
 * Stripe-Context's path; 0 for the platform.  -1 with the error answered.
 */
static int
request_account(sim_api *api, struct evhttp_request *req, int *account)
{
	struct evkeyvalq *in = evhttp_request_get_input_headers(req);
	const char *acct = evhttp_find_header(in, "Stripe-Account");
	const char *ctx = evhttp_find_header(in, "Stripe-Context");
	const char *id = acct;
	char		msg[512];

	*account = 0;
	if (acct && ctx)
	{
		api_stripe_error(req, 400, "invalid_request_error", NULL, NULL,
						 "Requests may name a Stripe-Account or a Stripe-Context, not both.");
		return -1;
	}
	if (ctx)
		id = strrchr(ctx, '/') ? strrchr(ctx, '/') + 1 : ctx;
	if (id == NULL)
		return 0;
	*account = model_account_of(api->model, id);
	if (*account <= 0)
	{
		snprintf(msg, sizeof(msg), "The provided key does not have access to account '%.64s' (or that "
				 "account does not exist). Application access may have been revoked.", id);
		api_stripe_error(req, 403, "invalid_request_error", "account_invalid", NULL, msg);
		return -1;
	}
	return 0;
}

static void
render_account(const sim_model *m, int i, sbuf *b)
{
	sb_printf(b, "{\"id\":\"%s\",\"object\":\"account\",\"type\":\"custom\",\"business_type\":\"company\","
			  "\"charges_enabled\":true,\"payouts_enabled\":true,\"details_submitted\":true,"
			  "\"country\":\"US\",\"default_currency\":\"usd\",\"created\":%lld}",
			  m->accounts[i], (long long) m->account_created[i]);
}

/* GET /v1/accounts[/{id}]: the platform's connected accounts, newest first. */
static void
handle_accounts(sim_api *api, struct evhttp_request *req, const char *rest, sim_params *ps,
				int account)
{
	sim_model  *m = api->model;
	const char *lim = params_get(ps, "limit");
	const char *after = params_get(ps, "starting_after");
	const char *before = params_get(ps, "ending_before");
	int64_t		limit = 10;
	int			pos = m->naccounts;	/* newest first: index naccounts-1 down to 0 */
	int			got = 0;
	int			has_more = 0;
	sbuf		b;

	if (rest[0] == '/')
	{
		int			i = model_account_of(m, rest + 1);

		if (check_names(req, ps, "expand", "", 0) != 0)
			return;
		sb_init(&b);
		if (i <= 0 || (account != 0 && account != i))
		{
			sb_printf(&b, "No such account: '%.64s'", rest + 1);
			api_stripe_error(req, 404, "invalid_request_error", "resource_missing", "account", b.data);
		}
		else
		{
			render_account(m, i - 1, &b);
			api_reply(req, 200, b.data);
		}
		sb_free(&b);
		return;
	}
	if (check_names(req, ps, "created expand", "", 1) != 0)
		return;
	if (lim && parse_int64(lim, 1, 100, &limit) != 0)
	{
		stripe_msg(req, 400, "parameter_invalid_integer", "limit",
				   "Invalid integer: %s (limit must be between 1 and 100)", lim);
		return;
	}
	if (after || before)
	{
		int			i = model_account_of(m, after ? after : before);

		if (i <= 0)
		{
			char		msg[256];

			snprintf(msg, sizeof(msg), "No such account: '%.64s'", after ? after : before);
			api_stripe_error(req, 400, "invalid_request_error", "resource_missing",
							 after ? "starting_after" : "ending_before", msg);
			return;
		}
		pos = i - 1;
	}
	sb_init(&b);
	sb_puts(&b, "{\"object\":\"list\",\"data\":[");
	/* a connected account lists none (it is not a platform) */
	if (account == 0 && before)
	{
		int			lo = pos + 1;
		int			hi = pos + (int) limit;

		if (hi > m->naccounts - 1)
			hi = m->naccounts - 1;
		has_more = hi < m->naccounts - 1;
		for (int i = hi; i >= lo; i--)
		{
			if (got++)
				sb_putc(&b, ',');
			render_account(m, i, &b);
		}
	}
	else if (account == 0)
	{
		for (int i = pos - 1; i >= 0; i--)
		{
			if (got == limit)
			{
				has_more = 1;
				break;
			}
			if (got++)
				sb_putc(&b, ',');
			render_account(m, i, &b);
		}
	}
	sb_printf(&b, "],\"has_more\":%s,\"url\":\"/v1/accounts\"}", has_more ? "true" : "false");
	api_reply(req, 200, b.data);
	sb_free(&b);
}

/* ---------- routing ---------- */

static void
stripe_handle(sim_api *api, struct evhttp_request *req, const char *path, const char *query)
{
	enum evhttp_cmd_type method = evhttp_request_get_command(req);
	const char *rest = path + 4;	/* after /v1/ */
	sim_params	ps;
	size_t		i;
	int			account;

	if (params_parse(query, query ? strlen(query) : 0, &ps) != 0)
	{
		api_stripe_error(req, 400, "invalid_request_error", NULL, NULL,
						 "Invalid query string: bad percent-encoding");
		return;
	}
	if (request_account(api, req, &account) != 0)
	{
		params_free(&ps);
		return;
	}
	if (strncmp(rest, "accounts", 8) == 0 && (rest[8] == '\0' || (rest[8] == '/' && rest[9] != '\0' &&
																	 strchr(rest + 9, '/') == NULL)) &&
		method == EVHTTP_REQ_GET)
	{
		handle_accounts(api, req, rest + 8, &ps, account);
		params_free(&ps);
		return;
	}
	for (i = 0; i < sizeof(list_specs) / sizeof(list_specs[0]); i++)
	{
		const list_spec *spec = &list_specs[i];
		size_t		n = strlen(spec->path);

		if (strncmp(rest, spec->path, n) != 0 || (rest[n] != '\0' && rest[n] != '/'))
			continue;
		if (rest[n] == '\0' && method == EVHTTP_REQ_GET)
			handle_list(api, req, spec, &ps, account);
		else if (rest[n] == '\0' && method == EVHTTP_REQ_POST && spec->type == OT_REFUND)
		{
			if (ps.n > 0)
				stripe_msg(req, 400, "parameter_unknown", ps.p[0].name,
						   "Received unknown parameter: %s (POST parameters go in the form body)",
						   ps.p[0].name);
			else
				stripe_handle_refund(api, req, path, account);
		}
		else if (rest[n] == '/' && rest[n + 1] != '\0' && strchr(rest + n + 1, '/') == NULL &&
				 method == EVHTTP_REQ_GET)
			handle_retrieve(api, req, spec, rest + n + 1, &ps, account);
		else
			break;
		params_free(&ps);
		return;
	}
	params_free(&ps);
	{
		char		msg[512];

		snprintf(msg, sizeof(msg), "Unrecognized request URL (%s: %s). Please see https://stripe.com/docs "
				 "or we can help at https://support.stripe.com/.",
				 method == EVHTTP_REQ_POST ? "POST" : method == EVHTTP_REQ_GET ? "GET" : "OTHER", path);
		api_stripe_error(req, 404, "invalid_request_error", NULL, NULL, msg);
	}
}

/* ---------- the provider ---------- */

/* Stripe serves /v1/ only: anything else is 404 before authentication. */
static int
stripe_reject(struct evhttp_request *req, const char *path)
{
	sbuf		b;

	if (strncmp(path, "/v1/", 4) == 0)
		return 0;
	sb_init(&b);
	sb_printf(&b, "Unrecognized request URL (%s: %s).",
			  evhttp_request_get_command(req) == EVHTTP_REQ_POST ? "POST" : "GET", path);
	api_stripe_error(req, 404, "invalid_request_error", NULL, NULL, b.data);
	sb_free(&b);
	return 1;
}

static int
stripe_authorized(sim_api *api, struct evhttp_request *req)
{
	return api_token_authorized(api, req, 0);
}

static void
stripe_reply_error(struct evhttp_request *req, int code, const char *message)
{
	api_stripe_error(req, code,
					 code == 429 ? "rate_limit_error" :
					 code >= 500 ? "api_error" : "invalid_request_error",
					 code == 429 ? "rate_limit" : NULL, NULL, message);
}

/*
 * Counters: a GET of one object (its id counted), a list, or a refund POST
 * (its Idempotency-Key counted); whose credentials each request carried.
 */
static void
stripe_count(sim_api *api, struct evhttp_request *req, const char *path)
{
	enum evhttp_cmd_type method = evhttp_request_get_command(req);
	const char *rest = NULL;
	int			t;

	for (t = 0; t <= OT__COUNT; t++)
	{
		const char *coll = t == OT__COUNT ? "events" : obj_type_path((obj_type) t);
		size_t		n = strlen(coll);

		if (t == OT_ORDER || strncmp(path + 4, coll, n) != 0)
			continue;
		if (path[4 + n] == '\0')
			rest = "";
		else if (path[4 + n] == '/')
			rest = path + 5 + n;
		break;
	}
	if (strcmp(path, "/v1/accounts") == 0 && method == EVHTTP_REQ_GET)
		api->account_lists++;
	else
	{
		/* whose credentials each Stripe request carried: Stripe-Account, Stripe-Context or the platform's */
		struct evkeyvalq *in = evhttp_request_get_input_headers(req);
		const char *acct = evhttp_find_header(in, "Stripe-Account");
		const char *ctx = evhttp_find_header(in, "Stripe-Context");
		sbuf		k;

		sb_init(&k);
		if (acct)
			sb_puts(&k, acct);
		else if (ctx)
			sb_printf(&k, "context:%s", ctx);
		else
			sb_puts(&k, "platform");
		api_count(&api->scopes, k.data);
		sb_free(&k);
	}
	if (rest == NULL)
		return;
	if (*rest && method == EVHTTP_REQ_GET)
		api_count(&api->fetches, rest);
	else if (*rest == '\0' && method == EVHTTP_REQ_GET)
		api->lists++;
	else if (*rest == '\0' && method == EVHTTP_REQ_POST && strcmp(path, "/v1/refunds") == 0)
	{
		const char *key = evhttp_find_header(evhttp_request_get_input_headers(req), "Idempotency-Key");

		if (key && *key)
			api_count(&api->effects, key);
	}
}

/* last in api.c's table: every path no other provider owns */
const sim_provider stripe_provider = {
	.name = "stripe",
	.reject = stripe_reject,
	.authorized = stripe_authorized,
	.reply_error = stripe_reply_error,
	.unauthorized = "Invalid API Key provided",
	.count = stripe_count,
	.handle = stripe_handle,
	.limit = limits_stripe,
};
