/*
 * stats.h
 *		The background worker's counters in shared memory (stats.c), read by
 *		worker_stats().  Every part of the worker counts into them.
 */
#ifndef WI_STATS_H
#define WI_STATS_H

#include "postgres.h"

typedef enum WiStat
{
	WI_STAT_CLAIMED,
	WI_STAT_EVENTS,
	WI_STAT_FETCHED,
	WI_STAT_FETCH_ERRORS,
	WI_STAT_SAVED,
	WI_STAT_DUPLICATES,
	WI_STAT_STALE,
	WI_STAT_TIES,
	WI_STAT_BACKWARD,
	WI_STAT_OCCURRENCES,
	WI_STAT_IGNORED,
	WI_STAT_TOMBSTONES,
	WI_STAT_RETRIES,
	WI_STAT_QUARANTINED,
	WI_STAT_UNORDERABLE,
	WI_STAT_FENCED,
	WI_STAT_DEFERRED,
	WI_STAT_RATE_LIMITED,
	WI_STAT_AUTH_REFUSED,
	WI_STAT_SWEEPS,
	WI_STAT_SWEEPS_FAILED,
	WI_STAT_REPAIRS,
	WI_STAT_ERRORS,
	WI_STAT_REFUSED,			/* requests not sent: URL off the source's origin */
	WI_STAT_REVIVED,			/* tombstones a read inferred, overridden by a newer version */
	WI_STAT_HIDDEN,				/* reads that found nothing of an object outside a horizon */
	WI_STAT__COUNT
} WiStat;

/* shmem.c: the counters' bytes, and taking them (zeroed unless found) */
extern Size wi_stats_shmem_size(void);
extern void wi_stats_shmem_attach(void *ptr, bool found);

extern void wi_stat_add(WiStat stat, uint64 n);
extern void wi_stat_latency(double ms);
extern uint64 wi_stat_get(WiStat stat);

#endif							/* WI_STATS_H */
