/*
 * effects.c
 *		Execution of external http effects: claim, send, store.
 *
 * An effect is an approved operation with its exact request and a stable
 * idempotency key.  Executing one is split so that a crash anywhere leaves a
 * state that says what is known:
 *
 *	1. _effects_claim() (SQL) takes due effects under a fencing token and
 *	   records the attempt; this is committed before anything is sent.  It
 *	   takes only as many as can be sent one after another within the lease.
 *	2. Per effect, _effects_check() (SQL) confirms the claim is still current
 *	   and its lease covers a whole request; if not, the effect is given back
 *	   and nothing is sent.  Then the request goes out (wi_http_send() of
 *	   fetch.c, outside any transaction).
 *	3. _effects_store() (SQL) keeps the answer, guarded by the token, and
 *	   commits: done, failed (a definitive rejection), pending (provably not
 *	   performed), or uncertain (sent, outcome unknown).
 *
 * A crash between 1 and 3 leaves 'submitting' with a lease; when the lease
 * expires the effect becomes uncertain and is recovered by lookup, by a
 * same-key retry where the provider's idempotency allows it, or by a person.
 * Nothing is ever submitted under a new key.
 *
 * wi_effects_cycle() runs the three steps once; the background worker calls
 * it inside its loop, and the procedure run_effects() lets SQL do the same.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "compat.h"
#include "fetch.h"
#include "provider.h"
#include "restore_guard.h"
#include "step.h"
#include "webhook_inbox.h"

PG_FUNCTION_INFO_V1(wi_run_effects);

#define MAX_RESPONSE	(1024 * 1024)	/* a page of 100 Stripe refunds fits */

/* One claimed effect: what to send, and what came back. */
typedef struct EffectJob
{
	int64		id;
	int64		token;
	char	   *action;
	char	   *method;
	char	   *url;
	char	   *body;
	char	   *content_type;
	char	   *idempotency_key;
	char	   *auth_name;
	char	   *auth_value;
	char	   *origin;			/* the source's api_base */
	char	   *scope[WI_MAX_SCOPE_HEADERS + 1];	/* the tenant's headers
													 * (Stripe-Account ...) */
	/* results */
	long		http_status;
	const char *transport;		/* ok, not_sent, unknown */
	char	   *error;
	StringInfoData response;
} EffectJob;

static char *
copy_value(HeapTuple tup, TupleDesc desc, int col)
{
	char	   *v = SPI_getvalue(tup, desc, col);

	return v ? pstrdup(v) : NULL;
}

/* Send one request; never raises (errors become job->transport/error). */
static void
perform_job(EffectJob *job)
{
	const char *headers[WI_MAX_SCOPE_HEADERS + 5];
	int			nheaders = 0;

	initStringInfo(&job->response);
	if (job->idempotency_key)
		headers[nheaders++] = psprintf("Idempotency-Key: %s", job->idempotency_key);
	if (job->auth_name && job->auth_value)
		headers[nheaders++] = psprintf("%s: %s", job->auth_name, job->auth_value);
	if (job->content_type && job->body)
		headers[nheaders++] = psprintf("Content-Type: %s", job->content_type);
	/* an effect for a tenant is made as that tenant, as its reads are */
	for (int i = 0; i < WI_MAX_SCOPE_HEADERS && job->scope[i] != NULL; i++)
		headers[nheaders++] = job->scope[i];
	headers[nheaders++] = "Expect:";
	headers[nheaders] = NULL;
	/* the same origin check as every other provider request (fetch.c) */
	job->transport = wi_http_send(job->method, job->url, job->origin, headers, job->body,
								  &job->response, MAX_RESPONSE, &job->http_status, &job->error);
	if (strcmp(job->transport, "refused") == 0)
		ereport(WARNING,
				(errmsg("webhook_inbox: effect %lld was not sent", (long long) job->id),
				 errdetail("%s", job->error)));
}

/*
 * Test hook: webhook_inbox.effects_fault ends the session at a crash
 * boundary, exactly as a crash there would (the open transaction is lost).
 */
static void
maybe_fault(const char *point)
{
	const char *fault = GetConfigOption("webhook_inbox.effects_fault", true, false);

	if (fault && strcmp(fault, point) == 0)
		ereport(FATAL,
				(errcode(ERRCODE_ADMIN_SHUTDOWN),
				 errmsg("webhook_inbox: injected fault at %s", point)));
}

/*
 * Run one claim/send/store cycle for up to max_effects http effects.
 *
 * With own_xacts false (the run_effects procedure) it must be called in a
 * non-atomic context with a transaction open and no SPI connection; it
 * commits that transaction and returns with a new one open.  With own_xacts
 * true (the background worker) it must be called outside any transaction.
 * Returns the number of effects it claimed: a claim holds only what can be
 * sent within one lease, so a caller with more to do runs it again while
 * this is above zero.
 */
int
wi_effects_cycle(const char *worker, int max_effects, bool own_xacts)
{
	MemoryContext jobcxt;
	MemoryContext oldcxt;
	EffectJob  *jobs;
	int			njobs = 0;
	volatile int claimed = 0;
	int			rc;
	/* a procedure: one non-atomic connection, committed after each step */
	WiStepMode	mode = own_xacts ? WI_STEPS_OWN_XACT : WI_STEPS_NONATOMIC;

	/* libcurl is set up (once per process, fetch.c) before anything is claimed */
	wi_http_ensure();

	/* the jobs outlive the transactions below */
	jobcxt = AllocSetContextCreate(TopMemoryContext, "webhook_inbox effects", ALLOCSET_DEFAULT_SIZES);

	PG_TRY();
	{
		Oid			types[5] = {TEXTOID, INT4OID, INTERVALOID, INT4OID, INTERVALOID};
		Datum		args[5];
		Datum		timeout;

		if (!own_xacts && SPI_connect_ext(SPI_OPT_NONATOMIC) != SPI_OK_CONNECT)
			elog(ERROR, "webhook_inbox: SPI_connect failed");

		wi_step_begin(mode);
		timeout = DirectFunctionCall3(interval_in, CStringGetDatum(psprintf("%d ms", wi_http_timeout_ms)),
									  ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
		args[0] = CStringGetTextDatum(worker);
		args[1] = Int32GetDatum(max_effects);
		args[2] = DirectFunctionCall3(interval_in, CStringGetDatum(psprintf("%d ms", wi_lease_ms)),
									  ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
		args[3] = Int32GetDatum(wi_max_attempts);
		args[4] = timeout;
		rc = SPI_execute_with_args("SELECT * FROM webhook_inbox._effects_claim($1, $2, $3, $4, $5)",
								   5, types, args, NULL, false, 0);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "webhook_inbox: claiming effects failed: %s", SPI_result_code_string(rc));

		oldcxt = MemoryContextSwitchTo(jobcxt);
		/* the lease's length must outlive the claim's transaction */
		timeout = datumCopy(timeout, false, 16);
		jobs = palloc0(sizeof(EffectJob) * (SPI_processed + 1));
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple	tup = SPI_tuptable->vals[r];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			EffectJob  *j = &jobs[njobs++];
			bool		isnull;

			j->id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
			j->token = DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull));
			j->action = copy_value(tup, desc, 3);
			j->method = copy_value(tup, desc, 4);
			j->url = copy_value(tup, desc, 5);
			j->body = copy_value(tup, desc, 6);
			j->content_type = copy_value(tup, desc, 7);
			j->idempotency_key = copy_value(tup, desc, 8);
			j->auth_name = copy_value(tup, desc, 9);
			j->auth_value = copy_value(tup, desc, 10);
		}
		MemoryContextSwitchTo(oldcxt);
		/* where each effect's source lives: its requests may go nowhere else */
		for (int i = 0; i < njobs; i++)
		{
			Oid			otypes[1] = {INT8OID};
			Datum		oargs[1] = {Int64GetDatum(jobs[i].id)};

			/*
			 * run_effects() is a procedure with the caller's search_path:
			 * qualify.  Not read-only: that would read with the step's
			 * snapshot, taken before the claim's, and miss an effect
			 * requested in between, which the claim took.
			 */
			rc = SPI_execute_with_args("SELECT s.api_base, s.id, e.tenant, (SELECT t.context "
									   "FROM webhook_inbox.tenants t WHERE t.source_id OPERATOR(pg_catalog.=) s.id "
									   "AND t.tenant OPERATOR(pg_catalog.=) e.tenant) FROM webhook_inbox.effects e "
									   "JOIN webhook_inbox.sources s ON s.id OPERATOR(pg_catalog.=) e.source_id "
									   "WHERE e.id OPERATOR(pg_catalog.=) $1",
									   1, otypes, oargs, NULL, false, 1);
			if (rc != SPI_OK_SELECT)
				elog(ERROR, "webhook_inbox: reading an effect's source failed: %s", SPI_result_code_string(rc));
			if (SPI_processed == 1)
			{
				HeapTuple	tup = SPI_tuptable->vals[0];
				TupleDesc	desc = SPI_tuptable->tupdesc;
				bool		isnull;
				int32		sid = DatumGetInt32(SPI_getbinval(tup, desc, 2, &isnull));
				char	   *tenant;
				char	   *context;
				WiSource   *src;
				const WiAdapter *adapter;

				oldcxt = MemoryContextSwitchTo(jobcxt);
				jobs[i].origin = copy_value(tup, desc, 1);
				tenant = copy_value(tup, desc, 3);
				context = copy_value(tup, desc, 4);
				/* the adapter's scope headers: the tenant's account, the pinned version */
				src = wi_source_load(sid);
				adapter = wi_adapter_for(src);
				if (adapter != NULL && adapter->scope_headers != NULL)
					(void) adapter->scope_headers(src, tenant ? tenant : "", context, jobs[i].scope);
				MemoryContextSwitchTo(oldcxt);
			}
		}

		claimed = njobs;
		/* the attempts are on record before any request leaves */
		wi_step_end(mode);
		if (njobs > 0)
			maybe_fault("after_claim");

		for (int i = 0; i < njobs; i++)
		{
			Oid			ctypes[3] = {INT8OID, INT8OID, INTERVALOID};
			Datum		cargs[3];
			Oid			stypes[7] = {INT8OID, INT8OID, TEXTOID, INT4OID, TEXTOID, TEXTOID, TEXTOID};
			Datum		sargs[7];
			char		snulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
			EffectJob  *j = &jobs[i];
			bool		send;

			CHECK_FOR_INTERRUPTS();

			/* sent only while the claim is current and its lease covers the answer */
			wi_step_begin(mode);
			cargs[0] = Int64GetDatum(j->id);
			cargs[1] = Int64GetDatum(j->token);
			cargs[2] = timeout;
			rc = SPI_execute_with_args("SELECT webhook_inbox._effects_check($1, $2, $3)",
									   3, ctypes, cargs, NULL, false, 1);
			if (rc != SPI_OK_SELECT || SPI_processed != 1)
				elog(ERROR, "webhook_inbox: checking an effect's lease failed: %s",
					 SPI_result_code_string(rc));
			send = strcmp(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1), "send") == 0;
			wi_step_end(mode);
			if (!send)
				continue;

			oldcxt = MemoryContextSwitchTo(jobcxt);
			perform_job(j);
			MemoryContextSwitchTo(oldcxt);
			maybe_fault("after_send");

			wi_step_begin(mode);
			sargs[0] = Int64GetDatum(j->id);
			sargs[1] = Int64GetDatum(j->token);
			sargs[2] = CStringGetTextDatum(j->action);
			sargs[3] = Int32GetDatum((int32) j->http_status);
			if (strcmp(j->transport, "ok") != 0)
				snulls[3] = 'n';
			sargs[4] = CStringGetTextDatum(j->transport);
			/* a provider's answer may be anything: keep valid text only */
			if (j->response.len > 0 && pg_verifymbstr(j->response.data, j->response.len, true))
				sargs[5] = CStringGetTextDatum(j->response.data);
			else
				snulls[5] = 'n';
			if (j->error)
				sargs[6] = CStringGetTextDatum(j->error);
			else
				snulls[6] = 'n';
			rc = SPI_execute_with_args("SELECT webhook_inbox._effects_store($1, $2, $3, $4, $5, $6, $7)",
									   7, stypes, sargs, snulls, false, 1);
			if (rc != SPI_OK_SELECT)
				elog(ERROR, "webhook_inbox: storing an effect's answer failed: %s",
					 SPI_result_code_string(rc));
			wi_step_end(mode);
		}
		if (!own_xacts)
			SPI_finish();
	}
	PG_FINALLY();
	{
		MemoryContextDelete(jobcxt);
	}
	PG_END_TRY();

	return claimed;
}

/*
 * CALL webhook_inbox.run_effects(max_effects, worker)
 *
 * Needs to commit between its steps, so it refuses to run inside an outer
 * transaction block.
 */
Datum
wi_run_effects(PG_FUNCTION_ARGS)
{
	CallContext *cc = (CallContext *) fcinfo->context;
	int32		max_effects = PG_ARGISNULL(0) ? 10 : PG_GETARG_INT32(0);
	char	   *worker = PG_ARGISNULL(1) ? "sql" : text_to_cstring(PG_GETARG_TEXT_PP(1));

	/* a database still at 0.1.0 has no path for this: say what to run */
	wi_schema_require_current("run_effects");

	if (cc == NULL || !IsA(cc, CallContext) || cc->atomic)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("run_effects() cannot run inside a transaction block"),
				 errdetail("It commits each attempt before the request is sent."),
				 errhint("CALL it on its own, outside BEGIN ... COMMIT.")));
	if (max_effects < 1 || max_effects > 1000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_effects must be between 1 and 1000")));
	wi_outbound_guard();
	(void) wi_effects_cycle(worker, max_effects, false);
	PG_RETURN_VOID();
}
