/*
 * compat_0_1_0.c
 *		Release 0.1.0's own intake(), claim() and upsert_object(), for a
 *		database whose extension is still at 0.1.0 (see compat.c).
 *
 * These are the 0.1.0 release's implementations (its extension/intake.c,
 * claim.c and guard.c), on 0.1.0's tables and its SQL helpers (_classify):
 * a delivery taken in before ALTER EXTENSION webhook_inbox UPDATE is a row
 * exactly as 0.1.0 wrote it, which the update then carries forward like any
 * other.  The only change: claim() scans its candidates in full (0.1.0's
 * background worker kept a scan floor; no worker runs on this schema, see
 * worker.c).  Do not change their behaviour: they serve a frozen schema.
 * When a release stops serving 0.1.0 (it no longer ships the
 * 0.1.0--X upgrade step), this file goes.
 *
 * Each function here is called from the entry point of the same SQL name
 * when wi_schema() says WI_SCHEMA_0_1_0, with that call's fcinfo: the
 * arguments are those of 0.1.0's declaration.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/cryptohash.h"
#include "common/sha2.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "intake_ids.h"
#include "webhook_inbox.h"

/* ---------- intake(source, headers, body) ---------- */

#define MAX_PATH_KEYS	4
#define MAX_REASON_LEN	200

/* An hmac source's dotted paths are split by intake_ids.c, to this depth. */
StaticAssertDecl(MAX_PATH_KEYS == WI_MAX_PATH_KEYS,
				 "0.1.0's key paths must be as deep as intake_ids.c splits them");

/*
 * Where a kind keeps its ids.  Header names are lowercase; body paths are
 * key paths from the top-level object.  The first present alternative wins.
 */
typedef struct KindLayout
{
	const char *kind;
	const char *id_headers[3];
	const char *id_path[MAX_PATH_KEYS];
	const char *type_header;
	const char *type_paths[2][MAX_PATH_KEYS];
	const char *type_suffix_path[MAX_PATH_KEYS];	/* appended as ".value" */
	const char *correlation_header;
} KindLayout;

static const KindLayout kind_layouts[] = {
	{"stripe", {NULL}, {"id"}, NULL, {{"type"}}, {NULL}, NULL},
	{"standard", {"webhook-id", "svix-id"}, {NULL}, NULL, {{"type"}}, {NULL}, NULL},
	{"shopify", {"x-shopify-webhook-id"}, {NULL}, "x-shopify-topic", {{NULL}}, {NULL},
	"x-shopify-event-id"},
	{"github", {"x-github-delivery"}, {NULL}, "x-github-event", {{NULL}}, {"action"}, NULL},
	{"razorpay", {"x-razorpay-event-id"}, {NULL}, NULL, {{"event"}}, {NULL}, NULL},
	{"slack", {NULL}, {"event_id"}, NULL, {{"event", "type"}, {"type"}}, {NULL}, NULL},
	{"paddle", {NULL}, {"event_id"}, NULL, {{"event_type"}}, {NULL}, NULL},
	{"checkout", {NULL}, {"id"}, NULL, {{"type"}}, {NULL}, NULL},
	/* hmac: read from the source's settings, see hmac_layout() */
	{"hmac", {NULL}, {NULL}, NULL, {{NULL}}, {NULL}, NULL},
};

/* The source row intake needs. */
typedef struct SourceInfo
{
	int32		id;
	char	   *kind;
	bool		enabled;
	Jsonb	   *settings;
} SourceInfo;

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

static const KindLayout *
layout_for(const char *kind)
{
	for (int i = 0; i < lengthof(kind_layouts); i++)
		if (strcmp(kind_layouts[i].kind, kind) == 0)
			return &kind_layouts[i];
	elog(ERROR, "webhook_inbox: no layout for kind \"%s\"", kind);
	return NULL;				/* keep compiler quiet */
}

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

/*
 * Text of the scalar at a key path of a JSON object, or NULL when a key is
 * missing, the value is null, or it is an object or array.
 */
static char *
jsonb_path_text(Jsonb *jb, const char *const *path)
{
	JsonbContainer *c = &jb->root;
	JsonbValue	v;
	JsonbValue *cur = NULL;

	if (path[0] == NULL || !JB_ROOT_IS_OBJECT(jb))
		return NULL;
	for (int i = 0; i < MAX_PATH_KEYS && path[i] != NULL; i++)
	{
		cur = getKeyJsonValueFromContainer(c, path[i], strlen(path[i]), &v);
		if (cur == NULL)
			return NULL;
		if (i + 1 < MAX_PATH_KEYS && path[i + 1] != NULL)
		{
			if (cur->type != jbvBinary || !JsonContainerIsObject(cur->val.binary.data))
				return NULL;
			c = cur->val.binary.data;
		}
	}
	switch (cur->type)
	{
		case jbvString:
			return pnstrdup(cur->val.string.val, cur->val.string.len);
		case jbvNumeric:
			return DatumGetCString(DirectFunctionCall1(numeric_out,
													   NumericGetDatum(cur->val.numeric)));
		case jbvBool:
			return pstrdup(cur->val.boolean ? "true" : "false");
		default:
			return NULL;
	}
}

static char *
settings_text(Jsonb *settings, const char *key)
{
	const char *path[MAX_PATH_KEYS] = {key};

	return settings ? jsonb_path_text(settings, path) : NULL;
}

static char *
truncate_reason(const char *prefix, const char *msg)
{
	char	   *r = psprintf("%s: %s", prefix, msg ? msg : "unknown error");

	if (strlen(r) > MAX_REASON_LEN)
		r[pg_mbcliplen(r, strlen(r), MAX_REASON_LEN)] = '\0';
	return r;
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
read_body(SourceInfo *src, const KindLayout *layout, char **hnames, char **hvalues,
		  int nheaders, bytea *body, Extracted *ex)
{
	int			len = VARSIZE_ANY_EXHDR(body);
	const char *data = VARDATA_ANY(body);
	char	   *text;
	const char *id_path[MAX_PATH_KEYS];
	const char *type_path[MAX_PATH_KEYS];
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
	if (strcmp(layout->kind, "hmac") == 0)
	{
		char	   *h = settings_text(src->settings, "event_id_header");

		if (h)
			ex->event_id = wi_header_get(hnames, hvalues, nheaders, h);
		h = settings_text(src->settings, "event_type_header");
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
		ex->event_id = jsonb_path_text(ex->payload, layout->id_path);
	for (int i = 0; i < 2 && ex->event_type == NULL && layout->type_paths[i][0] != NULL; i++)
		ex->event_type = jsonb_path_text(ex->payload, layout->type_paths[i]);
	if (strcmp(layout->kind, "hmac") == 0)
	{
		char	   *p = settings_text(src->settings, "event_id_path");

		if (ex->event_id == NULL && p && wi_split_key_path(p, id_path))
			ex->event_id = jsonb_path_text(ex->payload, id_path);
		p = settings_text(src->settings, "event_type_path");
		if (ex->event_type == NULL && p && wi_split_key_path(p, type_path))
			ex->event_type = jsonb_path_text(ex->payload, type_path);
	}
	if (ex->event_type != NULL && layout->type_suffix_path[0] != NULL)
	{
		char	   *suffix = jsonb_path_text(ex->payload, layout->type_suffix_path);

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

/*
 * Run read_body() in a subtransaction; an error becomes ex->reason and the
 * partial results are discarded.
 */
static void
read_body_guarded(SourceInfo *src, const KindLayout *layout, char **hnames, char **hvalues,
				  int nheaders, bytea *body, Extracted *ex)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcontext);
	PG_TRY();
	{
		read_body(src, layout, hnames, hvalues, nheaders, body, ex);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		const char *prefix;

		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;

		/*
		 * What was read before the failure lives in the caller's context and
		 * survives the rollback: keep the payload and ids, drop the route.
		 */
		prefix = ex->payload == NULL ? "invalid_json" : "unclassifiable";
		ex->have_route = false;
		ex->strategy = ex->object_type = ex->object_id = NULL;
		ex->version = ex->provider_time = ex->status_value = NULL;
		ex->reason = truncate_reason(prefix, edata->message);
		FreeErrorData(edata);
	}
	PG_END_TRY();
}

static void
lookup_source(const char *name, SourceInfo *src)
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
	SourceInfo	src;
	const KindLayout *layout;
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
	layout = layout_for(src.kind);
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

/* ---------- claim(worker, max_objects, lease, fetch_delay) ---------- */

#define CLAIM_COLUMNS 8

static SPIPlanPtr candidates_plan = NULL;
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
		Oid			t[6] = {INT4ARRAYOID, TEXTARRAYOID, TEXTARRAYOID, INT4OID, TEXTOID, INTERVALOID};

		/*
		 * Leases for the candidates, in one statement: an object is taken if
		 * no live claim holds it and this transaction gets its advisory lock
		 * (another claimer on it right now makes us skip it, never wait).
		 * The lease lookup is a correlated subquery so that it is an index
		 * probe per candidate, never a scan of a table full of dead leases.
		 */
		lease_plan = wi_keep_plan(
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
		 * per object.
		 */
		mark_plan = wi_keep_plan(
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
	{
		Oid			t[1] = {INT8ARRAYOID};

		unlease_plan = wi_keep_plan(
			"DELETE FROM webhook_inbox.object_leases WHERE token = ANY ($1)", 1, t);
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

/*
 * claim(worker text, max_objects int, lease interval)
 *	 returns table (claim_token, source, source_id, object_type, object_id,
 *					event_ids, strategy, expires_at)
 */
Datum
wi_compat_0_1_0_claim(PG_FUNCTION_ARGS)
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
		int64		after = 0;
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
	}

	if (ncands > 0)
	{
		Datum	   *sids = palloc(sizeof(Datum) * ncands);
		Datum	   *types = palloc(sizeof(Datum) * ncands);
		Datum	   *oids = palloc(sizeof(Datum) * ncands);
		Datum		la[6];
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
		}
		la[0] = PointerGetDatum(construct_array(sids, ncands, INT4OID, 4, true, TYPALIGN_INT));
		la[1] = PointerGetDatum(construct_array(types, ncands, TEXTOID, -1, false, TYPALIGN_INT));
		la[2] = PointerGetDatum(construct_array(oids, ncands, TEXTOID, -1, false, TYPALIGN_INT));
		la[3] = Int32GetDatum(max_objects);
		la[4] = CStringGetTextDatum(worker);
		la[5] = IntervalPGetDatum(lease);
		rc = SPI_execute_plan(lease_plan, la, NULL, false, 0);
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
			Datum		ma[4];
			int			r = 0;

			for (int k = 0; k < nleases; k++)
			{
				tk[k] = Int64GetDatum(ltoken[k]);
				ls[k] = sids[lcand[k]];
				lt[k] = types[lcand[k]];
				lo[k] = oids[lcand[k]];
			}
			ma[0] = PointerGetDatum(construct_array(tk, nleases, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
			ma[1] = PointerGetDatum(construct_array(ls, nleases, INT4OID, 4, true, TYPALIGN_INT));
			ma[2] = PointerGetDatum(construct_array(lt, nleases, TEXTOID, -1, false, TYPALIGN_INT));
			ma[3] = PointerGetDatum(construct_array(lo, nleases, TEXTOID, -1, false, TYPALIGN_INT));
			rc = SPI_execute_plan(mark_plan, ma, NULL, false, 0);
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

	SPI_finish();
	return (Datum) 0;
}

/* ---------- upsert_object(source, object_type, object_id, ...) ---------- */

static SPIPlanPtr source_id_plan = NULL;
static SPIPlanPtr fence_plan = NULL;
static SPIPlanPtr insert_plan = NULL;
static SPIPlanPtr lock_plan = NULL;
static SPIPlanPtr update_plan = NULL;
static SPIPlanPtr transition_plan = NULL;
static SPIPlanPtr delete_plan = NULL;

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

		/* fenced if another claim holds the object or a newer token saved it */
		fence_plan = wi_keep_plan(
			"SELECT EXISTS (SELECT 1 FROM webhook_inbox.object_leases l "
			"  WHERE l.source_id = $1 AND l.object_type = $2 AND l.object_id = $3 AND l.token <> $4) "
			"OR EXISTS (SELECT 1 FROM webhook_inbox.objects o "
			"  WHERE o.source_id = $1 AND o.object_type = $2 AND o.object_id = $3 "
			"  AND o.fence_token > $4)", 4, t);
	}
	insert_plan = wi_keep_plan(
		"INSERT INTO webhook_inbox.objects (source_id, object_type, object_id) "
		"VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", 3, key);
	delete_plan = wi_keep_plan(
		"DELETE FROM webhook_inbox.objects WHERE source_id = $1 AND object_type = $2 "
		"AND object_id = $3", 3, key);
	lock_plan = wi_keep_plan(
		"SELECT status, version, state, deleted, (status IS NULL AND version IS NULL "
		"AND state IS NULL AND NOT deleted) AS fresh FROM webhook_inbox.objects "
		"WHERE source_id = $1 AND object_type = $2 AND object_id = $3 FOR UPDATE", 3, key);
	{
		Oid			t[9] = {INT4OID, TEXTOID, TEXTOID, TEXTOID, NUMERICOID, JSONBOID, BOOLOID,
		INT8OID, INT8OID};

		update_plan = wi_keep_plan(
			"UPDATE webhook_inbox.objects SET status = coalesce($4, status), version = coalesce($5, version), "
			"state = coalesce($6, state), deleted = $7, "
			"fence_token = greatest(fence_token, $8), last_event_id = coalesce($9, last_event_id), "
			"updated_at = now() "
			"WHERE source_id = $1 AND object_type = $2 AND object_id = $3", 9, t);
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
 */
Datum
wi_compat_0_1_0_upsert_object(PG_FUNCTION_ARGS)
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

	if (fresh)
		result = "applied";
	else if (!has_version)
		result = same_content ? "duplicate" : "applied";
	else if (old_deleted && !deleted)
		result = "stale";		/* a tombstone is final for versioned objects */
	else if (!old_has_version)
		result = "applied";
	else
	{
		int			c = DatumGetInt32(DirectFunctionCall2(numeric_cmp, version, old_version));

		if (c > 0)
			result = "applied";
		else if (c < 0)
			result = "stale";
		else
			result = same_content ? "duplicate" : "tie";
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
