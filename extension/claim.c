/*
 * claim.c
 *		webhook_inbox.claim(worker, max_objects, lease): hand out work by object.
 *
 * A claim covers one object, (source, tenant, object type, object id), and
 * every event of it that is due, so that a burst of fifty events for one
 * subscription costs one fetch; the same id under two tenants is two
 * objects, with two leases and two advisory locks.  At most one
 * live claim exists per object: object_leases holds it, with a fencing token
 * drawn from a sequence, so a worker whose lease expired and was taken over
 * can be recognised (and refused) when it finally tries to save.
 *
 * A fetch-strategy object is claimed once its notifications have been quiet
 * for fetch_delay (webhook_inbox.fetch_delay): they come in bursts, and the
 * one fetch made after the burst covers them all.  Under a stream that never
 * goes quiet, an event waits at most ten times fetch_delay.
 *
 * Concurrency: candidate events are read with FOR UPDATE SKIP LOCKED, so
 * concurrent claimers spread over different events without waiting.  Two
 * claimers may still reach the same object through different events; a
 * transaction-scoped advisory lock on the object decides which one takes it,
 * without blocking the other.  Marking the object's events uses SKIP LOCKED
 * as well, so no claimer ever waits on another's row locks (no deadlock);
 * an event skipped that way stays pending for the next claim.
 *
 * The steps of a claim are the same for every release's schema this
 * library serves; what differs is data, a WiClaimPlans and a WiClaimScan
 * (compat.h): the statements, and how far the scan reads.  This release's
 * come from here; a database still at 0.1.0 gets that release's from
 * compat_0_1_0_claim.c, which calls nothing of this file.
 */
#include "postgres.h"

#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "port/pg_bitutils.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "webhook_inbox.h"

PG_FUNCTION_INFO_V1(wi_claim);
PG_FUNCTION_INFO_V1(wi_local_take);

#define CLAIM_COLUMNS 9

/*
 * Where this backend's candidate scan starts.  Rows that left the claimable
 * states leave dead entries at the low end of the claim index, and while a
 * long transaction holds the xmin back they cannot be cleaned: a scan from
 * the start would walk all of them on every claim.  So within a second of a
 * full scan, scans start at the first claimable id that scan found.  Rows
 * below it that become claimable later (a slow intake committing, a retry
 * coming due, an expired claim) are found by the next full scan, at most a
 * second later.  Only the background worker's calls (_claim_worker(), and
 * _local_take() with scan_floor) use this; a claim() from SQL always
 * scans in full, so its callers see every claimable row at once.
 */
#define SCAN_FLOOR_TTL_MS	1000

typedef struct ScanFloor
{
	int64		id;				/* scans start after it */
	TimestampTz at;				/* when a full scan last set it */
} ScanFloor;

static ScanFloor claim_floor;	/* claim()'s scan */
static ScanFloor local_floor;	/* _local_take()'s scan */

/* This release's statements (prepare_claim_plans()). */
static SPIPlanPtr candidates_plan = NULL;
static SPIPlanPtr candidates_nolocal_plan = NULL;
static SPIPlanPtr local_plan = NULL;
static SPIPlanPtr lease_plan = NULL;
static SPIPlanPtr mark_plan = NULL;

/* What every release's schema runs with the same SQL. */
static SPIPlanPtr unlease_plan = NULL;

typedef struct Candidate
{
	int32		source_id;
	char	   *source;
	char	   *tenant;
	char	   *object_type;
	char	   *object_id;
	/* with scan_candidates()' events (_local_take()'s): the object's rows the scan read */
	int64	   *ids;
	int			nids;
	int			capids;
	bool		occurrences;	/* all of them occurrence events */
} Candidate;

/* claim()'s arguments, read and checked by read_claim() */
typedef struct ClaimArgs
{
	char	   *worker;
	int32		max_objects;
	Interval   *lease;
	Interval   *fetch_delay;
} ClaimArgs;

static void
prepare_claim_plans(void)
{
	if (candidates_plan != NULL)
		return;
	{
		Oid			t[3] = {INT4OID, INT8OID, INTERVALOID};

		/*
		 * Due events of objects that have no live claim, oldest first, read
		 * page by page (keyset on id) because one object may have many.  No
		 * row locks here: the advisory lock and the lease decide, and the
		 * marking step skips rows locked by others.
		 */
#define CANDIDATES(EXTRA) \
			"SELECT i.source_id, s.name, i.object_type, i.object_id, i.id, i.tenant " \
			"FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id " \
			"WHERE i.status IN ('pending', 'retry', 'processing') " \
			"AND (i.status = 'processing' OR i.next_attempt_at <= now()) " EXTRA \
			"AND (i.strategy <> 'fetch' OR i.status <> 'pending' OR i.received_at <= now() - 10 * $3 " \
			"  OR NOT EXISTS (SELECT 1 FROM webhook_inbox.inbox j " \
			"    WHERE j.source_id = i.source_id AND j.tenant = i.tenant AND j.object_type = i.object_type " \
			"    AND j.object_id = i.object_id AND j.status = 'pending' AND j.received_at > now() - $3 " \
			"    OFFSET 0)) " /* a probe of the object's live events, never a hashed scan of the inbox */ \
			"AND NOT EXISTS (SELECT 1 FROM webhook_inbox.object_leases l " \
			"  WHERE l.source_id = i.source_id AND l.tenant = i.tenant AND l.object_type = i.object_type " \
			"  AND l.object_id = i.object_id AND l.expires_at > now()) " \
			"AND i.id > $2 ORDER BY i.id LIMIT $1"

		candidates_plan = wi_keep_plan(CANDIDATES(""), 3, t);
		/*
		 * The worker's: pending events of the local strategies are
		 * _work_local()'s.  The clause is inbox_remote_claim_idx's predicate
		 * word for word, so that the planner proves the index applies: the
		 * scan reads only what it may return, not the local backlog (a
		 * walk of 100,000 pending occurrence events took 40 ms a round).
		 */
		candidates_nolocal_plan = wi_keep_plan(CANDIDATES("AND (i.status IN ('retry', 'processing') "
														  "OR (i.status = 'pending' AND i.strategy = 'fetch')) "),
											   3, t);
	}
	{
		Oid			t[3] = {INT4OID, INT8OID, INTERVALOID};

		/*
		 * _work_local()'s candidates: due pending events that need no
		 * provider request, oldest first, through the same claim index
		 * ($3 is unused: the same scan loop runs both), each with its
		 * strategy: the scan hands each object's events on with it.
		 */
		local_plan = wi_keep_plan(
			"SELECT i.source_id, NULL::text, i.object_type, i.object_id, i.id, i.tenant, "
			"i.strategy = 'occurrence' "
			"FROM webhook_inbox.inbox i "
			"WHERE i.status IN ('pending', 'retry', 'processing') AND i.status = 'pending' "
			"AND i.strategy IN ('occurrence', 'version', 'machine', 'unordered', 'ignore') "
			"AND i.next_attempt_at <= now() AND $3 IS NOT NULL "
			"AND i.id > $2 ORDER BY i.id LIMIT $1", 3, t);
	}
	{
		Oid			t[7] = {INT4ARRAYOID, TEXTARRAYOID, TEXTARRAYOID, INT4OID, TEXTOID, INTERVALOID,
		TEXTARRAYOID};

		/*
		 * Leases for the candidates, in one statement: an object is taken if
		 * no live claim holds it and this transaction gets its advisory lock
		 * (another claimer on it right now makes us skip it, never wait).
		 * The lease lookup is a correlated subquery so that it is an index
		 * probe per candidate, never a scan of a table full of dead leases.
		 */
		lease_plan = wi_keep_plan(
			"WITH c AS (SELECT * FROM unnest($1, $7, $2, $3) WITH ORDINALITY "
			"    AS c(source_id, tenant, object_type, object_id, ord)), "
			"free AS (SELECT c.* FROM c "
			"  WHERE coalesce((SELECT l.expires_at > now() FROM webhook_inbox.object_leases l "
			"    WHERE l.source_id = c.source_id AND l.tenant = c.tenant AND l.object_type = c.object_type "
			"    AND l.object_id = c.object_id), false) = false "
			"  AND pg_catalog.pg_try_advisory_xact_lock(pg_catalog.hashtextextended("
			"    'webhook_inbox/' || c.source_id || '/' || c.tenant || '/' || c.object_type || '/' || c.object_id, 0)) "
			"  LIMIT $4), "
			"ins AS (INSERT INTO webhook_inbox.object_leases AS l "
			"  (source_id, tenant, object_type, object_id, token, holder, expires_at) "
			"  SELECT source_id, tenant, object_type, object_id, nextval('webhook_inbox.claim_token_seq'), $5, "
			"    now() + $6 FROM free ORDER BY ord "
			"  ON CONFLICT (source_id, tenant, object_type, object_id) DO UPDATE "
			"  SET token = EXCLUDED.token, holder = EXCLUDED.holder, claimed_at = now(), "
			"  expires_at = EXCLUDED.expires_at WHERE l.expires_at <= now() "
			"  RETURNING l.source_id, l.tenant, l.object_type, l.object_id, l.token, l.expires_at) "
			"SELECT ins.token, ins.expires_at, c.ord FROM ins "
			"  JOIN c USING (source_id, tenant, object_type, object_id) ORDER BY ins.token", 7, t);
	}
	{
		Oid			t[5] = {INT8ARRAYOID, INT4ARRAYOID, TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID};

		/*
		 * Every due event of the leased objects joins its object's claim,
		 * including those of an expired claim (processing under an older
		 * token).  Rows locked by another claimer are skipped, never waited
		 * for, so claimers cannot deadlock.  LATERAL keeps it an index probe
		 * per object.
		 */
		mark_plan = wi_keep_plan(
			"WITH l AS (SELECT * FROM unnest($1, $2, $5, $3, $4) AS l(token, source_id, tenant, object_type, object_id)), "
			"e AS (SELECT x.id, l.token FROM l, LATERAL (SELECT i.id FROM webhook_inbox.inbox i "
			"  WHERE i.source_id = l.source_id AND i.tenant = l.tenant AND i.object_type = l.object_type "
			"  AND i.object_id = l.object_id "
			"  AND i.status IN ('pending', 'retry', 'processing') "
			"  AND (i.status = 'processing' OR i.next_attempt_at <= now()) "
			"  FOR UPDATE SKIP LOCKED) x), "
			"u AS (UPDATE webhook_inbox.inbox i SET status = 'processing', claim_token = e.token, "
			"  updated_at = now() FROM e WHERE i.id = e.id RETURNING i.claim_token, i.id, i.strategy) "
			"SELECT claim_token, id, strategy FROM u ORDER BY claim_token, id", 5, t);
	}
}

/* The statements of every release's schema; inside SPI. */
static void
prepare_shared_plans(void)
{
	Oid			t[1] = {INT8ARRAYOID};

	if (unlease_plan != NULL)
		return;
	unlease_plan = wi_keep_plan("DELETE FROM webhook_inbox.object_leases WHERE token = ANY ($1)", 1, t);
}

/*
 * Candidates: up to scan->want distinct objects in order of their oldest
 * due event, by plan (a statement of WiClaimPlans.candidates' form), from
 * inbox id after on, read scan->page rows at a time (an object may have
 * many) until there are enough, the due events run out or scan->limit rows
 * were read.  *first_id is the first row's inbox id, 0 if none.  With
 * events (a plan whose column 7 says an occurrence event, _local_take()'s),
 * each candidate also gets the ids of its rows the scan read, and whether
 * all of them are occurrence events.  Inside SPI; the candidates are
 * allocated in the caller's SPI context.
 */
static int
scan_candidates(SPIPlanPtr plan, int64 after, const WiClaimScan *scan, Interval *fetch_delay,
				bool events, Candidate **out, int64 *first_id)
{
	int			want = scan->want;
	int			page = scan->page;
	int			scanned = 0;
	int			ncands = 0;
	Candidate  *cands = palloc(sizeof(Candidate) * (want + 1));
	/* the candidates by hash, at most half full, to skip an object seen before */
	uint32		nslots = pg_nextpower2_32(Max(want, 8) * 2);
	uint32		mask = nslots - 1;
	struct
	{
		uint64		hash;
		int			cand;		/* 1 + its index in cands; 0: free */
	}		   *slots = palloc0(sizeof(*slots) * nslots);

	*first_id = 0;
	while (ncands < want && scanned < scan->limit)
	{
		Datum		a[3] = {Int32GetDatum(page), Int64GetDatum(after), IntervalPGetDatum(fetch_delay)};
		uint64		got;
		int			rc = SPI_execute_plan(plan, a, NULL, true, 0);

		if (rc != SPI_OK_SELECT)
			elog(ERROR, "webhook_inbox: reading claim candidates failed: %s",
				 SPI_result_code_string(rc));
		got = SPI_processed;
		scanned += got;
		for (uint64 r = 0; r < got && ncands < want; r++)
		{
			HeapTuple	tup = SPI_tuptable->vals[r];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		isnull;
			Candidate	c = {0};
			int			seen = -1;	/* the candidate's index, when seen before */

			uint64		h;
			uint32		slot;

			c.source_id = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
			c.object_type = SPI_getvalue(tup, desc, 3);
			c.object_id = SPI_getvalue(tup, desc, 4);
			c.tenant = SPI_getvalue(tup, desc, 6);
			after = DatumGetInt64(SPI_getbinval(tup, desc, 5, &isnull));
			if (*first_id == 0)
				*first_id = after;
			/* seen already?  Open addressing on the object's hash */
			h = hash_bytes_extended((const unsigned char *) c.object_id, strlen(c.object_id),
									hash_bytes_extended((const unsigned char *) c.object_type,
														strlen(c.object_type),
														hash_bytes_extended((const unsigned char *) c.tenant,
																			strlen(c.tenant),
																			(uint64) c.source_id)));
			for (slot = (uint32) h & mask; slots[slot].cand > 0 && seen < 0; slot = (slot + 1) & mask)
			{
				Candidate  *o = &cands[slots[slot].cand - 1];

				if (slots[slot].hash == h && o->source_id == c.source_id &&
					strcmp(o->tenant, c.tenant) == 0 &&
					strcmp(o->object_type, c.object_type) == 0 && strcmp(o->object_id, c.object_id) == 0)
					seen = slots[slot].cand - 1;
			}
			if (seen < 0)
			{
				c.source = SPI_getvalue(tup, desc, 2);
				cands[ncands++] = c;
				slots[slot].hash = h;
				slots[slot].cand = ncands;
				seen = ncands - 1;
			}
			if (events)
			{
				Candidate  *o = &cands[seen];
				bool		occ = DatumGetBool(SPI_getbinval(tup, desc, 7, &isnull)) && !isnull;

				if (o->nids == o->capids)
				{
					o->capids = o->capids ? o->capids * 2 : 4;
					o->ids = o->ids ? repalloc(o->ids, sizeof(int64) * o->capids)
						: palloc(sizeof(int64) * o->capids);
				}
				o->occurrences = (o->nids == 0 || o->occurrences) && occ;
				o->ids[o->nids++] = after;
			}
		}
		SPI_freetuptable(SPI_tuptable);
		if (got < (uint64) page)
			break;
	}
	*out = cands;
	return ncands;
}

/*
 * This release's scans: up to want candidates, read a page of want rows at
 * a time until 32 rows per object asked for were read (every row read costs
 * its probes of the object's events and lease, so a page is no larger than
 * what is wanted).  With use_floor the scan starts at floor, unless a full
 * scan is due; every full scan sets the floor, every other one raises it.
 */
static int
scan_from_floor(SPIPlanPtr plan, ScanFloor *floor, bool use_floor, int max_objects, int want,
				Interval *fetch_delay, bool events, Candidate **out)
{
	TimestampTz now = GetCurrentTimestamp();
	bool		full = !use_floor ||
		TimestampDifferenceExceeds(floor->at, now, SCAN_FLOOR_TTL_MS);
	WiClaimScan scan = {.want = want, .page = want, .limit = max_objects * 32};
	int64		first_id;
	int			ncands;

	ncands = scan_candidates(plan, full ? 0 : floor->id, &scan, fetch_delay, events, out, &first_id);
	if (full)
	{
		floor->id = first_id > 0 ? first_id - 1 : 0;
		floor->at = now;
	}
	else if (first_id > 0)
		floor->id = Max(floor->id, first_id - 1);
	return ncands;
}

/* Which strategy the claim runs: a fetch covers everything else. */
static const char *
claim_strategy(char **strategies, int n)
{
	for (int i = 0; i < n; i++)
		if (strategies[i] && strcmp(strategies[i], "fetch") == 0)
			return "fetch";
	return n > 0 && strategies[n - 1] ? strategies[n - 1] : "ignore";
}

/*
 * Who claims, and so how: claim() from SQL scans in full and takes every
 * due event; the background worker's _claim_worker() scans from its floor,
 * and after its fast path (_work_local()) leaves the pending events of the
 * local strategies to it.
 */
typedef enum ClaimMode
{
	CLAIM_SQL,
	CLAIM_WORKER,
	CLAIM_WORKER_AFTER_LOCAL
} ClaimMode;

static Datum claim_objects(FunctionCallInfo fcinfo, ClaimMode mode);

PG_FUNCTION_INFO_V1(wi_claim_worker);

/*
 * claim(worker text, max_objects int, lease interval, fetch_delay interval)
 *	 returns table (claim_token, source, source_id, object_type, object_id,
 *					event_ids, strategy, expires_at, tenant)
 */
Datum
wi_claim(PG_FUNCTION_ARGS)
{
	return claim_objects(fcinfo, CLAIM_SQL);
}

/*
 * _claim_worker(worker text, max_objects int, lease interval, after_local bool)
 *	 returns the same table as claim(), for the background worker: its scan
 *	 starts at its floor, and after_local leaves the pending events of the
 *	 local strategies to _work_local(); fetch_delay is the setting's.
 */
Datum
wi_claim_worker(PG_FUNCTION_ARGS)
{
	bool		after_local = !PG_ARGISNULL(3) && PG_GETARG_BOOL(3);

	return claim_objects(fcinfo, after_local ? CLAIM_WORKER_AFTER_LOCAL : CLAIM_WORKER);
}

/*
 * Read claim()'s arguments 0-2 (worker, max_objects, lease) into a, and
 * its fetch_delay: fetch_delay if given, else the setting's.  Raises for
 * the missing or invalid ones.  Outside SPI.
 */
static void
read_claim(FunctionCallInfo fcinfo, Interval *fetch_delay, ClaimArgs *a)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("worker, max_objects and lease must not be null")));
	a->worker = text_to_cstring(PG_GETARG_TEXT_PP(0));
	a->max_objects = PG_GETARG_INT32(1);
	a->lease = PG_GETARG_INTERVAL_P(2);
	if (fetch_delay != NULL)
		a->fetch_delay = fetch_delay;
	else
	{
		a->fetch_delay = palloc0(sizeof(Interval));
		a->fetch_delay->time = (int64) wi_fetch_delay_ms * 1000;
	}
	if (a->fetch_delay->month != 0 || a->fetch_delay->day != 0 || a->fetch_delay->time < 0 ||
		a->fetch_delay->time > (int64) 600 * USECS_PER_SEC)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("fetch_delay must be between 0 and 10 minutes")));
	if (a->worker[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("worker name must not be empty"),
				 errhint("Name the worker so that object_leases shows who holds a claim.")));
	if (a->max_objects < 1 || a->max_objects > 10000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_objects must be between 1 and 10000"),
				 errdetail("The value given was %d.", a->max_objects)));
	if (a->lease->month != 0 || a->lease->day < 0 || a->lease->time < 0 ||
		(a->lease->day == 0 && a->lease->time < USECS_PER_SEC / 10) ||
		a->lease->day > 1 || (a->lease->day == 1 && a->lease->time > 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease must be between 100 milliseconds and 1 day")));
}

/*
 * Lease up to a->max_objects of the candidates, mark their due events
 * under one release's statements, give back the leases whose events were
 * all taken meanwhile, and put a row per claim into rsinfo's tuplestore.
 * Inside SPI; returns the number of claims.
 *
 * The tenants go to the statements as their last parameter and into the
 * row as its last column: a release whose schema has none (0.1.0) declares
 * no such parameter, and its claim() returns no such column (the row is
 * formed of the columns rsinfo->setDesc has).
 */
static int
take_claims(const WiClaimPlans *plans, const ClaimArgs *a, Candidate *cands, int ncands,
			ReturnSetInfo *rsinfo)
{
	char	   *worker = a->worker;
	int32		max_objects = a->max_objects;
	Interval   *lease = a->lease;
	int			claimed = 0;
	int			rc;

	if (ncands > 0)
	{
		Datum	   *sids = palloc(sizeof(Datum) * ncands);
		Datum	   *types = palloc(sizeof(Datum) * ncands);
		Datum	   *oids = palloc(sizeof(Datum) * ncands);
		Datum	   *tens = palloc(sizeof(Datum) * ncands);
		Datum		la[7];
		int			nleases;
		int64	   *ltoken;
		Datum	   *lexpires;
		int		   *lcand;
		int		   *lcount;
		int64	  **lids;
		char	 ***lstrat;
		int64	   *unleased;
		int			nunleased = 0;
		bool		isnull;

		for (int k = 0; k < ncands; k++)
		{
			sids[k] = Int32GetDatum(cands[k].source_id);
			types[k] = CStringGetTextDatum(cands[k].object_type);
			oids[k] = CStringGetTextDatum(cands[k].object_id);
			tens[k] = CStringGetTextDatum(cands[k].tenant);
		}
		la[0] = PointerGetDatum(construct_array(sids, ncands, INT4OID, 4, true, TYPALIGN_INT));
		la[1] = PointerGetDatum(construct_array(types, ncands, TEXTOID, -1, false, TYPALIGN_INT));
		la[2] = PointerGetDatum(construct_array(oids, ncands, TEXTOID, -1, false, TYPALIGN_INT));
		la[3] = Int32GetDatum(max_objects);
		la[4] = CStringGetTextDatum(worker);
		la[5] = IntervalPGetDatum(lease);
		la[6] = PointerGetDatum(construct_array(tens, ncands, TEXTOID, -1, false, TYPALIGN_INT));
		Assert(SPI_getargcount(plans->lease) <= lengthof(la));
		rc = SPI_execute_plan(plans->lease, la, NULL, false, 0);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "webhook_inbox: taking leases failed: %s", SPI_result_code_string(rc));
		nleases = (int) SPI_processed;
		ltoken = palloc(sizeof(int64) * (nleases + 1));
		lexpires = palloc(sizeof(Datum) * (nleases + 1));
		lcand = palloc(sizeof(int) * (nleases + 1));
		lcount = palloc0(sizeof(int) * (nleases + 1));
		lids = palloc0(sizeof(int64 *) * (nleases + 1));
		lstrat = palloc0(sizeof(char **) * (nleases + 1));
		for (int r = 0; r < nleases; r++)
		{
			HeapTuple	tup = SPI_tuptable->vals[r];
			TupleDesc	desc = SPI_tuptable->tupdesc;

			ltoken[r] = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
			lexpires[r] = SPI_getbinval(tup, desc, 2, &isnull);
			lcand[r] = (int) DatumGetInt64(SPI_getbinval(tup, desc, 3, &isnull)) - 1;
		}

		if (nleases > 0)
		{
			Datum	   *tk = palloc(sizeof(Datum) * nleases);
			Datum	   *ls = palloc(sizeof(Datum) * nleases);
			Datum	   *lt = palloc(sizeof(Datum) * nleases);
			Datum	   *lo = palloc(sizeof(Datum) * nleases);
			Datum	   *ln = palloc(sizeof(Datum) * nleases);
			Datum		ma[5];
			int			r = 0;

			for (int k = 0; k < nleases; k++)
			{
				tk[k] = Int64GetDatum(ltoken[k]);
				ls[k] = sids[lcand[k]];
				lt[k] = types[lcand[k]];
				lo[k] = oids[lcand[k]];
				ln[k] = tens[lcand[k]];
			}
			ma[0] = PointerGetDatum(construct_array(tk, nleases, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
			ma[1] = PointerGetDatum(construct_array(ls, nleases, INT4OID, 4, true, TYPALIGN_INT));
			ma[2] = PointerGetDatum(construct_array(lt, nleases, TEXTOID, -1, false, TYPALIGN_INT));
			ma[3] = PointerGetDatum(construct_array(lo, nleases, TEXTOID, -1, false, TYPALIGN_INT));
			ma[4] = PointerGetDatum(construct_array(ln, nleases, TEXTOID, -1, false, TYPALIGN_INT));
			Assert(SPI_getargcount(plans->mark) <= lengthof(ma));
			rc = SPI_execute_plan(plans->mark, ma, NULL, false, 0);
			if (rc != SPI_OK_SELECT)
				elog(ERROR, "webhook_inbox: marking claimed events failed: %s",
					 SPI_result_code_string(rc));

			/* both lists are ordered by token: walk them together */
			for (int k = 0; k < nleases; k++)
			{
				int			start = r;

				while (r < (int) SPI_processed &&
					   DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1,
												   &isnull)) == ltoken[k])
					r++;
				lcount[k] = r - start;
				lids[k] = palloc(sizeof(int64) * (lcount[k] + 1));
				lstrat[k] = palloc(sizeof(char *) * (lcount[k] + 1));
				for (int e = 0; e < lcount[k]; e++)
				{
					HeapTuple	tup = SPI_tuptable->vals[start + e];

					lids[k][e] = DatumGetInt64(SPI_getbinval(tup, SPI_tuptable->tupdesc, 2, &isnull));
					lstrat[k][e] = SPI_getvalue(tup, SPI_tuptable->tupdesc, 3);
				}
			}
		}

		unleased = palloc(sizeof(int64) * (nleases + 1));
		for (int k = 0; k < nleases; k++)
		{
			Candidate  *c = &cands[lcand[k]];
			Datum	   *id_datums;
			Datum		values[CLAIM_COLUMNS];
			bool		nulls[CLAIM_COLUMNS] = {0};

			if (lcount[k] == 0)
			{
				/* everything was taken meanwhile: the lease goes back */
				unleased[nunleased++] = ltoken[k];
				continue;
			}
			id_datums = palloc(sizeof(Datum) * lcount[k]);
			for (int e = 0; e < lcount[k]; e++)
				id_datums[e] = Int64GetDatum(lids[k][e]);
			values[0] = Int64GetDatum(ltoken[k]);
			values[1] = CStringGetTextDatum(c->source);
			values[2] = Int32GetDatum(c->source_id);
			values[3] = CStringGetTextDatum(c->object_type);
			values[4] = CStringGetTextDatum(c->object_id);
			values[5] = PointerGetDatum(construct_array(id_datums, lcount[k], INT8OID, 8,
														FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
			values[6] = CStringGetTextDatum(claim_strategy(lstrat[k], lcount[k]));
			values[7] = lexpires[k];
			values[8] = CStringGetTextDatum(c->tenant);
			Assert(rsinfo->setDesc->natts <= CLAIM_COLUMNS);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
			claimed++;
		}
		if (nunleased > 0)
		{
			Datum	   *ud = palloc(sizeof(Datum) * nunleased);
			Datum		ua[1];

			for (int k = 0; k < nunleased; k++)
				ud[k] = Int64GetDatum(unleased[k]);
			ua[0] = PointerGetDatum(construct_array(ud, nunleased, INT8OID, 8, FLOAT8PASSBYVAL,
													TYPALIGN_DOUBLE));
			rc = SPI_execute_plan(unlease_plan, ua, NULL, false, 0);
			if (rc != SPI_OK_DELETE)
				elog(ERROR, "webhook_inbox: giving leases back failed: %s", SPI_result_code_string(rc));
		}
	}

	return claimed;
}

/*
 * Both entry points: arguments 0-2 are worker, max_objects and lease;
 * claim()'s argument 3 is its fetch_delay.  A database still at 0.1.0 is
 * claimed from by the same steps with that release's statements and scan
 * (compat_0_1_0_claim.c), in full: no background worker runs on it, and
 * its claim() is the only entry point its schema binds here.
 */
static Datum
claim_objects(FunctionCallInfo fcinfo, ClaimMode mode)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		at_0_1_0 = wi_schema() == WI_SCHEMA_0_1_0;
	ClaimArgs	a;
	WiClaimPlans plans;
	Candidate  *cands;
	int			ncands;

	read_claim(fcinfo, mode == CLAIM_SQL && PG_NARGS() > 3 && !PG_ARGISNULL(3) ?
			   PG_GETARG_INTERVAL_P(3) : NULL, &a);

	InitMaterializedSRF(fcinfo, 0);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "webhook_inbox: SPI_connect failed");
	prepare_shared_plans();
	if (at_0_1_0)
	{
		/* a database still at 0.1.0: that release's statements and scan */
		WiClaimScan scan;
		int64		first_id;

		plans = *wi_compat_0_1_0_claim_plans(a.max_objects, &scan);
		ncands = scan_candidates(plans.candidates, 0, &scan, a.fetch_delay, false, &cands, &first_id);
	}
	else
	{
		prepare_claim_plans();
		plans.candidates = mode == CLAIM_WORKER_AFTER_LOCAL ? candidates_nolocal_plan : candidates_plan;
		plans.lease = lease_plan;
		plans.mark = mark_plan;

		/*
		 * A quarter more candidates than objects asked for: some may be
		 * taken by concurrent claimers meanwhile (the lease step takes
		 * max_objects of the free ones).
		 */
		ncands = scan_from_floor(plans.candidates, &claim_floor, mode != CLAIM_SQL, a.max_objects,
								 a.max_objects + a.max_objects / 4 + 1, a.fetch_delay, false, &cands);
	}
	take_claims(&plans, &a, cands, ncands, rsinfo);

	SPI_finish();
	return (Datum) 0;
}

/*
 * _local_take(max_objects int, scan_floor bool)
 *	 returns table (ord int, first bool, source_id int, tenant text,
 *					object_type text, object_id text, id bigint, occurrences bool)
 *
 * _work_local()'s objects: of the candidates (in order of their oldest due
 * pending event of a local strategy, up to twice max_objects, since some
 * will be held by claims), up to max_objects whose advisory lock this
 * transaction gets (the one claim() takes, never waited for), numbered
 * (ord, from 1).  An object whose events the scan read are all occurrence
 * events (occurrences) comes with one row per such event, first on the
 * first; any other with one row, its oldest event's, as its caller looks
 * up all of its events under the lock.  The scan read them as pending and
 * due; the caller reads each again under the lock (_round_events(), status
 * pending), so one taken meanwhile is left out.  With scan_floor (the
 * background worker's) the scan starts at its floor, as _claim_worker()'s
 * does.
 */
Datum
wi_local_take(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int32		max_objects = PG_ARGISNULL(0) ? 0 : PG_GETARG_INT32(0);
	bool		scan_floor = PG_NARGS() > 1 && !PG_ARGISNULL(1) && PG_GETARG_BOOL(1);
	Interval   *unused = palloc0(sizeof(Interval));
	Candidate  *cands;
	int			ncands;
	int			taken = 0;
	StringInfoData key;

	if (max_objects < 1 || max_objects > 10000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_objects must be between 1 and 10000")));
	InitMaterializedSRF(fcinfo, 0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "webhook_inbox: SPI_connect failed");
	prepare_claim_plans();
	ncands = scan_from_floor(local_plan, &local_floor, scan_floor, max_objects, max_objects * 2, unused,
							 true, &cands);
	initStringInfo(&key);
	for (int k = 0; k < ncands && taken < max_objects; k++)
	{
		Candidate  *c = &cands[k];
		Datum		hash;
		Datum		values[8];
		bool		nulls[8] = {0};

		/*
		 * The object's lock: the key claim()'s lease statement and
		 * _sweep_lease() compute in SQL, hashed the same way
		 * (hashtextextended() under the database's collation).
		 */
		resetStringInfo(&key);
		appendStringInfo(&key, "webhook_inbox/%d/%s/%s/%s", c->source_id, c->tenant, c->object_type,
						 c->object_id);
		hash = DirectFunctionCall2Coll(hashtextextended, DEFAULT_COLLATION_OID,
									   PointerGetDatum(cstring_to_text_with_len(key.data, key.len)),
									   Int64GetDatum(0));
		if (!DatumGetBool(DirectFunctionCall1(pg_try_advisory_xact_lock_int8, hash)))
			continue;
		taken++;
		values[0] = Int32GetDatum(taken);
		values[2] = Int32GetDatum(c->source_id);
		values[3] = CStringGetTextDatum(c->tenant);
		values[4] = CStringGetTextDatum(c->object_type);
		values[5] = CStringGetTextDatum(c->object_id);
		values[7] = BoolGetDatum(c->occurrences);
		/* another object's events are found again under the lock: its first row names it */
		for (int e = 0; e < (c->occurrences ? c->nids : 1); e++)
		{
			values[1] = BoolGetDatum(e == 0);
			values[6] = Int64GetDatum(c->ids[e]);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	SPI_finish();
	return (Datum) 0;
}
