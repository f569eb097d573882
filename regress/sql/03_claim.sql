-- claim(), complete(), retry(), quarantine(): coalescing, leases, fencing tokens.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;
CREATE FUNCTION wi_sub_event(evt text, sub text) RETURNS text LANGUAGE sql AS $$
	SELECT webhook_inbox.intake('stripe1', '{}', convert_to(format(
		'{"id":"%s","type":"customer.subscription.updated","data":{"object":{"id":"%s","status":"active"}}}', evt, sub), 'UTF8'))
$$;
-- start from an inbox with only what this file puts in
UPDATE webhook_inbox.inbox SET status = 'done' WHERE status IN ('pending', 'retry');

-- argument errors
SELECT * FROM webhook_inbox.claim('', 10, '30 seconds');
SELECT * FROM webhook_inbox.claim(NULL, 10, '30 seconds');
SELECT * FROM webhook_inbox.claim('w', 0, '30 seconds');
SELECT * FROM webhook_inbox.claim('w', 10001, '30 seconds');
SELECT * FROM webhook_inbox.claim('w', 10, '0 seconds');
SELECT * FROM webhook_inbox.claim('w', 10, '-5 seconds');
SELECT * FROM webhook_inbox.claim('w', 10, '2 days');
SELECT * FROM webhook_inbox.claim('w', 10, '1 month');

-- fifty events for one object and one for another: two claims, the fifty coalesced
SELECT count(*) FROM (SELECT wi_sub_event('evt_burst_' || g, 'sub_burst') FROM generate_series(1, 50) g) x;
SELECT wi_sub_event('evt_other', 'sub_other');
CREATE TEMP TABLE c1 AS SELECT * FROM webhook_inbox.claim('w1', 10, '30 seconds');
SELECT object_id, cardinality(event_ids) AS events, strategy, claim_token > 0 AS has_token,
	   expires_at > now() AS live FROM c1 ORDER BY object_id;
-- nothing is left for a second worker while the leases are live
SELECT count(*) FROM webhook_inbox.claim('w2', 10, '30 seconds');
-- a new event for a claimed object waits for the claim to finish
SELECT wi_sub_event('evt_late', 'sub_burst');
SELECT count(*) FROM webhook_inbox.claim('w2', 10, '30 seconds');
SELECT holder, count(*) FROM webhook_inbox.object_leases GROUP BY 1;

-- complete: the claim's events are done and the lease ends
SELECT webhook_inbox.complete((SELECT claim_token FROM c1 WHERE object_id = 'sub_burst'));
SELECT status, count(*) FROM webhook_inbox.inbox WHERE object_id = 'sub_burst' GROUP BY 1 ORDER BY 1;
-- the same token again is refused, and changes nothing
SELECT webhook_inbox.complete((SELECT claim_token FROM c1 WHERE object_id = 'sub_burst'));
SELECT webhook_inbox.complete(NULL);
SELECT webhook_inbox.complete(999999);
SELECT webhook_inbox.complete((SELECT claim_token FROM c1 WHERE object_id = 'sub_other'), outcome => 'maybe');
-- the late event is claimable now, with a newer token
CREATE TEMP TABLE c2 AS SELECT * FROM webhook_inbox.claim('w2', 10, '30 seconds');
SELECT object_id, cardinality(event_ids) AS events,
	   claim_token > (SELECT max(claim_token) FROM c1) AS newer_token FROM c2;

-- retry: attempts counted, backoff applied, quarantine after max_attempts
SELECT webhook_inbox.retry((SELECT claim_token FROM c2), 'provider said 503', '0 seconds', max_attempts => 3);
SELECT status, attempts, reason FROM webhook_inbox.inbox WHERE event_id = 'evt_late';
SELECT webhook_inbox.retry((SELECT claim_token FROM c2), 'again');
CREATE TEMP TABLE c3 AS SELECT * FROM webhook_inbox.claim('w3', 10, '30 seconds');
SELECT object_id FROM c3;
SELECT webhook_inbox.retry((SELECT claim_token FROM c3), 'provider said 503', '0 seconds', max_attempts => 3);
DROP TABLE c3;
CREATE TEMP TABLE c3 AS SELECT * FROM webhook_inbox.claim('w3', 10, '30 seconds');
SELECT webhook_inbox.retry((SELECT claim_token FROM c3), 'provider said 503', '0 seconds', max_attempts => 3);
SELECT status, attempts, reason FROM webhook_inbox.inbox WHERE event_id = 'evt_late';
-- a retry without a delay backs off exponentially
SELECT wi_sub_event('evt_backoff', 'sub_backoff');
DROP TABLE c3;
CREATE TEMP TABLE c3 AS SELECT * FROM webhook_inbox.claim('w3', 10, '30 seconds') WHERE object_id = 'sub_backoff';
SELECT webhook_inbox.retry((SELECT claim_token FROM c3), 'timeout');
-- (measured from the retry's own time: its updated_at; now() has moved on)
SELECT next_attempt_at - updated_at BETWEEN '1 second' AND '1.25 seconds' AS backed_off FROM webhook_inbox.inbox WHERE event_id = 'evt_backoff';
SELECT count(*) FROM webhook_inbox.claim('w4', 10, '30 seconds') WHERE object_id = 'sub_backoff';
SELECT webhook_inbox.retry((SELECT claim_token FROM c1 WHERE object_id = 'sub_other'), 'x', '-1 second');
SELECT webhook_inbox.retry((SELECT claim_token FROM c1 WHERE object_id = 'sub_other'), 'x', max_attempts => 0);

-- quarantine needs a reason and a current token
SELECT webhook_inbox.quarantine((SELECT claim_token FROM c1 WHERE object_id = 'sub_other'), '');
SELECT webhook_inbox.quarantine(424242, 'x');
SELECT webhook_inbox.quarantine((SELECT claim_token FROM c1 WHERE object_id = 'sub_other'), 'ambiguous_tie');
SELECT status, reason FROM webhook_inbox.inbox WHERE event_id = 'evt_other';

-- an expired lease is taken over with a new token; the old token is refused
SELECT wi_sub_event('evt_exp', 'sub_exp');
CREATE TEMP TABLE old_claim AS SELECT * FROM webhook_inbox.claim('slow', 10, '1 minute') WHERE object_id = 'sub_exp';
UPDATE webhook_inbox.object_leases SET expires_at = now() - interval '1 second' WHERE holder = 'slow';
CREATE TEMP TABLE new_claim AS SELECT * FROM webhook_inbox.claim('fast', 10, '30 seconds') WHERE object_id = 'sub_exp';
SELECT n.claim_token > o.claim_token AS newer, n.event_ids = o.event_ids AS same_events FROM old_claim o, new_claim n;
SELECT webhook_inbox.complete((SELECT claim_token FROM old_claim));
SELECT webhook_inbox.upsert_object('stripe1', 'subscription', 'sub_exp', NULL, 'canceled', '{}', (SELECT claim_token FROM old_claim));
SELECT webhook_inbox.upsert_object('stripe1', 'subscription', 'sub_exp', NULL, 'active', '{}', (SELECT claim_token FROM new_claim));
SELECT webhook_inbox.upsert_object('stripe1', 'subscription', 'sub_exp', NULL, 'canceled', '{}', (SELECT claim_token FROM old_claim));
SELECT webhook_inbox.complete((SELECT claim_token FROM new_claim));
SELECT status FROM webhook_inbox.objects WHERE object_id = 'sub_exp';
SELECT webhook_inbox.upsert_object('stripe1', 'subscription', 'sub_exp', NULL, 'canceled', '{}', (SELECT claim_token FROM old_claim));

-- a fresh fetch-strategy event waits out fetch_delay, so a burst costs one fetch; other strategies do not wait
UPDATE webhook_inbox.inbox SET status = 'done' WHERE status IN ('pending', 'retry');
SELECT wi_sub_event('evt_fresh', 'sub_fresh');
SELECT webhook_inbox.intake('shop1', ARRAY['x-shopify-webhook-id', 'wh-fresh', 'x-shopify-topic', 'orders/updated'],
	convert_to('{"id":77,"updated_at":"2026-01-01T10:00:05Z","financial_status":"paid"}', 'UTF8'));
SELECT object_id, strategy FROM webhook_inbox.claim('w5', 10, '1 minute', fetch_delay => '5 minutes');
SELECT object_id, strategy FROM webhook_inbox.claim('w5', 10, '1 minute', fetch_delay => '0 seconds');
SELECT * FROM webhook_inbox.claim('w5', 10, '1 minute', fetch_delay => '-1 second');
SELECT * FROM webhook_inbox.claim('w5', 10, '1 minute', fetch_delay => '1 day');
