/*
 * spi_util.c
 *		Helpers every part of the extension shares: statements prepared once
 *		per backend, and the trigger body that empties a per-backend cache.
 *
 * They call nothing else of the extension, so that the files using them
 * (intake, claim, guard, machine, route_cache …) and the module entry point
 * that calls those files' init functions never call each other in a circle.
 * Declared in webhook_inbox.h.
 */
#include "postgres.h"

#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/inval.h"

#include "webhook_inbox.h"

/*
 * Prepare and keep a statement for the session.  cursor_options is 0 or
 * CURSOR_OPT_GENERIC_PLAN, for a statement the plan cache would otherwise
 * plan again on every execution (custom plans look cheaper for arrays).
 */
SPIPlanPtr
wi_keep_plan_opts(const char *sql, int nargs, Oid *types, int cursor_options)
{
	SPIPlanPtr	plan = SPI_prepare_cursor(sql, nargs, types, cursor_options);

	if (plan == NULL)
		elog(ERROR, "webhook_inbox: preparing a statement failed: %s",
			 SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "webhook_inbox: keeping a prepared statement failed");
	return plan;
}

SPIPlanPtr
wi_keep_plan(const char *sql, int nargs, Oid *types)
{
	return wi_keep_plan_opts(sql, nargs, types, 0);
}

/* See webhook_inbox.h: the body of a cache's statement trigger. */
void
wi_invalidate_trigger_table(FunctionCallInfo fcinfo, const char *name)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s() must be called as a trigger", name)));
	CacheInvalidateRelcache(trigdata->tg_relation);
}
