/*
 * shmem.c
 *		The extension's one piece of shared memory: one request of the total
 *		size, and one startup that lays out each part in it.
 *
 * Three parts live there: the worker's latch and wakeup count (wake.c), the
 * worker's counters (stats.c) and the providers' metered units (pace.c).  Each part says how much it needs and sets up
 * its own memory when given it; only this file installs the shared memory
 * hooks, as pg_prewarm's autoprewarm does, so a third part is one more line
 * in each of the two functions below rather than another pair of hooks.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "pace.h"
#include "stats.h"
#include "webhook_inbox.h"

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* The bytes of the whole segment: each part at a MAXALIGN'd offset. */
static Size
wi_shmem_size(void)
{
	return add_size(add_size(MAXALIGN(wi_wake_shmem_size()), MAXALIGN(wi_stats_shmem_size())),
					MAXALIGN(wi_pace_shmem_size()));
}

static void
wi_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(wi_shmem_size());
}

/*
 * Find or create the segment and hand each part its place; found says
 * whether another process has already initialised it (only the postmaster
 * creates it, but with EXEC_BACKEND every backend comes through here).
 */
static void
wi_shmem_startup(void)
{
	char	   *base;
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	base = ShmemInitStruct("webhook_inbox", wi_shmem_size(), &found);
	wi_wake_shmem_attach(base, found);
	wi_stats_shmem_attach(base + MAXALIGN(wi_wake_shmem_size()), found);
	wi_pace_shmem_attach(base + MAXALIGN(wi_wake_shmem_size()) + MAXALIGN(wi_stats_shmem_size()), found);
	LWLockRelease(AddinShmemInitLock);
}

/* Called from _PG_init while shared_preload_libraries is processed. */
void
wi_shmem_init(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = wi_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = wi_shmem_startup;
}
