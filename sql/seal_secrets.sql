---------------------------------------------------------------------------
-- Sources' secrets at rest: with webhook_inbox.key_file set, the secrets a
-- database kept in clear (0.1.0's, or those written before a key file was
-- set) are encrypted.  Run by a fresh install (no source yet: nothing to
-- do) and again, whole, at the end of every upgrade script, so each
-- statement here is idempotent.  A key file that is set but unreadable
-- fails the upgrade with seal_secrets()'s error: every later write of a
-- secret would fail the same way.
---------------------------------------------------------------------------

DO $$
BEGIN
	/* a fresh install has no source: its key file is not read here */
	IF @extschema@._key_configured()
	   AND EXISTS (SELECT 1 FROM @extschema@.sources s
				   WHERE @extschema@._source_in_clear(s.signing_secrets, s.api_token)) THEN
		PERFORM @extschema@.seal_secrets();
	END IF;
END
$$;
