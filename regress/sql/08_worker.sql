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

-- a provider that cannot be reached: the run is recorded as failed and the checkpoint stays
SELECT object_type, trigger, status, listed, repaired, errors, error IS NOT NULL AS has_error
  FROM webhook_inbox.sweep_now('sw_down', 'subscription');
SELECT count(*) AS checkpoints FROM webhook_inbox.sweep_checkpoints c
  JOIN webhook_inbox.sources s ON s.id = c.source_id WHERE s.name = 'sw_down' AND c.checkpoint IS NOT NULL;
SELECT source, object_type, last_status, last_listed, last_repaired, failed_last_day, checkpoint
  FROM webhook_inbox.sweep_health WHERE source = 'sw_down';

-- counters: the worker is off in this suite, so nothing was counted
SELECT claimed, fetched, saved, stale, ties, backward, retries, quarantined, repairs
  FROM webhook_inbox.worker_counters;
SELECT has_table_privilege('pg_monitor', 'webhook_inbox.worker_counters', 'SELECT') AS monitor_reads_counters,
	   has_table_privilege('pg_monitor', 'webhook_inbox.sweep_health', 'SELECT') AS monitor_reads_sweeps,
	   has_table_privilege('pg_monitor', 'webhook_inbox.sources', 'SELECT') AS monitor_reads_secrets;
