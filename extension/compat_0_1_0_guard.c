/*
 * compat_0_1_0_guard.c
 *		Release 0.1.0's part of upsert_object(), for a database whose
 *		extension is still at 0.1.0 (see compat.c): its statements on its
 *		tables, and its version rule.
 *
 * upsert_object() runs the same steps on every schema (guard.c's
 * save_object(): lock the row, ask the fence, weigh the versions, save and
 * record the transition; record a revival where the schema has them), and
 * 0.1.0's own steps are among them unchanged.  What 0.1.0's schema needs
 * differently is here, as data guard.c fetches through
 * wi_compat_0_1_0_guard_plans(): 0.1.0's objects have no tenant, no
 * tombstone_pending_since and no tombstone_evidence (a tombstone is final
 * against any version: the lock reads NULL evidence, and no revival is
 * recorded), and its schema has neither _fenced() (the fence is asked
 * inline, as 0.1.0 asked it) nor _version_rule() (the rule is the C
 * function below, as 0.1.0 applied it).  The statements every release runs
 * with the same SQL (the source's id, the object's empty row, the
 * transition) are guard.c's.  Do not change what 0.1.0 decides here: it
 * serves a frozen schema.  This file calls nothing of guard.c, so that
 * guard.c's call of it is the only way between them.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"

#include "compat.h"
#include "webhook_inbox.h"

static WiGuardPlans plans_0_1_0;

/*
 * The 0.1.0 release's version rule, frozen: its schema has no
 * _version_rule(), and this is what its upsert_object() decided.  Without a
 * version the save is the present, applied unless it changes nothing; a
 * tombstone is final for versioned objects; otherwise the greater version
 * wins, and an equal one is a duplicate or, with other content, a tie.
 */
static const char *
version_rule_0_1_0(const WiVersionFacts *f)
{
	int			c;

	if (f->fresh)
		return "applied";
	if (!f->has_version)
		return f->same_content ? "duplicate" : "applied";
	if (f->old_deleted && !f->deleted)
		return "stale";
	if (!f->old_has_version)
		return "applied";
	c = DatumGetInt32(DirectFunctionCall2(numeric_cmp, f->version, f->old_version));
	if (c > 0)
		return "applied";
	if (c < 0)
		return "stale";
	return f->same_content ? "duplicate" : "tie";
}

/*
 * 0.1.0's statements and rule for guard.c's save, prepared on first use and
 * kept for the session.  Inside SPI.
 */
const WiGuardPlans *
wi_compat_0_1_0_guard_plans(void)
{
	Oid			key[3] = {INT4OID, TEXTOID, TEXTOID};

	if (plans_0_1_0.lock != NULL)
		return &plans_0_1_0;
	{
		Oid			t[4] = {INT4OID, TEXTOID, TEXTOID, INT8OID};

		/* fenced if another claim holds the object or a newer token saved it */
		plans_0_1_0.fence = wi_keep_plan(
			"SELECT EXISTS (SELECT 1 FROM webhook_inbox.object_leases l "
			"  WHERE l.source_id = $1 AND l.object_type = $2 AND l.object_id = $3 AND l.token <> $4) "
			"OR EXISTS (SELECT 1 FROM webhook_inbox.objects o "
			"  WHERE o.source_id = $1 AND o.object_type = $2 AND o.object_id = $3 "
			"  AND o.fence_token > $4)", 4, t);
	}
	plans_0_1_0.remove = wi_keep_plan(
		"DELETE FROM webhook_inbox.objects WHERE source_id = $1 AND object_type = $2 "
		"AND object_id = $3", 3, key);
	{
		Oid			t[9] = {INT4OID, TEXTOID, TEXTOID, TEXTOID, NUMERICOID, JSONBOID, BOOLOID,
		INT8OID, INT8OID};

		plans_0_1_0.update = wi_keep_plan(
			"UPDATE webhook_inbox.objects SET status = coalesce($4, status), version = coalesce($5, version), "
			"state = coalesce($6, state), deleted = $7, "
			"fence_token = greatest(fence_token, $8), last_event_id = coalesce($9, last_event_id), "
			"updated_at = now() "
			"WHERE source_id = $1 AND object_type = $2 AND object_id = $3", 9, t);
	}
	plans_0_1_0.rule = version_rule_0_1_0;
	/* plans_0_1_0.revive stays NULL: 0.1.0 records no revivals */
	/* last: its being set says the others are */
	plans_0_1_0.lock = wi_keep_plan(
		"SELECT status, version, state, deleted, (status IS NULL AND version IS NULL "
		"AND state IS NULL AND NOT deleted) AS fresh, NULL::text AS tombstone_evidence "
		"FROM webhook_inbox.objects "
		"WHERE source_id = $1 AND object_type = $2 AND object_id = $3 FOR UPDATE", 3, key);
	return &plans_0_1_0;
}
