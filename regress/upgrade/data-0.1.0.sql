-- regress/upgrade/data-0.1.0.sql: rows in every table of release 0.1.0, for
-- regress/t/501_release_upgrade.pl.  Plain INSERTs in the 0.1.0 schema
-- (sql/webhook_inbox--0.1.0.sql): the C functions of the library being
-- tested belong to the new release and may rely on its SQL, so the 0.1.0
-- API cannot be driven with them.  Never change it for a later release.
\set ON_ERROR_STOP on
SET client_min_messages = warning;

INSERT INTO webhook_inbox.sources (id, name, kind, signing_secrets, tolerance, api_base, api_token, settings, flagged)
VALUES (1, 'up-stripe', 'stripe', '{whsec_up}', '300 seconds', 'http://127.0.0.1:1', 'sk_up', '{}', NULL),
	   (2, 'up-shop', 'shopify', '{shpss_up,shpss_up2}', '0 seconds', NULL, NULL, '{"shop": "x"}', 'http 401');
SELECT setval('webhook_inbox.sources_id_seq', 2);

-- a user route and machine next to the presets
INSERT INTO webhook_inbox.routes (source_kind, event_type, class, strategy, object_type,
	object_id_path, version_path)
VALUES ('shopify', 'inventory_levels/*', 'state', 'version', 'inventory_level',
	'$.inventory_item_id', '$.updated_at');
INSERT INTO webhook_inbox.routes (source_id, event_type, class, strategy, object_type,
	object_id_path, status_path, machine, priority)
VALUES (1, 'payment_intent.*', 'state', 'machine', 'payment', '$.data.object.id',
	'$.data.object.status', 'payment', 200);
INSERT INTO webhook_inbox.machines (machine, from_state, to_state)
VALUES ('up_ticket', 'open', 'closed');

INSERT INTO webhook_inbox.inbox (id, source_id, event_id, correlation_id, event_type, object_type, object_id,
	strategy, route_id, route_version, provider_version, provider_time, status_value, payload, raw_body,
	body_sha256, status, reason, attempts, claim_token, decided_route, decided_route_version, processed_at)
VALUES
	(1, 1, 'evt_up1', NULL, 'customer.subscription.updated', 'subscription', 'sub_up1', 'fetch', 1, 1,
	 NULL, '2023-11-14 22:13:20+00', 'active', '{"id": "evt_up1", "type": "customer.subscription.updated"}', NULL,
	 sha256('evt_up1'), 'done', NULL, 1, 7, 1, 1, now()),
	(2, 1, 'evt_up2', NULL, 'payment_intent.succeeded', 'payment', 'pi_up1', 'machine', 2, 1,
	 NULL, '2023-11-14 22:13:21+00', 'succeeded', '{"id": "evt_up2"}', NULL,
	 sha256('evt_up2'), 'processing', NULL, 1, 8, NULL, NULL, NULL),
	(3, 2, 'wh-up1', 'ev-up1', 'orders/updated', 'order', '4507', 'version', 3, 1,
	 1767261605, '2026-01-01 10:00:05+00', 'paid', '{"id": 4507}', NULL,
	 sha256('wh-up1'), 'retry', 'http 503', 2, NULL, NULL, NULL, NULL),
	(4, 2, 'wh-up2', NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	 NULL, NULL, NULL, NULL, '\xff00', sha256('\xff00'), 'quarantined', 'unreadable_body', 0, NULL, NULL, NULL, NULL),
	(5, 1, 'evt_up3', NULL, 'charge.refund.updated', NULL, NULL, NULL, NULL, NULL,
	 NULL, NULL, NULL, '{"id": "evt_up3"}', NULL, sha256('evt_up3'), 'ignored', 'no_route', 0, NULL, NULL, NULL, now());
SELECT setval('webhook_inbox.inbox_id_seq', 5);

INSERT INTO webhook_inbox.deliveries (source_id, event_id, delivery_id, body_sha256, body_size, outcome)
VALUES (1, 'evt_up1', 'd-1', sha256('evt_up1'), 120, 'new'),
	   (1, 'evt_up1', 'd-2', sha256('evt_up1'), 120, 'duplicate'),
	   (1, 'evt_up2', NULL, sha256('evt_up2'), 90, 'new'),
	   (2, 'wh-up1', 'wh-up1', sha256('wh-up1'), 60, 'new'),
	   (2, 'wh-up2', 'wh-up2', sha256('\xff00'), 2, 'quarantined');

INSERT INTO webhook_inbox.objects (source_id, object_type, object_id, status, version, provider_time, state,
	deleted, fence_token, last_event_id)
VALUES (1, 'subscription', 'sub_up1', 'active', NULL, '2023-11-14 22:13:20+00', '{"id": "sub_up1", "status": "active"}', false, 7, 1),
	   (1, 'subscription', 'sub_up2', 'canceled', NULL, NULL, NULL, true, NULL, NULL),
	   (2, 'order', '4507', 'paid', 1767261605, '2026-01-01 10:00:05+00', '{"id": 4507}', false, NULL, 3);
SELECT setval('webhook_inbox.claim_token_seq', 8);
INSERT INTO webhook_inbox.object_leases (source_id, object_type, object_id, token, holder, expires_at)
VALUES (1, 'payment', 'pi_up1', 8, 'upgrade-test', now() + interval '1 hour');

INSERT INTO webhook_inbox.transitions (source_id, object_type, object_id, machine, from_status, to_status,
	version, applied, reason, cause, event_id)
VALUES (1, 'payment', 'pi_up1', 'payment', NULL, 'captured', NULL, true, NULL, 'event', 2),
	   (1, 'payment', 'pi_up1', 'payment', 'captured', 'pending', NULL, false, 'backward', 'event', 2),
	   (2, 'order', '4507', NULL, NULL, 'paid', 1767261605, true, NULL, 'save', 3);

INSERT INTO webhook_inbox.occurrences (source_id, kind, occurrence_id, amount, currency, payload, first_event_id)
VALUES (1, 'refund', 're_up1', 200, 'eur', '{"id": "re_up1"}', 5);

INSERT INTO webhook_inbox.requeues (event_id, previous_status, previous_reason, previous_route,
	previous_route_version, note)
VALUES (1, 'done', NULL, 1, 1, 'upgrade test');

INSERT INTO webhook_inbox.sweep_runs (id, source_id, object_type, trigger, listed_since, finished_at,
	pages, listed, differences, repaired, skipped, errors, status, error)
VALUES (1, 1, 'subscription', 'manual', now() - interval '1 hour', now(), 1, 3, 1, 1, 0, 0, 'complete', NULL),
	   (2, 2, 'order', 'schedule', NULL, now(), 0, 0, 0, 0, 0, 1, 'failed', 'http 503');
SELECT setval('webhook_inbox.sweep_runs_id_seq', 2);
INSERT INTO webhook_inbox.repairs (run_id, source_id, object_type, object_id, before, after, outcome)
VALUES (1, 1, 'subscription', 'sub_up2', NULL, '{"status": "canceled", "deleted": true}', 'applied');
INSERT INTO webhook_inbox.sweep_checkpoints (source_id, object_type, checkpoint, last_run_id)
VALUES (1, 'subscription', now() - interval '1 hour', 1);

INSERT INTO webhook_inbox.effect_rules (id, source_id, object_type, from_status, to_status, kind, request, owner)
VALUES (1, NULL, 'order', 'paid', 'cancelled', 'email', '{"template": "cancelled"}', 'operations'),
	   (2, 1, 'payment', '*', 'refunded', 'ledger', '{}', 'finance');
SELECT setval('webhook_inbox.effect_rules_id_seq', 2);
INSERT INTO webhook_inbox.effects (id, effect_key, kind, source_id, object_type, object_id, transition_id,
	rule_id, request, idempotency_key, amount, ceiling_group, status, owner, reason, attempts,
	claim_token, holder, lease_expires_at, response_status, response, uncertain_since)
VALUES (1, 'rule:1:transition:3', 'email', 2, 'order', '4507', 3, 1, '{"template": "cancelled"}',
		'wi-1-3', NULL, NULL, 'pending', 'operations', NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL),
	   (2, 'refund:up:1', 'http', 1, NULL, NULL, NULL, NULL,
		'{"method": "POST", "path": "/v1/refunds", "body": {"payment_intent": "pi_up1"}}',
		'refund-up-1', 200, 'pi_up1', 'uncertain', 'finance', 'timeout', 1, 8, 'upgrade-test',
		now() + interval '30 seconds', NULL, NULL, now());
SELECT setval('webhook_inbox.effects_id_seq', 2);
INSERT INTO webhook_inbox.effect_attempts (effect_id, claim_token, action, finished_at, outcome, http_status, error)
VALUES (2, 8, 'submit', now(), 'uncertain', NULL, 'timeout after 10 s'),
	   (2, 8, 'lookup', now(), 'unknown', 404, NULL);
INSERT INTO webhook_inbox.effect_resolutions (effect_id, previous_status, outcome, note)
VALUES (2, 'uncertain', 'done', 'the provider shows the refund');
