/*
 * model.c
 *		Scenario generation, the provider's object store and the Stripe
 *		events store (see model.h): the model's objects, ids, accounts and
 *		records.  The object types are in model_types.c, their rendering in
 *		model_render.c, events in model_events.c and the lifecycles below in
 *		model_lifecycle.c.
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

#include "model_int.h"

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

void
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

