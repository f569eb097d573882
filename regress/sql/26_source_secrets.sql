-- Sources' signing secrets and api_token encrypted at rest under
-- webhook_inbox.key_file: ciphertext in the table, plaintext for the
-- receiver and the worker, clear errors without the key or with another,
-- seal_secrets() for what was stored in clear, re-encryption under a new key.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;
-- runs a statement; its error with the detail, source ids made stable
CREATE FUNCTION wi_src_try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	d text;
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
	RETURN regexp_replace(regexp_replace(SQLSTATE || ': ' || SQLERRM || CASE WHEN d <> '' THEN ' | ' || d ELSE '' END,
						  'sources\(\d+\)', 'sources(N)', 'g'), 'key id [0-9a-f]{16}', 'key id K', 'g');
END
$$;
CREATE FUNCTION wi_src_key_file(name text, content text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('COPY (SELECT %L) TO PROGRAM %L', content, 'umask 077 && cat > ' || name);
END
$$;
SELECT wi_src_key_file('wi_src_a.key', md5('source key a') || md5('source key a, 2'));
SELECT wi_src_key_file('wi_src_b.key', md5('source key b') || md5('source key b, 2'));
DELETE FROM webhook_inbox.sources WHERE name LIKE 'sec\_%';

-- without a key file: stored in clear, as before, and inbox_health says so
SHOW webhook_inbox.key_file;
SELECT webhook_inbox.create_source('sec_clear', 'stripe', 'whsec_clear_one', api_token => 'sk_clear_token') IS NOT NULL AS created;
SELECT signing_secrets, api_token FROM webhook_inbox.sources WHERE name = 'sec_clear';
SELECT webhook_inbox._source_secrets(id, signing_secrets) AS what_the_receiver_gets
  FROM webhook_inbox.sources WHERE name = 'sec_clear';
SELECT secrets_warning LIKE '% sources keep their signing secrets or api_token in clear: webhook_inbox.key_file is not set (set it, then call webhook_inbox.seal_secrets())' AS warns
  FROM webhook_inbox.inbox_health;
SELECT wi_src_try($$SELECT webhook_inbox.seal_secrets()$$) AS seal_without_key;
-- a reader sees the warning (never a secret)
SET ROLE webhook_inbox_reader;
SELECT secrets_warning IS NOT NULL AS reader_sees_warning FROM webhook_inbox.inbox_health;
SELECT wi_src_try($$SELECT api_token FROM webhook_inbox.sources$$) AS reader_reads_no_token;
RESET ROLE;
-- the prefix of a sealed value is not a secret
SELECT wi_src_try($$SELECT webhook_inbox.create_source('sec_bad', 'stripe', 'wi-sealed:AQ==')$$) AS sealed_looking_secret;
SELECT wi_src_try($$SELECT webhook_inbox.create_source('sec_bad', 'stripe', 'whsec_x', api_token => 'wi-sealed:AQ==')$$) AS sealed_looking_token;

-- with a key file: ciphertext only in the table
SET webhook_inbox.key_file = 'wi_src_a.key';
-- (the sources 25_credentials sealed under its key, moved to this one: the
-- receiver's function reads every source)
SELECT webhook_inbox.reencrypt_source_secrets('wi_regress_a.key') >= 0 AS moved;
SELECT webhook_inbox.create_source('sec_one', 'stripe', 'whsec_plain_one', api_token => 'sk_plain_token') IS NOT NULL AS created;
SELECT s.name, cardinality(s.signing_secrets) AS secrets,
	   bool_and(x LIKE 'wi-sealed:%') AS all_sealed,
	   bool_or(x LIKE '%plain%' OR decode(substr(x, 11), 'base64') LIKE '%plain%'::bytea) AS plaintext_in_secrets,
	   s.api_token LIKE 'wi-sealed:%' AS token_sealed,
	   position('sk_plain_token'::bytea IN decode(substr(s.api_token, 11), 'base64')) AS plaintext_at,
	   webhook_inbox._text_key_id(s.api_token) = webhook_inbox._key_id('wi_src_a.key') AS under_a
  FROM webhook_inbox.sources s, unnest(s.signing_secrets) x
 WHERE s.name = 'sec_one' GROUP BY s.name, s.signing_secrets, s.api_token;
-- the receiver's function and the worker's read them in clear
SELECT signing_secrets FROM webhook_inbox.receiver_sources() WHERE name = 'sec_one';
SELECT w.api_token FROM webhook_inbox.sources s, webhook_inbox._worker_source(s.id) w WHERE s.name = 'sec_one';
-- a fresh nonce for each: the same secret seals differently
SELECT webhook_inbox._seal_text('x', 'c') <> webhook_inbox._seal_text('x', 'c') AS fresh_nonce,
	   webhook_inbox._seal_text('', 'c') AS empty_stays_empty;

-- rotation compares in clear and seals the new secret; retirement by value
SELECT wi_src_try($$SELECT webhook_inbox.rotate_secret('sec_one', 'whsec_plain_one')$$) AS same_secret_again;
SELECT webhook_inbox.rotate_secret('sec_one', 'whsec_plain_two') AS now_secrets;
SELECT bool_and(x LIKE 'wi-sealed:%') AS all_sealed
  FROM webhook_inbox.sources s, unnest(s.signing_secrets) x WHERE s.name = 'sec_one';
SELECT signing_secrets FROM webhook_inbox.receiver_sources() WHERE name = 'sec_one';
SELECT wi_src_try($$SELECT webhook_inbox.retire_secret('sec_one', 'whsec_not_there')$$) AS retire_unknown;
SELECT webhook_inbox.retire_secret('sec_one', 'whsec_plain_one') AS now_secrets;
SELECT signing_secrets FROM webhook_inbox.receiver_sources() WHERE name = 'sec_one';
SELECT wi_src_try($$SELECT webhook_inbox.retire_secret('sec_one', 'whsec_plain_two')$$) AS retire_last;

-- any UPDATE path is sealed too
UPDATE webhook_inbox.sources SET api_token = 'sk_updated', signing_secrets = signing_secrets || 'whsec_by_update'::text
 WHERE name = 'sec_one';
SELECT api_token LIKE 'wi-sealed:%' AS token_sealed, bool_and(x LIKE 'wi-sealed:%') AS all_sealed
  FROM webhook_inbox.sources s, unnest(s.signing_secrets) x WHERE s.name = 'sec_one' GROUP BY api_token;
SELECT r.signing_secrets, w.api_token FROM webhook_inbox.sources s, webhook_inbox._worker_source(s.id) w,
	   webhook_inbox.receiver_sources() r WHERE s.name = 'sec_one' AND r.name = s.name;
-- a sealed value copied to another source does not decrypt there
SELECT webhook_inbox.create_source('sec_copy', 'stripe', 'whsec_copy') IS NOT NULL AS created;
UPDATE webhook_inbox.sources SET api_token = (SELECT api_token FROM webhook_inbox.sources WHERE name = 'sec_one')
 WHERE name = 'sec_copy';
SELECT wi_src_try($$SELECT w.api_token FROM webhook_inbox.sources s, webhook_inbox._worker_source(s.id) w WHERE s.name = 'sec_copy'$$) AS copied;
DELETE FROM webhook_inbox.sources WHERE name = 'sec_copy';

-- seal_secrets(): what was stored in clear, once
SELECT regexp_replace(secrets_warning, '\d+', 'N', 'g') AS secrets_warning FROM webhook_inbox.inbox_health;
SELECT signing_secrets, api_token FROM webhook_inbox.sources WHERE name = 'sec_clear';
SELECT webhook_inbox.seal_secrets() >= 1 AS sealed_some;
SELECT webhook_inbox.seal_secrets() AS sealed_again;
SELECT count(*) FILTER (WHERE webhook_inbox._source_in_clear(signing_secrets, api_token)) AS in_clear_after
  FROM webhook_inbox.sources;
SELECT signing_secrets[1] LIKE 'wi-sealed:%' AND api_token LIKE 'wi-sealed:%' AS sealed
  FROM webhook_inbox.sources WHERE name = 'sec_clear';
SELECT r.signing_secrets, w.api_token FROM webhook_inbox.sources s, webhook_inbox._worker_source(s.id) w,
	   webhook_inbox.receiver_sources() r WHERE s.name = 'sec_clear' AND r.name = s.name;
SELECT secrets_warning FROM webhook_inbox.inbox_health;

-- a wrong key file, and none: clear errors
SET webhook_inbox.key_file = 'wi_src_b.key';
SELECT wi_src_try($$SELECT * FROM webhook_inbox.receiver_sources()$$) AS another_key;
SELECT wi_src_try($$SELECT w.* FROM webhook_inbox.sources s, webhook_inbox._worker_source(s.id) w WHERE s.name = 'sec_one'$$) AS worker_another_key;
SELECT wi_src_try($$SELECT webhook_inbox.rotate_secret('sec_one', 'whsec_three')$$) AS rotate_another_key;
SET webhook_inbox.key_file = 'wi_src_missing.key';
SELECT wi_src_try($$SELECT * FROM webhook_inbox.receiver_sources()$$) AS missing_key_file;
RESET webhook_inbox.key_file;
SELECT wi_src_try($$SELECT * FROM webhook_inbox.receiver_sources()$$) AS no_key_file;
SELECT secrets_warning LIKE '% sources have encrypted secrets and webhook_inbox.key_file is not set: the receiver and the worker cannot read them' AS warns
  FROM webhook_inbox.inbox_health;
SELECT wi_src_try($$SELECT webhook_inbox._unseal_text('wi-sealed:@@', 'c')$$) AS not_base64;

-- a new key: re-encrypt with the old one, then only the new one reads
SET webhook_inbox.key_file = 'wi_src_b.key';
SELECT wi_src_try($$SELECT webhook_inbox.reencrypt_source_secrets(NULL)$$) AS no_old_key;
SELECT wi_src_try($$SELECT webhook_inbox.reencrypt_source_secrets('wi_src_b.key')$$) AS the_new_key_as_old;
SELECT webhook_inbox.reencrypt_source_secrets('wi_src_a.key') >= 2 AS reencrypted;
SELECT webhook_inbox.reencrypt_source_secrets('wi_src_a.key') AS again;
SELECT bool_and(webhook_inbox._text_key_id(x) = webhook_inbox._key_id('wi_src_b.key')) AS under_b
  FROM webhook_inbox.sources s, unnest(s.signing_secrets || s.api_token) x WHERE s.name LIKE 'sec\_%';
SELECT r.signing_secrets, w.api_token FROM webhook_inbox.sources s, webhook_inbox._worker_source(s.id) w,
	   webhook_inbox.receiver_sources() r WHERE s.name = 'sec_one' AND r.name = s.name;
SET webhook_inbox.key_file = 'wi_src_a.key';
SELECT wi_src_try($$SELECT * FROM webhook_inbox.receiver_sources()$$) AS the_old_key;
SET webhook_inbox.key_file = 'wi_src_b.key';

-- a source whose id changes keeps readable secrets
UPDATE webhook_inbox.sources SET id = 99001 WHERE name = 'sec_clear';
SELECT r.signing_secrets, w.api_token FROM webhook_inbox.sources s, webhook_inbox._worker_source(s.id) w,
	   webhook_inbox.receiver_sources() r WHERE s.name = 'sec_clear' AND r.name = s.name;

DELETE FROM webhook_inbox.sources WHERE name LIKE 'sec\_%';
RESET webhook_inbox.key_file;
DROP FUNCTION wi_src_try(text);
DROP FUNCTION wi_src_key_file(text, text);
