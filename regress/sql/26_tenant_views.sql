-- Operators see tenants: inbox_health_by_tenant (inbox_health's figures per
-- source and tenant, beside inbox_health's unchanged totals), the typed views
-- and effects_unresolved ending with the tenant, sweep_health per tenant,
-- and what the reader role may read of them.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;
BEGIN;
SELECT webhook_inbox.create_source('tv_stripe', 'stripe', 'whsec_tv', api_base => 'http://127.0.0.1:9') > 0 AS created;
SELECT webhook_inbox.create_source('tv_app', 'shopify', 'shpss_tv', settings => '{"tenants": true}') > 0 AS created;
SELECT webhook_inbox.create_source('tv_gh', 'github', 'gh-tv') > 0 AS created;
CREATE FUNCTION tv_evt(id text, obj text, extra text) RETURNS bytea LANGUAGE sql AS $$
	SELECT convert_to(format(
		'{"id":"%s","object":"event",%s"type":"customer.subscription.updated","created":1767225600,"data":{"object":{"id":"%s","status":"active"}}}',
		id, extra, obj), 'UTF8')
$$;
-- the platform's own event, two for acct_A, one for acct_B, and one that is not JSON (quarantined, the
-- platform's); a shop's order; an installation's issue
SELECT webhook_inbox.intake('tv_stripe', '{}', tv_evt('evt_tv_p', 'sub_1', ''));
SELECT webhook_inbox.intake('tv_stripe', '{}', tv_evt('evt_tv_a1', 'sub_1', '"account":"acct_A",'));
SELECT webhook_inbox.intake('tv_stripe', '{}', tv_evt('evt_tv_a2', 'sub_2', '"account":"acct_A",'));
SELECT webhook_inbox.intake('tv_stripe', '{}', tv_evt('evt_tv_b', 'sub_1', '"account":"acct_B",'));
SELECT webhook_inbox.intake('tv_stripe', '{}', convert_to('{"id":"evt_tv_bad","account":"acct_B",', 'UTF8'));
SELECT webhook_inbox.intake('tv_app', ARRAY['x-shopify-webhook-id', 'w-tv', 'x-shopify-topic', 'orders/updated',
		'x-shopify-shop-domain', 'one.myshopify.com'],
	convert_to('{"id":11,"name":"#1011","financial_status":"paid","total_price":"9.50","currency":"EUR","updated_at":"2026-01-01T00:00:00Z"}', 'UTF8'));
SELECT webhook_inbox.intake('tv_gh', ARRAY['x-github-delivery', 'd-tv', 'x-github-event', 'issues'],
	convert_to('{"action":"opened","issue":{"id":71,"number":3,"title":"Broken","state":"open","updated_at":"2026-01-01T00:00:00Z"},"repository":{"full_name":"o/r"},"installation":{"id":654321}}', 'UTF8'));
UPDATE webhook_inbox.inbox SET status = 'retry', next_attempt_at = now() + interval '1 hour'
 WHERE event_id = 'evt_tv_a2';
UPDATE webhook_inbox.inbox SET received_at = now() - interval '1 hour' WHERE event_id = 'evt_tv_a1';
-- per (source, tenant): one row per tenant with an event not done; the platform's own account is the empty
-- tenant, and its quarantined event (whose body named no account it could be read from) counts there only;
-- acct_A's oldest pending event waited an hour, the others arrived in this transaction
SELECT source, tenant, pending, oldest_pending_age, processing, retrying, quarantined, quarantined_by_reason
  FROM webhook_inbox.inbox_health_by_tenant WHERE source LIKE 'tv_%' ORDER BY 1, 2;
-- inbox_health keeps its columns, in their order, and its totals are the sums of the breakdown
SELECT string_agg(attname, ', ' ORDER BY attnum) FROM pg_attribute
 WHERE attrelid = 'webhook_inbox.inbox_health'::regclass AND attnum > 0;
SELECT h.pending = t.pending AND h.retrying = t.retrying AND h.quarantined = t.quarantined AS totals_agree
  FROM webhook_inbox.inbox_health h,
	   (SELECT sum(pending) AS pending, sum(retrying) AS retrying, sum(quarantined) AS quarantined
		  FROM webhook_inbox.inbox_health_by_tenant) t;
-- the typed views end with the tenant (appended: CREATE OR REPLACE VIEW keeps working)
SELECT c.relname, (SELECT a.attname FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0
					ORDER BY a.attnum DESC LIMIT 1) AS last_column
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'webhook_inbox' AND c.relkind = 'v'
   AND (c.relname ~ '^(stripe|shopify|github)_' OR c.relname IN ('effects_unresolved', 'sweep_health', 'queues', 'mirror', 'inbox_events'))
 ORDER BY 1;
-- each typed row names its tenant: the shop's domain, the installation's id, the connected account
INSERT INTO webhook_inbox.objects (source_id, tenant, object_type, object_id, status, version, state)
SELECT s.id, v.tenant, v.type, v.id, v.status, 1, v.state::jsonb
  FROM (VALUES ('tv_app', 'one.myshopify.com', 'order', '11', 'paid',
				'{"id":11,"name":"#1011","total_price":"9.50","currency":"EUR"}'),
			   ('tv_gh', '654321', 'issue', '71', 'open',
				'{"id":71,"number":3,"title":"Broken","repository_url":"https://api.github.com/repos/o/r"}'),
			   ('tv_gh', '654321', 'pull_request', '81', 'closed',
				'{"action":"closed","pull_request":{"id":81,"number":4,"title":"Fix","state":"closed","merged_at":"2026-01-02T00:00:00Z","draft":false,"user":{"login":"ann"},"head":{"ref":"fix"},"base":{"ref":"main","repo":{"full_name":"o/r"}}}}'),
			   ('tv_gh', '654321', 'pull_request', '82', 'open',
				'{"id":82,"number":5,"title":"Try","state":"open","merged_at":null,"draft":true,"user":{"login":"bob"},"head":{"ref":"try"},"base":{"ref":"main","repo":{"full_name":"o/r"}}}'),
			   ('tv_stripe', 'acct_A', 'subscription', 'sub_1', 'active', '{"id":"sub_1","customer":"cus_1"}'),
			   ('tv_stripe', 'acct_B', 'subscription', 'sub_1', 'past_due', '{"id":"sub_1","customer":"cus_9"}')) v
		   (source, tenant, type, id, status, state)
  JOIN webhook_inbox.sources s ON s.name = v.source;
SELECT source, id, name, financial_status, total_price, tenant FROM webhook_inbox.shopify_orders WHERE source = 'tv_app';
SELECT source, id, number, title, state, repository, tenant FROM webhook_inbox.github_issues WHERE source = 'tv_gh';
-- a pull request saved from a webhook (its pull_request member) and one fetched from the list API: merged
-- from merged_at where the answer has no merged
SELECT source, id, number, title, state, merged, draft, author, repository, head_ref, base_ref, tenant
  FROM webhook_inbox.github_pull_requests WHERE source = 'tv_gh' ORDER BY id;
SELECT source, id, status, customer, tenant FROM webhook_inbox.stripe_subscriptions WHERE source = 'tv_stripe' ORDER BY tenant;
-- an unresolved effect says which tenant it was made for
INSERT INTO webhook_inbox.effects (effect_key, kind, source_id, tenant, object_type, object_id, status, reason,
	idempotency_key, owner, uncertain_since)
SELECT 'tv-refund-1', 'refund', s.id, 'acct_B', 'subscription', 'sub_1', 'uncertain', 'timeout', 'tv-idem-1',
	   'finance', now()
  FROM webhook_inbox.sources s WHERE s.name = 'tv_stripe';
SELECT effect_key, source, status, owner, tenant FROM webhook_inbox.effects_unresolved WHERE source = 'tv_stripe';
-- sweep_health per (source, object type, tenant): acct_A's failed pass is its own row, acct_B's is clean
INSERT INTO webhook_inbox.sweep_runs (source_id, tenant, object_type, layer, trigger, status, started_at,
	finished_at, listed, repaired, error)
SELECT s.id, v.tenant, 'subscription', 'full', 'manual', v.status, now() - interval '1 minute', now(), v.listed, 0, v.error
  FROM (VALUES ('acct_A', 'failed', 0, 'the list API answered 500'), ('acct_B', 'complete', 3, NULL)) v (tenant, status, listed, error)
  JOIN webhook_inbox.sources s ON s.name = 'tv_stripe';
SELECT source, object_type, tenant, last_status, last_listed, failed_last_day, last_error
  FROM webhook_inbox.sweep_health WHERE source = 'tv_stripe' ORDER BY tenant;
SELECT queue, source, reason, owner, count, tenant FROM webhook_inbox.queues
 WHERE source = 'tv_stripe' ORDER BY queue, tenant;
-- the reader role reads the breakdown, and no payload through it
SET LOCAL ROLE webhook_inbox_reader;
SELECT count(*) > 0 AS reader_sees_tenants FROM webhook_inbox.inbox_health_by_tenant WHERE source LIKE 'tv_%';
SELECT count(*) FROM webhook_inbox.inbox;
ROLLBACK;
