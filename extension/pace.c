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
 * A request that comes after its slot (a sweep pass whose commits took
 * longer than the interval, a sleep that overslept) would push every later
 * slot back by its lateness: over a round of thousands of passes the
 * schedule drifts.  So a unit counted by the second (burst 1, a whole rate
 * of at most PACE_WINDOW) counts a late request as if it had come up to
 * PACE_CREDIT_US earlier, and what keeps its one-second
 * windows within the rate is a window of its own: it remembers its last
 * requests (PACE_WINDOW of them), each by when its answer came back, and
 * a request may go only when, of the last rate of them, the oldest was
 * answered rate intervals ago (the same 3 % wider than a second as the
 * spacing).  The provider counts a request when it arrives, which is
 * before its answer comes back: however late requests left, and however
 * they bunch after a late one, no second of arrivals holds more than the
 * rate.  A request still unanswered holds the window until it is.
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
#define PACE_WINDOW 100			/* requests a unit remembers: Stripe's live rate */

/*
 * Microseconds per request of u, PACE_MARGIN longer than the rate's: a
 * request leaves a moment after its slot is taken, and the provider counts
 * when it arrives, so two in a row may arrive closer than they were taken.
 */
#define PACE_MARGIN 1.03

/*
 * How far back a late request of a windowed unit is counted: a pass held
 * up by the machine for a few intervals does not cost the round that time
 * (at most a few requests then go closer together, within the window).
 */
#define PACE_CREDIT_US (200 * 1000)

/* an unanswered request no longer holds its unit's window after this */
#define PACE_UNANSWERED_MAX_US (120 * USECS_PER_SEC)

typedef struct PaceSlot
{
	int32		source_id;		/* 0: never used */
	char		key[WI_PACE_KEY_LEN];
	TimestampTz tat;			/* the unit's theoretical arrival time */
	double		rate;			/* as last taken, for pace_status() */
	double		burst;
	/* its last requests: when each was answered, or taken while unanswered */
	TimestampTz went[PACE_WINDOW];
	bool		unanswered[PACE_WINDOW];
	int			next;			/* the oldest, once nwent is PACE_WINDOW */
	int			nwent;
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
 * Whether slot s's unit is busy: it owes time (tat ahead of now), or its
 * last request is unanswered or was answered less than a window ago, so
 * that forgetting it could let a window hold more than its rate.
 */
static bool
slot_busy(const PaceSlot *s, TimestampTz now)
{
	int			last = (s->next - 1 + PACE_WINDOW) % PACE_WINDOW;

	return s->source_id != 0 &&
		(s->tat > now || (s->nwent > 0 && (s->unanswered[last] ||
										   s->went[last] + (int64) (USECS_PER_SEC * PACE_MARGIN) > now)));
}

/* Where the slots of (source_id, key) are probed from. */
static uint32
slot_hash(int32 source_id, const char *key)
{
	return hash_bytes((const unsigned char *) key, strlen(key)) ^ ((uint32) source_id * 2654435761U);
}

/* The slot of (source_id, key) if it has one, under the table's lock. */
static PaceSlot *
slot_find(PaceTable *t, int32 source_id, const char *key)
{
	uint32		h = slot_hash(source_id, key);

	for (int i = 0; i < PACE_PROBE; i++)
	{
		PaceSlot   *s = &t->slots[(h + i) & (PACE_SLOTS - 1)];

		if (s->source_id == source_id && strcmp(s->key, key) == 0)
			return s;
	}
	return NULL;
}

/*
 * The slot of (source_id, key), under the table's lock: found, else a free
 * or idle one taken for it (its tat 0: nothing owed), else the one of the
 * probed slots nearest to idle.
 */
static PaceSlot *
slot_for(PaceTable *t, int32 source_id, const char *key, TimestampTz now)
{
	uint32		h = slot_hash(source_id, key);
	PaceSlot   *reuse = slot_find(t, source_id, key);

	if (reuse != NULL)
		return reuse;
	for (int i = 0; i < PACE_PROBE; i++)
	{
		PaceSlot   *s = &t->slots[(h + i) & (PACE_SLOTS - 1)];

		/* an unused or idle slot costs nothing to take; else the least owed */
		if (reuse == NULL || (slot_busy(reuse, now) &&
							  (!slot_busy(s, now) || s->tat < reuse->tat)))
			reuse = s;
	}
	reuse->source_id = source_id;
	strlcpy(reuse->key, key, sizeof(reuse->key));
	reuse->tat = 0;
	reuse->next = reuse->nwent = 0;
	return reuse;
}

/* Microseconds per request of u: PACE_MARGIN longer than its rate's. */
static int64
interval_us(const WiPaceUnit *u)
{
	return (int64) (USECS_PER_SEC * PACE_MARGIN / u->rate);
}

/*
 * How many requests u's window holds (0: u has none, its spacing alone
 * paces it): rate of them for a unit of burst 1 whose rate is a whole
 * number of at most PACE_WINDOW, the units that count by the second.
 */
static int
window_of(const WiPaceUnit *u)
{
	int			n = (int) u->rate;

	if (u->burst > 1 || n < 1 || n > PACE_WINDOW || (double) n != u->rate)
		return 0;
	return n;
}

/*
 * Microseconds from now until slot s may take one more request of u (<= 0:
 * now): once tat is at most burst - 1 intervals ahead, and for a windowed
 * unit once its window has room (of the last n requests, the oldest went
 * n intervals ago).
 */
static int64
slot_wait(const PaceSlot *s, const WiPaceUnit *u, TimestampTz now)
{
	int			n = window_of(u);
	int64		wait;

	if (u->rate <= 0)
		return s->tat - now;
	wait = s->tat - (int64) ((Max(u->burst, 1) - 1) * interval_us(u)) - now;
	if (n > 0 && s->nwent >= n)
	{
		/* the n-th request back must have been answered n intervals ago */
		int			k = (s->next - n + PACE_WINDOW) % PACE_WINDOW;

		if (s->unanswered[k] && s->went[k] + PACE_UNANSWERED_MAX_US > now)
			wait = Max(wait, Min(interval_us(u), s->went[k] + PACE_UNANSWERED_MAX_US - now));
		else
			wait = Max(wait, s->went[k] + n * interval_us(u) - now);
	}
	return wait;
}

/* Slot s takes one request of u now. */
static void
slot_take(PaceSlot *s, const WiPaceUnit *u, TimestampTz now)
{
	if (u->rate <= 0)
		return;
	/* a late request is counted up to PACE_CREDIT_US back: no drift */
	if (window_of(u) > 0)
		s->tat = Max(s->tat, now - PACE_CREDIT_US) + interval_us(u);
	else
		s->tat = Max(s->tat, now) + interval_us(u);
	s->went[s->next] = now;
	s->unanswered[s->next] = true;
	s->next = (s->next + 1) % PACE_WINDOW;
	s->nwent = Min(s->nwent + 1, PACE_WINDOW);
}

double
wi_pace_take(int32 source_id, WiPace *p)
{
	PaceTable  *t = table();
	TimestampTz now = GetCurrentTimestamp();
	PaceSlot   *slots[WI_PACE_UNITS];
	int64		wait = 0;

	SpinLockAcquire(&t->mutex);
	for (int i = 0; i < WI_PACE_UNITS; i++)
	{
		const WiPaceUnit *u = &p->units[i];

		slots[i] = NULL;
		if (u->key[0] == '\0')
			continue;
		slots[i] = slot_for(t, source_id, u->key, now);
		slots[i]->rate = u->rate;
		slots[i]->burst = u->burst;
		wait = Max(wait, slot_wait(slots[i], u, now));
	}
	if (wait <= 0)
	{
		for (int i = 0; i < WI_PACE_UNITS; i++)
			if (slots[i] != NULL)
				slot_take(slots[i], &p->units[i], now);
		p->taken = now;
	}
	SpinLockRelease(&t->mutex);
	return wait <= 0 ? 0 : (double) wait / USECS_PER_SEC;
}

void
wi_pace_answered(int32 source_id, WiPace *p)
{
	PaceTable  *t = table();
	TimestampTz now = GetCurrentTimestamp();

	if (p->taken == 0)
		return;
	SpinLockAcquire(&t->mutex);
	for (int i = 0; i < WI_PACE_UNITS; i++)
	{
		PaceSlot   *s;

		if (p->units[i].key[0] == '\0')
			continue;
		/* its slot, unless another unit has taken it meanwhile */
		if ((s = slot_find(t, source_id, p->units[i].key)) == NULL)
			continue;
		for (int back = 1; back <= s->nwent; back++)
		{
			int			k = (s->next - back + PACE_WINDOW) % PACE_WINDOW;

			if (s->unanswered[k] && s->went[k] == p->taken)
			{
				s->went[k] = now;
				s->unanswered[k] = false;
				break;
			}
		}
	}
	SpinLockRelease(&t->mutex);
	p->taken = 0;
}

double
wi_pace_wait(const WiSteps *steps, int32 source_id, WiPace *p, double max_s)
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

/* A unit as pace_status() shows it. */
typedef struct PaceShown
{
	int32		source_id;
	char		key[WI_PACE_KEY_LEN];
	double		rate;
	double		burst;
	int64		wait;			/* microseconds until its next request */
} PaceShown;

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
	PaceShown  *shown = palloc(sizeof(PaceShown) * PACE_SLOTS);
	int			nshown = 0;

	InitMaterializedSRF(fcinfo, 0);
	/* what to show, copied under the lock: no tuple is built while it is held */
	SpinLockAcquire(&t->mutex);
	for (int i = 0; i < PACE_SLOTS; i++)
	{
		PaceSlot   *s = &t->slots[i];
		WiPaceUnit	u;
		int64		wait;

		if (s->source_id == 0)
			continue;
		u.rate = s->rate;
		u.burst = s->burst;
		wait = slot_wait(s, &u, now);
		if (s->tat <= now && wait <= 0)
			continue;
		shown[nshown].source_id = s->source_id;
		memcpy(shown[nshown].key, s->key, sizeof(s->key));
		shown[nshown].rate = s->rate;
		shown[nshown].burst = s->burst;
		shown[nshown++].wait = Max(wait, 0);
	}
	SpinLockRelease(&t->mutex);
	for (int i = 0; i < nshown; i++)
	{
		Datum		values[6];
		bool		nulls[6] = {false, false, false, false, false, false};

		values[0] = Int32GetDatum(shown[i].source_id);
		values[1] = CStringGetTextDatum(shown[i].key);
		values[2] = Float8GetDatum(shown[i].rate);
		values[3] = Float8GetDatum(shown[i].burst);
		values[4] = TimestampTzGetDatum(now + shown[i].wait);
		values[5] = Float8GetDatum(shown[i].wait / (double) USECS_PER_SEC);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	pfree(shown);
	return (Datum) 0;
}
