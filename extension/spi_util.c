/*
 * spi_util.c
 *		Helpers every part of the extension shares: statements prepared once
 *		per backend, the trigger body that empties a per-backend cache, and
 *		the lookup of a source's id by name.
 *
 * They call nothing else of the extension, so that the files using them
 * (intake, claim, guard, machine, route_cache …) and the module entry point
 * that calls those files' init functions never call each other in a circle.
 * Declared in webhook_inbox.h.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
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

/*
 * See webhook_inbox.h: the id of the source named source, through
 * _source_id() (which raises for an unknown source), in an SPI connection
 * of its own.
 */
int32
wi_source_id_by_name(const char *source)
{
	static const char *const sql = "SELECT webhook_inbox._source_id($1)";
	Oid			t[1] = {TEXTOID};
	Datum		v[1];
	bool		isnull;
	int			rc;
	int32		source_id;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "webhook_inbox: SPI_connect failed");
	v[0] = CStringGetTextDatum(source);
	rc = SPI_execute_with_args(sql, 1, t, v, NULL, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "webhook_inbox: \"%s\" failed: %s", sql, SPI_result_code_string(rc));
	source_id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
											&isnull));
	SPI_finish();
	return source_id;
}
