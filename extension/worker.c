/*
 * worker.c
 *		The background worker process: registration, signals and the loop.
 *
 * The loop waits on its latch (set by intake() at commit, or by naptime),
 * then runs a round (round.c: claim, local work, fetch, save), a cycle of
 * external effects (effects.c) and the sweeps that are due (sweep.c).  Each
 * of those runs its SQL as short transaction steps (step.c) in this
 * process's own transactions; the WiSteps below says so, and carries the
 * SIGTERM flag that every step and HTTP poll looks at.
 *
 * The worker follows contrib/worker_spi: SIGHUP reloads the configuration,
 * SIGTERM sets a flag the loops look at, the latch wait exits with the
 * postmaster, and each round allocates in a memory context reset at the
 * start of the next.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/plancache.h"

#include "compat.h"
#include "pg_compat.h"
#include "provider.h"
#include "restore_guard.h"
#include "round.h"
#include "stats.h"
#include "step.h"
#include "sweep.h"
#include "webhook_inbox.h"
#include "worker.h"

#define DISK_FULL_RETRY_MS 2000	/* the wait between cycles while the disk is full */
#define REPLAN_FIRST_EVENTS 1000	/* the events processed before the first re-planning */

static volatile sig_atomic_t got_sigterm = false;

/* this process runs every step in a transaction of its own */
static WiSteps steps = {WI_STEPS_OWN_XACT, NULL, &got_sigterm};

/* ---------- the worker process ---------- */

/*
 * One cycle of external effects (effects.c), which runs its own
 * transactions.  An error is logged and counted, and the round goes on.
 * Returns true when it claimed any (more may be due: a claim holds only what
 * fits in one lease).
 */
static bool
effects_round(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	int			n = 0;

	pgstat_report_activity(STATE_RUNNING, "webhook_inbox: effects");
	PG_TRY();
	{
		n = wi_effects_cycle(steps.holder, wi_batch_size, true);
	}
	PG_CATCH();
	{
		(void) wi_step_catch(cxt, "effects: ");
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	return n > 0;
}

/*
 * Plans made on tables that have grown since are made again.  This session
 * lives as long as the server, and the plans it keeps (its prepared
 * statements, PL/pgSQL's, and from PostgreSQL 18 the bodies of SQL functions
 * such as _fenced(), which 18 keeps in the plan cache where earlier majors
 * planned them for each calling statement) may have been costed while the
 * mirror was empty.  A generic plan that scans a table of a few pages is kept
 * until that table's statistics change (autovacuum's ANALYZE, a minute or
 * more later): on 18, _fenced()'s probes then read the whole objects table
 * for every claimed object, and a drain slowed as the mirror grew.  So each
 * time the events this process has processed double (at 1,000, 2,000,
 * 4,000 … of them) every plan is marked to be made again on the tables as
 * they are: re-plannings logarithmic in the events processed, none while
 * idle.
 */
static void
replan_if_grown(void)
{
	static bool started = false;
	static uint64 events_at_start;
	static uint64 events_next;
	uint64		events = wi_stat_get(WI_STAT_EVENTS);

	if (!started)
	{
		/* the server's counter may have counted before this process */
		started = true;
		events_at_start = events;
		events_next = events + REPLAN_FIRST_EVENTS;
		return;
	}
	if (events < events_next)
		return;
	ResetPlanCache();
	events_next = events + Max(events - events_at_start, REPLAN_FIRST_EVENTS);
}

static void
handle_sigterm(SIGNAL_ARGS)
{
	int			save_errno = errno;

	got_sigterm = true;
	SetLatch(MyLatch);
	errno = save_errno;
}

/* The extension's version in this database; "" while it is not installed. */
static void
extension_version_xact(void *arg)
{
	char	   *v = wi_schema_version();

	strlcpy((char *) arg, v ? v : "", NAMEDATALEN);
}

static void
worker_exit(int code, Datum arg)
{
	wi_set_worker_latch(NULL);
	wi_http_cleanup();
}

void
wi_worker_main(Datum main_arg)
{
	MemoryContext round_cxt;
	char		announced[NAMEDATALEN] = "";	/* the version last logged */

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, handle_sigterm);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(wi_database, NULL, 0);

	/*
	 * The worker runs as a superuser: whatever search_path the database or
	 * postgresql.conf gives, its own statements resolve names through
	 * pg_catalog only, so nothing planted in public is ever called.
	 */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);

	steps.holder = MemoryContextStrdup(TopMemoryContext, psprintf("bgworker:%d", MyProcPid));
	before_shmem_exit(worker_exit, (Datum) 0);
	wi_set_worker_latch(MyLatch);
	round_cxt = AllocSetContextCreate(TopMemoryContext, "webhook_inbox worker round",
									  ALLOCSET_DEFAULT_SIZES);
	ereport(LOG, (errmsg("webhook_inbox worker started in database \"%s\"", wi_database)));

	wi_set_worker_wakeable(wi_enabled);
	while (!got_sigterm)
	{
		bool		more = false;
		char		version[NAMEDATALEN] = "";

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			wi_set_worker_wakeable(wi_enabled);
		}
		MemoryContextReset(round_cxt);
		MemoryContextSwitchTo(round_cxt);

		if (wi_enabled && wi_step_run(&steps, extension_version_xact, version) == NULL &&
			version[0] != '\0')
		{
			bool		current = strcmp(version, EXTVERSION) == 0;

			/*
			 * A database whose extension is another release's (the library
			 * was upgraded, ALTER EXTENSION UPDATE not yet run): its schema
			 * is not the one this code works on.  Say so once, and look again
			 * every naptime (the version is cached until pg_extension
			 * changes, so that costs no catalog read); intake goes on meanwhile
			 * through compat.c.
			 */
			if (strcmp(version, announced) != 0)
			{
				if (current)
					ereport(LOG, (errmsg("webhook_inbox worker: the extension exists, processing the inbox")));
				else
					ereport(LOG, (errmsg("webhook_inbox worker: database \"%s\" has webhook_inbox %s installed, the library loaded is %s; waiting until ALTER EXTENSION webhook_inbox UPDATE is run in it",
										 wi_database, version, EXTVERSION)));
				strlcpy(announced, version, sizeof(announced));
			}
			/* a restored copy sends nothing until resume_outbound() */
			if (current && !wi_outbound_paused(&steps))
			{
				more = wi_round_run(&steps);
				if (!got_sigterm && effects_round())
					more = true;
				/* a round of sweeps that stopped for the worker's round goes on at once */
				if (!got_sigterm && wi_sweep_due(&steps))
					more = true;
			}
		}
		MemoryContextSwitchTo(TopMemoryContext);
		wi_step_cycle_end();
		replan_if_grown();
		if (more || got_sigterm)
			continue;

		pgstat_report_activity(STATE_IDLE, NULL);
		/* a full disk: try again every few seconds, not at every wake-up */
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 wi_step_disk_full() ? Max(wi_naptime_ms, DISK_FULL_RETRY_MS) : wi_naptime_ms,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	ereport(LOG, (errmsg("webhook_inbox worker stopping")));
	proc_exit(0);
}

/*
 * Called from _PG_init while shared_preload_libraries is processed:
 * registers the worker (shmem.c lays out the shared memory).
 */
void
wi_worker_init(void)
{
	BackgroundWorker bgw;

	memset(&bgw, 0, sizeof(bgw));
	/* on 19, DROP DATABASE and the like end the worker instead of failing */
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION |
		WI_BGWORKER_INTERRUPTIBLE;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = 5;	/* e.g. the database does not exist yet */
	snprintf(bgw.bgw_library_name, BGW_MAXLEN, "webhook_inbox");
	snprintf(bgw.bgw_function_name, BGW_MAXLEN, "wi_worker_main");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "webhook_inbox worker");
	snprintf(bgw.bgw_type, BGW_MAXLEN, "webhook_inbox worker");
	RegisterBackgroundWorker(&bgw);
}
