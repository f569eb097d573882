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

-- prune_in_batches: the same, a range of ids of inbox and deliveries at a time
-- with a commit after each (batch_size 1 here: a commit per id)
UPDATE webhook_inbox.inbox SET processed_at = now() - interval '40 days' WHERE event_id = 'evt_3';
UPDATE webhook_inbox.deliveries SET received_at = now() - interval '40 days' WHERE event_id = 'evt_3';
CREATE TEMP TABLE kept AS
SELECT id, status FROM webhook_inbox.inbox WHERE event_id <> 'evt_3' OR status NOT IN ('done', 'ignored');
SELECT count(*) > 0 AS others_kept FROM kept;
CALL webhook_inbox.prune_in_batches('30 days', strip_payloads_older_than => '7 days', batch_size => 1);
SELECT count(*) AS evt_3_left FROM webhook_inbox.inbox WHERE event_id = 'evt_3';
SELECT count(*) AS evt_3_deliveries_left FROM webhook_inbox.deliveries WHERE event_id = 'evt_3';
-- everything else as it was
SELECT (SELECT count(*) FROM kept) = (SELECT count(*) FROM webhook_inbox.inbox i JOIN kept k USING (id, status)) AS others_untouched;
CALL webhook_inbox.prune_in_batches('30 days');
-- it commits, so not inside a transaction block
BEGIN;
CALL webhook_inbox.prune_in_batches('30 days');
ROLLBACK;
CALL webhook_inbox.prune_in_batches('30 days', batch_size => 0);
CALL webhook_inbox.prune_in_batches('30 days', batch_size => NULL);
CALL webhook_inbox.prune_in_batches('-1 day');
CALL webhook_inbox.prune_in_batches('1 day', '-1 day');


-- the extension's rows can be cleared with its presets kept: the files after
-- this one start from an empty inbox, whether the extension was installed
-- fresh or upgraded (regress/t/501_release_upgrade.pl runs them on both)
SET session_replication_role = replica;
DO $$
DECLARE
	r record;
BEGIN
	FOR r IN SELECT c.oid::regclass AS rel,
			EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid
					   AND a.attname = 'preset' AND NOT a.attisdropped) AS has_preset
		  FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
		 WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_extension'::regclass
		   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'webhook_inbox')
		   AND d.deptype = 'e' AND c.relkind = 'r'
	LOOP
		EXECUTE format('DELETE FROM %s%s', r.rel, CASE WHEN r.has_preset THEN ' WHERE NOT preset' ELSE '' END);
	END LOOP;
	-- sequences as after CREATE EXTENSION: a column's continues after its
	-- largest value (the presets'), the others start again
	FOR r IN SELECT s.oid::regclass AS seq, t.oid::regclass AS rel, a.attname
		  FROM pg_class s
		  LEFT JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = s.oid
		   AND d.refclassid = 'pg_class'::regclass AND d.deptype = 'a'
		  LEFT JOIN pg_class t ON t.oid = d.refobjid
		  LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = d.refobjsubid
		 WHERE s.relkind = 'S' AND s.relnamespace = 'webhook_inbox'::regnamespace
	LOOP
		IF r.rel IS NULL THEN
			PERFORM setval(r.seq, 1, false);
		ELSE
			EXECUTE format('SELECT setval(%L, coalesce(max(%I), 0) + 1, false) FROM %s', r.seq, r.attname, r.rel);
		END IF;
	END LOOP;
END
$$;
RESET session_replication_role;
SELECT count(*) AS sources FROM webhook_inbox.sources;
SELECT count(*) AS events FROM webhook_inbox.inbox;
SELECT count(*) > 0 AS presets FROM webhook_inbox.routes WHERE preset;
