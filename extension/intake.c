/*
 * intake.c
 *		webhook_inbox.intake_batch(sources, headers, bodies) and its
 *		one-delivery form intake(source, headers, body): how a verified
 *		delivery enters the inbox.
 *
 * The receiver has already verified the signature over the raw bytes; this
 * code decides what each delivery is.  It extracts the provider's stable
 * event id by the source's kind (a header or a body field) and the tenant
 * (the provider account a platform's delivery belongs to: intake_read_tenant()),
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
 * The work is shared by a family of files named for their jobs: this one
 * holds the SQL entry points and the order of the steps; intake_read.c reads
 * each delivery (payload, ids, tenant), intake_source.c looks up the sources
 * and refuses replays, intake_classify.c classifies, intake_write.c writes,
 * and intake_utils.c holds what they share (intake.h).
 *
 * Rows are written in a stable order, (source id, event id) and (source id,
 * body digest), so that two batches on different connections that carry the
 * same keys wait for each other in the same order and never deadlock.
 */
#include "postgres.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "catalog/pg_type.h"
#include "common/cryptohash.h"
#include "common/sha2.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "compat.h"
#include "intake.h"

PG_FUNCTION_INFO_V1(wi_intake);
PG_FUNCTION_INFO_V1(wi_intake_batch);

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

	intake_source_prepare();
	intake_classify_prepare();
	intake_write_prepare();
	intake_tenant_prepare();
	intake_lookup_sources(rows, names, n);
	for (int i = 0; i < n; i++)
	{
		Row		   *r = &rows[i];

		if (r->outcome != INTAKE_UNDECIDED)
			continue;
		r->digest = intake_sha256_of(sha, r->body);
		r->delivery_id = intake_header_get(r, "x-webhook-inbox-delivery");
		wi_classified_clear(&r->found);
		intake_read_ids(r);
		intake_check_ids(r);
		if (r->outcome == INTAKE_UNDECIDED)
			intake_read_tenant(r);
	}
	pg_cryptohash_free(sha);
	intake_cap_tenants(rows, n);
	intake_classify(rows, n);

	for (int i = 0; i < n; i++)
	{
		Row		   *r = &rows[i];

		if (r->outcome != INTAKE_UNDECIDED)
			continue;
		intake_decide_status(r);
		idx[m++] = i;
		if (r->src->replay)
			ridx[nreplay++] = i;
	}

	intake_refuse_replays(rows, ridx, nreplay);

	/* what is left goes to the inbox in (source, event id) order */
	for (int k = 0; k < m; k++)
	{
		Row		   *r = &rows[idx[k]];

		if (r->replayed)
		{
			r->outcome = INTAKE_DUPLICATE;
			r->answer_reason = pstrdup("replayed_body: this body was already received for this source within its replay window");
		}
		else
			idx[w++] = idx[k];
	}
	intake_sort_by_event(rows, idx, w);
	if (intake_write_inbox(rows, idx, w))
		wi_wake_worker_at_commit();
	intake_write_tenants(rows, idx, w);

	/* audit every accepted delivery, replays included */
	w = 0;
	for (int i = 0; i < n; i++)
		if (rows[i].src != NULL && rows[i].outcome != INTAKE_REFUSED)
			idx[w++] = i;
	intake_write_deliveries(rows, idx, w);

	for (int i = 0; i < n; i++)
	{
		Row		   *r = &rows[i];

		if (r->answer_reason == NULL && r->outcome != INTAKE_NEW)
			r->answer_reason = r->reason;
		if (r->answer_reason == NULL && r->outcome == INTAKE_NEW &&
			r->status == INTAKE_STATUS_IGNORED)
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
				intake_refuse(r, INTAKE_REFUSE_MALFORMED_HEADERS, "a header name is null");
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
 *		that call intake_batch() (the receiver's) are affected, and only
 *		while webhook_inbox.keep_heap is on (the default); the first batch
 *		that finds it on tunes the process, and nothing undoes that.
 */
static void
keep_heap(void)
{
#ifdef __GLIBC__
	static bool done = false;

	if (done || !wi_keep_heap)
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
	if (row.outcome == INTAKE_REFUSED)
	{
		int			code = intake_refusal_errcode(row.refusal);

		switch (row.refusal)
		{
			case INTAKE_REFUSE_UNKNOWN_SOURCE:
				ereport(ERROR,
						(errcode(code),
						 errmsg("source \"%s\" does not exist", name),
						 errhint("Create it with webhook_inbox.create_source().")));
				break;
			case INTAKE_REFUSE_SOURCE_DISABLED:
				ereport(ERROR,
						(errcode(code),
						 errmsg("source \"%s\" is disabled", name),
						 errhint("Enable it with UPDATE webhook_inbox.sources SET enabled = true.")));
				break;
			case INTAKE_REFUSE_TENANT_MISMATCH:
				ereport(ERROR,
						(errcode(code),
						 errmsg("delivery refused: %s", row.answer_reason),
						 errdetail("The signature covers the body, not the header naming the shop."),
						 errhint("A body signed for one shop was sent in another's name; nothing was stored.")));
				break;
			default:
				ereport(ERROR,
						(errcode(code),
						 errmsg("delivery refused: %s", row.answer_reason),
						 errhint("Ids longer than %d bytes are not provider ids; nothing was stored.",
								 MAX_ID_BYTES)));
		}
	}
	outcome = intake_outcome_name(row.outcome);
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
			intake_refuse(r, INTAKE_REFUSE_MISSING_SOURCE, "the source is null");
			continue;
		}
		names[i] = TextDatumGetCString(svals[i]);
		if (bnulls[i])
		{
			intake_refuse(r, INTAKE_REFUSE_MISSING_BODY, "the body is null");
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
		values[1] = CStringGetTextDatum(intake_outcome_name(rows[i].outcome));
		if (rows[i].answer_reason)
			values[2] = CStringGetTextDatum(rows[i].answer_reason);
		else
			isnull[2] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
	}
	SPI_finish();
	return (Datum) 0;
}
