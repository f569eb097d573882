/*
 * worker.c
 *		The background worker: waits on its latch (set by intake() at
 *		commit, or by naptime), claims objects, processes each claim by its
 *		strategy, fetches the present from providers concurrently, and runs
 *		the reconciliation sweeps when they are due.
 *
 * Shape of one round, each numbered step its own short transaction:
 *   1. claim() up to batch_size objects under a lease;
 *   2. per claim, _work_claim() applies what needs no provider request
 *      (version, machine, occurrence, unordered, ignore) and says whether
 *      a fetch is needed (fetch strategy, or a tie with a read API);
 *   3. the fetches run together through libcurl multi (fetch.c), and each
 *      answer is saved as it arrives, under the claim's token (fencing), by
 *      _save_fetched() or mapped to retry / quarantine / tombstone.
 * An error in one object's transaction is logged, the transaction aborted,
 * and the claim handed to retry() so it backs off and is quarantined after
 * max_attempts: nothing is retried forever and nothing is lost.
 *
 * The worker follows contrib/worker_spi: SIGHUP reloads the configuration,
 * SIGTERM sets a flag the loops look at (also between HTTP polls), the
 * latch wait exits with the postmaster, and each round allocates in a
 * memory context reset at the start of the next.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "worker.h"

volatile sig_atomic_t wi_got_sigterm = false;
bool		wi_in_worker = false;

char	   *wi_worker_name = NULL;

/* where the step functions run by wi_run_xact() put what outlives the transaction */
static MemoryContext step_cxt = NULL;

MemoryContext
wi_step_cxt(void)
{
	return step_cxt;
}

/* One claimed object, as the worker carries it through a round. */
typedef struct Claim
{
	int64		token;
	int32		source_id;
	char	   *object_type;
	char	   *object_id;
	int			nevents;
	TimestampTz expires_at;
	bool		need_fetch;
	WiSource   *src;
	const WiAdapter *adapter;
	WiTypeMap	type;
	WiHttpRequest req;
	bool		handled;		/* its fetch was answered or given back */
	uint64		counts[10];		/* outcomes of its local work, counted once committed */
	char	   *save_result;	/* outcome of saving its fetched answer */
} Claim;

/*
 * Per-source request state, kept across rounds: a Retry-After window during
 * which nothing is sent to the source, and a concurrency cap that halves on
 * each 429/503 and grows back by one with each success (slowing down a
 * source that asked for it without starving the others).
 */
typedef struct SourceRate
{
	int32		source_id;
	TimestampTz not_before;
	int			cap;
	int			inflight;
} SourceRate;

#define MAX_RATES 256
static SourceRate rates[MAX_RATES];
static int	nrates = 0;

static SourceRate *
rate_for(int32 source_id)
{
	for (int i = 0; i < nrates; i++)
		if (rates[i].source_id == source_id)
			return &rates[i];
	if (nrates == MAX_RATES)
		nrates = 0;				/* forget the oldest: only costs a slower start */
	rates[nrates].source_id = source_id;
	rates[nrates].not_before = 0;
	rates[nrates].cap = wi_fetch_concurrency;
	rates[nrates].inflight = 0;
	return &rates[nrates++];
}

/* ---------- transactions ---------- */

/*
 * In the worker, one short transaction with an SPI connection and a
 * snapshot; in a backend (sweep_now) only the SPI connection, inside the
 * caller's transaction.
 */
void
wi_xact_begin(void)
{
	if (wi_in_worker)
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
	}
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "webhook_inbox: SPI_connect failed");
	if (wi_in_worker)
		PushActiveSnapshot(GetTransactionSnapshot());
}

void
wi_xact_end(void)
{
	SPI_finish();
	if (wi_in_worker)
	{
		PopActiveSnapshot();
		CommitTransactionCommand();
		pgstat_report_stat(false);
	}
}

/*
 * Inside a PG_CATCH of the worker: logs the error (prefixed with what),
 * aborts the transaction, counts the error, and returns the message in cxt.
 */
static char *
catch_failure(MemoryContext cxt, const char *what)
{
	ErrorData  *edata;
	char	   *msg;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();
	AbortCurrentTransaction();
	msg = pstrdup(edata->message);
	ereport(LOG,
			(errmsg("webhook_inbox worker: %s%s", what, edata->message),
			 edata->detail ? errdetail_internal("%s", edata->detail) : 0));
	FreeErrorData(edata);
	wi_stat_add(WI_STAT_ERRORS, 1);
	return msg;
}

/*
 * Runs fn(arg) in its own transaction.  On error: logs it, aborts, counts it,
 * and returns the message (in the caller's memory context); NULL on success.
 * In a backend (sweep_now) fn runs inside the caller's transaction and errors
 * propagate.  fn allocates what must outlive the step in wi_step_cxt.
 */
char *
wi_run_xact(void (*fn) (void *), void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	MemoryContext save_step_cxt = step_cxt;
	char	   *volatile failure = NULL;

	step_cxt = cxt;
	if (!wi_in_worker)
	{
		wi_xact_begin();
		fn(arg);
		wi_xact_end();
		MemoryContextSwitchTo(cxt);
		step_cxt = save_step_cxt;
		return NULL;
	}
	PG_TRY();
	{
		wi_xact_begin();
		fn(arg);
		wi_xact_end();
	}
	PG_CATCH();
	{
		failure = catch_failure(cxt, "");
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	step_cxt = save_step_cxt;
	return failure;
}

/* Runs one statement with arguments; errors on an unexpected result code. */
static void
exec(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls, int expect)
{
	int			rc = SPI_execute_with_args(sql, nargs, types, values, nulls, false, 0);

	if (rc != expect)
		elog(ERROR, "webhook_inbox worker: \"%s\" failed: %s", sql, SPI_result_code_string(rc));
}

static char *
first_text(void)
{
	if (SPI_processed == 0)
		return NULL;
	return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
}

static void
count_outcome(const char *res)
{
	if (res == NULL)
		return;
	if (strcmp(res, "applied") == 0)
		wi_stat_add(WI_STAT_SAVED, 1);
	else if (strcmp(res, "duplicate") == 0)
		wi_stat_add(WI_STAT_DUPLICATES, 1);
	else if (strcmp(res, "stale") == 0)
		wi_stat_add(WI_STAT_STALE, 1);
	else if (strcmp(res, "tombstone") == 0)
		wi_stat_add(WI_STAT_TOMBSTONES, 1);
	else if (strcmp(res, "fenced") == 0)
		wi_stat_add(WI_STAT_FENCED, 1);
	else if (strcmp(res, "retry") == 0)
		wi_stat_add(WI_STAT_RETRIES, 1);
	else if (strcmp(res, "quarantined") == 0)
		wi_stat_add(WI_STAT_QUARANTINED, 1);
}

/* ---------- giving a claim back ---------- */

typedef struct Giveback
{
	int64		token;
	const char *how;			/* retry, defer, quarantine, auth */
	const char *reason;
	double		delay_s;		/* < 0: retry()'s own backoff */
	int			http;
	char	   *result;
} Giveback;

static void
giveback_xact(void *arg)
{
	Giveback   *g = (Giveback *) arg;
	MemoryContext cxt = step_cxt;

	if (strcmp(g->how, "retry") == 0)
	{
		Oid			t[3] = {INT8OID, TEXTOID, FLOAT8OID};
		Datum		v[3] = {Int64GetDatum(g->token), CStringGetTextDatum(g->reason),
		Float8GetDatum(g->delay_s)};
		char		nl[3] = {' ', ' ', g->delay_s < 0 ? 'n' : ' '};

		/* a claim already taken over is not ours to retry */
		exec("SELECT CASE WHEN EXISTS (SELECT 1 FROM webhook_inbox.object_leases WHERE token = $1) "
			 "THEN webhook_inbox.retry($1, $2, make_interval(secs => $3)) ELSE 'fenced' END",
			 3, t, v, nl, SPI_OK_SELECT);
	}
	else if (strcmp(g->how, "defer") == 0)
	{
		Oid			t[3] = {INT8OID, FLOAT8OID, TEXTOID};
		Datum		v[3] = {Int64GetDatum(g->token), Float8GetDatum(Max(g->delay_s, 0)),
		CStringGetTextDatum(g->reason)};

		exec("SELECT webhook_inbox._defer($1, now() + make_interval(secs => $2), $3)::text",
			 3, t, v, NULL, SPI_OK_SELECT);
	}
	else if (strcmp(g->how, "auth") == 0)
	{
		Oid			t[2] = {INT8OID, INT4OID};
		Datum		v[2] = {Int64GetDatum(g->token), Int32GetDatum(g->http)};

		exec("SELECT CASE WHEN webhook_inbox._auth_refused($1, $2) > 0 THEN 'quarantined' "
			 "ELSE 'fenced' END", 2, t, v, NULL, SPI_OK_SELECT);
	}
	else
	{
		Oid			t[2] = {INT8OID, TEXTOID};
		Datum		v[2] = {Int64GetDatum(g->token), CStringGetTextDatum(g->reason)};

		exec("SELECT CASE WHEN EXISTS (SELECT 1 FROM webhook_inbox.object_leases WHERE token = $1) "
			 "AND webhook_inbox.quarantine($1, $2) >= 0 THEN 'quarantined' ELSE 'fenced' END",
			 2, t, v, NULL, SPI_OK_SELECT);
	}
	g->result = MemoryContextStrdup(cxt, first_text() ? first_text() : "fenced");
}

/*
 * Hands a claim back: retry (counts an attempt, backoff or delay_s),
 * defer (no attempt counted, due again after delay_s), quarantine, or auth
 * (quarantine and flag the source).  Counts the outcome.
 */
static void
give_back(int64 token, const char *how, const char *reason, double delay_s, int http)
{
	Giveback	g = {token, how, reason, delay_s, http, NULL};

	if (wi_run_xact(giveback_xact, &g) != NULL)
		return;					/* logged; the lease expires and the claim returns */
	if (strcmp(how, "defer") == 0)
		wi_stat_add(WI_STAT_DEFERRED, 1);
	else if (strcmp(how, "auth") == 0)
	{
		wi_stat_add(WI_STAT_AUTH_REFUSED, 1);
		count_outcome(g.result);
	}
	else
		count_outcome(g.result);
}

/* ---------- step 1: claim ---------- */

typedef struct ClaimStep
{
	Claim	   *claims;
	int			nclaims;
} ClaimStep;

static void
claim_xact(void *arg)
{
	ClaimStep  *cs = (ClaimStep *) arg;
	MemoryContext cxt = step_cxt;
	Oid			t[3] = {TEXTOID, INT4OID, TEXTOID};
	Datum		v[3] = {CStringGetTextDatum(wi_worker_name), Int32GetDatum(wi_batch_size),
	CStringGetTextDatum(psprintf("%d milliseconds", wi_lease_ms))};

	exec("SELECT claim_token, source_id, object_type, object_id, cardinality(event_ids), expires_at "
		 "FROM webhook_inbox.claim($1, $2, $3::interval)", 3, t, v, NULL, SPI_OK_SELECT);
	cs->nclaims = (int) SPI_processed;
	cs->claims = MemoryContextAllocZero(cxt, sizeof(Claim) * Max(cs->nclaims, 1));
	for (int i = 0; i < cs->nclaims; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		Claim	   *c = &cs->claims[i];
		bool		isnull;

		c->token = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		c->source_id = DatumGetInt32(SPI_getbinval(tup, desc, 2, &isnull));
		c->object_type = MemoryContextStrdup(cxt, SPI_getvalue(tup, desc, 3));
		c->object_id = MemoryContextStrdup(cxt, SPI_getvalue(tup, desc, 4));
		c->nevents = DatumGetInt32(SPI_getbinval(tup, desc, 5, &isnull));
		c->expires_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, 6, &isnull));
	}
}

/* ---------- step 2: what needs no provider request ---------- */

static const WiStat local_stat_cols[] = {WI_STAT_SAVED, WI_STAT_DUPLICATES, WI_STAT_STALE,
	WI_STAT_TIES, WI_STAT_BACKWARD, WI_STAT_OCCURRENCES, WI_STAT_IGNORED, WI_STAT_QUARANTINED,
WI_STAT_UNORDERABLE, WI_STAT_FENCED};

/* The local work of one claim, inside the caller's transaction. */
static void
local_work(Claim *c)
{
	Oid			t[1] = {INT8OID};
	Datum		v[1] = {Int64GetDatum(c->token)};
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;

	exec("SELECT * FROM webhook_inbox._work_claim($1)", 1, t, v, NULL, SPI_OK_SELECT);
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	for (int i = 0; i < 9; i++)
		c->counts[i] = (uint64) DatumGetInt32(SPI_getbinval(tup, desc, i + 1, &isnull));
	c->counts[9] = DatumGetBool(SPI_getbinval(tup, desc, 10, &isnull)) ? 1 : 0;
	c->need_fetch = DatumGetBool(SPI_getbinval(tup, desc, 11, &isnull));
}

static void
local_xact(void *arg)
{
	local_work((Claim *) arg);
}

typedef struct LocalBatch
{
	Claim	   *claims;
	int			nclaims;
} LocalBatch;

/*
 * The local work of every claim of a round in one transaction: one commit
 * (one WAL flush) per round instead of one per object.  If anything fails,
 * the caller redoes the claims one transaction each, so one bad object
 * cannot hold up the others.
 */
static void
local_batch_xact(void *arg)
{
	LocalBatch *lb = (LocalBatch *) arg;

	for (int i = 0; i < lb->nclaims; i++)
	{
		CHECK_FOR_INTERRUPTS();
		local_work(&lb->claims[i]);
	}
}

static void
count_local(Claim *c)
{
	for (int i = 0; i < lengthof(local_stat_cols); i++)
		if (c->counts[i] > 0)
			wi_stat_add(local_stat_cols[i], c->counts[i]);
}

/* ---------- step 3: fetches ---------- */

typedef struct SourceCache
{
	int32		source_id;
	WiSource   *src;
} SourceCache;

typedef struct LoadStep
{
	Claim	   *claims;
	int			nclaims;
} LoadStep;

/* Loads each claim's source once per round, and builds its request. */
static void
load_xact(void *arg)
{
	LoadStep   *ls = (LoadStep *) arg;
	MemoryContext cxt = step_cxt;
	SourceCache *cache = palloc0(sizeof(SourceCache) * Max(ls->nclaims, 1));
	int			ncache = 0;

	for (int i = 0; i < ls->nclaims; i++)
	{
		Claim	   *c = &ls->claims[i];
		MemoryContext old;

		if (!c->need_fetch)
			continue;
		c->src = NULL;
		for (int k = 0; k < ncache && c->src == NULL; k++)
			if (cache[k].source_id == c->source_id)
				c->src = cache[k].src;
		old = MemoryContextSwitchTo(cxt);
		if (c->src == NULL)
		{
			c->src = wi_source_load(c->source_id);
			cache[ncache].source_id = c->source_id;
			cache[ncache++].src = c->src;
		}
		c->adapter = wi_adapter_for(c->src);
		if (c->adapter && c->adapter->type_map(c->src, c->object_type, &c->type))
		{
			char	   *url = c->adapter->object_url(c->src, &c->type, c->object_id);

			if (url)
				wi_http_init_request(&c->req, url, c->adapter->auth_header(c->src), c->source_id, c);
			else
				c->adapter = NULL;
		}
		else
			c->adapter = NULL;
		MemoryContextSwitchTo(old);
	}
}

typedef struct SaveStep
{
	Claim	   *c;
	char	   *result;
} SaveStep;

static void
save_xact(void *arg)
{
	SaveStep   *ss = (SaveStep *) arg;
	Claim	   *c = ss->c;
	MemoryContext cxt = step_cxt;
	Oid			t[7] = {INT8OID, INT4OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID};
	Datum		v[7];
	char		nl[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};

	v[0] = Int64GetDatum(c->token);
	v[1] = Int32GetDatum((int32) c->req.status);
	v[2] = CStringGetTextDatum(c->req.body.data);
	v[3] = CStringGetTextDatum(c->type.unwrap_path ? c->type.unwrap_path : "$");
	v[4] = c->type.status_path ? CStringGetTextDatum(c->type.status_path) : (Datum) 0;
	nl[4] = c->type.status_path ? ' ' : 'n';
	v[5] = c->type.version_path ? CStringGetTextDatum(c->type.version_path) : (Datum) 0;
	nl[5] = c->type.version_path ? ' ' : 'n';
	v[6] = TimestampTzGetDatum(c->req.started_at);
	nl[6] = c->req.started ? ' ' : 'n';
	exec("SELECT webhook_inbox._save_fetched($1, $2, $3, $4::jsonpath, $5::jsonpath, $6::jsonpath, $7)",
		 7, t, v, nl, SPI_OK_SELECT);
	ss->result = MemoryContextStrdup(cxt, first_text());
}

/*
 * Fetched answers are saved in batches: one transaction (one commit) for up
 * to SAVE_BATCH answers instead of one per object.  If the batch fails, each
 * answer is saved again in a transaction of its own, so one bad answer
 * cannot take the others down.
 */
#define SAVE_BATCH 32

static Claim **pending_saves = NULL;
static int	npending_saves = 0;

static void
save_batch_xact(void *arg)
{
	for (int i = 0; i < npending_saves; i++)
	{
		SaveStep	ss = {pending_saves[i], NULL};

		CHECK_FOR_INTERRUPTS();
		save_xact(&ss);
		pending_saves[i]->save_result = ss.result;
	}
}

static void
flush_saves(void)
{
	if (npending_saves == 0)
		return;
	pgstat_report_activity(STATE_RUNNING, "saving fetched objects");
	if (wi_run_xact(save_batch_xact, NULL) != NULL)
	{
		for (int i = 0; i < npending_saves; i++)
		{
			Claim	   *c = pending_saves[i];
			SaveStep	ss = {c, NULL};
			char	   *err = wi_run_xact(save_xact, &ss);

			c->save_result = ss.result;
			if (err)
			{
				c->save_result = NULL;
				give_back(c->token, "retry", psprintf("save failed: %s", err), -1, 0);
			}
		}
	}
	for (int i = 0; i < npending_saves; i++)
	{
		Claim	   *c = pending_saves[i];

		count_outcome(c->save_result);
		/* free the body now: a round may hold many */
		if (c->req.body.data)
		{
			pfree(c->req.body.data);
			c->req.body.data = NULL;
		}
	}
	npending_saves = 0;
}

/*
 * Gate of a claim's request: not inside its source's Retry-After window
 * (the claim is deferred to the window's end), not over the source's cap,
 * and not after its lease ran out (another worker may own it by now).
 */
static WiHttpGate
fetch_gate(WiHttpRequest *req, void *arg)
{
	Claim	   *c = (Claim *) req->arg;
	SourceRate *r = rate_for(c->source_id);
	TimestampTz now = GetCurrentTimestamp();

	if (wi_got_sigterm)
		return WI_HTTP_WAIT;
	if (now < r->not_before)
	{
		give_back(c->token, "defer", "rate_limited: waiting for the source's Retry-After window",
				  (r->not_before - now) / 1000000.0, 0);
		c->handled = true;
		return WI_HTTP_SKIP;
	}
	if (now >= c->expires_at)
	{
		give_back(c->token, "defer", "lease_expired: the claim's lease ran out before its fetch", 0, 0);
		c->handled = true;
		return WI_HTTP_SKIP;
	}
	if (r->inflight >= r->cap)
		return WI_HTTP_WAIT;
	r->inflight++;
	pgstat_report_activity(STATE_RUNNING, "fetching");
	return WI_HTTP_START;
}

/*
 * One answer: save it, or map it to what DESIGN.md's error table says.
 * Never raises: every failure becomes a logged error and a retry.
 */
static void
fetch_done(WiHttpRequest *req, void *arg)
{
	Claim	   *c = (Claim *) req->arg;
	SourceRate *r = rate_for(c->source_id);
	long		status = req->status;

	r->inflight = Max(r->inflight - 1, 0);
	c->handled = true;
	wi_stat_latency(req->elapsed_ms);

	if ((status >= 200 && status < 300) || status == 404 || status == 410)
	{
		wi_stat_add(WI_STAT_FETCHED, 1);
		r->cap = Min(r->cap + 1, wi_fetch_concurrency);
		/* saved with others in one transaction; the body is kept until then */
		pending_saves[npending_saves++] = c;
		if (npending_saves >= SAVE_BATCH)
			flush_saves();
		return;
	}
	else if (status == 429 || status == 503)
	{
		/* the source asked us to slow down: a window for all its objects */
		double		wait = req->retry_after_s >= 0 ? (double) req->retry_after_s : -1;
		TimestampTz until = GetCurrentTimestamp() +
			(TimestampTz) ((wait >= 0 ? wait : 1.0) * USECS_PER_SEC);

		wi_stat_add(WI_STAT_RATE_LIMITED, 1);
		wi_stat_add(WI_STAT_FETCH_ERRORS, 1);
		r->not_before = Max(r->not_before, until);
		r->cap = Max(r->cap / 2, 1);
		give_back(c->token, "retry",
				  psprintf("http %ld: the read API asked to retry later%s", status,
						   wait >= 0 ? psprintf(" (Retry-After %.0f s)", wait) : ""), wait, 0);
	}
	else if (status == 401 || status == 403)
	{
		wi_stat_add(WI_STAT_FETCH_ERRORS, 1);
		give_back(c->token, "auth", NULL, 0, (int) status);
	}
	else if (status == 0 || status >= 500)
	{
		wi_stat_add(WI_STAT_FETCH_ERRORS, 1);
		give_back(c->token, "retry",
				  status == 0 ? psprintf("transport: %s", req->error ? req->error : "failed")
				  : psprintf("http %ld from the read API", status), -1, 0);
	}
	else
	{
		wi_stat_add(WI_STAT_FETCH_ERRORS, 1);
		give_back(c->token, "quarantine",
				  psprintf("http %ld: unexpected answer from the read API", status), 0, 0);
	}
	/* free the body now: a round may hold many */
	if (req->body.data)
	{
		pfree(req->body.data);
		req->body.data = NULL;
	}
}

/*
 * Runs the fetches of a round.  Claims whose object has no read API are
 * quarantined (fetch strategy) or quarantined as ambiguous ties; claims
 * still unstarted at the end (SIGTERM) are deferred without an attempt.
 */
static void
fetch_claims(Claim *claims, int nclaims)
{
	LoadStep	ls = {claims, nclaims};
	WiHttpRequest **reqs;
	int			n = 0;

	if (wi_run_xact(load_xact, &ls) != NULL)
	{
		for (int i = 0; i < nclaims; i++)
			if (claims[i].need_fetch)
				give_back(claims[i].token, "retry", "loading the source failed", -1, 0);
		return;
	}
	reqs = palloc(sizeof(WiHttpRequest *) * Max(nclaims, 1));
	for (int i = 0; i < nclaims; i++)
	{
		Claim	   *c = &claims[i];

		if (!c->need_fetch)
			continue;
		if (c->adapter == NULL)
			give_back(c->token, "quarantine",
					  "no_read_api: the source has no read API for this object type", 0, 0);
		else
			reqs[n++] = &c->req;
	}
	if (n == 0)
		return;
	pending_saves = palloc(sizeof(Claim *) * SAVE_BATCH);
	npending_saves = 0;
	wi_http_run(reqs, n, wi_fetch_concurrency, fetch_gate, fetch_done, NULL);
	flush_saves();
	for (int i = 0; i < n; i++)
	{
		Claim	   *c = (Claim *) reqs[i]->arg;

		if (!c->handled)
		{
			if (reqs[i]->started)
				rate_for(c->source_id)->inflight = 0;
			give_back(c->token, "defer", "worker_stopping: given back unfinished", 0, 0);
		}
	}
}

/*
 * One round.  Returns true when the claim was full, so there is probably
 * more to do right away.
 */
static bool
process_round(void)
{
	ClaimStep	cs = {NULL, 0};
	int			nfetch = 0;

	pgstat_report_activity(STATE_RUNNING, "claiming");
	if (wi_run_xact(claim_xact, &cs) != NULL || cs.nclaims == 0)
		return false;
	wi_stat_add(WI_STAT_CLAIMED, cs.nclaims);
	for (int i = 0; i < cs.nclaims; i++)
		wi_stat_add(WI_STAT_EVENTS, cs.claims[i].nevents);

	pgstat_report_activity(STATE_RUNNING, "saving");
	if (wi_got_sigterm)
	{
		for (int i = 0; i < cs.nclaims; i++)
			give_back(cs.claims[i].token, "defer", "worker_stopping: given back unprocessed", 0, 0);
		return false;
	}
	{
		LocalBatch	lb = {cs.claims, cs.nclaims};

		if (wi_run_xact(local_batch_xact, &lb) == NULL)
		{
			for (int i = 0; i < cs.nclaims; i++)
			{
				count_local(&cs.claims[i]);
				if (cs.claims[i].need_fetch)
					nfetch++;
			}
		}
		else
		{
			for (int i = 0; i < cs.nclaims; i++)
			{
				Claim	   *c = &cs.claims[i];
				char	   *err;

				memset(c->counts, 0, sizeof(c->counts));
				c->need_fetch = false;
				if (wi_got_sigterm)
				{
					give_back(c->token, "defer", "worker_stopping: given back unprocessed", 0, 0);
					continue;
				}
				err = wi_run_xact(local_xact, c);
				if (err)
					give_back(c->token, "retry", err, -1, 0);
				else
				{
					count_local(c);
					if (c->need_fetch)
						nfetch++;
				}
			}
		}
	}
	if (nfetch > 0)
		fetch_claims(cs.claims, cs.nclaims);
	return cs.nclaims >= wi_batch_size;
}

/* ---------- the worker process ---------- */

/*
 * One cycle of external effects (effects.c), which runs its own
 * transactions.  An error is logged and counted, and the round goes on.
 * Returns true when a full batch was taken (more may be due).
 */
static bool
effects_round(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	int			n = 0;

	pgstat_report_activity(STATE_RUNNING, "webhook_inbox: effects");
	PG_TRY();
	{
		n = wi_effects_cycle(wi_worker_name, wi_batch_size, true);
	}
	PG_CATCH();
	{
		(void) catch_failure(cxt, "effects: ");
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	return n >= wi_batch_size;
}

static void
handle_sigterm(SIGNAL_ARGS)
{
	int			save_errno = errno;

	wi_got_sigterm = true;
	SetLatch(MyLatch);
	errno = save_errno;
}

static void
extension_ready_xact(void *arg)
{
	*(bool *) arg = OidIsValid(get_extension_oid("webhook_inbox", true));
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
	bool		announced = false;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, handle_sigterm);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(wi_database, NULL, 0);

	wi_in_worker = true;
	wi_claim_scan_floor = true;
	wi_worker_name = MemoryContextStrdup(TopMemoryContext, psprintf("bgworker:%d", MyProcPid));
	before_shmem_exit(worker_exit, (Datum) 0);
	wi_set_worker_latch(MyLatch);
	round_cxt = AllocSetContextCreate(TopMemoryContext, "webhook_inbox worker round",
									  ALLOCSET_DEFAULT_SIZES);
	ereport(LOG, (errmsg("webhook_inbox worker started in database \"%s\"", wi_database)));

	while (!wi_got_sigterm)
	{
		bool		more = false;
		bool		ready = false;

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		MemoryContextReset(round_cxt);
		MemoryContextSwitchTo(round_cxt);

		if (wi_enabled && wi_run_xact(extension_ready_xact, &ready) == NULL && ready)
		{
			if (!announced)
				ereport(LOG, (errmsg("webhook_inbox worker: the extension exists, processing the inbox")));
			announced = true;
			more = process_round();
			if (!wi_got_sigterm && effects_round())
				more = true;
			if (!wi_got_sigterm)
				wi_sweep_due();
		}
		MemoryContextSwitchTo(TopMemoryContext);
		if (more || wi_got_sigterm)
			continue;

		pgstat_report_activity(STATE_IDLE, NULL);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 wi_naptime_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	ereport(LOG, (errmsg("webhook_inbox worker stopping")));
	proc_exit(0);
}

/*
 * Called from _PG_init while shared_preload_libraries is processed:
 * registers the worker and the counters' shared memory.
 */
void
wi_worker_init(void)
{
	BackgroundWorker bgw;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = 5;	/* e.g. the database does not exist yet */
	snprintf(bgw.bgw_library_name, BGW_MAXLEN, "webhook_inbox");
	snprintf(bgw.bgw_function_name, BGW_MAXLEN, "wi_worker_main");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "webhook_inbox worker");
	snprintf(bgw.bgw_type, BGW_MAXLEN, "webhook_inbox worker");
	RegisterBackgroundWorker(&bgw);
	wi_stats_shmem_init();
}
