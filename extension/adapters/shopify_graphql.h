/*
 * shopify_graphql.h
 *		Every GraphQL document the Shopify adapter sends to the Admin API
 *		(POST /admin/api/{version}/graphql.json), in one place.
 *
 * Three readers share this file: the adapter (adapters/shopify.c) sends
 * these documents, webhook-sim (tools/shopify_api.c) checks what it is sent
 * against them, and the contract test (regress/contract/shopify_graphql.mjs)
 * validates each one against Shopify's published Admin schema.  So the test
 * can read it without a C compiler, keep to this form: each document is a
 * #define of adjacent string literals and earlier SHOPIFY_GQL_ names, one
 * document per SHOPIFY_GQL_* macro whose name ends in _QUERY.
 *
 * The selections name exactly the fields the mirror keeps: the adapter's
 * answers are turned into the REST/webhook shape by
 * webhook_inbox.shopify_rest_shape(), field for field.  Customers are read
 * without e-mail or name: the mirror needs their state and version only.
 */
#ifndef WI_SHOPIFY_GRAPHQL_H
#define WI_SHOPIFY_GRAPHQL_H

/* the Admin API version the adapter and webhook-sim speak by default */
#define SHOPIFY_GQL_API_VERSION "2026-10"

/* the fields of each type the mirror keeps */
#define SHOPIFY_GQL_ORDER_FIELDS \
	"id legacyResourceId name createdAt updatedAt displayFinancialStatus " \
	"totalPriceSet { shopMoney { amount currencyCode } } currencyCode cancelledAt closedAt"
#define SHOPIFY_GQL_PRODUCT_FIELDS \
	"id legacyResourceId title status createdAt updatedAt"
#define SHOPIFY_GQL_CUSTOMER_FIELDS \
	"id legacyResourceId state createdAt updatedAt"

/* one object by its gid (fetch-on-notify, a sweep's read by id) */
#define SHOPIFY_GQL_ORDER_QUERY \
	"query WebhookInboxOrder($id: ID!) { order(id: $id) { " SHOPIFY_GQL_ORDER_FIELDS " } }"
#define SHOPIFY_GQL_PRODUCT_QUERY \
	"query WebhookInboxProduct($id: ID!) { product(id: $id) { " SHOPIFY_GQL_PRODUCT_FIELDS " } }"
#define SHOPIFY_GQL_CUSTOMER_QUERY \
	"query WebhookInboxCustomer($id: ID!) { customer(id: $id) { " SHOPIFY_GQL_CUSTOMER_FIELDS " } }"

/*
 * One page of a listing, oldest change first: $query is
 * "updated_at:>='…'" for the incremental layer and null for the full one,
 * $after the previous page's pageInfo.endCursor.
 */
#define SHOPIFY_GQL_ORDERS_QUERY \
	"query WebhookInboxOrders($first: Int!, $after: String, $query: String) { " \
	"orders(first: $first, after: $after, sortKey: UPDATED_AT, query: $query) { " \
	"nodes { " SHOPIFY_GQL_ORDER_FIELDS " } pageInfo { hasNextPage endCursor } } }"
#define SHOPIFY_GQL_PRODUCTS_QUERY \
	"query WebhookInboxProducts($first: Int!, $after: String, $query: String) { " \
	"products(first: $first, after: $after, sortKey: UPDATED_AT, query: $query) { " \
	"nodes { " SHOPIFY_GQL_PRODUCT_FIELDS " } pageInfo { hasNextPage endCursor } } }"
#define SHOPIFY_GQL_CUSTOMERS_QUERY \
	"query WebhookInboxCustomers($first: Int!, $after: String, $query: String) { " \
	"customers(first: $first, after: $after, sortKey: UPDATED_AT, query: $query) { " \
	"nodes { " SHOPIFY_GQL_CUSTOMER_FIELDS " } pageInfo { hasNextPage endCursor } } }"

/*
 * The access scopes the token holds: without read_all_orders, orders older
 * than 60 days are hidden from the app (asked once per token and after
 * app/scopes_update; sql/worker.sql _scopes_answered() reads the answer)
 */
#define SHOPIFY_GQL_SCOPES_QUERY \
	"query WebhookInboxAccessScopes { currentAppInstallation { accessScopes { handle } } }"

/* the page size of a listing: Shopify's largest */
#define SHOPIFY_GQL_PAGE_SIZE 250

#endif							/* WI_SHOPIFY_GRAPHQL_H */
