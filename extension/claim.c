/*
 * claim.c
 *		webhook_inbox.claim(worker, max_objects, lease): hand out work by object.
 *
 * A claim covers one object and every event of it that is due, so that a
 * burst of fifty events for one subscription costs one fetch.  At most one
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
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "webhook_inbox.h"

PG_FUNCTION_INFO_V1(wi_claim);

#define CLAIM_COLUMNS 8

/*
 * Where this backend's candidate scan starts.  Rows that left the claimable
 * states leave dead entries at the low end of the claim index, and while a
 * long transaction holds the xmin back they cannot be cleaned: a scan from
 * the start would walk all of them on every claim.  So within a second of a
 * full scan, scans start at the first claimable id that scan found.  Rows
 * below it that become claimable later (a slow intake committing, a retry
 * coming due, an expired claim) are found by the next full scan, at most a
 * second later.  Only the background worker uses this; a claim() from SQL
 * always scans in full, so its callers see every claimable row at once.
 */
#define SCAN_FLOOR_TTL_MS	1000
bool		wi_claim_scan_floor = false;	/* only the background worker sets it */
static int64 scan_floor = 0;
static TimestampTz scan_floor_at = 0;

static SPIPlanPtr candidates_plan = NULL;
static SPIPlanPtr lock_plan = NULL;
static SPIPlanPtr lease_plan = NULL;
static SPIPlanPtr mark_plan = NULL;
static SPIPlanPtr unlease_plan = NULL;

typedef struct Candidate
{
	int32		source_id;
	char	   *source;
	char	   *object_type;
	char	   *object_id;
} Candidate;

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
		candidates_plan = wi_keep_plan(
			"SELECT i.source_id, s.name, i.object_type, i.object_id, i.id "
			"FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id "
			"WHERE i.status IN ('pending', 'retry', 'processing') "
			"AND (i.status = 'processing' OR i.next_attempt_at <= now()) "
			"AND (i.strategy <> 'fetch' OR i.status <> 'pending' OR i.received_at <= now() - 10 * $3 "
			"  OR NOT EXISTS (SELECT 1 FROM webhook_inbox.inbox j "
			"    WHERE j.source_id = i.source_id AND j.object_type = i.object_type "
			"    AND j.object_id = i.object_id AND j.status = 'pending' AND j.received_at > now() - $3)) "
			"AND NOT EXISTS (SELECT 1 FROM webhook_inbox.object_leases l "
			"  WHERE l.source_id = i.source_id AND l.object_type = i.object_type "
			"  AND l.object_id = i.object_id AND l.expires_at > now()) "
			"AND i.id > $2 ORDER BY i.id LIMIT $1", 3, t);
	}
	{
		Oid			t[3] = {INT4OID, TEXTOID, TEXTOID};

		lock_plan = wi_keep_plan(
			"SELECT pg_catalog.pg_try_advisory_xact_lock(pg_catalog.hashtextextended("
			"'webhook_inbox/' || $1 || '/' || $2 || '/' || $3, 0))", 3, t);
	}
	{
		Oid			t[5] = {INT4OID, TEXTOID, TEXTOID, TEXTOID, INTERVALOID};

		/* a new token, unless someone else's claim is still live */
		lease_plan = wi_keep_plan(
			"INSERT INTO webhook_inbox.object_leases AS l "
			"(source_id, object_type, object_id, token, holder, expires_at) "
			"VALUES ($1, $2, $3, nextval('webhook_inbox.claim_token_seq'), $4, now() + $5) "
			"ON CONFLICT (source_id, object_type, object_id) DO UPDATE "
			"SET token = EXCLUDED.token, holder = EXCLUDED.holder, claimed_at = now(), "
			"expires_at = EXCLUDED.expires_at WHERE l.expires_at <= now() "
			"RETURNING l.token, l.expires_at", 5, t);
	}
	{
		Oid			t[4] = {INT4OID, TEXTOID, TEXTOID, INT8OID};

		/*
		 * Every due event of the object joins the claim, including those of an
		 * expired claim (status processing under an older token).
		 */
		mark_plan = wi_keep_plan(
			"WITH e AS (SELECT id FROM webhook_inbox.inbox "
			"  WHERE source_id = $1 AND object_type = $2 AND object_id = $3 "
			"  AND status IN ('pending', 'retry', 'processing') "
			"  AND (status = 'processing' OR next_attempt_at <= now()) "
			"  FOR UPDATE SKIP LOCKED) "
			"UPDATE webhook_inbox.inbox i SET status = 'processing', claim_token = $4, "
			"updated_at = now() FROM e WHERE i.id = e.id "
			"RETURNING i.id, i.strategy", 4, t);
	}
	{
		Oid			t[1] = {INT8OID};

		unlease_plan = wi_keep_plan("DELETE FROM webhook_inbox.object_leases WHERE token = $1", 1, t);
	}
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

static int
cmp_int64(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return (x > y) - (x < y);
}

/*
 * claim(worker text, max_objects int, lease interval)
 *	 returns table (claim_token, source, source_id, object_type, object_id,
 *					event_ids, strategy, expires_at)
 */
Datum
wi_claim(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *worker;
	int32		max_objects;
	Interval   *lease;
	Interval   *fetch_delay;
	Candidate  *cands;
	int			ncands = 0;
	int			claimed = 0;
	int			rc;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("worker, max_objects and lease must not be null")));
	worker = text_to_cstring(PG_GETARG_TEXT_PP(0));
	max_objects = PG_GETARG_INT32(1);
	lease = PG_GETARG_INTERVAL_P(2);
	if (PG_NARGS() > 3 && !PG_ARGISNULL(3))
		fetch_delay = PG_GETARG_INTERVAL_P(3);
	else
	{
		fetch_delay = palloc0(sizeof(Interval));
		fetch_delay->time = (int64) wi_fetch_delay_ms * 1000;
	}
	if (fetch_delay->month != 0 || fetch_delay->day != 0 || fetch_delay->time < 0 ||
		fetch_delay->time > (int64) 600 * USECS_PER_SEC)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("fetch_delay must be between 0 and 10 minutes")));
	if (worker[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("worker name must not be empty"),
				 errhint("Name the worker so that object_leases shows who holds a claim.")));
	if (max_objects < 1 || max_objects > 10000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_objects must be between 1 and 10000"),
				 errdetail("The value given was %d.", max_objects)));
	if (lease->month != 0 || lease->day < 0 || lease->time < 0 ||
		(lease->day == 0 && lease->time < USECS_PER_SEC / 10) ||
		lease->day > 1 || (lease->day == 1 && lease->time > 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease must be between 100 milliseconds and 1 day")));

	InitMaterializedSRF(fcinfo, 0);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "webhook_inbox: SPI_connect failed");
	prepare_claim_plans();

	/*
	 * Candidates: distinct objects in order of their oldest due event.  Read
	 * pages until there are twice as many objects as asked for (some will be
	 * taken by concurrent claimers) or the due events run out.
	 */
	{
		int			page = Max(max_objects * 4, 100);
		int			want = max_objects * 2;
		int			cap = 8;
		TimestampTz now = GetCurrentTimestamp();
		bool		full = !wi_claim_scan_floor ||
			TimestampDifferenceExceeds(scan_floor_at, now, SCAN_FLOOR_TTL_MS);
		int64		after = full ? 0 : scan_floor;
		int64		first_id = 0;
		int			scanned = 0;

		cands = palloc(sizeof(Candidate) * (want + 1));
		while (ncands < want && scanned < page * cap)
		{
			Datum		a[3] = {Int32GetDatum(page), Int64GetDatum(after), IntervalPGetDatum(fetch_delay)};
			uint64		got;

			rc = SPI_execute_plan(candidates_plan, a, NULL, true, 0);
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
				Candidate	c;
				bool		seen = false;

				c.source_id = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
				c.object_type = SPI_getvalue(tup, desc, 3);
				c.object_id = SPI_getvalue(tup, desc, 4);
				after = DatumGetInt64(SPI_getbinval(tup, desc, 5, &isnull));
				if (first_id == 0)
					first_id = after;
				for (int k = 0; k < ncands && !seen; k++)
					seen = cands[k].source_id == c.source_id &&
						strcmp(cands[k].object_type, c.object_type) == 0 &&
						strcmp(cands[k].object_id, c.object_id) == 0;
				if (!seen)
				{
					c.source = SPI_getvalue(tup, desc, 2);
					cands[ncands++] = c;
				}
			}
			SPI_freetuptable(SPI_tuptable);
			if (got < (uint64) page)
				break;
		}
		if (full)
		{
			scan_floor = first_id > 0 ? first_id - 1 : 0;
			scan_floor_at = now;
		}
		else if (first_id > 0)
			scan_floor = Max(scan_floor, first_id - 1);
	}

	for (int k = 0; k < ncands && claimed < max_objects; k++)
	{
		Candidate  *c = &cands[k];
		Datum		key[3] = {Int32GetDatum(c->source_id), CStringGetTextDatum(c->object_type),
		CStringGetTextDatum(c->object_id)};
		Datum		la[5];
		bool		isnull;
		int64		token;
		Datum		expires;
		int			nevents;
		int64	   *ids;
		char	  **strategies;
		Datum	   *id_datums;
		Datum		values[CLAIM_COLUMNS];
		bool		nulls[CLAIM_COLUMNS] = {0};

		rc = SPI_execute_plan(lock_plan, key, NULL, false, 1);
		if (rc != SPI_OK_SELECT ||
			!DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
			continue;			/* another claimer is on this object right now */

		la[0] = key[0];
		la[1] = key[1];
		la[2] = key[2];
		la[3] = CStringGetTextDatum(worker);
		la[4] = IntervalPGetDatum(lease);
		rc = SPI_execute_plan(lease_plan, la, NULL, false, 1);
		if (rc != SPI_OK_INSERT_RETURNING)
			elog(ERROR, "webhook_inbox: taking a lease failed: %s", SPI_result_code_string(rc));
		if (SPI_processed == 0)
			continue;			/* a live claim exists */
		token = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		expires = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);

		{
			Datum		ma[4] = {key[0], key[1], key[2], Int64GetDatum(token)};

			rc = SPI_execute_plan(mark_plan, ma, NULL, false, 0);
			if (rc != SPI_OK_UPDATE_RETURNING)
				elog(ERROR, "webhook_inbox: marking claimed events failed: %s",
					 SPI_result_code_string(rc));
		}
		nevents = (int) SPI_processed;
		if (nevents == 0)
		{
			/* everything was taken meanwhile: give the lease back */
			Datum		ua[1] = {Int64GetDatum(token)};

			SPI_execute_plan(unlease_plan, ua, NULL, false, 0);
			continue;
		}
		ids = palloc(sizeof(int64) * nevents);
		strategies = palloc(sizeof(char *) * nevents);
		for (int e = 0; e < nevents; e++)
			ids[e] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[e], SPI_tuptable->tupdesc, 1,
												 &isnull));
		qsort(ids, nevents, sizeof(int64), cmp_int64);
		for (int e = 0; e < nevents; e++)
			strategies[e] = SPI_getvalue(SPI_tuptable->vals[e], SPI_tuptable->tupdesc, 2);
		id_datums = palloc(sizeof(Datum) * nevents);
		for (int e = 0; e < nevents; e++)
			id_datums[e] = Int64GetDatum(ids[e]);

		values[0] = Int64GetDatum(token);
		values[1] = CStringGetTextDatum(c->source);
		values[2] = Int32GetDatum(c->source_id);
		values[3] = CStringGetTextDatum(c->object_type);
		values[4] = CStringGetTextDatum(c->object_id);
		values[5] = PointerGetDatum(construct_array(id_datums, nevents, INT8OID, 8,
													FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
		values[6] = CStringGetTextDatum(claim_strategy(strategies, nevents));
		values[7] = expires;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		claimed++;
	}

	SPI_finish();
	return (Datum) 0;
}
