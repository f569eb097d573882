/*
 * stripe.c
 *		Stripe's read API as stripe-node types it: GET /v1/{collection}/{id},
 *		and the list GET /v1/{collection}?limit=100&starting_after={id},
 *		paged by has_more and the last id of the page (never a Link header).
 *
 * Stripe answers any parameter a list does not declare with 400
 * parameter_unknown, so a list carries only limit, starting_after and the
 * filters its *ListParams declare: status=all for subscriptions, whose list
 * otherwise omits canceled ones (SubscriptionListParams.Status).  No list
 * filters by update time, so a list is always the full listing of the type.
 *
 * Mirror object types map to API collections through the table below.  No
 * Stripe object carries a version: the sweep refetches before a repair.
 * Refunds and disputes are occurrences (insert-once, with amount and currency).
 */
#include "postgres.h"

#include "provider.h"

/* the filters a full listing needs besides limit and starting_after */
typedef struct StripeType
{
	WiTypeMap	map;
	const char *list_filter;	/* "&status=all" or "" */
} StripeType;

static const StripeType stripe_types[] = {
	{{"subscription", "subscriptions", "$", "$.data[*]", "$.status", NULL, false}, "&status=all"},
	{{"payment", "payment_intents", "$", "$.data[*]", "$.status", NULL, false}, ""},
	{{"customer", "customers", "$", "$.data[*]", NULL, NULL, false}, ""},
	{{"invoice", "invoices", "$", "$.data[*]", "$.status", NULL, false}, ""},
	{{"charge", "charges", "$", "$.data[*]", "$.status", NULL, false}, ""},
	{{"refund", "refunds", "$", "$.data[*]", "$.status", NULL, true}, ""},
	{{"dispute", "disputes", "$", "$.data[*]", "$.status", NULL, true}, ""},
	{{"checkout.session", "checkout/sessions", "$", "$.data[*]", "$.status", NULL, false}, ""},
	/* thin events name the API object type itself */
	{{"payment_intent", "payment_intents", "$", "$.data[*]", "$.status", NULL, false}, ""},
};

static const StripeType *
stripe_type(const char *object_type)
{
	for (int i = 0; i < lengthof(stripe_types); i++)
		if (strcmp(stripe_types[i].map.object_type, object_type) == 0)
			return &stripe_types[i];
	return NULL;
}

static bool
stripe_type_map(const WiSource *src, const char *object_type, WiTypeMap *out)
{
	const StripeType *t = stripe_type(object_type);

	if (t == NULL)
		return false;
	*out = t->map;
	return true;
}

static char *
stripe_object_url(const WiSource *src, const WiTypeMap *t, const char *object_id)
{
	return psprintf("%s/v1/%s/%s", src->api_base, t->collection, wi_url_escape(object_id));
}

/* The full listing; since_epoch is unused: no Stripe list filters by update time. */
static char *
stripe_list_url(const WiSource *src, const WiTypeMap *t, int64 since_epoch, const char *cursor)
{
	const StripeType *st = stripe_type(t->object_type);

	if (cursor != NULL)
		return psprintf("%s/v1/%s?limit=100%s&starting_after=%s", src->api_base, t->collection,
						st->list_filter, wi_url_escape(cursor));
	return psprintf("%s/v1/%s?limit=100%s", src->api_base, t->collection, st->list_filter);
}

static char *
stripe_auth_header(const WiSource *src)
{
	return src->api_token ? psprintf("Authorization: Bearer %s", src->api_token) : NULL;
}

const WiAdapter wi_adapter_stripe = {
	"stripe", stripe_type_map, stripe_object_url, stripe_list_url, stripe_auth_header
};
