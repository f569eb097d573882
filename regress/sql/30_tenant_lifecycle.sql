-- One tenant lifecycle: every kind of tenant (a Stripe Connect account read
-- with the platform's key, a Shopify app's shop, a GitHub App's
-- installation) has one status in tenant_status, combining its tenants row
-- and its credentials; a suspended installation and a refused shop token are
-- flagged_tenant rows of queues; disable_tenant()/enable_tenant() work for
-- each kind; remove_tenant_credentials() says what becomes of the passes;
-- remove_tenant() removes a tenant and leaves no failing pass behind;
-- sweep_now() refuses an unknown or a disabled tenant.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = notice;
-- tenants' secrets are sealed: a key file in the data directory, readable by the server's user only
COPY (SELECT md5('tenant lifecycle') || md5('tenant lifecycle, second half')) TO PROGRAM 'umask 077 && cat > wi_regress_tl.key';
BEGIN;
SET LOCAL webhook_inbox.key_file = 'wi_regress_tl.key';
SET LOCAL client_min_messages = warning;
SELECT webhook_inbox.create_source('tl_connect', 'stripe', 'whsec_tl', api_base => 'http://127.0.0.1:9',
	api_token => 'sk_test_tl') > 0 AS created;
SELECT webhook_inbox.create_source('tl_shop', 'shopify', 'shpss_tl', api_base => 'http://127.0.0.1:9',
	settings => '{"tenants": true, "shopify_client_id": "tl-client"}') > 0 AS created;
SELECT webhook_inbox.create_source('tl_gh', 'github', 'gh-tl', api_base => 'http://127.0.0.1:9') > 0 AS created;
UPDATE webhook_inbox.sources SET settings = settings || '{"github_app_id": "4242"}' WHERE name = 'tl_gh';
SELECT webhook_inbox.intake('tl_connect', '{}', convert_to(
	'{"id":"evt_tl1","object":"event","account":"acct_TL1","type":"customer.subscription.updated","created":1767225600,"data":{"object":{"id":"sub_tl","status":"active"}}}', 'UTF8'));
SELECT webhook_inbox.intake('tl_gh', ARRAY['x-github-delivery', 'd-tl', 'x-github-event', 'issues'],
	convert_to('{"action":"opened","issue":{"id":9,"number":1,"state":"open","updated_at":"2026-01-01T00:00:00Z"},"installation":{"id":777}}', 'UTF8'));
SELECT webhook_inbox.set_tenant_credentials('tl_shop', 'tl.myshopify.com', 'shopify_shop', 'shpat_tl',
	now() + interval '1 hour', 'shprt_tl');
SET LOCAL client_min_messages = notice;
CREATE FUNCTION tl_try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	m text; d text; h text;
BEGIN
	EXECUTE q;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
	RETURN SQLSTATE || ': ' || m || coalesce(' DETAIL: ' || nullif(d, ''), '') || coalesce(' HINT: ' || nullif(h, ''), '');
END $$;
CREATE VIEW tl AS SELECT source, tenant, status, owner, reads, credentials, credentials_status
  FROM webhook_inbox.tenant_status WHERE source LIKE 'tl_%';

-- three kinds of tenant, each active
SELECT * FROM tl ORDER BY 1, 2;

-- a suspended installation (GitHub's token endpoint answers 403) and a shop whose token refresh is
-- refused: each flagged in tenant_status and a flagged_tenant row for engineering
SELECT action FROM webhook_inbox._tenant_token_answer((SELECT id FROM webhook_inbox.sources WHERE name = 'tl_gh'), '777',
	403, '{"message":"This installation has been suspended"}');
SELECT action FROM webhook_inbox._shop_refresh_answer((SELECT id FROM webhook_inbox.sources WHERE name = 'tl_shop'),
	'tl.myshopify.com', 401, '{"error":"invalid_grant"}');
SELECT source, tenant, status, owner, reads, credentials_status FROM tl WHERE status <> 'active' ORDER BY 1, 2;
SELECT queue, source, reason, owner, count, tenant FROM webhook_inbox.queues
 WHERE queue = 'flagged_tenant' AND source LIKE 'tl_%' ORDER BY 2;
-- the tenants rows say the same: one status
SELECT s.name, t.tenant, t.status FROM webhook_inbox.tenants t JOIN webhook_inbox.sources s ON s.id = t.source_id
 WHERE s.name LIKE 'tl_%' ORDER BY 1, 2;
-- enabled again: active on both sides, the queue rows gone
SELECT webhook_inbox.enable_tenant('tl_gh', '777');
SELECT webhook_inbox.set_tenant_credentials('tl_shop', 'tl.myshopify.com', 'shopify_shop', 'shpat_tl2');
SELECT source, tenant, status, credentials_status FROM tl ORDER BY 1, 2;
SELECT count(*) AS flagged_rows FROM webhook_inbox.queues WHERE queue = 'flagged_tenant' AND source LIKE 'tl_%';

-- a Connect account (no credentials of its own: read with the platform's key) disabled and enabled by hand
SELECT webhook_inbox.disable_tenant('tl_connect', 'acct_TL1', 'account closed by the platform');
SELECT source, tenant, status, owner, reads FROM tl WHERE tenant = 'acct_TL1';
-- sweep_now() refuses a disabled tenant, and a tenant the source does not have
SELECT tl_try($$SELECT * FROM webhook_inbox.sweep_now('tl_connect', 'subscription', 'full', 'acct_TL1')$$) AS disabled;
SELECT tl_try($$SELECT * FROM webhook_inbox.sweep_now('tl_connect', 'subscription', 'full', 'acct_TYPO')$$) AS unknown;
SELECT tl_try($$SELECT * FROM webhook_inbox.sweep_now('tl_nosuch', 'subscription', 'full', 'acct_TL1')$$) AS unknown_source;
SELECT count(*) AS runs_left FROM webhook_inbox.sweep_runs r JOIN webhook_inbox.sources s ON s.id = r.source_id
 WHERE s.name LIKE 'tl_%';
SELECT webhook_inbox.enable_tenant('tl_connect', 'acct_TL1');
SELECT source, tenant, status FROM tl WHERE tenant = 'acct_TL1';
-- unknown tenants: disable, enable and remove say so, and where to look
SELECT tl_try($$SELECT webhook_inbox.disable_tenant('tl_connect', 'acct_TYPO', 'x')$$) AS disable_unknown;
SELECT tl_try($$SELECT webhook_inbox.enable_tenant('tl_connect', 'acct_TYPO')$$) AS enable_unknown;
SELECT tl_try($$SELECT webhook_inbox.remove_tenant('tl_connect', 'acct_TYPO')$$) AS remove_unknown;
SELECT tl_try($$SELECT webhook_inbox.remove_tenant('tl_connect', '')$$) AS remove_own_account;

-- removing a shop's credentials says what becomes of its passes: the shop is disabled until new ones
SELECT webhook_inbox.remove_tenant_credentials('tl_shop', 'tl.myshopify.com');
SELECT source, tenant, status, reads, credentials FROM tl WHERE tenant = 'tl.myshopify.com';
SELECT webhook_inbox.set_tenant_credentials('tl_shop', 'tl.myshopify.com', 'shopify_shop', 'shpat_tl3');
SELECT source, tenant, status, credentials FROM tl WHERE tenant = 'tl.myshopify.com';
-- an installation's token removed: minted again at its next read, the installation stays active
INSERT INTO webhook_inbox.tenant_credentials (source_id, tenant, kind)
SELECT id, '778', 'github_app_installation' FROM webhook_inbox.sources WHERE name = 'tl_gh';
SELECT webhook_inbox.remove_tenant_credentials('tl_gh', '778');

-- remove_tenant(): a tenant with failed passes is gone for good, and no failed_sweep row is left
INSERT INTO webhook_inbox.sweep_runs (source_id, object_type, trigger, status, error, tenant, finished_at)
SELECT id, 'subscription', 'schedule', 'failed', 'http 500', 'acct_TL1', now() FROM webhook_inbox.sources WHERE name = 'tl_connect';
INSERT INTO webhook_inbox.sweep_checkpoints (source_id, object_type, checkpoint, layer, tenant)
SELECT id, 'subscription', now(), 'full', 'acct_TL1' FROM webhook_inbox.sources WHERE name = 'tl_connect';
SELECT queue, source, reason, tenant FROM webhook_inbox.queues WHERE source = 'tl_connect';
SELECT webhook_inbox.remove_tenant('tl_connect', 'acct_TL1');
SELECT count(*) AS tenant_rows FROM tl WHERE tenant = 'acct_TL1';
SELECT count(*) AS queue_rows FROM webhook_inbox.queues WHERE source = 'tl_connect';
SELECT count(*) AS checkpoints FROM webhook_inbox.sweep_checkpoints c JOIN webhook_inbox.sources s ON s.id = c.source_id
 WHERE s.name = 'tl_connect' AND c.tenant = 'acct_TL1';
-- a disabled tenant's failed passes wait on nobody either: the tenant_status row says why it is not read
SELECT webhook_inbox.disable_tenant('tl_gh', '777', 'installation.deleted');
INSERT INTO webhook_inbox.sweep_runs (source_id, object_type, trigger, status, error, tenant, finished_at)
SELECT id, 'issue', 'schedule', 'failed', 'tenant_credentials: installation 777 is disabled', '777', now()
  FROM webhook_inbox.sources WHERE name = 'tl_gh';
SELECT count(*) AS queue_rows FROM webhook_inbox.queues WHERE source = 'tl_gh';
SELECT source, tenant, status, reads FROM tl WHERE tenant = '777';
-- a source's settings: an unknown key (a typo) or an unknown Shopify API is refused with the known ones
SELECT tl_try($$SELECT webhook_inbox.create_source('tl_typo', 'shopify', 'shpss_x', settings => '{"tenant": true}')$$) AS unknown_key;
SELECT tl_try($$SELECT webhook_inbox.create_source('tl_typo', 'shopify', 'shpss_x', settings => '{"api": "graphgl"}')$$) AS unknown_api;
SELECT count(*) AS sources FROM webhook_inbox.sources WHERE name = 'tl_typo';
SELECT webhook_inbox.create_source('tl_ok', 'shopify', 'shpss_x', settings => '{"api": "rest", "tenants": true}') > 0 AS known_keys;
SELECT count(*) AS known_settings FROM webhook_inbox._source_settings();
-- diagnostics: requeue_where(reclassify => true) reports each event that still fails, and why, even
-- in a dry run; a real run requeues the rest and leaves those as they are
INSERT INTO webhook_inbox.routes (source_id, event_type, class, strategy, object_type, object_id_path, version_path)
SELECT id, 'thing.updated', 'state', 'version', 'thing', 'strict $.data.object.missing', '$.created'
  FROM webhook_inbox.sources WHERE name = 'tl_connect';
SELECT webhook_inbox.intake('tl_connect', '{}', convert_to(
	'{"id":"evt_tl_u' || i || '","object":"event","type":"thing.updated","created":1767225600,"data":{"object":{"id":"th_' || i || '"}}}', 'UTF8'))
  FROM generate_series(1, 2) i;
SELECT regexp_replace(reason, '[0-9]+', 'N', 'g') AS reason FROM webhook_inbox.inbox WHERE event_id = 'evt_tl_u1';
-- today's route reads one of them: the other still fails
UPDATE webhook_inbox.routes SET object_id_path = 'strict $.data.object.id'
 WHERE event_type = 'thing.updated' AND source_id = (SELECT id FROM webhook_inbox.sources WHERE name = 'tl_connect');
UPDATE webhook_inbox.inbox SET payload = jsonb_set(payload, '{data,object}', '{}') WHERE event_id = 'evt_tl_u2';
SELECT type, action, regexp_replace(still_fails, '[0-9]+', 'N', 'g') AS still_fails
  FROM webhook_inbox.requeue_where(source => 'tl_connect', reason => 'unclassifiable', reclassify => true) ORDER BY event_id;
SELECT action, still_fails IS NOT NULL AS reported
  FROM webhook_inbox.requeue_where(source => 'tl_connect', reason => 'unclassifiable', reclassify => true,
								   dry_run => false) ORDER BY event_id;
SELECT event_id, status FROM webhook_inbox.inbox WHERE event_id LIKE 'evt_tl_u%' ORDER BY 1;
SELECT events, skipped FROM webhook_inbox.requeue_batches ORDER BY id DESC LIMIT 1;

-- diagnostics: secrets sealed under the key file, read under another key or none: secrets_warning
-- says so and names the setting; the error's hint names the rotation's function
SELECT webhook_inbox.create_source('tl_sealed', 'stripe', 'whsec_sealed', api_base => 'http://127.0.0.1:9',
	api_token => 'sk_test_sealed') > 0 AS created;
COPY (SELECT md5('another key') || md5('another key, second half')) TO PROGRAM 'umask 077 && cat > wi_regress_tl_other.key';
SET LOCAL webhook_inbox.key_file = 'wi_regress_tl_missing.key';
SELECT regexp_replace(secrets_warning, '[0-9]+ of [0-9]+', 'N of M') AS missing_file FROM webhook_inbox.inbox_health;
SET LOCAL webhook_inbox.key_file = 'wi_regress_tl_other.key';
SELECT regexp_replace(regexp_replace(secrets_warning, '[0-9]+ of [0-9]+', 'N of M'), 'key id [0-9a-f]{16}', 'key id K', 'g')
	AS other_key FROM webhook_inbox.inbox_health;
SELECT regexp_replace(regexp_replace(tl_try($$SELECT webhook_inbox._unseal_text(api_token, webhook_inbox._source_context(id, 'api_token'))
	FROM webhook_inbox.sources WHERE name = 'tl_sealed'$$), '[0-9a-f]{16}', 'K', 'g'), 'sources\([0-9]+\)', 'sources(N)') AS wrong_key;
SET LOCAL webhook_inbox.key_file = 'wi_regress_tl.key';
-- the docs' Shopify compliance calls, by their documented parameter names: on an app source,
-- shop/redact erases its own shop only; a data request is its shop's queue row
SELECT webhook_inbox.create_source('tl_app', 'shopify', 'shpss_app', settings => '{"tenants": true}') > 0 AS created;
SELECT webhook_inbox.intake('tl_app', ARRAY['x-shopify-webhook-id', 'w-app-' || shop, 'x-shopify-topic', 'orders/updated',
	'x-shopify-shop-domain', shop || '.myshopify.com'],
	convert_to(format('{"id": %s, "email": "buyer@%s.example", "updated_at": "2026-01-01T00:00:00Z"}', n, shop), 'UTF8'))
  FROM (VALUES ('one', 1), ('two', 2)) v(shop, n);
SELECT webhook_inbox.intake('tl_app', ARRAY['x-shopify-webhook-id', 'w-app-redact', 'x-shopify-topic', 'shop/redact',
	'x-shopify-shop-domain', 'one.myshopify.com'],
	convert_to('{"shop_id": 1, "shop_domain": "one.myshopify.com"}', 'UTF8'));
SELECT webhook_inbox.shopify_redact_shop(event => (SELECT id FROM webhook_inbox.inbox WHERE event_id = 'w-app-redact')) > 0 AS redacted;
SELECT tenant, payload FROM webhook_inbox.inbox WHERE event_id IN ('w-app-one', 'w-app-two') ORDER BY 1;
SELECT webhook_inbox.intake('tl_app', ARRAY['x-shopify-webhook-id', 'w-app-dr', 'x-shopify-topic', 'customers/data_request',
	'x-shopify-shop-domain', 'two.myshopify.com'],
	convert_to('{"shop_id": 2, "shop_domain": "two.myshopify.com", "customer": {"id": 9, "email": "buyer@two.example"},
		"orders_requested": [2], "data_request": {"id": 5}}', 'UTF8'));
SELECT webhook_inbox.shopify_data_request(event => (SELECT id FROM webhook_inbox.inbox WHERE event_id = 'w-app-dr')) > 0 AS listed;
SELECT queue, source, owner, count, tenant FROM webhook_inbox.queues WHERE queue = 'data_request' AND source = 'tl_app';
SELECT webhook_inbox.resolve_data_request(id => d.id, note => 'sent to the merchant')
  FROM webhook_inbox.data_requests d JOIN webhook_inbox.sources s ON s.id = d.source_id WHERE s.name = 'tl_app';
SELECT count(*) AS data_request_rows FROM webhook_inbox.queues WHERE queue = 'data_request' AND source = 'tl_app';
ROLLBACK;
