-- Operations: owned queues, the roles and what each may do, controlled replay, typed views.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;
CREATE FUNCTION wi_ops_body(t text) RETURNS bytea LANGUAGE sql AS $$ SELECT convert_to(t, 'UTF8') $$;
-- runs a statement as the current role; its error without the ids other tests' rows make vary
CREATE FUNCTION wi_ops_try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, '[0-9]+', 'N', 'g');
END
$$;
SELECT webhook_inbox.create_source('ops_shop', 'shopify', 'shpss_o') IS NOT NULL AS created;
SELECT webhook_inbox.create_source('ops_std', 'standard', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw') IS NOT NULL AS created;
SELECT webhook_inbox.create_source('ops_stripe', 'stripe', 'whsec_o', api_base => 'http://127.0.0.1:1') IS NOT NULL AS created;
SELECT webhook_inbox.create_source('ops_gh', 'github', 'gh_o') IS NOT NULL AS created;

-- the owners: presets, and a change of yours that wins and is kept by pg_dump
SELECT queue, reason, owner FROM webhook_inbox.queue_owners ORDER BY 1, 2;
INSERT INTO webhook_inbox.queue_owners (queue, reason, owner) VALUES ('quarantined_event', 'no_route', 'accounting');
INSERT INTO webhook_inbox.queue_owners (queue, reason, owner) VALUES ('lost_and_found', '*', 'engineering');
UPDATE webhook_inbox.queue_owners SET owner = 'operations' WHERE queue = 'failed_sweep' AND reason = '*';
SELECT queue, reason, owner, preset FROM webhook_inbox.queue_owners WHERE queue = 'failed_sweep' ORDER BY preset;
SELECT webhook_inbox._queue_owner('failed_sweep', 'subscription') AS failed_sweep_owner;
DELETE FROM webhook_inbox.queue_owners WHERE queue = 'flagged_source';
DELETE FROM webhook_inbox.queue_owners WHERE queue = 'failed_sweep' AND NOT preset;
SELECT webhook_inbox._queue_owner('failed_sweep', 'subscription') AS failed_sweep_owner_again;
SELECT x.extcondition[array_position(x.extconfig, 'webhook_inbox.queue_owners'::regclass::oid)] AS dumped
  FROM pg_catalog.pg_extension x WHERE x.extname = 'webhook_inbox';
-- something in every queue
-- intake: a Shopify order without its version is quarantined (engineering)
SELECT webhook_inbox.intake('ops_shop', ARRAY['x-shopify-webhook-id', 'ow-1', 'x-shopify-topic', 'orders/updated'], wi_ops_body('{"id":7}'));
-- two orders with versions, one later set aside as an ambiguous tie (operations)
SELECT webhook_inbox.intake('ops_shop', ARRAY['x-shopify-webhook-id', 'ow-2', 'x-shopify-topic', 'orders/updated'], wi_ops_body('{"id":8,"updated_at":"2026-01-01T10:00:00Z","financial_status":"paid","name":"#1008","total_price":"12.50","currency":"EUR","customer":{"id":99}}'));
SELECT webhook_inbox.intake('ops_shop', ARRAY['x-shopify-webhook-id', 'ow-3', 'x-shopify-topic', 'orders/updated'], wi_ops_body('{"id":9,"updated_at":"2026-01-01T10:00:00Z","financial_status":"paid"}'));
-- Standard Webhooks events have nothing to order by: unorderable (operations)
SELECT webhook_inbox.intake('ops_std', ARRAY['webhook-id', 'om-1'], wi_ops_body('{"type":"invoice.paid","timestamp":"2026-01-01T00:00:00Z","data":{"id":"in_o1","object":"invoice","status":"paid"}}'));
SELECT count(*) AS claimed FROM webhook_inbox.claim('ops', 100, '1 minute') c
 WHERE c.source IN ('ops_shop', 'ops_std')
   AND CASE WHEN c.object_id = '9' THEN webhook_inbox.quarantine(c.claim_token, 'ambiguous_tie: test') >= 0
			ELSE EXISTS (SELECT FROM webhook_inbox._work_claim(c.claim_token)) END;
-- effects: uncertain money (finance), a quarantined email (operations)
SELECT webhook_inbox.request_effect('ops:refund-1', 'http', '{"method": "POST", "path": "/v1/refunds", "body": {"amount": 100}}',
	source => 'ops_stripe', owner => 'finance', amount => 100) IS NOT NULL AS refund;
SELECT webhook_inbox.request_effect('ops:email-1', 'email', '{"template": "welcome"}', source => 'ops_stripe', owner => 'operations') IS NOT NULL AS email;
UPDATE webhook_inbox.effects SET status = 'uncertain', uncertain_since = now(), reason = 'timeout' WHERE effect_key = 'ops:refund-1';
UPDATE webhook_inbox.effects SET status = 'quarantined', reason = 'max_attempts: smtp down' WHERE effect_key = 'ops:email-1';
-- a sweep that cannot reach the provider, and a source whose credentials were refused
SELECT status FROM webhook_inbox.sweep_now('ops_stripe', 'subscription');
UPDATE webhook_inbox.sources SET flagged = 'the read API answered 401: check api_token' WHERE name = 'ops_gh';
SELECT queue, source, reason, owner, count, oldest_age >= '0 seconds' AS aged, oldest_id IS NOT NULL AS has_oldest
  FROM webhook_inbox.queues WHERE source LIKE 'ops\_%' ORDER BY queue, source, reason;

-- the reader: health, queues and metadata; no payloads, no secrets, no actions
SET ROLE webhook_inbox_reader;
SELECT count(*) > 0 AS sees_queues FROM webhook_inbox.queues;
SELECT pending >= 0 AS sees_health FROM webhook_inbox.inbox_health;
SELECT claimed >= 0 AS sees_counters FROM webhook_inbox.worker_counters;
SELECT count(*) AS sweeps FROM webhook_inbox.sweep_health WHERE source = 'ops_stripe';
SELECT source, event_id, status, reason FROM webhook_inbox.inbox_events WHERE source = 'ops_shop' ORDER BY id;
SELECT name, kind, secrets, has_api_token, flagged IS NOT NULL AS flagged FROM webhook_inbox.source_list WHERE name LIKE 'ops\_%' ORDER BY name;
SELECT source, object_type, object_id, status FROM webhook_inbox.mirror WHERE source = 'ops_shop';
SELECT payload FROM webhook_inbox.inbox LIMIT 1;
SELECT signing_secrets FROM webhook_inbox.sources LIMIT 1;
SELECT api_token FROM webhook_inbox.sources LIMIT 1;
SELECT state FROM webhook_inbox.objects LIMIT 1;
SELECT request FROM webhook_inbox.effects LIMIT 1;
SELECT * FROM webhook_inbox.shopify_orders;
SELECT * FROM webhook_inbox.receiver_sources();
SELECT * FROM webhook_inbox.requeue_where(source => 'ops_shop');
SELECT webhook_inbox.requeue(ARRAY[1::bigint]);
SELECT webhook_inbox.resolve_effect(1, 'done', 'x');
UPDATE webhook_inbox.queue_owners SET owner = 'finance';
RESET ROLE;

-- the operator: previews everything, requeues and resolves only what operations owns
SET ROLE webhook_inbox_operator;
SELECT source_name, type, object_id, status, split_part(reason_text, ':', 1) AS reason, owner, action
  FROM webhook_inbox.requeue_where(source => 'ops_shop');
SELECT * FROM webhook_inbox.requeue_where(source => 'ops_shop', dry_run => false);
SELECT source_name, object_id, owner, action FROM webhook_inbox.requeue_where(source => 'ops_shop', reason => 'ambiguous_tie', dry_run => false, note => 'checked with the shop');
SELECT requeued_by, filter, reclassify, events, skipped, note FROM webhook_inbox.requeue_batches ORDER BY id DESC LIMIT 1;
SELECT r.requeued_by, r.previous_status, r.previous_reason, r.note, r.batch_id IS NOT NULL AS batched
  FROM webhook_inbox.requeues r JOIN webhook_inbox.inbox_events i ON i.id = r.event_id WHERE i.event_id = 'ow-3';
SELECT event_id, status, strategy FROM webhook_inbox.inbox_events WHERE event_id = 'ow-3';
SELECT wi_ops_try($$SELECT webhook_inbox.resolve_effect((SELECT id FROM webhook_inbox.effects_unresolved WHERE effect_key = 'ops:refund-1'), 'done', 'seen in the dashboard')$$);
SELECT webhook_inbox.resolve_effect((SELECT id FROM webhook_inbox.effects_unresolved WHERE effect_key = 'ops:email-1'), 'failed', 'customer unsubscribed');
-- an operator closes what operations owns, as decided, with a note; others' events are refused
RESET ROLE;
SELECT webhook_inbox.intake('ops_shop', ARRAY['x-shopify-webhook-id', 'ow-6', 'x-shopify-topic', 'orders/updated'], wi_ops_body('{"id":11,"updated_at":"2026-01-01T10:00:00Z","financial_status":"paid"}'));
SELECT count(*) AS tied FROM webhook_inbox.claim('ops', 100, '1 minute') c
 WHERE c.source = 'ops_shop' AND webhook_inbox.quarantine(c.claim_token, 'ambiguous_tie: test') >= 0;
SET ROLE webhook_inbox_operator;
SELECT wi_ops_try($$SELECT count(*) FROM webhook_inbox.requeue_where(source => 'ops_shop', dismiss => true, note => 'x', dry_run => false)$$);
SELECT source_name, object_id, owner, action FROM webhook_inbox.requeue_where(source => 'ops_shop', reason => 'ambiguous_tie', dismiss => true, note => 'the shop confirmed the paid one', dry_run => false);
SELECT event_id, status, reason FROM webhook_inbox.inbox_events WHERE event_id = 'ow-6';
SELECT filter, events, note FROM webhook_inbox.requeue_batches ORDER BY id DESC LIMIT 1;
SELECT * FROM webhook_inbox.requeue_where(source => 'ops_shop', dismiss => true);
SELECT * FROM webhook_inbox.requeue_where(source => 'ops_shop', dismiss => true, note => 'x', reclassify => true);
SELECT * FROM webhook_inbox.requeue_where(source => 'ops_shop', dismiss => true, note => 'x', statuses => '{done}');
SELECT webhook_inbox.requeue(ARRAY[1::bigint]);
UPDATE webhook_inbox.inbox SET status = 'pending';
SELECT payload FROM webhook_inbox.inbox LIMIT 1;
RESET ROLE;

-- finance: resolves money effects, nothing else
SET ROLE webhook_inbox_finance;
SELECT webhook_inbox.resolve_effect((SELECT id FROM webhook_inbox.effects_unresolved WHERE effect_key = 'ops:refund-1'), 'done', 'in the payout report');
SELECT * FROM webhook_inbox.requeue_where(source => 'ops_std', dry_run => false);
RESET ROLE;
SELECT previous_status, outcome, note, resolved_by FROM webhook_inbox.effect_resolutions r
  JOIN webhook_inbox.effects e ON e.id = r.effect_id WHERE e.effect_key LIKE 'ops:%' ORDER BY r.id;
SELECT queue, source, reason, owner, count FROM webhook_inbox.queues WHERE source LIKE 'ops\_%' ORDER BY queue, source, reason;

-- requeue_where refuses bad filters with the reason
SELECT * FROM webhook_inbox.requeue_where(dry_run => false);
SELECT * FROM webhook_inbox.requeue_where(source => 'nosuch');
SELECT * FROM webhook_inbox.requeue_where(statuses => '{pending}');
SELECT * FROM webhook_inbox.requeue_where(statuses => '{}');
SELECT * FROM webhook_inbox.requeue_where(max_events => 0);
SELECT * FROM webhook_inbox.requeue_where(received_from => '2026-01-02', received_to => '2026-01-01');
SELECT * FROM webhook_inbox.requeue_where(dry_run => NULL);
SELECT * FROM webhook_inbox.requeue_where(dismiss => NULL);
-- more matches than max_events: a preview shows the first ones, a real run is refused
SELECT count(*) FROM webhook_inbox.requeue_where(statuses => '{quarantined,ignored,done}', max_events => 1);
SELECT * FROM webhook_inbox.requeue_where(source => 'ops_shop', statuses => '{quarantined,ignored,done}', max_events => 1, dry_run => false);
-- an event type pattern and a time range narrow the match
SELECT count(*) FROM webhook_inbox.requeue_where(source => 'ops_std', event_type => 'invoice.*', received_from => now() - interval '1 hour', received_to => now() + interval '1 hour');
SELECT count(*) FROM webhook_inbox.requeue_where(source => 'ops_std', event_type => 'charge.*');
SELECT count(*) FROM webhook_inbox.requeue_where(source => 'ops_std', received_to => now() - interval '1 hour');

-- a replay keeps the route its event was classified with; reclassify asks today's routes
INSERT INTO webhook_inbox.routes (source_id, event_type, class, strategy, object_type, object_id_path, version_path, status_path)
SELECT id, 'invoice.*', 'state', 'version', 'invoice', '$.data.id', '$.timestamp', '$.data.status' FROM webhook_inbox.sources WHERE name = 'ops_std';
SELECT source_name, object_id, action FROM webhook_inbox.requeue_where(source => 'ops_std', reason => 'unorderable', dry_run => false);
SELECT strategy, status FROM webhook_inbox.inbox_events WHERE event_id = 'om-1';
SELECT count(*) AS claimed FROM webhook_inbox.claim('ops', 100, '1 minute') c
 WHERE c.source = 'ops_std' AND EXISTS (SELECT FROM webhook_inbox._work_claim(c.claim_token));
SELECT strategy, status, split_part(reason, ':', 1) AS reason FROM webhook_inbox.inbox_events WHERE event_id = 'om-1';
SELECT source_name, object_id, action FROM webhook_inbox.requeue_where(source => 'ops_std', reason => 'unorderable', reclassify => true, dry_run => false);
SELECT e.strategy, e.status, e.route_id = r.id AS new_route FROM webhook_inbox.inbox_events e, webhook_inbox.routes r
 WHERE e.event_id = 'om-1' AND r.source_id = (SELECT id FROM webhook_inbox.sources WHERE name = 'ops_std');
SELECT count(*) AS claimed FROM webhook_inbox.claim('ops', 100, '1 minute') c
 WHERE c.source = 'ops_std' AND EXISTS (SELECT FROM webhook_inbox._work_claim(c.claim_token));
SELECT status FROM webhook_inbox.inbox_events WHERE event_id = 'om-1';
SELECT source, object_type, object_id, status FROM webhook_inbox.mirror WHERE source = 'ops_std';

-- a replayed event never fires its effect again: the transition is already applied
INSERT INTO webhook_inbox.effect_rules (object_type, from_status, to_status, kind, owner)
VALUES ('order', '*', 'paid', 'ops_fulfil', 'operations');
SELECT webhook_inbox.intake('ops_shop', ARRAY['x-shopify-webhook-id', 'ow-4', 'x-shopify-topic', 'orders/paid'], wi_ops_body('{"id":10,"updated_at":"2026-01-01T11:00:00Z","financial_status":"paid"}'));
SELECT count(*) AS claimed FROM webhook_inbox.claim('ops', 100, '1 minute') c
 WHERE c.source = 'ops_shop' AND EXISTS (SELECT FROM webhook_inbox._work_claim(c.claim_token));
SELECT count(*) AS fulfilments FROM webhook_inbox.effects WHERE kind = 'ops_fulfil' AND object_id = '10';
SELECT object_id, action FROM webhook_inbox.requeue_where(source => 'ops_shop', event_type => 'orders/paid', statuses => '{done}', dry_run => false);
SELECT count(*) AS claimed FROM webhook_inbox.claim('ops', 100, '1 minute') c
 WHERE c.source = 'ops_shop' AND EXISTS (SELECT FROM webhook_inbox._work_claim(c.claim_token));
SELECT status, reason FROM webhook_inbox.inbox_events WHERE event_id = 'ow-4';
SELECT count(*) AS fulfilments FROM webhook_inbox.effects WHERE kind = 'ops_fulfil' AND object_id = '10';
-- the order moved on; replaying the old event is contradicted by the present: set aside for operations
SELECT webhook_inbox.intake('ops_shop', ARRAY['x-shopify-webhook-id', 'ow-5', 'x-shopify-topic', 'orders/updated'], wi_ops_body('{"id":10,"updated_at":"2026-01-01T12:00:00Z","financial_status":"refunded"}'));
SELECT count(*) AS claimed FROM webhook_inbox.claim('ops', 100, '1 minute') c
 WHERE c.source = 'ops_shop' AND EXISTS (SELECT FROM webhook_inbox._work_claim(c.claim_token));
SELECT object_id, action FROM webhook_inbox.requeue_where(source => 'ops_shop', event_type => 'orders/paid', statuses => '{done}', dry_run => false);
SELECT count(*) AS claimed FROM webhook_inbox.claim('ops', 100, '1 minute') c
 WHERE c.source = 'ops_shop' AND EXISTS (SELECT FROM webhook_inbox._work_claim(c.claim_token));
SELECT event_id, status, reason FROM webhook_inbox.inbox_events WHERE event_id IN ('ow-4', 'ow-5') ORDER BY id;
SELECT source, object_id, status FROM webhook_inbox.mirror WHERE source = 'ops_shop' AND object_id = '10';
SELECT queue, reason, owner, count FROM webhook_inbox.queues WHERE source = 'ops_shop' AND reason = 'replay_contradicted';
SELECT count(*) AS fulfilments FROM webhook_inbox.effects WHERE kind = 'ops_fulfil' AND object_id = '10';

-- typed views over the mirror
SELECT source, id, name, financial_status, total_price, currency, customer FROM webhook_inbox.shopify_orders WHERE source = 'ops_shop' ORDER BY id;
SELECT webhook_inbox.upsert_object('ops_stripe', 'subscription', 'sub_o1', NULL, 'active',
	'{"id": "sub_o1", "object": "subscription", "status": "active", "customer": "cus_o1", "cancel_at_period_end": false, "items": {"data": [{"current_period_end": 1767225600, "price": {"id": "price_o1"}}]}}');
SELECT webhook_inbox.upsert_object('ops_stripe', 'subscription', 'sub_o2', NULL, 'canceled',
	'{"id": "sub_o2", "status": "canceled", "customer": "cus_o2", "current_period_end": 1735689600, "canceled_at": 1735000000, "cancel_at_period_end": true}');
SELECT id, status, customer, current_period_end AT TIME ZONE 'UTC' AS current_period_end, cancel_at_period_end,
	   canceled_at AT TIME ZONE 'UTC' AS canceled_at, price
  FROM webhook_inbox.stripe_subscriptions WHERE source = 'ops_stripe' ORDER BY id;
SELECT webhook_inbox.upsert_object('ops_gh', 'issue', '1347', 1, 'open',
	'{"action": "opened", "issue": {"id": 1347, "number": 42, "title": "Found a bug", "state": "open", "user": {"login": "octocat"}, "html_url": "https://github.com/octocat/Hello-World/issues/42"}, "repository": {"full_name": "octocat/Hello-World"}}');
SELECT webhook_inbox.upsert_object('ops_gh', 'issue', '1348', 1, 'closed',
	'{"id": 1348, "number": 43, "title": "Fetched", "state": "closed", "user": {"login": "hubot"}, "repository_url": "https://api.github.com/repos/octocat/Hello-World"}');
SELECT id, number, title, state, author, repository, url FROM webhook_inbox.github_issues WHERE source = 'ops_gh' ORDER BY id;
-- odd data gives NULLs, not errors
SELECT webhook_inbox.upsert_object('ops_stripe', 'invoice', 'in_o1', NULL, 'open', '{"amount_due": "lots", "currency": "eur", "customer": 5}');
SELECT id, status, customer, amount_due, currency FROM webhook_inbox.stripe_invoices WHERE source = 'ops_stripe';
SELECT webhook_inbox.upsert_object('ops_stripe', 'charge', 'ch_o1', NULL, 'succeeded',
	'{"id": "ch_o1", "status": "succeeded", "customer": "cus_o1", "payment_intent": "pi_o1", "amount": 2000, "amount_refunded": 500, "currency": "eur", "refunded": false, "disputed": true}');
SELECT webhook_inbox.upsert_object('ops_stripe', 'refund', 're_o1', NULL, 'succeeded',
	'{"id": "re_o1", "status": "succeeded", "charge": "ch_o1", "payment_intent": "pi_o1", "amount": 500, "currency": "eur", "reason": "requested_by_customer"}');
SELECT webhook_inbox.upsert_object('ops_stripe', 'dispute', 'dp_o1', NULL, 'needs_response',
	'{"id": "dp_o1", "status": "needs_response", "charge": "ch_o1", "amount": 1500, "currency": "eur", "reason": "fraudulent", "evidence_details": {"due_by": 1767225600}}');
SELECT webhook_inbox.upsert_object('ops_stripe', 'checkout.session', 'cs_o1', NULL, 'complete',
	'{"id": "cs_o1", "status": "complete", "payment_status": "paid", "mode": "subscription", "customer": "cus_o1", "subscription": "sub_o1", "amount_total": 1999, "currency": "eur", "client_reference_id": "order-7"}');
SELECT id, status, customer, payment_intent, amount, amount_refunded, currency, refunded, disputed FROM webhook_inbox.stripe_charges WHERE source = 'ops_stripe';
SELECT id, status, charge, amount, currency, reason FROM webhook_inbox.stripe_refunds WHERE source = 'ops_stripe';
SELECT id, status, charge, amount, reason, evidence_due_by AT TIME ZONE 'UTC' AS evidence_due_by FROM webhook_inbox.stripe_disputes WHERE source = 'ops_stripe';
SELECT id, status, payment_status, mode, customer, subscription, amount_total, client_reference_id FROM webhook_inbox.stripe_checkout_sessions WHERE source = 'ops_stripe';

-- high availability: inbox_health says when a primary acknowledges commits without a
-- synchronous standby (this server has none; standbys are regress/t/520_ha_sync_failover.pl's)
SHOW webhook_inbox.require_synchronous_standby;
SELECT synchronous_standby, ha_warning FROM webhook_inbox.inbox_health;
SET webhook_inbox.require_synchronous_standby = on;
SELECT synchronous_standby, ha_warning FROM webhook_inbox.inbox_health;
SET webhook_inbox.require_synchronous_standby = 'sometimes';
SET ROLE webhook_inbox_reader;
SELECT ha_warning IS NOT NULL AS reader_sees_warning FROM webhook_inbox.inbox_health;
SET webhook_inbox.require_synchronous_standby = off;
RESET ROLE;
RESET webhook_inbox.require_synchronous_standby;
SELECT ha_warning FROM webhook_inbox.inbox_health;
