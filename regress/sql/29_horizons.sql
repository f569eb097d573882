-- Hidden is not deleted: the horizons every adapter declares, what makes an
-- object hidden (_hidden_why(): a Shopify order older than 60 days without
-- read_all_orders, a tenant whose access ended), the access scopes a
-- source learns, a tombstone's evidence and when a newer version revives
-- it (_tombstone_holds()), and the views that show them.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;

-- the horizons, one row per adapter declaration
SELECT kind, object_type, horizon, days, created_path, lifted_by FROM webhook_inbox.horizons ORDER BY 1, 2, 3;
SELECT count(*) FILTER (WHERE description !~ '\.$') AS without_a_sentence FROM webhook_inbox.horizons;

-- a Shopify source without known scopes: an old order is hidden, a recent one is not, nor an old product
SELECT webhook_inbox.create_source('hz_shop', 'shopify', 'hz-secret', api_base => 'http://127.0.0.1:1') IS NOT NULL AS created;
SELECT webhook_inbox._hidden_why(s.id, '', 'order',
		jsonb_build_object('created_at', to_char(now() - interval '90 days', 'YYYY-MM-DD"T"HH24:MI:SSOF')))
		~ '^age: created .*, more than 60 days ago, and the source has not been told it holds read_all_orders$' AS old_order_hidden,
	   webhook_inbox._hidden_why(s.id, '', 'order',
		jsonb_build_object('created_at', to_char(now() - interval '59 days', 'YYYY-MM-DD"T"HH24:MI:SSOF'))) AS recent_order,
	   webhook_inbox._hidden_why(s.id, '', 'product',
		jsonb_build_object('created_at', to_char(now() - interval '90 days', 'YYYY-MM-DD"T"HH24:MI:SSOF'))) AS old_product,
	   webhook_inbox._hidden_why(s.id, '', 'order', NULL) AS nothing_known,
	   webhook_inbox._hidden_why(s.id, '', 'order', '{"created_at": "not a time"}') AS unreadable_time
  FROM webhook_inbox.sources s WHERE s.name = 'hz_shop';

-- its scopes, as the provider answers them; read_all_orders lifts the horizon
SELECT webhook_inbox._scopes_answered(s.id, '', '{"data": {"currentAppInstallation": {"accessScopes": [{"handle": "read_orders"}, {"handle": "write_orders"}]}}}')
  FROM webhook_inbox.sources s WHERE s.name = 'hz_shop';
SELECT webhook_inbox._hidden_why(s.id, '', 'order', '{"created_at": "2020-01-01T00:00:00Z"}')
  FROM webhook_inbox.sources s WHERE s.name = 'hz_shop';
SELECT webhook_inbox._scopes_answered(s.id, '', '{"data": {"currentAppInstallation": {"accessScopes": [{"handle": "read_all_orders"}, {"handle": "read_orders"}]}}}')
  FROM webhook_inbox.sources s WHERE s.name = 'hz_shop';
SELECT webhook_inbox._hidden_why(s.id, '', 'order', '{"created_at": "2020-01-01T00:00:00Z"}') AS with_read_all_orders
  FROM webhook_inbox.sources s WHERE s.name = 'hz_shop';
-- an answer without them is an error, and keeps what was known
SELECT webhook_inbox._scopes_answered(s.id, '', '{"errors": [{"message": "Access denied"}]}')
  FROM webhook_inbox.sources s WHERE s.name = 'hz_shop';
SELECT webhook_inbox._scopes_answered(s.id, '', 'not json') FROM webhook_inbox.sources s WHERE s.name = 'hz_shop';
SELECT c.tenant, c.scopes FROM webhook_inbox.source_scopes c JOIN webhook_inbox.sources s ON s.id = c.source_id
 WHERE s.name = 'hz_shop';
-- a new token forgets them: the worker asks again
UPDATE webhook_inbox.sources SET api_token = 'shpat_new' WHERE name = 'hz_shop';
SELECT count(*) AS scopes_after_new_token FROM webhook_inbox.source_scopes c JOIN webhook_inbox.sources s ON s.id = c.source_id
 WHERE s.name = 'hz_shop';

-- so does a Shopify app/scopes_update webhook, recorded once as an occurrence
SELECT webhook_inbox._scopes_answered(s.id, '', '{"data": {"currentAppInstallation": {"accessScopes": [{"handle": "read_orders"}]}}}')
  FROM webhook_inbox.sources s WHERE s.name = 'hz_shop';
SELECT class, strategy, object_type FROM webhook_inbox.routes WHERE preset AND source_kind = 'shopify' AND event_type = 'app/scopes_update';
SELECT webhook_inbox.record_occurrence('hz_shop', 'app/scopes_update', '2026-12-01T00:00:00Z',
		'{"id": 1, "previous": ["read_orders"], "current": ["read_orders", "read_all_orders"], "updated_at": "2026-12-01T00:00:00Z"}') AS recorded;
SELECT count(*) AS scopes_after_scopes_update FROM webhook_inbox.source_scopes c JOIN webhook_inbox.sources s ON s.id = c.source_id
 WHERE s.name = 'hz_shop';

-- and a shop's new token forgets the scopes its old one held
SELECT webhook_inbox._scopes_answered(s.id, 'a-shop.myshopify.com', '{"data": {"currentAppInstallation": {"accessScopes": [{"handle": "read_orders"}]}}}')
  FROM webhook_inbox.sources s WHERE s.name = 'hz_shop';
INSERT INTO webhook_inbox.tenant_credentials (source_id, tenant, kind, secret, secret_at)
SELECT id, 'a-shop.myshopify.com', 'shopify_shop', '\x01', now() FROM webhook_inbox.sources WHERE name = 'hz_shop';
SELECT count(*) AS shop_scopes_after_new_token FROM webhook_inbox.source_scopes c JOIN webhook_inbox.sources s ON s.id = c.source_id
 WHERE s.name = 'hz_shop' AND c.tenant = 'a-shop.myshopify.com';

-- a tenant whose access ended hides everything of it
INSERT INTO webhook_inbox.tenants (source_id, tenant, status, reason, discovered_by)
SELECT id, 'gone-shop.myshopify.com', 'disabled', 'app/uninstalled', 'delivery' FROM webhook_inbox.sources WHERE name = 'hz_shop';
SELECT webhook_inbox._hidden_why(s.id, 'gone-shop.myshopify.com', 'customer', NULL) AS disabled_tenant,
	   webhook_inbox._hidden_why(s.id, 'other-shop.myshopify.com', 'customer', NULL) AS unknown_tenant
  FROM webhook_inbox.sources s WHERE s.name = 'hz_shop';
-- a generic source declares nothing
SELECT webhook_inbox.create_source('hz_generic', 'standard', 'whsec_aHpnZW5lcmlj', api_base => 'http://127.0.0.1:1') IS NOT NULL AS created;
SELECT webhook_inbox._hidden_why(s.id, '', 'order', '{"created_at": "2020-01-01T00:00:00Z"}') AS generic
  FROM webhook_inbox.sources s WHERE s.name = 'hz_generic';

-- a tombstone's evidence: the provider's is final, a read's yields to a strictly newer version only
SELECT e.evidence, v.ver, webhook_inbox._tombstone_holds(true, e.evidence, v.ver, 5) AS holds
  FROM (VALUES ('provider'), ('read'), (NULL)) e(evidence), (VALUES (NULL::numeric), (4), (5), (6)) v(ver)
 ORDER BY 1 NULLS FIRST, 2 NULLS FIRST;
SELECT webhook_inbox._tombstone_holds(false, 'read', 6, 5) AS live_holds_nothing,
	   webhook_inbox._tombstone_holds(true, 'read', 6, NULL) AS read_without_version;
SELECT count(*) AS bad_evidence FROM webhook_inbox.objects WHERE tombstone_evidence NOT IN ('read', 'provider');
\set VERBOSITY terse
INSERT INTO webhook_inbox.objects (source_id, object_type, object_id, deleted, tombstone_evidence)
SELECT id, 'order', 'x', true, 'guessed' FROM webhook_inbox.sources WHERE name = 'hz_shop';
INSERT INTO webhook_inbox.objects (source_id, object_type, object_id, hidden_since)
SELECT id, 'order', 'y', now() FROM webhook_inbox.sources WHERE name = 'hz_shop';
\set VERBOSITY default

-- the views: hidden objects, and what sweep_health counts of them
INSERT INTO webhook_inbox.objects (source_id, object_type, object_id, status, version, hidden_since, hidden_reason)
SELECT id, 'order', 'h' || g, 'paid', g, now(), 'age: a test' FROM webhook_inbox.sources, generate_series(1, 3) g
 WHERE name = 'hz_shop';
INSERT INTO webhook_inbox.objects (source_id, object_type, object_id, status, version)
SELECT id, 'order', 'v' || g, 'paid', g FROM webhook_inbox.sources, generate_series(1, 9) g WHERE name = 'hz_shop';
SELECT source, object_type, object_id, known_from, hidden_reason FROM webhook_inbox.hidden_objects ORDER BY object_id;
SELECT object_id, hidden, known_from FROM webhook_inbox.mirror WHERE source = 'hz_shop' AND object_id IN ('h1', 'v1') ORDER BY 1;
INSERT INTO webhook_inbox.sweep_runs (source_id, object_type, trigger, layer, status)
SELECT id, 'order', 'manual', 'full', 'complete' FROM webhook_inbox.sources WHERE name = 'hz_shop';
INSERT INTO webhook_inbox.repairs (run_id, source_id, object_type, object_id, before, after, outcome)
SELECT NULL, id, 'order', 'v1', '{"deleted": true}', '{"deleted": false}', 'revived' FROM webhook_inbox.sources WHERE name = 'hz_shop';
SELECT source, object_type, hidden, hidden_share, revived_last_day FROM webhook_inbox.sweep_health WHERE source = 'hz_shop';
SELECT has_table_privilege('webhook_inbox_reader', 'webhook_inbox.hidden_objects', 'SELECT') AS reader_hidden,
	   has_table_privilege('webhook_inbox_reader', 'webhook_inbox.horizons', 'SELECT') AS reader_horizons,
	   has_table_privilege('webhook_inbox_receiver', 'webhook_inbox.hidden_objects', 'SELECT') AS receiver_hidden;
SET ROLE webhook_inbox_reader;
SELECT count(*) AS reader_reads_horizons FROM webhook_inbox.horizons;
RESET ROLE;
