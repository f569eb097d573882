/*
 * shopify.c
 *		Shopify's Admin REST read API: GET .../orders/{id}.json answers
 *		{"order": {...}}; the list GET .../orders.json?updated_at_min= pages
 *		with Link: <...>; rel="next" (page_info cursors), which fetch.c follows.
 *
 * An order's version is its updated_at (one-second resolution, made safe by
 * the tie rule) and its status is financial_status.
 */
#include "postgres.h"

#include "provider.h"

#define SHOPIFY_API_VERSION "2024-01"

static const WiTypeMap shopify_types[] = {
	{"order", "orders", "$.order", "$.orders[*]", "$.financial_status", "$.updated_at", false},
	{"product", "products", "$.product", "$.products[*]", "$.status", "$.updated_at", false},
	{"customer", "customers", "$.customer", "$.customers[*]", "$.state", "$.updated_at", false},
};

static bool
shopify_type_map(const WiSource *src, const char *object_type, WiTypeMap *out)
{
	for (int i = 0; i < lengthof(shopify_types); i++)
		if (strcmp(shopify_types[i].object_type, object_type) == 0)
		{
			*out = shopify_types[i];
			return true;
		}
	return false;
}

static char *
shopify_object_url(const WiSource *src, const WiTypeMap *t, const char *object_id)
{
	return psprintf("%s/admin/api/" SHOPIFY_API_VERSION "/%s/%s.json", src->api_base,
					t->collection, wi_url_escape(object_id));
}

static char *
shopify_list_url(const WiSource *src, const WiTypeMap *t, int64 since_epoch, const char *cursor)
{
	/* later pages come from the Link header only */
	if (cursor != NULL)
		return NULL;
	return psprintf("%s/admin/api/" SHOPIFY_API_VERSION "/%s.json?updated_at_min=%s&limit=250&status=any",
					src->api_base, t->collection, wi_url_escape(wi_iso_time(since_epoch)));
}

static char *
shopify_auth_header(const WiSource *src)
{
	return src->api_token ? psprintf("X-Shopify-Access-Token: %s", src->api_token) : NULL;
}

const WiAdapter wi_adapter_shopify = {
	"shopify", shopify_type_map, shopify_object_url, shopify_list_url, shopify_auth_header
};
