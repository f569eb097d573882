/*
 * shopify.c
 *		Shopify's Admin REST read API: GET .../orders/{id}.json answers
 *		{"order": {...}}; the list GET .../orders.json?updated_at_min= pages
 *		with Link: <...>; rel="next" (page_info cursors), which fetch.c follows.
 *
 * The Admin API version is the source's settings->>'api_version'.  Shopify
 * supports a version for about a year after its release and then silently
 * serves the oldest supported one, with that version's shapes: pin a
 * version and move it on before it expires.  The default is a supported
 * quarterly version.
 *
 * Lists filter by updated_at_min (the incremental layer; omitted for the
 * full one).  Only the orders list takes status=any (its default lists open
 * orders only); products take active/archived/draft, customers no status.
 * An order's version is its updated_at (one-second resolution, made safe by
 * the tie rule) and its status is financial_status.
 */
#include "postgres.h"

#include "provider.h"

#define SHOPIFY_DEFAULT_API_VERSION "2025-10"

typedef struct ShopifyType
{
	WiTypeMap	map;
	const char *list_filter;	/* "&status=any" or "" */
} ShopifyType;

static const ShopifyType shopify_types[] = {
	{{"order", "orders", "$.order", "$.orders[*]", "$.financial_status", "$.updated_at", false},
	"&status=any"},
	{{"product", "products", "$.product", "$.products[*]", "$.status", "$.updated_at", false}, ""},
	{{"customer", "customers", "$.customer", "$.customers[*]", "$.state", "$.updated_at", false}, ""},
};

static const ShopifyType *
shopify_type(const char *object_type)
{
	for (int i = 0; i < lengthof(shopify_types); i++)
		if (strcmp(shopify_types[i].map.object_type, object_type) == 0)
			return &shopify_types[i];
	return NULL;
}

static bool
shopify_type_map(const WiSource *src, const char *object_type, WiTypeMap *out)
{
	const ShopifyType *t = shopify_type(object_type);

	if (t == NULL)
		return false;
	*out = t->map;
	return true;
}

static const char *
api_version(const WiSource *src)
{
	return src->api_version ? src->api_version : SHOPIFY_DEFAULT_API_VERSION;
}

static char *
shopify_object_url(const WiSource *src, const WiTypeMap *t, const char *object_id)
{
	return psprintf("%s/admin/api/%s/%s/%s.json", src->api_base, wi_url_escape(api_version(src)),
					t->collection, wi_url_escape(object_id));
}

static char *
shopify_list_url(const WiSource *src, const WiTypeMap *t, int64 since_epoch, const char *cursor)
{
	const ShopifyType *st = shopify_type(t->object_type);

	/* later pages come from the Link header only */
	if (cursor != NULL)
		return NULL;
	if (since_epoch == WI_LIST_ALL)
		return psprintf("%s/admin/api/%s/%s.json?limit=250%s", src->api_base,
						wi_url_escape(api_version(src)), t->collection, st->list_filter);
	return psprintf("%s/admin/api/%s/%s.json?updated_at_min=%s&limit=250%s", src->api_base,
					wi_url_escape(api_version(src)), t->collection,
					wi_url_escape(wi_iso_time(since_epoch)), st->list_filter);
}

static char *
shopify_auth_header(const WiSource *src)
{
	return src->api_token ? psprintf("X-Shopify-Access-Token: %s", src->api_token) : NULL;
}

const WiAdapter wi_adapter_shopify = {
	"shopify", shopify_type_map, shopify_object_url, shopify_list_url, shopify_auth_header, NULL, 0, NULL, NULL
};
