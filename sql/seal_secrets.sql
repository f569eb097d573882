---------------------------------------------------------------------------
-- Sources' secrets at rest: with webhook_inbox.key_file set, the secrets a
-- database kept in clear (0.1.0's, or those written before a key file was
-- set) are encrypted.  Run by a fresh install (no source yet: nothing to
-- do) and again, whole, at the end of every upgrade script, so each
-- statement here is idempotent.
---------------------------------------------------------------------------

DO $$
BEGIN
	IF @extschema@._key_configured() THEN
		PERFORM @extschema@.seal_secrets();
	END IF;
END
$$;
