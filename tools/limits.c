/*
 * limits.c
 *		The providers' documented rate limits, enforced as the providers
 *		enforce them (serve --rate-limit): a request past a limit is refused
 *		with the provider's own status, headers and error body, and counted
 *		(/_sim/counters "rate_limited").
 *
 *   Stripe (https://docs.stripe.com/rate-limits): "measured in API requests
 *     per second, per Stripe account": 100/s in live mode, 25/s in a
 *     sandbox, and 25/s per endpoint, each named API operation an endpoint
 *     of its own ("GET /v1/payment_intents/{id}" for every id).  Connect
 *     calls count against the platform's key whatever their Stripe-Account
 *     (the reading the measurements were made under).  Refused:
 *     429, Stripe-Rate-Limited-Reason global-rate or endpoint-rate, and the
 *     error object stripe-node turns into StripeRateLimitError.
 *   GitHub ("Rate limits for the REST API"): the secondary limit of 900
 *     points a minute per REST endpoint, a GET 1 point, per token; refused:
 *     403 with retry-after and the documented message.  The primary limit
 *     per installation is github_app.c's (--github-rate-limit, 5,000 an
 *     hour by default with --rate-limit).
 *   Shopify: its GraphQL cost bucket per shop is shopify_graphql.c's.
 *
 * Each limit is a sliding window: a request may go when fewer than the
 * limit were let through in the window before it; a refused one does not
 * count.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "api_int.h"
#include "util.h"

/* One limit's window: when the last `cap` requests it let through came. */
typedef struct sim_window
{
	char	   *key;
	int			cap;
	double	   *at;				/* ring of cap monotonic seconds */
	int			next;
	int			n;
} sim_window;

struct sim_limits
{
	sim_window *w;
	int			nw;
	int			alloc;
};

static sim_window *
window_for(sim_api *api, const char *key, int cap)
{
	sim_limits *l = api->limits;
	sim_window *w;

	if (l == NULL)
		l = api->limits = xcalloc(1, sizeof(sim_limits));
	for (int i = 0; i < l->nw; i++)
		if (strcmp(l->w[i].key, key) == 0)
			return &l->w[i];
	if (l->nw == l->alloc)
	{
		l->alloc = l->alloc ? 2 * l->alloc : 16;
		l->w = xrealloc(l->w, sizeof(sim_window) * l->alloc);
	}
	w = &l->w[l->nw++];
	w->key = xstrdup(key);
	w->cap = cap;
	w->at = xcalloc(cap, sizeof(double));
	w->next = 0;
	w->n = 0;
	return w;
}

/* Whether one more request fits in w's window of secs; *wait: until it would. */
static int
window_fits(const sim_window *w, double secs, double now, double *wait)
{
	/* the oldest of the last cap let through: it must have left the window */
	double		oldest = w->n < w->cap ? 0 : w->at[w->next];

	*wait = w->n < w->cap ? 0 : oldest + secs - now;
	return w->n < w->cap || now - oldest >= secs;
}

static void
window_take(sim_window *w, double now)
{
	w->at[w->next] = now;
	w->next = (w->next + 1) % w->cap;
	if (w->n < w->cap)
		w->n++;
}

/* Stripe's endpoint: the method and the path, each id in it as {id}. */
static void
stripe_endpoint(struct evhttp_request *req, const char *path, char *out, size_t len)
{
	const char *method = evhttp_request_get_command(req) == EVHTTP_REQ_POST ? "POST" :
		evhttp_request_get_command(req) == EVHTTP_REQ_DELETE ? "DELETE" : "GET";
	size_t		o = (size_t) snprintf(out, len, "%s ", method);
	int			seg = 0;

	for (const char *p = path; *p && o + 8 < len; )
	{
		const char *end = strchr(p + 1, '/');
		size_t		n = end ? (size_t) (end - p) : strlen(p);

		/* /v1 and the collection stay; a segment with a digit or "_" is an id */
		if (seg >= 2 && (strcspn(p + 1, "0123456789_") < n - 1))
			o += (size_t) snprintf(out + o, len - o, "/{id}");
		else
			o += (size_t) snprintf(out + o, len - o, "%.*s", (int) n, p);
		p += n;
		seg++;
	}
}

/*
 * Stripe: the request may go (1), or it was answered 429 (0).  The key's
 * mode is its prefix (sk_live_, rk_live_: live; anything else a
 * sandbox's).
 */
int
limits_stripe(sim_api *api, struct evhttp_request *req, const char *path)
{
	const char *auth = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
	const char *key = auth && strncasecmp(auth, "Bearer ", 7) == 0 ? auth + 7 : "";
	int			live = strncmp(key, "sk_live_", 8) == 0 || strncmp(key, "rk_live_", 8) == 0;
	char		endpoint[200];
	char		name[260];
	double		now = now_monotonic(),
				wait_global,
				wait_endpoint;
	sim_window *global,
			   *ep;
	const char *reason = NULL;

	stripe_endpoint(req, path, endpoint, sizeof(endpoint));
	global = window_for(api, "stripe", live ? 100 : 25);
	snprintf(name, sizeof(name), "stripe %s", endpoint);
	ep = window_for(api, name, 25);
	if (!window_fits(global, 1.0, now, &wait_global))
		reason = "global-rate";
	else if (!window_fits(ep, 1.0, now, &wait_endpoint))
		reason = "endpoint-rate";
	if (reason == NULL)
	{
		window_take(global, now);
		window_take(ep, now);
		return 1;
	}
	api->rate_limited++;
	evhttp_add_header(evhttp_request_get_output_headers(req), "Stripe-Rate-Limited-Reason", reason);
	api_stripe_error(req, 429, "invalid_request_error", "rate_limit", NULL,
					 "Request rate limit exceeded. Learn more about rate limits here "
					 "https://docs.stripe.com/rate-limits.");
	return 0;
}

/*
 * GitHub's secondary limit: 900 points a minute per REST endpoint per
 * token (a GET 1 point, anything else 5); the endpoint is the method and
 * the path, numbers in it as {n}.  1, or 0 when answered 403.
 */
int
limits_github(sim_api *api, struct evhttp_request *req, const char *path)
{
	const char *auth = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
	int			get = evhttp_request_get_command(req) == EVHTTP_REQ_GET;
	char		name[400];
	size_t		o;
	double		now = now_monotonic(),
				wait;
	sim_window *w;
	int			points = get ? 1 : 5;
	int			fits = 1;

	o = (size_t) snprintf(name, sizeof(name), "github %.100s %s ", auth ? auth : "-", get ? "GET" : "WRITE");
	for (const char *p = path; *p && o + 4 < sizeof(name); p++)
	{
		if (*p >= '0' && *p <= '9' && p[-1] == '/')
		{
			o += (size_t) snprintf(name + o, sizeof(name) - o, "{n}");
			while (p[1] >= '0' && p[1] <= '9')
				p++;
		}
		else
			name[o++] = *p;
	}
	name[o] = '\0';
	w = window_for(api, name, 900);
	/* a write costs 5 points: 5 places in the window */
	for (int i = 0; i < points && fits; i++)
		fits = w->n + i < w->cap || now - w->at[(w->next + i) % w->cap] >= 60.0;
	(void) window_fits(w, 60.0, now, &wait);
	if (fits)
	{
		for (int i = 0; i < points; i++)
			window_take(w, now);
		return 1;
	}
	{
		char		ra[16];

		api->rate_limited++;
		snprintf(ra, sizeof(ra), "%d", wait > 1 ? (int) (wait + 0.999) : 1);
		evhttp_add_header(evhttp_request_get_output_headers(req), "retry-after", ra);
		api_github_error(req, 403,
						 "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
						 "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits");
	}
	return 0;
}

void
limits_free(sim_api *api)
{
	sim_limits *l = api->limits;

	if (l == NULL)
		return;
	for (int i = 0; i < l->nw; i++)
	{
		free(l->w[i].key);
		free(l->w[i].at);
	}
	free(l->w);
	free(l);
	api->limits = NULL;
}
