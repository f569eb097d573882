/*
 * model.c
 *		Scenario generation and the provider's object store (see model.h).
 *
 * Lifecycles:
 *   subscription  trialing -> active | past_due | canceled, active -> past_due
 *                 | canceled, past_due -> active | unpaid | canceled, unpaid ->
 *                 active | canceled (final); deletion (status canceled, then
 *                 404) from any live status; quantity changes without a
 *                 status change.  No version.
 *   payment       pending -> authorised | failed, authorised -> captured |
 *                 failed, captured -> settled | refunded, settled -> refunded;
 *                 captured/settled/refunded payments also get refund and
 *                 dispute occurrences (at most three per payment).
 *   order         pending -> authorized | paid | voided, authorized -> paid |
 *                 voided, paid -> partially_refunded | refunded,
 *                 partially_refunded -> refunded; updates without a status
 *                 change; deletion.  updated_at grows by >= 1 s per change.
 *
 * Every random draw comes from one xoshiro stream in a fixed order, so the
 * stream is a pure function of the seed and the flags that shape it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

static const char *const sub_status[] = {"trialing", "active", "past_due", "unpaid", "canceled"};
enum
{
	SUB_TRIALING, SUB_ACTIVE, SUB_PAST_DUE, SUB_UNPAID, SUB_CANCELED
};
static const char *const pay_status[] = {"pending", "authorised", "captured", "settled", "failed", "refunded"};
enum
{
	PAY_PENDING, PAY_AUTHORISED, PAY_CAPTURED, PAY_SETTLED, PAY_FAILED, PAY_REFUNDED
};
static const char *const order_status[] = {"pending", "authorized", "paid", "partially_refunded", "refunded", "voided"};
enum
{
	ORD_PENDING, ORD_AUTHORIZED, ORD_PAID, ORD_PARTIAL, ORD_REFUNDED, ORD_VOIDED
};

static const char *const stripe_currency[] = {"usd", "eur", "gbp"};
static const char *const shop_currency[] = {"USD", "EUR", "CAD"};

#define MAX_OCC_PER_PAYMENT 3
#define STRIPE_API_VERSION "2024-06-20"
#define SHOPIFY_API_VERSION "2024-01"

const char *
obj_type_name(obj_type t)
{
	static const char *const names[] = {"subscription", "payment", "order"};

	return names[t];
}

const char *
occ_kind_name(occ_kind k)
{
	static const char *const names[] = {"refund", "dispute"};

	return names[k];
}

const char *
obj_status_name(const sim_object *o)
{
	switch (o->type)
	{
		case OT_SUB:
			return sub_status[o->status];
		case OT_PAY:
			return pay_status[o->status];
		default:
			return order_status[o->status];
	}
}

const char *
currency_name(const sim_object *o)
{
	return o->type == OT_ORDER ? shop_currency[o->currency] : stripe_currency[o->currency];
}

const char *
occ_currency_name(const sim_occurrence *c)
{
	return stripe_currency[c->currency];
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

static int
cmp_occ_idx(const void *a, const void *b)
{
	return id_cmp(sort_model->occs[*(const long *) a].id,
				  sort_model->occs[*(const long *) b].id);
}

void
model_init(sim_model *m, uint64_t seed, long nobjects, long nevents,
		   double thin_share, sim_source *sources, int nsources)
{
	obj_type	avail[OT__COUNT];
	int			navail = 0,
				i,
				t;
	long		k;
	int			stripe = -1,
				shopify = -1,
				standard = -1;

	memset(m, 0, sizeof(*m));
	m->seed = seed;
	m->target_events = nevents;
	m->thin_share = thin_share;
	m->sources = sources;
	m->nsources = nsources;
	m->clock = SIM_EPOCH;
	rng_seed(&m->rng, seed);
	rng_seed(&m->effect_rng, seed ^ 0x5eed0fe77ec75ULL);

	for (i = 0; i < nsources; i++)
	{
		if (sources[i].kind == SK_STRIPE && stripe < 0)
			stripe = i;
		else if (sources[i].kind == SK_SHOPIFY && shopify < 0)
			shopify = i;
		else if (sources[i].kind == SK_STANDARD && standard < 0)
			standard = i;
	}
	m->src_for[OT_SUB] = standard >= 0 ? standard : stripe;
	m->src_for[OT_PAY] = stripe;
	m->src_for[OT_ORDER] = shopify;
	for (t = 0; t < OT__COUNT; t++)
		if (m->src_for[t] >= 0)
			avail[navail++] = (obj_type) t;

	m->nobjs = navail ? nobjects : 0;
	m->objs = xcalloc((size_t) m->nobjs, sizeof(sim_object));
	for (k = 0; k < m->nobjs; k++)
	{
		sim_object *o = &m->objs[k];
		char		tok[32];

		o->type = avail[rng_below(&m->rng, (uint64_t) navail)];
		o->source = m->src_for[o->type];
		switch (o->type)
		{
			case OT_SUB:
				rng_token(&m->rng, tok, 14);
				snprintf(o->id, sizeof(o->id), "sub_%s", tok);
				break;
			case OT_PAY:
				rng_token(&m->rng, tok, 24);
				snprintf(o->id, sizeof(o->id), "pi_%s", tok);
				break;
			default:
				snprintf(o->id, sizeof(o->id), "%lld",
						 450789469001LL + (long long) k * 1000 +
						 (long long) rng_below(&m->rng, 1000));
				o->number = 1001 + k;
				break;
		}
		rng_token(&m->rng, tok, 14);
		snprintf(o->customer, sizeof(o->customer), "cus_%s", tok);
		/* Ids are random: a rare collision is resolved by a suffix. */
		if (idmap_get(&m->obj_ids, o->id) >= 0)
			snprintf(o->id + strlen(o->id), sizeof(o->id) - strlen(o->id), "x%ld", k);
		idmap_put(&m->obj_ids, o->id, k);
	}

	/* Object ids never change: sort each type's index once. */
	sort_model = m;
	for (t = 0; t < OT__COUNT; t++)
	{
		coll_id		c = (coll_id) t;	/* COLL_SUB.. match OT_SUB.. */

		m->sorted[c] = xcalloc((size_t) m->nobjs, sizeof(long));
		for (k = 0; k < m->nobjs; k++)
			if (m->objs[k].type == (obj_type) t)
				m->sorted[c][m->nsorted[c]++] = k;
		qsort(m->sorted[c], (size_t) m->nsorted[c], sizeof(long), cmp_obj_idx);
	}
}

void
model_free(sim_model *m)
{
	int			c;

	for (c = 0; c < COLL__COUNT; c++)
		free(m->sorted[c]);
	free(m->objs);
	free(m->occs);
	idmap_free(&m->obj_ids);
	idmap_free(&m->occ_ids);
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

long
model_find_occ(const sim_model *m, occ_kind kind, const char *id)
{
	long		k = idmap_get(&m->occ_ids, id);

	if (k < 0 || m->occs[k].kind != kind)
		return -1;
	return k;
}

/* ---------- rendering ---------- */

static void
render_money(sbuf *out, int64_t minor)
{
	sb_printf(out, "\"%lld.%02lld\"", (long long) (minor / 100), (long long) (minor % 100));
}

void
render_object(sbuf *out, const sim_object *o, int with_updated)
{
	char		iso1[40],
				iso2[40];

	switch (o->type)
	{
		case OT_SUB:
			sb_printf(out, "{\"id\":\"%s\",\"object\":\"subscription\",\"status\":\"%s\","
					  "\"customer\":\"%s\",\"quantity\":%d,\"currency\":\"%s\",\"created\":%lld",
					  o->id, obj_status_name(o), o->customer, o->quantity,
					  currency_name(o), (long long) o->created);
			break;
		case OT_PAY:
			sb_printf(out, "{\"id\":\"%s\",\"object\":\"payment_intent\",\"status\":\"%s\","
					  "\"amount\":%lld,\"currency\":\"%s\",\"customer\":\"%s\",\"created\":%lld",
					  o->id, obj_status_name(o), (long long) o->amount,
					  currency_name(o), o->customer, (long long) o->created);
			break;
		default:
			iso_time(o->created, 0, iso1, sizeof(iso1));
			iso_time(o->updated_at, 0, iso2, sizeof(iso2));
			sb_printf(out, "{\"id\":%s,\"name\":\"#%ld\",\"created_at\":\"%s\",\"updated_at\":\"%s\","
					  "\"financial_status\":\"%s\",\"total_price\":",
					  o->id, o->number, iso1, iso2, obj_status_name(o));
			render_money(out, o->amount);
			sb_printf(out, ",\"currency\":\"%s\"", currency_name(o));
			break;
	}
	if (with_updated)
		sb_printf(out, ",\"updated\":%lld", (long long) o->updated);
	sb_putc(out, '}');
}

void
render_tombstone(sbuf *out, const sim_object *o)
{
	if (o->type == OT_ORDER)
		sb_printf(out, "{\"id\":%s,\"deleted\":true,\"updated\":%lld}",
				  o->id, (long long) o->updated);
	else
		sb_printf(out, "{\"id\":\"%s\",\"object\":\"%s\",\"deleted\":true,\"updated\":%lld}",
				  o->id, o->type == OT_SUB ? "subscription" : "payment_intent",
				  (long long) o->updated);
}

void
render_occurrence(const sim_model *m, sbuf *out, const sim_occurrence *c,
				  int with_updated)
{
	sb_printf(out, "{\"id\":\"%s\",\"object\":\"%s\",\"amount\":%lld,\"currency\":\"%s\","
			  "\"payment_intent\":\"%s\",\"created\":%lld",
			  c->id, c->kind == OC_REFUND ? "refund" : "dispute",
			  (long long) c->amount, occ_currency_name(c),
			  m->objs[c->payment].id, (long long) c->created);
	if (c->kind == OC_REFUND)
		sb_puts(out, ",\"status\":\"succeeded\"");
	else
		sb_puts(out, ",\"reason\":\"fraudulent\",\"status\":\"needs_response\"");
	if (with_updated)
		sb_printf(out, ",\"updated\":%lld", (long long) c->updated);
	sb_putc(out, '}');
}

/* ---------- event construction ---------- */

static void
stripe_event(sim_model *m, sim_event *ev, const char *type, const char *object_json)
{
	char		tok[32];
	sbuf		b;

	rng_token(&m->rng, tok, 24);
	snprintf(ev->event_id, sizeof(ev->event_id), "evt_%s", tok);
	snprintf(ev->type, sizeof(ev->type), "%s", type);
	sb_init(&b);
	sb_printf(&b, "{\"id\":\"%s\",\"object\":\"event\",\"api_version\":\"%s\",\"created\":%lld,"
			  "\"type\":\"%s\",\"livemode\":false,\"data\":{\"object\":%s}}",
			  ev->event_id, STRIPE_API_VERSION, (long long) m->clock, type, object_json);
	ev->body_len = b.len;
	ev->body = sb_steal(&b);
}

/* Subscription events go out as Stripe snapshot, Stripe thin or Standard. */
static void
subscription_event(sim_model *m, sim_event *ev, sim_object *o, const char *verb)
{
	char		tok[32],
				iso[40],
				type[64];
	sbuf		obj,
				b;
	int			thin = rng_double(&m->rng) < m->thin_share;

	sb_init(&obj);
	sb_init(&b);
	render_object(&obj, o, 0);
	iso_time(m->clock, 1, iso, sizeof(iso));
	if (m->sources[o->source].kind == SK_STANDARD)
	{
		rng_token(&m->rng, tok, 27);
		snprintf(ev->event_id, sizeof(ev->event_id), "msg_%s", tok);
		snprintf(ev->type, sizeof(ev->type), "subscription.%s", verb);
		hdr_add(&ev->headers, "webhook-id", ev->event_id);
		sb_printf(&b, "{\"type\":\"%s\",\"timestamp\":\"%s\",\"data\":%s}", ev->type, iso, obj.data);
		ev->body_len = b.len;
		ev->body = sb_steal(&b);
	}
	else if (thin)
	{
		rng_token(&m->rng, tok, 24);
		snprintf(ev->event_id, sizeof(ev->event_id), "evt_%s", tok);
		snprintf(ev->type, sizeof(ev->type), "v1.customer.subscription.%s", verb);
		sb_printf(&b, "{\"id\":\"%s\",\"object\":\"v2.core.event\",\"type\":\"%s\",\"created\":\"%s\","
				  "\"related_object\":{\"id\":\"%s\",\"type\":\"subscription\",\"url\":\"/v1/subscriptions/%s\"}}",
				  ev->event_id, ev->type, iso, o->id, o->id);
		ev->body_len = b.len;
		ev->body = sb_steal(&b);
	}
	else
	{
		snprintf(type, sizeof(type), "customer.subscription.%s", verb);
		stripe_event(m, ev, type, obj.data);
	}
	sb_free(&obj);
	sb_free(&b);
}

static void
order_event(sim_model *m, sim_event *ev, sim_object *o, const char *topic)
{
	char		uuid[40],
				iso[40],
				domain[128];
	sbuf		b;

	rng_uuid(&m->rng, uuid);
	snprintf(ev->event_id, sizeof(ev->event_id), "%s", uuid);
	snprintf(ev->type, sizeof(ev->type), "%s", topic);
	hdr_add(&ev->headers, "X-Shopify-Topic", topic);
	hdr_add(&ev->headers, "X-Shopify-Webhook-Id", uuid);
	rng_uuid(&m->rng, uuid);
	hdr_add(&ev->headers, "X-Shopify-Event-Id", uuid);
	snprintf(domain, sizeof(domain), "%s.myshopify.com", m->sources[o->source].name);
	hdr_add(&ev->headers, "X-Shopify-Shop-Domain", domain);
	iso_time(m->clock, 1, iso, sizeof(iso));
	hdr_add(&ev->headers, "X-Shopify-Triggered-At", iso);
	hdr_add(&ev->headers, "X-Shopify-API-Version", SHOPIFY_API_VERSION);
	sb_init(&b);
	if (o->deleted)
		sb_printf(&b, "{\"id\":%s}", o->id);
	else
		render_object(&b, o, 0);
	ev->body_len = b.len;
	ev->body = sb_steal(&b);
}

static void
payment_event(sim_model *m, sim_event *ev, sim_object *o)
{
	char		type[64];
	sbuf		obj;

	sb_init(&obj);
	render_object(&obj, o, 0);
	snprintf(type, sizeof(type), "payment_intent.%s", obj_status_name(o));
	stripe_event(m, ev, type, obj.data);
	sb_free(&obj);
}

static void
occurrence_event(sim_model *m, sim_event *ev, sim_object *pay, occ_kind kind, int64_t now)
{
	sim_occurrence *c;
	char		tok[32];
	sbuf		obj;
	long		idx;

	if (m->nocc == m->occ_cap)
	{
		m->occ_cap = m->occ_cap ? m->occ_cap * 2 : 64;
		m->occs = xrealloc(m->occs, (size_t) m->occ_cap * sizeof(sim_occurrence));
	}
	idx = m->nocc++;
	c = &m->occs[idx];
	memset(c, 0, sizeof(*c));
	c->kind = kind;
	c->source = pay->source;
	rng_token(&m->rng, tok, 24);
	snprintf(c->id, sizeof(c->id), "%s_%s", kind == OC_REFUND ? "re" : "dp", tok);
	c->payment = pay - m->objs;
	c->amount = kind == OC_REFUND ? 1 + (int64_t) rng_below(&m->rng, (uint64_t) pay->amount) : pay->amount;
	c->currency = pay->currency;
	c->created = m->clock;
	c->updated = now;
	idmap_put(&m->occ_ids, c->id, idx);
	m->dirty[kind == OC_REFUND ? COLL_REFUND : COLL_DISPUTE] = 1;
	pay->n_occ++;

	sb_init(&obj);
	render_occurrence(m, &obj, c, 0);
	stripe_event(m, ev, kind == OC_REFUND ? "refund.created" : "charge.dispute.created", obj.data);
	sb_free(&obj);
	ev->object_type = occ_kind_name(kind);
	snprintf(ev->object_id, sizeof(ev->object_id), "%s", c->id);
}

/* ---------- lifecycles ---------- */

static int
changeable(const sim_object *o)
{
	if (!o->exists || o->deleted)
		return 0;
	if (o->type == OT_PAY)
		return o->status == PAY_PENDING || o->status == PAY_AUTHORISED ||
			o->status == PAY_CAPTURED || o->status == PAY_SETTLED ||
			(o->status == PAY_REFUNDED && o->n_occ < MAX_OCC_PER_PAYMENT);
	if (o->type == OT_SUB)
		return o->status != SUB_CANCELED;
	return 1;
}

static void
create_object(sim_model *m, sim_object *o, sim_event *ev)
{
	o->exists = 1;
	o->created = m->clock;
	o->updated_at = m->clock;
	switch (o->type)
	{
		case OT_SUB:
			o->status = rng_double(&m->rng) < 0.4 ? SUB_TRIALING : SUB_ACTIVE;
			o->quantity = 1 + (int) rng_below(&m->rng, 5);
			o->currency = (int) rng_below(&m->rng, 3);
			subscription_event(m, ev, o, "created");
			break;
		case OT_PAY:
			o->status = PAY_PENDING;
			o->amount = 500 + (int64_t) rng_below(&m->rng, 99500);
			o->currency = (int) rng_below(&m->rng, 3);
			payment_event(m, ev, o);
			break;
		default:
			{
				double		r = rng_double(&m->rng);

				o->status = r < 0.5 ? ORD_PENDING : r < 0.7 ? ORD_AUTHORIZED : ORD_PAID;
				o->amount = 500 + (int64_t) rng_below(&m->rng, 99500);
				o->currency = (int) rng_below(&m->rng, 3);
				order_event(m, ev, o, "orders/create");
				break;
			}
	}
}

/*
 * One subscription change: rarely a deletion (Stripe's
 * customer.subscription.deleted, status canceled, then 404), often a
 * quantity change without a status change, else a weighted status move;
 * canceled is final.
 */
static void
step_subscription(sim_model *m, sim_object *o, sim_event *ev)
{
	double		r = rng_double(&m->rng),
				w = rng_double(&m->rng);

	if (r < 0.03)
	{
		o->status = SUB_CANCELED;
		o->deleted = 1;
		subscription_event(m, ev, o, "deleted");
		return;
	}
	if (r < 0.38)
		o->quantity = 1 + (o->quantity + (int) rng_below(&m->rng, 4)) % 5;
	else
		switch (o->status)
		{
			case SUB_TRIALING:
				o->status = w < 0.8 ? SUB_ACTIVE : w < 0.9 ? SUB_PAST_DUE : SUB_CANCELED;
				break;
			case SUB_ACTIVE:
				o->status = w < 0.85 ? SUB_PAST_DUE : SUB_CANCELED;
				break;
			case SUB_PAST_DUE:
				o->status = w < 0.6 ? SUB_ACTIVE : w < 0.9 ? SUB_UNPAID : SUB_CANCELED;
				break;
			default:
				o->status = w < 0.6 ? SUB_ACTIVE : SUB_CANCELED;
				break;
		}
	subscription_event(m, ev, o, "updated");
}

static void
step_payment(sim_model *m, sim_object *o, sim_event *ev, int64_t now)
{
	double		r = rng_double(&m->rng);
	int			occ_ok = o->n_occ < MAX_OCC_PER_PAYMENT;

	switch (o->status)
	{
		case PAY_PENDING:
			o->status = r < 0.75 ? PAY_AUTHORISED : PAY_FAILED;
			break;
		case PAY_AUTHORISED:
			o->status = r < 0.85 ? PAY_CAPTURED : PAY_FAILED;
			break;
		case PAY_CAPTURED:
			if (occ_ok && r < 0.25)
			{
				occurrence_event(m, ev, o, r < 0.15 ? OC_REFUND : OC_DISPUTE, now);
				return;
			}
			o->status = r < 0.8 ? PAY_SETTLED : PAY_REFUNDED;
			break;
		case PAY_SETTLED:
			if (occ_ok && r < 0.6)
			{
				occurrence_event(m, ev, o, r < 0.4 ? OC_REFUND : OC_DISPUTE, now);
				return;
			}
			o->status = PAY_REFUNDED;
			break;
		default:				/* refunded, with occurrences still allowed */
			occurrence_event(m, ev, o, OC_DISPUTE, now);
			return;
	}
	payment_event(m, ev, o);
}

static void
step_order(sim_model *m, sim_object *o, sim_event *ev)
{
	static const int next[][2] = {
		[ORD_PENDING] = {ORD_AUTHORIZED, ORD_PAID},
		[ORD_AUTHORIZED] = {ORD_PAID, ORD_VOIDED},
		[ORD_PAID] = {ORD_PARTIAL, ORD_REFUNDED},
		[ORD_PARTIAL] = {ORD_REFUNDED, ORD_REFUNDED},
	};
	double		r = rng_double(&m->rng);

	o->updated_at = m->clock > o->updated_at ? m->clock : o->updated_at + 1;
	if (r < 0.015)
	{
		o->deleted = 1;
		order_event(m, ev, o, "orders/delete");
		return;
	}
	if (r < 0.30 || o->status == ORD_REFUNDED || o->status == ORD_VOIDED)
		o->amount = 500 + (int64_t) rng_below(&m->rng, 99500);
	else if (o->status == ORD_PENDING && r > 0.9)
		o->status = ORD_VOIDED;
	else
		o->status = next[o->status][rng_below(&m->rng, 2)];
	order_event(m, ev, o, "orders/updated");
}

/*
 * Choose what changes next: create the next object with the probability that
 * spreads creations evenly over the remaining events, else change a random
 * existing object that still can change.
 */
int
model_next_event(sim_model *m, int64_t now, sim_event *ev)
{
	long		remaining,
				uncreated,
				pick = -1;
	int			tries;

	memset(ev, 0, sizeof(*ev));
	if (m->seq >= m->target_events || m->nobjs == 0)
		return 0;
	remaining = m->target_events - m->seq;
	uncreated = m->nobjs - m->ncreated;
	m->clock += (int64_t) rng_below(&m->rng, 3);

	if (uncreated > 0 && (long) rng_below(&m->rng, (uint64_t) remaining) < uncreated)
		pick = -1;
	else if (m->ncreated > 0)
	{
		for (tries = 0; tries < 8 && pick < 0; tries++)
		{
			long		k = (long) rng_below(&m->rng, (uint64_t) m->ncreated);

			if (changeable(&m->objs[k]))
				pick = k;
		}
		if (pick < 0)
		{
			long		start = (long) rng_below(&m->rng, (uint64_t) m->ncreated),
						i;

			for (i = 0; i < m->ncreated && pick < 0; i++)
				if (changeable(&m->objs[(start + i) % m->ncreated]))
					pick = (start + i) % m->ncreated;
		}
		if (pick < 0 && uncreated == 0)
			return 0;
	}

	ev->seq = ++m->seq;
	if (pick < 0)
	{
		sim_object *o = &m->objs[m->ncreated++];

		create_object(m, o, ev);
		pick = o - m->objs;
	}
	else
	{
		sim_object *o = &m->objs[pick];

		switch (o->type)
		{
			case OT_SUB:
				step_subscription(m, o, ev);
				break;
			case OT_PAY:
				step_payment(m, o, ev, now);
				break;
			default:
				step_order(m, o, ev);
				break;
		}
	}
	m->objs[pick].updated = now;
	ev->source = m->objs[pick].source;
	if (ev->object_type == NULL)
	{
		ev->object_type = obj_type_name(m->objs[pick].type);
		snprintf(ev->object_id, sizeof(ev->object_id), "%s", m->objs[pick].id);
	}
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

/* ---------- listing ---------- */

static void
ensure_sorted(sim_model *m, coll_id c)
{
	occ_kind	kind = c == COLL_REFUND ? OC_REFUND : OC_DISPUTE;
	long		k;

	if (c < COLL_REFUND || !m->dirty[c])
		return;
	m->sorted[c] = xrealloc(m->sorted[c], (size_t) (m->nocc + 1) * sizeof(long));
	m->nsorted[c] = 0;
	for (k = 0; k < m->nocc; k++)
		if (m->occs[k].kind == kind)
			m->sorted[c][m->nsorted[c]++] = k;
	sort_model = m;
	qsort(m->sorted[c], (size_t) m->nsorted[c], sizeof(long), cmp_occ_idx);
	m->dirty[c] = 0;
}

static const char *
entry_id(const sim_model *m, coll_id c, long idx)
{
	return c >= COLL_REFUND ? m->occs[idx].id : m->objs[idx].id;
}

static int
entry_visible(const sim_model *m, coll_id c, long idx, int64_t since)
{
	if (c >= COLL_REFUND)
		return m->occs[idx].updated >= since;
	return m->objs[idx].exists && m->objs[idx].updated >= since;
}

long
model_list(sim_model *m, coll_id c, int64_t since, const char *after,
		   long limit, long *out, int *has_more)
{
	long		lo = 0,
				hi,
				i,
				n = 0;

	ensure_sorted(m, c);
	hi = m->nsorted[c];
	/* first position whose id sorts after the cursor */
	if (after != NULL)
		while (lo < hi)
		{
			long		mid = lo + (hi - lo) / 2;

			if (id_cmp(entry_id(m, c, m->sorted[c][mid]), after) <= 0)
				lo = mid + 1;
			else
				hi = mid;
		}
	*has_more = 0;
	for (i = lo; i < m->nsorted[c]; i++)
	{
		long		idx = m->sorted[c][i];

		if (!entry_visible(m, c, idx, since))
			continue;
		if (n == limit)
		{
			*has_more = 1;
			break;
		}
		out[n++] = idx;
	}
	return n;
}

long
model_effect_refund(sim_model *m, long pi, int64_t amount, int64_t now)
{
	sim_occurrence *c;
	char		tok[32];
	long		idx;

	if (m->nocc == m->occ_cap)
	{
		m->occ_cap = m->occ_cap ? m->occ_cap * 2 : 64;
		m->occs = xrealloc(m->occs, (size_t) m->occ_cap * sizeof(sim_occurrence));
	}
	idx = m->nocc++;
	c = &m->occs[idx];
	memset(c, 0, sizeof(*c));
	c->kind = OC_REFUND;
	c->source = m->objs[pi].source;
	rng_token(&m->effect_rng, tok, 24);
	snprintf(c->id, sizeof(c->id), "re_%s", tok);
	c->payment = pi;
	c->amount = amount;
	c->currency = m->objs[pi].currency;
	c->created = now;
	c->updated = now;
	idmap_put(&m->occ_ids, c->id, idx);
	m->dirty[COLL_REFUND] = 1;
	return idx;
}
