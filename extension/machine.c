/*
 * machine.c
 *		transition_allowed(machine, from, to): reachability over state machines.
 *
 * A transition is legal iff the target is reachable from the source along
 * the machine's edges, so "unknown -> captured" is legal when captured is
 * the first event to arrive, and "captured -> pending" never is.  Machines
 * are small and read often: each backend loads every edge once, computes the
 * reachability of each machine, and keeps it until the machines table
 * changes.  A statement trigger on that table (wi_machines_changed) sends a
 * relcache invalidation, which every backend receives at the writer's commit.
 *
 * The cache must never be marked valid with edges older than an
 * invalidation already taken in.  So the callback is registered when the
 * library loads (an invalidation taken in before the first load is not
 * lost), the edges are read with the latest snapshot, not the caller's
 * (which a REPEATABLE READ transaction may have taken before the change), and
 * every invalidation bumps a generation: a load that an invalidation came
 * during (it is taken in when the read locks the table) serves the current
 * call but leaves the cache invalid, so the next call reads again.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "webhook_inbox.h"

PG_FUNCTION_INFO_V1(wi_transition_allowed);
PG_FUNCTION_INFO_V1(wi_machines_changed);

typedef struct Machine
{
	char	   *name;
	int			nstates;
	char	  **states;
	bool	   *reach;			/* nstates x nstates: reach[from * n + to] */
	struct Machine *next;
} Machine;

static MemoryContext machine_cxt = NULL;
static Machine *machines = NULL;
static bool machines_valid = false;
static uint64 machines_generation = 0;	/* bumped by every invalidation */
static Oid	machines_relid = InvalidOid;

static void
machines_invalidate(void)
{
	machines_valid = false;
	machines_generation++;
}

static void
machines_inval_callback(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == machines_relid)
		machines_invalidate();
}

/* At library load: from now on no invalidation of machines goes unseen. */
void
wi_machine_init(void)
{
	CacheRegisterRelcacheCallback(machines_inval_callback, (Datum) 0);
}

static int
state_index(Machine *m, const char *state, bool add)
{
	for (int i = 0; i < m->nstates; i++)
		if (strcmp(m->states[i], state) == 0)
			return i;
	if (!add)
		return -1;
	m->states = repalloc(m->states, sizeof(char *) * (m->nstates + 1));
	m->states[m->nstates] = pstrdup(state);
	return m->nstates++;
}

/* Load every machine's edges and compute their transitive closure. */
static void
load_machines(void)
{
	MemoryContext old;
	int			rc;
	Oid			nsp;
	uint64		generation;

	if (machine_cxt == NULL)
		machine_cxt = AllocSetContextCreate(CacheMemoryContext, "webhook_inbox machines",
											ALLOCSET_SMALL_SIZES);
	else
		MemoryContextReset(machine_cxt);
	machines = NULL;

	nsp = get_namespace_oid("webhook_inbox", false);
	machines_relid = get_relname_relid("machines", nsp);
	/* an invalidation from here on (the read below takes it in) wins */
	generation = machines_generation;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "webhook_inbox: SPI_connect failed");
	/* every committed edge, whatever snapshot the caller's transaction has */
	PushActiveSnapshot(GetLatestSnapshot());
	if (wi_debug_machines_load_lock != 0)
	{
		/* test hook: wait here until whoever holds this advisory lock lets go */
		Datum		key = Int64GetDatum((int64) wi_debug_machines_load_lock);

		DirectFunctionCall1(pg_advisory_lock_int8, key);
		DirectFunctionCall1(pg_advisory_unlock_int8, key);
	}
	rc = SPI_execute("SELECT machine, from_state, to_state FROM webhook_inbox.machines "
					 "ORDER BY machine", true, 0);
	PopActiveSnapshot();
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "webhook_inbox: reading machines failed: %s", SPI_result_code_string(rc));

	old = MemoryContextSwitchTo(machine_cxt);
	/* first pass: states; second: edges into a fresh matrix */
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		char	   *name = SPI_getvalue(tup, SPI_tuptable->tupdesc, 1);
		Machine    *m = machines;

		if (m == NULL || strcmp(m->name, name) != 0)
		{
			m = palloc0(sizeof(Machine));
			m->name = name;
			m->states = palloc(sizeof(char *));
			m->next = machines;
			machines = m;
		}
		state_index(m, SPI_getvalue(tup, SPI_tuptable->tupdesc, 2), true);
		state_index(m, SPI_getvalue(tup, SPI_tuptable->tupdesc, 3), true);
	}
	for (Machine *m = machines; m != NULL; m = m->next)
		m->reach = palloc0(sizeof(bool) * m->nstates * m->nstates);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		char	   *name = SPI_getvalue(tup, SPI_tuptable->tupdesc, 1);
		Machine    *m = machines;

		while (strcmp(m->name, name) != 0)
			m = m->next;
		m->reach[state_index(m, SPI_getvalue(tup, SPI_tuptable->tupdesc, 2), false) * m->nstates +
				 state_index(m, SPI_getvalue(tup, SPI_tuptable->tupdesc, 3), false)] = true;
	}
	/* Warshall's closure: machines have a handful of states */
	for (Machine *m = machines; m != NULL; m = m->next)
	{
		int			n = m->nstates;

		for (int k = 0; k < n; k++)
			for (int i = 0; i < n; i++)
				if (m->reach[i * n + k])
					for (int j = 0; j < n; j++)
						if (m->reach[k * n + j])
							m->reach[i * n + j] = true;
	}
	MemoryContextSwitchTo(old);
	SPI_finish();
	machines_valid = (generation == machines_generation);
}

/*
 * transition_allowed(machine text, from_state text, to_state text) returns bool
 *
 * NULL arguments give NULL.  An unknown machine is an error; a state the
 * machine does not know is simply not reachable.
 */
Datum
wi_transition_allowed(PG_FUNCTION_ARGS)
{
	char	   *name;
	char	   *from;
	char	   *to;
	Machine    *m;
	int			f;
	int			t;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		PG_RETURN_NULL();
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	from = text_to_cstring(PG_GETARG_TEXT_PP(1));
	to = text_to_cstring(PG_GETARG_TEXT_PP(2));

	if (!machines_valid)
		load_machines();
	for (m = machines; m != NULL; m = m->next)
		if (strcmp(m->name, name) == 0)
			break;
	if (m == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("machine \"%s\" does not exist", name),
				 errhint("Insert its edges into webhook_inbox.machines.")));
	f = state_index(m, from, false);
	t = state_index(m, to, false);
	PG_RETURN_BOOL(f >= 0 && t >= 0 && m->reach[f * m->nstates + t]);
}

/* Statement trigger on machines: invalidate every backend's cache at commit. */
Datum
wi_machines_changed(PG_FUNCTION_ARGS)
{
	wi_invalidate_trigger_table(fcinfo, "_machines_changed");
	machines_invalidate();
	return PointerGetDatum(NULL);
}
