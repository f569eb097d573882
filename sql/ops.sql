
---------------------------------------------------------------------------
-- Operations: the queues that wait on a person, who owns each, the roles
-- that may look and act, controlled replay by filter, and typed views of
-- the mirror for applications.
--
-- Every queue has an age, a reason and an accountable owner: engineering
-- owns transport and recovery, operations the quarantined business
-- decisions, finance the money whose outcome is unknown.  The mapping from
-- reason to owner is data (queue_owners) a user can change.
---------------------------------------------------------------------------

/*
 * The roles.  Cluster-wide, so they may exist from another database.
 * reader: health, queues and metadata, never a payload or a secret;
 * operator and finance: a reader that may also act on what it owns.
 */
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

---------------------------------------------------------------------------
-- Owners of the queues
---------------------------------------------------------------------------

CREATE TABLE @extschema@.queue_owners (
	queue			text NOT NULL
		CONSTRAINT queue_owners_queue_check CHECK (queue IN ('quarantined_event', 'unorderable_event',
			'uncertain_effect', 'quarantined_effect', 'failed_sweep', 'skipped_sweep', 'flagged_source',
			'flagged_tenant')),
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
	('flagged_source', '*', 'engineering', 'the provider refused our credentials: check api_token', true),
	('flagged_tenant', '*', 'engineering', 'the provider refused a tenant''s credentials: check them (webhook_inbox.tenant_status), then enable_tenant()', true);

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

/*
 * The owner of a queue's reason: the user's exact row, the preset's, the
 * user's *, the preset *, else the fallback (an effect's own owner).
 */
CREATE FUNCTION @extschema@._queue_owner(p_queue text, p_reason text, p_fallback text DEFAULT 'engineering')
RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT coalesce((SELECT o.owner FROM webhook_inbox.queue_owners o
					  WHERE o.queue OPERATOR(pg_catalog.=) p_queue
						AND (o.reason OPERATOR(pg_catalog.=) p_reason OR o.reason OPERATOR(pg_catalog.=) '*')
					  ORDER BY (o.reason OPERATOR(pg_catalog.=) '*'), o.preset LIMIT 1), p_fallback)
$$;
COMMENT ON FUNCTION @extschema@._queue_owner(text, text, text) IS
	'Owner of a queue''s reason through queue_owners: exact before *, the user''s row before the preset; else the fallback.';

---------------------------------------------------------------------------
-- Shopify's mandatory compliance webhooks
---------------------------------------------------------------------------

/*
 * customers/redact and shop/redact erase payload bytes (inbox payloads and
 * raw bodies, mirror states, occurrence payloads) and keep the identities:
 * ids, digests, statuses, versions, the delivery audit (which never holds
 * a body) and a row here saying what was erased and when.
 * customers/data_request becomes a row of data_requests, a queue for
 * operations listing what is held.  Their preset routes record each once
 * as an occurrence (kind = topic), and a trigger on that insert carries it
 * out in the worker's transaction: intake, which writes the inbox as COPY
 * does, stays free of triggers.
 */
CREATE TABLE @extschema@.redactions (
	id				bigserial PRIMARY KEY,
	source_id		integer NOT NULL,	-- no foreign key: the audit outlives its source
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
COMMENT ON TABLE @extschema@.redactions IS
	'What each Shopify customers/redact or shop/redact erased and when: the request''s inbox event, the customer id and orders named (never an e-mail or name), and how many inbox payloads, mirror states and occurrence payloads were erased.';

CREATE TABLE @extschema@.data_requests (
	id				bigserial PRIMARY KEY,
	source_id		integer NOT NULL,	-- no foreign key: the request outlives its source
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
COMMENT ON TABLE @extschema@.data_requests IS
	'Shopify customers/data_request webhooks waiting for operations: what is held about the customer (inbox events, mirror objects, occurrences, by id), until resolve_data_request() says it was sent to the merchant.';
COMMENT ON COLUMN @extschema@.data_requests.held IS
	'{"inbox_events": n, "objects": [{"type", "id"}], "occurrences": [{"kind", "id"}]} when the request arrived.';

SELECT pg_catalog.pg_extension_config_dump('@extschema@.redactions', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.redactions_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.data_requests', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.data_requests_id_seq', '');

/*
 * Whether a stored document (an inbox payload, a mirror state, an
 * occurrence payload) of (object_type, object_id) is about the customer:
 * the customer itself, one of the orders named, an order of the customer,
 * a refund of one of those orders, or any document that carries the
 * customer's e-mail (as a whole address, case-insensitively: not
 * "joann@example.com" for "ann@example.com").
 */
CREATE FUNCTION @extschema@._shopify_about_customer(p_doc jsonb, p_object_type text, p_object_id text,
	p_customer_id text, p_email text, p_orders text[])
RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
	SELECT p_doc IS NOT NULL AND (
		(p_object_type = 'customer' AND p_object_id = p_customer_id)
		OR (p_object_type = 'order' AND p_object_id = ANY (p_orders))
		OR p_doc #>> '{customer,id}' = p_customer_id
		OR (p_object_type = 'refund' AND p_doc ->> 'order_id' = ANY (p_orders))
		OR (p_email <> '' AND p_doc::text ~* ('(?<![[:alnum:]._%+-])'
			|| regexp_replace(p_email, '([^[:alnum:]])', '\\\1', 'g') || '(?![[:alnum:]_-])(?!\.[[:alnum:]])')))
$$;
COMMENT ON FUNCTION @extschema@._shopify_about_customer(jsonb, text, text, text, text, text[]) IS
	'Whether a stored Shopify document is about the customer of a compliance webhook: the customer, an order named or of the customer, a refund of such an order, or any document carrying the customer''s e-mail.';

/*
 * The request's own payload names the customer: the orders it names are
 * those of orders_to_redact (customers/redact) or orders_requested
 * (customers/data_request).
 */
CREATE FUNCTION @extschema@._shopify_request(p_event bigint,
	OUT source_id integer, OUT customer_id text, OUT email text, OUT orders text[], OUT shop_domain text,
	OUT payload jsonb, OUT tenant text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
	i webhook_inbox.inbox;
BEGIN
	SELECT * INTO i FROM webhook_inbox.inbox x WHERE x.id = p_event;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'inbox event % does not exist', p_event USING ERRCODE = 'no_data_found';
	END IF;
	IF jsonb_typeof(i.payload) IS DISTINCT FROM 'object' THEN
		RAISE EXCEPTION 'inbox event % has no readable payload', p_event USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'A compliance webhook names its shop and customer in its body.';
	END IF;
	source_id := i.source_id;
	tenant := i.tenant;
	payload := i.payload;
	customer_id := webhook_inbox._scalar_text(i.payload #> '{customer,id}');
	email := coalesce(i.payload #>> '{customer,email}', '');
	shop_domain := i.payload ->> 'shop_domain';
	orders := ARRAY(SELECT webhook_inbox._scalar_text(o)
					  FROM jsonb_array_elements(CASE WHEN jsonb_typeof(coalesce(i.payload -> 'orders_to_redact',
								i.payload -> 'orders_requested')) = 'array'
							THEN coalesce(i.payload -> 'orders_to_redact', i.payload -> 'orders_requested')
							ELSE '[]' END) o);
END
$$;
COMMENT ON FUNCTION @extschema@._shopify_request(bigint) IS
	'Reads a Shopify compliance webhook stored in the inbox: its source, customer id and e-mail, the orders it names, its shop domain, and its tenant (the shop of a Shopify app''s source; empty for a source of one shop), which scopes what the webhook erases or lists.';

CREATE FUNCTION @extschema@.shopify_redact_customer(event bigint)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	p_event bigint := shopify_redact_customer.event;
	r record;
	n_inbox integer;
	n_objects integer;
	n_occ integer;
	rid bigint;
BEGIN
	SELECT * INTO r FROM webhook_inbox._shopify_request(p_event);
	IF r.customer_id IS NULL THEN
		RAISE EXCEPTION 'the customers/redact webhook in inbox event % names no customer id', p_event
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	UPDATE webhook_inbox.inbox i
	   SET payload = jsonb_build_object('redacted', true), raw_body = NULL, updated_at = now()
	 WHERE i.source_id = r.source_id AND i.tenant = r.tenant
	   AND (i.id = p_event OR webhook_inbox._shopify_about_customer(i.payload, i.object_type, i.object_id,
			r.customer_id, r.email, r.orders));
	GET DIAGNOSTICS n_inbox = ROW_COUNT;
	UPDATE webhook_inbox.objects o
	   SET state = jsonb_build_object('id', o.object_id, 'redacted', true), updated_at = now()
	 WHERE o.source_id = r.source_id AND o.tenant = r.tenant
	   AND webhook_inbox._shopify_about_customer(o.state, o.object_type, o.object_id,
			r.customer_id, r.email, r.orders);
	GET DIAGNOSTICS n_objects = ROW_COUNT;
	UPDATE webhook_inbox.occurrences o
	   SET payload = jsonb_build_object('redacted', true)
	 WHERE o.source_id = r.source_id AND o.tenant = r.tenant
	   AND webhook_inbox._shopify_about_customer(o.payload, o.kind, o.occurrence_id,
			r.customer_id, r.email, r.orders);
	GET DIAGNOSTICS n_occ = ROW_COUNT;
	INSERT INTO webhook_inbox.redactions (source_id, topic, request_event, shop_domain, customer_id, orders,
										  inbox_rows, objects, occurrences)
	VALUES (r.source_id, 'customers/redact', p_event, r.shop_domain, r.customer_id, r.orders,
			n_inbox, n_objects, n_occ)
	RETURNING id INTO rid;
	RETURN rid;
END
$$;
COMMENT ON FUNCTION @extschema@.shopify_redact_customer(bigint) IS
	'Carries out the Shopify customers/redact webhook stored as the inbox event whose id is event: erases the payloads of every inbox event, mirror state and occurrence of its shop (its source, for a source of one shop) about the customer (the request itself included), keeping ids, digests, statuses and versions; records the redaction. Returns the redactions row.';

CREATE FUNCTION @extschema@.shopify_redact_shop(event bigint)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	p_event bigint := shopify_redact_shop.event;
	r record;
	n_inbox integer;
	n_objects integer;
	n_occ integer;
	rid bigint;
BEGIN
	SELECT * INTO r FROM webhook_inbox._shopify_request(p_event);
	UPDATE webhook_inbox.inbox i
	   SET payload = jsonb_build_object('redacted', true), raw_body = NULL, updated_at = now()
	 WHERE i.source_id = r.source_id AND i.tenant = r.tenant AND (i.payload IS NOT NULL OR i.raw_body IS NOT NULL)
	   AND i.payload IS DISTINCT FROM '{"redacted": true}';
	GET DIAGNOSTICS n_inbox = ROW_COUNT;
	UPDATE webhook_inbox.objects o
	   SET state = jsonb_build_object('id', o.object_id, 'redacted', true), updated_at = now()
	 WHERE o.source_id = r.source_id AND o.tenant = r.tenant AND o.state IS NOT NULL;
	GET DIAGNOSTICS n_objects = ROW_COUNT;
	UPDATE webhook_inbox.occurrences o SET payload = jsonb_build_object('redacted', true)
	 WHERE o.source_id = r.source_id AND o.tenant = r.tenant AND o.payload IS NOT NULL;
	GET DIAGNOSTICS n_occ = ROW_COUNT;
	INSERT INTO webhook_inbox.redactions (source_id, topic, request_event, shop_domain, inbox_rows, objects, occurrences)
	VALUES (r.source_id, 'shop/redact', p_event, r.shop_domain, n_inbox, n_objects, n_occ)
	RETURNING id INTO rid;
	RETURN rid;
END
$$;
COMMENT ON FUNCTION @extschema@.shopify_redact_shop(bigint) IS
	'Carries out the Shopify shop/redact webhook stored as the inbox event whose id is event (48 hours after the app was uninstalled): erases every payload, mirror state and occurrence payload of its shop (of its source, for a source of one shop), keeping ids, digests, statuses and versions; records the redaction. Returns the redactions row.';

CREATE FUNCTION @extschema@.shopify_data_request(event bigint)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	p_event bigint := shopify_data_request.event;
	r record;
	rid bigint;
BEGIN
	SELECT * INTO r FROM webhook_inbox._shopify_request(p_event);
	IF r.customer_id IS NULL THEN
		RAISE EXCEPTION 'the customers/data_request webhook in inbox event % names no customer id', p_event
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	INSERT INTO webhook_inbox.data_requests (source_id, request_event, shop_domain, customer_id, data_request_id,
											 orders_requested, held)
	SELECT r.source_id, p_event, r.shop_domain, r.customer_id, r.payload #>> '{data_request,id}', r.orders,
		   jsonb_build_object(
			'inbox_events', (SELECT count(*) FROM webhook_inbox.inbox i
							  WHERE i.source_id = r.source_id AND i.tenant = r.tenant AND i.id <> p_event
								AND webhook_inbox._shopify_about_customer(i.payload, i.object_type, i.object_id,
									r.customer_id, r.email, r.orders)),
			'objects', (SELECT coalesce(jsonb_agg(jsonb_build_object('type', o.object_type, 'id', o.object_id)
												  ORDER BY o.object_type, o.object_id), '[]')
						  FROM webhook_inbox.objects o
						 WHERE o.source_id = r.source_id AND o.tenant = r.tenant
						   AND webhook_inbox._shopify_about_customer(o.state, o.object_type, o.object_id,
								r.customer_id, r.email, r.orders)),
			'occurrences', (SELECT coalesce(jsonb_agg(jsonb_build_object('kind', o.kind, 'id', o.occurrence_id)
													  ORDER BY o.kind, o.occurrence_id), '[]')
							  FROM webhook_inbox.occurrences o
							 WHERE o.source_id = r.source_id AND o.tenant = r.tenant
							   AND o.first_event_id IS DISTINCT FROM p_event
							   AND webhook_inbox._shopify_about_customer(o.payload, o.kind, o.occurrence_id,
									r.customer_id, r.email, r.orders)))
	RETURNING id INTO rid;
	RETURN rid;
END
$$;
COMMENT ON FUNCTION @extschema@.shopify_data_request(bigint) IS
	'Carries out the Shopify customers/data_request webhook stored as the inbox event whose id is event: a data_requests row for operations listing what is held about the customer. Returns its id.';

CREATE FUNCTION @extschema@.resolve_data_request(id bigint, note text)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	p_id bigint := resolve_data_request.id;
	p_note text := resolve_data_request.note;
BEGIN
	UPDATE webhook_inbox.data_requests d SET resolved_at = now(), note = p_note
	 WHERE d.id = p_id AND d.resolved_at IS NULL;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'data request % does not exist or is resolved already', p_id USING ERRCODE = 'no_data_found';
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@.resolve_data_request(bigint, text) IS
	'Marks a Shopify customer data request as answered (the data was given to the merchant), with a note; it leaves the queues view.';

CREATE FUNCTION @extschema@._shopify_compliance() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	/* a restore loads the redactions and data requests the handler wrote */
	IF NEW.first_event_id IS NULL OR webhook_inbox._restore_session()
	   OR (SELECT s.kind FROM webhook_inbox.sources s WHERE s.id = NEW.source_id) IS DISTINCT FROM 'shopify' THEN
		RETURN NULL;
	END IF;
	CASE NEW.kind
		WHEN 'customers/redact' THEN
			PERFORM webhook_inbox.shopify_redact_customer(NEW.first_event_id);
		WHEN 'shop/redact' THEN
			PERFORM webhook_inbox.shopify_redact_shop(NEW.first_event_id);
		ELSE
			PERFORM webhook_inbox.shopify_data_request(NEW.first_event_id);
	END CASE;
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION @extschema@._shopify_compliance() IS
	'Carries out a Shopify compliance webhook (customers/redact, shop/redact, customers/data_request) when the worker records it once as an occurrence, in that transaction, from its inbox event; not while a restore loads the dump (_restore_session()).';
CREATE TRIGGER shopify_compliance AFTER INSERT ON @extschema@.occurrences
	FOR EACH ROW WHEN (NEW.kind IN ('customers/redact', 'shop/redact', 'customers/data_request'))
	EXECUTE FUNCTION @extschema@._shopify_compliance();

---------------------------------------------------------------------------
-- The queues
---------------------------------------------------------------------------

CREATE INDEX inbox_quarantined_idx ON @extschema@.inbox (source_id, reason) WHERE status = 'quarantined';

/*
 * One row per (queue, source, reason, tenant) with something in it.  A
 * tenant's items are its own rows (tenant is '' for a source's own
 * account); a tenant whose credentials were refused is a flagged_tenant row
 * (tenant_status), and the passes of a tenant that is not read or was
 * removed wait on nobody.  Events are
 * grouped by their reason's first word (the part before the colon);
 * effects by their kind; sweeps by object type: the failed and incomplete
 * passes since the last complete one; a flagged source is one row.
 */
CREATE VIEW @extschema@.queues AS
WITH ev AS (
	SELECT CASE WHEN split_part(i.reason, ':', 1) = 'unorderable' THEN 'unorderable_event'
				ELSE 'quarantined_event' END AS queue,
		   i.source_id, coalesce(nullif(split_part(i.reason, ':', 1), ''), 'unknown') AS reason,
		   count(*) AS count, now() - min(i.updated_at) AS oldest_age, min(i.id) AS oldest_id, i.tenant
	  FROM webhook_inbox.inbox i
	 WHERE i.status = 'quarantined'
	 GROUP BY 1, 2, 3, i.tenant),
ef AS (
	SELECT CASE e.status WHEN 'uncertain' THEN 'uncertain_effect' ELSE 'quarantined_effect' END AS queue,
		   e.source_id, e.kind AS reason, e.owner,
		   count(*) AS count, now() - min(coalesce(e.uncertain_since, e.updated_at)) AS oldest_age,
		   min(e.id) AS oldest_id, e.tenant
	  FROM webhook_inbox.effects e
	 WHERE e.status IN ('uncertain', 'quarantined')
	 GROUP BY 1, 2, 3, 4, e.tenant),
sw AS (
	SELECT CASE r.status WHEN 'failed' THEN 'failed_sweep' ELSE 'skipped_sweep' END AS queue,
		   r.source_id, r.object_type AS reason,
		   count(*) AS count, now() - min(r.started_at) AS oldest_age, min(r.id) AS oldest_id, r.tenant
	  FROM webhook_inbox.sweep_runs r
	 WHERE r.status IN ('failed', 'incomplete')
	   /* since the last complete pass of the same tenant's type: another tenant's proves nothing */
	   AND r.started_at > coalesce((SELECT max(x.started_at) FROM webhook_inbox.sweep_runs x
									 WHERE x.source_id = r.source_id AND x.tenant = r.tenant
									   AND x.object_type = r.object_type
									   AND x.status = 'complete'), '-infinity')
	   /* a tenant not read (flagged, disabled: its own row says so) or removed has no passes waiting */
	   AND (r.tenant = '' OR EXISTS (SELECT 1 FROM webhook_inbox.tenant_status ts
									  WHERE ts.source_id = r.source_id AND ts.tenant = r.tenant AND ts.status = 'active'))
	 GROUP BY 1, 2, 3, r.tenant)
SELECT q.queue, s.name AS source, q.reason, webhook_inbox._queue_owner(q.queue, q.reason, q.fallback) AS owner,
	   q.count, q.oldest_age, q.oldest_id, q.tenant
  FROM (SELECT queue, source_id, reason, 'engineering' AS fallback, count, oldest_age, oldest_id, tenant FROM ev
		UNION ALL
		SELECT queue, source_id, reason, owner, count, oldest_age, oldest_id, tenant FROM ef
		UNION ALL
		SELECT queue, source_id, reason, 'engineering', count, oldest_age, oldest_id, tenant FROM sw
		UNION ALL
		SELECT 'flagged_source', x.id, 'credentials_refused', 'engineering', 1, now() - x.updated_at, x.id, ''
		  FROM webhook_inbox.sources x WHERE x.flagged IS NOT NULL
		UNION ALL
		SELECT 'flagged_tenant', t.source_id, 'credentials_refused', 'engineering', 1, now() - t.since,
			   t.source_id, t.tenant
		  FROM webhook_inbox.tenant_status t WHERE t.status = 'flagged'
		UNION ALL
		/* a request is its shop's: an app source's tenant, from the request's event */
		SELECT 'data_request', d.source_id, 'customers/data_request', 'operations', count(*),
			   now() - min(d.requested_at), min(d.id), coalesce(i.tenant, '')
		  FROM webhook_inbox.data_requests d
		  LEFT JOIN webhook_inbox.inbox i ON i.id = d.request_event
		 WHERE d.resolved_at IS NULL GROUP BY d.source_id, coalesce(i.tenant, '')) q
  LEFT JOIN webhook_inbox.sources s ON s.id = q.source_id;
COMMENT ON VIEW @extschema@.queues IS
	'Everything waiting on a person, one row per (queue, source, reason, tenant): count, oldest age, the oldest item''s id (event, effect, sweep run, source or Shopify data request) and the accountable owner from queue_owners. A tenant whose credentials the provider refused is a flagged_tenant row.';

---------------------------------------------------------------------------
-- Views without payloads, for the reader
---------------------------------------------------------------------------

CREATE VIEW @extschema@.inbox_events AS
SELECT i.id, s.name AS source, i.event_id, i.correlation_id, i.event_type, i.object_type, i.object_id,
	   i.strategy, i.route_id, i.route_version, i.provider_version, i.provider_time, i.status, i.reason,
	   i.attempts, i.next_attempt_at, i.decided_route, i.decided_route_version, i.received_at,
	   i.processed_at, i.updated_at, i.tenant
  FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id;
COMMENT ON VIEW @extschema@.inbox_events IS
	'The inbox without payloads or raw bodies: identities, classification, status and reason.';

CREATE VIEW @extschema@.mirror AS
SELECT s.name AS source, o.object_type, o.object_id, o.status, o.version, o.provider_time, o.deleted,
	   o.last_event_id, o.updated_at, o.hidden_since IS NOT NULL AS hidden,
	   CASE WHEN o.hidden_since IS NOT NULL THEN 'payloads' ELSE 'read_api' END AS known_from,
	   o.tombstone_evidence, o.tenant
  FROM webhook_inbox.objects o JOIN webhook_inbox.sources s ON s.id = o.source_id;
COMMENT ON VIEW @extschema@.mirror IS 'The mirror''s metadata without the objects'' state: hidden objects (the read API cannot see them) are known from their signed payloads only (known_from payloads); a tombstone''s evidence says whether a read inferred it (read: a newer signed version revives it) or the provider stated it.';

CREATE VIEW @extschema@.source_list AS
SELECT s.id, s.name, s.kind, cardinality(s.signing_secrets) AS secrets, s.tolerance, s.api_base,
	   s.api_token IS NOT NULL AS has_api_token, s.enabled, s.flagged, s.created_at, s.updated_at
  FROM webhook_inbox.sources s;
COMMENT ON VIEW @extschema@.source_list IS 'Sources without their secrets or tokens.';

---------------------------------------------------------------------------
-- Acting for an owner
---------------------------------------------------------------------------

/*
 * The role a person acts as: SET ROLE's when set, else the login's.  Inside
 * a SECURITY DEFINER function current_user is the definer; the role setting
 * and the session user are not changed by it.
 */
CREATE FUNCTION @extschema@._caller() RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT CASE pg_catalog.current_setting('role') WHEN 'none' THEN pg_catalog.session_user()::text
		   ELSE pg_catalog.current_setting('role') END
$$;
COMMENT ON FUNCTION @extschema@._caller() IS
	'The role the caller acts as (SET ROLE''s, else the session''s), also inside SECURITY DEFINER functions.';

/*
 * Engineering is whoever holds the extension owner's rights (or a
 * superuser); operations are webhook_inbox_operator's members, finance
 * webhook_inbox_finance's.
 */
CREATE FUNCTION @extschema@._may_act_for(p_owner text) RETURNS boolean
LANGUAGE sql STABLE AS $$
	SELECT coalesce((SELECT r.rolsuper
						OR pg_catalog.pg_has_role(r.oid, e.extowner, 'MEMBER')
						OR (p_owner OPERATOR(pg_catalog.=) 'operations'
							AND pg_catalog.pg_has_role(r.oid, 'webhook_inbox_operator', 'MEMBER'))
						OR (p_owner OPERATOR(pg_catalog.=) 'finance'
							AND pg_catalog.pg_has_role(r.oid, 'webhook_inbox_finance', 'MEMBER'))
					   FROM pg_catalog.pg_roles r, pg_catalog.pg_extension e
					  WHERE r.rolname OPERATOR(pg_catalog.=) webhook_inbox._caller()
						AND e.extname OPERATOR(pg_catalog.=) 'webhook_inbox'), false)
$$;
COMMENT ON FUNCTION @extschema@._may_act_for(text) IS
	'Whether the caller may act on items of an owner: engineering needs the extension owner''s rights, operations webhook_inbox_operator, finance webhook_inbox_finance.';

---------------------------------------------------------------------------
-- Controlled replay by filter
---------------------------------------------------------------------------

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

/*
 * Preview (dry_run, the default) or replay the events matching a filter.
 * Each row says what is (or would be) done: requeue (keeps the
 * classification its route gave it at intake), reclassify (routed again
 * by today's routes), not_permitted (owned by someone the caller may not
 * act for: a real run is refused), no_route (reclassify found none) or
 * needs_reclassify (the event never had a route).  With dismiss, a person
 * closes quarantined events instead (dismiss: status ignored, reason
 * "dismissed: <note>"), for the owner who decided them.  A real run records
 * one requeue_batches row and a requeues row per event, set-based.
 */
/*
 * One event routed again for requeue_where(reclassify => true): what
 * _classify() says, or the error it raises for this event (error set, the
 * rest NULL), so that one event that still fails is reported beside the
 * others instead of aborting the whole preview or batch.
 */
CREATE FUNCTION @extschema@._reclassify_one(p_source_id integer, p_kind text, p_event_type text, p_payload jsonb,
	OUT route_id integer, OUT route_version integer, OUT strategy text, OUT object_type text,
	OUT object_id text, OUT version numeric, OUT provider_time timestamptz, OUT status_value text,
	OUT error text)
LANGUAGE plpgsql STABLE AS $$
BEGIN
	SELECT c.route_id, c.route_version, c.strategy, c.object_type, c.object_id, c.version, c.provider_time,
		   c.status_value
	  INTO route_id, route_version, strategy, object_type, object_id, version, provider_time, status_value
	  FROM webhook_inbox._classify(p_source_id, p_kind, p_event_type, p_payload) c;
EXCEPTION WHEN OTHERS THEN
	error := SQLERRM;
END
$$;
COMMENT ON FUNCTION @extschema@._reclassify_one(integer, text, text, jsonb) IS
	'_classify() for requeue_where(reclassify => true), one event at a time: the route''s answer, or the error it raises for this event.';

CREATE FUNCTION @extschema@.requeue_where(source text DEFAULT NULL, reason text DEFAULT NULL,
	event_type text DEFAULT NULL, received_from timestamptz DEFAULT NULL, received_to timestamptz DEFAULT NULL,
	dry_run boolean DEFAULT true, reclassify boolean DEFAULT false, note text DEFAULT NULL,
	statuses text[] DEFAULT '{quarantined}', max_events integer DEFAULT 10000, dismiss boolean DEFAULT false)
RETURNS TABLE (event_id bigint, source_name text, type text, object_type text, object_id text, status text,
			   reason_text text, owner text, received_at timestamptz, action text, still_fails text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	sid integer;
	n_match integer;
	n_denied integer;
	n_done integer;
	batch bigint;
	who text := webhook_inbox._caller();
BEGIN
	IF requeue_where.statuses IS NULL OR cardinality(requeue_where.statuses) = 0
	   OR NOT requeue_where.statuses <@ ARRAY['done', 'ignored', 'retry', 'quarantined'] THEN
		RAISE EXCEPTION 'statuses must be among done, ignored, retry and quarantined'
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Pending and processing events are already on their way.';
	END IF;
	IF requeue_where.max_events IS NULL OR requeue_where.max_events < 1 OR requeue_where.max_events > 1000000 THEN
		RAISE EXCEPTION 'max_events must be between 1 and 1000000' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF requeue_where.received_from > requeue_where.received_to THEN
		RAISE EXCEPTION 'received_from is after received_to' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF dry_run IS NULL OR requeue_where.reclassify IS NULL OR requeue_where.dismiss IS NULL THEN
		RAISE EXCEPTION 'dry_run, reclassify and dismiss must not be NULL' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF requeue_where.dismiss THEN
		IF requeue_where.reclassify THEN
			RAISE EXCEPTION 'an event is dismissed or reclassified, not both' USING ERRCODE = 'invalid_parameter_value';
		END IF;
		IF requeue_where.statuses <> '{quarantined}' THEN
			RAISE EXCEPTION 'only quarantined events are dismissed' USING ERRCODE = 'invalid_parameter_value';
		END IF;
		IF requeue_where.note IS NULL OR requeue_where.note = '' THEN
			RAISE EXCEPTION 'a dismissal needs a note' USING ERRCODE = 'invalid_parameter_value',
				HINT = 'Say what was decided and on what evidence.';
		END IF;
	END IF;
	IF NOT dry_run AND requeue_where.source IS NULL AND requeue_where.reason IS NULL
	   AND requeue_where.event_type IS NULL AND requeue_where.received_from IS NULL
	   AND requeue_where.received_to IS NULL THEN
		RAISE EXCEPTION 'a requeue needs a filter' USING ERRCODE = 'invalid_parameter_value',
			HINT = 'Name a source, a reason, an event type or a time range; preview with dry_run => true.';
	END IF;
	IF requeue_where.source IS NOT NULL THEN
		SELECT x.id INTO sid FROM webhook_inbox.sources x WHERE x.name = requeue_where.source;
		IF NOT FOUND THEN
			RAISE EXCEPTION 'unknown source "%"', requeue_where.source USING ERRCODE = 'undefined_object';
		END IF;
	END IF;

	CREATE TEMP TABLE IF NOT EXISTS pg_temp.wi_requeue_plan (
		id bigint, source_id integer, source_name text, event_type text, object_type text, object_id text,
		status text, reason text, owner text, received_at timestamptz, action text,
		route_id integer, route_version integer, strategy text, new_object_type text, new_object_id text,
		version numeric, provider_time timestamptz, status_value text, decided_route integer,
		decided_route_version integer, still_fails text) ON COMMIT DROP;
	TRUNCATE pg_temp.wi_requeue_plan;

	INSERT INTO pg_temp.wi_requeue_plan
	SELECT m.id, m.source_id, m.name, m.event_type, m.object_type, m.object_id, m.status, m.reason, m.owner,
		   m.received_at,
		   CASE WHEN NOT webhook_inbox._may_act_for(m.owner) THEN 'not_permitted'
				WHEN requeue_where.reclassify AND c.error IS NOT NULL THEN 'still_fails'
				WHEN requeue_where.reclassify AND (c.route_id IS NULL OR c.strategy = 'ignore'
					OR c.object_id IS NULL OR c.object_type IS NULL) THEN 'no_route'
				WHEN requeue_where.reclassify THEN 'reclassify'
				WHEN requeue_where.dismiss THEN 'dismiss'
				WHEN m.object_id IS NULL OR m.strategy IS NULL THEN 'needs_reclassify'
				ELSE 'requeue' END,
		   c.route_id, c.route_version, c.strategy, c.object_type, c.object_id, c.version, c.provider_time,
		   c.status_value, m.decided_route, m.decided_route_version,
		   CASE WHEN c.error IS NOT NULL
				THEN pg_catalog.format('event %s (%s) still fails to classify with today''s routes: %s',
									   m.id, coalesce(m.event_type, 'no type'), c.error) END
	  FROM (SELECT i.*, s.name, s.kind,
				   CASE WHEN i.status <> 'quarantined' THEN 'engineering'
						ELSE webhook_inbox._queue_owner(
							CASE WHEN split_part(i.reason, ':', 1) = 'unorderable' THEN 'unorderable_event'
								 ELSE 'quarantined_event' END,
							coalesce(nullif(split_part(i.reason, ':', 1), ''), 'unknown')) END AS owner
			  FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id
			 WHERE i.status = ANY (requeue_where.statuses)
			   AND (sid IS NULL OR i.source_id = sid)
			   AND (requeue_where.reason IS NULL OR split_part(i.reason, ':', 1) = requeue_where.reason
					OR i.reason = requeue_where.reason)
			   AND (requeue_where.event_type IS NULL
					OR i.event_type LIKE webhook_inbox._pattern_like(requeue_where.event_type))
			   AND (requeue_where.received_from IS NULL OR i.received_at >= requeue_where.received_from)
			   AND (requeue_where.received_to IS NULL OR i.received_at < requeue_where.received_to)
			 ORDER BY i.id
			 LIMIT requeue_where.max_events + 1
			 FOR UPDATE OF i) m
	  LEFT JOIN LATERAL (SELECT * FROM webhook_inbox._reclassify_one(m.source_id, m.kind, m.event_type, m.payload)
						  WHERE requeue_where.reclassify AND m.payload IS NOT NULL
							AND m.event_type IS NOT NULL) c ON true;
	GET DIAGNOSTICS n_match = ROW_COUNT;

	IF n_match > requeue_where.max_events THEN
		IF dry_run THEN
			DELETE FROM pg_temp.wi_requeue_plan p
			 WHERE p.id = (SELECT max(x.id) FROM pg_temp.wi_requeue_plan x);
		ELSE
			RAISE EXCEPTION 'more than % events match', requeue_where.max_events
				USING ERRCODE = 'program_limit_exceeded',
					  HINT = 'Narrow the filter, or raise max_events.';
		END IF;
	END IF;

	IF NOT dry_run THEN
		SELECT count(*) INTO n_denied FROM pg_temp.wi_requeue_plan p WHERE p.action = 'not_permitted';
		IF n_denied > 0 THEN
			RAISE EXCEPTION '% of % matching events are owned by others than %', n_denied, n_match, who
				USING ERRCODE = 'insufficient_privilege',
					  DETAIL = 'Nothing was changed.',
					  HINT = 'Narrow the filter to what you own (see the owner column of dry_run => true).';
		END IF;
		SELECT count(*) INTO n_done FROM pg_temp.wi_requeue_plan p
		 WHERE p.action IN ('requeue', 'reclassify', 'dismiss');
		INSERT INTO webhook_inbox.requeue_batches (requeued_by, filter, reclassify, events, skipped, note)
		VALUES (who, jsonb_strip_nulls(jsonb_build_object('source', requeue_where.source,
					'reason', requeue_where.reason, 'event_type', requeue_where.event_type,
					'received_from', requeue_where.received_from, 'received_to', requeue_where.received_to,
					'statuses', requeue_where.statuses,
					'dismiss', CASE WHEN requeue_where.dismiss THEN true END)),
				requeue_where.reclassify, n_done, n_match - n_done, requeue_where.note)
		RETURNING id INTO batch;
		INSERT INTO webhook_inbox.requeues (event_id, previous_status, previous_reason, previous_route,
											previous_route_version, note, requeued_by, batch_id)
		SELECT p.id, p.status, p.reason, p.decided_route, p.decided_route_version,
			   CASE p.action WHEN 'dismiss' THEN 'dismissed: ' || requeue_where.note
			   ELSE coalesce(requeue_where.note, p.action) END, who, batch
		  FROM pg_temp.wi_requeue_plan p WHERE p.action IN ('requeue', 'reclassify', 'dismiss');
		/* a dismissal is a person's decision: the event is closed, never processed */
		UPDATE webhook_inbox.inbox i
		   SET status = 'ignored', reason = 'dismissed: ' || requeue_where.note, processed_at = now(),
			   updated_at = now()
		  FROM pg_temp.wi_requeue_plan p
		 WHERE i.id = p.id AND p.action = 'dismiss';
		/* a plain requeue keeps what the route decided at intake */
		UPDATE webhook_inbox.inbox i
		   SET status = 'pending', reason = NULL, attempts = 0, next_attempt_at = now(), claim_token = NULL,
			   updated_at = now()
		  FROM pg_temp.wi_requeue_plan p
		 WHERE i.id = p.id AND p.action = 'requeue';
		UPDATE webhook_inbox.inbox i
		   SET status = 'pending', reason = NULL, attempts = 0, next_attempt_at = now(), claim_token = NULL,
			   route_id = p.route_id, route_version = p.route_version, strategy = p.strategy,
			   object_type = p.new_object_type, object_id = p.new_object_id, provider_version = p.version,
			   provider_time = p.provider_time, status_value = p.status_value, updated_at = now()
		  FROM pg_temp.wi_requeue_plan p
		 WHERE i.id = p.id AND p.action = 'reclassify';
	END IF;

	RETURN QUERY SELECT p.id, p.source_name, p.event_type, p.object_type, p.object_id, p.status, p.reason,
						p.owner, p.received_at, p.action, p.still_fails
				   FROM pg_temp.wi_requeue_plan p ORDER BY p.id;
	TRUNCATE pg_temp.wi_requeue_plan;
END
$$;
COMMENT ON FUNCTION @extschema@.requeue_where(text, text, text, timestamptz, timestamptz, boolean, boolean, text, text[], integer, boolean) IS
	'Controlled replay by filter (source, reason''s first word, event type pattern, received time range, statuses): previews by default, and with dry_run => false requeues (keeping the intake-time classification), reclassifies, or with dismiss closes quarantined events as decided (ignored, "dismissed: note"); audited in requeue_batches and requeues. Refused whole if any matching event is owned by someone the caller may not act for. With reclassify, an event today''s routes still cannot classify is reported (action still_fails, still_fails says why) and left as it is; the rest go on.';

---------------------------------------------------------------------------
-- Waking the outbox's consumers
---------------------------------------------------------------------------

/*
 * NOTIFY webhook_inbox_effects, payload the kind, when effects a local
 * consumer executes become due (new, or given back for a retry): one
 * notification per kind and statement, delivered at commit.  The worker
 * executes http effects itself, so those wake nobody.
 */
CREATE FUNCTION @extschema@._effects_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	/* a restore loading the dump's effects wakes no consumer */
	IF webhook_inbox._restore_session() THEN
		RETURN NULL;
	END IF;
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

---------------------------------------------------------------------------
-- Typed views of the mirror, for applications
---------------------------------------------------------------------------

/*
 * A JSON number as a timestamp of Unix seconds (Stripe), else NULL: a view
 * never fails on odd data.  This and _number() are inlined into the views'
 * statements (no SET search_path, see sql/search_path.sql): every name in
 * them is qualified, so they resolve the same from any caller's path.
 */
CREATE FUNCTION @extschema@._unix_time(v jsonb) RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$
	SELECT CASE WHEN pg_catalog.jsonb_typeof(v) OPERATOR(pg_catalog.=) 'number'
				THEN pg_catalog.to_timestamp((v OPERATOR(pg_catalog.#>>) '{}'::pg_catalog.text[])::pg_catalog.float8) END
$$;
COMMENT ON FUNCTION @extschema@._unix_time(jsonb) IS 'A JSON number of Unix seconds as timestamptz, else NULL.';

/* A JSON number or numeric string as numeric, else NULL. */
CREATE FUNCTION @extschema@._number(v jsonb) RETURNS numeric
LANGUAGE sql IMMUTABLE AS $$
	SELECT CASE WHEN pg_catalog.jsonb_typeof(v) OPERATOR(pg_catalog.=) 'number'
				THEN (v OPERATOR(pg_catalog.#>>) '{}'::pg_catalog.text[])::pg_catalog.numeric
				WHEN pg_catalog.jsonb_typeof(v) OPERATOR(pg_catalog.=) 'string'
					 AND (v OPERATOR(pg_catalog.#>>) '{}'::pg_catalog.text[]) OPERATOR(pg_catalog.~) '^-?[0-9]+(\.[0-9]+)?$'
				THEN (v OPERATOR(pg_catalog.#>>) '{}'::pg_catalog.text[])::pg_catalog.numeric END
$$;
COMMENT ON FUNCTION @extschema@._number(jsonb) IS 'A JSON number or decimal string as numeric, else NULL.';

CREATE VIEW @extschema@.stripe_subscriptions AS
SELECT s.name AS source, o.object_id AS id, o.status, o.state ->> 'customer' AS customer,
	   coalesce(webhook_inbox._unix_time(o.state -> 'current_period_end'),
				webhook_inbox._unix_time(o.state #> '{items,data,0,current_period_end}')) AS current_period_end,
	   CASE WHEN jsonb_typeof(o.state -> 'cancel_at_period_end') = 'boolean'
			 THEN (o.state ->> 'cancel_at_period_end')::boolean END AS cancel_at_period_end,
	   webhook_inbox._unix_time(o.state -> 'canceled_at') AS canceled_at,
	   o.state #>> '{items,data,0,price,id}' AS price, o.deleted, o.updated_at, o.tenant
  FROM webhook_inbox.objects o JOIN webhook_inbox.sources s ON s.id = o.source_id
 WHERE s.kind = 'stripe' AND o.object_type = 'subscription';
COMMENT ON VIEW @extschema@.stripe_subscriptions IS
	'Mirrored Stripe subscriptions: status, customer, current period end (the subscription''s, or its first item''s since API 2025-03-31), cancellation, price.';

CREATE VIEW @extschema@.stripe_invoices AS
SELECT s.name AS source, o.object_id AS id, o.status, o.state ->> 'customer' AS customer,
	   coalesce(o.state ->> 'subscription', o.state #>> '{parent,subscription_details,subscription}') AS subscription,
	   webhook_inbox._number(o.state -> 'amount_due')::bigint AS amount_due,
	   webhook_inbox._number(o.state -> 'amount_paid')::bigint AS amount_paid,
	   o.state ->> 'currency' AS currency, o.deleted, o.updated_at, o.tenant
  FROM webhook_inbox.objects o JOIN webhook_inbox.sources s ON s.id = o.source_id
 WHERE s.kind = 'stripe' AND o.object_type = 'invoice';
COMMENT ON VIEW @extschema@.stripe_invoices IS 'Mirrored Stripe invoices: status, customer, subscription, amounts in the currency''s minor unit.';

CREATE VIEW @extschema@.stripe_payment_intents AS
SELECT s.name AS source, o.object_id AS id, o.status, o.state ->> 'customer' AS customer,
	   webhook_inbox._number(o.state -> 'amount')::bigint AS amount, o.state ->> 'currency' AS currency,
	   o.deleted, o.updated_at, o.tenant
  FROM webhook_inbox.objects o JOIN webhook_inbox.sources s ON s.id = o.source_id
 WHERE s.kind = 'stripe' AND o.object_type IN ('payment', 'payment_intent');
COMMENT ON VIEW @extschema@.stripe_payment_intents IS 'Mirrored Stripe PaymentIntents: status, customer, amount in the minor unit, currency.';

CREATE VIEW @extschema@.stripe_customers AS
SELECT s.name AS source, o.object_id AS id, o.state ->> 'email' AS email, o.state ->> 'name' AS name,
	   o.deleted, o.updated_at, o.tenant
  FROM webhook_inbox.objects o JOIN webhook_inbox.sources s ON s.id = o.source_id
 WHERE s.kind = 'stripe' AND o.object_type = 'customer';
COMMENT ON VIEW @extschema@.stripe_customers IS 'Mirrored Stripe customers: email and name.';

CREATE VIEW @extschema@.stripe_charges AS
SELECT s.name AS source, o.object_id AS id, o.status, o.state ->> 'customer' AS customer,
	   o.state ->> 'payment_intent' AS payment_intent,
	   webhook_inbox._number(o.state -> 'amount')::bigint AS amount,
	   webhook_inbox._number(o.state -> 'amount_refunded')::bigint AS amount_refunded,
	   o.state ->> 'currency' AS currency,
	   CASE WHEN jsonb_typeof(o.state -> 'refunded') = 'boolean' THEN (o.state ->> 'refunded')::boolean END AS refunded,
	   CASE WHEN jsonb_typeof(o.state -> 'disputed') = 'boolean' THEN (o.state ->> 'disputed')::boolean END AS disputed,
	   o.deleted, o.updated_at, o.tenant
  FROM webhook_inbox.objects o JOIN webhook_inbox.sources s ON s.id = o.source_id
 WHERE s.kind = 'stripe' AND o.object_type = 'charge';
COMMENT ON VIEW @extschema@.stripe_charges IS 'Mirrored Stripe charges: status, customer, PaymentIntent, amount and amount refunded in the minor unit, currency, refunded, disputed.';

CREATE VIEW @extschema@.stripe_refunds AS
SELECT s.name AS source, o.object_id AS id, o.status, o.state ->> 'charge' AS charge,
	   o.state ->> 'payment_intent' AS payment_intent,
	   webhook_inbox._number(o.state -> 'amount')::bigint AS amount, o.state ->> 'currency' AS currency,
	   o.state ->> 'reason' AS reason, o.deleted, o.updated_at, o.tenant
  FROM webhook_inbox.objects o JOIN webhook_inbox.sources s ON s.id = o.source_id
 WHERE s.kind = 'stripe' AND o.object_type = 'refund';
COMMENT ON VIEW @extschema@.stripe_refunds IS 'Mirrored Stripe refunds: status, charge, PaymentIntent, amount in the minor unit, currency, reason.';

CREATE VIEW @extschema@.stripe_disputes AS
SELECT s.name AS source, o.object_id AS id, o.status, o.state ->> 'charge' AS charge,
	   o.state ->> 'payment_intent' AS payment_intent,
	   webhook_inbox._number(o.state -> 'amount')::bigint AS amount, o.state ->> 'currency' AS currency,
	   o.state ->> 'reason' AS reason,
	   webhook_inbox._unix_time(o.state #> '{evidence_details,due_by}') AS evidence_due_by, o.deleted, o.updated_at, o.tenant
  FROM webhook_inbox.objects o JOIN webhook_inbox.sources s ON s.id = o.source_id
 WHERE s.kind = 'stripe' AND o.object_type = 'dispute';
COMMENT ON VIEW @extschema@.stripe_disputes IS 'Mirrored Stripe disputes: status, charge, PaymentIntent, amount, currency, reason, when the evidence is due.';

CREATE VIEW @extschema@.stripe_checkout_sessions AS
SELECT s.name AS source, o.object_id AS id, o.status, o.state ->> 'payment_status' AS payment_status,
	   o.state ->> 'mode' AS mode, o.state ->> 'customer' AS customer,
	   o.state ->> 'subscription' AS subscription, o.state ->> 'payment_intent' AS payment_intent,
	   webhook_inbox._number(o.state -> 'amount_total')::bigint AS amount_total, o.state ->> 'currency' AS currency,
	   o.state ->> 'client_reference_id' AS client_reference_id, o.deleted, o.updated_at, o.tenant
  FROM webhook_inbox.objects o JOIN webhook_inbox.sources s ON s.id = o.source_id
 WHERE s.kind = 'stripe' AND o.object_type IN ('checkout.session', 'checkout_session');
COMMENT ON VIEW @extschema@.stripe_checkout_sessions IS 'Mirrored Stripe Checkout Sessions: status, payment status, mode, customer, subscription or PaymentIntent, total, currency, your client_reference_id.';

CREATE VIEW @extschema@.shopify_orders AS
SELECT s.name AS source, o.object_id AS id, o.state ->> 'name' AS name, o.status AS financial_status,
	   o.state ->> 'fulfillment_status' AS fulfillment_status,
	   webhook_inbox._number(o.state -> 'total_price') AS total_price, o.state ->> 'currency' AS currency,
	   o.state #>> '{customer,id}' AS customer, o.provider_time AS shop_updated_at, o.deleted, o.updated_at,
	   o.tenant
  FROM webhook_inbox.objects o JOIN webhook_inbox.sources s ON s.id = o.source_id
 WHERE s.kind = 'shopify' AND o.object_type = 'order';
COMMENT ON VIEW @extschema@.shopify_orders IS 'Mirrored Shopify orders: name, financial and fulfillment status, total price (decimal), currency, customer, and the shop that owns the order (tenant: its myshopify.com domain, empty for a source''s own shop).';

CREATE VIEW @extschema@.github_issues AS
SELECT s.name AS source, o.object_id AS id, webhook_inbox._number(i.issue -> 'number')::integer AS number,
	   i.issue ->> 'title' AS title, o.status AS state, i.issue #>> '{user,login}' AS author,
	   coalesce(o.state #>> '{repository,full_name}',
				substring(i.issue ->> 'repository_url' FROM '/repos/([^/]+/[^/]+)$')) AS repository,
	   i.issue ->> 'html_url' AS url, o.provider_time AS github_updated_at, o.deleted, o.updated_at,
	   o.tenant
  FROM webhook_inbox.objects o JOIN webhook_inbox.sources s ON s.id = o.source_id
 CROSS JOIN LATERAL (SELECT coalesce(o.state -> 'issue', o.state) AS issue) i
 WHERE s.kind = 'github' AND o.object_type = 'issue';
COMMENT ON VIEW @extschema@.github_issues IS 'Mirrored GitHub issues (saved from a webhook''s payload or fetched from the API): number, title, state, author, repository, URL, and the GitHub App installation that reads it (tenant: its id, empty for a source''s own token).';

CREATE VIEW @extschema@.github_pull_requests AS
SELECT s.name AS source, o.object_id AS id, webhook_inbox._number(p.pr -> 'number')::integer AS number,
	   p.pr ->> 'title' AS title, o.status AS state,
	   /* a single pull request's read says merged; a list's item and a webhook's only merged_at */
	   CASE WHEN jsonb_typeof(p.pr -> 'merged') = 'boolean' THEN (p.pr ->> 'merged')::boolean
			WHEN p.pr ? 'merged_at' THEN jsonb_typeof(p.pr -> 'merged_at') = 'string' END AS merged,
	   CASE WHEN jsonb_typeof(p.pr -> 'draft') = 'boolean' THEN (p.pr ->> 'draft')::boolean END AS draft,
	   p.pr #>> '{user,login}' AS author,
	   coalesce(o.state #>> '{repository,full_name}', p.pr #>> '{base,repo,full_name}') AS repository,
	   p.pr #>> '{head,ref}' AS head_ref, p.pr #>> '{base,ref}' AS base_ref,
	   p.pr ->> 'html_url' AS url, o.provider_time AS github_updated_at, o.deleted, o.updated_at, o.tenant
  FROM webhook_inbox.objects o JOIN webhook_inbox.sources s ON s.id = o.source_id
 CROSS JOIN LATERAL (SELECT coalesce(o.state -> 'pull_request', o.state) AS pr) p
 WHERE s.kind = 'github' AND o.object_type = 'pull_request';
COMMENT ON VIEW @extschema@.github_pull_requests IS 'Mirrored GitHub pull requests (saved from a webhook''s payload or fetched from the API): number, title, state, merged, draft, author, repository, head and base branches, URL, and the GitHub App installation that reads it (tenant: its id, empty for a source''s own token).';

---------------------------------------------------------------------------
-- The restore guard: a copy of the database never acts on live accounts by
-- surprise.  The identity of the database the data lives in (the cluster's
-- system identifier and the database's oid) is recorded at CREATE EXTENSION
-- in installation, which pg_dump carries; a restore elsewhere brings the
-- original's row beside the one its own CREATE EXTENSION wrote, so the
-- identities differ.  While any recorded identity is not this database's,
-- outbound work waits: the background worker fetches, sweeps and sends no
-- effect, run_effects() and sweep_now() refuse; intake goes on storing
-- deliveries.  resume_outbound() records this database as the only one.
-- A physical copy (a base backup, a promoted standby) keeps both the system
-- identifier and the oid: it is the same database, and a failover must not
-- pause.
---------------------------------------------------------------------------

CREATE TABLE @extschema@.installation (
	system_identifier bigint NOT NULL,
	database_oid	oid NOT NULL,
	database_name	name NOT NULL,
	recorded_at		timestamptz NOT NULL DEFAULT now(),
	recorded_by		text NOT NULL DEFAULT current_user,
	note			text NOT NULL
);
COMMENT ON TABLE @extschema@.installation IS
	'The identities (cluster system identifier, database oid) of the database this data was recorded in: written by CREATE EXTENSION and resume_outbound(), carried by pg_dump. Any row that is not this database''s pauses outbound work (a restored copy) until resume_outbound().';
/*
 * A restore runs CREATE EXTENSION in the session that then loads the data:
 * pg_dump's scripts and pg_restore set row_security off first (a session
 * of yours has it on), and pg_restore names itself.  Such an extension
 * starts paused, before any table of the dump is loaded; and the triggers
 * that carry out business logic on a row written (a compliance webhook's
 * handler, the effects of a transition) do nothing in such a session: the
 * rows they would write are in the dump already.
 */
CREATE FUNCTION @extschema@._restore_session() RETURNS boolean
LANGUAGE sql STABLE AS $$
	SELECT pg_catalog.current_setting('row_security') = 'off'
		OR pg_catalog.current_setting('application_name') = 'pg_restore'
$$;
COMMENT ON FUNCTION @extschema@._restore_session() IS
	'Whether this session is a restore loading a dump (row_security off, as pg_dump''s scripts and pg_restore set it, or pg_restore by name): the triggers that carry out business logic then do nothing, since the rows they would write are in the dump.';
INSERT INTO @extschema@.installation (system_identifier, database_oid, database_name, note)
SELECT c.system_identifier, d.oid, d.datname,
	   CASE WHEN @extschema@._restore_session()
			THEN 'CREATE EXTENSION in a restore' ELSE 'CREATE EXTENSION' END
  FROM pg_catalog.pg_control_system() c, pg_catalog.pg_database d
 WHERE d.datname = pg_catalog.current_database();
SELECT pg_catalog.pg_extension_config_dump('@extschema@.installation', '');

/*
 * Why outbound work is paused, or NULL when it is not: a recorded identity
 * that is not this database's (the newest such), or none recorded.
 */
CREATE FUNCTION @extschema@._outbound_paused() RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER AS $$
DECLARE
	v_why text;
BEGIN
	/*
	 * Signs of a copy, the first that holds.  A pg_restore connected to
	 * this database, or this database's CREATE EXTENSION run in a restore
	 * session: both hold before the first table of the dump is loaded, so
	 * no cycle of the worker that sees the extension misses them, whatever
	 * order the tables load in.  For a restore by another client: the
	 * newest recorded identity that is not this database's (the
	 * original's row, from the dump); or, while this database's only
	 * record is its own CREATE EXTENSION, a source created or an event
	 * received before it (rows from the dump: no request leaves without a
	 * source, and the worker must not work on events whose source is
	 * still to come).  None recorded at all (the rows deleted) is no
	 * evidence of a copy.  SECURITY DEFINER: the reader may see why
	 * (outbound_status) without reading the table, the control file or
	 * other sessions.  PL/pgSQL, so that a session plans the statement
	 * once: the background worker asks at every cycle, and a SQL function
	 * that is not inlined is planned at every call before PostgreSQL 18.
	 */
	WITH here AS (
		SELECT c.system_identifier, d.oid AS database_oid, d.datname AS database_name
		  FROM pg_control_system() c, pg_database d
		 WHERE d.datname = current_database())
	SELECT coalesce(
		(SELECT format('this database is being restored from a copy: pg_restore is connected to it (backend %s)', a.pid)
		   FROM pg_stat_activity a
		  WHERE a.datname = h.database_name AND a.application_name = 'pg_restore' AND a.pid <> pg_backend_pid()
		  ORDER BY a.backend_start LIMIT 1),
		(SELECT format('this database is being restored, or was, from a dump: its CREATE EXTENSION ran in a restore session at %s (row_security off, or pg_restore)',
					   i.recorded_at)
		   FROM webhook_inbox.installation i
		  WHERE (i.system_identifier, i.database_oid) = (h.system_identifier, h.database_oid)
			AND i.note = 'CREATE EXTENSION in a restore'
		  LIMIT 1),
		(SELECT format('this database was restored from a copy: its data was recorded in database "%s" (oid %s) of cluster %s at %s, and this is database "%s" (oid %s) of cluster %s',
					   i.database_name, i.database_oid, i.system_identifier, i.recorded_at,
					   h.database_name, h.database_oid, h.system_identifier)
		   FROM webhook_inbox.installation i
		  WHERE (i.system_identifier, i.database_oid) <> (h.system_identifier, h.database_oid)
		  ORDER BY i.recorded_at DESC LIMIT 1),
		(SELECT format('this database is being restored from a copy: it holds %s at %s, before CREATE EXTENSION ran here at %s',
					   o.what, o.at, i.recorded_at)
		   FROM webhook_inbox.installation i
		  CROSS JOIN LATERAL (
				SELECT format('source "%s", created', s.name) AS what, s.created_at AS at
				  FROM webhook_inbox.sources s ORDER BY s.created_at LIMIT 1) o
		  WHERE (i.system_identifier, i.database_oid) = (h.system_identifier, h.database_oid)
			AND i.note = 'CREATE EXTENSION' AND o.at < i.recorded_at
			AND NOT EXISTS (SELECT 1 FROM webhook_inbox.installation j WHERE j.note <> 'CREATE EXTENSION')),
		(SELECT format('this database is being restored from a copy: it holds event %s, received at %s, before CREATE EXTENSION ran here at %s',
					   e.id, e.received_at, i.recorded_at)
		   FROM webhook_inbox.installation i
		  /* the oldest event by id: one probe of the primary key */
		  CROSS JOIN LATERAL (SELECT x.id, x.received_at FROM webhook_inbox.inbox x ORDER BY x.id LIMIT 1) e
		  WHERE (i.system_identifier, i.database_oid) = (h.system_identifier, h.database_oid)
			AND i.note = 'CREATE EXTENSION' AND e.received_at < i.recorded_at
			AND NOT EXISTS (SELECT 1 FROM webhook_inbox.installation j WHERE j.note <> 'CREATE EXTENSION')))
	  INTO v_why
	  FROM here h;
	RETURN v_why;
END
$$;
COMMENT ON FUNCTION @extschema@._outbound_paused() IS
	'Why outbound work (fetches, sweeps, effects) is paused, or NULL: a pg_restore connected to this database, its CREATE EXTENSION run in a restore session, an identity recorded in installation that is not this database''s, or a source or an event older than this database''s own CREATE EXTENSION (a restored copy, or one being restored).';

/*
 * The tables of the extension that no dump carries, each with the reason
 * none is needed: every other table is registered with
 * pg_extension_config_dump() (regress/t/533_restore_whole.pl lists the
 * extension's tables and fails on one in neither list).
 */
CREATE FUNCTION @extschema@._derived_tables(OUT table_name text, OUT why text)
RETURNS SETOF record
LANGUAGE sql IMMUTABLE AS $$
	VALUES ('sweep_seen', 'the ids a full pass running now has listed, emptied when it ends: no pass of the original runs in a copy'),
		   ('source_scopes', 'the access scopes the provider answered for a token: the next sweep asks again, and until then what a scope would let it see is hidden, never deleted')
$$;
COMMENT ON FUNCTION @extschema@._derived_tables() IS
	'The extension''s tables a dump does not carry, and why none is needed (every other table is registered with pg_extension_config_dump()).';

CREATE FUNCTION @extschema@._outbound_guard() RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	why text := webhook_inbox._outbound_paused();
BEGIN
	IF why IS NOT NULL THEN
		RAISE EXCEPTION 'outbound work is paused'
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = format('Fetches, sweeps and effects wait, so that a copy never acts on the provider accounts of the original: %s.', why),
				  HINT = 'Check the sources'' api_base and api_token, then run SELECT webhook_inbox.resume_outbound();';
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@._outbound_guard() IS
	'Raises when outbound work is paused (a restored copy): called by sweep_now() and run_effects() before any request.';

CREATE FUNCTION @extschema@.resume_outbound() RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	why text := webhook_inbox._outbound_paused();
BEGIN
	/* this database becomes the only one: a dump of it pauses its restores */
	DELETE FROM webhook_inbox.installation;
	INSERT INTO webhook_inbox.installation (system_identifier, database_oid, database_name, note)
	SELECT c.system_identifier, d.oid, d.datname, 'resume_outbound()'
	  FROM pg_control_system() c, pg_database d
	 WHERE d.datname = current_database();
	IF why IS NULL THEN
		RETURN 'not paused';
	END IF;
	RAISE LOG 'webhook_inbox: outbound work resumed by %: %', current_user, why;
	RETURN 'resumed';
END
$$;
COMMENT ON FUNCTION @extschema@.resume_outbound() IS
	'Ends the pause of outbound work after a restore: records this database as the only one the data lives in, so the worker fetches, sweeps and sends effects again. Returns resumed, or not paused (the identity is recorded again all the same).';

CREATE VIEW @extschema@.outbound_status AS
SELECT webhook_inbox._outbound_paused() IS NOT NULL AS paused,
	   webhook_inbox._outbound_paused() AS reason,
	   CASE WHEN webhook_inbox._outbound_paused() IS NOT NULL
			THEN 'SELECT webhook_inbox.resume_outbound();' END AS resume_with;
COMMENT ON VIEW @extschema@.outbound_status IS
	'Whether outbound work (fetches, sweeps, effects) is paused because this database is a restored copy, why, and the call that resumes it.';

---------------------------------------------------------------------------
-- Privileges of the roles
---------------------------------------------------------------------------

REVOKE ALL ON @extschema@.queue_owners, @extschema@.queues, @extschema@.inbox_events, @extschema@.mirror,
	@extschema@.source_list, @extschema@.requeue_batches FROM PUBLIC;
REVOKE ALL ON @extschema@.installation, @extschema@.outbound_status FROM PUBLIC;
GRANT USAGE ON SCHEMA @extschema@ TO webhook_inbox_reader, webhook_inbox_operator, webhook_inbox_finance;
GRANT SELECT ON @extschema@.queues, @extschema@.queue_owners, @extschema@.inbox_health,
	@extschema@.inbox_health_by_tenant, @extschema@.sweep_health,
	@extschema@.effects_health, @extschema@.effects_unresolved, @extschema@.worker_counters,
	@extschema@.inbox_events, @extschema@.mirror, @extschema@.source_list, @extschema@.deliveries,
	@extschema@.sweep_runs, @extschema@.sweep_checkpoints, @extschema@.repairs, @extschema@.transitions,
	@extschema@.requeues, @extschema@.requeue_batches, @extschema@.effect_resolutions
	TO webhook_inbox_reader;
GRANT SELECT ON @extschema@.outbound_status TO webhook_inbox_reader;
GRANT SELECT ON @extschema@.hidden_objects, @extschema@.horizons, @extschema@.source_scopes TO webhook_inbox_reader;
GRANT EXECUTE ON FUNCTION @extschema@._horizons() TO webhook_inbox_reader;
GRANT EXECUTE ON FUNCTION @extschema@._outbound_paused() TO webhook_inbox_reader;
GRANT EXECUTE ON FUNCTION @extschema@.worker_stats(), @extschema@._queue_owner(text, text, text)
	TO webhook_inbox_reader;
GRANT EXECUTE ON FUNCTION @extschema@._synchronous_standby() TO webhook_inbox_reader;
GRANT EXECUTE ON FUNCTION @extschema@._secrets_warning() TO webhook_inbox_reader;
GRANT EXECUTE ON FUNCTION @extschema@.requeue_where(text, text, text, timestamptz, timestamptz, boolean, boolean,
	text, text[], integer, boolean) TO webhook_inbox_operator;
GRANT EXECUTE ON FUNCTION @extschema@.resolve_effect(bigint, text, text)
	TO webhook_inbox_operator, webhook_inbox_finance;
-- Shopify's compliance records: readable by readers, data requests resolved by operators
GRANT SELECT ON @extschema@.redactions, @extschema@.data_requests TO webhook_inbox_reader;
GRANT EXECUTE ON FUNCTION @extschema@.resolve_data_request(bigint, text) TO webhook_inbox_operator;
