/*
 * shopify.c
 *		Shopify's Admin API, by default through GraphQL
 *		(POST .../admin/api/{version}/graphql.json), and through the legacy
 *		REST Admin API for sources whose settings say "api": "rest".
 *
 * GraphQL: an object is read by its gid (gid://shopify/Order/{id}, the
 * webhook payload's admin_graphql_api_id) with the documents of
 * shopify_graphql.h, a listing pages with first/after and
 * pageInfo.endCursor, sorted by UPDATED_AT and filtered by
 * query: "updated_at:>='…'" (the incremental layer; no filter for the full
 * one).  Shopify answers 200 to nearly everything: read_answer looks inside
 * (errors[].extensions.code decides throttled, retried or unusable; a null
 * object is gone, believed as a 404 is), reads the cost extension's
 * throttleStatus and paces the shop by it (pace.c).  The answers are saved in the
 * REST/webhook shape, which webhook_inbox.shopify_rest_answer() makes of
 * them in SQL, so that whichever path brought an object the mirror holds
 * the same state, status and version.
 *
 * REST: GET .../orders/{id}.json answers {"order": {...}}; the list GET
 * .../orders.json?updated_at_min= pages with Link: <...>; rel="next"
 * (page_info cursors), which fetch.c follows.  Only the orders list takes
 * status=any (its default lists open orders only); products take
 * active/archived/draft, customers no status.
 *
 * The Admin API version is the source's settings->>'api_version'.  Shopify
 * supports a version for about a year after its release and then silently
 * serves the oldest supported one, with that version's shapes: pin a
 * version and move it on before it expires.  The default is the newest
 * stable version (@shopify/shopify-api's ApiVersion).
 *
 * An order's version is its updated_at (one-second resolution, made safe by
 * the tie rule) and its status is financial_status.
 *
 * A Shopify app (settings.tenants): every shop's webhooks arrive at the one
 * source, told apart by X-Shopify-Shop-Domain, and each shop is read at its
 * own origin with its own X-Shopify-Access-Token (wi_shopify_shop_base(),
 * credentials.c's refresh of expiring offline tokens).
 */
#include "postgres.h"

#include <math.h>

#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "json_fast.h"
#include "provider.h"
#include "shopify_graphql.h"

#define SHOPIFY_DEFAULT_API_VERSION SHOPIFY_GQL_API_VERSION

/* orders older than this are listed only with the read_all_orders scope */
#define SHOPIFY_ORDERS_WINDOW_DAYS 60

/*
 * What a Shopify source cannot see.  "Only the last 60 days' worth of
 * orders from a store will be accessible by default.  To access older
 * orders, request the read_all_orders scope" (Admin API, Order): order(id:)
 * answers null and orders() never lists an older one, while its signed
 * orders webhooks still come.  And a shop that uninstalled the app
 * (app/uninstalled) answers nothing at all.
 */
static const WiHorizon shopify_horizons[] = {
	{"order", WI_HORIZON_AGE, SHOPIFY_ORDERS_WINDOW_DAYS, "$.created_at", "read_all_orders",
	"Without the read_all_orders scope an app sees only the orders created in the last 60 days: an older order is null by id and never listed."},
	{"*", WI_HORIZON_TENANT, 0, NULL, NULL,
	"A shop that uninstalled the app: its token is revoked and nothing of it can be read."},
	{NULL}
};

typedef struct ShopifyType
{
	WiTypeMap	map;
	const char *list_filter;	/* REST: "&status=any" or "" */
	const char *gid_type;		/* GraphQL: gid://shopify/{gid_type}/{id} */
	const char *query;			/* GraphQL: one object by id */
	const char *list_query;		/* GraphQL: one page of the listing */
} ShopifyType;

static const ShopifyType shopify_types[] = {
	{{"order", "orders", "$.order", "$.orders[*]", "$.financial_status", "$.updated_at", false},
	"&status=any", "Order", SHOPIFY_GQL_ORDER_QUERY, SHOPIFY_GQL_ORDERS_QUERY},
	{{"product", "products", "$.product", "$.products[*]", "$.status", "$.updated_at", false},
	"", "Product", SHOPIFY_GQL_PRODUCT_QUERY, SHOPIFY_GQL_PRODUCTS_QUERY},
	{{"customer", "customers", "$.customer", "$.customers[*]", "$.state", "$.updated_at", false},
	"", "Customer", SHOPIFY_GQL_CUSTOMER_QUERY, SHOPIFY_GQL_CUSTOMERS_QUERY},
};

static const ShopifyType *
shopify_type(const char *object_type)
{
	for (int i = 0; i < lengthof(shopify_types); i++)
		if (strcmp(shopify_types[i].map.object_type, object_type) == 0)
			return &shopify_types[i];
	return NULL;
}

/* true: GraphQL (the default); false: REST.  Unknown values have no read API. */
static bool
use_graphql(const WiSource *src, bool *known)
{
	*known = true;
	if (src->api == NULL || strcmp(src->api, "graphql") == 0)
		return true;
	if (strcmp(src->api, "rest") == 0)
		return false;
	*known = false;
	return false;
}

static bool
shopify_type_map(const WiSource *src, const char *object_type, WiTypeMap *out)
{
	const ShopifyType *t = shopify_type(object_type);
	bool		known;

	(void) use_graphql(src, &known);
	if (!known)
	{
		ereport(WARNING,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("source \"%s\" names an unknown Shopify API \"%s\"", src->name, src->api),
				 errdetail("Its objects are treated as having no read API."),
				 errhint("Set settings.api to \"graphql\" (the default) or \"rest\".")));
		return false;
	}
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
graphql_url(const WiSource *src)
{
	return psprintf("%s/admin/api/%s/graphql.json", src->api_base, wi_url_escape(api_version(src)));
}

static char *
shopify_object_url(const WiSource *src, const WiTypeMap *t, const char *object_id)
{
	bool		known;

	if (use_graphql(src, &known))
		return graphql_url(src);
	return psprintf("%s/admin/api/%s/%s/%s.json", src->api_base, wi_url_escape(api_version(src)),
					t->collection, wi_url_escape(object_id));
}

static char *
shopify_list_url(const WiSource *src, const WiTypeMap *t, int64 since_epoch, const char *cursor)
{
	const ShopifyType *st = shopify_type(t->object_type);
	bool		known;

	/* GraphQL: every page is a POST to the one endpoint, the cursor in its body */
	if (use_graphql(src, &known))
		return graphql_url(src);
	/* REST: later pages come from the Link header only */
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

/*
 * {"query": ..., "variables": {"id": "gid://shopify/Order/{id}"}}.  The
 * mirror keys Shopify objects by their numeric id (the payload's id); an id
 * that is already a gid is sent as it is.
 */
static char *
shopify_object_body(const WiSource *src, const WiTypeMap *t, const char *object_id)
{
	const ShopifyType *st = shopify_type(t->object_type);
	StringInfoData b;
	bool		known;

	if (!use_graphql(src, &known) || st == NULL)
		return NULL;
	initStringInfo(&b);
	appendStringInfoString(&b, "{\"query\":");
	escape_json(&b, st->query);
	appendStringInfoString(&b, ",\"variables\":{\"id\":");
	escape_json(&b, strncmp(object_id, "gid://", 6) == 0 ? object_id
				: psprintf("gid://shopify/%s/%s", st->gid_type, object_id));
	appendStringInfoString(&b, "}}");
	return b.data;
}

static char *
shopify_list_body(const WiSource *src, const WiTypeMap *t, int64 since_epoch, const char *cursor)
{
	const ShopifyType *st = shopify_type(t->object_type);
	StringInfoData b;
	bool		known;

	if (!use_graphql(src, &known) || st == NULL)
		return NULL;
	if (cursor == NULL && since_epoch == WI_LIST_ALL && strcmp(t->object_type, "order") == 0)
		ereport(LOG,
				(errmsg("webhook_inbox: a full sweep of source \"%s\" lists only the orders Shopify lets the app see",
						src->name),
				 errdetail("Orders older than %d days are listed only to an app with the read_all_orders scope; "
						   "without it such an order is hidden, never deleted, and follows its signed webhooks.",
						   SHOPIFY_ORDERS_WINDOW_DAYS)));
	initStringInfo(&b);
	appendStringInfoString(&b, "{\"query\":");
	escape_json(&b, st->list_query);
	appendStringInfo(&b, ",\"variables\":{\"first\":%d,\"after\":", SHOPIFY_GQL_PAGE_SIZE);
	if (cursor)
		escape_json(&b, cursor);
	else
		appendStringInfoString(&b, "null");
	appendStringInfoString(&b, ",\"query\":");
	if (since_epoch == WI_LIST_ALL)
		appendStringInfoString(&b, "null");
	else
		escape_json(&b, psprintf("updated_at:>='%s'", wi_iso_time(since_epoch)));
	appendStringInfoString(&b, "}}");
	return b.data;
}

/* ---------- reading a GraphQL answer (no transaction: jsonb in C only) ---------- */

/* Member key of the object v, or NULL. */
static JsonbValue *
member(JsonbValue *v, const char *key)
{
	if (v == NULL || v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
		return NULL;
	return getKeyJsonValueFromContainer(v->val.binary.data, key, strlen(key), NULL);
}

static double
number_or(JsonbValue *v, double dflt)
{
	if (v == NULL || v->type != jbvNumeric)
		return dflt;
	return DatumGetFloat8(DirectFunctionCall1(numeric_float8_no_overflow,
											  NumericGetDatum(v->val.numeric)));
}

static char *
string_or_null(JsonbValue *v)
{
	if (v == NULL || v->type != jbvString)
		return NULL;
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/*
 * What a 200 from graphql.json says: the cost extension (on every answer,
 * errors included) paces the source when its budget is below what this
 * query cost; the first error's extensions.code decides (THROTTLED: 429,
 * deferred until the budget has refilled; INTERNAL_SERVER_ERROR: 500,
 * retried; ACCESS_DENIED: 403, refused; anything else, an unknown field
 * among them: 400, unusable); a null object is 404, gone once confirmed.
 * A listing's pageInfo gives the next page's cursor.
 */
static void
shopify_read_answer(const WiSource *src, const WiTypeMap *t, WiHttpRequest *req)
{
	bool		known;
	Jsonb	   *doc;
	JsonbValue	root;
	JsonbValue *cost;
	JsonbValue *ts;
	JsonbValue *errors;
	JsonbValue *data;
	double		requested,
				available,
				restore;

	if (!use_graphql(src, &known) || req->status != 200 || req->body.data == NULL)
		return;
	doc = wi_jsonb_fast(req->body.data, req->body.len);
	if (doc == NULL || !JB_ROOT_IS_OBJECT(doc))
		return;					/* the save finds it unreadable */
	root.type = jbvBinary;
	root.val.binary.data = &doc->root;
	root.val.binary.len = VARSIZE(doc) - VARHDRSZ;

	cost = member(member(&root, "extensions"), "cost");
	ts = member(cost, "throttleStatus");
	requested = number_or(member(cost, "requestedQueryCost"), 0);
	available = number_or(member(ts, "currentlyAvailable"), -1);
	restore = number_or(member(ts, "restoreRate"), 0);
	if (available >= 0 && restore > 0 && available < requested)
		req->pace_s = (requested - available) / restore;

	errors = member(&root, "errors");
	if (errors != NULL && errors->type == jbvBinary && JsonContainerIsArray(errors->val.binary.data) &&
		JsonContainerSize(errors->val.binary.data) > 0)
	{
		JsonbValue *first = getIthJsonbValueFromContainer(errors->val.binary.data, 0);
		char	   *code = string_or_null(member(member(first, "extensions"), "code"));
		char	   *message = string_or_null(member(first, "message"));

		if (message != NULL && strlen(message) > 200)
			message[200] = '\0';
		req->error = psprintf("graphql %s: %s", code ? code : "error", message ? message : "(no message)");
		if (code != NULL && strcmp(code, "THROTTLED") == 0)
		{
			req->status = 429;
			req->retry_after_s = (restore > 0 && requested > available)
				? (int64) ceil((requested - Max(available, 0)) / restore) : 1;
			req->retry_after_s = Max(req->retry_after_s, 1);
		}
		else if (code != NULL && strcmp(code, "INTERNAL_SERVER_ERROR") == 0)
			req->status = 500;
		else if (code != NULL && strcmp(code, "ACCESS_DENIED") == 0)
			req->status = 403;
		else
			req->status = 400;
		return;
	}
	data = member(&root, "data");
	if (data == NULL || data->type != jbvBinary)
	{
		req->status = 400;
		req->error = pstrdup("graphql: the answer has neither data nor errors");
		return;
	}
	{
		JsonbValue *one = member(data, t->object_type);
		JsonbValue *list = member(data, t->collection);

		if (one != NULL && one->type == jbvNull)
		{
			req->status = 404;
			req->error = psprintf("graphql: %s is null", t->object_type);
		}
		else if (list != NULL)
		{
			JsonbValue *page = member(list, "pageInfo");
			JsonbValue *more = member(page, "hasNextPage");

			if (more != NULL && more->type == jbvBool && more->val.boolean)
				req->next_cursor = string_or_null(member(page, "endCursor"));
		}
	}
}

static const char *
shopify_answer_shape(const WiSource *src)
{
	bool		known;

	return use_graphql(src, &known) ? "webhook_inbox.shopify_rest_answer" : NULL;
}

/*
 * The scopes the token holds: QueryRoot.currentAppInstallation, through
 * GraphQL whatever settings.api says (the REST Admin API's
 * /admin/oauth/access_scopes.json answers the same, but GraphQL is what
 * every app may call).
 */
static char *
shopify_scopes_url(const WiSource *src)
{
	return graphql_url(src);
}

static char *
shopify_scopes_body(const WiSource *src)
{
	StringInfoData b;

	(void) src;
	initStringInfo(&b);
	appendStringInfoString(&b, "{\"query\":");
	escape_json(&b, SHOPIFY_GQL_SCOPES_QUERY);
	appendStringInfoString(&b, "}");
	return b.data;
}

/* ---------- a Shopify app's shops ---------- */

/*
 * A shop as Shopify names it in X-Shopify-Shop-Domain: {name}.myshopify.com,
 * the name lowercase letters, digits and hyphens (intake holds deliveries'
 * shops to it too).
 */
bool
wi_shopify_shop_domain_ok(const char *shop)
{
	size_t		n = strlen(shop);
	const char *suffix = ".myshopify.com";
	size_t		sn = strlen(suffix);

	if (n <= sn || n > 255 || strcmp(shop + n - sn, suffix) != 0)
		return false;
	if (!((shop[0] >= 'a' && shop[0] <= 'z') || (shop[0] >= '0' && shop[0] <= '9')))
		return false;
	for (size_t i = 0; i < n - sn; i++)
		if (!((shop[i] >= 'a' && shop[i] <= 'z') || (shop[i] >= '0' && shop[i] <= '9') || shop[i] == '-'))
			return false;
	return true;
}

/*
 * Where a Shopify app's shop is read: https://{shop}, its own origin and
 * no other, the shop being the verified X-Shopify-Shop-Domain of a signed
 * delivery (a myshopify.com domain, refused otherwise).  A source whose
 * settings.shop_base_url names a template (http://127.0.0.1:8080/shops/{shop})
 * keeps its shops under api_base instead, for a test against a simulator:
 * the template moves paths only, since every request it makes must still
 * be on api_base's origin (wi_http_refusal()).  Returns the base (no
 * trailing slash) and *origin, or NULL with *reason.  Token requests
 * (credentials.c) and reads (tenant_base below) use it alike.
 */
char *
wi_shopify_shop_base(const WiSource *src, const char *shop, char **origin, char **reason)
{
	*origin = NULL;
	*reason = NULL;
	if (shop == NULL || !wi_shopify_shop_domain_ok(shop))
	{
		*reason = psprintf("tenant \"%s\" is not a shop's myshopify.com domain", shop ? shop : "");
		return NULL;
	}
	if (src->shop_base_url != NULL)
	{
		const char *const keys[] = {"shop", NULL};
		const char *const values[] = {shop, NULL};
		char	   *base;
		size_t		n;

		if (src->api_base == NULL || strstr(src->shop_base_url, "{shop}") == NULL)
		{
			*reason = psprintf("source \"%s\": settings.shop_base_url must name {shop} and api_base its origin",
							   src->name);
			return NULL;
		}
		base = wi_template(src->shop_base_url, keys, values);
		n = strlen(base);
		while (n > 0 && base[n - 1] == '/')
			base[--n] = '\0';
		*origin = src->api_base;
		return base;
	}
	*origin = psprintf("https://%s", shop);
	return *origin;
}

/*
 * Shopify meters the GraphQL Admin API by query cost "based on the
 * combination of the app and store" (shopify.dev graphql-admin/rate-limits):
 * a shop's own bucket (restore 100 points/s on Standard to 2,000 on
 * Enterprise), whose state every answer reports in
 * extensions.cost.throttleStatus.  So each shop is a unit of its own, not
 * counted by requests: read_answer's pace_s holds it until its bucket has
 * what the last query cost (wi_pace_hold()).  Settings rate_limit may
 * still pace each shop by requests.
 */
static void
shopify_pace(const WiSource *src, const char *path, WiPace *out, bool *tenant_unit)
{
	(void) src;
	(void) path;
	out->units[0].rate = 0;
	out->units[0].burst = 1;
	*tenant_unit = true;
}

const WiAdapter wi_adapter_shopify = {
	.kind = "shopify",
	.type_map = shopify_type_map,
	.object_url = shopify_object_url,
	.list_url = shopify_list_url,
	.auth_header = shopify_auth_header,
	.object_body = shopify_object_body,
	.list_body = shopify_list_body,
	.read_answer = shopify_read_answer,
	.answer_shape = shopify_answer_shape,
	.tenant_base = wi_shopify_shop_base,
	.pace = shopify_pace,
	.horizons = shopify_horizons,
	.scopes_url = shopify_scopes_url,
	.scopes_body = shopify_scopes_body,
};
