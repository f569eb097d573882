/*
 * step.c
 *		The transaction steps shared by the worker's round, the sweeps and
 *		the external effects.
 *
 * A step is a short unit of SQL work.  The background worker runs each in
 * a transaction of its own, so one failure costs only that step: it is
 * logged, counted and handed back to the caller as a message.  sweep_now()
 * runs the same steps inside the caller's transaction, and run_effects()
 * in a procedure that commits between them; there errors propagate as
 * usual.  The mode is the caller's WiSteps, never a process-wide flag.
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "stats.h"
#include "step.h"

/* where the running step puts what outlives it: the caller's context */
static MemoryContext step_cxt = NULL;

MemoryContext
wi_step_cxt(void)
{
	return step_cxt;
}

bool
wi_steps_stopping(const WiSteps *steps)
{
	return steps->stop_flag ? *steps->stop_flag != 0 : InterruptPending;
}

void
wi_step_begin(WiStepMode mode)
{
	if (mode == WI_STEPS_NONATOMIC)
		return;					/* the procedure's connection is open */
	if (mode == WI_STEPS_OWN_XACT)
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
	}
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "webhook_inbox: SPI_connect failed");
	if (mode == WI_STEPS_OWN_XACT)
		PushActiveSnapshot(GetTransactionSnapshot());
}

void
wi_step_end(WiStepMode mode)
{
	if (mode == WI_STEPS_NONATOMIC)
	{
		SPI_commit();
		return;
	}
	SPI_finish();
	if (mode == WI_STEPS_OWN_XACT)
	{
		PopActiveSnapshot();
		CommitTransactionCommand();
		pgstat_report_stat(false);
	}
}

char *
wi_step_catch(MemoryContext cxt, const char *what)
{
	ErrorData  *edata;
	char	   *msg;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();
	AbortCurrentTransaction();
	msg = pstrdup(edata->message);
	ereport(LOG,
			(errmsg("webhook_inbox worker: %s%s", what, edata->message),
			 edata->detail ? errdetail_internal("%s", edata->detail) : 0));
	FreeErrorData(edata);
	wi_stat_add(WI_STAT_ERRORS, 1);
	return msg;
}

char *
wi_step_run(const WiSteps *steps, void (*fn) (void *), void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	MemoryContext save_step_cxt = step_cxt;
	char	   *volatile failure = NULL;

	step_cxt = cxt;
	if (steps->mode != WI_STEPS_OWN_XACT)
	{
		wi_step_begin(steps->mode);
		fn(arg);
		wi_step_end(steps->mode);
	}
	else
	{
		PG_TRY();
		{
			wi_step_begin(steps->mode);
			fn(arg);
			wi_step_end(steps->mode);
		}
		PG_CATCH();
		{
			failure = wi_step_catch(cxt, "");
		}
		PG_END_TRY();
	}
	MemoryContextSwitchTo(cxt);
	step_cxt = save_step_cxt;
	return failure;
}

void
wi_spi_exec(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls, int expect)
{
	int			rc = SPI_execute_with_args(sql, nargs, types, values, nulls, false, 0);

	if (rc != expect)
		elog(ERROR, "webhook_inbox: \"%s\" failed: %s", sql, SPI_result_code_string(rc));
}

char *
wi_spi_first_text(void)
{
	if (SPI_processed == 0)
		return NULL;
	return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
}
