-- Reconciliation and counters from SQL: sweep_now(), sweep_health, worker_stats().
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;
SELECT webhook_inbox.create_source('sw_none', 'stripe', 'whsec_s') AS id;
SELECT webhook_inbox.create_source('sw_down', 'stripe', 'whsec_s', api_base => 'http://127.0.0.1:1') AS id;

-- what cannot be swept is refused with the reason
SELECT * FROM webhook_inbox.sweep_now(NULL, 'subscription');
SELECT * FROM webhook_inbox.sweep_now('nosuch', 'subscription');
SELECT * FROM webhook_inbox.sweep_now('sw_none', 'subscription');
SELECT * FROM webhook_inbox.sweep_now('sw_down', 'widget');
SELECT * FROM webhook_inbox.sweep_now('sw_down', 'subscription', 'sideways');
SELECT * FROM webhook_inbox.sweep_now('sw_down', 'subscription', NULL);

-- a provider that cannot be reached: the run is recorded as failed and the checkpoint stays
SELECT object_type, layer, trigger, status, listed, repaired, errors, error IS NOT NULL AS has_error
  FROM webhook_inbox.sweep_now('sw_down', 'subscription');
SELECT object_type, layer, status, error IS NOT NULL AS has_error, incomplete_reason
  FROM webhook_inbox.sweep_now('sw_down', 'subscription', 'incremental');
SELECT count(*) AS checkpoints FROM webhook_inbox.sweep_checkpoints c
  JOIN webhook_inbox.sources s ON s.id = c.source_id WHERE s.name = 'sw_down' AND c.checkpoint IS NOT NULL;
SELECT source, object_type, last_status, last_listed, last_repaired, failed_last_day, checkpoint
  FROM webhook_inbox.sweep_health WHERE source = 'sw_down';

-- the two layers' schedule: a type the source has sent; a full pass that failed is tried again at the incremental pace
SELECT id FROM webhook_inbox.sources WHERE name = 'sw_down' \gset
SELECT webhook_inbox.upsert_object('sw_down', 'subscription', 'sub_old', NULL, 'active', '{"id":"sub_old"}');
SELECT webhook_inbox.upsert_object('sw_down', 'subscription', 'sub_live', NULL, 'active', '{"id":"sub_live"}');
SELECT object_type, layer FROM webhook_inbox._sweep_targets('1 hour', '1 day') WHERE source_id = :id;
SELECT object_type, layer FROM webhook_inbox._sweep_targets('1 microsecond', '1 day') WHERE source_id = :id;
SELECT object_type, layer FROM webhook_inbox._sweep_targets('1 microsecond', '0') WHERE source_id = :id;
SELECT count(*) FROM webhook_inbox._sweep_targets('0', '0') WHERE source_id = :id;
SELECT webhook_inbox._sweep_begin(:id, 'subscription', 'manual', '1 minute', 'diagonal', NULL);

-- a full pass: what the listing names is seen; the mirror's other objects are missing
SELECT run_id AS full_run, since_epoch FROM webhook_inbox._sweep_begin(:id, 'subscription', 'manual', '1 minute', 'full', '30 days') \gset
SELECT :since_epoch AS since_epoch;
SELECT object_id, deleted, has_more, last_id FROM webhook_inbox._sweep_page(:full_run,
	'{"object":"list","has_more":false,"data":[{"id":"sub_live","status":"active"},{"id":"sub_new","status":"canceled"}]}',
	'$.data[*]', '$.status', NULL, false);
SELECT * FROM webhook_inbox._sweep_missing(:full_run);
SELECT layer, pages, listed, missing FROM webhook_inbox.sweep_runs WHERE id = :full_run;
SELECT webhook_inbox._sweep_finish(:full_run, NULL, NULL);
SELECT count(*) AS seen_left FROM webhook_inbox.sweep_seen WHERE run_id = :full_run;
SELECT layer, checkpoint IS NOT NULL AS has_checkpoint, last_run_id = :full_run AS from_full
  FROM webhook_inbox.sweep_checkpoints WHERE source_id = :id ORDER BY layer;

-- an incremental pass through an events list: each event goes through intake(), deduplicated
SELECT run_id AS inc_run FROM webhook_inbox._sweep_begin(:id, 'subscription', 'manual', '1 minute', 'incremental', '30 days') \gset
SELECT incomplete_reason FROM webhook_inbox.sweep_runs WHERE id = :inc_run;
SELECT webhook_inbox.intake('sw_down', '{}', convert_to('{"id":"evt_had","type":"customer.subscription.updated","created":1700000000,"data":{"object":{"id":"sub_live","status":"active"}}}', 'UTF8'));
SELECT * FROM webhook_inbox._sweep_events(:inc_run, '{"object":"list","has_more":true,"data":['
	'{"id":"evt_missed","type":"customer.subscription.deleted","created":1700000002,"data":{"object":{"id":"sub_old","status":"canceled"}}},'
	'{"id":"evt_had","type":"customer.subscription.updated","created":1700000000,"data":{"object":{"id":"sub_live","status":"active"}}}]}');
SELECT object_type, object_id, after, outcome FROM webhook_inbox.repairs WHERE run_id = :inc_run;
SELECT event_id, object_type, object_id, strategy, status FROM webhook_inbox.inbox i
  JOIN webhook_inbox.sources s ON s.id = i.source_id WHERE s.name = 'sw_down' ORDER BY event_id;
SELECT d.event_id, d.delivery_id, d.outcome FROM webhook_inbox.deliveries d
  JOIN webhook_inbox.sources s ON s.id = d.source_id WHERE s.name = 'sw_down' ORDER BY d.id;
SELECT pages, listed, differences, repaired FROM webhook_inbox.sweep_runs WHERE id = :inc_run;
SELECT * FROM webhook_inbox._sweep_events(:inc_run, 'not json');
SELECT * FROM webhook_inbox._sweep_events(:inc_run, '{"object":"list"}');
SELECT webhook_inbox._sweep_finish(:inc_run, NULL, NULL);

-- an incremental pass whose checkpoint is older than the events window compares less: incomplete
UPDATE webhook_inbox.sweep_checkpoints SET checkpoint = now() - interval '40 days'
 WHERE source_id = :id AND layer = 'incremental';
SELECT run_id AS old_run FROM webhook_inbox._sweep_begin(:id, 'subscription', 'manual', '1 minute', 'incremental', '30 days') \gset
SELECT webhook_inbox._sweep_finish(:old_run, NULL, NULL);
SELECT status, incomplete_reason LIKE 'the checkpoint (%) is older than the provider''s 30 days of events; a full pass compares the rest' AS says_why
  FROM webhook_inbox.sweep_runs WHERE id = :old_run;
SELECT checkpoint < now() - interval '39 days' AS checkpoint_kept FROM webhook_inbox.sweep_checkpoints
 WHERE source_id = :id AND layer = 'incremental';
SELECT object_type, last_status, last_layer, last_incomplete_reason IS NOT NULL AS has_reason, last_full_pass IS NOT NULL AS had_full
  FROM webhook_inbox.sweep_health WHERE source = 'sw_down';

-- counters: the worker is off in this suite, so nothing was counted
SELECT claimed, fetched, saved, stale, ties, backward, retries, quarantined, repairs
  FROM webhook_inbox.worker_counters;
SELECT has_table_privilege('pg_monitor', 'webhook_inbox.worker_counters', 'SELECT') AS monitor_reads_counters,
	   has_table_privilege('pg_monitor', 'webhook_inbox.sweep_health', 'SELECT') AS monitor_reads_sweeps,
	   has_table_privilege('pg_monitor', 'webhook_inbox.sources', 'SELECT') AS monitor_reads_secrets;
