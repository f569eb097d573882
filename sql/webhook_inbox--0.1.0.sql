/* webhook_inbox: schema, SQL API and route presets, assembled by make from the fragments in sql/ */

\echo Use "CREATE EXTENSION webhook_inbox" to load this file. \quit
/*
 * The receiver's role: it may call intake() and receiver_sources() and
 * nothing else.  Roles are cluster-wide, so it may already exist from an
 * installation in another database.
 */
DO $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'webhook_inbox_receiver') THEN
		CREATE ROLE webhook_inbox_receiver NOLOGIN;
	END IF;
END
$$;

---------------------------------------------------------------------------
-- Sources
---------------------------------------------------------------------------

CREATE TABLE @extschema@.sources (
	id				serial PRIMARY KEY,
	name			text NOT NULL UNIQUE
		CONSTRAINT sources_name_check CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$'),
	kind			text NOT NULL
		CONSTRAINT sources_kind_check CHECK (kind IN ('stripe', 'standard', 'shopify', 'github',
			'razorpay', 'slack', 'paddle', 'checkout', 'hmac')),
	signing_secrets text[] NOT NULL
		CONSTRAINT sources_secrets_check CHECK (cardinality(signing_secrets) >= 1
			AND array_position(signing_secrets, NULL) IS NULL
			AND array_position(signing_secrets, '') IS NULL),
	tolerance		interval NOT NULL DEFAULT '300 seconds'
		CONSTRAINT sources_tolerance_check CHECK (tolerance >= '0 seconds' AND tolerance <= '1 day'),
	api_base		text CONSTRAINT sources_api_base_check CHECK (api_base ~ '^https?://'),
	api_token		text,
	settings		jsonb NOT NULL DEFAULT '{}'
		CONSTRAINT sources_settings_check CHECK (jsonb_typeof(settings) = 'object'),
	enabled			boolean NOT NULL DEFAULT true,
	flagged			text,
	created_at		timestamptz NOT NULL DEFAULT now(),
	updated_at		timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE @extschema@.sources IS
	'One row per configured webhook endpoint; name is the URL path segment /hooks/{name}.';
COMMENT ON COLUMN @extschema@.sources.signing_secrets IS
	'Current signing secrets; several during rotation. Readable only by the owner.';
COMMENT ON COLUMN @extschema@.sources.flagged IS
	'Set by the worker when the provider refused our credentials (401/403).';

---------------------------------------------------------------------------
-- Routes: classification of events
---------------------------------------------------------------------------

CREATE TABLE @extschema@.routes (
	id				serial PRIMARY KEY,
	source_kind		text,
	source_id		integer REFERENCES @extschema@.sources (id) ON DELETE CASCADE,
	event_type		text NOT NULL CONSTRAINT routes_event_type_check CHECK (event_type <> ''),
	class			text NOT NULL
		CONSTRAINT routes_class_check CHECK (class IN ('state', 'occurrence', 'ignore')),
	object_type		text,
	strategy		text NOT NULL
		CONSTRAINT routes_strategy_check CHECK (strategy IN ('fetch', 'version', 'machine',
			'occurrence', 'unordered', 'ignore')),
	object_id_path	jsonpath,
	object_type_path jsonpath,
	version_path	jsonpath,
	status_path		jsonpath,
	time_path		jsonpath,
	amount_path		jsonpath,
	currency_path	jsonpath,
	machine			text,
	tombstone		boolean NOT NULL DEFAULT false,
	priority		integer NOT NULL DEFAULT 100,
	version			integer NOT NULL DEFAULT 1,
	preset			boolean NOT NULL DEFAULT false,
	CONSTRAINT routes_owner_check CHECK ((source_kind IS NULL) <> (source_id IS NULL)),
	CONSTRAINT routes_unique UNIQUE NULLS NOT DISTINCT (source_kind, source_id, event_type),
	CONSTRAINT routes_class_strategy_check CHECK (
		(class = 'ignore' AND strategy = 'ignore')
		OR (class = 'occurrence' AND strategy = 'occurrence')
		OR (class = 'state' AND strategy IN ('fetch', 'version', 'machine', 'unordered'))),
	CONSTRAINT routes_object_check CHECK (class = 'ignore'
		OR (object_id_path IS NOT NULL AND (object_type IS NOT NULL OR object_type_path IS NOT NULL))),
	CONSTRAINT routes_version_check CHECK (strategy <> 'version' OR version_path IS NOT NULL),
	CONSTRAINT routes_machine_check CHECK (strategy <> 'machine'
		OR (machine IS NOT NULL AND status_path IS NOT NULL))
);
COMMENT ON TABLE @extschema@.routes IS
	'Classification of events by (source kind or source, event-type pattern with * wildcards): class, strategy and where ids, version and status live. The most specific match wins: source over kind, then higher priority, then the longer pattern.';
COMMENT ON COLUMN @extschema@.routes.version IS
	'Bumped on every change of the route, recorded on each event it decided, so replays after a mapping change are visible.';

---------------------------------------------------------------------------
-- Inbox and deliveries
---------------------------------------------------------------------------

CREATE TABLE @extschema@.inbox (
	id				bigserial PRIMARY KEY,
	source_id		integer NOT NULL REFERENCES @extschema@.sources (id),
	event_id		text NOT NULL CONSTRAINT inbox_event_id_check CHECK (event_id <> ''),
	correlation_id	text,
	event_type		text,
	object_type		text,
	object_id		text,
	strategy		text,
	route_id		integer,
	route_version	integer,
	provider_version numeric,
	provider_time	timestamptz,
	status_value	text,
	payload			jsonb,
	raw_body		bytea,
	body_sha256		bytea NOT NULL,
	status			text NOT NULL DEFAULT 'pending'
		CONSTRAINT inbox_status_check CHECK (status IN ('pending', 'processing', 'done', 'retry',
			'ignored', 'quarantined')),
	reason			text,
	attempts		integer NOT NULL DEFAULT 0 CONSTRAINT inbox_attempts_check CHECK (attempts >= 0),
	next_attempt_at timestamptz NOT NULL DEFAULT now(),
	claim_token		bigint,
	decided_route	integer,
	decided_route_version integer,
	received_at		timestamptz NOT NULL DEFAULT now(),
	processed_at	timestamptz,
	updated_at		timestamptz NOT NULL DEFAULT now(),
	CONSTRAINT inbox_source_event_key UNIQUE (source_id, event_id),
	CONSTRAINT inbox_claimable_check CHECK (status NOT IN ('pending', 'retry', 'processing')
		OR (object_type IS NOT NULL AND object_id IS NOT NULL AND strategy IS NOT NULL))
);
CREATE INDEX inbox_claim_idx ON @extschema@.inbox (id)
	WHERE status IN ('pending', 'retry', 'processing');
CREATE INDEX inbox_object_idx ON @extschema@.inbox (source_id, object_type, object_id)
	WHERE status IN ('pending', 'retry', 'processing');
CREATE INDEX inbox_claim_token_idx ON @extschema@.inbox (claim_token) WHERE status = 'processing';
COMMENT ON TABLE @extschema@.inbox IS
	'One row per logical message, unique on (source_id, event_id): the id the provider keeps across retries.';
COMMENT ON COLUMN @extschema@.inbox.raw_body IS
	'The exact bytes, kept only for quarantined deliveries whose body could not be read.';
COMMENT ON COLUMN @extschema@.inbox.decided_route IS
	'The route (and its version) that decided the event when it was processed.';

CREATE TABLE @extschema@.deliveries (
	id				bigserial PRIMARY KEY,
	source_id		integer NOT NULL REFERENCES @extschema@.sources (id),
	event_id		text NOT NULL,
	delivery_id		text,
	received_at		timestamptz NOT NULL DEFAULT now(),
	body_sha256		bytea NOT NULL,
	body_size		integer NOT NULL CONSTRAINT deliveries_size_check CHECK (body_size >= 0),
	outcome			text NOT NULL
		CONSTRAINT deliveries_outcome_check CHECK (outcome IN ('new', 'duplicate', 'quarantined'))
);
CREATE INDEX deliveries_event_idx ON @extschema@.deliveries (source_id, event_id);
CREATE INDEX deliveries_received_idx ON @extschema@.deliveries (received_at);
COMMENT ON TABLE @extschema@.deliveries IS
	'Audit of every accepted delivery attempt, duplicates included. Bounded by prune().';

---------------------------------------------------------------------------
-- Mirror, leases, transitions, machines, occurrences
---------------------------------------------------------------------------

CREATE TABLE @extschema@.objects (
	source_id		integer NOT NULL REFERENCES @extschema@.sources (id),
	object_type		text NOT NULL,
	object_id		text NOT NULL,
	status			text,
	version			numeric,
	provider_time	timestamptz,
	state			jsonb,
	deleted			boolean NOT NULL DEFAULT false,
	fence_token		bigint,
	last_event_id	bigint,
	updated_at		timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (source_id, object_type, object_id)
);
COMMENT ON TABLE @extschema@.objects IS
	'The mirror: the latest known state of each provider object.';
COMMENT ON COLUMN @extschema@.objects.fence_token IS
	'Highest claim token that saved this object; saves under an older token are fenced.';

CREATE SEQUENCE @extschema@.claim_token_seq;
COMMENT ON SEQUENCE @extschema@.claim_token_seq IS 'Fencing tokens: strictly increasing claim tokens.';

CREATE TABLE @extschema@.object_leases (
	source_id		integer NOT NULL REFERENCES @extschema@.sources (id),
	object_type		text NOT NULL,
	object_id		text NOT NULL,
	token			bigint NOT NULL UNIQUE,
	holder			text NOT NULL,
	claimed_at		timestamptz NOT NULL DEFAULT now(),
	expires_at		timestamptz NOT NULL,
	PRIMARY KEY (source_id, object_type, object_id)
);
COMMENT ON TABLE @extschema@.object_leases IS
	'At most one live claim per object; token is the fencing token of the current claim.';

CREATE TABLE @extschema@.transitions (
	id				bigserial PRIMARY KEY,
	source_id		integer NOT NULL REFERENCES @extschema@.sources (id),
	object_type		text NOT NULL,
	object_id		text NOT NULL,
	machine			text,
	from_status		text,
	to_status		text NOT NULL,
	version			numeric,
	applied			boolean NOT NULL DEFAULT true,
	reason			text,
	cause			text NOT NULL,
	event_id		bigint,
	at				timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX transitions_object_idx ON @extschema@.transitions (source_id, object_type, object_id);
COMMENT ON TABLE @extschema@.transitions IS
	'History of status changes per object; applied = false keeps backward events with their reason.';

CREATE TABLE @extschema@.machines (
	machine			text NOT NULL,
	from_state		text NOT NULL,
	to_state		text NOT NULL,
	preset			boolean NOT NULL DEFAULT false,
	PRIMARY KEY (machine, from_state, to_state),
	CONSTRAINT machines_no_self_loop CHECK (from_state <> to_state)
);
COMMENT ON TABLE @extschema@.machines IS
	'State-machine edges; each machine must be acyclic. A transition is legal iff its target is reachable from its source.';

CREATE TABLE @extschema@.occurrences (
	id				bigserial PRIMARY KEY,
	source_id		integer NOT NULL REFERENCES @extschema@.sources (id),
	kind			text NOT NULL CONSTRAINT occurrences_kind_check CHECK (kind <> ''),
	occurrence_id	text NOT NULL CONSTRAINT occurrences_id_check CHECK (occurrence_id <> ''),
	amount			bigint,
	currency		text,
	payload			jsonb,
	first_event_id	bigint,
	recorded_at		timestamptz NOT NULL DEFAULT now(),
	CONSTRAINT occurrences_key UNIQUE (source_id, kind, occurrence_id)
);
COMMENT ON TABLE @extschema@.occurrences IS
	'Insert-once facts (payment, refund, dispute) unique on their own id.';

CREATE TABLE @extschema@.requeues (
	id				bigserial PRIMARY KEY,
	event_id		bigint NOT NULL,
	previous_status text NOT NULL,
	previous_reason text,
	previous_route	integer,
	previous_route_version integer,
	note			text,
	requeued_by		text NOT NULL DEFAULT current_user,
	requeued_at		timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE @extschema@.requeues IS 'Audit of every controlled replay made with requeue().';

---------------------------------------------------------------------------
-- Privileges: nothing is readable by PUBLIC
---------------------------------------------------------------------------

REVOKE ALL ON ALL TABLES IN SCHEMA @extschema@ FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA @extschema@ FROM PUBLIC;
GRANT USAGE ON SCHEMA @extschema@ TO webhook_inbox_receiver;

---------------------------------------------------------------------------
-- Sources API
---------------------------------------------------------------------------

CREATE FUNCTION @extschema@._check_kind(kind text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	IF kind IS NULL OR kind NOT IN ('stripe', 'standard', 'shopify', 'github', 'razorpay',
									'slack', 'paddle', 'checkout', 'hmac') THEN
		RAISE EXCEPTION 'unknown source kind "%"', kind
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Valid kinds are: stripe, standard, shopify, github, razorpay, slack, paddle, checkout, hmac.';
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@._check_kind(text) IS 'Raises a clear error for an unknown source kind.';

CREATE FUNCTION @extschema@._check_secret(kind text, secret text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	IF secret IS NULL OR secret = '' THEN
		RAISE EXCEPTION 'signing secret must not be empty'
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Copy the endpoint''s signing secret from the provider''s dashboard.';
	END IF;
	IF kind = 'standard' AND secret !~ '^(whsec_)?[A-Za-z0-9+/]+={0,2}$' THEN
		RAISE EXCEPTION 'standard webhooks secret must be base64, optionally prefixed with whsec_'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@._check_secret(text, text) IS 'Raises a clear error for an empty or malformed secret.';

CREATE FUNCTION @extschema@.create_source(
	name text, kind text, secret text,
	tolerance interval DEFAULT '300 seconds',
	api_base text DEFAULT NULL, api_token text DEFAULT NULL,
	settings jsonb DEFAULT '{}', enabled boolean DEFAULT true)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	new_id integer;
BEGIN
	IF name IS NULL OR name !~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$' THEN
		RAISE EXCEPTION 'invalid source name "%"', name
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'A source name is used as the URL path segment /hooks/{name}.',
				  HINT = 'Use 1 to 63 letters, digits, "_", "." or "-", starting with a letter or digit.';
	END IF;
	PERFORM webhook_inbox._check_kind(kind);
	PERFORM webhook_inbox._check_secret(kind, secret);
	IF tolerance IS NULL OR tolerance < '0 seconds' OR tolerance > '1 day' THEN
		RAISE EXCEPTION 'tolerance must be between 0 seconds and 1 day'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF api_base IS NOT NULL AND api_base !~ '^https?://' THEN
		RAISE EXCEPTION 'api_base must be an http or https URL'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF settings IS NULL OR jsonb_typeof(settings) <> 'object' THEN
		RAISE EXCEPTION 'settings must be a JSON object'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF kind = 'hmac' AND coalesce(settings->>'header', '') = '' THEN
		RAISE EXCEPTION 'an hmac source needs settings.header'
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'For example: settings => ''{"header": "X-Signature", "prefix": "sha256=", "encoding": "hex"}''.';
	END IF;
	IF EXISTS (SELECT 1 FROM webhook_inbox.sources s WHERE s.name = create_source.name) THEN
		RAISE EXCEPTION 'source "%" already exists', name
			USING ERRCODE = 'duplicate_object',
				  HINT = 'Use rotate_secret() to change its secret, or choose another name.';
	END IF;
	INSERT INTO webhook_inbox.sources (name, kind, signing_secrets, tolerance, api_base, api_token,
									   settings, enabled)
	VALUES (name, kind, ARRAY[secret], tolerance, api_base, api_token, settings, enabled)
	RETURNING id INTO new_id;
	RETURN new_id;
END
$$;
COMMENT ON FUNCTION @extschema@.create_source(text, text, text, interval, text, text, jsonb, boolean) IS
	'Configures a webhook endpoint; returns its id.';

CREATE FUNCTION @extschema@._source_for_update(source_name text) RETURNS webhook_inbox.sources
LANGUAGE plpgsql AS $$
DECLARE
	s webhook_inbox.sources;
BEGIN
	SELECT * INTO s FROM webhook_inbox.sources WHERE name = source_name FOR UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'source "%" does not exist', source_name
			USING ERRCODE = 'undefined_object',
				  HINT = 'Create it with create_source().';
	END IF;
	RETURN s;
END
$$;
COMMENT ON FUNCTION @extschema@._source_for_update(text) IS 'Locks and returns a source by name, or raises.';

CREATE FUNCTION @extschema@.rotate_secret(name text, new_secret text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	s webhook_inbox.sources;
BEGIN
	s := webhook_inbox._source_for_update(name);
	PERFORM webhook_inbox._check_secret(s.kind, new_secret);
	IF new_secret = ANY (s.signing_secrets) THEN
		RAISE EXCEPTION 'source "%" already has this secret', name
			USING ERRCODE = 'duplicate_object';
	END IF;
	UPDATE webhook_inbox.sources SET signing_secrets = signing_secrets || new_secret, updated_at = now()
	 WHERE id = s.id;
	RETURN cardinality(s.signing_secrets) + 1;
END
$$;
COMMENT ON FUNCTION @extschema@.rotate_secret(text, text) IS
	'Adds a signing secret; old and new are both accepted until the old one is retired. Returns the number of current secrets.';

CREATE FUNCTION @extschema@.retire_secret(name text, old_secret text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	s webhook_inbox.sources;
BEGIN
	s := webhook_inbox._source_for_update(name);
	IF old_secret IS NULL OR NOT old_secret = ANY (s.signing_secrets) THEN
		RAISE EXCEPTION 'source "%" has no such secret', name
			USING ERRCODE = 'undefined_object';
	END IF;
	IF cardinality(s.signing_secrets) = 1 THEN
		RAISE EXCEPTION 'cannot retire the only secret of source "%"', name
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  HINT = 'Add the new secret with rotate_secret() first.';
	END IF;
	UPDATE webhook_inbox.sources SET signing_secrets = array_remove(signing_secrets, old_secret),
		   updated_at = now()
	 WHERE id = s.id;
	RETURN cardinality(s.signing_secrets) - 1;
END
$$;
COMMENT ON FUNCTION @extschema@.retire_secret(text, text) IS
	'Removes a signing secret (never the last one). Returns the number of current secrets.';

CREATE FUNCTION @extschema@.receiver_sources()
RETURNS TABLE (name text, kind text, signing_secrets text[], tolerance_seconds integer, settings jsonb)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
	SELECT s.name, s.kind, s.signing_secrets, extract(epoch FROM s.tolerance)::integer, s.settings
	  FROM webhook_inbox.sources s
	 WHERE s.enabled
	 ORDER BY s.name
$$;
COMMENT ON FUNCTION @extschema@.receiver_sources() IS
	'What the receiver needs to verify deliveries: enabled sources with their secrets.';

CREATE FUNCTION @extschema@._sources_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('webhook_inbox_sources', '');
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION @extschema@._sources_changed() IS 'Tells receivers to reload their sources.';
CREATE TRIGGER sources_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
	ON @extschema@.sources FOR EACH STATEMENT EXECUTE FUNCTION @extschema@._sources_changed();

---------------------------------------------------------------------------
-- Routing
---------------------------------------------------------------------------

CREATE FUNCTION @extschema@._pattern_like(pattern text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
	SELECT replace(replace(replace(replace(pattern, '\', '\\'), '%', '\%'), '_', '\_'), '*', '%')
$$;
COMMENT ON FUNCTION @extschema@._pattern_like(text) IS 'Turns a route pattern with * wildcards into a LIKE pattern.';

CREATE FUNCTION @extschema@._scalar_text(v jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT CASE jsonb_typeof(v)
		WHEN 'string' THEN v #>> '{}'
		WHEN 'number' THEN v #>> '{}'
		WHEN 'boolean' THEN v #>> '{}'
		ELSE NULL END
$$;
COMMENT ON FUNCTION @extschema@._scalar_text(jsonb) IS 'Text of a JSON scalar; NULL for null, objects and arrays.';

CREATE FUNCTION @extschema@._version_of(v jsonb) RETURNS numeric
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	/* numbers as they are; numeric strings; ISO timestamps as epoch seconds */
	SELECT CASE
		WHEN jsonb_typeof(v) = 'number' THEN (v #>> '{}')::numeric
		WHEN jsonb_typeof(v) = 'string' AND (v #>> '{}') ~ '^-?[0-9]+(\.[0-9]+)?$' THEN (v #>> '{}')::numeric
		WHEN jsonb_typeof(v) = 'string' THEN extract(epoch FROM (v #>> '{}')::timestamptz)
		ELSE NULL END
$$;
COMMENT ON FUNCTION @extschema@._version_of(jsonb) IS
	'A provider version as a number: numbers, numeric strings, or timestamps as epoch seconds.';

CREATE FUNCTION @extschema@._time_of(v jsonb) RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT CASE
		WHEN jsonb_typeof(v) = 'number' THEN to_timestamp((v #>> '{}')::double precision)
		WHEN jsonb_typeof(v) = 'string' AND (v #>> '{}') ~ '^[0-9]+$' THEN to_timestamp((v #>> '{}')::double precision)
		WHEN jsonb_typeof(v) = 'string' THEN (v #>> '{}')::timestamptz
		ELSE NULL END
$$;
COMMENT ON FUNCTION @extschema@._time_of(jsonb) IS 'A provider time: epoch seconds or an ISO-8601 string.';

/*
 * Classify one event: find the most specific route and evaluate its paths.
 * Called by intake() inside a subtransaction, so any error here (a version
 * that is not a number, say) quarantines the event instead of failing.
 */
CREATE FUNCTION @extschema@._classify(p_source_id integer, p_kind text, p_event_type text, p_payload jsonb,
	OUT route_id integer, OUT route_version integer, OUT strategy text, OUT object_type text,
	OUT object_id text, OUT version numeric, OUT provider_time timestamptz, OUT status_value text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
	r webhook_inbox.routes;
BEGIN
	SELECT * INTO r FROM webhook_inbox.routes x
	 WHERE (x.source_id = p_source_id OR x.source_kind = p_kind)
	   AND p_event_type LIKE webhook_inbox._pattern_like(x.event_type)
	 ORDER BY (x.source_id IS NOT NULL) DESC, x.priority DESC, length(x.event_type) DESC, x.id
	 LIMIT 1;
	IF NOT FOUND THEN
		RETURN;
	END IF;
	route_id := r.id;
	route_version := r.version;
	strategy := r.strategy;
	IF r.class = 'ignore' THEN
		RETURN;
	END IF;
	object_type := coalesce(webhook_inbox._scalar_text(jsonb_path_query_first(p_payload, r.object_type_path)),
							r.object_type);
	object_id := webhook_inbox._scalar_text(jsonb_path_query_first(p_payload, r.object_id_path));
	IF r.version_path IS NOT NULL THEN
		version := webhook_inbox._version_of(jsonb_path_query_first(p_payload, r.version_path));
	END IF;
	IF r.time_path IS NOT NULL THEN
		provider_time := webhook_inbox._time_of(jsonb_path_query_first(p_payload, r.time_path));
	END IF;
	IF r.status_path IS NOT NULL THEN
		status_value := webhook_inbox._scalar_text(jsonb_path_query_first(p_payload, r.status_path));
	END IF;
	IF r.tombstone THEN
		status_value := coalesce(status_value, 'deleted');
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@._classify(integer, text, text, jsonb) IS
	'Finds the route of an event and extracts object type, id, version, time and status.';

CREATE FUNCTION @extschema@._routes_bump() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF ROW(NEW.*) IS DISTINCT FROM ROW(OLD.*) THEN
		NEW.version := OLD.version + 1;
	END IF;
	RETURN NEW;
END
$$;
COMMENT ON FUNCTION @extschema@._routes_bump() IS 'Bumps a route''s version when it changes.';

---------------------------------------------------------------------------
-- Intake (C)
---------------------------------------------------------------------------

CREATE FUNCTION @extschema@.intake(source text, headers text[], body bytea) RETURNS text
AS 'MODULE_PATHNAME', 'wi_intake'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.intake(text, text[], bytea) IS
	'The receiver''s only entry: records a verified delivery. headers is {name, value, name, value, ...}. Returns new, duplicate or quarantined.';

---------------------------------------------------------------------------
-- Claims (C) and their completion
---------------------------------------------------------------------------

CREATE FUNCTION @extschema@.claim(worker text, max_objects integer DEFAULT 10,
	lease interval DEFAULT '30 seconds', fetch_delay interval DEFAULT NULL)
RETURNS TABLE (claim_token bigint, source text, source_id integer, object_type text, object_id text,
			   event_ids bigint[], strategy text, expires_at timestamptz)
AS 'MODULE_PATHNAME', 'wi_claim'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.claim(text, integer, interval, interval) IS
	'Claims up to max_objects objects with pending events, all of an object''s events in one claim, under a lease with a fresh fencing token. Fetch-strategy events wait fetch_delay (default webhook_inbox.fetch_delay) so a burst costs one fetch.';

CREATE FUNCTION @extschema@._lease_for(p_token bigint) RETURNS webhook_inbox.object_leases
LANGUAGE plpgsql AS $$
DECLARE
	l webhook_inbox.object_leases;
BEGIN
	IF p_token IS NULL THEN
		RAISE EXCEPTION 'claim token must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	SELECT * INTO l FROM webhook_inbox.object_leases WHERE token = p_token FOR UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'claim token % is no longer current', p_token
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = 'The claim was completed, or its lease expired and another worker took the object over.',
				  HINT = 'Drop this claim''s work; the current claim holder will process the object.';
	END IF;
	RETURN l;
END
$$;
COMMENT ON FUNCTION @extschema@._lease_for(bigint) IS 'Locks the lease of a current claim token, or raises.';

CREATE FUNCTION @extschema@._release(l webhook_inbox.object_leases) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	/* plpgsql, not sql: its plan is cached across the worker's many calls */
	DELETE FROM webhook_inbox.object_leases x
	 WHERE x.token = l.token
	   AND NOT EXISTS (SELECT 1 FROM webhook_inbox.inbox i
						WHERE i.claim_token = l.token AND i.status = 'processing');
END
$$;
COMMENT ON FUNCTION @extschema@._release(webhook_inbox.object_leases) IS
	'Ends a claim once none of its events is still processing.';

CREATE FUNCTION @extschema@.complete(claim_token bigint, event_ids bigint[] DEFAULT NULL,
	outcome text DEFAULT 'done', reason text DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	l webhook_inbox.object_leases;
	n integer;
BEGIN
	IF outcome IS NULL OR outcome NOT IN ('done', 'ignored') THEN
		RAISE EXCEPTION 'invalid outcome "%"', outcome
			USING ERRCODE = 'invalid_parameter_value', HINT = 'Use done or ignored.';
	END IF;
	l := webhook_inbox._lease_for(claim_token);
	UPDATE webhook_inbox.inbox i
	   SET status = outcome, reason = complete.reason, processed_at = now(), updated_at = now(),
		   decided_route = i.route_id, decided_route_version = i.route_version
	 WHERE i.claim_token = l.token AND i.status = 'processing'
	   AND (event_ids IS NULL OR i.id = ANY (event_ids));
	GET DIAGNOSTICS n = ROW_COUNT;
	PERFORM webhook_inbox._release(l);
	RETURN n;
END
$$;
COMMENT ON FUNCTION @extschema@.complete(bigint, bigint[], text, text) IS
	'Marks the claim''s events (all, or those listed) done or ignored; ends the claim when none is left. Refused for a token that is no longer current.';

CREATE FUNCTION @extschema@.retry(claim_token bigint, error text, delay interval DEFAULT NULL,
	max_attempts integer DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	l webhook_inbox.object_leases;
	limit_attempts integer;
	result text := 'retry';
	n integer;
BEGIN
	IF delay IS NOT NULL AND delay < '0 seconds' THEN
		RAISE EXCEPTION 'retry delay must not be negative' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	limit_attempts := coalesce(max_attempts,
							   nullif(current_setting('webhook_inbox.max_attempts', true), '')::integer, 8);
	IF limit_attempts < 1 THEN
		RAISE EXCEPTION 'max_attempts must be at least 1' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	l := webhook_inbox._lease_for(claim_token);
	UPDATE webhook_inbox.inbox i
	   SET attempts = i.attempts + 1,
		   status = CASE WHEN i.attempts + 1 >= limit_attempts THEN 'quarantined' ELSE 'retry' END,
		   reason = CASE WHEN i.attempts + 1 >= limit_attempts
						 THEN 'max_attempts: ' || coalesce(error, 'unknown error')
						 ELSE error END,
		   next_attempt_at = now() + coalesce(delay,
				/* exponential backoff with up to 25% jitter, capped at one hour */
				least(interval '1 hour', interval '1 second' * power(2, least(i.attempts, 12)))
				* (1 + random() * 0.25)),
		   updated_at = now()
	 WHERE i.claim_token = l.token AND i.status = 'processing';
	GET DIAGNOSTICS n = ROW_COUNT;
	IF EXISTS (SELECT 1 FROM webhook_inbox.inbox i WHERE i.claim_token = l.token AND i.status = 'quarantined'
			   AND i.reason LIKE 'max\_attempts:%' AND i.updated_at = now()) THEN
		result := 'quarantined';
	END IF;
	PERFORM webhook_inbox._release(l);
	RETURN result;
END
$$;
COMMENT ON FUNCTION @extschema@.retry(bigint, text, interval, integer) IS
	'Puts the claim''s events back for a later attempt (after delay, or exponential backoff with jitter); quarantines them after max_attempts (default webhook_inbox.max_attempts). Returns retry or quarantined.';

CREATE FUNCTION @extschema@.quarantine(claim_token bigint, reason text, event_ids bigint[] DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	l webhook_inbox.object_leases;
	n integer;
BEGIN
	IF reason IS NULL OR reason = '' THEN
		RAISE EXCEPTION 'a quarantine needs a reason' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	l := webhook_inbox._lease_for(claim_token);
	UPDATE webhook_inbox.inbox i
	   SET status = 'quarantined', reason = quarantine.reason, updated_at = now(),
		   decided_route = i.route_id, decided_route_version = i.route_version
	 WHERE i.claim_token = l.token AND i.status = 'processing'
	   AND (event_ids IS NULL OR i.id = ANY (event_ids));
	GET DIAGNOSTICS n = ROW_COUNT;
	PERFORM webhook_inbox._release(l);
	RETURN n;
END
$$;
COMMENT ON FUNCTION @extschema@.quarantine(bigint, text, bigint[]) IS
	'Sets the claim''s events (all, or those listed) aside for a person, with a reason. Refused for a token that is no longer current.';

---------------------------------------------------------------------------
-- Mirror: version guard (C), machines (C), occurrences
---------------------------------------------------------------------------

CREATE FUNCTION @extschema@.upsert_object(source text, object_type text, object_id text,
	version numeric, status text, state jsonb, claim_token bigint DEFAULT NULL,
	deleted boolean DEFAULT false, cause text DEFAULT NULL, event_id bigint DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'wi_upsert_object'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.upsert_object(text, text, text, numeric, text, jsonb, bigint, boolean, text, bigint) IS
	'Saves an object only if its version is strictly newer (NULL version: a fetched current state). Returns applied, duplicate, stale, tie or fenced.';

CREATE FUNCTION @extschema@.version_guard() RETURNS trigger
AS 'MODULE_PATHNAME', 'wi_version_guard'
LANGUAGE C;
COMMENT ON FUNCTION @extschema@.version_guard() IS
	'BEFORE UPDATE row trigger: skips an update whose version column (argument, default "version") is not strictly newer.';

CREATE FUNCTION @extschema@.transition_allowed(machine text, from_state text, to_state text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'wi_transition_allowed'
LANGUAGE C STABLE;
COMMENT ON FUNCTION @extschema@.transition_allowed(text, text, text) IS
	'True iff to_state is reachable from from_state along the machine''s edges.';

CREATE FUNCTION @extschema@._machines_changed() RETURNS trigger
AS 'MODULE_PATHNAME', 'wi_machines_changed'
LANGUAGE C;
COMMENT ON FUNCTION @extschema@._machines_changed() IS
	'Invalidates every backend''s reachability cache when machines change.';
CREATE TRIGGER machines_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
	ON @extschema@.machines FOR EACH STATEMENT EXECUTE FUNCTION @extschema@._machines_changed();

CREATE FUNCTION @extschema@._machines_acyclic() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
	cyc record;
BEGIN
	WITH RECURSIVE reach(machine, start, state) AS (
		SELECT m.machine, m.from_state, m.to_state FROM webhook_inbox.machines m
		UNION
		SELECT r.machine, r.start, m.to_state
		  FROM reach r JOIN webhook_inbox.machines m ON m.machine = r.machine AND m.from_state = r.state
	)
	SELECT machine, start INTO cyc FROM reach WHERE start = state LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION 'edge would create a cycle in machine "%"', cyc.machine
			USING ERRCODE = 'check_violation',
				  DETAIL = format('State "%s" would be reachable from itself.', cyc.start),
				  HINT = 'Machines must be acyclic so that a backward event can be recognised.';
	END IF;
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION @extschema@._machines_acyclic() IS 'Refuses edges that make a machine cyclic.';
CREATE TRIGGER machines_acyclic AFTER INSERT OR UPDATE ON @extschema@.machines
	FOR EACH STATEMENT EXECUTE FUNCTION @extschema@._machines_acyclic();

CREATE FUNCTION @extschema@._source_id(source_name text) RETURNS integer
LANGUAGE plpgsql STABLE AS $$
DECLARE
	sid integer;
BEGIN
	SELECT id INTO sid FROM webhook_inbox.sources WHERE name = source_name;
	IF sid IS NULL THEN
		RAISE EXCEPTION 'source "%" does not exist', source_name
			USING ERRCODE = 'undefined_object', HINT = 'Create it with create_source().';
	END IF;
	RETURN sid;
END
$$;
COMMENT ON FUNCTION @extschema@._source_id(text) IS 'The id of a source by name, or raises.';

CREATE FUNCTION @extschema@.apply_transition(source text, object_type text, object_id text,
	machine text, new_status text, event bigint DEFAULT NULL, claim_token bigint DEFAULT NULL,
	state jsonb DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	sid integer;
	o webhook_inbox.objects;
	cur text;
	cause_text text := coalesce('event ' || event, 'call');
BEGIN
	IF object_type IS NULL OR object_id IS NULL OR machine IS NULL OR new_status IS NULL
	   OR object_id = '' OR new_status = '' THEN
		RAISE EXCEPTION 'object_type, object_id, machine and new_status must not be empty'
			USING ERRCODE = 'null_value_not_allowed';
	END IF;
	sid := webhook_inbox._source_id(source);
	IF NOT EXISTS (SELECT 1 FROM webhook_inbox.machines m WHERE m.machine = apply_transition.machine) THEN
		RAISE EXCEPTION 'machine "%" does not exist', machine
			USING ERRCODE = 'undefined_object',
				  HINT = 'Insert its edges into webhook_inbox.machines.';
	END IF;
	INSERT INTO webhook_inbox.objects (source_id, object_type, object_id, status)
	VALUES (sid, apply_transition.object_type, apply_transition.object_id, 'unknown')
	ON CONFLICT DO NOTHING;
	SELECT * INTO o FROM webhook_inbox.objects x
	 WHERE x.source_id = sid AND x.object_type = apply_transition.object_type
	   AND x.object_id = apply_transition.object_id
	   FOR UPDATE;
	IF claim_token IS NOT NULL AND (o.fence_token > claim_token OR EXISTS (
			SELECT 1 FROM webhook_inbox.object_leases l
			 WHERE l.source_id = sid AND l.object_type = apply_transition.object_type
			   AND l.object_id = apply_transition.object_id AND l.token <> claim_token)) THEN
		RETURN 'fenced';
	END IF;
	cur := coalesce(o.status, 'unknown');
	IF cur = new_status THEN
		RETURN 'duplicate';
	END IF;
	IF NOT webhook_inbox.transition_allowed(machine, cur, new_status) THEN
		INSERT INTO webhook_inbox.transitions (source_id, object_type, object_id, machine, from_status,
											   to_status, applied, reason, cause, event_id)
		VALUES (sid, apply_transition.object_type, apply_transition.object_id, machine, cur, new_status,
				false, format('backward: %s is not reachable from %s', new_status, cur), cause_text, event);
		RETURN 'backward';
	END IF;
	UPDATE webhook_inbox.objects x
	   SET status = new_status, state = coalesce(apply_transition.state, x.state), last_event_id = event,
		   fence_token = greatest(x.fence_token, claim_token), deleted = false, updated_at = now()
	 WHERE x.source_id = sid AND x.object_type = apply_transition.object_type
	   AND x.object_id = apply_transition.object_id;
	INSERT INTO webhook_inbox.transitions (source_id, object_type, object_id, machine, from_status,
										   to_status, applied, cause, event_id)
	VALUES (sid, apply_transition.object_type, apply_transition.object_id, machine, cur, new_status,
			true, cause_text, event);
	RETURN 'applied';
END
$$;
COMMENT ON FUNCTION @extschema@.apply_transition(text, text, text, text, text, bigint, bigint, jsonb) IS
	'Applies a legal forward transition of a state machine; returns applied, duplicate, backward (recorded, never retried) or fenced.';

CREATE FUNCTION @extschema@.record_occurrence(source text, kind text, occurrence_id text,
	payload jsonb DEFAULT NULL, event bigint DEFAULT NULL, amount bigint DEFAULT NULL,
	currency text DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	sid integer;
	n integer;
BEGIN
	IF kind IS NULL OR kind = '' OR occurrence_id IS NULL OR occurrence_id = '' THEN
		RAISE EXCEPTION 'kind and occurrence_id must not be empty'
			USING ERRCODE = 'null_value_not_allowed';
	END IF;
	sid := webhook_inbox._source_id(source);
	INSERT INTO webhook_inbox.occurrences (source_id, kind, occurrence_id, amount, currency, payload,
										   first_event_id)
	VALUES (sid, kind, occurrence_id,
			coalesce(amount, CASE WHEN jsonb_typeof(payload -> 'amount') = 'number'
								  THEN (payload ->> 'amount')::numeric::bigint END),
			coalesce(currency, payload ->> 'currency'), payload, event)
	ON CONFLICT ON CONSTRAINT occurrences_key DO NOTHING;
	GET DIAGNOSTICS n = ROW_COUNT;
	RETURN n = 1;
END
$$;
COMMENT ON FUNCTION @extschema@.record_occurrence(text, text, text, jsonb, bigint, bigint, text) IS
	'Records a fact once, unique on its own id; returns true the first time only.';

---------------------------------------------------------------------------
-- Replay and retention
---------------------------------------------------------------------------

CREATE FUNCTION @extschema@.requeue(event_ids bigint[], note text DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	e record;
	n integer := 0;
BEGIN
	IF event_ids IS NULL OR cardinality(event_ids) = 0 THEN
		RAISE EXCEPTION 'requeue needs at least one event id' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	FOR e IN SELECT * FROM webhook_inbox.inbox WHERE id = ANY (event_ids) ORDER BY id FOR UPDATE LOOP
		IF e.status IN ('pending', 'processing') THEN
			RAISE EXCEPTION 'event % is % and cannot be requeued', e.id, e.status
				USING ERRCODE = 'object_not_in_prerequisite_state';
		END IF;
		IF e.object_id IS NULL OR e.strategy IS NULL THEN
			RAISE EXCEPTION 'event % has no route yet and cannot be requeued', e.id
				USING ERRCODE = 'object_not_in_prerequisite_state',
					  HINT = 'Add a route for its type, then call reclassify().';
		END IF;
		INSERT INTO webhook_inbox.requeues (event_id, previous_status, previous_reason, previous_route,
											previous_route_version, note)
		VALUES (e.id, e.status, e.reason, e.decided_route, e.decided_route_version, note);
		UPDATE webhook_inbox.inbox
		   SET status = 'pending', reason = NULL, attempts = 0, next_attempt_at = now(),
			   claim_token = NULL, updated_at = now()
		 WHERE id = e.id;
		n := n + 1;
	END LOOP;
	IF n <> cardinality(event_ids) THEN
		RAISE EXCEPTION '% of % events do not exist', cardinality(event_ids) - n, cardinality(event_ids)
			USING ERRCODE = 'undefined_object';
	END IF;
	RETURN n;
END
$$;
COMMENT ON FUNCTION @extschema@.requeue(bigint[], text) IS
	'Controlled replay of done, ignored, retrying or quarantined events, audited in requeues.';

CREATE FUNCTION @extschema@.reclassify(event_ids bigint[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	e record;
	c record;
	n integer := 0;
BEGIN
	IF event_ids IS NULL OR cardinality(event_ids) = 0 THEN
		RAISE EXCEPTION 'reclassify needs at least one event id' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	FOR e IN SELECT i.*, s.kind FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id
			  WHERE i.id = ANY (event_ids) ORDER BY i.id FOR UPDATE OF i LOOP
		IF e.status NOT IN ('ignored', 'quarantined') THEN
			RAISE EXCEPTION 'event % is % and cannot be reclassified', e.id, e.status
				USING ERRCODE = 'object_not_in_prerequisite_state',
					  HINT = 'Only ignored and quarantined events are reclassified; use requeue() for done ones.';
		END IF;
		IF e.payload IS NULL OR e.event_type IS NULL THEN
			RAISE EXCEPTION 'event % has no readable payload', e.id
				USING ERRCODE = 'object_not_in_prerequisite_state';
		END IF;
		c := webhook_inbox._classify(e.source_id, e.kind, e.event_type, e.payload);
		IF c.route_id IS NULL OR c.strategy = 'ignore' OR c.object_id IS NULL OR c.object_type IS NULL THEN
			CONTINUE;
		END IF;
		INSERT INTO webhook_inbox.requeues (event_id, previous_status, previous_reason, previous_route,
											previous_route_version, note)
		VALUES (e.id, e.status, e.reason, e.route_id, e.route_version, 'reclassify');
		UPDATE webhook_inbox.inbox
		   SET status = 'pending', reason = NULL, attempts = 0, next_attempt_at = now(), claim_token = NULL,
			   route_id = c.route_id, route_version = c.route_version, strategy = c.strategy,
			   object_type = c.object_type, object_id = c.object_id, provider_version = c.version,
			   provider_time = c.provider_time, status_value = c.status_value, updated_at = now()
		 WHERE id = e.id;
		n := n + 1;
	END LOOP;
	RETURN n;
END
$$;
COMMENT ON FUNCTION @extschema@.reclassify(bigint[]) IS
	'Runs ignored or quarantined events through the routes again (after a route was added or fixed); those that now have a route become pending. Audited in requeues. Returns how many.';

CREATE FUNCTION @extschema@.prune(older_than interval, strip_payloads_older_than interval DEFAULT NULL,
	OUT inbox_deleted bigint, OUT deliveries_deleted bigint, OUT payloads_stripped bigint)
LANGUAGE plpgsql AS $$
BEGIN
	IF older_than IS NULL OR older_than < '0 seconds' THEN
		RAISE EXCEPTION 'older_than must be a non-negative interval' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF strip_payloads_older_than IS NOT NULL AND strip_payloads_older_than < '0 seconds' THEN
		RAISE EXCEPTION 'strip_payloads_older_than must be a non-negative interval'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	DELETE FROM webhook_inbox.inbox
	 WHERE status IN ('done', 'ignored') AND coalesce(processed_at, updated_at) < now() - older_than;
	GET DIAGNOSTICS inbox_deleted = ROW_COUNT;
	DELETE FROM webhook_inbox.deliveries WHERE received_at < now() - older_than;
	GET DIAGNOSTICS deliveries_deleted = ROW_COUNT;
	payloads_stripped := 0;
	IF strip_payloads_older_than IS NOT NULL THEN
		/* identities stay: source, event id, object, outcome; the bodies go */
		UPDATE webhook_inbox.inbox SET payload = NULL, raw_body = NULL
		 WHERE status IN ('done', 'ignored') AND (payload IS NOT NULL OR raw_body IS NOT NULL)
		   AND coalesce(processed_at, updated_at) < now() - strip_payloads_older_than;
		GET DIAGNOSTICS payloads_stripped = ROW_COUNT;
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@.prune(interval, interval) IS
	'Retention: deletes old done and ignored events and old deliveries; can strip payloads earlier while keeping identities.';

---------------------------------------------------------------------------
-- Views for operators
---------------------------------------------------------------------------

CREATE VIEW @extschema@.inbox_health AS
SELECT count(*) FILTER (WHERE status = 'pending') AS pending,
	   coalesce(now() - min(received_at) FILTER (WHERE status = 'pending'), '0 seconds') AS oldest_pending_age,
	   count(*) FILTER (WHERE status = 'processing') AS processing,
	   count(*) FILTER (WHERE status = 'retry') AS retrying,
	   count(*) FILTER (WHERE status = 'quarantined') AS quarantined,
	   coalesce((SELECT jsonb_object_agg(r, c) FROM (
			SELECT coalesce(split_part(reason, ':', 1), 'unknown') AS r, count(*) AS c
			  FROM webhook_inbox.inbox WHERE status = 'quarantined' GROUP BY 1) q), '{}') AS quarantined_by_reason
  FROM webhook_inbox.inbox
 WHERE status IN ('pending', 'processing', 'retry', 'quarantined');
COMMENT ON VIEW @extschema@.inbox_health IS
	'What to alert on: pending count, oldest pending age, retrying, and quarantined by reason.';


---------------------------------------------------------------------------
-- Background worker: the SQL half of processing a claim, saving fetched
-- state, reconciliation sweeps, and the worker's counters.
--
-- The worker (extension/worker.c) drives these functions one object per
-- short transaction; every save goes through upsert_object() or
-- apply_transition() under the object's claim token, so a worker whose
-- lease was taken over is fenced, never last-write-wins.
---------------------------------------------------------------------------

CREATE TABLE @extschema@.sweep_checkpoints (
	source_id		integer NOT NULL REFERENCES @extschema@.sources (id),
	object_type		text NOT NULL,
	checkpoint		timestamptz,
	last_run_id		bigint,
	updated_at		timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (source_id, object_type)
);
COMMENT ON TABLE @extschema@.sweep_checkpoints IS
	'Per (source, object type): the start time of the last complete sweep; the next one lists changes since it minus webhook_inbox.sweep_overlap.';

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
		CONSTRAINT sweep_runs_status_check CHECK (status IN ('running', 'complete', 'failed')),
	error			text
);
CREATE INDEX sweep_runs_target_idx ON @extschema@.sweep_runs (source_id, object_type, started_at DESC);
COMMENT ON TABLE @extschema@.sweep_runs IS
	'One row per reconciliation pass: what was listed, how many differed from the mirror, how many were repaired or skipped (object under a live claim), errors, and whether the pass completed (only a complete pass moves the checkpoint).';

CREATE TABLE @extschema@.repairs (
	id				bigserial PRIMARY KEY,
	run_id			bigint NOT NULL REFERENCES @extschema@.sweep_runs (id),
	source_id		integer NOT NULL REFERENCES @extschema@.sources (id),
	object_type		text NOT NULL,
	object_id		text NOT NULL,
	before			jsonb,
	after			jsonb,
	outcome			text NOT NULL,
	at				timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX repairs_run_idx ON @extschema@.repairs (run_id);
COMMENT ON TABLE @extschema@.repairs IS
	'Each difference a sweep repaired: the mirror before and after (status, version, deleted), and the save''s outcome.';

---------------------------------------------------------------------------
-- Processing a claim
---------------------------------------------------------------------------

CREATE FUNCTION @extschema@._work_claim(p_token bigint,
	OUT saved integer, OUT duplicates integer, OUT stale integer, OUT ties integer,
	OUT backward integer, OUT occurrences integer, OUT ignored integer, OUT quarantined integer,
	OUT unorderable integer, OUT fenced boolean, OUT need_fetch boolean)
LANGUAGE plpgsql AS $$
DECLARE
	l webhook_inbox.object_leases;
	s webhook_inbox.sources;
	e record;
	res text;
	amt bigint;
	cur text;
	n integer;
	/* outcomes, written in one statement at the end */
	fin_ids bigint[] := '{}';
	fin_status text[] := '{}';
	fin_reason text[] := '{}';
BEGIN
	saved := 0; duplicates := 0; stale := 0; ties := 0; backward := 0; occurrences := 0;
	ignored := 0; quarantined := 0; unorderable := 0; fenced := false; need_fetch := false;
	SELECT * INTO l FROM webhook_inbox.object_leases x WHERE x.token = p_token FOR UPDATE;
	IF NOT FOUND THEN
		fenced := true;
		RETURN;
	END IF;
	SELECT * INTO s FROM webhook_inbox.sources x WHERE x.id = l.source_id;

	/*
	 * Provider order first (version, then provider time), arrival order last:
	 * a coalesced burst is applied the way it happened, whatever order the
	 * network delivered it in.
	 */
	FOR e IN SELECT i.id, i.strategy, i.object_type, i.object_id, i.provider_version, i.status_value,
					i.payload, r.machine, coalesce(r.tombstone, false) AS tombstone,
					r.amount_path, r.currency_path
			   FROM webhook_inbox.inbox i LEFT JOIN webhook_inbox.routes r ON r.id = i.route_id
			  WHERE i.claim_token = p_token AND i.status = 'processing'
			  ORDER BY i.provider_version NULLS LAST, i.provider_time NULLS LAST, i.id
	LOOP
		IF e.strategy = 'fetch' THEN
			need_fetch := true;
		ELSIF e.strategy = 'ignore' THEN
			fin_ids := fin_ids || e.id; fin_status := fin_status || 'ignored'::text;
			fin_reason := fin_reason || 'route: ignore'::text;
			ignored := ignored + 1;
		ELSIF e.strategy = 'unordered' THEN
			fin_ids := fin_ids || e.id; fin_status := fin_status || 'quarantined'::text;
			fin_reason := fin_reason || 'unorderable: the route has no version, no read API and no state machine'::text;
			quarantined := quarantined + 1;
			unorderable := unorderable + 1;
		ELSIF e.strategy = 'occurrence' THEN
			amt := NULL;
			cur := NULL;
			IF e.amount_path IS NOT NULL THEN
				amt := webhook_inbox._scalar_text(jsonb_path_query_first(e.payload, e.amount_path))::numeric::bigint;
			END IF;
			IF e.currency_path IS NOT NULL THEN
				cur := webhook_inbox._scalar_text(jsonb_path_query_first(e.payload, e.currency_path));
			END IF;
			/* record_occurrence(), with the source already known */
			INSERT INTO webhook_inbox.occurrences (source_id, kind, occurrence_id, amount, currency, payload,
												   first_event_id)
			VALUES (l.source_id, e.object_type, e.object_id,
					coalesce(amt, CASE WHEN jsonb_typeof(coalesce(e.payload #> '{data,object}', e.payload) -> 'amount') = 'number'
									   THEN (coalesce(e.payload #> '{data,object}', e.payload) ->> 'amount')::numeric::bigint END),
					coalesce(cur, coalesce(e.payload #> '{data,object}', e.payload) ->> 'currency'),
					coalesce(e.payload #> '{data,object}', e.payload), e.id)
			ON CONFLICT ON CONSTRAINT occurrences_key DO NOTHING;
			GET DIAGNOSTICS n = ROW_COUNT;
			fin_ids := fin_ids || e.id; fin_status := fin_status || 'done'::text;
			IF n = 1 THEN
				occurrences := occurrences + 1;
				fin_reason := fin_reason || NULL::text;
			ELSE
				duplicates := duplicates + 1;
				fin_reason := fin_reason || 'duplicate: occurrence already recorded'::text;
			END IF;
		ELSIF e.strategy = 'machine' THEN
			IF e.machine IS NULL OR e.status_value IS NULL THEN
				fin_ids := fin_ids || e.id; fin_status := fin_status || 'quarantined'::text;
				fin_reason := fin_reason || 'missing_status: the event carries no status for its machine'::text;
				quarantined := quarantined + 1;
				CONTINUE;
			END IF;
			res := webhook_inbox.apply_transition(s.name, e.object_type, e.object_id, e.machine, e.status_value,
				e.id, p_token, coalesce(e.payload #> '{data,object}', e.payload));
			IF res = 'fenced' THEN
				fenced := true;
				RETURN;
			ELSIF res = 'backward' THEN
				backward := backward + 1;
				fin_ids := fin_ids || e.id; fin_status := fin_status || 'ignored'::text;
				fin_reason := fin_reason || format('backward: %s is not reachable from the current status', e.status_value);
			ELSE
				IF res = 'applied' THEN saved := saved + 1; ELSE duplicates := duplicates + 1; END IF;
				fin_ids := fin_ids || e.id; fin_status := fin_status || 'done'::text;
				fin_reason := fin_reason || NULL::text;
			END IF;
		ELSIF e.strategy = 'version' THEN
			res := webhook_inbox.upsert_object(s.name, e.object_type, e.object_id, e.provider_version,
				CASE WHEN e.tombstone THEN NULL ELSE e.status_value END,
				CASE WHEN e.tombstone THEN NULL ELSE e.payload END,
				p_token, e.tombstone, 'event ' || e.id, e.id);
			IF res = 'fenced' THEN
				fenced := true;
				RETURN;
			ELSIF res = 'tie' THEN
				ties := ties + 1;
				IF s.api_base IS NOT NULL THEN
					/* equal version, different content: only the present can tell */
					need_fetch := true;
				ELSE
					fin_ids := fin_ids || e.id; fin_status := fin_status || 'quarantined'::text;
					fin_reason := fin_reason || 'ambiguous_tie: equal version with different content and no read API'::text;
					quarantined := quarantined + 1;
				END IF;
			ELSIF res = 'stale' THEN
				stale := stale + 1;
				fin_ids := fin_ids || e.id; fin_status := fin_status || 'ignored'::text;
				fin_reason := fin_reason || 'stale: a newer version is stored'::text;
			ELSE
				IF res = 'applied' THEN saved := saved + 1; ELSE duplicates := duplicates + 1; END IF;
				fin_ids := fin_ids || e.id; fin_status := fin_status || 'done'::text;
				fin_reason := fin_reason || NULL::text;
			END IF;
		ELSE
			fin_ids := fin_ids || e.id; fin_status := fin_status || 'quarantined'::text;
			fin_reason := fin_reason || format('no_strategy: unknown strategy %s', e.strategy);
			quarantined := quarantined + 1;
		END IF;
	END LOOP;

	/*
	 * What complete() and quarantine() do, for all the claim's decided
	 * events in one statement: the lease is ours (locked above).
	 */
	IF cardinality(fin_ids) > 0 THEN
		UPDATE webhook_inbox.inbox i
		   SET status = d.st, reason = d.re, updated_at = now(),
			   processed_at = CASE WHEN d.st = 'quarantined' THEN i.processed_at ELSE now() END,
			   decided_route = i.route_id, decided_route_version = i.route_version
		  FROM unnest(fin_ids, fin_status, fin_reason) AS d(id, st, re)
		 WHERE i.id = d.id AND i.claim_token = p_token AND i.status = 'processing';
		PERFORM webhook_inbox._release(l);
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@._work_claim(bigint) IS
	'Processes a claim''s events that need no provider request (version, machine, occurrence, unordered, ignore) in provider order; reports what happened and whether a fetch is needed (fetch strategy, or a tie on a source with a read API).';

CREATE FUNCTION @extschema@._save_present(p_token bigint, p_object jsonb, p_deleted boolean,
	p_status_path jsonpath, p_version_path jsonpath, p_cause text)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	l webhook_inbox.object_leases;
	s webhook_inbox.sources;
	st text;
	ver numeric;
	res text;
	old_status text;
BEGIN
	SELECT * INTO l FROM webhook_inbox.object_leases x WHERE x.token = p_token FOR UPDATE;
	IF NOT FOUND THEN
		RETURN 'fenced';
	END IF;
	SELECT * INTO s FROM webhook_inbox.sources x WHERE x.id = l.source_id;
	IF p_deleted OR coalesce(p_object ->> 'deleted', 'false') = 'true' THEN
		res := webhook_inbox.upsert_object(s.name, l.object_type, l.object_id, NULL, NULL, NULL, p_token,
			true, p_cause, NULL);
		RETURN CASE WHEN res = 'applied' THEN 'tombstone' ELSE res END;
	END IF;
	IF p_status_path IS NOT NULL THEN
		st := webhook_inbox._scalar_text(jsonb_path_query_first(p_object, p_status_path));
	END IF;
	IF p_version_path IS NOT NULL THEN
		ver := webhook_inbox._version_of(jsonb_path_query_first(p_object, p_version_path));
	END IF;
	res := webhook_inbox.upsert_object(s.name, l.object_type, l.object_id, ver, st, p_object, p_token,
		false, p_cause, NULL);
	IF res = 'tie' THEN
		/*
		 * The provider's present state at the stored version: it is the
		 * truth the tie rule asked for.  upsert_object() holds the row lock
		 * and has passed the fence check.
		 */
		SELECT o.status INTO old_status FROM webhook_inbox.objects o
		 WHERE o.source_id = l.source_id AND o.object_type = l.object_type AND o.object_id = l.object_id;
		UPDATE webhook_inbox.objects o
		   SET status = coalesce(st, o.status), state = p_object, deleted = false,
			   fence_token = greatest(o.fence_token, p_token), updated_at = now()
		 WHERE o.source_id = l.source_id AND o.object_type = l.object_type AND o.object_id = l.object_id;
		IF st IS NOT NULL AND st IS DISTINCT FROM old_status THEN
			INSERT INTO webhook_inbox.transitions (source_id, object_type, object_id, from_status, to_status,
												   version, cause)
			VALUES (l.source_id, l.object_type, l.object_id, old_status, st, ver, p_cause || ' (tie resolved)');
		END IF;
		res := 'applied';
	END IF;
	RETURN res;
END
$$;
COMMENT ON FUNCTION @extschema@._save_present(bigint, jsonb, boolean, jsonpath, jsonpath, text) IS
	'Saves the provider''s present state of the claim''s object (or its tombstone) under the claim token; a tie at equal version is resolved in favour of the present. Returns applied, duplicate, stale, tombstone or fenced.';

CREATE FUNCTION @extschema@._save_fetched(p_token bigint, p_http integer, p_body text,
	p_unwrap_path jsonpath, p_status_path jsonpath, p_version_path jsonpath,
	p_sent_at timestamptz DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	doc jsonb;
	obj jsonb;
	res text;
BEGIN
	IF NOT EXISTS (SELECT 1 FROM webhook_inbox.object_leases x WHERE x.token = p_token) THEN
		RETURN 'fenced';
	END IF;
	IF p_http IN (404, 410) THEN
		res := webhook_inbox._save_present(p_token, NULL, true, NULL, NULL, format('fetch: http %s', p_http));
	ELSE
		BEGIN
			doc := p_body::jsonb;
		EXCEPTION WHEN others THEN
			doc := NULL;
		END;
		obj := jsonb_path_query_first(doc, coalesce(p_unwrap_path, '$'));
		IF obj IS NULL OR jsonb_typeof(obj) <> 'object' THEN
			res := webhook_inbox.retry(p_token, 'unreadable: the provider''s response is not the expected JSON object');
			RETURN CASE WHEN res = 'quarantined' THEN 'quarantined' ELSE 'retry' END;
		END IF;
		res := webhook_inbox._save_present(p_token, obj, false, p_status_path, p_version_path, 'fetch');
	END IF;
	IF res <> 'fenced' THEN
		/*
		 * Events of the object that arrived while the claim was being
		 * fetched, but before the request left, are covered by the answer:
		 * the provider's present includes what they announced.  The lease
		 * still holds the object, so no one else has them.
		 */
		IF p_sent_at IS NOT NULL THEN
			UPDATE webhook_inbox.inbox i
			   SET status = 'done', reason = 'covered by a fetch', processed_at = now(), updated_at = now(),
				   decided_route = i.route_id, decided_route_version = i.route_version
			  FROM webhook_inbox.object_leases l
			 WHERE l.token = p_token AND i.source_id = l.source_id AND i.object_type = l.object_type
			   AND i.object_id = l.object_id AND i.status IN ('pending', 'retry') AND i.strategy = 'fetch'
			   AND i.received_at < p_sent_at;
		END IF;
		PERFORM webhook_inbox.complete(p_token, NULL, 'done', 'fetched: ' || res);
	END IF;
	RETURN res;
END
$$;
COMMENT ON FUNCTION @extschema@._save_fetched(bigint, integer, text, jsonpath, jsonpath, jsonpath, timestamptz) IS
	'Saves one fetched object (200) or its tombstone (404/410) under the claim token and completes every event of the claim, and the object''s fetch events received before the request left: one fetch covers them all.';

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
	UPDATE webhook_inbox.sources s
	   SET flagged = format('the read API answered %s at %s: check api_token', p_http, now()), updated_at = now()
	 WHERE s.id = l.source_id;
	RETURN webhook_inbox.quarantine(p_token, format('auth: the read API refused our credentials (http %s)', p_http));
END
$$;
COMMENT ON FUNCTION @extschema@._auth_refused(bigint, integer) IS
	'A 401/403 from the read API: quarantines the claim''s events and flags the source for a person.';

CREATE FUNCTION @extschema@._worker_source(p_source_id integer,
	OUT id integer, OUT name text, OUT kind text, OUT api_base text, OUT api_token text,
	OUT fetch_url text, OUT list_url text, OUT auth_header text, OUT auth_format text,
	OUT unwrap_path text, OUT items_path text, OUT status_path text, OUT version_path text,
	OUT types text, OUT repo text)
LANGUAGE sql STABLE AS $$
	SELECT s.id, s.name, s.kind, rtrim(s.api_base, '/'), s.api_token,
		   s.settings ->> 'fetch_url', s.settings ->> 'list_url', s.settings ->> 'auth_header',
		   s.settings ->> 'auth_format', s.settings ->> 'unwrap_path', s.settings ->> 'items_path',
		   s.settings ->> 'status_path', s.settings ->> 'version_path',
		   CASE WHEN jsonb_typeof(s.settings -> 'types') = 'array'
				THEN (SELECT string_agg(t, ',') FROM jsonb_array_elements_text(s.settings -> 'types') t) END,
		   s.settings ->> 'repo'
	  FROM webhook_inbox.sources s WHERE s.id = p_source_id
$$;
COMMENT ON FUNCTION @extschema@._worker_source(integer) IS
	'What the worker''s provider adapters need of a source, settings read into columns (the C code reads no JSON).';

---------------------------------------------------------------------------
-- Sweeps
---------------------------------------------------------------------------

CREATE FUNCTION @extschema@._sweep_targets(p_interval interval)
RETURNS TABLE (source_id integer, object_type text)
LANGUAGE sql STABLE AS $$
	/* every (enabled source with a read API, routed object type) whose last run is older than the interval */
	SELECT DISTINCT s.id, r.object_type
	  FROM webhook_inbox.sources s
	  JOIN webhook_inbox.routes r ON (r.source_id = s.id OR r.source_kind = s.kind)
	 WHERE s.enabled AND s.api_base IS NOT NULL AND s.flagged IS NULL
	   AND r.class IN ('state', 'occurrence') AND r.object_type IS NOT NULL
	   /* only types this source has actually sent: a preset route is no promise of a list API */
	   AND (EXISTS (SELECT 1 FROM webhook_inbox.objects o
					 WHERE o.source_id = s.id AND o.object_type = r.object_type)
			OR EXISTS (SELECT 1 FROM webhook_inbox.occurrences o
						WHERE o.source_id = s.id AND o.kind = r.object_type))
	   AND NOT EXISTS (SELECT 1 FROM webhook_inbox.sweep_runs w
						WHERE w.source_id = s.id AND w.object_type = r.object_type
						  AND w.started_at > now() - p_interval)
	 ORDER BY 1, 2
$$;
COMMENT ON FUNCTION @extschema@._sweep_targets(interval) IS
	'The (source, object type) pairs due for a scheduled sweep.';

CREATE FUNCTION @extschema@._sweep_begin(p_source_id integer, p_object_type text, p_trigger text,
	p_overlap interval, OUT run_id bigint, OUT since_epoch bigint)
LANGUAGE plpgsql AS $$
DECLARE
	cp timestamptz;
BEGIN
	SELECT c.checkpoint INTO cp FROM webhook_inbox.sweep_checkpoints c
	 WHERE c.source_id = p_source_id AND c.object_type = p_object_type;
	INSERT INTO webhook_inbox.sweep_runs (source_id, object_type, trigger, listed_since)
	VALUES (p_source_id, p_object_type, p_trigger, cp - p_overlap)
	RETURNING id INTO run_id;
	since_epoch := coalesce(floor(extract(epoch FROM cp - p_overlap))::bigint, 0);
END
$$;
COMMENT ON FUNCTION @extschema@._sweep_begin(integer, text, text, interval) IS
	'Starts a sweep run; lists from the checkpoint minus the overlap (from the beginning without a checkpoint).';

CREATE FUNCTION @extschema@._sweep_page(p_run_id bigint, p_body text, p_items_path jsonpath,
	p_status_path jsonpath, p_version_path jsonpath, p_occurrence boolean)
RETURNS TABLE (object_id text, item jsonb, deleted boolean, has_more boolean, last_id text)
LANGUAGE plpgsql AS $$
DECLARE
	w webhook_inbox.sweep_runs;
	doc jsonb;
	n integer;
	more boolean;
	last text;
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

	/* what differs from the mirror */
	RETURN QUERY
	WITH items AS (
		SELECT webhook_inbox._scalar_text(it -> 'id') AS id, it AS item,
			   coalesce(it ->> 'deleted', 'false') = 'true' AS deleted,
			   CASE WHEN p_status_path IS NOT NULL
					THEN webhook_inbox._scalar_text(jsonb_path_query_first(it, p_status_path)) END AS st,
			   CASE WHEN p_version_path IS NOT NULL
					THEN webhook_inbox._version_of(jsonb_path_query_first(it, p_version_path)) END AS ver
		  FROM jsonb_path_query(doc, p_items_path) it
		 WHERE jsonb_typeof(it) = 'object')
	SELECT x.id, x.item, x.deleted, more, last
	  FROM items x
	 WHERE x.id IS NOT NULL AND CASE
		WHEN p_occurrence THEN NOT x.deleted AND NOT EXISTS (
			SELECT 1 FROM webhook_inbox.occurrences o
			 WHERE o.source_id = w.source_id AND o.kind = w.object_type AND o.occurrence_id = x.id)
		WHEN x.deleted THEN EXISTS (
			SELECT 1 FROM webhook_inbox.objects o
			 WHERE o.source_id = w.source_id AND o.object_type = w.object_type AND o.object_id = x.id
			   AND NOT o.deleted)
		ELSE NOT EXISTS (
			SELECT 1 FROM webhook_inbox.objects o
			 WHERE o.source_id = w.source_id AND o.object_type = w.object_type AND o.object_id = x.id
			   AND NOT o.deleted AND o.status IS NOT DISTINCT FROM x.st
			   AND (p_version_path IS NULL OR o.version IS NOT DISTINCT FROM x.ver))
		END;
	IF NOT FOUND THEN
		/* one row still carries the paging facts */
		RETURN QUERY SELECT NULL::text, NULL::jsonb, NULL::boolean, more, last;
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@._sweep_page(bigint, text, jsonpath, jsonpath, jsonpath, boolean) IS
	'Reads one page of a list response, counts it into the run, and returns the items that differ from the mirror (rows with a NULL object_id only carry has_more and the last id for paging).';

CREATE FUNCTION @extschema@._sweep_lease(p_source_id integer, p_object_type text, p_object_id text,
	p_holder text, p_lease interval)
RETURNS bigint
LANGUAGE sql AS $$
	/* the same lease claim() takes: a live claim wins, the sweep skips the object */
	INSERT INTO webhook_inbox.object_leases AS l (source_id, object_type, object_id, token, holder, expires_at)
	VALUES (p_source_id, p_object_type, p_object_id, nextval('webhook_inbox.claim_token_seq'), p_holder,
			now() + p_lease)
	ON CONFLICT (source_id, object_type, object_id) DO UPDATE
	   SET token = EXCLUDED.token, holder = EXCLUDED.holder, claimed_at = now(), expires_at = EXCLUDED.expires_at
	 WHERE l.expires_at <= now()
	RETURNING l.token
$$;
COMMENT ON FUNCTION @extschema@._sweep_lease(integer, text, text, text, interval) IS
	'Takes an object''s lease for a sweep repair, with a fresh fencing token; NULL while a claim holds it.';

CREATE FUNCTION @extschema@._sweep_repair(p_run_id bigint, p_token bigint, p_object_id text, p_object jsonb,
	p_deleted boolean, p_status_path jsonpath, p_version_path jsonpath, p_occurrence boolean)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	w webhook_inbox.sweep_runs;
	s webhook_inbox.sources;
	b jsonb;
	a jsonb;
	res text;
BEGIN
	SELECT * INTO w FROM webhook_inbox.sweep_runs x WHERE x.id = p_run_id;
	SELECT * INTO s FROM webhook_inbox.sources x WHERE x.id = w.source_id;
	IF p_occurrence THEN
		IF webhook_inbox.record_occurrence(s.name, w.object_type, p_object_id, p_object, NULL,
				CASE WHEN jsonb_typeof(p_object -> 'amount') = 'number'
					 THEN (p_object ->> 'amount')::numeric::bigint END,
				p_object ->> 'currency') THEN
			res := 'recorded';
		ELSE
			res := 'duplicate';
		END IF;
		b := NULL;
		a := jsonb_build_object('occurrence', p_object_id);
	ELSE
		SELECT jsonb_build_object('status', o.status, 'version', o.version, 'deleted', o.deleted) INTO b
		  FROM webhook_inbox.objects o
		 WHERE o.source_id = w.source_id AND o.object_type = w.object_type AND o.object_id = p_object_id;
		res := webhook_inbox._save_present(p_token, p_object, p_deleted, p_status_path, p_version_path,
			format('sweep %s', p_run_id));
		SELECT jsonb_build_object('status', o.status, 'version', o.version, 'deleted', o.deleted) INTO a
		  FROM webhook_inbox.objects o
		 WHERE o.source_id = w.source_id AND o.object_type = w.object_type AND o.object_id = p_object_id;
	END IF;
	IF p_token IS NOT NULL THEN
		DELETE FROM webhook_inbox.object_leases x WHERE x.token = p_token;
	END IF;
	IF res IN ('applied', 'tombstone', 'recorded') THEN
		INSERT INTO webhook_inbox.repairs (run_id, source_id, object_type, object_id, before, after, outcome)
		VALUES (p_run_id, w.source_id, w.object_type, p_object_id, b, a, res);
		UPDATE webhook_inbox.sweep_runs x SET repaired = x.repaired + 1, differences = x.differences + 1
		 WHERE x.id = p_run_id;
	ELSE
		UPDATE webhook_inbox.sweep_runs x SET differences = x.differences + 1 WHERE x.id = p_run_id;
	END IF;
	RETURN res;
END
$$;
COMMENT ON FUNCTION @extschema@._sweep_repair(bigint, bigint, text, jsonb, boolean, jsonpath, jsonpath, boolean) IS
	'Repairs one difference through the guarded save path under the sweep''s lease (released here), recording the repair with the mirror before and after.';

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

CREATE FUNCTION @extschema@._sweep_finish(p_run_id bigint, p_error text)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	w webhook_inbox.sweep_runs;
BEGIN
	UPDATE webhook_inbox.sweep_runs x
	   SET status = CASE WHEN p_error IS NULL AND x.errors = 0 THEN 'complete' ELSE 'failed' END,
		   error = coalesce(p_error, CASE WHEN x.errors > 0 THEN format('%s repairs failed', x.errors) END),
		   finished_at = clock_timestamp()
	 WHERE x.id = p_run_id
	RETURNING * INTO w;
	IF w.status = 'complete' THEN
		/* only a complete pass moves the checkpoint, to the run's start */
		INSERT INTO webhook_inbox.sweep_checkpoints AS c (source_id, object_type, checkpoint, last_run_id)
		VALUES (w.source_id, w.object_type, w.started_at, w.id)
		ON CONFLICT (source_id, object_type) DO UPDATE
		   SET checkpoint = greatest(c.checkpoint, EXCLUDED.checkpoint), last_run_id = EXCLUDED.last_run_id,
			   updated_at = now();
	END IF;
	RETURN w.status;
END
$$;
COMMENT ON FUNCTION @extschema@._sweep_finish(bigint, text) IS
	'Ends a sweep run: complete (checkpoint moves to the run''s start) or failed (checkpoint stays).';

CREATE FUNCTION @extschema@._sweep_now(source text, object_type text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'wi_sweep_now'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@._sweep_now(text, text) IS
	'Runs one sweep in this session; returns the sweep_runs id.';

CREATE FUNCTION @extschema@.sweep_now(source text, object_type text)
RETURNS SETOF @extschema@.sweep_runs
LANGUAGE plpgsql AS $$
DECLARE
	run bigint;
BEGIN
	run := webhook_inbox._sweep_now(source, object_type);
	RETURN QUERY SELECT * FROM webhook_inbox.sweep_runs WHERE id = run;
END
$$;
COMMENT ON FUNCTION @extschema@.sweep_now(text, text) IS
	'Runs one reconciliation sweep of a source''s object type now, synchronously in this session and inside this transaction (its repairs commit with it), and returns its sweep_runs row. Raises if the source has no list API for the type.';

CREATE VIEW @extschema@.sweep_health AS
SELECT s.name AS source, t.object_type, c.checkpoint, r.id AS last_run_id, r.status AS last_status,
	   r.started_at AS last_started_at, r.finished_at - r.started_at AS last_duration,
	   r.listed AS last_listed, r.repaired AS last_repaired, r.skipped AS last_skipped,
	   r.errors AS last_errors, r.error AS last_error,
	   (SELECT count(*) FROM webhook_inbox.sweep_runs x
		 WHERE x.source_id = t.source_id AND x.object_type = t.object_type
		   AND x.status = 'failed' AND x.started_at > now() - interval '1 day') AS failed_last_day,
	   (SELECT coalesce(sum(x.repaired), 0) FROM webhook_inbox.sweep_runs x
		 WHERE x.source_id = t.source_id AND x.object_type = t.object_type
		   AND x.started_at > now() - interval '1 day') AS repaired_last_day,
	   now() - c.checkpoint AS checkpoint_age
  FROM (SELECT DISTINCT x.source_id, x.object_type FROM webhook_inbox.sweep_runs x
		UNION SELECT x.source_id, x.object_type FROM webhook_inbox.sweep_checkpoints x) t
  JOIN webhook_inbox.sources s ON s.id = t.source_id
  LEFT JOIN webhook_inbox.sweep_checkpoints c ON c.source_id = t.source_id AND c.object_type = t.object_type
  LEFT JOIN LATERAL (SELECT * FROM webhook_inbox.sweep_runs x
					  WHERE x.source_id = t.source_id AND x.object_type = t.object_type
					  ORDER BY x.started_at DESC LIMIT 1) r ON true;
COMMENT ON VIEW @extschema@.sweep_health IS
	'What to alert on for sweeps: per (source, object type) the last run, its repairs (a webhook path losing events shows here), failures in the last day and the checkpoint''s age.';

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
	OUT fetch_latency_avg_ms double precision, OUT fetch_latency_max_ms double precision)
AS 'MODULE_PATHNAME', 'wi_worker_stats'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.worker_stats() IS
	'The background worker''s counters since the server started (zeros without shared_preload_libraries).';

CREATE VIEW @extschema@.worker_counters AS SELECT * FROM @extschema@.worker_stats();
COMMENT ON VIEW @extschema@.worker_counters IS
	'The background worker''s counters: claims, fetches and their latency, saves, stale, ties, backward, retries, quarantines, sweeps and repairs.';

REVOKE ALL ON @extschema@.sweep_checkpoints, @extschema@.sweep_runs, @extschema@.repairs,
	@extschema@.sweep_health, @extschema@.worker_counters FROM PUBLIC;
GRANT USAGE ON SCHEMA @extschema@ TO pg_monitor;
GRANT SELECT ON @extschema@.worker_counters, @extschema@.sweep_health TO pg_monitor;
GRANT EXECUTE ON FUNCTION @extschema@.worker_stats() TO pg_monitor;
SELECT pg_catalog.pg_extension_config_dump('@extschema@.sweep_checkpoints', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.sweep_runs', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.repairs', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.sweep_runs_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.repairs_id_seq', '');
---------------------------------------------------------------------------
-- Effects: once per transition, and external effects whose outcome is uncertain
---------------------------------------------------------------------------

CREATE TABLE @extschema@.effect_rules (
	id				serial PRIMARY KEY,
	source_id		integer REFERENCES @extschema@.sources (id) ON DELETE CASCADE,
	object_type		text NOT NULL,
	from_status		text NOT NULL DEFAULT '*',
	to_status		text NOT NULL,
	kind			text NOT NULL CONSTRAINT effect_rules_kind_check CHECK (kind ~ '^[a-z][a-z0-9_]*$'),
	request			jsonb NOT NULL DEFAULT '{}'
		CONSTRAINT effect_rules_request_check CHECK (jsonb_typeof(request) = 'object'),
	owner			text NOT NULL DEFAULT 'engineering'
		CONSTRAINT effect_rules_owner_check CHECK (owner IN ('engineering', 'operations', 'finance')),
	enabled			boolean NOT NULL DEFAULT true,
	CONSTRAINT effect_rules_unique UNIQUE NULLS NOT DISTINCT (source_id, object_type, from_status, to_status, kind)
);
COMMENT ON TABLE @extschema@.effect_rules IS
	'Side effects per status transition: (object type, from status or *, to status) fires an effect of a kind, once per transition. Kind http is executed by the worker; other kinds wait in the outbox for local consumers.';

CREATE TABLE @extschema@.effects (
	id				bigserial PRIMARY KEY,
	effect_key		text NOT NULL CONSTRAINT effects_key UNIQUE
		CONSTRAINT effects_key_check CHECK (effect_key <> ''),
	kind			text NOT NULL CONSTRAINT effects_kind_check CHECK (kind ~ '^[a-z][a-z0-9_]*$'),
	source_id		integer REFERENCES @extschema@.sources (id),
	object_type		text,
	object_id		text,
	transition_id	bigint,
	rule_id			integer,
	request			jsonb NOT NULL DEFAULT '{}',
	idempotency_key text NOT NULL CONSTRAINT effects_idempotency_key_check
		CHECK (idempotency_key <> '' AND length(idempotency_key) <= 255),
	amount			bigint,
	ceiling_group	text,
	status			text NOT NULL DEFAULT 'pending'
		CONSTRAINT effects_status_check CHECK (status IN ('pending', 'submitting', 'done', 'failed',
			'uncertain', 'quarantined')),
	owner			text NOT NULL DEFAULT 'engineering'
		CONSTRAINT effects_owner_check CHECK (owner IN ('engineering', 'operations', 'finance')),
	reason			text,
	attempts		integer NOT NULL DEFAULT 0,
	next_attempt_at timestamptz NOT NULL DEFAULT now(),
	claim_token		bigint,
	holder			text,
	lease_expires_at timestamptz,
	response_status integer,
	response		text,
	created_at		timestamptz NOT NULL DEFAULT now(),
	updated_at		timestamptz NOT NULL DEFAULT now(),
	uncertain_since timestamptz,
	CONSTRAINT effects_http_check CHECK (kind <> 'http' OR (source_id IS NOT NULL
		AND request ? 'method' AND request ? 'path'))
);
CREATE INDEX effects_due_idx ON @extschema@.effects (next_attempt_at)
	WHERE status IN ('pending', 'submitting', 'uncertain');
CREATE INDEX effects_object_idx ON @extschema@.effects (source_id, object_type, object_id);
COMMENT ON TABLE @extschema@.effects IS
	'Approved operations, one per effect_key, with their exact request and a stable idempotency key. States: pending, submitting, done, failed (a definitive rejection), uncertain (sent, outcome unknown), quarantined (a person decides).';

CREATE TABLE @extschema@.effect_attempts (
	id				bigserial PRIMARY KEY,
	effect_id		bigint NOT NULL REFERENCES @extschema@.effects (id) ON DELETE CASCADE,
	claim_token		bigint NOT NULL,
	action			text NOT NULL CONSTRAINT effect_attempts_action_check CHECK (action IN ('submit', 'lookup')),
	started_at		timestamptz NOT NULL DEFAULT clock_timestamp(),
	finished_at		timestamptz,
	outcome			text,
	http_status		integer,
	error			text
);
CREATE INDEX effect_attempts_effect_idx ON @extschema@.effect_attempts (effect_id);
COMMENT ON TABLE @extschema@.effect_attempts IS
	'Every submission and lookup, recorded (and committed) before the request leaves.';

CREATE TABLE @extschema@.effect_resolutions (
	id				bigserial PRIMARY KEY,
	effect_id		bigint NOT NULL REFERENCES @extschema@.effects (id) ON DELETE CASCADE,
	previous_status text NOT NULL,
	outcome			text NOT NULL,
	note			text NOT NULL,
	resolved_by		text NOT NULL DEFAULT current_user,
	resolved_at		timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE @extschema@.effect_resolutions IS 'Audit of every decision taken with resolve_effect().';

/*
 * Fire the matching rules of an applied transition, in its transaction.  The
 * key names the transition row, so a duplicate, late or replayed event (which
 * applies no transition) can never fire an effect a second time.
 */
CREATE FUNCTION @extschema@._fire_effects() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF NOT NEW.applied THEN
		RETURN NULL;
	END IF;
	INSERT INTO webhook_inbox.effects (effect_key, kind, source_id, object_type, object_id, transition_id,
									   rule_id, request, idempotency_key, owner)
	SELECT k.key, r.kind, NEW.source_id, NEW.object_type, NEW.object_id, NEW.id, r.id,
		   replace(replace(replace(replace(r.request::text, '{object_id}', NEW.object_id),
			   '{object_type}', NEW.object_type), '{from}', coalesce(NEW.from_status, '')),
			   '{to}', NEW.to_status)::jsonb,
		   'wi-' || md5(k.key), r.owner
	  FROM webhook_inbox.effect_rules r
	  CROSS JOIN LATERAL (SELECT format('%s:%s:%s/%s:%s->%s#%s', r.kind, NEW.source_id, NEW.object_type,
										NEW.object_id, coalesce(NEW.from_status, ''), NEW.to_status, NEW.id) AS key) k
	 WHERE r.enabled
	   AND (r.source_id IS NULL OR r.source_id = NEW.source_id)
	   AND r.object_type = NEW.object_type
	   AND (r.from_status = '*' OR r.from_status = NEW.from_status)
	   AND r.to_status = NEW.to_status
	ON CONFLICT ON CONSTRAINT effects_key DO NOTHING;
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION @extschema@._fire_effects() IS
	'Inserts the effects of an applied transition, keyed by (kind, source, object, transition).';
CREATE TRIGGER transitions_fire_effects AFTER INSERT ON @extschema@.transitions
	FOR EACH ROW EXECUTE FUNCTION @extschema@._fire_effects();

CREATE FUNCTION @extschema@.request_effect(effect_key text, kind text, request jsonb,
	idempotency_key text DEFAULT NULL, source text DEFAULT NULL, owner text DEFAULT 'engineering',
	amount bigint DEFAULT NULL, ceiling_group text DEFAULT NULL, ceiling bigint DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	e webhook_inbox.effects;
	sid integer;
	used bigint;
	new_id bigint;
BEGIN
	IF effect_key IS NULL OR effect_key = '' THEN
		RAISE EXCEPTION 'effect_key must not be empty' USING ERRCODE = 'invalid_parameter_value',
			HINT = 'Name the approved business operation, e.g. ''refund:order-1042:approval-77''.';
	END IF;
	IF kind IS NULL OR kind !~ '^[a-z][a-z0-9_]*$' THEN
		RAISE EXCEPTION 'invalid effect kind "%"', kind USING ERRCODE = 'invalid_parameter_value',
			HINT = 'Use http for requests the worker sends, or a lowercase name for local consumers.';
	END IF;
	IF request IS NULL OR jsonb_typeof(request) <> 'object' THEN
		RAISE EXCEPTION 'request must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF kind = 'http' AND (source IS NULL OR NOT request ? 'method' OR NOT request ? 'path'
						  OR (request ->> 'path') !~ '^/') THEN
		RAISE EXCEPTION 'an http effect needs a source and a request with method and path'
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'For example: request => ''{"method": "POST", "path": "/v1/refunds", "body": {"payment_intent": "pi_1", "amount": 500}}''.';
	END IF;
	IF idempotency_key IS NOT NULL AND (idempotency_key = '' OR length(idempotency_key) > 255) THEN
		RAISE EXCEPTION 'idempotency_key must have 1 to 255 characters' USING ERRCODE = 'invalid_parameter_value',
			HINT = 'Providers limit the Idempotency-Key header; by default the effect key is used.';
	END IF;
	IF idempotency_key IS NULL AND length(effect_key) > 255 THEN
		RAISE EXCEPTION 'effect_key is longer than 255 characters and cannot serve as the idempotency key'
			USING ERRCODE = 'invalid_parameter_value', HINT = 'Pass a shorter idempotency_key.';
	END IF;
	IF owner IS NULL OR owner NOT IN ('engineering', 'operations', 'finance') THEN
		RAISE EXCEPTION 'invalid owner "%"', owner USING ERRCODE = 'invalid_parameter_value',
			HINT = 'Owners are engineering, operations and finance.';
	END IF;
	IF (ceiling IS NULL) <> (ceiling_group IS NULL) OR (ceiling IS NOT NULL AND amount IS NULL) THEN
		RAISE EXCEPTION 'a ceiling needs a ceiling_group and an amount' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF source IS NOT NULL THEN
		sid := webhook_inbox._source_id(source);
	END IF;

	/* the same approved operation: return it if identical, refuse if not */
	SELECT * INTO e FROM webhook_inbox.effects x WHERE x.effect_key = request_effect.effect_key FOR UPDATE;
	IF FOUND THEN
		IF e.kind = kind AND e.request = request AND e.source_id IS NOT DISTINCT FROM sid
		   AND e.idempotency_key = coalesce(request_effect.idempotency_key, request_effect.effect_key)
		   AND e.amount IS NOT DISTINCT FROM amount THEN
			RETURN e.id;
		END IF;
		RAISE EXCEPTION 'effect "%" was already requested with a different request', effect_key
			USING ERRCODE = 'unique_violation',
				  DETAIL = 'An effect key names one approved operation and its exact request.',
				  HINT = 'A different operation needs a new effect key.';
	END IF;

	/* the ceiling is a separate check: a second operation within it is still a second operation */
	IF ceiling IS NOT NULL THEN
		PERFORM pg_advisory_xact_lock(hashtextextended('webhook_inbox/ceiling/' || ceiling_group, 0));
		SELECT coalesce(sum(x.amount), 0) INTO used FROM webhook_inbox.effects x
		 WHERE x.ceiling_group = request_effect.ceiling_group AND x.status <> 'failed';
		IF used + amount > ceiling THEN
			RAISE EXCEPTION 'effect "%" would exceed the ceiling of group "%"', effect_key, ceiling_group
				USING ERRCODE = 'check_violation',
					  DETAIL = format('%s already approved, %s requested, ceiling %s.', used, amount, ceiling);
		END IF;
	END IF;

	INSERT INTO webhook_inbox.effects (effect_key, kind, source_id, request, idempotency_key, owner, amount,
									   ceiling_group)
	VALUES (effect_key, kind, sid, request, coalesce(request_effect.idempotency_key, effect_key), owner,
			amount, ceiling_group)
	RETURNING id INTO new_id;
	RETURN new_id;
END
$$;
COMMENT ON FUNCTION @extschema@.request_effect(text, text, jsonb, text, text, text, bigint, text, bigint) IS
	'Records an approved operation with its exact request. The same key and request return the existing effect; the same key with another request is refused. Returns the effect id.';

CREATE FUNCTION @extschema@.resolve_effect(effect_id bigint, outcome text, note text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	e webhook_inbox.effects;
BEGIN
	IF outcome IS NULL OR outcome NOT IN ('done', 'failed', 'retry') THEN
		RAISE EXCEPTION 'invalid outcome "%"', outcome USING ERRCODE = 'invalid_parameter_value',
			HINT = 'done: the provider did it; failed: it did not and must not be retried; retry: submit again with the same key and body.';
	END IF;
	IF note IS NULL OR note = '' THEN
		RAISE EXCEPTION 'a resolution needs a note' USING ERRCODE = 'invalid_parameter_value',
			HINT = 'Say what evidence the decision rests on.';
	END IF;
	SELECT * INTO e FROM webhook_inbox.effects WHERE id = effect_id FOR UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'effect % does not exist', effect_id USING ERRCODE = 'undefined_object';
	END IF;
	IF e.status NOT IN ('uncertain', 'quarantined', 'failed') THEN
		RAISE EXCEPTION 'effect % is % and needs no resolution', effect_id, e.status
			USING ERRCODE = 'object_not_in_prerequisite_state';
	END IF;
	INSERT INTO webhook_inbox.effect_resolutions (effect_id, previous_status, outcome, note)
	VALUES (e.id, e.status, outcome, note);
	UPDATE webhook_inbox.effects
	   SET status = CASE outcome WHEN 'retry' THEN 'pending' ELSE outcome END,
		   reason = 'resolved: ' || note, claim_token = NULL, holder = NULL, lease_expires_at = NULL,
		   next_attempt_at = now(), updated_at = now()
	 WHERE id = e.id;
	RETURN CASE outcome WHEN 'retry' THEN 'pending' ELSE outcome END;
END
$$;
COMMENT ON FUNCTION @extschema@.resolve_effect(bigint, text, text) IS
	'A person''s decision on an uncertain, quarantined or failed effect: done, failed, or retry (same key, same body). Audited in effect_resolutions.';

/* The outbox: effects of other kinds, claimed by the user's own code. */
CREATE FUNCTION @extschema@.claim_effects(worker text, kinds text[], max_effects integer DEFAULT 10,
	lease interval DEFAULT '30 seconds')
RETURNS SETOF webhook_inbox.effects
LANGUAGE plpgsql AS $$
BEGIN
	IF worker IS NULL OR worker = '' OR kinds IS NULL OR cardinality(kinds) = 0 THEN
		RAISE EXCEPTION 'worker and kinds must not be empty' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF 'http' = ANY (kinds) THEN
		RAISE EXCEPTION 'http effects are executed by the background worker'
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Claim only the kinds your own code executes.';
	END IF;
	IF max_effects IS NULL OR max_effects < 1 OR max_effects > 10000 THEN
		RAISE EXCEPTION 'max_effects must be between 1 and 10000' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF lease IS NULL OR lease <= '0 seconds' THEN
		RAISE EXCEPTION 'lease must be positive' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	RETURN QUERY
	WITH c AS (
		SELECT id FROM webhook_inbox.effects
		 WHERE kind = ANY (kinds)
		   AND ((status = 'pending' AND next_attempt_at <= now())
				OR (status = 'submitting' AND lease_expires_at < now()))
		 ORDER BY id LIMIT max_effects FOR UPDATE SKIP LOCKED)
	UPDATE webhook_inbox.effects e
	   SET status = 'submitting', claim_token = nextval('webhook_inbox.claim_token_seq'), holder = worker,
		   lease_expires_at = now() + lease, attempts = e.attempts + 1, updated_at = now()
	  FROM c WHERE e.id = c.id
	RETURNING e.*;
END
$$;
COMMENT ON FUNCTION @extschema@.claim_effects(text, text[], integer, interval) IS
	'Outbox for local consumers: claims due effects of the given kinds under a lease with a fencing token.';

CREATE FUNCTION @extschema@.complete_effect(effect_id bigint, claim_token bigint, outcome text DEFAULT 'done',
	response text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	n integer;
BEGIN
	IF outcome IS NULL OR outcome NOT IN ('done', 'failed', 'retry') THEN
		RAISE EXCEPTION 'invalid outcome "%"', outcome USING ERRCODE = 'invalid_parameter_value',
			HINT = 'Use done, failed or retry.';
	END IF;
	UPDATE webhook_inbox.effects e
	   SET status = CASE outcome WHEN 'retry' THEN 'pending' ELSE outcome END,
		   response = complete_effect.response, claim_token = NULL, holder = NULL, lease_expires_at = NULL,
		   next_attempt_at = CASE outcome WHEN 'retry'
								  THEN now() + least(interval '1 hour', interval '1 second' * power(2, least(e.attempts, 12)))
								  ELSE e.next_attempt_at END,
		   updated_at = now()
	 WHERE e.id = effect_id AND e.claim_token = complete_effect.claim_token AND e.status = 'submitting';
	GET DIAGNOSTICS n = ROW_COUNT;
	IF n = 0 THEN
		RAISE EXCEPTION 'claim token % is no longer current for effect %', claim_token, effect_id
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = 'The effect was completed, or its lease expired and another consumer took it over.';
	END IF;
	RETURN CASE outcome WHEN 'retry' THEN 'pending' ELSE outcome END;
END
$$;
COMMENT ON FUNCTION @extschema@.complete_effect(bigint, bigint, text, text) IS
	'Finishes an outbox effect claimed with claim_effects(); refused for a token that is no longer current.';

CREATE PROCEDURE @extschema@.run_effects(max_effects integer DEFAULT 10, worker text DEFAULT 'sql')
AS 'MODULE_PATHNAME', 'wi_run_effects'
LANGUAGE C;
COMMENT ON PROCEDURE @extschema@.run_effects(integer, text) IS
	'Executes due http effects once, as the background worker does: claim and record the attempt (committed), send, store the answer; recovers uncertain ones by lookup, same-key retry or quarantine.';

CREATE VIEW @extschema@.effects_unresolved AS
SELECT e.id, e.effect_key, e.kind, s.name AS source, e.object_type, e.object_id, e.status, e.owner, e.reason,
	   now() - coalesce(e.uncertain_since, e.created_at) AS age, e.attempts, e.idempotency_key
  FROM webhook_inbox.effects e LEFT JOIN webhook_inbox.sources s ON s.id = e.source_id
 WHERE e.status IN ('uncertain', 'quarantined');
COMMENT ON VIEW @extschema@.effects_unresolved IS
	'Effects whose outcome a person or a recovery must still establish: age, reason, owner.';

CREATE VIEW @extschema@.effects_health AS
SELECT count(*) FILTER (WHERE status = 'pending') AS pending,
	   count(*) FILTER (WHERE status = 'submitting') AS submitting,
	   count(*) FILTER (WHERE status = 'done') AS done,
	   count(*) FILTER (WHERE status = 'failed') AS failed,
	   count(*) FILTER (WHERE status = 'uncertain') AS uncertain,
	   count(*) FILTER (WHERE status = 'quarantined') AS quarantined,
	   coalesce(max(now() - coalesce(uncertain_since, created_at))
				FILTER (WHERE status IN ('uncertain', 'quarantined')), '0 seconds') AS oldest_unresolved_age
  FROM webhook_inbox.effects;
COMMENT ON VIEW @extschema@.effects_health IS 'Effect counts by status, for monitoring.';

SELECT pg_catalog.pg_extension_config_dump('@extschema@.effect_rules', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.effects', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.effect_attempts', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.effect_resolutions', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.effect_rules_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.effects_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.effect_attempts_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.effect_resolutions_id_seq', '');

/*
 * The worker's side of http effects, in two steps around the request:
 * _effects_claim() decides and records (committed before anything is sent),
 * _effects_store() keeps the answer under the claim's fencing token.
 */
CREATE FUNCTION @extschema@._effects_claim(p_worker text, p_max integer, p_lease interval,
	p_max_attempts integer)
RETURNS TABLE (effect_id bigint, token bigint, action text, method text, url text, body text,
			   content_type text, idempotency_key text, auth_name text, auth_value text)
LANGUAGE plpgsql AS $$
DECLARE
	e record;
	lookup text;
	retry_same boolean;
	t bigint;
	n integer := 0;
BEGIN
	/* a worker that stopped while submitting leaves the outcome unknown */
	UPDATE webhook_inbox.effect_attempts a SET finished_at = clock_timestamp(), outcome = 'abandoned'
	  FROM webhook_inbox.effects x
	 WHERE a.effect_id = x.id AND a.claim_token = x.claim_token AND a.finished_at IS NULL
	   AND x.kind = 'http' AND x.status = 'submitting' AND x.lease_expires_at < now();
	UPDATE webhook_inbox.effects x
	   SET status = 'uncertain', uncertain_since = now(), claim_token = NULL, holder = NULL,
		   reason = 'the worker stopped while submitting', updated_at = now()
	 WHERE x.kind = 'http' AND x.status = 'submitting' AND x.lease_expires_at < now();

	FOR e IN SELECT x.*, s.kind AS source_kind, s.api_base, s.api_token, s.settings
			   FROM webhook_inbox.effects x JOIN webhook_inbox.sources s ON s.id = x.source_id
			  WHERE x.kind = 'http' AND x.status IN ('pending', 'uncertain') AND x.next_attempt_at <= now()
			  ORDER BY x.id LIMIT p_max FOR UPDATE OF x SKIP LOCKED LOOP
		IF e.api_base IS NULL THEN
			UPDATE webhook_inbox.effects SET status = 'quarantined', reason = 'the source has no api_base',
				   updated_at = now() WHERE id = e.id;
			CONTINUE;
		END IF;
		lookup := e.settings #>> '{effects,lookup}';
		retry_same := coalesce((e.settings #>> '{effects,retry_same_key}')::boolean, e.source_kind = 'stripe');
		t := nextval('webhook_inbox.claim_token_seq');
		IF e.status = 'uncertain' THEN
			IF lookup IS NULL AND NOT retry_same THEN
				UPDATE webhook_inbox.effects
				   SET status = 'quarantined', updated_at = now(),
					   reason = 'uncertain: the provider offers no lookup and no idempotent retry; ' || coalesce(e.reason, '')
				 WHERE id = e.id;
				CONTINUE;
			END IF;
			IF lookup IS NOT NULL THEN
				INSERT INTO webhook_inbox.effect_attempts (effect_id, claim_token, action) VALUES (e.id, t, 'lookup');
				UPDATE webhook_inbox.effects SET claim_token = t, holder = p_worker, lease_expires_at = now() + p_lease,
					   updated_at = now() WHERE id = e.id;
				effect_id := e.id; token := t; action := 'lookup'; method := 'GET';
				url := rtrim(e.api_base, '/') || replace(lookup, '{key}', e.idempotency_key);
				body := NULL; content_type := NULL; idempotency_key := NULL;
				auth_name := CASE e.source_kind WHEN 'shopify' THEN 'X-Shopify-Access-Token' ELSE coalesce(e.settings ->> 'auth_header', 'Authorization') END;
				auth_value := CASE WHEN e.api_token IS NULL THEN NULL WHEN e.source_kind = 'shopify' THEN e.api_token
								   ELSE coalesce(e.settings ->> 'auth_prefix', 'Bearer ') || e.api_token END;
				RETURN NEXT;
				CONTINUE;
			END IF;
			/* the provider's idempotency contract makes a same-key retry safe */
		END IF;
		IF e.attempts >= p_max_attempts THEN
			UPDATE webhook_inbox.effects SET status = 'quarantined', updated_at = now(),
				   reason = 'max_attempts: ' || coalesce(e.reason, '') WHERE id = e.id;
			CONTINUE;
		END IF;
		INSERT INTO webhook_inbox.effect_attempts (effect_id, claim_token, action) VALUES (e.id, t, 'submit');
		UPDATE webhook_inbox.effects
		   SET status = 'submitting', claim_token = t, holder = p_worker, lease_expires_at = now() + p_lease,
			   attempts = attempts + 1, updated_at = now()
		 WHERE id = e.id;
		effect_id := e.id; token := t; action := 'submit'; method := upper(e.request ->> 'method');
		url := rtrim(e.api_base, '/') || (e.request ->> 'path');
		body := CASE jsonb_typeof(e.request -> 'body') WHEN 'string' THEN e.request ->> 'body'
					 WHEN 'object' THEN (e.request -> 'body')::text WHEN 'array' THEN (e.request -> 'body')::text END;
		content_type := coalesce(e.request ->> 'content_type', 'application/json');
		idempotency_key := e.idempotency_key;
		auth_name := CASE e.source_kind WHEN 'shopify' THEN 'X-Shopify-Access-Token' ELSE coalesce(e.settings ->> 'auth_header', 'Authorization') END;
		auth_value := CASE WHEN e.api_token IS NULL THEN NULL WHEN e.source_kind = 'shopify' THEN e.api_token
						   ELSE coalesce(e.settings ->> 'auth_prefix', 'Bearer ') || e.api_token END;
		RETURN NEXT;
	END LOOP;
END
$$;
COMMENT ON FUNCTION @extschema@._effects_claim(text, integer, interval, integer) IS
	'Claims due http effects and records each attempt before it is sent; decides the recovery of uncertain ones.';

CREATE FUNCTION @extschema@._effects_store(p_id bigint, p_token bigint, p_action text, p_http_status integer,
	p_transport text, p_response text, p_error text)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	e webhook_inbox.effects;
	v_outcome text;
	backoff interval;
BEGIN
	SELECT * INTO e FROM webhook_inbox.effects WHERE id = p_id AND claim_token = p_token FOR UPDATE;
	IF NOT FOUND THEN
		UPDATE webhook_inbox.effect_attempts SET finished_at = clock_timestamp(), outcome = 'fenced',
			   http_status = p_http_status, error = p_error
		 WHERE effect_id = p_id AND claim_token = p_token;
		RETURN 'fenced';
	END IF;
	backoff := least(interval '1 hour', interval '1 second' * power(2, least(e.attempts, 12))) * (1 + random() * 0.25);
	IF p_action = 'lookup' THEN
		v_outcome := CASE WHEN p_transport = 'ok' AND p_http_status = 200 THEN 'done'
						WHEN p_transport = 'ok' AND p_http_status = 404 THEN 'pending'
						ELSE 'uncertain' END;
	ELSE
		v_outcome := CASE WHEN p_transport = 'not_sent' THEN 'pending'
						WHEN p_transport <> 'ok' THEN 'uncertain'
						WHEN p_http_status BETWEEN 200 AND 299 THEN 'done'
						WHEN p_http_status IN (409, 429) THEN 'pending'
						WHEN p_http_status BETWEEN 400 AND 499 THEN 'failed'
						ELSE 'uncertain' END;
	END IF;
	UPDATE webhook_inbox.effect_attempts SET finished_at = clock_timestamp(), outcome = v_outcome,
		   http_status = p_http_status, error = p_error
	 WHERE effect_id = p_id AND claim_token = p_token;
	UPDATE webhook_inbox.effects
	   SET status = v_outcome, claim_token = NULL, holder = NULL, lease_expires_at = NULL, updated_at = now(),
		   response_status = CASE WHEN p_transport = 'ok' AND (p_action = 'submit' OR v_outcome = 'done')
								  THEN p_http_status ELSE response_status END,
		   response = CASE WHEN p_transport = 'ok' AND (p_action = 'submit' OR v_outcome = 'done')
						   THEN p_response ELSE response END,
		   uncertain_since = CASE WHEN v_outcome = 'uncertain' THEN coalesce(uncertain_since, now()) ELSE NULL END,
		   reason = CASE v_outcome
						WHEN 'done' THEN CASE p_action WHEN 'lookup' THEN 'resolved by lookup' END
						WHEN 'pending' THEN CASE WHEN p_action = 'lookup' THEN 'lookup: the provider never performed it; same-key retry'
												 ELSE coalesce(p_error, 'HTTP ' || p_http_status) END
						ELSE coalesce(p_error, 'HTTP ' || p_http_status) END,
		   next_attempt_at = CASE WHEN v_outcome = 'pending' AND p_action = 'lookup' THEN now()
								  WHEN v_outcome = 'uncertain' AND e.uncertain_since IS NULL THEN now()
								  WHEN v_outcome IN ('pending', 'uncertain') THEN now() + backoff
								  ELSE next_attempt_at END
	 WHERE id = p_id;
	RETURN v_outcome;
END
$$;
COMMENT ON FUNCTION @extschema@._effects_store(bigint, bigint, text, integer, text, text, text) IS
	'Stores the answer to an effect''s submission or lookup under its fencing token: done, failed, pending (not performed), or uncertain.';
---------------------------------------------------------------------------
-- Presets: machines and routes for every supported provider kind
---------------------------------------------------------------------------

/* The preset payment machine: forward only, so late events are recognised. */
INSERT INTO @extschema@.machines (machine, from_state, to_state) VALUES
	('payment', 'unknown', 'pending'),
	('payment', 'pending', 'authorised'),
	('payment', 'authorised', 'captured'),
	('payment', 'captured', 'settled'),
	('payment', 'pending', 'failed'),
	('payment', 'authorised', 'failed'),
	('payment', 'captured', 'refunded'),
	('payment', 'settled', 'refunded'),
	('razorpay_payment', 'unknown', 'created'),
	('razorpay_payment', 'created', 'authorized'),
	('razorpay_payment', 'authorized', 'captured'),
	('razorpay_payment', 'captured', 'refunded'),
	('razorpay_payment', 'created', 'failed'),
	('razorpay_payment', 'authorized', 'failed');

INSERT INTO @extschema@.routes (source_kind, event_type, class, strategy, object_type, object_type_path,
	object_id_path, version_path, status_path, time_path, amount_path, currency_path, machine, tombstone, priority)
VALUES
	/* Stripe snapshot events: subscriptions and customers carry no usable version: fetch the present */
	('stripe', 'customer.subscription.*', 'state', 'fetch', 'subscription', NULL,
	 '$.data.object.id', NULL, '$.data.object.status', '$.created', NULL, NULL, NULL, false, 100),
	('stripe', 'customer.*', 'state', 'fetch', 'customer', NULL,
	 '$.data.object.id', NULL, NULL, '$.created', NULL, NULL, NULL, false, 90),
	('stripe', 'invoice.*', 'state', 'fetch', 'invoice', NULL,
	 '$.data.object.id', NULL, '$.data.object.status', '$.created', NULL, NULL, NULL, false, 100),
	/* payments walk the preset machine */
	('stripe', 'payment_intent.*', 'state', 'machine', 'payment', NULL,
	 '$.data.object.id', NULL, '$.data.object.status', '$.created', NULL, NULL, 'payment', false, 100),
	/* occurrences: insert once on their own id */
	('stripe', 'refund.created', 'occurrence', 'occurrence', 'refund', NULL,
	 '$.data.object.id', NULL, NULL, '$.created', '$.data.object.amount', '$.data.object.currency', NULL, false, 100),
	('stripe', 'charge.refund.updated', 'ignore', 'ignore', NULL, NULL,
	 NULL, NULL, NULL, NULL, NULL, NULL, NULL, false, 100),
	('stripe', 'charge.dispute.created', 'occurrence', 'occurrence', 'dispute', NULL,
	 '$.data.object.id', NULL, NULL, '$.created', '$.data.object.amount', '$.data.object.currency', NULL, false, 100),
	/* Stripe thin events name the object and nothing else: fetch it */
	('stripe', 'v1.*', 'state', 'fetch', NULL, '$.related_object.type',
	 '$.related_object.id', NULL, NULL, '$.created', NULL, NULL, NULL, false, 50),
	('stripe', 'v2.*', 'state', 'fetch', NULL, '$.related_object.type',
	 '$.related_object.id', NULL, NULL, '$.created', NULL, NULL, NULL, false, 50),
	/* Shopify: resources carry updated_at (one-second) used as version with the tie rule */
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
	/* GitHub: issues and pull requests carry updated_at; pushes happen once */
	('github', 'issues*', 'state', 'version', 'issue', NULL,
	 '$.issue.id', '$.issue.updated_at', '$.issue.state', '$.issue.updated_at', NULL, NULL, NULL, false, 100),
	('github', 'pull_request*', 'state', 'version', 'pull_request', NULL,
	 '$.pull_request.id', '$.pull_request.updated_at', '$.pull_request.state', '$.pull_request.updated_at',
	 NULL, NULL, NULL, false, 100),
	('github', 'push', 'occurrence', 'occurrence', 'push', NULL,
	 '$.after', NULL, NULL, '$.head_commit.timestamp', NULL, NULL, NULL, false, 100),
	('github', 'ping', 'ignore', 'ignore', NULL, NULL,
	 NULL, NULL, NULL, NULL, NULL, NULL, NULL, false, 100),
	/* Standard Webhooks fix the envelope, not the content: no version, no read API known */
	('standard', '*', 'state', 'unordered', 'object', '$.data.object',
	 '$.data.id', NULL, '$.data.status', '$.timestamp', NULL, NULL, NULL, false, 10),
	/* Razorpay: payments walk their machine; refunds are occurrences */
	('razorpay', 'payment.*', 'state', 'machine', 'payment', NULL,
	 '$.payload.payment.entity.id', NULL, '$.payload.payment.entity.status', '$.created_at',
	 NULL, NULL, 'razorpay_payment', false, 100),
	('razorpay', 'refund.*', 'occurrence', 'occurrence', 'refund', NULL,
	 '$.payload.refund.entity.id', NULL, NULL, '$.created_at',
	 '$.payload.refund.entity.amount', '$.payload.refund.entity.currency', NULL, false, 100);

/*
 * pg_dump skips the data of extension tables unless told: user data is dumped
 * in full, routes and machines without the presets this script recreates.
 */
UPDATE @extschema@.routes SET preset = true;
UPDATE @extschema@.machines SET preset = true;

/* from here on, every change of a route bumps its version */
CREATE TRIGGER routes_bump BEFORE UPDATE ON @extschema@.routes
	FOR EACH ROW EXECUTE FUNCTION @extschema@._routes_bump();
SELECT pg_catalog.pg_extension_config_dump('@extschema@.routes', 'WHERE NOT preset');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.machines', 'WHERE NOT preset');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.sources', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.inbox', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.deliveries', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.objects', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.object_leases', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.transitions', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.occurrences', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.requeues', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.sources_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.routes_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.inbox_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.deliveries_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.transitions_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.occurrences_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.requeues_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.claim_token_seq', '');
---------------------------------------------------------------------------
-- Function privileges: none for PUBLIC; the receiver gets exactly two
---------------------------------------------------------------------------

REVOKE ALL ON ALL ROUTINES IN SCHEMA @extschema@ FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.intake(text, text[], bytea) TO webhook_inbox_receiver;
GRANT EXECUTE ON FUNCTION @extschema@.receiver_sources() TO webhook_inbox_receiver;
