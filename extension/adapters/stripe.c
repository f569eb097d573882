/*
 * stripe.c
 *		Stripe's read API: GET /v1/{collection}/{id} and the changed-since
 *		list GET /v1/{collection}?updated_since=&limit=&starting_after=.
 *
 * Mirror object types map to API collections through the table below;
 * refunds and disputes are occurrences (insert-once facts with amount and
 * currency), the rest mirrored objects with a status and no version (the
 * sweep refetches them before a repair).
 */
#include "postgres.h"

#include "provider.h"

static const WiTypeMap stripe_types[] = {
	{"subscription", "subscriptions", "$", "$.data[*]", "$.status", NULL, false},
	{"payment", "payment_intents", "$", "$.data[*]", "$.status", NULL, false},
	{"customer", "customers", "$", "$.data[*]", NULL, NULL, false},
	{"invoice", "invoices", "$", "$.data[*]", "$.status", NULL, false},
	{"refund", "refunds", "$", "$.data[*]", "$.status", NULL, true},
	{"dispute", "disputes", "$", "$.data[*]", "$.status", NULL, true},
	/* thin events name the API object type itself */
	{"payment_intent", "payment_intents", "$", "$.data[*]", "$.status", NULL, false},
};

static bool
stripe_type_map(const WiSource *src, const char *object_type, WiTypeMap *out)
{
	for (int i = 0; i < lengthof(stripe_types); i++)
		if (strcmp(stripe_types[i].object_type, object_type) == 0)
		{
			*out = stripe_types[i];
			return true;
		}
	return false;
}

static char *
stripe_object_url(const WiSource *src, const WiTypeMap *t, const char *object_id)
{
	return psprintf("%s/v1/%s/%s", src->api_base, t->collection, wi_url_escape(object_id));
}

static char *
stripe_list_url(const WiSource *src, const WiTypeMap *t, int64 since_epoch, const char *cursor)
{
	if (cursor != NULL)
		return psprintf("%s/v1/%s?updated_since=" INT64_FORMAT "&limit=100&starting_after=%s",
						src->api_base, t->collection, since_epoch, wi_url_escape(cursor));
	return psprintf("%s/v1/%s?updated_since=" INT64_FORMAT "&limit=100",
					src->api_base, t->collection, since_epoch);
}

static char *
stripe_auth_header(const WiSource *src)
{
	return src->api_token ? psprintf("Authorization: Bearer %s", src->api_token) : NULL;
}

const WiAdapter wi_adapter_stripe = {
	"stripe", stripe_type_map, stripe_object_url, stripe_list_url, stripe_auth_header
};
