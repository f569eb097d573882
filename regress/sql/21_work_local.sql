-- The worker's fast path, _work_local(): objects whose pending events need
-- no provider request are taken under their advisory lock and worked in the
-- same transaction, straight from pending to their outcome, with no lease
-- and no processing state; objects a claim holds are left alone; a tie that
-- only a fetch can decide goes to claim() as a due retry.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;
-- in one transaction, rolled back at the end; other tests' events are set aside; two parts,
-- each from the savepoint after the sources
BEGIN;
SELECT webhook_inbox.create_source('wl_pay', 'stripe', 'whsec_wl') IS NOT NULL AS created;
SELECT webhook_inbox.create_source('wl_shop', 'shopify', 'shpss_wl', api_base => 'http://127.0.0.1:9') IS NOT NULL AS created;
-- without a read API of its own for them, this source's refunds are occurrences and its payments walk a machine
INSERT INTO webhook_inbox.routes (source_id, event_type, class, strategy, object_type, object_id_path, status_path, machine)
SELECT s.id, r.et, r.cl, r.st, r.ot, '$.data.object.id', r.sp, r.m
  FROM webhook_inbox.sources s,
	   (VALUES ('refund.created', 'occurrence', 'occurrence', 'refund', NULL::jsonpath, NULL),
			   ('payment_intent.*', 'state', 'machine', 'payment', '$.data.object.status', 'payment')) AS r(et, cl, st, ot, sp, m)
 WHERE s.name = 'wl_pay';
CREATE FUNCTION wl_stripe(id text, type text, obj text, status text) RETURNS text LANGUAGE sql AS $$
	SELECT webhook_inbox.intake('wl_pay', '{}', convert_to(format(
		'{"id":"%s","type":"%s","created":1767225600,"data":{"object":{"id":"%s","status":"%s","amount":500,"currency":"eur"}}}',
		id, type, obj, status), 'UTF8'))
$$;
CREATE FUNCTION wl_order(id text, n int, updated text, status text) RETURNS text LANGUAGE sql AS $$
	SELECT webhook_inbox.intake('wl_shop',
		ARRAY['x-shopify-topic', 'orders/updated', 'x-shopify-webhook-id', id],
		convert_to(format('{"id":%s,"updated_at":"%s","financial_status":"%s"}', n, updated, status), 'UTF8'))
$$;

UPDATE webhook_inbox.inbox SET next_attempt_at = now() + interval '1 day'
 WHERE status = 'pending' AND source_id NOT IN (SELECT id FROM webhook_inbox.sources WHERE name LIKE 'wl_%');
SAVEPOINT wl_setup;

SELECT wl_stripe('evt_r1', 'refund.created', 're_1', 'succeeded'),
	   wl_stripe('evt_p2', 'payment_intent.captured', 'pi_1', 'captured'),
	   wl_stripe('evt_p1', 'payment_intent.pending', 'pi_1', 'pending'),
	   wl_stripe('evt_q1', 'payment_intent.pending', 'pi_2', 'pending'),
	   wl_order('wh-1', 101, '2026-01-01T00:00:01+00:00', 'pending'),
	   wl_order('wh-2', 101, '2026-01-01T00:00:02+00:00', 'paid'),
	   wl_order('wh-3', 102, '2026-01-01T00:00:01+00:00', 'pending'),
	   wl_order('wh-4', 102, '2026-01-01T00:00:01+00:00', 'authorized');


-- a claim holds pi_2: the fast path leaves it to its holder
SELECT webhook_inbox._sweep_lease(s.id, 'payment', 'pi_2', 'someone', '1 minute') IS NOT NULL AS leased
  FROM webhook_inbox.sources s WHERE s.name = 'wl_pay';

-- the objects taken, in order of their oldest due pending local event: an occurrence object with
-- a row per event the scan read, any other with one (its events are looked up under the lock)
SELECT c.ord, c.first, c.object_type, c.object_id, c.occurrences FROM webhook_inbox._local_take(10) c;
SELECT outcome, sum(events) AS events FROM webhook_inbox._work_local(10) GROUP BY 1 ORDER BY 1;

-- straight from pending: done or ignored with the token of their object's round, no lease left behind;
-- pi_2 still pending under its holder's lease; 102's tie waits for a fetch as a due retry
CREATE TEMP VIEW wl AS SELECT id FROM webhook_inbox.sources WHERE name LIKE 'wl_%';
SELECT i.object_id, i.event_id, i.status, i.reason, i.claim_token IS NOT NULL AS token
  FROM webhook_inbox.inbox i WHERE i.source_id IN (SELECT id FROM wl) ORDER BY i.object_id, i.event_id;
SELECT object_id, holder FROM webhook_inbox.object_leases WHERE source_id IN (SELECT id FROM wl) ORDER BY 1;
SELECT object_id, status, version FROM webhook_inbox.objects WHERE source_id IN (SELECT id FROM wl) ORDER BY 1;
SELECT kind, occurrence_id, amount, currency FROM webhook_inbox.occurrences WHERE source_id IN (SELECT id FROM wl);
SELECT object_id, coalesce(from_status, '-') || '>' || to_status AS walk
  FROM webhook_inbox.transitions WHERE source_id IN (SELECT id FROM wl) ORDER BY id;

-- nothing left for the fast path: the retry and the held object are claim()'s
SELECT count(*) AS taken FROM webhook_inbox._work_local(10);
SELECT object_id, strategy, cardinality(event_ids) AS events
  FROM webhook_inbox.claim('wl-test', 10, '1 minute', '0') WHERE source LIKE 'wl_%' ORDER BY object_id;
ROLLBACK TO SAVEPOINT wl_setup;

-- a backlog, one object a round (the scan reads two rows): a machine object's events far apart
-- are worked together (a probe finds them all); an occurrence object is worked with the events
-- the scan read, and its later duplicate in a round of its own
SELECT wl_stripe('evt_m1', 'payment_intent.pending', 'pi_9', 'pending'),
	   wl_stripe('evt_o1', 'refund.created', 're_8', 'succeeded'),
	   wl_stripe('evt_o2', 'refund.created', 're_9', 'succeeded'),
	   wl_stripe('evt_o3', 'refund.created', 're_8', 'succeeded'),
	   wl_stripe('evt_m2', 'payment_intent.captured', 'pi_9', 'captured');
SELECT c.ord, c.object_id, i.event_id, c.occurrences
  FROM webhook_inbox._local_take(1) c JOIN webhook_inbox.inbox i ON i.id = c.id ORDER BY c.id;
CREATE TEMP VIEW wl_round AS
SELECT string_agg(w.outcome || ' ' || w.events, ', ' ORDER BY w.outcome) AS outcomes FROM webhook_inbox._work_local(1) w;
SELECT * FROM wl_round;
SELECT * FROM wl_round;
SELECT * FROM wl_round;
SELECT * FROM wl_round;
SELECT * FROM wl_round;
SELECT i.event_id, i.status, i.reason FROM webhook_inbox.inbox i
 WHERE i.source_id = (SELECT id FROM webhook_inbox.sources WHERE name = 'wl_pay') ORDER BY i.id;
ROLLBACK;

-- bad arguments
SELECT * FROM webhook_inbox._work_local(0);
SELECT * FROM webhook_inbox._local_take(10001);

-- the mirror refers to its source without a foreign key: the source cannot
-- go while mirrored objects (or transitions, occurrences, leases) refer to it
SELECT webhook_inbox.create_source('wl_ref', 'stripe', 'whsec_wl') IS NOT NULL AS created;
SELECT webhook_inbox.upsert_object('wl_ref', 'customer', 'cus_1', NULL, NULL, '{"id":"cus_1"}');
\set VERBOSITY terse
DELETE FROM webhook_inbox.sources WHERE name = 'wl_ref';
UPDATE webhook_inbox.sources SET id = id + 1000 WHERE name = 'wl_ref';
\set VERBOSITY default
DELETE FROM webhook_inbox.objects WHERE source_id = (SELECT id FROM webhook_inbox.sources WHERE name = 'wl_ref');
DELETE FROM webhook_inbox.sources WHERE name = 'wl_ref';
SELECT count(*) AS left FROM webhook_inbox.sources WHERE name = 'wl_ref';
