---------------------------------------------------------------------------
-- Presets: machines and routes for every supported provider kind
---------------------------------------------------------------------------

/*
 * The article's payment machine (pending, authorised, captured, settled):
 * forward only, so late events are recognised.  It is the preset for hmac
 * and standard sources and custom routes; no provider's own objects use it.
 *
 * Razorpay's entities, with the statuses razorpay-node types
 * (payments.d.ts, refunds.d.ts, orders.d.ts): a payment is created,
 * authorized, captured, refunded or failed (an authorized payment that is
 * never captured is refunded); a refund pending, processed or failed; an
 * order created, attempted (a payment was tried) or paid.
 */
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
	('razorpay_payment', 'authorized', 'refunded'),
	('razorpay_payment', 'created', 'failed'),
	('razorpay_payment', 'authorized', 'failed'),
	('razorpay_refund', 'unknown', 'pending'),
	('razorpay_refund', 'pending', 'processed'),
	('razorpay_refund', 'pending', 'failed'),
	('razorpay_order', 'unknown', 'created'),
	('razorpay_order', 'created', 'attempted'),
	('razorpay_order', 'attempted', 'paid'),
	('razorpay_order', 'created', 'paid');

/*
 * Stripe: every object type with events has a read API, and the real
 * lifecycles have cycles (a PaymentIntent whose attempt fails goes back to
 * requires_payment_method; a subscription goes active -> past_due -> active,
 * or paused and back), so no acyclic machine can order them: every state
 * event fetches the present.  Refunds and disputes are followed the same way
 * and also recorded once as occurrences with amount and currency.  Event
 * names are those of stripe-node's WebhookEndpointCreateParams.EnabledEvent.
 */
INSERT INTO @extschema@.routes (source_kind, event_type, class, strategy, object_type, object_type_path,
	object_id_path, version_path, status_path, time_path, amount_path, currency_path, machine, tombstone,
	occurrence_kind, priority)
VALUES
	/* subscriptions: incomplete, incomplete_expired, trialing, active, past_due, canceled, unpaid, paused */
	('stripe', 'customer.subscription.*', 'state', 'fetch', 'subscription', NULL,
	 '$.data.object.id', NULL, '$.data.object.status', '$.created', NULL, NULL, NULL, false, NULL, 100),
	/* customers: customer.deleted fetches {"deleted": true}, a tombstone */
	('stripe', 'customer.*', 'state', 'fetch', 'customer', NULL,
	 '$.data.object.id', NULL, NULL, '$.created', NULL, NULL, NULL, false, NULL, 90),
	/* a customer's discounts, sources and tax ids change the customer they name */
	('stripe', 'customer.discount.*', 'state', 'fetch', 'customer', NULL,
	 '$.data.object.customer', NULL, NULL, '$.created', NULL, NULL, NULL, false, NULL, 100),
	('stripe', 'customer.source.*', 'state', 'fetch', 'customer', NULL,
	 '$.data.object.customer', NULL, NULL, '$.created', NULL, NULL, NULL, false, NULL, 100),
	('stripe', 'customer.tax_id.*', 'state', 'fetch', 'customer', NULL,
	 '$.data.object.customer', NULL, NULL, '$.created', NULL, NULL, NULL, false, NULL, 100),
	/* invoices: draft, open, paid, uncollectible, void (a deleted draft answers 404) */
	('stripe', 'invoice.*', 'state', 'fetch', 'invoice', NULL,
	 '$.data.object.id', NULL, '$.data.object.status', '$.created', NULL, NULL, NULL, false, NULL, 100),
	/* an upcoming invoice is a preview without an id */
	('stripe', 'invoice.upcoming', 'ignore', 'ignore', NULL, NULL,
	 NULL, NULL, NULL, NULL, NULL, NULL, NULL, false, NULL, 110),
	/* PaymentIntents: requires_payment_method, requires_confirmation, requires_action, processing,
	   requires_capture, succeeded, canceled; a failed attempt goes back to requires_payment_method */
	('stripe', 'payment_intent.*', 'state', 'fetch', 'payment_intent', NULL,
	 '$.data.object.id', NULL, '$.data.object.status', '$.created', NULL, NULL, NULL, false, NULL, 100),
	/* charges: pending, succeeded, failed (refunded and captured are flags of a charge) */
	('stripe', 'charge.*', 'state', 'fetch', 'charge', NULL,
	 '$.data.object.id', NULL, '$.data.object.status', '$.created', NULL, NULL, NULL, false, NULL, 90),
	/* refunds: pending, requires_action, succeeded, failed, canceled; counted once */
	('stripe', 'refund.*', 'state', 'fetch', 'refund', NULL,
	 '$.data.object.id', NULL, '$.data.object.status', '$.created',
	 '$.data.object.amount', '$.data.object.currency', NULL, false, 'refund', 100),
	('stripe', 'charge.refund.updated', 'state', 'fetch', 'refund', NULL,
	 '$.data.object.id', NULL, '$.data.object.status', '$.created',
	 '$.data.object.amount', '$.data.object.currency', NULL, false, 'refund', 110),
	/* disputes: warning_needs_response ... won, lost (Dispute.Status); counted once */
	('stripe', 'charge.dispute.*', 'state', 'fetch', 'dispute', NULL,
	 '$.data.object.id', NULL, '$.data.object.status', '$.created',
	 '$.data.object.amount', '$.data.object.currency', NULL, false, 'dispute', 100),
	/* Checkout Sessions: open, complete, expired */
	('stripe', 'checkout.session.*', 'state', 'fetch', 'checkout.session', NULL,
	 '$.data.object.id', NULL, '$.data.object.status', '$.created', NULL, NULL, NULL, false, NULL, 100),
	/* Stripe thin events name the object and nothing else: fetch it */
	('stripe', 'v1.*', 'state', 'fetch', NULL, '$.related_object.type',
	 '$.related_object.id', NULL, NULL, '$.created', NULL, NULL, NULL, false, NULL, 50),
	('stripe', 'v2.*', 'state', 'fetch', NULL, '$.related_object.type',
	 '$.related_object.id', NULL, NULL, '$.created', NULL, NULL, NULL, false, NULL, 50),
	/* Shopify: resources carry updated_at (one-second) used as version with the tie rule */
	('shopify', 'orders/*', 'state', 'version', 'order', NULL,
	 '$.id', '$.updated_at', '$.financial_status', '$.updated_at', NULL, NULL, NULL, false, NULL, 100),
	('shopify', 'orders/delete', 'state', 'version', 'order', NULL,
	 '$.id', '$.updated_at', NULL, NULL, NULL, NULL, NULL, true, NULL, 110),
	('shopify', 'products/*', 'state', 'version', 'product', NULL,
	 '$.id', '$.updated_at', '$.status', '$.updated_at', NULL, NULL, NULL, false, NULL, 100),
	('shopify', 'products/delete', 'state', 'version', 'product', NULL,
	 '$.id', '$.updated_at', NULL, NULL, NULL, NULL, NULL, true, NULL, 110),
	('shopify', 'customers/*', 'state', 'version', 'customer', NULL,
	 '$.id', '$.updated_at', '$.state', '$.updated_at', NULL, NULL, NULL, false, NULL, 100),
	('shopify', 'refunds/create', 'occurrence', 'occurrence', 'refund', NULL,
	 '$.id', NULL, NULL, '$.created_at', NULL, NULL, NULL, false, NULL, 110),
	('shopify', 'app/uninstalled', 'ignore', 'ignore', NULL, NULL,
	 NULL, NULL, NULL, NULL, NULL, NULL, NULL, false, NULL, 100),
	/* the app's scopes changed: recorded once per change, the source_scopes_updated trigger forgets the old ones */
	('shopify', 'app/scopes_update', 'occurrence', 'occurrence', 'app/scopes_update', NULL,
	 '$.updated_at', NULL, NULL, '$.updated_at', NULL, NULL, NULL, false, NULL, 100),
	/* the mandatory compliance webhooks: recorded once, and carried out by the shopify_compliance trigger */
	('shopify', 'customers/redact', 'occurrence', 'occurrence', 'customers/redact', NULL,
	 '$.customer.id', NULL, NULL, NULL, NULL, NULL, NULL, false, NULL, 120),
	('shopify', 'customers/data_request', 'occurrence', 'occurrence', 'customers/data_request', NULL,
	 '$.data_request.id', NULL, NULL, NULL, NULL, NULL, NULL, false, NULL, 120),
	('shopify', 'shop/redact', 'occurrence', 'occurrence', 'shop/redact', NULL,
	 '$.shop_id', NULL, NULL, NULL, NULL, NULL, NULL, false, NULL, 100),
	/* GitHub: issues and pull requests carry updated_at; pushes happen once */
	('github', 'issues*', 'state', 'version', 'issue', NULL,
	 '$.issue.id', '$.issue.updated_at', '$.issue.state', '$.issue.updated_at', NULL, NULL, NULL, false, NULL, 100),
	('github', 'pull_request*', 'state', 'version', 'pull_request', NULL,
	 '$.pull_request.id', '$.pull_request.updated_at', '$.pull_request.state', '$.pull_request.updated_at',
	 NULL, NULL, NULL, false, NULL, 100),
	('github', 'push', 'occurrence', 'occurrence', 'push', NULL,
	 '$.after', NULL, NULL, '$.head_commit.timestamp', NULL, NULL, NULL, false, NULL, 100),
	('github', 'ping', 'ignore', 'ignore', NULL, NULL,
	 NULL, NULL, NULL, NULL, NULL, NULL, NULL, false, NULL, 100),
	/* Standard Webhooks fix the envelope, not the content: no version, no read API known */
	('standard', '*', 'state', 'unordered', 'object', '$.data.object',
	 '$.data.id', NULL, '$.data.status', '$.timestamp', NULL, NULL, NULL, false, NULL, 10),
	/* Razorpay has no read API here: payments, refunds and orders walk their machines */
	('razorpay', 'payment.*', 'state', 'machine', 'payment', NULL,
	 '$.payload.payment.entity.id', NULL, '$.payload.payment.entity.status', '$.created_at',
	 NULL, NULL, 'razorpay_payment', false, NULL, 100),
	/* downtime notices name a payment method, not a payment */
	('razorpay', 'payment.downtime.*', 'ignore', 'ignore', NULL, NULL,
	 NULL, NULL, NULL, NULL, NULL, NULL, NULL, false, NULL, 110),
	('razorpay', 'refund.*', 'state', 'machine', 'refund', NULL,
	 '$.payload.refund.entity.id', NULL, '$.payload.refund.entity.status', '$.created_at',
	 '$.payload.refund.entity.amount', '$.payload.refund.entity.currency', 'razorpay_refund', false, 'refund', 100),
	('razorpay', 'order.*', 'state', 'machine', 'order', NULL,
	 '$.payload.order.entity.id', NULL, '$.payload.order.entity.status', '$.created_at',
	 NULL, NULL, 'razorpay_order', false, NULL, 100);

/*
 * pg_dump skips the data of extension tables unless told: user data is dumped
 * in full, routes and machines without the presets this script recreates.
 * The presets a fresh install writes take ids far above the sequence's, so
 * that a restore (this script, then the dumped rows of the user's, ids
 * included) never finds a user's route on a preset's id, whichever release
 * and upgrades the dumped database went through.
 */
UPDATE @extschema@.routes SET preset = true, id = id + 1000000000;
UPDATE @extschema@.machines SET preset = true;

/* from here on, every change of a route bumps its version */
CREATE TRIGGER routes_bump BEFORE UPDATE ON @extschema@.routes
	FOR EACH ROW EXECUTE FUNCTION @extschema@._routes_bump();

/*
 * A change of a preset route becomes a route of the user's, as a change of a
 * preset queue owner does (sql/ops.sql); a later change of the preset is
 * applied to that row, column by column (the columns it changes): the preset stays as the extension
 * wrote it (CREATE EXTENSION recreates it on restore, an upgrade may change
 * it), the user's row is dumped (routes is dumped WHERE NOT preset), no
 * upgrade touches it, and it shadows the preset of the same key
 * (_route_of).  The UPDATE itself reports no row: the preset did not
 * change.  An upgrade script that changes presets disables this trigger
 * around its own statements (docs/releasing.md).
 */
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
/* from here on, a change of a preset is stored as the user's row */
CREATE TRIGGER routes_keep BEFORE UPDATE OR DELETE ON @extschema@.routes
	FOR EACH ROW WHEN (OLD.preset) EXECUTE FUNCTION @extschema@._routes_keep();
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
SELECT pg_catalog.pg_extension_config_dump('@extschema@.tenants', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.sources_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.routes_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.inbox_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.deliveries_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.transitions_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.occurrences_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.requeues_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.claim_token_seq', '');
