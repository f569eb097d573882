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
 * A save made under a claim carries the claim's fencing token; it is refused
 * ('fenced') once another claim has taken the object over, so a slow worker
 * whose lease expired can never overwrite a newer save.
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

static SPIPlanPtr source_id_plan = NULL;
static SPIPlanPtr fence_plan = NULL;
static SPIPlanPtr rule_plan = NULL;
static SPIPlanPtr insert_plan = NULL;
static SPIPlanPtr lock_plan = NULL;
static SPIPlanPtr update_plan = NULL;
static SPIPlanPtr transition_plan = NULL;
static SPIPlanPtr delete_plan = NULL;

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

static void
prepare_guard_plans(void)
{
	Oid			key[3] = {INT4OID, TEXTOID, TEXTOID};

	if (source_id_plan != NULL)
		return;
	{
		Oid			t[1] = {TEXTOID};

		source_id_plan = wi_keep_plan("SELECT id FROM webhook_inbox.sources WHERE name = $1", 1, t);
	}
	{
		Oid			t[4] = {INT4OID, TEXTOID, TEXTOID, INT8OID};

		/* the one fence check, in SQL: _fenced() */
		fence_plan = wi_keep_plan("SELECT webhook_inbox._fenced($1, '', $2, $3, $4)", 4, t);
	}
	{
		Oid			t[6] = {BOOLOID, NUMERICOID, NUMERICOID, BOOLOID, BOOLOID, BOOLOID};

		/* the one version rule, in SQL: _version_rule() */
		rule_plan = wi_keep_plan("SELECT webhook_inbox._version_rule($1, $2, $3, $4, $5, $6)", 6, t);
	}
	insert_plan = wi_keep_plan(
		"INSERT INTO webhook_inbox.objects (source_id, object_type, object_id) "
		"VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", 3, key);
	delete_plan = wi_keep_plan(
		"DELETE FROM webhook_inbox.objects WHERE source_id = $1 AND tenant = '' AND object_type = $2 "
		"AND object_id = $3", 3, key);
	lock_plan = wi_keep_plan(
		"SELECT status, version, state, deleted, (status IS NULL AND version IS NULL "
		"AND state IS NULL AND NOT deleted) AS fresh FROM webhook_inbox.objects "
		"WHERE source_id = $1 AND tenant = '' AND object_type = $2 AND object_id = $3 FOR UPDATE", 3, key);
	{
		Oid			t[9] = {INT4OID, TEXTOID, TEXTOID, TEXTOID, NUMERICOID, JSONBOID, BOOLOID,
		INT8OID, INT8OID};

		update_plan = wi_keep_plan(
			"UPDATE webhook_inbox.objects SET status = coalesce($4, status), version = coalesce($5, version), "
			"state = coalesce($6, state), deleted = $7, tombstone_pending_since = NULL, "
			"fence_token = greatest(fence_token, $8), last_event_id = coalesce($9, last_event_id), "
			"updated_at = now() "
			"WHERE source_id = $1 AND tenant = '' AND object_type = $2 AND object_id = $3", 9, t);
	}
	{
		Oid			t[8] = {INT4OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, NUMERICOID, TEXTOID,
		INT8OID};

		transition_plan = wi_keep_plan(
			"INSERT INTO webhook_inbox.transitions (source_id, object_type, object_id, "
			"from_status, to_status, version, cause, event_id) "
			"VALUES ($1, $2, $3, $4, $5, $6, $7, $8)", 8, t);
	}
}

static bool
cstr_equal(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

/*
 * upsert_object(source, object_type, object_id, version, status, state,
 *				 claim_token, deleted, cause, event_id) returns text
 *
 * version NULL means "the provider's current state" (a fetch, or a
 * tombstone without a version): it replaces what is stored, guarded only by
 * the fencing token.  Returns applied, duplicate, stale, tie or fenced.
 * A status change is recorded in transitions in the same transaction.
 * It saves the empty tenant's object (a source with one account); the
 * worker saves a tenant's objects through _save_presents().
 */
Datum
wi_upsert_object(PG_FUNCTION_ARGS)
{
	char	   *source;
	char	   *object_type;
	char	   *object_id;
	bool		has_version = !PG_ARGISNULL(3);
	Datum		version = has_version ? PG_GETARG_DATUM(3) : (Datum) 0;
	char	   *status = PG_ARGISNULL(4) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(4));
	Jsonb	   *state = PG_ARGISNULL(5) ? NULL : PG_GETARG_JSONB_P(5);
	bool		has_token = !PG_ARGISNULL(6);
	int64		token = has_token ? PG_GETARG_INT64(6) : 0;
	bool		deleted = PG_ARGISNULL(7) ? false : PG_GETARG_BOOL(7);
	char	   *cause = PG_ARGISNULL(8) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(8));
	bool		has_event = !PG_ARGISNULL(9);
	int64		event_id = has_event ? PG_GETARG_INT64(9) : 0;
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
	bool		fresh;
	bool		same_content;
	const char *result;

	/* a database still at 0.1.0: that release's upsert on its tables */
	if (wi_schema() == WI_SCHEMA_0_1_0)
		return wi_compat_0_1_0_upsert_object(fcinfo);

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("source, object_type and object_id must not be null")));
	source = text_to_cstring(PG_GETARG_TEXT_PP(0));
	object_type = text_to_cstring(PG_GETARG_TEXT_PP(1));
	object_id = text_to_cstring(PG_GETARG_TEXT_PP(2));
	if (object_type[0] == '\0' || object_id[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("object_type and object_id must not be empty")));
	if (has_version && numeric_is_nan(DatumGetNumeric(version)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("version must be a number, not NaN")));

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "webhook_inbox: SPI_connect failed");
	prepare_guard_plans();

	{
		Datum		a[1] = {CStringGetTextDatum(source)};

		rc = SPI_execute_plan(source_id_plan, a, NULL, true, 1);
		if (rc != SPI_OK_SELECT || SPI_processed == 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("source \"%s\" does not exist", source),
					 errhint("Create it with webhook_inbox.create_source().")));
		source_id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
												&isnull));
	}
	key[0] = Int32GetDatum(source_id);
	key[1] = CStringGetTextDatum(object_type);
	key[2] = CStringGetTextDatum(object_id);

	/* lock the object's row first, so the fence check and the save agree */
	rc = SPI_execute_plan(insert_plan, key, NULL, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "webhook_inbox: creating the object row failed: %s", SPI_result_code_string(rc));
	rc = SPI_execute_plan(lock_plan, key, NULL, false, 1);
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

	if (has_token)
	{
		Datum		a[4] = {key[0], key[1], key[2], Int64GetDatum(token)};

		rc = SPI_execute_plan(fence_plan, a, NULL, true, 1);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "webhook_inbox: fence check failed: %s", SPI_result_code_string(rc));
		if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
		{
			/* leave no empty row behind for an object this save never saw */
			if (fresh)
				SPI_execute_plan(delete_plan, key, NULL, false, 0);
			SPI_finish();
			PG_RETURN_TEXT_P(cstring_to_text("fenced"));
		}
	}

	same_content = !fresh && old_deleted == deleted &&
		(status == NULL || cstr_equal(status, old_status)) &&
		(state == NULL || (old_has_state &&
						   compareJsonbContainers(&state->root, &old_state->root) == 0));

	/* the version rule, asked where every path asks it: _version_rule() */
	{
		Datum		a[6] = {BoolGetDatum(fresh), version, old_version, BoolGetDatum(deleted),
		BoolGetDatum(old_deleted), BoolGetDatum(same_content)};
		char		n[6] = {' ', has_version ? ' ' : 'n', old_has_version ? ' ' : 'n', ' ', ' ', ' '};

		rc = SPI_execute_plan(rule_plan, a, n, true, 1);
		if (rc != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "webhook_inbox: the version rule failed: %s", SPI_result_code_string(rc));
		result = rule_outcome(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
	}

	if (strcmp(result, "applied") == 0)
	{
		Datum		ua[9];
		char		un[9];
		const char *new_status = deleted && status == NULL ? NULL : status;

		memset(un, ' ', sizeof(un));
		ua[0] = key[0];
		ua[1] = key[1];
		ua[2] = key[2];
		ua[3] = new_status ? CStringGetTextDatum(new_status) : (Datum) 0;
		un[3] = new_status ? ' ' : 'n';
		ua[4] = version;
		un[4] = has_version ? ' ' : 'n';
		ua[5] = state ? JsonbPGetDatum(state) : (Datum) 0;
		un[5] = state ? ' ' : 'n';
		ua[6] = BoolGetDatum(deleted);
		ua[7] = Int64GetDatum(token);
		un[7] = has_token ? ' ' : 'n';
		ua[8] = Int64GetDatum(event_id);
		un[8] = has_event ? ' ' : 'n';
		rc = SPI_execute_plan(update_plan, ua, un, false, 0);
		if (rc != SPI_OK_UPDATE)
			elog(ERROR, "webhook_inbox: saving the object failed: %s", SPI_result_code_string(rc));

		/* record the status change, a deletion counting as one */
		{
			const char *to = deleted ? "deleted" : new_status;
			const char *from = old_deleted ? "deleted" : old_status;

			if (to != NULL && !cstr_equal(from, to))
			{
				Datum		ta[8];
				char		tn[8];
				char	   *cause_text = cause ? cause :
					(has_event ? psprintf("event " INT64_FORMAT, event_id) : pstrdup("upsert"));

				memset(tn, ' ', sizeof(tn));
				ta[0] = key[0];
				ta[1] = key[1];
				ta[2] = key[2];
				ta[3] = from ? CStringGetTextDatum(from) : (Datum) 0;
				tn[3] = from ? ' ' : 'n';
				ta[4] = CStringGetTextDatum(to);
				ta[5] = version;
				tn[5] = has_version ? ' ' : 'n';
				ta[6] = CStringGetTextDatum(cause_text);
				ta[7] = Int64GetDatum(event_id);
				tn[7] = has_event ? ' ' : 'n';
				rc = SPI_execute_plan(transition_plan, ta, tn, false, 0);
				if (rc != SPI_OK_INSERT)
					elog(ERROR, "webhook_inbox: recording a transition failed: %s",
						 SPI_result_code_string(rc));
			}
		}
	}
	else if (fresh)
		elog(ERROR, "webhook_inbox: unreachable upsert state");

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
