-- intake(): ids by kind, dedupe, delivery audit, and hostile input.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;
CREATE FUNCTION wi_body(t text) RETURNS bytea LANGUAGE sql AS $$ SELECT convert_to(t, 'UTF8') $$;

-- Stripe: ids in the body
SELECT webhook_inbox.intake('stripe1', '{}', wi_body('{"id":"evt_1","type":"customer.subscription.updated","created":1700000000,"data":{"object":{"id":"sub_1","status":"active"}}}'));
SELECT webhook_inbox.intake('stripe1', '{}', wi_body('{"id":"evt_1","type":"customer.subscription.updated","created":1700000000,"data":{"object":{"id":"sub_1","status":"active"}}}'));
SELECT webhook_inbox.intake('stripe1', '{}', wi_body('{"id":"evt_2","type":"payment_intent.captured","created":1700000001,"data":{"object":{"id":"pi_1","status":"captured","amount":500}}}'));
SELECT webhook_inbox.intake('stripe1', '{}', wi_body('{"id":"evt_3","type":"refund.created","created":1700000002,"data":{"object":{"id":"re_1","amount":200,"currency":"eur"}}}'));
-- Stripe thin event: the related object is fetched
SELECT webhook_inbox.intake('stripe1', '{}', wi_body('{"id":"evt_4","object":"v2.core.event","type":"v1.customer.subscription.updated","created":"2026-01-01T00:00:00Z","related_object":{"id":"sub_2","type":"subscription","url":"/v1/subscriptions/sub_2"}}'));
-- an ignored type and an unknown type
SELECT webhook_inbox.intake('stripe1', '{}', wi_body('{"id":"evt_5","type":"invoice.upcoming"}'));
SELECT webhook_inbox.intake('stripe1', '{}', wi_body('{"id":"evt_6","type":"balance.available"}'));
-- Shopify: ids in headers, correlation id kept, updated_at as version
SELECT webhook_inbox.intake('shop1', ARRAY['X-Shopify-Webhook-Id', 'wh-1', 'X-Shopify-Topic', 'orders/updated', 'X-Shopify-Event-Id', 'ev-9'], wi_body('{"id":450789469001,"updated_at":"2026-01-01T10:00:05Z","financial_status":"paid"}'));
SELECT webhook_inbox.intake('shop1', ARRAY['x-shopify-webhook-id', 'wh-2', 'x-shopify-topic', 'orders/delete'], wi_body('{"id":450789469001}'));
-- a Shopify order without its version cannot be ordered
SELECT webhook_inbox.intake('shop1', ARRAY['x-shopify-webhook-id', 'wh-3', 'x-shopify-topic', 'orders/updated'], wi_body('{"id":1}'));
-- GitHub: delivery id header, event header plus action
SELECT webhook_inbox.intake('gh1', ARRAY['x-github-delivery', '72d3162e-cc78-11e3-81ab-4c9367dc0958', 'x-github-event', 'issues'], wi_body('{"action":"opened","issue":{"id":1,"state":"open","updated_at":"2026-01-01T00:00:00Z"}}'));
SELECT webhook_inbox.intake('gh1', ARRAY['x-github-delivery', 'd-2', 'x-github-event', 'ping'], wi_body('{"zen":"Keep it logically awesome."}'));
-- Standard Webhooks: webhook-id, or its svix- alias
SELECT webhook_inbox.intake('std1', ARRAY['webhook-id', 'msg_1', 'webhook-timestamp', '1614265330'], wi_body('{"type":"invoice.paid","timestamp":"2026-01-01T00:00:00Z","data":{"id":"in_1","object":"invoice","status":"paid"}}'));
SELECT webhook_inbox.intake('std1', ARRAY['svix-id', 'msg_2'], wi_body('{"type":"invoice.paid","data":{"id":"in_2","object":"invoice"}}'));
-- Razorpay, Slack, Paddle, Checkout, hmac
SELECT webhook_inbox.intake('rzp1', ARRAY['x-razorpay-event-id', 'rzp_evt_1'], wi_body('{"event":"payment.captured","created_at":1700000000,"payload":{"payment":{"entity":{"id":"pay_1","status":"captured"}}}}'));
SELECT webhook_inbox.intake('slack1', '{}', wi_body('{"type":"event_callback","event_id":"Ev1","event":{"type":"app_mention"}}'));
SELECT webhook_inbox.intake('paddle1', '{}', wi_body('{"event_id":"evt_01","event_type":"subscription.updated","occurred_at":"2026-01-01T00:00:00Z"}'));
SELECT webhook_inbox.intake('custom1', ARRAY['X-Event-Id', 'c-1'], wi_body('{"event":{"kind":"thing.changed"}}'));
SELECT event_id, event_type, object_type, object_id, strategy, provider_version, provider_time, status_value, correlation_id, status, reason
  FROM webhook_inbox.inbox ORDER BY id;

-- disabled and unknown sources, NULLs and malformed headers raise (the receiver answers 404 first)
SELECT webhook_inbox.intake('cko1', '{}', wi_body('{"id":"x","type":"y"}'));
SELECT webhook_inbox.intake('nosuch', '{}', wi_body('{}'));
SELECT webhook_inbox.intake('x''; DROP TABLE webhook_inbox.inbox; --', '{}', wi_body('{}'));
SELECT webhook_inbox.intake(NULL, '{}', wi_body('{}'));
SELECT webhook_inbox.intake('stripe1', NULL, wi_body('{}'));
SELECT webhook_inbox.intake('stripe1', '{}', NULL);
SELECT webhook_inbox.intake('stripe1', ARRAY['only-a-name'], wi_body('{}'));
SELECT webhook_inbox.intake('stripe1', ARRAY[['a', 'b'], ['c', 'd']], wi_body('{}'));
SELECT webhook_inbox.intake('stripe1', ARRAY[NULL, 'v'], wi_body('{}'));

-- hostile bodies are kept, never raise: the outcome, the reason, and whether the raw bytes are kept
CREATE TABLE hostile (label text, body bytea);
INSERT INTO hostile VALUES
	('empty', ''),
	('not json', wi_body('hello')),
	('invalid utf-8', '\x7b226964223a22c3'::bytea || '\x28227d'::bytea),
	('nul byte', '\x7b7d00'),
	('json with \u0000', wi_body('{"id":"evt_nul","type":"a","x":"\u0000"}')),
	('deep nesting', wi_body(repeat('[', 100000) || repeat(']', 100000))),
	('truncated', wi_body('{"id":"evt_t","type":"customer.subscription.updated"')),
	('array body', wi_body('[1,2,3]')),
	('no id', wi_body('{"type":"customer.subscription.updated"}')),
	('no type', wi_body('{"id":"evt_notype"}')),
	('empty id', wi_body('{"id":"","type":"x"}')),
	('object id missing', wi_body('{"id":"evt_noobj","type":"customer.subscription.updated","data":{}}')),
	('id is an object', wi_body('{"id":{"a":1},"type":"x"}')),
	('sql-looking ids', wi_body('{"id":"evt_''); DROP TABLE webhook_inbox.inbox; --","type":"customer.subscription.updated","data":{"object":{"id":"sub_''OR 1=1--","status":"active"}}}')),
	('huge number', wi_body('{"id":"evt_big","type":"x","n":1e1000000}')),
	('huge body', wi_body('{"id":"evt_huge","type":"customer.subscription.updated","data":{"object":{"id":"sub_huge","pad":"' || repeat('x', 5000000) || '"}}}'));
SELECT label, webhook_inbox.intake('stripe1', '{}', body) AS outcome FROM hostile ORDER BY label;
SELECT h.label, i.status, i.reason, i.raw_body IS NOT NULL AS raw_kept, i.raw_body = h.body AS raw_exact,
	   left(i.event_id, 7) AS event_id
  FROM hostile h JOIN webhook_inbox.inbox i ON i.body_sha256 = sha256(h.body)
 ORDER BY h.label;
-- a second delivery of the same bad bytes is a duplicate, not a second row
SELECT webhook_inbox.intake('stripe1', '{}', wi_body('hello'));
SELECT count(*) FROM webhook_inbox.inbox WHERE body_sha256 = sha256(wi_body('hello'));

-- every delivery is audited, duplicates included
SELECT outcome, count(*) FROM webhook_inbox.deliveries GROUP BY 1 ORDER BY 1;
SELECT d.event_id, d.outcome, d.body_size FROM webhook_inbox.deliveries d
 WHERE d.event_id IN ('evt_1', 'wh-1') ORDER BY d.id;
-- the receiver may pass its own delivery id
SELECT webhook_inbox.intake('stripe1', ARRAY['x-webhook-inbox-delivery', 'req-77'], wi_body('{"id":"evt_1","type":"customer.subscription.updated","data":{"object":{"id":"sub_1"}}}'));
SELECT delivery_id, outcome FROM webhook_inbox.deliveries WHERE delivery_id IS NOT NULL;

-- an event with an unknown type is kept and becomes processable once a route exists
SELECT status, reason FROM webhook_inbox.inbox WHERE event_id = 'evt_6';
INSERT INTO webhook_inbox.routes (source_kind, event_type, class, strategy, object_type, object_id_path)
VALUES ('stripe', 'balance.*', 'occurrence', 'occurrence', 'balance', '$.id');
SELECT webhook_inbox.reclassify((SELECT array_agg(id) FROM webhook_inbox.inbox WHERE event_id IN ('evt_6', 'evt_5')));
SELECT event_id, status, strategy, object_type, object_id FROM webhook_inbox.inbox WHERE event_id IN ('evt_5', 'evt_6') ORDER BY 1;
SELECT previous_status, previous_reason, note FROM webhook_inbox.requeues;
SELECT webhook_inbox.reclassify((SELECT array_agg(id) FROM webhook_inbox.inbox WHERE event_id = 'evt_6'));
SELECT webhook_inbox.reclassify(NULL);
DELETE FROM webhook_inbox.requeues;

-- ids that travel in headers dedupe even an unreadable body
SELECT webhook_inbox.intake('gh1', ARRAY['x-github-delivery', 'd-bad', 'x-github-event', 'issues'], '\xff00'::bytea);
SELECT webhook_inbox.intake('gh1', ARRAY['x-github-delivery', 'd-bad', 'x-github-event', 'issues'], '\xff00'::bytea);
SELECT webhook_inbox.intake('gh1', ARRAY['x-github-delivery', '', 'x-github-event', 'issues'], wi_body('not json'));
SELECT event_id, event_type, status, reason, raw_body FROM webhook_inbox.inbox
 WHERE source_id = (SELECT id FROM webhook_inbox.sources WHERE name = 'gh1') AND status = 'quarantined' ORDER BY id;
