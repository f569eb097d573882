/*
 * sweep.c
 *		Reconciliation sweeps: when they run.  The worker runs the passes
 *		that are due (webhook_inbox.sweep_interval and full_sweep_interval),
 *		each step its own transaction; sweep_now() runs one in the calling
 *		session, inside its transaction.
 *
 * What a pass does (list, compare, repair, move the checkpoint) is
 * sweep_pass.c's; this file only chooses the passes and starts them.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "ratelimit.h"
#include "restore_guard.h"
#include "step.h"
#include "sweep.h"
#include "sweep_int.h"
#include "webhook_inbox.h"

PG_FUNCTION_INFO_V1(wi_sweep_now);

/* ---------- scheduling in the worker ---------- */

typedef struct Targets
{
	int32	   *source_ids;
	char	  **types;
	char	  **layers;
	char	  **tenants;
	int			n;
} Targets;

static void
targets_step(void *arg)
{
	Targets    *tg = (Targets *) arg;
	MemoryContext cxt = wi_step_cxt();
	Oid			t[2] = {TEXTOID, TEXTOID};
	Datum		v[2] = {CStringGetTextDatum(psprintf("%d seconds", wi_sweep_interval_s)),
	CStringGetTextDatum(psprintf("%d seconds", wi_full_sweep_interval_s))};

	wi_spi_exec("SELECT source_id, object_type, layer, tenant FROM webhook_inbox._sweep_targets($1::interval, "
				"$2::interval)", 2, t, v, NULL, SPI_OK_SELECT);
	tg->n = (int) SPI_processed;
	tg->source_ids = MemoryContextAlloc(cxt, sizeof(int32) * Max(tg->n, 1));
	tg->types = MemoryContextAlloc(cxt, sizeof(char *) * Max(tg->n, 1));
	tg->layers = MemoryContextAlloc(cxt, sizeof(char *) * Max(tg->n, 1));
	tg->tenants = MemoryContextAlloc(cxt, sizeof(char *) * Max(tg->n, 1));
	for (int i = 0; i < tg->n; i++)
	{
		bool		isnull;

		tg->source_ids[i] = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i],
														SPI_tuptable->tupdesc, 1, &isnull));
		tg->types[i] = MemoryContextStrdup(cxt, SPI_getvalue(SPI_tuptable->vals[i],
															 SPI_tuptable->tupdesc, 2));
		tg->layers[i] = MemoryContextStrdup(cxt, SPI_getvalue(SPI_tuptable->vals[i],
															  SPI_tuptable->tupdesc, 3));
		tg->tenants[i] = MemoryContextStrdup(cxt, SPI_getvalue(SPI_tuptable->vals[i],
															   SPI_tuptable->tupdesc, 4));
	}
}

/*
 * In the worker, after each round: runs the sweeps that are due.  Looks at
 * most once a second; a pair without a list API records no run, costs one
 * source lookup per look and sends nothing.
 *
 * Fetches on notify go first: when a delivery has woken the worker since
 * this call began, or a naptime has passed (a fetch waits for its object's
 * notifications to be quiet, fetch_delay, and nothing wakes the worker
 * when they are), the sweeps stop after the pass under way, the worker's
 * round makes its fetches, and the next call goes on with the passes left
 * (the round of sweeps is kept, not looked for again).  Returns whether
 * it stopped with passes left: the worker then goes on without a naptime.  A pass's requests wait for their slots within the
 * provider's limits (pace.c), so a round over N tenants takes the time the
 * limits allow, and the fetches share the same budget.
 */
bool
wi_sweep_due(const WiSteps *steps)
{
	static TimestampTz last_check = 0;
	static MemoryContext round_cxt = NULL;	/* the round's targets, across yields */
	static Targets round = {NULL, NULL, NULL, NULL, 0};
	static int	next = 0;		/* the round's next target; round.n: none */
	TimestampTz now = GetCurrentTimestamp();
	uint64		wakeups;

	if (wi_sweep_interval_s <= 0 && wi_full_sweep_interval_s <= 0)
		return false;
	if (next >= round.n)
	{
		/* a new round: what is due now, looked for at most once a second */
		Targets		tg = {NULL, NULL, NULL, NULL, 0};
		MemoryContext old;

		if (now - last_check < USECS_PER_SEC)
			return false;
		last_check = now;
		/* the tenants first, so that a tenant the provider lists is swept too */
		wi_tenants_due(steps);
		if (wi_step_run(steps, targets_step, &tg) != NULL)
			return false;
		if (round_cxt == NULL)
			round_cxt = AllocSetContextCreate(TopMemoryContext, "webhook_inbox sweep round",
											  ALLOCSET_SMALL_SIZES);
		MemoryContextReset(round_cxt);
		old = MemoryContextSwitchTo(round_cxt);
		round.n = tg.n;
		round.source_ids = palloc(sizeof(int32) * Max(tg.n, 1));
		round.types = palloc(sizeof(char *) * Max(tg.n, 1));
		round.layers = palloc(sizeof(char *) * Max(tg.n, 1));
		round.tenants = palloc(sizeof(char *) * Max(tg.n, 1));
		for (int i = 0; i < tg.n; i++)
		{
			round.source_ids[i] = tg.source_ids[i];
			round.types[i] = pstrdup(tg.types[i]);
			round.layers[i] = pstrdup(tg.layers[i]);
			round.tenants[i] = pstrdup(tg.tenants[i]);
		}
		MemoryContextSwitchTo(old);
		next = 0;
	}
	wakeups = wi_wakeups();
	while (next < round.n && !wi_steps_stopping(steps))
	{
		int			i = next;

		/* the worker's round first: the round of sweeps goes on after it */
		if (wi_wakeups() != wakeups ||
			TimestampDifferenceExceeds(now, GetCurrentTimestamp(), wi_naptime_ms))
			return true;
		next++;
		/* a source inside its Retry-After window is swept once it ends */
		if (GetCurrentTimestamp() < wi_rate_for(round.source_ids[i])->not_before)
			continue;
		(void) wi_sweep_run(steps, round.source_ids[i], round.tenants[i], round.types[i], round.layers[i],
							"schedule");
	}
	return false;
}

/* ---------- sweep_now ---------- */

/*
 * _sweep_now(source text, object_type text, layer text) returns bigint: the
 * run's id.
 * The SQL wrapper sweep_now() returns the run's row.
 */
Datum
wi_sweep_now(PG_FUNCTION_ARGS)
{
	char	   *source;
	char	   *object_type;
	char	   *layer;
	char	   *tenant = "";
	int32		source_id;
	int64		run_id;

	/* a database still at 0.1.0 has no path for this: say what to run */
	wi_schema_require_current("sweep_now");

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("source, object_type and layer must not be null")));
	source = text_to_cstring(PG_GETARG_TEXT_PP(0));
	object_type = text_to_cstring(PG_GETARG_TEXT_PP(1));
	layer = text_to_cstring(PG_GETARG_TEXT_PP(2));
	if (PG_NARGS() > 3 && !PG_ARGISNULL(3))
		tenant = text_to_cstring(PG_GETARG_TEXT_PP(3));
	if (strcmp(layer, "incremental") != 0 && strcmp(layer, "full") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown sweep layer \"%s\"", layer),
				 errhint("A sweep layer is incremental or full.")));

	source_id = wi_source_id_by_name(source);
	/* a restored copy lists nothing until resume_outbound() */
	wi_outbound_guard();

	{
		WiSteps		steps = {WI_STEPS_IN_CALLER, psprintf("backend:%d", MyProcPid), NULL};

		run_id = wi_sweep_run(&steps, source_id, tenant, object_type, layer, "manual");
	}
	if (run_id == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("source \"%s\" has no list API for object type \"%s\"", source, object_type),
				 errdetail("Sweeps need the source's api_base and an adapter that can list this type."),
				 errhint("Set api_base (and, for a generic read API, settings.list_url) with create_source().")));
	PG_RETURN_INT64(run_id);
}
