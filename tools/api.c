/*
 * api.c
 *		HTTP server of webhook-sim (see api.h): routing, authentication,
 *		request log, counters, injected faults and the /_sim/ endpoints.  The
 *		providers' endpoints are in stripe_api.c, shopify_api.c and
 *		github_api.c.
 *
 * Request flow: log the request line, check auth, count the request (fetch
 * counters and effect-key counters count every arrival, faulted ones
 * included), draw injected faults, then dispatch.  A "slow" fault re-enters
 * dispatch from a timer; libevent frees a request whose client went away
 * once we answer it, so a late answer is always safe.
 *
 * Endpoints (all JSON):
 *   GET  /v1/{subscriptions|payment_intents|invoices|customers|refunds|
 *            disputes|charges|checkout/sessions|events}[/{id}]
 *   POST /v1/refunds                      (form-encoded, Idempotency-Key)
 *   GET  /admin/api/{version}/orders.json, /admin/api/{version}/orders/{id}.json
 *   GET  /repos/{owner}/{repo}/{issues|pulls}[/{number}]
 *   POST /app/installations/{id}/access_tokens, GET /app/installations,
 *   GET  /installation/repositories       (a GitHub App: github_app.c)
 *   GET  /_sim/status, /_sim/truth, /_sim/counters, /_sim/faults
 *   POST /_sim/counters/reset, /_sim/faults;  DELETE /_sim/faults
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "api_int.h"
#include "json.h"
#include "webhook_inbox_hex.h"

#define MAX_BODY (1024 * 1024)

typedef struct slow_req
{
	sim_api    *api;
	struct evhttp_request *req;
	struct event *timer;
} slow_req;

/*
 * The providers, each path to the first that owns it; Stripe, last, takes the
 * rest.  /shops/ (a Shopify app's shops) and /_sim/ are routed before these.
 */
static const sim_provider *const providers[] = {
	&shopify_provider, &github_provider, &github_app_provider, &stripe_provider
};

static const sim_provider *
provider_of(const char *path)
{
	int			i;

	for (i = 0; providers[i]->owns != NULL; i++)
		if (providers[i]->owns(path))
			break;
	return providers[i];
}

/* ---------- routing helpers ---------- */

static int
starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static int
authorized(sim_api *api, struct evhttp_request *req, const sim_provider *prov)
{
	return api->api_token == NULL || prov->authorized(api, req);
}

/*
 * One line per provider API request: method and path?query as received, and
 * for a POST its form body.
 */
static void
log_request(sim_api *api, struct evhttp_request *req)
{
	static const char *const names[] = {"GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS",
	"TRACE", "CONNECT", "PATCH"};
	enum evhttp_cmd_type m = evhttp_request_get_command(req);
	const char *name = "OTHER";
	int			i;

	for (i = 0; i < 9; i++)
		if (m == (enum evhttp_cmd_type) (1 << i))
			name = names[i];
	if (api->request_times != NULL)
	{
		/* when it came (wall clock, to the microsecond), and whose account it named */
		struct timeval tv;
		const char *acct = evhttp_find_header(evhttp_request_get_input_headers(req), "Stripe-Account");

		gettimeofday(&tv, NULL);
		fprintf(api->request_times, "%ld.%06ld %s %s %s\n", (long) tv.tv_sec, (long) tv.tv_usec, name,
				evhttp_request_get_uri(req), acct ? acct : "-");
		fflush(api->request_times);
	}
	if (api->request_log == NULL)
		return;
	fprintf(api->request_log, "%s %s", name, evhttp_request_get_uri(req));
	if (m == EVHTTP_REQ_POST)
	{
		/* a form body is one line of name=value pairs: the effect's parameters */
		size_t		len;
		char	   *body = api_request_body(req, &len);

		if (len > 0 && strcspn(body, " \r\n") == len)
			fprintf(api->request_log, " %s", body);
		free(body);
	}
	fputc('\n', api->request_log);
	fflush(api->request_log);
}

static void
reply_fault(sim_api *api, struct evhttp_request *req, const sim_provider *prov, const fault_rule *f)
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
	prov->reply_error(req, code, code == 429 ? "Too many requests (injected)" :
				"Internal error (injected)");
}

/* ---------- /_sim/ ---------- */

/* One /_sim/truth entry's start: its comma, source and the tenant's name. */
static void
truth_open(sbuf *b, const sim_model *m, const sim_object *o, int *first)
{
	if (!*first)
		sb_putc(b, ',');
	*first = 0;
	sb_puts(b, "{\"source\":");
	sb_json_str(b, m->sources[o->source].name);
	sb_puts(b, ",\"tenant\":");
}

/*
 * The provider's truth: every object created so far (refunds, disputes and
 * charges included; deleted customers and orders too), and the occurrences
 * (refunds and disputes) with amount and currency.
 */
static void
handle_truth(sim_api *api, struct evhttp_request *req)
{
	sim_model  *m = api->model;
	sbuf		b;
	long		k;
	int			first = 1;

	sb_init(&b);
	sb_puts(&b, "{\"objects\":[");
	for (k = 0; k < m->nobjs; k++)
	{
		const sim_object *o = &m->objs[k];
		const char *st = obj_status_name(o);

		if (!o->exists)
			continue;
		truth_open(&b, m, o, &first);
		if ((o->type == OT_ISSUE || o->type == OT_PULL) &&
			github_app_repo_tenant(api, model_gh_repo(m, o)) != NULL)
			sb_json_str(&b, github_app_repo_tenant(api, model_gh_repo(m, o)));	/* an installation */
		else
			sb_json_str(&b, model_tenant_of(m, o));
		sb_printf(&b, ",\"type\":\"%s\",\"id\":\"%s\",\"status\":", obj_type_name(o->type), o->id);
		if (st)
			sb_printf(&b, "\"%s\"", st);
		else
			sb_puts(&b, "null");
		sb_puts(&b, ",\"version\":");
		if (o->type == OT_ORDER)
			sb_printf(&b, "%lld", (long long) o->updated_at);
		else
			sb_puts(&b, "null");
		sb_printf(&b, ",\"deleted\":%s}", o->deleted ? "true" : "false");
	}
	sb_puts(&b, "],\"occurrences\":[");
	first = 1;
	for (k = 0; k < m->nobjs; k++)
	{
		const sim_object *o = &m->objs[k];

		if (!o->exists || !obj_type_is_occurrence(o->type))
			continue;
		truth_open(&b, m, o, &first);
		sb_json_str(&b, model_tenant_of(m, o));
		sb_printf(&b, ",\"kind\":\"%s\",\"id\":\"%s\",\"amount\":%lld,\"currency\":\"%s\"}",
				  obj_type_name(o->type), o->id, (long long) o->amount, currency_name(o));
	}
	sb_puts(&b, "]}");
	api_reply(req, 200, b.data);
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
	sb_printf(&b, ",\"lists\":%ld,\"faulted\":%ld,\"graphql_throttled\":%ld,\"effects\":", api->lists,
			  api->faulted, api->gql_throttled);
	render_counts(&b, &api->effects);
	sb_puts(&b, ",\"scopes\":");
	render_counts(&b, &api->scopes);
	sb_printf(&b, ",\"account_lists\":%ld,\"rate_limited\":%ld,\"access_scope_queries\":%ld", api->account_lists,
			  api->rate_limited, api->scope_queries);
	sb_putc(&b, '}');
	api_reply(req, 200, b.data);
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
	char	   *body = api_request_body(req, &len);
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
		api_reply(req, 200, b.data);
		sb_free(&b);
	}
	jv_free(doc);
	free(body);
	return;

bad:
	api_stripe_error(req, 400, "invalid_request_error", NULL, NULL,
					 "Invalid fault: expected a JSON object with mode, status (400-599), "
					   "share (0-1), retry_after, ms, path_prefix, count (>= 1)");
	jv_free(doc);
	free(body);
}

static void
handle_sim(sim_api *api, struct evhttp_request *req, const char *path)
{
	enum evhttp_cmd_type method = evhttp_request_get_command(req);
	if (strcmp(path, "/_sim/status") == 0 && method == EVHTTP_REQ_GET)
	{
		sbuf		b;

		sb_init(&b);
		api->status(api->status_arg, &b);
		api_reply(req, 200, b.data);
		sb_free(&b);
	}
	else if (strcmp(path, "/_sim/truth") == 0 && method == EVHTTP_REQ_GET)
		handle_truth(api, req);
	else if (strcmp(path, "/_sim/shopify/schema") == 0 && method == EVHTTP_REQ_GET)
		shopify_graphql_schema(req);
	else if (strcmp(path, "/_sim/counters") == 0 && method == EVHTTP_REQ_GET)
		handle_counters(api, req);
	else if (strcmp(path, "/_sim/counters/reset") == 0 && method == EVHTTP_REQ_POST)
	{
		idmap_free(&api->fetches);
		idmap_free(&api->scopes);
		api->account_lists = 0;
		idmap_free(&api->effects);
		api->lists = 0;
		api->faulted = 0;
		api->gql_throttled = 0;
		api->rate_limited = 0;
		api->scope_queries = 0;
		api_reply(req, 200, "{\"ok\":true}");
	}
	else if (strcmp(path, "/_sim/faults") == 0 && method == EVHTTP_REQ_POST)
		handle_add_fault(api, req);
	else if (strcmp(path, "/_sim/faults") == 0 && method == EVHTTP_REQ_DELETE)
	{
		api->nfaults = 0;
		api_reply(req, 200, "{\"faults\":[]}");
	}
	else if (strcmp(path, "/_sim/faults") == 0 && method == EVHTTP_REQ_GET)
	{
		sbuf		b;

		sb_init(&b);
		render_faults(api, &b);
		api_reply(req, 200, b.data);
		sb_free(&b);
	}
	else
		stripe_provider.reply_error(req, 404, "Unknown simulator endpoint");
}


/* ---------- dispatch ---------- */

/* Parsed pieces of a request URI (freed by uri_parts_free). */
typedef struct uri_parts
{
	struct evhttp_uri *uri;
	char	   *path;
	const char *query;
} uri_parts;

static int
uri_parts_parse(struct evhttp_request *req, uri_parts *u)
{
	const char *p;

	memset(u, 0, sizeof(*u));
	u->uri = evhttp_uri_parse_with_flags(evhttp_request_get_uri(req), EVHTTP_URI_NONCONFORMANT);
	if (u->uri == NULL)
		return -1;
	p = evhttp_uri_get_path(u->uri);
	u->path = evhttp_uridecode(p && *p ? p : "/", 0, NULL);
	if (u->path == NULL)
		return -1;
	u->query = evhttp_uri_get_query(u->uri);
	return 0;
}

static void
uri_parts_free(uri_parts *u)
{
	free(u->path);
	if (u->uri)
		evhttp_uri_free(u->uri);
}

static void
dispatch(sim_api *api, struct evhttp_request *req)
{
	uri_parts	u;

	if (uri_parts_parse(req, &u) != 0)
		stripe_provider.reply_error(req, 400, "Malformed request URI");
	else
		provider_of(u.path)->handle(api, req, u.path, u.query);
	uri_parts_free(&u);
}

static void
slow_cb(evutil_socket_t fd, short what, void *arg)
{
	slow_req   *s = arg;

	(void) fd;
	(void) what;
	dispatch(s->api, s->req);
	event_free(s->timer);
	free(s);
}

static void
request_cb(struct evhttp_request *req, void *arg)
{
	sim_api    *api = arg;
	uri_parts	u;
	fault_rule *f;
	const sim_provider *prov;

	if (uri_parts_parse(req, &u) != 0)
	{
		stripe_provider.reply_error(req, 400, "Malformed request URI");
		goto done;
	}
	if (starts_with(u.path, "/_sim/github/"))
	{
		github_app_sim(api, req, u.path, u.query);
		goto done;
	}
	if (strcmp(u.path, "/_sim/shopify/shops") == 0)
	{
		shopify_shops_sim(api, req);
		goto done;
	}
	if (starts_with(u.path, "/_sim/"))
	{
		handle_sim(api, req, u.path);
		goto done;
	}
	log_request(api, req);
	if (starts_with(u.path, "/shops/"))
	{
		/* a Shopify app's shop: its own origin and token, no counters (shopify_api.c) */
		shopify_shop_handle(api, req, u.path, u.query);
		goto done;
	}
	prov = provider_of(u.path);
	if (prov->reject != NULL && prov->reject(req, u.path))
		goto done;
	if (!authorized(api, req, prov))
	{
		prov->reply_error(req, 401, prov->unauthorized);
		goto done;
	}
	if (prov->count != NULL)
		prov->count(api, req, u.path);
	/* past the provider's documented limits: its own refusal (limits.c) */
	if (api->rate_limit && prov->limit != NULL && !prov->limit(api, req, u.path))
		goto done;
	f = api_draw_fault(api, u.path, 0);
	if (f && f->mode == FAULT_SLOW)
	{
		slow_req   *s = xcalloc(1, sizeof(slow_req));
		struct timeval tv;

		s->api = api;
		s->req = req;
		s->timer = evtimer_new(api->base, slow_cb, s);
		tv.tv_sec = f->ms / 1000;
		tv.tv_usec = (f->ms % 1000) * 1000;
		evtimer_add(s->timer, &tv);
	}
	else if (f)
		reply_fault(api, req, prov, f);
	else
		dispatch(api, req);

done:
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
	api->rate_limit = opt->rate_limit;
	api->idem_ttl = opt->idempotency_ttl > 0 ? opt->idempotency_ttl : 86400;
	api->gql_max = opt->shopify_bucket_max > 0 ? opt->shopify_bucket_max : 2000;
	api->gql_rate = opt->shopify_bucket_rate > 0 ? opt->shopify_bucket_rate : 100;
	api->shopify_scopes = xstrdup(opt->shopify_scopes ? opt->shopify_scopes : "read_orders");
	{
		char	   *all = strstr(api->shopify_scopes, "read_all_orders");

		api->shopify_all_orders = all != NULL && (all == api->shopify_scopes || all[-1] == ',') &&
			(all[15] == '\0' || all[15] == ',');
	}
	shopify_shops_init(api, opt);
	api->gql = xcalloc((size_t) api->nshops + 1, sizeof(*api->gql));
	for (int i = 0; i <= api->nshops; i++)
	{
		api->gql[i].level = api->gql_max;
		api->gql[i].at = now_monotonic();
	}
	api->status = status;
	api->status_arg = status_arg;
	rng_seed(&api->fault_rng, opt->seed ^ 0xfa017ULL);
	if (opt->github_app.app_id != NULL &&
		(api->gh_app = gh_app_new(&opt->github_app, model->repo, opt->seed, err, errlen)) == NULL)
		goto err;
	if (opt->request_times)
	{
		api->request_times = fopen(opt->request_times, "w");
		if (api->request_times == NULL)
		{
			snprintf(err, errlen, "cannot open request times \"%s\"", opt->request_times);
			goto err;
		}
	}
	if (opt->request_log)
	{
		api->request_log = fopen(opt->request_log, "w");
		if (api->request_log == NULL)
		{
			snprintf(err, errlen, "cannot open request log \"%s\"", opt->request_log);
			goto err;
		}
	}
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
		free(api->idem[i].key);
		free(api->idem[i].path);
		free(api->idem[i].body);
		free(api->idem[i].response);
	}
	free(api->idem);
	if (api->request_log)
		fclose(api->request_log);
	if (api->request_times)
		fclose(api->request_times);
	limits_free(api);
	free(api->gql);
	idmap_free(&api->fetches);
	idmap_free(&api->scopes);
	free(api->shopify_scopes);
	idmap_free(&api->effects);
	idmap_free(&api->idem_index);
	shopify_shops_free(api);
	free(api->api_token);
	gh_app_free(api->gh_app);
	free(api);
}
