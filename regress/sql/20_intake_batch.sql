-- intake_batch(): one call for many deliveries, each with its own outcome;
-- replay protection for schemes that sign only the body.  Runs last: the
-- rows it adds would change the counts the earlier files print.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;
CREATE FUNCTION wb(t text) RETURNS bytea LANGUAGE sql AS $$ SELECT convert_to(t, 'UTF8') $$;
SELECT webhook_inbox.create_source('bstripe', 'stripe', 'whsec_b') > 0 AS created;
SELECT webhook_inbox.create_source('bgh', 'github', 'gh-b') > 0 AS created;
SELECT webhook_inbox.create_source('bshop', 'shopify', 'shpss_b') > 0 AS created;
SELECT webhook_inbox.create_source('brzp', 'razorpay', 'rzp-b') > 0 AS created;
SELECT webhook_inbox.create_source('bcko', 'checkout', 'cko-b', enabled => false) > 0 AS created;
SELECT name, replay_window FROM webhook_inbox.sources WHERE name LIKE 'b%' ORDER BY name;
-- a route whose version path reads a field that is sometimes not a timestamp
INSERT INTO webhook_inbox.routes (source_kind, event_type, class, strategy, object_type, object_id_path, version_path)
VALUES ('stripe', 'gadget.*', 'state', 'version', 'gadget', '$.data.object.id', '$.data.object.changed');

-- one batch: valid, in-batch duplicate, unknown and disabled sources, an over-long id, a malformed
-- body, a route path that raises, a NULL source, a NULL body, a NULL header name, an empty body
SELECT * FROM webhook_inbox.intake_batch(
	ARRAY['bstripe', 'bstripe', 'nosuch', 'bcko', 'bgh', 'bstripe', 'bstripe', NULL, 'bstripe', 'bgh', 'bstripe', 'bstripe'],
	ARRAY[['x-webhook-inbox-delivery', 'b-1', NULL, NULL],
		  ['x-webhook-inbox-delivery', 'b-2', NULL, NULL],
		  [NULL, NULL, NULL, NULL],
		  [NULL, NULL, NULL, NULL],
		  ['x-github-delivery', repeat('d', 256), 'x-github-event', 'issues'],
		  [NULL, NULL, NULL, NULL],
		  [NULL, NULL, NULL, NULL],
		  [NULL, NULL, NULL, NULL],
		  [NULL, NULL, NULL, NULL],
		  [NULL, 'value', NULL, NULL],
		  [NULL, NULL, NULL, NULL],
		  [NULL, NULL, NULL, NULL]],
	ARRAY[wb('{"id":"evt_b1","type":"customer.subscription.updated","data":{"object":{"id":"sub_b1","status":"active"}}}'),
		  wb('{"id":"evt_b1","type":"customer.subscription.updated","data":{"object":{"id":"sub_b1","status":"active"}}}'),
		  wb('{}'),
		  wb('{"id":"x","type":"y"}'),
		  wb('{"action":"opened","issue":{"id":9}}'),
		  wb('{"id":"evt_b2", "type":'),
		  wb('{"id":"evt_b3","type":"gadget.updated","data":{"object":{"id":"g_1","changed":"not a time"}}}'),
		  wb('{}'),
		  NULL,
		  wb('{}'),
		  wb('{"id":"evt_b4","type":"gadget.updated","data":{"object":{"id":"g_2","changed":1700000000}}}'),
		  '']::bytea[]);
SELECT event_id, status, reason, object_id, provider_version FROM webhook_inbox.inbox
 WHERE event_id IN ('evt_b1', 'evt_b3', 'evt_b4') OR reason LIKE 'invalid_json: The input string ended%' ORDER BY event_id;
SELECT delivery_id, outcome FROM webhook_inbox.deliveries WHERE delivery_id LIKE 'b-%' ORDER BY delivery_id;
-- refused deliveries store nothing
SELECT count(*) FROM webhook_inbox.deliveries WHERE length(event_id) > 255;
-- the limits are bytes: 255 is accepted, 256 refused
SELECT * FROM webhook_inbox.intake_batch(ARRAY['bgh', 'bgh'],
	ARRAY[['x-github-delivery', repeat('e', 255), 'x-github-event', 'ping'], ['x-github-delivery', repeat('é', 128), 'x-github-event', 'ping']],
	ARRAY[wb('{"zen":"a"}'), wb('{"zen":"b"}')]);
SELECT * FROM webhook_inbox.intake_batch(ARRAY['bshop'],
	ARRAY[['x-shopify-webhook-id', 'wh-long-corr', 'x-shopify-topic', 'orders/updated', 'x-shopify-event-id', repeat('c', 300)]],
	ARRAY[wb('{"id":1,"updated_at":"2026-01-01T00:00:00Z"}')]);
SELECT * FROM webhook_inbox.intake_batch(ARRAY['bstripe'], '{}',
	ARRAY[wb('{"id":"evt_long_obj","type":"customer.subscription.updated","data":{"object":{"id":"' || repeat('o', 256) || '"}}}')]);
-- an empty batch, and a batch without headers
SELECT * FROM webhook_inbox.intake_batch('{}', '{}', '{}');
SELECT * FROM webhook_inbox.intake_batch(ARRAY['bstripe'], '{}', ARRAY[wb('{"id":"evt_b5","type":"refund.created","data":{"object":{"id":"re_b5"}}}')]);

-- malformed arrays are the caller's bug and raise
SELECT * FROM webhook_inbox.intake_batch(NULL, '{}', '{}');
SELECT * FROM webhook_inbox.intake_batch('{}', NULL, '{}');
SELECT * FROM webhook_inbox.intake_batch('{}', '{}', NULL);
SELECT * FROM webhook_inbox.intake_batch(ARRAY['bstripe'], '{}', '{}');
SELECT * FROM webhook_inbox.intake_batch(ARRAY[['bstripe']], '{}', ARRAY[[wb('{}')]]);
SELECT * FROM webhook_inbox.intake_batch(ARRAY['bstripe'], ARRAY['a', 'b'], ARRAY[wb('{}')]);
SELECT * FROM webhook_inbox.intake_batch(ARRAY['bstripe'], ARRAY[['a', 'b', 'c']], ARRAY[wb('{}')]);
SELECT * FROM webhook_inbox.intake_batch(ARRAY['bstripe', 'bstripe'], ARRAY[['a', 'b']], ARRAY[wb('{}'), wb('{}')]);
-- intake() refuses what the batch refuses, by raising
SELECT webhook_inbox.intake('bgh', ARRAY['x-github-delivery', repeat('d', 4000), 'x-github-event', 'issues'], wb('{}'));

-- replays: GitHub signs only the body; the same signed body under a fresh delivery id is a duplicate
SELECT * FROM webhook_inbox.intake_batch(ARRAY['bgh'], ARRAY[['x-github-delivery', 'gh-r1', 'x-github-event', 'issues']],
	ARRAY[wb('{"action":"closed","issue":{"id":77,"state":"closed","updated_at":"2026-02-01T00:00:00Z"}}')]);
SELECT * FROM webhook_inbox.intake_batch(ARRAY['bgh'], ARRAY[['x-github-delivery', 'gh-r2', 'x-github-event', 'issues']],
	ARRAY[wb('{"action":"closed","issue":{"id":77,"state":"closed","updated_at":"2026-02-01T00:00:00Z"}}')]);
SELECT webhook_inbox.intake('bgh', ARRAY['x-github-delivery', 'gh-r3', 'x-github-event', 'issues'],
	wb('{"action":"closed","issue":{"id":77,"state":"closed","updated_at":"2026-02-01T00:00:00Z"}}'));
-- Shopify: a body replayed under another topic is a duplicate, never an orders/delete
SELECT webhook_inbox.intake('bshop', ARRAY['x-shopify-webhook-id', 'wh-r1', 'x-shopify-topic', 'orders/updated'], wb('{"id":9001,"updated_at":"2026-02-01T00:00:00Z"}'));
SELECT webhook_inbox.intake('bshop', ARRAY['x-shopify-webhook-id', 'wh-r2', 'x-shopify-topic', 'orders/delete'], wb('{"id":9001,"updated_at":"2026-02-01T00:00:00Z"}'));
-- two copies in one batch: the first may be new, the second is its replay
SELECT * FROM webhook_inbox.intake_batch(ARRAY['brzp', 'brzp'],
	ARRAY[['x-razorpay-event-id', 'rzp-r1'], ['x-razorpay-event-id', 'rzp-r2']],
	ARRAY[wb('{"event":"payment.captured","payload":{"payment":{"entity":{"id":"pay_r","status":"captured"}}}}'),
		  wb('{"event":"payment.captured","payload":{"payment":{"entity":{"id":"pay_r","status":"captured"}}}}')]);
SELECT event_id, event_type, status FROM webhook_inbox.inbox WHERE event_id IN ('gh-r1', 'gh-r2', 'gh-r3', 'wh-r1', 'wh-r2', 'rzp-r1', 'rzp-r2') ORDER BY event_id;
SELECT event_id, outcome FROM webhook_inbox.deliveries WHERE event_id IN ('gh-r1', 'gh-r2', 'gh-r3', 'wh-r1', 'wh-r2', 'rzp-r1', 'rzp-r2') ORDER BY event_id;
-- Stripe signs a timestamp: the same body twice is deduplicated by its id, the digest is not recorded
SELECT count(*) FROM webhook_inbox.seen_bodies WHERE source_id = (SELECT id FROM webhook_inbox.sources WHERE name = 'bstripe');
-- once the window has passed the body is new again; a zero window turns the check off
UPDATE webhook_inbox.seen_bodies SET expires_at = now() - interval '1 second' WHERE event_id = 'gh-r1';
SELECT webhook_inbox.intake('bgh', ARRAY['x-github-delivery', 'gh-r4', 'x-github-event', 'issues'],
	wb('{"action":"closed","issue":{"id":77,"state":"closed","updated_at":"2026-02-01T00:00:00Z"}}'));
UPDATE webhook_inbox.sources SET replay_window = '0 seconds' WHERE name = 'bshop';
SELECT webhook_inbox.intake('bshop', ARRAY['x-shopify-webhook-id', 'wh-r3', 'x-shopify-topic', 'orders/updated'], wb('{"id":9001,"updated_at":"2026-02-01T00:00:00Z"}'));
\set VERBOSITY terse
UPDATE webhook_inbox.sources SET replay_window = '-1 day' WHERE name = 'bshop';
\set VERBOSITY default
UPDATE webhook_inbox.sources SET replay_window = '7 days' WHERE name = 'bshop';
-- prune drops digests whose window has passed
UPDATE webhook_inbox.seen_bodies SET expires_at = now() - interval '1 second' WHERE event_id = 'wh-r1';
SELECT deliveries_deleted >= 0 AS pruned FROM webhook_inbox.prune('30 days');
SELECT count(*) FROM webhook_inbox.seen_bodies WHERE event_id = 'wh-r1';

-- the receiver's role may call the batch form
SELECT has_function_privilege('webhook_inbox_receiver', 'webhook_inbox.intake_batch(text[], text[], bytea[])', 'EXECUTE');
SELECT has_function_privilege('public', 'webhook_inbox.intake_batch(text[], text[], bytea[])', 'EXECUTE');

-- the batch classification agrees with the one-event form for every preset
-- route of the kinds with a source here, on a payload that has every field
WITH c AS (
	SELECT s.id AS source_id, s.kind, replace(r.event_type, '*', 'x') AS event_type,
		   jsonb_build_object('id', 'evt_c', 'type', replace(r.event_type, '*', 'x'), 'created', 1700000000,
			   'data', jsonb_build_object('object', jsonb_build_object('id', 'o_1', 'object', 'thing',
				   'status', 'active', 'changed', 1700000001, 'updated_at', '2026-01-01T00:00:00Z',
				   'amount', 100, 'currency', 'usd')),
			   'issue', jsonb_build_object('id', 7, 'updated_at', '2026-01-01T00:00:00Z', 'state', 'open'),
			   'updated_at', '2026-01-01T00:00:00Z') AS payload
	  FROM webhook_inbox.routes r JOIN webhook_inbox.sources s ON s.kind = r.source_kind AND s.enabled
), b AS (
	SELECT * FROM webhook_inbox._classify_batch((SELECT array_agg(source_id ORDER BY event_type, kind) FROM c),
		(SELECT array_agg(kind ORDER BY event_type, kind) FROM c), (SELECT array_agg(event_type ORDER BY event_type, kind) FROM c),
		(SELECT array_agg(payload ORDER BY event_type, kind) FROM c))
)
SELECT count(*) AS compared,
	   count(*) FILTER (WHERE row(b.route_id, b.route_version, b.strategy, b.object_type, b.object_id, b.version,
			b.provider_time, b.status_value)::text IS DISTINCT FROM row(o.*)::text) AS differing
  FROM (SELECT c.*, row_number() OVER (ORDER BY event_type, kind) AS ord FROM c) c
  JOIN b ON b.ord = c.ord
 CROSS JOIN LATERAL webhook_inbox._classify(c.source_id, c.kind, c.event_type, c.payload) o;

-- the functions its statements read their rows from serve no one else
SELECT * FROM webhook_inbox._intake_inbox_rows(1);
SELECT * FROM webhook_inbox._intake_delivery_rows(NULL);
SELECT has_function_privilege('webhook_inbox_receiver', 'webhook_inbox._intake_inbox_rows(bigint)', 'EXECUTE');

-- the payload is built in the same pass that validates the body, and is the
-- jsonb that jsonb_in makes of it: scalars at the top, nesting, repeated
-- keys (the last wins), escapes, numbers with their scale and exponents
CREATE TEMP TABLE parse_cases (n int, body text);
INSERT INTO parse_cases VALUES
	(1, '"just a string"'), (2, '42'), (3, 'null'), (4, '[1, [2, {"a": null}], true, false]'),
	(5, '{"a": 1, "a": 2, "b": {"c": "\u00e9\n\"x\"\\", "d": []}, "e": {}}'),
	(6, '{"n": -1.5e3, "big": 123456789012345678901234567890, "z": 0.000, "e": 1E-7}'),
	(7, ' { "sp" : [ ] , "u" : "\ud83d\ude00" } '), (8, '[]'), (9, '{}'),
	-- keys to sort (by length, then bytes), repeats among them, ASCII
	-- escapes, numbers at their edges, whitespace
	(10, '{"zz": 1, "b": 2, "a": 3, "yy": [], "ccc": {"q": 1, "p": 2, "q": 3}, "a": 4}'),
	(11, E'{"s": "\\u0041\\u007e\\/\\b\\f\\r\\t", "k\\u0041": 1, "ünï": "cödé", "": 0}'),
	(12, E'\t[-0, 0.5, 10e+2, 2E-3, -12.5e3, 1.50, 0]\r\n'), (13, '"\u00e9 as an escape"'),
	(14, '[[[[{"deep": [true, false, null]}]]]]'),
	(15, (SELECT '{' || string_agg(format('"k%s": %s', 41 - i, i), ', ') || ', "k7": "last"}'
			FROM generate_series(1, 40) i));
SELECT count(*) FROM webhook_inbox.intake_batch(
	array_fill('bgh'::text, ARRAY[15]),
	(SELECT array_agg(ARRAY['x-github-delivery', 'parse-' || n, 'x-github-event', 'ping'] ORDER BY n) FROM parse_cases),
	(SELECT array_agg(wb(body) ORDER BY n) FROM parse_cases));
SELECT c.n, i.payload::text = c.body::jsonb::text AS same_as_jsonb_in, i.status <> 'quarantined' AS readable
  FROM parse_cases c JOIN webhook_inbox.inbox i ON i.event_id = 'parse-' || c.n
 WHERE i.source_id = (SELECT id FROM webhook_inbox.sources WHERE name = 'bgh')
 ORDER BY c.n;
-- what the parser refuses is quarantined with its reason, never half-built
SELECT outcome, reason FROM webhook_inbox.intake_batch(
	array_fill('bgh'::text, ARRAY[8]),
	(SELECT array_agg(ARRAY['x-github-delivery', 'parse-bad-' || n, 'x-github-event', 'ping'] ORDER BY n)
	   FROM generate_series(1, 8) n),
	ARRAY[wb('{"a": [1, 2, {"b": }]}'), wb('{"a": "\u0000"}'), wb('[1, 2] 3'), wb('[01]'),
		  wb('{"a": tru}'), wb('[1.]'), wb(E'["tab\tinside"]'), wb('[1, 2,]')]);
SELECT event_id, payload IS NULL AS no_payload, raw_body IS NOT NULL AS raw_kept FROM webhook_inbox.inbox
 WHERE event_id LIKE 'parse-bad-%' ORDER BY event_id;

-- inbox and deliveries are written as COPY writes rows (extension/bulk.c),
-- with their defaults and constraints; a constraint a user added holds
ALTER TABLE webhook_inbox.inbox ADD CONSTRAINT no_forbidden CHECK (event_id <> 'evt_forbidden');
\set VERBOSITY terse
SELECT * FROM webhook_inbox.intake_batch(ARRAY['bstripe', 'bstripe'], '{}',
	ARRAY[wb('{"id":"evt_t0","type":"refund.created","data":{"object":{"id":"re_t0"}}}'),
		  wb('{"id":"evt_forbidden","type":"refund.created","data":{"object":{"id":"re_t9"}}}')]);
\set VERBOSITY default
ALTER TABLE webhook_inbox.inbox DROP CONSTRAINT no_forbidden;
SELECT count(*) FROM webhook_inbox.inbox WHERE event_id IN ('evt_t0', 'evt_forbidden');
-- the defaults a session's batches keep follow a change of them
ALTER TABLE webhook_inbox.deliveries ALTER COLUMN received_at SET DEFAULT '2001-02-03 04:05:06+00';
SELECT outcome FROM webhook_inbox.intake_batch(ARRAY['bstripe'], '{}',
	ARRAY[wb('{"id":"evt_t0","type":"refund.created","data":{"object":{"id":"re_t0"}}}')]);
ALTER TABLE webhook_inbox.deliveries ALTER COLUMN received_at SET DEFAULT now();
SELECT outcome FROM webhook_inbox.intake_batch(ARRAY['bstripe'], '{}',
	ARRAY[wb('{"id":"evt_t0","type":"refund.created","data":{"object":{"id":"re_t0"}}}')]);
SELECT outcome, received_at = '2001-02-03 04:05:06+00' AS set_default, received_at > now() - interval '1 hour' AS now_again
  FROM webhook_inbox.deliveries WHERE event_id = 'evt_t0' ORDER BY id;
-- a table with triggers is written by INSERT statements, which run them as
-- INSERT does (a BEFORE trigger of the inbox also sees the rows that ON
-- CONFLICT then skips); the outcomes are the same either way
CREATE TABLE trig_seen (tbl text, event_id text, outcome text);
CREATE FUNCTION trig_note() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.trig_seen VALUES (TG_TABLE_NAME, NEW.event_id, to_jsonb(NEW) ->> 'outcome');
	RETURN NEW;
END $$;
CREATE FUNCTION trig_batch(n text) RETURNS TABLE (ord integer, outcome text) LANGUAGE sql AS $$
	SELECT ord, outcome FROM webhook_inbox.intake_batch(ARRAY['bstripe', 'bstripe', 'bstripe', 'bstripe'], '{}',
		ARRAY[wb('{"id":"evt_t' || n || '","type":"refund.created","data":{"object":{"id":"re_t1"}}}'),
			  wb('{"id":"evt_b1","type":"customer.subscription.updated","data":{"object":{"id":"sub_b1"}}}'),
			  wb('{"id":"evt_u' || n || '","type":"refund.created","data":{"object":{"id":"re_t2"}}}'),
			  wb('{"id":"evt_t' || n || '","type":"refund.created","data":{"object":{"id":"re_t1"}}}')])
$$;
SELECT * FROM trig_batch('1');
CREATE TRIGGER note_inbox BEFORE INSERT ON webhook_inbox.inbox FOR EACH ROW EXECUTE FUNCTION trig_note();
CREATE TRIGGER note_deliveries AFTER INSERT ON webhook_inbox.deliveries FOR EACH ROW EXECUTE FUNCTION trig_note();
SELECT * FROM trig_batch('2');
SELECT * FROM trig_seen ORDER BY tbl DESC, event_id, outcome;
DROP TRIGGER note_inbox ON webhook_inbox.inbox;
DROP TRIGGER note_deliveries ON webhook_inbox.deliveries;
SELECT event_id, status, count(*) FROM webhook_inbox.inbox
 WHERE event_id IN ('evt_t1', 'evt_u1', 'evt_t2', 'evt_u2') GROUP BY 1, 2 ORDER BY 1;
SELECT event_id, string_agg(outcome, ',' ORDER BY id) FROM webhook_inbox.deliveries
 WHERE event_id IN ('evt_t1', 'evt_u1', 'evt_t2', 'evt_u2') GROUP BY 1 ORDER BY 1;

-- inbox and deliveries refer to their source without a foreign key; the
-- source cannot be deleted, renumbered or truncated away while they do
\set VERBOSITY terse
DELETE FROM webhook_inbox.sources WHERE name = 'bgh';
UPDATE webhook_inbox.sources SET id = id + 1000 WHERE name = 'bgh';
TRUNCATE webhook_inbox.sources CASCADE;
\set VERBOSITY default
SELECT count(*) FROM webhook_inbox.sources WHERE name = 'bgh';
-- other changes of a referenced source, and deleting an unreferenced one, go through
UPDATE webhook_inbox.sources SET enabled = enabled WHERE name = 'bgh';
SELECT webhook_inbox.create_source('bunused', 'github', 'gh-u') > 0 AS created;
DELETE FROM webhook_inbox.sources WHERE name = 'bunused';
SELECT count(*) FROM webhook_inbox.sources WHERE name = 'bunused';
