/*
 * webhook_inbox.h
 *		Declarations shared between the extension's source files.
 *
 * Everything not declared here is static to its file.
 */
#ifndef WEBHOOK_INBOX_H
#define WEBHOOK_INBOX_H

#include "postgres.h"

#include "storage/latch.h"
#include "storage/spin.h"

#include "executor/spi.h"
#include "fmgr.h"

/*
 * Prepare a statement once per backend and keep it (spi_util.c).  Raises
 * if it cannot be prepared; the extension's statements are fixed, so that is
 * a bug, not a user error.
 */
extern SPIPlanPtr wi_keep_plan(const char *sql, int nargs, Oid *types);
extern SPIPlanPtr wi_keep_plan_opts(const char *sql, int nargs, Oid *types, int cursor_options);

/* GUCs (guc.c) */
extern char *wi_database;
extern bool wi_enabled;
extern int	wi_fetch_concurrency;
extern int	wi_batch_size;
extern int	wi_local_batch_size;
extern int	wi_lease_ms;
extern int	wi_http_timeout_ms;
extern int	wi_max_attempts;
extern int	wi_sweep_interval_s;
extern int	wi_full_sweep_interval_s;
extern int	wi_sweep_overlap_s;
extern int	wi_naptime_ms;
extern int	wi_fetch_delay_ms;
extern int	wi_tombstone_confirm_delay_s;
extern int	wi_debug_machines_load_lock;
extern bool wi_debug_save_per_answer;
extern int	wi_sweep_lookback_s;
extern char *wi_effects_fault;
extern bool wi_keep_heap;

extern void wi_guc_init(bool preloading);
extern void wi_machine_init(void);

/*
 * The body of a statement trigger that empties a per-backend cache of its
 * table (spi_util.c): a relcache invalidation of the table, which every
 * backend takes in after the writer's commit (name is the trigger function's,
 * for the error when it is called otherwise).
 */
extern void wi_invalidate_trigger_table(FunctionCallInfo fcinfo, const char *name);

/*
 * The id of the source named source (spi_util.c): connects to SPI and
 * finishes again, so it is called outside an SPI connection; an unknown
 * source raises _source_id()'s error.
 */
extern int32 wi_source_id_by_name(const char *source);

/*
 * Shared state (wake.c): where the background worker waits, so that a
 * committing intake() can wake it.  Only present when the library was loaded
 * through shared_preload_libraries.
 */
typedef struct WiShared
{
	slock_t		mutex;
	Latch	   *worker_latch;	/* NULL while no worker is waiting */
	pid_t		worker_pid;
	bool		worker_wakeable;	/* false while webhook_inbox.enabled is off */
	uint64		wakeups;		/* commits that asked for a wakeup */
} WiShared;

extern WiShared *wi_shared;

/*
 * The extension's shared memory (shmem.c): one request and one startup hook
 * for every part; installed by _PG_init while preloading.
 */
extern void wi_shmem_init(void);

/* wake.c's part of it: its bytes, and taking them (set up unless found) */
extern Size wi_wake_shmem_size(void);
extern void wi_wake_shmem_attach(void *ptr, bool found);
extern void wi_wake_worker_at_commit(void);
extern void wi_set_worker_latch(Latch *latch);
extern void wi_set_worker_wakeable(bool wakeable);
extern uint64 wi_wakeups(void);

/* The background worker and its counters (worker.c, stats.c) */
extern void wi_worker_init(void);

/* fetch.c: the libcurl options every provider request gets (a CURL *) */
extern void wi_curl_defaults(void *handle);

/* External effects (effects.c): one claim/send/store cycle; commits. */
extern int	wi_effects_cycle(const char *worker, int max_effects, bool own_xacts);

#endif							/* WEBHOOK_INBOX_H */
