/*
 * model.c
 *		Scenario generation, the provider's object store and the Stripe
 *		events store (see model.h).
 *
 * Lifecycles (statuses and event types as stripe-node types them):
 *   subscription    incomplete -> active | incomplete_expired; trialing ->
 *                   active | past_due | paused | canceled; active -> past_due
 *                   | paused | canceled; past_due -> active | unpaid |
 *                   canceled; unpaid -> active | canceled; paused -> active
 *                   (resumed) | canceled.  canceled and incomplete_expired are
 *                   final; a canceled subscription stays retrievable.  Also
 *                   quantity changes.  Events customer.subscription.created,
 *                   .updated, .paused, .resumed, .deleted (on cancel).
 *   payment_intent  requires_payment_method -> requires_confirmation (silent:
 *                   Stripe has no event for it) -> a payment attempt:
 *                   requires_action | processing | requires_capture |
 *                   succeeded, or a failure back to requires_payment_method
 *                   (payment_intent.payment_failed); requires_action ->
 *                   processing | succeeded | failure; processing ->
 *                   succeeded | requires_capture | failure; requires_capture
 *                   -> succeeded | canceled; any unfinished status ->
 *                   canceled.  A cycle, not a DAG.  Succeeded ones get
 *                   refunds and disputes (at most three).
 *   refund          pending -> succeeded | failed | canceled (refund.created,
 *                   refund.updated, refund.failed); created pending or
 *                   succeeded.
 *   dispute         needs_response -> under_review -> won | lost;
 *                   warning_needs_response -> warning_under_review ->
 *                   warning_closed (charge.dispute.created, .updated, .closed).
 *   charge          one per payment attempt when enabled: pending ->
 *                   succeeded | failed; a manual-capture charge is captured
 *                   later (charge.pending, .succeeded, .failed, .captured,
 *                   .refunded).
 *   invoice         draft -> open -> paid | uncollectible | void, a failed
 *                   payment keeps it open, uncollectible -> paid | void
 *                   (invoice.created, .finalized, .paid, .payment_failed,
 *                   .marked_uncollectible, .voided).
 *   customer        created, updated, deleted (then retrieved as
 *                   {"id","object":"customer","deleted":true}).
 *   checkout.session created silently (open) -> complete | expired
 *                   (checkout.session.completed, .expired).
 *   order           Shopify: pending -> authorized | paid | voided, authorized
 *                   -> paid | voided, paid -> partially_refunded | refunded,
 *                   partially_refunded -> refunded; updates without a status
 *                   change; deletion.  updated_at grows by >= 1 s per change.
 *
 * Every random draw comes from one xoshiro stream in a fixed order, so the
 * stream is a pure function of the seed, the epoch and the flags that shape
 * it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "../extension/adapters/shopify_graphql.h"

static const char *const sub_status[] = {"incomplete", "incomplete_expired", "trialing",
"active", "past_due", "canceled", "unpaid", "paused"};
enum
{
	SUB_INCOMPLETE, SUB_INCOMPLETE_EXPIRED, SUB_TRIALING, SUB_ACTIVE, SUB_PAST_DUE,
	SUB_CANCELED, SUB_UNPAID, SUB_PAUSED
};
static const char *const pi_status[] = {"requires_payment_method", "requires_confirmation",
"requires_action", "processing", "requires_capture", "succeeded", "canceled"};
enum
{
	PI_RPM, PI_RC, PI_ACTION, PI_PROCESSING, PI_CAPTURE, PI_SUCCEEDED, PI_CANCELED
};
static const char *const inv_status[] = {"draft", "open", "paid", "uncollectible", "void"};
enum
{
	INV_DRAFT, INV_OPEN, INV_PAID, INV_UNCOLLECTIBLE, INV_VOID
};
static const char *const cs_status[] = {"open", "complete", "expired"};
enum
{
	CS_OPEN, CS_COMPLETE, CS_EXPIRED
};
static const char *const order_status[] = {"pending", "authorized", "paid", "partially_refunded", "refunded", "voided"};
enum
{
	ORD_PENDING, ORD_AUTHORIZED, ORD_PAID, ORD_PARTIAL, ORD_REFUNDED, ORD_VOIDED
};
static const char *const gh_status[] = {"open", "closed"};
enum
{
	GH_OPEN, GH_CLOSED
};
static const char *const re_status[] = {"pending", "succeeded", "failed", "canceled"};
enum
{
	RE_PENDING, RE_SUCCEEDED, RE_FAILED, RE_CANCELED
};
static const char *const dp_status[] = {"warning_needs_response", "warning_under_review",
"warning_closed", "needs_response", "under_review", "won", "lost"};
enum
{
	DP_WARN_NEEDS, DP_WARN_REVIEW, DP_WARN_CLOSED, DP_NEEDS, DP_REVIEW, DP_WON, DP_LOST
};
static const char *const ch_status[] = {"pending", "succeeded", "failed"};
enum
{
	CH_PENDING, CH_SUCCEEDED, CH_FAILED
};

static const char *const stripe_currency[] = {"usd", "eur", "gbp"};
static const char *const shop_currency[] = {"USD", "EUR", "CAD"};

static const char *const type_names[OT__COUNT] = {
	[OT_SUB] = "subscription", [OT_PI] = "payment_intent", [OT_INVOICE] = "invoice",
	[OT_CUSTOMER] = "customer", [OT_CHECKOUT] = "checkout.session", [OT_ORDER] = "order",
	[OT_ISSUE] = "issue", [OT_PULL] = "pull_request", [OT_REFUND] = "refund", [OT_DISPUTE] = "dispute", [OT_CHARGE] = "charge",
};
static const char *const type_paths[OT__COUNT] = {
	[OT_SUB] = "subscriptions", [OT_PI] = "payment_intents", [OT_INVOICE] = "invoices",
	[OT_CUSTOMER] = "customers", [OT_CHECKOUT] = "checkout/sessions", [OT_ORDER] = "orders",
	[OT_ISSUE] = "issues", [OT_PULL] = "pulls", [OT_REFUND] = "refunds", [OT_DISPUTE] = "disputes", [OT_CHARGE] = "charges",
};

#define MAX_PI_ATTEMPTS 3
#define STRIPE_API_VERSION "2024-06-20"
/* X-Shopify-API-Version of deliveries: the version the adapter speaks */
#define SHOPIFY_API_VERSION SHOPIFY_GQL_API_VERSION

const char *
obj_type_name(obj_type t)
{
	return type_names[t];
}

const char *
obj_type_path(obj_type t)
{
	return type_paths[t];
}

int
obj_type_is_occurrence(obj_type t)
{
	return t == OT_REFUND || t == OT_DISPUTE;
}

unsigned
model_parse_types(const char *list)
{
	unsigned	mask = 0;
	const char *p = list;

	while (*p)
	{
		const char *e = strchr(p, ',');
		size_t		n = e ? (size_t) (e - p) : strlen(p);
		int			t,
					found = 0;

		for (t = 0; t < OT__COUNT; t++)
			if (strlen(type_names[t]) == n && strncmp(type_names[t], p, n) == 0)
			{
				mask |= 1u << t;
				found = 1;
			}
		if (!found)
			return 0;
		p += n;
		if (*p == ',')
			p++;
	}
	return mask;
}

unsigned
model_default_types(void)
{
	return (1u << OT_SUB) | (1u << OT_PI) | (1u << OT_REFUND) | (1u << OT_DISPUTE) |
		(1u << OT_ORDER) | (1u << OT_ISSUE) | (1u << OT_PULL);
}

const char *
obj_status_name(const sim_object *o)
{
	switch (o->type)
	{
		case OT_SUB:
			return sub_status[o->status];
		case OT_PI:
			return pi_status[o->status];
		case OT_INVOICE:
			return inv_status[o->status];
		case OT_CHECKOUT:
			return cs_status[o->status];
		case OT_ORDER:
			return order_status[o->status];
		case OT_REFUND:
			return re_status[o->status];
		case OT_DISPUTE:
			return dp_status[o->status];
		case OT_CHARGE:
			return ch_status[o->status];
		case OT_ISSUE:
		case OT_PULL:
			return gh_status[o->status];
		default:
			return NULL;
	}
}

const char *
currency_name(const sim_object *o)
{
	return o->type == OT_ORDER ? shop_currency[o->currency] : stripe_currency[o->currency];
}

int
id_cmp(const char *a, const char *b)
{
	size_t		la = strlen(a),
				lb = strlen(b);

	if (la != lb)
		return la < lb ? -1 : 1;
	return strcmp(a, b);
}

/* ---------- population ---------- */

static sim_model *sort_model;	/* qsort has no context argument */

static int
cmp_obj_idx(const void *a, const void *b)
{
	return id_cmp(sort_model->objs[*(const long *) a].id,
				  sort_model->objs[*(const long *) b].id);
}

static void
make_id(sim_model *m, sim_rng *r, sim_object *o, long k)
{
	static const char *const prefix[OT__COUNT] = {
		[OT_SUB] = "sub_", [OT_PI] = "pi_", [OT_INVOICE] = "in_", [OT_CUSTOMER] = "cus_",
		[OT_CHECKOUT] = "cs_test_", [OT_REFUND] = "re_", [OT_DISPUTE] = "dp_", [OT_CHARGE] = "ch_",
	};
	char		tok[41];

	if (o->type == OT_ORDER)
	{
		snprintf(o->id, sizeof(o->id), "%lld",
				 450789469001LL + (long long) k * 1000 + (long long) rng_below(r, 1000));
		o->number = 1001 + k;
	}
	else if (o->type == OT_ISSUE || o->type == OT_PULL)
	{
		/* GitHub's global ids; a pull request's issue has an id of its own */
		snprintf(o->id, sizeof(o->id), "%lld",
				 (o->type == OT_PULL ? 2900000000LL : 3100000000LL) + (long long) k * 1000 +
				 (long long) rng_below(r, 1000));
		o->alt_id = 3100000000LL + (long long) k * 1000 + 999 - (long long) rng_below(r, 500);
	}
	else
	{
		rng_token(r, tok, o->type == OT_CHECKOUT ? 40 : o->type == OT_SUB ? 14 : 24);
		snprintf(o->id, sizeof(o->id), "%s%s", prefix[o->type], tok);
	}
	/* Ids are random: a rare collision is resolved by a suffix. */
	if (idmap_get(&m->obj_ids, o->id) >= 0)
		snprintf(o->id + strlen(o->id), sizeof(o->id) - strlen(o->id), "x%ld", k);
	idmap_put(&m->obj_ids, o->id, k);
}

bool
model_has_events(sign_kind k)
{
	return k == WI_KIND_stripe || k == WI_KIND_shopify || k == WI_KIND_standard ||
		k == WI_KIND_github;
}

void
model_init(sim_model *m, uint64_t seed, long nobjects, long nevents,
		   double thin_share, int64_t epoch, unsigned types_mask, const char *repo,
		   sim_source *sources, int nsources)
{
	obj_type	avail[OT__COUNT];
	int			navail = 0,
				i,
				t;
	long		k;
	int			stripe = -1,
				shopify = -1,
				standard = -1,
				github = -1;

	memset(m, 0, sizeof(*m));
	m->seed = seed;
	m->target_events = nevents;
	m->thin_share = thin_share;
	m->epoch = epoch;
	m->sources = sources;
	m->nsources = nsources;
	m->clock = epoch;
	rng_seed(&m->rng, seed);
	rng_seed(&m->effect_rng, seed ^ 0x5eed0fe77ec75ULL);

	for (i = 0; i < nsources; i++)
	{
		if (sources[i].kind == WI_KIND_stripe && stripe < 0)
			stripe = i;
		else if (sources[i].kind == WI_KIND_shopify && shopify < 0)
			shopify = i;
		else if (sources[i].kind == WI_KIND_standard && standard < 0)
			standard = i;
		else if (sources[i].kind == WI_KIND_github && github < 0)
			github = i;
	}
	snprintf(m->repo, sizeof(m->repo), "%s", repo ? repo : "acme/widgets");
	/* several repositories, comma-separated: the objects are spread over them */
	{
		char	   *p = m->repo;

		while (*p && m->nrepos < SIM_MAX_REPOS)
		{
			size_t		len = strcspn(p, ",");

			snprintf(m->repos[m->nrepos++], sizeof(m->repos[0]), "%.*s", (int) len, p);
			p += len + (p[len] == ',' ? 1 : 0);
		}
		if (m->nrepos == 0)
			snprintf(m->repos[m->nrepos++], sizeof(m->repos[0]), "%s", m->repo);
		snprintf(m->repo, sizeof(m->repo), "%s", m->repos[0]);
	}
	for (t = 0; t < OT__COUNT; t++)
		m->src_for[t] = (types_mask & (1u << t)) ? stripe : -1;
	if (types_mask & (1u << OT_SUB))
		m->src_for[OT_SUB] = standard >= 0 ? standard : stripe;
	m->src_for[OT_ORDER] = (types_mask & (1u << OT_ORDER)) ? shopify : -1;
	m->src_for[OT_ISSUE] = (types_mask & (1u << OT_ISSUE)) ? github : -1;
	m->src_for[OT_PULL] = (types_mask & (1u << OT_PULL)) ? github : -1;
	/* children need their PaymentIntents */
	if (m->src_for[OT_PI] < 0)
		m->src_for[OT_REFUND] = m->src_for[OT_DISPUTE] = m->src_for[OT_CHARGE] = -1;
	for (t = 0; t < OT_ROOT_COUNT; t++)
		if (m->src_for[t] >= 0)
			avail[navail++] = (obj_type) t;

	m->nobjs = navail ? nobjects : 0;
	m->nroots = m->nobjs;
	m->cap = m->nobjs + 64;
	m->objs = xcalloc((size_t) m->cap, sizeof(sim_object));
	for (k = 0; k < m->nobjs; k++)
	{
		sim_object *o = &m->objs[k];
		char		tok[32];

		o->type = avail[rng_below(&m->rng, (uint64_t) navail)];
		o->source = m->src_for[o->type];
		o->parent = -1;
		o->charge = -1;
		make_id(m, &m->rng, o, k);
		rng_token(&m->rng, tok, 14);
		snprintf(o->customer, sizeof(o->customer), "cus_%s", tok);
	}
	m->ncreated = 0;

	/* Order ids never change: sort them once. */
	sort_model = m;
	m->by_id = xcalloc((size_t) m->nobjs + 1, sizeof(long));
	for (k = 0; k < m->nobjs; k++)
		if (m->objs[k].type == OT_ORDER)
			m->by_id[m->nby_id++] = k;
	qsort(m->by_id, (size_t) m->nby_id, sizeof(long), cmp_obj_idx);
}

void
model_set_connect(sim_model *m, int n)
{
	sim_rng		r;
	long		k;
	long		nth = 0;

	rng_seed(&r, m->seed ^ 0xacc0c0ecULL);
	m->naccounts = n;
	m->accounts = xcalloc((size_t) (n > 0 ? n : 1), SIM_ACCOUNT_ID_LEN);
	m->account_created = xcalloc((size_t) (n > 0 ? n : 1), sizeof(int64_t));
	for (int i = 0; i < n; i++)
	{
		char		tok[24];

		rng_token(&r, tok, 16);
		snprintf(m->accounts[i], SIM_ACCOUNT_ID_LEN, "acct_%s", tok);
		m->account_created[i] = m->epoch - 86400 * (n - i);
	}
	if (n <= 0)
		return;
	for (k = 0; k < m->nroots; k++)
		if (m->sources[m->objs[k].source].kind == WI_KIND_stripe)
			m->objs[k].account = 1 + (int) (nth++ % n);
}

void
model_set_shops(sim_model *m, int n)
{
	long		nth = 0;

	m->nshops = n;
	m->shops = xcalloc((size_t) (n > 0 ? n : 1), 64);
	for (int i = 0; i < n; i++)
		snprintf(m->shops[i], 64, "shop-%d.myshopify.com", i + 1);
	if (n <= 0)
		return;
	for (long k = 0; k < m->nroots; k++)
		if (m->sources[m->objs[k].source].kind == WI_KIND_shopify)
			m->objs[k].account = 1 + (int) (nth++ % n);
}

const char *
model_shop_domain(const sim_model *m, int account)
{
	return account > 0 && account <= m->nshops ? m->shops[account - 1] : NULL;
}

const char *
model_tenant_of(const sim_model *m, const sim_object *o)
{
	const char *t = m->sources[o->source].kind == WI_KIND_shopify ? model_shop_domain(m, o->account)
		: model_account_id(m, o->account);

	return t ? t : "";
}

int
model_shop_of(const sim_model *m, const char *domain)
{
	for (int i = 0; domain != NULL && i < m->nshops; i++)
		if (strcmp(m->shops[i], domain) == 0)
			return i + 1;
	return -1;
}

const char *
model_account_id(const sim_model *m, int account)
{
	return account > 0 && account <= m->naccounts ? m->accounts[account - 1] : NULL;
}

int
model_account_of(const sim_model *m, const char *id)
{
	if (id == NULL || id[0] == '\0')
		return 0;
	for (int i = 0; i < m->naccounts; i++)
		if (strcmp(m->accounts[i], id) == 0)
			return i + 1;
	return -1;
}

void
model_free(sim_model *m)
{
	int			t;
	long		k;

	for (t = 0; t < OT__COUNT; t++)
		free(m->order[t]);
	for (k = 0; k < m->nevents; k++)
		free(m->events[k].body);
	for (k = 0; k < m->nqueue; k++)
		sim_event_free(&m->queue[k]);
	free(m->events);
	free(m->by_id);
	free(m->objs);
	free(m->accounts);
	free(m->shops);
	free(m->account_created);
	idmap_free(&m->obj_ids);
	idmap_free(&m->event_ids);
	memset(m, 0, sizeof(*m));
}

long
model_find_object(const sim_model *m, obj_type t, const char *id)
{
	long		k = idmap_get(&m->obj_ids, id);

	if (k < 0 || m->objs[k].type != t || !m->objs[k].exists)
		return -1;
	return k;
}

/* Mark o created now and append it to its type's creation order. */
static void
make_exist(sim_model *m, long k)
{
	sim_object *o = &m->objs[k];
	obj_type	t = o->type;

	o->exists = 1;
	o->created = m->clock;
	o->updated_at = m->clock;
	if (m->norder[t] == m->order_cap[t])
	{
		m->order_cap[t] = m->order_cap[t] ? m->order_cap[t] * 2 : 64;
		m->order[t] = xrealloc(m->order[t], (size_t) m->order_cap[t] * sizeof(long));
	}
	o->pos = m->norder[t];
	m->order[t][m->norder[t]++] = k;
}

/* A new child object of PaymentIntent pi (objs may move: use indices). */
static long
new_child(sim_model *m, sim_rng *r, obj_type t, long pi)
{
	long		k;
	sim_object *o;

	if (m->nobjs == m->cap)
	{
		m->cap = m->cap * 2 + 64;
		m->objs = xrealloc(m->objs, (size_t) m->cap * sizeof(sim_object));
	}
	k = m->nobjs++;
	o = &m->objs[k];
	memset(o, 0, sizeof(*o));
	o->type = t;
	o->source = m->objs[pi].source;
	o->account = m->objs[pi].account;
	o->parent = pi;
	o->charge = -1;
	o->currency = m->objs[pi].currency;
	snprintf(o->customer, sizeof(o->customer), "%s", m->objs[pi].customer);
	make_id(m, r, o, k);
	make_exist(m, k);
	return k;
}

/* ---------- rendering ---------- */

static void
render_money(sbuf *out, int64_t minor)
{
	sb_printf(out, "\"%lld.%02lld\"", (long long) (minor / 100), (long long) (minor % 100));
}

static void
render_ts_or_null(sbuf *out, const char *name, int set, int64_t t)
{
	if (set)
		sb_printf(out, ",\"%s\":%lld", name, (long long) t);
	else
		sb_printf(out, ",\"%s\":null", name);
}

static void
render_metadata(sbuf *out, const sim_object *o)
{
	sb_printf(out, ",\"metadata\":{%s}", o->metadata);
}

static const char *
id_of(const sim_model *m, long k)
{
	return k >= 0 ? m->objs[k].id : NULL;
}

static void
render_ref(sbuf *out, const char *name, const char *id)
{
	if (id)
		sb_printf(out, ",\"%s\":\"%s\"", name, id);
	else
		sb_printf(out, ",\"%s\":null", name);
}

const char *
model_gh_repo(const sim_model *m, const sim_object *o)
{
	return o->repo >= 0 && o->repo < m->nrepos ? m->repos[o->repo] : m->repo;
}

/* GitHub's user and repository objects, as the webhook and API payloads carry them. */
static void
render_gh_user(sbuf *out, const char *name)
{
	sb_printf(out, ",\"%s\":{\"login\":\"octocat\",\"id\":583231,\"node_id\":\"MDQ6VXNlcjU4MzIzMQ==\","
			  "\"type\":\"User\",\"site_admin\":false,\"url\":\"https://api.github.com/users/octocat\"}", name);
}

static void
render_gh_times(sbuf *out, const sim_object *o)
{
	char		c[40],
				u[40],
				x[40];

	iso_time(o->created, 1, c, sizeof(c));
	iso_time(o->updated_at, 1, u, sizeof(u));
	sb_printf(out, ",\"created_at\":\"%s\",\"updated_at\":\"%s\"", c, u);
	if (o->status == GH_CLOSED)
	{
		iso_time(o->updated_at, 1, x, sizeof(x));
		sb_printf(out, ",\"closed_at\":\"%s\"", x);
	}
	else
		sb_puts(out, ",\"closed_at\":null");
}

/*
 * An issue as GET /repos/{owner}/{repo}/issues shows it (the openapi
 * schema "issue"); a pull request appears there too, with its issue id and
 * a pull_request member.
 */
void
render_gh_issue(const sim_model *m, sbuf *out, const sim_object *o)
{
	long long	id = o->type == OT_PULL ? (long long) o->alt_id : atoll(o->id);
	const char *repo = model_gh_repo(m, o);
	const char *reason = o->status == GH_OPEN ? (o->attempts ? "\"reopened\"" : "null") :
	o->quantity % 3 == 0 ? "\"not_planned\"" : "\"completed\"";

	sb_printf(out, "{\"id\":%lld,\"node_id\":\"I_kwDO%lld\",\"number\":%ld,"
			  "\"url\":\"https://api.github.com/repos/%s/issues/%ld\","
			  "\"repository_url\":\"https://api.github.com/repos/%s\","
			  "\"labels_url\":\"https://api.github.com/repos/%s/issues/%ld/labels{/name}\","
			  "\"comments_url\":\"https://api.github.com/repos/%s/issues/%ld/comments\","
			  "\"events_url\":\"https://api.github.com/repos/%s/issues/%ld/events\","
			  "\"html_url\":\"https://github.com/%s/%s/%ld\","
			  "\"title\":\"%s %ld (rev %d)\",\"state\":\"%s\",\"state_reason\":%s,\"locked\":false,"
			  "\"assignee\":null,\"assignees\":[],\"milestone\":null,\"comments\":%d,"
			  "\"author_association\":\"MEMBER\",\"body\":null",
			  id, id, o->number, repo, o->number, repo, repo, o->number,
			  repo, o->number, repo, o->number, repo,
			  o->type == OT_PULL ? "pull" : "issues", o->number,
			  o->type == OT_PULL ? "Change" : "Issue", o->number, o->quantity,
			  gh_status[o->status], o->type == OT_PULL ? "null" : reason, o->quantity);
	if (o->currency)
		sb_puts(out, ",\"labels\":[{\"id\":208045946,\"node_id\":\"MDU6TGFiZWwyMDgwNDU5NDY=\","
				"\"name\":\"bug\",\"color\":\"f29513\",\"default\":true,\"description\":null}]");
	else
		sb_puts(out, ",\"labels\":[]");
	render_gh_user(out, "user");
	render_gh_times(out, o);
	if (o->type == OT_PULL)
	{
		char		mt[40];

		iso_time(o->updated_at, 1, mt, sizeof(mt));
		sb_printf(out, ",\"pull_request\":{\"url\":\"https://api.github.com/repos/%s/pulls/%ld\","
				  "\"html_url\":\"https://github.com/%s/pull/%ld\","
				  "\"diff_url\":\"https://github.com/%s/pull/%ld.diff\","
				  "\"patch_url\":\"https://github.com/%s/pull/%ld.patch\",\"merged_at\":",
				  repo, o->number, repo, o->number, repo, o->number, repo, o->number);
		if (o->captured)
			sb_printf(out, "\"%s\"}", mt);
		else
			sb_puts(out, "null}");
	}
	sb_putc(out, '}');
}

/* A pull request as GET /repos/{owner}/{repo}/pulls/{n} shows it. */
static void
render_gh_pull(const sim_model *m, sbuf *out, const sim_object *o)
{
	const char *repo = model_gh_repo(m, o);
	char		mt[40];

	iso_time(o->updated_at, 1, mt, sizeof(mt));
	sb_printf(out, "{\"id\":%s,\"node_id\":\"PR_kwDO%s\",\"number\":%ld,"
			  "\"url\":\"https://api.github.com/repos/%s/pulls/%ld\","
			  "\"html_url\":\"https://github.com/%s/pull/%ld\","
			  "\"issue_url\":\"https://api.github.com/repos/%s/issues/%ld\","
			  "\"state\":\"%s\",\"locked\":false,\"title\":\"Change %ld (rev %d)\",\"body\":null,"
			  "\"draft\":false,\"merged\":%s,\"merge_commit_sha\":null,"
			  "\"head\":{\"label\":\"octocat:change-%ld\",\"ref\":\"change-%ld\",\"sha\":\"%040ld\"},"
			  "\"base\":{\"label\":\"%s:main\",\"ref\":\"main\",\"sha\":\"%040d\"},"
			  "\"author_association\":\"MEMBER\",\"labels\":[],\"assignee\":null,\"assignees\":[],"
			  "\"requested_reviewers\":[],\"milestone\":null,\"auto_merge\":null,\"mergeable\":null,"
			  "\"mergeable_state\":\"unknown\",\"maintainer_can_modify\":false,\"merged_by\":null,"
			  "\"comments\":0,\"review_comments\":0,\"commits\":1,\"additions\":%d,\"deletions\":0,"
			  "\"changed_files\":1",
			  o->id, o->id, o->number, repo, o->number, repo, o->number, repo, o->number,
			  gh_status[o->status], o->number, o->quantity, o->captured ? "true" : "false",
			  o->number, o->number, (long) o->number * 7919 + o->quantity, repo, 0, 1 + o->quantity);
	sb_printf(out, ",\"diff_url\":\"https://github.com/%s/pull/%ld.diff\","
			  "\"patch_url\":\"https://github.com/%s/pull/%ld.patch\","
			  "\"commits_url\":\"https://api.github.com/repos/%s/pulls/%ld/commits\","
			  "\"review_comments_url\":\"https://api.github.com/repos/%s/pulls/%ld/comments\","
			  "\"review_comment_url\":\"https://api.github.com/repos/%s/pulls/comments{/number}\","
			  "\"comments_url\":\"https://api.github.com/repos/%s/issues/%ld/comments\","
			  "\"statuses_url\":\"https://api.github.com/repos/%s/statuses/%040ld\","
			  "\"_links\":{\"self\":{\"href\":\"https://api.github.com/repos/%s/pulls/%ld\"},"
			  "\"html\":{\"href\":\"https://github.com/%s/pull/%ld\"}}",
			  repo, o->number, repo, o->number, repo, o->number, repo, o->number,
			  repo, repo, o->number, repo, (long) o->number * 7919 + o->quantity,
			  repo, o->number, repo, o->number);
	render_gh_user(out, "user");
	render_gh_times(out, o);
	if (o->captured)
		sb_printf(out, ",\"merged_at\":\"%s\"}", mt);
	else
		sb_puts(out, ",\"merged_at\":null}");
}

/*
 * The object as Stripe's (or Shopify's) API shows it: the fields the
 * official SDK types declare for what this simulator models.
 */
void
render_object(const sim_model *m, sbuf *out, const sim_object *o)
{
	char		iso1[40],
				iso2[40];
	const char *st = obj_status_name(o);

	switch (o->type)
	{
		case OT_SUB:
			sb_printf(out, "{\"id\":\"%s\",\"object\":\"subscription\",\"status\":\"%s\","
					  "\"customer\":\"%s\",\"quantity\":%d,\"currency\":\"%s\",\"created\":%lld,"
					  "\"start_date\":%lld,\"livemode\":false,\"cancel_at_period_end\":false",
					  o->id, st, o->customer, o->quantity, currency_name(o),
					  (long long) o->created, (long long) o->created);
			render_ts_or_null(out, "canceled_at", o->status == SUB_CANCELED, o->updated_at);
			render_ts_or_null(out, "ended_at", o->status == SUB_CANCELED ||
							  o->status == SUB_INCOMPLETE_EXPIRED, o->updated_at);
			sb_printf(out, ",\"pause_collection\":%s",
					  o->status == SUB_PAUSED ? "{\"behavior\":\"void\",\"resumes_at\":null}" : "null");
			render_metadata(out, o);
			break;
		case OT_PI:
			sb_printf(out, "{\"id\":\"%s\",\"object\":\"payment_intent\",\"status\":\"%s\","
					  "\"amount\":%lld,\"amount_capturable\":%lld,\"amount_received\":%lld,"
					  "\"currency\":\"%s\",\"customer\":\"%s\",\"created\":%lld,\"livemode\":false,"
					  "\"capture_method\":\"%s\"",
					  o->id, st, (long long) o->amount,
					  (long long) (o->status == PI_CAPTURE ? o->amount : 0),
					  (long long) (o->status == PI_SUCCEEDED ? o->amount : 0),
					  currency_name(o), o->customer, (long long) o->created,
					  o->quantity ? "manual" : "automatic");
			render_ref(out, "latest_charge", id_of(m, o->charge));
			if (o->status == PI_RPM && o->attempts > 0)
				sb_puts(out, ",\"last_payment_error\":{\"type\":\"card_error\",\"code\":\"card_declined\","
						"\"decline_code\":\"generic_decline\",\"message\":\"Your card was declined.\"}");
			else
				sb_puts(out, ",\"last_payment_error\":null");
			render_ts_or_null(out, "canceled_at", o->status == PI_CANCELED, o->updated_at);
			sb_printf(out, ",\"cancellation_reason\":%s",
					  o->status == PI_CANCELED ? "\"abandoned\"" : "null");
			render_metadata(out, o);
			break;
		case OT_INVOICE:
			sb_printf(out, "{\"id\":\"%s\",\"object\":\"invoice\",\"status\":\"%s\","
					  "\"customer\":\"%s\",\"currency\":\"%s\",\"amount_due\":%lld,\"amount_paid\":%lld,"
					  "\"amount_remaining\":%lld,\"attempt_count\":%d,\"created\":%lld,\"livemode\":false,"
					  "\"collection_method\":\"charge_automatically\"",
					  o->id, st, o->customer, currency_name(o), (long long) o->amount,
					  (long long) (o->status == INV_PAID ? o->amount : 0),
					  (long long) (o->status == INV_PAID || o->status == INV_VOID ? 0 : o->amount),
					  o->attempts, (long long) o->created);
			render_metadata(out, o);
			break;
		case OT_CUSTOMER:
			if (o->deleted)
			{
				sb_printf(out, "{\"id\":\"%s\",\"object\":\"customer\",\"deleted\":true}", o->id);
				return;
			}
			sb_printf(out, "{\"id\":\"%s\",\"object\":\"customer\",\"created\":%lld,\"livemode\":false,"
					  "\"balance\":%lld,\"currency\":\"%s\",\"email\":\"%s@example.com\",\"name\":null,"
					  "\"delinquent\":false",
					  o->id, (long long) o->created, (long long) o->amount, currency_name(o),
					  o->id + 4);
			render_metadata(out, o);
			break;
		case OT_CHECKOUT:
			sb_printf(out, "{\"id\":\"%s\",\"object\":\"checkout.session\",\"status\":\"%s\","
					  "\"payment_status\":\"%s\",\"mode\":\"payment\",\"amount_total\":%lld,"
					  "\"currency\":\"%s\",\"customer\":\"%s\",\"created\":%lld,\"expires_at\":%lld,"
					  "\"livemode\":false,\"url\":null",
					  o->id, st, o->status == CS_COMPLETE ? "paid" : "unpaid",
					  (long long) o->amount, currency_name(o), o->customer,
					  (long long) o->created, (long long) (o->created + 86400));
			render_metadata(out, o);
			break;
		case OT_REFUND:
			sb_printf(out, "{\"id\":\"%s\",\"object\":\"refund\",\"amount\":%lld,\"currency\":\"%s\","
					  "\"payment_intent\":\"%s\",\"status\":\"%s\",\"created\":%lld,\"reason\":%s",
					  o->id, (long long) o->amount, currency_name(o), id_of(m, o->parent), st,
					  (long long) o->created,
					  o->quantity ? "\"requested_by_customer\"" : "null");
			render_ref(out, "charge", id_of(m, o->charge));
			sb_printf(out, ",\"failure_reason\":%s",
					  o->status == RE_FAILED ? "\"lost_or_stolen_card\"" : "null");
			render_metadata(out, o);
			break;
		case OT_DISPUTE:
			sb_printf(out, "{\"id\":\"%s\",\"object\":\"dispute\",\"amount\":%lld,\"currency\":\"%s\","
					  "\"payment_intent\":\"%s\",\"status\":\"%s\",\"reason\":\"fraudulent\","
					  "\"created\":%lld,\"livemode\":false,\"is_charge_refundable\":false",
					  o->id, (long long) o->amount, currency_name(o), id_of(m, o->parent), st,
					  (long long) o->created);
			render_ref(out, "charge", id_of(m, o->charge));
			render_metadata(out, o);
			break;
		case OT_CHARGE:
			sb_printf(out, "{\"id\":\"%s\",\"object\":\"charge\",\"amount\":%lld,\"amount_captured\":%lld,"
					  "\"amount_refunded\":%lld,\"captured\":%s,\"refunded\":%s,\"paid\":%s,"
					  "\"currency\":\"%s\",\"customer\":\"%s\",\"payment_intent\":\"%s\",\"status\":\"%s\","
					  "\"created\":%lld,\"livemode\":false,\"failure_code\":%s",
					  o->id, (long long) o->amount,
					  (long long) (o->captured ? o->amount : 0),
					  (long long) o->amount_refunded, o->captured ? "true" : "false",
					  o->amount_refunded >= o->amount ? "true" : "false",
					  o->status == CH_SUCCEEDED ? "true" : "false",
					  currency_name(o), o->customer, id_of(m, o->parent), st,
					  (long long) o->created,
					  o->status == CH_FAILED ? "\"card_declined\"" : "null");
			render_metadata(out, o);
			break;
		case OT_ISSUE:
			render_gh_issue(m, out, o);
			return;
		case OT_PULL:
			render_gh_pull(m, out, o);
			return;
		case OT_ORDER:
			iso_time(o->created, 0, iso1, sizeof(iso1));
			iso_time(o->updated_at, 0, iso2, sizeof(iso2));
			sb_printf(out, "{\"id\":%s,\"admin_graphql_api_id\":\"gid://shopify/Order/%s\",\"name\":\"#%ld\","
					  "\"created_at\":\"%s\",\"updated_at\":\"%s\",\"financial_status\":\"%s\",\"total_price\":",
					  o->id, o->id, o->number, iso1, iso2, st);
			render_money(out, o->amount);
			sb_printf(out, ",\"currency\":\"%s\"", currency_name(o));
			if (o->status == ORD_VOIDED)
				sb_printf(out, ",\"cancelled_at\":\"%s\"", iso2);
			else
				sb_puts(out, ",\"cancelled_at\":null");
			sb_puts(out, ",\"closed_at\":null");
			break;
		default:
			break;
	}
	sb_putc(out, '}');
}

/* ---------- event construction ---------- */

static sim_event *
queue_slot(sim_model *m)
{
	sim_event  *ev;

	if (m->nqueue == SIM_MAX_QUEUE)
	{
		fprintf(stderr, "webhook-sim: event queue overflow\n");
		abort();
	}
	ev = &m->queue[m->nqueue++];
	memset(ev, 0, sizeof(*ev));
	return ev;
}

static void
store_event(sim_model *m, const char *id, const char *type, int source, int account,
			int64_t created, const char *body)
{
	sim_stored_event *se;

	if (m->nevents == m->events_cap)
	{
		m->events_cap = m->events_cap ? m->events_cap * 2 : 256;
		m->events = xrealloc(m->events, (size_t) m->events_cap * sizeof(sim_stored_event));
	}
	se = &m->events[m->nevents];
	snprintf(se->id, sizeof(se->id), "%s", id);
	snprintf(se->type, sizeof(se->type), "%s", type);
	se->source = source;
	se->account = account;
	se->created = created;
	se->body = xstrdup(body);
	idmap_put(&m->event_ids, se->id, m->nevents);
	m->nevents++;
}

/* A Stripe v1 snapshot event's JSON, as delivered and as /v1/events lists it. */
static void
stripe_event_json(sbuf *b, const char *id, const char *account, const char *type, int64_t created,
				  const char *object_json, const char *idem_key)
{
	sb_printf(b, "{\"id\":\"%s\",\"object\":\"event\",", id);
	/* a connected account's event names it (Event.account) */
	if (account)
		sb_printf(b, "\"account\":\"%s\",", account);
	sb_printf(b, "\"api_version\":\"%s\",\"created\":%lld,"
			  "\"data\":{\"object\":%s},\"livemode\":false,\"pending_webhooks\":1,"
			  "\"request\":{\"id\":null,\"idempotency_key\":",
			  STRIPE_API_VERSION, (long long) created, object_json);
	if (idem_key)
		sb_json_str(b, idem_key);
	else
		sb_puts(b, "null");
	sb_printf(b, "},\"type\":\"%s\"}", type);
}

/*
 * Queue the webhook of a change of object k: a Stripe snapshot event (also
 * kept in the events store), a thin event for a share of subscription
 * events, or the Standard Webhooks or Shopify message of its source.
 */
static void
emit_event(sim_model *m, long k, const char *type)
{
	sim_object *o = &m->objs[k];
	const sim_source *src = &m->sources[o->source];
	sim_event  *ev = queue_slot(m);
	char		tok[32],
				iso[40];
	sbuf		obj,
				b;

	sb_init(&obj);
	sb_init(&b);
	ev->source = o->source;
	snprintf(ev->account, sizeof(ev->account), "%s",
			 src->kind == WI_KIND_shopify ? (model_shop_domain(m, o->account) ? model_shop_domain(m, o->account) : "")
			 : model_account_id(m, o->account) ? model_account_id(m, o->account) : "");
	ev->object_type = obj_type_name(o->type);
	snprintf(ev->object_id, sizeof(ev->object_id), "%s", o->id);
	iso_time(m->clock, 1, iso, sizeof(iso));
	if (src->kind == WI_KIND_shopify)
	{
		char		uuid[40],
					domain[128];

		rng_uuid(&m->rng, uuid);
		snprintf(ev->event_id, sizeof(ev->event_id), "%s", uuid);
		snprintf(ev->type, sizeof(ev->type), "%s", type);
		hdr_add(&ev->headers, "X-Shopify-Topic", type);
		hdr_add(&ev->headers, "X-Shopify-Webhook-Id", uuid);
		rng_uuid(&m->rng, uuid);
		hdr_add(&ev->headers, "X-Shopify-Event-Id", uuid);
		if (model_shop_domain(m, o->account))
			snprintf(domain, sizeof(domain), "%s", model_shop_domain(m, o->account));
		else
			snprintf(domain, sizeof(domain), "%s.myshopify.com", src->name);
		hdr_add(&ev->headers, "X-Shopify-Shop-Domain", domain);
		hdr_add(&ev->headers, "X-Shopify-Triggered-At", iso);
		hdr_add(&ev->headers, "X-Shopify-API-Version", SHOPIFY_API_VERSION);
		if (o->deleted)
			sb_printf(&b, "{\"id\":%s}", o->id);
		else
			render_object(m, &b, o);
	}
	else if (src->kind == WI_KIND_github)
	{
		/* type is the action; the event name comes from the object type */
		const char *event = o->type == OT_PULL ? "pull_request" : "issues";
		char		uuid[40],
					hook[24];

		rng_uuid(&m->rng, uuid);
		snprintf(ev->event_id, sizeof(ev->event_id), "%s", uuid);
		snprintf(ev->type, sizeof(ev->type), "%s.%s", event, type);
		hdr_add(&ev->headers, "X-GitHub-Event", event);
		hdr_add(&ev->headers, "X-GitHub-Delivery", uuid);
		snprintf(hook, sizeof(hook), "%d", 412345678);
		hdr_add(&ev->headers, "X-GitHub-Hook-ID", hook);
		hdr_add(&ev->headers, "X-GitHub-Hook-Installation-Target-Type", "repository");
		sb_printf(&b, "{\"action\":\"%s\",", type);
		if (o->type == OT_PULL)
		{
			sb_printf(&b, "\"number\":%ld,\"pull_request\":", o->number);
			render_gh_pull(m, &b, o);
		}
		else
		{
			sb_puts(&b, "\"issue\":");
			render_gh_issue(m, &b, o);
		}
		sb_printf(&b, ",\"repository\":{\"id\":1296269,\"node_id\":\"MDEwOlJlcG9zaXRvcnkxMjk2MjY5\","
				  "\"name\":\"%s\",\"full_name\":\"%s\",\"private\":false}",
				  strchr(model_gh_repo(m, o), '/') ? strchr(model_gh_repo(m, o), '/') + 1 : model_gh_repo(m, o),
				  model_gh_repo(m, o));
		sb_puts(&b, ",\"sender\":{\"login\":\"octocat\",\"id\":583231,\"type\":\"User\"}}");
	}
	else if (src->kind == WI_KIND_standard)
	{
		rng_token(&m->rng, tok, 27);
		snprintf(ev->event_id, sizeof(ev->event_id), "msg_%s", tok);
		/* customer.subscription.updated -> subscription.updated */
		snprintf(ev->type, sizeof(ev->type), "subscription.%s", strrchr(type, '.') + 1);
		hdr_add(&ev->headers, "webhook-id", ev->event_id);
		render_object(m, &obj, o);
		sb_printf(&b, "{\"type\":\"%s\",\"timestamp\":\"%s\",\"data\":%s}", ev->type, iso, obj.data);
	}
	else
	{
		int			thin = o->type == OT_SUB && rng_double(&m->rng) < m->thin_share;

		render_object(m, &obj, o);
		rng_token(&m->rng, tok, 24);
		snprintf(ev->event_id, sizeof(ev->event_id), "evt_%s", tok);
		if (thin)
		{
			/* the v1 event exists too (listed by /v1/events), with its own id */
			char		v1id[40];
			sbuf		v1;

			snprintf(ev->type, sizeof(ev->type), "v1.%s", type);
			sb_printf(&b, "{\"id\":\"%s\",\"object\":\"v2.core.event\",\"type\":\"%s\",\"created\":\"%s\",",
					  ev->event_id, ev->type, iso);
			/* a thin event names its account by context (Event.context) */
			if (o->account)
				sb_printf(&b, "\"context\":\"%s\",", model_account_id(m, o->account));
			sb_printf(&b, "\"related_object\":{\"id\":\"%s\",\"type\":\"subscription\",\"url\":\"/v1/subscriptions/%s\"}}",
					  o->id, o->id);
			rng_token(&m->rng, tok, 24);
			snprintf(v1id, sizeof(v1id), "evt_%s", tok);
			sb_init(&v1);
			stripe_event_json(&v1, v1id, model_account_id(m, o->account), type, m->clock, obj.data, NULL);
			store_event(m, v1id, type, o->source, o->account, m->clock, v1.data);
			sb_free(&v1);
		}
		else
		{
			snprintf(ev->type, sizeof(ev->type), "%s", type);
			stripe_event_json(&b, ev->event_id, model_account_id(m, o->account), type, m->clock, obj.data, NULL);
			store_event(m, ev->event_id, type, o->source, o->account, m->clock, b.data);
		}
	}
	ev->body_len = b.len;
	ev->body = sb_steal(&b);
	sb_free(&obj);
	sb_free(&b);
}

/* ---------- lifecycles ---------- */

static int
enabled(const sim_model *m, obj_type t)
{
	return m->src_for[t] >= 0;
}

static int
changeable(const sim_model *m, const sim_object *o)
{
	if (!o->exists || o->deleted)
		return 0;
	switch (o->type)
	{
		case OT_SUB:
			return o->status != SUB_CANCELED && o->status != SUB_INCOMPLETE_EXPIRED;
		case OT_PI:
			return o->status != PI_CANCELED &&
				(o->status != PI_SUCCEEDED ||
				 (o->n_child < MAX_CHILD_PER_PI && o->amount_refunded < o->amount &&
				  (enabled(m, OT_REFUND) || enabled(m, OT_DISPUTE))));
		case OT_INVOICE:
			return o->status != INV_PAID && o->status != INV_VOID;
		case OT_CHECKOUT:
			return o->status == CS_OPEN;
		case OT_REFUND:
			return o->status == RE_PENDING;
		case OT_DISPUTE:
			return o->status != DP_WARN_CLOSED && o->status != DP_WON && o->status != DP_LOST;
		case OT_CHARGE:
			return o->status == CH_PENDING || (o->status == CH_SUCCEEDED && !o->captured);
		case OT_PULL:
			return !o->captured;	/* a merged pull request is final */
		default:
			return 1;
	}
}

static void
create_root(sim_model *m, long k)
{
	sim_object *o = &m->objs[k];

	make_exist(m, k);
	o->currency = (int) rng_below(&m->rng, 3);
	switch (o->type)
	{
		case OT_SUB:
			{
				double		r = rng_double(&m->rng);

				o->status = r < 0.15 ? SUB_INCOMPLETE : r < 0.5 ? SUB_TRIALING : SUB_ACTIVE;
				o->quantity = 1 + (int) rng_below(&m->rng, 5);
				emit_event(m, k, "customer.subscription.created");
				break;
			}
		case OT_PI:
			o->status = PI_RPM;
			o->amount = 500 + (int64_t) rng_below(&m->rng, 99500);
			o->quantity = rng_double(&m->rng) < 0.3;	/* manual capture */
			emit_event(m, k, "payment_intent.created");
			break;
		case OT_INVOICE:
			o->status = INV_DRAFT;
			o->amount = 500 + (int64_t) rng_below(&m->rng, 99500);
			emit_event(m, k, "invoice.created");
			break;
		case OT_CUSTOMER:
			emit_event(m, k, "customer.created");
			break;
		case OT_ISSUE:
		case OT_PULL:
			o->number = ++m->gh_number;
			o->repo = m->nrepos > 1 ? (int) (k % m->nrepos) : 0;
			o->status = GH_OPEN;
			o->currency = 0;	/* labeled? */
			emit_event(m, k, "opened");
			break;
		case OT_CHECKOUT:
			/* created by the merchant's API call: Stripe sends no event */
			o->status = CS_OPEN;
			o->amount = 500 + (int64_t) rng_below(&m->rng, 99500);
			break;
		default:
			{
				double		r = rng_double(&m->rng);

				o->status = r < 0.5 ? ORD_PENDING : r < 0.7 ? ORD_AUTHORIZED : ORD_PAID;
				o->amount = 500 + (int64_t) rng_below(&m->rng, 99500);
				emit_event(m, k, "orders/create");
				break;
			}
	}
}

static void
step_subscription(sim_model *m, long k)
{
	sim_object *o = &m->objs[k];
	double		r = rng_double(&m->rng),
				w = rng_double(&m->rng);
	int			from = o->status;

	o->updated_at = m->clock;
	if (r < 0.35 && o->status != SUB_INCOMPLETE)
	{
		o->quantity = 1 + (o->quantity + (int) rng_below(&m->rng, 4)) % 5;
		emit_event(m, k, "customer.subscription.updated");
		return;
	}
	switch (o->status)
	{
		case SUB_INCOMPLETE:
			o->status = w < 0.7 ? SUB_ACTIVE : SUB_INCOMPLETE_EXPIRED;
			break;
		case SUB_TRIALING:
			o->status = w < 0.7 ? SUB_ACTIVE : w < 0.8 ? SUB_PAST_DUE : w < 0.9 ? SUB_PAUSED : SUB_CANCELED;
			break;
		case SUB_ACTIVE:
			o->status = w < 0.6 ? SUB_PAST_DUE : w < 0.75 ? SUB_PAUSED : SUB_CANCELED;
			break;
		case SUB_PAST_DUE:
			o->status = w < 0.5 ? SUB_ACTIVE : w < 0.8 ? SUB_UNPAID : SUB_CANCELED;
			break;
		case SUB_UNPAID:
			o->status = w < 0.6 ? SUB_ACTIVE : SUB_CANCELED;
			break;
		default:				/* paused */
			o->status = w < 0.7 ? SUB_ACTIVE : SUB_CANCELED;
			break;
	}
	if (o->status == SUB_CANCELED)
		emit_event(m, k, "customer.subscription.deleted");
	else if (o->status == SUB_PAUSED)
		emit_event(m, k, "customer.subscription.paused");
	else if (from == SUB_PAUSED)
		emit_event(m, k, "customer.subscription.resumed");
	else
		emit_event(m, k, "customer.subscription.updated");
}

/* The charge of a payment attempt, when charges are modelled. */
static void
attempt_charge(sim_model *m, long k, int status)
{
	long		c;

	if (!enabled(m, OT_CHARGE))
		return;
	c = m->objs[k].charge;
	if (c < 0 || m->objs[c].status != CH_PENDING)
	{
		c = new_child(m, &m->rng, OT_CHARGE, k);
		m->objs[c].amount = m->objs[k].amount;
		m->objs[k].charge = c;
	}
	m->objs[c].status = status;
	m->objs[c].updated_at = m->clock;
	m->objs[c].captured = status == CH_SUCCEEDED && m->objs[k].status == PI_SUCCEEDED;
	emit_event(m, c, status == CH_PENDING ? "charge.pending" :
			   status == CH_FAILED ? "charge.failed" : "charge.succeeded");
}

/* A failed attempt: back to requires_payment_method, or canceled after a few. */
static void
pi_fail(sim_model *m, long k)
{
	sim_object *o = &m->objs[k];

	o->attempts++;
	o->status = PI_RPM;
	emit_event(m, k, "payment_intent.payment_failed");
	attempt_charge(m, k, CH_FAILED);
}

static void
pi_to(sim_model *m, long k, int status)
{
	sim_object *o = &m->objs[k];

	o->status = status;
	switch (status)
	{
		case PI_ACTION:
			emit_event(m, k, "payment_intent.requires_action");
			break;
		case PI_PROCESSING:
			emit_event(m, k, "payment_intent.processing");
			attempt_charge(m, k, CH_PENDING);
			break;
		case PI_CAPTURE:
			emit_event(m, k, "payment_intent.amount_capturable_updated");
			attempt_charge(m, k, CH_SUCCEEDED);
			break;
		case PI_SUCCEEDED:
			emit_event(m, k, "payment_intent.succeeded");
			if (enabled(m, OT_CHARGE) && o->charge >= 0 &&
				m->objs[o->charge].status == CH_SUCCEEDED && !m->objs[o->charge].captured)
			{
				m->objs[o->charge].captured = 1;
				emit_event(m, o->charge, "charge.captured");
			}
			else
				attempt_charge(m, k, CH_SUCCEEDED);
			break;
		default:
			emit_event(m, k, "payment_intent.canceled");
			break;
	}
}

/* Outcome of confirming a PaymentIntent with a payment method. */
static void
pi_attempt(sim_model *m, long k, double w)
{
	int			manual = m->objs[k].quantity;

	if (w < 0.15)
		pi_fail(m, k);
	else if (w < 0.35)
		pi_to(m, k, PI_ACTION);
	else if (w < 0.55)
		pi_to(m, k, PI_PROCESSING);
	else
		pi_to(m, k, manual ? PI_CAPTURE : PI_SUCCEEDED);
}

static void
step_child_of_pi(sim_model *m, long k, double w)
{
	sim_object *o = &m->objs[k];
	int			refund = enabled(m, OT_REFUND) &&
		(!enabled(m, OT_DISPUTE) || w < 0.7 || o->amount_refunded > 0);
	long		c;

	if (refund)
	{
		int64_t		left = o->amount - o->amount_refunded;

		c = new_child(m, &m->rng, OT_REFUND, k);
		o = &m->objs[k];
		m->objs[c].amount = 1 + (int64_t) rng_below(&m->rng, (uint64_t) left);
		m->objs[c].status = rng_double(&m->rng) < 0.6 ? RE_PENDING : RE_SUCCEEDED;
		m->objs[c].quantity = rng_double(&m->rng) < 0.5;	/* reason given */
		m->objs[c].charge = o->charge;
		o->amount_refunded += m->objs[c].amount;
		o->n_child++;
		emit_event(m, c, "refund.created");
		if (o->charge >= 0)
		{
			m->objs[o->charge].amount_refunded += m->objs[c].amount;
			emit_event(m, o->charge, "charge.refunded");
		}
	}
	else
	{
		c = new_child(m, &m->rng, OT_DISPUTE, k);
		o = &m->objs[k];
		m->objs[c].amount = o->amount;
		m->objs[c].status = rng_double(&m->rng) < 0.2 ? DP_WARN_NEEDS : DP_NEEDS;
		m->objs[c].charge = o->charge;
		/* one dispute per payment: no more children after it */
		o->n_child = MAX_CHILD_PER_PI;
		emit_event(m, c, "charge.dispute.created");
	}
}

/* One PaymentIntent change; getting a payment method is silent. */
static void
step_pi(sim_model *m, long k)
{
	sim_object *o = &m->objs[k];
	double		r = rng_double(&m->rng),
				w = rng_double(&m->rng);

	o->updated_at = m->clock;
	switch (o->status)
	{
		case PI_RPM:
			if (o->attempts >= MAX_PI_ATTEMPTS || r < 0.08)
				pi_to(m, k, PI_CANCELED);
			else if (r < 0.55)
				o->status = PI_RC;	/* payment method attached: no event */
			else
				pi_attempt(m, k, w);
			break;
		case PI_RC:
			if (r < 0.05)
				pi_to(m, k, PI_CANCELED);
			else
				pi_attempt(m, k, w);
			break;
		case PI_ACTION:
			if (r < 0.1)
				pi_to(m, k, PI_CANCELED);
			else if (r < 0.3)
				pi_fail(m, k);
			else if (r < 0.5)
				pi_to(m, k, PI_PROCESSING);
			else
				pi_to(m, k, o->quantity ? PI_CAPTURE : PI_SUCCEEDED);
			break;
		case PI_PROCESSING:
			if (r < 0.2)
				pi_fail(m, k);
			else
				pi_to(m, k, o->quantity ? PI_CAPTURE : PI_SUCCEEDED);
			break;
		case PI_CAPTURE:
			pi_to(m, k, r < 0.8 ? PI_SUCCEEDED : PI_CANCELED);
			break;
		default:				/* succeeded: a refund or a dispute */
			step_child_of_pi(m, k, w);
			break;
	}
}

static void
step_refund(sim_model *m, long k)
{
	sim_object *o = &m->objs[k];
	double		r = rng_double(&m->rng);

	o->updated_at = m->clock;
	o->status = r < 0.75 ? RE_SUCCEEDED : r < 0.9 ? RE_FAILED : RE_CANCELED;
	if (o->status != RE_SUCCEEDED)
	{
		/* the money is back on the payment */
		sim_object *pi = &m->objs[o->parent];

		pi->amount_refunded -= o->amount;
		if (o->charge >= 0)
			m->objs[o->charge].amount_refunded -= o->amount;
	}
	emit_event(m, k, o->status == RE_FAILED ? "refund.failed" : "refund.updated");
	if (o->charge >= 0)
		emit_event(m, k, "charge.refund.updated");
}

static void
step_dispute(sim_model *m, long k)
{
	sim_object *o = &m->objs[k];
	double		r = rng_double(&m->rng);

	o->updated_at = m->clock;
	switch (o->status)
	{
		case DP_WARN_NEEDS:
			o->status = DP_WARN_REVIEW;
			break;
		case DP_WARN_REVIEW:
			o->status = DP_WARN_CLOSED;
			break;
		case DP_NEEDS:
			o->status = DP_REVIEW;
			break;
		default:
			o->status = r < 0.5 ? DP_WON : DP_LOST;
			break;
	}
	emit_event(m, k, o->status == DP_WARN_CLOSED || o->status == DP_WON || o->status == DP_LOST ?
			   "charge.dispute.closed" : "charge.dispute.updated");
}

static void
step_charge(sim_model *m, long k)
{
	sim_object *o = &m->objs[k];

	/* charges move with their PaymentIntent; on their own, only metadata */
	o->updated_at = m->clock;
	snprintf(o->metadata, sizeof(o->metadata), "\"note\":\"%lld\"", (long long) m->clock);
	emit_event(m, k, "charge.updated");
}

static void
step_invoice(sim_model *m, long k)
{
	sim_object *o = &m->objs[k];
	double		r = rng_double(&m->rng);

	o->updated_at = m->clock;
	switch (o->status)
	{
		case INV_DRAFT:
			if (r < 0.3)
			{
				o->amount = 500 + (int64_t) rng_below(&m->rng, 99500);
				emit_event(m, k, "invoice.updated");
			}
			else
			{
				o->status = INV_OPEN;
				emit_event(m, k, "invoice.finalized");
			}
			break;
		case INV_OPEN:
			if (r < 0.5)
			{
				o->status = INV_PAID;
				emit_event(m, k, "invoice.paid");
			}
			else if (r < 0.7 && o->attempts < 3)
			{
				o->attempts++;
				emit_event(m, k, "invoice.payment_failed");
			}
			else if (r < 0.85)
			{
				o->status = INV_UNCOLLECTIBLE;
				emit_event(m, k, "invoice.marked_uncollectible");
			}
			else
			{
				o->status = INV_VOID;
				emit_event(m, k, "invoice.voided");
			}
			break;
		default:				/* uncollectible */
			o->status = r < 0.5 ? INV_PAID : INV_VOID;
			emit_event(m, k, o->status == INV_PAID ? "invoice.paid" : "invoice.voided");
			break;
	}
}

static void
step_customer(sim_model *m, long k)
{
	sim_object *o = &m->objs[k];
	double		r = rng_double(&m->rng);

	o->updated_at = m->clock;
	if (r < 0.06)
	{
		o->deleted = 1;
		/* the event carries the last snapshot; the API then answers deleted */
		o->deleted = 0;
		emit_event(m, k, "customer.deleted");
		o->deleted = 1;
		return;
	}
	o->amount = (int64_t) rng_below(&m->rng, 10000);
	emit_event(m, k, "customer.updated");
}

static void
step_checkout(sim_model *m, long k)
{
	sim_object *o = &m->objs[k];
	double		r = rng_double(&m->rng);

	o->updated_at = m->clock;
	o->status = r < 0.7 ? CS_COMPLETE : CS_EXPIRED;
	emit_event(m, k, o->status == CS_COMPLETE ? "checkout.session.completed" :
			   "checkout.session.expired");
}

/*
 * An issue or pull request: edited, labeled, closed (a pull request merged
 * or not) or reopened; a merged pull request is final.
 */
static void
step_github(sim_model *m, long k)
{
	sim_object *o = &m->objs[k];
	double		r = rng_double(&m->rng);

	/* GitHub's updated_at has one-second resolution and moves on every change */
	o->updated_at = m->clock > o->updated_at ? m->clock : o->updated_at + 1;
	if (o->status == GH_OPEN)
	{
		if (r < 0.3)
		{
			o->quantity++;
			emit_event(m, k, "edited");
		}
		else if (r < 0.45 && !o->currency)
		{
			o->currency = 1;
			emit_event(m, k, "labeled");
		}
		else
		{
			o->status = GH_CLOSED;
			o->captured = o->type == OT_PULL && rng_double(&m->rng) < 0.7;
			o->quantity += o->type == OT_ISSUE;
			emit_event(m, k, "closed");
		}
	}
	else
	{
		o->status = GH_OPEN;
		o->attempts++;
		emit_event(m, k, "reopened");
	}
}

static void
step_order(sim_model *m, long k)
{
	static const int next[][2] = {
		[ORD_PENDING] = {ORD_AUTHORIZED, ORD_PAID},
		[ORD_AUTHORIZED] = {ORD_PAID, ORD_VOIDED},
		[ORD_PAID] = {ORD_PARTIAL, ORD_REFUNDED},
		[ORD_PARTIAL] = {ORD_REFUNDED, ORD_REFUNDED},
	};
	sim_object *o = &m->objs[k];
	double		r = rng_double(&m->rng);

	o->updated_at = m->clock > o->updated_at ? m->clock : o->updated_at + 1;
	if (r < 0.015)
	{
		o->deleted = 1;
		emit_event(m, k, "orders/delete");
		return;
	}
	if (r < 0.30 || o->status == ORD_REFUNDED || o->status == ORD_VOIDED)
		o->amount = 500 + (int64_t) rng_below(&m->rng, 99500);
	else if (o->status == ORD_PENDING && r > 0.9)
		o->status = ORD_VOIDED;
	else
		o->status = next[o->status][rng_below(&m->rng, 2)];
	emit_event(m, k, "orders/updated");
}

/* Candidate k of [0, ncreated + children) as an object index. */
static long
candidate(const sim_model *m, long i)
{
	return i < m->ncreated ? i : m->nroots + (i - m->ncreated);
}

/*
 * Apply one change: create the next root with the probability that spreads
 * creations evenly over the remaining events, else change a random existing
 * object that still can change.  Returns 0 when nothing can change.
 */
static int
apply_change(sim_model *m)
{
	long		remaining = m->target_events - m->seq,
				uncreated = m->nroots - m->ncreated,
				ncand = m->ncreated + (m->nobjs - m->nroots),
				pick = -1;
	int			tries;

	m->clock += (int64_t) rng_below(&m->rng, 3);
	if (m->follow_wall && m->clock < now_epoch())
		m->clock = now_epoch();
	if (uncreated > 0 && (long) rng_below(&m->rng, (uint64_t) remaining) < uncreated)
		pick = -1;
	else if (ncand > 0)
	{
		for (tries = 0; tries < 8 && pick < 0; tries++)
		{
			long		k = candidate(m, (long) rng_below(&m->rng, (uint64_t) ncand));

			if (changeable(m, &m->objs[k]))
				pick = k;
		}
		if (pick < 0)
		{
			long		start = (long) rng_below(&m->rng, (uint64_t) ncand),
						i;

			for (i = 0; i < ncand && pick < 0; i++)
			{
				long		k = candidate(m, (start + i) % ncand);

				if (changeable(m, &m->objs[k]))
					pick = k;
			}
		}
		if (pick < 0 && uncreated == 0)
			return 0;
	}
	m->changes++;
	if (pick < 0)
	{
		create_root(m, m->ncreated++);
		return 1;
	}
	switch (m->objs[pick].type)
	{
		case OT_SUB:
			step_subscription(m, pick);
			break;
		case OT_PI:
			step_pi(m, pick);
			break;
		case OT_INVOICE:
			step_invoice(m, pick);
			break;
		case OT_CUSTOMER:
			step_customer(m, pick);
			break;
		case OT_CHECKOUT:
			step_checkout(m, pick);
			break;
		case OT_REFUND:
			step_refund(m, pick);
			break;
		case OT_DISPUTE:
			step_dispute(m, pick);
			break;
		case OT_CHARGE:
			step_charge(m, pick);
			break;
		case OT_ISSUE:
		case OT_PULL:
			step_github(m, pick);
			break;
		default:
			step_order(m, pick);
			break;
	}
	return 1;
}

int
model_next_event(sim_model *m, sim_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	while (m->nqueue == 0)
	{
		if (m->seq >= m->target_events || m->nobjs == 0 || !apply_change(m))
			return 0;
	}
	*ev = m->queue[0];
	m->nqueue--;
	memmove(&m->queue[0], &m->queue[1], sizeof(sim_event) * (size_t) m->nqueue);
	ev->seq = ++m->seq;
	return 1;
}

void
sim_event_free(sim_event *ev)
{
	hdr_free(&ev->headers);
	free(ev->body);
	ev->body = NULL;
}

void
event_record_line(const sim_model *m, const sim_event *ev, sbuf *out)
{
	int			i;

	sb_printf(out, "{\"seq\":%ld,\"source\":", ev->seq);
	sb_json_str(out, m->sources[ev->source].name);
	sb_printf(out, ",\"kind\":\"%s\",\"event_id\":", sign_kind_name(m->sources[ev->source].kind));
	sb_json_str(out, ev->event_id);
	sb_puts(out, ",\"type\":");
	sb_json_str(out, ev->type);
	sb_printf(out, ",\"object_type\":\"%s\",\"object_id\":", ev->object_type);
	sb_json_str(out, ev->object_id);
	sb_puts(out, ",\"headers\":{");
	for (i = 0; i < ev->headers.n; i++)
	{
		if (i)
			sb_putc(out, ',');
		sb_json_str(out, ev->headers.h[i].name);
		sb_putc(out, ':');
		sb_json_str(out, ev->headers.h[i].value);
	}
	sb_puts(out, "},\"body\":");
	sb_json_strn(out, ev->body, ev->body_len);
	sb_puts(out, "}\n");
}

long
model_effect_refund(sim_model *m, long pi, int64_t amount, const char *metadata,
					const char *reason)
{
	long		c;
	sim_object *o;
	char		tok[32],
				id[40];
	sbuf		obj,
				b;

	/* an API call happens now, never before the scenario's last change */
	if (m->clock < now_epoch())
		m->clock = now_epoch();
	c = new_child(m, &m->effect_rng, OT_REFUND, pi);
	o = &m->objs[c];
	o->amount = amount;
	o->status = RE_SUCCEEDED;
	o->quantity = reason != NULL;
	o->charge = m->objs[pi].charge;
	snprintf(o->metadata, sizeof(o->metadata), "%s", metadata ? metadata : "");
	m->objs[pi].amount_refunded += amount;
	m->objs[pi].n_child++;
	/* Stripe records the event of an API-made refund too */
	sb_init(&obj);
	sb_init(&b);
	render_object(m, &obj, o);
	rng_token(&m->effect_rng, tok, 24);
	snprintf(id, sizeof(id), "evt_%s", tok);
	stripe_event_json(&b, id, model_account_id(m, o->account), "refund.created", m->clock, obj.data, NULL);
	store_event(m, id, "refund.created", o->source, o->account, m->clock, b.data);
	sb_free(&obj);
	sb_free(&b);
	return c;
}
