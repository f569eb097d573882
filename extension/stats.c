/*
 * stats.c
 *		The background worker's counters in shared memory, and
 *		webhook_inbox.worker_stats() that shows them.
 *
 * The counters live in the extension's shared memory (shmem.c lays them
 * out).  Counters are atomics so that the worker and any backend running
 * sweep_now() add to them without a lock; they start at zero with the
 * server.  Without shared_preload_libraries there is no worker and
 * worker_stats() shows zeros.
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "utils/builtins.h"

#include "stats.h"
#include "webhook_inbox.h"

PG_FUNCTION_INFO_V1(wi_worker_stats);

typedef struct WiStats
{
	pg_atomic_uint64 counters[WI_STAT__COUNT];
	pg_atomic_uint64 latency_count;
	pg_atomic_uint64 latency_us_sum;
	pg_atomic_uint64 latency_us_max;
} WiStats;

static WiStats *wi_stats = NULL;

/* The bytes of the counters, for shmem.c's one request. */
Size
wi_stats_shmem_size(void)
{
	return sizeof(WiStats);
}

/*
 * Take the counters at ptr (shmem.c, under AddinShmemInitLock) and zero
 * them unless found says another process already has.
 */
void
wi_stats_shmem_attach(void *ptr, bool found)
{
	wi_stats = (WiStats *) ptr;
	if (!found)
	{
		for (int i = 0; i < WI_STAT__COUNT; i++)
			pg_atomic_init_u64(&wi_stats->counters[i], 0);
		pg_atomic_init_u64(&wi_stats->latency_count, 0);
		pg_atomic_init_u64(&wi_stats->latency_us_sum, 0);
		pg_atomic_init_u64(&wi_stats->latency_us_max, 0);
	}
}

void
wi_stat_add(WiStat stat, uint64 n)
{
	if (wi_stats != NULL && n > 0)
		pg_atomic_fetch_add_u64(&wi_stats->counters[stat], n);
}

/* A counter's value now (0 without the shared memory). */
uint64
wi_stat_get(WiStat stat)
{
	return wi_stats != NULL ? pg_atomic_read_u64(&wi_stats->counters[stat]) : 0;
}

/* One provider request's latency, for the average and the maximum. */
void
wi_stat_latency(double ms)
{
	uint64		us = ms > 0 ? (uint64) (ms * 1000.0) : 0;
	uint64		max;

	if (wi_stats == NULL)
		return;
	pg_atomic_fetch_add_u64(&wi_stats->latency_count, 1);
	pg_atomic_fetch_add_u64(&wi_stats->latency_us_sum, us);
	max = pg_atomic_read_u64(&wi_stats->latency_us_max);
	while (us > max && !pg_atomic_compare_exchange_u64(&wi_stats->latency_us_max, &max, us))
		;
}

/*
 * The output column of each counter, in WiStat order.  worker_stats() fills
 * its result by these names, so the declaration of any released schema is
 * served (0.1.0's has no refused column) and a counter a release adds is
 * simply not shown by an earlier one.
 */
static const char *const stat_columns[] = {
	"claimed", "events", "fetched", "fetch_errors", "saved", "duplicates", "stale",
	"ties", "backward", "occurrences", "ignored", "tombstones", "retries", "quarantined",
	"unorderable", "fenced", "deferred", "rate_limited", "auth_refused", "sweeps",
	"sweeps_failed", "repairs", "errors", "refused", "revived", "hidden",
};

StaticAssertDecl(lengthof(stat_columns) == WI_STAT__COUNT,
				 "stat_columns must name every WiStat");

/*
 * worker_stats(): one row: the worker's pid, the counters, then the average
 * and maximum fetch latency in milliseconds, each by its column's name.
 */
Datum
wi_worker_stats(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum	   *values;
	bool	   *nulls;
	int			pid = 0;
	uint64		count = 0;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "webhook_inbox: worker_stats must return a composite type");
	values = palloc0(sizeof(Datum) * desc->natts);
	nulls = palloc0(sizeof(bool) * desc->natts);

	if (wi_shared != NULL)
	{
		SpinLockAcquire(&wi_shared->mutex);
		pid = wi_shared->worker_pid;
		SpinLockRelease(&wi_shared->mutex);
	}
	if (wi_stats != NULL)
		count = pg_atomic_read_u64(&wi_stats->latency_count);
	for (int a = 0; a < desc->natts; a++)
	{
		const char *name = NameStr(TupleDescAttr(desc, a)->attname);
		int			k;

		if (strcmp(name, "worker_pid") == 0)
		{
			values[a] = Int32GetDatum(pid);
			nulls[a] = pid == 0;
			continue;
		}
		if (strcmp(name, "fetch_latency_avg_ms") == 0 || strcmp(name, "fetch_latency_max_ms") == 0)
		{
			nulls[a] = count == 0;
			if (count > 0 && strcmp(name, "fetch_latency_avg_ms") == 0)
				values[a] = Float8GetDatum(pg_atomic_read_u64(&wi_stats->latency_us_sum) / 1000.0 / count);
			else if (count > 0)
				values[a] = Float8GetDatum(pg_atomic_read_u64(&wi_stats->latency_us_max) / 1000.0);
			continue;
		}
		for (k = 0; k < WI_STAT__COUNT; k++)
			if (strcmp(name, stat_columns[k]) == 0)
				break;
		if (k == WI_STAT__COUNT)
			elog(ERROR, "webhook_inbox: worker_stats has a column \"%s\" the library does not count", name);
		values[a] = Int64GetDatum(wi_stats ? (int64) pg_atomic_read_u64(&wi_stats->counters[k]) : 0);
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}
