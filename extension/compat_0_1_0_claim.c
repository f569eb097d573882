/*
 * compat_0_1_0_claim.c
 *		Release 0.1.0's part of claim(), for a database whose extension is
 *		still at 0.1.0 (see compat.c): its statements on its tables, and how
 *		far its scan for candidates reads.
 *
 * claim() runs the same steps on every schema (claim.c: check the
 * arguments, scan for candidate objects, lease them, mark their events,
 * give back the leases left empty, return a row per claim), and what they
 * do is what 0.1.0's claim() did.  What 0.1.0's schema needs differently is
 * here, as data claim.c fetches through wi_compat_0_1_0_claim_plans():
 * 0.1.0's inbox and object_leases have no tenant, so its statements name
 * none (the candidates read the empty tenant, which ALTER EXTENSION UPDATE
 * gives their rows; lease and mark declare no tenants parameter), and its
 * scan reads more rows per object than this release's.  claim.c scans a
 * 0.1.0 schema in full, from its first row (0.1.0's claim() kept a scan
 * floor for its background worker; no worker runs on this schema, see
 * worker.c).  Do not change what is here: it serves a frozen schema.  This
 * file calls nothing of claim.c, so that claim.c's call of it is the only
 * way between them.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"

#include "compat.h"
#include "webhook_inbox.h"

static WiClaimPlans plans_0_1_0;

/*
 * 0.1.0's statements for claim.c's steps, prepared on first use and kept
 * for the session, and in *scan how far 0.1.0's claim of max_objects read.
 * Inside SPI.
 */
const WiClaimPlans *
wi_compat_0_1_0_claim_plans(int max_objects, WiClaimScan *scan)
{
	/*
	 * Candidates: distinct objects in order of their oldest due event.  Read
	 * pages until there are twice as many objects as asked for (some will be
	 * taken by concurrent claimers) or the due events run out, eight pages at
	 * the most.
	 */
	scan->want = max_objects * 2;
	scan->page = Max(max_objects * 4, 100);
	scan->limit = scan->page * 8;

	if (plans_0_1_0.mark != NULL)
		return &plans_0_1_0;
	{
		Oid			t[3] = {INT4OID, INT8OID, INTERVALOID};

		/*
		 * Due events of objects that have no live claim, oldest first, read
		 * page by page (keyset on id) because one object may have many.  No
		 * row locks here: the advisory lock and the lease decide, and the
		 * marking step skips rows locked by others.
		 */
		plans_0_1_0.candidates = wi_keep_plan(
			"SELECT i.source_id, s.name, i.object_type, i.object_id, i.id, ''::text AS tenant "
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
		Oid			t[6] = {INT4ARRAYOID, TEXTARRAYOID, TEXTARRAYOID, INT4OID, TEXTOID, INTERVALOID};

		/*
		 * Leases for the candidates, in one statement: an object is taken if
		 * no live claim holds it and this transaction gets its advisory lock
		 * (another claimer on it right now makes us skip it, never wait).
		 * The lease lookup is a correlated subquery so that it is an index
		 * probe per candidate, never a scan of a table full of dead leases.
		 */
		plans_0_1_0.lease = wi_keep_plan(
			"WITH c AS (SELECT * FROM unnest($1, $2, $3) WITH ORDINALITY "
			"    AS c(source_id, object_type, object_id, ord)), "
			"free AS (SELECT c.* FROM c "
			"  WHERE coalesce((SELECT l.expires_at > now() FROM webhook_inbox.object_leases l "
			"    WHERE l.source_id = c.source_id AND l.object_type = c.object_type "
			"    AND l.object_id = c.object_id), false) = false "
			"  AND pg_catalog.pg_try_advisory_xact_lock(pg_catalog.hashtextextended("
			"    'webhook_inbox/' || c.source_id || '/' || c.object_type || '/' || c.object_id, 0)) "
			"  LIMIT $4), "
			"ins AS (INSERT INTO webhook_inbox.object_leases AS l "
			"  (source_id, object_type, object_id, token, holder, expires_at) "
			"  SELECT source_id, object_type, object_id, nextval('webhook_inbox.claim_token_seq'), $5, "
			"    now() + $6 FROM free ORDER BY ord "
			"  ON CONFLICT (source_id, object_type, object_id) DO UPDATE "
			"  SET token = EXCLUDED.token, holder = EXCLUDED.holder, claimed_at = now(), "
			"  expires_at = EXCLUDED.expires_at WHERE l.expires_at <= now() "
			"  RETURNING l.source_id, l.object_type, l.object_id, l.token, l.expires_at) "
			"SELECT ins.token, ins.expires_at, c.ord FROM ins "
			"  JOIN c USING (source_id, object_type, object_id) ORDER BY ins.token", 6, t);
	}
	{
		Oid			t[4] = {INT8ARRAYOID, INT4ARRAYOID, TEXTARRAYOID, TEXTARRAYOID};

		/*
		 * Every due event of the leased objects joins its object's claim,
		 * including those of an expired claim (processing under an older
		 * token).  Rows locked by another claimer are skipped, never waited
		 * for, so claimers cannot deadlock.  LATERAL keeps it an index probe
		 * per object.  Last: its being set says the others are.
		 */
		plans_0_1_0.mark = wi_keep_plan(
			"WITH l AS (SELECT * FROM unnest($1, $2, $3, $4) AS l(token, source_id, object_type, object_id)), "
			"e AS (SELECT x.id, l.token FROM l, LATERAL (SELECT i.id FROM webhook_inbox.inbox i "
			"  WHERE i.source_id = l.source_id AND i.object_type = l.object_type AND i.object_id = l.object_id "
			"  AND i.status IN ('pending', 'retry', 'processing') "
			"  AND (i.status = 'processing' OR i.next_attempt_at <= now()) "
			"  FOR UPDATE SKIP LOCKED) x), "
			"u AS (UPDATE webhook_inbox.inbox i SET status = 'processing', claim_token = e.token, "
			"  updated_at = now() FROM e WHERE i.id = e.id RETURNING i.claim_token, i.id, i.strategy) "
			"SELECT claim_token, id, strategy FROM u ORDER BY claim_token, id", 4, t);
	}
	return &plans_0_1_0;
}
