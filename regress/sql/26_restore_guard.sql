-- The restore guard: the identity of the database the data was recorded in, compared with this
-- one's; while they differ outbound work waits (sweep_now and run_effects refuse) until
-- resume_outbound().
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;
-- runs a statement; its error with the numbers that vary between clusters as N, and its hint
CREATE FUNCTION wi_guard_try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	h text;
	d text;
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS h = PG_EXCEPTION_HINT;
	GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
	RETURN SQLSTATE || ': ' || SQLERRM || ' DETAIL: ' || regexp_replace(coalesce(d, ''), '(oid|cluster) [0-9]+', '\1 N', 'g') || ' HINT: ' || coalesce(h, '');
END
$$;
-- recorded at CREATE EXTENSION (06_occurrence emptied it: that is no copy) and by resume_outbound()
SELECT * FROM webhook_inbox.outbound_status;
SELECT webhook_inbox.resume_outbound();
SELECT count(*) AS rows, bool_and(system_identifier = (SELECT system_identifier FROM pg_control_system())) AS this_cluster, bool_and(database_oid = (SELECT oid FROM pg_database WHERE datname = current_database())) AS this_database, bool_and(database_name = current_database()) AS this_name, min(note) AS note FROM webhook_inbox.installation;
-- dumped: the identity of a restore comes from its dump, the digests of replay protection too
SELECT x.extcondition[array_position(x.extconfig, 'webhook_inbox.installation'::regclass::oid)] AS installation_dumped FROM pg_extension x WHERE x.extname = 'webhook_inbox';
SELECT x.extcondition[array_position(x.extconfig, 'webhook_inbox.seen_bodies'::regclass::oid)] AS seen_bodies_dumped FROM pg_extension x WHERE x.extname = 'webhook_inbox';

-- a restored copy: the original's row beside this database's
INSERT INTO webhook_inbox.installation (system_identifier, database_oid, database_name, recorded_at, note) VALUES (7000000000000000001, 16384, 'production', '2026-01-02 03:04:05+00', 'CREATE EXTENSION');
SELECT paused, regexp_replace(reason, 'oid [0-9]+\) of cluster [0-9]+$', 'oid N) of cluster N') AS reason, resume_with FROM webhook_inbox.outbound_status;
SELECT wi_guard_try($$SELECT webhook_inbox.sweep_now('guard_none', 'subscription')$$);
SELECT webhook_inbox.create_source('guard_src', 'stripe', 'whsec_g', api_base => 'http://127.0.0.1:1') IS NOT NULL AS created;
SELECT wi_guard_try($$SELECT webhook_inbox.sweep_now('guard_src', 'subscription')$$);
SELECT wi_guard_try($$SELECT webhook_inbox.sweep_now('guard_src', 'subscription', 'incremental')$$);
SELECT count(*) AS runs FROM webhook_inbox.sweep_runs r JOIN webhook_inbox.sources s ON s.id = r.source_id WHERE s.name = 'guard_src';
\set VERBOSITY terse
CALL webhook_inbox.run_effects();
\set VERBOSITY default
-- resumed: this database is the only identity recorded, and the calls run
SELECT webhook_inbox.resume_outbound();
SELECT * FROM webhook_inbox.outbound_status;
SELECT count(*) AS rows, min(note) AS note FROM webhook_inbox.installation;
CALL webhook_inbox.run_effects();
SELECT wi_guard_try($$SELECT webhook_inbox.sweep_now('guard_src', 'subscription')$$);
SELECT webhook_inbox.resume_outbound();
-- while a restore loads: this database's CREATE EXTENSION is its only record and a source is older
DELETE FROM webhook_inbox.installation;
INSERT INTO webhook_inbox.installation (system_identifier, database_oid, database_name, recorded_at, note) SELECT system_identifier, (SELECT oid FROM pg_database WHERE datname = current_database()), current_database(), '2026-06-01 00:00:00+00', 'CREATE EXTENSION' FROM pg_control_system();
UPDATE webhook_inbox.sources SET created_at = '2026-01-01 00:00:00+00' WHERE name = 'guard_src';
SELECT paused, reason FROM webhook_inbox.outbound_status;
SELECT wi_guard_try($$SELECT webhook_inbox.sweep_now('guard_src', 'subscription')$$);
-- a CREATE EXTENSION run in a restore session (row_security off, or pg_restore) pauses from the start
DELETE FROM webhook_inbox.installation;
INSERT INTO webhook_inbox.installation (system_identifier, database_oid, database_name, recorded_at, note) SELECT system_identifier, (SELECT oid FROM pg_database WHERE datname = current_database()), current_database(), '2026-06-01 00:00:00+00', 'CREATE EXTENSION in a restore' FROM pg_control_system();
UPDATE webhook_inbox.sources SET created_at = now() WHERE name = 'guard_src';
SELECT paused, reason FROM webhook_inbox.outbound_status;
UPDATE webhook_inbox.installation SET note = 'CREATE EXTENSION';
-- or an event received before it (the oldest event by id)
UPDATE webhook_inbox.sources SET created_at = now() WHERE name = 'guard_src';
SELECT paused FROM webhook_inbox.outbound_status;
CREATE TEMP TABLE guard_oldest AS SELECT id, received_at FROM webhook_inbox.inbox ORDER BY id LIMIT 1;
SELECT count(*) AS events FROM guard_oldest;
UPDATE webhook_inbox.inbox SET received_at = '2026-01-01 00:00:00+00' WHERE id = (SELECT id FROM guard_oldest);
SELECT paused, regexp_replace(reason, 'event [0-9]+', 'event N') AS reason FROM webhook_inbox.outbound_status;
UPDATE webhook_inbox.inbox i SET received_at = g.received_at FROM guard_oldest g WHERE i.id = g.id;
SELECT webhook_inbox.resume_outbound();
SELECT paused, (SELECT note FROM webhook_inbox.installation) AS recorded FROM webhook_inbox.outbound_status;
-- none recorded (the rows deleted) is no evidence of a copy
DELETE FROM webhook_inbox.installation;
SELECT paused, reason FROM webhook_inbox.outbound_status;
SELECT webhook_inbox.resume_outbound();
-- the reader may look
SET ROLE webhook_inbox_reader;
SELECT paused FROM webhook_inbox.outbound_status;
SELECT count(*) FROM webhook_inbox.installation;
SELECT webhook_inbox.resume_outbound();
RESET ROLE;
UPDATE webhook_inbox.sources SET enabled = false WHERE name = 'guard_src';
DROP FUNCTION wi_guard_try(text);
