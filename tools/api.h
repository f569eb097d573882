/*
 * api.h
 *		The simulator's HTTP side: the providers' APIs as their official SDKs
 *		type them (Stripe's objects, lists and events with its parameters,
 *		errors and pagination; Shopify's Admin REST orders), injected faults,
 *		Stripe's refund endpoint with idempotency keys, and the /_sim/
 *		control, truth and counter endpoints.
 */
#ifndef SIM_API_H
#define SIM_API_H

#include <event2/event.h>

#include "github_app.h"
#include "model.h"
#include "util.h"

typedef enum fault_mode
{
	FAULT_STATUS,				/* answer status (429 with Retry-After, 5xx) */
	FAULT_SLOW,					/* delay the answer by ms */
	FAULT_DROP					/* refund effects: perform, then drop the connection */
} fault_mode;

typedef struct fault_rule
{
	fault_mode	mode;
	int			status;			/* FAULT_STATUS; 0 means 500 or 503 at random */
	double		share;			/* probability per matching request */
	int			retry_after;	/* seconds, for 429 and 503 */
	int			ms;				/* FAULT_SLOW */
	char		prefix[256];	/* path prefix; empty matches all API paths */
	long		count;			/* faults left; -1 unlimited */
} fault_rule;

typedef struct api_options
{
	const char *api_token;		/* NULL: no auth */
	gh_app_options github_app;	/* app_id NULL: no GitHub App */
	const char *request_log;	/* file: one line per API request, or NULL */
	int			rate_limit;		/* enforce the providers' documented limits (limits.c) */
	const char *request_times;	/* file: the same lines, each with its time
								 * and Stripe-Account, or NULL */
	int			idempotency_ttl;	/* seconds Stripe keeps a key (86400) */
	uint64_t	seed;			/* of the fault draws */
	double		shopify_bucket_max;	/* GraphQL cost bucket (0: 2000) */
	double		shopify_bucket_rate;	/* its restore rate per second (0: 100) */
	/* a Shopify app (model_set_shops): shops read at /shops/{shop}/admin/... */
	const char *shopify_client_id;	/* the app's client id (NULL: none) */
	const char *shopify_client_secret;	/* its client secret (the webhook secret) */
	int			shopify_token_ttl;	/* seconds an access token lasts (0: 3600) */
	/*
	 * The app's access scopes, comma-separated (NULL: "read_orders", what a
	 * public app holds unless Shopify granted it read_all_orders)
	 */
	const char *shopify_scopes;
} api_options;

/* Renders the JSON of GET /_sim/status into out. */
typedef void (*status_fn) (void *arg, sbuf *out);

typedef struct sim_api sim_api;

/*
 * Listen on host:port (port 0 picks one; see api_port) and serve model.
 * Returns NULL with a reason in err when the address cannot be bound.
 */
extern sim_api *api_start(struct event_base *base, sim_model *model,
						  const char *host, int port, const api_options *opt,
						  status_fn status, void *status_arg,
						  char *err, size_t errlen);
extern int	api_port(const sim_api *api);
extern void api_add_fault(sim_api *api, const fault_rule *rule);
extern void api_stop(sim_api *api);

/*
 * A GitHub App's webhook names its installation: the event of a github
 * source gets "installation": {"id", "node_id"} of the installation granted
 * the model's repository (github_app.c).  Nothing without --github-app.
 */
extern void api_github_app_event(sim_api *api, sim_event *ev);

#endif							/* SIM_API_H */
