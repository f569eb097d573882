/*
 * sweep_int.h
 *		What the files of a sweep share: the state of one pass (Sweep), the
 *		pass itself (sweep_pass.c), its requests to the provider
 *		(sweep_http.c) and its SQL steps (sweep_step.c).  Private to the
 *		sweeps; nothing outside them includes this.
 *
 * The files are layered: sweep.c (when a sweep runs) calls the pass, the
 * pass calls the requests and the steps, and neither of those calls back
 * up; what they find out they leave in the Sweep they are handed.
 */
#ifndef WI_SWEEP_INT_H
#define WI_SWEEP_INT_H

#include "postgres.h"

#include "provider.h"
#include "step.h"

/* One object to repair: as listed, or only named (item NULL: read by id). */
typedef struct Diff
{
	char	   *object_id;
	char	   *item;			/* the listed object, JSON text */
	bool		deleted;
} Diff;

/* The state of one pass, handed to each of its steps and requests. */
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
	bool		scopes_known;	/* source_scopes has the tenant's token's scopes */
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

/* ---------- the pass (sweep_pass.c) ---------- */

/*
 * One pass of a layer ("incremental" or "full") over (source, tenant,
 * object type); returns the sweep_runs id, 0 when the type has no list API.
 */
extern int64 wi_sweep_run(const WiSteps *steps, int32 source_id, const char *tenant, const char *object_type,
						  const char *layer, const char *trigger);

/* ---------- requests to the provider (sweep_http.c) ---------- */

/*
 * One GET of url for s (a POST of body, a GraphQL query, when not NULL),
 * unless a rate-limit window or the tenant's credentials forbid it;
 * req->error says why.  False if interrupted.
 */
extern bool wi_sweep_get(WiHttpRequest *req, char *url, char *body, Sweep *s);

/* Waits secs (capped) before the next page; false when the worker must stop. */
extern bool wi_sweep_pause(const WiSteps *steps, double secs);

/*
 * ---------- steps, each one transaction in the worker (sweep_step.c) ----------
 *
 * Each is run by wi_step_run() with the pass's Sweep as its argument, reads
 * what the pass set in it and leaves its findings there, in wi_step_cxt():
 *
 *	load	the source, its adapter, the tenant's context, the repositories
 *			to read; s->supported when the type can be listed
 *	begin	opens the sweep_runs row: s->run_id, s->since (the window)
 *	page	compares the listed page s->body with the mirror: s->diffs and
 *			the paging facts (s->has_more, s->last_id)
 *	events	one page of the events list into the inbox, as deliveries
 *	missing	after a full listing, the mirror's unlisted objects: s->missing
 *	skip	records s->skip_id as held by a live claim, read by id next time
 *	retry	before listing, what the last pass skipped: s->retry
 *	lease	the lease on s->diff's object: s->token, 0 while a claim holds it
 *	repair	saves s->object (or its deletion) under s->token, releasing the
 *			lease: s->result
 *	count	counts s->skipped and s->errors, releasing s->token's lease
 *	finish	closes the run, moving the checkpoint only when it is complete:
 *			s->status
 *	repos	one page of an installation's repositories onto s->repos
 *	scopes	the provider's answer s->body about the token's access scopes
 *			into source_scopes
 */
extern void wi_sweep_load_step(void *arg);
extern void wi_sweep_begin_step(void *arg);
extern void wi_sweep_page_step(void *arg);
extern void wi_sweep_events_step(void *arg);
extern void wi_sweep_missing_step(void *arg);
extern void wi_sweep_skip_step(void *arg);
extern void wi_sweep_retry_step(void *arg);
extern void wi_sweep_lease_step(void *arg);
extern void wi_sweep_repair_step(void *arg);
extern void wi_sweep_count_step(void *arg);
extern void wi_sweep_finish_step(void *arg);
extern void wi_sweep_repos_step(void *arg);
extern void wi_sweep_scopes_step(void *arg);

#endif							/* WI_SWEEP_INT_H */
