/*
 * compat_0_1_0_intake.c
 *		Release 0.1.0's own intake(), for a database whose extension is
 *		still at 0.1.0 (see compat.c).
 *
 * This is the 0.1.0 release's implementation (its extension/intake.c), on
 * 0.1.0's tables and its SQL helpers (_classify): a delivery taken in
 * before ALTER EXTENSION webhook_inbox UPDATE is a row exactly as 0.1.0
 * wrote it, which the update then carries forward like any other.  Do not
 * change its behaviour: it serves a frozen schema.  What it shares with
 * this release's intake is what has not changed since 0.1.0: where each
 * kind keeps its ids, the header lookup and the split of a dotted path
 * (intake_ids.c), and the text at a key path of the body, a setting, a
 * reason cut to length and a step run in a subtransaction (intake_utils.c).
 * A change there is a change of 0.1.0's intake too, and must keep its
 * results on 0.1.0's kinds.  When a release stops serving 0.1.0 (it no
 * longer ships the 0.1.0--X upgrade step), this file goes, with
 * compat_0_1_0_claim.c and compat_0_1_0_guard.c.
 *
 * wi_compat_0_1_0_intake() is called from intake()'s entry point
 * (intake.c) when wi_schema() says WI_SCHEMA_0_1_0, with that call's
 * fcinfo: the arguments are those of 0.1.0's declaration.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/cryptohash.h"
#include "common/sha2.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "intake.h"
#include "webhook_inbox.h"

/* The source row 0.1.0's intake needs. */
typedef struct Source010
{
	int32		id;
	char	   *kind;
	bool		enabled;
	Jsonb	   *settings;
} Source010;

/* What reading the body produced. */
typedef struct Extracted
{
	Jsonb	   *payload;		/* NULL if the body could not be read */
	char	   *event_id;
	char	   *event_type;
	bool		have_route;
	int32		route_id;
	int32		route_version;
	char	   *strategy;
	char	   *object_type;
	char	   *object_id;
	char	   *version;		/* numeric as text */
	char	   *provider_time;	/* timestamptz as text */
	char	   *status_value;
	char	   *reason;			/* set when the event must be quarantined */
} Extracted;

static SPIPlanPtr source_plan = NULL;
static SPIPlanPtr classify_plan = NULL;
static SPIPlanPtr inbox_plan = NULL;
static SPIPlanPtr delivery_plan = NULL;

static void
prepare_plans(void)
{
	if (source_plan == NULL)
	{
		Oid			types[1] = {TEXTOID};

		source_plan = wi_keep_plan(
			"SELECT id, kind, enabled, settings FROM webhook_inbox.sources WHERE name = $1",
			1, types);
	}
	if (classify_plan == NULL)
	{
		Oid			types[4] = {INT4OID, TEXTOID, TEXTOID, JSONBOID};

		classify_plan = wi_keep_plan(
			"SELECT route_id, route_version, strategy, object_type, object_id, "
			"version::text, provider_time::text, status_value "
			"FROM webhook_inbox._classify($1, $2, $3, $4)",
			4, types);
	}
	if (inbox_plan == NULL)
	{
		Oid			types[17] = {INT4OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID,
		TEXTOID, INT4OID, INT4OID, NUMERICOID, TIMESTAMPTZOID, TEXTOID, JSONBOID,
		BYTEAOID, BYTEAOID, TEXTOID, TEXTOID};

		inbox_plan = wi_keep_plan(
			"INSERT INTO webhook_inbox.inbox (source_id, event_id, correlation_id, event_type, "
			"object_type, object_id, strategy, route_id, route_version, provider_version, "
			"provider_time, status_value, payload, raw_body, body_sha256, status, reason) "
			"VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17) "
			"ON CONFLICT (source_id, event_id) DO NOTHING RETURNING id",
			17, types);
	}
	if (delivery_plan == NULL)
	{
		Oid			types[6] = {INT4OID, TEXTOID, TEXTOID, BYTEAOID, INT4OID, TEXTOID};

		delivery_plan = wi_keep_plan(
			"INSERT INTO webhook_inbox.deliveries (source_id, event_id, delivery_id, body_sha256, "
			"body_size, outcome) VALUES ($1, $2, $3, $4, $5, $6)",
			6, types);
	}
}

static char *
datum_text_or_null(HeapTuple tup, TupleDesc desc, int col)
{
	bool		isnull;

	(void) SPI_getbinval(tup, desc, col, &isnull);
	return isnull ? NULL : SPI_getvalue(tup, desc, col);
}

/*
 * Parse the body and classify the event.  Runs inside a subtransaction set
 * up by the caller: anything here may raise, and the caller turns the error
 * into a quarantine reason.  Results are allocated in the caller's context.
 */
static void
read_body(Source010 *src, const WiKindLayout *layout, char **hnames, char **hvalues,
		  int nheaders, bytea *body, Extracted *ex)
{
	int			len = VARSIZE_ANY_EXHDR(body);
	const char *data = VARDATA_ANY(body);
	char	   *text;
	const char *id_path[WI_MAX_PATH_KEYS];
	const char *type_path[WI_MAX_PATH_KEYS];
	Datum		args[4];
	int			rc;

	/*
	 * Ids that travel in headers are known whatever the body is, so even an
	 * unreadable body is deduplicated by the provider's own id.
	 */
	for (int i = 0; i < 3 && layout->id_headers[i] != NULL && ex->event_id == NULL; i++)
		ex->event_id = wi_header_get(hnames, hvalues, nheaders, layout->id_headers[i]);
	if (layout->type_header)
		ex->event_type = wi_header_get(hnames, hvalues, nheaders, layout->type_header);
	if (layout->kind == WI_KIND_hmac)
	{
		char	   *h = intake_settings_text(src->settings, "event_id_header");

		if (h)
			ex->event_id = wi_header_get(hnames, hvalues, nheaders, h);
		h = intake_settings_text(src->settings, "event_type_header");
		if (h)
			ex->event_type = wi_header_get(hnames, hvalues, nheaders, h);
	}

	if (memchr(data, '\0', len) != NULL)
	{
		ex->reason = pstrdup("invalid_json: body contains a NUL byte");
		return;
	}
	if (!pg_verify_mbstr(PG_UTF8, data, len, true))
	{
		ex->reason = pstrdup("invalid_utf8: body is not valid UTF-8");
		return;
	}
	text = pg_any_to_server(data, len, PG_UTF8);
	if (text == data)
		text = pnstrdup(data, len);
	ex->payload = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text)));

	/* the stable event id and the type, where the body holds them */
	if (ex->event_id == NULL && layout->id_path[0] != NULL)
		ex->event_id = intake_jsonb_path_text(ex->payload, layout->id_path);
	for (int i = 0; i < 2 && ex->event_type == NULL && layout->type_paths[i][0] != NULL; i++)
		ex->event_type = intake_jsonb_path_text(ex->payload, layout->type_paths[i]);
	if (layout->kind == WI_KIND_hmac)
	{
		char	   *p = intake_settings_text(src->settings, "event_id_path");

		if (ex->event_id == NULL && p && wi_split_key_path(p, id_path))
			ex->event_id = intake_jsonb_path_text(ex->payload, id_path);
		p = intake_settings_text(src->settings, "event_type_path");
		if (ex->event_type == NULL && p && wi_split_key_path(p, type_path))
			ex->event_type = intake_jsonb_path_text(ex->payload, type_path);
	}
	if (ex->event_type != NULL && layout->type_suffix_path[0] != NULL)
	{
		char	   *suffix = intake_jsonb_path_text(ex->payload, layout->type_suffix_path);

		if (suffix)
			ex->event_type = psprintf("%s.%s", ex->event_type, suffix);
	}

	if (ex->event_id != NULL && ex->event_id[0] == '\0')
		ex->event_id = NULL;
	if (ex->event_id == NULL)
	{
		ex->reason = pstrdup("missing_event_id: no event id where this kind keeps it");
		return;
	}
	if (ex->event_type == NULL || ex->event_type[0] == '\0')
	{
		ex->reason = pstrdup("missing_event_type: no event type where this kind keeps it");
		ex->event_type = NULL;
		return;
	}

	/* the route */
	args[0] = Int32GetDatum(src->id);
	args[1] = CStringGetTextDatum(src->kind);
	args[2] = CStringGetTextDatum(ex->event_type);
	args[3] = JsonbPGetDatum(ex->payload);
	rc = SPI_execute_plan(classify_plan, args, NULL, true, 1);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "webhook_inbox: classifying an event failed: %s", SPI_result_code_string(rc));
	else
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum		d;

		d = SPI_getbinval(tup, desc, 1, &isnull);
		ex->have_route = !isnull;
		if (ex->have_route)
		{
			ex->route_id = DatumGetInt32(d);
			ex->route_version = DatumGetInt32(SPI_getbinval(tup, desc, 2, &isnull));
			ex->strategy = datum_text_or_null(tup, desc, 3);
			ex->object_type = datum_text_or_null(tup, desc, 4);
			ex->object_id = datum_text_or_null(tup, desc, 5);
			ex->version = datum_text_or_null(tup, desc, 6);
			ex->provider_time = datum_text_or_null(tup, desc, 7);
			ex->status_value = datum_text_or_null(tup, desc, 8);
		}
		SPI_freetuptable(SPI_tuptable);
	}
	if (ex->have_route && strcmp(ex->strategy, "ignore") != 0)
	{
		if (ex->object_id == NULL || ex->object_id[0] == '\0')
			ex->reason = pstrdup("missing_object_id: the route's object id path found nothing");
		else if (ex->object_type == NULL || ex->object_type[0] == '\0')
			ex->reason = pstrdup("missing_object_type: the route's object type path found nothing");
		else if (strcmp(ex->strategy, "version") == 0 && ex->version == NULL
				 && strcmp(ex->status_value ? ex->status_value : "", "deleted") != 0)
			ex->reason = pstrdup("missing_version: the route's version path found nothing");
	}
}

/* read_body()'s arguments, for intake_in_subxact() */
typedef struct BodyRead
{
	Source010  *src;
	const WiKindLayout *layout;
	char	  **hnames;
	char	  **hvalues;
	int			nheaders;
	bytea	   *body;
	Extracted  *ex;
} BodyRead;

static void
read_body_step(void *arg)
{
	BodyRead   *b = (BodyRead *) arg;

	read_body(b->src, b->layout, b->hnames, b->hvalues, b->nheaders, b->body, b->ex);
}

/*
 * Run read_body() in a subtransaction; an error becomes ex->reason and the
 * partial results are discarded.
 */
static void
read_body_guarded(Source010 *src, const WiKindLayout *layout, char **hnames, char **hvalues,
				  int nheaders, bytea *body, Extracted *ex)
{
	BodyRead	b = {src, layout, hnames, hvalues, nheaders, body, ex};
	ErrorData  *edata = intake_in_subxact(read_body_step, &b);

	if (edata != NULL)
	{
		/*
		 * What was read before the failure lives in the caller's context and
		 * survives the rollback: keep the payload and ids, drop the route.
		 */
		const char *prefix = ex->payload == NULL ? "invalid_json" : "unclassifiable";

		ex->have_route = false;
		ex->strategy = ex->object_type = ex->object_id = NULL;
		ex->version = ex->provider_time = ex->status_value = NULL;
		ex->reason = intake_truncate_reason(prefix, edata->message);
		FreeErrorData(edata);
	}
}

static void
lookup_source(const char *name, Source010 *src)
{
	Datum		args[1] = {CStringGetTextDatum(name)};
	int			rc;
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	Datum		d;

	rc = SPI_execute_plan(source_plan, args, NULL, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "webhook_inbox: looking up a source failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("source \"%s\" does not exist", name),
				 errhint("Create it with webhook_inbox.create_source().")));
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	src->id = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
	src->kind = SPI_getvalue(tup, desc, 2);
	src->enabled = DatumGetBool(SPI_getbinval(tup, desc, 3, &isnull));
	d = SPI_getbinval(tup, desc, 4, &isnull);
	src->settings = isnull ? NULL : DatumGetJsonbPCopy(d);
	if (!src->enabled)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("source \"%s\" is disabled", name),
				 errhint("Enable it with UPDATE webhook_inbox.sources SET enabled = true.")));
}

/*
 * Deconstruct the flat {name, value, ...} array.  A malformed array is the
 * caller's bug, not the provider's, so it raises.
 */
static int
split_headers(ArrayType *arr, char ***names, char ***values)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int			npairs;

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("headers must be a one-dimensional array"),
				 errdetail("Pass {name, value, name, value, ...}.")));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n % 2 != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("headers must hold name and value pairs"),
				 errdetail("The array has %d elements.", n)));
	npairs = n / 2;
	*names = palloc0(sizeof(char *) * (npairs + 1));
	*values = palloc0(sizeof(char *) * (npairs + 1));
	for (int i = 0; i < npairs; i++)
	{
		if (nulls[2 * i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("header names must not be null")));
		(*names)[i] = TextDatumGetCString(elems[2 * i]);
		(*values)[i] = nulls[2 * i + 1] ? NULL : TextDatumGetCString(elems[2 * i + 1]);
	}
	return npairs;
}

static bytea *
sha256_of(bytea *body)
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);
	bytea	   *out = palloc(VARHDRSZ + PG_SHA256_DIGEST_LENGTH);

	if (ctx == NULL || pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (uint8 *) VARDATA_ANY(body), VARSIZE_ANY_EXHDR(body)) < 0 ||
		pg_cryptohash_final(ctx, (uint8 *) VARDATA(out), PG_SHA256_DIGEST_LENGTH) < 0)
		elog(ERROR, "webhook_inbox: could not compute SHA-256");
	pg_cryptohash_free(ctx);
	SET_VARSIZE(out, VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	return out;
}

static Datum
text_or_null(const char *s, char *nulls, int i)
{
	if (s == NULL)
	{
		nulls[i] = 'n';
		return (Datum) 0;
	}
	return CStringGetTextDatum(s);
}

/*
 * intake(source text, headers text[], body bytea) returns text
 *
 * Returns 'new', 'duplicate' or 'quarantined'.  Raises only for NULL
 * arguments, a malformed headers array, and an unknown or disabled source.
 */
Datum
wi_compat_0_1_0_intake(PG_FUNCTION_ARGS)
{
	char	   *source_name;
	ArrayType  *headers;
	bytea	   *body;
	char	  **hnames;
	char	  **hvalues;
	int			nheaders;
	Source010	src;
	const WiKindLayout *layout;
	Extracted	ex;
	bytea	   *digest;
	const char *status;
	const char *outcome;
	const char *delivery_id;
	Datum		args[17];
	char		nulls[17];
	int			rc;
	bool		inserted;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("source, headers and body must not be null")));
	source_name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	headers = PG_GETARG_ARRAYTYPE_P(1);
	body = PG_GETARG_BYTEA_PP(2);

	nheaders = split_headers(headers, &hnames, &hvalues);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "webhook_inbox: SPI_connect failed");
	prepare_plans();
	lookup_source(source_name, &src);
	layout = intake_layout_for(src.kind);
	digest = sha256_of(body);

	memset(&ex, 0, sizeof(ex));
	read_body_guarded(&src, layout, hnames, hvalues, nheaders, body, &ex);
	if (ex.event_id != NULL && ex.event_id[0] == '\0')
		ex.event_id = NULL;
	if (ex.event_type != NULL && ex.event_type[0] == '\0')
		ex.event_type = NULL;

	if (ex.reason != NULL)
		status = "quarantined";
	else if (!ex.have_route)
	{
		status = "ignored";
		ex.reason = pstrdup("no_route: no route matches this event type");
	}
	else if (strcmp(ex.strategy, "ignore") == 0)
	{
		status = "ignored";
		ex.reason = pstrdup("route: ignore");
	}
	else
		status = "pending";

	/*
	 * A quarantined delivery without an id still needs one for the unique
	 * key: the body's digest, so that retries of the same bytes dedupe.
	 */
	if (ex.event_id == NULL)
	{
		StringInfoData buf;

		initStringInfo(&buf);
		appendStringInfoString(&buf, "sha256:");
		for (int i = 0; i < PG_SHA256_DIGEST_LENGTH; i++)
			appendStringInfo(&buf, "%02x", (unsigned char) VARDATA(digest)[i]);
		ex.event_id = buf.data;
	}
	if (strcmp(status, "quarantined") == 0)
	{
		/* a quarantined event is never claimed: no route data is kept */
		ex.strategy = ex.object_type = ex.object_id = NULL;
	}

	memset(nulls, ' ', sizeof(nulls));
	args[0] = Int32GetDatum(src.id);
	args[1] = CStringGetTextDatum(ex.event_id);
	args[2] = text_or_null(wi_header_get(hnames, hvalues, nheaders, layout->correlation_header), nulls, 2);
	args[3] = text_or_null(ex.event_type, nulls, 3);
	args[4] = text_or_null(ex.object_type, nulls, 4);
	args[5] = text_or_null(ex.object_id, nulls, 5);
	args[6] = text_or_null(ex.strategy, nulls, 6);
	args[7] = Int32GetDatum(ex.route_id);
	args[8] = Int32GetDatum(ex.route_version);
	if (!ex.have_route)
		nulls[7] = nulls[8] = 'n';
	if (ex.version)
		args[9] = DirectFunctionCall3(numeric_in, CStringGetDatum(ex.version),
									  ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
	else
		nulls[9] = 'n';
	if (ex.provider_time)
		args[10] = DirectFunctionCall3(timestamptz_in, CStringGetDatum(ex.provider_time),
									   ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
	else
		nulls[10] = 'n';
	args[11] = text_or_null(ex.status_value, nulls, 11);
	if (ex.payload)
		args[12] = JsonbPGetDatum(ex.payload);
	else
		nulls[12] = 'n';
	/* the exact bytes are kept for every delivery set aside for a person */
	if (ex.payload == NULL || strcmp(status, "quarantined") == 0)
		args[13] = PointerGetDatum(body);
	else
		nulls[13] = 'n';
	args[14] = PointerGetDatum(digest);
	args[15] = CStringGetTextDatum(status);
	args[16] = text_or_null(ex.reason, nulls, 16);

	rc = SPI_execute_plan(inbox_plan, args, nulls, false, 1);
	if (rc != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "webhook_inbox: inserting into the inbox failed: %s", SPI_result_code_string(rc));
	inserted = SPI_processed == 1;

	if (!inserted)
		outcome = "duplicate";
	else if (strcmp(status, "quarantined") == 0)
		outcome = "quarantined";
	else
		outcome = "new";

	delivery_id = wi_header_get(hnames, hvalues, nheaders, "x-webhook-inbox-delivery");
	memset(nulls, ' ', sizeof(nulls));
	args[0] = Int32GetDatum(src.id);
	args[1] = CStringGetTextDatum(ex.event_id);
	args[2] = text_or_null(delivery_id, nulls, 2);
	args[3] = PointerGetDatum(digest);
	args[4] = Int32GetDatum(VARSIZE_ANY_EXHDR(body));
	args[5] = CStringGetTextDatum(outcome);
	rc = SPI_execute_plan(delivery_plan, args, nulls, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "webhook_inbox: recording the delivery failed: %s", SPI_result_code_string(rc));

	if (inserted && strcmp(status, "pending") == 0)
		wi_wake_worker_at_commit();

	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text(outcome));
}
