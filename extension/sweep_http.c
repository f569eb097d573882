/*
 * sweep_http.c
 *		A sweep pass's requests to the provider, one at a time: nothing is
 *		sent inside the source's Retry-After window (ratelimit.c) or, for a
 *		GitHub App, inside its installation's rate-limit window, and each
 *		waits for its slot within the provider's limits (pace.c); a GitHub
 *		App's reads carry the installation's token, minted again once after
 *		a 401; an answer that opens a window or spends the source's budget
 *		says so, and the pass waits (wi_sweep_pause()) or stops.
 *
 * What a request concludes goes into the request (req->error) and the
 * windows kept here and in ratelimit.c; what to do about it is the pass's
 * (sweep_pass.c).
 */
#include "postgres.h"

#include <time.h>

#include "miscadmin.h"
#include "utils/timestamp.h"

#include "credentials.h"
#include "provider.h"
#include "ratelimit.h"
#include "stats.h"
#include "step.h"
#include "sweep_int.h"

/* the longest a pass waits for the provider, its budget or its pace */
#define SWEEP_MAX_PAUSE_S 10.0

/*
 * GitHub meters a GitHub App per installation (its primary rate limit:
 * x-ratelimit-remaining, until x-ratelimit-reset), so the window a spent
 * limit opens is the installation's: its reads wait for it, every other
 * installation's go on.  Kept in this process, as ratelimit.c keeps a
 * source's.
 */
#define MAX_INSTALLATION_RATES 256

typedef struct InstallationRate
{
	int32		source_id;
	char		tenant[32];
	TimestampTz not_before;
} InstallationRate;

static InstallationRate installation_rates[MAX_INSTALLATION_RATES];
static int	ninstallation_rates = 0;

static InstallationRate *
installation_rate(int32 source_id, const char *tenant)
{
	InstallationRate *r;

	for (int i = 0; i < ninstallation_rates; i++)
		if (installation_rates[i].source_id == source_id &&
			strcmp(installation_rates[i].tenant, tenant) == 0)
			return &installation_rates[i];
	if (ninstallation_rates == MAX_INSTALLATION_RATES)
		ninstallation_rates = 0;	/* forget the oldest: only costs one refused read */
	r = &installation_rates[ninstallation_rates++];
	r->source_id = source_id;
	strlcpy(r->tenant, tenant, sizeof(r->tenant));
	r->not_before = 0;
	return r;
}

/* The credentials of a GitHub App installation's read, asked in a step. */
typedef struct SweepAuth
{
	Sweep	   *s;
	const char *refused;		/* the header a 401 answered, or NULL */
	bool		fresh;			/* mint a new token, whatever is cached */
	char	   *header;
	WiAuthStatus status;
	char	   *reason;
} SweepAuth;

static void
auth_step(void *arg)
{
	SweepAuth  *a = (SweepAuth *) arg;
	MemoryContext old = MemoryContextSwitchTo(wi_step_cxt());

	a->header = NULL;
	a->reason = NULL;
	if (a->refused != NULL)
	{
		a->status = wi_tenant_auth_refused(a->s->source_id, a->s->tenant, a->refused, &a->header,
										   &a->reason);
		if (a->status != WI_AUTH_OK)
			a->header = NULL;
	}
	else
		a->header = wi_github_tenant_auth_header(a->s->src, a->s->tenant, a->fresh ? WI_AUTH_FRESH : 0,
												 &a->status, &a->reason);
	MemoryContextSwitchTo(old);
}

/*
 * The installation token of s's tenant into req (carrying the tenant's
 * credentials), after refused was answered 401 when it is not NULL.  False
 * with req->error saying why when there is none to send: no credentials
 * yet, a flagged or disabled installation, a token endpoint that refused
 * or could not be reached; the request is then not sent, and nothing about
 * the tenant's objects is concluded from it.
 */
static bool
sweep_auth(Sweep *s, WiHttpRequest *req, const char *refused, bool fresh)
{
	SweepAuth	a = {s, refused, fresh, NULL, WI_AUTH_WAIT, NULL};
	char	   *err = wi_step_run(s->steps, auth_step, &a);

	if (err != NULL || a.status != WI_AUTH_OK || a.header == NULL)
	{
		req->error = psprintf("tenant_credentials: %s",
							  err ? err : a.reason ? a.reason : "no credentials to send");
		return false;
	}
	req->auth = a.header;
	req->credentials = s->tenant;
	return true;
}

/*
 * One request, synchronously: a GET, or a POST of body when it is not NULL
 * (a GraphQL query); false if interrupted (SIGTERM).  Inside the source's
 * Retry-After window (ratelimit.c) nothing is sent and req->error says so;
 * a 429 or 503 answer opens that window, as a fetch's does.  The adapter's
 * read_answer, if any, reads the answer first, as for a fetch.
 */
/*
 * Waits for the request's slot within the provider's limits (pace.c): the
 * units it counts against are shared with the worker's fetches, which go
 * first (sweep.c yields to them between passes), and with every
 * sweep_now().  A slot further than SWEEP_MAX_PAUSE_S away (a spent hourly
 * budget) is not waited for: req->error says so and nothing is sent.
 * False when the worker must stop.
 */
static bool
sweep_paced(Sweep *s, WiPace *pace, WiHttpRequest *req)
{
	double		wait = wi_pace_wait(s->steps, s->source_id, pace, SWEEP_MAX_PAUSE_S);

	if (wait < 0)
		return false;
	if (wait > 0)
		req->error = psprintf("rate_limited: paced within the provider's limits (%s): the next request "
							  "is %.0f s away", wi_pace_describe(pace), wait);
	return true;
}

/*
 * Sends req, whose slot pace has taken, and ends the slot once it is
 * answered (or failed, or interrupted: false).
 */
static bool
sweep_send(Sweep *s, WiPace *pace, WiHttpRequest *req)
{
	bool		done = wi_http_run(s->steps, &req, 1, 1, NULL, NULL, NULL);

	wi_pace_answered(s->source_id, pace);
	return done;
}

bool
wi_sweep_get(WiHttpRequest *req, char *url, char *body, Sweep *s)
{
	WiRate	   *r = wi_rate_for(s->source_id);
	WiPace		pace;

	wi_http_init_request(req, url, s->adapter->auth_header(s->src), s->source_id, s->src->api_base, NULL);
	req->post_body = body;
	wi_request_scope(req, s->adapter, s->src, s->tenant, s->context);
	if (req->auth_wait != NULL)
	{
		/* the tenant's credentials are not usable: nothing sent, the pass fails */
		req->error = pstrdup(req->auth_wait);
		return true;
	}
	if (GetCurrentTimestamp() < r->not_before)
	{
		req->error = pstrdup("rate_limited: inside the source's Retry-After window");
		return true;
	}
	/* a GitHub App's installation: inside its rate-limit window nothing is sent */
	if (s->gh_app && GetCurrentTimestamp() < installation_rate(s->source_id, s->tenant)->not_before)
	{
		req->error = psprintf("rate_limited: installation %s's rate limit is spent until its reset", s->tenant);
		return true;
	}
	/* its token, or the request is not sent */
	if (s->gh_app && !sweep_auth(s, req, NULL, false))
		return true;
	wi_request_pace(&pace, s->adapter, s->src, s->tenant, url);
	if (!sweep_paced(s, &pace, req))
		return false;
	if (req->error != NULL)
		return true;
	if (!sweep_send(s, &pace, req))
		return false;
	/* the installation's token was refused (it expired early, was revoked): mint again, once */
	if (s->gh_app && req->status == 401)
	{
		char	   *refused = req->auth;

		wi_http_init_request(req, url, NULL, s->source_id, s->src->api_base, NULL);
		req->post_body = body;
		wi_request_scope(req, s->adapter, s->src, s->tenant, s->context);
		if (!sweep_auth(s, req, refused, false))
		{
			req->status = 401;
			return true;
		}
		if (!sweep_paced(s, &pace, req))
			return false;
		if (req->error != NULL)
			return true;
		if (!sweep_send(s, &pace, req))
			return false;
	}

	/*
	 * 403 under a token that was valid: the installation may have been
	 * suspended since (GitHub: "This installation has been suspended").
	 * The token endpoint says so (403 flags the installation, 404 a
	 * removed one); when it mints, the 403 was about something else (a
	 * permission, GitHub's secondary rate limit) and stands.
	 */
	if (s->gh_app && (req->status == 403 || req->status == 429) &&
		(req->ratelimit_remaining == 0 || req->retry_after_s >= 0))
	{
		/* the installation's rate limit (or GitHub's secondary one): its own window */
		int64		now = (int64) time(NULL);
		int64		wait = req->retry_after_s >= 0 ? req->retry_after_s
			: req->ratelimit_reset > now ? req->ratelimit_reset - now : 1;

		wait = Min(wait, 3600);
		installation_rate(s->source_id, s->tenant)->not_before =
			GetCurrentTimestamp() + (TimestampTz) wait * USECS_PER_SEC;
		wi_stat_add(WI_STAT_RATE_LIMITED, 1);
		req->error = psprintf("rate_limited: installation %s: http %ld, x-ratelimit-remaining %lld, "
							  "waiting " INT64_FORMAT " s", s->tenant, req->status,
							  (long long) req->ratelimit_remaining, wait);
		return true;
	}
	if (s->gh_app && req->status == 403)
	{
		WiHttpRequest probe;

		memset(&probe, 0, sizeof(probe));
		if (!sweep_auth(s, &probe, NULL, true))
			req->error = probe.error;
	}
	wi_stat_latency(req->elapsed_ms);
	/* a GraphQL answer's errors, its budget and its next page, as a fetch's */
	if (s->adapter->read_answer && !req->refused && req->status != 0)
	{
		s->adapter->read_answer(s->src, &s->type, req);
		if (req->pace_s > 0)
			wi_pace_hold(s->source_id, &pace, GetCurrentTimestamp() + (TimestampTz) (req->pace_s * USECS_PER_SEC));
	}
	if (req->status == 429 || req->status == 503)
	{
		double		wait = req->retry_after_s >= 0 ? (double) req->retry_after_s : 1.0;

		wi_stat_add(WI_STAT_RATE_LIMITED, 1);
		wi_rate_slow_down(r, GetCurrentTimestamp() + (TimestampTz) (wait * USECS_PER_SEC));
		req->error = psprintf("rate_limited: %s (Retry-After %.0f s)",
							  req->error ? req->error : psprintf("http %ld", req->status), wait);
	}
	return true;
}

/*
 * Waits secs (at most SWEEP_MAX_PAUSE_S) before the pass's next page: a
 * source whose answer says its budget is spent (pace_s, Shopify's cost
 * bucket) refills in seconds, and the pass would otherwise fail on the
 * next page's THROTTLED.  Sleeps in short steps; false when the worker is
 * asked to stop (in a backend, an interrupt is serviced).
 */
bool
wi_sweep_pause(const WiSteps *steps, double secs)
{
	TimestampTz until = GetCurrentTimestamp() +
		(TimestampTz) (Min(secs, SWEEP_MAX_PAUSE_S) * USECS_PER_SEC);

	for (;;)
	{
		long		ms = (long) ((until - GetCurrentTimestamp()) / 1000);

		if (ms <= 0)
			return true;
		if (steps->stop_flag == NULL)
			CHECK_FOR_INTERRUPTS();
		else if (wi_steps_stopping(steps))
			return false;
		pg_usleep(Min(ms, 100) * 1000L);
	}
}
