/*
 * intake_source.c
 *		The sources a batch names (one query, the rows held FOR KEY SHARE),
 *		and the replay refusal of sources whose scheme signs only the body.
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

static SPIPlanPtr sources_plan = NULL;
static SPIPlanPtr seen_plan = NULL;

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

/* Plans this file's statements once per session. */
void
intake_source_prepare(void)
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
	if (seen_plan == NULL)
	{
		Oid			types[4] = {INT4ARRAYOID, BYTEAARRAYOID, TEXTARRAYOID, INTERVALARRAYOID};

		seen_plan = wi_keep_plan(seen_insert_sql, 4, types);
	}
}

/*
 * intake_lookup_sources
 *		One query for the distinct source names of the batch; sets r->src, or
 *		refuses the rows of an unknown or disabled source.  The sources are
 *		held FOR KEY SHARE until the batch commits: inbox and deliveries
 *		refer to them without a foreign key (see sources_referenced in
 *		sql/core.sql), and this lock is what the key's check took per row.
 */
void
intake_lookup_sources(Row *rows, char **names, int n)
{
	ArrBuild	a;
	Datum		args[1];
	SourceInfo *srcs;
	int			nsrcs;
	int			rc;

	intake_arr_init(&a, n);
	for (int i = 0, last = -1; i < n; i++)
	{
		/* a batch is mostly one source: each run of a name is sent once */
		if (names[i] == NULL || (last >= 0 && strcmp(names[i], names[last]) == 0))
			continue;
		intake_arr_text(&a, names[i]);
		last = i;
	}
	args[0] = intake_arr_done(&a, TEXTOID);
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
		s->layout = intake_layout_for(s->kind);
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
			intake_settings_text(s->settings, "timestamp_header") != NULL)
			s->replay = false;
	}

	for (int i = 0; i < n; i++)
	{
		Row		   *r = &rows[i];

		if (r->outcome != INTAKE_UNDECIDED)
			continue;
		for (int k = 0; k < nsrcs && r->src == NULL; k++)
			if (strcmp(srcs[k].name, names[i]) == 0)
				r->src = &srcs[k];
		if (r->src == NULL)
		{
			intake_refuse(r, INTAKE_REFUSE_UNKNOWN_SOURCE, "source \"%s\" does not exist", names[i]);
		}
		else if (!r->src->enabled)
		{
			intake_refuse(r, INTAKE_REFUSE_SOURCE_DISABLED, "source \"%s\" is disabled", names[i]);
		}
	}
}

/*
 * intake_refuse_replays
 *		For sources whose scheme signs only the body: a digest already seen
 *		for the source within its window makes the delivery a duplicate,
 *		whatever id its unsigned headers claim.  rows idx[0..n-1] are the
 *		candidates; the first of equal digests in the batch is the one that
 *		may be new.
 */
void
intake_refuse_replays(Row *rows, int *idx, int n)
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
	intake_sort_by_digest(rows, idx, n);
	intake_arr_init(&ids, n);
	intake_arr_init(&shas, n);
	intake_arr_init(&evs, n);
	intake_arr_init(&wins, n);
	for (int k = 0; k < n; k++)
	{
		Row		   *r = &rows[idx[k]];

		/* later equal digests of the batch are replays of the first */
		r->replayed = true;		/* until the statement says it is new */
		if (k > 0 && intake_same_digest(r, &rows[idx[k - 1]]))
			continue;
		intake_arr_add(&ids, Int32GetDatum(r->src->id), false);
		intake_arr_add(&shas, PointerGetDatum(r->digest), false);
		intake_arr_text(&evs, r->event_id);
		intake_arr_add(&wins, r->src->replay_window, false);
		idx[m++] = idx[k];
	}
	args[0] = intake_arr_done(&ids, INT4OID);
	args[1] = intake_arr_done(&shas, BYTEAOID);
	args[2] = intake_arr_done(&evs, TEXTOID);
	args[3] = intake_arr_done(&wins, INTERVALOID);
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
