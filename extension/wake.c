/*
 * wake.c
 *		The worker's latch in shared memory (laid out by shmem.c), and the
 *		commit-time wakeup.
 *
 * intake() calls wi_wake_worker_at_commit(); the worker is woken only when
 * the transaction that stored the event commits, so it never claims before
 * the rows are visible and an aborted batch wakes nobody.
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"

#include "webhook_inbox.h"

WiShared   *wi_shared = NULL;

static bool wake_registered = false;	/* callback registered in this xact */

/* The bytes of the shared state, for shmem.c's one request. */
Size
wi_wake_shmem_size(void)
{
	return sizeof(WiShared);
}

/*
 * Take the shared state at ptr (shmem.c, under AddinShmemInitLock) and set
 * it up unless found says another process already has.
 */
void
wi_wake_shmem_attach(void *ptr, bool found)
{
	wi_shared = (WiShared *) ptr;
	if (!found)
	{
		SpinLockInit(&wi_shared->mutex);
		wi_shared->worker_latch = NULL;
		wi_shared->worker_pid = 0;
		wi_shared->worker_wakeable = false;
		wi_shared->wakeups = 0;
	}
}

/* The worker publishes (or, with NULL, withdraws) the latch it waits on. */
void
wi_set_worker_latch(Latch *latch)
{
	if (wi_shared == NULL)
		return;
	SpinLockAcquire(&wi_shared->mutex);
	wi_shared->worker_latch = latch;
	wi_shared->worker_pid = latch ? MyProcPid : 0;
	SpinLockRelease(&wi_shared->mutex);
}

/*
 * Whether commits wake the worker: not while it is disabled, when a wakeup
 * would only cost both sides a signal and a context switch (a reload that
 * enables it wakes it by SIGHUP).
 */
void
wi_set_worker_wakeable(bool wakeable)
{
	if (wi_shared == NULL)
		return;
	SpinLockAcquire(&wi_shared->mutex);
	wi_shared->worker_wakeable = wakeable;
	SpinLockRelease(&wi_shared->mutex);
}

/* Commits that asked for a wakeup so far (0 without shared memory). */
uint64
wi_wakeups(void)
{
	uint64		n;

	if (wi_shared == NULL)
		return 0;
	SpinLockAcquire(&wi_shared->mutex);
	n = wi_shared->wakeups;
	SpinLockRelease(&wi_shared->mutex);
	return n;
}

static void
wi_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			if (wake_registered && wi_shared != NULL)
			{
				Latch	   *latch;

				SpinLockAcquire(&wi_shared->mutex);
				latch = wi_shared->worker_wakeable ? wi_shared->worker_latch : NULL;
				wi_shared->wakeups++;
				SpinLockRelease(&wi_shared->mutex);
				if (latch)
					SetLatch(latch);
			}
			wake_registered = false;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			wake_registered = false;
			break;
		default:
			break;
	}
}

/*
 * Ask for the worker to be woken when the current transaction commits.
 * Cheap to call for every event: the callback is registered once per
 * backend and armed once per transaction.
 */
void
wi_wake_worker_at_commit(void)
{
	static bool callback_installed = false;

	if (wi_shared == NULL)
		return;
	if (!callback_installed)
	{
		RegisterXactCallback(wi_xact_callback, NULL);
		callback_installed = true;
	}
	wake_registered = true;
}
