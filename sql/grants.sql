---------------------------------------------------------------------------
-- Function privileges: none for PUBLIC; the receiver gets exactly three
---------------------------------------------------------------------------

REVOKE ALL ON ALL ROUTINES IN SCHEMA @extschema@ FROM PUBLIC;
-- tenants' credentials: their status for readers (sql/credentials.sql), never a secret
GRANT SELECT ON @extschema@.tenant_credentials_status TO webhook_inbox_reader;
GRANT EXECUTE ON FUNCTION @extschema@.intake(text, text[], bytea) TO webhook_inbox_receiver;
GRANT EXECUTE ON FUNCTION @extschema@.intake_batch(text[], text[], bytea[]) TO webhook_inbox_receiver;
GRANT EXECUTE ON FUNCTION @extschema@.receiver_sources() TO webhook_inbox_receiver;
