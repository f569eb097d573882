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
 *
 * A full disk fails every step that writes, at every cycle: the worker says
 * so once, when the first step fails for it, and once more when space came
 * back, never a line per failed step.  A write that fits in a page already
 * allocated still commits on a full disk, so one success is not the end of
 * it: space is back when a whole cycle of the worker wrote without a step
 * failing for it and every filesystem the cluster writes to (the data
 * directory, pg_wal, each tablespace) has DISK_FREE_MIN free.
 */
#include "postgres.h"

#include <dirent.h>
#include <sys/statvfs.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/fd.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "stats.h"
#include "step.h"

/* where the running step puts what outlives it: the caller's context */
static MemoryContext step_cxt = NULL;

/* since when steps fail for a full disk (0: they do not); whether it was said */
static TimestampTz disk_full_since = 0;
static bool disk_full_said = false;
static TimestampTz disk_full_said_at = 0;
/* this cycle of the worker: a step failed for a full disk; a step that wrote committed */
static bool cycle_disk_full = false;
static bool cycle_wrote = false;

#define DISK_FULL_REPEAT_MS 60000	/* a new episode within this is not said again */
#define DISK_FREE_MIN (16 * 1024 * 1024)	/* bytes free that end an episode */

bool
wi_step_disk_full(void)
{
	return disk_full_since != 0;
}

/* Whether the filesystem of path has DISK_FREE_MIN free (true if unknown). */
static bool
room_at(const char *path)
{
	struct statvfs st;

	if (statvfs(path, &st) != 0)
		return true;
	return (uint64) st.f_bavail * st.f_frsize >= DISK_FREE_MIN;
}

/* The data directory, pg_wal and every tablespace have room. */
static bool
room_everywhere(void)
{
	DIR		   *dir;
	struct dirent *de;
	bool		ok = room_at(".") && room_at("pg_wal");

	if (!ok || (dir = AllocateDir("pg_tblspc")) == NULL)
		return ok;
	while (ok && (de = ReadDir(dir, "pg_tblspc")) != NULL)
	{
		char		path[MAXPGPATH];

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "pg_tblspc/%s", de->d_name);
		ok = room_at(path);
	}
	FreeDir(dir);
	return ok;
}

void
wi_step_cycle_end(void)
{
	if (disk_full_since != 0 && cycle_wrote && !cycle_disk_full && room_everywhere())
	{
		if (disk_full_said)
			ereport(LOG,
					(errmsg("webhook_inbox worker: writes succeed again after the disk was full for %ld s, work resumed",
							(long) ((GetCurrentTimestamp() - disk_full_since) / USECS_PER_SEC))));
		disk_full_since = 0;
		disk_full_said = false;
	}
	cycle_wrote = false;
	cycle_disk_full = false;
}

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
		bool		wrote = TransactionIdIsValid(GetTopTransactionIdIfAny());

		PopActiveSnapshot();
		CommitTransactionCommand();
		pgstat_report_stat(false);
		if (wrote)
			cycle_wrote = true;
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
	if (edata->sqlerrcode == ERRCODE_DISK_FULL)
	{
		TimestampTz now = GetCurrentTimestamp();
		bool		say = disk_full_since == 0 &&
			(disk_full_said_at == 0 ||
			 TimestampDifferenceExceeds(disk_full_said_at, now, DISK_FULL_REPEAT_MS));

		cycle_disk_full = true;
		if (disk_full_since == 0)
			disk_full_since = now;
		if (say)
		{
			disk_full_said = true;
			disk_full_said_at = now;
		}
		ereport(say ? LOG : DEBUG1,
				(errmsg("webhook_inbox worker: the disk is full, work waits until space returns: %s%s",
						what, edata->message),
				 errdetail("The worker tries again every few seconds and says when writes succeed again; until then the receiver answers deliveries with 503 and providers retry them.")));
	}
	else
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
wi_step_commit_lazily(const WiSteps *steps)
{
	if (steps->mode == WI_STEPS_OWN_XACT)
		wi_spi_exec("SET LOCAL synchronous_commit = off", 0, NULL, NULL, NULL, SPI_OK_UTILITY);
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
