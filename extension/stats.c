/*
 * stats.c
 *		The background worker's counters in shared memory, and
 *		webhook_inbox.worker_stats() that shows them.
 *
 * Counters are atomics so that the worker and any backend running
 * sweep_now() add to them without a lock; they start at zero with the
 * server.  Without shared_preload_libraries there is no worker and
 * worker_stats() shows zeros.
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
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
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
stats_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(WiStats)));
}

static void
stats_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	wi_stats = ShmemInitStruct("webhook_inbox worker stats", sizeof(WiStats), &found);
	if (!found)
	{
		for (int i = 0; i < WI_STAT__COUNT; i++)
			pg_atomic_init_u64(&wi_stats->counters[i], 0);
		pg_atomic_init_u64(&wi_stats->latency_count, 0);
		pg_atomic_init_u64(&wi_stats->latency_us_sum, 0);
		pg_atomic_init_u64(&wi_stats->latency_us_max, 0);
	}
	LWLockRelease(AddinShmemInitLock);
}

/* Called from _PG_init (through wi_worker_init) while preloading. */
void
wi_stats_shmem_init(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = stats_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = stats_shmem_startup;
}

void
wi_stat_add(WiStat stat, uint64 n)
{
	if (wi_stats != NULL && n > 0)
		pg_atomic_fetch_add_u64(&wi_stats->counters[stat], n);
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
 * worker_stats(): one row, the columns in WiStat order after the worker's
 * pid, then the average and maximum fetch latency in milliseconds.
 */
Datum
wi_worker_stats(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[WI_STAT__COUNT + 3];
	bool		nulls[WI_STAT__COUNT + 3] = {0};
	int			pid = 0;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "webhook_inbox: worker_stats must return a composite type");
	if (desc->natts != WI_STAT__COUNT + 3)
		elog(ERROR, "webhook_inbox: worker_stats returns %d columns, the library has %d",
			 desc->natts, WI_STAT__COUNT + 3);

	if (wi_shared != NULL)
	{
		SpinLockAcquire(&wi_shared->mutex);
		pid = wi_shared->worker_pid;
		SpinLockRelease(&wi_shared->mutex);
	}
	values[0] = Int32GetDatum(pid);
	nulls[0] = pid == 0;
	for (int i = 0; i < WI_STAT__COUNT; i++)
		values[i + 1] = Int64GetDatum(wi_stats ? (int64) pg_atomic_read_u64(&wi_stats->counters[i]) : 0);
	if (wi_stats != NULL && pg_atomic_read_u64(&wi_stats->latency_count) > 0)
	{
		uint64		count = pg_atomic_read_u64(&wi_stats->latency_count);

		values[WI_STAT__COUNT + 1] =
			Float8GetDatum(pg_atomic_read_u64(&wi_stats->latency_us_sum) / 1000.0 / count);
		values[WI_STAT__COUNT + 2] =
			Float8GetDatum(pg_atomic_read_u64(&wi_stats->latency_us_max) / 1000.0);
	}
	else
	{
		nulls[WI_STAT__COUNT + 1] = true;
		nulls[WI_STAT__COUNT + 2] = true;
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}
