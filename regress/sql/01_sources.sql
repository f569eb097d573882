-- Sources: creation, validation, rotation, and who may read secrets.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;

-- valid sources of every kind
SELECT webhook_inbox.create_source('stripe1', 'stripe', 'whsec_test') AS id;
SELECT webhook_inbox.create_source('shop1', 'shopify', 'shpss_secret', api_base => 'http://127.0.0.1:1') AS id;
SELECT webhook_inbox.create_source('gh1', 'github', 'gh-secret') AS id;
SELECT webhook_inbox.create_source('std1', 'standard', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw') AS id;
SELECT webhook_inbox.create_source('rzp1', 'razorpay', 'rzp-secret') AS id;
SELECT webhook_inbox.create_source('slack1', 'slack', 'slack-secret') AS id;
SELECT webhook_inbox.create_source('paddle1', 'paddle', 'pdl-secret') AS id;
SELECT webhook_inbox.create_source('cko1', 'checkout', 'cko-secret') AS id;
SELECT webhook_inbox.create_source('custom1', 'hmac', 'raw-secret',
	settings => '{"header": "X-Sig", "event_id_header": "X-Event-Id", "event_type_path": "event.kind"}') AS id;
SELECT name, kind, cardinality(signing_secrets) AS secrets, tolerance, enabled FROM webhook_inbox.sources ORDER BY id;

-- every bad argument gets a clear error
SELECT webhook_inbox.create_source('bad', 'paypal', 'x');
SELECT webhook_inbox.create_source('bad', NULL, 'x');
SELECT webhook_inbox.create_source('bad', 'stripe', '');
SELECT webhook_inbox.create_source('bad', 'stripe', NULL);
SELECT webhook_inbox.create_source('stripe1', 'stripe', 'whsec_other');
SELECT webhook_inbox.create_source('has/slash', 'stripe', 'x');
SELECT webhook_inbox.create_source('', 'stripe', 'x');
SELECT webhook_inbox.create_source(repeat('a', 64), 'stripe', 'x');
SELECT webhook_inbox.create_source('x''; DROP TABLE webhook_inbox.inbox; --', 'stripe', 'x');
SELECT webhook_inbox.create_source('bad', 'stripe', 'x', tolerance => '-1 second');
SELECT webhook_inbox.create_source('bad', 'stripe', 'x', tolerance => '2 days');
SELECT webhook_inbox.create_source('bad', 'stripe', 'x', api_base => 'ftp://example.com');
SELECT webhook_inbox.create_source('bad', 'stripe', 'x', settings => '[1, 2]');
SELECT webhook_inbox.create_source('bad', 'hmac', 'x');
SELECT webhook_inbox.create_source('bad', 'standard', 'whsec_not base64!');
SELECT count(*) AS sources_after_errors FROM webhook_inbox.sources;

-- rotation: old and new both current until the old is retired
SELECT webhook_inbox.rotate_secret('stripe1', 'whsec_next');
SELECT signing_secrets FROM webhook_inbox.sources WHERE name = 'stripe1';
SELECT webhook_inbox.rotate_secret('stripe1', 'whsec_next');
SELECT webhook_inbox.rotate_secret('stripe1', '');
SELECT webhook_inbox.rotate_secret('nosuch', 'x');
SELECT webhook_inbox.retire_secret('stripe1', 'whsec_test');
SELECT signing_secrets FROM webhook_inbox.sources WHERE name = 'stripe1';
SELECT webhook_inbox.retire_secret('stripe1', 'whsec_next');
SELECT webhook_inbox.retire_secret('stripe1', 'whsec_never');
SELECT webhook_inbox.retire_secret('nosuch', 'x');

-- what the receiver loads: enabled sources only, and of settings only the hmac verification keys
UPDATE webhook_inbox.sources SET enabled = false WHERE name = 'cko1';
SELECT name, kind, signing_secrets, tolerance_seconds, settings FROM webhook_inbox.receiver_sources();

-- privileges: PUBLIC reads nothing; the receiver role may call intake and receiver_sources only
CREATE ROLE wi_regress_receiver LOGIN IN ROLE webhook_inbox_receiver;
CREATE ROLE wi_regress_nobody LOGIN;
SET ROLE wi_regress_nobody;
SELECT * FROM webhook_inbox.sources;
SELECT * FROM webhook_inbox.receiver_sources();
SELECT webhook_inbox.intake('stripe1', '{}', '\x7b7d');
RESET ROLE;
SET ROLE wi_regress_receiver;
SELECT signing_secrets FROM webhook_inbox.sources;
SELECT * FROM webhook_inbox.inbox;
SELECT count(*) AS visible_sources FROM webhook_inbox.receiver_sources();
SELECT webhook_inbox.intake('stripe1', '{}', convert_to('{"id":"evt_role","type":"ping"}', 'UTF8'));
SELECT webhook_inbox.claim('w', 1, '1 minute');
SELECT webhook_inbox.create_source('evil', 'stripe', 'x');
RESET ROLE;
SELECT count(*) AS routines_public_may_execute FROM pg_proc p
 WHERE p.pronamespace = 'webhook_inbox'::regnamespace AND has_function_privilege('public', p.oid, 'EXECUTE');
SELECT p.proname FROM pg_proc p WHERE p.pronamespace = 'webhook_inbox'::regnamespace
   AND has_function_privilege('webhook_inbox_receiver', p.oid, 'EXECUTE') ORDER BY 1;

DROP ROLE wi_regress_receiver;
DROP ROLE wi_regress_nobody;

-- every object of the extension is commented
SELECT c.relname FROM pg_class c WHERE c.relnamespace = 'webhook_inbox'::regnamespace
   AND c.relkind IN ('r', 'v', 'S') AND c.relname NOT LIKE '%_id_seq'
   AND obj_description(c.oid, 'pg_class') IS NULL;
SELECT p.proname FROM pg_proc p WHERE p.pronamespace = 'webhook_inbox'::regnamespace
   AND obj_description(p.oid, 'pg_proc') IS NULL;
