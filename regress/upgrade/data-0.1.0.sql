-- regress/upgrade/data-0.1.0.sql: rows in every table of release 0.1.0, made
-- through its own API where it has one, for regress/t/501_release_upgrade.pl.
-- Written against the 0.1.0 install script (sql/webhook_inbox--0.1.0.sql):
-- never change it for a later release.
\set ON_ERROR_STOP on
SET client_min_messages = warning;

-- sources, and a user route and machine next to the presets
SELECT webhook_inbox.create_source('up-stripe', 'stripe', 'whsec_up',
	api_base => 'http://127.0.0.1:1', api_token => 'sk_up');
SELECT webhook_inbox.create_source('up-shop', 'shopify', 'shpss_up');
SELECT webhook_inbox.rotate_secret('up-shop', 'shpss_up2');
INSERT INTO webhook_inbox.routes (source_kind, event_type, class, strategy, object_type,
	object_id_path, version_path)
VALUES ('shopify', 'inventory_levels/*', 'state', 'version', 'inventory_level',
	'$.inventory_item_id', '$.updated_at');
INSERT INTO webhook_inbox.machines (machine, from_state, to_state)
VALUES ('up_ticket', 'open', 'closed');

-- inbox and deliveries: new, duplicate and quarantined deliveries
SELECT webhook_inbox.intake('up-stripe', '{}', convert_to('{"id":"evt_up1","type":"customer.subscription.updated","created":1700000000,"data":{"object":{"id":"sub_up1","status":"active"}}}', 'UTF8'));
SELECT webhook_inbox.intake('up-stripe', '{}', convert_to('{"id":"evt_up1","type":"customer.subscription.updated","created":1700000000,"data":{"object":{"id":"sub_up1","status":"active"}}}', 'UTF8'));
SELECT webhook_inbox.intake('up-stripe', '{}', convert_to('{"id":"evt_up2","type":"payment_intent.succeeded","created":1700000001,"data":{"object":{"id":"pi_up1","status":"succeeded","amount":500}}}', 'UTF8'));
SELECT webhook_inbox.intake('up-stripe', '{}', convert_to('{"id":"evt_up3","type":"refund.created","created":1700000002,"data":{"object":{"id":"re_up1","amount":200,"currency":"eur"}}}', 'UTF8'));
SELECT webhook_inbox.intake('up-shop', ARRAY['X-Shopify-Webhook-Id', 'wh-up1', 'X-Shopify-Topic', 'orders/updated', 'X-Shopify-Event-Id', 'ev-up1'],
	convert_to('{"id":4507,"updated_at":"2026-01-01T10:00:05Z","financial_status":"paid"}', 'UTF8'));
SELECT webhook_inbox.intake('up-shop', ARRAY['X-Shopify-Webhook-Id', 'wh-up2'], '\xff00'::bytea);

-- a claim: leases and fencing tokens; the subscription saved under it, the
-- claim completed, its events replayed (audited), and a claim left live
CREATE TEMP TABLE up_claim AS SELECT * FROM webhook_inbox.claim('upgrade-test', 1, '1 hour');
SELECT webhook_inbox.upsert_object('up-stripe', 'subscription', 'sub_up1', 1, 'active',
	'{"id": "sub_up1", "status": "active"}', (SELECT claim_token FROM up_claim));
SELECT webhook_inbox.complete((SELECT claim_token FROM up_claim));
SELECT webhook_inbox.requeue((SELECT event_ids FROM up_claim), 'upgrade test');
CREATE TEMP TABLE up_claim2 AS SELECT * FROM webhook_inbox.claim('upgrade-test', 2, '1 hour');
-- mirror rows with transitions, a machine's history, occurrences
SELECT webhook_inbox.upsert_object('up-shop', 'order', '4507', 1767261605, 'paid', '{"id": 4507}');
SELECT webhook_inbox.upsert_object('up-shop', 'order', '4507', 1767261606, 'refunded', '{"id": 4507}');
SELECT webhook_inbox.apply_transition('up-stripe', 'payment', 'pi_up1', 'payment', 'captured');
SELECT webhook_inbox.record_occurrence('up-stripe', 'refund', 're_up1', '{"id": "re_up1"}',
	amount => 200, currency => 'eur');

-- effects: a rule fired by a transition, an approved operation with an
-- attempt, and a resolution
INSERT INTO webhook_inbox.effect_rules (object_type, from_status, to_status, kind, request, owner)
VALUES ('order', 'paid', 'cancelled', 'email', '{"template": "cancelled"}', 'operations');
SELECT webhook_inbox.upsert_object('up-shop', 'order', '4507', 1767261607, 'cancelled', '{"id": 4507}');
SELECT webhook_inbox.upsert_object('up-shop', 'order', '4508', 1, 'paid', '{"id": 4508}');
SELECT webhook_inbox.upsert_object('up-shop', 'order', '4508', 2, 'cancelled', '{"id": 4508}');
SELECT webhook_inbox.request_effect('refund:up:1', 'http',
	'{"method": "POST", "path": "/v1/refunds", "body": {"payment_intent": "pi_up1"}}',
	source => 'up-stripe', owner => 'finance', amount => 200);
SELECT webhook_inbox.request_effect('refund:up:2', 'http',
	'{"method": "POST", "path": "/v1/refunds", "body": {"payment_intent": "pi_up2"}}',
	source => 'up-stripe', owner => 'finance', amount => 100);
INSERT INTO webhook_inbox.effect_attempts (effect_id, claim_token, action, finished_at, outcome, http_status)
SELECT id, nextval('webhook_inbox.claim_token_seq'), 'submit', now(), 'uncertain', NULL
  FROM webhook_inbox.effects WHERE effect_key = 'refund:up:1';
UPDATE webhook_inbox.effects SET status = 'uncertain', uncertain_since = now(), reason = 'timeout'
 WHERE effect_key = 'refund:up:1';
SELECT webhook_inbox.resolve_effect((SELECT id FROM webhook_inbox.effects WHERE effect_key = 'refund:up:1'),
	'done', 'the provider shows the refund');

-- reconciliation: a checkpoint, a run and its repair
INSERT INTO webhook_inbox.sweep_runs (source_id, object_type, trigger, listed_since, finished_at,
	pages, listed, differences, repaired, status)
SELECT id, 'subscription', 'manual', now() - interval '1 hour', now(), 1, 3, 1, 1, 'complete'
  FROM webhook_inbox.sources WHERE name = 'up-stripe';
INSERT INTO webhook_inbox.repairs (run_id, source_id, object_type, object_id, before, after, outcome)
SELECT r.id, r.source_id, 'subscription', 'sub_up2', NULL, '{"status": "canceled"}', 'applied'
  FROM webhook_inbox.sweep_runs r;
INSERT INTO webhook_inbox.sweep_checkpoints (source_id, object_type, checkpoint, last_run_id)
SELECT source_id, object_type, listed_since, id FROM webhook_inbox.sweep_runs;
