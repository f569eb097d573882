-- sql/upgrade/0.1.0--0.2.0.sql: the hand-written part of the upgrade from
-- release 0.1.0 to 0.2.0.
--
-- The build assembles sql/webhook_inbox--0.1.0--0.2.0.sql from the \echo
-- guard, then this file, then every function, procedure, view, COMMENT and
-- GRANT/REVOKE of the 0.2.0 fragments (sql/*.sql), re-created with CREATE OR
-- REPLACE.  So function bodies need nothing here.
--
-- Append here, in the order your change needs, plain SQL (no \echo guard)
-- run on a database that has 0.1.0, for everything that is not a function
-- body: tables, columns, indexes, constraints, types, triggers, sequences,
-- roles, preset rows (routes, machines), pg_extension_config_dump() of new
-- tables, and DROP FUNCTION for a function removed or whose signature,
-- argument names or return type changed (CREATE OR REPLACE cannot change
-- those), DROP VIEW for a view whose columns changed other than by adding
-- some at its end.
--
-- The upgrade test (make test) installs 0.1.0 with data in every table,
-- runs ALTER EXTENSION webhook_inbox UPDATE and fails, printing the diff
-- ("-" a fresh 0.2.0 install, "+" the upgraded one), when the upgraded schema
-- differs from a fresh 0.2.0 install; alone:
--   WI_SUITES=tap PROVE_TESTS=regress/t/501_release_upgrade.pl make test
-- The assembled script is sql/webhook_inbox--0.1.0--0.2.0.sql (make), and
-- docs/releasing.md says how it is made.

-- The worker's local work reports outcomes as (outcome, events) rows
-- instead of one column per counter.
DROP FUNCTION @extschema@._work_claim(bigint);

-- routes.occurrence_kind: a state route that also records its object once
ALTER TABLE @extschema@.routes ADD COLUMN occurrence_kind text;
ALTER TABLE @extschema@.routes ADD CONSTRAINT routes_occurrence_kind_check CHECK (occurrence_kind IS NULL
	OR (class = 'state' AND occurrence_kind <> ''));
COMMENT ON COLUMN @extschema@.routes.occurrence_kind IS
	'State routes only: the event''s object is also recorded once as an occurrence of this kind, with amount and currency (a refund: its status is followed and the refund is counted once).';

-- sql/search_path.sql (the DO block that pins search_path on every
-- function) runs at the very end of the upgrade script too, after the
-- functions are re-created (CREATE OR REPLACE FUNCTION without a SET clause
-- clears it): the Makefile lists it in SQL_RERUN.

-- Two reconciliation layers per (source, object type): incremental and full,
-- each with its checkpoint; passes that compared less than everything are
-- incomplete, with their reason; full passes count the mirror's objects the
-- provider no longer lists.
ALTER TABLE @extschema@.sweep_checkpoints ADD COLUMN layer text NOT NULL DEFAULT 'incremental'
	CONSTRAINT sweep_checkpoints_layer_check CHECK (layer IN ('incremental', 'full'));
ALTER TABLE @extschema@.sweep_checkpoints DROP CONSTRAINT sweep_checkpoints_pkey;
ALTER TABLE @extschema@.sweep_checkpoints ADD PRIMARY KEY (source_id, object_type, layer);
ALTER TABLE @extschema@.sweep_runs DROP CONSTRAINT sweep_runs_status_check;
ALTER TABLE @extschema@.sweep_runs ADD CONSTRAINT sweep_runs_status_check
	CHECK (status IN ('running', 'complete', 'incomplete', 'failed'));
ALTER TABLE @extschema@.sweep_runs ADD COLUMN layer text NOT NULL DEFAULT 'incremental'
	CONSTRAINT sweep_runs_layer_check CHECK (layer IN ('incremental', 'full'));
ALTER TABLE @extschema@.sweep_runs ADD COLUMN missing integer NOT NULL DEFAULT 0;
ALTER TABLE @extschema@.sweep_runs ADD COLUMN incomplete_reason text;
CREATE TABLE @extschema@.sweep_seen (
	run_id			bigint NOT NULL REFERENCES @extschema@.sweep_runs (id) ON DELETE CASCADE,
	object_id		text NOT NULL,
	PRIMARY KEY (run_id, object_id)
);
REVOKE ALL ON @extschema@.sweep_seen FROM PUBLIC;
DROP FUNCTION @extschema@._sweep_targets(interval);
DROP FUNCTION @extschema@._sweep_begin(integer, text, text, interval);
DROP FUNCTION @extschema@._sweep_finish(bigint, text);
DROP FUNCTION @extschema@.sweep_now(text, text);
DROP FUNCTION @extschema@._sweep_now(text, text);
-- _worker_source() also returns the Shopify Admin API version
DROP FUNCTION @extschema@._worker_source(integer);

-- intake: replay protection for body-only signing schemes (per-source
-- window, digests of the bodies seen)
ALTER TABLE @extschema@.sources ADD COLUMN replay_window interval NOT NULL DEFAULT '7 days'
	CONSTRAINT sources_replay_window_check CHECK (replay_window >= '0 seconds');
CREATE TABLE @extschema@.seen_bodies (
	source_id		integer NOT NULL REFERENCES @extschema@.sources (id) ON DELETE CASCADE,
	body_sha256		bytea NOT NULL,
	event_id		text NOT NULL,
	first_seen_at	timestamptz NOT NULL DEFAULT now(),
	expires_at		timestamptz NOT NULL,
	PRIMARY KEY (source_id, body_sha256)
);
CREATE INDEX seen_bodies_expires_idx ON @extschema@.seen_bodies (expires_at);
REVOKE ALL ON @extschema@.seen_bodies FROM PUBLIC;
