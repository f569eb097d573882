-- _save_fetched_batch(): a batch of fetched answers decided and saved
-- set-based, each by the rules of a single save: applied, duplicate, stale,
-- fenced, a tie resolved by the present, a first 404 deferred and the
-- second confirmed as a tombstone, an unreadable body retried; events that
-- arrived before a request left are covered by its answer; effects fire
-- once per transition.  Then its bad arguments.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;
-- in one transaction, rolled back at the end; other tests' events are set aside
BEGIN;
SET LOCAL webhook_inbox.tombstone_confirm_delay = '60s';
SELECT webhook_inbox.create_source('sb', 'stripe', 'whsec_sb', api_base => 'http://127.0.0.1:9') IS NOT NULL AS created;
UPDATE webhook_inbox.inbox SET next_attempt_at = now() + interval '1 day'
 WHERE status IN ('pending', 'retry') AND source_id <> (SELECT id FROM webhook_inbox.sources WHERE name = 'sb');
CREATE FUNCTION sb_event(id text, obj text) RETURNS text LANGUAGE sql AS $$
	SELECT webhook_inbox.intake('sb', '{}', convert_to(format(
		'{"id":"%s","type":"customer.subscription.updated","created":1767225600,"data":{"object":{"id":"%s","status":"active"}}}',
		id, obj), 'UTF8'))
$$;
-- what the mirror holds before: sub_dup as the answer will be, sub_old and sub_tie at version 5, sub_gone active
SELECT webhook_inbox.upsert_object('sb', 'subscription', 'sub_dup', NULL, 'active', '{"id":"sub_dup","status":"active"}'),
	   webhook_inbox.upsert_object('sb', 'subscription', 'sub_old', 5, 'active', '{"id":"sub_old","status":"active","v":5}'),
	   webhook_inbox.upsert_object('sb', 'subscription', 'sub_tie', 5, 'active', '{"id":"sub_tie","status":"active","v":5}'),
	   webhook_inbox.upsert_object('sb', 'subscription', 'sub_gone', NULL, 'active', '{"id":"sub_gone","status":"active"}');
INSERT INTO webhook_inbox.effect_rules (object_type, from_status, to_status, kind)
VALUES ('subscription', 'active', 'past_due', 'sb_dunning');
SELECT sb_event('evt_' || o, o)
  FROM unnest(ARRAY['sub_new', 'sub_dup', 'sub_old', 'sub_tie', 'sub_fen', 'sub_gone', 'sub_bad']) o;
CREATE TEMP TABLE sb_c AS SELECT object_id, claim_token FROM webhook_inbox.claim('sb', 20, '30 seconds', '0');
SELECT object_id FROM sb_c ORDER BY 1;
SELECT outcome, sum(events) AS events FROM webhook_inbox._work_round((SELECT array_agg(claim_token) FROM sb_c))
 GROUP BY 1 ORDER BY 1;
-- an event of sub_new arrives while its fetch is in flight, before the request left
SELECT sb_event('evt_sub_new_2', 'sub_new');
-- sub_fen was saved meanwhile under a newer token: its claim's save is fenced
INSERT INTO webhook_inbox.objects (source_id, object_type, object_id, status, state, fence_token)
SELECT id, 'subscription', 'sub_fen', 'active', '{"id":"sub_fen"}', (SELECT claim_token FROM sb_c WHERE object_id = 'sub_fen') + 1000
  FROM webhook_inbox.sources WHERE name = 'sb';

-- the batch: one answer per claim, in one call
CREATE TEMP TABLE sb_answers (object_id text, http integer, body text);
INSERT INTO sb_answers VALUES
	('sub_new', 200, '{"sub":{"id":"sub_new","status":"trialing","v":1}}'),
	('sub_dup', 200, '{"sub":{"id":"sub_dup","status":"active"}}'),
	('sub_old', 200, '{"sub":{"id":"sub_old","status":"canceled","v":3}}'),
	('sub_tie', 200, '{"sub":{"id":"sub_tie","status":"past_due","v":5}}'),
	('sub_fen', 200, '{"sub":{"id":"sub_fen","status":"canceled"}}'),
	('sub_gone', 404, '{"error":{"type":"invalid_request_error"}}'),
	('sub_bad', 200, 'not json');
SELECT a.object_id, b.outcome
  FROM webhook_inbox._save_fetched_batch(
		(SELECT array_agg(c.claim_token ORDER BY a.object_id) FROM sb_answers a JOIN sb_c c USING (object_id)),
		(SELECT array_agg(a.http ORDER BY a.object_id) FROM sb_answers a),
		(SELECT array_agg(a.body ORDER BY a.object_id) FROM sb_answers a),
		array_fill('$.sub'::jsonpath, ARRAY[7]), array_fill('$.status'::jsonpath, ARRAY[7]),
		array_fill('$.v'::jsonpath, ARRAY[7]), array_fill(now() + interval '1 second', ARRAY[7])) b
  JOIN sb_c c ON c.claim_token = b.token JOIN sb_answers a USING (object_id)
 ORDER BY 1;
-- the mirror: sub_new applied, sub_tie resolved in favour of the present at the stored version,
-- sub_old and sub_dup unchanged, sub_fen left to the newer save, sub_gone only noted
SELECT object_id, status, version, deleted, state, tombstone_pending_since IS NOT NULL AS pending_tombstone
  FROM webhook_inbox.objects o WHERE source_id = (SELECT id FROM webhook_inbox.sources WHERE name = 'sb')
 ORDER BY object_id;
SELECT object_id, coalesce(from_status, '-') || '>' || to_status AS transition, version, cause
  FROM webhook_inbox.transitions WHERE source_id = (SELECT id FROM webhook_inbox.sources WHERE name = 'sb')
 ORDER BY id;
SELECT kind, object_id, request FROM webhook_inbox.effects WHERE kind = 'sb_dunning';
SELECT event_id, status, reason, attempts FROM webhook_inbox.inbox
 WHERE source_id = (SELECT id FROM webhook_inbox.sources WHERE name = 'sb') ORDER BY event_id;
-- the saved claims ended; the fenced one is its holder's, the deferred one and the retried one given back
SELECT c.object_id FROM webhook_inbox.object_leases l JOIN sb_c c ON c.claim_token = l.token ORDER BY 1;

-- sub_gone's 404 again, confirm_delay later: the tombstone, which the confirmation names
UPDATE webhook_inbox.objects SET tombstone_pending_since = now() - interval '2 minutes' WHERE object_id = 'sub_gone';
UPDATE webhook_inbox.inbox SET next_attempt_at = now() WHERE event_id = 'evt_sub_gone';
CREATE TEMP TABLE sb_c2 AS SELECT object_id, claim_token FROM webhook_inbox.claim('sb', 20, '30 seconds', '0')
 WHERE object_id = 'sub_gone';
SELECT outcome FROM webhook_inbox._work_round((SELECT array_agg(claim_token) FROM sb_c2));
SELECT b.outcome FROM webhook_inbox._save_fetched_batch((SELECT array_agg(claim_token) FROM sb_c2), '{410}', '{""}',
	'{NULL}', '{NULL}', '{NULL}', '{NULL}') b;
SELECT object_id, status, deleted, tombstone_pending_since IS NOT NULL AS pending_tombstone FROM webhook_inbox.objects
 WHERE object_id = 'sub_gone';
SELECT coalesce(from_status, '-') || '>' || to_status AS transition, cause FROM webhook_inbox.transitions
 WHERE object_id = 'sub_gone' ORDER BY id DESC LIMIT 1;
SELECT event_id, status, reason FROM webhook_inbox.inbox WHERE event_id = 'evt_sub_gone';
-- a token no longer current (its claim ended) is fenced, and so is the one-answer form with no token
SELECT b.outcome FROM webhook_inbox._save_fetched_batch((SELECT array_agg(claim_token) FROM sb_c2), '{200}', '{"{}"}',
	'{NULL}', '{NULL}', '{NULL}', '{NULL}') b;
SELECT webhook_inbox._save_fetched(NULL, 200, '{}', '$', NULL, NULL);
-- an empty batch saves nothing
SELECT count(*) FROM webhook_inbox._save_fetched_batch('{}', '{}', '{}', '{}', '{}', '{}', '{}');

ROLLBACK;

-- bad arguments
SELECT * FROM webhook_inbox._save_fetched_batch('{1,2}', '{200}', '{x,y}', '{NULL,NULL}', '{NULL,NULL}', '{NULL,NULL}', '{NULL,NULL}');
SELECT * FROM webhook_inbox._save_fetched_batch('{1}', '{200}', '{x}', '{NULL}', '{NULL}', '{NULL}', '{NULL,NULL}');
SELECT * FROM webhook_inbox._save_fetched_batch(NULL, '{200}', '{x}', '{NULL}', '{NULL}', '{NULL}', '{NULL}');
SELECT * FROM webhook_inbox._save_fetched_batch('{1}', '{200}', '{x}', '{NULL}', '{NULL}', '{NULL}', NULL);
SELECT * FROM webhook_inbox._save_fetched_batch('{NULL}', '{200}', '{x}', '{NULL}', '{NULL}', '{NULL}', '{NULL}');
SELECT * FROM webhook_inbox._save_fetched_batch('{1}', '{NULL}', '{x}', '{NULL}', '{NULL}', '{NULL}', '{NULL}');
SELECT * FROM webhook_inbox._save_fetched_batch('{1,1}', '{200,200}', '{x,y}', '{NULL,NULL}', '{NULL,NULL}', '{NULL,NULL}', '{NULL,NULL}');
SELECT * FROM webhook_inbox._save_presents('{1,2}', '{NULL}', '{false,false}', '{NULL,NULL}', '{NULL,NULL}', '{a,b}');
SELECT * FROM webhook_inbox._save_presents('{1,1}', '{NULL,NULL}', '{false,false}', '{NULL,NULL}', '{NULL,NULL}', '{a,b}');
