/*
 * outbound.c
 *		The one gate every request to a provider passes before it leaves:
 *		the worker's fetches and sweeps (fetch.c's request start), the
 *		effects (wi_http_send()), tenant discovery, and the token requests
 *		that mint or refresh a tenant's credentials (credentials.c).
 *
 * A paused database (a restored copy: sql/ops.sql's _outbound_paused())
 * closes it, so that no path, present or future, acts on the provider
 * accounts of the original: a request the gate stops is never sent and
 * fails as not sent.  The SQL entry points also refuse up front with the
 * reason and the call that resumes (restore_guard.c's wi_outbound_guard());
 * the gate is what holds whatever path calls a request.
 *
 * The background worker checks the pause once per cycle
 * (wi_outbound_paused()), and its gate follows that verdict: no query per
 * request.  Any other process asks _outbound_paused() once per
 * transaction; outside a transaction, with no verdict, the gate is closed:
 * nothing leaves unless the database is known not to be a copy.
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "outbound.h"
#include "pg_compat.h"

/* this backend's local transaction id (PostgreSQL 17 moved it into vxid) */
#if PG17_GE
#define WI_MY_LXID (MyProc->vxid.lxid)
#else
#define WI_MY_LXID (MyProc->lxid)
#endif

/* the worker's verdict of its current cycle, once it has one */
static bool cycle_verdict_known = false;
static bool cycle_open = false;

/* the transaction whose check found the gate open */
static LocalTransactionId open_lxid = InvalidLocalTransactionId;

#define WI_GATE_HINT "run SELECT webhook_inbox.resume_outbound(); once the sources point where they should"

void
wi_outbound_cycle_verdict(bool open)
{
	cycle_verdict_known = true;
	cycle_open = open;
}

/* _outbound_paused() in the caller's transaction: its reason, or NULL */
static char *
paused_reason(void)
{
	MemoryContext caller = CurrentMemoryContext;
	char	   *why = NULL;
	bool		isnull;
	Datum		d;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "webhook_inbox: SPI_connect failed");
	if (SPI_execute("SELECT webhook_inbox._outbound_paused()", true, 1) != SPI_OK_SELECT
		|| SPI_processed != 1)
		elog(ERROR, "webhook_inbox: could not read _outbound_paused()");
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull)
		why = MemoryContextStrdup(caller, TextDatumGetCString(d));
	SPI_finish();
	return why;
}

/* See outbound.h. */
char *
wi_outbound_gate(void)
{
	char	   *why;

	if (cycle_verdict_known)
		return cycle_open ? NULL
			: psprintf("outbound work is paused (a restored copy): %s", WI_GATE_HINT);
	if (!IsTransactionState())
		return psprintf("outbound work is paused: the pause could not be checked outside a transaction");
	if (WI_MY_LXID == open_lxid)
		return NULL;
	why = paused_reason();
	if (why != NULL)
		return psprintf("outbound work is paused: %s; %s", why, WI_GATE_HINT);
	open_lxid = WI_MY_LXID;
	return NULL;
}
