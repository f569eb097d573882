-- Effects: rules fire once per transition; approved operations; the outbox; resolutions.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;
SELECT webhook_inbox.create_source('eff', 'stripe', 'whsec_e', api_base => 'http://127.0.0.1:1') AS id;

-- "send the payment-failed email only on active -> past_due, once"
INSERT INTO webhook_inbox.effect_rules (object_type, from_status, to_status, kind, request, owner)
VALUES ('subscription', 'active', 'past_due', 'email', '{"template": "payment_failed", "subscription": "{object_id}"}', 'operations'),
	   ('payment', '*', 'refunded', 'ledger', '{}', 'finance');
SELECT webhook_inbox.upsert_object('eff', 'subscription', 'sub_e', 1, 'active', '{}');
SELECT webhook_inbox.upsert_object('eff', 'subscription', 'sub_e', 2, 'past_due', '{}');
-- duplicate, late and replayed events apply no transition, so fire nothing
SELECT webhook_inbox.upsert_object('eff', 'subscription', 'sub_e', 2, 'past_due', '{}');
SELECT webhook_inbox.upsert_object('eff', 'subscription', 'sub_e', 1, 'active', '{}');
SELECT webhook_inbox.upsert_object('eff', 'subscription', 'sub_e', 3, 'canceled', '{}');
SELECT webhook_inbox.upsert_object('eff', 'subscription', 'sub_e', 2, 'past_due', '{}');
SELECT kind, object_id, status, owner, request, idempotency_key LIKE 'wi-%' AS stable_key
  FROM webhook_inbox.effects ORDER BY id;
-- machines fire rules too, from any state with *
SELECT webhook_inbox.apply_transition('eff', 'payment', 'pi_e', 'payment', 'captured');
SELECT webhook_inbox.apply_transition('eff', 'payment', 'pi_e', 'payment', 'refunded');
SELECT webhook_inbox.apply_transition('eff', 'payment', 'pi_e', 'payment', 'refunded');
SELECT webhook_inbox.apply_transition('eff', 'payment', 'pi_e', 'payment', 'settled');
SELECT kind, object_id, count(*) FROM webhook_inbox.effects GROUP BY 1, 2 ORDER BY 1;
-- a rule that fires in a rolled-back transaction leaves nothing
BEGIN;
SELECT webhook_inbox.upsert_object('eff', 'subscription', 'sub_r', 1, 'active', '{}');
SELECT webhook_inbox.upsert_object('eff', 'subscription', 'sub_r', 2, 'past_due', '{}');
ROLLBACK;
SELECT count(*) FROM webhook_inbox.effects WHERE object_id = 'sub_r';

-- approved operations: same key and request is the same effect; another request is refused
SELECT webhook_inbox.request_effect('refund:order-1:approval-1', 'http',
	'{"method": "POST", "path": "/v1/refunds", "body": {"payment_intent": "pi_e", "amount": 500}}',
	source => 'eff', owner => 'finance', amount => 500, ceiling_group => 'pi_e', ceiling => 1000) AS first;
SELECT webhook_inbox.request_effect('refund:order-1:approval-1', 'http',
	'{"method": "POST", "path": "/v1/refunds", "body": {"payment_intent": "pi_e", "amount": 500}}',
	source => 'eff', owner => 'finance', amount => 500, ceiling_group => 'pi_e', ceiling => 1000) AS same;
SELECT webhook_inbox.request_effect('refund:order-1:approval-1', 'http',
	'{"method": "POST", "path": "/v1/refunds", "body": {"payment_intent": "pi_e", "amount": 600}}',
	source => 'eff', owner => 'finance', amount => 600, ceiling_group => 'pi_e', ceiling => 1000);
-- a second refund within the ceiling is a second operation; beyond it, refused
SELECT webhook_inbox.request_effect('refund:order-1:approval-2', 'http',
	'{"method": "POST", "path": "/v1/refunds", "body": {"payment_intent": "pi_e", "amount": 500}}',
	source => 'eff', owner => 'finance', amount => 500, ceiling_group => 'pi_e', ceiling => 1000) AS second;
SELECT webhook_inbox.request_effect('refund:order-1:approval-3', 'http',
	'{"method": "POST", "path": "/v1/refunds", "body": {"payment_intent": "pi_e", "amount": 1}}',
	source => 'eff', owner => 'finance', amount => 1, ceiling_group => 'pi_e', ceiling => 1000);
SELECT effect_key, status, idempotency_key, amount FROM webhook_inbox.effects WHERE kind = 'http' ORDER BY id;
-- bad requests
SELECT webhook_inbox.request_effect('', 'http', '{}');
SELECT webhook_inbox.request_effect('k', 'HTTP!', '{}');
SELECT webhook_inbox.request_effect('k', 'http', '[]');
SELECT webhook_inbox.request_effect('k', 'http', '{"method": "POST"}', source => 'eff');
SELECT webhook_inbox.request_effect('k', 'http', '{"method": "POST", "path": "v1/refunds"}', source => 'eff');
SELECT webhook_inbox.request_effect('k', 'http', '{"method": "POST", "path": "/v1/refunds"}');
SELECT webhook_inbox.request_effect('k', 'http', '{"method": "POST", "path": "/v1/refunds"}', source => 'nosuch');
SELECT webhook_inbox.request_effect('k', 'email', '{}', owner => 'marketing');
SELECT webhook_inbox.request_effect('k', 'email', '{}', ceiling => 10);
SELECT webhook_inbox.request_effect('k', 'email', '{}', idempotency_key => repeat('x', 300));
SELECT webhook_inbox.request_effect('k', 'email', '{}', idempotency_key => E'k\r\nX-Injected: 1');
SELECT webhook_inbox.request_effect(E'k\n', 'email', '{}');

-- rule templates: placeholders filled inside string values only; ids never add keys
SELECT webhook_inbox._effect_fill('{"path": "/v1/o/{object_id}", "body": {"id": "{object_id}", "{to}": "{from}->{to}"}}', '{"object_id": "a\",\"path\":\"@evil/x", "from": "", "to": "paid"}', true);
SELECT webhook_inbox._effect_fill('["{object_id}", 1, null, {"k": "{object_type}{to}"}]', '{"object_id": "{to}", "object_type": "order", "to": "paid"}');
-- Stripe's form encoding, as stripe-node writes it
SELECT webhook_inbox._form_encode('{"amount": 500, "metadata": {"order": "a b&c=d", "x": null}, "expand": ["charge", "customer"], "capture": true, "empty": {}}');
-- what is refused before sending
SELECT webhook_inbox._effect_refusal('POST', '/v1/refunds', 'application/json', 'k', 'Authorization', 'Bearer x') IS NULL AS ok;
SELECT webhook_inbox._effect_refusal('post', '/v1/refunds', NULL, 'k', NULL, NULL);
SELECT webhook_inbox._effect_refusal('POST', '//evil.example/x', NULL, 'k', NULL, NULL);
SELECT webhook_inbox._effect_refusal('POST', '/v1/a b', NULL, 'k', NULL, NULL);
SELECT webhook_inbox._effect_refusal('POST', '/v1/x', NULL, E'k\r\nX: 1', NULL, NULL);
SELECT webhook_inbox._effect_refusal('POST', '/v1/x', NULL, 'k', 'X-Key:', 'v');
SELECT webhook_inbox._effect_refusal('POST', '/v1/x', NULL, 'k', 'X-Key', E'v\n');
SELECT webhook_inbox._effect_refusal('POST', '/v1/x', E'text/plain\r\n', 'k', NULL, NULL);
-- how long a provider keeps idempotency keys
SELECT webhook_inbox._effect_key_retention('stripe', '{}');
SELECT webhook_inbox._effect_key_retention('github', '{}');
SELECT webhook_inbox._effect_key_retention('github', '{"effects": {"key_retention": "2 hours"}}');
SELECT webhook_inbox._effect_key_retention('stripe', '{"effects": {"key_retention": "soon"}}');

-- the outbox: local consumers claim their kinds under a fencing token
CREATE TEMP TABLE ob AS SELECT id, claim_token, kind, attempts FROM webhook_inbox.claim_effects('mailer', ARRAY['email'], 10, '1 minute');
SELECT kind, attempts FROM ob;
SELECT count(*) FROM webhook_inbox.claim_effects('mailer2', ARRAY['email']);
SELECT webhook_inbox.complete_effect((SELECT id FROM ob), (SELECT claim_token FROM ob) + 1);
SELECT webhook_inbox.complete_effect((SELECT id FROM ob), (SELECT claim_token FROM ob), 'done', 'queued as msg 42');
SELECT webhook_inbox.complete_effect((SELECT id FROM ob), (SELECT claim_token FROM ob), 'done');
SELECT webhook_inbox.complete_effect((SELECT id FROM ob), (SELECT claim_token FROM ob), 'maybe');
SELECT status, response FROM webhook_inbox.effects WHERE id = (SELECT id FROM ob);
SELECT * FROM webhook_inbox.claim_effects('w', ARRAY['http']);
SELECT * FROM webhook_inbox.claim_effects('', ARRAY['email']);
SELECT * FROM webhook_inbox.claim_effects('w', ARRAY['email'], 0);

-- resolutions are for unresolved effects, need a note, and are audited
UPDATE webhook_inbox.effects SET status = 'quarantined', reason = 'uncertain: test', uncertain_since = now() - interval '2 hours'
 WHERE effect_key = 'refund:order-1:approval-2';
SELECT effect_key, status, owner, reason, age >= '2 hours' AS aged FROM webhook_inbox.effects_unresolved;
SELECT pending, done, quarantined, oldest_unresolved_age >= '2 hours' AS aged FROM webhook_inbox.effects_health;
SELECT webhook_inbox.resolve_effect((SELECT id FROM webhook_inbox.effects WHERE effect_key = 'refund:order-1:approval-2'), 'done', '');
SELECT webhook_inbox.resolve_effect((SELECT id FROM webhook_inbox.effects WHERE effect_key = 'refund:order-1:approval-2'), 'forget', 'x');
SELECT webhook_inbox.resolve_effect((SELECT id FROM webhook_inbox.effects WHERE effect_key = 'refund:order-1:approval-1'), 'done', 'x');
SELECT webhook_inbox.resolve_effect(-1, 'done', 'x');
SELECT webhook_inbox.resolve_effect((SELECT id FROM webhook_inbox.effects WHERE effect_key = 'refund:order-1:approval-2'), 'done', 'refund re_123 seen in the provider dashboard');
SELECT previous_status, outcome, note, resolved_by = current_user AS by_me FROM webhook_inbox.effect_resolutions;
SELECT count(*) FROM webhook_inbox.effects_unresolved;

-- run_effects commits between its steps: not inside a transaction block
BEGIN;
CALL webhook_inbox.run_effects();
ROLLBACK;
CALL webhook_inbox.run_effects(0);
-- a provider that cannot be reached: nothing was sent, so the effect stays pending
CALL webhook_inbox.run_effects();
SELECT effect_key, status, attempts, reason FROM webhook_inbox.effects WHERE kind = 'http' ORDER BY id;
SELECT action, outcome, error FROM webhook_inbox.effect_attempts ORDER BY id;

-- a claim records the attempt and holds the effect under a lease; Stripe bodies are form-encoded
UPDATE webhook_inbox.effects SET next_attempt_at = now() WHERE kind = 'http' AND status = 'pending';
CREATE TEMP TABLE cl AS SELECT * FROM webhook_inbox._effects_claim('t', 10, '15 seconds', 5, '10 seconds');
SELECT action, method, url, content_type, body FROM cl;
-- just before sending: a lease that still covers a request is sent; one that would end first is given back
SELECT webhook_inbox._effects_check((SELECT effect_id FROM cl), (SELECT token FROM cl), '10 seconds');
SELECT webhook_inbox._effects_check((SELECT effect_id FROM cl), (SELECT token FROM cl), '20 seconds');
SELECT status, attempts, claim_token IS NULL AS released FROM webhook_inbox.effects WHERE id = (SELECT effect_id FROM cl);
SELECT outcome, error FROM webhook_inbox.effect_attempts WHERE claim_token = (SELECT token FROM cl);
-- and a claim that is no longer current sends nothing
SELECT webhook_inbox._effects_check((SELECT effect_id FROM cl), (SELECT token FROM cl), '10 seconds');
