/*
 * sweep.c
 *		Reconciliation sweeps: per (source, tenant, object type) with a read
 *		API, under the tenant's credentials, list what changed since the
 *		checkpoint minus the overlap, compare it with the mirror, and repair
 *		each difference through the same guarded save path the worker uses.
 *
 * A repair first takes the object's lease (claim()'s lease, with a fresh
 * fencing token), so it can never overwrite a save the worker makes under a
 * newer claim, and it skips an object a live claim holds: that claim is about
 * to save the present anyway.  Objects without a version are fetched again
 * under the lease before they are saved, because the listed copy may be
 * older than a save made between the listing and the lease; versioned ones
 * are saved from the listing, the version guard keeping the newer.
 *
 * Only a pass that listed every page and repaired every difference (skips
 * excepted) is complete and moves the checkpoint, to the run's start; any
 * other is recorded as failed and the next run lists the same window again.
 *
 * The worker runs sweeps when due (webhook_inbox.sweep_interval), each step
 * its own transaction; sweep_now() runs one in the calling session, inside
 * its transaction.
 */
#include "postgres.h"

#include <time.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "credentials.h"
#include "provider.h"
#include "ratelimit.h"
#include "restore_guard.h"
#include "stats.h"
#include "step.h"
#include "sweep.h"
#include "webhook_inbox.h"

PG_FUNCTION_INFO_V1(wi_sweep_now);

#define SWEEP_MAX_PAGES 100000	/* a provider that pages forever is an error */

typedef struct Diff
{
	char	   *object_id;
	char	   *item;			/* the listed object, JSON text */
	bool		deleted;
} Diff;

typedef struct Sweep
{
	const WiSteps *steps;
	int32		source_id;
	const char *tenant;			/* "" for the source's own account */
	char	   *context;		/* the tenant's Stripe context, or NULL */
	const char *object_type;
	const char *trigger;
	const char *layer;			/* "incremental" or "full" */
	bool		events;			/* incremental through the provider's events list */
	const char *holder;
	WiSource   *src;
	const WiAdapter *adapter;
	WiTypeMap	type;
	bool		supported;
	int64		run_id;
	int64		since;
	/* the current page */
	char	   *body;
	Diff	   *diffs;
	int			ndiffs;
	bool		has_more;
	char	   *last_id;
	/* the current repair */
	Diff	   *diff;
	int64		token;
	char	   *object;			/* JSON text to save, or NULL */
	bool		refetched;		/* object is an answer read by id */
	const char *unwrap;
	bool		deleted;
	char	   *result;
	int			skipped;
	int			errors;
	char	   *error;			/* why the pass failed, or NULL */
	char	   *incomplete;		/* why the pass compared less than everything, or NULL */
	char	   *status;
	/* full passes: the mirror's objects the listing did not name */
	char	  **missing;
	int			nmissing;
	/* what the previous pass skipped under a live claim, read by id first */
	char	  **retry;
	int			nretry;
	const char *skip_id;		/* the difference being recorded as skipped */
	/* a GitHub App's installation: its token on every read, its repositories */
	bool		gh_app;
	char	  **repos;			/* owner/name, as GitHub listed them */
	int			nrepos;
	MemoryContext repos_cxt;
} Sweep;

static Datum
text_or_null(const char *s, char *null)
{
	*null = s ? ' ' : 'n';
	return s ? CStringGetTextDatum(s) : (Datum) 0;
}

/* ---------- steps, each one transaction in the worker ---------- */

static void
load_step(void *arg)
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
	s->supported = s->adapter != NULL &&
		s->adapter->type_map(s->src, s->object_type, &s->type) &&
		s->adapter->list_url(s->src, &s->type, WI_LIST_ALL, NULL) != NULL;
	s->events = s->supported && strcmp(s->layer, "incremental") == 0 &&
		s->adapter->events_url != NULL;
	MemoryContextSwitchTo(old);
}

static void
begin_step(void *arg)
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
}

static void
page_step(void *arg)
{
	Sweep	   *s = (Sweep *) arg;
	MemoryContext cxt = wi_step_cxt();
	Oid			t[6] = {INT8OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, BOOLOID};
	Datum		v[6];
	char		nl[6] = {' ', ' ', ' ', ' ', ' ', ' '};
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
	wi_spi_exec("SELECT object_id, item::text, deleted, has_more, last_id FROM webhook_inbox._sweep_page("
		 "$1, $2, $3::jsonpath, $4::jsonpath, $5::jsonpath, $6)", 6, t, v, nl, SPI_OK_SELECT);
	s->diffs = MemoryContextAllocZero(cxt, sizeof(Diff) * Max(SPI_processed, 1));
	s->ndiffs = 0;
	s->has_more = false;
	s->last_id = NULL;
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		char	   *id = SPI_getvalue(tup, desc, 1);
		bool		isnull;
		char	   *last = SPI_getvalue(tup, desc, 5);

		s->has_more = DatumGetBool(SPI_getbinval(tup, desc, 4, &isnull));
		s->last_id = last ? MemoryContextStrdup(cxt, last) : NULL;
		if (id == NULL)
			continue;
		s->diffs[s->ndiffs].object_id = MemoryContextStrdup(cxt, id);
		s->diffs[s->ndiffs].item = MemoryContextStrdup(cxt, SPI_getvalue(tup, desc, 2));
		s->diffs[s->ndiffs].deleted = DatumGetBool(SPI_getbinval(tup, desc, 3, &isnull));
		s->ndiffs++;
	}
}

/* One page of the events list into the inbox, as deliveries. */
static void
events_step(void *arg)
{
	Sweep	   *s = (Sweep *) arg;
	MemoryContext cxt = wi_step_cxt();
	Oid			t[2] = {INT8OID, TEXTOID};
	Datum		v[2] = {Int64GetDatum(s->run_id), CStringGetTextDatum(s->body)};
	bool		isnull;
	char	   *last;

	wi_spi_exec("SELECT has_more, last_id FROM webhook_inbox._sweep_events($1, $2)", 2, t, v, NULL,
				SPI_OK_SELECT);
	s->has_more = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	last = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	s->last_id = last ? MemoryContextStrdup(cxt, last) : NULL;
	s->ndiffs = 0;
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
static void
missing_step(void *arg)
{
	Sweep	   *s = (Sweep *) arg;

	s->missing = run_object_ids("SELECT webhook_inbox._sweep_missing($1)", s->run_id, &s->nmissing);
}

static void
skip_step(void *arg)
{
	Sweep	   *s = (Sweep *) arg;
	Oid			t[2] = {INT8OID, TEXTOID};
	Datum		v[2] = {Int64GetDatum(s->run_id), CStringGetTextDatum(s->skip_id)};

	wi_spi_exec("SELECT webhook_inbox._sweep_skip($1, $2)", 2, t, v, NULL, SPI_OK_SELECT);
}

/* Before listing: the differences the last pass skipped under a live claim. */
static void
retry_step(void *arg)
{
	Sweep	   *s = (Sweep *) arg;

	s->retry = run_object_ids("SELECT webhook_inbox._sweep_retry_ids($1)", s->run_id, &s->nretry);
}

static void
lease_step(void *arg)
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

static void
repair_step(void *arg)
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

static void
count_step(void *arg)
{
	Sweep	   *s = (Sweep *) arg;
	Oid			t[4] = {INT8OID, INT8OID, INT4OID, INT4OID};
	Datum		v[4] = {Int64GetDatum(s->run_id), Int64GetDatum(s->token), Int32GetDatum(s->skipped),
	Int32GetDatum(s->errors)};
	char		nl[4] = {' ', s->token ? ' ' : 'n', ' ', ' '};

	wi_spi_exec("SELECT webhook_inbox._sweep_count($1, $2, $3, $4)", 4, t, v, nl, SPI_OK_SELECT);
}

static void
finish_step(void *arg)
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
}

/*
 * One page of GET /installation/repositories: the repositories' full names
 * appended to s->repos.  A name that is not OWNER/NAME of the characters
 * GitHub allows would make another URL than the repository's: refused.
 */
static void
repos_step(void *arg)
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

/* ---------- one run ---------- */

/*
 * GitHub meters a GitHub App per installation (its primary rate limit:
 * x-ratelimit-remaining, until x-ratelimit-reset), so the window a spent
 * limit opens is the installation's: its reads wait for it, every other
 * installation's go on.  Kept in this process, as ratelimit.c keeps a
 * source's.
 */
#define MAX_INSTALLATION_RATES 256

typedef struct InstallationRate
{
	int32		source_id;
	char		tenant[32];
	TimestampTz not_before;
} InstallationRate;

static InstallationRate installation_rates[MAX_INSTALLATION_RATES];
static int	ninstallation_rates = 0;

static InstallationRate *
installation_rate(int32 source_id, const char *tenant)
{
	InstallationRate *r;

	for (int i = 0; i < ninstallation_rates; i++)
		if (installation_rates[i].source_id == source_id &&
			strcmp(installation_rates[i].tenant, tenant) == 0)
			return &installation_rates[i];
	if (ninstallation_rates == MAX_INSTALLATION_RATES)
		ninstallation_rates = 0;	/* forget the oldest: only costs one refused read */
	r = &installation_rates[ninstallation_rates++];
	r->source_id = source_id;
	strlcpy(r->tenant, tenant, sizeof(r->tenant));
	r->not_before = 0;
	return r;
}

/* The credentials of a GitHub App installation's read, asked in a step. */
typedef struct SweepAuth
{
	Sweep	   *s;
	const char *refused;		/* the header a 401 answered, or NULL */
	bool		fresh;			/* mint a new token, whatever is cached */
	char	   *header;
	WiAuthStatus status;
	char	   *reason;
} SweepAuth;

static void
auth_step(void *arg)
{
	SweepAuth  *a = (SweepAuth *) arg;
	MemoryContext old = MemoryContextSwitchTo(wi_step_cxt());

	a->header = NULL;
	a->reason = NULL;
	if (a->refused != NULL)
	{
		a->status = wi_tenant_auth_refused(a->s->source_id, a->s->tenant, a->refused, &a->header,
										   &a->reason);
		if (a->status != WI_AUTH_OK)
			a->header = NULL;
	}
	else
		a->header = wi_github_tenant_auth_header(a->s->src, a->s->tenant, a->fresh ? WI_AUTH_FRESH : 0,
												 &a->status, &a->reason);
	MemoryContextSwitchTo(old);
}

/*
 * The installation token of s's tenant into req (carrying the tenant's
 * credentials), after refused was answered 401 when it is not NULL.  False
 * with req->error saying why when there is none to send: no credentials
 * yet, a flagged or disabled installation, a token endpoint that refused
 * or could not be reached; the request is then not sent, and nothing about
 * the tenant's objects is concluded from it.
 */
static bool
sweep_auth(Sweep *s, WiHttpRequest *req, const char *refused, bool fresh)
{
	SweepAuth	a = {s, refused, fresh, NULL, WI_AUTH_WAIT, NULL};
	char	   *err = wi_step_run(s->steps, auth_step, &a);

	if (err != NULL || a.status != WI_AUTH_OK || a.header == NULL)
	{
		req->error = psprintf("tenant_credentials: %s",
							  err ? err : a.reason ? a.reason : "no credentials to send");
		return false;
	}
	req->auth = a.header;
	req->credentials = s->tenant;
	return true;
}

/*
 * One request, synchronously: a GET, or a POST of body when it is not NULL
 * (a GraphQL query); false if interrupted (SIGTERM).  Inside the source's
 * Retry-After window (ratelimit.c) nothing is sent and req->error says so;
 * a 429 or 503 answer opens that window, as a fetch's does.  The adapter's
 * read_answer, if any, reads the answer first, as for a fetch.
 */
static bool
http_get(WiHttpRequest *req, char *url, char *body, Sweep *s)
{
	WiRate	   *r = wi_rate_for(s->source_id);

	wi_http_init_request(req, url, s->adapter->auth_header(s->src), s->source_id, s->src->api_base, NULL);
	req->post_body = body;
	wi_request_scope(req, s->adapter, s->src, s->tenant, s->context);
	if (req->auth_wait != NULL)
	{
		/* the tenant's credentials are not usable: nothing sent, the pass fails */
		req->error = pstrdup(req->auth_wait);
		return true;
	}
	if (GetCurrentTimestamp() < r->not_before)
	{
		req->error = pstrdup("rate_limited: inside the source's Retry-After window");
		return true;
	}
	/* a GitHub App's installation: inside its rate-limit window nothing is sent */
	if (s->gh_app && GetCurrentTimestamp() < installation_rate(s->source_id, s->tenant)->not_before)
	{
		req->error = psprintf("rate_limited: installation %s's rate limit is spent until its reset", s->tenant);
		return true;
	}
	/* its token, or the request is not sent */
	if (s->gh_app && !sweep_auth(s, req, NULL, false))
		return true;
	if (!wi_http_run(s->steps, &req, 1, 1, NULL, NULL, NULL))
		return false;
	/* the installation's token was refused (it expired early, was revoked): mint again, once */
	if (s->gh_app && req->status == 401)
	{
		char	   *refused = req->auth;

		wi_http_init_request(req, url, NULL, s->source_id, s->src->api_base, NULL);
		req->post_body = body;
		wi_request_scope(req, s->adapter, s->src, s->tenant, s->context);
		if (!sweep_auth(s, req, refused, false))
		{
			req->status = 401;
			return true;
		}
		if (!wi_http_run(s->steps, &req, 1, 1, NULL, NULL, NULL))
			return false;
	}

	/*
	 * 403 under a token that was valid: the installation may have been
	 * suspended since (GitHub: "This installation has been suspended").
	 * The token endpoint says so (403 flags the installation, 404 a
	 * removed one); when it mints, the 403 was about something else (a
	 * permission, GitHub's secondary rate limit) and stands.
	 */
	if (s->gh_app && (req->status == 403 || req->status == 429) &&
		(req->ratelimit_remaining == 0 || req->retry_after_s >= 0))
	{
		/* the installation's rate limit (or GitHub's secondary one): its own window */
		int64		now = (int64) time(NULL);
		int64		wait = req->retry_after_s >= 0 ? req->retry_after_s
			: req->ratelimit_reset > now ? req->ratelimit_reset - now : 1;

		wait = Min(wait, 3600);
		installation_rate(s->source_id, s->tenant)->not_before =
			GetCurrentTimestamp() + (TimestampTz) wait * USECS_PER_SEC;
		wi_stat_add(WI_STAT_RATE_LIMITED, 1);
		req->error = psprintf("rate_limited: installation %s: http %ld, x-ratelimit-remaining %lld, "
							  "waiting " INT64_FORMAT " s", s->tenant, req->status,
							  (long long) req->ratelimit_remaining, wait);
		return true;
	}
	if (s->gh_app && req->status == 403)
	{
		WiHttpRequest probe;

		memset(&probe, 0, sizeof(probe));
		if (!sweep_auth(s, &probe, NULL, true))
			req->error = probe.error;
	}
	wi_stat_latency(req->elapsed_ms);
	/* a GraphQL answer's errors, its budget and its next page, as a fetch's */
	if (s->adapter->read_answer && !req->refused && req->status != 0)
	{
		s->adapter->read_answer(s->src, &s->type, req);
		if (req->pace_s > 0)
			wi_rate_pause(r, GetCurrentTimestamp() + (TimestampTz) (req->pace_s * USECS_PER_SEC));
	}
	if (req->status == 429 || req->status == 503)
	{
		double		wait = req->retry_after_s >= 0 ? (double) req->retry_after_s : 1.0;

		wi_stat_add(WI_STAT_RATE_LIMITED, 1);
		wi_rate_slow_down(r, GetCurrentTimestamp() + (TimestampTz) (wait * USECS_PER_SEC));
		req->error = psprintf("rate_limited: %s (Retry-After %.0f s)",
							  req->error ? req->error : psprintf("http %ld", req->status), wait);
	}
	return true;
}

/*
 * Waits secs (at most SWEEP_MAX_PAUSE_S) before the pass's next page: a
 * source whose answer says its budget is spent (pace_s, Shopify's cost
 * bucket) refills in seconds, and the pass would otherwise fail on the
 * next page's THROTTLED.  Sleeps in short steps; false when the worker is
 * asked to stop (in a backend, an interrupt is serviced).
 */
#define SWEEP_MAX_PAUSE_S 10.0

static bool
sweep_pause(const WiSteps *steps, double secs)
{
	TimestampTz until = GetCurrentTimestamp() +
		(TimestampTz) (Min(secs, SWEEP_MAX_PAUSE_S) * USECS_PER_SEC);

	for (;;)
	{
		long		ms = (long) ((until - GetCurrentTimestamp()) / 1000);

		if (ms <= 0)
			return true;
		if (steps->stop_flag == NULL)
			CHECK_FOR_INTERRUPTS();
		else if (wi_steps_stopping(steps))
			return false;
		pg_usleep(Min(ms, 100) * 1000L);
	}
}

/* Counts a difference that could not be repaired, releasing its lease. */
static void
count_unrepaired(Sweep *s, int skipped, int errors)
{
	s->skipped = skipped;
	s->errors = errors;
	if (wi_step_run(s->steps, count_step, s) != NULL && s->error == NULL)
		s->error = pstrdup("counting a difference failed");
	s->skipped = s->errors = 0;
	s->token = 0;
}

static void
repair_one(Sweep *s, Diff *d)
{
	char	   *err;

	s->diff = d;
	s->token = 0;
	s->object = d->item;
	s->refetched = false;
	s->unwrap = "$";
	s->deleted = d->deleted;
	if (wi_step_run(s->steps, lease_step, s) != NULL)
	{
		count_unrepaired(s, 0, 1);
		return;
	}
	if (s->token == 0)
	{
		count_unrepaired(s, 1, 0);	/* a live claim holds it */

		/*
		 * The claim may save something older than the listing: the
		 * next pass reads the object by id first, so the checkpoint
		 * can move on.  Without a read by id it must list it again.
		 */
		if (s->adapter->object_url(s->src, &s->type, d->object_id) != NULL)
		{
			s->skip_id = d->object_id;
			if (wi_step_run(s->steps, skip_step, s) != NULL && s->error == NULL)
				s->error = pstrdup("recording a skipped difference failed");
		}
		else if (s->incomplete == NULL)
			s->incomplete = pstrdup("a live claim held an object and the provider has no read by id: the next pass lists it again");
		return;
	}
	/*
	 * No version: the listing may be older than a save; read the
	 * present.  Not listed at all (d->item NULL): only a read by id
	 * tells a gone object from one a moving listing skipped.
	 */
	if ((s->type.version_path == NULL && !d->deleted) || d->item == NULL)
	{
		char	   *url = s->adapter->object_url(s->src, &s->type, d->object_id);

		if (url == NULL && d->item == NULL)
		{
			count_unrepaired(s, 1, 0);
			if (s->incomplete == NULL)
				s->incomplete = pstrdup("objects absent from the listing were kept: the provider has no read by id to confirm they are gone");
			return;
		}

		if (url != NULL)
		{
			WiHttpRequest req;
			char	   *body = s->adapter->object_body
				? s->adapter->object_body(s->src, &s->type, d->object_id) : NULL;

			if (!http_get(&req, url, body, s))
			{
				count_unrepaired(s, 0, 1);
				s->error = pstrdup("interrupted");
				return;
			}
			if ((req.status == 404 || req.status == 410) && strcmp(req.credentials, s->tenant) != 0)
			{
				/* not asked under the tenant's own credentials: no evidence */
				count_unrepaired(s, 0, 1);
				return;
			}
			if (req.status == 404 || req.status == 410)
			{
				s->object = NULL;
				s->deleted = true;
			}
			else if (req.status >= 200 && req.status < 300)
			{
				s->object = req.body.data;
				s->refetched = true;
				s->unwrap = s->type.unwrap_path ? s->type.unwrap_path : "$";
			}
			else
			{
				count_unrepaired(s, 0, 1);
				return;
			}
		}
	}
	err = wi_step_run(s->steps, repair_step, s);
	if (err != NULL)
	{
		count_unrepaired(s, 0, 1);
		return;
	}
	if (strcmp(s->result, "applied") == 0 || strcmp(s->result, "tombstone") == 0 ||
		strcmp(s->result, "recorded") == 0)
		wi_stat_add(WI_STAT_REPAIRS, 1);
}

/*
 * Lists the repositories of s's installation (GET /installation/repositories,
 * paged by the Link header, under its token) into s->repos, kept in
 * pass_cxt; on a failure s->error says why.
 */
static void
list_repositories(Sweep *s, MemoryContext pass_cxt)
{
	char	   *url = wi_github_repositories_url(s->src);
	int			pages = 0;

	s->repos_cxt = pass_cxt;
	while (url != NULL && s->error == NULL)
	{
		WiHttpRequest req;
		char	   *err;

		if (++pages > SWEEP_MAX_PAGES)
		{
			s->error = psprintf("more than %d pages of repositories", SWEEP_MAX_PAGES);
			break;
		}
		if (!http_get(&req, url, NULL, s))
			s->error = pstrdup("interrupted");
		else if (req.status != 200)
			s->error = req.error != NULL || req.status == 0
				? psprintf("listing the installation's repositories failed: %s",
						   req.error ? req.error : "transport error")
				: psprintf("listing the installation's repositories answered http %ld", req.status);
		else
		{
			s->body = req.body.data;
			if ((err = wi_step_run(s->steps, repos_step, s)) != NULL)
				s->error = psprintf("reading the installation's repositories failed: %s", err);
			url = req.link_next ? pstrdup(req.link_next) : NULL;
		}
		s->body = NULL;
	}
}

/* Copies why the pass stopped or is incomplete out of a page's context. */
static void
keep_reasons(Sweep *s, MemoryContext cxt)
{
	if (s->error != NULL && GetMemoryChunkContext(s->error) != cxt)
		s->error = MemoryContextStrdup(cxt, s->error);
	if (s->incomplete != NULL && GetMemoryChunkContext(s->incomplete) != cxt)
		s->incomplete = MemoryContextStrdup(cxt, s->incomplete);
}

/*
 * Reads and repairs the objects ids[0..n-1] by id, one at a time in
 * page_cxt (reset after each, as a page is), until the pass fails or the
 * worker is asked to stop.  Why it stopped is kept in pass_cxt.
 */
static void
repair_by_id(Sweep *s, const WiSteps *steps, char **ids, int n,
			 MemoryContext pass_cxt, MemoryContext page_cxt)
{
	for (int i = 0; i < n && s->error == NULL; i++)
	{
		Diff		d = {ids[i], NULL, false};

		if (steps->stop_flag != NULL && wi_steps_stopping(steps))
		{
			s->error = pstrdup("interrupted");
			break;
		}
		MemoryContextSwitchTo(page_cxt);
		repair_one(s, &d);
		MemoryContextSwitchTo(pass_cxt);
		keep_reasons(s, pass_cxt);
		MemoryContextReset(page_cxt);
	}
}

/*
 * Runs one sweep of (source, object type).  Returns the sweep_runs id, or 0
 * when the source has no list API for the type (nothing is recorded).  In
 * the worker every failure is recorded in the run; in a backend SQL errors
 * propagate and HTTP failures are recorded.
 */
int64
wi_sweep_run(const WiSteps *steps, int32 source_id, const char *tenant, const char *object_type,
			 const char *layer, const char *trigger)
{
	Sweep		s;
	char	   *url;
	char	   *body;
	char	   *err;
	int			pages = 0;
	MemoryContext pass_cxt;
	MemoryContext page_cxt;
	Size		held_at_start;

	memset(&s, 0, sizeof(s));
	s.steps = steps;
	s.source_id = source_id;
	s.tenant = tenant ? tenant : "";
	s.object_type = object_type;
	s.trigger = trigger;
	s.layer = layer;
	s.holder = psprintf("sweep:%s", steps->holder);

	if (wi_step_run(steps, load_step, &s) != NULL || !s.supported)
		return 0;
	if (wi_step_run(steps, begin_step, &s) != NULL)
		return 0;
	pgstat_report_activity(STATE_RUNNING, "sweeping");
	wi_stat_add(WI_STAT_SWEEPS, 1);

	/*
	 * Each page is read, compared and repaired in a context of its own,
	 * reset before the next: a pass holds one page at a time (its body, its
	 * differences, their refetched bodies), never the whole listing.  What
	 * outlives the page (the next URL, why the pass stopped) is copied out.
	 */
	pass_cxt = CurrentMemoryContext;
	page_cxt = AllocSetContextCreate(pass_cxt, "webhook_inbox sweep page", ALLOCSET_DEFAULT_SIZES);

	/* first what the previous pass skipped under a live claim, by id */
	if (!s.type.occurrence && (err = wi_step_run(steps, retry_step, &s)) != NULL)
		s.error = psprintf("reading the skipped objects failed: %s", err);
	repair_by_id(&s, steps, s.retry, s.nretry, pass_cxt, page_cxt);

	/*
	 * GitHub: the repositories a GitHub App's installation was granted, or
	 * those a plain source's deliveries named, each listed in turn
	 */
	if (s.gh_app && s.error == NULL)
		list_repositories(&s, pass_cxt);
	for (int ri = 0; s.error == NULL && ri < (s.gh_app || s.repos != NULL ? s.nrepos : 1); ri++)
	{
		if (s.gh_app || s.repos != NULL)
			s.src->repo = s.repos[ri];
		url = s.events ? s.adapter->events_url(s.src, &s.type, s.since, NULL)
			: s.adapter->list_url(s.src, &s.type, strcmp(s.layer, "full") == 0 ? WI_LIST_ALL : s.since, NULL);
		body = !s.events && s.adapter->list_body
			? s.adapter->list_body(s.src, &s.type, strcmp(s.layer, "full") == 0 ? WI_LIST_ALL : s.since, NULL)
			: NULL;
		held_at_start = MemoryContextMemAllocated(pass_cxt, true);
		while (url != NULL && s.error == NULL)
		{
			WiHttpRequest req;
			char	   *next = NULL;
			char	   *next_body = NULL;

			if (++pages > SWEEP_MAX_PAGES)
			{
				s.error = psprintf("more than %d pages", SWEEP_MAX_PAGES);
				break;
			}
			MemoryContextSwitchTo(page_cxt);
			if (!http_get(&req, url, body, &s))
				s.error = pstrdup("interrupted");
			else if (req.status != 200)
				s.error = req.error != NULL || req.status == 0
					? psprintf("listing failed: %s", req.error ? req.error : "transport error")
					: psprintf("listing answered http %ld", req.status);
			else
			{
				s.body = req.body.data;
				if ((err = wi_step_run(steps, s.events ? events_step : page_step, &s)) != NULL)
					s.error = psprintf("reading a page failed: %s", err);
				for (int i = 0; i < s.ndiffs && s.error == NULL; i++)
				{
					if (steps->stop_flag != NULL && wi_steps_stopping(steps))
						s.error = pstrdup("interrupted");
					else
						repair_one(&s, &s.diffs[i]);
				}
				/* a Link rel="next" wins; otherwise page after the last id while has_more */
				if (s.error != NULL)
					;
				else if (req.link_next)
					next = req.link_next;
				else if (s.has_more && (req.next_cursor || s.last_id))
				{
					/* the answer's own cursor (GraphQL's endCursor) wins over the last id */
					const char *cursor = req.next_cursor ? req.next_cursor : s.last_id;
					int64		since = strcmp(s.layer, "full") == 0 ? WI_LIST_ALL : s.since;

					next = s.events ? s.adapter->events_url(s.src, &s.type, s.since, cursor)
						: s.adapter->list_url(s.src, &s.type, since, cursor);
					if (next != NULL && !s.events && s.adapter->list_body)
						next_body = s.adapter->list_body(s.src, &s.type, since, cursor);
					if (next == NULL)
						s.error = pstrdup("the list has more pages but the adapter cannot page by id");
				}
			}
			/* the next page only once the source's budget allows it */
			if (next != NULL && req.pace_s > 0 && !sweep_pause(steps, req.pace_s))
				s.error = pstrdup("interrupted");
			MemoryContextSwitchTo(pass_cxt);
			pfree(url);
			if (body)
				pfree(body);
			url = next ? pstrdup(next) : NULL;
			body = next_body ? pstrdup(next_body) : NULL;
			keep_reasons(&s, pass_cxt);
			MemoryContextReset(page_cxt);
			s.body = NULL;
			s.diffs = NULL;
			s.ndiffs = 0;
			s.last_id = NULL;
			elog(DEBUG1, "webhook_inbox: sweep run " INT64_FORMAT " page %d done, %zu bytes held",
				 s.run_id, pages, (size_t) (MemoryContextMemAllocated(pass_cxt, true) - held_at_start));
		}
	}

	/* a full pass that listed everything: what the mirror has and the provider did not list */
	if (s.error == NULL && strcmp(s.layer, "full") == 0)
	{
		if ((err = wi_step_run(steps, missing_step, &s)) != NULL)
			s.error = psprintf("finding unlisted objects failed: %s", err);
		repair_by_id(&s, steps, s.missing, s.nmissing, pass_cxt, page_cxt);
	}
	MemoryContextDelete(page_cxt);

	if (wi_step_run(steps, finish_step, &s) != NULL || s.status == NULL || strcmp(s.status, "complete") != 0)
		wi_stat_add(WI_STAT_SWEEPS_FAILED, 1);
	return s.run_id;
}

/* ---------- scheduling in the worker ---------- */

typedef struct Targets
{
	int32	   *source_ids;
	char	  **types;
	char	  **layers;
	char	  **tenants;
	int			n;
} Targets;

static void
targets_step(void *arg)
{
	Targets    *tg = (Targets *) arg;
	MemoryContext cxt = wi_step_cxt();
	Oid			t[2] = {TEXTOID, TEXTOID};
	Datum		v[2] = {CStringGetTextDatum(psprintf("%d seconds", wi_sweep_interval_s)),
	CStringGetTextDatum(psprintf("%d seconds", wi_full_sweep_interval_s))};

	wi_spi_exec("SELECT source_id, object_type, layer, tenant FROM webhook_inbox._sweep_targets($1::interval, "
				"$2::interval)", 2, t, v, NULL, SPI_OK_SELECT);
	tg->n = (int) SPI_processed;
	tg->source_ids = MemoryContextAlloc(cxt, sizeof(int32) * Max(tg->n, 1));
	tg->types = MemoryContextAlloc(cxt, sizeof(char *) * Max(tg->n, 1));
	tg->layers = MemoryContextAlloc(cxt, sizeof(char *) * Max(tg->n, 1));
	tg->tenants = MemoryContextAlloc(cxt, sizeof(char *) * Max(tg->n, 1));
	for (int i = 0; i < tg->n; i++)
	{
		bool		isnull;

		tg->source_ids[i] = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i],
														SPI_tuptable->tupdesc, 1, &isnull));
		tg->types[i] = MemoryContextStrdup(cxt, SPI_getvalue(SPI_tuptable->vals[i],
															 SPI_tuptable->tupdesc, 2));
		tg->layers[i] = MemoryContextStrdup(cxt, SPI_getvalue(SPI_tuptable->vals[i],
															  SPI_tuptable->tupdesc, 3));
		tg->tenants[i] = MemoryContextStrdup(cxt, SPI_getvalue(SPI_tuptable->vals[i],
															   SPI_tuptable->tupdesc, 4));
	}
}

/*
 * In the worker, after each round: runs the sweeps that are due.  Looks at
 * most once a second; a pair without a list API records no run, costs one
 * source lookup per look and sends nothing.
 */
void
wi_sweep_due(const WiSteps *steps)
{
	static TimestampTz last_check = 0;
	TimestampTz now = GetCurrentTimestamp();
	Targets		tg = {NULL, NULL, NULL, NULL, 0};

	if ((wi_sweep_interval_s <= 0 && wi_full_sweep_interval_s <= 0) ||
		now - last_check < USECS_PER_SEC)
		return;
	last_check = now;
	/* the tenants first, so that a tenant the provider lists is swept too */
	wi_tenants_due(steps);
	if (wi_step_run(steps, targets_step, &tg) != NULL)
		return;
	for (int i = 0; i < tg.n && !wi_steps_stopping(steps); i++)
	{
		/* a source inside its Retry-After window is swept once it ends */
		if (GetCurrentTimestamp() < wi_rate_for(tg.source_ids[i])->not_before)
			continue;
		(void) wi_sweep_run(steps, tg.source_ids[i], tg.tenants[i], tg.types[i], tg.layers[i], "schedule");
	}
}

/* ---------- sweep_now ---------- */

/*
 * _sweep_now(source text, object_type text, layer text) returns bigint: the
 * run's id.
 * The SQL wrapper sweep_now() returns the run's row.
 */
Datum
wi_sweep_now(PG_FUNCTION_ARGS)
{
	char	   *source;
	char	   *object_type;
	char	   *layer;
	char	   *tenant = "";
	int32		source_id;
	int64		run_id;

	/* a database still at 0.1.0 has no path for this: say what to run */
	wi_schema_require_current("sweep_now");

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("source, object_type and layer must not be null")));
	source = text_to_cstring(PG_GETARG_TEXT_PP(0));
	object_type = text_to_cstring(PG_GETARG_TEXT_PP(1));
	layer = text_to_cstring(PG_GETARG_TEXT_PP(2));
	if (PG_NARGS() > 3 && !PG_ARGISNULL(3))
		tenant = text_to_cstring(PG_GETARG_TEXT_PP(3));
	if (strcmp(layer, "incremental") != 0 && strcmp(layer, "full") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown sweep layer \"%s\"", layer),
				 errhint("A sweep layer is incremental or full.")));

	source_id = wi_source_id_by_name(source);
	/* a restored copy lists nothing until resume_outbound() */
	wi_outbound_guard();

	{
		WiSteps		steps = {WI_STEPS_IN_CALLER, psprintf("backend:%d", MyProcPid), NULL};

		run_id = wi_sweep_run(&steps, source_id, tenant, object_type, layer, "manual");
	}
	if (run_id == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("source \"%s\" has no list API for object type \"%s\"", source, object_type),
				 errdetail("Sweeps need the source's api_base and an adapter that can list this type."),
				 errhint("Set api_base (and, for a generic read API, settings.list_url) with create_source().")));
	PG_RETURN_INT64(run_id);
}
