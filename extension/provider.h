/*
 * provider.h
 *		How the worker talks to a provider's read API: a source as the
 *		adapters see it, the adapters (adapters/), and concurrent requests
 *		through libcurl multi (fetch.c).
 *
 * The C code reads no JSON library: responses go to SQL functions in
 * sql/worker.sql together with the jsonpaths an adapter names.  An
 * adapter's read_answer may look inside an answer with PostgreSQL's own
 * jsonb (json_fast.c's reader, which never raises), for what must be
 * decided before any transaction: a GraphQL error code, a cost budget.
 */
#ifndef WI_PROVIDER_H
#define WI_PROVIDER_H

#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/timestamp.h"

#include "pace.h"
#include "step.h"

/* ---------- sources and adapters (adapters/) ---------- */

typedef struct WiHttpRequest WiHttpRequest;

/* A source as the adapters see it; read by _worker_source() in SQL. */
typedef struct WiSource
{
	int32		id;
	char	   *name;
	char	   *kind;
	char	   *api_base;		/* without a trailing slash; NULL: no read API */
	char	   *api_token;
	/* generic kind: URL templates and paths from settings */
	char	   *fetch_url;
	char	   *list_url;
	char	   *auth_header;
	char	   *auth_format;
	char	   *unwrap_path;
	char	   *items_path;
	char	   *status_path;
	char	   *version_path;
	char	   *types;			/* comma-separated types with a read API */
	char	   *repo;			/* github: owner/name */
	char	   *api_version;	/* shopify: Admin API version, NULL: the default */
	char	   *api;			/* shopify: "rest" or "graphql"; NULL: the default */
	char	   *stripe_version; /* stripe: the Stripe-Version every request pins */
	char	   *shop_base_url;	/* shopify app: settings.shop_base_url, the
								 * shops' base on api_base's origin ({shop}) */
	/* pacing (settings; 0 / NULL: the adapter's default, pace.h) */
	double		rate_limit;		/* requests/s of the account's unit */
	double		endpoint_rate_limit;	/* requests/s of each endpoint */
	char	   *rate_limit_scope;	/* "platform" or "tenant": whose unit a
									 * tenant's request counts against */
} WiSource;

/* Headers a request carries besides Accept and the source's auth. */
#define WI_MAX_SCOPE_HEADERS 2

/*
 * How one mirror object type is read from a provider: where its objects
 * live, and where status, version, amount and currency are in them.
 */
typedef struct WiTypeMap
{
	const char *object_type;	/* mirror type: subscription, order, ... */
	const char *collection;		/* the API's name: subscriptions, orders */
	const char *unwrap_path;	/* the object in a GET response */
	const char *items_path;		/* the objects in a list response */
	const char *status_path;	/* NULL: no status */
	const char *version_path;	/* NULL: no version; the sweep refetches */
	bool		occurrence;		/* also recorded once as an occurrence (a refund) */
} WiTypeMap;

/*
 * What a source cannot see, declared by its adapter (the horizons table of
 * each adapter file, listed by webhook_inbox.horizons).  A null or 404 for
 * an object outside a horizon is no evidence that the object is gone: the
 * object is hidden (objects.hidden_since), never tombstoned, and follows its
 * signed webhooks.  The SQL half (_hidden_why() in sql/worker.sql) reads
 * the view, so a horizon is written here once.
 */
typedef enum WiHorizonKind
{
	WI_HORIZON_AGE,				/* objects created more than days ago are invisible */
	WI_HORIZON_EVENTS,			/* the events list keeps days of events */
	WI_HORIZON_TENANT			/* a tenant whose access ended (tenants.status disabled) */
} WiHorizonKind;

typedef struct WiHorizon
{
	const char *object_type;	/* "*": every type; NULL ends a table */
	WiHorizonKind kind;
	int			days;			/* AGE, EVENTS: how far back the provider shows */
	const char *created_path;	/* AGE: where the object says when it was created */
	const char *lifted_by;		/* AGE: the access scope that lifts it, or NULL */
	const char *why;			/* one sentence, for the view and the docs */
} WiHorizon;

/* A list request lists every object of the type (the full layer). */
#define WI_LIST_ALL ((int64) -1)

/*
 * A provider kind's read API.  Every function returns palloc'd memory in
 * the current context.  type_map returns false when the provider has no read
 * API for that object type (the worker then quarantines, the sweep skips).
 */
typedef struct WiAdapter
{
	const char *kind;
	bool		(*type_map) (const WiSource *src, const char *object_type, WiTypeMap *out);
	char	   *(*object_url) (const WiSource *src, const WiTypeMap *t, const char *object_id);
	/*
	 * First page when cursor is NULL; later pages after the last id seen.
	 * since_epoch WI_LIST_ALL: every object (the full layer); otherwise what
	 * changed since then, if the provider can filter so (the incremental
	 * layer of providers without an events API).
	 */
	char	   *(*list_url) (const WiSource *src, const WiTypeMap *t, int64 since_epoch,
							 const char *cursor);
	char	   *(*auth_header) (const WiSource *src);	/* "Name: value" or NULL */


	/*
	 * The provider's "what happened since" events list for the type, or NULL
	 * (then the incremental layer lists changed objects with list_url).  Its
	 * items are events, fed into the inbox as deliveries.
	 */
	char	   *(*events_url) (const WiSource *src, const WiTypeMap *t, int64 since_epoch,
							   const char *cursor);
	int64		events_window_s;	/* how long the provider keeps events */

	/*
	 * The headers that scope a request to a tenant of the source (Stripe:
	 * Stripe-Account or Stripe-Context, and Stripe-Version on every request)
	 * into out[0..WI_MAX_SCOPE_HEADERS-1], NULL-terminated.  tenant is ""
	 * for the source's own account; context is the tenant's Stripe context
	 * or NULL.  Returns whether the headers carry the tenant's credentials:
	 * false for a tenant this adapter cannot read for (its 404 then never
	 * tombstones).  NULL: the adapter has no tenants.
	 */
	bool		(*scope_headers) (const WiSource *src, const char *tenant, const char *context,
								  char **out);

	/*
	 * The provider's list of the source's tenants, first page when cursor
	 * is NULL, then after the last id listed; NULL: no such list.
	 */
	char	   *(*tenants_url) (const WiSource *src, const char *cursor);

	/*
	 * Optional, for read APIs that take a request body (GraphQL): the body
	 * to POST to object_url's or list_url's URL; NULL (or no function): a
	 * GET.  list_body's cursor is the previous answer's next_cursor.
	 */
	char	   *(*object_body) (const WiSource *src, const WiTypeMap *t, const char *object_id);
	char	   *(*list_body) (const WiSource *src, const WiTypeMap *t, int64 since_epoch,
							  const char *cursor);

	/*
	 * Optional: reads an answer the HTTP status alone does not explain (a
	 * GraphQL 200 with errors, or with its object null) and says what it
	 * is, by setting status (429 throttled, 5xx retry, 401/403 refused, 404
	 * gone, 400 unusable), error (why), retry_after_s, next_cursor and
	 * pace_s.  Needs no transaction (the worker calls it outside one);
	 * never raises.
	 */
	void		(*read_answer) (const WiSource *src, const WiTypeMap *t, WiHttpRequest *req);

	/*
	 * Optional: the SQL function (object_type text, body text) returning
	 * text that turns a 2xx answer into the shape the mirror keeps (the
	 * type map's paths read that shape), or NULL when the answer already
	 * has it.  Called inside the save's transaction.
	 */
	const char *(*answer_shape) (const WiSource *src);

	/*
	 * Optional, for tenants that live at an origin of their own (a Shopify
	 * app's shops, each at https://{shop}): the base that replaces api_base
	 * in a request for tenant, *origin the only origin that request may
	 * name; or NULL with *reason when tenant has no such origin (the request
	 * is never sent).  A request for such a tenant carries the tenant's own
	 * credentials (credentials.c), never the source's api_token.
	 */
	char	   *(*tenant_base) (const WiSource *src, const char *tenant, char **origin, char **reason);

	/*
	 * Optional: the units the provider meters a request to path (url past
	 * the source's base, query included) for tenant by, at its documented
	 * limits (pace.h): units[0] the account's, units[1] the endpoint's.
	 * tenant_unit says whether a tenant's requests count against a unit of
	 * the tenant's own (a Shopify shop, a GitHub installation) rather than
	 * the source's (a Stripe platform).  wi_request_pace() names the units
	 * and applies the source's settings.  NULL: nothing is paced unless
	 * the settings say so.
	 */
	void		(*pace) (const WiSource *src, const char *path, WiPace *out, bool *tenant_unit);

	/* What the source cannot see (see WiHorizon); NULL: nothing. */
	const WiHorizon *horizons;

	/*
	 * Optional, for a horizon an access scope lifts: the request that asks
	 * the provider which scopes the source's token holds (Shopify:
	 * currentAppInstallation { accessScopes { handle } }), a POST of
	 * scopes_body to scopes_url; the answer goes to _scopes_answered() in
	 * SQL.  Asked once per token (source_scopes), again after a scope change.
	 */
	char	   *(*scopes_url) (const WiSource *src);
	char	   *(*scopes_body) (const WiSource *src);
} WiAdapter;

extern const WiAdapter wi_adapter_stripe;
extern const WiAdapter wi_adapter_shopify;
extern const WiAdapter wi_adapter_github;
extern const WiAdapter wi_adapter_generic;

/* adapters/adapters.c: the table */
extern const WiAdapter *wi_adapter_for(const WiSource *src);
extern const char *wi_answer_shape(const WiAdapter *a, const WiSource *src, const char *object_type,
								   const char *body);

/* adapters/shopify.c: a shop's own base URL (credentials.c refreshes there) */
extern char *wi_shopify_shop_base(const WiSource *src, const char *shop, char **origin,
								  char **reason);
extern bool wi_shopify_shop_domain_ok(const char *shop);

/* source.c: what the adapters and their callers share */
extern WiSource *wi_source_load(int32 source_id);
extern char *wi_url_escape(const char *s);
extern char *wi_template(const char *tmpl, const char *const *keys, const char *const *values);
extern char *wi_iso_time(int64 epoch);

/* ---------- provider requests (fetch.c) ---------- */

struct WiHttpRequest
{
	/* set by the caller */
	char	   *url;
	char	   *post_body;		/* a JSON body to POST, or NULL: a GET */
	char	   *auth;			/* "Name: value" or NULL */
	char	   *scope[WI_MAX_SCOPE_HEADERS + 1];	/* NULL-terminated; see
													 * wi_request_scope() */
	const char *credentials;	/* the tenant whose credentials it carries
								 * ("": the source's own account) */
	int32		source_id;		/* for rate limits */
	const char *origin;			/* the source's api_base: the only scheme,
								 * host and port url may name */
	void	   *arg;			/* the caller's */

	/* results */
	bool		started;
	TimestampTz started_at;		/* when the request left */
	long		status;			/* HTTP status; 0 when the transfer failed */
	char	   *error;			/* transport error, or NULL */
	bool		refused;		/* never sent: url is not on the origin */
	char	   *auth_wait;		/* never to be sent: the tenant's credentials
								 * are not usable yet ("credentials_wait: ...")
								 * or refused ("credentials_flagged: ...") */
	StringInfoData body;
	char	   *link_next;		/* Link: <...>; rel="next", or NULL */
	int64		retry_after_s;	/* Retry-After in seconds, or -1 */
	int64		ratelimit_remaining;	/* x-ratelimit-remaining (GitHub), or -1 */
	int64		ratelimit_reset;	/* x-ratelimit-reset, epoch seconds, or -1 */
	double		elapsed_ms;
	/* set by an adapter's read_answer */
	char	   *next_cursor;	/* the list's next page, or NULL */
	double		pace_s;			/* > 0: wait that long before the source's next request */

	void	   *handle;			/* private: the curl easy handle */
	struct curl_slist *headers; /* private */
	void	   *parsed;			/* private: the checked URL (CURLU) */
};

typedef enum WiHttpGate
{
	WI_HTTP_START,				/* start it now */
	WI_HTTP_WAIT,				/* not yet: ask again when a transfer ends */
	WI_HTTP_LATER,				/* not yet: ask again in a moment, even with
								 * nothing in flight (paced, pace.h) */
	WI_HTTP_SKIP				/* never: the gate has dealt with it */
} WiHttpGate;

typedef WiHttpGate (*wi_http_gate_fn) (WiHttpRequest *req, void *arg);
typedef void (*wi_http_done_fn) (WiHttpRequest *req, void *arg);

/* adapters/scope.c */
extern void wi_request_scope(WiHttpRequest *req, const WiAdapter *adapter, const WiSource *src,
							 const char *tenant, const char *context);

/*
 * The units a request to url for tenant counts against (pace.h): the
 * adapter's defaults, then the source's settings rate_limit,
 * endpoint_rate_limit and rate_limit_scope.
 */
extern void wi_request_pace(WiPace *out, const WiAdapter *adapter, const WiSource *src,
							const char *tenant, const char *url);
extern void wi_http_init_request(WiHttpRequest *req, char *url, char *auth, int32 source_id,
								 const char *origin, void *arg);
extern char *wi_http_refusal(const char *url, const char *origin, void **parsed);
extern bool wi_http_run(const WiSteps *steps, WiHttpRequest **reqs, int n, int concurrency,
						wi_http_gate_fn gate, wi_http_done_fn done, void *arg);
extern void wi_http_cleanup(void);

#endif							/* WI_PROVIDER_H */
