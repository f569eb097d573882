---------------------------------------------------------------------------
-- Function privileges: none for PUBLIC; the receiver gets exactly three
---------------------------------------------------------------------------

REVOKE ALL ON ALL ROUTINES IN SCHEMA @extschema@ FROM PUBLIC;
-- tenants' credentials: their status for readers (sql/credentials.sql), never a secret
GRANT SELECT ON @extschema@.tenant_credentials_status TO webhook_inbox_reader;
-- every tenant's one status (tenant_status), and its registration, as the alerts point at them
GRANT SELECT ON @extschema@.tenant_status, @extschema@.tenants TO webhook_inbox_reader;
GRANT EXECUTE ON FUNCTION @extschema@.intake(text, text[], bytea) TO webhook_inbox_receiver;
GRANT EXECUTE ON FUNCTION @extschema@.intake_batch(text[], text[], bytea[]) TO webhook_inbox_receiver;
GRANT EXECUTE ON FUNCTION @extschema@.receiver_sources() TO webhook_inbox_receiver;

---------------------------------------------------------------------------
-- The application: what the code beside the extension needs to read the
-- mirror and run the effects outbox, and nothing else (no table, no
-- payload, no secret, no event)
---------------------------------------------------------------------------

/* Cluster-wide, so it may exist from another database. */
DO $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'webhook_inbox_application') THEN
		CREATE ROLE webhook_inbox_application NOLOGIN;
	END IF;
END
$$;

GRANT USAGE ON SCHEMA @extschema@ TO webhook_inbox_application;
GRANT SELECT ON @extschema@.stripe_subscriptions, @extschema@.stripe_invoices, @extschema@.stripe_payment_intents,
	@extschema@.stripe_customers, @extschema@.stripe_charges, @extschema@.stripe_refunds,
	@extschema@.stripe_disputes, @extschema@.stripe_checkout_sessions, @extschema@.shopify_orders,
	@extschema@.github_issues, @extschema@.github_pull_requests, @extschema@.source_list
	TO webhook_inbox_application;
/* the typed views call these; a view's caller needs EXECUTE on its functions */
GRANT EXECUTE ON FUNCTION @extschema@._unix_time(jsonb), @extschema@._number(jsonb)
	TO webhook_inbox_application;
/* SECURITY DEFINER: they touch only effects of the kinds the caller claims, never http ones */
GRANT EXECUTE ON FUNCTION @extschema@.claim_effects(text, text[], integer, interval),
	@extschema@.complete_effect(bigint, bigint, text, text)
	TO webhook_inbox_application;
