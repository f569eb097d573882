-- Shopify: GraphQL Admin API answers in the REST/webhook shape the mirror
-- keeps (shopify_rest_shape, shopify_rest_answer), and the compliance
-- webhooks' functions, their records and their errors.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;

-- an order node: numeric id, gid kept, lower-case enum, REST times, the shop's money
SELECT webhook_inbox.shopify_rest_shape('order', '{"id": "gid://shopify/Order/450789469", "legacyResourceId": "450789469",
	"name": "#1001", "createdAt": "2026-01-01T10:00:00Z", "updatedAt": "2026-01-02T11:30:05Z",
	"displayFinancialStatus": "PARTIALLY_REFUNDED", "totalPriceSet": {"shopMoney": {"amount": "12.50", "currencyCode": "EUR"}},
	"currencyCode": "EUR", "cancelledAt": null, "closedAt": "2026-01-03T00:00:00Z"}');
-- the same order as its webhook carries it: the same jsonb
SELECT webhook_inbox.shopify_rest_shape('order', '{"id": "gid://shopify/Order/450789469", "legacyResourceId": "450789469",
	"name": "#1001", "createdAt": "2026-01-01T10:00:00Z", "updatedAt": "2026-01-02T11:30:05Z",
	"displayFinancialStatus": "PARTIALLY_REFUNDED", "totalPriceSet": {"shopMoney": {"amount": "12.50", "currencyCode": "EUR"}},
	"currencyCode": "EUR", "cancelledAt": null, "closedAt": "2026-01-03T00:00:00Z"}')
	= '{"id": 450789469, "admin_graphql_api_id": "gid://shopify/Order/450789469", "name": "#1001",
	"created_at": "2026-01-01T10:00:00+00:00", "updated_at": "2026-01-02T11:30:05+00:00",
	"financial_status": "partially_refunded", "total_price": "12.50", "currency": "EUR",
	"cancelled_at": null, "closed_at": "2026-01-03T00:00:00+00:00"}'::jsonb AS same_as_rest;
SELECT webhook_inbox.shopify_rest_shape('product', '{"id": "gid://shopify/Product/7", "legacyResourceId": "7", "title": "Hat",
	"status": "ARCHIVED", "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:01Z"}');
SELECT webhook_inbox.shopify_rest_shape('customer', '{"id": "gid://shopify/Customer/9", "legacyResourceId": "9",
	"state": "ENABLED", "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:01Z"}');
-- a time with an offset is written in UTC
SELECT webhook_inbox._shopify_rest_time('"2026-01-01T10:00:00-05:00"'), webhook_inbox._shopify_rest_time('null');
-- not an object: NULL; an unknown type: an error
SELECT webhook_inbox.shopify_rest_shape('order', 'null') IS NULL AS null_node,
	   webhook_inbox.shopify_rest_shape('order', NULL) IS NULL AS sql_null;
SELECT webhook_inbox.shopify_rest_shape('fulfillment', '{}');

-- whole answers: one object, a page of a listing, and what is never a present
SELECT webhook_inbox.shopify_rest_answer('order', '{"data": {"order": {"legacyResourceId": "1", "displayFinancialStatus": "PAID",
	"updatedAt": "2026-01-01T00:00:00Z"}}, "extensions": {"cost": {"requestedQueryCost": 3}}}');
SELECT webhook_inbox.shopify_rest_answer('order', '{"data": {"orders": {"nodes": [{"legacyResourceId": "1"},
	{"legacyResourceId": "2", "displayFinancialStatus": "VOIDED"}], "pageInfo": {"hasNextPage": true, "endCursor": "abc"}}}}');
SELECT webhook_inbox.shopify_rest_answer('order', '{"data": {"orders": {"nodes": [], "pageInfo": {"hasNextPage": false}}}}');
SELECT webhook_inbox.shopify_rest_answer('order', '{"errors": [{"message": "Throttled", "extensions": {"code": "THROTTLED"}}]}') IS NULL AS errors,
	   webhook_inbox.shopify_rest_answer('order', '{"errors": [{"message": "Access denied"}], "data": {"order": {"legacyResourceId": "1"}}}') IS NULL AS errors_with_data,
	   webhook_inbox.shopify_rest_answer('order', '{"data": {"order": null}}') IS NULL AS null_object,
	   webhook_inbox.shopify_rest_answer('order', 'not json') IS NULL AS not_json,
	   webhook_inbox.shopify_rest_answer('order', '[]') IS NULL AS not_an_object;
SELECT webhook_inbox.shopify_rest_answer('metafield', '{}');

-- compliance: errors of the functions the worker runs
SELECT webhook_inbox.shopify_redact_customer(-1);
SELECT webhook_inbox.shopify_redact_shop(-1);
SELECT webhook_inbox.shopify_data_request(-1);
SELECT webhook_inbox.resolve_data_request(-1, 'x');
SELECT webhook_inbox.create_source('sh25', 'shopify', 'shpss_25') > 0 AS created;
SELECT webhook_inbox.intake('sh25', ARRAY['X-Shopify-Topic', 'customers/redact', 'X-Shopify-Webhook-Id', 'sh25-1'],
	convert_to('{"shop_id": 1, "shop_domain": "sh25.myshopify.com", "customer": {"email": "x@example.com"}}', 'UTF8'));
SELECT status, reason FROM webhook_inbox.inbox WHERE event_id = 'sh25-1';
-- (event ids vary with the tests before: the error with its number replaced)
CREATE FUNCTION pg_temp.sh25_error(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE q;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, '[0-9]+', 'N', 'g');
END $$;
SELECT pg_temp.sh25_error('SELECT webhook_inbox.shopify_redact_customer((SELECT id FROM webhook_inbox.inbox WHERE event_id = ''sh25-1''))');
-- the routes: recorded once, by the id each names
SELECT event_type, class, strategy, object_type, object_id_path, priority FROM webhook_inbox.routes
 WHERE source_kind = 'shopify' AND event_type IN ('customers/redact', 'customers/data_request', 'shop/redact')
 ORDER BY event_type;
-- a data request: what is held, by id; then resolved
SELECT webhook_inbox.intake('sh25', ARRAY['X-Shopify-Topic', 'customers/update', 'X-Shopify-Webhook-Id', 'sh25-2'],
	convert_to('{"id": 55, "email": "y@example.com", "state": "enabled", "updated_at": "2026-01-01T00:00:00Z"}', 'UTF8'));
SELECT webhook_inbox.intake('sh25', ARRAY['X-Shopify-Topic', 'customers/data_request', 'X-Shopify-Webhook-Id', 'sh25-3'],
	convert_to('{"shop_id": 1, "shop_domain": "sh25.myshopify.com", "customer": {"id": 55, "email": "y@example.com"},
	"orders_requested": [], "data_request": {"id": 77}}', 'UTF8'));
SELECT webhook_inbox.shopify_data_request((SELECT id FROM webhook_inbox.inbox WHERE event_id = 'sh25-3')) > 0 AS queued;
SELECT customer_id, data_request_id, orders_requested, held FROM webhook_inbox.data_requests d
  JOIN webhook_inbox.sources s ON s.id = d.source_id WHERE s.name = 'sh25';
SELECT queue, source, reason, owner, count FROM webhook_inbox.queues WHERE queue = 'data_request' AND source = 'sh25';
SELECT webhook_inbox.resolve_data_request(d.id, 'sent') FROM webhook_inbox.data_requests d
  JOIN webhook_inbox.sources s ON s.id = d.source_id WHERE s.name = 'sh25';
SELECT pg_temp.sh25_error('SELECT webhook_inbox.resolve_data_request(d.id, ''again'') FROM webhook_inbox.data_requests d
  JOIN webhook_inbox.sources s ON s.id = d.source_id WHERE s.name = ''sh25''');
SELECT resolved_at IS NOT NULL AS resolved, note FROM webhook_inbox.data_requests d
  JOIN webhook_inbox.sources s ON s.id = d.source_id WHERE s.name = 'sh25';
-- a customers/redact by hand: her inbox payloads erased, digests kept, recorded
SELECT webhook_inbox.intake('sh25', ARRAY['X-Shopify-Topic', 'customers/redact', 'X-Shopify-Webhook-Id', 'sh25-4'],
	convert_to('{"shop_id": 1, "shop_domain": "sh25.myshopify.com", "customer": {"id": 55, "email": "y@example.com"},
	"orders_to_redact": []}', 'UTF8'));
SELECT webhook_inbox.shopify_redact_customer((SELECT id FROM webhook_inbox.inbox WHERE event_id = 'sh25-4')) > 0 AS redacted;
SELECT event_id, payload, body_sha256 IS NOT NULL AS digest_kept FROM webhook_inbox.inbox i
  JOIN webhook_inbox.sources s ON s.id = i.source_id WHERE s.name = 'sh25' ORDER BY event_id;
SELECT topic, shop_domain, customer_id, orders, inbox_rows, objects, occurrences FROM webhook_inbox.redactions r
  JOIN webhook_inbox.sources s ON s.id = r.source_id WHERE s.name = 'sh25';
-- an app's source serves many shops: shop/redact erases its own shop's payloads, never another shop's
SELECT webhook_inbox.create_source('sh25app', 'shopify', 'shpss_25app', settings => '{"tenants": true}') > 0 AS created;
SELECT webhook_inbox.intake('sh25app', ARRAY['X-Shopify-Topic', 'customers/update', 'X-Shopify-Webhook-Id', 'sh25a-1',
	'X-Shopify-Shop-Domain', 'one.myshopify.com'], convert_to('{"id": 1, "email": "a@one.example"}', 'UTF8'));
SELECT webhook_inbox.intake('sh25app', ARRAY['X-Shopify-Topic', 'customers/update', 'X-Shopify-Webhook-Id', 'sh25a-2',
	'X-Shopify-Shop-Domain', 'two.myshopify.com'], convert_to('{"id": 2, "email": "b@two.example"}', 'UTF8'));
SELECT webhook_inbox.intake('sh25app', ARRAY['X-Shopify-Topic', 'shop/redact', 'X-Shopify-Webhook-Id', 'sh25a-3',
	'X-Shopify-Shop-Domain', 'one.myshopify.com'], convert_to('{"shop_id": 1, "shop_domain": "one.myshopify.com"}', 'UTF8'));
SELECT webhook_inbox.shopify_redact_shop((SELECT id FROM webhook_inbox.inbox WHERE event_id = 'sh25a-3')) > 0 AS redacted;
SELECT event_id, tenant, payload FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id
 WHERE s.name = 'sh25app' ORDER BY event_id;
SELECT topic, shop_domain, inbox_rows FROM webhook_inbox.redactions r JOIN webhook_inbox.sources s ON s.id = r.source_id
 WHERE s.name = 'sh25app';
