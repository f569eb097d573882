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
		CONSTRAINT sources_kind_check CHECK (kind IN (@SOURCE_KINDS@)),
	signing_secrets text[] NOT NULL
		CONSTRAINT sources_secrets_check CHECK (cardinality(signing_secrets) >= 1
			AND array_position(signing_secrets, NULL) IS NULL
			AND array_position(signing_secrets, '') IS NULL),
	tolerance		interval NOT NULL DEFAULT '300 seconds'
		CONSTRAINT sources_tolerance_check CHECK (tolerance >= '0 seconds' AND tolerance <= '1 day'),
	api_base		text CONSTRAINT sources_api_base_check CHECK (api_base ~ '^https?://'),
	api_token		text,
	settings		jsonb NOT NULL DEFAULT '{}'
		CONSTRAINT sources_settings_check CHECK (jsonb_typeof(settings) = 'object')
		/* pacing: requests per second > 0, and whose unit a tenant's requests count against */
		CONSTRAINT sources_pacing_check CHECK (
			CASE WHEN NOT settings ? 'rate_limit' THEN true
				 WHEN jsonb_typeof(settings -> 'rate_limit') = 'number' THEN (settings ->> 'rate_limit')::numeric > 0
				 ELSE false END
			AND CASE WHEN NOT settings ? 'endpoint_rate_limit' THEN true
				 WHEN jsonb_typeof(settings -> 'endpoint_rate_limit') = 'number'
				 THEN (settings ->> 'endpoint_rate_limit')::numeric > 0
				 ELSE false END
			AND (NOT settings ? 'rate_limit_scope' OR settings ->> 'rate_limit_scope' IN ('platform', 'tenant'))),
	enabled			boolean NOT NULL DEFAULT true,
	flagged			text,
	created_at		timestamptz NOT NULL DEFAULT now(),
	updated_at		timestamptz NOT NULL DEFAULT now(),
	replay_window	interval NOT NULL DEFAULT '7 days'
		CONSTRAINT sources_replay_window_check CHECK (replay_window >= '0 seconds')
);
COMMENT ON TABLE @extschema@.sources IS
	'One row per configured webhook endpoint; name is the URL path segment /hooks/{name}.';
COMMENT ON COLUMN @extschema@.sources.signing_secrets IS
	'Current signing secrets; several during rotation. Readable only by the owner.';
COMMENT ON COLUMN @extschema@.sources.replay_window IS
	'For schemes that sign only the body (@SOURCE_KINDS_BODY_ONLY@): a body received again within this window is a duplicate whatever id its headers carry. 0 turns the check off.';
COMMENT ON COLUMN @extschema@.sources.flagged IS
	'Set by the worker when the provider refused our credentials (401/403).';

/*
 * A source's signing secrets and api_token at rest: while
 * webhook_inbox.key_file names a key, each is stored sealed (AES-256-GCM,
 * extension/seal.c) as "wi-sealed:" and base64, bound to its row and
 * column, so a dump or a copied table holds ciphertext only.  The trigger
 * below seals whatever is written, by create_source(), rotate_secret(), an
 * UPDATE or a restore; receiver_sources() and _worker_source() unseal.
 * Without a key file the values stay in clear, as before, and inbox_health
 * says so.
 */
CREATE FUNCTION @extschema@._seal_text(value text, context text) RETURNS text
LANGUAGE c STRICT
AS 'MODULE_PATHNAME', 'wi_seal_text_sql';
COMMENT ON FUNCTION @extschema@._seal_text(text, text) IS
	'A text secret sealed under the key of webhook_inbox.key_file for context ("wi-sealed:" and base64); returned unchanged when it is sealed already, empty, or no key file is set.';

CREATE FUNCTION @extschema@._unseal_text(value text, context text) RETURNS text
LANGUAGE c STRICT
AS 'MODULE_PATHNAME', 'wi_unseal_text_sql';
COMMENT ON FUNCTION @extschema@._unseal_text(text, text) IS
	'The plaintext of what _seal_text() sealed for context; a value in clear is returned as it is. Raises when the value is sealed and webhook_inbox.key_file is not set, names another key, or the value does not authenticate.';

CREATE FUNCTION @extschema@._unseal_text_with(value text, context text, key_file text) RETURNS text
LANGUAGE c STRICT
AS 'MODULE_PATHNAME', 'wi_unseal_text_with_sql';
COMMENT ON FUNCTION @extschema@._unseal_text_with(text, text, text) IS
	'_unseal_text() under the key of key_file instead of webhook_inbox.key_file (re-encryption under a new key).';

CREATE FUNCTION @extschema@._text_key_id(value text) RETURNS text
LANGUAGE c STRICT IMMUTABLE
AS 'MODULE_PATHNAME', 'wi_text_key_id_sql';
COMMENT ON FUNCTION @extschema@._text_key_id(text) IS
	'The key id (16 hex digits) a value sealed by _seal_text() was encrypted under; NULL for a value in clear.';

CREATE FUNCTION @extschema@._key_configured() RETURNS boolean
LANGUAGE c STABLE
AS 'MODULE_PATHNAME', 'wi_key_configured_sql';
COMMENT ON FUNCTION @extschema@._key_configured() IS
	'Whether webhook_inbox.key_file names a key file (it is read only when a secret is sealed or unsealed).';

CREATE FUNCTION @extschema@._source_context(p_source_id integer, p_column text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
	SELECT pg_catalog.format('sources(%s).%s', p_source_id, p_column)
$$;
COMMENT ON FUNCTION @extschema@._source_context(integer, text) IS
	'The context a source''s secret is sealed for: its row and column, so that a value copied to another source does not decrypt.';

CREATE FUNCTION @extschema@._source_secrets(p_source_id integer, p_secrets text[]) RETURNS text[]
LANGUAGE sql STABLE AS $$
	SELECT pg_catalog.array_agg(webhook_inbox._unseal_text(u.x,
				webhook_inbox._source_context(p_source_id, 'signing_secrets')) ORDER BY u.o)
	  FROM pg_catalog.unnest(p_secrets) WITH ORDINALITY AS u(x, o)
$$;
COMMENT ON FUNCTION @extschema@._source_secrets(integer, text[]) IS
	'A source''s signing secrets in clear, in their order (those stored sealed unsealed under webhook_inbox.key_file).';

CREATE FUNCTION @extschema@._source_in_clear(p_secrets text[], p_api_token text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
	SELECT EXISTS (SELECT 1 FROM pg_catalog.unnest(p_secrets) x
					WHERE x <> '' AND webhook_inbox._text_key_id(x) IS NULL)
		OR (p_api_token <> '' AND webhook_inbox._text_key_id(p_api_token) IS NULL)
$$;
COMMENT ON FUNCTION @extschema@._source_in_clear(text[], text) IS
	'Whether a source keeps a signing secret or its api_token in clear.';

CREATE FUNCTION @extschema@._sources_seal() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF NOT webhook_inbox._key_configured() THEN
		RETURN NEW;
	END IF;
	IF TG_OP = 'UPDATE' AND NEW.id <> OLD.id THEN
		/* sealed for the old row: unsealed, to be sealed for the new one */
		NEW.signing_secrets := webhook_inbox._source_secrets(OLD.id, NEW.signing_secrets);
		NEW.api_token := webhook_inbox._unseal_text(NEW.api_token, webhook_inbox._source_context(OLD.id, 'api_token'));
	END IF;
	IF NEW.signing_secrets IS NOT NULL THEN
		NEW.signing_secrets := ARRAY(
			SELECT webhook_inbox._seal_text(u.x, webhook_inbox._source_context(NEW.id, 'signing_secrets'))
			  FROM pg_catalog.unnest(NEW.signing_secrets) WITH ORDINALITY AS u(x, o) ORDER BY u.o);
	END IF;
	NEW.api_token := webhook_inbox._seal_text(NEW.api_token, webhook_inbox._source_context(NEW.id, 'api_token'));
	RETURN NEW;
END
$$;
COMMENT ON FUNCTION @extschema@._sources_seal() IS
	'While webhook_inbox.key_file is set, seals every signing secret and api_token written to sources in clear, so none is stored in clear.';
CREATE TRIGGER sources_seal BEFORE INSERT OR UPDATE OF id, signing_secrets, api_token
	ON @extschema@.sources FOR EACH ROW EXECUTE FUNCTION @extschema@._sources_seal();

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
	occurrence_kind	text,
	CONSTRAINT routes_owner_check CHECK ((source_kind IS NULL) <> (source_id IS NULL)),
	CONSTRAINT routes_unique UNIQUE NULLS NOT DISTINCT (source_kind, source_id, event_type, preset),
	CONSTRAINT routes_class_strategy_check CHECK (
		(class = 'ignore' AND strategy = 'ignore')
		OR (class = 'occurrence' AND strategy = 'occurrence')
		OR (class = 'state' AND strategy IN ('fetch', 'version', 'machine', 'unordered'))),
	CONSTRAINT routes_object_check CHECK (class = 'ignore'
		OR (object_id_path IS NOT NULL AND (object_type IS NOT NULL OR object_type_path IS NOT NULL))),
	CONSTRAINT routes_version_check CHECK (strategy <> 'version' OR version_path IS NOT NULL),
	CONSTRAINT routes_machine_check CHECK (strategy <> 'machine'
		OR (machine IS NOT NULL AND status_path IS NOT NULL)),
	CONSTRAINT routes_occurrence_kind_check CHECK (occurrence_kind IS NULL
		OR (class = 'state' AND occurrence_kind <> ''))
);
COMMENT ON TABLE @extschema@.routes IS
	'Classification of events by (source kind or source, event-type pattern with * wildcards): class, strategy and where ids, version and status live. The most specific match wins: source over kind, then higher priority, then the longer pattern. A row of yours shadows the preset of the same key; updating a preset stores your row instead, so pg_dump keeps your change and no upgrade overwrites it.';
COMMENT ON COLUMN @extschema@.routes.occurrence_kind IS
	'State routes only: the event''s object is also recorded once as an occurrence of this kind, with amount and currency (a refund: its status is followed and the refund is counted once).';
COMMENT ON COLUMN @extschema@.routes.version IS
	'Bumped on every change of the route, recorded on each event it decided, so replays after a mapping change are visible.';

-- intake keeps the routes it read in each backend (extension/route_cache.c)
CREATE FUNCTION @extschema@._routes_changed() RETURNS trigger
AS 'MODULE_PATHNAME', 'wi_routes_changed'
LANGUAGE C;
COMMENT ON FUNCTION @extschema@._routes_changed() IS
	'Empties every backend''s cache of the routes intake read, at the commit of a change of routes.';
CREATE TRIGGER routes_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
	ON @extschema@.routes FOR EACH STATEMENT EXECUTE FUNCTION @extschema@._routes_changed();

---------------------------------------------------------------------------
-- Inbox and deliveries
---------------------------------------------------------------------------

CREATE TABLE @extschema@.inbox (
	id				bigserial PRIMARY KEY,
	source_id		integer NOT NULL,	-- kept by sources_referenced, not a foreign key
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
	-- the lists of these checks are array literals, not IN lists: PostgreSQL
	-- reads a check back and plans it for every INSERT statement, and one
	-- array constant costs less to read than a list of constants to fold
	status			text NOT NULL DEFAULT 'pending'
		CONSTRAINT inbox_status_check
		CHECK (status = ANY ('{pending,processing,done,retry,ignored,quarantined}'::text[])),
	reason			text,
	attempts		integer NOT NULL DEFAULT 0 CONSTRAINT inbox_attempts_check CHECK (attempts >= 0),
	next_attempt_at timestamptz NOT NULL DEFAULT now(),
	claim_token		bigint,
	decided_route	integer,
	decided_route_version integer,
	received_at		timestamptz NOT NULL DEFAULT now(),
	processed_at	timestamptz,
	updated_at		timestamptz NOT NULL DEFAULT now(),
	tenant			text NOT NULL DEFAULT '',
	tenant_context	text,
	CONSTRAINT inbox_source_event_key UNIQUE (source_id, event_id),
	CONSTRAINT inbox_claimable_check CHECK (status <> ALL ('{pending,retry,processing}'::text[])
		OR (object_type IS NOT NULL AND object_id IS NOT NULL AND strategy IS NOT NULL))
);
CREATE INDEX inbox_claim_idx ON @extschema@.inbox (id)
	WHERE status IN ('pending', 'retry', 'processing');
CREATE INDEX inbox_object_idx ON @extschema@.inbox (source_id, tenant, object_type, object_id)
	WHERE status IN ('pending', 'retry', 'processing');
CREATE INDEX inbox_claim_token_idx ON @extschema@.inbox (claim_token) WHERE status = 'processing';
-- The worker's claim of work that needs the provider (or a retry, or an
-- expired claim): without it, that scan walked every pending event of the
-- local strategies (_work_local()'s) in inbox_claim_idx to find none, a walk
-- as long as the backlog on every round.
CREATE INDEX inbox_remote_claim_idx ON @extschema@.inbox (id)
	WHERE status IN ('retry', 'processing') OR (status = 'pending' AND strategy = 'fetch');
COMMENT ON TABLE @extschema@.inbox IS
	'One row per logical message, unique on (source_id, event_id): the id the provider keeps across retries.';
COMMENT ON COLUMN @extschema@.inbox.raw_body IS
	'The exact bytes, kept only for quarantined deliveries whose body could not be read.';
COMMENT ON COLUMN @extschema@.inbox.tenant IS
	'The provider account the event belongs to, read from the provider''s contract (Stripe: top-level account, else context; Shopify: X-Shopify-Shop-Domain; GitHub: installation.id); empty for a source with one account. The event id stays unique per source, not per tenant: a provider''s event ids are global to it, so a redelivery is a duplicate whatever tenant it names.';
COMMENT ON COLUMN @extschema@.inbox.tenant_context IS
	'Stripe''s context (Organizations, thin events) when the event carried one: it supersedes the account for the credentials (Stripe-Context).';
COMMENT ON COLUMN @extschema@.inbox.decided_route IS
	'The route (and its version) that decided the event when it was processed.';

CREATE TABLE @extschema@.deliveries (
	id				bigserial PRIMARY KEY,
	source_id		integer NOT NULL,	-- kept by sources_referenced, not a foreign key
	event_id		text NOT NULL,
	delivery_id		text,
	received_at		timestamptz NOT NULL DEFAULT now(),
	body_sha256		bytea NOT NULL,
	body_size		integer NOT NULL CONSTRAINT deliveries_size_check CHECK (body_size >= 0),
	outcome			text NOT NULL
		CONSTRAINT deliveries_outcome_check
		CHECK (outcome = ANY ('{new,duplicate,quarantined}'::text[])),
	tenant			text NOT NULL DEFAULT ''
);
CREATE INDEX deliveries_event_idx ON @extschema@.deliveries (source_id, event_id);
-- prune() deletes by received_at, which follows insertion order: a BRIN
-- range index serves it at a fraction of a btree's cost per insert
CREATE INDEX deliveries_received_idx ON @extschema@.deliveries USING brin (received_at);
COMMENT ON TABLE @extschema@.deliveries IS
	'Audit of every accepted delivery attempt, duplicates included. Bounded by prune().';

CREATE TABLE @extschema@.seen_bodies (
	source_id		integer NOT NULL REFERENCES @extschema@.sources (id) ON DELETE CASCADE,
	body_sha256		bytea NOT NULL,
	event_id		text NOT NULL,
	first_seen_at	timestamptz NOT NULL DEFAULT now(),
	expires_at		timestamptz NOT NULL,
	PRIMARY KEY (source_id, body_sha256)
);
CREATE INDEX seen_bodies_expires_idx ON @extschema@.seen_bodies (expires_at);
COMMENT ON TABLE @extschema@.seen_bodies IS
	'Replay protection for body-only signing schemes: the digest of each body received, with the event id it first came with, until its source''s replay window has passed. Pruned by prune().';
-- dumped: a restore keeps refusing the replays its window still covers
SELECT pg_catalog.pg_extension_config_dump('@extschema@.seen_bodies', '');

---------------------------------------------------------------------------
-- Mirror, leases, transitions, machines, occurrences
---------------------------------------------------------------------------

CREATE TABLE @extschema@.objects (
	source_id		integer NOT NULL,	-- kept by sources_referenced, not a foreign key
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
	tombstone_pending_since timestamptz,
	tenant			text NOT NULL DEFAULT '',
	hidden_since	timestamptz,
	hidden_reason	text,
	tombstone_evidence text
		CONSTRAINT objects_tombstone_evidence_check CHECK (tombstone_evidence IN ('read', 'provider')),
	CONSTRAINT objects_hidden_check CHECK ((hidden_since IS NULL) = (hidden_reason IS NULL)),
	PRIMARY KEY (source_id, tenant, object_type, object_id)
);
COMMENT ON TABLE @extschema@.objects IS
	'The mirror: the latest known state of each provider object.';
COMMENT ON COLUMN @extschema@.objects.tombstone_pending_since IS
	'When a read API first answered 404/410 for the object: the tombstone is saved only when a second such answer comes at least webhook_inbox.tombstone_confirm_delay later, and any save of a present version clears this. NULL: no unconfirmed 404.';
COMMENT ON COLUMN @extschema@.objects.hidden_since IS
	'Since when the provider''s read API cannot see the object although it need not be gone (outside a horizon of webhook_inbox.horizons: a Shopify order older than 60 days without read_all_orders, a tenant whose access ended): its null or 404 is not a tombstone, and what the mirror holds of it since comes from its signed webhooks only. NULL: the read API sees it.';
COMMENT ON COLUMN @extschema@.objects.hidden_reason IS
	'Why the object is hidden: the horizon that hides it. NULL when it is not hidden.';
COMMENT ON COLUMN @extschema@.objects.tombstone_evidence IS
	'What a tombstone rests on. read: a read by id answered 404/410 (or null) twice, an inference, which a later signed webhook with a strictly newer version overrides (the object is revived); provider: the provider said so (a deletion event, an object marked deleted), final. NULL: not deleted.';
COMMENT ON COLUMN @extschema@.objects.fence_token IS
	'Highest claim token that saved this object; saves under an older token are fenced.';

CREATE SEQUENCE @extschema@.claim_token_seq;
COMMENT ON SEQUENCE @extschema@.claim_token_seq IS 'Fencing tokens: strictly increasing claim tokens.';

CREATE TABLE @extschema@.object_leases (
	source_id		integer NOT NULL,	-- kept by sources_referenced, not a foreign key
	object_type		text NOT NULL,
	object_id		text NOT NULL,
	token			bigint NOT NULL UNIQUE,
	holder			text NOT NULL,
	claimed_at		timestamptz NOT NULL DEFAULT now(),
	expires_at		timestamptz NOT NULL,
	tenant			text NOT NULL DEFAULT '',
	PRIMARY KEY (source_id, tenant, object_type, object_id)
);
COMMENT ON TABLE @extschema@.object_leases IS
	'At most one live claim per object; token is the fencing token of the current claim.';

CREATE TABLE @extschema@.transitions (
	id				bigserial PRIMARY KEY,
	source_id		integer NOT NULL,	-- kept by sources_referenced, not a foreign key
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
	at				timestamptz NOT NULL DEFAULT now(),
	tenant			text NOT NULL DEFAULT ''
);
CREATE INDEX transitions_object_idx ON @extschema@.transitions (source_id, tenant, object_type, object_id);
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
	source_id		integer NOT NULL,	-- kept by sources_referenced, not a foreign key
	kind			text NOT NULL CONSTRAINT occurrences_kind_check CHECK (kind <> ''),
	occurrence_id	text NOT NULL CONSTRAINT occurrences_id_check CHECK (occurrence_id <> ''),
	amount			bigint,
	currency		text,
	payload			jsonb,
	first_event_id	bigint,
	recorded_at		timestamptz NOT NULL DEFAULT now(),
	tenant			text NOT NULL DEFAULT '',
	CONSTRAINT occurrences_key UNIQUE (source_id, tenant, kind, occurrence_id)
);
COMMENT ON TABLE @extschema@.occurrences IS
	'Insert-once facts (payment, refund, dispute) unique on their own id.';

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
COMMENT ON TABLE @extschema@.tenants IS
	'The provider accounts a source serves (Stripe Connect accounts, a Shopify app''s shops, a GitHub App''s installations), registered as deliveries name them and as the provider''s own list of them (Stripe GET /v1/accounts) shows them. The sweep reconciles each active tenant under that tenant''s credentials; a source''s empty tenant (its own account) is not listed here.';
COMMENT ON COLUMN @extschema@.tenants.context IS
	'Stripe: the context a delivery carried (Organizations); when set, reads for the tenant send Stripe-Context with it instead of Stripe-Account.';
-- intake's cap on tenants registered by deliveries per source and hour
CREATE INDEX tenants_recent_idx ON @extschema@.tenants (source_id, first_seen) WHERE discovered_by = 'delivery';
COMMENT ON INDEX @extschema@.tenants_recent_idx IS
	'The tenants each source''s deliveries registered lately: what settings.tenants_per_hour counts at intake.';
COMMENT ON COLUMN @extschema@.tenants.status IS
	'The tenant''s state. active: reconciled; disabled: deauthorized or uninstalled, not read; flagged: its credentials were refused, waiting for a person (reason says why).';

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
	IF kind IS NULL OR kind NOT IN (@SOURCE_KINDS@) THEN
		RAISE EXCEPTION 'unknown source kind "%"', kind
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Valid kinds are: @SOURCE_KINDS_TEXT@.';
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
	IF starts_with(secret, 'wi-sealed:') THEN
		RAISE EXCEPTION 'signing secret must not start with "wi-sealed:"'
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'That prefix marks a secret encrypted at rest under webhook_inbox.key_file.',
				  HINT = 'Give the secret in clear; it is encrypted when stored.';
	END IF;
	IF kind = 'standard' AND secret !~ '^(whsec_)?[A-Za-z0-9+/]+={0,2}$' THEN
		RAISE EXCEPTION 'standard webhooks secret must be base64, optionally prefixed with whsec_'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@._check_secret(text, text) IS 'Raises a clear error for an empty or malformed secret.';

CREATE FUNCTION @extschema@._check_pacing(p_settings jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
	k text;
BEGIN
	FOREACH k IN ARRAY ARRAY['rate_limit', 'endpoint_rate_limit'] LOOP
		IF p_settings ? k AND (jsonb_typeof(p_settings -> k) IS DISTINCT FROM 'number'
							   OR (p_settings ->> k)::numeric <= 0) THEN
			RAISE EXCEPTION 'settings.% must be a number of requests per second above 0', k
				USING ERRCODE = 'invalid_parameter_value',
					  DETAIL = format('It is %s.', p_settings -> k),
					  HINT = format('For example: settings => ''{"%s": 20}''; without it, the provider''s documented limit.', k);
		END IF;
	END LOOP;
	IF p_settings ? 'rate_limit_scope' AND p_settings ->> 'rate_limit_scope' IS DISTINCT FROM 'platform'
	   AND p_settings ->> 'rate_limit_scope' IS DISTINCT FROM 'tenant' THEN
		RAISE EXCEPTION 'settings.rate_limit_scope must be "platform" or "tenant"'
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = format('It is %s.', p_settings -> 'rate_limit_scope'),
				  HINT = '"platform" counts the source and all its tenants against one limit, "tenant" each tenant against its own.';
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@._check_pacing(jsonb) IS
	'Raises, saying which and why, when a source''s pacing settings (rate_limit, endpoint_rate_limit, rate_limit_scope) are not what sources_pacing_check allows: create_source() calls it so that the error names the setting rather than the row.';
/*
 * The settings keys a source may have, each with what reads it: the one
 * list create_source() checks a source's settings against.  A change that
 * reads a new key adds it here (and to docs/sql.md's table).
 */
CREATE FUNCTION @extschema@._source_settings(OUT key text, OUT meaning text)
RETURNS SETOF record
LANGUAGE sql IMMUTABLE AS $$
	VALUES
		('api', '(shopify) the Admin API the worker reads, graphql (the default) or rest'),
		('api_version', '(shopify, github) the API version requests name'),
		('auth_format', '(generic) how api_token is written into auth_header'),
		('auth_header', '(generic) the header that carries api_token'),
		('auth_prefix', '(generic) the text before api_token in auth_header'),
		('connect', '(stripe) a Connect platform: its accounts are listed (GET /v1/accounts) and swept'),
		('effects', 'the effects'' options: lookup, retry_same_key, key_retention, list_refunds (docs/effects.md)'),
		('encoding', '(hmac) the signature''s encoding, hex or base64'),
		('endpoint_rate_limit', 'the requests per second one endpoint of the read API may take'),
		('event_id_header', '(generic) the header naming the event id'),
		('event_id_path', '(generic) the JSON path of the event id in the body'),
		('event_type_header', '(generic) the header naming the event type'),
		('event_type_path', '(generic) the JSON path of the event type in the body'),
		('fetch_url', '(generic) the URL template reading one object'),
		('github_app_id', '(github) the GitHub App''s id (set by set_github_app())'),
		('github_client_id', '(github) the GitHub App''s client id (set by set_github_app())'),
		('header', '(hmac) the header carrying the signature'),
		('id_header', '(hmac) the header naming the delivery id'),
		('items_path', '(generic) the JSON path of the items of a listing'),
		('list_url', '(generic) the URL template listing objects'),
		('prefix', '(hmac) the text before the signature in its header'),
		('rate_limit', 'the requests per second the read API may take'),
		('rate_limit_scope', 'what rate_limit counts: the source or each tenant'),
		('repo', '(github) the repositories a source that is no app lists'),
		('shop_base_url', '(shopify app) where a shop''s API lives, {shop} replaced (a simulator)'),
		('shopify_client_id', '(shopify app) the client id its token refreshes send'),
		('status_path', '(generic) the JSON path of an object''s status'),
		('stripe_version', '(stripe) the Stripe-Version every request pins'),
		('template', '(hmac) what is signed, {body} and {timestamp} replaced'),
		('tenants', 'the source serves several tenants (a Shopify app''s shops)'),
		('tenants_per_hour', 'the new tenants deliveries may register per hour'),
		('timestamp_header', '(hmac) the header carrying the signed timestamp'),
		('types', '(generic) the object types the read API lists'),
		('unwrap_path', '(generic) the JSON path of the object in a read answer'),
		('version_path', '(generic) the JSON path of an object''s version')
$$;
COMMENT ON FUNCTION @extschema@._source_settings() IS
	'Every settings key a source may have and what reads it: create_source() refuses any other.';

CREATE FUNCTION @extschema@.create_source(
	name text, kind text, secret text,
	tolerance interval DEFAULT '300 seconds',
	api_base text DEFAULT NULL, api_token text DEFAULT NULL,
	settings jsonb DEFAULT '{}', enabled boolean DEFAULT true)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	new_id integer;
	unknown text;
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
	PERFORM webhook_inbox._check_pacing(settings);
	/* a mistyped key would be ignored, and surface much later as something else */
	SELECT string_agg(pg_catalog.format('"%s"', k), ', ' ORDER BY k) INTO unknown
	  FROM pg_catalog.jsonb_object_keys(settings) k
	 WHERE k NOT IN (SELECT x.key FROM webhook_inbox._source_settings() x);
	IF unknown IS NOT NULL THEN
		RAISE EXCEPTION 'unknown settings key %', unknown
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'The known keys: ' || (SELECT string_agg(x.key, ', ' ORDER BY x.key)
												  FROM webhook_inbox._source_settings() x) || '.',
				  HINT = 'SELECT * FROM webhook_inbox._source_settings() says what each one does.';
	END IF;
	IF kind = 'shopify' AND settings ? 'api' AND settings ->> 'api' NOT IN ('graphql', 'rest') THEN
		RAISE EXCEPTION 'unknown Shopify API "%"', settings ->> 'api'
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Set settings.api to "graphql" (the default) or "rest".';
	END IF;
	IF kind = 'hmac' AND coalesce(settings->>'header', '') = '' THEN
		RAISE EXCEPTION 'an hmac source needs settings.header'
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'For example: settings => ''{"header": "X-Signature", "prefix": "sha256=", "encoding": "hex"}''.';
	END IF;
	IF starts_with(api_token, 'wi-sealed:') THEN
		RAISE EXCEPTION 'api_token must not start with "wi-sealed:"'
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'That prefix marks a secret encrypted at rest under webhook_inbox.key_file.',
				  HINT = 'Give the token in clear; it is encrypted when stored.';
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
	IF new_secret = ANY (webhook_inbox._source_secrets(s.id, s.signing_secrets)) THEN
		RAISE EXCEPTION 'source "%" already has this secret', name
			USING ERRCODE = 'duplicate_object';
	END IF;
	/* sealed by the trigger sources_seal while a key file is set */
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
	plain text[];
BEGIN
	s := webhook_inbox._source_for_update(name);
	plain := webhook_inbox._source_secrets(s.id, s.signing_secrets);
	IF old_secret IS NULL OR NOT old_secret = ANY (plain) THEN
		RAISE EXCEPTION 'source "%" has no such secret', name
			USING ERRCODE = 'undefined_object';
	END IF;
	IF cardinality(s.signing_secrets) = 1 THEN
		RAISE EXCEPTION 'cannot retire the only secret of source "%"', name
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  HINT = 'Add the new secret with rotate_secret() first.';
	END IF;
	/* by position: a sealed secret is compared in clear */
	UPDATE webhook_inbox.sources
	   SET signing_secrets = ARRAY(SELECT u.x FROM unnest(s.signing_secrets, plain) WITH ORDINALITY AS u(x, p, o)
								WHERE u.p <> old_secret ORDER BY u.o),
		   updated_at = now()
	 WHERE id = s.id;
	RETURN cardinality(s.signing_secrets) - 1;
END
$$;
COMMENT ON FUNCTION @extschema@.retire_secret(text, text) IS
	'Removes a signing secret (never the last one). Returns the number of current secrets.';

CREATE FUNCTION @extschema@.seal_secrets() RETURNS integer
LANGUAGE plpgsql AS $$
	/*
	 * Encrypts, under the key of webhook_inbox.key_file, every signing
	 * secret and api_token stored in clear (those of a database that had no
	 * key file, or of 0.1.0: the upgrade calls this when a key file is set).
	 */
DECLARE
	n integer;
BEGIN
	IF NOT webhook_inbox._key_configured() THEN
		RAISE EXCEPTION 'webhook_inbox.key_file is not set'
			USING ERRCODE = 'config_file_error',
				  DETAIL = 'Sources'' secrets are encrypted at rest under a key kept in a file outside the database.',
				  HINT = 'Create a file holding 64 hexadecimal digits (for example: openssl rand -hex 32 > FILE; chmod 600 FILE), set webhook_inbox.key_file to its path, then call seal_secrets() again.';
	END IF;
	/* the key file is readable and holds a key, even when nothing is in clear */
	PERFORM webhook_inbox._key_id(pg_catalog.current_setting('webhook_inbox.key_file'));
	/* the trigger sources_seal seals what is written back */
	UPDATE webhook_inbox.sources s SET signing_secrets = s.signing_secrets, api_token = s.api_token
	 WHERE webhook_inbox._source_in_clear(s.signing_secrets, s.api_token);
	GET DIAGNOSTICS n = ROW_COUNT;
	RETURN n;
END
$$;
COMMENT ON FUNCTION @extschema@.seal_secrets() IS
	'Encrypts every source''s signing secrets and api_token still in clear under the key of webhook_inbox.key_file; returns the sources changed. The upgrade calls it when a key file is set; afterwards the trigger sources_seal keeps every new secret sealed.';

CREATE FUNCTION @extschema@.reencrypt_source_secrets(old_key_file text) RETURNS integer
LANGUAGE plpgsql AS $$
	/*
	 * After webhook_inbox.key_file was pointed at a new key: every source
	 * secret sealed under another key is decrypted with old_key_file's and
	 * written back in clear, for the trigger sources_seal to seal it under
	 * the current one, in this transaction (rows locked).
	 */
DECLARE
	cur text := webhook_inbox._key_id(pg_catalog.current_setting('webhook_inbox.key_file'));
	n integer := 0;
	r record;
BEGIN
	IF old_key_file IS NULL OR old_key_file = '' THEN
		RAISE EXCEPTION 'the old key file must be named' USING ERRCODE = 'invalid_parameter_value',
			HINT = 'Give the file the secrets were encrypted with before webhook_inbox.key_file changed.';
	END IF;
	FOR r IN SELECT s.id, s.signing_secrets, s.api_token FROM webhook_inbox.sources s
			  WHERE EXISTS (SELECT 1 FROM unnest(s.signing_secrets) x WHERE webhook_inbox._text_key_id(x) <> cur)
				 OR webhook_inbox._text_key_id(s.api_token) <> cur
			  ORDER BY s.id
			  FOR UPDATE
	LOOP
		UPDATE webhook_inbox.sources s
		   SET signing_secrets = ARRAY(
				SELECT CASE WHEN webhook_inbox._text_key_id(u.x) <> cur
							THEN webhook_inbox._unseal_text_with(u.x,
									webhook_inbox._source_context(r.id, 'signing_secrets'), old_key_file)
							ELSE u.x END
				  FROM unnest(r.signing_secrets) WITH ORDINALITY AS u(x, o) ORDER BY u.o),
			   api_token = CASE WHEN webhook_inbox._text_key_id(r.api_token) <> cur
								THEN webhook_inbox._unseal_text_with(r.api_token,
										webhook_inbox._source_context(r.id, 'api_token'), old_key_file)
								ELSE r.api_token END,
			   updated_at = now()
		 WHERE s.id = r.id;
		n := n + 1;
	END LOOP;
	RETURN n;
END
$$;
COMMENT ON FUNCTION @extschema@.reencrypt_source_secrets(text) IS
	'Re-encrypts, under the key of webhook_inbox.key_file, every source''s signing secret and api_token sealed under the key of old_key_file; returns the sources changed. Rotate the key: write a new key file, point webhook_inbox.key_file at it, call this and reencrypt_credentials() with the old file, then remove the old file.';

/*
 * All the receiver's role can read: what verifying a delivery needs, of
 * enabled sources only.  Their current signing secrets (several during a
 * rotation, in clear: unsealed under webhook_inbox.key_file) and, of the
 * settings, only the keys of the hmac scheme; never api_token, the rest of
 * settings, disabled sources or retired secrets.
 */
CREATE FUNCTION @extschema@.receiver_sources()
RETURNS TABLE (name text, kind text, signing_secrets text[], tolerance_seconds integer, settings jsonb)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
	SELECT s.name, s.kind, webhook_inbox._source_secrets(s.id, s.signing_secrets), extract(epoch FROM s.tolerance)::integer,
		   coalesce((SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(s.settings) e
					  WHERE e.key IN ('header', 'prefix', 'encoding', 'timestamp_header', 'template', 'id_header')),
					'{}'::jsonb)
	  FROM webhook_inbox.sources s
	 WHERE s.enabled
	 ORDER BY s.name
$$;
COMMENT ON FUNCTION @extschema@.receiver_sources() IS
	'What the receiver needs to verify deliveries, and nothing else: enabled sources with their current secrets and the hmac verification settings (header, prefix, encoding, timestamp_header, template, id_header); never api_token.';

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

/*
 * inbox and deliveries, and the worker's mirror, leases, transitions and
 * occurrences refer to sources without a foreign key: a per-row check there
 * cost a tenth of intake, which already reads each batch's sources and holds
 * them FOR KEY SHARE until it commits (as the foreign key did), and as much
 * of the worker's round, whose rows all come from events of those sources.
 * This trigger keeps the same guarantee from the other side: a source that
 * any of them refers to cannot be deleted, have its id changed, or be
 * truncated away.
 */
CREATE FUNCTION @extschema@._sources_referenced() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF TG_LEVEL = 'STATEMENT' THEN
		IF EXISTS (SELECT FROM webhook_inbox.inbox) OR EXISTS (SELECT FROM webhook_inbox.deliveries) THEN
			RAISE EXCEPTION 'cannot truncate sources: inbox events and deliveries refer to them'
				USING ERRCODE = 'foreign_key_violation',
					  HINT = 'Disable a source instead (enabled = false); prune() removes old events.';
		END IF;
		IF EXISTS (SELECT FROM webhook_inbox.objects) OR EXISTS (SELECT FROM webhook_inbox.occurrences)
		   OR EXISTS (SELECT FROM webhook_inbox.transitions) OR EXISTS (SELECT FROM webhook_inbox.object_leases) THEN
			RAISE EXCEPTION 'cannot truncate sources: mirrored objects, transitions or occurrences refer to them'
				USING ERRCODE = 'foreign_key_violation', HINT = 'Disable a source instead (enabled = false).';
		END IF;
		RETURN NULL;
	END IF;
	IF TG_OP = 'UPDATE' AND NEW.id = OLD.id THEN
		RETURN NEW;
	END IF;
	IF EXISTS (SELECT FROM webhook_inbox.inbox i WHERE i.source_id = OLD.id)
	   OR EXISTS (SELECT FROM webhook_inbox.deliveries d WHERE d.source_id = OLD.id) THEN
		RAISE EXCEPTION 'source "%" is still referenced by inbox events or deliveries', OLD.name
			USING ERRCODE = 'foreign_key_violation',
				  HINT = 'Disable the source instead (enabled = false); prune() removes old events.';
	END IF;
	IF EXISTS (SELECT FROM webhook_inbox.objects o WHERE o.source_id = OLD.id)
	   OR EXISTS (SELECT FROM webhook_inbox.occurrences o WHERE o.source_id = OLD.id)
	   OR EXISTS (SELECT FROM webhook_inbox.transitions t WHERE t.source_id = OLD.id)
	   OR EXISTS (SELECT FROM webhook_inbox.object_leases l WHERE l.source_id = OLD.id) THEN
		RAISE EXCEPTION 'source "%" is still referenced by mirrored objects, transitions or occurrences', OLD.name
			USING ERRCODE = 'foreign_key_violation', HINT = 'Disable the source instead (enabled = false).';
	END IF;
	IF TG_OP = 'DELETE' THEN
		RETURN OLD;
	END IF;
	RETURN NEW;
END
$$;
COMMENT ON FUNCTION @extschema@._sources_referenced() IS
	'Refuses deleting, renumbering or truncating sources that inbox events, deliveries, mirrored objects, leases, transitions or occurrences refer to (their foreign key, checked once per change of sources instead of once per row).';
CREATE TRIGGER sources_referenced BEFORE DELETE OR UPDATE OF id
	ON @extschema@.sources FOR EACH ROW EXECUTE FUNCTION @extschema@._sources_referenced();
CREATE TRIGGER sources_referenced_truncate BEFORE TRUNCATE
	ON @extschema@.sources FOR EACH STATEMENT EXECUTE FUNCTION @extschema@._sources_referenced();

---------------------------------------------------------------------------
-- Routing
---------------------------------------------------------------------------

CREATE FUNCTION @extschema@._pattern_like(pattern text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
	/* no SET search_path (it is inlined): every name qualified */
	SELECT pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(pattern,
		'\', '\\'), '%', '\%'), '_', '\_'), '*', '%')
$$;
COMMENT ON FUNCTION @extschema@._pattern_like(text) IS 'Turns a route pattern with * wildcards into a LIKE pattern.';

CREATE FUNCTION @extschema@._scalar_text(v jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT CASE
		WHEN pg_catalog.jsonb_typeof(v) OPERATOR(pg_catalog.=) ANY ('{string,number,boolean}'::pg_catalog.text[])
			THEN v OPERATOR(pg_catalog.#>>) '{}'::pg_catalog.text[]
		ELSE NULL END
$$;
COMMENT ON FUNCTION @extschema@._scalar_text(jsonb) IS 'Text of a JSON scalar; NULL for null, objects and arrays.';

CREATE FUNCTION @extschema@._path_text(p_payload jsonb, p_path jsonpath) RETURNS text
AS 'MODULE_PATHNAME', 'wi_path_text'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@._path_text(jsonb, jsonpath) IS
	'_scalar_text(jsonb_path_query_first(p_payload, p_path)) in one call: a lax path of keys is walked through the objects directly, any other path (or one that meets an array) goes to the jsonpath executor, with the same values and errors.';

CREATE FUNCTION @extschema@._version_of(v jsonb) RETURNS numeric
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	/* numbers as they are; numeric strings; ISO timestamps as epoch seconds */
	SELECT CASE
		WHEN pg_catalog.jsonb_typeof(v) OPERATOR(pg_catalog.=) 'number'
			THEN (v OPERATOR(pg_catalog.#>>) '{}'::pg_catalog.text[])::pg_catalog.numeric
		WHEN pg_catalog.jsonb_typeof(v) OPERATOR(pg_catalog.=) 'string'
			AND (v OPERATOR(pg_catalog.#>>) '{}'::pg_catalog.text[]) OPERATOR(pg_catalog.~) '^-?[0-9]+(\.[0-9]+)?$'
			THEN (v OPERATOR(pg_catalog.#>>) '{}'::pg_catalog.text[])::pg_catalog.numeric
		WHEN pg_catalog.jsonb_typeof(v) OPERATOR(pg_catalog.=) 'string'
			THEN extract(epoch FROM (v OPERATOR(pg_catalog.#>>) '{}'::pg_catalog.text[])::pg_catalog.timestamptz)
		ELSE NULL END
$$;
COMMENT ON FUNCTION @extschema@._version_of(jsonb) IS
	'A provider version as a number: numbers, numeric strings, or timestamps as epoch seconds.';

CREATE FUNCTION @extschema@._path_version(p_payload jsonb, p_path jsonpath) RETURNS numeric
AS 'MODULE_PATHNAME', 'wi_path_version'
LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@._path_version(jsonb, jsonpath) IS
	'_version_of(jsonb_path_query_first(p_payload, p_path)) in one call, walked as _path_text() walks its path, with the same values and errors.';

/*
 * The version rule, written once: whether an incoming version of an object
 * wins over the stored one.  upsert_object() (guard.c) asks it through SPI;
 * the worker's set-based saves (_work_events' version walk and
 * _save_presents) call it inside their statements, where the planner
 * inlines it (an IMMUTABLE SQL function of one expression, no SET clause:
 * sql/search_path.sql leaves it unpinned).  p_fresh: no row was stored
 * before; p_ver / p_old_ver: the incoming and the stored version (NULL:
 * none); p_del / p_old_del: the incoming and the stored tombstone; p_same:
 * the incoming status and state equal the stored ones.
 */
CREATE FUNCTION @extschema@._version_rule(p_fresh boolean, p_ver numeric, p_old_ver numeric,
	p_del boolean, p_old_del boolean, p_same boolean) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT CASE WHEN p_fresh THEN 'applied'
				/* no version: only the content tells a duplicate */
				WHEN p_ver IS NULL THEN CASE WHEN p_same THEN 'duplicate' ELSE 'applied' END
				/* a tombstone that holds (_tombstone_holds()) is final for versioned objects */
				WHEN p_old_del AND NOT p_del THEN 'stale'
				WHEN p_old_ver IS NULL OR p_ver OPERATOR(pg_catalog.>) p_old_ver THEN 'applied'
				WHEN p_ver OPERATOR(pg_catalog.<) p_old_ver THEN 'stale'
				WHEN p_same THEN 'duplicate'
				/* equal version, other content: never last-write-wins */
				ELSE 'tie' END
$$;
COMMENT ON FUNCTION @extschema@._version_rule(boolean, numeric, numeric, boolean, boolean, boolean) IS
	'The version rule of the mirror, for every path that saves an object (upsert_object(), the worker''s version walk, the save of fetched presents): applied, duplicate, stale or tie.';

/*
 * Whether a stored tombstone still stands against an incoming version, the
 * other half of the version rule: a tombstone the provider stated (a
 * deletion event, an object marked deleted) is final; one a read inferred
 * (404 twice: evidence read) yields to a strictly newer version, which
 * revives the object.  Inlined like _version_rule(), whose p_old_del it
 * gives.
 */
CREATE FUNCTION @extschema@._tombstone_holds(p_old_del boolean, p_evidence text, p_ver numeric, p_old_ver numeric)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT p_old_del AND NOT coalesce(p_evidence OPERATOR(pg_catalog.=) 'read'
									  AND p_ver OPERATOR(pg_catalog.>) p_old_ver, false)
$$;
COMMENT ON FUNCTION @extschema@._tombstone_holds(boolean, text, numeric, numeric) IS
	'Whether a stored tombstone stands against an incoming version: always when the provider stated it, and for one a read inferred (evidence read) unless the incoming version is strictly newer.';

CREATE FUNCTION @extschema@._time_of(v jsonb) RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT CASE
		WHEN pg_catalog.jsonb_typeof(v) OPERATOR(pg_catalog.=) 'number'
			THEN pg_catalog.to_timestamp((v OPERATOR(pg_catalog.#>>) '{}'::pg_catalog.text[])::pg_catalog.float8)
		WHEN pg_catalog.jsonb_typeof(v) OPERATOR(pg_catalog.=) 'string'
			AND (v OPERATOR(pg_catalog.#>>) '{}'::pg_catalog.text[]) OPERATOR(pg_catalog.~) '^[0-9]+$'
			THEN pg_catalog.to_timestamp((v OPERATOR(pg_catalog.#>>) '{}'::pg_catalog.text[])::pg_catalog.float8)
		WHEN pg_catalog.jsonb_typeof(v) OPERATOR(pg_catalog.=) 'string'
			THEN (v OPERATOR(pg_catalog.#>>) '{}'::pg_catalog.text[])::pg_catalog.timestamptz
		ELSE NULL END
$$;
COMMENT ON FUNCTION @extschema@._time_of(jsonb) IS 'A provider time: epoch seconds or an ISO-8601 string.';

/*
 * The route of one (source, kind, event type): the most specific match,
 * source over kind, then higher priority, then the longer pattern; a preset
 * with a row of the user's of the same key (sql/presets.sql, routes_keep)
 * is not a candidate.  The one rule of which route an event has: intake's
 * statement that reads the routes of a batch (extension/intake_classify.c),
 * _classify() and _classify_batch() all take it from here.  No SET clause,
 * so that the planner inlines it into intake's statement and
 * _classify_batch(); every function and operator is qualified (see
 * sql/search_path.sql).
 */
CREATE FUNCTION @extschema@._route_of(p_source_id integer, p_kind text, p_event_type text)
RETURNS TABLE (id integer, version integer, strategy text, class text, object_type text,
	object_type_path jsonpath, object_id_path jsonpath, version_path jsonpath,
	time_path jsonpath, status_path jsonpath, tombstone boolean)
LANGUAGE sql STABLE
AS $$
	SELECT x.id, x.version, x.strategy, x.class, x.object_type, x.object_type_path,
		   x.object_id_path, x.version_path, x.time_path, x.status_path, x.tombstone
	  FROM webhook_inbox.routes x
	 WHERE (x.source_id OPERATOR(pg_catalog.=) p_source_id OR x.source_kind OPERATOR(pg_catalog.=) p_kind)
	   AND p_event_type OPERATOR(pg_catalog.~~) webhook_inbox._pattern_like(x.event_type)
	   AND NOT (x.preset AND EXISTS (SELECT 1 FROM webhook_inbox.routes u
			WHERE NOT u.preset AND u.event_type OPERATOR(pg_catalog.=) x.event_type
			  AND (u.source_kind OPERATOR(pg_catalog.=) x.source_kind
				   OR (u.source_kind IS NULL AND x.source_kind IS NULL))
			  AND (u.source_id OPERATOR(pg_catalog.=) x.source_id
				   OR (u.source_id IS NULL AND x.source_id IS NULL))))
	 ORDER BY (x.source_id IS NOT NULL) DESC, x.priority DESC, pg_catalog.length(x.event_type) DESC, x.id
	 LIMIT 1
$$;
COMMENT ON FUNCTION @extschema@._route_of(integer, text, text) IS
	'The most specific route of an event type for a source (and its kind), with the paths classification reads.';

/*
 * Classify one event: its route (_route_of) and that route's paths on the
 * payload, as intake applies them in C (extension/route_eval.c; the two are
 * compared in regress/sql/23_route_paths.sql).  Used by reclassify() and
 * requeue_where().  No SET search_path (see sql/search_path.sql): every
 * function and operator is qualified.
 */
CREATE FUNCTION @extschema@._classify(p_source_id integer, p_kind text, p_event_type text, p_payload jsonb,
	OUT route_id integer, OUT route_version integer, OUT strategy text, OUT object_type text,
	OUT object_id text, OUT version numeric, OUT provider_time timestamptz, OUT status_value text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
	r record;
BEGIN
	SELECT * INTO r FROM webhook_inbox._route_of(p_source_id, p_kind, p_event_type);
	IF NOT FOUND THEN
		RETURN;
	END IF;
	route_id := r.id;
	route_version := r.version;
	strategy := r.strategy;
	IF r.class OPERATOR(pg_catalog.=) 'ignore' THEN
		RETURN;
	END IF;
	object_type := coalesce(webhook_inbox._scalar_text(pg_catalog.jsonb_path_query_first(p_payload, r.object_type_path)),
							r.object_type);
	object_id := webhook_inbox._scalar_text(pg_catalog.jsonb_path_query_first(p_payload, r.object_id_path));
	IF r.version_path IS NOT NULL THEN
		version := webhook_inbox._version_of(pg_catalog.jsonb_path_query_first(p_payload, r.version_path));
	END IF;
	IF r.time_path IS NOT NULL THEN
		provider_time := webhook_inbox._time_of(pg_catalog.jsonb_path_query_first(p_payload, r.time_path));
	END IF;
	IF r.status_path IS NOT NULL THEN
		status_value := webhook_inbox._scalar_text(pg_catalog.jsonb_path_query_first(p_payload, r.status_path));
	END IF;
	IF r.tombstone THEN
		status_value := coalesce(status_value, 'deleted');
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@._classify(integer, text, text, jsonb) IS
	'Finds the route of an event and extracts object type, id, version, time and status.';

/*
 * Classify a batch of events in one statement: the most specific route of
 * each distinct (source, type), then its paths on each payload.  Rows come
 * back with their 1-based position in the arrays.  Intake no longer calls
 * it: it reads the routes through _route_of() and applies their paths in C
 * (extension/route_eval.c).  It stays as the set-based SQL form of the same
 * rule, which regress/sql/20_intake_batch.sql holds equal to _classify()
 * and bench/receiver.sh times beside intake as a read-only ceiling.
 *
 * A SQL function without a SET clause, so that the planner inlines it:
 * every function and operator is qualified (see sql/search_path.sql).
 */
CREATE FUNCTION @extschema@._classify_batch(p_source_ids integer[], p_kinds text[],
	p_event_types text[], p_payloads jsonb[])
RETURNS TABLE (ord bigint, route_id integer, route_version integer, strategy text,
	object_type text, object_id text, version numeric, provider_time timestamptz,
	status_value text)
LANGUAGE sql STABLE
AS $$
	WITH e AS (
		SELECT * FROM ROWS FROM (pg_catalog.unnest(p_source_ids), pg_catalog.unnest(p_kinds),
								 pg_catalog.unnest(p_event_types), pg_catalog.unnest(p_payloads))
			WITH ORDINALITY AS e(source_id, kind, event_type, payload, ord)
	), m AS (
		SELECT t.source_id AS for_source, t.event_type AS for_type, r.*
		  FROM (SELECT DISTINCT e.source_id, e.kind, e.event_type FROM e) t
		 CROSS JOIN LATERAL webhook_inbox._route_of(t.source_id, t.kind, t.event_type) r
	), s AS (
		/*
		 * Each path once per event: the helpers are inlined, and an
		 * argument they name twice would be evaluated twice (OFFSET 0 keeps
		 * this level from being flattened into the one that applies them).
		 */
		SELECT e.ord, m.id, m.version, m.strategy, m.class, m.object_type, m.tombstone,
			   CASE WHEN m.class OPERATOR(pg_catalog.<>) 'ignore' AND m.status_path IS NOT NULL
					THEN pg_catalog.jsonb_path_query_first(e.payload, m.status_path) END AS j_status,
			   CASE WHEN m.class OPERATOR(pg_catalog.<>) 'ignore'
					THEN pg_catalog.jsonb_path_query_first(e.payload, m.object_type_path) END AS j_type,
			   CASE WHEN m.class OPERATOR(pg_catalog.<>) 'ignore'
					THEN pg_catalog.jsonb_path_query_first(e.payload, m.object_id_path) END AS j_id,
			   CASE WHEN m.class OPERATOR(pg_catalog.<>) 'ignore' AND m.version_path IS NOT NULL
					THEN pg_catalog.jsonb_path_query_first(e.payload, m.version_path) END AS j_version,
			   CASE WHEN m.class OPERATOR(pg_catalog.<>) 'ignore' AND m.time_path IS NOT NULL
					THEN pg_catalog.jsonb_path_query_first(e.payload, m.time_path) END AS j_time
		  FROM e LEFT JOIN m ON m.for_source OPERATOR(pg_catalog.=) e.source_id
							AND m.for_type OPERATOR(pg_catalog.=) e.event_type
		OFFSET 0
	)
	SELECT s.ord, s.id, s.version, s.strategy,
		   CASE WHEN s.class OPERATOR(pg_catalog.<>) 'ignore'
				THEN coalesce(webhook_inbox._scalar_text(s.j_type), s.object_type) END,
		   CASE WHEN s.class OPERATOR(pg_catalog.<>) 'ignore' THEN webhook_inbox._scalar_text(s.j_id) END,
		   CASE WHEN s.class OPERATOR(pg_catalog.<>) 'ignore' AND s.j_version IS NOT NULL
				THEN webhook_inbox._version_of(s.j_version) END,
		   CASE WHEN s.class OPERATOR(pg_catalog.<>) 'ignore' AND s.j_time IS NOT NULL
				THEN webhook_inbox._time_of(s.j_time) END,
		   CASE WHEN s.class OPERATOR(pg_catalog.<>) 'ignore' AND s.tombstone
				THEN coalesce(webhook_inbox._scalar_text(s.j_status), 'deleted')
				ELSE webhook_inbox._scalar_text(s.j_status) END
	  FROM s
$$;
COMMENT ON FUNCTION @extschema@._classify_batch(integer[], text[], text[], jsonb[]) IS
	'Finds the route of each event of a batch and extracts object type, id, version, time and status, set-based.';

CREATE FUNCTION @extschema@._routes_bump() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	/* as jsonb: jsonpath columns have no equality operator for a row comparison */
	IF to_jsonb(NEW) IS DISTINCT FROM to_jsonb(OLD) THEN
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
	'Records one verified delivery. headers is {name, value, name, value, ...}. Returns new, duplicate or quarantined; raises for an unknown or disabled source and an over-long id.';

-- What intake's two writing statements read: the rows of the batch in
-- progress, straight from C (one tuplestore, not an array per column).
CREATE FUNCTION @extschema@._intake_inbox_rows(batch bigint)
RETURNS TABLE (source_id integer, event_id text, correlation_id text, event_type text,
	object_type text, object_id text, strategy text, route_id integer, route_version integer,
	provider_version numeric, provider_time timestamptz, status_value text, payload jsonb,
	raw_body bytea, body_sha256 bytea, status text, reason text, tenant text, tenant_context text)
AS 'MODULE_PATHNAME', 'wi_intake_inbox_rows'
LANGUAGE C VOLATILE ROWS 64;
COMMENT ON FUNCTION @extschema@._intake_inbox_rows(bigint) IS
	'Internal to intake_batch(): the inbox rows of the batch in progress, for its INSERT. Raises when called with any other handle.';
CREATE FUNCTION @extschema@._intake_delivery_rows(batch bigint)
RETURNS TABLE (source_id integer, event_id text, delivery_id text, body_sha256 bytea,
	body_size integer, outcome text, tenant text)
AS 'MODULE_PATHNAME', 'wi_intake_delivery_rows'
LANGUAGE C VOLATILE ROWS 64;
COMMENT ON FUNCTION @extschema@._intake_delivery_rows(bigint) IS
	'Internal to intake_batch(): the deliveries rows of the batch in progress, for its INSERT. Raises when called with any other handle.';

CREATE FUNCTION @extschema@.intake_batch(sources text[], headers text[], bodies bytea[])
RETURNS TABLE (ord integer, outcome text, reason text)
AS 'MODULE_PATHNAME', 'wi_intake_batch'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.intake_batch(text[], text[], bytea[]) IS
	'The receiver''s entry: records a batch of verified deliveries set-based. Delivery i is sources[i], row i of the two-dimensional headers array ({name, value, ...} padded with NULL pairs) and bodies[i]. One row per delivery: new, duplicate, quarantined or refused (nothing stored), with a reason.';

---------------------------------------------------------------------------
-- Claims (C) and their completion
---------------------------------------------------------------------------

CREATE FUNCTION @extschema@.claim(worker text, max_objects integer DEFAULT 10,
	lease interval DEFAULT '30 seconds', fetch_delay interval DEFAULT NULL)
RETURNS TABLE (claim_token bigint, source text, source_id integer, object_type text, object_id text,
			   event_ids bigint[], strategy text, expires_at timestamptz, tenant text)
AS 'MODULE_PATHNAME', 'wi_claim'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.claim(text, integer, interval, interval) IS
	'Claims up to max_objects objects with pending events, all of an object''s events in one claim, under a lease with a fresh fencing token. Fetch-strategy events wait fetch_delay (default webhook_inbox.fetch_delay) so a burst costs one fetch. An object is (source, tenant, object type, object id): tenant is the provider account it belongs to, empty for a source with one account.';

CREATE FUNCTION @extschema@._claim_worker(worker text, max_objects integer, lease interval,
	after_local boolean)
RETURNS TABLE (claim_token bigint, source text, source_id integer, object_type text, object_id text,
			   event_ids bigint[], strategy text, expires_at timestamptz, tenant text)
AS 'MODULE_PATHNAME', 'wi_claim_worker'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@._claim_worker(text, integer, interval, boolean) IS
	'claim() for the background worker: the same claims, its candidate scan started where its last full scan (within a second) found the first claimable event, fetch_delay the setting''s; after_local leaves the pending events of the local strategies to _work_local(), which took them first.';

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

CREATE FUNCTION @extschema@._fences(p_source_id integer[], p_tenant text[], p_object_type text[],
	p_object_id text[], p_token bigint[])
RETURNS TABLE (source_id integer, tenant text, object_type text, object_id text, token bigint, fenced boolean)
LANGUAGE sql STABLE AS $$
	/*
	 * The one fence check, for a set of (object, claim token) at once:
	 * another claim holds the object, or a newer token saved it.  Each pair
	 * comes back with its verdict.  The planner inlines it into the
	 * calling statement (a set-returning SQL function, not strict,
	 * no SET clause), so a round asks its probes in one plan, where a call
	 * of _fenced() per object started an executor for each.  A statement
	 * whose plan is kept (PL/pgSQL's) would keep probes planned on the
	 * mirror as it was, a scan of it once it was empty: _work_local() runs
	 * it with EXECUTE, planned for each round.  No SET search_path (see
	 * sql/search_path.sql): every operator qualified.
	 */
	SELECT c.sid, c.ten, c.typ, c.oid, c.tok, c.tok IS NOT NULL AND (
		EXISTS (SELECT 1 FROM webhook_inbox.object_leases l
				 WHERE l.source_id OPERATOR(pg_catalog.=) c.sid
				   AND l.tenant OPERATOR(pg_catalog.=) c.ten
				   AND l.object_type OPERATOR(pg_catalog.=) c.typ
				   AND l.object_id OPERATOR(pg_catalog.=) c.oid
				   AND l.token OPERATOR(pg_catalog.<>) c.tok)
		OR EXISTS (SELECT 1 FROM webhook_inbox.objects o
					WHERE o.source_id OPERATOR(pg_catalog.=) c.sid
					  AND o.tenant OPERATOR(pg_catalog.=) c.ten
					  AND o.object_type OPERATOR(pg_catalog.=) c.typ
					  AND o.object_id OPERATOR(pg_catalog.=) c.oid
					  AND o.fence_token OPERATOR(pg_catalog.>) c.tok))
	  FROM ROWS FROM (pg_catalog.unnest(p_source_id), pg_catalog.unnest(p_tenant), pg_catalog.unnest(p_object_type),
					  pg_catalog.unnest(p_object_id), pg_catalog.unnest(p_token))
		   AS c(sid, ten, typ, oid, tok)
$$;
COMMENT ON FUNCTION @extschema@._fences(integer[], text[], text[], text[], bigint[]) IS
	'The fence check of many (object, claim token) pairs in one statement, each returned with fenced: true where a save under that token must be refused (another claim holds the object, or a newer token has saved it). _fenced() is its one-pair form.';

CREATE FUNCTION @extschema@._fenced(p_source_id integer, p_tenant text, p_object_type text, p_object_id text,
	p_token bigint)
RETURNS boolean
LANGUAGE sql STABLE AS $$
	/*
	 * _fences() for one pair.  Never inlined (its body has subqueries).
	 * Before 18 each statement that calls it plans these probes afresh,
	 * for the tables as they are now; from 18 a SQL function's plans stay
	 * in the session's plan cache, where a generic plan made on a small
	 * mirror can outlive it, so the worker discards its plans as its work
	 * grows (worker.c).  Set-based callers ask it once per row (OFFSET 0
	 * where a pulled-up subquery would copy the call), or ask _fences()
	 * once.
	 */
	SELECT f.fenced FROM webhook_inbox._fences(ARRAY[p_source_id], ARRAY[p_tenant], ARRAY[p_object_type],
											   ARRAY[p_object_id], ARRAY[p_token]) f
$$;
COMMENT ON FUNCTION @extschema@._fenced(integer, text, text, text, bigint) IS
	'True when a save under this claim token must be refused: another claim holds the object, or a newer token has saved it. Every guarded save asks this.';

CREATE FUNCTION @extschema@.upsert_object(source text, object_type text, object_id text,
	version numeric, status text, state jsonb, claim_token bigint DEFAULT NULL,
	deleted boolean DEFAULT false, cause text DEFAULT NULL, event_id bigint DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'wi_upsert_object'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.upsert_object(text, text, text, numeric, text, jsonb, bigint, boolean, text, bigint) IS
	'Saves an object only if its version is strictly newer (NULL version: a fetched current state). A tombstone (deleted) rests on a read when cause names a read''s 404 or 410 (fetch: http 404), which a strictly newer version revives (recorded in repairs as revived), and on the provider''s word otherwise, final. Returns applied, duplicate, stale, tie or fenced.';

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
	INSERT INTO webhook_inbox.objects (source_id, tenant, object_type, object_id, status)
	VALUES (sid, '', apply_transition.object_type, apply_transition.object_id, 'unknown')
	ON CONFLICT DO NOTHING;
	SELECT * INTO o FROM webhook_inbox.objects x
	 WHERE x.source_id = sid AND x.tenant = '' AND x.object_type = apply_transition.object_type
	   AND x.object_id = apply_transition.object_id
	   FOR UPDATE;
	IF webhook_inbox._fenced(sid, '', apply_transition.object_type, apply_transition.object_id, claim_token) THEN
		RETURN 'fenced';
	END IF;
	cur := coalesce(o.status, 'unknown');
	IF cur = new_status THEN
		RETURN 'duplicate';
	END IF;
	IF NOT webhook_inbox.transition_allowed(machine, cur, new_status) THEN
		INSERT INTO webhook_inbox.transitions (source_id, tenant, object_type, object_id, machine, from_status,
											   to_status, applied, reason, cause, event_id)
		VALUES (sid, '', apply_transition.object_type, apply_transition.object_id, machine, cur, new_status,
				false, format('backward: %s is not reachable from %s', new_status, cur), cause_text, event);
		RETURN 'backward';
	END IF;
	UPDATE webhook_inbox.objects x
	   SET status = new_status, state = coalesce(apply_transition.state, x.state), last_event_id = event,
		   fence_token = greatest(x.fence_token, claim_token), deleted = false, tombstone_evidence = NULL,
		   updated_at = now()
	 WHERE x.source_id = sid AND x.tenant = '' AND x.object_type = apply_transition.object_type
	   AND x.object_id = apply_transition.object_id;
	INSERT INTO webhook_inbox.transitions (source_id, tenant, object_type, object_id, machine, from_status,
										   to_status, applied, cause, event_id)
	VALUES (sid, '', apply_transition.object_type, apply_transition.object_id, machine, cur, new_status,
			true, cause_text, event);
	RETURN 'applied';
END
$$;
COMMENT ON FUNCTION @extschema@.apply_transition(text, text, text, text, text, bigint, bigint, jsonb) IS
	'Applies a legal forward transition of a state machine; returns applied, duplicate, backward (recorded, never retried) or fenced.';

CREATE FUNCTION @extschema@._record_occurrence(p_source_id integer, tenant text, kind text, occurrence_id text,
	payload jsonb DEFAULT NULL, event bigint DEFAULT NULL, amount bigint DEFAULT NULL,
	currency text DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	n integer;
BEGIN
	IF kind IS NULL OR kind = '' OR occurrence_id IS NULL OR occurrence_id = '' THEN
		RAISE EXCEPTION 'kind and occurrence_id must not be empty'
			USING ERRCODE = 'null_value_not_allowed';
	END IF;
	INSERT INTO webhook_inbox.occurrences (source_id, tenant, kind, occurrence_id, amount, currency, payload,
										   first_event_id)
	VALUES (p_source_id, _record_occurrence.tenant, kind, occurrence_id,
			coalesce(amount, CASE WHEN jsonb_typeof(payload -> 'amount') = 'number'
								  THEN (payload ->> 'amount')::numeric::bigint END),
			coalesce(currency, payload ->> 'currency'), payload, event)
	ON CONFLICT ON CONSTRAINT occurrences_key DO NOTHING;
	GET DIAGNOSTICS n = ROW_COUNT;
	RETURN n = 1;
END
$$;
COMMENT ON FUNCTION @extschema@._record_occurrence(integer, text, text, text, jsonb, bigint, bigint, text) IS
	'record_occurrence() for a source by id and a tenant of it: the sweep records a tenant''s occurrences with it.';

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

CREATE FUNCTION @extschema@._prune_check(older_than interval, strip_payloads_older_than interval)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	IF older_than IS NULL OR older_than < '0 seconds' THEN
		RAISE EXCEPTION 'older_than must be a non-negative interval' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF strip_payloads_older_than IS NOT NULL AND strip_payloads_older_than < '0 seconds' THEN
		RAISE EXCEPTION 'strip_payloads_older_than must be a non-negative interval'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@._prune_check(interval, interval) IS
	'The arguments of prune() and prune_in_batches(), checked.';

CREATE FUNCTION @extschema@._prune_range(p_from bigint, p_to bigint, p_cutoff timestamptz,
	p_strip_cutoff timestamptz, OUT inbox_deleted bigint, OUT deliveries_deleted bigint,
	OUT payloads_stripped bigint)
LANGUAGE plpgsql AS $$
BEGIN
	/*
	 * One step of retention over the rows whose id (in inbox and in
	 * deliveries alike) is in [p_from, p_to): with both bounds a range of
	 * each primary key, so a step reads only its own rows.
	 */
	DELETE FROM webhook_inbox.inbox
	 WHERE id >= p_from AND id < p_to
	   AND status IN ('done', 'ignored') AND coalesce(processed_at, updated_at) < p_cutoff;
	GET DIAGNOSTICS inbox_deleted = ROW_COUNT;
	DELETE FROM webhook_inbox.deliveries WHERE id >= p_from AND id < p_to AND received_at < p_cutoff;
	GET DIAGNOSTICS deliveries_deleted = ROW_COUNT;
	payloads_stripped := 0;
	IF p_strip_cutoff IS NOT NULL THEN
		/* identities stay: source, event id, object, outcome; the bodies go */
		UPDATE webhook_inbox.inbox SET payload = NULL, raw_body = NULL
		 WHERE id >= p_from AND id < p_to
		   AND status IN ('done', 'ignored') AND (payload IS NOT NULL OR raw_body IS NOT NULL)
		   AND coalesce(processed_at, updated_at) < p_strip_cutoff;
		GET DIAGNOSTICS payloads_stripped = ROW_COUNT;
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@._prune_range(bigint, bigint, timestamptz, timestamptz) IS
	'One step of retention: old done and ignored events and old deliveries with an id in [p_from, p_to) deleted, payloads older than p_strip_cutoff stripped.';

CREATE FUNCTION @extschema@._prune_digests()
RETURNS void
LANGUAGE sql AS $$
	/*
	 * A digest is what refuses a replayed body-only signature, so it lives
	 * out its replay window (expires_at, which intake also judges by)
	 * whatever the retention's cutoff: a shorter retention must not reopen
	 * replays.
	 */
	DELETE FROM webhook_inbox.seen_bodies WHERE expires_at <= now()
$$;
COMMENT ON FUNCTION @extschema@._prune_digests() IS
	'Retention of the body digests: each is kept until its source''s replay window has passed (expires_at), whatever the retention''s cutoff, then deleted.';

CREATE FUNCTION @extschema@._prune_batches_plan(older_than interval, strip_payloads_older_than interval,
	batch_size integer, OUT lo bigint, OUT hi bigint, OUT step bigint, OUT cutoff timestamptz,
	OUT strip_cutoff timestamptz)
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM webhook_inbox._prune_check(older_than, strip_payloads_older_than);
	IF batch_size IS NULL OR batch_size < 1 OR batch_size > 1000000 THEN
		RAISE EXCEPTION 'batch_size must be between 1 and 1000000' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = format('The value given was %s.', coalesce(batch_size::text, 'NULL'));
	END IF;
	/* the ids of both tables at the start; NULL bounds when both are empty */
	lo := least((SELECT min(id) FROM webhook_inbox.inbox), (SELECT min(id) FROM webhook_inbox.deliveries));
	hi := greatest((SELECT max(id) FROM webhook_inbox.inbox), (SELECT max(id) FROM webhook_inbox.deliveries));
	step := batch_size;
	cutoff := now() - older_than;
	strip_cutoff := now() - strip_payloads_older_than;
END
$$;
COMMENT ON FUNCTION @extschema@._prune_batches_plan(interval, interval, integer) IS
	'prune_in_batches()''s arguments checked, and its plan: the id range of inbox and deliveries to walk, the step and the cutoffs.';

/*
 * Retention of the history tables, with the defaults prune() and
 * prune_in_batches() give them (docs/operations.md, "Retention", has the
 * table).  Each argument is an age: rows older are deleted, NULL keeps them
 * for ever.  What the present still needs is never deleted, whatever its
 * age: the newest transition of each object, a transition an effect names,
 * those of an object under a live claim; the newest sweep run of each
 * (source, object type, layer), the run a checkpoint names, a running one;
 * the attempts of an effect that is not done or failed, and each effect's
 * last attempt; the requeues of an event still waiting; effects that are
 * pending, submitting, uncertain or quarantined.
 */
CREATE FUNCTION @extschema@._prune_history_check(transitions_older_than interval,
	sweep_runs_older_than interval, attempts_older_than interval, requeues_older_than interval,
	effects_older_than interval, occurrences_older_than interval)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	a record;
BEGIN
	FOR a IN SELECT * FROM (VALUES ('transitions_older_than', transitions_older_than),
								   ('sweep_runs_older_than', sweep_runs_older_than),
								   ('attempts_older_than', attempts_older_than),
								   ('requeues_older_than', requeues_older_than),
								   ('effects_older_than', effects_older_than),
								   ('occurrences_older_than', occurrences_older_than)) v(name, val)
	LOOP
		IF a.val < '0 seconds' THEN
			RAISE EXCEPTION '% must be a non-negative interval or NULL', a.name
				USING ERRCODE = 'invalid_parameter_value',
					  DETAIL = format('The value given was %s.', a.val),
					  HINT = 'NULL keeps the rows for ever.';
		END IF;
	END LOOP;
END
$$;
COMMENT ON FUNCTION @extschema@._prune_history_check(interval, interval, interval, interval, interval, interval) IS
	'The history arguments of prune() and prune_in_batches(), checked: non-negative intervals, or NULL (keep for ever).';

CREATE FUNCTION @extschema@._prune_history(transitions_older_than interval, sweep_runs_older_than interval,
	attempts_older_than interval, requeues_older_than interval, effects_older_than interval,
	occurrences_older_than interval, OUT transitions_deleted bigint, OUT sweep_runs_deleted bigint,
	OUT repairs_deleted bigint, OUT effect_attempts_deleted bigint, OUT requeues_deleted bigint,
	OUT effects_deleted bigint, OUT occurrences_deleted bigint)
LANGUAGE plpgsql AS $$
BEGIN
	transitions_deleted := 0;
	sweep_runs_deleted := 0;
	repairs_deleted := 0;
	effect_attempts_deleted := 0;
	requeues_deleted := 0;
	effects_deleted := 0;
	occurrences_deleted := 0;

	/*
	 * Effects first (only when asked: they are business records), so the
	 * transitions they named can go in the same run.  Only final ones: a
	 * pending, submitting, uncertain or quarantined effect is work or a
	 * decision still to come.  Attempts and resolutions cascade.
	 */
	IF effects_older_than IS NOT NULL THEN
		DELETE FROM webhook_inbox.effects
		 WHERE status IN ('done', 'failed') AND updated_at < now() - effects_older_than;
		GET DIAGNOSTICS effects_deleted = ROW_COUNT;
	END IF;

	IF attempts_older_than IS NOT NULL THEN
		DELETE FROM webhook_inbox.effect_attempts a
		 USING webhook_inbox.effects e
		 WHERE e.id = a.effect_id AND e.status IN ('done', 'failed')
		   AND a.started_at < now() - attempts_older_than
		   AND a.id < (SELECT max(l.id) FROM webhook_inbox.effect_attempts l WHERE l.effect_id = a.effect_id);
		GET DIAGNOSTICS effect_attempts_deleted = ROW_COUNT;
	END IF;

	IF transitions_older_than IS NOT NULL THEN
		DELETE FROM webhook_inbox.transitions t
		 WHERE t.at < now() - transitions_older_than
		   /* the newest of its object stays: the mirror's status has its cause */
		   AND t.id < (SELECT max(n.id) FROM webhook_inbox.transitions n
						WHERE n.source_id = t.source_id AND n.object_type = t.object_type
						  AND n.object_id = t.object_id)
		   AND NOT EXISTS (SELECT 1 FROM webhook_inbox.effects e WHERE e.transition_id = t.id)
		   AND NOT EXISTS (SELECT 1 FROM webhook_inbox.object_leases l
							WHERE l.source_id = t.source_id AND l.object_type = t.object_type
							  AND l.object_id = t.object_id AND l.expires_at > now());
		GET DIAGNOSTICS transitions_deleted = ROW_COUNT;
	END IF;

	/* a finished run's seen ids are of no use (a crash can leave some) */
	DELETE FROM webhook_inbox.sweep_seen s
	 USING webhook_inbox.sweep_runs r
	 WHERE r.id = s.run_id AND r.status <> 'running';
	IF sweep_runs_older_than IS NOT NULL THEN
		/* a run's repairs go with it (its seen ids cascade) */
		WITH d AS (
			SELECT r.id FROM webhook_inbox.sweep_runs r
			 WHERE r.status <> 'running' AND r.started_at < now() - sweep_runs_older_than
			   AND r.id < (SELECT max(n.id) FROM webhook_inbox.sweep_runs n
							WHERE n.source_id = r.source_id AND n.object_type = r.object_type
							  AND n.layer = r.layer)
			   AND NOT EXISTS (SELECT 1 FROM webhook_inbox.sweep_checkpoints c WHERE c.last_run_id = r.id)),
		rp AS (DELETE FROM webhook_inbox.repairs p USING d WHERE p.run_id = d.id RETURNING 1),
		sr AS (DELETE FROM webhook_inbox.sweep_runs r USING d WHERE r.id = d.id RETURNING 1)
		SELECT (SELECT count(*) FROM rp), (SELECT count(*) FROM sr) INTO repairs_deleted, sweep_runs_deleted;
	END IF;

	IF requeues_older_than IS NOT NULL THEN
		/* the audit of an event still waiting stays with it */
		DELETE FROM webhook_inbox.requeues q
		 WHERE q.requeued_at < now() - requeues_older_than
		   AND NOT EXISTS (SELECT 1 FROM webhook_inbox.inbox i
							WHERE i.id = q.event_id AND i.status IN ('pending', 'processing', 'retry'));
		GET DIAGNOSTICS requeues_deleted = ROW_COUNT;
		DELETE FROM webhook_inbox.requeue_batches b
		 WHERE b.requeued_at < now() - requeues_older_than
		   AND NOT EXISTS (SELECT 1 FROM webhook_inbox.requeues q WHERE q.batch_id = b.id);
	END IF;

	IF occurrences_older_than IS NOT NULL THEN
		DELETE FROM webhook_inbox.occurrences WHERE recorded_at < now() - occurrences_older_than;
		GET DIAGNOSTICS occurrences_deleted = ROW_COUNT;
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@._prune_history(interval, interval, interval, interval, interval, interval) IS
	'Retention of the history tables (transitions, sweep runs with their repairs and seen ids, effect attempts, requeues and their batches) and, only when asked, of done or failed effects and of occurrences; never what an unfinished effect, claim or sweep still needs. Returns what it deleted.';

CREATE FUNCTION @extschema@.prune(older_than interval, strip_payloads_older_than interval DEFAULT NULL,
	transitions_older_than interval DEFAULT '90 days', sweep_runs_older_than interval DEFAULT '30 days',
	attempts_older_than interval DEFAULT '90 days', requeues_older_than interval DEFAULT '90 days',
	effects_older_than interval DEFAULT NULL, occurrences_older_than interval DEFAULT NULL,
	OUT inbox_deleted bigint, OUT deliveries_deleted bigint, OUT payloads_stripped bigint,
	OUT transitions_deleted bigint, OUT sweep_runs_deleted bigint, OUT repairs_deleted bigint,
	OUT effect_attempts_deleted bigint, OUT requeues_deleted bigint, OUT effects_deleted bigint,
	OUT occurrences_deleted bigint)
LANGUAGE plpgsql AS $$
DECLARE
	h record;
BEGIN
	PERFORM webhook_inbox._prune_check(older_than, strip_payloads_older_than);
	PERFORM webhook_inbox._prune_history_check(transitions_older_than, sweep_runs_older_than,
		attempts_older_than, requeues_older_than, effects_older_than, occurrences_older_than);
	SELECT r.inbox_deleted, r.deliveries_deleted, r.payloads_stripped
	  INTO inbox_deleted, deliveries_deleted, payloads_stripped
	  FROM webhook_inbox._prune_range(0, 9223372036854775807, now() - older_than,
									  now() - strip_payloads_older_than) r;
	PERFORM webhook_inbox._prune_digests();
	SELECT * INTO h FROM webhook_inbox._prune_history(transitions_older_than, sweep_runs_older_than,
		attempts_older_than, requeues_older_than, effects_older_than, occurrences_older_than);
	transitions_deleted := h.transitions_deleted;
	sweep_runs_deleted := h.sweep_runs_deleted;
	repairs_deleted := h.repairs_deleted;
	effect_attempts_deleted := h.effect_attempts_deleted;
	requeues_deleted := h.requeues_deleted;
	effects_deleted := h.effects_deleted;
	occurrences_deleted := h.occurrences_deleted;
END
$$;
COMMENT ON FUNCTION @extschema@.prune(interval, interval, interval, interval, interval, interval, interval, interval) IS
	'Retention of every growing table: done and ignored events and deliveries older than older_than (payloads can be stripped earlier, identities kept), expired body digests; transitions after 90 days, sweep runs and their repairs after 30 days, attempts of finished effects and requeues after 90 days, each by default and never what the present needs (the newest transition of each object, the newest run of each sweep); effects and occurrences are business records, deleted only when effects_older_than or occurrences_older_than is given. NULL keeps a table for ever. One transaction: for a large backlog, prune_in_batches().';

CREATE PROCEDURE @extschema@.prune_in_batches(older_than interval,
	strip_payloads_older_than interval DEFAULT NULL, batch_size integer DEFAULT 10000,
	transitions_older_than interval DEFAULT '90 days', sweep_runs_older_than interval DEFAULT '30 days',
	attempts_older_than interval DEFAULT '90 days', requeues_older_than interval DEFAULT '90 days',
	effects_older_than interval DEFAULT NULL, occurrences_older_than interval DEFAULT NULL,
	INOUT inbox_deleted bigint DEFAULT 0, INOUT deliveries_deleted bigint DEFAULT 0,
	INOUT payloads_stripped bigint DEFAULT 0, INOUT history_deleted bigint DEFAULT 0)
LANGUAGE plpgsql AS $$
/*
 * A procedure that commits cannot pin its search_path (sql/search_path.sql):
 * every function and operator here is qualified; the work is done by the
 * pinned functions it calls.
 */
DECLARE
	b record;
	r record;
	h record;
	lo bigint;
BEGIN
	SELECT * INTO b FROM webhook_inbox._prune_batches_plan(older_than, strip_payloads_older_than, batch_size);
	PERFORM webhook_inbox._prune_history_check(transitions_older_than, sweep_runs_older_than,
		attempts_older_than, requeues_older_than, effects_older_than, occurrences_older_than);
	inbox_deleted := 0;
	deliveries_deleted := 0;
	payloads_stripped := 0;
	lo := b.lo;
	COMMIT;
	/*
	 * What prune() does, a range of batch_size ids at a time with a commit
	 * after each: no transaction holds the backlog's locks or the xmin for
	 * long, so vacuum can reclaim each step's rows while the next one runs,
	 * and the worker and intake never wait behind it.  Rows written after
	 * the start (higher ids) are left to the next run.
	 */
	WHILE lo OPERATOR(pg_catalog.<=) b.hi LOOP
		SELECT * INTO r FROM webhook_inbox._prune_range(lo, lo OPERATOR(pg_catalog.+) b.step, b.cutoff,
														b.strip_cutoff);
		inbox_deleted := inbox_deleted OPERATOR(pg_catalog.+) r.inbox_deleted;
		deliveries_deleted := deliveries_deleted OPERATOR(pg_catalog.+) r.deliveries_deleted;
		payloads_stripped := payloads_stripped OPERATOR(pg_catalog.+) r.payloads_stripped;
		COMMIT;
		lo := lo OPERATOR(pg_catalog.+) b.step;
	END LOOP;
	PERFORM webhook_inbox._prune_digests();
	COMMIT;
	/* the history tables, one transaction after the events */
	SELECT * INTO h FROM webhook_inbox._prune_history(transitions_older_than, sweep_runs_older_than,
		attempts_older_than, requeues_older_than, effects_older_than, occurrences_older_than);
	history_deleted := h.transitions_deleted OPERATOR(pg_catalog.+) h.sweep_runs_deleted
		OPERATOR(pg_catalog.+) h.repairs_deleted OPERATOR(pg_catalog.+) h.effect_attempts_deleted
		OPERATOR(pg_catalog.+) h.requeues_deleted OPERATOR(pg_catalog.+) h.effects_deleted
		OPERATOR(pg_catalog.+) h.occurrences_deleted;
	COMMIT;
END
$$;
COMMENT ON PROCEDURE @extschema@.prune_in_batches(interval, interval, integer, interval, interval, interval, interval, interval, interval, bigint, bigint, bigint, bigint) IS
	'Retention as prune() does it, with the same defaults: a range of batch_size ids of inbox and deliveries at a time with a commit after each, so that a large backlog is never one long DELETE, then the history tables in one more transaction. CALL it outside a transaction block; returns what it deleted and stripped (history_deleted: the rows of every history table together).';

---------------------------------------------------------------------------
-- Views for operators
---------------------------------------------------------------------------

/*
 * Whether this server's 2xx promise survives a failover: the synchronous
 * standbys confirming its commits now (pg_stat_replication, which only
 * pg_read_all_stats may read in full: hence SECURITY DEFINER), and, when
 * webhook_inbox.require_synchronous_standby is on, why a primary would
 * acknowledge a delivery that a promoted standby may not have (or why its
 * commits wait).  A server in recovery acknowledges nothing: no warning.
 * synchronous_commit is the caller's, which is the server's unless a role or
 * database setting changes it.
 */
CREATE FUNCTION @extschema@._synchronous_standby(OUT synchronous_standby text, OUT ha_warning text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
	SELECT r.standbys,
		   CASE WHEN NOT coalesce(current_setting('webhook_inbox.require_synchronous_standby', true), 'off')::boolean
					 OR pg_is_in_recovery() THEN NULL
				WHEN current_setting('synchronous_standby_names') = '' THEN
					'synchronous_standby_names is empty: commits are acknowledged without a standby, and a failover loses the last acknowledged deliveries'
				WHEN current_setting('synchronous_commit') IN ('off', 'local') THEN
					format('synchronous_commit is %s: commits are acknowledged without waiting for a standby, and a failover loses the last acknowledged deliveries',
						   current_setting('synchronous_commit'))
				WHEN r.standbys IS NULL THEN
					format('no synchronous standby is connected (synchronous_standby_names is %s): commits wait for one, deliveries are not answered',
						   current_setting('synchronous_standby_names'))
		   END
	  FROM (SELECT string_agg(application_name, ',' ORDER BY application_name)
					 FILTER (WHERE sync_state IN ('sync', 'quorum')) AS standbys
			  FROM pg_stat_replication) r
$$;
COMMENT ON FUNCTION @extschema@._synchronous_standby() IS
	'inbox_health''s synchronous_standby (the standbys confirming commits now) and ha_warning (with webhook_inbox.require_synchronous_standby on: why this primary acknowledges without a synchronous standby, or why its commits wait).';

/*
 * Whether sources' secrets are at rest as they should be: in clear without
 * a key file (a warning, not an error: a database without one works as
 * before), in clear although a key file is set (seal_secrets() was not
 * called), or sealed while no key file is set (a restore without its key).
 */
/*
 * The key webhook_inbox.key_file names, as its id, or why it cannot be
 * read (a missing file, one that is no key): the secrets sealed under it
 * would not decrypt.  NULL, NULL when no key file is set.
 */
CREATE FUNCTION @extschema@._key_file_id(OUT key_id text, OUT problem text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF NOT webhook_inbox._key_configured() THEN
		RETURN;
	END IF;
	key_id := webhook_inbox._key_id(pg_catalog.current_setting('webhook_inbox.key_file'));
EXCEPTION WHEN OTHERS THEN
	problem := pg_catalog.format('webhook_inbox.key_file (%s) cannot be read: %s',
								 pg_catalog.current_setting('webhook_inbox.key_file'), SQLERRM);
END
$$;
COMMENT ON FUNCTION @extschema@._key_file_id() IS
	'The id of the key webhook_inbox.key_file names, or why that file cannot be read as a key; both NULL without a key file.';

CREATE FUNCTION @extschema@._secrets_warning() RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
	SELECT CASE
		WHEN c.sealed > 0 AND k.problem IS NOT NULL
			THEN format('%s of %s sources have encrypted secrets the receiver and the worker cannot read: %s',
						c.sealed, c.total, k.problem)
		WHEN c.other_key > 0
			THEN format('%s of %s sources have secrets encrypted under another key (key id %s) than the one webhook_inbox.key_file names (key id %s): the receiver and the worker cannot read them; point webhook_inbox.key_file at that key, or run webhook_inbox.reencrypt_source_secrets(''<the old key file>'') after a rotation',
						c.other_key, c.total, c.other_id, k.key_id)
		WHEN c.clear > 0 AND NOT webhook_inbox._key_configured()
			THEN format('%s of %s sources keep their signing secrets or api_token in clear: webhook_inbox.key_file is not set (set it, then call webhook_inbox.seal_secrets())',
						c.clear, c.total)
		WHEN c.clear > 0
			THEN format('%s of %s sources keep their signing secrets or api_token in clear although webhook_inbox.key_file is set: call webhook_inbox.seal_secrets()',
						c.clear, c.total)
		WHEN c.sealed > 0 AND NOT webhook_inbox._key_configured()
			THEN format('%s of %s sources have encrypted secrets and webhook_inbox.key_file is not set: the receiver and the worker cannot read them',
						c.sealed, c.total)
		END
	  FROM webhook_inbox._key_file_id() k
	 CROSS JOIN LATERAL (
			SELECT count(*) AS total,
				   count(*) FILTER (WHERE webhook_inbox._source_in_clear(s.signing_secrets, s.api_token)) AS clear,
				   count(*) FILTER (WHERE v.ids IS NOT NULL) AS sealed,
				   count(*) FILTER (WHERE k.key_id IS NOT NULL AND v.ids <> ARRAY[k.key_id]) AS other_key,
				   min(v.ids[1]) FILTER (WHERE k.key_id IS NOT NULL AND v.ids <> ARRAY[k.key_id]) AS other_id
			  FROM webhook_inbox.sources s
			 CROSS JOIN LATERAL (
					/* the distinct keys a source's sealed values name, NULL for none */
					SELECT array_agg(DISTINCT i.id ORDER BY i.id) FILTER (WHERE i.id IS NOT NULL) AS ids
					  FROM (SELECT webhook_inbox._text_key_id(x) AS id FROM unnest(s.signing_secrets) x
							UNION ALL SELECT webhook_inbox._text_key_id(s.api_token)) i) v) c
$$;
COMMENT ON FUNCTION @extschema@._secrets_warning() IS
	'inbox_health''s secrets_warning: sources whose signing secrets or api_token are stored in clear (no key file, or seal_secrets() not called), or encrypted while webhook_inbox.key_file is not set, names a file that cannot be read as a key, or names another key than theirs; NULL when all is as it should be.';

CREATE VIEW @extschema@.inbox_health AS
SELECT count(*) FILTER (WHERE status = 'pending') AS pending,
	   coalesce(now() - min(received_at) FILTER (WHERE status = 'pending'), '0 seconds') AS oldest_pending_age,
	   count(*) FILTER (WHERE status = 'processing') AS processing,
	   count(*) FILTER (WHERE status = 'retry') AS retrying,
	   count(*) FILTER (WHERE status = 'quarantined') AS quarantined,
	   coalesce((SELECT jsonb_object_agg(r, c) FROM (
			SELECT coalesce(split_part(reason, ':', 1), 'unknown') AS r, count(*) AS c
			  FROM webhook_inbox.inbox WHERE status = 'quarantined' GROUP BY 1) q), '{}') AS quarantined_by_reason,
	   (SELECT h.synchronous_standby FROM webhook_inbox._synchronous_standby() h) AS synchronous_standby,
	   (SELECT h.ha_warning FROM webhook_inbox._synchronous_standby() h) AS ha_warning,
	   webhook_inbox._secrets_warning() AS secrets_warning
  FROM webhook_inbox.inbox
 WHERE status IN ('pending', 'processing', 'retry', 'quarantined');
COMMENT ON VIEW @extschema@.inbox_health IS
	'What to alert on: pending count, oldest pending age, retrying, quarantined by reason, the synchronous standbys confirming commits, and (with webhook_inbox.require_synchronous_standby on) why this primary acknowledges without one; secrets_warning: sources'' secrets stored in clear (no webhook_inbox.key_file, or seal_secrets() not called) or encrypted without the key file.';

/*
 * inbox_health per (source, tenant): one row per tenant with an event that
 * is not done (tenant '' is a source's own account), so that one connected
 * account, shop or installation whose events wait or are set aside shows
 * by name instead of inside the totals.  inbox_health keeps the totals.
 */
CREATE VIEW @extschema@.inbox_health_by_tenant AS
WITH g AS (
	SELECT i.source_id, i.tenant, i.status,
		   CASE WHEN i.status = 'quarantined' THEN coalesce(split_part(i.reason, ':', 1), 'unknown') END AS reason,
		   count(*) AS c, min(i.received_at) AS oldest
	  FROM webhook_inbox.inbox i
	 WHERE i.status IN ('pending', 'processing', 'retry', 'quarantined')
	 GROUP BY 1, 2, 3, 4)
SELECT s.name AS source, g.tenant,
	   coalesce(sum(g.c) FILTER (WHERE g.status = 'pending'), 0)::bigint AS pending,
	   coalesce(now() - min(g.oldest) FILTER (WHERE g.status = 'pending'), '0 seconds') AS oldest_pending_age,
	   coalesce(sum(g.c) FILTER (WHERE g.status = 'processing'), 0)::bigint AS processing,
	   coalesce(sum(g.c) FILTER (WHERE g.status = 'retry'), 0)::bigint AS retrying,
	   coalesce(sum(g.c) FILTER (WHERE g.status = 'quarantined'), 0)::bigint AS quarantined,
	   coalesce(jsonb_object_agg(g.reason, g.c) FILTER (WHERE g.status = 'quarantined'), '{}') AS quarantined_by_reason
  FROM g JOIN webhook_inbox.sources s ON s.id = g.source_id
 GROUP BY s.name, g.tenant;
COMMENT ON VIEW @extschema@.inbox_health_by_tenant IS
	'inbox_health per (source, tenant), for the tenants with an event not done (tenant is empty for a source''s own account): pending, oldest pending age, processing, retrying, quarantined and quarantined by reason.';

