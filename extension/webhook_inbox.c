/*
 * webhook_inbox.c
 *		Module entry point: GUCs, shared memory and the background worker.
 *
 * Every SQL function works without shared_preload_libraries, so users can
 * run their own workers on the claim API; the background worker and the
 * commit-time wakeup need the library preloaded.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"

#include "webhook_inbox.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

SPIPlanPtr
wi_keep_plan(const char *sql, int nargs, Oid *types)
{
	SPIPlanPtr	plan = SPI_prepare(sql, nargs, types);

	if (plan == NULL)
		elog(ERROR, "webhook_inbox: preparing a statement failed: %s",
			 SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "webhook_inbox: keeping a prepared statement failed");
	return plan;
}

void
_PG_init(void)
{
	wi_guc_init(process_shared_preload_libraries_in_progress);
	wi_machine_init();

	if (!process_shared_preload_libraries_in_progress)
		return;

	wi_shmem_init();
	wi_worker_init();
}
