/*
 * restore_guard.c
 *		Outbound work waits in a restored copy of the database.
 *
 * A dump restored elsewhere carries webhook_inbox.installation, the identity
 * of the database the data was recorded in; sql/ops.sql's _outbound_paused()
 * compares it with this database's and says why outbound work must wait.
 * Every path that sends a request asks first: the background worker once
 * per cycle (it then fetches, sweeps and sends nothing, and says so once in
 * the log), run_effects() and sweep_now() before their first request (they
 * raise).  resume_outbound() ends the pause.
 */
#include "postgres.h"

#include "executor/spi.h"
#include "utils/memutils.h"

#include "outbound.h"
#include "restore_guard.h"
#include "step.h"

/* the reason of the pause the log last announced; NULL: not paused */
static char *announced_reason = NULL;

typedef struct PauseCheck
{
	char	   *reason;			/* in the caller's context; NULL: not paused */
} PauseCheck;

static void
pause_check_xact(void *arg)
{
	PauseCheck *pc = (PauseCheck *) arg;
	char	   *why;

	wi_spi_exec("SELECT webhook_inbox._outbound_paused()", 0, NULL, NULL, NULL, SPI_OK_SELECT);
	why = wi_spi_first_text();
	pc->reason = why ? MemoryContextStrdup(wi_step_cxt(), why) : NULL;
}

/*
 * The background worker's check, once per cycle, as a step of its own.
 * Returns true when outbound work must wait.  The first cycle of a pause
 * logs its reason and the call that ends it, and its end is logged once:
 * never a line per cycle.  A check that fails (its error is logged by the
 * step) counts as paused: nothing leaves unless the identity is known good.
 */
bool
wi_outbound_paused(const WiSteps *steps)
{
	PauseCheck	pc = {NULL};

	if (wi_step_run(steps, pause_check_xact, &pc) != NULL)
	{
		wi_outbound_cycle_verdict(false);
		return true;
	}
	wi_outbound_cycle_verdict(pc.reason == NULL);
	if (pc.reason == NULL)
	{
		if (announced_reason != NULL)
		{
			ereport(LOG, (errmsg("webhook_inbox worker: outbound work resumed")));
			pfree(announced_reason);
			announced_reason = NULL;
		}
		return false;
	}
	if (announced_reason == NULL || strcmp(announced_reason, pc.reason) != 0)
	{
		ereport(LOG,
				(errmsg("webhook_inbox worker: outbound work paused: %s", pc.reason),
				 errdetail("No fetch, sweep or effect is sent, so that a copy never acts on the provider accounts of the original; deliveries are still stored."),
				 errhint("Check the sources' api_base and api_token, then run SELECT webhook_inbox.resume_outbound(); in this database.")));
		if (announced_reason != NULL)
			pfree(announced_reason);
		announced_reason = MemoryContextStrdup(TopMemoryContext, pc.reason);
	}
	return true;
}

/*
 * The SQL paths' check (run_effects(), sweep_now()): raises, with the
 * reason and the call that resumes, when outbound work is paused.  Runs in
 * the caller's transaction through a SPI connection of its own.
 */
void
wi_outbound_guard(void)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "webhook_inbox: SPI_connect failed");
	wi_spi_exec("SELECT webhook_inbox._outbound_guard()", 0, NULL, NULL, NULL, SPI_OK_SELECT);
	SPI_finish();
}
