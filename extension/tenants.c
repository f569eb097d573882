/*
 * tenants.c
 *		Discovering a source's tenants from the provider's own list of them
 *		(Stripe: GET /v1/accounts, the platform's connected accounts), so
 *		that the sweep reconciles every tenant, even one whose deliveries
 *		were all lost.  Deliveries register their tenants at intake too.
 *
 * The list is read with the platform's own credentials (no tenant header),
 * page by page (limit 100, starting_after the last id while has_more), and
 * each page is registered by _tenants_listed() in its own step: an
 * interrupted listing keeps what it read.  The worker lists every source
 * whose adapter has a tenants list and that has tenants or asks for it
 * (settings "connect": true), once per sweep_interval; discover_tenants()
 * lists one source now.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "credentials.h"
#include "provider.h"
#include "ratelimit.h"
#include "restore_guard.h"
#include "step.h"
#include "sweep.h"
#include "webhook_inbox.h"

PG_FUNCTION_INFO_V1(wi_discover_tenants);

#define TENANTS_MAX_PAGES 10000

typedef struct Discovery
{
	int32		source_id;
	WiSource   *src;
	const WiAdapter *adapter;
	char	   *body;			/* the current page */
	bool		has_more;
	char	   *last_id;
	int			listed;
} Discovery;

static void
load_step(void *arg)
{
	Discovery  *d = (Discovery *) arg;
	MemoryContext old = MemoryContextSwitchTo(wi_step_cxt());

	d->src = wi_source_load(d->source_id);
	d->adapter = wi_adapter_for(d->src);
	if (d->adapter != NULL && d->adapter->tenants_url == NULL)
		d->adapter = NULL;
	MemoryContextSwitchTo(old);
}

static void
page_step(void *arg)
{
	Discovery  *d = (Discovery *) arg;
	Oid			t[2] = {INT4OID, TEXTOID};
	Datum		v[2] = {Int32GetDatum(d->source_id), CStringGetTextDatum(d->body)};
	bool		isnull;
	char	   *last;

	wi_spi_exec("SELECT listed, has_more, last_id FROM webhook_inbox._tenants_listed($1, $2)",
				2, t, v, NULL, SPI_OK_SELECT);
	d->listed += DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	d->has_more = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	last = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3);
	d->last_id = last ? MemoryContextStrdup(wi_step_cxt(), last) : NULL;
}

/*
 * Lists the tenants of one source; returns how many were listed, or -1
 * when the source has no tenants list.  *error says why a listing stopped
 * short (NULL when it read every page).
 */
static int
discover(const WiSteps *steps, int32 source_id, char **error)
{
	Discovery	d;
	char	   *url;
	char	   *err;
	int			pages = 0;

	/* a GitHub App lists its installations as the app (adapters/github.c) */
	if ((d.listed = wi_github_discover(steps, source_id, error)) >= 0)
		return d.listed;
	memset(&d, 0, sizeof(d));
	d.source_id = source_id;
	*error = NULL;
	if (wi_step_run(steps, load_step, &d) != NULL || d.adapter == NULL)
		return -1;
	url = d.adapter->tenants_url(d.src, NULL);
	while (url != NULL && *error == NULL)
	{
		WiHttpRequest req;
		WiRate	   *r = wi_rate_for(source_id);
		WiPace		pace;

		if (++pages > TENANTS_MAX_PAGES)
		{
			*error = psprintf("more than %d pages", TENANTS_MAX_PAGES);
			break;
		}
		wi_http_init_request(&req, url, d.adapter->auth_header(d.src), source_id, d.src->api_base, NULL);
		/* the platform's own list: its own credentials, no tenant */
		wi_request_scope(&req, d.adapter, d.src, "", NULL);
		wi_request_pace(&pace, d.adapter, d.src, "", url);
		if ((*error = wi_rate_list_page(steps, r, &pace, &req, "listing tenants")) != NULL)
			break;
		d.body = req.body.data;
		if ((err = wi_step_run(steps, page_step, &d)) != NULL)
		{
			*error = psprintf("reading a page of tenants failed: %s", err);
			break;
		}
		url = d.has_more && d.last_id ? d.adapter->tenants_url(d.src, d.last_id) : NULL;
	}
	return d.listed;
}

typedef struct Listers
{
	int32	   *ids;
	int			n;
} Listers;

static void
listers_step(void *arg)
{
	Listers    *l = (Listers *) arg;

	wi_spi_exec("SELECT s FROM webhook_inbox._tenant_listers() s", 0, NULL, NULL, NULL, SPI_OK_SELECT);
	l->n = (int) SPI_processed;
	l->ids = MemoryContextAlloc(wi_step_cxt(), sizeof(int32) * Max(l->n, 1));
	for (int i = 0; i < l->n; i++)
	{
		bool		isnull;

		l->ids[i] = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
	}
}

/*
 * In the worker, before the sweeps: lists the tenants of every source that
 * may have some, once per sweep_interval.  A listing that fails is logged
 * and tried again at the next interval; the tenants already known are
 * swept meanwhile.
 */
void
wi_tenants_due(const WiSteps *steps)
{
	static TimestampTz last = 0;
	TimestampTz now = GetCurrentTimestamp();
	Listers		l = {NULL, 0};

	if (wi_sweep_interval_s <= 0 || now - last < (TimestampTz) wi_sweep_interval_s * USECS_PER_SEC)
		return;
	last = now;
	if (wi_step_run(steps, listers_step, &l) != NULL)
		return;
	for (int i = 0; i < l.n && !wi_steps_stopping(steps); i++)
	{
		char	   *error;

		if (GetCurrentTimestamp() < wi_rate_for(l.ids[i])->not_before)
			continue;
		(void) discover(steps, l.ids[i], &error);
		if (error != NULL)
			ereport(LOG,
					(errmsg("webhook_inbox: listing the tenants of source %d stopped: %s",
							l.ids[i], error)));
	}
	wi_github_discover_due(steps);
}

/*
 * discover_tenants(source text) returns integer: lists the source's tenants
 * now, in this transaction; returns how many the provider listed.
 */
Datum
wi_discover_tenants(PG_FUNCTION_ARGS)
{
	char	   *source;
	int32		source_id;
	int			n;
	char	   *error;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("source must not be null")));
	source = text_to_cstring(PG_GETARG_TEXT_PP(0));
	source_id = wi_source_id_by_name(source);
	/* a paused copy lists nothing with the original's keys: say so first */
	wi_outbound_guard();
	{
		WiSteps		steps = {WI_STEPS_IN_CALLER, psprintf("backend:%d", MyProcPid), NULL};

		n = discover(&steps, source_id, &error);
	}
	if (n < 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("source \"%s\" has no list of tenants", source),
				 errdetail("A Stripe source with an api_base lists its connected accounts (GET /v1/accounts), a GitHub App its installations (GET /app/installations).")));
	if (error != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("listing the tenants of source \"%s\" failed", source),
				 errdetail("%s", error)));
	PG_RETURN_INT32(n);
}
