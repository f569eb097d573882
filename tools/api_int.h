/*
 * api_int.h
 *		What the simulator's HTTP files share among themselves (api.c is the
 *		server, routing and /_sim/; api_util.c the helpers every provider file
 *		uses; stripe_api.c, shopify_api.c, shopify_graphql.c, github_api.c and
 *		github_app.c the providers' endpoints).  Not for the rest of
 *		webhook-sim.
 */
#ifndef SIM_API_INT_H
#define SIM_API_INT_H

#include <event2/http.h>

#include "api.h"

#define MAX_FAULTS 64

/* One decoded query or form parameter: name as sent ("created[gte]"). */
typedef struct sim_param
{
	char	   *name;
	char	   *value;
	int			used;
} sim_param;

typedef struct sim_params
{
	sim_param  *p;
	int			n;
} sim_params;

typedef struct idem_entry
{
	char	   *key;
	char	   *path;
	char	   *body;			/* exact request bytes */
	size_t		body_len;
	char	   *response;		/* stored 200 answer */
	int64_t		created;		/* wall clock */
} idem_entry;

typedef struct sim_limits sim_limits;

struct sim_api
{
	struct event_base *base;
	struct evhttp *http;
	sim_model  *model;
	char		host[128];
	int			port;
	char	   *api_token;
	struct gh_app *gh_app;		/* NULL unless --github-app (github_app.c) */
	int			idem_ttl;
	FILE	   *request_log;
	FILE	   *request_times;
	int			rate_limit;		/* --rate-limit: the providers' limits enforced */
	sim_limits *limits;			/* their windows (limits.c) */
	long		rate_limited;	/* requests refused past a limit */
	status_fn	status;
	void	   *status_arg;

	fault_rule	faults[MAX_FAULTS];
	int			nfaults;
	sim_rng		fault_rng;
	long		faulted;

	/* Shopify GraphQL: the leaky bucket of query cost (shopify_graphql.c) */
	double		gql_max;
	double		gql_rate;		/* points restored per second */
	/*
	 * one bucket per shop (Shopify meters "the combination of the app and
	 * store"): [0] the shop of api_base, [k] a Shopify app's shop k
	 */
	struct gql_bucket
	{
		double		level;		/* points available at `at` */
		double		at;			/* monotonic seconds */
	}		   *gql;
	long		gql_throttled;	/* THROTTLED answers */

	/* Shopify: the app's access scopes (currentAppInstallation.accessScopes) */
	char	   *shopify_scopes;
	int			shopify_all_orders; /* read_all_orders is among them */
	long		scope_queries;	/* currentAppInstallation answered */

	/* a Shopify app's shops: their tokens (shopify_api.c) */
	struct shop_auth *shops;
	int			nshops;
	char	   *shop_client_id;
	char	   *shop_client_secret;
	int			shop_token_ttl;
	sim_rng		shop_rng;

	id_map		fetches;		/* id -> count */
	id_map		scopes;			/* Stripe: whose credentials a /v1/ request
								 * carried (acct_…, context:…, platform) ->
								 * count; GET /v1/accounts apart */
	long		account_lists;	/* GET /v1/accounts pages */
	long		lists;
	id_map		effects;		/* idempotency key -> submissions */
	id_map		idem_index;		/* idempotency key -> index in idem */
	idem_entry *idem;
	long		nidem;
};

/*
 * One simulated provider, as api.c routes to it: each provider file fills one
 * by field name.  A request goes to the first provider of api.c's table that
 * owns its path (the last, Stripe, has no owns and takes the rest); reject
 * (optional) answers a path the provider does not serve before
 * authentication and returns 1; authorized is asked only when the server has
 * an API token; reply_error answers in the provider's own error format (401
 * with unauthorized, injected faults); count (optional) counts the request
 * for /_sim/counters; handle answers it.
 */
typedef struct sim_provider
{
	const char *name;
	int			(*owns) (const char *path);
	int			(*reject) (struct evhttp_request *req, const char *path);
	int			(*authorized) (sim_api *api, struct evhttp_request *req);
	void		(*reply_error) (struct evhttp_request *req, int code, const char *message);
	const char *unauthorized;
	void		(*count) (sim_api *api, struct evhttp_request *req, const char *path);
	void		(*handle) (sim_api *api, struct evhttp_request *req, const char *path,
						   const char *query);
	/* with --rate-limit: 1 when the request is within the provider's limits, 0 answered */
	int			(*limit) (sim_api *api, struct evhttp_request *req, const char *path);
} sim_provider;

/* ---------- limits.c ---------- */
extern int	limits_stripe(sim_api *api, struct evhttp_request *req, const char *path);
extern int	limits_github(sim_api *api, struct evhttp_request *req, const char *path);
extern void limits_free(sim_api *api);

extern const sim_provider stripe_provider;		/* stripe_api.c: /v1/ */
extern const sim_provider shopify_provider;		/* shopify_api.c: /admin/ */
extern const sim_provider github_provider;		/* github_api.c: /repos/ */
extern const sim_provider github_app_provider;	/* github_app.c: /app/, /installation/ */

/* ---------- api_util.c ---------- */

/* Parse a query string or form body (percent-decoding, '+' as space). */
extern int	params_parse(const char *s, size_t len, sim_params *out);
extern void params_free(sim_params *ps);
extern const char *params_get(sim_params *ps, const char *name);
extern int	params_name_in(const char *const *list, const char *name);

extern void api_reply(struct evhttp_request *req, int code, const char *body);
extern void api_stripe_error(struct evhttp_request *req, int code, const char *type,
							 const char *errcode, const char *param, const char *message);
extern void api_github_error(struct evhttp_request *req, int code, const char *message,
							 const char *docs);
extern int	api_token_authorized(sim_api *api, struct evhttp_request *req, int token_ok);
extern int	api_github_authorized(sim_api *api, struct evhttp_request *req);
extern void api_count(id_map *mp, const char *key);
extern char *api_request_body(struct evhttp_request *req, size_t *len);
/* the status or slow fault (want_drop 0) or drop fault that fires for path, or NULL */
extern fault_rule *api_draw_fault(sim_api *api, const char *path, int want_drop);
extern int	api_draw_drop(sim_api *api, const char *path);
extern void api_drop_connection(struct evhttp_request *req);

/*
 * A GitHub App (github_app.c): POST /app/installations/{id}/access_tokens,
 * GET /app/installations, GET /installation/repositories (github_app_provider);
 * whether the request's installation token may read repo (NULL: is valid at
 * all; when not, it has answered 401, 403 or 404); the /_sim/github/
 * endpoints.
 */
extern int	github_app_repo_access(sim_api *api, struct evhttp_request *req, const char *repo);
/* the tenant of a model's repository under a GitHub App: its installation's id, or NULL */
extern const char *github_app_repo_tenant(sim_api *api, const char *repo);
extern void github_app_sim(sim_api *api, struct evhttp_request *req, const char *path,
						   const char *query);

/*
 * A Shopify app's shops (shopify_api.c): /shops/{shop}/admin/oauth/access_token
 * (refresh_token grant) and /shops/{shop}/admin/api/... under that shop's own
 * token; GET /_sim/shopify/shops (the install: each shop's first tokens, and
 * the refresh counts).  shop_init after the model has its shops.
 */
extern void shopify_shops_init(sim_api *api, const api_options *opt);
extern void shopify_shops_free(sim_api *api);
extern void shopify_shop_handle(sim_api *api, struct evhttp_request *req, const char *path,
								const char *query);
extern void shopify_shops_sim(sim_api *api, struct evhttp_request *req);
/* The shop (account field) a Shopify request is for; 0: no shops (the source's own). */
extern int	shopify_request_shop;

/*
 * Whether an order is outside what the app may see: created more than 60
 * days before the model's clock, and the app lacks read_all_orders (Shopify
 * then answers order(id:) null and never lists it; its webhooks still come).
 */
extern int	shopify_order_hidden(const sim_api *api, const sim_object *o);

/* Shopify's GraphQL Admin API (shopify_graphql.c): one POST of graphql.json */
extern void shopify_graphql_handle(sim_api *api, struct evhttp_request *req, const char *version);
/* GET /_sim/shopify/schema: the types and fields the simulator answers */
extern void shopify_graphql_schema(struct evhttp_request *req);

#endif							/* SIM_API_INT_H */
