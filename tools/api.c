/*
 * api.c
 *		HTTP server of webhook-sim (see api.h).
 *
 * Request flow: decode the path into a route, check auth, count the request
 * (fetch counters and effect-key counters count every arrival, faulted ones
 * included), draw injected faults, then dispatch.  A "slow" fault re-enters
 * dispatch from a timer; libevent frees a request whose client went away
 * once we answer it, so a late answer is always safe.
 *
 * Endpoints (all JSON):
 *   GET  /v1/{subscriptions|payment_intents|refunds|disputes}/{id}
 *   GET  /v1/{collection}?updated_since=&limit=&starting_after=
 *   POST /v1/refunds                      (Idempotency-Key)
 *   GET  /v1/idempotency/{key}
 *   GET  /admin/api/{version}/orders/{id}.json
 *   GET  /admin/api/{version}/orders.json?updated_at_min=&limit=&page_info=
 *   GET  /_sim/status, /_sim/truth, /_sim/counters, /_sim/faults
 *   POST /_sim/counters/reset, /_sim/faults;  DELETE /_sim/faults
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "api.h"
#include "json.h"

#define MAX_FAULTS 64
#define MAX_BODY (1024 * 1024)

typedef enum route_kind
{
	R_NOT_FOUND,
	R_BAD_METHOD,
	R_GET,						/* one object or occurrence */
	R_LIST,
	R_REFUND,					/* POST /v1/refunds */
	R_IDEM,						/* GET /v1/idempotency/{key} */
	R_SHOP_GET,
	R_SHOP_LIST
} route_kind;

typedef struct route
{
	route_kind	kind;
	coll_id		coll;
	int			shopify;		/* Shopify-style path (auth, error format) */
	char	   *id;				/* decoded id or key, or NULL */
} route;

typedef struct idem_entry
{
	char	   *body;			/* exact request bytes */
	size_t		body_len;
	char	   *response;		/* stored 200 answer */
} idem_entry;

struct sim_api
{
	struct event_base *base;
	struct evhttp *http;
	sim_model  *model;
	char		host[128];
	int			port;
	char	   *api_token;
	int			no_effect_lookup;
	FILE	   *request_log;
	status_fn	status;
	void	   *status_arg;

	fault_rule	faults[MAX_FAULTS];
	int			nfaults;
	sim_rng		fault_rng;
	long		faulted;

	id_map		fetches;		/* id -> count */
	long		lists;
	id_map		effects;		/* idempotency key -> submissions */
	id_map		idem_index;		/* idempotency key -> index in idem */
	idem_entry *idem;
	long		nidem;
};

typedef struct slow_req
{
	sim_api    *api;
	struct evhttp_request *req;
	route		rt;
	struct event *timer;
} slow_req;

static const char *const coll_paths[COLL__COUNT] = {
	[COLL_SUB] = "subscriptions",
	[COLL_PAY] = "payment_intents",
	[COLL_ORDER] = "orders",
	[COLL_REFUND] = "refunds",
	[COLL_DISPUTE] = "disputes",
};

static const char *const coll_nouns[COLL__COUNT] = {
	[COLL_SUB] = "subscription",
	[COLL_PAY] = "payment_intent",
	[COLL_ORDER] = "order",
	[COLL_REFUND] = "refund",
	[COLL_DISPUTE] = "dispute",
};

/* ---------- replies ---------- */

static void
reply(struct evhttp_request *req, int code, const char *body)
{
	struct evbuffer *buf = evbuffer_new();
	const char *reason;

	switch (code)
	{
		case 200:
			reason = "OK";
			break;
		case 400:
			reason = "Bad Request";
			break;
		case 401:
			reason = "Unauthorized";
			break;
		case 404:
			reason = "Not Found";
			break;
		case 405:
			reason = "Method Not Allowed";
			break;
		case 429:
			reason = "Too Many Requests";
			break;
		case 503:
			reason = "Service Unavailable";
			break;
		default:
			reason = code >= 500 ? "Server Error" : "Error";
	}
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
	evbuffer_add(buf, body, strlen(body));
	evbuffer_add(buf, "\n", 1);
	evhttp_send_reply(req, code, reason, buf);
	evbuffer_free(buf);
}

/* Stripe-style error object. */
static void
reply_stripe_error(struct evhttp_request *req, int code, const char *type,
				   const char *errcode, const char *message)
{
	sbuf		b;

	sb_init(&b);
	sb_printf(&b, "{\"error\":{\"type\":\"%s\"", type);
	if (errcode)
		sb_printf(&b, ",\"code\":\"%s\"", errcode);
	sb_puts(&b, ",\"message\":");
	sb_json_str(&b, message);
	sb_puts(&b, "}}");
	reply(req, code, b.data);
	sb_free(&b);
}

static void
reply_error(struct evhttp_request *req, const route *rt, int code, const char *message)
{
	if (rt->shopify)
	{
		sbuf		b;

		sb_init(&b);
		sb_puts(&b, "{\"errors\":");
		sb_json_str(&b, message);
		sb_putc(&b, '}');
		reply(req, code, b.data);
		sb_free(&b);
	}
	else
		reply_stripe_error(req, code,
						   code == 429 ? "rate_limit_error" :
						   code >= 500 ? "api_error" : "invalid_request_error",
						   NULL, message);
}

/* ---------- routing ---------- */

static int
starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Fill rt from method and decoded path; rt->id is malloc'd or NULL. */
static void
route_request(enum evhttp_cmd_type method, const char *path, route *rt)
{
	int			c;

	memset(rt, 0, sizeof(*rt));
	rt->kind = R_NOT_FOUND;
	if (starts_with(path, "/admin/"))
	{
		const char *p;
		size_t		n;

		rt->shopify = 1;
		rt->coll = COLL_ORDER;
		if (!starts_with(path, "/admin/api/"))
			return;
		p = strchr(path + strlen("/admin/api/"), '/');
		if (p == NULL)
			return;
		if (strcmp(p, "/orders.json") == 0)
			rt->kind = R_SHOP_LIST;
		else if (starts_with(p, "/orders/") && (n = strlen(p)) > strlen("/orders/.json") &&
				 strcmp(p + n - 5, ".json") == 0 && strchr(p + 8, '/') == NULL)
		{
			rt->kind = R_SHOP_GET;
			rt->id = xstrndup(p + 8, n - 8 - 5);
		}
		if (rt->kind != R_NOT_FOUND && method != EVHTTP_REQ_GET)
			rt->kind = R_BAD_METHOD;
		return;
	}
	if (!starts_with(path, "/v1/"))
		return;
	path += 4;
	if (starts_with(path, "idempotency/") && path[12] != '\0' && strchr(path + 12, '/') == NULL)
	{
		rt->kind = method == EVHTTP_REQ_GET ? R_IDEM : R_BAD_METHOD;
		rt->id = xstrdup(path + 12);
		return;
	}
	for (c = 0; c < COLL__COUNT; c++)
	{
		size_t		n = strlen(coll_paths[c]);

		if (c == COLL_ORDER || strncmp(path, coll_paths[c], n) != 0)
			continue;
		rt->coll = (coll_id) c;
		if (path[n] == '\0')
		{
			if (method == EVHTTP_REQ_GET)
				rt->kind = R_LIST;
			else if (method == EVHTTP_REQ_POST && c == COLL_REFUND)
				rt->kind = R_REFUND;
			else
				rt->kind = R_BAD_METHOD;
		}
		else if (path[n] == '/' && path[n + 1] != '\0' && strchr(path + n + 1, '/') == NULL)
		{
			rt->kind = method == EVHTTP_REQ_GET ? R_GET : R_BAD_METHOD;
			rt->id = xstrdup(path + n + 1);
		}
		return;
	}
}

static int
authorized(sim_api *api, struct evhttp_request *req, const route *rt)
{
	struct evkeyvalq *in = evhttp_request_get_input_headers(req);
	const char *v;

	if (api->api_token == NULL)
		return 1;
	if (rt->shopify)
	{
		v = evhttp_find_header(in, "X-Shopify-Access-Token");
		return v != NULL && strcmp(v, api->api_token) == 0;
	}
	v = evhttp_find_header(in, "Authorization");
	return v != NULL && strncmp(v, "Bearer ", 7) == 0 && strcmp(v + 7, api->api_token) == 0;
}

static void
count(id_map *mp, const char *key)
{
	long		n = idmap_get(mp, key);

	idmap_put(mp, key, n < 0 ? 1 : n + 1);
}

/*
 * One line per provider API request: the method and path?query as received,
 * and for a POST its form body (one line of name=value pairs), so that a
 * checker can compare every request a client sent with the provider's SDK.
 */
static void
log_request(sim_api *api, struct evhttp_request *req)
{
	static const char *const names[] = {"GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS",
	"TRACE", "CONNECT", "PATCH"};
	enum evhttp_cmd_type m = evhttp_request_get_command(req);
	const char *name = "OTHER";
	int			i;

	if (api->request_log == NULL)
		return;
	for (i = 0; i < 9; i++)
		if (m == (enum evhttp_cmd_type) (1 << i))
			name = names[i];
	fprintf(api->request_log, "%s %s", name, evhttp_request_get_uri(req));
	if (m == EVHTTP_REQ_POST)
	{
		struct evbuffer *in = evhttp_request_get_input_buffer(req);
		size_t		len = evbuffer_get_length(in);
		char	   *body = xmalloc(len + 1);

		evbuffer_copyout(in, body, len);
		body[len] = '\0';
		if (len > 0 && strcspn(body, " \r\n") == len)
			fprintf(api->request_log, " %s", body);
		free(body);
	}
	fputc('\n', api->request_log);
	fflush(api->request_log);
}

/* ---------- faults ---------- */

static int
fault_matches(const fault_rule *f, const char *path)
{
	return f->count != 0 && starts_with(path, f->prefix);
}

/*
 * Draw the status and slow faults for one request.  Returns the rule that
 * fires (its count already taken), or NULL.
 */
static fault_rule *
draw_fault(sim_api *api, const char *path, int want_drop)
{
	int			i;

	for (i = 0; i < api->nfaults; i++)
	{
		fault_rule *f = &api->faults[i];

		if ((f->mode == FAULT_DROP) != want_drop || !fault_matches(f, path))
			continue;
		if (rng_double(&api->fault_rng) >= f->share)
			continue;
		if (f->count > 0)
			f->count--;
		api->faulted++;
		return f;
	}
	return NULL;
}

void
api_add_fault(sim_api *api, const fault_rule *rule)
{
	if (api->nfaults == MAX_FAULTS)
	{
		memmove(&api->faults[0], &api->faults[1], sizeof(fault_rule) * (MAX_FAULTS - 1));
		api->nfaults--;
	}
	api->faults[api->nfaults++] = *rule;
}

static void
reply_fault(sim_api *api, struct evhttp_request *req, const route *rt, const fault_rule *f)
{
	int			code = f->status;
	char		ra[16];

	if (code == 0)
		code = rng_below(&api->fault_rng, 2) ? 503 : 500;
	if ((code == 429 || code == 503) && f->retry_after > 0)
	{
		snprintf(ra, sizeof(ra), "%d", f->retry_after);
		evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", ra);
	}
	reply_error(req, rt, code, code == 429 ? "Too many requests (injected)" :
				"Internal error (injected)");
}

/* ---------- read API ---------- */

static long
find_entry(sim_api *api, coll_id c, const char *id, int *deleted)
{
	long		k;

	*deleted = 0;
	if (c == COLL_REFUND || c == COLL_DISPUTE)
		return model_find_occ(api->model, c == COLL_REFUND ? OC_REFUND : OC_DISPUTE, id);
	k = model_find_object(api->model, (obj_type) c, id);
	if (k >= 0 && api->model->objs[k].deleted)
		*deleted = 1;
	return k;
}

static void
handle_get(sim_api *api, struct evhttp_request *req, const route *rt)
{
	int			deleted;
	long		k = find_entry(api, rt->coll, rt->id, &deleted);
	sbuf		b;

	sb_init(&b);
	if (k < 0 || deleted)
	{
		if (rt->shopify)
			reply(req, 404, "{\"errors\":\"Not Found\"}");
		else
		{
			sb_printf(&b, "No such %s: '%s'", coll_nouns[rt->coll], rt->id);
			reply_stripe_error(req, 404, "invalid_request_error", "resource_missing", b.data);
		}
		sb_free(&b);
		return;
	}
	if (rt->shopify)
		sb_puts(&b, "{\"order\":");
	if (rt->coll == COLL_REFUND || rt->coll == COLL_DISPUTE)
		render_occurrence(api->model, &b, &api->model->occs[k], 1);
	else
		render_object(&b, &api->model->objs[k], 1);
	if (rt->shopify)
		sb_putc(&b, '}');
	reply(req, 200, b.data);
	sb_free(&b);
}

static void
render_entry(sim_api *api, sbuf *b, coll_id c, long idx)
{
	if (c == COLL_REFUND || c == COLL_DISPUTE)
		render_occurrence(api->model, b, &api->model->occs[idx], 1);
	else if (api->model->objs[idx].deleted)
		render_tombstone(b, &api->model->objs[idx]);
	else
		render_object(b, &api->model->objs[idx], 1);
}

static int
parse_limit(const char *s, long dflt, long max, long *out)
{
	int64_t		v;

	if (s == NULL)
	{
		*out = dflt;
		return 0;
	}
	if (parse_int64(s, 1, max, &v) != 0)
		return -1;
	*out = (long) v;
	return 0;
}

static void
handle_list(sim_api *api, struct evhttp_request *req, const route *rt,
			struct evkeyvalq *q)
{
	const char *since_s = evhttp_find_header(q, "updated_since");
	const char *after = evhttp_find_header(q, "starting_after");
	int64_t		since = 0;
	long		limit,
				n,
				i,
			   *out;
	int			has_more;
	sbuf		b;

	if (since_s && parse_int64(since_s, 0, INT64_MAX / 2, &since) != 0)
	{
		reply_stripe_error(req, 400, "invalid_request_error", "parameter_invalid_integer",
						   "Invalid updated_since: must be an integer of epoch seconds");
		return;
	}
	if (parse_limit(evhttp_find_header(q, "limit"), 10, 100, &limit) != 0)
	{
		reply_stripe_error(req, 400, "invalid_request_error", "parameter_invalid_integer",
						   "Invalid limit: must be an integer between 1 and 100");
		return;
	}
	out = xcalloc((size_t) limit, sizeof(long));
	n = model_list(api->model, rt->coll, since, after, limit, out, &has_more);
	sb_init(&b);
	sb_printf(&b, "{\"object\":\"list\",\"url\":\"/v1/%s\",\"has_more\":%s,\"data\":[",
			  coll_paths[rt->coll], has_more ? "true" : "false");
	for (i = 0; i < n; i++)
	{
		if (i)
			sb_putc(&b, ',');
		render_entry(api, &b, rt->coll, out[i]);
	}
	sb_puts(&b, "]}");
	reply(req, 200, b.data);
	sb_free(&b);
	free(out);
}

/*
 * Shopify cursor: "s<since>a<last id>"; it carries the filter, as Shopify's
 * page_info does, so later pages need only limit and page_info.
 */
static void
handle_shop_list(sim_api *api, struct evhttp_request *req, const route *rt,
				 struct evkeyvalq *q, const char *path)
{
	const char *min_s = evhttp_find_header(q, "updated_at_min");
	const char *page = evhttp_find_header(q, "page_info");
	char		after[SIM_ID_LEN] = "";
	int64_t		since = 0;
	long		limit,
				n,
				i,
			   *out;
	int			has_more;
	sbuf		b;

	if (parse_limit(evhttp_find_header(q, "limit"), 50, 250, &limit) != 0)
	{
		reply_error(req, rt, 400, "limit must be between 1 and 250");
		return;
	}
	if (page)
	{
		long long	s;
		int			used = 0;

		if (sscanf(page, "s%llda%n", &s, &used) != 1 || used == 0 ||
			strlen(page + used) == 0 || strlen(page + used) >= sizeof(after) ||
			strspn(page + used, "0123456789") != strlen(page + used))
		{
			reply_error(req, rt, 400, "Invalid page_info");
			return;
		}
		since = s;
		snprintf(after, sizeof(after), "%s", page + used);
	}
	else if (min_s && parse_iso_time(min_s, &since) != 0)
	{
		reply_error(req, rt, 400, "Invalid updated_at_min");
		return;
	}
	out = xcalloc((size_t) limit, sizeof(long));
	n = model_list(api->model, COLL_ORDER, since, after[0] ? after : NULL, limit, out, &has_more);
	sb_init(&b);
	sb_puts(&b, "{\"orders\":[");
	for (i = 0; i < n; i++)
	{
		if (i)
			sb_putc(&b, ',');
		render_entry(api, &b, COLL_ORDER, out[i]);
	}
	sb_puts(&b, "]}");
	if (has_more && n > 0)
	{
		sbuf		link;

		sb_init(&link);
		sb_printf(&link, "<http://%s:%d%s?limit=%ld&page_info=s%llda%s>; rel=\"next\"",
				  api->host, api->port, path, limit, (long long) since,
				  api->model->objs[out[n - 1]].id);
		evhttp_add_header(evhttp_request_get_output_headers(req), "Link", link.data);
		sb_free(&link);
	}
	reply(req, 200, b.data);
	sb_free(&b);
	free(out);
}

/* ---------- effects ---------- */

static char *
request_body(struct evhttp_request *req, size_t *len)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t		n = evbuffer_get_length(in);
	char	   *body = xmalloc(n + 1);

	evbuffer_copyout(in, body, n);
	body[n] = '\0';
	*len = n;
	return body;
}

/*
 * Extract payment_intent and amount from a JSON or form body.  Returns 0 and
 * malloc'd *pi (or NULL when absent) and *amount (-1 when absent), or -1 for
 * an unparseable body or a malformed amount.
 */
static int
parse_refund_body(const char *body, size_t len, char **pi, int64_t *amount)
{
	const char *amount_s = NULL;
	int			rc = -1;
	jv		   *doc = NULL;
	struct evkeyvalq form;
	int			have_form = 0;
	size_t		i = 0;

	*pi = NULL;
	*amount = -1;
	while (i < len && (body[i] == ' ' || body[i] == '\n' || body[i] == '\r' || body[i] == '\t'))
		i++;
	if (i < len && body[i] == '{')
	{
		const jv   *a;

		doc = jv_parse(body, len, NULL, 0);
		if (doc == NULL)
			goto err;
		if (jv_string(jv_get(doc, "payment_intent")))
			*pi = xstrdup(jv_string(jv_get(doc, "payment_intent")));
		a = jv_get(doc, "amount");
		if (a && (a->type == JV_NUM || a->type == JV_STR))
			amount_s = a->str;
		else if (a)
			goto err;
	}
	else
	{
		if (memchr(body, '\0', len) != NULL || evhttp_parse_query_str(body, &form) != 0)
			goto err;
		have_form = 1;
		if (evhttp_find_header(&form, "payment_intent"))
			*pi = xstrdup(evhttp_find_header(&form, "payment_intent"));
		amount_s = evhttp_find_header(&form, "amount");
	}
	if (amount_s && parse_int64(amount_s, 1, INT64_MAX / 2, amount) != 0)
		goto err;
	rc = 0;

err:
	if (have_form)
		evhttp_clear_headers(&form);
	jv_free(doc);
	if (rc != 0)
	{
		free(*pi);
		*pi = NULL;
	}
	return rc;
}

/* Close the client's connection without an answer (the effect happened). */
static void
drop_connection(struct evhttp_request *req)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;

	if (bev && bufferevent_getfd(bev) >= 0)
		shutdown(bufferevent_getfd(bev), SHUT_RDWR);
	/* nothing can reach the client now; this only lets libevent clean up */
	evhttp_send_reply(req, 200, "OK", NULL);
}

static void
handle_refund(sim_api *api, struct evhttp_request *req, const route *rt,
			  const char *path)
{
	const char *key = evhttp_find_header(evhttp_request_get_input_headers(req), "Idempotency-Key");
	size_t		len;
	char	   *body = request_body(req, &len);
	char	   *pi = NULL;
	int64_t		amount;
	long		k,
				occ;
	sbuf		b;

	(void) rt;
	sb_init(&b);
	if (key && *key)
	{
		long		e = idmap_get(&api->idem_index, key);

		if (e >= 0)
		{
			idem_entry *ie = &api->idem[e];

			if (ie->body_len == len && memcmp(ie->body, body, len) == 0)
				reply(req, 200, ie->response);
			else
			{
				sb_printf(&b, "Keys for idempotent requests can only be used with the same "
						  "parameters they were first used with. Try using a key other than "
						  "'%s' if you meant to execute a different request.", key);
				reply_stripe_error(req, 400, "idempotency_error", NULL, b.data);
			}
			goto done;
		}
	}
	if (parse_refund_body(body, len, &pi, &amount) != 0)
	{
		reply_stripe_error(req, 400, "invalid_request_error", "parameter_invalid",
						   "Invalid request body: expected JSON or form with payment_intent and amount");
		goto done;
	}
	if (pi == NULL)
	{
		reply_stripe_error(req, 400, "invalid_request_error", "parameter_missing",
						   "Missing required param: payment_intent.");
		goto done;
	}
	k = model_find_object(api->model, OT_PAY, pi);
	if (k < 0)
	{
		sb_printf(&b, "No such payment_intent: '%s'", pi);
		reply_stripe_error(req, 404, "invalid_request_error", "resource_missing", b.data);
		goto done;
	}
	if (amount < 0)
		amount = api->model->objs[k].amount;
	occ = model_effect_refund(api->model, k, amount, now_epoch());
	render_occurrence(api->model, &b, &api->model->occs[occ], 1);
	if (key && *key)
	{
		api->idem = xrealloc(api->idem, (size_t) (api->nidem + 1) * sizeof(idem_entry));
		api->idem[api->nidem].body = body;
		api->idem[api->nidem].body_len = len;
		api->idem[api->nidem].response = xstrdup(b.data);
		idmap_put(&api->idem_index, key, api->nidem);
		api->nidem++;
		body = NULL;			/* kept by the store */
	}
	if (draw_fault(api, path, 1) != NULL)
		drop_connection(req);
	else
		reply(req, 200, b.data);

done:
	free(pi);
	free(body);
	sb_free(&b);
}

static void
handle_idem(sim_api *api, struct evhttp_request *req, const route *rt)
{
	long		e = api->no_effect_lookup ? -1 : idmap_get(&api->idem_index, rt->id);
	sbuf		b;

	sb_init(&b);
	if (e < 0)
	{
		sb_printf(&b, "No such idempotency key: '%s'", rt->id);
		reply_stripe_error(req, 404, "invalid_request_error", "resource_missing", b.data);
	}
	else
	{
		sb_puts(&b, "{\"key\":");
		sb_json_str(&b, rt->id);
		sb_printf(&b, ",\"status\":\"done\",\"response\":%s}", api->idem[e].response);
		reply(req, 200, b.data);
	}
	sb_free(&b);
}

/* ---------- /_sim/ ---------- */

static void
handle_truth(sim_api *api, struct evhttp_request *req)
{
	sim_model  *m = api->model;
	sbuf		b;
	long		k;
	int			first = 1;

	sb_init(&b);
	sb_puts(&b, "{\"objects\":[");
	for (k = 0; k < m->ncreated; k++)
	{
		const sim_object *o = &m->objs[k];

		if (!o->exists)
			continue;
		if (!first)
			sb_putc(&b, ',');
		first = 0;
		sb_puts(&b, "{\"source\":");
		sb_json_str(&b, m->sources[o->source].name);
		sb_printf(&b, ",\"type\":\"%s\",\"id\":\"%s\",\"status\":\"%s\",\"version\":",
				  obj_type_name(o->type), o->id, obj_status_name(o));
		if (o->type == OT_ORDER)
			sb_printf(&b, "%lld", (long long) o->updated_at);
		else
			sb_puts(&b, "null");
		sb_printf(&b, ",\"deleted\":%s}", o->deleted ? "true" : "false");
	}
	sb_puts(&b, "],\"occurrences\":[");
	for (k = 0; k < m->nocc; k++)
	{
		const sim_occurrence *c = &m->occs[k];

		if (k)
			sb_putc(&b, ',');
		sb_puts(&b, "{\"source\":");
		sb_json_str(&b, m->sources[c->source].name);
		sb_printf(&b, ",\"kind\":\"%s\",\"id\":\"%s\",\"amount\":%lld,\"currency\":\"%s\"}",
				  occ_kind_name(c->kind), c->id, (long long) c->amount, occ_currency_name(c));
	}
	sb_puts(&b, "]}");
	reply(req, 200, b.data);
	sb_free(&b);
}

static void
render_counts(sbuf *b, const id_map *mp)
{
	size_t		i;
	int			first = 1;

	sb_putc(b, '{');
	for (i = 0; i < mp->cap; i++)
	{
		if (mp->keys[i] == NULL)
			continue;
		if (!first)
			sb_putc(b, ',');
		first = 0;
		sb_json_str(b, mp->keys[i]);
		sb_printf(b, ":%ld", mp->vals[i]);
	}
	sb_putc(b, '}');
}

static void
handle_counters(sim_api *api, struct evhttp_request *req)
{
	sbuf		b;

	sb_init(&b);
	sb_puts(&b, "{\"fetches\":");
	render_counts(&b, &api->fetches);
	sb_printf(&b, ",\"lists\":%ld,\"faulted\":%ld,\"effects\":", api->lists, api->faulted);
	render_counts(&b, &api->effects);
	sb_putc(&b, '}');
	reply(req, 200, b.data);
	sb_free(&b);
}

static void
render_faults(sim_api *api, sbuf *b)
{
	static const char *const modes[] = {"status", "slow", "drop_after_accept"};
	int			i;

	sb_puts(b, "{\"faults\":[");
	for (i = 0; i < api->nfaults; i++)
	{
		const fault_rule *f = &api->faults[i];

		if (i)
			sb_putc(b, ',');
		sb_printf(b, "{\"mode\":\"%s\",\"status\":%d,\"share\":%g,\"retry_after\":%d,"
				  "\"ms\":%d,\"path_prefix\":", modes[f->mode], f->status, f->share,
				  f->retry_after, f->ms);
		sb_json_str(b, f->prefix);
		sb_printf(b, ",\"count\":%ld}", f->count);
	}
	sb_puts(b, "]}");
}

/*
 * POST /_sim/faults: {"mode":"status"|"slow"|"drop_after_accept",
 * "status":429,"share":1.0,"retry_after":2,"ms":100,"path_prefix":"/v1/…",
 * "count":5}.  Everything optional; mode defaults to status (503 unless
 * given), share to 1, count to unlimited.
 */
static void
handle_add_fault(sim_api *api, struct evhttp_request *req)
{
	size_t		len;
	char	   *body = request_body(req, &len);
	char		err[128];
	jv		   *doc = jv_parse(body, len, err, sizeof(err));
	fault_rule	f;
	const jv   *v;
	const char *mode;

	memset(&f, 0, sizeof(f));
	f.mode = FAULT_STATUS;
	f.status = 503;
	f.share = 1.0;
	f.count = -1;
	if (doc == NULL || doc->type != JV_OBJ)
		goto bad;
	mode = jv_string(jv_get(doc, "mode"));
	if (mode == NULL || strcmp(mode, "status") == 0)
		f.mode = FAULT_STATUS;
	else if (strcmp(mode, "slow") == 0)
		f.mode = FAULT_SLOW;
	else if (strcmp(mode, "drop_after_accept") == 0)
		f.mode = FAULT_DROP;
	else
		goto bad;
	if ((v = jv_get(doc, "status")) != NULL)
	{
		if (v->type != JV_NUM || v->num < 400 || v->num > 599)
			goto bad;
		f.status = (int) v->num;
	}
	if ((v = jv_get(doc, "share")) != NULL)
	{
		if (v->type != JV_NUM || v->num < 0 || v->num > 1)
			goto bad;
		f.share = v->num;
	}
	if ((v = jv_get(doc, "retry_after")) != NULL)
	{
		if (v->type != JV_NUM || v->num < 0 || v->num > 86400)
			goto bad;
		f.retry_after = (int) v->num;
	}
	else if (f.status == 429)
		f.retry_after = 1;
	if ((v = jv_get(doc, "ms")) != NULL)
	{
		if (v->type != JV_NUM || v->num < 0 || v->num > 600000)
			goto bad;
		f.ms = (int) v->num;
	}
	if ((v = jv_get(doc, "count")) != NULL)
	{
		if (v->type != JV_NUM || v->num < 1)
			goto bad;
		f.count = (long) v->num;
	}
	if ((v = jv_get(doc, "path_prefix")) != NULL)
	{
		if (jv_string(v) == NULL || v->slen >= sizeof(f.prefix))
			goto bad;
		snprintf(f.prefix, sizeof(f.prefix), "%s", v->str);
	}
	api_add_fault(api, &f);
	{
		sbuf		b;

		sb_init(&b);
		render_faults(api, &b);
		reply(req, 200, b.data);
		sb_free(&b);
	}
	jv_free(doc);
	free(body);
	return;

bad:
	reply_stripe_error(req, 400, "invalid_request_error", NULL,
					   "Invalid fault: expected a JSON object with mode, status (400-599), "
					   "share (0-1), retry_after, ms, path_prefix, count (>= 1)");
	jv_free(doc);
	free(body);
}

static void
handle_sim(sim_api *api, struct evhttp_request *req, const char *path)
{
	enum evhttp_cmd_type method = evhttp_request_get_command(req);
	route		none;

	memset(&none, 0, sizeof(none));
	if (strcmp(path, "/_sim/status") == 0 && method == EVHTTP_REQ_GET)
	{
		sbuf		b;

		sb_init(&b);
		api->status(api->status_arg, &b);
		reply(req, 200, b.data);
		sb_free(&b);
	}
	else if (strcmp(path, "/_sim/truth") == 0 && method == EVHTTP_REQ_GET)
		handle_truth(api, req);
	else if (strcmp(path, "/_sim/counters") == 0 && method == EVHTTP_REQ_GET)
		handle_counters(api, req);
	else if (strcmp(path, "/_sim/counters/reset") == 0 && method == EVHTTP_REQ_POST)
	{
		idmap_free(&api->fetches);
		idmap_free(&api->effects);
		api->lists = 0;
		api->faulted = 0;
		reply(req, 200, "{\"ok\":true}");
	}
	else if (strcmp(path, "/_sim/faults") == 0 && method == EVHTTP_REQ_POST)
		handle_add_fault(api, req);
	else if (strcmp(path, "/_sim/faults") == 0 && method == EVHTTP_REQ_DELETE)
	{
		api->nfaults = 0;
		reply(req, 200, "{\"faults\":[]}");
	}
	else if (strcmp(path, "/_sim/faults") == 0 && method == EVHTTP_REQ_GET)
	{
		sbuf		b;

		sb_init(&b);
		render_faults(api, &b);
		reply(req, 200, b.data);
		sb_free(&b);
	}
	else
		reply_error(req, &none, 404, "Unknown simulator endpoint");
}

/* ---------- dispatch ---------- */

static void
dispatch(sim_api *api, struct evhttp_request *req, const route *rt,
		 const char *path, struct evkeyvalq *q)
{
	switch (rt->kind)
	{
		case R_GET:
		case R_SHOP_GET:
			handle_get(api, req, rt);
			break;
		case R_LIST:
			handle_list(api, req, rt, q);
			break;
		case R_SHOP_LIST:
			handle_shop_list(api, req, rt, q, path);
			break;
		case R_REFUND:
			handle_refund(api, req, rt, path);
			break;
		case R_IDEM:
			handle_idem(api, req, rt);
			break;
		case R_BAD_METHOD:
			reply_error(req, rt, 405, "Method not allowed");
			break;
		default:
			reply_error(req, rt, 404, "Unrecognized request URL");
	}
}

/* Parsed pieces of a request URI (freed by uri_parts_free). */
typedef struct uri_parts
{
	struct evhttp_uri *uri;
	char	   *path;
	struct evkeyvalq query;
	int			have_query;
} uri_parts;

static int
uri_parts_parse(struct evhttp_request *req, uri_parts *u)
{
	const char *p,
			   *qs;

	memset(u, 0, sizeof(*u));
	u->uri = evhttp_uri_parse_with_flags(evhttp_request_get_uri(req), 0);
	if (u->uri == NULL)
		return -1;
	p = evhttp_uri_get_path(u->uri);
	u->path = evhttp_uridecode(p && *p ? p : "/", 0, NULL);
	if (u->path == NULL)
		return -1;
	qs = evhttp_uri_get_query(u->uri);
	TAILQ_INIT(&u->query);
	if (qs && evhttp_parse_query_str(qs, &u->query) != 0)
		return -1;
	u->have_query = 1;
	return 0;
}

static void
uri_parts_free(uri_parts *u)
{
	if (u->have_query)
		evhttp_clear_headers(&u->query);
	free(u->path);
	if (u->uri)
		evhttp_uri_free(u->uri);
}

static void
slow_cb(evutil_socket_t fd, short what, void *arg)
{
	slow_req   *s = arg;
	uri_parts	u;

	(void) fd;
	(void) what;
	if (uri_parts_parse(s->req, &u) == 0)
		dispatch(s->api, s->req, &s->rt, u.path, &u.query);
	else
		reply_error(s->req, &s->rt, 400, "Malformed request URI");
	uri_parts_free(&u);
	event_free(s->timer);
	free(s->rt.id);
	free(s);
}

static void
request_cb(struct evhttp_request *req, void *arg)
{
	sim_api    *api = arg;
	uri_parts	u;
	route		rt;
	fault_rule *f;

	memset(&rt, 0, sizeof(rt));
	if (uri_parts_parse(req, &u) != 0)
	{
		reply_error(req, &rt, 400, "Malformed request URI");
		goto done;
	}
	if (starts_with(u.path, "/_sim/"))
	{
		handle_sim(api, req, u.path);
		goto done;
	}
	log_request(api, req);
	route_request(evhttp_request_get_command(req), u.path, &rt);
	if (rt.kind == R_NOT_FOUND || rt.kind == R_BAD_METHOD)
	{
		dispatch(api, req, &rt, u.path, &u.query);
		goto done;
	}
	if (!authorized(api, req, &rt))
	{
		reply_error(req, &rt, 401, rt.shopify ?
					"[API] Invalid API key or access token (unrecognized login or wrong password)" :
					"Invalid API Key provided");
		goto done;
	}
	if (rt.kind == R_GET || rt.kind == R_SHOP_GET)
		count(&api->fetches, rt.id);
	else if (rt.kind == R_LIST || rt.kind == R_SHOP_LIST)
		api->lists++;
	else if (rt.kind == R_REFUND)
	{
		const char *key = evhttp_find_header(evhttp_request_get_input_headers(req), "Idempotency-Key");

		if (key && *key)
			count(&api->effects, key);
	}
	f = draw_fault(api, u.path, 0);
	if (f && f->mode == FAULT_SLOW)
	{
		slow_req   *s = xcalloc(1, sizeof(slow_req));
		struct timeval tv;

		s->api = api;
		s->req = req;
		s->rt = rt;
		rt.id = NULL;			/* now owned by s */
		s->timer = evtimer_new(api->base, slow_cb, s);
		tv.tv_sec = f->ms / 1000;
		tv.tv_usec = (f->ms % 1000) * 1000;
		evtimer_add(s->timer, &tv);
	}
	else if (f)
		reply_fault(api, req, &rt, f);
	else
		dispatch(api, req, &rt, u.path, &u.query);

done:
	free(rt.id);
	uri_parts_free(&u);
}

sim_api *
api_start(struct event_base *base, sim_model *model, const char *host, int port,
		  const api_options *opt, status_fn status, void *status_arg,
		  char *err, size_t errlen)
{
	sim_api    *api = xcalloc(1, sizeof(sim_api));
	struct evhttp_bound_socket *bound;
	struct sockaddr_storage ss;
	socklen_t	sslen = sizeof(ss);

	api->base = base;
	api->model = model;
	snprintf(api->host, sizeof(api->host), "%s", host);
	api->api_token = opt->api_token ? xstrdup(opt->api_token) : NULL;
	api->no_effect_lookup = opt->no_effect_lookup;
	if (opt->request_log)
	{
		api->request_log = fopen(opt->request_log, "w");
		if (api->request_log == NULL)
		{
			snprintf(err, errlen, "cannot open request log \"%s\"", opt->request_log);
			goto err;
		}
	}
	api->status = status;
	api->status_arg = status_arg;
	rng_seed(&api->fault_rng, opt->seed ^ 0xfa017ULL);
	api->http = evhttp_new(base);
	if (api->http == NULL)
	{
		snprintf(err, errlen, "cannot create HTTP server");
		goto err;
	}
	evhttp_set_allowed_methods(api->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
							   EVHTTP_REQ_DELETE | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT);
	evhttp_set_max_body_size(api->http, MAX_BODY);
	evhttp_set_timeout(api->http, 60);
	evhttp_set_gencb(api->http, request_cb, api);
	bound = evhttp_bind_socket_with_handle(api->http, host, (unsigned short) port);
	if (bound == NULL)
	{
		snprintf(err, errlen, "cannot listen on %s:%d", host, port);
		goto err;
	}
	if (getsockname(evhttp_bound_socket_get_fd(bound), (struct sockaddr *) &ss, &sslen) == 0)
	{
		if (ss.ss_family == AF_INET)
			api->port = ntohs(((struct sockaddr_in *) &ss)->sin_port);
		else
			api->port = ntohs(((struct sockaddr_in6 *) &ss)->sin6_port);
	}
	else
		api->port = port;
	return api;

err:
	api_stop(api);
	return NULL;
}

int
api_port(const sim_api *api)
{
	return api->port;
}

void
api_stop(sim_api *api)
{
	long		i;

	if (api == NULL)
		return;
	if (api->http)
		evhttp_free(api->http);
	for (i = 0; i < api->nidem; i++)
	{
		free(api->idem[i].body);
		free(api->idem[i].response);
	}
	free(api->idem);
	if (api->request_log)
		fclose(api->request_log);
	idmap_free(&api->fetches);
	idmap_free(&api->effects);
	idmap_free(&api->idem_index);
	free(api->api_token);
	free(api);
}
