/*
 * round.c
 *		One round of the background worker: claim, local work, fetch, save.
 *
 *   0. _work_local() takes up to local_batch_size objects whose pending events
 *      need no provider request and works them in the same transaction,
 *      straight from pending to their outcome: no lease, no processing
 *      state, one commit (the fast path; a failure leaves them to step 1);
 *   1. claim() up to batch_size objects under a lease (one transaction):
 *      what the fast path leaves (fetches, retries, expired claims, and
 *      after a failed fast path everything);
 *   2. _work_round() applies, for all claims at once, what needs no provider
 *      request (version, machine, occurrence, unordered, ignore) and says
 *      which claims need a fetch (fetch strategy, or a tie with a read API);
 *      one transaction, redone one claim at a time if it fails, so one bad
 *      object cannot hold up the others;
 *   3. the fetches run together through libcurl multi (fetch.c), each
 *      scoped to its object's tenant (wi_request_scope(): Stripe-Account
 *      ...), gated by the sources' rate limits (ratelimit.c) and paced
 *      within the providers' documented limits (pace.c), and the
 *      answers are saved, with whose credentials each request carried,
 *      under the claims' tokens (fencing) in batches, by _save_fetched(), or
 *      mapped to retry / quarantine / tombstone.
 * A claim that cannot be finished is given back (give_back.c): retried
 * with backoff and quarantined after max_attempts, or deferred without an
 * attempt; nothing is retried forever and nothing is lost.
 *
 * Outcomes come back from SQL as names and are turned into WiOutcome once
 * (outcome.c); every counter is added only after its transaction commits.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "outcome.h"
#include "credentials.h"
#include "give_back.h"
#include "provider.h"
#include "ratelimit.h"
#include "round.h"
#include "stats.h"
#include "webhook_inbox.h"

/* One claimed object, as the worker carries it through a round. */
typedef struct Claim
{
	int64		token;
	int32		source_id;
	char	   *tenant;			/* "" for the source's own account */
	char	   *context;		/* the tenant's Stripe context, or NULL */
	char	   *object_type;
	char	   *object_id;
	int			nevents;
	TimestampTz expires_at;
	bool		fetch_only;		/* nothing to do but a fetch (claim_xact) */
	bool		need_fetch;
	WiSource   *src;
	const WiAdapter *adapter;
	WiTypeMap	type;
	WiHttpRequest req;
	WiPace		pace;			/* the units its request counts against */
	TimestampTz pace_at;		/* not asked again before: the units' slot */
	bool		handled;		/* its fetch was answered or given back */
	uint64		counts[WI_OUT__COUNT];	/* local outcomes, counted once committed */
	bool		saved;			/* its fetched answer was saved */
	WiOutcome	save_result;	/* what saving it did */
} Claim;

/* What a round carries between its steps. */
typedef struct Round
{
	const WiSteps *steps;
	bool		after_local;	/* _work_local() has taken the local events */
	Claim	   *claims;
	int			nclaims;
	/* local work: the claims one step covers */
	Claim	  **batch;
	int			nbatch;
	/* fetched answers waiting to be saved together */
	Claim	  **pending;
	int			npending;
	TimestampTz pending_since;	/* when the oldest of them was answered */
} Round;

/*
 * Row r of the last result of _work_local(), _work_round() or a save of
 * fetched answers: (claim token, outcome, how many events; 1 for an
 * answer).
 */
static WiOutcome
outcome_row(uint64 r, int64 *token, int32 *events)
{
	HeapTuple	tup = SPI_tuptable->vals[r];
	TupleDesc	desc = SPI_tuptable->tupdesc;
	bool		isnull;

	if (token)
		*token = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
	*events = DatumGetInt32(SPI_getbinval(tup, desc, 3, &isnull));
	return wi_outcome_from_name(SPI_getvalue(tup, desc, 2));
}

/* ---------- step 0: the fast path ---------- */

typedef struct LocalRound
{
	int			objects;
	uint64		events;
	uint64		counts[WI_OUT__COUNT];
} LocalRound;

static void
fast_xact(void *arg)
{
	LocalRound *lr = (LocalRound *) arg;
	Oid			t[1] = {INT4OID};
	Datum		v[1] = {Int32GetDatum(wi_local_batch_size)};

	memset(lr, 0, sizeof(*lr));
	wi_spi_exec("SELECT token, outcome, events FROM webhook_inbox._work_local($1, true)", 1, t, v, NULL,
				SPI_OK_SELECT);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		int32		n;
		WiOutcome	o = outcome_row(r, NULL, &n);

		if (o == WI_OUT_TAKEN)
		{
			lr->objects++;
			lr->events += n;
		}
		else
			lr->counts[o] += n;
	}
}

/*
 * Runs the fast path and counts what it did once committed.  Returns
 * whether it succeeded; how many objects it took is in *objects.
 */
static bool
fast_path(const WiSteps *steps, int *objects)
{
	LocalRound	lr;

	*objects = 0;
	pgstat_report_activity(STATE_RUNNING, "working local events");
	if (wi_step_run(steps, fast_xact, &lr) != NULL)
		return false;
	*objects = lr.objects;
	wi_stat_add(WI_STAT_CLAIMED, lr.objects);
	wi_stat_add(WI_STAT_EVENTS, lr.events);
	for (int o = 0; o < WI_OUT__COUNT; o++)
		wi_outcome_count((WiOutcome) o, lr.counts[o]);
	return true;
}

/* ---------- step 1: claim ---------- */

static void
claim_xact(void *arg)
{
	Round	   *rd = (Round *) arg;
	MemoryContext cxt = wi_step_cxt();
	Oid			t[4] = {TEXTOID, INT4OID, TEXTOID, BOOLOID};
	Datum		v[4] = {CStringGetTextDatum(rd->steps->holder), Int32GetDatum(wi_batch_size),
		CStringGetTextDatum(psprintf("%d milliseconds", wi_lease_ms)), BoolGetDatum(rd->after_local)};

	/*
	 * fetch_only: every event of the claim is one only the provider's
	 * present decides (a fetch route that records no occurrence), so the
	 * round has nothing to do for it locally (_work_round() would only say
	 * need_fetch), and the save does the fence check.
	 */
	wi_spi_exec("SELECT c.claim_token, c.source_id, c.object_type, c.object_id, cardinality(c.event_ids), "
				"c.expires_at, c.strategy = 'fetch' AND NOT EXISTS (SELECT 1 FROM unnest(c.event_ids) e "
				"  CROSS JOIN LATERAL (SELECT i.strategy, i.route_id FROM webhook_inbox.inbox i "
				"    WHERE i.id = e OFFSET 0) i "
				"  LEFT JOIN webhook_inbox.routes r ON r.id = i.route_id "
				"  WHERE i.strategy IS DISTINCT FROM 'fetch' OR r.occurrence_kind IS NOT NULL), "
				"c.tenant, (SELECT t.context FROM webhook_inbox.tenants t "
				"  WHERE t.source_id = c.source_id AND t.tenant = c.tenant) "
				"FROM webhook_inbox._claim_worker($1, $2, $3::interval, $4) c",
				4, t, v, NULL, SPI_OK_SELECT);
	rd->nclaims = (int) SPI_processed;
	rd->claims = MemoryContextAllocZero(cxt, sizeof(Claim) * Max(rd->nclaims, 1));
	for (int i = 0; i < rd->nclaims; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		Claim	   *c = &rd->claims[i];
		bool		isnull;

		c->token = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		c->source_id = DatumGetInt32(SPI_getbinval(tup, desc, 2, &isnull));
		c->object_type = MemoryContextStrdup(cxt, SPI_getvalue(tup, desc, 3));
		c->object_id = MemoryContextStrdup(cxt, SPI_getvalue(tup, desc, 4));
		c->nevents = DatumGetInt32(SPI_getbinval(tup, desc, 5, &isnull));
		c->expires_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, 6, &isnull));
		c->fetch_only = DatumGetBool(SPI_getbinval(tup, desc, 7, &isnull));
		c->tenant = MemoryContextStrdup(cxt, SPI_getvalue(tup, desc, 8));
		c->context = SPI_getvalue(tup, desc, 9);
		if (c->context)
			c->context = MemoryContextStrdup(cxt, c->context);
	}
}

/* ---------- step 2: what needs no provider request ---------- */

/* The tokens of the claims in rd->batch, as a bigint[]. */
static Datum
batch_tokens(Round *rd)
{
	Datum	   *tokens = palloc(sizeof(Datum) * Max(rd->nbatch, 1));

	for (int i = 0; i < rd->nbatch; i++)
		tokens[i] = Int64GetDatum(rd->batch[i]->token);
	return PointerGetDatum(construct_array(tokens, rd->nbatch, INT8OID, sizeof(int64),
										   FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/*
 * Row r of the last result, as outcome_row() reads it: the claim of
 * rd->batch it is about (NULL if none), its outcome and events.
 */
static Claim *
row_claim(Round *rd, uint64 r, WiOutcome *o, int32 *events)
{
	int64		token;

	*o = outcome_row(r, &token, events);
	for (int i = 0; i < rd->nbatch; i++)
		if (rd->batch[i]->token == token)
			return rd->batch[i];
	return NULL;
}

/*
 * The local work of the claims in rd->batch, in one statement: each row of
 * _work_round() is (claim token, outcome, how many events).
 */
static void
local_xact(void *arg)
{
	Round	   *rd = (Round *) arg;
	Oid			t[1] = {INT8ARRAYOID};
	Datum		v[1];

	for (int i = 0; i < rd->nbatch; i++)
	{
		memset(rd->batch[i]->counts, 0, sizeof(rd->batch[i]->counts));
		rd->batch[i]->need_fetch = false;
	}
	v[0] = batch_tokens(rd);
	wi_spi_exec("SELECT token, outcome, events FROM webhook_inbox._work_round($1)", 1, t, v, NULL,
				SPI_OK_SELECT);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		int32		events;
		WiOutcome	o;
		Claim	   *c = row_claim(rd, r, &o, &events);

		if (c == NULL)
			continue;
		c->counts[o] += events;
		if (o == WI_OUT_NEED_FETCH)
			c->need_fetch = true;
	}
}

static void
count_local(Claim *c)
{
	for (int o = 0; o < WI_OUT__COUNT; o++)
		wi_outcome_count((WiOutcome) o, c->counts[o]);
}

/*
 * The local work of all claims that have any (those that are fetch_only
 * only need their fetch) in one transaction (one commit per round).  If it
 * fails, each claim again in a transaction of its own, so one bad object
 * cannot hold up the others; a claim that fails alone is retried.  Returns
 * how many claims need a fetch.
 */
static int
local_work(Round *rd)
{
	int			nfetch = 0;
	Claim	  **local;
	int			nlocal = 0;

	local = palloc(sizeof(Claim *) * Max(rd->nclaims, 1));
	for (int i = 0; i < rd->nclaims; i++)
	{
		Claim	   *c = &rd->claims[i];

		memset(c->counts, 0, sizeof(c->counts));
		c->need_fetch = c->fetch_only;
		if (!c->fetch_only)
			local[nlocal++] = c;
	}
	rd->batch = local;
	rd->nbatch = nlocal;
	if (nlocal > 0 && wi_step_run(rd->steps, local_xact, rd) != NULL)
	{
		for (int k = 0; k < nlocal; k++)
		{
			Claim	   *c = local[k];
			char	   *err;

			memset(c->counts, 0, sizeof(c->counts));
			c->need_fetch = false;
			if (wi_steps_stopping(rd->steps))
			{
				wi_give_back(rd->steps, c->token, GIVE_DEFER, "worker_stopping: given back unprocessed", 0, 0);
				continue;
			}
			rd->batch = &local[k];
			rd->nbatch = 1;
			err = wi_step_run(rd->steps, local_xact, rd);
			if (err)
			{
				memset(c->counts, 0, sizeof(c->counts));
				c->need_fetch = false;
				wi_give_back(rd->steps, c->token, GIVE_RETRY, err, -1, 0);
			}
		}
	}
	for (int i = 0; i < rd->nclaims; i++)
	{
		count_local(&rd->claims[i]);
		if (rd->claims[i].need_fetch)
			nfetch++;
	}
	return nfetch;
}

/* ---------- step 3: fetches ---------- */

typedef struct SourceCache
{
	int32		source_id;
	WiSource   *src;
} SourceCache;

/* Loads each claim's source once per round, and builds its request. */
static void
load_xact(void *arg)
{
	Round	   *rd = (Round *) arg;
	MemoryContext cxt = wi_step_cxt();
	SourceCache *cache = palloc0(sizeof(SourceCache) * Max(rd->nclaims, 1));
	int			ncache = 0;

	for (int i = 0; i < rd->nclaims; i++)
	{
		Claim	   *c = &rd->claims[i];
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
			{
				wi_http_init_request(&c->req, url, c->adapter->auth_header(c->src), c->source_id,
									 c->src->api_base, c);
				if (c->adapter->object_body)
					c->req.post_body = c->adapter->object_body(c->src, &c->type, c->object_id);
				wi_request_scope(&c->req, c->adapter, c->src, c->tenant, c->context);
				wi_request_pace(&c->pace, c->adapter, c->src, c->tenant, url);
			}
			else
				c->adapter = NULL;
		}
		else
			c->adapter = NULL;
		MemoryContextSwitchTo(old);
	}
}

/* A text array of n elements, NULL where vals[i] is NULL. */
static Datum
text_array(const char *const *vals, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));
	bool	   *nulls = palloc(sizeof(bool) * Max(n, 1));
	int			dims[1] = {n};
	int			lbs[1] = {1};

	for (int i = 0; i < n; i++)
	{
		nulls[i] = vals[i] == NULL;
		d[i] = nulls[i] ? (Datum) 0 : CStringGetTextDatum(vals[i]);
	}
	return PointerGetDatum(construct_md_array(d, nulls, 1, dims, lbs, TEXTOID, -1, false,
											  TYPALIGN_INT));
}

/*
 * The answers in rd->batch, saved in one transaction by one call of
 * _save_fetched_batch(), which decides and writes them set-based.  The
 * diagnostic webhook_inbox.debug_save_per_answer saves them instead one
 * _save_fetched() call each (the same rules, one answer at a time), the
 * reference the set-based save is measured against.
 */
static void
save_xact(void *arg)
{
	Round	   *rd = (Round *) arg;
	int			n = rd->nbatch;
	Datum	   *https = palloc(sizeof(Datum) * Max(n, 1));
	Datum	   *sent = palloc(sizeof(Datum) * Max(n, 1));
	bool	   *sent_null = palloc(sizeof(bool) * Max(n, 1));
	const char **bodies = palloc(sizeof(char *) * Max(n, 1));
	const char **unwrap = palloc(sizeof(char *) * Max(n, 1));
	const char **status = palloc(sizeof(char *) * Max(n, 1));
	const char **version = palloc(sizeof(char *) * Max(n, 1));
	const char **creds = palloc(sizeof(char *) * Max(n, 1));
	int			dims[1] = {n};
	int			lbs[1] = {1};
	Oid			t[8] = {INT8ARRAYOID, INT4ARRAYOID, TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID,
	TEXTARRAYOID, TIMESTAMPTZARRAYOID, TEXTARRAYOID};
	Datum		v[8];

	for (int i = 0; i < n; i++)
	{
		Claim	   *c = rd->batch[i];

		c->saved = false;
		https[i] = Int32GetDatum((int32) c->req.status);
		bodies[i] = c->req.body.data;
		/* an answer in the provider's own shape is saved in the mirror's */
		if (c->req.status >= 200 && c->req.status < 300)
			bodies[i] = wi_answer_shape(c->adapter, c->src, c->object_type, c->req.body.data);
		unwrap[i] = c->type.unwrap_path ? c->type.unwrap_path : "$";
		status[i] = c->type.status_path;
		version[i] = c->type.version_path;
		sent[i] = TimestampTzGetDatum(c->req.started_at);
		sent_null[i] = !c->req.started;
		creds[i] = c->req.credentials;
	}
	v[0] = batch_tokens(rd);
	v[1] = PointerGetDatum(construct_array(https, n, INT4OID, sizeof(int32), true, TYPALIGN_INT));
	v[2] = text_array(bodies, n);
	v[3] = text_array(unwrap, n);
	v[4] = text_array(status, n);
	v[5] = text_array(version, n);
	v[6] = PointerGetDatum(construct_md_array(sent, sent_null, 1, dims, lbs, TIMESTAMPTZOID,
											  sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	/* whose credentials each request carried: a 404 counts only under the object's tenant's */
	v[7] = text_array(creds, n);
	wi_spi_exec(wi_debug_save_per_answer ?
				"SELECT a.token, webhook_inbox._save_fetched(a.token, a.http, a.body, a.unwrap::jsonpath, "
				"a.status::jsonpath, a.version::jsonpath, a.sent, a.cred), 1 "
				"FROM unnest($1, $2, $3, $4, $5, $6, $7, $8) "
				"AS a(token, http, body, unwrap, status, version, sent, cred)" :
				"SELECT token, outcome, 1 FROM webhook_inbox._save_fetched_batch($1, $2, $3, "
				"$4::jsonpath[], $5::jsonpath[], $6::jsonpath[], $7, $8)",
				8, t, v, NULL, SPI_OK_SELECT);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		int32		events;
		WiOutcome	o;
		Claim	   *c = row_claim(rd, r, &o, &events);

		if (c != NULL)
		{
			c->save_result = o;
			c->saved = true;
		}
	}
}

/*
 * Fetched answers are saved in batches: one transaction (one commit) for up
 * to SAVE_BATCH answers instead of one per object.  If the batch fails, each
 * answer is saved again in a transaction of its own, so one bad answer
 * cannot take the others down.  A save costs a fixed few milliseconds plus
 * a little per answer, and transfers wait while it runs: fewer, larger
 * batches (measured: 32 → 128, fetch drain 2,309 → 2,711 ev/s).
 */
#define SAVE_BATCH 128
#define SAVE_WAIT_MS 200

static void
flush_saves(Round *rd)
{
	if (rd->npending == 0)
		return;
	pgstat_report_activity(STATE_RUNNING, "saving fetched objects");
	rd->batch = rd->pending;
	rd->nbatch = rd->npending;
	if (wi_step_run(rd->steps, save_xact, rd) != NULL)
	{
		for (int i = 0; i < rd->npending; i++)
		{
			Claim	   *c = rd->pending[i];
			char	   *err;

			rd->batch = &rd->pending[i];
			rd->nbatch = 1;
			err = wi_step_run(rd->steps, save_xact, rd);
			if (err)
			{
				c->saved = false;
				wi_give_back(rd->steps, c->token, GIVE_RETRY, psprintf("save failed: %s", err), -1, 0);
			}
		}
	}
	for (int i = 0; i < rd->npending; i++)
	{
		Claim	   *c = rd->pending[i];

		if (c->saved)
			wi_outcome_count(c->save_result, 1);
		/* free the body now: a round may hold many */
		if (c->req.body.data)
		{
			pfree(c->req.body.data);
			c->req.body.data = NULL;
		}
	}
	rd->npending = 0;
}

/* the longest a fetch waits for its paced slot inside a round */
#define FETCH_PACE_WAIT_S 2.0

/*
 * Gate of a claim's request: not inside its source's Retry-After window
 * (the claim is deferred to the window's end), not over the source's cap,
 * and not after its lease ran out (another worker may own it by now).
 */
static WiHttpGate
fetch_gate(WiHttpRequest *req, void *arg)
{
	Round	   *rd = (Round *) arg;
	Claim	   *c = (Claim *) req->arg;
	WiRate	   *r = wi_rate_for(c->source_id);
	TimestampTz now = GetCurrentTimestamp();

	if (wi_steps_stopping(rd->steps))
		return WI_HTTP_WAIT;
	if (req->auth_wait != NULL)
	{
		/*
		 * The tenant's credentials are not usable (none yet, a refresh that
		 * failed, a refused shop): the read waits without spending an
		 * attempt, and is due again as soon as its credentials are set.
		 */
		if (strncmp(req->auth_wait, "unknown_tenant", 14) == 0)
			/* nothing will give it credentials: a person decides, once */
			wi_give_back(rd->steps, c->token, GIVE_QUARANTINE, req->auth_wait, 0, 0);
		else
			wi_give_back(rd->steps, c->token, GIVE_DEFER, req->auth_wait,
						 strncmp(req->auth_wait, "credentials_flagged", 19) == 0 ? 600.0 : 30.0, 0);
		c->handled = true;
		return WI_HTTP_SKIP;
	}
	if (now < r->not_before)
	{
		wi_give_back(rd->steps, c->token, GIVE_DEFER,
				  "rate_limited: waiting for the source's Retry-After window",
				  (r->not_before - now) / 1000000.0, 0);
		c->handled = true;
		return WI_HTTP_SKIP;
	}
	if (now >= c->expires_at)
	{
		wi_give_back(rd->steps, c->token, GIVE_DEFER,
				  "lease_expired: the claim's lease ran out before its fetch", 0, 0);
		c->handled = true;
		return WI_HTTP_SKIP;
	}
	if (r->inflight >= r->cap)
		return WI_HTTP_WAIT;
	/*
	 * Paced: within the provider's limits for the units it counts against
	 * (pace.c), shared with sweeps and sweep_now(); the round goes first,
	 * since sweeps wait for it (sweep.c).  A slot a moment away is waited
	 * for; one further (a spent hourly budget, a shop's cost bucket held
	 * for seconds) defers the claim to it, no attempt spent.
	 */
	if (now < c->pace_at)
		return WI_HTTP_LATER;
	{
		double		wait = wi_pace_take(c->source_id, &c->pace);

		if (wait > FETCH_PACE_WAIT_S)
		{
			wi_give_back(rd->steps, c->token, GIVE_DEFER,
						 psprintf("rate_limited: paced within the provider's limits (%s)",
								  wi_pace_describe(&c->pace)), wait, 0);
			c->handled = true;
			return WI_HTTP_SKIP;
		}
		if (wait > 0)
		{
			c->pace_at = now + (TimestampTz) (wait * USECS_PER_SEC);
			return WI_HTTP_LATER;
		}
	}
	r->inflight++;
	pgstat_report_activity(STATE_RUNNING, "fetching");
	return WI_HTTP_START;
}

/* a tenant's read refused 401/403 under the tenant's own token (a shop's) */
typedef struct TenantRefusal
{
	int32		source_id;
	const char *tenant;
	const char *sent;			/* the credentials header the read carried */
	WiAuthStatus status;
	char	   *reason;
} TenantRefusal;

static void
tenant_refused_xact(void *arg)
{
	TenantRefusal *t = (TenantRefusal *) arg;
	char	   *header = NULL;

	t->status = wi_tenant_auth_refused(t->source_id, t->tenant, t->sent, &header, &t->reason);
	if (header != NULL)
		explicit_bzero(header, strlen(header));
}

/*
 * A read made at a tenant's own origin with the tenant's own token (a
 * Shopify app's shop) was refused: the tenant's credentials are at fault,
 * not the source's, so the source is not flagged.  When another read has
 * replaced the token meanwhile the claim is due again at once; otherwise
 * the tenant is flagged for engineering (tenant_credentials_status, a
 * flagged_tenant queue row) and its claim waits, no attempt spent.
 */
static void
tenant_refused(Round *rd, Claim *c, WiHttpRequest *req, long status)
{
	TenantRefusal t = {c->source_id, c->tenant, req->auth ? req->auth : "", WI_AUTH_WAIT, NULL};

	wi_stat_add(WI_STAT_AUTH_REFUSED, 1);
	if (wi_step_run(rd->steps, tenant_refused_xact, &t) != NULL)
		t.status = WI_AUTH_WAIT;
	if (t.status == WI_AUTH_OK)
		wi_give_back(rd->steps, c->token, GIVE_DEFER,
				  psprintf("credentials_wait: http %ld with a token another read has replaced", status), 0, 0);
	else
		wi_give_back(rd->steps, c->token, GIVE_DEFER,
				  psprintf("credentials_flagged: http %ld from tenant %s's read API: %s", status, c->tenant,
						   t.reason ? t.reason : "its credentials were refused"),
				  t.status == WI_AUTH_FLAGGED ? 600.0 : 30.0, 0);
}

/*
 * One answer: queue it for saving, or map it to what DESIGN.md's error
 * table says.  Never raises: every failure becomes a logged error and a
 * retry.
 */
static void
fetch_done(WiHttpRequest *req, void *arg)
{
	Round	   *rd = (Round *) arg;
	Claim	   *c = (Claim *) req->arg;
	WiRate	   *r = wi_rate_for(c->source_id);
	long		status = req->status;

	wi_rate_finished(r);
	wi_pace_answered(c->source_id, &c->pace);
	c->handled = true;
	wi_stat_latency(req->elapsed_ms);
	/* what a 200 of a GraphQL API really says, and how much budget is left */
	if (c->adapter->read_answer && !req->refused && status != 0)
	{
		c->adapter->read_answer(c->src, &c->type, req);
		status = req->status;
		if (req->pace_s > 0)
			wi_pace_hold(c->source_id, &c->pace,
						 GetCurrentTimestamp() + (TimestampTz) (req->pace_s * USECS_PER_SEC));
	}

	if ((status >= 200 && status < 300) || status == 404 || status == 410)
	{
		wi_stat_add(WI_STAT_FETCHED, 1);
		wi_rate_succeeded(r);
		/*
		 * Saved with others in one transaction; the body is kept until
		 * then.  A round's answers (batch_size of them at most) usually go
		 * in one batch once its transfers are done; a slow transfer holds
		 * the answers that came before it back SAVE_WAIT_MS at most.
		 */
		if (rd->npending == 0)
			rd->pending_since = GetCurrentTimestamp();
		rd->pending[rd->npending++] = c;
		if (rd->npending >= SAVE_BATCH ||
			TimestampDifferenceExceeds(rd->pending_since, GetCurrentTimestamp(), SAVE_WAIT_MS))
			flush_saves(rd);
		return;
	}
	wi_stat_add(WI_STAT_FETCH_ERRORS, 1);
	if (status == 429 || status == 503)
	{
		/*
		 * The source asked us to slow down: a window for all its objects
		 * (sweeps included), and the claim is deferred to the window's end
		 * without counting an attempt.  Throttling says nothing about the
		 * event, so however long it lasts it never quarantines one.
		 */
		double		wait = req->retry_after_s >= 0 ? (double) req->retry_after_s : 1.0;

		wi_stat_add(WI_STAT_RATE_LIMITED, 1);
		wi_rate_slow_down(r, GetCurrentTimestamp() + (TimestampTz) (wait * USECS_PER_SEC));
		wi_give_back(rd->steps, c->token, GIVE_DEFER,
				  psprintf("rate_limited: %s%s",
						   req->error ? req->error : psprintf("http %ld from the read API", status),
						   req->retry_after_s >= 0 ? psprintf(" (Retry-After %.0f s)", wait) : ""),
				  wait, 0);
	}
	else if (req->refused)
		wi_give_back(rd->steps, c->token, GIVE_QUARANTINE, psprintf("refused_url: %s", req->error), 0, 0);
	else if ((status == 401 || status == 403) && req->credentials[0] != '\0' &&
			 c->adapter->tenant_base != NULL)
		tenant_refused(rd, c, req, status);
	else if (status == 401 || status == 403)
		wi_give_back(rd->steps, c->token, GIVE_AUTH, NULL, 0, (int) status);
	else if (status == 0 || status >= 500)
		wi_give_back(rd->steps, c->token, GIVE_RETRY,
				  status == 0 ? psprintf("transport: %s", req->error ? req->error : "failed")
				  : req->error ? pstrdup(req->error)
				  : psprintf("http %ld from the read API", status), -1, 0);
	else
		wi_give_back(rd->steps, c->token, GIVE_QUARANTINE,
				  req->error ? psprintf("unusable_answer: %s", req->error)
				  : psprintf("http %ld: unexpected answer from the read API", status), 0, 0);
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
fetch_claims(Round *rd)
{
	WiHttpRequest **reqs;
	int			n = 0;

	if (wi_step_run(rd->steps, load_xact, rd) != NULL)
	{
		for (int i = 0; i < rd->nclaims; i++)
			if (rd->claims[i].need_fetch)
				wi_give_back(rd->steps, rd->claims[i].token, GIVE_RETRY, "loading the source failed", -1, 0);
		return;
	}
	reqs = palloc(sizeof(WiHttpRequest *) * Max(rd->nclaims, 1));
	for (int i = 0; i < rd->nclaims; i++)
	{
		Claim	   *c = &rd->claims[i];

		if (!c->need_fetch)
			continue;
		/*
		 * No request to make.  A tie asked for the present only to decide
		 * between two contents (GitHub issues: versioned, never fetched by
		 * id), so it is what it is without a read API, a person's call;
		 * anything else needed the fetch and lacks its configuration.
		 */
		if (c->adapter == NULL && c->counts[WI_OUT_TIE] > 0)
			wi_give_back(rd->steps, c->token, GIVE_QUARANTINE,
					  "ambiguous_tie: equal version with different content and no read API for this object type",
					  0, 0);
		else if (c->adapter == NULL)
			wi_give_back(rd->steps, c->token, GIVE_QUARANTINE,
					  "no_read_api: the source has no read API for this object type", 0, 0);
		else
			reqs[n++] = &c->req;
	}
	if (n == 0)
		return;
	rd->pending = palloc(sizeof(Claim *) * SAVE_BATCH);
	rd->npending = 0;
	wi_http_run(rd->steps, reqs, n, wi_fetch_concurrency, fetch_gate, fetch_done, rd);
	flush_saves(rd);
	for (int i = 0; i < n; i++)
	{
		Claim	   *c = (Claim *) reqs[i]->arg;

		if (!c->handled)
		{
			if (reqs[i]->started)
			{
				wi_rate_for(c->source_id)->inflight = 0;
				wi_pace_answered(c->source_id, &c->pace);
			}
			wi_give_back(rd->steps, c->token, GIVE_DEFER, "worker_stopping: given back unfinished", 0, 0);
		}
	}
}

#define CLAIM_INTERVAL_MS	100
static TimestampTz last_claim_at = 0;
static TimestampTz last_fast_at = 0;
static bool fast_idle = false;	/* the last fast path found nothing */
static bool claims_full = false;	/* the last claim step took a full batch */

bool
wi_round_run(const WiSteps *steps)
{
	Round		rd;

	int			fast = 0;
	bool		fast_ok = true;
	TimestampTz now = GetCurrentTimestamp();

	/*
	 * While claims come full and the last fast path found nothing (a
	 * flood of fetches), the fast path, whose scan would step over all of
	 * them, runs only every CLAIM_INTERVAL_MS, as the claim step does below
	 * while the fast path is busy: a local event waits at most that long.
	 */
	if (!(fast_idle && claims_full && !TimestampDifferenceExceeds(last_fast_at, now, CLAIM_INTERVAL_MS)))
	{
		fast_ok = fast_path(steps, &fast);
		fast_idle = fast_ok && fast == 0;
		last_fast_at = now;
	}
	if (wi_steps_stopping(steps))
		return false;

	/*
	 * While the fast path has more than a round's worth, the claim step
	 * (whose scan would step over all of it) runs only every
	 * CLAIM_INTERVAL_MS: fetches, retries and expired claims wait at most
	 * that long behind a flood of local events.
	 */
	if (fast_ok && fast >= wi_local_batch_size &&
		!TimestampDifferenceExceeds(last_claim_at, now, CLAIM_INTERVAL_MS))
		return true;
	last_claim_at = now;

	memset(&rd, 0, sizeof(rd));
	rd.steps = steps;
	pgstat_report_activity(STATE_RUNNING, "claiming");
	/* after a failed fast path, the claim takes its events too, one claim at a time if need be */
	rd.after_local = fast_ok;
	claims_full = false;
	if (wi_step_run(steps, claim_xact, &rd) != NULL || rd.nclaims == 0)
		return fast >= wi_local_batch_size;
	claims_full = rd.nclaims >= wi_batch_size;
	wi_stat_add(WI_STAT_CLAIMED, rd.nclaims);
	for (int i = 0; i < rd.nclaims; i++)
		wi_stat_add(WI_STAT_EVENTS, rd.claims[i].nevents);

	pgstat_report_activity(STATE_RUNNING, "saving");
	if (wi_steps_stopping(steps))
	{
		for (int i = 0; i < rd.nclaims; i++)
			wi_give_back(steps, rd.claims[i].token, GIVE_DEFER, "worker_stopping: given back unprocessed", 0, 0);
		return false;
	}
	if (local_work(&rd) > 0)
		fetch_claims(&rd);
	return fast >= wi_local_batch_size || rd.nclaims >= wi_batch_size;
}
