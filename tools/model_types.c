/*
 * model_types.c
 *		The simulator's object types: their names, API paths, status names
 *		and currencies (see model.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_int.h"

static const char *const sub_status[] = {"incomplete", "incomplete_expired", "trialing",
"active", "past_due", "canceled", "unpaid", "paused"};
static const char *const pi_status[] = {"requires_payment_method", "requires_confirmation",
"requires_action", "processing", "requires_capture", "succeeded", "canceled"};
static const char *const inv_status[] = {"draft", "open", "paid", "uncollectible", "void"};
static const char *const cs_status[] = {"open", "complete", "expired"};
static const char *const order_status[] = {"pending", "authorized", "paid", "partially_refunded", "refunded", "voided"};
static const char *const gh_status[] = {"open", "closed"};
static const char *const re_status[] = {"pending", "succeeded", "failed", "canceled"};
static const char *const dp_status[] = {"warning_needs_response", "warning_under_review",
"warning_closed", "needs_response", "under_review", "won", "lost"};
static const char *const ch_status[] = {"pending", "succeeded", "failed"};

static const char *const stripe_currency[] = {"usd", "eur", "gbp"};
static const char *const shop_currency[] = {"USD", "EUR", "CAD"};

/*
 * One object type: its name (the object field, the --types word), its API
 * collection, its statuses' names (NULL: it has none), whether it is an
 * occurrence (a refund or dispute of a PaymentIntent) and its currencies'
 * names.
 */
typedef struct sim_type
{
	const char *name;
	const char *path;
	const char *const *statuses;
	int			occurrence;
	const char *const *currencies;
} sim_type;

static const sim_type types[OT__COUNT] = {
	[OT_SUB] = {.name = "subscription", .path = "subscriptions", .statuses = sub_status,
	.currencies = stripe_currency},
	[OT_PI] = {.name = "payment_intent", .path = "payment_intents", .statuses = pi_status,
	.currencies = stripe_currency},
	[OT_INVOICE] = {.name = "invoice", .path = "invoices", .statuses = inv_status,
	.currencies = stripe_currency},
	[OT_CUSTOMER] = {.name = "customer", .path = "customers", .currencies = stripe_currency},
	[OT_CHECKOUT] = {.name = "checkout.session", .path = "checkout/sessions", .statuses = cs_status,
	.currencies = stripe_currency},
	[OT_ISSUE] = {.name = "issue", .path = "issues", .statuses = gh_status,
	.currencies = stripe_currency},
	[OT_PULL] = {.name = "pull_request", .path = "pulls", .statuses = gh_status,
	.currencies = stripe_currency},
	[OT_ORDER] = {.name = "order", .path = "orders", .statuses = order_status,
	.currencies = shop_currency},
	[OT_REFUND] = {.name = "refund", .path = "refunds", .statuses = re_status, .occurrence = 1,
	.currencies = stripe_currency},
	[OT_DISPUTE] = {.name = "dispute", .path = "disputes", .statuses = dp_status, .occurrence = 1,
	.currencies = stripe_currency},
	[OT_CHARGE] = {.name = "charge", .path = "charges", .statuses = ch_status,
	.currencies = stripe_currency},
};

const char *
obj_type_name(obj_type t)
{
	return types[t].name;
}

const char *
obj_type_path(obj_type t)
{
	return types[t].path;
}

int
obj_type_is_occurrence(obj_type t)
{
	return types[t].occurrence;
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
			if (strlen(types[t].name) == n && strncmp(types[t].name, p, n) == 0)
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
	return types[o->type].statuses ? types[o->type].statuses[o->status] : NULL;
}

const char *
currency_name(const sim_object *o)
{
	return types[o->type].currencies[o->currency];
}
