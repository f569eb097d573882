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
	lookup_cursor	text,
	tenant			text NOT NULL DEFAULT '',
	CONSTRAINT effects_http_check CHECK (kind <> 'http' OR (source_id IS NOT NULL
		AND request ? 'method' AND request ? 'path'))
);
CREATE INDEX effects_due_idx ON @extschema@.effects (next_attempt_at)
	WHERE status IN ('pending', 'submitting', 'uncertain');
CREATE INDEX effects_object_idx ON @extschema@.effects (source_id, tenant, object_type, object_id);
-- prune() keeps every transition an effect names: one probe per transition
CREATE INDEX effects_transition_idx ON @extschema@.effects (transition_id) WHERE transition_id IS NOT NULL;
COMMENT ON TABLE @extschema@.effects IS
	'Approved operations, one per effect_key, with their exact request and a stable idempotency key. States: pending, submitting, done, failed (a definitive rejection), uncertain (sent, outcome unknown), quarantined (a person decides).';
COMMENT ON COLUMN @extschema@.effects.lookup_cursor IS
	'While an uncertain Stripe refund is looked for in its PaymentIntent''s refunds: the last refund id listed (starting_after of the next page).';

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
 * Percent-encode text for a URL path: every byte but RFC 3986's unreserved
 * characters becomes %XX, so a value put into a path stays one path segment.
 */
CREATE FUNCTION @extschema@._url_encode(v text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
	SELECT coalesce(string_agg(CASE WHEN b BETWEEN 48 AND 57 OR b BETWEEN 65 AND 90 OR b BETWEEN 97 AND 122
										 OR b IN (45, 46, 95, 126)
									THEN chr(b) ELSE '%' || upper(lpad(to_hex(b), 2, '0')) END, '' ORDER BY i), '')
	  FROM (SELECT i, get_byte(x, i) AS b
			  FROM (SELECT convert_to(v, 'UTF8') AS x) y, generate_series(0, length(x) - 1) AS i) z
$$;
COMMENT ON FUNCTION @extschema@._url_encode(text) IS
	'Percent-encodes every byte but the unreserved characters (RFC 3986), for a value placed in a URL path.';

/*
 * Fill a rule's request template: {object_id}, {object_type}, {from} and
 * {to} are replaced inside string values only, in one pass (a replaced
 * value is never scanned again), so whatever an object id contains becomes
 * part of one string: no key is ever added, renamed or changed.  Keys are
 * kept as written.  The top-level "path" gets its values percent-encoded,
 * so that they stay inside one path segment.
 */
CREATE FUNCTION @extschema@._effect_fill(template jsonb, vars jsonb, url boolean DEFAULT false) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	s text;
	filled text := '';
	m text[];
BEGIN
	CASE jsonb_typeof(template)
	WHEN 'object' THEN
		RETURN coalesce((SELECT jsonb_object_agg(e.key,
									webhook_inbox._effect_fill(e.value, vars, url AND e.key = 'path'))
						   FROM jsonb_each(template) e), '{}'::jsonb);
	WHEN 'array' THEN
		RETURN coalesce((SELECT jsonb_agg(webhook_inbox._effect_fill(e.value, vars, false) ORDER BY e.n)
						   FROM jsonb_array_elements(template) WITH ORDINALITY e(value, n)), '[]'::jsonb);
	WHEN 'string' THEN
		s := template #>> '{}';
		LOOP
			m := regexp_match(s, '^(.*?)[{](object_id|object_type|from|to)[}](.*)$', 's');
			EXIT WHEN m IS NULL;
			filled := filled || m[1] || CASE WHEN url THEN webhook_inbox._url_encode(vars ->> m[2])
											 ELSE vars ->> m[2] END;
			s := m[3];
		END LOOP;
		RETURN to_jsonb(filled || s);
	ELSE
		RETURN template;
	END CASE;
END
$$;
COMMENT ON FUNCTION @extschema@._effect_fill(jsonb, jsonb, boolean) IS
	'Fills a rule''s request template: placeholders replaced within string values only, never adding or changing a key; values in the top-level path percent-encoded.';

/*
 * Fire the matching rules of the applied transitions a statement inserted,
 * in its transaction: once per statement over its new rows (a trigger per
 * row cost a fifth of a round that records a transition per event).  The
 * key names the transition row, so a duplicate, late or replayed event
 * (which applies no transition) can never fire an effect a second time.
 */
CREATE FUNCTION @extschema@._fire_effects() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	/* a restore loads the effects the transitions made with the transitions */
	IF webhook_inbox._restore_session() THEN
		RETURN NULL;
	END IF;
	INSERT INTO webhook_inbox.effects (effect_key, kind, source_id, tenant, object_type, object_id, transition_id,
									   rule_id, request, idempotency_key, owner)
	SELECT k.key, r.kind, t.source_id, t.tenant, t.object_type, t.object_id, t.id, r.id,
		   webhook_inbox._effect_fill(r.request,
									  jsonb_build_object('object_id', t.object_id, 'object_type', t.object_type,
														 'from', coalesce(t.from_status, ''), 'to', t.to_status),
									  true),
		   'wi-' || md5(k.key), r.owner
	  FROM new_transitions t
	  JOIN webhook_inbox.effect_rules r
		ON r.enabled
	   AND (r.source_id IS NULL OR r.source_id = t.source_id)
	   AND r.object_type = t.object_type
	   AND (r.from_status = '*' OR r.from_status = t.from_status)
	   AND r.to_status = t.to_status
	  /* a tenant's object is named with its tenant: source@tenant */
	  CROSS JOIN LATERAL (SELECT format('%s:%s%s:%s/%s:%s->%s#%s', r.kind, t.source_id,
										CASE WHEN t.tenant <> '' THEN '@' || t.tenant ELSE '' END, t.object_type,
										t.object_id, coalesce(t.from_status, ''), t.to_status, t.id) AS key) k
	 WHERE t.applied
	 ORDER BY t.id, r.id
	ON CONFLICT ON CONSTRAINT effects_key DO NOTHING;
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION @extschema@._fire_effects() IS
	'Inserts the effects of the applied transitions of a statement, keyed by (kind, source and tenant, object, transition), their requests filled by _effect_fill(); an effect is made for the transition''s tenant. Not while a restore loads the dump (_restore_session()): its effects come with it.';
CREATE TRIGGER transitions_fire_effects AFTER INSERT ON @extschema@.transitions
	REFERENCING NEW TABLE AS new_transitions
	FOR EACH STATEMENT EXECUTE FUNCTION @extschema@._fire_effects();

CREATE FUNCTION @extschema@.request_effect(effect_key text, kind text, request jsonb,
	idempotency_key text DEFAULT NULL, source text DEFAULT NULL, owner text DEFAULT 'engineering',
	amount bigint DEFAULT NULL, ceiling_group text DEFAULT NULL, ceiling bigint DEFAULT NULL,
	tenant text DEFAULT '')
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
	IF coalesce(idempotency_key, effect_key) ~ '[\x01-\x1f\x7f]' THEN
		RAISE EXCEPTION 'idempotency_key must not contain control characters'
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'It is sent as the Idempotency-Key header; a CR or LF would start a header of its own.',
				  HINT = 'By default the effect key is used: pass a printable idempotency_key.';
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
									   ceiling_group, tenant)
	VALUES (effect_key, kind, sid, request, coalesce(request_effect.idempotency_key, effect_key), owner,
			amount, ceiling_group, coalesce(request_effect.tenant, ''))
	RETURNING id INTO new_id;
	RETURN new_id;
END
$$;
COMMENT ON FUNCTION @extschema@.request_effect(text, text, jsonb, text, text, text, bigint, text, bigint, text) IS
	'Records an approved operation with its exact request (for a tenant of the source: the worker makes it under that tenant''s credentials, Stripe-Account). The same key and request return the existing effect; the same key with another request is refused. Returns the effect id.';

CREATE FUNCTION @extschema@.resolve_effect(effect_id bigint, outcome text, note text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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
	/* a definer's function: each owner resolves its own (sql/ops.sql) */
	IF NOT webhook_inbox._may_act_for(e.owner) THEN
		RAISE EXCEPTION 'effect % is owned by %', effect_id, e.owner USING ERRCODE = 'insufficient_privilege',
			HINT = 'webhook_inbox_finance resolves finance''s effects, webhook_inbox_operator operations''.';
	END IF;
	INSERT INTO webhook_inbox.effect_resolutions (effect_id, previous_status, outcome, note, resolved_by)
	VALUES (e.id, e.status, outcome, note, webhook_inbox._caller());
	UPDATE webhook_inbox.effects
	   SET status = CASE outcome WHEN 'retry' THEN 'pending' ELSE outcome END,
		   reason = 'resolved: ' || note, claim_token = NULL, holder = NULL, lease_expires_at = NULL,
		   next_attempt_at = now(), updated_at = now()
	 WHERE id = e.id;
	RETURN CASE outcome WHEN 'retry' THEN 'pending' ELSE outcome END;
END
$$;
COMMENT ON FUNCTION @extschema@.resolve_effect(bigint, text, text) IS
	'A person''s decision on an uncertain, quarantined or failed effect: done, failed, or retry (same key, same body), by someone who may act for its owner. Audited in effect_resolutions.';

/* The outbox: effects of other kinds, claimed by the user's own code. */
CREATE FUNCTION @extschema@.claim_effects(worker text, kinds text[], max_effects integer DEFAULT 10,
	lease interval DEFAULT '30 seconds')
RETURNS SETOF webhook_inbox.effects
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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
	/* a restored copy hands no effect to the code that would carry it out */
	PERFORM webhook_inbox._outbound_guard();
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
	'Outbox for local consumers: claims due effects of the given kinds (never http) under a lease with a fencing token. Security definer, for webhook_inbox_application.';

CREATE FUNCTION @extschema@.complete_effect(effect_id bigint, claim_token bigint, outcome text DEFAULT 'done',
	response text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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
	'Finishes an outbox effect claimed with claim_effects(); refused for a token that is no longer current. Security definer, for webhook_inbox_application.';

CREATE PROCEDURE @extschema@.run_effects(max_effects integer DEFAULT 10, worker text DEFAULT 'sql')
AS 'MODULE_PATHNAME', 'wi_run_effects'
LANGUAGE C;
COMMENT ON PROCEDURE @extschema@.run_effects(integer, text) IS
	'Executes due http effects once, as the background worker does: claim and record the attempt (committed), send, store the answer; recovers uncertain ones by lookup, same-key retry or quarantine.';

CREATE VIEW @extschema@.effects_unresolved AS
SELECT e.id, e.effect_key, e.kind, s.name AS source, e.object_type, e.object_id, e.status, e.owner, e.reason,
	   now() - coalesce(e.uncertain_since, e.created_at) AS age, e.attempts, e.idempotency_key, e.tenant
  FROM webhook_inbox.effects e LEFT JOIN webhook_inbox.sources s ON s.id = e.source_id
 WHERE e.status IN ('uncertain', 'quarantined');
COMMENT ON VIEW @extschema@.effects_unresolved IS
	'Effects whose outcome a person or a recovery must still establish: age, reason, owner, and the tenant the effect was made for (empty for a source''s own account).';

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
 * Stripe's v1 API takes form-encoded bodies: nested objects as
 * metadata[key]=value, arrays as key[0]=value, null as an empty value, keys
 * and values percent-encoded with the brackets kept, as the official
 * stripe-node library's stringifyRequestData() writes them.
 */
CREATE FUNCTION @extschema@._form_encode(v jsonb, prefix text DEFAULT NULL) RETURNS text
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	CASE jsonb_typeof(v)
	WHEN 'object' THEN
		RETURN (SELECT string_agg(p, '&' ORDER BY n)
				  FROM (SELECT e.n, webhook_inbox._form_encode(e.value,
								   CASE WHEN prefix IS NULL THEN e.key ELSE prefix || '[' || e.key || ']' END) AS p
						  FROM jsonb_each(v) WITH ORDINALITY e(key, value, n)) x
				 WHERE p <> '');
	WHEN 'array' THEN
		RETURN (SELECT string_agg(p, '&' ORDER BY n)
				  FROM (SELECT e.n, webhook_inbox._form_encode(e.value, prefix || '[' || (e.n - 1) || ']') AS p
						  FROM jsonb_array_elements(v) WITH ORDINALITY e(value, n)) x
				 WHERE p <> '');
	ELSE
		RETURN replace(replace(webhook_inbox._url_encode(prefix), '%5B', '['), '%5D', ']') || '='
			|| replace(replace(webhook_inbox._url_encode(CASE jsonb_typeof(v) WHEN 'null' THEN ''
																ELSE v #>> '{}' END),
							   '%5B', '['), '%5D', ']');
	END CASE;
END
$$;
COMMENT ON FUNCTION @extschema@._form_encode(jsonb, text) IS
	'Form-encodes a JSON object the way Stripe''s v1 API and stripe-node expect: metadata[key]=value, items[0][price]=value.';

/*
 * Why an effect's request must not leave, or NULL when it may: header names
 * must be tokens and values free of control characters (a CR or LF would
 * start a header of its own), and the path must stay a path on the
 * source's host (no "//" authority, no whitespace, no backslash).
 */
CREATE FUNCTION @extschema@._effect_refusal(method text, path text, content_type text, idempotency_key text,
	auth_name text, auth_value text)
RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
	SELECT CASE
		WHEN method IS NULL OR method !~ '^[A-Z]{1,16}$' THEN 'the method is not an HTTP method name'
		WHEN path IS NULL OR path !~ '^/[!-~]*$' OR path ~ '^//' OR position(E'\\' IN path) > 0 OR position('#' IN path) > 0
			THEN 'the path must start with one "/" and contain only visible ASCII, without "\" or "#"'
		WHEN auth_name IS NOT NULL AND auth_name !~ '^[!#$%&''*+.^_`|~0-9A-Za-z-]+$'
			THEN 'the header name in settings.auth_header is not an HTTP token'
		WHEN content_type ~ '[\x01-\x08\x0a-\x1f\x7f]' THEN 'the Content-Type value contains a control character (CR, LF …)'
		WHEN idempotency_key ~ '[\x01-\x08\x0a-\x1f\x7f]' THEN 'the Idempotency-Key value contains a control character (CR, LF …)'
		WHEN auth_value ~ '[\x01-\x08\x0a-\x1f\x7f]'
			THEN format('the %s value (auth_prefix and api_token) contains a control character (CR, LF …)', auth_name)
	END
$$;
COMMENT ON FUNCTION @extschema@._effect_refusal(text, text, text, text, text, text) IS
	'Why an effect request must not be sent (a header name that is not a token, a CR/LF/NUL or other control character in a header value, a path that could leave the host), or NULL.';

/*
 * How long the provider keeps an idempotency key: settings.effects.key_retention,
 * by default 24 hours for stripe and unlimited (NULL) for kinds whose
 * same-key retry the operator enabled.  A value that is not an interval counts
 * as zero: no same-key retry is trusted.
 */
CREATE FUNCTION @extschema@._effect_key_retention(kind text, settings jsonb) RETURNS interval
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF settings #> '{effects,key_retention}' IS NULL THEN
		RETURN CASE kind WHEN 'stripe' THEN interval '24 hours' END;
	END IF;
	RETURN (settings #>> '{effects,key_retention}')::interval;
EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow OR interval_field_overflow THEN
	RETURN interval '0 seconds';
END
$$;
COMMENT ON FUNCTION @extschema@._effect_key_retention(text, jsonb) IS
	'How long a source''s provider keeps idempotency keys (settings.effects.key_retention; stripe 24 hours), NULL for no known limit.';

/*
 * The worker's side of http effects, in steps around each request:
 * _effects_claim() decides and records (committed before anything is sent),
 * _effects_check() confirms the lease still covers a whole request just
 * before it leaves (or gives the effect back), _effects_store() keeps the
 * answer under the claim's fencing token.
 *
 * A claim takes only as many effects as can be sent one after another
 * within its lease (each may take http_timeout), and the lease is at least
 * one http_timeout long, so that an executor never sends after another one
 * could have taken the effect over.
 */
CREATE FUNCTION @extschema@._effects_claim(p_worker text, p_max integer, p_lease interval,
	p_max_attempts integer, p_http_timeout interval)
RETURNS TABLE (effect_id bigint, token bigint, action text, method text, url text, body text,
			   content_type text, idempotency_key text, auth_name text, auth_value text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	e record;
	lookup text;
	retry_same boolean;
	list_refunds boolean;
	retention interval;
	first_sent timestamptz;
	key_alive boolean;
	refused text;
	v_body jsonb;
	v_path text;
	slot interval := p_http_timeout + interval '1 second';
	v_lease interval := greatest(p_lease, p_http_timeout + interval '1 second');
	fits integer;
	t bigint;
	n integer := 0;
BEGIN
	fits := least(p_max, greatest(1, floor(extract(epoch FROM v_lease) / extract(epoch FROM slot))::integer));

	/* a worker that stopped while submitting leaves the outcome unknown */
	UPDATE webhook_inbox.effect_attempts a SET finished_at = clock_timestamp(), outcome = 'abandoned'
	  FROM webhook_inbox.effects x
	 WHERE a.effect_id = x.id AND a.claim_token = x.claim_token AND a.finished_at IS NULL
	   AND x.kind = 'http' AND x.status = 'submitting' AND x.lease_expires_at < now();
	UPDATE webhook_inbox.effects x
	   SET status = 'uncertain', uncertain_since = now(), claim_token = NULL, holder = NULL,
		   reason = 'the worker stopped while submitting', updated_at = now()
	 WHERE x.kind = 'http' AND x.status = 'submitting' AND x.lease_expires_at < now();

	FOR e IN SELECT x.*, s.kind AS source_kind, s.api_base,
					webhook_inbox._unseal_text(s.api_token, webhook_inbox._source_context(s.id, 'api_token')) AS api_token,
					s.settings
			   FROM webhook_inbox.effects x JOIN webhook_inbox.sources s ON s.id = x.source_id
			  WHERE x.kind = 'http' AND x.status IN ('pending', 'uncertain') AND x.next_attempt_at <= now()
				AND (x.lease_expires_at IS NULL OR x.lease_expires_at < now())	/* no lookup in flight */
			  ORDER BY x.id LIMIT p_max FOR UPDATE OF x SKIP LOCKED LOOP
		EXIT WHEN n >= fits;
		IF e.api_base IS NULL THEN
			UPDATE webhook_inbox.effects SET status = 'quarantined', reason = 'the source has no api_base',
				   updated_at = now() WHERE id = e.id;
			CONTINUE;
		END IF;
		t := nextval('webhook_inbox.claim_token_seq');
		auth_name := CASE e.source_kind WHEN 'shopify' THEN 'X-Shopify-Access-Token'
									   ELSE coalesce(e.settings ->> 'auth_header', 'Authorization') END;
		auth_value := CASE WHEN e.api_token IS NULL THEN NULL WHEN e.source_kind = 'shopify' THEN e.api_token
						   ELSE coalesce(e.settings ->> 'auth_prefix', 'Bearer ') || e.api_token END;
		lookup := e.settings #>> '{effects,lookup}';
		retry_same := coalesce((e.settings #>> '{effects,retry_same_key}')::boolean, e.source_kind = 'stripe');
		/* Stripe has no lookup by key, but a refund carries our key in its metadata */
		list_refunds := e.source_kind = 'stripe' AND upper(e.request ->> 'method') = 'POST'
			AND e.request ->> 'path' = '/v1/refunds' AND e.request #>> '{body,payment_intent}' IS NOT NULL
			AND coalesce((e.settings #>> '{effects,list_refunds}')::boolean, true);

		IF e.status = 'uncertain' THEN
			retention := webhook_inbox._effect_key_retention(e.source_kind, e.settings);
			SELECT min(a.started_at) INTO first_sent FROM webhook_inbox.effect_attempts a
			 WHERE a.effect_id = e.id AND a.action = 'submit' AND a.outcome IS DISTINCT FROM 'given_back';
			/* the retry must reach the provider while it still holds the key */
			key_alive := retention IS NULL OR first_sent IS NULL OR first_sent > now() - retention + slot;
			IF lookup IS NOT NULL OR list_refunds AND NOT (retry_same AND key_alive) THEN
				INSERT INTO webhook_inbox.effect_attempts (effect_id, claim_token, action) VALUES (e.id, t, 'lookup');
				UPDATE webhook_inbox.effects SET claim_token = t, holder = p_worker, lease_expires_at = now() + v_lease,
					   updated_at = now() WHERE id = e.id;
				effect_id := e.id; token := t; method := 'GET';
				body := NULL; content_type := NULL; idempotency_key := NULL;
				IF lookup IS NOT NULL THEN
					action := 'lookup';
					url := rtrim(e.api_base, '/') || replace(lookup, '{key}', webhook_inbox._url_encode(e.idempotency_key));
				ELSE
					action := 'lookup_refunds';
					url := rtrim(e.api_base, '/') || '/v1/refunds?payment_intent='
						|| webhook_inbox._url_encode(e.request #>> '{body,payment_intent}') || '&limit=100'
						|| coalesce('&starting_after=' || webhook_inbox._url_encode(e.lookup_cursor), '');
				END IF;
				n := n + 1;
				RETURN NEXT;
				CONTINUE;
			END IF;
			IF NOT retry_same OR NOT key_alive THEN
				UPDATE webhook_inbox.effects
				   SET status = 'quarantined', updated_at = now(),
					   reason = CASE WHEN retry_same
									 THEN format('uncertain for longer than the provider keeps idempotency keys (%s): a same-key retry could perform it twice; ',
												 retention)
									 ELSE 'uncertain: the provider offers no lookup and no idempotent retry; ' END
								|| coalesce(e.reason, '')
				 WHERE id = e.id;
				CONTINUE;
			END IF;
			/* the provider's idempotency contract makes a same-key retry safe */
		END IF;
		IF e.attempts >= p_max_attempts THEN
			UPDATE webhook_inbox.effects SET status = 'quarantined', updated_at = now(),
				   reason = 'max_attempts: ' || coalesce(e.reason, '') WHERE id = e.id;
			CONTINUE;
		END IF;

		method := upper(e.request ->> 'method');
		v_path := e.request ->> 'path';
		v_body := e.request -> 'body';
		content_type := coalesce(e.request ->> 'content_type', 'application/json');
		IF e.source_kind = 'stripe' AND jsonb_typeof(v_body) = 'object' THEN
			/* the refund carries its effect key, so that a listing can find it */
			IF list_refunds THEN
				v_body := jsonb_set(v_body, '{metadata}',
									coalesce(CASE jsonb_typeof(v_body -> 'metadata') WHEN 'object' THEN v_body -> 'metadata' END,
											 '{}'::jsonb) || jsonb_build_object('effect_key', e.effect_key));
			END IF;
			body := coalesce(webhook_inbox._form_encode(v_body), '');
			content_type := 'application/x-www-form-urlencoded';
		ELSE
			body := CASE jsonb_typeof(v_body) WHEN 'string' THEN v_body #>> '{}'
						 WHEN 'object' THEN v_body::text WHEN 'array' THEN v_body::text END;
		END IF;
		idempotency_key := e.idempotency_key;
		refused := webhook_inbox._effect_refusal(method, v_path, content_type, idempotency_key, auth_name, auth_value);
		IF refused IS NOT NULL THEN
			/* recorded, never sent: a person must correct the rule or the source */
			INSERT INTO webhook_inbox.effect_attempts (effect_id, claim_token, action, finished_at, outcome, error)
			VALUES (e.id, t, 'submit', clock_timestamp(), 'refused', refused);
			UPDATE webhook_inbox.effects SET status = 'quarantined', updated_at = now(),
				   reason = 'refused: ' || refused WHERE id = e.id;
			CONTINUE;
		END IF;
		INSERT INTO webhook_inbox.effect_attempts (effect_id, claim_token, action) VALUES (e.id, t, 'submit');
		UPDATE webhook_inbox.effects
		   SET status = 'submitting', claim_token = t, holder = p_worker, lease_expires_at = now() + v_lease,
			   attempts = attempts + 1, updated_at = now()
		 WHERE id = e.id;
		effect_id := e.id; token := t; action := 'submit';
		url := rtrim(e.api_base, '/') || v_path;
		n := n + 1;
		RETURN NEXT;
	END LOOP;
END
$$;
COMMENT ON FUNCTION @extschema@._effects_claim(text, integer, interval, integer, interval) IS
	'Claims as many due http effects as can be sent within one lease (each may take http_timeout) and records each attempt before it is sent; decides the recovery of uncertain ones.';

/*
 * Just before a claimed request leaves: 'send' when the claim is still the
 * effect's current one and its lease covers a whole request (http_timeout);
 * otherwise nothing is sent, and the effect is given back ('given_back',
 * as it was before the claim) if the claim is still ours, or left to whoever
 * took it over ('fenced').
 */
CREATE FUNCTION @extschema@._effects_check(p_id bigint, p_token bigint, p_http_timeout interval)
RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	e webhook_inbox.effects;
	v_action text;
BEGIN
	SELECT * INTO e FROM webhook_inbox.effects WHERE id = p_id AND claim_token = p_token FOR UPDATE;
	IF NOT FOUND THEN
		UPDATE webhook_inbox.effect_attempts SET finished_at = clock_timestamp(), outcome = 'fenced',
			   error = 'not sent: another executor took the effect over'
		 WHERE effect_id = p_id AND claim_token = p_token AND finished_at IS NULL;
		RETURN 'fenced';
	END IF;
	IF e.lease_expires_at >= clock_timestamp() + p_http_timeout THEN
		RETURN 'send';
	END IF;
	SELECT a.action INTO v_action FROM webhook_inbox.effect_attempts a
	 WHERE a.effect_id = p_id AND a.claim_token = p_token;
	UPDATE webhook_inbox.effect_attempts SET finished_at = clock_timestamp(), outcome = 'given_back',
		   error = 'not sent: the lease would end before the answer'
	 WHERE effect_id = p_id AND claim_token = p_token;
	UPDATE webhook_inbox.effects
	   SET status = CASE WHEN e.status = 'submitting'
						 THEN CASE WHEN e.uncertain_since IS NULL THEN 'pending' ELSE 'uncertain' END
						 ELSE e.status END,
		   attempts = attempts - CASE v_action WHEN 'submit' THEN 1 ELSE 0 END,
		   claim_token = NULL, holder = NULL, lease_expires_at = NULL, next_attempt_at = now(), updated_at = now()
	 WHERE id = p_id;
	RETURN 'given_back';
END
$$;
COMMENT ON FUNCTION @extschema@._effects_check(bigint, bigint, interval) IS
	'Before a claimed request leaves: send only if the claim is current and its lease covers http_timeout; otherwise give the effect back (or leave it to the executor that took it over).';

CREATE FUNCTION @extschema@._effects_store(p_id bigint, p_token bigint, p_action text, p_http_status integer,
	p_transport text, p_response text, p_error text)
RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	e webhook_inbox.effects;
	v_outcome text;
	v_response text := p_response;
	v_reason text;
	v_cursor text;
	v_next timestamptz;
	page jsonb;
	v_match jsonb;
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
	IF p_action = 'lookup_refunds' THEN
		/* a page of the PaymentIntent's refunds: ours carries metadata.effect_key */
		IF p_transport = 'ok' AND p_http_status = 200 THEN
			BEGIN
				page := p_response::jsonb;
			EXCEPTION WHEN invalid_text_representation THEN
				page := NULL;
			END;
		END IF;
		IF p_transport = 'refused' THEN
			/* the listing could not be sent to the source's origin: a person decides */
			v_outcome := 'quarantined';
			v_reason := p_error;
		ELSIF jsonb_typeof(page -> 'data') IS DISTINCT FROM 'array' THEN
			v_outcome := 'uncertain';
			v_reason := 'lookup: listing refunds failed: ' || coalesce(p_error, 'HTTP ' || p_http_status);
			v_cursor := e.lookup_cursor;
		ELSE
			SELECT d INTO v_match FROM jsonb_array_elements(page -> 'data') d
			 WHERE d #>> '{metadata,effect_key}' = e.effect_key LIMIT 1;
			IF v_match IS NOT NULL THEN
				v_outcome := CASE WHEN v_match ->> 'status' IN ('failed', 'canceled') THEN 'failed' ELSE 'done' END;
				v_reason := format('resolved by listing the PaymentIntent''s refunds: %s is %s',
								   v_match ->> 'id', v_match ->> 'status');
				v_response := v_match::text;
			ELSIF page -> 'has_more' = 'true'::jsonb AND jsonb_array_length(page -> 'data') > 0 THEN
				v_outcome := 'uncertain';
				v_cursor := page -> 'data' -> -1 ->> 'id';
				v_reason := 'lookup: listing the PaymentIntent''s refunds, next page after ' || v_cursor;
				v_next := now();
			ELSE
				v_outcome := 'pending';
				v_reason := 'lookup: no refund of the PaymentIntent carries this effect key; the provider never performed it';
				v_next := now();
			END IF;
		END IF;
	ELSIF p_action = 'lookup' THEN
		v_outcome := CASE WHEN p_transport = 'ok' AND p_http_status = 200 THEN 'done'
						WHEN p_transport = 'ok' AND p_http_status = 404 THEN 'pending'
						/* the outcome stays unknown, and no lookup can tell: a person decides */
						WHEN p_transport = 'refused' THEN 'quarantined'
						ELSE 'uncertain' END;
		v_reason := CASE v_outcome WHEN 'done' THEN 'resolved by lookup'
								   WHEN 'pending' THEN 'lookup: the provider never performed it; same-key retry'
								   ELSE coalesce(p_error, 'HTTP ' || p_http_status) END;
		v_next := CASE v_outcome WHEN 'pending' THEN now() END;
		IF v_outcome <> 'done' THEN
			v_response := NULL;
		END IF;
	ELSE
		/* refused: never sent, and never will be (its URL is not the source's) */
		v_outcome := CASE WHEN p_transport = 'refused' THEN 'failed'
						WHEN p_transport = 'not_sent' THEN 'pending'
						WHEN p_transport <> 'ok' THEN 'uncertain'
						WHEN p_http_status BETWEEN 200 AND 299 THEN 'done'
						WHEN p_http_status IN (409, 429) THEN 'pending'
						WHEN p_http_status BETWEEN 400 AND 499 THEN 'failed'
						ELSE 'uncertain' END;
		v_reason := CASE WHEN v_outcome <> 'done' THEN coalesce(p_error, 'HTTP ' || p_http_status) END;
	END IF;
	UPDATE webhook_inbox.effect_attempts SET finished_at = clock_timestamp(), outcome = v_outcome,
		   http_status = p_http_status, error = p_error
	 WHERE effect_id = p_id AND claim_token = p_token;
	UPDATE webhook_inbox.effects
	   SET status = v_outcome, claim_token = NULL, holder = NULL, lease_expires_at = NULL, updated_at = now(),
		   lookup_cursor = v_cursor,
		   response_status = CASE WHEN p_transport = 'ok' AND (p_action = 'submit' OR v_outcome IN ('done', 'failed'))
								  THEN p_http_status ELSE response_status END,
		   response = CASE WHEN p_transport = 'ok' AND (p_action = 'submit' OR v_outcome IN ('done', 'failed'))
						   THEN v_response ELSE response END,
		   uncertain_since = CASE WHEN v_outcome = 'uncertain' THEN coalesce(uncertain_since, now()) ELSE NULL END,
		   reason = v_reason,
		   next_attempt_at = CASE WHEN v_next IS NOT NULL THEN v_next
								  WHEN v_outcome = 'uncertain' AND e.uncertain_since IS NULL THEN now()
								  WHEN v_outcome IN ('pending', 'uncertain') THEN now() + backoff
								  ELSE next_attempt_at END
	 WHERE id = p_id;
	RETURN v_outcome;
END
$$;
COMMENT ON FUNCTION @extschema@._effects_store(bigint, bigint, text, integer, text, text, text) IS
	'Stores the answer to an effect''s submission, lookup or refund listing under its fencing token: done, failed, pending (not performed), or uncertain.';
