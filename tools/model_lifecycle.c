/*
 * model_lifecycle.c
 *		The objects' lifecycles (model.c's header lists them): creating the
 *		scenario's roots and children, each type's changes, the next event,
 *		and the effects the API's writes have (see model.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_int.h"

/* Mark o created now and append it to its type's creation order. */
static void
make_exist(sim_model *m, long k)
{
	sim_object *o = &m->objs[k];
	obj_type	t = o->type;

	o->exists = 1;
	o->created = m->clock;
	o->updated_at = m->clock;
	/* an order placed before the stream began: older than Shopify's 60-day window */
	if (t == OT_ORDER && m->norder[t] < m->old_orders)
		o->created = m->clock - (int64_t) (61 + m->norder[t] * 339 / (m->old_orders > 1 ? m->old_orders - 1 : 1)) * 86400;
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

/* ---------- lifecycles ---------- */

static int
enabled(const sim_model *m, obj_type t)
{
	return m->src_for[t] >= 0;
}

static int
sub_changeable(const sim_model *m, const sim_object *o)
{
	(void) m;
	return o->status != SUB_CANCELED && o->status != SUB_INCOMPLETE_EXPIRED;
}

static int
pi_changeable(const sim_model *m, const sim_object *o)
{
	return o->status != PI_CANCELED &&
		(o->status != PI_SUCCEEDED ||
		 (o->n_child < MAX_CHILD_PER_PI && o->amount_refunded < o->amount &&
		  (enabled(m, OT_REFUND) || enabled(m, OT_DISPUTE))));
}

static int
invoice_changeable(const sim_model *m, const sim_object *o)
{
	(void) m;
	return o->status != INV_PAID && o->status != INV_VOID;
}

static int
checkout_changeable(const sim_model *m, const sim_object *o)
{
	(void) m;
	return o->status == CS_OPEN;
}

static int
refund_changeable(const sim_model *m, const sim_object *o)
{
	(void) m;
	return o->status == RE_PENDING;
}

static int
dispute_changeable(const sim_model *m, const sim_object *o)
{
	(void) m;
	return o->status != DP_WARN_CLOSED && o->status != DP_WON && o->status != DP_LOST;
}

static int
charge_changeable(const sim_model *m, const sim_object *o)
{
	(void) m;
	return o->status == CH_PENDING || (o->status == CH_SUCCEEDED && !o->captured);
}

static int
pull_changeable(const sim_model *m, const sim_object *o)
{
	(void) m;
	return !o->captured;		/* a merged pull request is final */
}

static void
create_subscription(sim_model *m, long k)
{
	sim_object *o = &m->objs[k];
	double		r = rng_double(&m->rng);

	o->status = r < 0.15 ? SUB_INCOMPLETE : r < 0.5 ? SUB_TRIALING : SUB_ACTIVE;
	o->quantity = 1 + (int) rng_below(&m->rng, 5);
	emit_event(m, k, "customer.subscription.created");
}

static void
create_pi(sim_model *m, long k)
{
	sim_object *o = &m->objs[k];

	o->status = PI_RPM;
	o->amount = 500 + (int64_t) rng_below(&m->rng, 99500);
	o->quantity = rng_double(&m->rng) < 0.3;	/* manual capture */
	emit_event(m, k, "payment_intent.created");
}

static void
create_invoice(sim_model *m, long k)
{
	sim_object *o = &m->objs[k];

	o->status = INV_DRAFT;
	o->amount = 500 + (int64_t) rng_below(&m->rng, 99500);
	emit_event(m, k, "invoice.created");
}

static void
create_customer(sim_model *m, long k)
{
	emit_event(m, k, "customer.created");
}

static void
create_github(sim_model *m, long k)
{
	sim_object *o = &m->objs[k];

	o->number = ++m->gh_number;
	o->repo = m->nrepos > 1 ? (int) (k % m->nrepos) : 0;
	o->status = GH_OPEN;
	o->currency = 0;			/* labeled? */
	emit_event(m, k, "opened");
}

static void
create_checkout(sim_model *m, long k)
{
	sim_object *o = &m->objs[k];

	/* created by the merchant's API call: Stripe sends no event */
	o->status = CS_OPEN;
	o->amount = 500 + (int64_t) rng_below(&m->rng, 99500);
}

static void
create_order(sim_model *m, long k)
{
	sim_object *o = &m->objs[k];
	double		r = rng_double(&m->rng);

	o->status = r < 0.5 ? ORD_PENDING : r < 0.7 ? ORD_AUTHORIZED : ORD_PAID;
	o->amount = 500 + (int64_t) rng_below(&m->rng, 99500);
	emit_event(m, k, "orders/create");
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

/*
 * Each object type's lifecycle: how a root is created (NULL for the children
 * of a PaymentIntent, which are never roots), whether an object can still
 * change (NULL: always), and one change.
 */
typedef struct sim_lifecycle
{
	void		(*create) (sim_model *m, long k);
	int			(*changeable) (const sim_model *m, const sim_object *o);
	void		(*step) (sim_model *m, long k);
} sim_lifecycle;

static const sim_lifecycle lifecycles[OT__COUNT] = {
	[OT_SUB] = {.create = create_subscription, .changeable = sub_changeable, .step = step_subscription},
	[OT_PI] = {.create = create_pi, .changeable = pi_changeable, .step = step_pi},
	[OT_INVOICE] = {.create = create_invoice, .changeable = invoice_changeable, .step = step_invoice},
	[OT_CUSTOMER] = {.create = create_customer, .step = step_customer},
	[OT_CHECKOUT] = {.create = create_checkout, .changeable = checkout_changeable, .step = step_checkout},
	[OT_ISSUE] = {.create = create_github, .step = step_github},
	[OT_PULL] = {.create = create_github, .changeable = pull_changeable, .step = step_github},
	[OT_ORDER] = {.create = create_order, .step = step_order},
	[OT_REFUND] = {.changeable = refund_changeable, .step = step_refund},
	[OT_DISPUTE] = {.changeable = dispute_changeable, .step = step_dispute},
	[OT_CHARGE] = {.changeable = charge_changeable, .step = step_charge},
};

static int
changeable(const sim_model *m, const sim_object *o)
{
	if (!o->exists || o->deleted)
		return 0;
	return lifecycles[o->type].changeable == NULL || lifecycles[o->type].changeable(m, o);
}

static void
create_root(sim_model *m, long k)
{
	sim_object *o = &m->objs[k];

	make_exist(m, k);
	o->currency = (int) rng_below(&m->rng, 3);
	lifecycles[o->type].create(m, k);
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
	lifecycles[m->objs[pick].type].step(m, pick);
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
