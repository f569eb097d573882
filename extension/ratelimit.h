/*
 * ratelimit.h
 *		Per-source request state kept across the worker's rounds
 *		(ratelimit.c): a Retry-After window and a concurrency cap.
 */
#ifndef WI_RATELIMIT_H
#define WI_RATELIMIT_H

#include "postgres.h"

#include "utils/timestamp.h"

typedef struct WiRate
{
	int32		source_id;
	TimestampTz not_before;		/* nothing is sent to the source before this */
	int			cap;			/* requests to it in flight at once, at most */
	int			inflight;
} WiRate;

/* The source's state, created at full concurrency on first use. */
extern WiRate *wi_rate_for(int32 source_id);

/* A request of the source ended (whatever its answer). */
extern void wi_rate_finished(WiRate *r);

/* The source answered: the cap grows back by one. */
extern void wi_rate_succeeded(WiRate *r);

/* The source asked to slow down until `until`: a window, and half the cap. */
extern void wi_rate_slow_down(WiRate *r, TimestampTz until);

/*
 * One page of a provider's list (of tenants, of installations), paced by
 * the source's window and within the provider's limits (pace, from
 * wi_request_pace()): NULL when the page came (req's body holds it), else
 * why not, palloc'd ("interrupted" on SIGTERM).  req is initialised by the
 * caller; what names the list in the reasons.
 */
struct WiHttpRequest;
struct WiSteps;
struct WiPace;
extern char *wi_rate_list_page(const struct WiSteps *steps, WiRate *r, struct WiPace *pace,
							   struct WiHttpRequest *req, const char *what);

#endif							/* WI_RATELIMIT_H */
