-- A tenant comes from what is signed: Shopify signs the body, not the
-- X-Shopify-Shop-Domain header, so a header that disagrees with the shop the
-- body names is refused; a topic that acts on a shop but names none in its
-- body waits in quarantine; tenants are held to their providers' formats;
-- prune() leaves every replay digest inside its window.
SET client_min_messages = warning;
SELECT webhook_inbox.create_source('sh28', 'shopify', 'shpss_28', settings => '{"tenants": true}') > 0 AS created;
SELECT webhook_inbox.create_source('sh28one', 'shopify', 'shpss_28one') > 0 AS created;
SELECT webhook_inbox.create_source('st28', 'stripe', 'whsec_28') > 0 AS created;
SELECT webhook_inbox.create_source('gh28', 'github', 'ghsec_28') > 0 AS created;
CREATE FUNCTION pg_temp.sh28(p_source text, p_topic text, p_id text, p_shop text, p_body text)
RETURNS TABLE (outcome text, reason text) LANGUAGE sql AS $$
	SELECT outcome, reason FROM webhook_inbox.intake_batch(ARRAY[p_source],
		ARRAY[ARRAY['X-Shopify-Topic', p_topic, 'X-Shopify-Webhook-Id', p_id,
					'X-Shopify-Shop-Domain', p_shop]], ARRAY[convert_to(p_body, 'UTF8')])
$$;

-- two shops of one app, each with an order from the same customer
SELECT * FROM pg_temp.sh28('sh28', 'orders/create', 'w28-1', 'a28.myshopify.com',
	'{"id": 2801, "email": "ann@example.com", "financial_status": "paid", "updated_at": "2026-01-01T00:00:00Z"}');
SELECT * FROM pg_temp.sh28('sh28', 'orders/create', 'w28-2', 'b28.myshopify.com',
	'{"id": 2802, "email": "ann@example.com", "financial_status": "paid", "updated_at": "2026-01-01T00:00:00Z"}');

-- shop A's signed compliance and uninstall bodies sent in shop B's name: refused, nothing stored
SELECT * FROM pg_temp.sh28('sh28', 'customers/redact', 'w28-3', 'b28.myshopify.com',
	'{"shop_id": 1, "shop_domain": "a28.myshopify.com", "customer": {"id": 9, "email": "ann@example.com"}, "orders_to_redact": []}');
SELECT * FROM pg_temp.sh28('sh28', 'shop/redact', 'w28-4', 'b28.myshopify.com',
	'{"shop_id": 1, "shop_domain": "a28.myshopify.com"}');
SELECT * FROM pg_temp.sh28('sh28', 'customers/data_request', 'w28-5', 'b28.myshopify.com',
	'{"shop_id": 1, "shop_domain": "a28.myshopify.com", "customer": {"id": 9}, "orders_requested": []}');
SELECT * FROM pg_temp.sh28('sh28', 'app/uninstalled', 'w28-6', 'b28.myshopify.com',
	'{"id": 1, "name": "A", "domain": "shop-a.example.com", "myshopify_domain": "a28.myshopify.com"}');
SELECT * FROM pg_temp.sh28('sh28', 'shop/update', 'w28-7', 'b28.myshopify.com',
	'{"id": 1, "name": "A", "domain": "a28.myshopify.com"}');
-- intake() raises it, with what it means
SELECT webhook_inbox.intake('sh28', ARRAY['X-Shopify-Topic', 'shop/redact', 'X-Shopify-Webhook-Id', 'w28-8',
	'X-Shopify-Shop-Domain', 'b28.myshopify.com'], convert_to('{"shop_domain": "a28.myshopify.com"}', 'UTF8'));
-- a source of one shop compares them too, where the header is sent
SELECT * FROM pg_temp.sh28('sh28one', 'customers/redact', 'w28-9', 'b28.myshopify.com',
	'{"shop_id": 1, "shop_domain": "a28.myshopify.com", "customer": {"id": 9}, "orders_to_redact": []}');
SELECT count(*) AS stored FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id
 WHERE s.name IN ('sh28', 'sh28one') AND i.event_id NOT IN ('w28-1', 'w28-2');
SELECT count(*) AS attempts FROM webhook_inbox.deliveries d JOIN webhook_inbox.sources s ON s.id = d.source_id
 WHERE s.name IN ('sh28', 'sh28one') AND d.event_id NOT IN ('w28-1', 'w28-2');
SELECT tenant, status, reason FROM webhook_inbox.tenants t JOIN webhook_inbox.sources s ON s.id = t.source_id
 WHERE s.name = 'sh28' ORDER BY tenant;

-- a topic that acts on its shop, whose body names none: kept, not acted on
SELECT * FROM pg_temp.sh28('sh28', 'shop/redact', 'w28-10', 'b28.myshopify.com', '{"shop_id": 2}');
SELECT * FROM pg_temp.sh28('sh28', 'app/uninstalled', 'w28-11', 'b28.myshopify.com',
	'{"id": 2, "domain": "shop-b.example.com"}');
SELECT event_id, tenant, status, reason FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id
 WHERE s.name = 'sh28' AND i.event_id IN ('w28-10', 'w28-11') ORDER BY event_id;
SELECT tenant, status FROM webhook_inbox.tenants t JOIN webhook_inbox.sources s ON s.id = t.source_id
 WHERE s.name = 'sh28' ORDER BY tenant;
-- a topic whose body names no shop at all is routed by the header, as Shopify intends
SELECT * FROM pg_temp.sh28('sh28', 'products/update', 'w28-12', 'b28.myshopify.com',
	'{"id": 2812, "status": "active", "updated_at": "2026-01-01T00:00:00Z"}');

-- the header and the body agree: taken, and carried out for that shop only
SELECT * FROM pg_temp.sh28('sh28', 'app/uninstalled', 'w28-13', 'a28.myshopify.com',
	'{"id": 1, "domain": "shop-a.example.com", "myshopify_domain": "a28.myshopify.com"}');
SELECT tenant, status FROM webhook_inbox.tenants t JOIN webhook_inbox.sources s ON s.id = t.source_id
 WHERE s.name = 'sh28' ORDER BY tenant;

-- tenants in their providers' formats
SELECT * FROM pg_temp.sh28('sh28', 'orders/create', 'w28-14', 'a28.example.com', '{"id": 2814, "updated_at": "2026-01-01T00:00:00Z"}');
SELECT * FROM pg_temp.sh28('sh28', 'orders/create', 'w28-15', 'A28.myshopify.com', '{"id": 2815, "updated_at": "2026-01-01T00:00:00Z"}');
SELECT * FROM pg_temp.sh28('sh28', 'orders/create', 'w28-16', 'a28.myshopify.com.evil.example', '{"id": 2816, "updated_at": "2026-01-01T00:00:00Z"}');
-- (a source of one shop takes no tenant from the header, so does not judge it)
SELECT * FROM pg_temp.sh28('sh28one', 'orders/create', 'w28-17', 'a28.example.com', '{"id": 2817, "updated_at": "2026-01-01T00:00:00Z"}');
SELECT outcome, reason FROM webhook_inbox.intake_batch(ARRAY['st28', 'st28', 'st28', 'st28', 'st28'],
	ARRAY[]::text[], ARRAY[
		convert_to('{"id": "evt_28a", "type": "customer.updated", "account": "acct_28A", "created": 1, "data": {"object": {"id": "cus_1", "object": "customer"}}}', 'UTF8'),
		convert_to('{"id": "evt_28b", "type": "customer.updated", "account": "28A", "created": 1, "data": {"object": {"id": "cus_1", "object": "customer"}}}', 'UTF8'),
		convert_to('{"id": "evt_28c", "type": "customer.updated", "account": "acct_28 A", "created": 1, "data": {"object": {"id": "cus_1", "object": "customer"}}}', 'UTF8'),
		convert_to('{"id": "evt_28d", "type": "customer.updated", "context": "acct_28P/acct_28C", "created": 1, "data": {"object": {"id": "cus_1", "object": "customer"}}}', 'UTF8'),
		convert_to('{"id": "evt_28e", "type": "customer.updated", "context": "acct_28P//x", "created": 1, "data": {"object": {"id": "cus_1", "object": "customer"}}}', 'UTF8')]);
CREATE FUNCTION pg_temp.gh28(p_id text, p_body text)
RETURNS TABLE (outcome text, reason text) LANGUAGE sql AS $$
	SELECT outcome, reason FROM webhook_inbox.intake_batch(ARRAY['gh28'],
		ARRAY[ARRAY['X-GitHub-Event', 'ping', 'X-GitHub-Delivery', p_id]], ARRAY[convert_to(p_body, 'UTF8')])
$$;
SELECT * FROM pg_temp.gh28('gh28-1', '{"action": "opened", "issue": {"id": 1}, "installation": {"id": 1000}}');
SELECT * FROM pg_temp.gh28('gh28-2', '{"action": "opened", "issue": {"id": 2}, "installation": {"id": 1e3}}');
SELECT * FROM pg_temp.gh28('gh28-3', '{"action": "opened", "issue": {"id": 3}, "installation": {"id": 1000.0}}');
SELECT * FROM pg_temp.gh28('gh28-4', '{"action": "opened", "issue": {"id": 4}, "installation": {"id": -1000}}');
SELECT * FROM pg_temp.gh28('gh28-5', '{"action": "opened", "issue": {"id": 5}, "installation": {"id": 7, "account": {"id": 1e3}}, "sender": {"id": 2}}');
SELECT * FROM pg_temp.gh28('gh28-6', '{"action": "opened", "installation": {"id": 8, "id": 9e1}}');
SELECT i.event_id, i.tenant FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id
 WHERE s.name IN ('st28', 'gh28') ORDER BY i.event_id;

-- prune() never removes a digest inside its source's replay window: its
-- digest step (prune() itself would delete other files' deliveries here;
-- regress/t/314_tenant_signed.pl runs prune('1 second'))
SELECT * FROM pg_temp.sh28('sh28', 'orders/create', 'w28-20', 'a28.myshopify.com',
	'{"id": 2820, "email": "bob@example.com", "updated_at": "2026-01-02T00:00:00Z"}');
UPDATE webhook_inbox.seen_bodies b SET first_seen_at = now() - interval '2 seconds'
  FROM webhook_inbox.sources s WHERE s.id = b.source_id AND s.name = 'sh28';
SELECT webhook_inbox._prune_digests();
SELECT count(*) AS digests_kept FROM webhook_inbox.seen_bodies b JOIN webhook_inbox.sources s ON s.id = b.source_id
 WHERE s.name = 'sh28';
-- so the body replayed under a fresh id (and the same shop) is still a replay
SELECT * FROM pg_temp.sh28('sh28', 'orders/create', 'w28-21', 'a28.myshopify.com',
	'{"id": 2820, "email": "bob@example.com", "updated_at": "2026-01-02T00:00:00Z"}');
-- a digest past its window goes, with or without the retention's cutoff
UPDATE webhook_inbox.seen_bodies b SET first_seen_at = now() - interval '8 days', expires_at = now() - interval '1 day'
  FROM webhook_inbox.sources s WHERE s.id = b.source_id AND s.name = 'sh28' AND b.event_id = 'w28-20';
SELECT webhook_inbox._prune_digests();
SELECT b.event_id FROM webhook_inbox.seen_bodies b JOIN webhook_inbox.sources s ON s.id = b.source_id
 WHERE s.name = 'sh28' AND b.event_id = 'w28-20';

-- a cap on the tenants a source's deliveries register per hour: past it a new
-- tenant's deliveries are kept in quarantine, registering nothing
SELECT webhook_inbox.create_source('sh28cap', 'shopify', 'shpss_28cap', settings => '{"tenants": true, "tenants_per_hour": 2}') > 0 AS created;
SELECT * FROM pg_temp.sh28('sh28cap', 'orders/create', 'w28-30', 'c1.myshopify.com', '{"id": 2830, "updated_at": "2026-01-01T00:00:00Z"}');
SELECT outcome, reason FROM webhook_inbox.intake_batch(ARRAY['sh28cap', 'sh28cap', 'sh28cap', 'sh28cap'],
	ARRAY[ARRAY['X-Shopify-Topic', 'orders/create', 'X-Shopify-Webhook-Id', 'w28-31', 'X-Shopify-Shop-Domain', 'c2.myshopify.com'],
		  ARRAY['X-Shopify-Topic', 'orders/create', 'X-Shopify-Webhook-Id', 'w28-32', 'X-Shopify-Shop-Domain', 'c3.myshopify.com'],
		  ARRAY['X-Shopify-Topic', 'orders/create', 'X-Shopify-Webhook-Id', 'w28-33', 'X-Shopify-Shop-Domain', 'c3.myshopify.com'],
		  ARRAY['X-Shopify-Topic', 'orders/create', 'X-Shopify-Webhook-Id', 'w28-34', 'X-Shopify-Shop-Domain', 'c1.myshopify.com']],
	ARRAY[convert_to('{"id": 2831, "updated_at": "2026-01-01T00:00:00Z"}', 'UTF8'),
		  convert_to('{"id": 2832, "updated_at": "2026-01-01T00:00:00Z"}', 'UTF8'),
		  convert_to('{"id": 2833, "updated_at": "2026-01-01T00:00:00Z"}', 'UTF8'),
		  convert_to('{"id": 2834, "updated_at": "2026-01-01T00:00:00Z"}', 'UTF8')]);
-- a tenant registered by hand is not a delivery's, and is never capped
INSERT INTO webhook_inbox.tenants (source_id, tenant, discovered_by)
SELECT id, 'c4.myshopify.com', 'manual' FROM webhook_inbox.sources WHERE name = 'sh28cap';
SELECT * FROM pg_temp.sh28('sh28cap', 'orders/create', 'w28-35', 'c4.myshopify.com', '{"id": 2835, "updated_at": "2026-01-01T00:00:00Z"}');
SELECT tenant, discovered_by FROM webhook_inbox.tenants t JOIN webhook_inbox.sources s ON s.id = t.source_id
 WHERE s.name = 'sh28cap' ORDER BY tenant;
SELECT queue, reason, count FROM webhook_inbox.queues WHERE source = 'sh28cap';
-- an hour later the next tenant comes in
UPDATE webhook_inbox.tenants t SET first_seen = now() - interval '61 minutes' FROM webhook_inbox.sources s
 WHERE s.id = t.source_id AND s.name = 'sh28cap';
SELECT * FROM pg_temp.sh28('sh28cap', 'orders/create', 'w28-36', 'c3.myshopify.com', '{"id": 2836, "updated_at": "2026-01-01T00:00:00Z"}');
