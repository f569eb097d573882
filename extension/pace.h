/*
 * pace.h
 *		Pacing of provider requests by the units each provider meters (a
 *		Stripe key and its endpoints, a Shopify shop's cost bucket, a GitHub
 *		installation), shared by the worker and every backend's sweep_now()
 *		(pace.c).
 */
#ifndef WI_PACE_H
#define WI_PACE_H

#include "postgres.h"

#include "utils/timestamp.h"

#define WI_PACE_KEY_LEN 96
#define WI_PACE_UNITS 2

/*
 * One metered unit: key names it within its source ("" for a unit not
 * used), rate is its requests per second (0: not paced by count, as a
 * Shopify shop's cost bucket, which only its answers pace), burst how many
 * requests may go back to back when it has been idle (1: evenly spaced, so
 * that no one-second window holds more than rate).
 */
typedef struct WiPaceUnit
{
	char		key[WI_PACE_KEY_LEN];
	double		rate;
	double		burst;
} WiPaceUnit;

/*
 * What one request counts against: the account's unit, then the
 * endpoint's; and when its request was taken, for wi_pace_answered().
 */
typedef struct WiPace
{
	WiPaceUnit	units[WI_PACE_UNITS];
	TimestampTz taken;			/* 0: not taken */
} WiPace;

/*
 * Takes one request from every unit of p when each has one now and returns
 * 0 (p->taken says when); otherwise takes nothing and returns the seconds
 * until all will have one.  Shared by every process when the library is
 * preloaded; without it, by this process only.  Every request taken is
 * ended by wi_pace_answered() once it is answered or has failed.
 */
extern double wi_pace_take(int32 source_id, WiPace *p);

/*
 * Waits (sleeping in short steps) until p's units have a request for this
 * one, and takes it: 0.  When that is more than max_s away, takes nothing
 * and returns how far (> 0); -1 when steps says to stop (a backend's
 * interrupt is serviced).
 */
struct WiSteps;
extern double wi_pace_wait(const struct WiSteps *steps, int32 source_id, WiPace *p, double max_s);

/*
 * p's request, taken by wi_pace_take(), has its answer (or failed): its
 * units count it from now on as having gone now, since the provider has
 * counted it by then, whenever it arrived there.  Nothing for a p not taken.
 */
extern void wi_pace_answered(int32 source_id, WiPace *p);

/* A line naming p's busiest unit, for a reason: "platform at 25/s" */
extern char *wi_pace_describe(const WiPace *p);

/*
 * The provider said its budget is spent (Shopify's throttleStatus): nothing
 * more of p's first unit until `until`.
 */
extern void wi_pace_hold(int32 source_id, const WiPace *p, TimestampTz until);

/* shmem.c: the table's bytes, and taking them (emptied unless found) */
extern Size wi_pace_shmem_size(void);
extern void wi_pace_shmem_attach(void *ptr, bool found);

#endif							/* WI_PACE_H */
