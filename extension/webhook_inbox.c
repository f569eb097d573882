/*
 * webhook_inbox.c
 *		Module entry point: _PG_init calls each part's init, and nothing else
 *		lives here.
 *
 * Every SQL function works without shared_preload_libraries, so users can
 * run their own workers on the claim API; the background worker and the
 * commit-time wakeup need the library preloaded.  The helpers the parts
 * share are in spi_util.c, so no part calls back into this file.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"

#include "compat.h"
#include "pg_compat.h"
#include "route_cache.h"
#include "webhook_inbox.h"

/* on 18 and later, pg_get_loaded_modules() names the release loaded */
PG_MODULE_MAGIC_EXT(.name = "webhook_inbox",.version = EXTVERSION);

void		_PG_init(void);

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
