/*
 * webhook_inbox.c
 *		Module entry point: GUCs, shared memory and the background worker.
 *
 * Every SQL function works without shared_preload_libraries, so users can
 * run their own workers on the claim API; the background worker and the
 * commit-time wakeup need the library preloaded.
 */
#include "postgres.h"

#include "commands/trigger.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/inval.h"

#include "compat.h"
#include "route_cache.h"
#include "webhook_inbox.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

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

void
_PG_init(void)
{
	wi_guc_init(process_shared_preload_libraries_in_progress);
	wi_compat_init();
	wi_machine_init();
	wi_route_cache_init();

	if (!process_shared_preload_libraries_in_progress)
		return;

	wi_shmem_init();
	wi_worker_init();
}
