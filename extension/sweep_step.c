/*
 * sweep_step.c
 *		The SQL steps of a sweep pass, each one transaction in the worker:
 *		load the source and what to list, open the run, compare a listed
 *		page with the mirror (or take in a page of the events list), find
 *		what to read by id, take a repair's lease, save a repair, count what
 *		could not be repaired, close the run; and read a page of a GitHub
 *		App installation's repositories.
 *
 * Each runs SQL through SPI over the pass's Sweep and leaves what it found
 * there; none sends a request or decides what comes next: that is the
 * pass's (sweep_pass.c).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"

#include "credentials.h"
#include "provider.h"
#include "step.h"
#include "sweep_int.h"
#include "webhook_inbox.h"

static Datum
text_or_null(const char *s, char *null)
{
	*null = s ? ' ' : 'n';
	return s ? CStringGetTextDatum(s) : (Datum) 0;
}

void
wi_sweep_load_step(void *arg)
{
	Sweep	   *s = (Sweep *) arg;
	MemoryContext old = MemoryContextSwitchTo(wi_step_cxt());

	s->src = wi_source_load(s->source_id);
	s->adapter = wi_adapter_for(s->src);
	if (s->tenant[0] != '\0')
	{
		Oid			t[2] = {INT4OID, TEXTOID};
		Datum		v[2] = {Int32GetDatum(s->source_id), CStringGetTextDatum(s->tenant)};

		wi_spi_exec("SELECT (SELECT t.context FROM webhook_inbox.tenants t "
					"WHERE t.source_id = $1 AND t.tenant = $2)", 2, t, v, NULL, SPI_OK_SELECT);
		s->context = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		/* after an SPI call the current context is SPI's, gone at the step's end */
		if (s->context != NULL)
			s->context = MemoryContextStrdup(wi_step_cxt(), s->context);
	}
	/*
	 * A GitHub App's installation is read over the repositories GitHub
	 * lists for it, each in turn (wi_sweep_run); any name stands in for
	 * them in the check that the type has a list.
	 */
	s->gh_app = s->tenant[0] != '\0' && s->src != NULL && strcmp(s->src->kind, "github") == 0 &&
		wi_github_is_app(s->source_id);
	if (s->gh_app && s->src->repo == NULL)
		s->src->repo = MemoryContextStrdup(wi_step_cxt(), "installation/repositories");

	/*
	 * Any other GitHub source (an organisation's webhook: one hook, many
	 * repositories) reads every repository its deliveries named (the
	 * repository of each webhook the mirror keeps of the type, the url of
	 * each listed issue and pull request) and settings.repo.
	 */
	if (!s->gh_app && s->src != NULL && strcmp(s->src->kind, "github") == 0)
	{
		Oid			t[4] = {INT4OID, TEXTOID, TEXTOID, TEXTOID};
		Datum		v[4] = {Int32GetDatum(s->source_id), CStringGetTextDatum(s->tenant),
			CStringGetTextDatum(s->object_type), s->src->repo ? CStringGetTextDatum(s->src->repo) : (Datum) 0};
		char		nl[4] = {' ', ' ', ' ', s->src->repo ? ' ' : 'n'};

		wi_spi_exec("SELECT DISTINCT r FROM (SELECT coalesce(substring(o.state -> 'repository' ->> 'full_name' "
					"FROM '^([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)$'), substring(o.state ->> 'url' FROM "
					"'/repos/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)/(?:issues|pulls)/[0-9]+$')) AS r "
					"FROM webhook_inbox.objects o WHERE o.source_id = $1 AND o.tenant = $2 "
					"AND o.object_type = $3 UNION ALL SELECT $4) x WHERE r IS NOT NULL ORDER BY 1",
					4, t, v, nl, SPI_OK_SELECT);
		s->nrepos = (int) SPI_processed;
		s->repos = MemoryContextAlloc(wi_step_cxt(), sizeof(char *) * Max(s->nrepos, 1));
		for (int i = 0; i < s->nrepos; i++)
			s->repos[i] = MemoryContextStrdup(wi_step_cxt(),
											  SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
		if (s->nrepos > 0 && s->src->repo == NULL)
			s->src->repo = s->repos[0];
	}
	/* whether the scopes the tenant's token holds are known (asked once per token) */
	if (s->adapter != NULL && s->adapter->scopes_url != NULL)
	{
		Oid			t[2] = {INT4OID, TEXTOID};
		Datum		v[2] = {Int32GetDatum(s->source_id), CStringGetTextDatum(s->tenant)};
		bool		isnull;

		wi_spi_exec("SELECT EXISTS (SELECT 1 FROM webhook_inbox.source_scopes c "
					"WHERE c.source_id = $1 AND c.tenant = $2)", 2, t, v, NULL, SPI_OK_SELECT);
		s->scopes_known = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	}
	s->supported = s->adapter != NULL &&
		s->adapter->type_map(s->src, s->object_type, &s->type) &&
		s->adapter->list_url(s->src, &s->type, WI_LIST_ALL, NULL) != NULL;
	s->events = s->supported && strcmp(s->layer, "incremental") == 0 &&
		s->adapter->events_url != NULL;
	MemoryContextSwitchTo(old);
}

void
wi_sweep_begin_step(void *arg)
{
	Sweep	   *s = (Sweep *) arg;
	Oid			t[7] = {INT4OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		v[7] = {Int32GetDatum(s->source_id), CStringGetTextDatum(s->object_type),
		CStringGetTextDatum(s->trigger),
		CStringGetTextDatum(psprintf("%d seconds", wi_sweep_overlap_s)),
		CStringGetTextDatum(s->layer), (Datum) 0, CStringGetTextDatum(s->tenant)};
	char		nl[7] = {' ', ' ', ' ', ' ', ' ', 'n', ' '};
	bool		isnull;

	/* an events list keeps a window: older changes cannot be compared through it */
	if (s->events)
	{
		v[5] = CStringGetTextDatum(psprintf(INT64_FORMAT " seconds", s->adapter->events_window_s));
		nl[5] = ' ';
	}
	wi_spi_exec("SELECT run_id, since_epoch FROM webhook_inbox._sweep_begin($1, $2, $3, $4::interval, "
				"$5, $6::interval, $7)", 7, t, v, nl, SPI_OK_SELECT);
	s->run_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	s->since = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	/* the run's row alone */
	wi_step_commit_lazily(s->steps);
}

void
wi_sweep_page_step(void *arg)
{
	Sweep	   *s = (Sweep *) arg;
	MemoryContext cxt = wi_step_cxt();
	Oid			t[6] = {INT8OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, BOOLOID};
	Datum		v[6];
	char		nl[6] = {' ', ' ', ' ', ' ', ' ', ' '};
	int32		unhidden;
	/* the page in the shape the type map's paths read (a GraphQL page in REST's) */
	const char *body = wi_answer_shape(s->adapter, s->src, s->object_type, s->body);

	if (body == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("the list response has no listing in it")));
	v[0] = Int64GetDatum(s->run_id);
	v[1] = CStringGetTextDatum(body);
	v[2] = CStringGetTextDatum(s->type.items_path);
	v[3] = text_or_null(s->type.status_path, &nl[3]);
	v[4] = text_or_null(s->type.version_path, &nl[4]);
	v[5] = BoolGetDatum(s->type.occurrence);
	wi_spi_exec("SELECT object_id, item::text, deleted, has_more, last_id, unhidden FROM webhook_inbox._sweep_page("
		 "$1, $2, $3::jsonpath, $4::jsonpath, $5::jsonpath, $6)", 6, t, v, nl, SPI_OK_SELECT);
	s->diffs = MemoryContextAllocZero(cxt, sizeof(Diff) * Max(SPI_processed, 1));
	s->ndiffs = 0;
	s->has_more = false;
	s->last_id = NULL;
	unhidden = 0;
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		char	   *id = SPI_getvalue(tup, desc, 1);
		bool		isnull;
		char	   *last = SPI_getvalue(tup, desc, 5);

		s->has_more = DatumGetBool(SPI_getbinval(tup, desc, 4, &isnull));
		unhidden = DatumGetInt32(SPI_getbinval(tup, desc, 6, &isnull));
		s->last_id = last ? MemoryContextStrdup(cxt, last) : NULL;
		if (id == NULL)
			continue;
		s->diffs[s->ndiffs].object_id = MemoryContextStrdup(cxt, id);
		s->diffs[s->ndiffs].item = MemoryContextStrdup(cxt, SPI_getvalue(tup, desc, 2));
		s->diffs[s->ndiffs].deleted = DatumGetBool(SPI_getbinval(tup, desc, 3, &isnull));
		s->ndiffs++;
	}
	/* the differences are repaired each in a transaction of its own, later */
	if (unhidden == 0)
		wi_step_commit_lazily(s->steps);
}

/* One page of the events list into the inbox, as deliveries. */
void
wi_sweep_events_step(void *arg)
{
	Sweep	   *s = (Sweep *) arg;
	MemoryContext cxt = wi_step_cxt();
	Oid			t[2] = {INT8OID, TEXTOID};
	Datum		v[2] = {Int64GetDatum(s->run_id), CStringGetTextDatum(s->body)};
	bool		isnull;
	char	   *last;

	wi_spi_exec("SELECT has_more, last_id, events_listed FROM webhook_inbox._sweep_events($1, $2)", 2, t, v,
				NULL, SPI_OK_SELECT);
	s->has_more = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	last = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	s->last_id = last ? MemoryContextStrdup(cxt, last) : NULL;
	s->ndiffs = 0;
	/* an empty page only counted itself into the run; a listed event went through intake() */
	if (DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull)) == 0)
		wi_step_commit_lazily(s->steps);
}

/*
 * Runs fn(run_id), a set-returning function of object ids, and copies the ids
 * into the step's memory context; *n gets their number.
 */
static char **
run_object_ids(const char *sql, int64 run_id, int *n)
{
	MemoryContext cxt = wi_step_cxt();
	Oid			t[1] = {INT8OID};
	Datum		v[1] = {Int64GetDatum(run_id)};
	char	  **ids;

	wi_spi_exec(sql, 1, t, v, NULL, SPI_OK_SELECT);
	*n = (int) SPI_processed;
	ids = MemoryContextAlloc(cxt, sizeof(char *) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
		ids[i] = MemoryContextStrdup(cxt, SPI_getvalue(SPI_tuptable->vals[i],
													   SPI_tuptable->tupdesc, 1));
	return ids;
}

/* After a full listing: the mirror's live objects it did not name. */
void
wi_sweep_missing_step(void *arg)
{
	Sweep	   *s = (Sweep *) arg;

	s->missing = run_object_ids("SELECT webhook_inbox._sweep_missing($1)", s->run_id, &s->nmissing);
	/* the count of them into the run; each is read and repaired later */
	wi_step_commit_lazily(s->steps);
}

void
wi_sweep_skip_step(void *arg)
{
	Sweep	   *s = (Sweep *) arg;
	Oid			t[2] = {INT8OID, TEXTOID};
	Datum		v[2] = {Int64GetDatum(s->run_id), CStringGetTextDatum(s->skip_id)};

	wi_spi_exec("SELECT webhook_inbox._sweep_skip($1, $2)", 2, t, v, NULL, SPI_OK_SELECT);
}

/* Before listing: the differences the last pass skipped under a live claim. */
void
wi_sweep_retry_step(void *arg)
{
	Sweep	   *s = (Sweep *) arg;

	s->retry = run_object_ids("SELECT webhook_inbox._sweep_retry_ids($1)", s->run_id, &s->nretry);
}

void
wi_sweep_lease_step(void *arg)
{
	Sweep	   *s = (Sweep *) arg;
	Oid			t[6] = {INT4OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		v[6] = {Int32GetDatum(s->source_id), CStringGetTextDatum(s->object_type),
		CStringGetTextDatum(s->diff->object_id), CStringGetTextDatum(s->holder),
		CStringGetTextDatum(psprintf("%d milliseconds", wi_lease_ms)),
	CStringGetTextDatum(s->tenant)};
	bool		isnull;
	Datum		d;

	wi_spi_exec("SELECT webhook_inbox._sweep_lease($1, $2, $3, $4, $5::interval, $6)", 6, t, v, NULL,
		 SPI_OK_SELECT);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	s->token = isnull ? 0 : DatumGetInt64(d);
}

void
wi_sweep_repair_step(void *arg)
{
	Sweep	   *s = (Sweep *) arg;
	Oid			t[9] = {INT8OID, INT8OID, TEXTOID, TEXTOID, TEXTOID, BOOLOID, TEXTOID, TEXTOID, BOOLOID};
	Datum		v[9];
	char		nl[9] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};

	/* a present read by id comes in the provider's shape; a listed item is shaped already */
	if (s->refetched && s->object != NULL)
		s->object = (char *) wi_answer_shape(s->adapter, s->src, s->object_type, s->object);
	v[0] = Int64GetDatum(s->run_id);
	v[1] = Int64GetDatum(s->token);
	nl[1] = s->token ? ' ' : 'n';
	v[2] = CStringGetTextDatum(s->diff->object_id);
	v[3] = text_or_null(s->object, &nl[3]);
	v[4] = CStringGetTextDatum(s->unwrap);
	v[5] = BoolGetDatum(s->deleted);
	v[6] = text_or_null(s->type.status_path, &nl[6]);
	v[7] = text_or_null(s->type.version_path, &nl[7]);
	v[8] = BoolGetDatum(s->type.occurrence);
	wi_spi_exec("SELECT webhook_inbox._sweep_repair($1, $2, $3, jsonb_path_query_first($4::jsonb, "
		 "$5::jsonpath), $6, $7::jsonpath, $8::jsonpath, $9)", 9, t, v, nl, SPI_OK_SELECT);
	s->result = MemoryContextStrdup(wi_step_cxt(),
									SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
}

void
wi_sweep_count_step(void *arg)
{
	Sweep	   *s = (Sweep *) arg;
	Oid			t[4] = {INT8OID, INT8OID, INT4OID, INT4OID};
	Datum		v[4] = {Int64GetDatum(s->run_id), Int64GetDatum(s->token), Int32GetDatum(s->skipped),
	Int32GetDatum(s->errors)};
	char		nl[4] = {' ', s->token ? ' ' : 'n', ' ', ' '};

	wi_spi_exec("SELECT webhook_inbox._sweep_count($1, $2, $3, $4)", 4, t, v, nl, SPI_OK_SELECT);
}

void
wi_sweep_scopes_step(void *arg)
{
	Sweep	   *s = (Sweep *) arg;
	Oid			t[3] = {INT4OID, TEXTOID, TEXTOID};
	Datum		v[3] = {Int32GetDatum(s->source_id), CStringGetTextDatum(s->tenant),
		CStringGetTextDatum(s->body)};
	bool		isnull;
	Datum		why;

	wi_spi_exec("SELECT webhook_inbox._scopes_try($1, $2, $3)", 3, t, v, NULL, SPI_OK_SELECT);
	why = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull)
		ereport(LOG,
				(errmsg("webhook_inbox: source \"%s\" could not read its access scopes: %s",
						s->src->name, TextDatumGetCString(why)),
				 errdetail("Until it does, what a scope would let it see is treated as hidden, never as deleted.")));
	s->scopes_known = true;
}

void
wi_sweep_finish_step(void *arg)
{
	Sweep	   *s = (Sweep *) arg;
	Oid			t[3] = {INT8OID, TEXTOID, TEXTOID};
	Datum		v[3];
	char		nl[3] = {' ', ' ', ' '};

	v[0] = Int64GetDatum(s->run_id);
	v[1] = text_or_null(s->error, &nl[1]);
	v[2] = text_or_null(s->incomplete, &nl[2]);
	wi_spi_exec("SELECT webhook_inbox._sweep_finish($1, $2, $3)", 3, t, v, nl, SPI_OK_SELECT);
	s->status = MemoryContextStrdup(wi_step_cxt(),
									SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));

	/*
	 * The run's end and its checkpoint: the pass's repairs committed each
	 * in its own durable transaction before, and a checkpoint a crash
	 * loses only makes the next pass list the same window again.
	 */
	wi_step_commit_lazily(s->steps);
}

/*
 * One page of GET /installation/repositories: the repositories' full names
 * appended to s->repos.  A name that is not OWNER/NAME of the characters
 * GitHub allows would make another URL than the repository's: refused.
 */
void
wi_sweep_repos_step(void *arg)
{
	Sweep	   *s = (Sweep *) arg;
	Oid			t[1] = {TEXTOID};
	Datum		v[1] = {CStringGetTextDatum(s->body)};
	char	   *bad;

	wi_spi_exec("SELECT CASE WHEN jsonb_typeof(d -> 'repositories') IS DISTINCT FROM 'array' "
				"THEN 'no repositories array' ELSE (SELECT coalesce(r ->> 'full_name', r::text) "
				"FROM jsonb_array_elements(d -> 'repositories') r "
				"WHERE coalesce(r ->> 'full_name', '') !~ '^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$' LIMIT 1) END "
				"FROM (SELECT $1::jsonb AS d) x", 1, t, v, NULL, SPI_OK_SELECT);
	bad = wi_spi_first_text();
	if (bad != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("the installation's repositories answer is unusable: %s",
						strcmp(bad, "no repositories array") == 0 ? bad :
						psprintf("repository \"%s\" is not OWNER/NAME", bad))));
	wi_spi_exec("SELECT r ->> 'full_name' FROM jsonb_array_elements(($1::jsonb) -> 'repositories') r",
				1, t, v, NULL, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return;
	s->repos = s->repos == NULL
		? MemoryContextAlloc(s->repos_cxt, sizeof(char *) * (s->nrepos + SPI_processed))
		: repalloc(s->repos, sizeof(char *) * (s->nrepos + SPI_processed));
	for (uint64 r = 0; r < SPI_processed; r++)
		s->repos[s->nrepos++] = MemoryContextStrdup(s->repos_cxt,
													SPI_getvalue(SPI_tuptable->vals[r],
																 SPI_tuptable->tupdesc, 1));
}
