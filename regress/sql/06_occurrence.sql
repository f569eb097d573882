-- Occurrences once, requeue audited, prune, and the health view.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;

SELECT webhook_inbox.record_occurrence('stripe1', 'refund', 're_1', '{"amount": 500, "currency": "eur"}', 3);
SELECT webhook_inbox.record_occurrence('stripe1', 'refund', 're_1', '{"amount": 500, "currency": "eur"}', 4);
SELECT webhook_inbox.record_occurrence('stripe1', 'refund', 're_2', '{"amount": "x"}', amount => 250, currency => 'usd');
SELECT webhook_inbox.record_occurrence('stripe1', 'dispute', 're_1', NULL);
SELECT kind, occurrence_id, amount, currency, first_event_id FROM webhook_inbox.occurrences ORDER BY id;
SELECT webhook_inbox.record_occurrence('stripe1', '', 're_3');
SELECT webhook_inbox.record_occurrence('stripe1', 'refund', NULL);
SELECT webhook_inbox.record_occurrence('nosuch', 'refund', 're_3');

-- requeue: done and quarantined events go back to pending, audited
SELECT id AS other_id FROM webhook_inbox.inbox WHERE event_id = 'evt_other' \gset
SELECT status FROM webhook_inbox.inbox WHERE id = :other_id;
SELECT webhook_inbox.requeue(ARRAY[:other_id::bigint], 'tie resolved by hand');
SELECT status, reason, attempts FROM webhook_inbox.inbox WHERE id = :other_id;
SELECT previous_status, previous_reason, note, requeued_by = current_user AS by_me FROM webhook_inbox.requeues;
SELECT webhook_inbox.requeue(ARRAY[:other_id::bigint]);
SELECT webhook_inbox.requeue(ARRAY[]::bigint[]);
SELECT webhook_inbox.requeue(NULL);
SELECT webhook_inbox.requeue(ARRAY[-1::bigint]);
SELECT webhook_inbox.requeue((SELECT array_agg(id) FROM webhook_inbox.inbox WHERE reason LIKE 'invalid_json%'));

-- the health view
SELECT pending > 0 AS has_pending, oldest_pending_age >= '0 seconds' AS has_age, quarantined, quarantined_by_reason
  FROM webhook_inbox.inbox_health;

-- prune: old done rows go, payloads can be stripped earlier, identities stay
UPDATE webhook_inbox.inbox SET processed_at = now() - interval '40 days' WHERE event_id IN ('evt_1', 'evt_2');
UPDATE webhook_inbox.inbox SET processed_at = now() - interval '10 days' WHERE event_id = 'evt_3';
UPDATE webhook_inbox.deliveries SET received_at = now() - interval '40 days' WHERE event_id IN ('evt_1', 'evt_2');
SELECT event_id, status FROM webhook_inbox.inbox WHERE event_id IN ('evt_1', 'evt_2', 'evt_3') ORDER BY 1;
SELECT * FROM webhook_inbox.prune('30 days', strip_payloads_older_than => '7 days');
SELECT event_id, status, payload IS NULL AS stripped, object_id FROM webhook_inbox.inbox WHERE event_id IN ('evt_1', 'evt_2', 'evt_3') ORDER BY 1;
SELECT * FROM webhook_inbox.prune('-1 day');
SELECT * FROM webhook_inbox.prune(NULL);
SELECT * FROM webhook_inbox.prune('1 day', '-1 day');

-- the extension drops cleanly and comes back
DROP EXTENSION webhook_inbox CASCADE;
CREATE EXTENSION webhook_inbox;
SELECT count(*) > 0 AS presets FROM webhook_inbox.routes;
