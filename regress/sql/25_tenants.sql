-- Tenants: one source (one endpoint, one signing secret) serving many
-- provider accounts.  Intake reads each delivery's tenant from the
-- provider's contract (Stripe account and context, GitHub installation.id,
-- Shopify X-Shopify-Shop-Domain for an app source) and refuses a tenant that
-- is not what the provider sends, alone in its batch; the same object id
-- under two tenants is two objects; registering tenants; a 404 under another
-- tenant's credentials is never a deletion.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;
BEGIN;
SET LOCAL webhook_inbox.tombstone_confirm_delay = '0';
SELECT webhook_inbox.create_source('tn_stripe', 'stripe', 'whsec_tn', api_base => 'http://127.0.0.1:9') > 0 AS created;
SELECT webhook_inbox.create_source('tn_gh', 'github', 'gh-tn') > 0 AS created;
SELECT webhook_inbox.create_source('tn_shop', 'shopify', 'shpss_tn') > 0 AS created;
SELECT webhook_inbox.create_source('tn_app', 'shopify', 'shpss_tn', settings => '{"tenants": true}') > 0 AS created;
UPDATE webhook_inbox.inbox SET next_attempt_at = now() + interval '1 day'
 WHERE status IN ('pending', 'retry') AND source_id NOT IN (SELECT id FROM webhook_inbox.sources WHERE name LIKE 'tn_%');
CREATE FUNCTION tn_evt(id text, obj text, extra text) RETURNS bytea LANGUAGE sql AS $$
	SELECT convert_to(format(
		'{"id":"%s","object":"event",%s"type":"customer.subscription.updated","created":1767225600,"data":{"object":{"id":"%s","status":"active"}}}',
		id, extra, obj), 'UTF8')
$$;

-- one batch: the platform's own event, two accounts' events for the same subscription id, a context,
-- then tenants that are not what Stripe sends: a number, an object, an empty string, 256 bytes, a
-- control character; a GitHub App delivery and one whose installation id is a string; a shop
SELECT b.ord, b.outcome, b.reason FROM webhook_inbox.intake_batch(
	ARRAY['tn_stripe', 'tn_stripe', 'tn_stripe', 'tn_stripe', 'tn_stripe', 'tn_stripe', 'tn_stripe',
		  'tn_stripe', 'tn_stripe', 'tn_gh', 'tn_gh', 'tn_shop', 'tn_app'],
	ARRAY[[NULL, NULL, NULL, NULL], [NULL, NULL, NULL, NULL], [NULL, NULL, NULL, NULL],
		  [NULL, NULL, NULL, NULL], [NULL, NULL, NULL, NULL], [NULL, NULL, NULL, NULL],
		  [NULL, NULL, NULL, NULL], [NULL, NULL, NULL, NULL], [NULL, NULL, NULL, NULL],
		  ['x-github-delivery', 'd-1', 'x-github-event', 'issues'],
		  ['x-github-delivery', 'd-2', 'x-github-event', 'issues'],
		  ['x-shopify-webhook-id', 'w-1', 'x-shopify-shop-domain', 'one.myshopify.com'],
		  ['x-shopify-webhook-id', 'w-2', 'x-shopify-shop-domain', 'two.myshopify.com']],
	ARRAY[tn_evt('evt_p', 'sub_1', ''),
		  tn_evt('evt_a', 'sub_1', '"account":"acct_A",'),
		  tn_evt('evt_b', 'sub_1', '"account":"acct_B",'),
		  tn_evt('evt_c', 'sub_2', '"account":"acct_C","context":"acct_P/acct_C",'),
		  tn_evt('evt_x1', 'sub_x', '"account":42,'),
		  tn_evt('evt_x2', 'sub_x', '"account":{"id":"acct_A"},'),
		  tn_evt('evt_x3', 'sub_x', '"account":"",'),
		  tn_evt('evt_x4', 'sub_x', format('"account":"%s",', repeat('a', 256))),
		  tn_evt('evt_x5', 'sub_x', '"account":"acct\u0001",'),
		  convert_to('{"action":"opened","issue":{"id":7,"number":1,"state":"open","updated_at":"2026-01-01T00:00:00Z"},"installation":{"id":123456}}', 'UTF8'),
		  convert_to('{"action":"opened","issue":{"id":8,"number":2,"state":"open","updated_at":"2026-01-01T00:00:00Z"},"installation":{"id":"123456"}}', 'UTF8'),
		  convert_to('{"id":1,"name":"#1001","updated_at":"2026-01-01T00:00:00Z"}', 'UTF8'),
		  convert_to('{"id":2,"name":"#1002","updated_at":"2026-01-01T00:00:00Z"}', 'UTF8')]) b
 ORDER BY b.ord;
-- what the inbox and the audit kept, with their tenants (the refused deliveries left no row)
SELECT s.name, i.event_id, i.tenant, i.tenant_context, i.object_id
  FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id
 WHERE s.name LIKE 'tn_%' ORDER BY 1, 2;
SELECT s.name, d.event_id, d.tenant, d.outcome
  FROM webhook_inbox.deliveries d JOIN webhook_inbox.sources s ON s.id = d.source_id
 WHERE s.name LIKE 'tn_%' ORDER BY 1, 2;
-- the tenants discovered; a one-shop source keeps the empty tenant
SELECT s.name, t.tenant, t.context, t.status, t.discovered_by
  FROM webhook_inbox.tenants t JOIN webhook_inbox.sources s ON s.id = t.source_id
 WHERE s.name LIKE 'tn_%' ORDER BY 1, 2;
-- a redelivery of an event is a duplicate whatever tenant it names: event ids are global to Stripe
SELECT webhook_inbox.intake('tn_stripe', '{}', tn_evt('evt_a', 'sub_1', '"account":"acct_B",'));
-- sub_1 of the platform and of two accounts: three claims, three objects
CREATE TEMP TABLE tn_c AS
	SELECT object_id, tenant, claim_token FROM webhook_inbox.claim('tn', 20, '30 seconds', '0')
	 WHERE source = 'tn_stripe';
SELECT object_id, tenant FROM tn_c ORDER BY 1, 2;
-- the answers: acct_A's read carried acct_A (present); the platform's 404 came under its own
-- credentials; acct_B's 404 came back for a request that did not carry acct_B (a mis-set read):
-- no evidence, retried, never a tombstone; acct_C's 404 under acct_C's own credentials is one
SELECT c.tenant, b.outcome
  FROM webhook_inbox._save_fetched_batch(
		(SELECT array_agg(claim_token ORDER BY tenant) FROM tn_c),
		(SELECT array_agg(CASE tenant WHEN 'acct_A' THEN 200 ELSE 404 END ORDER BY tenant) FROM tn_c),
		(SELECT array_agg(CASE tenant WHEN 'acct_A' THEN '{"id":"sub_1","status":"past_due"}'
				ELSE '{"error":{"code":"resource_missing"}}' END ORDER BY tenant) FROM tn_c),
		array_fill('$'::jsonpath, ARRAY[4]), array_fill('$.status'::jsonpath, ARRAY[4]),
		array_fill(NULL::jsonpath, ARRAY[4]), array_fill(now(), ARRAY[4]),
		(SELECT array_agg(CASE tenant WHEN 'acct_B' THEN '' ELSE tenant END ORDER BY tenant) FROM tn_c)) b
  JOIN tn_c c ON c.claim_token = b.token
 ORDER BY 1;
SELECT o.tenant, o.object_id, o.status, o.deleted
  FROM webhook_inbox.objects o JOIN webhook_inbox.sources s ON s.id = o.source_id
 WHERE s.name = 'tn_stripe' ORDER BY 1, 2;
SELECT i.tenant, i.status, i.reason
  FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id
 WHERE s.name = 'tn_stripe' AND i.event_id = 'evt_b';
-- the credentials a stripe source's reads pin: its Stripe-Version, by default stripe-node 23's
SELECT name, stripe_version FROM webhook_inbox._worker_source((SELECT id FROM webhook_inbox.sources WHERE name = 'tn_stripe'));
-- the sweep's passes: each active tenant under its own credentials; not the platform's own
-- account, whose one object is a tombstone
SELECT t.object_type, t.layer, t.tenant FROM webhook_inbox._sweep_targets('1 minute', '1 hour') t
 WHERE t.source_id = (SELECT id FROM webhook_inbox.sources WHERE name = 'tn_stripe') ORDER BY 3;
-- a tenant whose credentials are refused (403 for acct_D's read) is flagged, not its source, and is a
-- queue row with an owner; its quarantined event is its own row; the sweep leaves it alone
SELECT webhook_inbox.intake('tn_stripe', '{}', tn_evt('evt_d', 'sub_4', '"account":"acct_D",'));
SELECT webhook_inbox._give_back(c.claim_token, 'auth', NULL, 0, 403)
  FROM webhook_inbox.claim('tn', 20, '30 seconds', '0') c WHERE c.source = 'tn_stripe' AND c.tenant = 'acct_D';
SELECT t.tenant, t.status, t.reason ~ '^the read API answered 403 at .* for this tenant: check its credentials$' AS reason_ok,
	   s.flagged IS NULL AS source_not_flagged
  FROM webhook_inbox.tenants t JOIN webhook_inbox.sources s ON s.id = t.source_id
 WHERE s.name = 'tn_stripe' AND t.tenant = 'acct_D';
SELECT queue, source, reason, owner, count, tenant FROM webhook_inbox.queues
 WHERE source = 'tn_stripe' ORDER BY queue, tenant;
SELECT t.tenant FROM webhook_inbox._sweep_targets('1 minute', '1 hour') t
 WHERE t.source_id = (SELECT id FROM webhook_inbox.sources WHERE name = 'tn_stripe') ORDER BY 1;
SELECT source, object_id, status, deleted, tenant FROM webhook_inbox.mirror WHERE source = 'tn_stripe' ORDER BY tenant, object_id;
-- an event listed under a tenant's credentials is that tenant's, also when its body names no account
SELECT e.events_listed, e.events_fed
  FROM webhook_inbox._sweep_begin((SELECT id FROM webhook_inbox.sources WHERE name = 'tn_stripe'), 'subscription',
		'manual', '1 minute', 'incremental', '30 days', 'acct_E') b,
	   webhook_inbox._sweep_events(b.run_id, '{"object":"list","has_more":false,"data":['
			|| convert_from(tn_evt('evt_e', 'sub_5', ''), 'UTF8') || ']}') e;
SELECT i.event_id, i.tenant, d.tenant AS audit_tenant, r.tenant AS repair_tenant
  FROM webhook_inbox.inbox i
  JOIN webhook_inbox.deliveries d ON d.source_id = i.source_id AND d.event_id = i.event_id
  JOIN webhook_inbox.repairs r ON r.source_id = i.source_id AND r.after ->> 'event' = i.event_id
 WHERE i.event_id = 'evt_e';
-- a Connect account's own lifecycle: deauthorized disables the tenant (the sweep leaves it), authorized again
-- makes it active
CREATE FUNCTION tn_app_evt(id text, acct text, type text) RETURNS bytea LANGUAGE sql AS $$
	SELECT convert_to(format('{"id":"%s","object":"event","account":"%s","type":"%s","created":1767225600,'
		'"data":{"object":{"id":"ca_1","object":"application","name":"Platform"}}}', id, acct, type), 'UTF8')
$$;
SELECT webhook_inbox.intake('tn_stripe', '{}', tn_app_evt('evt_deauth_a', 'acct_A', 'account.application.deauthorized'));
SELECT t.tenant, t.status, split_part(t.reason, ' received', 1) AS reason
  FROM webhook_inbox.tenants t WHERE t.tenant = 'acct_A';
SELECT t.tenant FROM webhook_inbox._sweep_targets('1 minute', '1 hour') t
 WHERE t.source_id = (SELECT id FROM webhook_inbox.sources WHERE name = 'tn_stripe') ORDER BY 1;
SELECT webhook_inbox.intake('tn_stripe', '{}', tn_app_evt('evt_auth_a', 'acct_A', 'account.application.authorized'));
SELECT t.tenant, t.status, split_part(t.reason, ' received', 1) AS reason
  FROM webhook_inbox.tenants t WHERE t.tenant = 'acct_A';
ROLLBACK;
