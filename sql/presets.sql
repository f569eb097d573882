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
