/*
 * intake_classify.c
 *		What each delivery is: the route of its event type (route_cache.c
 *		keeps the routes a session has read; one statement reads the rest
 *		through _route_of()), what the route's paths read from the payload
 *		(route_eval.c), and the inbox row's status.
 *
 * Only the routes' paths, which users write, can raise here (a version that
 * is not a timestamp, say); the batch's classification runs in one
 * subtransaction and, if that fails, each event is classified on its own so
 * that only the offending one is quarantined.
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

#include "intake.h"

static SPIPlanPtr routes_plan = NULL;

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

/* Plans this file's statement once per session. */
void
intake_classify_prepare(void)
{
	if (routes_plan == NULL)
	{
		Oid			types[3] = {INT4ARRAYOID, TEXTARRAYOID, TEXTARRAYOID};

		/* _route_of() is inlined here, in one generic plan */
		routes_plan = wi_keep_plan_opts(routes_sql, 3, types, CURSOR_OPT_GENERIC_PLAN);
	}
}

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
 * _classify() applies them.  Fills each row's route fields.  May raise (a
 * route's path on a hostile payload).
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

		intake_arr_init(&ids, nmiss);
		intake_arr_init(&kinds, nmiss);
		intake_arr_init(&types, nmiss);
		for (int m = 0; m < nmiss; m++)
		{
			Row		   *f = first[miss[m]];

			intake_arr_add(&ids, Int32GetDatum(f->src->id), false);
			intake_arr_text(&kinds, f->src->kind);
			intake_arr_text(&types, f->event_type);
		}
		args[0] = intake_arr_done(&ids, INT4OID);
		args[1] = intake_arr_done(&kinds, TEXTOID);
		args[2] = intake_arr_done(&types, TEXTOID);
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
	ErrorData  *edata = intake_in_subxact(classify_step, &set);

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
 * intake_classify
 *		Decide the route of every readable event, set-based.  A batch whose
 *		statement raised is classified again one event at a time, so that
 *		only the event whose payload a route cannot read is quarantined.
 */
void
intake_classify(Row *rows, int n)
{
	int		   *idx = palloc(sizeof(int) * Max(n, 1));
	int			m = 0;
	char	   *msg = NULL;

	for (int i = 0; i < n; i++)
		if (intake_needs_route(&rows[i]))
			idx[m++] = i;
	if (m == 0 || classify_guarded(rows, idx, m, &msg))
		return;
	for (int k = 0; k < m; k++)
		if (!classify_guarded(rows, &idx[k], 1, &msg))
			rows[idx[k]].reason = intake_truncate_reason("unclassifiable", msg);
}

/* The inbox status of a row that is not refused, from what was decided. */
void
intake_decide_status(Row *r)
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
		r->status = INTAKE_STATUS_QUARANTINED;
	else if (!r->have_route)
	{
		r->status = INTAKE_STATUS_IGNORED;
		r->reason = pstrdup("no_route: no route matches this event type");
	}
	else if (strcmp(r->strategy, "ignore") == 0)
	{
		r->status = INTAKE_STATUS_IGNORED;
		r->reason = pstrdup("route: ignore");
	}
	else
		r->status = INTAKE_STATUS_PENDING;

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
	if (r->status == INTAKE_STATUS_QUARANTINED)
	{
		/* a quarantined event is never claimed: no route data is kept */
		r->strategy = NULL;
		r->have_route = false;
		wi_classified_clear(&r->found);
	}
}
