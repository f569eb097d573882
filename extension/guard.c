/*
 * guard.c
 *		Version guards: upsert_object() for the mirror, and version_guard(),
 *		a trigger that makes updates of any user table monotonic.
 *
 * The rule is never last-write-wins.  A strictly newer version is applied;
 * an older one is stale.  An equal version with identical content is a
 * duplicate; with different content it is a tie, which the caller resolves by
 * fetching the present from the provider (or quarantines as ambiguous_tie) —
 * this is what makes one-second timestamps usable as versions.
 *
 * A stored tombstone stands as _tombstone_holds() says, the rule every save
 * path asks: one the provider stated is final; one a read inferred (a save
 * with deleted and a cause naming a read's 404 or 410, "fetch: http 404")
 * yields to a strictly newer version, and that revival is recorded in
 * repairs as the worker records its own.
 *
 * A save made under a claim carries the claim's fencing token; it is refused
 * ('fenced') once another claim has taken the object over, so a slow worker
 * whose lease expired can never overwrite a newer save.
 *
 * The steps of a save are the same for every release's schema this library
 * serves; what differs is data, a WiGuardPlans (compat.h): the statements
 * that name the object's row by its key and ask the fence, and the version
 * rule.  This release's come from here; a database still at 0.1.0 gets that
 * release's from compat_0_1_0_guard.c, which calls nothing of this file.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/rel.h"
#include "utils/typcache.h"

#include "compat.h"
#include "webhook_inbox.h"

PG_FUNCTION_INFO_V1(wi_upsert_object);
PG_FUNCTION_INFO_V1(wi_version_guard);

/* What every release's schema runs with the same SQL. */
static SPIPlanPtr source_id_plan = NULL;
static SPIPlanPtr insert_plan = NULL;
static SPIPlanPtr transition_plan = NULL;

/* This release's statements and rule (prepare_guard_plans()). */
static WiGuardPlans guard_plans;
static SPIPlanPtr rule_plan = NULL;

/* upsert_object()'s arguments, read and checked by read_upsert() */
typedef struct Upsert
{
	char	   *source;
	char	   *object_type;
	char	   *object_id;
	bool		has_version;
	Datum		version;		/* numeric */
	char	   *status;
	Jsonb	   *state;
	bool		has_token;
	int64		token;
	bool		deleted;
	char	   *cause;
	bool		has_event;
	int64		event_id;
} Upsert;

/*
 * The outcome _version_rule() named, as this file's constant (the name SPI
 * returned lives in SPI's memory, gone at SPI_finish).
 */
static const char *
rule_outcome(const char *name)
{
	static const char *const outcomes[] = {"applied", "duplicate", "stale", "tie"};

	for (int i = 0; i < lengthof(outcomes); i++)
		if (name != NULL && strcmp(name, outcomes[i]) == 0)
			return outcomes[i];
	elog(ERROR, "webhook_inbox: the version rule answered \"%s\"", name ? name : "(null)");
	return NULL;				/* keep the compiler quiet */
}

/*
 * This release's version rule: asked where every path asks it,
 * _version_rule() with the stored tombstone as _tombstone_holds() weighs it.
 */
static const char *
version_rule_sql(const WiVersionFacts *f)
{
	Datum		a[7] = {BoolGetDatum(f->fresh), f->version, f->old_version, BoolGetDatum(f->deleted),
		BoolGetDatum(f->old_deleted), BoolGetDatum(f->same_content),
	f->old_evidence ? CStringGetTextDatum(f->old_evidence) : (Datum) 0};
	char		n[7] = {' ', f->has_version ? ' ' : 'n', f->old_has_version ? ' ' : 'n', ' ', ' ', ' ',
	f->old_evidence ? ' ' : 'n'};
	int			rc = SPI_execute_plan(rule_plan, a, n, true, 1);

	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "webhook_inbox: the version rule failed: %s", SPI_result_code_string(rc));
	return rule_outcome(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
}

/* The statements of every release's schema; inside SPI. */
static void
prepare_shared_plans(void)
{
	Oid			key[3] = {INT4OID, TEXTOID, TEXTOID};

	if (source_id_plan != NULL)
		return;
	{
		Oid			t[1] = {TEXTOID};

		source_id_plan = wi_keep_plan("SELECT id FROM webhook_inbox.sources WHERE name = $1", 1, t);
	}
	insert_plan = wi_keep_plan(
		"INSERT INTO webhook_inbox.objects (source_id, object_type, object_id) "
		"VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", 3, key);
	{
		Oid			t[8] = {INT4OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, NUMERICOID, TEXTOID,
		INT8OID};

		transition_plan = wi_keep_plan(
			"INSERT INTO webhook_inbox.transitions (source_id, object_type, object_id, "
			"from_status, to_status, version, cause, event_id) "
			"VALUES ($1, $2, $3, $4, $5, $6, $7, $8)", 8, t);
	}
}

/*
 * This release's statements (the empty tenant's row) and its rule; inside
 * SPI.  Prepared by the first save on this release's schema: 0.1.0's has
 * neither _fenced() nor _version_rule() nor tombstone evidence.
 */
static const WiGuardPlans *
prepare_guard_plans(void)
{
	Oid			key[3] = {INT4OID, TEXTOID, TEXTOID};

	if (guard_plans.lock != NULL)
		return &guard_plans;
	{
		Oid			t[4] = {INT4OID, TEXTOID, TEXTOID, INT8OID};

		/* the one fence check, in SQL: _fenced() */
		guard_plans.fence = wi_keep_plan("SELECT webhook_inbox._fenced($1, '', $2, $3, $4)", 4, t);
	}
	{
		Oid			t[7] = {BOOLOID, NUMERICOID, NUMERICOID, BOOLOID, BOOLOID, BOOLOID, TEXTOID};

		/* the one version rule, in SQL: _version_rule() and _tombstone_holds() */
		rule_plan = wi_keep_plan(
			"SELECT webhook_inbox._version_rule($1, $2, $3, $4, "
			"webhook_inbox._tombstone_holds($5, $7, $2, $3), $6)", 7, t);
	}
	guard_plans.remove = wi_keep_plan(
		"DELETE FROM webhook_inbox.objects WHERE source_id = $1 AND tenant = '' AND object_type = $2 "
		"AND object_id = $3", 3, key);
	{
		Oid			t[10] = {INT4OID, TEXTOID, TEXTOID, TEXTOID, NUMERICOID, JSONBOID, BOOLOID,
		INT8OID, INT8OID, TEXTOID};

		/*
		 * A tombstone rests on a read when its cause names a read's 404 or
		 * 410 as the worker's fetches do ("fetch: http 404", "fetch: http
		 * 410, confirmed") and its state does not say "deleted": true; on
		 * the provider's word otherwise (a deletion event, a call naming no
		 * read).
		 */
		guard_plans.update = wi_keep_plan(
			"UPDATE webhook_inbox.objects SET status = coalesce($4, status), version = coalesce($5, version), "
			"state = coalesce($6, state), deleted = $7, tombstone_pending_since = NULL, "
			"fence_token = greatest(fence_token, $8), last_event_id = coalesce($9, last_event_id), "
			"updated_at = now(), "
			"tombstone_evidence = CASE WHEN NOT $7 THEN NULL "
			"WHEN $10 ~ '^fetch: http (404|410)([^0-9]|$)' AND coalesce($6 ->> 'deleted', 'false') <> 'true' "
			"THEN 'read' ELSE 'provider' END "
			"WHERE source_id = $1 AND tenant = '' AND object_type = $2 AND object_id = $3", 10, t);
	}
	{
		Oid			t[6] = {INT4OID, TEXTOID, TEXTOID, TEXTOID, NUMERICOID, INT8OID};

		/* a revival, a repair of its own kind outside any sweep, as the worker records it */
		guard_plans.revive = wi_keep_plan(
			"INSERT INTO webhook_inbox.repairs (run_id, source_id, tenant, object_type, object_id, "
			"before, after, outcome) "
			"SELECT NULL, o.source_id, o.tenant, o.object_type, o.object_id, "
			"jsonb_build_object('deleted', true, 'evidence', $4, 'version', $5), "
			"jsonb_build_object('status', o.status, 'version', o.version, 'deleted', o.deleted, 'event', $6), "
			"'revived' FROM webhook_inbox.objects o "
			"WHERE o.source_id = $1 AND o.tenant = '' AND o.object_type = $2 AND o.object_id = $3", 6, t);
	}
	guard_plans.rule = version_rule_sql;
	/* last: its being set says the others are */
	guard_plans.lock = wi_keep_plan(
		"SELECT status, version, state, deleted, (status IS NULL AND version IS NULL "
		"AND state IS NULL AND NOT deleted) AS fresh, tombstone_evidence FROM webhook_inbox.objects "
		"WHERE source_id = $1 AND tenant = '' AND object_type = $2 AND object_id = $3 FOR UPDATE", 3, key);
	return &guard_plans;
}

static bool
cstr_equal(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

/*
 * Read upsert_object()'s arguments into u, raising for the missing or
 * invalid ones.  Outside SPI; the strings are palloc'd in the caller's
 * context.
 */
static void
read_upsert(FunctionCallInfo fcinfo, Upsert *u)
{
	u->has_version = !PG_ARGISNULL(3);
	u->version = u->has_version ? PG_GETARG_DATUM(3) : (Datum) 0;
	u->status = PG_ARGISNULL(4) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(4));
	u->state = PG_ARGISNULL(5) ? NULL : PG_GETARG_JSONB_P(5);
	u->has_token = !PG_ARGISNULL(6);
	u->token = u->has_token ? PG_GETARG_INT64(6) : 0;
	u->deleted = PG_ARGISNULL(7) ? false : PG_GETARG_BOOL(7);
	u->cause = PG_ARGISNULL(8) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(8));
	u->has_event = !PG_ARGISNULL(9);
	u->event_id = u->has_event ? PG_GETARG_INT64(9) : 0;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("source, object_type and object_id must not be null")));
	u->source = text_to_cstring(PG_GETARG_TEXT_PP(0));
	u->object_type = text_to_cstring(PG_GETARG_TEXT_PP(1));
	u->object_id = text_to_cstring(PG_GETARG_TEXT_PP(2));
	if (u->object_type[0] == '\0' || u->object_id[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("object_type and object_id must not be empty")));
	if (u->has_version && numeric_is_nan(DatumGetNumeric(u->version)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("version must be a number, not NaN")));
}

/*
 * The save of u under one release's statements and rule: lock the
 * object's row (made if missing), refuse a fenced save, weigh the versions,
 * and write the object and its status change.  Inside SPI; returns the
 * outcome as a constant string, valid after SPI_finish().
 */
static const char *
save_object(const Upsert *u, const WiGuardPlans *plans)
{
	int32		source_id;
	Datum		key[3];
	bool		isnull;
	int			rc;
	HeapTuple	tup;
	TupleDesc	desc;
	char	   *old_status;
	bool		old_has_version;
	Datum		old_version;
	bool		old_has_state;
	Jsonb	   *old_state = NULL;
	bool		old_deleted;
	char	   *old_evidence;
	bool		fresh;
	bool		same_content;
	const char *result;

	{
		Datum		a[1] = {CStringGetTextDatum(u->source)};

		rc = SPI_execute_plan(source_id_plan, a, NULL, true, 1);
		if (rc != SPI_OK_SELECT || SPI_processed == 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("source \"%s\" does not exist", u->source),
					 errhint("Create it with webhook_inbox.create_source().")));
		source_id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
												&isnull));
	}
	key[0] = Int32GetDatum(source_id);
	key[1] = CStringGetTextDatum(u->object_type);
	key[2] = CStringGetTextDatum(u->object_id);

	/* lock the object's row first, so the fence check and the save agree */
	rc = SPI_execute_plan(insert_plan, key, NULL, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "webhook_inbox: creating the object row failed: %s", SPI_result_code_string(rc));
	rc = SPI_execute_plan(plans->lock, key, NULL, false, 1);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "webhook_inbox: locking the object row failed: %s", SPI_result_code_string(rc));
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	old_status = SPI_getvalue(tup, desc, 1);
	old_version = SPI_getbinval(tup, desc, 2, &isnull);
	old_has_version = !isnull;
	if (old_has_version)
		old_version = datumCopy(old_version, false, -1);
	{
		Datum		d = SPI_getbinval(tup, desc, 3, &isnull);

		old_has_state = !isnull;
		if (old_has_state)
			old_state = DatumGetJsonbPCopy(d);
	}
	old_deleted = DatumGetBool(SPI_getbinval(tup, desc, 4, &isnull));
	fresh = DatumGetBool(SPI_getbinval(tup, desc, 5, &isnull));
	old_evidence = SPI_getvalue(tup, desc, 6);

	if (u->has_token)
	{
		Datum		a[4] = {key[0], key[1], key[2], Int64GetDatum(u->token)};

		rc = SPI_execute_plan(plans->fence, a, NULL, true, 1);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "webhook_inbox: fence check failed: %s", SPI_result_code_string(rc));
		if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
		{
			/* leave no empty row behind for an object this save never saw */
			if (fresh)
				SPI_execute_plan(plans->remove, key, NULL, false, 0);
			return "fenced";
		}
	}

	same_content = !fresh && old_deleted == u->deleted &&
		(u->status == NULL || cstr_equal(u->status, old_status)) &&
		(u->state == NULL || (old_has_state &&
							  compareJsonbContainers(&u->state->root, &old_state->root) == 0));

	{
		WiVersionFacts facts = {
			.fresh = fresh,
			.has_version = u->has_version,
			.version = u->version,
			.old_has_version = old_has_version,
			.old_version = old_version,
			.deleted = u->deleted,
			.old_deleted = old_deleted,
			.old_evidence = old_evidence,
			.same_content = same_content,
		};

		result = plans->rule(&facts);
	}

	if (strcmp(result, "applied") == 0)
	{
		Datum		ua[10];
		char		un[10];
		const char *new_status = u->deleted && u->status == NULL ? NULL : u->status;

		memset(un, ' ', sizeof(un));
		ua[0] = key[0];
		ua[1] = key[1];
		ua[2] = key[2];
		ua[3] = new_status ? CStringGetTextDatum(new_status) : (Datum) 0;
		un[3] = new_status ? ' ' : 'n';
		ua[4] = u->version;
		un[4] = u->has_version ? ' ' : 'n';
		ua[5] = u->state ? JsonbPGetDatum(u->state) : (Datum) 0;
		un[5] = u->state ? ' ' : 'n';
		ua[6] = BoolGetDatum(u->deleted);
		ua[7] = Int64GetDatum(u->token);
		un[7] = u->has_token ? ' ' : 'n';
		ua[8] = Int64GetDatum(u->event_id);
		un[8] = u->has_event ? ' ' : 'n';
		ua[9] = u->cause ? CStringGetTextDatum(u->cause) : (Datum) 0;
		un[9] = u->cause ? ' ' : 'n';
		rc = SPI_execute_plan(plans->update, ua, un, false, 0);
		if (rc != SPI_OK_UPDATE)
			elog(ERROR, "webhook_inbox: saving the object failed: %s", SPI_result_code_string(rc));

		/* a live save over a tombstone brought the object back */
		if (old_deleted && !u->deleted && plans->revive != NULL)
		{
			Datum		ra[6] = {key[0], key[1], key[2],
				old_evidence ? CStringGetTextDatum(old_evidence) : (Datum) 0, old_version,
			Int64GetDatum(u->event_id)};
			char		rn[6] = {' ', ' ', ' ', old_evidence ? ' ' : 'n', old_has_version ? ' ' : 'n',
			u->has_event ? ' ' : 'n'};

			rc = SPI_execute_plan(plans->revive, ra, rn, false, 0);
			if (rc != SPI_OK_INSERT)
				elog(ERROR, "webhook_inbox: recording a revival failed: %s", SPI_result_code_string(rc));
		}

		/* record the status change, a deletion counting as one */
		{
			const char *to = u->deleted ? "deleted" : new_status;
			const char *from = old_deleted ? "deleted" : old_status;

			if (to != NULL && !cstr_equal(from, to))
			{
				Datum		ta[8];
				char		tn[8];
				char	   *cause_text = u->cause ? u->cause :
					(u->has_event ? psprintf("event " INT64_FORMAT, u->event_id) : pstrdup("upsert"));

				memset(tn, ' ', sizeof(tn));
				ta[0] = key[0];
				ta[1] = key[1];
				ta[2] = key[2];
				ta[3] = from ? CStringGetTextDatum(from) : (Datum) 0;
				tn[3] = from ? ' ' : 'n';
				ta[4] = CStringGetTextDatum(to);
				ta[5] = u->version;
				tn[5] = u->has_version ? ' ' : 'n';
				ta[6] = CStringGetTextDatum(cause_text);
				ta[7] = Int64GetDatum(u->event_id);
				tn[7] = u->has_event ? ' ' : 'n';
				rc = SPI_execute_plan(transition_plan, ta, tn, false, 0);
				if (rc != SPI_OK_INSERT)
					elog(ERROR, "webhook_inbox: recording a transition failed: %s",
						 SPI_result_code_string(rc));
			}
		}
	}
	else if (fresh)
		elog(ERROR, "webhook_inbox: unreachable upsert state");

	return result;
}

/*
 * upsert_object(source, object_type, object_id, version, status, state,
 *				 claim_token, deleted, cause, event_id) returns text
 *
 * version NULL means "the provider's current state" (a fetch, or a
 * tombstone without a version): it replaces what is stored, guarded only by
 * the fencing token.  Returns applied, duplicate, stale, tie or fenced.
 * A status change is recorded in transitions in the same transaction, and
 * a tombstone a newer version overrode in repairs (outcome revived); a
 * tombstone saved with deleted rests on a read when cause names a read's
 * 404 or 410 ("fetch: http 404"), on the provider's word otherwise.
 * It saves the empty tenant's object (a source with one account); the
 * worker saves a tenant's objects through _save_presents().
 *
 * A database still at 0.1.0 is saved to by the same steps with that
 * release's statements and rule (compat_0_1_0_guard.c): its key has no
 * tenant, and its schema neither _fenced() nor _version_rule() nor
 * tombstone evidence.
 */
Datum
wi_upsert_object(PG_FUNCTION_ARGS)
{
	bool		at_0_1_0 = wi_schema() == WI_SCHEMA_0_1_0;
	Upsert		u;
	const char *result;

	read_upsert(fcinfo, &u);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "webhook_inbox: SPI_connect failed");
	prepare_shared_plans();
	result = save_object(&u, at_0_1_0 ? wi_compat_0_1_0_guard_plans() : prepare_guard_plans());
	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text(result));
}

/*
 * version_guard(): BEFORE UPDATE FOR EACH ROW trigger.
 *
 * Argument: the version column's name (default "version").  An update whose
 * new version is not strictly greater than the old one is skipped (the
 * trigger returns NULL), so concurrent or replayed writers can update a row
 * in any order and the newest version stays.  A NULL new version is never
 * newer.  Works for any type with a default btree ordering.
 */
Datum
wi_version_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	TupleDesc	tupdesc;
	const char *colname = "version";
	int			attnum;
	Oid			typid;
	TypeCacheEntry *typentry;
	Datum		oldv;
	Datum		newv;
	bool		oldnull;
	bool		newnull;
	int32		cmp;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("version_guard() must be called as a trigger")));
	if (!TRIGGER_FIRED_BEFORE(trigdata->tg_event) || !TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("version_guard() must be a BEFORE UPDATE FOR EACH ROW trigger")));
	if (trigdata->tg_trigger->tgnargs > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("version_guard() takes at most one argument, the version column")));
	if (trigdata->tg_trigger->tgnargs == 1)
		colname = trigdata->tg_trigger->tgargs[0];

	tupdesc = trigdata->tg_relation->rd_att;
	attnum = SPI_fnumber(tupdesc, colname);
	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of table \"%s\" does not exist", colname,
						RelationGetRelationName(trigdata->tg_relation)),
				 errhint("Pass the version column's name as the trigger's argument.")));
	typid = TupleDescAttr(tupdesc, attnum - 1)->atttypid;
	typentry = lookup_type_cache(typid, TYPECACHE_CMP_PROC_FINFO);
	if (!OidIsValid(typentry->cmp_proc_finfo.fn_oid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("column \"%s\" has type %s, which has no ordering", colname,
						format_type_be(typid))));

	oldv = heap_getattr(trigdata->tg_trigtuple, attnum, tupdesc, &oldnull);
	newv = heap_getattr(trigdata->tg_newtuple, attnum, tupdesc, &newnull);
	if (newnull)
		return PointerGetDatum(NULL);
	if (oldnull)
		return PointerGetDatum(trigdata->tg_newtuple);
	cmp = DatumGetInt32(FunctionCall2Coll(&typentry->cmp_proc_finfo,
										  TupleDescAttr(tupdesc, attnum - 1)->attcollation,
										  newv, oldv));
	if (cmp <= 0)
		return PointerGetDatum(NULL);
	return PointerGetDatum(trigdata->tg_newtuple);
}
