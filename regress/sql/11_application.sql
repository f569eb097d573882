-- webhook_inbox_application: the application's role reads the mirror through
-- the typed views and runs the effects outbox; it reads no table, no payload,
-- no secret, and cannot touch http effects or the inbox.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;
SELECT webhook_inbox.create_source('app_stripe', 'stripe', 'whsec_app') IS NOT NULL AS created;
INSERT INTO webhook_inbox.effect_rules (object_type, from_status, to_status, kind, request, owner)
VALUES ('subscription', 'trialing', 'active', 'app_welcome', '{"template": "welcome", "subscription": "{object_id}"}', 'operations');
SELECT webhook_inbox.upsert_object('app_stripe', 'subscription', 'sub_app', 1, 'trialing',
	'{"id": "sub_app", "customer": "cus_app", "items": {"data": [{"current_period_end": 1767225600}]}}');
SELECT webhook_inbox.upsert_object('app_stripe', 'subscription', 'sub_app', 2, 'active',
	'{"id": "sub_app", "customer": "cus_app", "items": {"data": [{"current_period_end": 1767225600}]}}');
CREATE ROLE wi_app_login LOGIN IN ROLE webhook_inbox_application;

-- what the role may do: exactly these
SELECT p.oid::regprocedure AS function FROM pg_proc p
 WHERE p.pronamespace = 'webhook_inbox'::regnamespace
   AND has_function_privilege('webhook_inbox_application', p.oid, 'EXECUTE') ORDER BY 1::text;
SELECT c.relname FROM pg_class c
 WHERE c.relnamespace = 'webhook_inbox'::regnamespace AND c.relkind IN ('r', 'v', 'p', 'm', 'S')
   AND has_table_privilege('webhook_inbox_application', c.oid, 'SELECT, INSERT, UPDATE, DELETE') ORDER BY 1;

SET ROLE wi_app_login;
-- the mirror, through the typed views
SELECT source, id, status, customer, current_period_end AT TIME ZONE 'UTC' AS period_end
  FROM webhook_inbox.stripe_subscriptions WHERE source = 'app_stripe';
SELECT name, kind, secrets, has_api_token FROM webhook_inbox.source_list WHERE name = 'app_stripe';
-- the outbox: its own kinds, under a lease and a fencing token
CREATE TEMP TABLE app_ob AS SELECT * FROM webhook_inbox.claim_effects('app', ARRAY['app_welcome'], 10, '1 minute');
SELECT kind, object_id, status, holder, request FROM app_ob;
SELECT webhook_inbox.complete_effect((SELECT id FROM app_ob), (SELECT claim_token FROM app_ob), 'done', 'sent');
SELECT * FROM webhook_inbox.claim_effects('app', ARRAY['http']);
-- no table, payload or secret; no event; no intake; no decision on an effect
SELECT payload FROM webhook_inbox.inbox LIMIT 1;
SELECT signing_secrets FROM webhook_inbox.sources LIMIT 1;
SELECT state FROM webhook_inbox.objects LIMIT 1;
SELECT request FROM webhook_inbox.effects LIMIT 1;
SELECT count(*) FROM webhook_inbox.inbox_events;
SELECT count(*) FROM webhook_inbox.queues;
SELECT * FROM webhook_inbox.receiver_sources();
SELECT webhook_inbox.intake('app_stripe', '{}', '{}');
SELECT webhook_inbox.upsert_object('app_stripe', 'subscription', 'sub_app', 3, 'canceled', '{}');
SELECT webhook_inbox.resolve_effect(1, 'done', 'x');
UPDATE webhook_inbox.effects SET status = 'done';
DROP TABLE app_ob;
RESET ROLE;
SELECT kind, status, response, holder FROM webhook_inbox.effects WHERE object_id = 'sub_app' ORDER BY id;
DROP ROLE wi_app_login;
-- out of the way of the files after this one, which count every enabled source's routes
UPDATE webhook_inbox.sources SET enabled = false WHERE name = 'app_stripe';
