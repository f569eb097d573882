/*
 * sweep_pass.c
 *		One reconciliation pass: per (source, tenant, object type) with a read
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
 * The pass is driven from here, page by page; its requests to the provider
 * are sweep_http.c's, its SQL steps sweep_step.c's, and when it runs is
 * sweep.c's.
 */
#include "postgres.h"

#include "pgstat.h"
#include "utils/memutils.h"

#include "credentials.h"
#include "provider.h"
#include "stats.h"
#include "step.h"
#include "sweep_int.h"

#define SWEEP_MAX_PAGES 100000	/* a provider that pages forever is an error */

/* Counts a difference that could not be repaired, releasing its lease. */
static void
count_unrepaired(Sweep *s, int skipped, int errors)
{
	s->skipped = skipped;
	s->errors = errors;
	if (wi_step_run(s->steps, wi_sweep_count_step, s) != NULL && s->error == NULL)
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
	if (wi_step_run(s->steps, wi_sweep_lease_step, s) != NULL)
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
			if (wi_step_run(s->steps, wi_sweep_skip_step, s) != NULL && s->error == NULL)
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

			if (!wi_sweep_get(&req, url, body, s))
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
	err = wi_step_run(s->steps, wi_sweep_repair_step, s);
	if (err != NULL)
	{
		count_unrepaired(s, 0, 1);
		return;
	}
	if (strcmp(s->result, "applied") == 0 || strcmp(s->result, "tombstone") == 0 ||
		strcmp(s->result, "recorded") == 0 || strcmp(s->result, "revived") == 0)
		wi_stat_add(WI_STAT_REPAIRS, 1);
	if (strcmp(s->result, "revived") == 0)
		wi_stat_add(WI_STAT_REVIVED, 1);
	else if (strcmp(s->result, "hidden") == 0)
		wi_stat_add(WI_STAT_HIDDEN, 1);
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
		if (!wi_sweep_get(&req, url, NULL, s))
			s->error = pstrdup("interrupted");
		else if (req.status != 200)
			s->error = req.error != NULL || req.status == 0
				? psprintf("listing the installation's repositories failed: %s",
						   req.error ? req.error : "transport error")
				: psprintf("listing the installation's repositories answered http %ld", req.status);
		else
		{
			s->body = req.body.data;
			if ((err = wi_step_run(s->steps, wi_sweep_repos_step, s)) != NULL)
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
 * Asks the provider which access scopes the tenant's token holds, once per
 * token (source_scopes keeps the answer until the token or its scopes
 * change): a horizon such a scope lifts (Shopify's read_all_orders) is only
 * lifted when the provider said so.  A failed question is logged and
 * leaves the scopes unknown, which hides what the horizon would hide.
 */
static void
ask_scopes(Sweep *s)
{
	WiHttpRequest req;
	char	   *err;

	if (s->scopes_known || s->adapter->scopes_url == NULL)
		return;
	if (!wi_sweep_get(&req, s->adapter->scopes_url(s->src), s->adapter->scopes_body(s->src), s))
		return;
	if (req.status != 200 || req.body.data == NULL)
	{
		ereport(LOG,
				(errmsg("webhook_inbox: source \"%s\" could not learn its access scopes%s%s: %s",
						s->src->name, s->tenant[0] ? " for tenant " : "", s->tenant,
						req.error ? req.error : psprintf("http %ld", req.status)),
				 errdetail("Until it does, what a scope would let it see is treated as hidden, never as deleted.")));
		return;
	}
	s->body = req.body.data;
	if ((err = wi_step_run(s->steps, wi_sweep_scopes_step, s)) != NULL)
		ereport(LOG,
				(errmsg("webhook_inbox: source \"%s\" could not read its access scopes: %s", s->src->name, err)));
	s->body = NULL;
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

	if (wi_step_run(steps, wi_sweep_load_step, &s) != NULL || !s.supported)
		return 0;
	ask_scopes(&s);
	if (wi_step_run(steps, wi_sweep_begin_step, &s) != NULL)
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
	if (!s.type.occurrence && (err = wi_step_run(steps, wi_sweep_retry_step, &s)) != NULL)
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
			if (!wi_sweep_get(&req, url, body, &s))
				s.error = pstrdup("interrupted");
			else if (req.status != 200)
				s.error = req.error != NULL || req.status == 0
					? psprintf("listing failed: %s", req.error ? req.error : "transport error")
					: psprintf("listing answered http %ld", req.status);
			else
			{
				s.body = req.body.data;
				if ((err = wi_step_run(steps, s.events ? wi_sweep_events_step : wi_sweep_page_step, &s)) != NULL)
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
			if (next != NULL && req.pace_s > 0 && !wi_sweep_pause(steps, req.pace_s))
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
		if ((err = wi_step_run(steps, wi_sweep_missing_step, &s)) != NULL)
			s.error = psprintf("finding unlisted objects failed: %s", err);
		repair_by_id(&s, steps, s.missing, s.nmissing, pass_cxt, page_cxt);
	}
	MemoryContextDelete(page_cxt);

	if (wi_step_run(steps, wi_sweep_finish_step, &s) != NULL || s.status == NULL || strcmp(s.status, "complete") != 0)
		wi_stat_add(WI_STAT_SWEEPS_FAILED, 1);
	return s.run_id;
}
