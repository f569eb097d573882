/*
 * intake_write.c
 *		Writing a batch: the inbox rows (as COPY writes rows, bulk.c, or one
 *		INSERT ... ON CONFLICT DO NOTHING where a table needs a statement's
 *		machinery or a key is taken meanwhile), the audit rows of the
 *		deliveries, and the tenants the new rows name.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/cryptohash.h"
#include "common/jsonapi.h"
#include "common/sha2.h"
#include "common/string.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "bulk.h"

#include "intake.h"

PG_FUNCTION_INFO_V1(wi_intake_inbox_rows);
PG_FUNCTION_INFO_V1(wi_intake_delivery_rows);

static SPIPlanPtr inbox_plan = NULL;
static SPIPlanPtr delivery_plan = NULL;
static SPIPlanPtr tenants_plan = NULL;

/*
 * The statements intake writes with.  Each reads the rows of the batch in
 * progress from a C function (see batch_rows_run) and writes them all; rows
 * arrive sorted (see the file header).
 */
static const char *const inbox_insert_sql =
"INSERT INTO webhook_inbox.inbox (source_id, event_id, correlation_id, event_type, "
"object_type, object_id, strategy, route_id, route_version, provider_version, "
"provider_time, status_value, payload, raw_body, body_sha256, status, reason, tenant, "
"tenant_context) "
"SELECT * FROM webhook_inbox._intake_inbox_rows($1) "
"ON CONFLICT (source_id, event_id) DO NOTHING RETURNING source_id, event_id";

static const char *const delivery_insert_sql =
"INSERT INTO webhook_inbox.deliveries (source_id, event_id, delivery_id, body_sha256, "
"body_size, outcome, tenant) "
"SELECT * FROM webhook_inbox._intake_delivery_rows($1)";

/*
 * The tenants the batch's new events name, registered as they are
 * discovered.  An existing tenant's row is left alone (not locked) unless
 * the delivery brings a context it did not have, or is the tenant's own
 * lifecycle event ($4): Stripe's account.application.deauthorized disables
 * it (a deauthorization in the batch wins), account.application.authorized
 * makes a tenant a deauthorization had disabled active again; Shopify's
 * app/uninstalled disables the shop (a new install's
 * set_tenant_credentials() enables it again); the reason says which and
 * when.  A GitHub App's installation likewise: installation.deleted
 * disables it, installation.suspend flags it for engineering,
 * installation.unsuspend makes a tenant a suspension flagged active again,
 * and its token may be asked for again.
 */
static const char *const tenants_insert_sql =
"WITH x AS (SELECT * FROM unnest($1::integer[], $2::text[], $3::text[], $4::text[]) AS x(s, t, c, l)), "
/* an unsuspended installation's token may be asked for again */
"cred AS (UPDATE webhook_inbox.tenant_credentials c SET status = 'active', status_reason = NULL, "
"    status_at = now(), updated_at = now() FROM x "
"  WHERE x.l = 'unsuspended' AND c.source_id = x.s AND c.tenant = x.t "
"    AND c.kind = 'github_app_installation' AND c.status = 'flagged' AND c.status_reason LIKE '%suspended%') "
"INSERT INTO webhook_inbox.tenants AS t (source_id, tenant, context, discovered_by, status, reason) "
"SELECT DISTINCT ON (x.s, x.t) x.s, x.t, x.c, 'delivery', "
"  CASE WHEN x.l IN ('deauthorized', 'uninstalled', 'app_uninstalled') THEN 'disabled' WHEN x.l = 'suspended' THEN 'flagged' "
"    ELSE 'active' END, "
"  CASE WHEN x.l = 'app_uninstalled' THEN 'uninstalled: app/uninstalled received at ' || now() "
"    WHEN x.l IS NOT NULL THEN x.l || ': ' || CASE x.l WHEN 'uninstalled' THEN 'installation.deleted' "
"    WHEN 'suspended' THEN 'installation.suspend' WHEN 'unsuspended' THEN 'installation.unsuspend' "
"    ELSE 'account.application.' || x.l END || ' received at ' || now() END "
"FROM x "
"ORDER BY x.s, x.t, x.l IN ('deauthorized', 'uninstalled', 'app_uninstalled') DESC NULLS LAST, x.l = 'suspended' DESC NULLS LAST, "
"  x.l IS NULL, x.c NULLS LAST "
"ON CONFLICT (source_id, tenant) DO UPDATE SET context = coalesce(EXCLUDED.context, t.context), "
"  status = CASE WHEN EXCLUDED.reason LIKE 'deauthorized:%' OR EXCLUDED.reason LIKE 'uninstalled:%' THEN 'disabled' "
"    WHEN EXCLUDED.reason LIKE 'suspended:%' AND t.status = 'active' THEN 'flagged' "
"    WHEN EXCLUDED.reason LIKE 'authorized:%' AND t.reason LIKE 'deauthorized:%' THEN 'active' "
"    WHEN EXCLUDED.reason LIKE 'unsuspended:%' AND t.reason LIKE 'suspended:%' THEN 'active' "
"    ELSE t.status END, "
"  reason = CASE WHEN EXCLUDED.reason LIKE 'deauthorized:%' OR EXCLUDED.reason LIKE 'uninstalled:%' "
"    OR (EXCLUDED.reason LIKE 'suspended:%' AND t.status = 'active') "
"    OR (EXCLUDED.reason LIKE 'authorized:%' AND t.reason LIKE 'deauthorized:%') "
"    OR (EXCLUDED.reason LIKE 'unsuspended:%' AND t.reason LIKE 'suspended:%') THEN EXCLUDED.reason "
"    ELSE t.reason END, "
"  last_seen = now() "
"WHERE (EXCLUDED.context IS NOT NULL AND t.context IS DISTINCT FROM EXCLUDED.context) "
"   OR ((EXCLUDED.reason LIKE 'deauthorized:%' OR EXCLUDED.reason LIKE 'uninstalled:%') AND t.status <> 'disabled') "
"   OR (EXCLUDED.reason LIKE 'suspended:%' AND t.status = 'active') "
"   OR (EXCLUDED.reason LIKE 'authorized:%' AND t.reason LIKE 'deauthorized:%') "
"   OR (EXCLUDED.reason LIKE 'unsuspended:%' AND t.reason LIKE 'suspended:%')";

/* Plans this file's statements once per session. */
void
intake_write_prepare(void)
{
	if (inbox_plan == NULL)
	{
		Oid			types[1] = {INT8OID};

		inbox_plan = wi_keep_plan(inbox_insert_sql, 1, types);
	}
	if (delivery_plan == NULL)
	{
		Oid			types[1] = {INT8OID};

		delivery_plan = wi_keep_plan(delivery_insert_sql, 1, types);
	}
	if (tenants_plan == NULL)
	{
		Oid			types[4] = {INT4ARRAYOID, TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID};

		tenants_plan = wi_keep_plan(tenants_insert_sql, 4, types);
	}
}

/*
 * The rows a writing statement reads: rows[idx[0..n-1]] of the batch in
 * progress, served by _intake_inbox_rows() and _intake_delivery_rows()
 * under a handle that is only valid while that statement runs.  One
 * function call that fills one tuplestore costs a fraction of building an
 * array per column and unnesting each of them.
 */
static struct
{
	int64		handle;
	Row		   *rows;
	int		   *idx;
	int			n;
}			batch_rows;

/* Run plan (its one argument the handle) over rows[idx[0..n-1]]. */
static int
batch_rows_run(SPIPlanPtr plan, Row *rows, int *idx, int n)
{
	static int64 last_handle = 0;
	Datum		args[1];
	int			rc;

	batch_rows.handle = ++last_handle;
	batch_rows.rows = rows;
	batch_rows.idx = idx;
	batch_rows.n = n;
	args[0] = Int64GetDatum(batch_rows.handle);
	PG_TRY();
	{
		rc = SPI_execute_plan(plan, args, NULL, false, 0);
	}
	PG_FINALLY();
	{
		batch_rows.rows = NULL;
	}
	PG_END_TRY();
	return rc;
}

/* The tuplestore of a batch-rows function, after checking its handle. */
static Tuplestorestate *
batch_rows_start(FunctionCallInfo fcinfo, const char *name)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	if (batch_rows.rows == NULL || PG_ARGISNULL(0) ||
		PG_GETARG_INT64(0) != batch_rows.handle)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s() serves only the statements of intake_batch()", name),
				 errdetail("There is no batch in progress with this handle.")));
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	return rsinfo->setResult;
}

static inline Datum
text_or_null(const char *s, bool *isnull)
{
	*isnull = s == NULL;
	return s ? CStringGetTextDatum(s) : (Datum) 0;
}

/* The columns of inbox_insert_sql, in its order, and their types. */
static const WiBulkColumn inbox_cols[] = {
	{"source_id", INT4OID}, {"event_id", TEXTOID}, {"correlation_id", TEXTOID},
	{"event_type", TEXTOID}, {"object_type", TEXTOID}, {"object_id", TEXTOID},
	{"strategy", TEXTOID}, {"route_id", INT4OID}, {"route_version", INT4OID},
	{"provider_version", NUMERICOID}, {"provider_time", TIMESTAMPTZOID},
	{"status_value", TEXTOID}, {"payload", JSONBOID}, {"raw_body", BYTEAOID},
	{"body_sha256", BYTEAOID}, {"status", TEXTOID}, {"reason", TEXTOID},
	{"tenant", TEXTOID}, {"tenant_context", TEXTOID}
};
#define INBOX_NCOLS lengthof(inbox_cols)

/* The columns of delivery_insert_sql, in its order, and their types. */
static const WiBulkColumn delivery_cols[] = {
	{"source_id", INT4OID}, {"event_id", TEXTOID}, {"delivery_id", TEXTOID},
	{"body_sha256", BYTEAOID}, {"body_size", INT4OID}, {"outcome", TEXTOID},
	{"tenant", TEXTOID}
};
#define DELIVERY_NCOLS lengthof(delivery_cols)

/* r's inbox row, in inbox_cols. */
static void
inbox_values(Row *r, Datum *v, bool *nulls)
{
	bool		quarantined = r->status == INTAKE_STATUS_QUARANTINED;

	v[0] = Int32GetDatum(r->src->id);
	nulls[0] = false;
	v[1] = text_or_null(r->event_id, &nulls[1]);
	v[2] = text_or_null(r->correlation_id, &nulls[2]);
	v[3] = text_or_null(r->event_type, &nulls[3]);
	v[4] = text_or_null(r->found.object_type, &nulls[4]);
	v[5] = text_or_null(r->found.object_id, &nulls[5]);
	v[6] = text_or_null(r->strategy, &nulls[6]);
	v[7] = Int32GetDatum(r->route_id);
	nulls[7] = !r->have_route;
	v[8] = Int32GetDatum(r->route_version);
	nulls[8] = !r->have_route;
	v[9] = r->found.version;
	nulls[9] = r->found.version_null;
	v[10] = r->found.provider_time;
	nulls[10] = r->found.time_null;
	v[11] = text_or_null(r->found.status_value, &nulls[11]);
	v[12] = JsonbPGetDatum(r->payload);
	nulls[12] = r->payload == NULL;
	/* the exact bytes are kept for every delivery set aside for a person */
	v[13] = PointerGetDatum(r->body);
	nulls[13] = !(r->payload == NULL || quarantined);
	v[14] = PointerGetDatum(r->digest);
	nulls[14] = false;
	v[15] = text_or_null(intake_status_name(r->status), &nulls[15]);
	v[16] = text_or_null(r->reason, &nulls[16]);
	v[17] = text_or_null(r->tenant ? r->tenant : "", &nulls[17]);
	v[18] = text_or_null(r->tenant_context, &nulls[18]);
}

/* r's audit row, in delivery_cols. */
static void
delivery_values(Row *r, Datum *v, bool *nulls)
{
	v[0] = Int32GetDatum(r->src->id);
	nulls[0] = false;
	v[1] = text_or_null(r->event_id, &nulls[1]);
	v[2] = text_or_null(r->delivery_id, &nulls[2]);
	v[3] = PointerGetDatum(r->digest);
	nulls[3] = false;
	v[4] = Int32GetDatum(VARSIZE_ANY_EXHDR(r->body));
	nulls[4] = false;
	v[5] = text_or_null(intake_outcome_name(r->outcome), &nulls[5]);
	v[6] = text_or_null(r->tenant ? r->tenant : "", &nulls[6]);
}

/*
 * _intake_inbox_rows(handle bigint) returns the inbox rows, in the columns
 * of inbox_insert_sql.
 */
Datum
wi_intake_inbox_rows(PG_FUNCTION_ARGS)
{
	Tuplestorestate *ts = batch_rows_start(fcinfo, "_intake_inbox_rows");
	TupleDesc	desc = ((ReturnSetInfo *) fcinfo->resultinfo)->setDesc;

	for (int k = 0; k < batch_rows.n; k++)
	{
		Datum		v[INBOX_NCOLS];
		bool		nulls[INBOX_NCOLS];

		inbox_values(&batch_rows.rows[batch_rows.idx[k]], v, nulls);
		tuplestore_putvalues(ts, desc, v, nulls);
	}
	return (Datum) 0;
}

/*
 * _intake_delivery_rows(handle bigint) returns the audit rows, in the
 * columns of delivery_insert_sql.
 */
Datum
wi_intake_delivery_rows(PG_FUNCTION_ARGS)
{
	Tuplestorestate *ts = batch_rows_start(fcinfo, "_intake_delivery_rows");
	TupleDesc	desc = ((ReturnSetInfo *) fcinfo->resultinfo)->setDesc;

	for (int k = 0; k < batch_rows.n; k++)
	{
		Datum		v[DELIVERY_NCOLS];
		bool		nulls[DELIVERY_NCOLS];

		delivery_values(&batch_rows.rows[batch_rows.idx[k]], v, nulls);
		tuplestore_putvalues(ts, desc, v, nulls);
	}
	return (Datum) 0;
}

/* The outcome of a row the inbox took; returns whether it is pending. */
static bool
taken(Row *r)
{
	r->outcome = r->status == INTAKE_STATUS_QUARANTINED ? INTAKE_QUARANTINED : INTAKE_NEW;
	return r->status == INTAKE_STATUS_PENDING;
}

/*
 * inbox_direct_rows
 *		Write the inbox rows idx[0..n-1] as COPY would (bulk.c): a row whose
 *		key the inbox already shows, or an earlier row of the batch holds, is
 *		a duplicate and is not written.  Returns -1 when the inbox needs the
 *		statement (a trigger, say), else whether a new row is pending.
 */
static int
inbox_direct_rows(Row *rows, int *idx, int n)
{
	WiBulk	   *b = wi_bulk_open("webhook_inbox", "inbox", inbox_cols, INBOX_NCOLS);
	bool		wake = false;

	if (b == NULL)
		return -1;
	for (int k = 0; k < n; k++)
	{
		Row		   *r = &rows[idx[k]];
		Datum		v[INBOX_NCOLS];
		bool		nulls[INBOX_NCOLS];

		/* sorted: equal keys are neighbours, and the first one is written */
		if (k > 0 && intake_same_event(&rows[idx[k - 1]], r))
			continue;
		inbox_values(r, v, nulls);
		if (wi_bulk_key_exists(b, "inbox_source_event_key", v, 2))
			continue;
		wi_bulk_add(b, v, nulls);
		wake |= taken(r);
	}
	wi_bulk_close(b);
	return wake ? 1 : 0;
}

static void
inbox_direct_step(void *arg)
{
	RowSet	   *set = arg;

	set->result = inbox_direct_rows(set->rows, set->idx, set->n);
}

/*
 * inbox_direct
 *		inbox_direct_rows() in a subtransaction.  A key that another
 *		transaction took after this one's snapshot makes the unique index
 *		raise; then nothing of it is kept and the batch goes through the ON
 *		CONFLICT statement, which waits for such keys and counts them as
 *		duplicates.  Returns -1 for the statement, else whether to wake.
 */
static int
inbox_direct(Row *rows, int *idx, int n)
{
	RowSet		set = {rows, idx, n, -1};
	ErrorData  *edata = intake_in_subxact(inbox_direct_step, &set);

	if (edata == NULL)
		return set.result;
	if (edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION)
		ReThrowError(edata);
	FreeErrorData(edata);
	for (int k = 0; k < n; k++)
		rows[idx[k]].outcome = INTAKE_DUPLICATE;
	return -1;
}

/*
 * intake_write_inbox
 *		Insert the inbox rows idx[0..n-1] (sorted by source and event id);
 *		the rows whose key was already taken are duplicates.  Returns whether
 *		any new row is pending (the worker is to be woken).
 */
bool
intake_write_inbox(Row *rows, int *idx, int n)
{
	int			rc;
	int			direct;
	bool		wake = false;

	if (n == 0)
		return false;
	for (int k = 0; k < n; k++)
		rows[idx[k]].outcome = INTAKE_DUPLICATE;	/* until the row is written */
	direct = inbox_direct(rows, idx, n);
	if (direct >= 0)
		return direct == 1;

	rc = batch_rows_run(inbox_plan, rows, idx, n);
	if (rc != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "webhook_inbox: inserting into the inbox failed: %s", SPI_result_code_string(rc));

	/*
	 * Returned keys come in the order written; of equal keys in the batch
	 * only the first is written, so each key matches the next row holding it.
	 */
	for (uint64 t = 0, k = 0; t < SPI_processed; t++)
	{
		HeapTuple	tup = SPI_tuptable->vals[t];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		int32		sid = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
		char	   *ev = TextDatumGetCString(SPI_getbinval(tup, desc, 2, &isnull));

		for (; k < (uint64) n; k++)
		{
			Row		   *r = &rows[idx[k]];

			if (r->src->id == sid && strcmp(r->event_id, ev) == 0)
			{
				wake |= taken(r);
				k++;
				break;
			}
		}
	}
	SPI_freetuptable(SPI_tuptable);
	return wake;
}

/*
 * The audit rows of every accepted delivery, duplicates included, at once:
 * written directly, or by the statement where the table needs it.
 */
void
intake_write_deliveries(Row *rows, int *idx, int n)
{
	WiBulk	   *b;
	int			rc;

	if (n == 0)
		return;
	b = wi_bulk_open("webhook_inbox", "deliveries", delivery_cols, DELIVERY_NCOLS);
	if (b != NULL)
	{
		for (int k = 0; k < n; k++)
		{
			Datum		v[DELIVERY_NCOLS];
			bool		nulls[DELIVERY_NCOLS];

			delivery_values(&rows[idx[k]], v, nulls);
			wi_bulk_add(b, v, nulls);
		}
		wi_bulk_close(b);
		return;
	}
	rc = batch_rows_run(delivery_plan, rows, idx, n);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "webhook_inbox: recording the deliveries failed: %s", SPI_result_code_string(rc));
}

/* The SHA-256 of body, with ctx (created once per batch, started anew here). */
bytea *
intake_sha256_of(pg_cryptohash_ctx *ctx, bytea *body)
{
	bytea	   *out = palloc(VARHDRSZ + PG_SHA256_DIGEST_LENGTH);

	if (ctx == NULL || pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (uint8 *) VARDATA_ANY(body), VARSIZE_ANY_EXHDR(body)) < 0 ||
		pg_cryptohash_final(ctx, (uint8 *) VARDATA(out), PG_SHA256_DIGEST_LENGTH) < 0)
		elog(ERROR, "webhook_inbox: could not compute SHA-256");
	SET_VARSIZE(out, VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	return out;
}

/*
 * Registers the tenants of the new rows idx[0..n-1] (see tenants_insert_sql);
 * nothing to do, and no statement, for a batch of single-account sources.
 */
void
intake_write_tenants(Row *rows, int *idx, int n)
{
	ArrBuild	sids;
	ArrBuild	tens;
	ArrBuild	ctxs;
	ArrBuild	lifes;
	Datum		args[4];
	int			rc;

	intake_arr_init(&sids, n);
	intake_arr_init(&tens, n);
	intake_arr_init(&ctxs, n);
	intake_arr_init(&lifes, n);
	for (int k = 0; k < n; k++)
	{
		Row		   *r = &rows[idx[k]];

		if (r->tenant == NULL || r->tenant[0] == '\0' || r->outcome != INTAKE_NEW)
			continue;
		intake_arr_add(&sids, Int32GetDatum(r->src->id), false);
		intake_arr_text(&tens, r->tenant);
		if (r->tenant_context)
			intake_arr_text(&ctxs, r->tenant_context);
		else
			intake_arr_add(&ctxs, (Datum) 0, true);
		/* a Connect account's own lifecycle (stripe-node Event.Type) */
		if (r->src->layout->kind == WI_KIND_stripe && r->event_type != NULL &&
			strcmp(r->event_type, "account.application.deauthorized") == 0)
			intake_arr_text(&lifes, "deauthorized");
		else if (r->src->layout->kind == WI_KIND_stripe && r->event_type != NULL &&
				 strcmp(r->event_type, "account.application.authorized") == 0)
			intake_arr_text(&lifes, "authorized");
		/* a Shopify app removed from a shop: its reads stop (credentials.sql) */
		else if (r->src->layout->kind == WI_KIND_shopify && r->event_type != NULL &&
				 strcmp(r->event_type, "app/uninstalled") == 0)
			intake_arr_text(&lifes, "app_uninstalled");
		/* a GitHub App's installation (X-GitHub-Event installation + action) */
		else if (r->src->layout->kind == WI_KIND_github && r->event_type != NULL &&
				 strcmp(r->event_type, "installation.deleted") == 0)
			intake_arr_text(&lifes, "uninstalled");
		else if (r->src->layout->kind == WI_KIND_github && r->event_type != NULL &&
				 strcmp(r->event_type, "installation.suspend") == 0)
			intake_arr_text(&lifes, "suspended");
		else if (r->src->layout->kind == WI_KIND_github && r->event_type != NULL &&
				 strcmp(r->event_type, "installation.unsuspend") == 0)
			intake_arr_text(&lifes, "unsuspended");
		else
			intake_arr_add(&lifes, (Datum) 0, true);
	}
	if (sids.n == 0)
		return;
	args[0] = intake_arr_done(&sids, INT4OID);
	args[1] = intake_arr_done(&tens, TEXTOID);
	args[2] = intake_arr_done(&ctxs, TEXTOID);
	args[3] = intake_arr_done(&lifes, TEXTOID);
	rc = SPI_execute_plan(tenants_plan, args, NULL, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "webhook_inbox: registering tenants failed: %s", SPI_result_code_string(rc));
}
