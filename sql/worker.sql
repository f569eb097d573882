
---------------------------------------------------------------------------
-- Background worker: the SQL half of processing a claim, saving fetched
-- state, reconciliation sweeps, and the worker's counters.
--
-- The worker (extension/round.c) drives these functions a round at a time,
-- set-based; every save is guarded by the object's claim token (the one
-- fence check, _fenced()), so a worker whose lease was taken over is
-- fenced, never last-write-wins.
---------------------------------------------------------------------------

CREATE TABLE @extschema@.sweep_checkpoints (
	source_id		integer NOT NULL REFERENCES @extschema@.sources (id),
	object_type		text NOT NULL,
	checkpoint		timestamptz,
	last_run_id		bigint,
	updated_at		timestamptz NOT NULL DEFAULT now(),
	layer			text NOT NULL DEFAULT 'incremental'
		CONSTRAINT sweep_checkpoints_layer_check CHECK (layer IN ('incremental', 'full')),
	tenant			text NOT NULL DEFAULT '',
	PRIMARY KEY (source_id, tenant, object_type, layer)
);
COMMENT ON TABLE @extschema@.sweep_checkpoints IS
	'Per (source, tenant, object type, layer): the start time of the last complete pass; the next incremental one lists what happened since it minus webhook_inbox.sweep_overlap. A complete full pass also moves the incremental checkpoint.';

CREATE TABLE @extschema@.sweep_runs (
	id				bigserial PRIMARY KEY,
	source_id		integer NOT NULL REFERENCES @extschema@.sources (id),
	object_type		text NOT NULL,
	trigger			text NOT NULL
		CONSTRAINT sweep_runs_trigger_check CHECK (trigger IN ('schedule', 'manual')),
	listed_since	timestamptz,
	started_at		timestamptz NOT NULL DEFAULT clock_timestamp(),
	finished_at		timestamptz,
	pages			integer NOT NULL DEFAULT 0,
	listed			integer NOT NULL DEFAULT 0,
	differences		integer NOT NULL DEFAULT 0,
	repaired		integer NOT NULL DEFAULT 0,
	skipped			integer NOT NULL DEFAULT 0,
	errors			integer NOT NULL DEFAULT 0,
	status			text NOT NULL DEFAULT 'running'
		CONSTRAINT sweep_runs_status_check CHECK (status IN ('running', 'complete', 'incomplete', 'failed')),
	error			text,
	layer			text NOT NULL DEFAULT 'incremental'
		CONSTRAINT sweep_runs_layer_check CHECK (layer IN ('incremental', 'full')),
	missing			integer NOT NULL DEFAULT 0,
	incomplete_reason text,
	retry_ids		text[] NOT NULL DEFAULT '{}',
	tenant			text NOT NULL DEFAULT ''
);
CREATE INDEX sweep_runs_target_idx ON @extschema@.sweep_runs (source_id, tenant, object_type, started_at DESC);
COMMENT ON TABLE @extschema@.sweep_runs IS
	'One row per reconciliation pass: its layer, what was listed (objects, or events for a provider with an events API), how many differed from the mirror, how many were repaired or skipped (object under a live claim), errors, and whether the pass completed. Only a complete pass moves the checkpoint; an incomplete one compared less than everything and says why in incomplete_reason, a failed one says why in error.';
COMMENT ON COLUMN @extschema@.sweep_runs.tenant IS
	'The provider account the pass read, under that account''s credentials (Stripe-Account); empty: the source''s own account.';
COMMENT ON COLUMN @extschema@.sweep_runs.retry_ids IS
	'Objects that differed but were skipped because a live claim held them: the next pass of the (source, object type) reads them by id first, so the checkpoint may move past them.';
COMMENT ON COLUMN @extschema@.sweep_runs.layer IS
	'incremental: what happened since the checkpoint (Stripe: the events list, each event fed into the inbox; others: objects changed since); full: every object of the type, and the mirror''s objects the provider no longer lists.';
COMMENT ON COLUMN @extschema@.sweep_runs.missing IS
	'Full passes: objects of the mirror absent from the provider''s listing, each read by id (404 is a tombstone).';

CREATE TABLE @extschema@.sweep_seen (
	run_id			bigint NOT NULL REFERENCES @extschema@.sweep_runs (id) ON DELETE CASCADE,
	object_id		text NOT NULL,
	PRIMARY KEY (run_id, object_id)
);
COMMENT ON TABLE @extschema@.sweep_seen IS
	'The ids a running full pass has listed, to find the mirror''s objects the provider no longer has; emptied when the pass ends.';

CREATE TABLE @extschema@.repairs (
	id				bigserial PRIMARY KEY,
	run_id			bigint REFERENCES @extschema@.sweep_runs (id),
	source_id		integer NOT NULL REFERENCES @extschema@.sources (id),
	object_type		text NOT NULL,
	object_id		text NOT NULL,
	before			jsonb,
	after			jsonb,
	outcome			text NOT NULL,
	at				timestamptz NOT NULL DEFAULT now(),
	tenant			text NOT NULL DEFAULT ''
);
CREATE INDEX repairs_run_idx ON @extschema@.repairs (run_id);
COMMENT ON TABLE @extschema@.repairs IS
	'Each difference a sweep repaired: the mirror before and after (status, version, deleted), and the save''s outcome (event: a missed event the incremental layer fed into the inbox; hidden: an object the read API cannot see, kept and marked hidden instead of deleted). A revived row (run_id NULL) is a tombstone a read had inferred that a later signed webhook or read with a strictly newer version overrode.';
COMMENT ON COLUMN @extschema@.repairs.run_id IS
	'The sweep run that made the repair; NULL for a revival, which the save of a newer version makes outside any sweep.';

CREATE TABLE @extschema@.source_scopes (
	source_id		integer NOT NULL REFERENCES @extschema@.sources (id) ON DELETE CASCADE,
	tenant			text NOT NULL DEFAULT '',
	scopes			text[] NOT NULL,
	asked_at		timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (source_id, tenant)
);
COMMENT ON TABLE @extschema@.source_scopes IS
	'The access scopes a source''s token holds for a tenant (empty: its own account), as the provider answered (Shopify: currentAppInstallation.accessScopes): a horizon such a scope lifts (read_all_orders) is lifted only when listed here. Asked by the worker once per token: a change of the source''s api_token and a Shopify app/scopes_update webhook (the source_scopes_updated trigger) clear the row, and the next sweep asks again.';

CREATE FUNCTION @extschema@._source_scopes_stale() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	DELETE FROM webhook_inbox.source_scopes c WHERE c.source_id = NEW.id AND c.tenant = '';
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION @extschema@._source_scopes_stale() IS
	'Forgets the scopes of a source''s own token when the token changes: the next sweep asks the provider again.';
CREATE TRIGGER source_scopes_stale AFTER UPDATE OF api_token ON @extschema@.sources
	FOR EACH ROW WHEN (OLD.api_token IS DISTINCT FROM NEW.api_token)
	EXECUTE FUNCTION @extschema@._source_scopes_stale();

CREATE FUNCTION @extschema@._tenant_scopes_stale() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	DELETE FROM webhook_inbox.source_scopes c WHERE c.source_id = NEW.source_id AND c.tenant = NEW.tenant;
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION @extschema@._tenant_scopes_stale() IS
	'Forgets the scopes of the row''s (source_id, tenant), so that the next sweep asks the provider again: for a Shopify app/scopes_update webhook recorded (once, as an occurrence; trigger source_scopes_updated) and for a shop''s new token, installed or refreshed (tenant_credentials; trigger tenant_scopes_stale).';
CREATE TRIGGER source_scopes_updated AFTER INSERT ON @extschema@.occurrences
	FOR EACH ROW WHEN (NEW.kind = 'app/scopes_update')
	EXECUTE FUNCTION @extschema@._tenant_scopes_stale();

CREATE FUNCTION @extschema@._scopes_answered(p_source_id integer, p_tenant text, p_body text)
RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
	doc jsonb;
	got text[];
BEGIN
	BEGIN
		doc := p_body::jsonb;
	EXCEPTION WHEN others THEN
		RAISE EXCEPTION 'the access scopes answer is not JSON' USING ERRCODE = 'invalid_text_representation';
	END;
	IF jsonb_typeof(doc #> '{data,currentAppInstallation,accessScopes}') IS DISTINCT FROM 'array' THEN
		RAISE EXCEPTION 'the access scopes answer has no data.currentAppInstallation.accessScopes array'
			USING ERRCODE = 'invalid_text_representation',
				  DETAIL = left(coalesce(doc ->> 'errors', ''), 200);
	END IF;
	got := ARRAY(SELECT DISTINCT a ->> 'handle'
				   FROM jsonb_array_elements(doc #> '{data,currentAppInstallation,accessScopes}') a
				  WHERE jsonb_typeof(a -> 'handle') = 'string'
				  ORDER BY 1);
	INSERT INTO webhook_inbox.source_scopes AS c (source_id, tenant, scopes)
	VALUES (p_source_id, p_tenant, got)
	ON CONFLICT (source_id, tenant) DO UPDATE SET scopes = EXCLUDED.scopes, asked_at = now();
	RETURN got;
END
$$;
COMMENT ON FUNCTION @extschema@._scopes_answered(integer, text, text) IS
	'Keeps the access scopes of a provider''s answer (Shopify: data.currentAppInstallation.accessScopes[].handle) for the source''s tenant; raises on an answer without them.';

CREATE FUNCTION @extschema@._scopes_try(p_source_id integer, p_tenant text, p_body text)
RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM webhook_inbox._scopes_answered(p_source_id, p_tenant, p_body);
	RETURN NULL;
EXCEPTION WHEN invalid_text_representation THEN
	RETURN SQLERRM;
END
$$;
COMMENT ON FUNCTION @extschema@._scopes_try(integer, text, text) IS
	'_scopes_answered() for a sweep: an answer without the scopes is returned as its message (the sweep logs it and goes on with the scopes unknown, which hides what a scope would show) rather than raised, so that sweep_now() in a backend does not fail on it.';

CREATE FUNCTION @extschema@._horizons(OUT kind text, OUT object_type text, OUT horizon text, OUT days integer,
	OUT created_path text, OUT lifted_by text, OUT description text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'wi_horizons'
LANGUAGE C STABLE;
COMMENT ON FUNCTION @extschema@._horizons() IS
	'The horizons every provider adapter declares (extension/adapters/*.c), one row each: read through webhook_inbox.horizons.';

CREATE VIEW @extschema@.horizons AS
SELECT h.kind, h.object_type, h.horizon, h.days, h.created_path, h.lifted_by, h.description
  FROM @extschema@._horizons() h;
COMMENT ON VIEW @extschema@.horizons IS
	'What each provider kind''s read API cannot see, as its adapter declares it (extension/adapters/): age, objects created more than days ago (created_path), unless the source holds the scope lifted_by; events, how long the events list keeps events; tenant, a tenant whose access ended. A null or 404 for an object outside a horizon makes it hidden, never deleted.';

CREATE FUNCTION @extschema@._time_or_null(v jsonb) RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
BEGIN
	RETURN webhook_inbox._time_of(v);
EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow OR invalid_text_representation THEN
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION @extschema@._time_or_null(jsonb) IS
	'_time_of(), or NULL for a value that is no time: what a payload says of an object must never fail the save that reads it.';

CREATE FUNCTION @extschema@._hidden_why(p_source_id integer, p_tenant text, p_object_type text, p_state jsonb)
RETURNS text
LANGUAGE sql STABLE AS $$
	/*
	 * Why the source's read API cannot see the object, or NULL when it can
	 * (its 404 is then evidence).  Unknown scopes lift nothing: without an
	 * answer from the provider an old order is hidden, which a later read
	 * after the scopes are known corrects, where a wrong tombstone would
	 * drop every later webhook.
	 */
	SELECT coalesce(
		(SELECT pg_catalog.format('tenant: %s is %s (%s)', pg_catalog.quote_literal(t.tenant), t.status,
								  coalesce(t.reason, h.description))
		   FROM webhook_inbox.sources s
		   JOIN webhook_inbox.horizons h ON h.kind = s.kind AND h.horizon = 'tenant'
				AND h.object_type IN ('*', p_object_type)
		   JOIN webhook_inbox.tenants t ON t.source_id = s.id AND t.tenant = p_tenant AND t.status = 'disabled'
		  WHERE s.id = p_source_id
		  LIMIT 1),
		(SELECT pg_catalog.format('age: created %s, more than %s days ago, and the source %s %s',
								  pg_catalog.to_char(c.created AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), h.days,
								  CASE WHEN sc.scopes IS NULL THEN 'has not been told it holds' ELSE 'does not hold' END,
								  h.lifted_by)
		   FROM webhook_inbox.sources s
		   JOIN webhook_inbox.horizons h ON h.kind = s.kind AND h.horizon = 'age'
				AND h.object_type IN ('*', p_object_type)
		  CROSS JOIN LATERAL (SELECT webhook_inbox._time_or_null(jsonb_path_query_first(p_state, h.created_path::jsonpath))
									 AS created) c
		   LEFT JOIN webhook_inbox.source_scopes sc ON sc.source_id = s.id AND sc.tenant = p_tenant
		  WHERE s.id = p_source_id AND c.created < now() - make_interval(days => h.days)
			AND (h.lifted_by IS NULL OR sc.scopes IS NULL OR NOT h.lifted_by = ANY (sc.scopes))
		  LIMIT 1))
$$;
COMMENT ON FUNCTION @extschema@._hidden_why(integer, text, text, jsonb) IS
	'Why a source''s read API cannot see an object of a tenant (p_state: what is known of it, for its creation time), by webhook_inbox.horizons and source_scopes; NULL when it can, so that its 404 is evidence of a deletion.';

---------------------------------------------------------------------------
-- Processing a claim
---------------------------------------------------------------------------

CREATE FUNCTION @extschema@._round_events(p_ids bigint[], p_tokens bigint[], p_from text,
	p_routes boolean DEFAULT true)
RETURNS TABLE (id bigint, claim_token bigint, source_id integer, tenant text, object_type text, object_id text,
			   strategy text, route_id integer, status_value text, payload jsonb, provider_version numeric,
			   provider_time timestamptz, machine text, occurrence_kind text, amount_path jsonpath,
			   currency_path jsonpath, tombstone boolean)
LANGUAGE sql STABLE AS $$
	/*
	 * The events a round works on, each with the token of its object's
	 * claim: events claimed under a lease (p_from processing, still under
	 * that token), or pending events the round took itself (p_from
	 * pending).  No SET search_path: the planner inlines it into each
	 * statement of _work_events() (see sql/search_path.sql).
	 */
	SELECT e.id, e.tok, e.source_id, e.tenant, e.object_type, e.object_id, e.strategy, e.route_id, e.status_value,
		   e.payload, e.provider_version, e.provider_time,
		   r.machine, r.occurrence_kind, r.amount_path, r.currency_path, r.tombstone
	  FROM (SELECT i.id, c.tok, i.source_id, i.tenant, i.object_type, i.object_id, i.strategy, i.route_id,
				   i.status_value, i.payload, i.provider_version, i.provider_time
			  FROM ROWS FROM (pg_catalog.unnest(p_ids), pg_catalog.unnest(p_tokens)) AS c(id, tok)
			 /*
			  * one probe of the primary key per event, always: as a join, a
			  * plan made for a round of a thousand events would rather scan
			  * the inbox
			  */
			 CROSS JOIN LATERAL (SELECT x.* FROM webhook_inbox.inbox x WHERE x.id OPERATOR(pg_catalog.=) c.id OFFSET 0) i
			 WHERE i.status OPERATOR(pg_catalog.=) p_from
			   AND (p_from OPERATOR(pg_catalog.=) 'pending' OR i.claim_token OPERATOR(pg_catalog.=) c.tok)
			/*
			 * and the columns of its route the round reads, joined to the
			 * events as a whole (OFFSET 0): joined inside the probe of each
			 * event, by each statement, the routes were read and hashed again
			 * for every event (a plan made for the arrays' ten rows), about
			 * 5 us an event in each statement.  p_routes false (a constant
			 * where the call is inlined) leaves them NULL.
			 */
			OFFSET 0) e
	  LEFT JOIN webhook_inbox.routes r ON p_routes AND r.id OPERATOR(pg_catalog.=) e.route_id
$$;
COMMENT ON FUNCTION @extschema@._round_events(bigint[], bigint[], text, boolean) IS
	'The events of a round with their claim''s token: claimed (processing under that token) or taken by the round itself (pending); with p_routes, the columns of its route the round reads (machine, occurrence_kind, amount_path, currency_path, tombstone), NULL without.';

CREATE FUNCTION @extschema@._work_events(p_ids bigint[], p_tokens bigint[], p_from text,
	p_occurrences boolean DEFAULT false)
RETURNS TABLE (token bigint, outcome text, events integer)
LANGUAGE plpgsql
AS $$
DECLARE
	/* decided events: finished in one statement at the end */
	d_id bigint[] := '{}';
	d_token bigint[] := '{}';
	d_status text[] := '{}';
	d_reason text[] := '{}';
	d_outcome text[] := '{}';
	/* outcomes counted besides the decisions: ties a fetch decides, occurrence kinds */
	x_token bigint[] := '{}';
	x_outcome text[] := '{}';
	/* the round's events by what decides them, each with its claim's token */
	a_ids bigint[];				/* the route alone */
	a_toks bigint[];
	o_ids bigint[];				/* occurrences (and state events that also record one) */
	o_toks bigint[];
	m_ids bigint[];				/* machine walks */
	m_toks bigint[];
	v_ids bigint[];				/* version walks */
	v_toks bigint[];
	f_toks bigint[];			/* claims with a fetch event */
	n_obj bigint;				/* their objects, and of them those this round created */
	n_new bigint;
	bad record;
BEGIN
	/*
	 * Each statement below reads only the events it decides: one pass
	 * sorts them, so a round of occurrences reads each event twice (here
	 * and in its insert), not once per statement.  A caller that read the
	 * strategy of every event, all of them occurrence (p_occurrences),
	 * leaves out this pass: such events are all decided by the
	 * occurrences' statement, and that statement reads only those still
	 * as the round took them.
	 */
	IF p_occurrences THEN
		o_ids := p_ids;
		o_toks := p_tokens;
		a_ids := '{}';
		m_ids := '{}';
		v_ids := '{}';
		f_toks := '{}';
	ELSE
	SELECT coalesce(array_agg(i.id) FILTER (WHERE k.a), '{}'), coalesce(array_agg(i.claim_token) FILTER (WHERE k.a), '{}'),
		   coalesce(array_agg(i.id) FILTER (WHERE k.o), '{}'), coalesce(array_agg(i.claim_token) FILTER (WHERE k.o), '{}'),
		   coalesce(array_agg(i.id) FILTER (WHERE k.m), '{}'), coalesce(array_agg(i.claim_token) FILTER (WHERE k.m), '{}'),
		   coalesce(array_agg(i.id) FILTER (WHERE k.v), '{}'), coalesce(array_agg(i.claim_token) FILTER (WHERE k.v), '{}'),
		   /* fetch events: only the provider's present decides them */
		   coalesce(array_agg(DISTINCT i.claim_token) FILTER (WHERE i.strategy = 'fetch'), '{}')
	  INTO a_ids, a_toks, o_ids, o_toks, m_ids, m_toks, v_ids, v_toks, f_toks
	  FROM webhook_inbox._round_events(p_ids, p_tokens, p_from) i
	 CROSS JOIN LATERAL (
			SELECT i.strategy = 'machine' AND i.machine IS NOT NULL AND i.status_value IS NOT NULL AS m,
				   i.strategy = 'version' AS v,
				   i.strategy = 'occurrence'
					OR (i.occurrence_kind IS NOT NULL AND i.strategy NOT IN ('ignore', 'unordered')) AS o) k0
	 CROSS JOIN LATERAL (SELECT k0.m, k0.v, k0.o,
								NOT (k0.m OR k0.v OR i.strategy IN ('occurrence', 'fetch')) AS a) k;
	END IF;
	x_token := x_token || f_toks;
	x_outcome := x_outcome || array_fill('need_fetch'::text, ARRAY[cardinality(f_toks)]);

	IF cardinality(a_ids) > 0 THEN
	/*
	 * Events decided by their route alone, and machine events that cannot
	 * be applied: one statement.
	 */
	SELECT d_id || coalesce(array_agg(i.id), '{}'), d_token || coalesce(array_agg(i.claim_token), '{}'),
		   d_status || coalesce(array_agg(CASE WHEN i.strategy = 'ignore' THEN 'ignored' ELSE 'quarantined' END), '{}'),
		   d_reason || coalesce(array_agg(CASE i.strategy
				WHEN 'ignore' THEN 'route: ignore'
				WHEN 'unordered' THEN 'unorderable: the route has no version, no read API and no state machine'
				WHEN 'machine' THEN 'missing_status: the event carries no status for its machine'
				ELSE format('no_strategy: unknown strategy %s', i.strategy) END), '{}'),
		   d_outcome || coalesce(array_agg(CASE i.strategy WHEN 'ignore' THEN 'ignored'
				WHEN 'unordered' THEN 'unorderable' END), '{}')
	  INTO d_id, d_token, d_status, d_reason, d_outcome
	  FROM webhook_inbox._round_events(a_ids, a_toks, p_from) i
	 WHERE (i.strategy NOT IN ('fetch', 'version', 'machine', 'occurrence')
			OR (i.strategy = 'machine' AND (i.machine IS NULL OR i.status_value IS NULL)));

	END IF;

	IF cardinality(o_ids) > 0 THEN
	/*
	 * Occurrences: insert-once, one statement.  An occurrence event records
	 * its object as an occurrence of its object type; a state event whose
	 * route names an occurrence_kind records its object as one of that kind
	 * too, and is then decided by its own strategy below.  A claim covers
	 * one object, so the events of one kind in it carry the same occurrence:
	 * the first in provider order records it, the others are duplicates.
	 */
	WITH ev AS (
		SELECT i.id, i.claim_token, i.source_id, i.tenant, i.object_id, i.strategy = 'occurrence' AS decide,
			   CASE WHEN i.strategy = 'occurrence' THEN i.object_type ELSE i.occurrence_kind END AS kind,
			   coalesce(i.payload #> '{data,object}', i.payload) AS obj,
			   webhook_inbox._path_text(i.payload, i.amount_path)::numeric::bigint AS amt,
			   webhook_inbox._path_text(i.payload, i.currency_path) AS cur,
			   i.provider_version, i.provider_time
		  FROM webhook_inbox._round_events(o_ids, o_toks, p_from) i
		 WHERE (i.strategy = 'occurrence'
				OR (i.occurrence_kind IS NOT NULL AND i.strategy NOT IN ('ignore', 'unordered')))),
	ranked AS (
		SELECT e.*, row_number() OVER (PARTITION BY e.claim_token, e.kind
									   ORDER BY e.provider_version NULLS LAST, e.provider_time NULLS LAST,
												e.id) AS rn
		  FROM ev e),
	ins AS (
		INSERT INTO webhook_inbox.occurrences (source_id, tenant, kind, occurrence_id, amount, currency, payload,
											   first_event_id)
		SELECT e.source_id, e.tenant, e.kind, e.object_id,
			   coalesce(e.amt, CASE WHEN jsonb_typeof(e.obj -> 'amount') = 'number'
									THEN (e.obj ->> 'amount')::numeric::bigint END),
			   coalesce(e.cur, e.obj ->> 'currency'), e.obj, e.id
		  FROM ranked e WHERE e.rn = 1
		 ORDER BY e.source_id, e.tenant, e.kind, e.object_id
		ON CONFLICT ON CONSTRAINT occurrences_key DO NOTHING
		RETURNING first_event_id, kind)
	SELECT d_id || coalesce(array_agg(e.id) FILTER (WHERE e.decide), '{}'),
		   d_token || coalesce(array_agg(e.claim_token) FILTER (WHERE e.decide), '{}'),
		   d_status || coalesce(array_agg('done'::text) FILTER (WHERE e.decide), '{}'),
		   d_reason || coalesce(array_agg(CASE WHEN NOT e.recorded
				THEN 'duplicate: occurrence already recorded' END) FILTER (WHERE e.decide), '{}'),
		   d_outcome || coalesce(array_agg(CASE WHEN e.recorded THEN 'recorded' ELSE 'duplicate' END)
				FILTER (WHERE e.decide), '{}'),
		   x_token || coalesce(array_agg(e.claim_token) FILTER (WHERE NOT e.decide AND e.recorded), '{}'),
		   x_outcome || coalesce(array_agg('recorded'::text) FILTER (WHERE NOT e.decide AND e.recorded), '{}')
	  INTO d_id, d_token, d_status, d_reason, d_outcome, x_token, x_outcome
	  /* an event records at most one occurrence: its id says which were new (a hashed lookup) */
	  FROM (SELECT r.*, r.id IN (SELECT n.first_event_id FROM ins n) AS recorded FROM ranked r) e;
	END IF;

	IF cardinality(m_ids) > 0 OR cardinality(v_ids) > 0 THEN
	/*
	 * Machines.  Each event's outcome depends on the status the one before
	 * it left, so the events of each object are walked in provider order,
	 * all objects at once, by one recursive statement; then the mirror, the
	 * transitions (applied and backward, recorded once each) and the
	 * decisions are written in one more.  The same checks as
	 * apply_transition(), whose rules this is.
	 */
	SELECT i.machine, i.object_id, i.status_value INTO bad
	  FROM webhook_inbox._round_events(m_ids, m_toks, p_from) i
	 WHERE i.strategy = 'machine'
	   AND i.machine IS NOT NULL AND i.status_value IS NOT NULL
	   AND (i.object_id = '' OR i.status_value = ''
			OR NOT EXISTS (SELECT 1 FROM webhook_inbox.machines m WHERE m.machine = i.machine))
	 LIMIT 1;
	IF FOUND THEN
		IF bad.object_id = '' OR bad.status_value = '' THEN
			RAISE EXCEPTION 'object_type, object_id, machine and new_status must not be empty'
				USING ERRCODE = 'null_value_not_allowed';
		END IF;
		RAISE EXCEPTION 'machine "%" does not exist', bad.machine
			USING ERRCODE = 'undefined_object', HINT = 'Insert its edges into webhook_inbox.machines.';
	END IF;
	SELECT i.object_id, i.provider_version INTO bad
	  FROM webhook_inbox._round_events(v_ids, v_toks, p_from, false) i
	 WHERE i.strategy = 'version'
	   AND (i.object_id = '' OR i.object_type = '' OR i.provider_version = 'NaN'::numeric)
	 LIMIT 1;
	IF FOUND THEN
		IF bad.object_id = '' THEN
			RAISE EXCEPTION 'object_type and object_id must not be empty' USING ERRCODE = 'invalid_parameter_value';
		END IF;
		RAISE EXCEPTION 'version must be a number, not NaN' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	/*
	 * The mirror rows of every machine and version object, created where
	 * missing and locked in key order (no deadlock between workers), before
	 * either walk reads them.  A row this round created is this
	 * transaction's alone until it commits (no other can see it to lock or
	 * change it), so the lock is taken only when some of the rows were
	 * there before.
	 */
	WITH c AS MATERIALIZED (
		SELECT DISTINCT ON (i.source_id, i.tenant, i.object_type, i.object_id) i.source_id, i.tenant, i.object_type,
			   i.object_id, CASE WHEN i.strategy = 'machine' THEN 'unknown' END AS status
		  FROM webhook_inbox._round_events(m_ids || v_ids, m_toks || v_toks, p_from) i
		 WHERE (i.strategy = 'version'
				OR (i.strategy = 'machine' AND i.machine IS NOT NULL AND i.status_value IS NOT NULL))
		 ORDER BY i.source_id, i.tenant, i.object_type, i.object_id, i.strategy = 'machine' DESC),
	ins AS (
		INSERT INTO webhook_inbox.objects (source_id, tenant, object_type, object_id, status)
		SELECT c.source_id, c.tenant, c.object_type, c.object_id, c.status
		  FROM c ORDER BY c.source_id, c.tenant, c.object_type, c.object_id
		ON CONFLICT DO NOTHING
		RETURNING 1)
	SELECT (SELECT count(*) FROM c), (SELECT count(*) FROM ins) INTO n_obj, n_new;
	IF n_new < n_obj THEN
		PERFORM 1 FROM webhook_inbox.objects o
		 WHERE (o.source_id, o.tenant, o.object_type, o.object_id) IN (
				SELECT i.source_id, i.tenant, i.object_type, i.object_id
				  FROM webhook_inbox._round_events(m_ids || v_ids, m_toks || v_toks, p_from, false) i
				 WHERE i.strategy IN ('machine', 'version'))
		 ORDER BY o.source_id, o.tenant, o.object_type, o.object_id
		   FOR UPDATE OF o;
	END IF;
	WITH RECURSIVE ev AS (
		SELECT i.id, i.claim_token, i.source_id, i.tenant, i.object_type, i.object_id, i.status_value AS st, i.machine,
			   coalesce(i.payload #> '{data,object}', i.payload) AS state,
			   row_number() OVER (PARTITION BY i.claim_token
								  ORDER BY i.provider_version NULLS LAST, i.provider_time NULLS LAST, i.id) AS rn
		  FROM webhook_inbox._round_events(m_ids, m_toks, p_from) i
		 WHERE i.strategy = 'machine'
		   AND i.machine IS NOT NULL AND i.status_value IS NOT NULL),
	walk AS (
		SELECT e.*, p.cur AS from_status,
			   CASE WHEN e.st = p.cur THEN 'duplicate'
					WHEN webhook_inbox.transition_allowed(e.machine, p.cur, e.st) THEN 'applied'
					ELSE 'backward' END AS res
		  FROM ev e
		  JOIN webhook_inbox.objects o
			ON o.source_id = e.source_id AND o.tenant = e.tenant AND o.object_type = e.object_type AND o.object_id = e.object_id
		 CROSS JOIN LATERAL (SELECT coalesce(o.status, 'unknown') AS cur) p
		 WHERE e.rn = 1
		UNION ALL
		SELECT e.*, p.cur,
			   CASE WHEN e.st = p.cur THEN 'duplicate'
					WHEN webhook_inbox.transition_allowed(e.machine, p.cur, e.st) THEN 'applied'
					ELSE 'backward' END
		  FROM walk w
		  JOIN ev e ON e.claim_token = w.claim_token AND e.rn = w.rn + 1
		 CROSS JOIN LATERAL (SELECT CASE WHEN w.res = 'applied' THEN w.st ELSE w.from_status END AS cur) p),
	last AS (
		SELECT DISTINCT ON (w.claim_token) w.*
		  FROM walk w WHERE w.res = 'applied' ORDER BY w.claim_token, w.rn DESC),
	upd AS (
		UPDATE webhook_inbox.objects x
		   SET status = f.st, state = coalesce(f.state, x.state), last_event_id = f.id,
			   fence_token = greatest(x.fence_token, f.claim_token), deleted = false, updated_at = now(),
			   tombstone_pending_since = NULL, tombstone_evidence = NULL
		  FROM last f
		 WHERE x.source_id = f.source_id AND x.tenant = f.tenant AND x.object_type = f.object_type AND x.object_id = f.object_id),
	tr AS (
		INSERT INTO webhook_inbox.transitions (source_id, tenant, object_type, object_id, machine, from_status,
											   to_status, applied, reason, cause, event_id)
		SELECT w.source_id, w.tenant, w.object_type, w.object_id, w.machine, w.from_status, w.st, w.res = 'applied',
			   CASE WHEN w.res = 'backward'
					THEN format('backward: %s is not reachable from %s', w.st, w.from_status) END,
			   'event ' || w.id, w.id
		  FROM walk w WHERE w.res IN ('applied', 'backward')
		 ORDER BY w.claim_token, w.rn)
	SELECT d_id || coalesce(array_agg(w.id), '{}'), d_token || coalesce(array_agg(w.claim_token), '{}'),
		   d_status || coalesce(array_agg(CASE WHEN w.res = 'backward' THEN 'ignored' ELSE 'done' END), '{}'),
		   d_reason || coalesce(array_agg(CASE WHEN w.res = 'backward'
				THEN format('backward: %s is not reachable from the current status', w.st) END), '{}'),
		   d_outcome || coalesce(array_agg(w.res), '{}')
	  INTO d_id, d_token, d_status, d_reason, d_outcome
	  FROM walk w;

	/*
	 * Versions: the same walk, by upsert_object()'s rules (guard.c): a
	 * strictly newer version is applied, an older one is stale, an equal one
	 * a duplicate if its content is identical and otherwise a tie (fetched
	 * when the source has a read API, else quarantined ambiguous_tie); a
	 * tombstone stands as _tombstone_holds() says (the provider's is final,
	 * a read's yields to a strictly newer version: revived); without a
	 * version, the event is the present.  The walk starts at each object's
	 * stored state (row 0) and carries the state each applied event leaves;
	 * then the mirror and the transitions are written in one statement.
	 */
	WITH RECURSIVE ev AS (
		SELECT i.id, i.claim_token, i.source_id, i.tenant, i.object_type, i.object_id, i.provider_version AS ver,
			   coalesce(i.tombstone, false) AS del,
			   CASE WHEN coalesce(i.tombstone, false) THEN NULL ELSE i.status_value END AS st,
			   CASE WHEN coalesce(i.tombstone, false) THEN NULL ELSE i.payload END AS state,
			   s.api_base IS NOT NULL AS readable,
			   row_number() OVER (PARTITION BY i.claim_token
								  ORDER BY i.provider_version NULLS LAST, i.provider_time NULLS LAST, i.id) AS rn
		  FROM webhook_inbox._round_events(v_ids, v_toks, p_from) i
		  JOIN webhook_inbox.sources s ON s.id = i.source_id
		 WHERE i.strategy = 'version'),
	walk AS (
		SELECT c.claim_token, c.source_id, c.tenant, c.object_type, c.object_id, 0::bigint AS rn,
			   NULL::bigint AS id, NULL::text AS res, false AS readable, NULL::text AS from_st,
			   NULL::numeric AS ev_ver, NULL::text AS ev_st, NULL::bigint AS last_id,
			   o.status AS st, o.version AS ver, o.state, o.deleted AS del,
			   (o.status IS NULL AND o.version IS NULL AND o.state IS NULL AND NOT o.deleted) AS fresh,
			   o.tombstone_evidence AS evidence, false AS revived
		  FROM (SELECT DISTINCT e.claim_token, e.source_id, e.tenant, e.object_type, e.object_id FROM ev e) c
		  JOIN webhook_inbox.objects o
			ON o.source_id = c.source_id AND o.tenant = c.tenant AND o.object_type = c.object_type AND o.object_id = c.object_id
		UNION ALL
		SELECT w.claim_token, w.source_id, w.tenant, w.object_type, w.object_id, e.rn, e.id, d.res, e.readable,
			   CASE WHEN w.del THEN 'deleted' ELSE w.st END, e.ver, e.st,
			   CASE WHEN d.res = 'applied' THEN e.id ELSE w.last_id END,
			   CASE WHEN d.res = 'applied' THEN coalesce(e.st, w.st) ELSE w.st END,
			   CASE WHEN d.res = 'applied' THEN coalesce(e.ver, w.ver) ELSE w.ver END,
			   CASE WHEN d.res = 'applied' THEN coalesce(e.state, w.state) ELSE w.state END,
			   CASE WHEN d.res = 'applied' THEN e.del ELSE w.del END,
			   w.fresh AND d.res <> 'applied',
			   /* a deletion event's tombstone is the provider's word */
			   CASE WHEN d.res <> 'applied' THEN w.evidence WHEN e.del THEN 'provider' END,
			   d.res = 'applied' AND w.del AND NOT e.del
		  FROM walk w
		  JOIN ev e ON e.claim_token = w.claim_token AND e.rn = w.rn + 1
		 CROSS JOIN LATERAL (
			SELECT NOT w.fresh AND w.del = e.del AND (e.st IS NULL OR e.st = w.st)
				   AND (e.state IS NULL OR (w.state IS NOT NULL AND e.state = w.state)) AS same) q
		 /* a tombstone a read inferred yields to a strictly newer version: revived */
		 CROSS JOIN LATERAL (
			SELECT webhook_inbox._version_rule(w.fresh, e.ver, w.ver, e.del,
					   webhook_inbox._tombstone_holds(w.del, w.evidence, e.ver, w.ver), q.same) AS res) d),
	last AS (
		SELECT DISTINCT ON (w.claim_token) w.*
		  FROM walk w
		 WHERE EXISTS (SELECT 1 FROM walk a WHERE a.claim_token = w.claim_token AND a.res = 'applied')
		 ORDER BY w.claim_token, w.rn DESC),
	upd AS (
		UPDATE webhook_inbox.objects x
		   SET status = f.st, version = f.ver, state = f.state, deleted = f.del,
			   fence_token = greatest(x.fence_token, f.claim_token), last_event_id = coalesce(f.last_id, x.last_event_id),
			   updated_at = now(), tombstone_pending_since = NULL, tombstone_evidence = f.evidence
		  FROM last f
		 WHERE x.source_id = f.source_id AND x.tenant = f.tenant AND x.object_type = f.object_type AND x.object_id = f.object_id),
	rev AS (
		/* each revival, a repair of its own kind outside any sweep */
		INSERT INTO webhook_inbox.repairs (run_id, source_id, tenant, object_type, object_id, before, after, outcome)
		SELECT NULL, w.source_id, w.tenant, w.object_type, w.object_id,
			   jsonb_build_object('deleted', true, 'evidence', 'read', 'version', p.ver),
			   jsonb_build_object('status', w.st, 'version', w.ver, 'deleted', false, 'event', w.id), 'revived'
		  FROM walk w JOIN walk p ON p.claim_token = w.claim_token AND p.rn = w.rn - 1
		 WHERE w.revived
		 ORDER BY w.claim_token, w.rn),
	tr AS (
		/* the status change of each applied event, a deletion counting as one */
		INSERT INTO webhook_inbox.transitions (source_id, tenant, object_type, object_id, from_status, to_status,
											   version, cause, event_id)
		SELECT w.source_id, w.tenant, w.object_type, w.object_id, w.from_st, t.to_st, w.ev_ver, 'event ' || w.id, w.id
		  FROM walk w
		 CROSS JOIN LATERAL (SELECT CASE WHEN w.del THEN 'deleted' ELSE w.ev_st END AS to_st) t
		 WHERE w.res = 'applied' AND t.to_st IS NOT NULL AND t.to_st IS DISTINCT FROM w.from_st
		 ORDER BY w.claim_token, w.rn),
	decided AS (
		SELECT w.* FROM walk w WHERE w.rn > 0 AND NOT (w.res = 'tie' AND w.readable))
	SELECT d_id || coalesce((SELECT array_agg(x.id) FROM decided x), '{}'),
		   d_token || coalesce((SELECT array_agg(x.claim_token) FROM decided x), '{}'),
		   d_status || coalesce((SELECT array_agg(CASE x.res WHEN 'tie' THEN 'quarantined'
				WHEN 'stale' THEN 'ignored' ELSE 'done' END) FROM decided x), '{}'),
		   d_reason || coalesce((SELECT array_agg(CASE x.res
				WHEN 'tie' THEN 'ambiguous_tie: equal version with different content and no read API'
				WHEN 'stale' THEN 'stale: a newer version is stored' END) FROM decided x), '{}'),
		   d_outcome || coalesce((SELECT array_agg(CASE WHEN x.revived THEN 'revived' ELSE x.res END)
								   FROM decided x), '{}'),
		   /* equal version, different content: only the present can tell */
		   x_token || coalesce((SELECT array_agg(w.claim_token) FROM walk w, (VALUES (1), (2)) k(k)
								  WHERE w.res = 'tie' AND w.readable), '{}'),
		   x_outcome || coalesce((SELECT array_agg(CASE k.k WHEN 1 THEN 'tie' ELSE 'need_fetch' END)
								   FROM walk w, (VALUES (1), (2)) k(k)
								  WHERE w.res = 'tie' AND w.readable), '{}')
	  INTO d_id, d_token, d_status, d_reason, d_outcome, x_token, x_outcome;
	END IF;

	/*
	 * A replayed event (requeued or reclassified) that the stored present
	 * contradicts, stale or backward, is set aside for a person as
	 * replay_contradicted rather than dropped: a replay never decides anew.
	 * Only an ignored event can be one, so a round that ignored none skips
	 * the check.
	 */
	IF 'ignored' = ANY (d_status) THEN
		SELECT array_agg(CASE WHEN x.contradicted THEN 'quarantined' ELSE d.st END ORDER BY d.n),
			   array_agg(CASE WHEN x.contradicted THEN 'replay_contradicted: ' || d.re ELSE d.re END ORDER BY d.n)
		  INTO d_status, d_reason
		  FROM unnest(d_id, d_status, d_reason) WITH ORDINALITY AS d(id, st, re, n)
		 CROSS JOIN LATERAL (SELECT d.st = 'ignored' AND split_part(d.re, ':', 1) IN ('stale', 'backward')
									AND EXISTS (SELECT 1 FROM webhook_inbox.requeues q WHERE q.event_id = d.id)
								 AS contradicted) x;
	END IF;

	/*
	 * What complete() and quarantine() do, for every decided event of the
	 * round in one statement: from processing under the claim's token, or
	 * straight from pending for the events the round took itself (the
	 * token is recorded on them all).
	 */
	UPDATE webhook_inbox.inbox i
	   SET status = d.st, reason = d.re, updated_at = now(), claim_token = d.tok,
		   processed_at = CASE WHEN d.st = 'quarantined' THEN i.processed_at ELSE now() END,
		   decided_route = i.route_id, decided_route_version = i.route_version
	  FROM unnest(d_id, d_token, d_status, d_reason) AS d(id, tok, st, re)
	 WHERE i.id = d.id AND i.status = p_from AND (p_from = 'pending' OR i.claim_token = d.tok);

	RETURN QUERY
	SELECT c.tok, c.o, count(*)::integer
	  FROM (SELECT d.tok, d.o FROM unnest(d_token, d_outcome) AS d(tok, o) WHERE d.o IS NOT NULL
			UNION ALL
			SELECT d.tok, 'quarantined' FROM unnest(d_token, d_status) AS d(tok, st) WHERE d.st = 'quarantined'
			UNION ALL
			SELECT x.tok, x.o FROM unnest(x_token, x_outcome) AS x(tok, o)) c
	 GROUP BY 1, 2;
END
$$;
COMMENT ON FUNCTION @extschema@._work_events(bigint[], bigint[], text, boolean) IS
	'The local work of a round''s events (version, machine, occurrence, unordered, ignore), set-based: occurrences, machine walks, version walks with their transitions, and the finishing of every decided event are one statement each for the whole round. p_ids and p_tokens pair each event with its object''s claim token; p_from says whether they were claimed (processing) or taken by the round (pending); p_occurrences, that the caller read every event''s strategy and all are occurrence (their sorting by strategy is left out). Returns (claim token, outcome, events) rows, outcome names as in extension/outcome.c; need_fetch marks a claim only a fetch can decide (fetch strategy, or a tie on a source with a read API).';

CREATE FUNCTION @extschema@._work_round(p_tokens bigint[])
RETURNS TABLE (token bigint, outcome text, events integer)
LANGUAGE plpgsql AS $$
DECLARE
	live bigint[];				/* claims still ours, their leases locked */
	fenced bigint[];			/* claims taken over: nothing of theirs is finished */
	ids bigint[];
	toks bigint[];
BEGIN
	/*
	 * The claims' leases, locked in token order (no deadlock between
	 * workers), and the fence check of each object: a claim that was taken
	 * over is reported fenced and left to its new holder.
	 */
	SELECT coalesce(array_agg(l.token) FILTER (WHERE NOT f.fenced), '{}'),
		   coalesce(array_agg(l.token) FILTER (WHERE f.fenced), '{}')
	  INTO live, fenced
	  FROM (SELECT x.* FROM webhook_inbox.object_leases x WHERE x.token = ANY (p_tokens)
			 ORDER BY x.token FOR UPDATE) l
	 /* asked once per claim (OFFSET 0: the call is not copied into each FILTER) */
	 CROSS JOIN LATERAL (SELECT webhook_inbox._fenced(l.source_id, l.tenant, l.object_type, l.object_id, l.token) AS fenced
						 OFFSET 0) f;
	fenced := fenced || ARRAY(SELECT t FROM unnest(p_tokens) t
							   WHERE t <> ALL (live) AND t <> ALL (fenced));
	SELECT coalesce(array_agg(i.id ORDER BY i.id), '{}'), coalesce(array_agg(i.claim_token ORDER BY i.id), '{}')
	  INTO ids, toks
	  FROM webhook_inbox.inbox i
	 WHERE i.claim_token = ANY (live) AND i.status = 'processing';

	RETURN QUERY SELECT w.token, w.outcome, w.events FROM webhook_inbox._work_events(ids, toks, 'processing') w;
	/* the claims left with nothing processing end */
	DELETE FROM webhook_inbox.object_leases x
	 WHERE x.token = ANY (live)
	   AND NOT EXISTS (SELECT 1 FROM webhook_inbox.inbox i
						WHERE i.claim_token = x.token AND i.status = 'processing');
	RETURN QUERY SELECT f, 'fenced'::text, 1 FROM unnest(fenced) f;
END
$$;
COMMENT ON FUNCTION @extschema@._work_round(bigint[]) IS
	'The local work of all the claims of a round (_work_events() over every event still processing under a live claim), after the one fence check of each claim''s object; ends the claims left with nothing processing. Returns (claim token, outcome, events) rows; a claim taken over is one fenced row.';

CREATE FUNCTION @extschema@._local_take(max_objects integer, scan_floor boolean DEFAULT false)
RETURNS TABLE (ord integer, first boolean, source_id integer, tenant text, object_type text, object_id text,
			   id bigint, occurrences boolean)
AS 'MODULE_PATHNAME', 'wi_local_take'
LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION @extschema@._local_take(integer, boolean) IS
	'The objects _work_local() takes: of the objects with a due pending event that needs no provider request (in order of the oldest, up to twice max_objects), up to max_objects whose advisory lock (claim()''s) this transaction gets, numbered by ord from 1: an object whose events the scan read are all occurrence events (occurrences) with one row per such event, first on the first, any other with one row, its oldest event''s. scan_floor (the background worker''s): the scan starts where its last full scan, within a second, found the first candidate.';

CREATE FUNCTION @extschema@._work_local(p_max integer, p_scan_floor boolean DEFAULT false)
RETURNS TABLE (token bigint, outcome text, events integer)
LANGUAGE plpgsql AS $$
DECLARE
	/* the objects locked, their tokens, and those of them fenced */
	l_sid integer[];
	l_ten text[];
	l_type text[];
	l_oid text[];
	l_occ boolean[];			/* the events the scan read of it are all occurrences */
	l_tok bigint[];
	fenced bigint[];
	/* their events as the scan read them, each with its object's number */
	e_id bigint[];
	e_ord integer[];
	ids bigint[];
	toks bigint[];
	occ boolean;				/* every event taken is an occurrence event */
	r_tok bigint[];
	r_out text[];
	r_n integer[];
	need bigint[];
BEGIN
	IF p_max IS NULL OR p_max < 1 OR p_max > 10000 THEN
		RAISE EXCEPTION 'max_objects must be between 1 and 10000'
			USING ERRCODE = 'invalid_parameter_value', DETAIL = format('The value given was %s.', p_max);
	END IF;
	/*
	 * Objects whose pending events need no provider request are worked in
	 * the transaction that takes them, with no lease and no processing
	 * state in between: the object's advisory lock (the one claim() takes,
	 * never waited for) holds it until the commit.  First the objects
	 * locked, with the events the scan read of each (_local_take()) ...
	 */
	SELECT coalesce(array_agg(c.source_id) FILTER (WHERE c.first), '{}'),
		   coalesce(array_agg(c.tenant) FILTER (WHERE c.first), '{}'),
		   coalesce(array_agg(c.object_type) FILTER (WHERE c.first), '{}'),
		   coalesce(array_agg(c.object_id) FILTER (WHERE c.first), '{}'),
		   coalesce(array_agg(c.occurrences) FILTER (WHERE c.first), '{}'),
		   coalesce(array_agg(c.id), '{}'), coalesce(array_agg(c.ord), '{}')
	  INTO l_sid, l_ten, l_type, l_oid, l_occ, e_id, e_ord
	  FROM webhook_inbox._local_take(p_max, p_scan_floor) c;
	/*
	 * ... then a fresh fencing token for each object (drawn once per
	 * object, here: a join could evaluate nextval() again) ...
	 */
	l_tok := ARRAY(SELECT nextval('webhook_inbox.claim_token_seq') FROM generate_subscripts(l_sid, 1));
	/*
	 * ... and, in a statement whose snapshot follows the locks (a claim
	 * that held one has committed its lease by now), of them those the
	 * fence check stops: those a claim or sweep holds.  One statement for
	 * all of them, planned for each round on the tables as they are
	 * (EXECUTE): a plan kept from a round that saw the mirror empty would
	 * read all of it for every object of the rounds after.
	 */
	EXECUTE 'SELECT coalesce(array_agg(f.token) FILTER (WHERE f.fenced), ''{}'')
			   FROM webhook_inbox._fences($1, $2, $3, $4, $5) f'
	   INTO fenced
	  USING l_sid, l_ten, l_type, l_oid, l_tok;
	/*
	 * ... and the pending events of the others.  An object whose events
	 * the scan read are all occurrence events is worked with those: each
	 * records its occurrence once, so its events past the scan, or stored
	 * meanwhile, lose nothing by being the next round's.  Any other object
	 * is worked with every pending event it has now, which a probe of
	 * inbox_object_idx finds: its versions and transitions are applied
	 * together (a backlog holds an object's events far apart, and the scan
	 * reads only the oldest).  Each statement of _work_events() reads the
	 * events again as they are now (pending), so one another worker took
	 * between the scan and the lock is left out.
	 */
	SELECT coalesce(array_agg(x.id ORDER BY x.id), '{}'), coalesce(array_agg(x.tok ORDER BY x.id), '{}'),
		   coalesce(bool_and(x.occ), false)
	  INTO ids, toks, occ
	  FROM (SELECT e.id, l_tok[e.ord] AS tok, true AS occ
			  FROM unnest(e_id, e_ord) AS e(id, ord)
			 WHERE l_occ[e.ord] AND l_tok[e.ord] <> ALL (fenced)
			UNION ALL
			SELECT i.id, o.tok, i.strategy = 'occurrence'
			  FROM unnest(l_sid, l_ten, l_type, l_oid, l_tok, l_occ)
				   AS o(source_id, tenant, object_type, object_id, tok, occ)
			 CROSS JOIN LATERAL (
					SELECT i.id, i.strategy FROM webhook_inbox.inbox i
					 WHERE i.source_id = o.source_id AND i.tenant = o.tenant AND i.object_type = o.object_type
					   AND i.object_id = o.object_id
					   AND i.status IN ('pending', 'retry', 'processing') AND i.status = 'pending'
					   AND i.strategy IN ('occurrence', 'version', 'machine', 'unordered', 'ignore')
					   AND i.next_attempt_at <= now()
					OFFSET 0) i		/* a probe of inbox_object_idx per object, never a scan */
			 WHERE NOT o.occ AND o.tok <> ALL (fenced)) x;
	SELECT coalesce(array_agg(w.token), '{}'), coalesce(array_agg(w.outcome), '{}'),
		   coalesce(array_agg(w.events), '{}')
	  INTO r_tok, r_out, r_n
	  FROM webhook_inbox._work_events(ids, toks, 'pending', occ) w;
	/*
	 * A tie on a source with a read API: only the present decides it, and
	 * a fetch needs a claim.  The object's undecided events go to claim()
	 * (due now, no attempt counted), which walks them again and fetches;
	 * their tie is counted there.
	 */
	need := ARRAY(SELECT r.t FROM unnest(r_tok, r_out) AS r(t, o) WHERE r.o = 'need_fetch');
	IF cardinality(need) > 0 THEN
		UPDATE webhook_inbox.inbox i
		   SET status = 'retry', next_attempt_at = now(), updated_at = now(),
			   reason = 'tie: only a fetch of the present can decide'
		  FROM unnest(ids, toks) AS e(id, tok)
		 WHERE i.id = e.id AND i.status = 'pending' AND e.tok = ANY (need);
	END IF;
	RETURN QUERY
	SELECT r.t, r.o, r.n FROM unnest(r_tok, r_out, r_n) AS r(t, o, n)
	 WHERE r.o NOT IN ('tie', 'need_fetch') OR r.t <> ALL (need)
	UNION ALL
	/* what the round took: an object (a claim) and its events */
	SELECT e.tok, 'taken', count(*)::integer FROM unnest(ids, toks) AS e(id, tok) GROUP BY e.tok;
END
$$;
COMMENT ON FUNCTION @extschema@._work_local(integer, boolean) IS
	'The background worker''s fast path: for up to p_max objects (of _local_take()) that no claim holds and whose advisory lock it gets, the due pending events that need no provider request (of an object whose events the scan read are all occurrence events, those it read; of any other, every one it has) are taken and worked by _work_events() in this transaction, straight from pending to their outcome. Objects it cannot take are left to claim(). p_scan_floor (the background worker''s): its candidate scan starts at its floor (_local_take()).';

CREATE FUNCTION @extschema@._work_claim(p_token bigint)
RETURNS TABLE (outcome text, events integer)
LANGUAGE sql AS $$
	SELECT w.outcome, w.events FROM webhook_inbox._work_round(ARRAY[p_token]) w
$$;
COMMENT ON FUNCTION @extschema@._work_claim(bigint) IS
	'The local work of one claim (what _work_round() does for a round), for workers of your own on the claim API.';

CREATE FUNCTION @extschema@._save_presents(p_tokens bigint[], p_objects jsonb[], p_deleted boolean[],
	p_status_paths jsonpath[], p_version_paths jsonpath[], p_causes text[])
RETURNS TABLE (token bigint, outcome text)
LANGUAGE plpgsql
/*
 * Generic plans, made once per session: a custom plan for each call (which
 * the plan cache keeps choosing, as it sees the arrays' sizes) costs more
 * than the save of a whole batch.
 */
SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
	n integer := cardinality(p_tokens);
	/* the objects' rows this save created */
	n_sid integer[];
	n_ten text[];
	n_type text[];
	n_oid text[];
BEGIN
	IF cardinality(p_objects) IS DISTINCT FROM n OR cardinality(p_deleted) IS DISTINCT FROM n
	   OR cardinality(p_status_paths) IS DISTINCT FROM n OR cardinality(p_version_paths) IS DISTINCT FROM n
	   OR cardinality(p_causes) IS DISTINCT FROM n THEN
		RAISE EXCEPTION 'the arrays of a save must have the same length' USING ERRCODE = 'array_subscript_error';
	END IF;
	IF (SELECT count(DISTINCT t) <> count(t) FROM unnest(p_tokens) t) THEN
		RAISE EXCEPTION 'claim tokens must be distinct' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'A claim has one answer; saving two for it at once could record its transitions twice.';
	END IF;
	/*
	 * The claims' leases, locked in token order, then their objects' rows,
	 * created where missing and locked in key order (no deadlock between
	 * workers), before the statement that decides reads them: the fence
	 * check and the save agree, as in upsert_object().
	 */
	PERFORM 1 FROM webhook_inbox.object_leases l WHERE l.token = ANY (p_tokens) ORDER BY l.token FOR UPDATE;
	IF EXISTS (SELECT 1 FROM webhook_inbox.object_leases l
				WHERE l.token = ANY (p_tokens) AND (l.object_type = '' OR l.object_id = '')) THEN
		RAISE EXCEPTION 'object_type and object_id must not be empty' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	WITH ins AS (
		INSERT INTO webhook_inbox.objects (source_id, tenant, object_type, object_id)
		SELECT l.source_id, l.tenant, l.object_type, l.object_id FROM webhook_inbox.object_leases l
		 WHERE l.token = ANY (p_tokens)
		 ORDER BY l.source_id, l.tenant, l.object_type, l.object_id
		ON CONFLICT DO NOTHING
		RETURNING source_id, tenant, object_type, object_id)
	SELECT coalesce(array_agg(ins.source_id), '{}'), coalesce(array_agg(ins.tenant), '{}'),
		   coalesce(array_agg(ins.object_type), '{}'), coalesce(array_agg(ins.object_id), '{}')
	  INTO n_sid, n_ten, n_type, n_oid
	  FROM ins;
	/*
	 * A row this transaction inserted is invisible to everyone else until
	 * the commit, and as good as locked: only the others are locked (a lock
	 * is a write of its own).
	 */
	PERFORM 1 FROM webhook_inbox.object_leases l
	  JOIN webhook_inbox.objects o
		ON o.source_id = l.source_id AND o.tenant = l.tenant AND o.object_type = l.object_type AND o.object_id = l.object_id
	 WHERE l.token = ANY (p_tokens)
	   AND (l.source_id, l.tenant, l.object_type, l.object_id) NOT IN (SELECT * FROM unnest(n_sid, n_ten, n_type, n_oid))
	 ORDER BY o.source_id, o.tenant, o.object_type, o.object_id
	   FOR UPDATE OF o;
	/*
	 * upsert_object()'s rules (guard.c), for every answer at once: without
	 * a version the answer is the present and replaces what is stored
	 * unless identical (duplicate); with one, strictly newer is applied,
	 * older is stale, equal is a duplicate if identical and otherwise a
	 * tie, which the present resolves (applied, the stored version kept);
	 * a tombstone stands against a versioned save as _tombstone_holds()
	 * says.  A status change, a deletion counting as one, is one transition
	 * (effects fire from its trigger, once).
	 */
	RETURN QUERY
	WITH a AS (
		SELECT x.n, x.tok, l.source_id, l.tenant, l.object_type, l.object_id, q.del, q.stated, x.cause,
			   CASE WHEN q.del THEN NULL ELSE webhook_inbox._path_text(x.obj, x.sp) END AS st,
			   CASE WHEN q.del THEN NULL ELSE webhook_inbox._path_version(x.obj, x.vp) END AS ver,
			   CASE WHEN q.del THEN NULL ELSE x.obj END AS state
		  FROM unnest(p_tokens, p_objects, p_deleted, p_status_paths, p_version_paths, p_causes)
			   WITH ORDINALITY AS x(tok, obj, del, sp, vp, cause, n)
		  JOIN webhook_inbox.object_leases l ON l.token = x.tok
		 CROSS JOIN LATERAL (SELECT coalesce(x.del, false)
									OR coalesce(x.obj ->> 'deleted', 'false') = 'true' AS del,
									coalesce(x.obj ->> 'deleted', 'false') = 'true' AS stated) q),
	d AS (
		SELECT a.*, o.status AS old_st, o.version AS old_ver, o.deleted AS old_del, f.fresh, g.fenced,
			   webhook_inbox._tombstone_holds(o.deleted, o.tombstone_evidence, a.ver, o.version) AS old_held,
			   NOT f.fresh AND o.deleted = a.del AND (a.st IS NULL OR (a.st = o.status) IS TRUE)
				   AND (a.state IS NULL OR (o.state IS NOT NULL AND a.state = o.state)) AS same
		  FROM a
		  JOIN webhook_inbox.objects o
			ON o.source_id = a.source_id AND o.tenant = a.tenant AND o.object_type = a.object_type AND o.object_id = a.object_id
		 CROSS JOIN LATERAL (SELECT (o.status IS NULL AND o.version IS NULL AND o.state IS NULL
									 AND NOT o.deleted) AS fresh) f
		 /* asked once per answer (OFFSET 0: the call is not copied where r reads it) */
		 CROSS JOIN LATERAL (SELECT webhook_inbox._fenced(a.source_id, a.tenant, a.object_type, a.object_id, a.tok) AS fenced
							 OFFSET 0) g),
	r AS (
		SELECT d.*,
			   CASE WHEN d.fenced THEN 'fenced'
					ELSE webhook_inbox._version_rule(d.fresh, d.ver, d.old_ver, d.del, d.old_held, d.same)
					END AS res
		  FROM d),
	upd AS (
		UPDATE webhook_inbox.objects x
		   SET status = coalesce(r.st, x.status),
			   version = CASE WHEN r.res = 'tie' THEN x.version ELSE coalesce(r.ver, x.version) END,
			   state = coalesce(r.state, x.state), deleted = r.del, tombstone_pending_since = NULL,
			   fence_token = greatest(x.fence_token, r.tok), updated_at = now(),
			   tombstone_evidence = CASE WHEN NOT r.del THEN NULL WHEN r.stated THEN 'provider' ELSE 'read' END
		  FROM r
		 WHERE r.res IN ('applied', 'tie')
		   AND x.source_id = r.source_id AND x.tenant = r.tenant AND x.object_type = r.object_type AND x.object_id = r.object_id),
	gone AS (
		/* leave no empty row behind for an object a fenced save never saw */
		DELETE FROM webhook_inbox.objects x USING r
		 WHERE r.res = 'fenced' AND r.fresh
		   AND x.source_id = r.source_id AND x.tenant = r.tenant AND x.object_type = r.object_type AND x.object_id = r.object_id),
	tr AS (
		INSERT INTO webhook_inbox.transitions (source_id, tenant, object_type, object_id, from_status, to_status,
											   version, cause)
		SELECT r.source_id, r.tenant, r.object_type, r.object_id, t.from_st, t.to_st, r.ver,
			   CASE WHEN r.res = 'tie' THEN r.cause || ' (tie resolved)' ELSE r.cause END
		  FROM r
		 CROSS JOIN LATERAL (SELECT CASE WHEN r.old_del THEN 'deleted' ELSE r.old_st END AS from_st,
									CASE WHEN r.del THEN 'deleted' ELSE r.st END AS to_st) t
		 WHERE r.res IN ('applied', 'tie') AND t.to_st IS NOT NULL AND t.to_st IS DISTINCT FROM t.from_st
		 ORDER BY r.n)
	SELECT r.tok, CASE WHEN r.res = 'tie' THEN 'applied'
					   WHEN r.res = 'applied' AND r.del THEN 'tombstone'
					   WHEN r.res = 'applied' AND r.old_del THEN 'revived' ELSE r.res END
	  FROM r
	UNION ALL
	/* a claim whose lease is gone was taken over */
	SELECT t, 'fenced' FROM unnest(p_tokens) t
	 WHERE t IS NULL OR NOT EXISTS (SELECT 1 FROM webhook_inbox.object_leases l WHERE l.token = t);
END
$$;
COMMENT ON FUNCTION @extschema@._save_presents(bigint[], jsonb[], boolean[], jsonpath[], jsonpath[], text[]) IS
	'Saves the provider''s present state of each claim''s object (or its tombstone: p_deleted, or "deleted": true) under the claim''s token, set-based, by upsert_object()''s rules; a tie at equal version is resolved in favour of the present. A tombstone saved from p_deleted (a read that found nothing) has evidence read and yields to a strictly newer version (revived); one the object itself states ("deleted": true) is final. The arrays are parallel, one element per claim. Returns (token, outcome) rows: applied, revived, duplicate, stale, tombstone or fenced.';

CREATE FUNCTION @extschema@._save_present(p_token bigint, p_object jsonb, p_deleted boolean,
	p_status_path jsonpath, p_version_path jsonpath, p_cause text)
RETURNS text
LANGUAGE sql AS $$
	SELECT s.outcome FROM webhook_inbox._save_presents(ARRAY[p_token], ARRAY[p_object], ARRAY[p_deleted],
		ARRAY[p_status_path], ARRAY[p_version_path], ARRAY[p_cause]) s
$$;
COMMENT ON FUNCTION @extschema@._save_present(bigint, jsonb, boolean, jsonpath, jsonpath, text) IS
	'Saves the provider''s present state of the claim''s object (or its tombstone) under the claim token: _save_presents() for one claim. Returns applied, duplicate, stale, tombstone or fenced.';

CREATE FUNCTION @extschema@._save_fetched_batch(p_tokens bigint[], p_https integer[], p_bodies text[],
	p_unwrap_paths jsonpath[], p_status_paths jsonpath[], p_version_paths jsonpath[],
	p_sent_at timestamptz[], p_credentials text[] DEFAULT NULL)
RETURNS TABLE (token bigint, outcome text)
LANGUAGE plpgsql
/* generic plans, as _save_presents() */
SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
	n integer := cardinality(p_tokens);
	confirm interval;
	docs jsonb[];
	/* the answers by what they lead to: parallel arrays */
	s_tok bigint[];				/* saved: present or tombstone */
	s_obj jsonb[];
	s_del boolean[];
	s_sp jsonpath[];
	s_vp jsonpath[];
	s_cause text[];
	s_sent timestamptz[];
	f_tok bigint[];				/* a first 404/410: deferred */
	f_since timestamptz[];
	f_http integer[];
	u_tok bigint[];				/* an unreadable body: retried */
	w_tok bigint[];				/* a 404 under another tenant's credentials: retried */
	w_why text[];
	h_tok bigint[];				/* a 404 for an object outside a horizon: hidden */
	h_why text[];
	h_obj jsonb[];				/* its newest signed payload, applied by version, or NULL */
	r_tok bigint[];				/* saved, and their outcomes */
	r_out text[];
BEGIN
	IF p_tokens IS NULL OR p_https IS NULL OR p_bodies IS NULL OR p_unwrap_paths IS NULL
	   OR p_status_paths IS NULL OR p_version_paths IS NULL OR p_sent_at IS NULL THEN
		RAISE EXCEPTION 'the arrays of fetched answers must not be null' USING ERRCODE = 'null_value_not_allowed',
			HINT = 'Pass an array with a NULL element where an answer has no value (a body, a path, a send time).';
	END IF;
	IF cardinality(p_https) <> n OR cardinality(p_bodies) <> n OR cardinality(p_unwrap_paths) <> n
	   OR cardinality(p_status_paths) <> n OR cardinality(p_version_paths) <> n
	   OR cardinality(p_sent_at) <> n OR cardinality(p_credentials) <> n THEN
		RAISE EXCEPTION 'the arrays of fetched answers must have the same length' USING ERRCODE = 'array_subscript_error',
			DETAIL = pg_catalog.format('%s tokens, %s statuses, %s bodies, %s unwrap paths, %s status paths, %s version paths, %s send times.',
				n, cardinality(p_https), cardinality(p_bodies), cardinality(p_unwrap_paths),
				cardinality(p_status_paths), cardinality(p_version_paths), cardinality(p_sent_at));
	END IF;
	IF array_position(p_tokens, NULL) IS NOT NULL OR array_position(p_https, NULL) IS NOT NULL THEN
		RAISE EXCEPTION 'claim tokens and http statuses must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF (SELECT count(DISTINCT t) <> n FROM unnest(p_tokens) t) THEN
		RAISE EXCEPTION 'claim tokens must be distinct' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'A claim has one answer; saving two for it at once could record its transitions twice.';
	END IF;
	IF n = 0 THEN
		RETURN;
	END IF;
	confirm := coalesce(pg_catalog.current_setting('webhook_inbox.tombstone_confirm_delay', true), '60s')::interval;
	/* the claims still ours, locked in token order (no deadlock between workers) */
	PERFORM 1 FROM webhook_inbox.object_leases l WHERE l.token = ANY (p_tokens) ORDER BY l.token FOR UPDATE;
	/*
	 * The bodies as JSON, all in one go; a body that is not JSON is
	 * unreadable (NULL), which only then costs a try of each.
	 */
	BEGIN
		docs := ARRAY(SELECT CASE WHEN x.h IN (404, 410) THEN NULL ELSE x.b::jsonb END
						FROM unnest(p_https, p_bodies) WITH ORDINALITY AS x(h, b, k) ORDER BY x.k);
	EXCEPTION WHEN others THEN
		docs := array_fill(NULL::jsonb, ARRAY[n]);
		FOR k IN 1 .. n LOOP
			CONTINUE WHEN p_https[k] IN (404, 410);
			BEGIN
				docs[k] := p_bodies[k]::jsonb;
			EXCEPTION WHEN others THEN
				docs[k] := NULL;
			END;
		END LOOP;
	END;
	/*
	 * Each answer's path.  A read API's 404 may come from a wrong api_base
	 * or a proxy, so it is only believed twice: the first one is noted and
	 * the claim waits, without an attempt, tombstone_confirm_delay; the
	 * fetch after that saves the tombstone if it answers 404 again.  A save
	 * of a present version in between clears the note.  A 200 whose body
	 * is not the expected JSON object is retried.  A 404 is evidence only
	 * when the request carried the credentials of the object's own tenant
	 * (p_credentials: the tenant each request was made for; NULL: the
	 * object's): a connected account's object asked for without its
	 * Stripe-Account is "No such subscription" too, and is never a deletion.
	 */
	/*
	 * A 404 for an object outside what the source can see (a horizon of
	 * webhook_inbox.horizons, judged on what the mirror or the claim's own
	 * signed payloads say of it) is no evidence at all: the object is
	 * hidden, and its newest payload is saved through the version guard
	 * instead, as for a payload-strategy source.
	 */
	WITH x AS (
		SELECT x.*, l.source_id, l.tenant, l.object_type, l.object_id, o.tombstone_pending_since AS since,
			   coalesce(p_credentials[x.k], l.tenant) AS cred,
			   coalesce(o.deleted, false) AS was_deleted, o.tombstone_evidence AS evidence,
			   CASE WHEN x.h NOT IN (404, 410) THEN jsonb_path_query_first(x.doc, coalesce(x.up, '$')) END AS obj,
			   pl.payload AS signed,
			   CASE WHEN x.h IN (404, 410)
					THEN webhook_inbox._hidden_why(l.source_id, l.tenant, l.object_type, coalesce(o.state, pl.payload))
					END AS hidden_why
		  FROM unnest(p_tokens, p_https, docs, p_unwrap_paths, p_status_paths, p_version_paths, p_sent_at)
			   WITH ORDINALITY AS x(tok, h, doc, up, sp, vp, sent, k)
		  JOIN webhook_inbox.object_leases l ON l.token = x.tok
		  LEFT JOIN webhook_inbox.objects o
			ON o.source_id = l.source_id AND o.tenant = l.tenant AND o.object_type = l.object_type AND o.object_id = l.object_id
		  LEFT JOIN LATERAL (
			SELECT i.payload FROM webhook_inbox.inbox i
			 WHERE x.h IN (404, 410) AND i.claim_token = x.tok AND i.status = 'processing'
			   AND jsonb_typeof(i.payload) = 'object'
			 ORDER BY webhook_inbox._path_version(i.payload, x.vp)
					  DESC NULLS LAST, i.id DESC
			 LIMIT 1) pl ON true),
	c AS (
		SELECT x.*, CASE
				WHEN x.h IN (404, 410) AND x.cred IS DISTINCT FROM x.tenant THEN 'wrong_credentials'
				WHEN x.h IN (404, 410) AND x.hidden_why IS NOT NULL AND x.evidence IS DISTINCT FROM 'provider'
					THEN 'hidden'
				WHEN x.h IN (404, 410) THEN
					CASE WHEN NOT x.was_deleted AND (x.since IS NULL OR x.since + confirm > now())
							  AND confirm > interval '0' THEN 'first' ELSE 'gone' END
				WHEN x.obj IS NULL OR jsonb_typeof(x.obj) <> 'object' THEN 'unreadable'
				ELSE 'present' END AS path
		  FROM x)
	SELECT coalesce(array_agg(c.tok ORDER BY c.k) FILTER (WHERE c.path IN ('gone', 'present')), '{}'),
		   coalesce(array_agg(c.obj ORDER BY c.k) FILTER (WHERE c.path IN ('gone', 'present')), '{}'),
		   coalesce(array_agg(c.path = 'gone' ORDER BY c.k) FILTER (WHERE c.path IN ('gone', 'present')), '{}'),
		   coalesce(array_agg(c.sp ORDER BY c.k) FILTER (WHERE c.path IN ('gone', 'present')), '{}'),
		   coalesce(array_agg(c.vp ORDER BY c.k) FILTER (WHERE c.path IN ('gone', 'present')), '{}'),
		   coalesce(array_agg(CASE WHEN c.path = 'gone'
				THEN pg_catalog.format('fetch: http %s%s', c.h, CASE WHEN c.since IS NOT NULL THEN ', confirmed' ELSE '' END)
				ELSE 'fetch' END ORDER BY c.k) FILTER (WHERE c.path IN ('gone', 'present')), '{}'),
		   coalesce(array_agg(c.sent ORDER BY c.k) FILTER (WHERE c.path IN ('gone', 'present')), '{}'),
		   coalesce(array_agg(c.tok ORDER BY c.k) FILTER (WHERE c.path = 'hidden'), '{}'),
		   coalesce(array_agg(c.hidden_why ORDER BY c.k) FILTER (WHERE c.path = 'hidden'), '{}'),
		   coalesce(array_agg(c.signed ORDER BY c.k) FILTER (WHERE c.path = 'hidden'), '{}'),
		   coalesce(array_agg(c.tok ORDER BY c.k) FILTER (WHERE c.path = 'first'), '{}'),
		   coalesce(array_agg(coalesce(c.since, now()) ORDER BY c.k) FILTER (WHERE c.path = 'first'), '{}'),
		   coalesce(array_agg(c.h ORDER BY c.k) FILTER (WHERE c.path = 'first'), '{}'),
		   coalesce(array_agg(c.tok ORDER BY c.k) FILTER (WHERE c.path = 'unreadable'), '{}'),
		   coalesce(array_agg(c.tok ORDER BY c.k) FILTER (WHERE c.path = 'wrong_credentials'), '{}'),
		   coalesce(array_agg(pg_catalog.format(
				'wrong_credentials: http %s under the credentials of %s, not of the object''s tenant %s: never a deletion',
				c.h, CASE WHEN c.cred = '' THEN 'the platform' ELSE pg_catalog.quote_literal(c.cred) END,
				CASE WHEN c.tenant = '' THEN 'the platform' ELSE pg_catalog.quote_literal(c.tenant) END)
				ORDER BY c.k) FILTER (WHERE c.path = 'wrong_credentials'), '{}')
	  INTO s_tok, s_obj, s_del, s_sp, s_vp, s_cause, s_sent, h_tok, h_why, h_obj,
		   f_tok, f_since, f_http, u_tok, w_tok, w_why
	  FROM c;

	/* a hidden object with a signed payload: that payload is saved by version, as a webhook's */
	IF cardinality(h_tok) > 0 THEN
		SELECT s_tok || coalesce(array_agg(h.tok ORDER BY h.n), '{}'),
			   s_obj || coalesce(array_agg(h.obj ORDER BY h.n), '{}'),
			   s_del || coalesce(array_agg(false ORDER BY h.n), '{}'),
			   s_sp || coalesce(array_agg(p_status_paths[array_position(p_tokens, h.tok)] ORDER BY h.n), '{}'),
			   s_vp || coalesce(array_agg(p_version_paths[array_position(p_tokens, h.tok)] ORDER BY h.n), '{}'),
			   s_cause || coalesce(array_agg('payload (hidden from the read API)'::text ORDER BY h.n), '{}'),
			   s_sent || coalesce(array_agg(NULL::timestamptz ORDER BY h.n), '{}')
		  INTO s_tok, s_obj, s_del, s_sp, s_vp, s_cause, s_sent
		  FROM unnest(h_tok, h_obj) WITH ORDINALITY AS h(tok, obj, n)
		 WHERE h.obj IS NOT NULL;
	END IF;

	IF cardinality(f_tok) > 0 THEN
		INSERT INTO webhook_inbox.objects AS o (source_id, tenant, object_type, object_id, tombstone_pending_since)
		SELECT l.source_id, l.tenant, l.object_type, l.object_id, f.since
		  FROM unnest(f_tok, f_since) AS f(tok, since) JOIN webhook_inbox.object_leases l ON l.token = f.tok
		 ORDER BY l.source_id, l.tenant, l.object_type, l.object_id
		ON CONFLICT (source_id, tenant, object_type, object_id) DO UPDATE
		   SET tombstone_pending_since = EXCLUDED.tombstone_pending_since
		 WHERE o.tombstone_pending_since IS NULL;
		PERFORM webhook_inbox._defer(f.tok, f.since + confirm,
				pg_catalog.format('tombstone_unconfirmed: http %s from the read API; believed if a fetch after %s answers it again',
					   f.h, confirm))
		   FROM unnest(f_tok, f_since, f_http) AS f(tok, since, h);
	END IF;

	IF cardinality(s_tok) > 0 THEN
		SELECT coalesce(array_agg(s.token), '{}'), coalesce(array_agg(s.outcome), '{}') INTO r_tok, r_out
		  FROM webhook_inbox._save_presents(s_tok, s_obj, s_del, s_sp, s_vp, s_cause) s;
	ELSE
		r_tok := '{}';
		r_out := '{}';
	END IF;
	/* each revival, a repair of its own kind outside any sweep */
	INSERT INTO webhook_inbox.repairs (run_id, source_id, tenant, object_type, object_id, before, after, outcome)
	SELECT NULL, l.source_id, l.tenant, l.object_type, l.object_id,
		   jsonb_build_object('deleted', true, 'evidence', 'read'),
		   jsonb_build_object('status', o.status, 'version', o.version, 'deleted', o.deleted), 'revived'
	  FROM unnest(r_tok, r_out) AS r(tok, o)
	  JOIN webhook_inbox.object_leases l ON l.token = r.tok
	  JOIN webhook_inbox.objects o
		ON o.source_id = l.source_id AND o.tenant = l.tenant AND o.object_type = l.object_type AND o.object_id = l.object_id
	 WHERE r.o = 'revived';
	/* what the read API answered with is an object it sees: hidden no more */
	UPDATE webhook_inbox.objects o SET hidden_since = NULL, hidden_reason = NULL
	  FROM unnest(s_tok, s_cause) AS x(tok, cause)
	  JOIN webhook_inbox.object_leases l ON l.token = x.tok
	 WHERE x.cause = 'fetch' AND o.hidden_since IS NOT NULL
	   AND o.source_id = l.source_id AND o.tenant = l.tenant AND o.object_type = l.object_type AND o.object_id = l.object_id;
	IF cardinality(h_tok) > 0 THEN
		/* hidden, never deleted; without a payload to save, its events are done as they are */
		INSERT INTO webhook_inbox.objects AS o (source_id, tenant, object_type, object_id, hidden_since, hidden_reason)
		SELECT l.source_id, l.tenant, l.object_type, l.object_id, now(), h.why
		  FROM unnest(h_tok, h_why) AS h(tok, why) JOIN webhook_inbox.object_leases l ON l.token = h.tok
		 ORDER BY l.source_id, l.tenant, l.object_type, l.object_id
		ON CONFLICT (source_id, tenant, object_type, object_id) DO UPDATE
		   SET hidden_since = coalesce(o.hidden_since, EXCLUDED.hidden_since), hidden_reason = EXCLUDED.hidden_reason,
			   tombstone_pending_since = NULL;
		SELECT r_tok || coalesce(array_agg(h.tok), '{}'), r_out || coalesce(array_agg('hidden'::text), '{}')
		  INTO r_tok, r_out
		  FROM unnest(h_tok, h_obj) AS h(tok, obj)
		 WHERE h.obj IS NULL;
	END IF;
	/*
	 * Events of the object that arrived while the claim was being fetched,
	 * but before the request left, are covered by the answer: the
	 * provider's present includes what they announced.  The lease still
	 * holds the object, so no one else has them.  Then what complete()
	 * does, for every saved claim: its events done, its lease ended.
	 */
	UPDATE webhook_inbox.inbox i
	   SET status = 'done', reason = 'covered by a fetch', processed_at = now(), updated_at = now(),
		   decided_route = i.route_id, decided_route_version = i.route_version
	  FROM unnest(r_tok, r_out) AS r(tok, o)
	  JOIN unnest(s_tok, s_sent) AS s(tok, sent) ON s.tok = r.tok
	  JOIN webhook_inbox.object_leases l ON l.token = r.tok
	 WHERE r.o <> 'fenced' AND s.sent IS NOT NULL
	   AND i.source_id = l.source_id AND i.tenant = l.tenant AND i.object_type = l.object_type AND i.object_id = l.object_id
	   AND i.status IN ('pending', 'retry') AND i.strategy = 'fetch' AND i.received_at < s.sent;
	UPDATE webhook_inbox.inbox i
	   SET status = 'done', reason = 'fetched: ' || r.o, processed_at = now(), updated_at = now(),
		   decided_route = i.route_id, decided_route_version = i.route_version
	  FROM unnest(r_tok, r_out) AS r(tok, o)
	 WHERE r.o <> 'fenced' AND i.claim_token = r.tok AND i.status = 'processing';
	DELETE FROM webhook_inbox.object_leases x
	 USING unnest(r_tok, r_out) AS r(tok, o)
	 WHERE r.o <> 'fenced' AND x.token = r.tok;

	RETURN QUERY
	SELECT r.tok, r.o FROM unnest(r_tok, r_out) AS r(tok, o)
	UNION ALL
	SELECT f, 'deferred' FROM unnest(f_tok) f
	UNION ALL
	SELECT u, CASE WHEN webhook_inbox.retry(u, 'unreadable: the provider''s response is not the expected JSON object')
					   = 'quarantined' THEN 'quarantined' ELSE 'retry' END
	  FROM unnest(u_tok) u
	UNION ALL
	SELECT w.tok, CASE WHEN webhook_inbox.retry(w.tok, w.why) = 'quarantined' THEN 'quarantined' ELSE 'retry' END
	  FROM unnest(w_tok, w_why) AS w(tok, why)
	UNION ALL
	/* a claim whose lease is gone was taken over */
	SELECT t, 'fenced' FROM unnest(p_tokens) t
	 WHERE t <> ALL (r_tok) AND t <> ALL (f_tok) AND t <> ALL (u_tok) AND t <> ALL (w_tok);
END
$$;
COMMENT ON FUNCTION @extschema@._save_fetched_batch(bigint[], integer[], text[], jsonpath[], jsonpath[], jsonpath[], timestamptz[], text[]) IS
	'Saves a batch of fetched answers set-based, one element of each parallel array per claim: a 200 is saved as the object''s present (_save_presents()), a 404/410 as its tombstone once confirmed by the object''s own tenant''s credentials (the first one defers the claim by webhook_inbox.tombstone_confirm_delay; one under another tenant''s credentials, p_credentials, is retried as wrong_credentials and never tombstones), an unreadable body is retried; a saved claim''s events, and its object''s fetch events received before its request was sent, are done. Returns (token, outcome) rows: applied, duplicate, stale, tombstone, deferred, retry, quarantined or fenced.';

CREATE FUNCTION @extschema@._save_fetched(p_token bigint, p_http integer, p_body text,
	p_unwrap_path jsonpath, p_status_path jsonpath, p_version_path jsonpath,
	p_sent_at timestamptz DEFAULT NULL, p_credentials text DEFAULT NULL)
RETURNS text
LANGUAGE sql AS $$
	SELECT CASE WHEN p_token IS NULL THEN 'fenced' ELSE
		(SELECT b.outcome FROM webhook_inbox._save_fetched_batch(ARRAY[p_token], ARRAY[p_http], ARRAY[p_body],
			ARRAY[p_unwrap_path], ARRAY[p_status_path], ARRAY[p_version_path], ARRAY[p_sent_at],
			ARRAY[p_credentials]) b) END
$$;
COMMENT ON FUNCTION @extschema@._save_fetched(bigint, integer, text, jsonpath, jsonpath, jsonpath, timestamptz, text) IS
	'Saves one fetched object (200) or its tombstone (404/410) under the claim token and completes every event of the claim, and the object''s fetch events received before the request left: _save_fetched_batch() for one answer.';

CREATE FUNCTION @extschema@._defer(p_token bigint, p_until timestamptz, p_reason text)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	n integer;
BEGIN
	IF NOT EXISTS (SELECT 1 FROM webhook_inbox.object_leases x WHERE x.token = p_token FOR UPDATE) THEN
		RETURN 0;
	END IF;
	UPDATE webhook_inbox.inbox i
	   SET status = 'retry', next_attempt_at = greatest(p_until, now()), reason = p_reason, updated_at = now()
	 WHERE i.claim_token = p_token AND i.status = 'processing';
	GET DIAGNOSTICS n = ROW_COUNT;
	DELETE FROM webhook_inbox.object_leases x WHERE x.token = p_token;
	RETURN n;
END
$$;
COMMENT ON FUNCTION @extschema@._defer(bigint, timestamptz, text) IS
	'Gives a claim back without counting an attempt (its source is rate limited, or the worker is stopping): the events become due again at p_until.';

CREATE FUNCTION @extschema@._auth_refused(p_token bigint, p_http integer)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	l webhook_inbox.object_leases;
BEGIN
	SELECT * INTO l FROM webhook_inbox.object_leases x WHERE x.token = p_token;
	IF NOT FOUND THEN
		RETURN 0;
	END IF;
	IF l.tenant = '' THEN
		UPDATE webhook_inbox.sources s
		   SET flagged = format('the read API answered %s at %s: check api_token', p_http, now()), updated_at = now()
		 WHERE s.id = l.source_id;
	ELSE
		/* one tenant's refused credentials hold back that tenant only */
		INSERT INTO webhook_inbox.tenants AS t (source_id, tenant, status, reason, discovered_by)
		VALUES (l.source_id, l.tenant, 'flagged',
				format('the read API answered %s at %s for this tenant: check its credentials', p_http, now()),
				'delivery')
		ON CONFLICT (source_id, tenant) DO UPDATE SET status = 'flagged', reason = EXCLUDED.reason;
	END IF;
	RETURN webhook_inbox.quarantine(p_token, format('auth: the read API refused our credentials (http %s)', p_http));
END
$$;
COMMENT ON FUNCTION @extschema@._auth_refused(bigint, integer) IS
	'A 401/403 from the read API: quarantines the claim''s events and flags the source for a person (the tenant, for a tenant''s object).';

CREATE FUNCTION @extschema@._give_back(p_token bigint, p_how text, p_reason text,
	p_delay double precision, p_http integer)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	l webhook_inbox.object_leases;
BEGIN
	SELECT * INTO l FROM webhook_inbox.object_leases x WHERE x.token = p_token FOR UPDATE;
	IF NOT FOUND OR webhook_inbox._fenced(l.source_id, l.tenant, l.object_type, l.object_id, p_token) THEN
		/* a claim already taken over is not ours to give back */
		RETURN CASE WHEN p_how = 'defer' THEN 'deferred' ELSE 'fenced' END;
	END IF;
	CASE p_how
		WHEN 'retry' THEN
			RETURN webhook_inbox.retry(p_token, p_reason,
				CASE WHEN p_delay >= 0 THEN make_interval(secs => p_delay) END);
		WHEN 'defer' THEN
			PERFORM webhook_inbox._defer(p_token, now() + make_interval(secs => greatest(p_delay, 0)), p_reason);
			RETURN 'deferred';
		WHEN 'quarantine' THEN
			PERFORM webhook_inbox.quarantine(p_token, p_reason);
			RETURN 'quarantined';
		WHEN 'auth' THEN
			RETURN CASE WHEN webhook_inbox._auth_refused(p_token, p_http) > 0 THEN 'quarantined' ELSE 'fenced' END;
		ELSE
			RAISE EXCEPTION 'unknown give-back "%"', p_how USING ERRCODE = 'invalid_parameter_value';
	END CASE;
END
$$;
COMMENT ON FUNCTION @extschema@._give_back(bigint, text, text, double precision, integer) IS
	'Hands a claim back: retry (an attempt counted; backoff, or p_delay seconds when >= 0), defer (no attempt; due after p_delay), quarantine, or auth (quarantine and flag the source). Returns the outcome: retry, quarantined, deferred or fenced.';

CREATE FUNCTION @extschema@._worker_source(p_source_id integer,
	OUT id integer, OUT name text, OUT kind text, OUT api_base text, OUT api_token text,
	OUT fetch_url text, OUT list_url text, OUT auth_header text, OUT auth_format text,
	OUT unwrap_path text, OUT items_path text, OUT status_path text, OUT version_path text,
	OUT types text, OUT repo text, OUT api_version text, OUT api text, OUT stripe_version text,
	OUT shop_base_url text, OUT rate_limit double precision, OUT endpoint_rate_limit double precision,
	OUT rate_limit_scope text)
LANGUAGE sql STABLE AS $$
	SELECT s.id, s.name, s.kind, rtrim(s.api_base, '/'),
		   webhook_inbox._unseal_text(s.api_token, webhook_inbox._source_context(s.id, 'api_token')),
		   s.settings ->> 'fetch_url', s.settings ->> 'list_url', s.settings ->> 'auth_header',
		   s.settings ->> 'auth_format', s.settings ->> 'unwrap_path', s.settings ->> 'items_path',
		   s.settings ->> 'status_path', s.settings ->> 'version_path',
		   CASE WHEN jsonb_typeof(s.settings -> 'types') = 'array'
				THEN (SELECT string_agg(t, ',') FROM jsonb_array_elements_text(s.settings -> 'types') t) END,
		   s.settings ->> 'repo', s.settings ->> 'api_version', s.settings ->> 'api',
		   CASE WHEN s.kind = 'stripe' THEN coalesce(s.settings ->> 'stripe_version', '2026-10-28.endive') END,
		   CASE WHEN s.kind = 'shopify' THEN s.settings ->> 'shop_base_url' END,
		   (s.settings ->> 'rate_limit')::double precision, (s.settings ->> 'endpoint_rate_limit')::double precision,
		   s.settings ->> 'rate_limit_scope'
	  FROM webhook_inbox.sources s WHERE s.id = p_source_id
$$;
COMMENT ON FUNCTION @extschema@._worker_source(integer) IS
	'What the worker''s provider adapters need of a source, settings read into columns (the C code reads no JSON); api_token in clear (unsealed under webhook_inbox.key_file). stripe_version: the Stripe-Version every request of a stripe source pins (settings stripe_version; default the version stripe-node 23 pins), so that fetched objects have the shape the routes and typed views expect whatever an account''s default version is. rate_limit, endpoint_rate_limit, rate_limit_scope: the pacing settings (sources_pacing_check), NULL for the provider''s documented limits.';

/*
 * Shopify's GraphQL Admin API and its webhooks name the same objects
 * differently (displayFinancialStatus: PAID against financial_status:
 * "paid", a gid against a numeric id).  The mirror keeps the REST/webhook
 * shape, whichever path brought an object: these two functions make it of
 * a GraphQL answer, field for field of the selections in
 * extension/adapters/shopify_graphql.h.
 */
CREATE FUNCTION @extschema@._shopify_rest_time(p_time jsonb)
RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT CASE WHEN jsonb_typeof(p_time) = 'string'
		THEN to_jsonb(to_char((p_time #>> '{}')::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS') || '+00:00')
		ELSE p_time END
$$;
COMMENT ON FUNCTION @extschema@._shopify_rest_time(jsonb) IS
	'A GraphQL DateTime ("2026-01-01T00:00:00Z") as the REST Admin API writes a time, with its offset ("2026-01-01T00:00:00+00:00"): in UTC, since a GraphQL answer does not say the shop''s time zone; null stays null.';

CREATE FUNCTION @extschema@.shopify_rest_shape(p_object_type text, p_node jsonb)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
	IF p_node IS NULL OR jsonb_typeof(p_node) <> 'object' THEN
		RETURN NULL;
	END IF;
	CASE p_object_type
		WHEN 'order' THEN
			RETURN jsonb_build_object(
				'id', (p_node ->> 'legacyResourceId')::numeric,
				'admin_graphql_api_id', p_node -> 'id',
				'name', p_node -> 'name',
				'created_at', webhook_inbox._shopify_rest_time(p_node -> 'createdAt'),
				'updated_at', webhook_inbox._shopify_rest_time(p_node -> 'updatedAt'),
				'financial_status', lower(p_node ->> 'displayFinancialStatus'),
				'total_price', p_node #> '{totalPriceSet,shopMoney,amount}',
				'currency', p_node -> 'currencyCode',
				'cancelled_at', webhook_inbox._shopify_rest_time(p_node -> 'cancelledAt'),
				'closed_at', webhook_inbox._shopify_rest_time(p_node -> 'closedAt'));
		WHEN 'product' THEN
			RETURN jsonb_build_object(
				'id', (p_node ->> 'legacyResourceId')::numeric,
				'admin_graphql_api_id', p_node -> 'id',
				'title', p_node -> 'title',
				'status', lower(p_node ->> 'status'),
				'created_at', webhook_inbox._shopify_rest_time(p_node -> 'createdAt'),
				'updated_at', webhook_inbox._shopify_rest_time(p_node -> 'updatedAt'));
		WHEN 'customer' THEN
			RETURN jsonb_build_object(
				'id', (p_node ->> 'legacyResourceId')::numeric,
				'admin_graphql_api_id', p_node -> 'id',
				'state', lower(p_node ->> 'state'),
				'created_at', webhook_inbox._shopify_rest_time(p_node -> 'createdAt'),
				'updated_at', webhook_inbox._shopify_rest_time(p_node -> 'updatedAt'));
		ELSE
			RAISE EXCEPTION 'unknown Shopify object type "%"', p_object_type
				USING ERRCODE = 'invalid_parameter_value',
					  HINT = 'Shopify objects are order, product or customer.';
	END CASE;
END
$$;
COMMENT ON FUNCTION @extschema@.shopify_rest_shape(text, jsonb) IS
	'A Shopify GraphQL Admin API node (Order, Product, Customer) in the REST/webhook shape the mirror keeps: numeric id from legacyResourceId, the gid as admin_graphql_api_id, snake_case names, lower-case enums (PAID -> paid). NULL for a node that is not an object.';

CREATE FUNCTION @extschema@.shopify_rest_answer(p_object_type text, p_body text)
RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
	doc jsonb;
	coll text := CASE p_object_type WHEN 'order' THEN 'orders' WHEN 'product' THEN 'products'
								   WHEN 'customer' THEN 'customers' END;
	one jsonb;
	list jsonb;
BEGIN
	IF coll IS NULL THEN
		RAISE EXCEPTION 'unknown Shopify object type "%"', p_object_type
			USING ERRCODE = 'invalid_parameter_value', HINT = 'Shopify objects are order, product or customer.';
	END IF;
	BEGIN
		doc := p_body::jsonb;
	EXCEPTION WHEN others THEN
		RETURN NULL;
	END;
	/* an answer with errors is never a present, whatever data it also has */
	IF jsonb_typeof(doc) <> 'object' OR doc ? 'errors' OR jsonb_typeof(doc -> 'data') IS DISTINCT FROM 'object' THEN
		RETURN NULL;
	END IF;
	one := doc #> ARRAY['data', p_object_type];
	list := doc #> ARRAY['data', coll];
	IF jsonb_typeof(one) = 'object' THEN
		RETURN jsonb_build_object(p_object_type, webhook_inbox.shopify_rest_shape(p_object_type, one))::text;
	ELSIF jsonb_typeof(list -> 'nodes') = 'array' THEN
		RETURN jsonb_build_object(coll,
			(SELECT coalesce(jsonb_agg(webhook_inbox.shopify_rest_shape(p_object_type, x.n) ORDER BY x.k), '[]')
			   FROM jsonb_array_elements(list -> 'nodes') WITH ORDINALITY AS x(n, k)),
			'has_more', coalesce(list #> '{pageInfo,hasNextPage}' = 'true', false))::text;
	END IF;
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION @extschema@.shopify_rest_answer(text, text) IS
	'A Shopify GraphQL answer in the REST shape the worker saves: {"order": {...}} for order(id:), {"orders": [...], "has_more": hasNextPage} for a page of orders(...) (products and customers alike), every node by shopify_rest_shape(); NULL for an answer with errors, without data, or not JSON (never a present).';

---------------------------------------------------------------------------
-- Sweeps
---------------------------------------------------------------------------

CREATE FUNCTION @extschema@._sweep_tenants(p_source_id integer, p_object_type text)
RETURNS SETOF text
LANGUAGE sql STABLE AS $$
	/*
	 * The source's own account (the empty tenant) where it has objects of
	 * the type or no tenants at all, and every active tenant of the source.
	 */
	SELECT ''::text
	 WHERE NOT EXISTS (SELECT 1 FROM webhook_inbox.tenants t WHERE t.source_id = p_source_id)
		OR EXISTS (SELECT 1 FROM webhook_inbox.objects o
					WHERE o.source_id = p_source_id AND o.tenant = '' AND o.object_type = p_object_type
					  AND NOT o.deleted)
	UNION ALL
	SELECT t.tenant FROM webhook_inbox.tenants t WHERE t.source_id = p_source_id AND t.status = 'active'
$$;
COMMENT ON FUNCTION @extschema@._sweep_tenants(integer, text) IS
	'Whose objects of a type a sweep of the source reconciles, each under its own credentials: the source''s own account (the empty tenant) where it has objects of the type or no tenants at all, and every active tenant. The scheduled sweeps (_sweep_targets) and sweep_now() without a tenant both go by it.';

CREATE FUNCTION @extschema@._sweep_targets(p_interval interval, p_full_interval interval)
RETURNS TABLE (source_id integer, object_type text, layer text, tenant text)
LANGUAGE sql STABLE AS $$
	/*
	 * Every (enabled source with a read API, routed object type) whose last
	 * pass of a layer is older than that layer's interval (an interval of 0
	 * turns the layer off).  A due full pass stands for the incremental one:
	 * it compares everything and moves both checkpoints.
	 */
	WITH pairs AS (
		SELECT DISTINCT s.id, r.object_type
		  FROM webhook_inbox.sources s
		  JOIN webhook_inbox.routes r ON (r.source_id = s.id OR r.source_kind = s.kind)
		 WHERE s.enabled AND s.api_base IS NOT NULL AND s.flagged IS NULL
		   AND r.class IN ('state', 'occurrence') AND r.object_type IS NOT NULL
		   /* only types this source has actually sent: a preset route is no promise of a list API */
		   AND (EXISTS (SELECT 1 FROM webhook_inbox.objects o
						 WHERE o.source_id = s.id AND o.object_type = r.object_type)
				OR EXISTS (SELECT 1 FROM webhook_inbox.occurrences o
							WHERE o.source_id = s.id AND o.kind = r.object_type))),
	/* each type is reconciled per tenant, under that tenant's credentials */
	targets AS (
		SELECT p.id, p.object_type, t.tenant
		  FROM pairs p CROSS JOIN LATERAL webhook_inbox._sweep_tenants(p.id, p.object_type) t (tenant)),
	due AS (
		SELECT p.id, p.object_type, p.tenant,
			   /* a full pass that did not complete is tried again at the incremental pace */
			   p_full_interval > '0'::interval AND NOT EXISTS (
				   SELECT 1 FROM webhook_inbox.sweep_runs w
					WHERE w.source_id = p.id AND w.tenant = p.tenant AND w.object_type = p.object_type AND w.layer = 'full'
					  AND w.started_at > now() - CASE WHEN w.status IN ('complete', 'running') THEN p_full_interval
													 ELSE least(p_interval, p_full_interval) END) AS full_due,
			   p_interval > '0'::interval AND NOT EXISTS (
				   SELECT 1 FROM webhook_inbox.sweep_runs w
					WHERE w.source_id = p.id AND w.tenant = p.tenant AND w.object_type = p.object_type
					  AND w.started_at > now() - p_interval) AS incremental_due
		  FROM targets p)
	SELECT d.id, d.object_type, CASE WHEN d.full_due THEN 'full' ELSE 'incremental' END, d.tenant
	  FROM due d
	 WHERE d.full_due OR d.incremental_due
	 ORDER BY 1, 4, 2
$$;
COMMENT ON FUNCTION @extschema@._sweep_targets(interval, interval) IS
	'The (source, object type, layer, tenant) passes due for a scheduled sweep: incremental every sweep_interval, full every full_sweep_interval, for the source''s own account and for each of its active tenants, each on its own schedule (one tenant''s failed pass holds back no other).';

CREATE FUNCTION @extschema@._tenants_listed(p_source_id integer, p_body text,
	OUT listed integer, OUT has_more boolean, OUT last_id text)
LANGUAGE plpgsql AS $$
DECLARE
	doc jsonb;
BEGIN
	BEGIN
		doc := p_body::jsonb;
	EXCEPTION WHEN others THEN
		RAISE EXCEPTION 'the list of tenants is not JSON' USING ERRCODE = 'invalid_text_representation';
	END;
	IF jsonb_typeof(doc -> 'data') IS DISTINCT FROM 'array' THEN
		RAISE EXCEPTION 'the list of tenants has no data array' USING ERRCODE = 'invalid_text_representation';
	END IF;
	has_more := coalesce(doc ->> 'has_more', 'false') = 'true';
	last_id := webhook_inbox._scalar_text(doc -> 'data' -> -1 -> 'id');
	/* ids as a provider sends them: a string of 1 to 255 bytes without control characters */
	INSERT INTO webhook_inbox.tenants AS t (source_id, tenant, discovered_by)
	SELECT DISTINCT p_source_id, a ->> 'id', 'list'
	  FROM jsonb_array_elements(doc -> 'data') a
	 WHERE jsonb_typeof(a -> 'id') = 'string' AND octet_length(a ->> 'id') BETWEEN 1 AND 255
	   AND a ->> 'id' !~ '[[:cntrl:]]'
	 ORDER BY 2
	ON CONFLICT (source_id, tenant) DO UPDATE SET last_seen = now();
	GET DIAGNOSTICS listed = ROW_COUNT;
END
$$;
COMMENT ON FUNCTION @extschema@._tenants_listed(integer, text) IS
	'Registers the tenants of one page of a provider''s list of them (Stripe GET /v1/accounts), as discovered by the list, and returns how many it named and the paging facts.';

CREATE FUNCTION @extschema@._tenant_listers()
RETURNS SETOF integer
LANGUAGE sql STABLE AS $$
	/* Stripe sources that are, or say they are, Connect platforms */
	SELECT s.id FROM webhook_inbox.sources s
	 WHERE s.kind = 'stripe' AND s.enabled AND s.api_base IS NOT NULL AND s.flagged IS NULL
	   AND (s.settings ->> 'connect' = 'true'
			OR EXISTS (SELECT 1 FROM webhook_inbox.tenants t WHERE t.source_id = s.id))
	 ORDER BY s.id
$$;
COMMENT ON FUNCTION @extschema@._tenant_listers() IS
	'The sources whose tenants the worker lists from the provider: Stripe sources with settings connect: true or with tenants known from deliveries.';

CREATE FUNCTION @extschema@.discover_tenants(source text)
RETURNS integer
AS 'MODULE_PATHNAME', 'wi_discover_tenants'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.discover_tenants(text) IS
	'Lists a source''s tenants from the provider now (Stripe: GET /v1/accounts with the platform''s key, every page) and registers them; returns how many were listed. The worker does this by itself once per webhook_inbox.sweep_interval.';

CREATE FUNCTION @extschema@._sweep_begin(p_source_id integer, p_object_type text, p_trigger text,
	p_overlap interval, p_layer text, p_events_window interval, p_tenant text DEFAULT '',
	OUT run_id bigint, OUT since_epoch bigint)
LANGUAGE plpgsql AS $$
DECLARE
	cp timestamptz;
	why text;
	lookback interval;
	start timestamptz;
BEGIN
	IF p_layer IS NULL OR p_layer NOT IN ('incremental', 'full') THEN
		RAISE EXCEPTION 'unknown sweep layer "%"', p_layer
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'A sweep layer is incremental or full.';
	END IF;
	IF p_layer = 'full' THEN
		INSERT INTO webhook_inbox.sweep_runs (source_id, tenant, object_type, trigger, layer)
		VALUES (p_source_id, p_tenant, p_object_type, p_trigger, 'full')
		RETURNING id INTO run_id;
		since_epoch := -1;
		RETURN;
	END IF;
	SELECT c.checkpoint INTO cp FROM webhook_inbox.sweep_checkpoints c
	 WHERE c.source_id = p_source_id AND c.tenant = p_tenant AND c.object_type = p_object_type AND c.layer = 'incremental';
	/* an events list keeps a window only: what is older cannot be compared */
	IF p_events_window IS NOT NULL THEN
		IF cp IS NULL THEN
			why := format('no checkpoint yet: only the provider''s %s days of events were compared; a full pass compares the rest',
						  round(extract(epoch FROM p_events_window) / 86400));
		ELSIF cp - p_overlap < now() - p_events_window THEN
			why := format('the checkpoint (%s) is older than the provider''s %s days of events; a full pass compares the rest',
						  cp, round(extract(epoch FROM p_events_window) / 86400));
		END IF;
	END IF;
	/*
	 * Without a checkpoint the first pass lists a bounded window, not from
	 * 1970: the provider's events window, else webhook_inbox.sweep_lookback.
	 * Objects last changed before it are the full layer's to compare.
	 */
	IF cp IS NULL THEN
		lookback := coalesce(p_events_window,
							 pg_catalog.current_setting('webhook_inbox.sweep_lookback', true)::interval,
							 interval '30 days');
		start := now() - lookback;
	ELSE
		start := cp - p_overlap;
	END IF;
	INSERT INTO webhook_inbox.sweep_runs (source_id, tenant, object_type, trigger, listed_since, layer,
										  incomplete_reason)
	VALUES (p_source_id, p_tenant, p_object_type, p_trigger, start, 'incremental', why)
	RETURNING id INTO run_id;
	since_epoch := floor(extract(epoch FROM start))::bigint;
END
$$;
COMMENT ON FUNCTION @extschema@._sweep_begin(integer, text, text, interval, text, interval, text) IS
	'Starts a sweep run of a layer for a tenant of the source (empty: its own account), with that tenant''s checkpoint. Incremental: from the checkpoint minus the overlap (without one: the provider''s events window, else webhook_inbox.sweep_lookback, and the pass is incomplete); with an events list (p_events_window not NULL) a window not covering that start makes the pass incomplete from the outset. Full: everything (since_epoch -1).';

CREATE FUNCTION @extschema@._sweep_page(p_run_id bigint, p_body text, p_items_path jsonpath,
	p_status_path jsonpath, p_version_path jsonpath, p_occurrence boolean)
RETURNS TABLE (object_id text, item jsonb, deleted boolean, has_more boolean, last_id text, unhidden integer)
LANGUAGE plpgsql AS $$
DECLARE
	w webhook_inbox.sweep_runs;
	doc jsonb;
	n integer;
	more boolean;
	last text;
	unhid integer;
BEGIN
	SELECT * INTO w FROM webhook_inbox.sweep_runs x WHERE x.id = p_run_id;
	BEGIN
		doc := p_body::jsonb;
	EXCEPTION WHEN others THEN
		RAISE EXCEPTION 'the list response is not JSON' USING ERRCODE = 'invalid_text_representation';
	END;
	SELECT count(*), (array_agg(webhook_inbox._scalar_text(it -> 'id') ORDER BY k DESC))[1] INTO n, last
	  FROM jsonb_path_query(doc, p_items_path) WITH ORDINALITY AS q(it, k)
	 WHERE jsonb_typeof(it) = 'object';
	more := coalesce(doc ->> 'has_more', 'false') = 'true';
	UPDATE webhook_inbox.sweep_runs x SET pages = x.pages + 1, listed = x.listed + n WHERE x.id = p_run_id;
	/* a listed object is one the source can see: hidden no more */
	UPDATE webhook_inbox.objects o SET hidden_since = NULL, hidden_reason = NULL
	  FROM jsonb_path_query(doc, p_items_path) it
	 WHERE o.source_id = w.source_id AND o.tenant = w.tenant AND o.object_type = w.object_type
	   AND o.hidden_since IS NOT NULL AND jsonb_typeof(it) = 'object'
	   AND o.object_id = webhook_inbox._scalar_text(it -> 'id');
	GET DIAGNOSTICS unhid = ROW_COUNT;
	IF w.layer = 'full' THEN
		/* what the provider still has, to find what it no longer has */
		INSERT INTO webhook_inbox.sweep_seen (run_id, object_id)
		SELECT p_run_id, webhook_inbox._scalar_text(it -> 'id')
		  FROM jsonb_path_query(doc, p_items_path) it
		 WHERE jsonb_typeof(it) = 'object' AND webhook_inbox._scalar_text(it -> 'id') IS NOT NULL
		ON CONFLICT DO NOTHING;
	END IF;

	/* what differs from the mirror */
	RETURN QUERY
	WITH items AS (
		SELECT webhook_inbox._scalar_text(it -> 'id') AS id, it AS item,
			   coalesce(it ->> 'deleted', 'false') = 'true' AS deleted,
			   webhook_inbox._path_text(it, p_status_path) AS st,
			   webhook_inbox._path_version(it, p_version_path) AS ver
		  FROM jsonb_path_query(doc, p_items_path) it
		 WHERE jsonb_typeof(it) = 'object')
	SELECT x.id, x.item, x.deleted, more, last, unhid
	  FROM items x
	 WHERE x.id IS NOT NULL AND (CASE
		WHEN x.deleted THEN EXISTS (
			SELECT 1 FROM webhook_inbox.objects o
			 WHERE o.source_id = w.source_id AND o.tenant = w.tenant AND o.object_type = w.object_type AND o.object_id = x.id
			   AND NOT o.deleted)
		ELSE NOT EXISTS (
			SELECT 1 FROM webhook_inbox.objects o
			 WHERE o.source_id = w.source_id AND o.tenant = w.tenant AND o.object_type = w.object_type AND o.object_id = x.id
			   AND NOT o.deleted AND o.status IS NOT DISTINCT FROM x.st
			   AND (p_version_path IS NULL OR o.version IS NOT DISTINCT FROM x.ver))
		END
		/* a type also counted once: a listed one not yet recorded differs too */
		OR (p_occurrence AND NOT x.deleted AND NOT EXISTS (
			SELECT 1 FROM webhook_inbox.occurrences o
			 WHERE o.source_id = w.source_id AND o.tenant = w.tenant AND o.kind = w.object_type AND o.occurrence_id = x.id)));
	IF NOT FOUND THEN
		/* one row still carries the paging facts */
		RETURN QUERY SELECT NULL::text, NULL::jsonb, NULL::boolean, more, last, unhid;
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@._sweep_page(bigint, text, jsonpath, jsonpath, jsonpath, boolean) IS
	'Reads one page of a list response, counts it into the run, and returns the items that differ from the mirror (rows with a NULL object_id only carry has_more and the last id for paging); unhidden, on every row, is how many hidden objects the page showed again (0: the page wrote only the run''s bookkeeping).';

CREATE FUNCTION @extschema@._sweep_events(p_run_id bigint, p_body text,
	OUT has_more boolean, OUT last_id text, OUT events_listed integer, OUT events_fed integer)
LANGUAGE plpgsql AS $$
DECLARE
	w webhook_inbox.sweep_runs;
	s webhook_inbox.sources;
	doc jsonb;
	new_ids text[];
BEGIN
	SELECT * INTO w FROM webhook_inbox.sweep_runs x WHERE x.id = p_run_id;
	SELECT * INTO s FROM webhook_inbox.sources x WHERE x.id = w.source_id;
	BEGIN
		doc := p_body::jsonb;
	EXCEPTION WHEN others THEN
		RAISE EXCEPTION 'the events response is not JSON' USING ERRCODE = 'invalid_text_representation';
	END;
	IF jsonb_typeof(doc -> 'data') IS DISTINCT FROM 'array' THEN
		RAISE EXCEPTION 'the events response has no data array' USING ERRCODE = 'invalid_text_representation';
	END IF;
	has_more := coalesce(doc ->> 'has_more', 'false') = 'true';
	last_id := webhook_inbox._scalar_text(doc -> 'data' -> -1 -> 'id');

	/*
	 * Each listed event goes through intake(), the path of a delivery:
	 * classified by the routes, deduplicated on its event id, the delivery
	 * recorded (delivery id "sweep <run>").  Oldest first, as they happened.
	 */
	SELECT count(*), coalesce(array_agg(f.event_id) FILTER (WHERE f.outcome <> 'duplicate'), '{}')
	  INTO events_listed, new_ids
	  FROM (SELECT e ->> 'id' AS event_id,
				   webhook_inbox.intake(s.name, ARRAY['x-webhook-inbox-delivery', 'sweep ' || p_run_id],
										convert_to(e::text, 'UTF8')) AS outcome
			  FROM jsonb_array_elements(doc -> 'data') WITH ORDINALITY AS q(e, k)
			 WHERE jsonb_typeof(e) = 'object'
			 ORDER BY k DESC) f;
	/*
	 * An event listed under a tenant's credentials is that tenant's, also
	 * when its body does not name it (Stripe lists only the account's own
	 * events under its Stripe-Account): the new rows are still this
	 * transaction's, unclaimed.
	 */
	IF w.tenant <> '' AND cardinality(new_ids) > 0 THEN
		UPDATE webhook_inbox.inbox i SET tenant = w.tenant
		 WHERE i.source_id = w.source_id AND i.event_id = ANY (new_ids) AND i.tenant = '';
		UPDATE webhook_inbox.deliveries d SET tenant = w.tenant
		 WHERE d.source_id = w.source_id AND d.event_id = ANY (new_ids) AND d.tenant = ''
		   AND d.delivery_id = 'sweep ' || p_run_id;
	END IF;
	/* the events the inbox lacked: each a repair of what it changed */
	INSERT INTO webhook_inbox.repairs (run_id, source_id, tenant, object_type, object_id, before, after, outcome)
	SELECT p_run_id, w.source_id, i.tenant, coalesce(i.object_type, w.object_type), coalesce(i.object_id, i.event_id),
		   NULL, jsonb_build_object('event', i.event_id, 'type', i.event_type, 'inbox', i.status), 'event'
	  FROM webhook_inbox.inbox i
	 WHERE i.source_id = w.source_id AND i.event_id = ANY (new_ids)
	 ORDER BY i.id;
	events_fed := cardinality(new_ids);
	UPDATE webhook_inbox.sweep_runs x
	   SET pages = x.pages + 1, listed = x.listed + events_listed, differences = x.differences + events_fed,
		   repaired = x.repaired + events_fed
	 WHERE x.id = p_run_id;
END
$$;
COMMENT ON FUNCTION @extschema@._sweep_events(bigint, text) IS
	'Reads one page of a provider''s events list into the inbox through intake(), as deliveries: an event the inbox lacked (a missed delivery) is recorded as a repair and then processed like any delivery; one it has is a duplicate. Returns the paging facts.';

CREATE FUNCTION @extschema@._sweep_missing(p_run_id bigint)
RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
	w webhook_inbox.sweep_runs;
	n integer;
BEGIN
	SELECT * INTO w FROM webhook_inbox.sweep_runs x WHERE x.id = p_run_id;
	IF w.layer <> 'full' THEN
		RETURN;
	END IF;
	RETURN QUERY
	SELECT o.object_id FROM webhook_inbox.objects o
	 WHERE o.source_id = w.source_id AND o.tenant = w.tenant AND o.object_type = w.object_type AND NOT o.deleted
	   AND NOT EXISTS (SELECT 1 FROM webhook_inbox.sweep_seen x WHERE x.run_id = p_run_id AND x.object_id = o.object_id)
	   /* a hidden object is read again only once its horizon no longer hides it (a scope granted) */
	   AND (o.hidden_since IS NULL
			OR webhook_inbox._hidden_why(o.source_id, o.tenant, o.object_type, o.state) IS NULL)
	 ORDER BY o.object_id;
	GET DIAGNOSTICS n = ROW_COUNT;
	UPDATE webhook_inbox.sweep_runs x SET missing = n WHERE x.id = p_run_id;
END
$$;
COMMENT ON FUNCTION @extschema@._sweep_missing(bigint) IS
	'After a full pass listed every page: the mirror''s live objects of the type that the provider did not list (to be read by id: gone, hidden, or missed by a listing that moved), except those still outside a horizon.';

CREATE FUNCTION @extschema@._sweep_skip(p_run_id bigint, p_object_id text)
RETURNS void
LANGUAGE sql AS $$
	UPDATE webhook_inbox.sweep_runs x SET retry_ids = x.retry_ids || p_object_id WHERE x.id = p_run_id;
$$;
COMMENT ON FUNCTION @extschema@._sweep_skip(bigint, text) IS
	'Records a difference a live claim held, for the next pass to read by id.';

CREATE FUNCTION @extschema@._sweep_retry_ids(p_run_id bigint)
RETURNS SETOF text
LANGUAGE sql STABLE AS $$
	/* what the previous pass of the same (source, object type) skipped */
	SELECT DISTINCT unnest(p.retry_ids)
	  FROM webhook_inbox.sweep_runs r
	 CROSS JOIN LATERAL (SELECT x.retry_ids FROM webhook_inbox.sweep_runs x
						  WHERE x.source_id = r.source_id AND x.tenant = r.tenant AND x.object_type = r.object_type AND x.id < r.id
						  ORDER BY x.id DESC LIMIT 1) p
	 WHERE r.id = p_run_id;
$$;
COMMENT ON FUNCTION @extschema@._sweep_retry_ids(bigint) IS
	'The objects the previous pass of the run''s (source, object type) skipped under a live claim: read by id first.';

CREATE FUNCTION @extschema@._sweep_lease(p_source_id integer, p_object_type text, p_object_id text,
	p_holder text, p_lease interval, p_tenant text DEFAULT '')
RETURNS bigint
LANGUAGE sql AS $$
	/*
	 * The same lease claim() takes: a live claim wins, the sweep skips the
	 * object; so does the object's advisory lock, held by a claim() or a
	 * _work_local() working it right now.
	 */
	INSERT INTO webhook_inbox.object_leases AS l (source_id, tenant, object_type, object_id, token, holder, expires_at)
	SELECT p_source_id, p_tenant, p_object_type, p_object_id, nextval('webhook_inbox.claim_token_seq'), p_holder,
		   now() + p_lease
	 WHERE pg_try_advisory_xact_lock(hashtextextended(
			'webhook_inbox/' || p_source_id || '/' || p_tenant || '/' || p_object_type || '/' || p_object_id, 0))
	ON CONFLICT (source_id, tenant, object_type, object_id) DO UPDATE
	   SET token = EXCLUDED.token, holder = EXCLUDED.holder, claimed_at = now(), expires_at = EXCLUDED.expires_at
	 WHERE l.expires_at <= now()
	RETURNING l.token
$$;
COMMENT ON FUNCTION @extschema@._sweep_lease(integer, text, text, text, interval, text) IS
	'Takes an object''s lease for a sweep repair, with a fresh fencing token; NULL while a claim holds it.';

CREATE FUNCTION @extschema@._sweep_repair(p_run_id bigint, p_token bigint, p_object_id text, p_object jsonb,
	p_deleted boolean, p_status_path jsonpath, p_version_path jsonpath, p_occurrence boolean)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	w webhook_inbox.sweep_runs;
	s webhook_inbox.sources;
	cur webhook_inbox.objects;
	b jsonb;
	a jsonb;
	res text;
	why text;
	confirm interval;
BEGIN
	SELECT * INTO w FROM webhook_inbox.sweep_runs x WHERE x.id = p_run_id;
	SELECT * INTO s FROM webhook_inbox.sources x WHERE x.id = w.source_id;
	SELECT * INTO cur FROM webhook_inbox.objects x
	 WHERE x.source_id = w.source_id AND x.tenant = w.tenant AND x.object_type = w.object_type AND x.object_id = p_object_id;
	b := CASE WHEN cur.object_id IS NOT NULL
			  THEN jsonb_build_object('status', cur.status, 'version', cur.version, 'deleted', cur.deleted) END;
	/*
	 * A read by id answered 404 (or null): evidence of a deletion only for
	 * an object the source could see.  One outside a horizon is hidden and
	 * keeps what its webhooks brought; one inside it is believed as a
	 * fetch's 404 is, when a second read at least tombstone_confirm_delay
	 * later answers the same (the next pass reads it by id first).
	 */
	IF p_deleted AND p_object IS NULL AND cur.object_id IS NOT NULL AND NOT cur.deleted THEN
		why := webhook_inbox._hidden_why(w.source_id, w.tenant, w.object_type, cur.state);
		confirm := coalesce(pg_catalog.current_setting('webhook_inbox.tombstone_confirm_delay', true), '60s')::interval;
		IF why IS NOT NULL OR (confirm > interval '0'
							   AND (cur.tombstone_pending_since IS NULL OR cur.tombstone_pending_since + confirm > now())) THEN
			UPDATE webhook_inbox.objects x
			   SET hidden_since = CASE WHEN why IS NOT NULL THEN coalesce(x.hidden_since, now()) END,
				   hidden_reason = why,
				   tombstone_pending_since = CASE WHEN why IS NULL THEN coalesce(x.tombstone_pending_since, now()) END
			 WHERE x.source_id = w.source_id AND x.tenant = w.tenant AND x.object_type = w.object_type
			   AND x.object_id = p_object_id;
			IF p_token IS NOT NULL THEN
				DELETE FROM webhook_inbox.object_leases x WHERE x.token = p_token;
			END IF;
			IF why IS NULL THEN
				UPDATE webhook_inbox.sweep_runs x SET differences = x.differences + 1, retry_ids = x.retry_ids || p_object_id
				 WHERE x.id = p_run_id;
				RETURN 'unconfirmed';
			END IF;
			IF cur.hidden_since IS NULL THEN
				INSERT INTO webhook_inbox.repairs (run_id, source_id, tenant, object_type, object_id, before, after, outcome)
				VALUES (p_run_id, w.source_id, w.tenant, w.object_type, p_object_id, b,
						b || jsonb_build_object('hidden', why), 'hidden');
				UPDATE webhook_inbox.sweep_runs x SET differences = x.differences + 1 WHERE x.id = p_run_id;
			END IF;
			RETURN 'hidden';
		END IF;
	END IF;
	res := webhook_inbox._save_present(p_token, p_object, p_deleted, p_status_path, p_version_path,
		format('sweep %s', p_run_id));
	/* an object the provider listed or answered with is one the source sees */
	IF p_object IS NOT NULL AND cur.hidden_since IS NOT NULL AND res <> 'fenced' THEN
		UPDATE webhook_inbox.objects x SET hidden_since = NULL, hidden_reason = NULL
		 WHERE x.source_id = w.source_id AND x.tenant = w.tenant AND x.object_type = w.object_type
		   AND x.object_id = p_object_id;
	END IF;
	SELECT jsonb_build_object('status', o.status, 'version', o.version, 'deleted', o.deleted) INTO a
	  FROM webhook_inbox.objects o
	 WHERE o.source_id = w.source_id AND o.tenant = w.tenant AND o.object_type = w.object_type AND o.object_id = p_object_id;
	/* a type also counted once (a refund): record it if no event did */
	IF p_occurrence AND p_object IS NOT NULL AND NOT p_deleted AND res <> 'fenced'
	   AND webhook_inbox._record_occurrence(s.id, w.tenant, w.object_type, p_object_id, p_object, NULL,
			CASE WHEN jsonb_typeof(p_object -> 'amount') = 'number'
				 THEN (p_object ->> 'amount')::numeric::bigint END,
			p_object ->> 'currency') THEN
		a := coalesce(a, '{}'::jsonb) || jsonb_build_object('occurrence', p_object_id);
		IF res NOT IN ('applied', 'tombstone', 'revived') THEN
			res := 'recorded';
		END IF;
	END IF;
	IF p_token IS NOT NULL THEN
		DELETE FROM webhook_inbox.object_leases x WHERE x.token = p_token;
	END IF;
	IF res IN ('applied', 'tombstone', 'recorded', 'revived') THEN
		INSERT INTO webhook_inbox.repairs (run_id, source_id, tenant, object_type, object_id, before, after, outcome)
		VALUES (p_run_id, w.source_id, w.tenant, w.object_type, p_object_id, b, a, res);
		UPDATE webhook_inbox.sweep_runs x SET repaired = x.repaired + 1, differences = x.differences + 1
		 WHERE x.id = p_run_id;
	ELSE
		UPDATE webhook_inbox.sweep_runs x SET differences = x.differences + 1 WHERE x.id = p_run_id;
	END IF;
	RETURN res;
END
$$;
COMMENT ON FUNCTION @extschema@._sweep_repair(bigint, bigint, text, jsonb, boolean, jsonpath, jsonpath, boolean) IS
	'Repairs one difference through the guarded save path under the sweep''s lease (released here), recording the repair with the mirror before and after. A read by id that found nothing (p_object NULL, p_deleted) tombstones only an object the source could see, once a second read webhook_inbox.tombstone_confirm_delay after the first confirms it (until then: unconfirmed, read by id first by the next pass); one outside a horizon (_hidden_why()) is marked hidden instead. Returns applied, tombstone, recorded, duplicate, stale, fenced, hidden or unconfirmed.';

CREATE FUNCTION @extschema@._sweep_count(p_run_id bigint, p_token bigint, p_skipped integer,
	p_errors integer)
RETURNS void
LANGUAGE sql AS $$
	DELETE FROM webhook_inbox.object_leases x WHERE x.token = p_token;
	UPDATE webhook_inbox.sweep_runs x
	   SET skipped = x.skipped + p_skipped, errors = x.errors + p_errors,
		   differences = x.differences + p_skipped + p_errors
	 WHERE x.id = p_run_id;
$$;
COMMENT ON FUNCTION @extschema@._sweep_count(bigint, bigint, integer, integer) IS
	'Counts differences a sweep could not repair: skipped (a claim holds the object) or failed; releases the sweep''s lease if it took one.';

CREATE FUNCTION @extschema@._sweep_finish(p_run_id bigint, p_error text, p_incomplete text)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	w webhook_inbox.sweep_runs;
BEGIN
	UPDATE webhook_inbox.sweep_runs x
	   SET status = CASE WHEN p_error IS NOT NULL OR x.errors > 0 THEN 'failed'
						 WHEN p_incomplete IS NOT NULL OR x.incomplete_reason IS NOT NULL THEN 'incomplete'
						 ELSE 'complete' END,
		   error = coalesce(p_error, CASE WHEN x.errors > 0 THEN format('%s repairs failed', x.errors) END),
		   incomplete_reason = coalesce(x.incomplete_reason, p_incomplete),
		   finished_at = clock_timestamp()
	 WHERE x.id = p_run_id
	RETURNING * INTO w;
	DELETE FROM webhook_inbox.sweep_seen x WHERE x.run_id = p_run_id;
	IF w.status = 'complete' THEN
		/*
		 * Only a complete pass moves the checkpoint, to the run's start; a
		 * full one compared everything, so it moves the incremental one too.
		 */
		INSERT INTO webhook_inbox.sweep_checkpoints AS c (source_id, tenant, object_type, layer, checkpoint, last_run_id)
		SELECT w.source_id, w.tenant, w.object_type, l, w.started_at, w.id
		  FROM unnest(CASE WHEN w.layer = 'full' THEN ARRAY['full', 'incremental'] ELSE ARRAY['incremental'] END) l
		ON CONFLICT (source_id, tenant, object_type, layer) DO UPDATE
		   SET checkpoint = greatest(c.checkpoint, EXCLUDED.checkpoint), last_run_id = EXCLUDED.last_run_id,
			   updated_at = now();
	END IF;
	RETURN w.status;
END
$$;
COMMENT ON FUNCTION @extschema@._sweep_finish(bigint, text, text) IS
	'Ends a sweep run: complete (the layer''s checkpoint moves to the run''s start; a full pass moves the incremental one too), incomplete (could not compare everything: the reason is kept, the checkpoint stays) or failed (checkpoint stays).';

CREATE FUNCTION @extschema@._sweep_now(source text, object_type text, layer text, tenant text DEFAULT '')
RETURNS bigint
AS 'MODULE_PATHNAME', 'wi_sweep_now'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@._sweep_now(text, text, text, text) IS
	'Runs one sweep in this session; returns the sweep_runs id.';

CREATE FUNCTION @extschema@.sweep_now(source text, object_type text, layer text DEFAULT 'full',
	tenant text DEFAULT NULL)
RETURNS SETOF @extschema@.sweep_runs
LANGUAGE plpgsql AS $$
DECLARE
	run bigint;
	t text;
	ts record;
BEGIN
	IF tenant IS NOT NULL THEN
		/* a tenant the source does not have, or one that is not read, is refused before any request */
		IF tenant <> '' THEN
			SELECT x.status, x.reason INTO ts FROM webhook_inbox.tenant_status x
			 WHERE x.source = sweep_now.source AND x.tenant = sweep_now.tenant;
			IF NOT FOUND THEN
				PERFORM webhook_inbox._source_id(source);
				PERFORM webhook_inbox._tenant_unknown(source, tenant);
			ELSIF ts.status = 'disabled' THEN
				RAISE EXCEPTION 'tenant "%" of source "%" is disabled', tenant, source
					USING ERRCODE = 'object_not_in_prerequisite_state',
						  DETAIL = pg_catalog.format('A disabled tenant is not read: %s.', ts.reason),
						  HINT = 'enable_tenant() reads it again.';
			END IF;
		END IF;
		run := webhook_inbox._sweep_now(source, object_type, layer, tenant);
		RETURN QUERY SELECT * FROM webhook_inbox.sweep_runs r WHERE r.id = run;
		RETURN;
	END IF;
	/* what _sweep_now() refuses, it refuses here too, tenants or none */
	IF source IS NULL OR object_type IS NULL OR layer IS NULL OR layer NOT IN ('incremental', 'full') THEN
		PERFORM webhook_inbox._sweep_now(source, object_type, layer, '');
	END IF;
	/* every tenant the scheduled sweeps reconcile, one pass each, within the source's pace */
	FOR t IN SELECT x FROM webhook_inbox._sweep_tenants(webhook_inbox._source_id(source), object_type) x ORDER BY 1
	LOOP
		run := webhook_inbox._sweep_now(source, object_type, layer, t);
		RETURN QUERY SELECT * FROM webhook_inbox.sweep_runs r WHERE r.id = run;
	END LOOP;
END
$$;
COMMENT ON FUNCTION @extschema@.sweep_now(text, text, text, text) IS
	'Runs reconciliation passes of a source''s object type now, synchronously in this session and inside this transaction (their repairs commit with it), and returns their sweep_runs rows. tenant: one tenant of the source, under its credentials (empty: the source''s own account); NULL, the default: every tenant the scheduled sweeps reconcile (every active tenant, and the source''s own account where it has objects of the type or the source has no tenants), one pass each. The passes'' requests are paced within the provider''s limits, in the budget the worker shares (pace_status()). layer: full (the default: every object, and the mirror''s objects the provider no longer has) or incremental (what happened since the checkpoint). Raises if the source has no list API for the type.';

CREATE VIEW @extschema@.sweep_health AS
SELECT s.name AS source, t.object_type, c.checkpoint, r.id AS last_run_id, r.status AS last_status,
	   r.started_at AS last_started_at, r.finished_at - r.started_at AS last_duration,
	   r.listed AS last_listed, r.repaired AS last_repaired, r.skipped AS last_skipped,
	   r.errors AS last_errors, r.error AS last_error,
	   (SELECT count(*) FROM webhook_inbox.sweep_runs x
		 WHERE x.source_id = t.source_id AND x.tenant = t.tenant AND x.object_type = t.object_type
		   AND x.status = 'failed' AND x.started_at > now() - interval '1 day') AS failed_last_day,
	   (SELECT coalesce(sum(x.repaired), 0) FROM webhook_inbox.sweep_runs x
		 WHERE x.source_id = t.source_id AND x.tenant = t.tenant AND x.object_type = t.object_type
		   AND x.started_at > now() - interval '1 day') AS repaired_last_day,
	   now() - c.checkpoint AS checkpoint_age,
	   r.layer AS last_layer, r.incomplete_reason AS last_incomplete_reason,
	   (SELECT f.checkpoint FROM webhook_inbox.sweep_checkpoints f
		 WHERE f.source_id = t.source_id AND f.tenant = t.tenant AND f.object_type = t.object_type AND f.layer = 'full') AS last_full_pass,
	   h.hidden, CASE WHEN h.live > 0 THEN round(h.hidden::numeric / h.live, 4) END AS hidden_share,
	   (SELECT count(*) FROM webhook_inbox.repairs x
		 WHERE x.source_id = t.source_id AND x.tenant = t.tenant AND x.object_type = t.object_type
		   AND x.outcome = 'revived' AND x.at > now() - interval '1 day') AS revived_last_day,
	   t.tenant
  FROM (SELECT DISTINCT x.source_id, x.tenant, x.object_type FROM webhook_inbox.sweep_runs x
		UNION SELECT x.source_id, x.tenant, x.object_type FROM webhook_inbox.sweep_checkpoints x) t
  JOIN webhook_inbox.sources s ON s.id = t.source_id
  LEFT JOIN webhook_inbox.sweep_checkpoints c ON c.source_id = t.source_id AND c.tenant = t.tenant AND c.object_type = t.object_type
	   AND c.layer = 'incremental'
  LEFT JOIN LATERAL (SELECT * FROM webhook_inbox.sweep_runs x
					  WHERE x.source_id = t.source_id AND x.tenant = t.tenant AND x.object_type = t.object_type
					  ORDER BY x.started_at DESC LIMIT 1) r ON true
 CROSS JOIN LATERAL (SELECT count(*) FILTER (WHERE o.hidden_since IS NOT NULL) AS hidden, count(*) AS live
					   FROM webhook_inbox.objects o
					  WHERE o.source_id = t.source_id AND o.tenant = t.tenant AND o.object_type = t.object_type
						AND NOT o.deleted) h;
COMMENT ON VIEW @extschema@.sweep_health IS
	'What to alert on for sweeps: per (source, object type, tenant) the last run (of either layer), its repairs (a webhook path losing events shows here), failures in the last day, the incremental checkpoint''s age, when the last complete full pass started, how many live objects are hidden from the read API (hidden, and hidden_share of the live ones: known only from their webhooks) and the tombstones revived by a newer signed version in the last day.';

CREATE VIEW @extschema@.hidden_objects AS
SELECT s.name AS source, o.tenant, o.object_type, o.object_id, o.status, o.version, o.hidden_since, o.hidden_reason,
	   'payloads'::text AS known_from, o.last_event_id, o.updated_at
  FROM webhook_inbox.objects o JOIN webhook_inbox.sources s ON s.id = o.source_id
 WHERE o.hidden_since IS NOT NULL;
COMMENT ON VIEW @extschema@.hidden_objects IS
	'The objects the provider''s read API cannot see (outside a horizon of webhook_inbox.horizons) although they need not be gone: never tombstoned by a read, known only from their signed webhooks'' payloads since hidden_since, each applied through the version guard.';

CREATE FUNCTION @extschema@._pace_units(OUT source_id integer, OUT unit text, OUT rate double precision,
	OUT burst double precision, OUT ready_at timestamptz, OUT wait_s double precision)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'wi_pace_status'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@._pace_units() IS
	'The metered units of the providers in the pacing table (shared memory; this session''s own without shared_preload_libraries) that are not idle.';

CREATE FUNCTION @extschema@.pace_status(OUT source text, OUT unit text, OUT rate double precision,
	OUT burst double precision, OUT ready_at timestamptz, OUT wait_s double precision)
RETURNS SETOF record
LANGUAGE sql VOLATILE AS $$
	SELECT s.name, u.unit, u.rate, u.burst, u.ready_at, u.wait_s
	  FROM webhook_inbox._pace_units() u JOIN webhook_inbox.sources s ON s.id = u.source_id
	 ORDER BY 1, 2
$$;
COMMENT ON FUNCTION @extschema@.pace_status() IS
	'How the worker and sweep_now() pace each source''s requests within the provider''s documented limits, per unit the provider meters (platform or tenant:ID, and each endpoint within it: Stripe 100/s live, 25/s test-mode keys, 25/s per endpoint; a Shopify shop''s cost bucket; a GitHub installation''s 5,000 an hour and 900 a minute per endpoint): each unit in use, its rate (requests/s; 0: paced by the provider''s answers), its burst, and when it may take its next request (ready_at, wait_s from now). Idle units are not shown.';

CREATE VIEW @extschema@.sweep_backlog AS
SELECT s.name AS source, t.object_type, t.layer, count(*) AS due_passes,
	   count(DISTINCT t.tenant) AS tenants,
	   /* how long the most overdue of them has been due */
	   max(now() - coalesce(l.last_started + CASE WHEN t.layer = 'full'
												THEN current_setting('webhook_inbox.full_sweep_interval')::interval
												ELSE current_setting('webhook_inbox.sweep_interval')::interval END,
							s.created_at)) AS behind_by
  FROM webhook_inbox._sweep_targets(current_setting('webhook_inbox.sweep_interval')::interval,
									current_setting('webhook_inbox.full_sweep_interval')::interval) t
  JOIN webhook_inbox.sources s ON s.id = t.source_id
  LEFT JOIN LATERAL (SELECT max(w.started_at) AS last_started FROM webhook_inbox.sweep_runs w
					  WHERE w.source_id = t.source_id AND w.tenant = t.tenant AND w.object_type = t.object_type
						AND (t.layer = 'incremental' OR w.layer = 'full')) l ON true
 GROUP BY s.name, t.object_type, t.layer;
COMMENT ON VIEW @extschema@.sweep_backlog IS
	'How far behind the scheduled sweeps are: per source, object type and layer, the passes due now (one per tenant) and how long the most overdue has been due. A round over many tenants takes the time the provider''s limits allow (pace_status()); a backlog that grows from one look to the next means the intervals ask for more than those limits give.';

---------------------------------------------------------------------------
-- Counters
---------------------------------------------------------------------------

CREATE FUNCTION @extschema@.worker_stats(
	OUT worker_pid integer, OUT claimed bigint, OUT events bigint, OUT fetched bigint,
	OUT fetch_errors bigint, OUT saved bigint, OUT duplicates bigint, OUT stale bigint,
	OUT ties bigint, OUT backward bigint, OUT occurrences bigint, OUT ignored bigint,
	OUT tombstones bigint, OUT retries bigint, OUT quarantined bigint, OUT unorderable bigint,
	OUT fenced bigint, OUT deferred bigint, OUT rate_limited bigint, OUT auth_refused bigint,
	OUT sweeps bigint, OUT sweeps_failed bigint, OUT repairs bigint, OUT errors bigint,
	OUT refused bigint, OUT revived bigint, OUT hidden bigint,
	OUT fetch_latency_avg_ms double precision, OUT fetch_latency_max_ms double precision)
AS 'MODULE_PATHNAME', 'wi_worker_stats'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.worker_stats() IS
	'The background worker''s counters since the server started (zeros without shared_preload_libraries). revived: tombstones a read had inferred that a newer signed version overrode; hidden: reads that found nothing of an object outside a horizon (marked hidden, not deleted).';

CREATE VIEW @extschema@.worker_counters AS SELECT * FROM @extschema@.worker_stats();
COMMENT ON VIEW @extschema@.worker_counters IS
	'The background worker''s counters: claims, fetches and their latency, saves, stale, ties, backward, retries, quarantines, sweeps and repairs.';

REVOKE ALL ON @extschema@.sweep_checkpoints, @extschema@.sweep_runs, @extschema@.repairs,
	@extschema@.sweep_seen, @extschema@.sweep_health, @extschema@.worker_counters FROM PUBLIC;
REVOKE ALL ON @extschema@.source_scopes, @extschema@.horizons, @extschema@.hidden_objects FROM PUBLIC;
GRANT USAGE ON SCHEMA @extschema@ TO pg_monitor;
GRANT SELECT ON @extschema@.worker_counters, @extschema@.sweep_health TO pg_monitor;
GRANT EXECUTE ON FUNCTION @extschema@.worker_stats() TO pg_monitor;
REVOKE ALL ON @extschema@.sweep_backlog FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('@extschema@.sweep_checkpoints', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.sweep_runs', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.repairs', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.sweep_runs_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.repairs_id_seq', '');
