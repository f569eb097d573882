/*
 * pace.c
 *		How many requests each metered unit of a provider may take, and
 *		when: one table of units in shared memory (laid out by shmem.c), so
 *		that the worker's rounds and sweeps and every backend's sweep_now()
 *		draw on the same budget; and pace_status(), which shows it.
 *
 * A unit is paced by the generic cell rate algorithm (GCRA, the token
 * bucket kept as one timestamp): each request moves the unit's theoretical
 * arrival time (tat) on by 1/rate; a request may go when tat is at most
 * (burst - 1)/rate ahead of now.  With burst 1 requests are evenly spaced,
 * and no one-second window ever holds more than rate of them, which is how
 * Stripe and a simulator enforcing its limits count.  A unit whose tat is
 * in the past is idle: its slot may be reused without losing anything, so
 * a table of fixed size serves any number of tenants as long as fewer
 * than its size are busy at once.
 *
 * Without shared_preload_libraries there is no shared memory: the table is
 * then this process's own (a backend's sweep_now() still paces itself).
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "pace.h"
#include "step.h"

PG_FUNCTION_INFO_V1(wi_pace_status);

#define PACE_SLOTS 4096			/* a power of two */
#define PACE_PROBE 32			/* slots looked at for one key */

typedef struct PaceSlot
{
	int32		source_id;		/* 0: never used */
	char		key[WI_PACE_KEY_LEN];
	TimestampTz tat;			/* the unit's theoretical arrival time */
	double		rate;			/* as last taken, for pace_status() */
	double		burst;
} PaceSlot;

typedef struct PaceTable
{
	slock_t		mutex;
	PaceSlot	slots[PACE_SLOTS];
} PaceTable;

static PaceTable *pace_table = NULL;

Size
wi_pace_shmem_size(void)
{
	return sizeof(PaceTable);
}

void
wi_pace_shmem_attach(void *ptr, bool found)
{
	pace_table = (PaceTable *) ptr;
	if (!found)
	{
		memset(pace_table, 0, sizeof(PaceTable));
		SpinLockInit(&pace_table->mutex);
	}
}

/* The shared table, or (not preloaded) this process's own. */
static PaceTable *
table(void)
{
	if (pace_table == NULL)
	{
		pace_table = MemoryContextAllocZero(TopMemoryContext, sizeof(PaceTable));
		SpinLockInit(&pace_table->mutex);
	}
	return pace_table;
}

/*
 * The slot of (source_id, key), under the table's lock: found, else a free
 * or idle one taken for it (its tat 0: nothing owed), else the one of the
 * probed slots nearest to idle.
 */
static PaceSlot *
slot_for(PaceTable *t, int32 source_id, const char *key, TimestampTz now)
{
	uint32		h = hash_bytes((const unsigned char *) key, strlen(key)) ^ ((uint32) source_id * 2654435761U);
	PaceSlot   *reuse = NULL;

	for (int i = 0; i < PACE_PROBE; i++)
	{
		PaceSlot   *s = &t->slots[(h + i) & (PACE_SLOTS - 1)];

		if (s->source_id == source_id && strcmp(s->key, key) == 0)
			return s;
		/* an unused or idle slot costs nothing to take; else the least owed */
		if (reuse == NULL || (reuse->source_id != 0 && reuse->tat > now &&
							  (s->source_id == 0 || s->tat < reuse->tat)))
			reuse = s;
	}
	reuse->source_id = source_id;
	strlcpy(reuse->key, key, sizeof(reuse->key));
	reuse->tat = 0;
	return reuse;
}

/*
 * Microseconds per request of u, PACE_MARGIN longer than the rate's: a
 * request leaves a moment after its slot is taken, and the provider counts
 * when it arrives, so two in a row may arrive closer than they were taken.
 */
#define PACE_MARGIN 1.03

static int64
interval_us(const WiPaceUnit *u)
{
	return (int64) (USECS_PER_SEC * PACE_MARGIN / u->rate);
}

double
wi_pace_take(int32 source_id, const WiPace *p)
{
	PaceTable  *t = table();
	TimestampTz now = GetCurrentTimestamp();
	PaceSlot   *slots[WI_PACE_UNITS];
	int64		wait = 0;

	SpinLockAcquire(&t->mutex);
	for (int i = 0; i < WI_PACE_UNITS; i++)
	{
		const WiPaceUnit *u = &p->units[i];
		int64		ahead = 0;

		slots[i] = NULL;
		if (u->key[0] == '\0')
			continue;
		slots[i] = slot_for(t, source_id, u->key, now);
		slots[i]->rate = u->rate;
		slots[i]->burst = u->burst;
		/* a paced unit may go when tat is at most burst - 1 intervals ahead */
		if (u->rate > 0)
			ahead = (int64) ((Max(u->burst, 1) - 1) * interval_us(u));
		wait = Max(wait, slots[i]->tat - ahead - now);
	}
	if (wait <= 0)
		for (int i = 0; i < WI_PACE_UNITS; i++)
			if (slots[i] != NULL && p->units[i].rate > 0)
				slots[i]->tat = Max(slots[i]->tat, now) + interval_us(&p->units[i]);
	SpinLockRelease(&t->mutex);
	return wait <= 0 ? 0 : (double) wait / USECS_PER_SEC;
}

double
wi_pace_wait(const WiSteps *steps, int32 source_id, const WiPace *p, double max_s)
{
	for (;;)
	{
		double		wait = wi_pace_take(source_id, p);

		if (wait <= 0)
			return 0;
		if (wait > max_s)
			return wait;
		/* in steps of at most 100 ms, looking for a stop in between */
		while (wait > 0)
		{
			if (steps->stop_flag == NULL)
				CHECK_FOR_INTERRUPTS();
			else if (wi_steps_stopping(steps))
				return -1;
			pg_usleep((long) (Min(wait, 0.1) * USECS_PER_SEC));
			wait -= Min(wait, 0.1);
		}
	}
}

char *
wi_pace_describe(const WiPace *p)
{
	StringInfoData b;

	initStringInfo(&b);
	for (int i = 0; i < WI_PACE_UNITS; i++)
		if (p->units[i].key[0] != '\0')
		{
			if (b.len > 0)
				appendStringInfoString(&b, ", ");
			if (p->units[i].rate > 0)
				appendStringInfo(&b, "%s at %g/s", p->units[i].key, p->units[i].rate);
			else
				appendStringInfo(&b, "%s (by its answers)", p->units[i].key);
		}
	return b.data;
}

void
wi_pace_hold(int32 source_id, const WiPace *p, TimestampTz until)
{
	PaceTable  *t = table();
	PaceSlot   *s;

	if (p->units[0].key[0] == '\0')
		return;
	SpinLockAcquire(&t->mutex);
	s = slot_for(t, source_id, p->units[0].key, GetCurrentTimestamp());
	s->tat = Max(s->tat, until);
	SpinLockRelease(&t->mutex);
}

/*
 * pace_status() returns setof (source_id, unit, rate, burst, ready_at,
 * wait_s): each unit that has been paced and is not idle, when it may take
 * its next request and how long that is from now.
 */
Datum
wi_pace_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	PaceTable  *t = table();
	TimestampTz now = GetCurrentTimestamp();
	PaceSlot   *copy = palloc(sizeof(PaceSlot) * PACE_SLOTS);

	InitMaterializedSRF(fcinfo, 0);
	/* a copy, so that no lock is held while tuples are built */
	SpinLockAcquire(&t->mutex);
	memcpy(copy, t->slots, sizeof(PaceSlot) * PACE_SLOTS);
	SpinLockRelease(&t->mutex);
	for (int i = 0; i < PACE_SLOTS; i++)
	{
		PaceSlot   *s = &copy[i];
		Datum		values[6];
		bool		nulls[6] = {false, false, false, false, false, false};
		int64		ahead;

		if (s->source_id == 0 || s->tat <= now)
			continue;
		/* how far ahead of now a request may be taken: burst - 1 intervals */
		ahead = s->rate > 0 ? (int64) ((Max(s->burst, 1) - 1) * (USECS_PER_SEC * PACE_MARGIN / s->rate)) : 0;
		values[0] = Int32GetDatum(s->source_id);
		values[1] = CStringGetTextDatum(s->key);
		values[2] = Float8GetDatum(s->rate);
		values[3] = Float8GetDatum(s->burst);
		values[4] = TimestampTzGetDatum(Max(s->tat - ahead, now));
		values[5] = Float8GetDatum(Max(s->tat - ahead - now, 0) / (double) USECS_PER_SEC);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	pfree(copy);
	return (Datum) 0;
}
