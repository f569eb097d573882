-- Retention of every table: what prune() keeps of the history tables by default, what it never
-- deletes, the business records it keeps unless told, and its argument errors.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;
SELECT webhook_inbox.create_source('ret_src', 'stripe', 'whsec_ret', api_base => 'http://127.0.0.1:1') IS NOT NULL AS created;
SELECT id AS src FROM webhook_inbox.sources WHERE name = 'ret_src' \gset

-- transitions: 100 days old unless said; the newest of each object, one an effect names, and
-- those of an object under a live claim stay
INSERT INTO webhook_inbox.transitions (source_id, object_type, object_id, to_status, cause, at, reason) VALUES
	(:src, 'ret', 'a', 'one', 'test', now() - interval '100 days', 'a1 old'),
	(:src, 'ret', 'a', 'two', 'test', now() - interval '100 days', 'a2 old'),
	(:src, 'ret', 'a', 'three', 'test', now() - interval '100 days', 'a3 old, newest of a'),
	(:src, 'ret', 'b', 'one', 'test', now() - interval '100 days', 'b1 old, named by an effect'),
	(:src, 'ret', 'b', 'two', 'test', now() - interval '100 days', 'b2 old, newest of b'),
	(:src, 'ret', 'c', 'one', 'test', now() - interval '100 days', 'c1 old'),
	(:src, 'ret', 'c', 'two', 'test', now() - interval '1 day', 'c2 recent'),
	(:src, 'ret', 'd', 'one', 'test', now() - interval '100 days', 'd1 old, object claimed'),
	(:src, 'ret', 'd', 'two', 'test', now() - interval '100 days', 'd2 old, newest of d');
INSERT INTO webhook_inbox.object_leases (source_id, object_type, object_id, token, holder, expires_at)
VALUES (:src, 'ret', 'd', nextval('webhook_inbox.claim_token_seq'), 'test', now() + interval '1 hour');

-- effects: a pending one (named transition b1), a done one, an uncertain one; attempts 100 days old
INSERT INTO webhook_inbox.effects (effect_key, kind, source_id, object_type, object_id, transition_id, idempotency_key,
								   status, updated_at, reason)
SELECT 'ret:' || k, 'notify', :src, 'ret', 'b', t, 'ret-' || k, st, now() - interval '100 days', k
  FROM (VALUES ('pending', 'pending', (SELECT id FROM webhook_inbox.transitions WHERE reason LIKE 'b1%')),
			   ('done', 'done', NULL), ('uncertain', 'uncertain', NULL)) v(k, st, t);
INSERT INTO webhook_inbox.effect_attempts (effect_id, claim_token, action, started_at, outcome)
SELECT e.id, 1, 'submit', now() - interval '100 days', 'attempt ' || n
  FROM webhook_inbox.effects e, generate_series(1, 2) n WHERE e.effect_key LIKE 'ret:%';

-- sweep runs 40 days old: one a checkpoint names, one with a repair, one running, the newest
INSERT INTO webhook_inbox.sweep_runs (source_id, object_type, trigger, started_at, status, error)
SELECT :src, 'ret', 'schedule', now() - interval '40 days', st, note
  FROM (VALUES (1, 'complete', 'checkpoint'), (2, 'complete', 'repaired'), (3, 'running', 'running'),
			   (4, 'failed', 'newest')) v(n, st, note) ORDER BY n;
INSERT INTO webhook_inbox.sweep_checkpoints (source_id, object_type, checkpoint, last_run_id)
SELECT :src, 'ret', now(), id FROM webhook_inbox.sweep_runs WHERE source_id = :src AND error = 'checkpoint';
INSERT INTO webhook_inbox.repairs (run_id, source_id, object_type, object_id, outcome)
SELECT id, :src, 'ret', 'a', 'applied' FROM webhook_inbox.sweep_runs WHERE source_id = :src AND error = 'repaired';
INSERT INTO webhook_inbox.sweep_seen (run_id, object_id)
SELECT id, 'a' FROM webhook_inbox.sweep_runs WHERE source_id = :src AND error IN ('running', 'newest');

-- requeues 100 days old: of an event done, of an event still pending
INSERT INTO webhook_inbox.inbox (source_id, event_id, body_sha256, status, object_type, object_id, strategy)
VALUES (:src, 'ret_done', '\x00', 'done', 'ret', 'a', 'fetch'), (:src, 'ret_pending', '\x00', 'pending', 'ret', 'a', 'fetch');
INSERT INTO webhook_inbox.requeues (event_id, previous_status, note, requeued_at)
SELECT id, 'done', event_id, now() - interval '100 days' FROM webhook_inbox.inbox WHERE event_id LIKE 'ret\_%';

-- an occurrence 400 days old
INSERT INTO webhook_inbox.occurrences (source_id, kind, occurrence_id, recorded_at)
VALUES (:src, 'refund', 're_ret', now() - interval '400 days');

-- with the defaults
SELECT transitions_deleted, sweep_runs_deleted, repairs_deleted, effect_attempts_deleted, requeues_deleted, effects_deleted, occurrences_deleted FROM webhook_inbox.prune('30 days');
SELECT reason FROM webhook_inbox.transitions WHERE source_id = :src ORDER BY id;
SELECT e.reason AS effect, count(a.id) AS attempts FROM webhook_inbox.effects e LEFT JOIN webhook_inbox.effect_attempts a ON a.effect_id = e.id WHERE e.source_id = :src GROUP BY e.id ORDER BY e.id;
SELECT error AS run, status, (SELECT count(*) FROM webhook_inbox.repairs p WHERE p.run_id = r.id) AS repairs, (SELECT count(*) FROM webhook_inbox.sweep_seen s WHERE s.run_id = r.id) AS seen FROM webhook_inbox.sweep_runs r WHERE source_id = :src ORDER BY id;
SELECT note AS requeue_of FROM webhook_inbox.requeues WHERE note LIKE 'ret\_%' ORDER BY id;
SELECT occurrence_id FROM webhook_inbox.occurrences WHERE source_id = :src;
-- a second run deletes nothing more
SELECT transitions_deleted, sweep_runs_deleted, repairs_deleted, effect_attempts_deleted, requeues_deleted, effects_deleted, occurrences_deleted FROM webhook_inbox.prune('30 days');

-- business records only when asked: done and failed effects (with their attempts), occurrences
SELECT effects_deleted, occurrences_deleted FROM webhook_inbox.prune('30 days', effects_older_than => '30 days', occurrences_older_than => '365 days');
SELECT reason AS effect_left, status FROM webhook_inbox.effects WHERE source_id = :src ORDER BY id;
SELECT count(*) AS occurrences_left FROM webhook_inbox.occurrences WHERE source_id = :src;
-- the transition the pending effect names stays; once the effect is done and gone it may go
UPDATE webhook_inbox.effects SET status = 'done', updated_at = now() - interval '100 days' WHERE effect_key = 'ret:pending';
SELECT effects_deleted, transitions_deleted FROM webhook_inbox.prune('30 days', effects_older_than => '30 days');
SELECT reason FROM webhook_inbox.transitions WHERE source_id = :src ORDER BY id;
-- NULL keeps a table for ever; 0 seconds keeps only what the present needs
UPDATE webhook_inbox.object_leases SET expires_at = now() - interval '1 second' WHERE source_id = :src;
SELECT transitions_deleted FROM webhook_inbox.prune('30 days', transitions_older_than => NULL);
SELECT transitions_deleted > 0 AS deleted FROM webhook_inbox.prune('30 days', transitions_older_than => '0 seconds');
SELECT reason FROM webhook_inbox.transitions WHERE source_id = :src ORDER BY id;

-- prune_in_batches: the same retention, the history after the events
INSERT INTO webhook_inbox.transitions (source_id, object_type, object_id, to_status, cause, at, reason)
VALUES (:src, 'ret', 'a', 'four', 'test', now() - interval '100 days', 'a4 old'), (:src, 'ret', 'a', 'five', 'test', now(), 'a5 newest');
CALL webhook_inbox.prune_in_batches('30 days', batch_size => 1000);
SELECT reason FROM webhook_inbox.transitions WHERE source_id = :src ORDER BY id;

-- argument errors
SELECT * FROM webhook_inbox.prune('30 days', transitions_older_than => '-1 day');
SELECT * FROM webhook_inbox.prune('30 days', sweep_runs_older_than => '-1 second');
SELECT * FROM webhook_inbox.prune('30 days', attempts_older_than => '-1 day');
SELECT * FROM webhook_inbox.prune('30 days', requeues_older_than => '-1 day');
SELECT * FROM webhook_inbox.prune('30 days', effects_older_than => '-1 day');
SELECT * FROM webhook_inbox.prune('30 days', occurrences_older_than => '-1 day');
CALL webhook_inbox.prune_in_batches('30 days', transitions_older_than => '-1 day');

-- clean up what this file made
DELETE FROM webhook_inbox.effects WHERE source_id = :src;
DELETE FROM webhook_inbox.transitions WHERE source_id = :src;
DELETE FROM webhook_inbox.object_leases WHERE source_id = :src;
DELETE FROM webhook_inbox.sweep_checkpoints WHERE source_id = :src;
DELETE FROM webhook_inbox.repairs WHERE source_id = :src;
DELETE FROM webhook_inbox.sweep_runs WHERE source_id = :src;
DELETE FROM webhook_inbox.requeues WHERE note LIKE 'ret\_%';
DELETE FROM webhook_inbox.inbox WHERE source_id = :src;
