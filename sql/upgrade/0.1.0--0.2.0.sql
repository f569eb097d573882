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

-- Intake goes on while the update runs (the library serves 0.1.0 until it
-- commits).  The tables an intake touches are locked first, in the order an
-- intake takes them (sources, routes, inbox, deliveries): the update waits
-- for the intakes in flight and the next ones wait for its commit, instead
-- of the update's first ALTER TABLE of routes and an intake that holds
-- sources deadlocking (which aborts one of them, perhaps the update).
LOCK TABLE @extschema@.sources, @extschema@.routes, @extschema@.inbox, @extschema@.deliveries
	IN ACCESS EXCLUSIVE MODE;

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


-- Operations (sql/ops.sql): roles, queue owners, requeue batches
DO $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'webhook_inbox_reader') THEN
		CREATE ROLE webhook_inbox_reader NOLOGIN;
	END IF;
	IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'webhook_inbox_operator') THEN
		CREATE ROLE webhook_inbox_operator NOLOGIN IN ROLE webhook_inbox_reader;
	END IF;
	IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'webhook_inbox_finance') THEN
		CREATE ROLE webhook_inbox_finance NOLOGIN IN ROLE webhook_inbox_reader;
	END IF;
END
$$;

CREATE TABLE @extschema@.queue_owners (
	queue			text NOT NULL
		CONSTRAINT queue_owners_queue_check CHECK (queue IN ('quarantined_event', 'unorderable_event',
			'uncertain_effect', 'quarantined_effect', 'failed_sweep', 'skipped_sweep', 'flagged_source')),
	reason			text NOT NULL CONSTRAINT queue_owners_reason_check CHECK (reason <> ''),
	owner			text NOT NULL
		CONSTRAINT queue_owners_owner_check CHECK (owner IN ('engineering', 'operations', 'finance')),
	note			text,
	preset			boolean NOT NULL DEFAULT false,
	PRIMARY KEY (queue, reason, preset)
);
COMMENT ON TABLE @extschema@.queue_owners IS
	'Who owns a queue''s items, by (queue, reason); reason * matches any. A row of yours (preset = false) wins over the preset of the same key; updating a preset row stores your row instead, so pg_dump keeps your choice. Effects without a row keep the owner they were requested with.';

INSERT INTO @extschema@.queue_owners (queue, reason, owner, note, preset) VALUES
	('quarantined_event', '*', 'engineering', 'transport, decoding and routing: fix the route or the source, then requeue', true),
	('quarantined_event', 'ambiguous_tie', 'operations', 'two contents with one version and nothing to ask: a person decides', true),
	('quarantined_event', 'missing_status', 'operations', 'a lifecycle event without its status: a person decides', true),
	('quarantined_event', 'replay_contradicted', 'operations', 'a replayed event the provider''s present contradicts: review, never re-execute', true),
	('unorderable_event', '*', 'operations', 'no version, no read API, no machine: a person decides what the event means', true),
	('failed_sweep', '*', 'engineering', 'reconciliation could not list the provider', true),
	('skipped_sweep', '*', 'engineering', 'incomplete reconciliation passes: they could not compare every object (sweep_runs.incomplete_reason)', true),
	('flagged_source', '*', 'engineering', 'the provider refused our credentials: check api_token', true);

/*
 * A change of a preset row becomes a row of the user's: the preset stays as
 * the extension wrote it (CREATE EXTENSION recreates it on restore), the
 * user's row is dumped and wins.
 */
CREATE FUNCTION @extschema@._queue_owners_keep() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'DELETE' THEN
		RAISE EXCEPTION 'preset owner of % / % cannot be deleted', OLD.queue, OLD.reason
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  HINT = 'Update it, or insert a row of yours with the same queue and reason: yours wins.';
	END IF;
	INSERT INTO webhook_inbox.queue_owners (queue, reason, owner, note, preset)
	VALUES (NEW.queue, NEW.reason, NEW.owner, NEW.note, false)
	ON CONFLICT (queue, reason, preset) DO UPDATE SET owner = EXCLUDED.owner, note = EXCLUDED.note;
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION @extschema@._queue_owners_keep() IS
	'Turns an update of a preset queue owner into a row of the user''s (which pg_dump keeps); refuses deleting a preset.';
CREATE TRIGGER queue_owners_keep BEFORE UPDATE OR DELETE ON @extschema@.queue_owners
	FOR EACH ROW WHEN (OLD.preset) EXECUTE FUNCTION @extschema@._queue_owners_keep();

SELECT pg_catalog.pg_extension_config_dump('@extschema@.queue_owners', 'WHERE NOT preset');

CREATE INDEX inbox_quarantined_idx ON @extschema@.inbox (source_id, reason) WHERE status = 'quarantined';

CREATE TABLE @extschema@.requeue_batches (
	id				bigserial PRIMARY KEY,
	requeued_by		text NOT NULL,
	requeued_at		timestamptz NOT NULL DEFAULT now(),
	filter			jsonb NOT NULL,
	reclassify		boolean NOT NULL,
	events			integer NOT NULL CONSTRAINT requeue_batches_events_check CHECK (events >= 0),
	skipped			integer NOT NULL CONSTRAINT requeue_batches_skipped_check CHECK (skipped >= 0),
	note			text
);
COMMENT ON TABLE @extschema@.requeue_batches IS
	'Audit of every requeue_where() that changed something: who, when, the filter, how many were requeued and skipped; the events are in requeues with this batch_id.';
ALTER TABLE @extschema@.requeues ADD COLUMN batch_id bigint REFERENCES @extschema@.requeue_batches (id);
COMMENT ON COLUMN @extschema@.requeues.batch_id IS 'The requeue_where() batch the replay belongs to; NULL for requeue() and reclassify().';
CREATE INDEX requeues_event_idx ON @extschema@.requeues (event_id);
SELECT pg_catalog.pg_extension_config_dump('@extschema@.requeue_batches', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.requeue_batches_id_seq', '');

CREATE FUNCTION @extschema@._effects_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_catalog.pg_notify('webhook_inbox_effects', k.kind)
	   FROM (SELECT DISTINCT n.kind FROM new_effects n
			  WHERE n.kind OPERATOR(pg_catalog.<>) 'http' AND n.status OPERATOR(pg_catalog.=) 'pending') k;
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION @extschema@._effects_notify() IS
	'Sends NOTIFY webhook_inbox_effects with each kind of due outbox effect the statement made (not http: the worker runs those).';
CREATE TRIGGER effects_notify_insert AFTER INSERT ON @extschema@.effects
	REFERENCING NEW TABLE AS new_effects FOR EACH STATEMENT EXECUTE FUNCTION @extschema@._effects_notify();
CREATE TRIGGER effects_notify_update AFTER UPDATE ON @extschema@.effects
	REFERENCING NEW TABLE AS new_effects FOR EACH STATEMENT EXECUTE FUNCTION @extschema@._effects_notify();

-- worker_stats() gained a column (refused: requests not sent because their
-- URL was not on the source's api_base origin); it and its view are
-- re-created from the fragments.
DROP VIEW @extschema@.worker_counters;
DROP FUNCTION @extschema@.worker_stats();

-- objects.tombstone_pending_since: a read API's 404 is a tombstone only
-- once a second one confirms it.
ALTER TABLE @extschema@.objects ADD COLUMN tombstone_pending_since timestamptz;
COMMENT ON COLUMN @extschema@.objects.tombstone_pending_since IS
	'When a read API first answered 404/410 for the object: the tombstone is saved only when a second such answer comes at least webhook_inbox.tombstone_confirm_delay later, and any save of a present version clears this. NULL: no unconfirmed 404.';

-- sweep_runs.retry_ids: differences skipped under a live claim, read by id
-- by the next pass (the checkpoint no longer moves past them unread).
ALTER TABLE @extschema@.sweep_runs ADD COLUMN retry_ids text[] NOT NULL DEFAULT '{}';
COMMENT ON COLUMN @extschema@.sweep_runs.retry_ids IS
	'Objects that differed but were skipped because a live claim held them: the next pass of the (source, object type) reads them by id first, so the checkpoint may move past them.';

-- intake: inbox and deliveries refer to sources without a per-row foreign
-- key check; a trigger on sources refuses deleting, renumbering or
-- truncating a referenced source instead.  deliveries_received_idx (prune's
-- range) is a BRIN index.
ALTER TABLE @extschema@.inbox DROP CONSTRAINT inbox_source_id_fkey;
ALTER TABLE @extschema@.deliveries DROP CONSTRAINT deliveries_source_id_fkey;
/*
 * The triggers need their function to exist; its body and comment are
 * sql/core.sql's, which the rest of this script re-creates (nothing below
 * deletes a source before that).
 */
CREATE FUNCTION @extschema@._sources_referenced() RETURNS trigger
LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER sources_referenced BEFORE DELETE OR UPDATE OF id
	ON @extschema@.sources FOR EACH ROW EXECUTE FUNCTION @extschema@._sources_referenced();
CREATE TRIGGER sources_referenced_truncate BEFORE TRUNCATE
	ON @extschema@.sources FOR EACH STATEMENT EXECUTE FUNCTION @extschema@._sources_referenced();
DROP INDEX @extschema@.deliveries_received_idx;
CREATE INDEX deliveries_received_idx ON @extschema@.deliveries USING brin (received_at);

-- the worker: its mirror, leases, transitions and occurrences refer to
-- sources without a per-row foreign key check either; sources_referenced
-- refuses deleting a source they refer to.
ALTER TABLE @extschema@.objects DROP CONSTRAINT objects_source_id_fkey;
ALTER TABLE @extschema@.object_leases DROP CONSTRAINT object_leases_source_id_fkey;
ALTER TABLE @extschema@.transitions DROP CONSTRAINT transitions_source_id_fkey;
ALTER TABLE @extschema@.occurrences DROP CONSTRAINT occurrences_source_id_fkey;

-- effects fire once per statement over the transitions it inserted (a
-- trigger per row cost a fifth of a round that records one per event)
DROP TRIGGER transitions_fire_effects ON @extschema@.transitions;
CREATE TRIGGER transitions_fire_effects AFTER INSERT ON @extschema@.transitions
	REFERENCING NEW TABLE AS new_transitions
	FOR EACH STATEMENT EXECUTE FUNCTION @extschema@._fire_effects();

-- effects: where a refund listing continues (uncertain Stripe refunds are looked
-- for by their effect key in the PaymentIntent's refunds)
ALTER TABLE @extschema@.effects ADD COLUMN lookup_cursor text;
-- _effects_claim() takes http_timeout, so that a claim holds only what fits in its lease
DROP FUNCTION @extschema@._effects_claim(text, integer, interval, integer);

-- Preset routes and machines follow the providers' real lifecycles: every
-- Stripe state event fetches the present (PaymentIntents, subscriptions and
-- others have cycles), refunds and disputes are followed and also counted
-- once, charges and Checkout Sessions are routed; Razorpay refunds and orders
-- walk machines of their real statuses.  A user's route of the same key is
-- left as it is.
INSERT INTO @extschema@.machines (machine, from_state, to_state, preset) VALUES
	('payment', 'unknown', 'pending', true),
	('payment', 'pending', 'authorised', true),
	('payment', 'authorised', 'captured', true),
	('payment', 'captured', 'settled', true),
	('payment', 'pending', 'failed', true),
	('payment', 'authorised', 'failed', true),
	('payment', 'captured', 'refunded', true),
	('payment', 'settled', 'refunded', true),
	('razorpay_payment', 'unknown', 'created', true),
	('razorpay_payment', 'created', 'authorized', true),
	('razorpay_payment', 'authorized', 'captured', true),
	('razorpay_payment', 'captured', 'refunded', true),
	('razorpay_payment', 'authorized', 'refunded', true),
	('razorpay_payment', 'created', 'failed', true),
	('razorpay_payment', 'authorized', 'failed', true),
	('razorpay_refund', 'unknown', 'pending', true),
	('razorpay_refund', 'pending', 'processed', true),
	('razorpay_refund', 'pending', 'failed', true),
	('razorpay_order', 'unknown', 'created', true),
	('razorpay_order', 'created', 'attempted', true),
	('razorpay_order', 'attempted', 'paid', true),
	('razorpay_order', 'created', 'paid', true)
ON CONFLICT (machine, from_state, to_state) DO NOTHING;

-- 0.1.0's route version trigger compares rows with ROW(NEW.*) IS DISTINCT FROM
-- ROW(OLD.*), which jsonpath columns cannot do (no equality operator): it is
-- off while the preset routes are updated, and each updated preset's version
-- is bumped here instead (the fragments then re-create it comparing jsonb)
ALTER TABLE @extschema@.routes DISABLE TRIGGER routes_bump;
-- Preset routes a user edited in 0.1.0 are the user's from now on.  0.1.0
-- kept an edit in the preset row itself (preset still true): the release's
-- presets below would overwrite it, and pg_dump (WHERE NOT preset) left it
-- out.  Every preset row that differs from what 0.1.0 shipped (listed here
-- as the frozen script has it) becomes a row of the user's, and the
-- release's preset is written beside it: routes_unique now keys on preset
-- too, and a user's route shadows the preset of the same key (_route_of).
ALTER TABLE @extschema@.routes DROP CONSTRAINT routes_unique,
	ADD CONSTRAINT routes_unique UNIQUE NULLS NOT DISTINCT (source_kind, source_id, event_type, preset);
UPDATE @extschema@.routes r SET preset = false
 WHERE r.preset AND NOT EXISTS (
	SELECT 1 FROM (VALUES
	('stripe', 'customer.subscription.*', 'state', 'fetch', 'subscription', NULL,
	 '$.data.object.id', NULL, '$.data.object.status', '$.created', NULL, NULL, NULL, false, 100),
	('stripe', 'customer.*', 'state', 'fetch', 'customer', NULL,
	 '$.data.object.id', NULL, NULL, '$.created', NULL, NULL, NULL, false, 90),
	('stripe', 'invoice.*', 'state', 'fetch', 'invoice', NULL,
	 '$.data.object.id', NULL, '$.data.object.status', '$.created', NULL, NULL, NULL, false, 100),
	('stripe', 'payment_intent.*', 'state', 'machine', 'payment', NULL,
	 '$.data.object.id', NULL, '$.data.object.status', '$.created', NULL, NULL, 'payment', false, 100),
	('stripe', 'refund.created', 'occurrence', 'occurrence', 'refund', NULL,
	 '$.data.object.id', NULL, NULL, '$.created', '$.data.object.amount', '$.data.object.currency', NULL, false, 100),
	('stripe', 'charge.refund.updated', 'ignore', 'ignore', NULL, NULL,
	 NULL, NULL, NULL, NULL, NULL, NULL, NULL, false, 100),
	('stripe', 'charge.dispute.created', 'occurrence', 'occurrence', 'dispute', NULL,
	 '$.data.object.id', NULL, NULL, '$.created', '$.data.object.amount', '$.data.object.currency', NULL, false, 100),
	('stripe', 'v1.*', 'state', 'fetch', NULL, '$.related_object.type',
	 '$.related_object.id', NULL, NULL, '$.created', NULL, NULL, NULL, false, 50),
	('stripe', 'v2.*', 'state', 'fetch', NULL, '$.related_object.type',
	 '$.related_object.id', NULL, NULL, '$.created', NULL, NULL, NULL, false, 50),
	('shopify', 'orders/*', 'state', 'version', 'order', NULL,
	 '$.id', '$.updated_at', '$.financial_status', '$.updated_at', NULL, NULL, NULL, false, 100),
	('shopify', 'orders/delete', 'state', 'version', 'order', NULL,
	 '$.id', '$.updated_at', NULL, NULL, NULL, NULL, NULL, true, 110),
	('shopify', 'products/*', 'state', 'version', 'product', NULL,
	 '$.id', '$.updated_at', '$.status', '$.updated_at', NULL, NULL, NULL, false, 100),
	('shopify', 'products/delete', 'state', 'version', 'product', NULL,
	 '$.id', '$.updated_at', NULL, NULL, NULL, NULL, NULL, true, 110),
	('shopify', 'customers/*', 'state', 'version', 'customer', NULL,
	 '$.id', '$.updated_at', '$.state', '$.updated_at', NULL, NULL, NULL, false, 100),
	('shopify', 'refunds/create', 'occurrence', 'occurrence', 'refund', NULL,
	 '$.id', NULL, NULL, '$.created_at', NULL, NULL, NULL, false, 110),
	('shopify', 'app/uninstalled', 'ignore', 'ignore', NULL, NULL,
	 NULL, NULL, NULL, NULL, NULL, NULL, NULL, false, 100),
	('github', 'issues*', 'state', 'version', 'issue', NULL,
	 '$.issue.id', '$.issue.updated_at', '$.issue.state', '$.issue.updated_at', NULL, NULL, NULL, false, 100),
	('github', 'pull_request*', 'state', 'version', 'pull_request', NULL,
	 '$.pull_request.id', '$.pull_request.updated_at', '$.pull_request.state', '$.pull_request.updated_at',
	 NULL, NULL, NULL, false, 100),
	('github', 'push', 'occurrence', 'occurrence', 'push', NULL,
	 '$.after', NULL, NULL, '$.head_commit.timestamp', NULL, NULL, NULL, false, 100),
	('github', 'ping', 'ignore', 'ignore', NULL, NULL,
	 NULL, NULL, NULL, NULL, NULL, NULL, NULL, false, 100),
	('standard', '*', 'state', 'unordered', 'object', '$.data.object',
	 '$.data.id', NULL, '$.data.status', '$.timestamp', NULL, NULL, NULL, false, 10),
	('razorpay', 'payment.*', 'state', 'machine', 'payment', NULL,
	 '$.payload.payment.entity.id', NULL, '$.payload.payment.entity.status', '$.created_at',
	 NULL, NULL, 'razorpay_payment', false, 100),
	('razorpay', 'refund.*', 'occurrence', 'occurrence', 'refund', NULL,
	 '$.payload.refund.entity.id', NULL, NULL, '$.created_at',
	 '$.payload.refund.entity.amount', '$.payload.refund.entity.currency', NULL, false, 100)
	) AS p(source_kind, event_type, class, strategy, object_type, object_type_path,
		object_id_path, version_path, status_path, time_path, amount_path, currency_path, machine, tombstone, priority)
	 WHERE p.source_kind = r.source_kind AND r.source_id IS NULL AND p.event_type = r.event_type
	   AND p.class = r.class AND p.strategy = r.strategy
	   AND p.object_type IS NOT DISTINCT FROM r.object_type
	   AND p.object_type_path::jsonpath::text IS NOT DISTINCT FROM r.object_type_path::text
	   AND p.object_id_path::jsonpath::text IS NOT DISTINCT FROM r.object_id_path::text
	   AND p.version_path::jsonpath::text IS NOT DISTINCT FROM r.version_path::text
	   AND p.status_path::jsonpath::text IS NOT DISTINCT FROM r.status_path::text
	   AND p.time_path::jsonpath::text IS NOT DISTINCT FROM r.time_path::text
	   AND p.amount_path::jsonpath::text IS NOT DISTINCT FROM r.amount_path::text
	   AND p.currency_path::jsonpath::text IS NOT DISTINCT FROM r.currency_path::text
	   AND p.machine IS NOT DISTINCT FROM r.machine
	   AND p.tombstone = r.tombstone AND p.priority = r.priority);

INSERT INTO @extschema@.routes (source_kind, event_type, class, strategy, object_type, object_type_path,
	object_id_path, version_path, status_path, time_path, amount_path, currency_path, machine, tombstone,
	occurrence_kind, priority, preset)
VALUES
	/* subscriptions: incomplete, incomplete_expired, trialing, active, past_due, canceled, unpaid, paused */
	('stripe', 'customer.subscription.*', 'state', 'fetch', 'subscription', NULL,
	 '$.data.object.id', NULL, '$.data.object.status', '$.created', NULL, NULL, NULL, false, NULL, 100, true),
	/* customers: customer.deleted fetches {"deleted": true}, a tombstone */
	('stripe', 'customer.*', 'state', 'fetch', 'customer', NULL,
	 '$.data.object.id', NULL, NULL, '$.created', NULL, NULL, NULL, false, NULL, 90, true),
	/* a customer's discounts, sources and tax ids change the customer they name */
	('stripe', 'customer.discount.*', 'state', 'fetch', 'customer', NULL,
	 '$.data.object.customer', NULL, NULL, '$.created', NULL, NULL, NULL, false, NULL, 100, true),
	('stripe', 'customer.source.*', 'state', 'fetch', 'customer', NULL,
	 '$.data.object.customer', NULL, NULL, '$.created', NULL, NULL, NULL, false, NULL, 100, true),
	('stripe', 'customer.tax_id.*', 'state', 'fetch', 'customer', NULL,
	 '$.data.object.customer', NULL, NULL, '$.created', NULL, NULL, NULL, false, NULL, 100, true),
	/* invoices: draft, open, paid, uncollectible, void (a deleted draft answers 404) */
	('stripe', 'invoice.*', 'state', 'fetch', 'invoice', NULL,
	 '$.data.object.id', NULL, '$.data.object.status', '$.created', NULL, NULL, NULL, false, NULL, 100, true),
	/* an upcoming invoice is a preview without an id */
	('stripe', 'invoice.upcoming', 'ignore', 'ignore', NULL, NULL,
	 NULL, NULL, NULL, NULL, NULL, NULL, NULL, false, NULL, 110, true),
	/* PaymentIntents: requires_payment_method, requires_confirmation, requires_action, processing,
	   requires_capture, succeeded, canceled; a failed attempt goes back to requires_payment_method */
	('stripe', 'payment_intent.*', 'state', 'fetch', 'payment_intent', NULL,
	 '$.data.object.id', NULL, '$.data.object.status', '$.created', NULL, NULL, NULL, false, NULL, 100, true),
	/* charges: pending, succeeded, failed (refunded and captured are flags of a charge) */
	('stripe', 'charge.*', 'state', 'fetch', 'charge', NULL,
	 '$.data.object.id', NULL, '$.data.object.status', '$.created', NULL, NULL, NULL, false, NULL, 90, true),
	/* refunds: pending, requires_action, succeeded, failed, canceled; counted once */
	('stripe', 'refund.*', 'state', 'fetch', 'refund', NULL,
	 '$.data.object.id', NULL, '$.data.object.status', '$.created',
	 '$.data.object.amount', '$.data.object.currency', NULL, false, 'refund', 100, true),
	('stripe', 'charge.refund.updated', 'state', 'fetch', 'refund', NULL,
	 '$.data.object.id', NULL, '$.data.object.status', '$.created',
	 '$.data.object.amount', '$.data.object.currency', NULL, false, 'refund', 110, true),
	/* disputes: warning_needs_response ... won, lost (Dispute.Status); counted once */
	('stripe', 'charge.dispute.*', 'state', 'fetch', 'dispute', NULL,
	 '$.data.object.id', NULL, '$.data.object.status', '$.created',
	 '$.data.object.amount', '$.data.object.currency', NULL, false, 'dispute', 100, true),
	/* Checkout Sessions: open, complete, expired */
	('stripe', 'checkout.session.*', 'state', 'fetch', 'checkout.session', NULL,
	 '$.data.object.id', NULL, '$.data.object.status', '$.created', NULL, NULL, NULL, false, NULL, 100, true),
	/* Stripe thin events name the object and nothing else: fetch it */
	('stripe', 'v1.*', 'state', 'fetch', NULL, '$.related_object.type',
	 '$.related_object.id', NULL, NULL, '$.created', NULL, NULL, NULL, false, NULL, 50, true),
	('stripe', 'v2.*', 'state', 'fetch', NULL, '$.related_object.type',
	 '$.related_object.id', NULL, NULL, '$.created', NULL, NULL, NULL, false, NULL, 50, true),
	/* Shopify: resources carry updated_at (one-second) used as version with the tie rule */
	('shopify', 'orders/*', 'state', 'version', 'order', NULL,
	 '$.id', '$.updated_at', '$.financial_status', '$.updated_at', NULL, NULL, NULL, false, NULL, 100, true),
	('shopify', 'orders/delete', 'state', 'version', 'order', NULL,
	 '$.id', '$.updated_at', NULL, NULL, NULL, NULL, NULL, true, NULL, 110, true),
	('shopify', 'products/*', 'state', 'version', 'product', NULL,
	 '$.id', '$.updated_at', '$.status', '$.updated_at', NULL, NULL, NULL, false, NULL, 100, true),
	('shopify', 'products/delete', 'state', 'version', 'product', NULL,
	 '$.id', '$.updated_at', NULL, NULL, NULL, NULL, NULL, true, NULL, 110, true),
	('shopify', 'customers/*', 'state', 'version', 'customer', NULL,
	 '$.id', '$.updated_at', '$.state', '$.updated_at', NULL, NULL, NULL, false, NULL, 100, true),
	('shopify', 'refunds/create', 'occurrence', 'occurrence', 'refund', NULL,
	 '$.id', NULL, NULL, '$.created_at', NULL, NULL, NULL, false, NULL, 110, true),
	('shopify', 'app/uninstalled', 'ignore', 'ignore', NULL, NULL,
	 NULL, NULL, NULL, NULL, NULL, NULL, NULL, false, NULL, 100, true),
	/* the mandatory compliance webhooks: recorded once, and carried out by the shopify_compliance trigger */
	('shopify', 'customers/redact', 'occurrence', 'occurrence', 'customers/redact', NULL,
	 '$.customer.id', NULL, NULL, NULL, NULL, NULL, NULL, false, NULL, 120, true),
	('shopify', 'customers/data_request', 'occurrence', 'occurrence', 'customers/data_request', NULL,
	 '$.data_request.id', NULL, NULL, NULL, NULL, NULL, NULL, false, NULL, 120, true),
	('shopify', 'shop/redact', 'occurrence', 'occurrence', 'shop/redact', NULL,
	 '$.shop_id', NULL, NULL, NULL, NULL, NULL, NULL, false, NULL, 100, true),
	/* GitHub: issues and pull requests carry updated_at; pushes happen once */
	('github', 'issues*', 'state', 'version', 'issue', NULL,
	 '$.issue.id', '$.issue.updated_at', '$.issue.state', '$.issue.updated_at', NULL, NULL, NULL, false, NULL, 100, true),
	('github', 'pull_request*', 'state', 'version', 'pull_request', NULL,
	 '$.pull_request.id', '$.pull_request.updated_at', '$.pull_request.state', '$.pull_request.updated_at',
	 NULL, NULL, NULL, false, NULL, 100, true),
	('github', 'push', 'occurrence', 'occurrence', 'push', NULL,
	 '$.after', NULL, NULL, '$.head_commit.timestamp', NULL, NULL, NULL, false, NULL, 100, true),
	('github', 'ping', 'ignore', 'ignore', NULL, NULL,
	 NULL, NULL, NULL, NULL, NULL, NULL, NULL, false, NULL, 100, true),
	/* Standard Webhooks fix the envelope, not the content: no version, no read API known */
	('standard', '*', 'state', 'unordered', 'object', '$.data.object',
	 '$.data.id', NULL, '$.data.status', '$.timestamp', NULL, NULL, NULL, false, NULL, 10, true),
	/* Razorpay has no read API here: payments, refunds and orders walk their machines */
	('razorpay', 'payment.*', 'state', 'machine', 'payment', NULL,
	 '$.payload.payment.entity.id', NULL, '$.payload.payment.entity.status', '$.created_at',
	 NULL, NULL, 'razorpay_payment', false, NULL, 100, true),
	/* downtime notices name a payment method, not a payment */
	('razorpay', 'payment.downtime.*', 'ignore', 'ignore', NULL, NULL,
	 NULL, NULL, NULL, NULL, NULL, NULL, NULL, false, NULL, 110, true),
	('razorpay', 'refund.*', 'state', 'machine', 'refund', NULL,
	 '$.payload.refund.entity.id', NULL, '$.payload.refund.entity.status', '$.created_at',
	 '$.payload.refund.entity.amount', '$.payload.refund.entity.currency', 'razorpay_refund', false, 'refund', 100, true),
	('razorpay', 'order.*', 'state', 'machine', 'order', NULL,
	 '$.payload.order.entity.id', NULL, '$.payload.order.entity.status', '$.created_at',
	 NULL, NULL, 'razorpay_order', false, NULL, 100, true)
ON CONFLICT ON CONSTRAINT routes_unique DO UPDATE SET
	class = EXCLUDED.class,
	strategy = EXCLUDED.strategy,
	object_type = EXCLUDED.object_type,
	object_type_path = EXCLUDED.object_type_path,
	object_id_path = EXCLUDED.object_id_path,
	version_path = EXCLUDED.version_path,
	status_path = EXCLUDED.status_path,
	time_path = EXCLUDED.time_path,
	amount_path = EXCLUDED.amount_path,
	currency_path = EXCLUDED.currency_path,
	machine = EXCLUDED.machine,
	tombstone = EXCLUDED.tombstone,
	occurrence_kind = EXCLUDED.occurrence_kind,
	priority = EXCLUDED.priority,
	version = routes.version + 1
	WHERE routes.preset;
ALTER TABLE @extschema@.routes ENABLE TRIGGER routes_bump;
-- 0.1.0's preset occurrence routes of refunds and disputes: 0.2.0 follows both
-- as objects whose routes also record the occurrence once (routes.occurrence_kind)
DELETE FROM @extschema@.routes
 WHERE preset AND source_id IS NULL AND source_kind = 'stripe'
   AND event_type IN ('refund.created', 'charge.dispute.created') AND class = 'occurrence';

-- From here on a change of a preset route is stored as the user's row (the
-- function is created here because the trigger needs it; the fragments
-- re-create it after).
CREATE FUNCTION @extschema@._routes_keep() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'DELETE' THEN
		RAISE EXCEPTION 'preset route for % % cannot be deleted',
			coalesce(OLD.source_kind, 'source ' || OLD.source_id), OLD.event_type
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  HINT = 'Update it instead (to stop following these events: SET class = ''ignore'', strategy = ''ignore''): your row is kept beside the preset and wins.';
	END IF;
	INSERT INTO webhook_inbox.routes AS r (source_kind, source_id, event_type, class, object_type, strategy,
		object_id_path, object_type_path, version_path, status_path, time_path, amount_path,
		currency_path, machine, tombstone, priority, version, occurrence_kind, preset)
	VALUES (NEW.source_kind, NEW.source_id, NEW.event_type, NEW.class, NEW.object_type, NEW.strategy,
		NEW.object_id_path, NEW.object_type_path, NEW.version_path, NEW.status_path, NEW.time_path,
		NEW.amount_path, NEW.currency_path, NEW.machine, NEW.tombstone, NEW.priority, NEW.version,
		NEW.occurrence_kind, false)
	ON CONFLICT ON CONSTRAINT routes_unique DO UPDATE SET
		class = CASE WHEN NEW.class IS DISTINCT FROM OLD.class THEN EXCLUDED.class ELSE r.class END,
		object_type = CASE WHEN NEW.object_type IS DISTINCT FROM OLD.object_type THEN EXCLUDED.object_type ELSE r.object_type END,
		strategy = CASE WHEN NEW.strategy IS DISTINCT FROM OLD.strategy THEN EXCLUDED.strategy ELSE r.strategy END,
		object_id_path = CASE WHEN NEW.object_id_path::text IS DISTINCT FROM OLD.object_id_path::text THEN EXCLUDED.object_id_path ELSE r.object_id_path END,
		object_type_path = CASE WHEN NEW.object_type_path::text IS DISTINCT FROM OLD.object_type_path::text THEN EXCLUDED.object_type_path ELSE r.object_type_path END,
		version_path = CASE WHEN NEW.version_path::text IS DISTINCT FROM OLD.version_path::text THEN EXCLUDED.version_path ELSE r.version_path END,
		status_path = CASE WHEN NEW.status_path::text IS DISTINCT FROM OLD.status_path::text THEN EXCLUDED.status_path ELSE r.status_path END,
		time_path = CASE WHEN NEW.time_path::text IS DISTINCT FROM OLD.time_path::text THEN EXCLUDED.time_path ELSE r.time_path END,
		amount_path = CASE WHEN NEW.amount_path::text IS DISTINCT FROM OLD.amount_path::text THEN EXCLUDED.amount_path ELSE r.amount_path END,
		currency_path = CASE WHEN NEW.currency_path::text IS DISTINCT FROM OLD.currency_path::text THEN EXCLUDED.currency_path ELSE r.currency_path END,
		machine = CASE WHEN NEW.machine IS DISTINCT FROM OLD.machine THEN EXCLUDED.machine ELSE r.machine END,
		tombstone = CASE WHEN NEW.tombstone IS DISTINCT FROM OLD.tombstone THEN EXCLUDED.tombstone ELSE r.tombstone END,
		priority = CASE WHEN NEW.priority IS DISTINCT FROM OLD.priority THEN EXCLUDED.priority ELSE r.priority END,
		occurrence_kind = CASE WHEN NEW.occurrence_kind IS DISTINCT FROM OLD.occurrence_kind THEN EXCLUDED.occurrence_kind ELSE r.occurrence_kind END,
		version = r.version + 1;
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION @extschema@._routes_keep() IS
	'Turns an update of a preset route into a route of the user''s (which pg_dump keeps, no upgrade overwrites, and which shadows the preset); refuses deleting a preset.';
CREATE TRIGGER routes_keep BEFORE UPDATE OR DELETE ON @extschema@.routes
	FOR EACH ROW WHEN (OLD.preset) EXECUTE FUNCTION @extschema@._routes_keep();

-- PaymentIntents: 0.1.0's preset route mirrored them as object_type payment
-- (a machine); 0.2.0's fetches them as payment_intent.  Each one 0.1.0 so
-- mirrored is carried over, with its history, its lease, its effects and
-- its events still to process (which now fetch, as 0.2.0's route does), so
-- that later events update it and stripe_payment_intents lists it once.
-- Only where the mapping was the preset's: a source with a route of the
-- user's that maps objects to payment (its own, or one for every Stripe
-- source) keeps them as they are.  Razorpay's payments are not PaymentIntents.
-- (those sources are the subquery written out in each statement below)
-- an object mirrored under both names (a sweep of 0.2.0's may have run): the
-- payment_intent row is the present one
DELETE FROM @extschema@.objects o WHERE o.source_id IN (SELECT s.id FROM @extschema@.sources s WHERE s.kind = 'stripe' AND NOT EXISTS (
	SELECT 1 FROM @extschema@.routes u WHERE NOT u.preset AND u.object_type = 'payment'
	   AND (u.source_id = s.id OR u.source_kind = 'stripe')))
   AND o.object_type = 'payment' AND o.object_id LIKE 'pi\_%'
   AND EXISTS (SELECT 1 FROM @extschema@.objects n WHERE n.source_id = o.source_id
				AND n.object_type = 'payment_intent' AND n.object_id = o.object_id);
UPDATE @extschema@.objects o SET object_type = 'payment_intent'
 WHERE o.source_id IN (SELECT s.id FROM @extschema@.sources s WHERE s.kind = 'stripe' AND NOT EXISTS (
	SELECT 1 FROM @extschema@.routes u WHERE NOT u.preset AND u.object_type = 'payment'
	   AND (u.source_id = s.id OR u.source_kind = 'stripe')))
   AND o.object_type = 'payment' AND o.object_id LIKE 'pi\_%';
DELETE FROM @extschema@.object_leases l WHERE l.source_id IN (SELECT s.id FROM @extschema@.sources s WHERE s.kind = 'stripe' AND NOT EXISTS (
	SELECT 1 FROM @extschema@.routes u WHERE NOT u.preset AND u.object_type = 'payment'
	   AND (u.source_id = s.id OR u.source_kind = 'stripe')))
   AND l.object_type = 'payment' AND l.object_id LIKE 'pi\_%'
   AND EXISTS (SELECT 1 FROM @extschema@.object_leases n WHERE n.source_id = l.source_id
				AND n.object_type = 'payment_intent' AND n.object_id = l.object_id);
UPDATE @extschema@.object_leases l SET object_type = 'payment_intent'
 WHERE l.source_id IN (SELECT s.id FROM @extschema@.sources s WHERE s.kind = 'stripe' AND NOT EXISTS (
	SELECT 1 FROM @extschema@.routes u WHERE NOT u.preset AND u.object_type = 'payment'
	   AND (u.source_id = s.id OR u.source_kind = 'stripe')))
   AND l.object_type = 'payment' AND l.object_id LIKE 'pi\_%';
UPDATE @extschema@.transitions t SET object_type = 'payment_intent'
 WHERE t.source_id IN (SELECT s.id FROM @extschema@.sources s WHERE s.kind = 'stripe' AND NOT EXISTS (
	SELECT 1 FROM @extschema@.routes u WHERE NOT u.preset AND u.object_type = 'payment'
	   AND (u.source_id = s.id OR u.source_kind = 'stripe')))
   AND t.object_type = 'payment' AND t.object_id LIKE 'pi\_%';
UPDATE @extschema@.effects e SET object_type = 'payment_intent'
 WHERE e.source_id IN (SELECT s.id FROM @extschema@.sources s WHERE s.kind = 'stripe' AND NOT EXISTS (
	SELECT 1 FROM @extschema@.routes u WHERE NOT u.preset AND u.object_type = 'payment'
	   AND (u.source_id = s.id OR u.source_kind = 'stripe')))
   AND e.object_type = 'payment' AND e.object_id LIKE 'pi\_%';
UPDATE @extschema@.repairs r SET object_type = 'payment_intent'
 WHERE r.source_id IN (SELECT s.id FROM @extschema@.sources s WHERE s.kind = 'stripe' AND NOT EXISTS (
	SELECT 1 FROM @extschema@.routes u WHERE NOT u.preset AND u.object_type = 'payment'
	   AND (u.source_id = s.id OR u.source_kind = 'stripe')))
   AND r.object_type = 'payment' AND r.object_id LIKE 'pi\_%';
-- every event of them: done ones for their history, the ones still to
-- process with 0.2.0's route (fetch the present)
UPDATE @extschema@.inbox i SET object_type = 'payment_intent',
	   strategy = CASE WHEN i.status IN ('pending', 'retry', 'processing') THEN 'fetch' ELSE i.strategy END,
	   route_id = CASE WHEN i.status IN ('pending', 'retry', 'processing') THEN r.id ELSE i.route_id END,
	   route_version = CASE WHEN i.status IN ('pending', 'retry', 'processing') THEN r.version ELSE i.route_version END
  FROM @extschema@.routes r
 WHERE i.source_id IN (SELECT s.id FROM @extschema@.sources s WHERE s.kind = 'stripe' AND NOT EXISTS (
	SELECT 1 FROM @extschema@.routes u WHERE NOT u.preset AND u.object_type = 'payment'
	   AND (u.source_id = s.id OR u.source_kind = 'stripe')))
   AND i.object_type = 'payment' AND i.object_id LIKE 'pi\_%'
   AND r.preset AND r.source_kind = 'stripe' AND r.event_type = 'payment_intent.*';

-- Receivers that fell back to 0.1.0's intake() (no intake_batch()) look
-- again when the sources channel speaks: this one is sent at the update's commit.
SELECT pg_catalog.pg_notify('webhook_inbox_sources', 'updated');

-- sources.kind: the kinds of this release, from the same list as a fresh
-- install's constraint (include/webhook_inbox_kinds.h, substituted at build
-- time), so that adding a kind needs no DDL written here by hand.
ALTER TABLE @extschema@.sources DROP CONSTRAINT sources_kind_check,
	ADD CONSTRAINT sources_kind_check CHECK (kind IN (@SOURCE_KINDS@));

-- The checks intake's inserts evaluate, with array literals for their lists
-- (read back and planned for every statement: one constant is cheaper than
-- a list to fold).  The same rules; NOT VALID and VALIDATE, so the tables
-- are checked without a long exclusive lock.
ALTER TABLE @extschema@.inbox DROP CONSTRAINT inbox_status_check,
	ADD CONSTRAINT inbox_status_check
	CHECK (status = ANY ('{pending,processing,done,retry,ignored,quarantined}'::text[])) NOT VALID;
ALTER TABLE @extschema@.inbox VALIDATE CONSTRAINT inbox_status_check;
ALTER TABLE @extschema@.inbox DROP CONSTRAINT inbox_claimable_check,
	ADD CONSTRAINT inbox_claimable_check CHECK (status <> ALL ('{pending,retry,processing}'::text[])
		OR (object_type IS NOT NULL AND object_id IS NOT NULL AND strategy IS NOT NULL)) NOT VALID;
ALTER TABLE @extschema@.inbox VALIDATE CONSTRAINT inbox_claimable_check;
ALTER TABLE @extschema@.deliveries DROP CONSTRAINT deliveries_outcome_check,
	ADD CONSTRAINT deliveries_outcome_check
	CHECK (outcome = ANY ('{new,duplicate,quarantined}'::text[])) NOT VALID;
ALTER TABLE @extschema@.deliveries VALIDATE CONSTRAINT deliveries_outcome_check;

-- Intake keeps the routes it read in each backend; a change of routes
-- empties every backend's cache at its commit.  The function is created
-- here because the trigger needs it (the fragments re-create it after).
CREATE FUNCTION @extschema@._routes_changed() RETURNS trigger
AS 'MODULE_PATHNAME', 'wi_routes_changed'
LANGUAGE C;
CREATE TRIGGER routes_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
	ON @extschema@.routes FOR EACH STATEMENT EXECUTE FUNCTION @extschema@._routes_changed();

-- The application's role (sql/grants.sql); its grants follow with the fragments'
DO $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'webhook_inbox_application') THEN
		CREATE ROLE webhook_inbox_application NOLOGIN;
	END IF;
END
$$;

-- tenant_credentials: credentials per (source, tenant), secrets encrypted at
-- rest (sql/credentials.sql); new in 0.2.0, so created empty.
CREATE TABLE @extschema@.tenant_credentials (
	source_id		integer NOT NULL REFERENCES @extschema@.sources (id) ON DELETE CASCADE,
	tenant			text NOT NULL
		CONSTRAINT tenant_credentials_tenant_check CHECK (octet_length(tenant) <= 255 AND tenant !~ '[[:cntrl:]]'),
	kind			text NOT NULL
		CONSTRAINT tenant_credentials_kind_check
			CHECK (kind IN ('github_app', 'github_app_installation', 'shopify_shop', 'api_token')),
	secret			bytea,
	secret_at		timestamptz,
	expires_at		timestamptz,
	refresh_secret	bytea,
	refresh_expires_at timestamptz,
	status			text NOT NULL DEFAULT 'active'
		CONSTRAINT tenant_credentials_status_check CHECK (status IN ('active', 'disabled', 'flagged')),
	status_reason	text,
	status_at		timestamptz,
	refused_at		timestamptz,
	created_at		timestamptz NOT NULL DEFAULT now(),
	updated_at		timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (source_id, tenant),
	CONSTRAINT tenant_credentials_app_check CHECK ((kind = 'github_app') = (tenant = '')),
	CONSTRAINT tenant_credentials_secret_check
		CHECK (secret IS NOT NULL OR kind = 'github_app_installation'),
	CONSTRAINT tenant_credentials_reason_check CHECK ((status = 'active') = (status_reason IS NULL))
);
REVOKE ALL ON @extschema@.tenant_credentials FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('@extschema@.tenant_credentials', '');

-- Shopify's mandatory compliance webhooks: what customers/redact and
-- shop/redact erased (redactions), and customers/data_request as a queue
-- for operations (data_requests), carried out when the worker records the
-- webhook as an occurrence.  The trigger needs its function here; the
-- fragments then re-create it with its body.
CREATE TABLE @extschema@.redactions (
	id				bigserial PRIMARY KEY,
	source_id		integer NOT NULL,
	topic			text NOT NULL
		CONSTRAINT redactions_topic_check CHECK (topic IN ('customers/redact', 'shop/redact')),
	request_event	bigint,
	shop_domain		text,
	customer_id		text,
	orders			text[] NOT NULL DEFAULT '{}',
	inbox_rows		integer NOT NULL,
	objects			integer NOT NULL,
	occurrences		integer NOT NULL,
	erased_at		timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE @extschema@.data_requests (
	id				bigserial PRIMARY KEY,
	source_id		integer NOT NULL,
	request_event	bigint,
	shop_domain		text,
	customer_id		text,
	data_request_id	text,
	orders_requested text[] NOT NULL DEFAULT '{}',
	held			jsonb NOT NULL,
	requested_at	timestamptz NOT NULL DEFAULT now(),
	resolved_at		timestamptz,
	note			text
);
SELECT pg_catalog.pg_extension_config_dump('@extschema@.redactions', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.redactions_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.data_requests', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.data_requests_id_seq', '');
CREATE FUNCTION @extschema@._shopify_compliance() RETURNS trigger
LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER shopify_compliance AFTER INSERT ON @extschema@.occurrences
	FOR EACH ROW WHEN (NEW.kind IN ('customers/redact', 'shop/redact', 'customers/data_request'))
	EXECUTE FUNCTION @extschema@._shopify_compliance();

-- Tenants: a source (one endpoint, one signing secret) may serve many
-- provider accounts (Stripe Connect accounts, a Shopify app's shops, a
-- GitHub App's installations).  The tenant scopes every identity after
-- intake; the existing rows are the source's own account, the empty tenant.
-- The inbox stays unique on (source_id, event_id): a provider's event ids
-- are global to it.
ALTER TABLE @extschema@.inbox ADD COLUMN tenant text NOT NULL DEFAULT '',
	ADD COLUMN tenant_context text;
DROP INDEX @extschema@.inbox_object_idx;
CREATE INDEX inbox_object_idx ON @extschema@.inbox (source_id, tenant, object_type, object_id)
	WHERE status IN ('pending', 'retry', 'processing');
ALTER TABLE @extschema@.deliveries ADD COLUMN tenant text NOT NULL DEFAULT '';
ALTER TABLE @extschema@.objects ADD COLUMN tenant text NOT NULL DEFAULT '';
ALTER TABLE @extschema@.objects DROP CONSTRAINT objects_pkey,
	ADD PRIMARY KEY (source_id, tenant, object_type, object_id);
ALTER TABLE @extschema@.object_leases ADD COLUMN tenant text NOT NULL DEFAULT '';
ALTER TABLE @extschema@.object_leases DROP CONSTRAINT object_leases_pkey,
	ADD PRIMARY KEY (source_id, tenant, object_type, object_id);
ALTER TABLE @extschema@.transitions ADD COLUMN tenant text NOT NULL DEFAULT '';
DROP INDEX @extschema@.transitions_object_idx;
CREATE INDEX transitions_object_idx ON @extschema@.transitions (source_id, tenant, object_type, object_id);
ALTER TABLE @extschema@.occurrences ADD COLUMN tenant text NOT NULL DEFAULT '';
ALTER TABLE @extschema@.occurrences DROP CONSTRAINT occurrences_key,
	ADD CONSTRAINT occurrences_key UNIQUE (source_id, tenant, kind, occurrence_id);
ALTER TABLE @extschema@.effects ADD COLUMN tenant text NOT NULL DEFAULT '';
DROP INDEX @extschema@.effects_object_idx;
CREATE INDEX effects_object_idx ON @extschema@.effects (source_id, tenant, object_type, object_id);
ALTER TABLE @extschema@.sweep_checkpoints ADD COLUMN tenant text NOT NULL DEFAULT '';
ALTER TABLE @extschema@.sweep_checkpoints DROP CONSTRAINT sweep_checkpoints_pkey,
	ADD PRIMARY KEY (source_id, tenant, object_type, layer);
ALTER TABLE @extschema@.sweep_runs ADD COLUMN tenant text NOT NULL DEFAULT '';
DROP INDEX @extschema@.sweep_runs_target_idx;
CREATE INDEX sweep_runs_target_idx ON @extschema@.sweep_runs (source_id, tenant, object_type, started_at DESC);
ALTER TABLE @extschema@.repairs ADD COLUMN tenant text NOT NULL DEFAULT '';
CREATE TABLE @extschema@.tenants (
	source_id		integer NOT NULL REFERENCES @extschema@.sources (id) ON DELETE CASCADE,
	tenant			text NOT NULL CONSTRAINT tenants_tenant_check CHECK (tenant <> ''),
	context			text,
	status			text NOT NULL DEFAULT 'active'
		CONSTRAINT tenants_status_check CHECK (status IN ('active', 'disabled', 'flagged')),
	reason			text,
	discovered_by	text NOT NULL
		CONSTRAINT tenants_discovered_check CHECK (discovered_by IN ('delivery', 'list', 'manual')),
	first_seen		timestamptz NOT NULL DEFAULT now(),
	last_seen		timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (source_id, tenant)
);
REVOKE ALL ON @extschema@.tenants FROM PUBLIC;
-- claim() returns the tenant; saves and sweeps take it
DROP FUNCTION @extschema@.claim(text, integer, interval, interval);
DROP FUNCTION @extschema@._save_fetched(bigint, integer, text, jsonpath, jsonpath, jsonpath, timestamptz);
DROP FUNCTION @extschema@._sweep_lease(integer, text, text, text, interval);
-- request_effect() takes the tenant an effect is made for
DROP FUNCTION @extschema@.request_effect(text, text, jsonb, text, text, text, bigint, text, bigint);
-- a tenant whose credentials the provider refused is a queue of its own
ALTER TABLE @extschema@.queue_owners DROP CONSTRAINT queue_owners_queue_check,
	ADD CONSTRAINT queue_owners_queue_check CHECK (queue IN ('quarantined_event', 'unorderable_event',
		'uncertain_effect', 'quarantined_effect', 'failed_sweep', 'skipped_sweep', 'flagged_source',
		'flagged_tenant'));
INSERT INTO @extschema@.queue_owners (queue, reason, owner, note, preset) VALUES
	('flagged_tenant', '*', 'engineering', 'the provider refused a tenant''s credentials: check them (webhook_inbox.tenants.reason)', true);

-- Retention for every table: prune() takes the ages of the history tables
-- (its signature and result change); the transitions an effect names are
-- found by an index.
DROP FUNCTION @extschema@.prune(interval, interval);
CREATE INDEX effects_transition_idx ON @extschema@.effects (transition_id) WHERE transition_id IS NOT NULL;

-- Backups: the replay-protection digests are dumped; the restore guard
-- records the identity of the database the data lives in (a restore
-- elsewhere pauses outbound work until resume_outbound()).
SELECT pg_catalog.pg_extension_config_dump('@extschema@.seen_bodies', '');
CREATE TABLE @extschema@.installation (
	system_identifier bigint NOT NULL,
	database_oid	oid NOT NULL,
	database_name	name NOT NULL,
	recorded_at		timestamptz NOT NULL DEFAULT now(),
	recorded_by		text NOT NULL DEFAULT current_user,
	note			text NOT NULL
);
INSERT INTO @extschema@.installation (system_identifier, database_oid, database_name, note)
SELECT c.system_identifier, d.oid, d.datname, 'ALTER EXTENSION UPDATE'
  FROM pg_catalog.pg_control_system() c, pg_catalog.pg_database d
 WHERE d.datname = pg_catalog.current_database();
SELECT pg_catalog.pg_extension_config_dump('@extschema@.installation', '');
REVOKE ALL ON @extschema@.installation FROM PUBLIC;

-- Sources' signing secrets and api_token encrypted at rest under
-- webhook_inbox.key_file (sql/core.sql).  The trigger needs its function to
-- exist; its body is sql/core.sql's, which the rest of this script
-- re-creates, and sql/seal_secrets.sql (re-run at the end) encrypts what
-- 0.1.0 kept in clear when a key file is set.
CREATE FUNCTION @extschema@._sources_seal() RETURNS trigger
LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER sources_seal BEFORE INSERT OR UPDATE OF id, signing_secrets, api_token
	ON @extschema@.sources FOR EACH ROW EXECUTE FUNCTION @extschema@._sources_seal();

-- A dump restores whole: tenants (their statuses and reasons) is dumped;
-- the triggers that carry out business logic do nothing while a restore
-- loads the dump (_restore_session(), function bodies re-created below).
SELECT pg_catalog.pg_extension_config_dump('@extschema@.tenants', '');

-- Tenants are held to what is signed: intake caps the tenants a source's
-- deliveries register per hour (settings.tenants_per_hour), counted by this
-- index.
CREATE INDEX tenants_recent_idx ON @extschema@.tenants (source_id, first_seen) WHERE discovered_by = 'delivery';

-- Pacing within the providers' documented limits (extension/pace.c): the
-- settings rate_limit, endpoint_rate_limit and rate_limit_scope, checked
-- (_worker_source(), which returns them, and sweep_now(), whose tenant now
-- defaults to every tenant, are dropped above and re-created below).
ALTER TABLE @extschema@.sources ADD CONSTRAINT sources_pacing_check CHECK (
	CASE WHEN NOT settings ? 'rate_limit' THEN true
		 WHEN jsonb_typeof(settings -> 'rate_limit') = 'number' THEN (settings ->> 'rate_limit')::numeric > 0
		 ELSE false END
	AND CASE WHEN NOT settings ? 'endpoint_rate_limit' THEN true
		 WHEN jsonb_typeof(settings -> 'endpoint_rate_limit') = 'number'
		 THEN (settings ->> 'endpoint_rate_limit')::numeric > 0
		 ELSE false END
	AND (NOT settings ? 'rate_limit_scope' OR settings ->> 'rate_limit_scope' IN ('platform', 'tenant')));

-- One tenant lifecycle: tenant_status, remove_tenant() and the functions
-- are re-created from the fragments; the preset owner of flagged_tenant
-- points at tenant_status (the trigger that turns a change of a preset
-- into the user's row is off for it).
ALTER TABLE @extschema@.queue_owners DISABLE TRIGGER queue_owners_keep;
UPDATE @extschema@.queue_owners
   SET note = 'the provider refused a tenant''s credentials: check them (webhook_inbox.tenant_status), then enable_tenant()'
 WHERE preset AND queue = 'flagged_tenant' AND reason = '*';
ALTER TABLE @extschema@.queue_owners ENABLE TRIGGER queue_owners_keep;

-- Hidden is not deleted: objects a read API cannot see (outside a horizon
-- of an adapter: a Shopify order older than 60 days without
-- read_all_orders, a tenant whose access ended) are marked hidden instead
-- of tombstoned; a tombstone records its evidence (a read's inference
-- yields to a newer signed version); a source's access scopes are kept;
-- a revival is a repair outside any sweep.
ALTER TABLE @extschema@.objects
	ADD COLUMN hidden_since timestamptz,
	ADD COLUMN hidden_reason text,
	ADD COLUMN tombstone_evidence text
		CONSTRAINT objects_tombstone_evidence_check CHECK (tombstone_evidence IN ('read', 'provider')),
	ADD CONSTRAINT objects_hidden_check CHECK ((hidden_since IS NULL) = (hidden_reason IS NULL));
-- 0.1.0 kept no evidence: its tombstones stay final, as it treated them
UPDATE @extschema@.objects o SET tombstone_evidence = 'provider' WHERE o.deleted;
ALTER TABLE @extschema@.repairs ALTER COLUMN run_id DROP NOT NULL;
CREATE TABLE @extschema@.source_scopes (
	source_id		integer NOT NULL REFERENCES @extschema@.sources (id) ON DELETE CASCADE,
	tenant			text NOT NULL DEFAULT '',
	scopes			text[] NOT NULL,
	asked_at		timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (source_id, tenant)
);
CREATE FUNCTION @extschema@._source_scopes_stale() RETURNS trigger
LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER source_scopes_stale AFTER UPDATE OF api_token ON @extschema@.sources
	FOR EACH ROW WHEN (OLD.api_token IS DISTINCT FROM NEW.api_token)
	EXECUTE FUNCTION @extschema@._source_scopes_stale();
CREATE FUNCTION @extschema@._tenant_scopes_stale() RETURNS trigger
LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER source_scopes_updated AFTER INSERT ON @extschema@.occurrences
	FOR EACH ROW WHEN (NEW.kind = 'app/scopes_update')
	EXECUTE FUNCTION @extschema@._tenant_scopes_stale();
CREATE TRIGGER tenant_scopes_stale AFTER INSERT OR UPDATE OF secret ON @extschema@.tenant_credentials
	FOR EACH ROW WHEN (NEW.kind = 'shopify_shop')
	EXECUTE FUNCTION @extschema@._tenant_scopes_stale();
INSERT INTO @extschema@.routes (source_kind, event_type, class, strategy, object_type, object_type_path,
	object_id_path, version_path, status_path, time_path, amount_path, currency_path, machine, tombstone,
	occurrence_kind, priority, preset)
VALUES ('shopify', 'app/scopes_update', 'occurrence', 'occurrence', 'app/scopes_update', NULL,
	'$.updated_at', NULL, NULL, '$.updated_at', NULL, NULL, NULL, false, NULL, 100, true);

-- A sweep's page says how many hidden objects it showed again: a page that
-- showed none wrote only the run's bookkeeping, which the worker commits
-- without waiting for the disk.
DROP FUNCTION @extschema@._sweep_page(bigint, text, jsonpath, jsonpath, jsonpath, boolean);

-- The worker's claim of work that needs the provider (or a retry, or an
-- expired claim) reads an index of its own, not every pending event of the
-- local strategies.
CREATE INDEX inbox_remote_claim_idx ON @extschema@.inbox (id)
	WHERE status IN ('retry', 'processing') OR (status = 'pending' AND strategy = 'fetch');
