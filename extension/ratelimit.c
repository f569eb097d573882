/*
 * ratelimit.c
 *		How hard the worker may press each source.
 *
 * A source that answers 429 or 503 gets a window (its Retry-After, or a
 * second) in which nothing is sent to it, and its concurrency cap halves;
 * each success grows the cap back by one, up to fetch_concurrency.  That
 * slows down the source that asked for it without starving the others.
 * Keeping within the provider's limits before it refuses (a rate per
 * unit it meters, a Shopify shop's cost budget) is pace.c's.  The state
 * here lives in this process only: a restarted worker starts at full
 * speed, which costs at most one more 429.
 */
#include "postgres.h"

#include "pace.h"
#include "provider.h"
#include "ratelimit.h"
#include "webhook_inbox.h"

#define MAX_RATES 256
#define LIST_MAX_PACE_S 10.0		/* the longest a list page waits for its pace */

static WiRate rates[MAX_RATES];
static int	nrates = 0;

WiRate *
wi_rate_for(int32 source_id)
{
	for (int i = 0; i < nrates; i++)
		if (rates[i].source_id == source_id)
			return &rates[i];
	if (nrates == MAX_RATES)
		nrates = 0;				/* forget the oldest: only costs a slower start */
	rates[nrates].source_id = source_id;
	rates[nrates].not_before = 0;
	rates[nrates].cap = wi_fetch_concurrency;
	rates[nrates].inflight = 0;
	return &rates[nrates++];
}

void
wi_rate_finished(WiRate *r)
{
	r->inflight = Max(r->inflight - 1, 0);
}

void
wi_rate_succeeded(WiRate *r)
{
	r->cap = Min(r->cap + 1, wi_fetch_concurrency);
}

void
wi_rate_slow_down(WiRate *r, TimestampTz until)
{
	r->not_before = Max(r->not_before, until);
	r->cap = Max(r->cap / 2, 1);
}

char *
wi_rate_list_page(const WiSteps *steps, WiRate *r, WiPace *pace, WiHttpRequest *req,
				  const char *what)
{
	double		wait;

	if (GetCurrentTimestamp() < r->not_before)
		return pstrdup("rate_limited: inside the source's Retry-After window");
	/* within the provider's limits, as every other request (pace.c) */
	if ((wait = wi_pace_wait(steps, req->source_id, pace, LIST_MAX_PACE_S)) < 0)
		return pstrdup("interrupted");
	if (wait > 0)
		return psprintf("rate_limited: paced within the provider's limits (%s): the next request is %.0f s away",
						wi_pace_describe(pace), wait);
	if (!wi_http_run(steps, (WiHttpRequest *[]) {req}, 1, 1, NULL, NULL, NULL))
	{
		wi_pace_answered(req->source_id, pace);
		return pstrdup("interrupted");
	}
	wi_pace_answered(req->source_id, pace);
	if (req->status == 429 || req->status == 503)
		wi_rate_slow_down(r, GetCurrentTimestamp() +
						  (TimestampTz) ((req->retry_after_s >= 0 ? req->retry_after_s : 1) * USECS_PER_SEC));
	if (req->status != 200)
		return req->status == 0
			? psprintf("%s failed: %s", what, req->error ? req->error : "transport error")
			: psprintf("%s answered http %ld", what, req->status);
	return NULL;
}
