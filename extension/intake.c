/*
 * intake.c
 *		webhook_inbox.intake_batch(sources, headers, bodies) and its
 *		one-delivery form intake(source, headers, body): how a verified
 *		delivery enters the inbox.
 *
 * The receiver has already verified the signature over the raw bytes; this
 * code decides what each delivery is.  It extracts the provider's stable
 * event id by the source's kind (a header or a body field) and the tenant
 * (the provider account a platform's delivery belongs to: read_tenant()),
 * classifies the event through the routes, records the delivery attempt,
 * inserts the inbox row once per (source, event id), and registers the
 * tenants the new rows name.
 *
 * A batch is written set-based: one statement reads the route of each event
 * type of the batch that the session has not kept (route_cache.c;
 * route_eval.c applies its paths to each payload), and for sources whose
 * scheme signs only the body one records the digests that refuse replays.
 * The inbox and audit rows are written as COPY writes rows (bulk.c): each
 * key is looked up once in the inbox's unique index, the new rows go to the
 * heap together, then to the indexes.  Where a table needs a statement's
 * machinery (a trigger, row security) or a key turns out to be taken
 * meanwhile, one INSERT ... ON CONFLICT DO NOTHING writes the batch's inbox
 * rows and one INSERT its audit rows instead.  Nothing in it may raise for
 * one delivery's content, since an error would fail its batch-mates too, so everything that depends
 * on the bytes is checked in C first without raising: UTF-8, JSON syntax,
 * nesting depth, number ranges, id lengths, the source being known and
 * enabled.  What fails a check is that delivery's own outcome:
 * 'quarantined' (an authentic body we cannot read is kept with its raw
 * bytes) or 'refused' (nothing stored; the receiver answers 4xx).  Only the
 * routes' paths, which users write, can still raise while classifying (a
 * version that is not a timestamp, say); the batch's classification runs in
 * one subtransaction and, if that fails, each event is classified on its own
 * so that only the offending one is quarantined.
 *
 * Rows are written in a stable order, (source id, event id) and (source id,
 * body digest), so that two batches on different connections that carry the
 * same keys wait for each other in the same order and never deadlock.
 */
#include "postgres.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

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
#include "compat.h"
#include "intake_ids.h"
#include "json_fast.h"
#include "route_cache.h"
#include "route_eval.h"
#include "webhook_inbox.h"

PG_FUNCTION_INFO_V1(wi_intake);
PG_FUNCTION_INFO_V1(wi_intake_batch);
PG_FUNCTION_INFO_V1(wi_intake_inbox_rows);
PG_FUNCTION_INFO_V1(wi_intake_delivery_rows);

#define MAX_REASON_LEN	200

/* Limits on what a delivery may carry; each is named in its refusal. */
#define MAX_ID_BYTES	255		/* event id, object id and type */
#define MAX_JSON_BYTES	(32 * 1024 * 1024)	/* larger bodies are kept raw */

/* The source row intake needs. */
typedef struct SourceInfo
{
	char	   *name;
	int32		id;
	char	   *kind;
	bool		enabled;
	Jsonb	   *settings;
	const WiKindLayout *layout;
	Datum		replay_window;	/* interval; valid only if replay */
	bool		replay;			/* digests refuse replays for this source */
} SourceInfo;

/* One delivery of a batch and everything decided about it. */
typedef struct Row
{
	int			ord;			/* 1-based position in the call */
	SourceInfo *src;			/* NULL when refused before lookup */
	char	  **hnames;
	char	  **hvalues;
	int			nheaders;
	bytea	   *body;
	bytea	   *digest;

	Jsonb	   *payload;		/* NULL if the body could not be read */
	char	   *event_id;
	char	   *event_type;
	char	   *correlation_id;
	char	   *delivery_id;
	char	   *tenant;			/* the provider account; "" for a single account */
	char	   *tenant_context;	/* Stripe's context, or NULL */
	bool		have_route;
	int32		route_id;
	int32		route_version;
	char	   *strategy;
	WiClassified found;			/* what the route read from the payload */

	const char *status;			/* the inbox row's status */
	char	   *reason;			/* why quarantined, ignored or refused */
	const char *outcome;		/* new | duplicate | quarantined | refused */
	char	   *answer_reason;	/* the reason returned to the caller */
	bool		replayed;		/* body digest seen within the window */
} Row;

static SPIPlanPtr sources_plan = NULL;
static SPIPlanPtr routes_plan = NULL;
static SPIPlanPtr seen_plan = NULL;
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

/*
 * The route of each distinct (source, kind, event type) of a batch; columns
 * 7 to 11 are the paths in WiRoutePath order.
 */
static const char *const routes_sql =
"SELECT t.ord, r.id, r.version, r.strategy, r.class, r.object_type, r.status_path, "
"r.object_type_path, r.object_id_path, r.version_path, r.time_path, r.tombstone "
"FROM ROWS FROM (unnest($1::integer[]), unnest($2::text[]), unnest($3::text[])) "
"WITH ORDINALITY AS t(source_id, kind, event_type, ord) "
"CROSS JOIN LATERAL webhook_inbox._route_of(t.source_id, t.kind, t.event_type) r";

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

/*
 * A digest is new for a source when no row holds it, or the row's window has
 * passed (then it starts a new window).  Returned rows are the new ones.
 */
static const char *const seen_insert_sql =
"INSERT INTO webhook_inbox.seen_bodies AS s (source_id, body_sha256, event_id, expires_at) "
"SELECT b.source_id, b.sha, b.event_id, now() + b.win "
"FROM unnest($1::integer[], $2::bytea[], $3::text[], $4::interval[]) AS b(source_id, sha, event_id, win) "
"ON CONFLICT (source_id, body_sha256) DO UPDATE "
"SET event_id = excluded.event_id, first_seen_at = now(), expires_at = excluded.expires_at "
"WHERE s.expires_at <= now() "
"RETURNING source_id, body_sha256";

static void
prepare_plans(void)
{
	if (sources_plan == NULL)
	{
		Oid			types[1] = {TEXTARRAYOID};

		/* generic: planned once per session, not for every batch */
		sources_plan = wi_keep_plan_opts(
			"SELECT name, id, kind, enabled, settings, replay_window "
			"FROM webhook_inbox.sources WHERE name = ANY ($1) FOR KEY SHARE",
			1, types, CURSOR_OPT_GENERIC_PLAN);
	}
	if (routes_plan == NULL)
	{
		Oid			types[3] = {INT4ARRAYOID, TEXTARRAYOID, TEXTARRAYOID};

		/* _route_of() is inlined here, in one generic plan */
		routes_plan = wi_keep_plan_opts(routes_sql, 3, types, CURSOR_OPT_GENERIC_PLAN);
	}
	if (seen_plan == NULL)
	{
		Oid			types[4] = {INT4ARRAYOID, BYTEAARRAYOID, TEXTARRAYOID, INTERVALARRAYOID};

		seen_plan = wi_keep_plan(seen_insert_sql, 4, types);
	}
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

static const WiKindLayout *
layout_for(const char *kind)
{
	const WiKindLayout *layout = wi_kind_layout(kind);

	if (layout == NULL)
		elog(ERROR, "webhook_inbox: no layout for kind \"%s\"", kind);
	return layout;
}

/* Case-insensitive header lookup over the row's name/value arrays. */
static char *
header_get(Row *r, const char *name)
{
	return wi_header_get(r->hnames, r->hvalues, r->nheaders, name);
}

/*
 * Text of the scalar at a key path of a JSON object, or NULL when a key is
 * missing, the value is null, or it is an object or array.
 */
static char *
jsonb_path_text(void *body, const char *const *path)
{
	Jsonb	   *jb = (Jsonb *) body;
	JsonbContainer *c = &jb->root;
	JsonbValue	v;
	JsonbValue *cur = NULL;

	if (path[0] == NULL || !JB_ROOT_IS_OBJECT(jb))
		return NULL;
	for (int i = 0; i < WI_MAX_PATH_KEYS && path[i] != NULL; i++)
	{
		cur = getKeyJsonValueFromContainer(c, path[i], strlen(path[i]), &v);
		if (cur == NULL)
			return NULL;
		if (i + 1 < WI_MAX_PATH_KEYS && path[i + 1] != NULL)
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
	const char *path[WI_MAX_PATH_KEYS] = {key};

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

/*
 * The payload is built during the one parse that validates it: the parser's
 * semantic actions push each token into a JsonbParseState, the way jsonb_in
 * does, but nothing in them raises for the body's content.  A body the
 * parser rejects leaves a half-built value that is simply dropped.
 */
typedef struct BuildState
{
	JsonbParseState *parse;
	JsonbValue *res;
} BuildState;

static void
build_push(BuildState *b, JsonbIteratorToken tok, JsonbValue *v)
{
	b->res = pushJsonbValue(&b->parse, tok, v);
}

static void
build_object_start(void *state)
{
	build_push((BuildState *) state, WJB_BEGIN_OBJECT, NULL);
}

static void
build_object_end(void *state)
{
	build_push((BuildState *) state, WJB_END_OBJECT, NULL);
}

static void
build_array_start(void *state)
{
	build_push((BuildState *) state, WJB_BEGIN_ARRAY, NULL);
}

static void
build_array_end(void *state)
{
	build_push((BuildState *) state, WJB_END_ARRAY, NULL);
}

static void
build_field(void *state, char *fname, bool isnull)
{
	JsonbValue	v;

	v.type = jbvString;
	v.val.string.len = strlen(fname);
	v.val.string.val = fname;
	build_push((BuildState *) state, WJB_KEY, &v);
}

/*
 * A scalar: an array element, an object's value, or the whole document (a
 * raw scalar, stored as a one-element array marked rawScalar).  Numbers
 * reach numeric_in only after parse_json's scan bounded their digits and exponent,
 * so it cannot raise.
 */
static void
build_scalar(void *state, char *token, JsonTokenType tokentype)
{
	BuildState *b = (BuildState *) state;
	JsonbValue	v;

	switch (tokentype)
	{
		case JSON_TOKEN_STRING:
			v.type = jbvString;
			v.val.string.len = strlen(token);
			v.val.string.val = token;
			break;
		case JSON_TOKEN_NUMBER:
			v.type = jbvNumeric;
			v.val.numeric = DatumGetNumeric(DirectFunctionCall3(numeric_in,
																CStringGetDatum(token),
																ObjectIdGetDatum(InvalidOid),
																Int32GetDatum(-1)));
			break;
		case JSON_TOKEN_TRUE:
			v.type = jbvBool;
			v.val.boolean = true;
			break;
		case JSON_TOKEN_FALSE:
			v.type = jbvBool;
			v.val.boolean = false;
			break;
		default:
			v.type = jbvNull;
			break;
	}

	if (b->parse == NULL)
	{
		JsonbValue	va;

		va.type = jbvArray;
		va.val.array.rawScalar = true;
		va.val.array.nElems = 1;
		build_push(b, WJB_BEGIN_ARRAY, &va);
		build_push(b, WJB_ELEM, &v);
		build_push(b, WJB_END_ARRAY, NULL);
	}
	else if (b->parse->contVal.type == jbvArray)
		build_push(b, WJB_ELEM, &v);
	else
		build_push(b, WJB_VALUE, &v);
}

/*
 * parse_json
 *		The payload of the text at data (len bytes, in the database
 *		encoding), or NULL with *why set to the quarantine reason, decided
 *		without raising.  Intake calls it for what wi_jsonb_fast() does not
 *		take: errors, \u escapes, control characters, the limits below.  A structural scan first bounds what the parser's
 *		recursion and numeric_in would raise about (nesting, number sizes);
 *		then one pg_parse_json pass both validates the text (syntax and
 *		escape errors come back as codes) and builds the jsonb.
 */
static Jsonb *
parse_json(char *data, int len, char **why)
{
	bool		in_string = false;
	int			depth = 0;
	JsonLexContext *lex;
	JsonParseErrorType err;
	JsonSemAction sem;
	BuildState	b;

	for (int i = 0; i < len; i++)
	{
		char		c = data[i];

		if (in_string)
		{
			if (c == '\\')
				i++;
			else if (c == '"')
				in_string = false;
			continue;
		}
		if (c == '"')
			in_string = true;
		else if (c == '[' || c == '{')
		{
			if (++depth > WI_JSON_MAX_DEPTH)
			{
				*why = psprintf("invalid_json: nested deeper than %d levels", WI_JSON_MAX_DEPTH);
				return NULL;
			}
		}
		else if (c == ']' || c == '}')
			depth--;
		else if (c == '-' || (c >= '0' && c <= '9'))
		{
			int			end;

			if (!wi_json_number_in_range(data + i, len - i, &end))
			{
				*why = psprintf("invalid_json: a number has more than %d digits or an exponent beyond %d",
								WI_JSON_MAX_NUM_DIGITS, WI_JSON_MAX_NUM_EXP);
				return NULL;
			}
			i += end - 1;
		}
	}

	memset(&b, 0, sizeof(b));
	memset(&sem, 0, sizeof(sem));
	sem.semstate = &b;
	sem.object_start = build_object_start;
	sem.object_end = build_object_end;
	sem.array_start = build_array_start;
	sem.array_end = build_array_end;
	sem.object_field_start = build_field;
	sem.scalar = build_scalar;

	lex = makeJsonLexContextCstringLen(data, len, GetDatabaseEncoding(), true);
	err = pg_parse_json(lex, &sem);
	if (err != JSON_SUCCESS)
	{
		*why = truncate_reason("invalid_json", json_errdetail(err, lex));
		return NULL;
	}
	return JsonbValueToJsonb(b.res);
}

/*
 * read_ids
 *		Parse r's body and find its event id, type and correlation id.  Never
 *		raises for the body's content: an unreadable body leaves r->payload
 *		NULL and sets r->reason.  Ids that travel in headers are read first,
 *		so even an unreadable body is deduplicated by the provider's own id.
 */
static void
read_ids(Row *r)
{
	SourceInfo *src = r->src;
	const WiKindLayout *layout = src->layout;
	int			len = VARSIZE_ANY_EXHDR(r->body);
	char	   *data = VARDATA_ANY(r->body);
	char	   *text;
	char	   *why = NULL;
	int			enc = GetDatabaseEncoding();
	WiIdPlaces	hmac = {NULL, NULL, NULL, NULL};
	const WiIdPlaces *places = NULL;

	if (layout->kind == WI_KIND_hmac)
	{
		hmac.event_id_header = settings_text(src->settings, "event_id_header");
		hmac.event_type_header = settings_text(src->settings, "event_type_header");
		hmac.event_id_path = settings_text(src->settings, "event_id_path");
		hmac.event_type_path = settings_text(src->settings, "event_type_path");
		places = &hmac;
	}
	wi_ids_from_headers(layout, places, r->hnames, r->hvalues, r->nheaders, &r->event_id, &r->event_type);
	r->correlation_id = header_get(r, layout->correlation_header);

	if ((why = (char *) wi_body_unreadable(data, len)) != NULL)
		why = pstrdup(why);
	else if (len > MAX_JSON_BYTES)
		why = psprintf("too_large: bodies over %d MB are kept raw, not parsed",
					   MAX_JSON_BYTES / (1024 * 1024));
	else if (enc != PG_UTF8 && enc != PG_SQL_ASCII &&
			 !pg_is_ascii(pnstrdup(data, len)))
		why = pstrdup("unconvertible: the database encoding is not UTF8");
	if (why == NULL && (r->payload = wi_jsonb_fast(data, len)) == NULL)
	{
		/* PostgreSQL's parser decides, and words why it refuses */
		text = pnstrdup(data, len);
		r->payload = parse_json(text, len, &why);
	}
	if (r->payload == NULL)
	{
		r->reason = why;
		return;
	}

	/* the stable event id and the type, where the body holds them */
	wi_ids_from_body(layout, places, jsonb_path_text, r->payload, &r->event_id, &r->event_type);
}

/* Is the body readable and identified, so that the routes can decide it? */
static bool
needs_route(Row *r)
{
	return r->outcome == NULL && r->reason == NULL;
}

/*
 * Check what only the event itself can get wrong, after read_ids(): an
 * over-long id refuses the delivery, a missing id or type quarantines it.
 */
static void
check_ids(Row *r)
{
	const char *why;

	if (r->event_id != NULL && r->event_id[0] == '\0')
		r->event_id = NULL;
	if (r->event_type != NULL && r->event_type[0] == '\0')
		r->event_type = NULL;
	if (r->event_id != NULL && strlen(r->event_id) > MAX_ID_BYTES)
	{
		r->outcome = "refused";
		r->answer_reason = psprintf("event_id_too_long: the event id is %zu bytes, the limit is %d",
									strlen(r->event_id), MAX_ID_BYTES);
		return;
	}
	if (r->event_type != NULL && strlen(r->event_type) > MAX_ID_BYTES)
	{
		r->outcome = "refused";
		r->answer_reason = psprintf("event_type_too_long: the event type is %zu bytes, the limit is %d",
									strlen(r->event_type), MAX_ID_BYTES);
		return;
	}
	if (r->correlation_id != NULL && strlen(r->correlation_id) > MAX_ID_BYTES)
	{
		r->outcome = "refused";
		r->answer_reason = psprintf("correlation_id_too_long: the correlation id is %zu bytes, the limit is %d",
									strlen(r->correlation_id), MAX_ID_BYTES);
		return;
	}
	if (r->reason != NULL)
		return;
	why = wi_ids_missing(&r->event_id, &r->event_type);
	if (why != NULL)
		r->reason = pstrdup(why);
}

/*
 * The JSON value at a key path of a top-level object into *buf, or NULL
 * when a key is missing (a JSON null is returned as a jbvNull value).
 */
static JsonbValue *
jsonb_path_value(Jsonb *jb, const char *const *path, JsonbValue *buf)
{
	JsonbContainer *c = &jb->root;
	JsonbValue *cur = NULL;

	if (!JB_ROOT_IS_OBJECT(jb))
		return NULL;
	for (int i = 0; path[i] != NULL; i++)
	{
		if (i > 0)
		{
			if (cur->type != jbvBinary || !JsonContainerIsObject(cur->val.binary.data))
				return NULL;
			c = cur->val.binary.data;
		}
		cur = getKeyJsonValueFromContainer(c, path[i], strlen(path[i]), buf);
		if (cur == NULL)
			return NULL;
	}
	return cur;
}

static const char *
jsonb_type_name(const JsonbValue *v)
{
	switch (v->type)
	{
		case jbvNull:
			return "null";
		case jbvString:
			return "a string";
		case jbvNumeric:
			return "a number";
		case jbvBool:
			return "a boolean";
		case jbvBinary:
			return JsonContainerIsObject(v->val.binary.data) ? "an object" : "an array";
		default:
			return "not a scalar";
	}
}

/*
 * Refuses r with reason "tenant_invalid: ..." unless value (from where) is
 * an identity the provider would send: 1 to MAX_ID_BYTES bytes, no control
 * characters.  Returns whether it is.
 */
static bool
tenant_valid(Row *r, const char *where, const char *value)
{
	size_t		len = strlen(value);

	if (len == 0 || len > MAX_ID_BYTES)
	{
		r->outcome = "refused";
		r->answer_reason = psprintf("tenant_invalid: %s is %zu bytes, it must be 1 to %d",
									where, len, MAX_ID_BYTES);
		return false;
	}
	for (const unsigned char *p = (const unsigned char *) value; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
		{
			r->outcome = "refused";
			r->answer_reason = psprintf("tenant_invalid: %s contains a control character", where);
			return false;
		}
	return true;
}

/*
 * The string at a key path of r's payload, or NULL when absent or null;
 * anything but a string refuses r.  *ok is false once r is refused.
 */
static char *
tenant_string(Row *r, const char *const *path, const char *where, bool *ok)
{
	JsonbValue	buf;
	JsonbValue *v = jsonb_path_value(r->payload, path, &buf);
	char	   *s;

	if (v == NULL || v->type == jbvNull)
		return NULL;
	if (v->type != jbvString)
	{
		r->outcome = "refused";
		r->answer_reason = psprintf("tenant_invalid: %s is %s, not a string", where, jsonb_type_name(v));
		*ok = false;
		return NULL;
	}
	s = pnstrdup(v->val.string.val, v->val.string.len);
	if (!tenant_valid(r, where, s))
	{
		*ok = false;
		return NULL;
	}
	return s;
}

/*
 * read_tenant
 *		The provider account r belongs to, as the provider's contract names
 *		it: Stripe's top-level account (Connect), or its context (Stripe
 *		Organizations, thin events; it supersedes the account for the
 *		credentials and is kept beside it); GitHub's installation.id (a
 *		GitHub App's deliveries); Shopify's X-Shopify-Shop-Domain, for a
 *		source whose settings say "tenants": true (an app installed in many
 *		shops: every Shopify delivery names its shop, so a one-shop source
 *		keeps the empty tenant).  settings "tenants": false turns it off for
 *		any kind.  A value that is not what the provider sends refuses r
 *		alone; its batch-mates are untouched.
 */
static void
read_tenant(Row *r)
{
	const WiKindLayout *layout = r->src->layout;
	char	   *setting = settings_text(r->src->settings, "tenants");
	bool		ok = true;

	r->tenant = "";
	r->tenant_context = NULL;
	if (setting != NULL && strcmp(setting, "false") == 0)
		return;
	if (layout->kind == WI_KIND_shopify)
	{
		char	   *shop = header_get(r, "x-shopify-shop-domain");

		if (setting == NULL || strcmp(setting, "true") != 0 || shop == NULL)
			return;
		if (tenant_valid(r, "X-Shopify-Shop-Domain", shop))
			r->tenant = pstrdup(shop);
		return;
	}
	if (r->payload == NULL)
		return;					/* unreadable: kept in quarantine as it is */
	if (layout->kind == WI_KIND_stripe)
	{
		const char *acct_path[] = {"account", NULL};
		const char *ctx_path[] = {"context", NULL};
		char	   *acct = tenant_string(r, acct_path, "account", &ok);
		char	   *ctx = ok ? tenant_string(r, ctx_path, "context", &ok) : NULL;

		if (!ok)
			return;
		r->tenant = acct ? acct : (ctx ? ctx : "");
		r->tenant_context = ctx;
	}
	else if (layout->kind == WI_KIND_github)
	{
		const char *inst_path[] = {"installation", NULL};
		const char *id_path[] = {"installation", "id", NULL};
		JsonbValue	buf;
		JsonbValue *v = jsonb_path_value(r->payload, inst_path, &buf);
		char	   *id;

		if (v == NULL || v->type == jbvNull)
			return;
		v = jsonb_path_value(r->payload, id_path, &buf);
		if (v == NULL || v->type != jbvNumeric)
		{
			r->outcome = "refused";
			r->answer_reason = psprintf("tenant_invalid: installation.id is %s, not a number",
										v ? jsonb_type_name(v) : "missing");
			return;
		}
		id = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
		if (strspn(id, "0123456789") != strlen(id) || id[0] == '0')
		{
			r->outcome = "refused";
			r->answer_reason = psprintf("tenant_invalid: installation.id %s is not a positive integer", id);
			return;
		}
		if (tenant_valid(r, "installation.id", id))
			r->tenant = id;
	}
}

/* ---------------------------------------------------------------------
 * Arrays for the set-based statements
 * --------------------------------------------------------------------- */

typedef struct ArrBuild
{
	Datum	   *vals;
	bool	   *nulls;
	int			n;
} ArrBuild;

static void
arr_init(ArrBuild *a, int cap)
{
	a->vals = palloc(sizeof(Datum) * Max(cap, 1));
	a->nulls = palloc(sizeof(bool) * Max(cap, 1));
	a->n = 0;
}

static void
arr_add(ArrBuild *a, Datum v, bool isnull)
{
	a->vals[a->n] = isnull ? (Datum) 0 : v;
	a->nulls[a->n] = isnull;
	a->n++;
}

static void
arr_text(ArrBuild *a, const char *s)
{
	arr_add(a, s ? CStringGetTextDatum(s) : (Datum) 0, s == NULL);
}

static Datum
arr_done(ArrBuild *a, Oid elemtype)
{
	int16		typlen;
	bool		typbyval;
	char		typalign;
	int			dims[1] = {a->n};
	int			lbs[1] = {1};

	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	return PointerGetDatum(construct_md_array(a->vals, a->nulls, 1, dims, lbs, elemtype,
											  typlen, typbyval, typalign));
}

/* ---------------------------------------------------------------------
 * Sources
 * --------------------------------------------------------------------- */

/*
 * lookup_sources
 *		One query for the distinct source names of the batch; sets r->src, or
 *		refuses the rows of an unknown or disabled source.  The sources are
 *		held FOR KEY SHARE until the batch commits: inbox and deliveries
 *		refer to them without a foreign key (see sources_referenced in
 *		sql/core.sql), and this lock is what the key's check took per row.
 */
static void
lookup_sources(Row *rows, char **names, int n)
{
	ArrBuild	a;
	Datum		args[1];
	SourceInfo *srcs;
	int			nsrcs;
	int			rc;

	arr_init(&a, n);
	for (int i = 0, last = -1; i < n; i++)
	{
		/* a batch is mostly one source: each run of a name is sent once */
		if (names[i] == NULL || (last >= 0 && strcmp(names[i], names[last]) == 0))
			continue;
		arr_text(&a, names[i]);
		last = i;
	}
	args[0] = arr_done(&a, TEXTOID);
	rc = SPI_execute_plan(sources_plan, args, NULL, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "webhook_inbox: looking up sources failed: %s", SPI_result_code_string(rc));

	nsrcs = (int) SPI_processed;
	srcs = palloc0(sizeof(SourceInfo) * Max(nsrcs, 1));
	for (int k = 0; k < nsrcs; k++)
	{
		HeapTuple	tup = SPI_tuptable->vals[k];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		SourceInfo *s = &srcs[k];
		bool		isnull;
		Datum		d;

		s->name = SPI_getvalue(tup, desc, 1);
		s->id = DatumGetInt32(SPI_getbinval(tup, desc, 2, &isnull));
		s->kind = SPI_getvalue(tup, desc, 3);
		s->enabled = DatumGetBool(SPI_getbinval(tup, desc, 4, &isnull));
		d = SPI_getbinval(tup, desc, 5, &isnull);
		s->settings = isnull ? NULL : DatumGetJsonbPCopy(d);
		s->layout = layout_for(s->kind);
		d = SPI_getbinval(tup, desc, 6, &isnull);
		s->replay_window = isnull ? (Datum) 0 : datumCopy(d, false, sizeof(Interval));
		s->replay = !isnull && wi_source_kind_timestamp(s->layout->kind) != WI_TS_SIGNED;
		if (s->replay)
		{
			Interval   *iv = DatumGetIntervalP(s->replay_window);

			/* a zero window turns the check off */
			s->replay = iv->time > 0 || iv->day > 0 || iv->month > 0;
		}
		/* an hmac source that signs a timestamp refuses replays by its tolerance */
		if (s->replay && wi_source_kind_timestamp(s->layout->kind) == WI_TS_SETTINGS &&
			settings_text(s->settings, "timestamp_header") != NULL)
			s->replay = false;
	}

	for (int i = 0; i < n; i++)
	{
		Row		   *r = &rows[i];

		if (r->outcome != NULL)
			continue;
		for (int k = 0; k < nsrcs && r->src == NULL; k++)
			if (strcmp(srcs[k].name, names[i]) == 0)
				r->src = &srcs[k];
		if (r->src == NULL)
		{
			r->outcome = "refused";
			r->answer_reason = psprintf("unknown_source: source \"%s\" does not exist", names[i]);
		}
		else if (!r->src->enabled)
		{
			r->outcome = "refused";
			r->answer_reason = psprintf("source_disabled: source \"%s\" is disabled", names[i]);
		}
	}
}

/* ---------------------------------------------------------------------
 * Classification
 * --------------------------------------------------------------------- */

/* The route in columns 2 to 12 of a row of routes_sql. */
static void
route_from_tuple(HeapTuple tup, TupleDesc desc, WiRoute *rt)
{
	bool		isnull;
	char	   *class;

	rt->id = DatumGetInt32(SPI_getbinval(tup, desc, 2, &isnull));
	rt->version = DatumGetInt32(SPI_getbinval(tup, desc, 3, &isnull));
	rt->strategy = SPI_getvalue(tup, desc, 4);
	class = SPI_getvalue(tup, desc, 5);
	rt->ignore = class == NULL || strcmp(class, "ignore") == 0;
	rt->object_type = SPI_getvalue(tup, desc, 6);
	for (int p = 0; p < WI_PATH_COUNT; p++)
	{
		Datum		d = SPI_getbinval(tup, desc, 7 + p, &isnull);

		rt->has_path[p] = !isnull;
		rt->path[p] = isnull ? (Datum) 0 : datumCopy(d, false, -1);
	}
	rt->tombstone = DatumGetBool(SPI_getbinval(tup, desc, 12, &isnull));
}

/*
 * Classify rows idx[0..n-1]: one statement reads the route of each distinct
 * (source, event type) the session has not kept (route_cache.c), then each
 * route's paths are applied to its events in C (route_eval.c), as
 * _classify_batch() applies them.  Fills each row's route fields.  May raise (a route's path on a hostile payload).
 */
static void
classify_rows(Row *rows, int *idx, int n)
{
	int		   *which = palloc(sizeof(int) * n);
	Row		  **first = palloc(sizeof(Row *) * n);
	int		   *miss = palloc(sizeof(int) * n);	/* distinct types not cached */
	int			nmiss = 0;
	bool		use_cache = !IsolationUsesXactSnapshot();
	WiRoute    *routes;
	bool	   *found;
	int			ndistinct = 0;
	ArrBuild	ids,
				kinds,
				types;
	Datum		args[3];
	int			rc;

	for (int k = 0; k < n; k++)
	{
		Row		   *r = &rows[idx[k]];
		int			j;

		for (j = 0; j < ndistinct; j++)
			if (first[j]->src->id == r->src->id && strcmp(first[j]->event_type, r->event_type) == 0)
				break;
		if (j == ndistinct)
			first[ndistinct++] = r;
		which[k] = j;
	}
	routes = palloc0(sizeof(WiRoute) * ndistinct);
	found = palloc0(sizeof(bool) * ndistinct);
	for (int j = 0; j < ndistinct; j++)
		if (!use_cache ||
			!wi_route_cache_get(first[j]->src->id, first[j]->src->kind, first[j]->event_type,
								&found[j], &routes[j]))
			miss[nmiss++] = j;
	if (nmiss > 0)
	{
		uint64		generation = 0;

		arr_init(&ids, nmiss);
		arr_init(&kinds, nmiss);
		arr_init(&types, nmiss);
		for (int m = 0; m < nmiss; m++)
		{
			Row		   *f = first[miss[m]];

			arr_add(&ids, Int32GetDatum(f->src->id), false);
			arr_text(&kinds, f->src->kind);
			arr_text(&types, f->event_type);
		}
		args[0] = arr_done(&ids, INT4OID);
		args[1] = arr_done(&kinds, TEXTOID);
		args[2] = arr_done(&types, TEXTOID);
		/* what is kept is read with a snapshot taken after the generation */
		if (use_cache)
		{
			generation = wi_route_cache_generation();
			PushActiveSnapshot(GetLatestSnapshot());
		}
		rc = SPI_execute_plan(routes_plan, args, NULL, true, 0);
		if (use_cache)
			PopActiveSnapshot();
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "webhook_inbox: reading the routes failed: %s", SPI_result_code_string(rc));

		for (uint64 t = 0; t < SPI_processed; t++)
		{
			bool		isnull;
			int64		ord = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[t],
														  SPI_tuptable->tupdesc, 1, &isnull));

			if (ord < 1 || ord > nmiss)
				elog(ERROR, "webhook_inbox: the routes returned position " INT64_FORMAT, ord);
			found[miss[ord - 1]] = true;
			route_from_tuple(SPI_tuptable->vals[t], SPI_tuptable->tupdesc, &routes[miss[ord - 1]]);
		}
		SPI_freetuptable(SPI_tuptable);
		if (use_cache)
			for (int m = 0; m < nmiss; m++)
			{
				Row		   *f = first[miss[m]];

				wi_route_cache_put(generation, f->src->id, f->src->kind, f->event_type,
								   found[miss[m]], &routes[miss[m]]);
			}
	}

	for (int k = 0; k < n; k++)
	{
		Row		   *r = &rows[idx[k]];
		WiRoute    *rt = &routes[which[k]];
		WiClassified c;

		r->have_route = found[which[k]];
		if (!r->have_route)
			continue;
		wi_route_apply(rt, r->payload, &c);
		r->route_id = rt->id;
		r->route_version = rt->version;
		r->strategy = rt->strategy;
		r->found = c;
		if (!c.version_null)
			r->found.version = datumCopy(c.version, false, -1);
	}
}

/*
 * in_subxact
 *		Run fn(arg) in a subtransaction.  Returns NULL when it returned, or,
 *		when it raised, the error (the subtransaction rolled back).
 */
static ErrorData *
in_subxact(void (*fn) (void *), void *arg)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	ErrorData  *volatile edata = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcontext);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;
	}
	PG_END_TRY();
	return edata;
}

/* The rows a guarded step works on, and what it returns. */
typedef struct RowSet
{
	Row		   *rows;
	int		   *idx;
	int			n;
	int			result;
} RowSet;

static void
classify_step(void *arg)
{
	RowSet	   *set = arg;

	classify_rows(set->rows, set->idx, set->n);
}

/*
 * Run classify_rows() in a subtransaction; on an error, return false with
 * the error's message in *msg and the route fields of the rows undone.
 */
static bool
classify_guarded(Row *rows, int *idx, int n, char **msg)
{
	RowSet		set = {rows, idx, n, 0};
	ErrorData  *edata = in_subxact(classify_step, &set);

	if (edata == NULL)
		return true;
	*msg = pstrdup(edata->message);
	FreeErrorData(edata);
	for (int k = 0; k < n; k++)
	{
		Row		   *r = &rows[idx[k]];

		r->have_route = false;
		r->strategy = NULL;
		wi_classified_clear(&r->found);
	}
	return false;
}

/*
 * classify
 *		Decide the route of every readable event, set-based.  A batch whose
 *		statement raised is classified again one event at a time, so that
 *		only the event whose payload a route cannot read is quarantined.
 */
static void
classify(Row *rows, int n)
{
	int		   *idx = palloc(sizeof(int) * Max(n, 1));
	int			m = 0;
	char	   *msg = NULL;

	for (int i = 0; i < n; i++)
		if (needs_route(&rows[i]))
			idx[m++] = i;
	if (m == 0 || classify_guarded(rows, idx, m, &msg))
		return;
	for (int k = 0; k < m; k++)
		if (!classify_guarded(rows, &idx[k], 1, &msg))
			rows[idx[k]].reason = truncate_reason("unclassifiable", msg);
}

/* The inbox status of a row that is not refused, from what was decided. */
static void
decide_status(Row *r)
{
	if (r->reason == NULL && r->have_route && strcmp(r->strategy, "ignore") != 0)
	{
		if (r->found.object_id == NULL || r->found.object_id[0] == '\0')
			r->reason = pstrdup("missing_object_id: the route's object id path found nothing");
		else if (r->found.object_type == NULL || r->found.object_type[0] == '\0')
			r->reason = pstrdup("missing_object_type: the route's object type path found nothing");
		else if (strlen(r->found.object_id) > MAX_ID_BYTES)
			r->reason = psprintf("object_id_too_long: the object id is %zu bytes, the limit is %d",
								 strlen(r->found.object_id), MAX_ID_BYTES);
		else if (strlen(r->found.object_type) > MAX_ID_BYTES)
			r->reason = psprintf("object_type_too_long: the object type is %zu bytes, the limit is %d",
								 strlen(r->found.object_type), MAX_ID_BYTES);
		else if (strcmp(r->strategy, "version") == 0 && r->found.version_null
				 && strcmp(r->found.status_value ? r->found.status_value : "", "deleted") != 0)
			r->reason = pstrdup("missing_version: the route's version path found nothing");
	}

	if (r->reason != NULL)
		r->status = "quarantined";
	else if (!r->have_route)
	{
		r->status = "ignored";
		r->reason = pstrdup("no_route: no route matches this event type");
	}
	else if (strcmp(r->strategy, "ignore") == 0)
	{
		r->status = "ignored";
		r->reason = pstrdup("route: ignore");
	}
	else
		r->status = "pending";

	/*
	 * A delivery without an id still needs one for the unique key: the
	 * body's digest, so that retries of the same bytes dedupe.
	 */
	if (r->event_id == NULL)
	{
		StringInfoData buf;

		initStringInfo(&buf);
		appendStringInfoString(&buf, "sha256:");
		for (int i = 0; i < PG_SHA256_DIGEST_LENGTH; i++)
			appendStringInfo(&buf, "%02x", (unsigned char) VARDATA(r->digest)[i]);
		r->event_id = buf.data;
	}
	if (strcmp(r->status, "quarantined") == 0)
	{
		/* a quarantined event is never claimed: no route data is kept */
		r->strategy = NULL;
		r->have_route = false;
		wi_classified_clear(&r->found);
	}
}

/* ---------------------------------------------------------------------
 * Writing
 * --------------------------------------------------------------------- */

static Row *sort_rows;			/* qsort has no context argument */

static int
cmp_by_event(const void *a, const void *b)
{
	Row		   *x = &sort_rows[*(const int *) a];
	Row		   *y = &sort_rows[*(const int *) b];
	int			c;

	if (x->src->id != y->src->id)
		return x->src->id < y->src->id ? -1 : 1;
	c = strcmp(x->event_id, y->event_id);
	if (c != 0)
		return c;
	return x->ord - y->ord;
}

/* Whether x and y carry the same key, (source id, event id). */
static bool
same_event(Row *x, Row *y)
{
	return x->src->id == y->src->id && strcmp(x->event_id, y->event_id) == 0;
}

static int
cmp_by_digest(const void *a, const void *b)
{
	Row		   *x = &sort_rows[*(const int *) a];
	Row		   *y = &sort_rows[*(const int *) b];
	int			c;

	if (x->src->id != y->src->id)
		return x->src->id < y->src->id ? -1 : 1;
	c = memcmp(VARDATA(x->digest), VARDATA(y->digest), PG_SHA256_DIGEST_LENGTH);
	if (c != 0)
		return c;
	return x->ord - y->ord;
}

static bool
same_digest(Row *x, Row *y)
{
	return x->src->id == y->src->id &&
		memcmp(VARDATA(x->digest), VARDATA(y->digest), PG_SHA256_DIGEST_LENGTH) == 0;
}

/*
 * refuse_replays
 *		For sources whose scheme signs only the body: a digest already seen
 *		for the source within its window makes the delivery a duplicate,
 *		whatever id its unsigned headers claim.  rows idx[0..n-1] are the
 *		candidates; the first of equal digests in the batch is the one that
 *		may be new.
 */
static void
refuse_replays(Row *rows, int *idx, int n)
{
	ArrBuild	ids,
				shas,
				evs,
				wins;
	Datum		args[4];
	int			rc;
	int			m = 0;

	if (n == 0)
		return;
	sort_rows = rows;
	qsort(idx, n, sizeof(int), cmp_by_digest);
	arr_init(&ids, n);
	arr_init(&shas, n);
	arr_init(&evs, n);
	arr_init(&wins, n);
	for (int k = 0; k < n; k++)
	{
		Row		   *r = &rows[idx[k]];

		/* later equal digests of the batch are replays of the first */
		r->replayed = true;		/* until the statement says it is new */
		if (k > 0 && same_digest(r, &rows[idx[k - 1]]))
			continue;
		arr_add(&ids, Int32GetDatum(r->src->id), false);
		arr_add(&shas, PointerGetDatum(r->digest), false);
		arr_text(&evs, r->event_id);
		arr_add(&wins, r->src->replay_window, false);
		idx[m++] = idx[k];
	}
	args[0] = arr_done(&ids, INT4OID);
	args[1] = arr_done(&shas, BYTEAOID);
	args[2] = arr_done(&evs, TEXTOID);
	args[3] = arr_done(&wins, INTERVALOID);
	rc = SPI_execute_plan(seen_plan, args, NULL, false, 0);
	if (rc != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "webhook_inbox: recording body digests failed: %s", SPI_result_code_string(rc));

	/* returned rows come back in the order they were written */
	for (uint64 t = 0, k = 0; t < SPI_processed; t++)
	{
		HeapTuple	tup = SPI_tuptable->vals[t];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		int32		sid = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
		bytea	   *sha = DatumGetByteaPP(SPI_getbinval(tup, desc, 2, &isnull));

		for (; k < (uint64) m; k++)
		{
			Row		   *r = &rows[idx[k]];

			if (r->src->id == sid &&
				memcmp(VARDATA(r->digest), VARDATA_ANY(sha), PG_SHA256_DIGEST_LENGTH) == 0)
			{
				r->replayed = false;
				k++;
				break;
			}
		}
	}
	SPI_freetuptable(SPI_tuptable);
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
	bool		quarantined = strcmp(r->status, "quarantined") == 0;

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
	v[15] = text_or_null(r->status, &nulls[15]);
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
	v[5] = text_or_null(r->outcome, &nulls[5]);
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
	r->outcome = strcmp(r->status, "quarantined") == 0 ? "quarantined" : "new";
	return strcmp(r->status, "pending") == 0;
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
		if (k > 0 && same_event(&rows[idx[k - 1]], r))
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
	ErrorData  *edata = in_subxact(inbox_direct_step, &set);

	if (edata == NULL)
		return set.result;
	if (edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION)
		ReThrowError(edata);
	FreeErrorData(edata);
	for (int k = 0; k < n; k++)
		rows[idx[k]].outcome = "duplicate";
	return -1;
}

/*
 * write_inbox
 *		Insert the inbox rows idx[0..n-1] (sorted by source and event id);
 *		the rows whose key was already taken are duplicates.  Returns whether
 *		any new row is pending (the worker is to be woken).
 */
static bool
write_inbox(Row *rows, int *idx, int n)
{
	int			rc;
	int			direct;
	bool		wake = false;

	if (n == 0)
		return false;
	for (int k = 0; k < n; k++)
		rows[idx[k]].outcome = "duplicate";	/* until the row is written */
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
static void
write_deliveries(Row *rows, int *idx, int n)
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
static bytea *
sha256_of(pg_cryptohash_ctx *ctx, bytea *body)
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
static void
write_tenants(Row *rows, int *idx, int n)
{
	ArrBuild	sids;
	ArrBuild	tens;
	ArrBuild	ctxs;
	ArrBuild	lifes;
	Datum		args[4];
	int			rc;

	arr_init(&sids, n);
	arr_init(&tens, n);
	arr_init(&ctxs, n);
	arr_init(&lifes, n);
	for (int k = 0; k < n; k++)
	{
		Row		   *r = &rows[idx[k]];

		if (r->tenant == NULL || r->tenant[0] == '\0' || strcmp(r->outcome, "new") != 0)
			continue;
		arr_add(&sids, Int32GetDatum(r->src->id), false);
		arr_text(&tens, r->tenant);
		if (r->tenant_context)
			arr_text(&ctxs, r->tenant_context);
		else
			arr_add(&ctxs, (Datum) 0, true);
		/* a Connect account's own lifecycle (stripe-node Event.Type) */
		if (r->src->layout->kind == WI_KIND_stripe && r->event_type != NULL &&
			strcmp(r->event_type, "account.application.deauthorized") == 0)
			arr_text(&lifes, "deauthorized");
		else if (r->src->layout->kind == WI_KIND_stripe && r->event_type != NULL &&
				 strcmp(r->event_type, "account.application.authorized") == 0)
			arr_text(&lifes, "authorized");
		/* a Shopify app removed from a shop: its reads stop (credentials.sql) */
		else if (r->src->layout->kind == WI_KIND_shopify && r->event_type != NULL &&
				 strcmp(r->event_type, "app/uninstalled") == 0)
			arr_text(&lifes, "app_uninstalled");
		/* a GitHub App's installation (X-GitHub-Event installation + action) */
		else if (r->src->layout->kind == WI_KIND_github && r->event_type != NULL &&
				 strcmp(r->event_type, "installation.deleted") == 0)
			arr_text(&lifes, "uninstalled");
		else if (r->src->layout->kind == WI_KIND_github && r->event_type != NULL &&
				 strcmp(r->event_type, "installation.suspend") == 0)
			arr_text(&lifes, "suspended");
		else if (r->src->layout->kind == WI_KIND_github && r->event_type != NULL &&
				 strcmp(r->event_type, "installation.unsuspend") == 0)
			arr_text(&lifes, "unsuspended");
		else
			arr_add(&lifes, (Datum) 0, true);
	}
	if (sids.n == 0)
		return;
	args[0] = arr_done(&sids, INT4OID);
	args[1] = arr_done(&tens, TEXTOID);
	args[2] = arr_done(&ctxs, TEXTOID);
	args[3] = arr_done(&lifes, TEXTOID);
	rc = SPI_execute_plan(tenants_plan, args, NULL, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "webhook_inbox: registering tenants failed: %s", SPI_result_code_string(rc));
}

/*
 * intake_rows
 *		Decide and store rows[0..n-1].  Rows already refused (outcome set)
 *		are left alone.  Must run inside SPI.  Afterwards every row has an
 *		outcome, and answer_reason for those that are not plainly new.
 */
static void
intake_rows(Row *rows, char **names, int n)
{
	int		   *idx = palloc(sizeof(int) * Max(n, 1));
	int		   *ridx = palloc(sizeof(int) * Max(n, 1));
	int			m = 0;
	int			nreplay = 0;
	int			w = 0;
	pg_cryptohash_ctx *sha = pg_cryptohash_create(PG_SHA256);	/* one for the batch */

	prepare_plans();
	lookup_sources(rows, names, n);
	for (int i = 0; i < n; i++)
	{
		Row		   *r = &rows[i];

		if (r->outcome != NULL)
			continue;
		r->digest = sha256_of(sha, r->body);
		r->delivery_id = header_get(r, "x-webhook-inbox-delivery");
		wi_classified_clear(&r->found);
		read_ids(r);
		check_ids(r);
		if (r->outcome == NULL)
			read_tenant(r);
	}
	pg_cryptohash_free(sha);
	classify(rows, n);

	for (int i = 0; i < n; i++)
	{
		Row		   *r = &rows[i];

		if (r->outcome != NULL)
			continue;
		decide_status(r);
		idx[m++] = i;
		if (r->src->replay)
			ridx[nreplay++] = i;
	}

	refuse_replays(rows, ridx, nreplay);

	/* what is left goes to the inbox in (source, event id) order */
	for (int k = 0; k < m; k++)
	{
		Row		   *r = &rows[idx[k]];

		if (r->replayed)
		{
			r->outcome = "duplicate";
			r->answer_reason = pstrdup("replayed_body: this body was already received for this source within its replay window");
		}
		else
			idx[w++] = idx[k];
	}
	sort_rows = rows;
	qsort(idx, w, sizeof(int), cmp_by_event);
	if (write_inbox(rows, idx, w))
		wi_wake_worker_at_commit();
	write_tenants(rows, idx, w);

	/* audit every accepted delivery, replays included */
	w = 0;
	for (int i = 0; i < n; i++)
		if (rows[i].src != NULL && strcmp(rows[i].outcome, "refused") != 0)
			idx[w++] = i;
	write_deliveries(rows, idx, w);

	for (int i = 0; i < n; i++)
	{
		Row		   *r = &rows[i];

		if (r->answer_reason == NULL && strcmp(r->outcome, "new") != 0)
			r->answer_reason = r->reason;
		if (r->answer_reason == NULL && strcmp(r->outcome, "new") == 0 &&
			strcmp(r->status, "ignored") == 0)
			r->answer_reason = r->reason;
	}
}

/*
 * Fill r's headers from elems[0..npairs*2-1] (name, value, ...).  A pair
 * whose name and value are both NULL is padding (rows of a two-dimensional
 * array have one length); a NULL name with a value refuses the row.
 */
static void
row_headers(Row *r, Datum *elems, bool *nulls, int npairs)
{
	r->hnames = palloc0(sizeof(char *) * (npairs + 1));
	r->hvalues = palloc0(sizeof(char *) * (npairs + 1));
	r->nheaders = 0;
	for (int i = 0; i < npairs; i++)
	{
		if (nulls[2 * i])
		{
			if (!nulls[2 * i + 1])
			{
				r->outcome = "refused";
				r->answer_reason = pstrdup("malformed_headers: a header name is null");
				return;
			}
			continue;
		}
		r->hnames[r->nheaders] = TextDatumGetCString(elems[2 * i]);
		r->hvalues[r->nheaders] = nulls[2 * i + 1] ? NULL : TextDatumGetCString(elems[2 * i + 1]);
		r->nheaders++;
	}
}

/*
 * keep_heap
 *		Once per session that takes batches: keep freed heap memory for the
 *		next batch instead of handing it back to the kernel.  Each batch
 *		allocates a few megabytes (its bodies, their payloads, the arrays and
 *		tuplestores of its statements) and frees them all at its end; with
 *		glibc's defaults the heap top is trimmed after every batch and the
 *		next one pays a page fault for every page again, about a tenth of
 *		intake's CPU.  Blocks under 8 MB come from the heap, which grows
 *		4 MB at a time and keeps up to 32 MB free for the session; larger
 *		allocations are still mapped and returned at once.  Only sessions
 *		that call intake_batch() (the receiver's) are affected.
 */
static void
keep_heap(void)
{
#ifdef __GLIBC__
	static bool done = false;

	if (done)
		return;
	done = true;
	mallopt(M_MMAP_THRESHOLD, 8 * 1024 * 1024);
	mallopt(M_TRIM_THRESHOLD, 32 * 1024 * 1024);
	mallopt(M_TOP_PAD, 4 * 1024 * 1024);
#endif
}

/* ---------------------------------------------------------------------
 * SQL entry points
 * --------------------------------------------------------------------- */

/*
 * intake(source text, headers text[], body bytea) returns text
 *
 * Returns 'new', 'duplicate' or 'quarantined'.  Raises for NULL arguments,
 * a malformed headers array, and for what would refuse the delivery in a
 * batch: an unknown or disabled source, an over-long id.
 */
Datum
wi_intake(PG_FUNCTION_ARGS)
{
	ArrayType  *headers;
	Datum	   *elems;
	bool	   *nulls;
	int			nelems;
	char	   *name;
	Row			row;
	const char *outcome;

	/* a database still at 0.1.0: that release's intake on its tables */
	if (wi_schema() == WI_SCHEMA_0_1_0)
		return wi_compat_0_1_0_intake(fcinfo);

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("source, headers and body must not be null")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	headers = PG_GETARG_ARRAYTYPE_P(1);
	if (ARR_NDIM(headers) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("headers must be a one-dimensional array"),
				 errdetail("Pass {name, value, name, value, ...}.")));
	deconstruct_array(headers, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &nelems);
	if (nelems % 2 != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("headers must hold name and value pairs"),
				 errdetail("The array has %d elements.", nelems)));
	for (int i = 0; i < nelems; i += 2)
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("header names must not be null")));

	memset(&row, 0, sizeof(row));
	row.ord = 1;
	row.body = PG_GETARG_BYTEA_PP(2);
	row_headers(&row, elems, nulls, nelems / 2);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "webhook_inbox: SPI_connect failed");
	intake_rows(&row, &name, 1);
	if (strcmp(row.outcome, "refused") == 0)
	{
		const char *code = row.answer_reason;

		if (strncmp(code, "unknown_source:", 15) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("source \"%s\" does not exist", name),
					 errhint("Create it with webhook_inbox.create_source().")));
		if (strncmp(code, "source_disabled:", 16) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("source \"%s\" is disabled", name),
					 errhint("Enable it with UPDATE webhook_inbox.sources SET enabled = true.")));
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
				 errmsg("delivery refused: %s", code),
				 errhint("Ids longer than %d bytes are not provider ids; nothing was stored.",
						 MAX_ID_BYTES)));
	}
	outcome = row.outcome;
	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text(outcome));
}

/*
 * intake_batch(sources text[], headers text[], bodies bytea[])
 *		returns setof (ord integer, outcome text, reason text)
 *
 * Delivery i is sources[i], the i-th row of the two-dimensional headers
 * array ({name, value, ...}, padded with NULL pairs), and bodies[i].  One
 * result row per delivery, in order.  Raises only for malformed arrays (the
 * caller's bug, not a provider's); everything about one delivery is that
 * delivery's outcome.
 */
Datum
wi_intake_batch(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ArrayType  *sarr;
	ArrayType  *harr;
	ArrayType  *barr;
	Datum	   *svals,
			   *hvals,
			   *bvals;
	bool	   *snulls,
			   *hnulls,
			   *bnulls;
	int			n,
				nh,
				nb;
	int			width = 0;
	char	  **names;
	Row		   *rows;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("sources, headers and bodies must not be null")));
	sarr = PG_GETARG_ARRAYTYPE_P(0);
	harr = PG_GETARG_ARRAYTYPE_P(1);
	barr = PG_GETARG_ARRAYTYPE_P(2);
	if (ARR_NDIM(sarr) > 1 || ARR_NDIM(barr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("sources and bodies must be one-dimensional arrays")));
	deconstruct_array(sarr, TEXTOID, -1, false, TYPALIGN_INT, &svals, &snulls, &n);
	deconstruct_array(barr, BYTEAOID, -1, false, TYPALIGN_INT, &bvals, &bnulls, &nb);
	if (nb != n)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("sources and bodies must have the same length"),
				 errdetail("There are %d sources and %d bodies.", n, nb)));
	if (ARR_NDIM(harr) == 0)
		nh = 0;
	else if (ARR_NDIM(harr) != 2 || ARR_DIMS(harr)[0] != n || ARR_DIMS(harr)[1] % 2 != 0)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("headers must be a two-dimensional array with one row per delivery"),
				 errdetail("Each row is {name, value, ...}; pad shorter rows with NULL pairs. There are %d deliveries.", n)));
	else
		width = ARR_DIMS(harr)[1];
	deconstruct_array(harr, TEXTOID, -1, false, TYPALIGN_INT, &hvals, &hnulls, &nh);

	InitMaterializedSRF(fcinfo, 0);
	keep_heap();

	names = palloc0(sizeof(char *) * Max(n, 1));
	rows = palloc0(sizeof(Row) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		Row		   *r = &rows[i];

		r->ord = i + 1;
		if (snulls[i])
		{
			r->outcome = "refused";
			r->answer_reason = pstrdup("missing_source: the source is null");
			continue;
		}
		names[i] = TextDatumGetCString(svals[i]);
		if (bnulls[i])
		{
			r->outcome = "refused";
			r->answer_reason = pstrdup("missing_body: the body is null");
			continue;
		}
		r->body = DatumGetByteaPP(bvals[i]);
		if (width > 0)
			row_headers(r, hvals + (size_t) i * width, hnulls + (size_t) i * width, width / 2);
	}

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "webhook_inbox: SPI_connect failed");
	intake_rows(rows, names, n);
	for (int i = 0; i < n; i++)
	{
		Datum		values[3];
		bool		isnull[3] = {false, false, false};

		values[0] = Int32GetDatum(rows[i].ord);
		values[1] = CStringGetTextDatum(rows[i].outcome);
		if (rows[i].answer_reason)
			values[2] = CStringGetTextDatum(rows[i].answer_reason);
		else
			isnull[2] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
	}
	SPI_finish();
	return (Datum) 0;
}
