/*
 * step.h
 *		Running work as a sequence of short transaction steps, the same way
 *		for the background worker, for a SQL function and for a procedure
 *		(step.c).
 *
 * Who runs the steps decides how they end, and says so explicitly in a
 * WiSteps it passes down: nothing global changes what a helper does.
 */
#ifndef WI_STEP_H
#define WI_STEP_H

#include "postgres.h"

#include <signal.h>

#include "executor/spi.h"

typedef enum WiStepMode
{
	WI_STEPS_OWN_XACT,			/* background worker: each step its own
								 * transaction, errors logged and returned */
	WI_STEPS_IN_CALLER,			/* SQL function: steps run inside the caller's
								 * transaction, errors propagate */
	WI_STEPS_NONATOMIC			/* procedure: one non-atomic SPI connection,
								 * each step ends with SPI_commit() */
} WiStepMode;

typedef struct WiSteps
{
	WiStepMode	mode;
	const char *holder;			/* who takes leases: "bgworker:PID", ... */
	/* set by a signal handler to stop; NULL: stop on a pending interrupt */
	volatile sig_atomic_t *stop_flag;
} WiSteps;

extern bool wi_steps_stopping(const WiSteps *steps);

/*
 * Runs fn(arg) as one step.  In WI_STEPS_OWN_XACT an error is logged,
 * counted and the transaction aborted; its message is returned (in the
 * caller's memory context).  NULL on success.  fn allocates what must
 * outlive the step in wi_step_cxt().
 */
extern char *wi_step_run(const WiSteps *steps, void (*fn) (void *), void *arg);
extern MemoryContext wi_step_cxt(void);

/* The two ends of a step, for callers that manage their own error handling. */
extern void wi_step_begin(WiStepMode mode);
extern void wi_step_end(WiStepMode mode);

/*
 * Inside a PG_CATCH of a step run in its own transaction: logs the error
 * (prefixed with what), aborts, counts it, returns the message in cxt.
 */
extern char *wi_step_catch(MemoryContext cxt, const char *what);

/*
 * Whether steps of this process fail for a full disk; the worker ends each
 * cycle with wi_step_cycle_end(), which says when a cycle that wrote had no
 * step fail for it (space came back).
 */
extern bool wi_step_disk_full(void);
extern void wi_step_cycle_end(void);

/*
 * Inside a step whose transaction wrote only sweep bookkeeping, which the
 * next sweep derives again (sweep_runs, sweep_seen, checkpoints: no repair,
 * no transition, no effect): in the worker, the step commits without
 * waiting for its WAL to reach the disk (SET LOCAL synchronous_commit =
 * off), so that a pass with nothing to repair does not wait on the disk
 * between two of its provider's slots; a crash can lose only that
 * bookkeeping, and the next durable commit flushes it anyway.  In a
 * caller's transaction (sweep_now()) it does nothing: what else that
 * transaction wrote is the caller's.
 */
extern void wi_step_commit_lazily(const WiSteps *steps);

/* One statement through SPI; raises on a result code other than expect. */
extern void wi_spi_exec(const char *sql, int nargs, Oid *types, Datum *values,
						const char *nulls, int expect);

/* The first column of the first row of the last result, or NULL. */
extern char *wi_spi_first_text(void);

#endif							/* WI_STEP_H */
