---------------------------------------------------------------------------
-- Credentials per tenant (source, tenant), encrypted at rest
---------------------------------------------------------------------------
/*
 * A platform's source (a GitHub App, a Shopify app, a Stripe platform) reads
 * each tenant's objects with that tenant's own credentials.  They live here,
 * one row per (source, tenant): a GitHub App's private key under the tenant
 * '' (the app itself; its app id and client id are in sources.settings), the
 * installation access tokens the worker mints from it, a shop's access
 * token and refresh token.  Every secret column holds ciphertext only
 * (AES-256-GCM under the key of webhook_inbox.key_file, extension/seal.c),
 * bound to its row and column; the table is readable by its owner only, and
 * operators see tenant_credentials_status, which shows no secret.
 */
CREATE TABLE @extschema@.tenant_credentials (
	source_id		integer NOT NULL REFERENCES @extschema@.sources (id) ON DELETE CASCADE,
	tenant			text NOT NULL
		CONSTRAINT tenant_credentials_tenant_check CHECK (octet_length(tenant) <= 255 AND tenant !~ '[[:cntrl:]]'),
	kind			text NOT NULL
		CONSTRAINT tenant_credentials_kind_check
			CHECK (kind IN ('github_app', 'github_app_installation', 'shopify_shop', 'api_token')),
	secret			bytea,
	secret_at		timestamptz,
	expires_at		timestamptz,
	refresh_secret	bytea,
	refresh_expires_at timestamptz,
	status			text NOT NULL DEFAULT 'active'
		CONSTRAINT tenant_credentials_status_check CHECK (status IN ('active', 'disabled', 'flagged')),
	status_reason	text,
	status_at		timestamptz,
	refused_at		timestamptz,
	created_at		timestamptz NOT NULL DEFAULT now(),
	updated_at		timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (source_id, tenant),
	CONSTRAINT tenant_credentials_app_check CHECK ((kind = 'github_app') = (tenant = '')),
	CONSTRAINT tenant_credentials_secret_check
		CHECK (secret IS NOT NULL OR kind = 'github_app_installation'),
	CONSTRAINT tenant_credentials_reason_check CHECK ((status = 'active') = (status_reason IS NULL))
);
COMMENT ON TABLE @extschema@.tenant_credentials IS
	'Credentials per (source, tenant): a GitHub App''s private key (tenant ''''), its installations'' cached access tokens, shops'' tokens. Secrets are ciphertext (AES-256-GCM, key in webhook_inbox.key_file); readable by the owner only.';
COMMENT ON COLUMN @extschema@.tenant_credentials.tenant IS
	'The tenant as the provider names it (a GitHub installation id, a shop domain); '''' is the source itself (a GitHub App''s own key).';
COMMENT ON COLUMN @extschema@.tenant_credentials.kind IS
	'github_app (the app''s private key), github_app_installation (an installation token minted from it), shopify_shop (a shop''s access token), api_token (a bearer token).';
COMMENT ON COLUMN @extschema@.tenant_credentials.secret IS
	'The private key or access token, encrypted; NULL for an installation that has no token yet.';
COMMENT ON COLUMN @extschema@.tenant_credentials.secret_at IS 'When the secret was set or obtained.';
COMMENT ON COLUMN @extschema@.tenant_credentials.expires_at IS 'When the provider stops accepting the secret; NULL: never.';
COMMENT ON COLUMN @extschema@.tenant_credentials.refresh_secret IS 'A refresh token, encrypted, or NULL.';
COMMENT ON COLUMN @extschema@.tenant_credentials.refresh_expires_at IS 'When the refresh token expires; NULL: never or unknown.';
COMMENT ON COLUMN @extschema@.tenant_credentials.status IS
	'active; disabled (by an operator, disable_tenant()); flagged (the provider refused: a suspended or removed installation, a refused key) for engineering.';
COMMENT ON COLUMN @extschema@.tenant_credentials.status_reason IS 'Why the tenant is disabled or flagged.';
COMMENT ON COLUMN @extschema@.tenant_credentials.status_at IS 'When status last changed.';
COMMENT ON COLUMN @extschema@.tenant_credentials.refused_at IS
	'When the provider last answered 401 to a read with the cached installation token; a token minted after it that is refused too flags the installation.';
COMMENT ON COLUMN @extschema@.tenant_credentials.created_at IS 'When the row was created.';
COMMENT ON COLUMN @extschema@.tenant_credentials.updated_at IS 'When the row last changed.';
REVOKE ALL ON @extschema@.tenant_credentials FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('@extschema@.tenant_credentials', '');

CREATE FUNCTION @extschema@._seal(plain text, context text) RETURNS bytea
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'wi_seal_sql';
COMMENT ON FUNCTION @extschema@._seal(text, text) IS
	'Encrypts a secret with AES-256-GCM under the key of webhook_inbox.key_file, bound to context (its row and column).';

CREATE FUNCTION @extschema@._unseal(sealed bytea, context text) RETURNS text
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'wi_unseal_sql';
COMMENT ON FUNCTION @extschema@._unseal(bytea, text) IS
	'Decrypts what _seal() encrypted for the same context; raises when the key file is wrong or the value does not authenticate.';

CREATE FUNCTION @extschema@._unseal_with(sealed bytea, context text, key_file text) RETURNS text
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'wi_unseal_with_sql';
COMMENT ON FUNCTION @extschema@._unseal_with(bytea, text, text) IS
	'Decrypts what _seal() encrypted, under the key of key_file instead of webhook_inbox.key_file (re-encryption under a new key).';

CREATE FUNCTION @extschema@._key_id(key_file text) RETURNS text
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'wi_key_id_sql';
COMMENT ON FUNCTION @extschema@._key_id(text) IS
	'The key id (16 hex digits, from SHA-256; no part of the key) of the key in key_file, as every value sealed under it carries.';

CREATE FUNCTION @extschema@._credential_context(p_source_id integer, p_tenant text, p_column text)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
	SELECT pg_catalog.format('tenant_credentials(%s, %L).%s', p_source_id, p_tenant, p_column)
$$;
COMMENT ON FUNCTION @extschema@._credential_context(integer, text, text) IS
	'The context a secret is sealed for: its row and column, so that a value copied elsewhere does not decrypt.';

CREATE FUNCTION @extschema@._private_key_bits(pem text) RETURNS integer
LANGUAGE c STRICT IMMUTABLE
AS 'MODULE_PATHNAME', 'wi_private_key_bits';
COMMENT ON FUNCTION @extschema@._private_key_bits(text) IS
	'The size of an unencrypted RSA private key in PEM (PKCS#1 or PKCS#8) of at least 2048 bits; raises for anything else.';

CREATE FUNCTION @extschema@._check_tenant(p_tenant text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	IF p_tenant IS NULL OR p_tenant = '' THEN
		RAISE EXCEPTION 'tenant must not be empty'
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'A source''s own credentials are its api_token; a tenant is named as its provider names it.';
	END IF;
	IF octet_length(p_tenant) > 255 THEN
		RAISE EXCEPTION 'tenant is % bytes long', octet_length(p_tenant)
			USING ERRCODE = 'invalid_parameter_value', DETAIL = 'A tenant id is at most 255 bytes.';
	END IF;
	IF p_tenant ~ '[[:cntrl:]]' THEN
		RAISE EXCEPTION 'tenant contains control characters'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@._check_tenant(text) IS 'Raises a clear error for a tenant id no provider sends.';

CREATE FUNCTION @extschema@._check_token(p_what text, p_secret text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	IF p_secret IS NULL OR p_secret = '' THEN
		RAISE EXCEPTION '% must not be empty', p_what
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF p_secret !~ '^[\x21-\x7e]+$' THEN
		RAISE EXCEPTION '% contains characters a token never has', p_what
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'It goes into an HTTP header: printable ASCII without spaces only.';
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@._check_token(text, text) IS
	'Raises a clear error for a token that could not go into an HTTP header as it is.';

CREATE FUNCTION @extschema@.set_github_app(source text, app_id text, private_key text,
	client_id text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	s webhook_inbox.sources;
BEGIN
	s := webhook_inbox._source_for_update(source);
	IF s.kind <> 'github' THEN
		RAISE EXCEPTION 'source "%" is of kind %, not github', source, s.kind
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'Only a github source receives a GitHub App''s webhooks.';
	END IF;
	IF s.api_base IS NULL THEN
		RAISE EXCEPTION 'source "%" has no api_base', source
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Installation tokens are minted at {api_base}/app/installations/{id}/access_tokens: set api_base (https://api.github.com).';
	END IF;
	IF app_id IS NULL OR app_id !~ '^[1-9][0-9]{0,18}$' THEN
		RAISE EXCEPTION 'invalid GitHub App id "%"', app_id
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'The App ID is the number on the app''s settings page.';
	END IF;
	IF client_id IS NOT NULL AND client_id !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$' THEN
		RAISE EXCEPTION 'invalid GitHub App client id "%"', client_id
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'The Client ID is on the app''s settings page, as Iv23li... or Iv1.....';
	END IF;
	IF private_key IS NULL THEN
		RAISE EXCEPTION 'private key must not be null' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	PERFORM webhook_inbox._private_key_bits(private_key);

	INSERT INTO webhook_inbox.tenant_credentials AS c (source_id, tenant, kind, secret, secret_at)
	VALUES (s.id, '', 'github_app',
			webhook_inbox._seal(private_key, webhook_inbox._credential_context(s.id, '', 'secret')),
			now())
	ON CONFLICT (source_id, tenant) DO UPDATE
	   SET secret = EXCLUDED.secret, secret_at = EXCLUDED.secret_at, kind = EXCLUDED.kind,
		   status = 'active', status_reason = NULL,
		   status_at = CASE WHEN c.status <> 'active' THEN now() ELSE c.status_at END,
		   updated_at = now();
	/* tokens of the previous key stay valid at GitHub, but a new key may be a new app */
	UPDATE webhook_inbox.tenant_credentials
	   SET secret = NULL, expires_at = NULL, secret_at = NULL, updated_at = now()
	 WHERE source_id = s.id AND kind = 'github_app_installation'
	   AND (s.settings ->> 'github_app_id') IS DISTINCT FROM app_id;
	/* a key or app change clears flags the app's own refusal set */
	UPDATE webhook_inbox.tenant_credentials
	   SET status = 'active', status_reason = NULL, status_at = now(), updated_at = now()
	 WHERE source_id = s.id AND kind = 'github_app_installation' AND status = 'flagged'
	   AND status_reason LIKE 'GitHub refused the app%';
	UPDATE webhook_inbox.sources
	   SET settings = (settings - 'github_client_id')
			|| pg_catalog.jsonb_build_object('github_app_id', app_id)
			|| CASE WHEN client_id IS NULL THEN '{}'::jsonb
					ELSE pg_catalog.jsonb_build_object('github_client_id', client_id) END,
		   updated_at = now()
	 WHERE id = s.id;
END
$$;
COMMENT ON FUNCTION @extschema@.set_github_app(text, text, text, text) IS
	'Makes a github source a GitHub App, or rotates its key: the app id (and client id, the JWT''s iss when given) go into settings, the private key (PEM, PKCS#1 or PKCS#8) into tenant_credentials, encrypted. The worker mints each installation''s token from it.';

CREATE FUNCTION @extschema@.set_tenant_credentials(source text, tenant text, kind text, secret text,
	expires_at timestamptz DEFAULT NULL, refresh_token text DEFAULT NULL,
	refresh_expires_at timestamptz DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
	s webhook_inbox.sources;
	k text := kind;
BEGIN
	s := webhook_inbox._source_for_update(source);
	PERFORM webhook_inbox._check_tenant(tenant);
	IF k IS NULL OR k NOT IN ('shopify_shop', 'api_token') THEN
		IF k IN ('github_app', 'github_app_installation') THEN
			RAISE EXCEPTION 'credentials of kind % are not set with set_tenant_credentials()', k
				USING ERRCODE = 'invalid_parameter_value',
					  HINT = 'Give a GitHub App''s key with set_github_app(); the worker mints installation tokens itself.';
		END IF;
		RAISE EXCEPTION 'unknown credential kind "%"', k
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Valid kinds are: shopify_shop, api_token.';
	END IF;
	IF k = 'shopify_shop' AND s.kind <> 'shopify' THEN
		RAISE EXCEPTION 'credentials of kind shopify_shop need a shopify source; "%" is of kind %', source, s.kind
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF k = 'shopify_shop' AND tenant !~ '^[a-z0-9][a-z0-9-]*\.myshopify\.com$' THEN
		RAISE EXCEPTION 'invalid shop domain "%"', tenant
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'Shopify names a shop by its myshopify.com domain (X-Shopify-Shop-Domain).';
	END IF;
	IF s.settings ? 'github_app_id' THEN
		RAISE EXCEPTION 'source "%" is a GitHub App', source
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'Its installations'' tokens are minted from the app''s key.';
	END IF;
	PERFORM webhook_inbox._check_token('secret', secret);
	IF refresh_token IS NOT NULL THEN
		PERFORM webhook_inbox._check_token('refresh token', refresh_token);
	END IF;
	IF expires_at IS NOT NULL AND expires_at <= now() THEN
		RAISE EXCEPTION 'expires_at is not in the future'
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Give when the provider stops accepting the token, or NULL when it does not expire.';
	END IF;
	IF refresh_expires_at IS NOT NULL AND refresh_token IS NULL THEN
		RAISE EXCEPTION 'refresh_expires_at given without a refresh token'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;

	INSERT INTO webhook_inbox.tenant_credentials AS c
		(source_id, tenant, kind, secret, secret_at, expires_at, refresh_secret, refresh_expires_at)
	VALUES (s.id, tenant, k,
			webhook_inbox._seal(secret, webhook_inbox._credential_context(s.id, tenant, 'secret')),
			now(), expires_at,
			CASE WHEN refresh_token IS NOT NULL THEN
				webhook_inbox._seal(refresh_token, webhook_inbox._credential_context(s.id, tenant, 'refresh_secret')) END,
			refresh_expires_at)
	ON CONFLICT (source_id, tenant) DO UPDATE
	   SET kind = EXCLUDED.kind, secret = EXCLUDED.secret, secret_at = EXCLUDED.secret_at,
		   expires_at = EXCLUDED.expires_at, refresh_secret = EXCLUDED.refresh_secret,
		   refresh_expires_at = EXCLUDED.refresh_expires_at,
		   status = 'active', status_reason = NULL,
		   status_at = CASE WHEN c.status <> 'active' THEN now() ELSE c.status_at END,
		   updated_at = now();
	/* an installed shop is reconciled even before its first delivery */
	IF k = 'shopify_shop' THEN
		INSERT INTO webhook_inbox.tenants AS t (source_id, tenant, discovered_by)
		VALUES (s.id, set_tenant_credentials.tenant, 'manual')
		ON CONFLICT (source_id, tenant) DO NOTHING;
	END IF;
	/* a shop that installs the app again after app/uninstalled */
	/* or whose credentials were removed; and a tenant its refused credentials flagged */
	UPDATE webhook_inbox.tenants t SET status = 'active', reason = NULL
	 WHERE t.source_id = s.id AND t.tenant = set_tenant_credentials.tenant
	   AND ((t.status = 'disabled' AND (t.reason LIKE 'uninstalled:%' OR t.reason LIKE 'no credentials:%'))
			OR t.status = 'flagged');
	PERFORM webhook_inbox._tenant_reads_due(s.id, tenant);
END
$$;
COMMENT ON FUNCTION @extschema@.set_tenant_credentials(text, text, text, text, timestamptz, text, timestamptz) IS
	'Adds or rotates a tenant''s credentials (a shop''s access token and refresh token, a bearer token), encrypted at rest; re-enables a disabled or flagged tenant.';

/*
 * One status per tenant, in tenants (what queues, the sweeps and the alerts
 * read): a tenant's credentials refused or disabled make the tenant flagged
 * or disabled too (_flag_tenant(), disable_tenant()), whatever kind of
 * tenant it is.  Connect accounts have no credentials of their own (reads
 * send the platform's key with Stripe-Account): their status is the
 * tenants row alone.  tenant_status shows both sides.
 */
CREATE FUNCTION @extschema@._tenant_unknown(p_source text, p_tenant text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'source "%" has no tenant "%"', p_source, p_tenant
		USING ERRCODE = 'undefined_object',
			  HINT = pg_catalog.format('SELECT tenant, status FROM webhook_inbox.tenant_status WHERE source = %L lists its tenants; discover_tenants() registers those the provider lists.', p_source);
END
$$;
COMMENT ON FUNCTION @extschema@._tenant_unknown(text, text) IS
	'Raises the error of a tenant a source does not have, with where to see the ones it has.';

CREATE FUNCTION @extschema@.disable_tenant(source text, tenant text, reason text) RETURNS void
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
	s webhook_inbox.sources;
	n_cred integer;
	n_tenant integer;
BEGIN
	s := webhook_inbox._source_for_update(source);
	IF tenant IS DISTINCT FROM '' THEN
		PERFORM webhook_inbox._check_tenant(tenant);
	END IF;
	IF reason IS NULL OR btrim(reason) = '' THEN
		RAISE EXCEPTION 'a reason is required to disable a tenant'
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'It is shown in tenant_status.';
	END IF;
	/* a GitHub App's installation needs no row to be readable, so it gets one to be disabled */
	IF s.settings ? 'github_app_id' AND tenant <> '' THEN
		IF tenant !~ '^[1-9][0-9]{0,18}$' THEN
			RAISE EXCEPTION 'invalid installation id "%"', tenant
				USING ERRCODE = 'invalid_parameter_value',
					  DETAIL = 'A GitHub App''s tenants are its installations, named by installation.id.';
		END IF;
		INSERT INTO webhook_inbox.tenant_credentials (source_id, tenant, kind, status, status_reason, status_at)
		VALUES (s.id, tenant, 'github_app_installation', 'disabled', reason, now())
		ON CONFLICT (source_id, tenant) DO NOTHING;
		INSERT INTO webhook_inbox.tenants (source_id, tenant, status, reason, discovered_by)
		VALUES (s.id, tenant, 'disabled', reason, 'manual')
		ON CONFLICT (source_id, tenant) DO NOTHING;
	END IF;
	UPDATE webhook_inbox.tenant_credentials c
	   SET status = 'disabled', status_reason = reason, status_at = now(), updated_at = now()
	 WHERE c.source_id = s.id AND c.tenant = disable_tenant.tenant;
	GET DIAGNOSTICS n_cred = ROW_COUNT;
	UPDATE webhook_inbox.tenants t SET status = 'disabled', reason = disable_tenant.reason
	 WHERE t.source_id = s.id AND t.tenant = disable_tenant.tenant;
	GET DIAGNOSTICS n_tenant = ROW_COUNT;
	IF n_cred + n_tenant = 0 THEN
		IF tenant = '' THEN
			RAISE EXCEPTION 'source "%" has no GitHub App key to disable', source
				USING ERRCODE = 'undefined_object',
					  HINT = 'Tenant '''' is a GitHub App''s own key (set_github_app()); name a tenant to disable it.';
		END IF;
		PERFORM webhook_inbox._tenant_unknown(source, tenant);
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@.disable_tenant(text, text, text) IS
	'Stops every read and pass for a tenant of any kind (a Connect account, a shop, an installation): tenants and its credentials say disabled, with the reason; tenant '''' disables a GitHub App''s key. Undone by enable_tenant() or by setting new credentials.';

CREATE FUNCTION @extschema@.enable_tenant(source text, tenant text) RETURNS void
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
	s webhook_inbox.sources;
	n_cred integer;
	n_tenant integer;
BEGIN
	s := webhook_inbox._source_for_update(source);
	UPDATE webhook_inbox.tenant_credentials c
	   SET status = 'active', status_reason = NULL, status_at = now(), updated_at = now()
	 WHERE c.source_id = s.id AND c.tenant = enable_tenant.tenant AND c.status <> 'active';
	GET DIAGNOSTICS n_cred = ROW_COUNT;
	UPDATE webhook_inbox.tenants t SET status = 'active', reason = NULL
	 WHERE t.source_id = s.id AND t.tenant = enable_tenant.tenant AND t.status <> 'active';
	GET DIAGNOSTICS n_tenant = ROW_COUNT;
	IF n_cred + n_tenant > 0 THEN
		PERFORM webhook_inbox._tenant_reads_due(s.id, tenant);
	ELSIF NOT EXISTS (SELECT FROM webhook_inbox.tenant_credentials c
					   WHERE c.source_id = s.id AND c.tenant = enable_tenant.tenant)
		  AND NOT EXISTS (SELECT FROM webhook_inbox.tenants t
						   WHERE t.source_id = s.id AND t.tenant = enable_tenant.tenant) THEN
		PERFORM webhook_inbox._tenant_unknown(source, tenant);
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@.enable_tenant(text, text) IS
	'Clears a tenant''s disabled or flagged status, of any kind of tenant (after the installation was unsuspended, the account authorized again); its reads and passes resume.';

CREATE FUNCTION @extschema@.remove_tenant_credentials(source text, tenant text) RETURNS void
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
	s webhook_inbox.sources;
	k text;
BEGIN
	s := webhook_inbox._source_for_update(source);
	DELETE FROM webhook_inbox.tenant_credentials c
	 WHERE c.source_id = s.id AND c.tenant = remove_tenant_credentials.tenant
	RETURNING c.kind INTO k;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'source "%" has no credentials for tenant "%"', source, tenant
			USING ERRCODE = 'undefined_object';
	END IF;
	/* without its key a source is no longer a GitHub App: its tokens go too */
	IF tenant = '' AND s.settings ? 'github_app_id' THEN
		DELETE FROM webhook_inbox.tenant_credentials c
		 WHERE c.source_id = s.id AND c.kind = 'github_app_installation';
		UPDATE webhook_inbox.sources
		   SET settings = settings - 'github_app_id' - 'github_client_id', updated_at = now()
		 WHERE id = s.id;
		RAISE NOTICE 'source "%" is no GitHub App any more: its installations are read with its api_token, if any', source;
	ELSIF k = 'github_app_installation' THEN
		RAISE NOTICE 'installation % of source "%" gets a new token minted at its next read', tenant, source;
	ELSIF tenant <> '' THEN
		/* a tenant read with its own credentials cannot be read without them: its passes stop */
		UPDATE webhook_inbox.tenants t
		   SET status = 'disabled', reason = 'no credentials: removed at ' || now() || '; set_tenant_credentials() to read it again'
		 WHERE t.source_id = s.id AND t.tenant = remove_tenant_credentials.tenant AND t.status = 'active';
		RAISE NOTICE 'tenant "%" of source "%" is disabled: no read or pass is tried for it until set_tenant_credentials()', tenant, source
			USING HINT = 'remove_tenant() removes the tenant for good.';
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@.remove_tenant_credentials(text, text) IS
	'Removes a tenant''s credentials and says what becomes of its passes: a shop or bearer-token tenant is disabled until set_tenant_credentials() (no pass is tried without them); an installation''s token is minted again at its next read; tenant '''' of a GitHub App removes its key, its installations'' tokens and its app id.';

CREATE FUNCTION @extschema@.remove_tenant(source text, tenant text) RETURNS void
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
	s webhook_inbox.sources;
	n_cred integer;
	n_tenant integer;
BEGIN
	s := webhook_inbox._source_for_update(source);
	IF tenant IS NULL OR tenant = '' THEN
		RAISE EXCEPTION 'tenant must name one of the source''s tenants'
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'The empty tenant is the source''s own account: drop the source instead.';
	END IF;
	DELETE FROM webhook_inbox.tenant_credentials c WHERE c.source_id = s.id AND c.tenant = remove_tenant.tenant;
	GET DIAGNOSTICS n_cred = ROW_COUNT;
	DELETE FROM webhook_inbox.tenants t WHERE t.source_id = s.id AND t.tenant = remove_tenant.tenant;
	GET DIAGNOSTICS n_tenant = ROW_COUNT;
	IF n_cred + n_tenant = 0 THEN
		PERFORM webhook_inbox._tenant_unknown(source, tenant);
	END IF;
	/* no pass is due for it any more, and none of its failed ones waits on a person */
	DELETE FROM webhook_inbox.sweep_checkpoints c WHERE c.source_id = s.id AND c.tenant = remove_tenant.tenant;
END
$$;
COMMENT ON FUNCTION @extschema@.remove_tenant(text, text) IS
	'Removes a tenant for good: its registration, status and credentials, and its sweep checkpoints (no pass is scheduled for it, its failed passes leave queues). Its mirrored objects, events and history stay. A tenant the provider still lists, or that delivers again, is registered again: disable_tenant() keeps it and stops its reads instead.';

CREATE FUNCTION @extschema@.reencrypt_credentials(old_key_file text) RETURNS integer
LANGUAGE plpgsql AS $$
	/*
	 * After webhook_inbox.key_file was pointed at a new key: every secret
	 * sealed under another key is decrypted with old_key_file's and sealed
	 * again under the current one, in this transaction (rows locked).
	 */
DECLARE
	cur text := webhook_inbox._key_id(pg_catalog.current_setting('webhook_inbox.key_file'));
	n integer := 0;
	r webhook_inbox.tenant_credentials;
BEGIN
	IF old_key_file IS NULL OR old_key_file = '' THEN
		RAISE EXCEPTION 'the old key file must be named' USING ERRCODE = 'invalid_parameter_value',
			HINT = 'Give the file the secrets were encrypted with before webhook_inbox.key_file changed.';
	END IF;
	FOR r IN SELECT * FROM webhook_inbox.tenant_credentials c
			  WHERE (c.secret IS NOT NULL AND pg_catalog.encode(substring(c.secret FROM 2 FOR 8), 'hex') <> cur)
				 OR (c.refresh_secret IS NOT NULL AND pg_catalog.encode(substring(c.refresh_secret FROM 2 FOR 8), 'hex') <> cur)
			  ORDER BY c.source_id, c.tenant
			  FOR UPDATE
	LOOP
		UPDATE webhook_inbox.tenant_credentials c
		   SET secret = CASE WHEN r.secret IS NULL OR pg_catalog.encode(substring(r.secret FROM 2 FOR 8), 'hex') = cur
							 THEN r.secret
							 ELSE webhook_inbox._seal(
								webhook_inbox._unseal_with(r.secret, webhook_inbox._credential_context(r.source_id, r.tenant, 'secret'), old_key_file),
								webhook_inbox._credential_context(r.source_id, r.tenant, 'secret')) END,
			   refresh_secret = CASE WHEN r.refresh_secret IS NULL
										  OR pg_catalog.encode(substring(r.refresh_secret FROM 2 FOR 8), 'hex') = cur
									 THEN r.refresh_secret
									 ELSE webhook_inbox._seal(
										webhook_inbox._unseal_with(r.refresh_secret,
											webhook_inbox._credential_context(r.source_id, r.tenant, 'refresh_secret'), old_key_file),
										webhook_inbox._credential_context(r.source_id, r.tenant, 'refresh_secret')) END,
			   updated_at = now()
		 WHERE c.source_id = r.source_id AND c.tenant = r.tenant;
		n := n + 1;
	END LOOP;
	RETURN n;
END
$$;
COMMENT ON FUNCTION @extschema@.reencrypt_credentials(text) IS
	'Re-encrypts, under the key of webhook_inbox.key_file, every tenant secret sealed under the key of old_key_file; returns the rows changed. Rotate the key: write a new key file, point webhook_inbox.key_file at it, call this with the old file, then remove the old file.';

CREATE VIEW @extschema@.tenant_credentials_status AS
SELECT s.name AS source, c.tenant, c.kind, c.secret IS NOT NULL AS has_secret, c.secret_at, c.expires_at,
	   c.refresh_secret IS NOT NULL AS has_refresh_token, c.refresh_expires_at,
	   c.status, c.status_reason, c.status_at,
	   CASE c.status WHEN 'flagged' THEN 'engineering' WHEN 'disabled' THEN 'operator' END AS owner,
	   c.updated_at, pg_catalog.encode(substring(c.secret FROM 2 FOR 8), 'hex') AS key_id
  FROM webhook_inbox.tenant_credentials c
  JOIN webhook_inbox.sources s ON s.id = c.source_id;
COMMENT ON VIEW @extschema@.tenant_credentials_status IS
	'Every tenant''s credentials without their secrets: which exist, when they expire, the key id they are encrypted under, and the tenants the provider refused (flagged, for engineering) or an operator disabled.';

/*
 * Every tenant's one status, what it means for its reads and who acts:
 * the tenants row (a Connect account, a shop, an installation, however it
 * was registered) beside its credentials, if it has any.  A status set on
 * either side shows here; disabled outranks flagged (a disabled tenant is
 * not read, so a refusal changes nothing).
 */
CREATE VIEW @extschema@.tenant_status AS
SELECT s.name AS source, k.tenant,
	   st.status,
	   CASE WHEN t.status = st.status THEN t.reason WHEN c.status = st.status THEN c.status_reason END AS reason,
	   CASE st.status WHEN 'flagged' THEN 'engineering' WHEN 'disabled' THEN 'operations' END AS owner,
	   CASE st.status
			WHEN 'active' THEN 'read and swept'
			WHEN 'flagged' THEN 'not read: the provider refused its credentials; fix them, then enable_tenant()'
			ELSE 'not read: enable_tenant() (or set_tenant_credentials()) reads it again' END AS reads,
	   CASE WHEN st.status <> 'active' THEN coalesce(CASE WHEN c.status = st.status THEN c.status_at END, t.last_seen) END AS since,
	   c.kind AS credentials, c.status AS credentials_status, c.expires_at AS credentials_expire_at,
	   t.discovered_by, t.first_seen, t.last_seen, k.source_id
  FROM (SELECT x.source_id, x.tenant FROM webhook_inbox.tenants x
		UNION
		SELECT y.source_id, y.tenant FROM webhook_inbox.tenant_credentials y WHERE y.tenant <> '') k
  JOIN webhook_inbox.sources s ON s.id = k.source_id
  LEFT JOIN webhook_inbox.tenants t ON t.source_id = k.source_id AND t.tenant = k.tenant
  LEFT JOIN webhook_inbox.tenant_credentials c ON c.source_id = k.source_id AND c.tenant = k.tenant
 CROSS JOIN LATERAL (SELECT CASE WHEN 'disabled' IN (t.status, c.status) THEN 'disabled'
								 WHEN 'flagged' IN (t.status, c.status) THEN 'flagged'
								 ELSE 'active' END AS status) st;
COMMENT ON VIEW @extschema@.tenant_status IS
	'One status per tenant of every kind (Connect accounts, shops, GitHub App installations), from its tenants row and its credentials: active (read and swept), flagged (the provider refused its credentials: engineering), disabled (deauthorized, uninstalled, by an operator, or without its credentials); why, since when, what it means for its reads, and its credentials'' kind and status (no secret). queues'' flagged_tenant rows and the WebhookInboxTenantFlagged alert come from it.';

CREATE FUNCTION @extschema@._shop_token_due(c @extschema@.tenant_credentials) RETURNS boolean
LANGUAGE sql STABLE AS $$
	/*
	 * A shop's expiring access token is refreshed once a quarter of its
	 * life, at most five minutes, is left: Shopify's expiring offline tokens
	 * last an hour (expires_in 3600), so a read never leaves with a token
	 * that expires on its way.
	 */
	SELECT c.expires_at IS NOT NULL
	   AND c.expires_at - LEAST(interval '5 minutes',
								(c.expires_at - coalesce(c.secret_at, c.updated_at)) / 4) <= pg_catalog.clock_timestamp()
$$;
COMMENT ON FUNCTION @extschema@._shop_token_due(@extschema@.tenant_credentials) IS
	'Whether a shop''s expiring access token is due for its refresh (a quarter of its life, at most five minutes, left).';

CREATE FUNCTION @extschema@._tenant_auth_plan(p_source_id integer, p_tenant text, p_fresh boolean,
	OUT action text, OUT header text, OUT api_base text, OUT iss text, OUT private_key text,
	OUT reason text)
LANGUAGE plpgsql AS $$
	/*
	 * What a read for (source, tenant) authenticates with, for the worker
	 * (extension/credentials.c): action none (the source's own api_token),
	 * ok (header), wait (no usable credentials yet; reason), unknown (none,
	 * and past webhook_inbox.tenant_credentials_wait: its work is set aside;
	 * reason), flagged (the
	 * tenant is disabled or refused; reason), or mint (a GitHub App's
	 * installation needs a new token: the app's key, the JWT's iss and where
	 * to post), or refresh (a shop's expiring token is due: see
	 * _shop_refresh_begin()).  A cached installation token is used until a quarter of its
	 * life, at most a minute, is left (GitHub's tokens last an hour;
	 * @octokit/auth-app keeps them 59 minutes); p_fresh skips the cache.
	 */
DECLARE
	s webhook_inbox.sources;
	app webhook_inbox.tenant_credentials;
	c webhook_inbox.tenant_credentials;
	seen timestamptz;
BEGIN
	SELECT * INTO s FROM webhook_inbox.sources WHERE id = p_source_id;
	IF NOT FOUND THEN
		action := 'wait';
		reason := pg_catalog.format('source %s does not exist', p_source_id);
		RETURN;
	END IF;
	IF NOT s.settings ? 'github_app_id' THEN
		IF p_tenant = '' THEN
			action := 'none';
			RETURN;
		END IF;
		SELECT * INTO c FROM webhook_inbox.tenant_credentials t
		 WHERE t.source_id = p_source_id AND t.tenant = p_tenant;
		IF NOT FOUND THEN
			/*
			 * Nothing mints this tenant's credentials: past
			 * webhook_inbox.tenant_credentials_wait since a delivery first
			 * named it (a shop that never installed the app), its work is
			 * set aside for a person instead of waiting for ever.
			 */
			SELECT x.first_seen INTO seen FROM webhook_inbox.tenants x
			 WHERE x.source_id = p_source_id AND x.tenant = p_tenant;
			IF seen < pg_catalog.clock_timestamp() - coalesce(nullif(pg_catalog.current_setting(
					'webhook_inbox.tenant_credentials_wait', true), '')::interval, interval '2 days') THEN
				action := 'unknown';
				reason := pg_catalog.format('tenant %s has had no credentials since %s, longer than webhook_inbox.tenant_credentials_wait',
					p_tenant, seen);
			ELSE
				action := 'wait';
				reason := pg_catalog.format('no credentials for tenant %s yet', p_tenant);
			END IF;
		ELSIF c.status <> 'active' THEN
			action := 'flagged';
			reason := pg_catalog.format('tenant %s is %s: %s', p_tenant, c.status, c.status_reason);
		ELSIF c.kind = 'shopify_shop' AND EXISTS (SELECT FROM webhook_inbox.tenants x
				   WHERE x.source_id = p_source_id AND x.tenant = p_tenant AND x.status = 'disabled'
					 AND x.reason LIKE 'uninstalled:%') THEN
			/* app/uninstalled: Shopify revoked the shop's tokens; no read, no refresh */
			action := 'flagged';
			reason := pg_catalog.format('shop %s uninstalled the app (%s)', p_tenant,
				(SELECT x.reason FROM webhook_inbox.tenants x WHERE x.source_id = p_source_id AND x.tenant = p_tenant));
		ELSIF c.kind = 'shopify_shop' AND c.refresh_secret IS NOT NULL AND c.expires_at IS NOT NULL
			  AND (p_fresh OR webhook_inbox._shop_token_due(c)) THEN
			/* an expiring offline token: _shop_refresh_begin() serialises its refresh */
			action := 'refresh';
		ELSIF c.expires_at IS NOT NULL AND c.expires_at <= pg_catalog.clock_timestamp() THEN
			action := 'wait';
			reason := pg_catalog.format('the credentials of tenant %s expired at %s', p_tenant, c.expires_at);
		ELSE
			action := 'ok';
			header := CASE c.kind WHEN 'shopify_shop' THEN 'X-Shopify-Access-Token: ' ELSE 'Authorization: Bearer ' END
				|| webhook_inbox._unseal(c.secret, webhook_inbox._credential_context(c.source_id, c.tenant, 'secret'));
		END IF;
		RETURN;
	END IF;

	/* a GitHub App: tenant '' is the app itself, which reads nothing */
	IF p_tenant = '' THEN
		action := 'none';
		RETURN;
	END IF;
	SELECT * INTO app FROM webhook_inbox.tenant_credentials t WHERE t.source_id = p_source_id AND t.tenant = '';
	IF NOT FOUND THEN
		action := 'wait';
		reason := 'the GitHub App has no private key: set_github_app()';
		RETURN;
	END IF;
	IF app.status <> 'active' THEN
		action := 'flagged';
		reason := pg_catalog.format('the GitHub App''s key is %s: %s', app.status, app.status_reason);
		RETURN;
	END IF;
	IF p_tenant !~ '^[1-9][0-9]{0,18}$' THEN
		action := 'flagged';
		reason := pg_catalog.format('tenant %s is not a GitHub installation id', p_tenant);
		RETURN;
	END IF;
	SELECT * INTO c FROM webhook_inbox.tenant_credentials t WHERE t.source_id = p_source_id AND t.tenant = p_tenant;
	IF FOUND AND c.status <> 'active' THEN
		action := 'flagged';
		reason := pg_catalog.format('installation %s is %s: %s', p_tenant, c.status, c.status_reason);
		RETURN;
	END IF;
	IF FOUND AND NOT p_fresh AND c.secret IS NOT NULL AND c.expires_at IS NOT NULL
	   AND c.expires_at - LEAST(interval '60 seconds', (c.expires_at - c.secret_at) / 4) > pg_catalog.clock_timestamp() THEN
		action := 'ok';
		header := 'Authorization: Bearer '
			|| webhook_inbox._unseal(c.secret, webhook_inbox._credential_context(c.source_id, c.tenant, 'secret'));
		RETURN;
	END IF;
	action := 'mint';
	api_base := rtrim(s.api_base, '/');
	iss := coalesce(s.settings ->> 'github_client_id', s.settings ->> 'github_app_id');
	private_key := webhook_inbox._unseal(app.secret, webhook_inbox._credential_context(p_source_id, '', 'secret'));
END
$$;
COMMENT ON FUNCTION @extschema@._tenant_auth_plan(integer, text, boolean) IS
	'For the worker: how a read for (source, tenant) authenticates (none, ok with its header, wait, unknown past webhook_inbox.tenant_credentials_wait, flagged, or mint a GitHub installation token). Returns secrets: owner only.';

CREATE FUNCTION @extschema@._flag_tenant(p_source_id integer, p_tenant text, p_kind text, p_reason text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	UPDATE webhook_inbox.tenant_credentials c
	   SET status = 'flagged', status_reason = p_reason, status_at = now(), updated_at = now(),
		   secret = CASE WHEN c.kind = 'github_app_installation' THEN NULL ELSE c.secret END,
		   expires_at = CASE WHEN c.kind = 'github_app_installation' THEN NULL ELSE c.expires_at END
	 WHERE c.source_id = p_source_id AND c.tenant = p_tenant AND c.status = 'active';
	/* an installation is flagged before it ever had a token */
	IF NOT FOUND AND p_kind = 'github_app_installation' THEN
		INSERT INTO webhook_inbox.tenant_credentials (source_id, tenant, kind, status, status_reason, status_at)
		VALUES (p_source_id, p_tenant, p_kind, 'flagged', p_reason, now())
		ON CONFLICT (source_id, tenant) DO NOTHING;
	END IF;
	/* the tenant's one status: a flagged_tenant queue row, the alert; a disabled tenant stays disabled */
	IF p_tenant <> '' THEN
		INSERT INTO webhook_inbox.tenants AS t (source_id, tenant, status, reason, discovered_by)
		VALUES (p_source_id, p_tenant, 'flagged', p_reason, 'manual')
		ON CONFLICT (source_id, tenant) DO UPDATE SET status = 'flagged', reason = EXCLUDED.reason
		 WHERE t.status = 'active';
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@._flag_tenant(integer, text, text, text) IS
	'Flags a tenant for engineering (the provider refused its credentials), in its credentials and in tenants (a flagged_tenant queue row); its reads wait, its objects are never tombstoned for it. A disabled tenant stays disabled; an installation''s cached token is dropped.';

CREATE FUNCTION @extschema@._tenant_token_answer(p_source_id integer, p_tenant text, p_status integer,
	p_body text, p_after_refusal boolean DEFAULT false, OUT action text, OUT header text, OUT reason text)
LANGUAGE plpgsql AS $$
	/*
	 * GitHub's answer to POST /app/installations/{id}/access_tokens:
	 * 201 {token, expires_at} is cached (encrypted) and used; 403 (the
	 * installation is suspended) and 404 (it was removed, or never was) flag
	 * the installation; 401 (the app's JWT refused: a wrong or revoked key, a
	 * wrong app id) flags the app's key; anything else waits and is tried
	 * again later.  status 0 is a transport failure, p_body its message.
	 * p_after_refusal: the token replaces one a read was refused with (see
	 * _tenant_auth_refused()), so the refusal is remembered.
	 */
DECLARE
	b jsonb;
	tok text;
	exp timestamptz;
	msg text;
BEGIN
	IF p_status BETWEEN 200 AND 299 THEN
		BEGIN
			b := p_body::jsonb;
			tok := b ->> 'token';
			exp := (b ->> 'expires_at')::timestamptz;
		EXCEPTION WHEN others THEN
			tok := NULL;
		END;
		IF p_status <> 201 OR tok IS NULL OR tok !~ '^[\x21-\x7e]+$' OR octet_length(tok) > 1024 OR exp IS NULL THEN
			action := 'wait';
			reason := pg_catalog.format('POST /app/installations/%s/access_tokens answered %s without a token and expires_at',
										p_tenant, p_status);
			RETURN;
		END IF;
		INSERT INTO webhook_inbox.tenant_credentials AS c (source_id, tenant, kind, secret, secret_at, expires_at)
		VALUES (p_source_id, p_tenant, 'github_app_installation',
				webhook_inbox._seal(tok, webhook_inbox._credential_context(p_source_id, p_tenant, 'secret')),
				pg_catalog.clock_timestamp(), exp)
		ON CONFLICT (source_id, tenant) DO UPDATE
		   SET secret = EXCLUDED.secret, secret_at = EXCLUDED.secret_at, expires_at = EXCLUDED.expires_at,
			   refused_at = CASE WHEN p_after_refusal THEN c.refused_at END, updated_at = now()
		 WHERE c.status = 'active';
		action := 'ok';
		header := 'Authorization: Bearer ' || tok;
		RETURN;
	END IF;
	BEGIN
		msg := left(p_body::jsonb ->> 'message', 200);
	EXCEPTION WHEN others THEN
		msg := NULL;
	END;
	IF p_status IN (403, 404) THEN
		action := 'flagged';
		reason := pg_catalog.format('installation %s %s (%s from POST /app/installations/%s/access_tokens: %s)',
									p_tenant, CASE p_status WHEN 403 THEN 'is suspended' ELSE 'was removed' END,
									p_status, p_tenant, coalesce(msg, 'no message'));
		PERFORM webhook_inbox._flag_tenant(p_source_id, p_tenant, 'github_app_installation', reason);
	ELSIF p_status = 401 THEN
		action := 'flagged';
		reason := pg_catalog.format('GitHub refused the app''s JWT (401 from POST /app/installations/%s/access_tokens: %s)',
									p_tenant, coalesce(msg, 'no message'));
		PERFORM webhook_inbox._flag_tenant(p_source_id, '', 'github_app', reason);
	ELSE
		action := 'wait';
		reason := CASE WHEN p_status = 0
					   THEN pg_catalog.format('POST /app/installations/%s/access_tokens failed: %s', p_tenant, left(p_body, 200))
					   ELSE pg_catalog.format('POST /app/installations/%s/access_tokens answered %s: %s', p_tenant,
											  p_status, coalesce(msg, 'no message')) END;
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@._tenant_token_answer(integer, text, integer, text, boolean) IS
	'For the worker: keeps GitHub''s answer to an installation token request (201: the token, encrypted; 403/404: the installation flagged; 401: the app''s key flagged; else wait).';

CREATE FUNCTION @extschema@._tenant_auth_refused(p_source_id integer, p_tenant text, p_header text,
	OUT action text, OUT header text, OUT reason text)
LANGUAGE plpgsql AS $$
	/*
	 * A read for (source, tenant) sent p_header and the provider answered
	 * 401.  A GitHub installation token is minted again once (action mint):
	 * a cached token can be revoked before its expires_at.  When a token
	 * minted after a refusal is refused too, or the credentials are not
	 * minted ones (a shop's or account's token), the tenant is flagged.  When
	 * another read already replaced the token, action ok gives the new one.
	 */
DECLARE
	c webhook_inbox.tenant_credentials;
	cur text;
	what text;
BEGIN
	SELECT * INTO c FROM webhook_inbox.tenant_credentials t
	 WHERE t.source_id = p_source_id AND t.tenant = p_tenant FOR UPDATE;
	IF FOUND AND c.status <> 'active' THEN
		action := 'flagged';
		reason := pg_catalog.format('tenant %s is %s: %s', p_tenant, c.status, c.status_reason);
		RETURN;
	END IF;
	IF FOUND AND c.secret IS NOT NULL THEN
		cur := webhook_inbox._unseal(c.secret, webhook_inbox._credential_context(c.source_id, c.tenant, 'secret'));
		what := CASE c.kind WHEN 'shopify_shop' THEN 'X-Shopify-Access-Token: ' ELSE 'Authorization: Bearer ' END;
		IF what || cur IS DISTINCT FROM p_header THEN
			action := 'ok';
			header := what || cur;
			RETURN;
		END IF;
	END IF;
	IF NOT FOUND AND NOT EXISTS (SELECT FROM webhook_inbox.sources s
								  WHERE s.id = p_source_id AND s.settings ? 'github_app_id') THEN
		action := 'wait';
		reason := pg_catalog.format('no credentials for tenant %s yet', p_tenant);
		RETURN;
	END IF;
	IF FOUND AND c.kind <> 'github_app_installation' THEN
		action := 'flagged';
		reason := pg_catalog.format('the provider refused the credentials of tenant %s (401)', p_tenant);
		IF c.kind = 'shopify_shop' THEN
			/* a shop's queue row, as a refused refresh makes one */
			PERFORM webhook_inbox._flag_shop(p_source_id, p_tenant, reason);
		ELSE
			PERFORM webhook_inbox._flag_tenant(p_source_id, p_tenant, c.kind, reason);
		END IF;
		RETURN;
	END IF;
	/* an installation without a row: its first token */
	IF NOT FOUND THEN
		action := 'mint';
		RETURN;
	END IF;
	IF c.refused_at IS NOT NULL AND c.secret_at >= c.refused_at THEN
		action := 'flagged';
		reason := pg_catalog.format('installation %s refused a token minted after a 401 (401 twice)', p_tenant);
		PERFORM webhook_inbox._flag_tenant(p_source_id, p_tenant, c.kind, reason);
		RETURN;
	END IF;
	UPDATE webhook_inbox.tenant_credentials t SET refused_at = pg_catalog.clock_timestamp(), updated_at = now()
	 WHERE t.source_id = p_source_id AND t.tenant = p_tenant;
	action := 'mint';
END
$$;
COMMENT ON FUNCTION @extschema@._tenant_auth_refused(integer, text, text) IS
	'For the worker: a read for (source, tenant) was refused 401 with header. A GitHub installation token is minted again once (mint); a second refusal, or refused static credentials, flags the tenant. Returns secrets: owner only.';

CREATE FUNCTION @extschema@._tenant_auth(source_id integer, tenant text, fresh boolean DEFAULT false,
	OUT status text, OUT header text, OUT reason text)
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'wi_tenant_auth_sql';
COMMENT ON FUNCTION @extschema@._tenant_auth(integer, text, boolean) IS
	'What the worker''s reads for (source, tenant) send: status none, ok (with the header), wait or flagged (with the reason); mints a GitHub installation token when needed. Returns a secret: owner only, for tests.';

CREATE FUNCTION @extschema@._tenant_reauth(source_id integer, tenant text, refused_header text,
	OUT status text, OUT header text, OUT reason text)
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'wi_tenant_reauth_sql';
COMMENT ON FUNCTION @extschema@._tenant_reauth(integer, text, text) IS
	'What the worker''s read retries with after a 401 for refused_header: a GitHub installation token minted again once, else flagged. Returns a secret: owner only, for tests.';

CREATE FUNCTION @extschema@._github_app_jwt(source text) RETURNS text
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'wi_github_app_jwt_sql';
COMMENT ON FUNCTION @extschema@._github_app_jwt(text) IS
	'A GitHub App''s JWT as the worker mints it (RS256; iat now - 60 s, exp now + 540 s, iss the client id or app id). Owner only, for tests.';

CREATE FUNCTION @extschema@._github_app_signing(p_source text, OUT iss text, OUT private_key text)
LANGUAGE plpgsql AS $$
DECLARE
	s webhook_inbox.sources;
BEGIN
	SELECT * INTO s FROM webhook_inbox.sources WHERE name = p_source;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'source "%" does not exist', p_source USING ERRCODE = 'undefined_object';
	END IF;
	IF NOT s.settings ? 'github_app_id' THEN
		RAISE EXCEPTION 'source "%" is not a GitHub App', p_source
			USING ERRCODE = 'invalid_parameter_value', HINT = 'Give its key with set_github_app().';
	END IF;
	iss := coalesce(s.settings ->> 'github_client_id', s.settings ->> 'github_app_id');
	SELECT webhook_inbox._unseal(c.secret, webhook_inbox._credential_context(s.id, '', 'secret'))
	  INTO private_key
	  FROM webhook_inbox.tenant_credentials c WHERE c.source_id = s.id AND c.tenant = '';
	IF private_key IS NULL THEN
		RAISE EXCEPTION 'GitHub App "%" has no private key', p_source
			USING ERRCODE = 'undefined_object', HINT = 'Give it with set_github_app().';
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@._github_app_signing(text) IS
	'A GitHub App''s JWT issuer and private key (decrypted), for _github_app_jwt(). Owner only.';


CREATE FUNCTION @extschema@._shop_refresh_begin(p_source_id integer, p_tenant text,
	OUT action text, OUT header text, OUT body text, OUT reason text)
LANGUAGE plpgsql AS $$
	/*
	 * A shop's expiring access token is due (_tenant_auth_plan() said
	 * refresh).  Its row is locked FOR UPDATE until the caller's
	 * transaction ends, so one backend at a time refreshes a shop: Shopify
	 * replaces the refresh token on every use, and a second refresh with the
	 * one already spent is refused and loses the shop.  A backend that
	 * waited here reads the row its winner committed and, the new token not
	 * being due, takes it (action ok) instead of refreshing again.
	 * action refresh: body is the JSON @shopify/shopify-api's refreshToken()
	 * POSTs to https://{shop}/admin/oauth/access_token (client_id,
	 * client_secret, refresh_token, grant_type); the caller posts it and
	 * gives the answer to _shop_refresh_answer() in the same transaction.
	 */
DECLARE
	s webhook_inbox.sources;
	c webhook_inbox.tenant_credentials;
	prev text := pg_catalog.current_setting('lock_timeout');
	bound bigint;
BEGIN
	/*
	 * A winner holds the row for its refresh request (http_timeout at
	 * most) and the rest of its transaction: wait for it that long twice
	 * at most, so that a session sitting in an open transaction never
	 * stalls the worker; after that the read waits and is tried again.
	 */
	bound := (extract(epoch FROM 2 * coalesce(pg_catalog.current_setting('webhook_inbox.http_timeout', true),
											  '30s')::interval) * 1000)::bigint;
	IF prev NOT IN ('0', '0ms') THEN
		bound := NULL;			/* the caller's own bound stands */
	END IF;
	BEGIN
		IF bound IS NOT NULL THEN
			PERFORM pg_catalog.set_config('lock_timeout', bound::text, true);
		END IF;
		SELECT * INTO c FROM webhook_inbox.tenant_credentials t
		 WHERE t.source_id = p_source_id AND t.tenant = p_tenant FOR UPDATE;
		IF bound IS NOT NULL THEN
			PERFORM pg_catalog.set_config('lock_timeout', prev, true);
		END IF;
	EXCEPTION WHEN lock_not_available THEN
		action := 'wait';
		reason := pg_catalog.format('another session has held the credentials of shop %s for over %s (a refresh under way, or an open transaction)',
									p_tenant, coalesce(bound || ' ms', prev));
		RETURN;
	END;
	IF c.source_id IS NULL THEN
		action := 'wait';
		reason := pg_catalog.format('no credentials for tenant %s yet', p_tenant);
		RETURN;
	END IF;
	IF c.status <> 'active' THEN
		action := 'flagged';
		reason := pg_catalog.format('tenant %s is %s: %s', p_tenant, c.status, c.status_reason);
		RETURN;
	END IF;
	IF c.kind <> 'shopify_shop' OR c.refresh_secret IS NULL OR NOT webhook_inbox._shop_token_due(c) THEN
		IF c.expires_at IS NOT NULL AND c.expires_at <= pg_catalog.clock_timestamp() THEN
			action := 'wait';
			reason := pg_catalog.format('the credentials of tenant %s expired at %s', p_tenant, c.expires_at);
			RETURN;
		END IF;
		action := 'ok';
		header := 'X-Shopify-Access-Token: '
			|| webhook_inbox._unseal(c.secret, webhook_inbox._credential_context(c.source_id, c.tenant, 'secret'));
		RETURN;
	END IF;
	IF c.refresh_expires_at IS NOT NULL AND c.refresh_expires_at <= pg_catalog.clock_timestamp() THEN
		action := 'flagged';
		reason := pg_catalog.format('the refresh token of shop %s expired at %s: the shop must open the app again',
									p_tenant, c.refresh_expires_at);
		PERFORM webhook_inbox._flag_shop(p_source_id, p_tenant, reason);
		RETURN;
	END IF;
	SELECT * INTO s FROM webhook_inbox.sources x WHERE x.id = p_source_id;
	IF coalesce(s.settings ->> 'shopify_client_id', '') = '' THEN
		action := 'wait';
		reason := pg_catalog.format('source %s has no settings.shopify_client_id: the token of shop %s cannot be refreshed',
									s.name, p_tenant);
		RETURN;
	END IF;
	action := 'refresh';
	/* the app's client secret is the secret Shopify signs its webhooks with: the newest one */
	body := pg_catalog.jsonb_build_object(
		'client_id', s.settings ->> 'shopify_client_id',
		'client_secret', webhook_inbox._unseal_text(s.signing_secrets[pg_catalog.cardinality(s.signing_secrets)],
			webhook_inbox._source_context(s.id, 'signing_secrets')),
		'refresh_token', webhook_inbox._unseal(c.refresh_secret,
			webhook_inbox._credential_context(c.source_id, c.tenant, 'refresh_secret')),
		'grant_type', 'refresh_token')::text;
END
$$;
COMMENT ON FUNCTION @extschema@._shop_refresh_begin(integer, text) IS
	'For the worker: locks a shop''s credentials and says whether its token still needs the refresh (refresh, with the request body) or another backend already refreshed it (ok). Returns secrets: owner only.';

CREATE FUNCTION @extschema@._flag_shop(p_source_id integer, p_tenant text, p_reason text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	/* in its credentials and in tenants: operators' queues show flagged tenants */
	PERFORM webhook_inbox._flag_tenant(p_source_id, p_tenant, 'shopify_shop', p_reason);
END
$$;
COMMENT ON FUNCTION @extschema@._flag_shop(integer, text, text) IS
	'Flags a shop whose token Shopify refused to refresh, in its credentials and in tenants (a flagged_tenant queue row for engineering).';

CREATE FUNCTION @extschema@._shop_refresh_answer(p_source_id integer, p_tenant text, p_status integer,
	p_body text, OUT action text, OUT header text, OUT reason text)
LANGUAGE plpgsql AS $$
	/*
	 * Shopify's answer to the refresh _shop_refresh_begin() prepared, in
	 * the transaction that holds the row: 200 {access_token, expires_in,
	 * refresh_token, refresh_token_expires_in, scope} (OfflineAccessInfo of
	 * @shopify/shopify-api) replaces the access token and the refresh token
	 * together, so a rotated refresh token is never lost while its access
	 * token is kept; 400 or 401 (the refresh token refused: spent, revoked,
	 * or the app uninstalled) flags the shop for engineering; anything else
	 * (5xx, a transport failure: status 0, p_body its message) waits and is
	 * tried again.
	 */
DECLARE
	b jsonb;
	tok text;
	rtok text;
	ttl numeric;
	rttl numeric;
	msg text;
BEGIN
	IF p_status = 200 THEN
		BEGIN
			b := p_body::jsonb;
			tok := b ->> 'access_token';
			rtok := b ->> 'refresh_token';
			ttl := CASE WHEN jsonb_typeof(b -> 'expires_in') = 'number' THEN (b ->> 'expires_in')::numeric END;
			rttl := CASE WHEN jsonb_typeof(b -> 'refresh_token_expires_in') = 'number'
						 THEN (b ->> 'refresh_token_expires_in')::numeric END;
		EXCEPTION WHEN others THEN
			tok := NULL;
		END;
		IF tok IS NULL OR tok !~ '^[\x21-\x7e]+$' OR octet_length(tok) > 1024
		   OR (rtok IS NOT NULL AND (rtok !~ '^[\x21-\x7e]+$' OR octet_length(rtok) > 1024))
		   OR ttl IS NULL OR ttl <= 0 OR (rttl IS NOT NULL AND rttl <= 0) THEN
			action := 'wait';
			reason := pg_catalog.format('POST https://%s/admin/oauth/access_token answered 200 without an access_token and expires_in',
										p_tenant);
			RETURN;
		END IF;
		UPDATE webhook_inbox.tenant_credentials c
		   SET secret = webhook_inbox._seal(tok, webhook_inbox._credential_context(p_source_id, p_tenant, 'secret')),
			   secret_at = pg_catalog.clock_timestamp(),
			   expires_at = pg_catalog.clock_timestamp() + ttl * interval '1 second',
			   refresh_secret = CASE WHEN rtok IS NOT NULL THEN
					webhook_inbox._seal(rtok, webhook_inbox._credential_context(p_source_id, p_tenant, 'refresh_secret')) END,
			   refresh_expires_at = CASE WHEN rtok IS NOT NULL AND rttl IS NOT NULL
					THEN pg_catalog.clock_timestamp() + rttl * interval '1 second' END,
			   updated_at = now()
		 WHERE c.source_id = p_source_id AND c.tenant = p_tenant;
		action := 'ok';
		header := 'X-Shopify-Access-Token: ' || tok;
		RETURN;
	END IF;
	BEGIN
		b := p_body::jsonb;
		msg := left(coalesce(b ->> 'error_description', b ->> 'error', b ->> 'errors'), 200);
	EXCEPTION WHEN others THEN
		msg := NULL;
	END;
	IF p_status IN (400, 401, 403) THEN
		action := 'flagged';
		reason := pg_catalog.format('Shopify refused to refresh the token of shop %s (%s from POST /admin/oauth/access_token: %s)',
									p_tenant, p_status, coalesce(msg, 'no message'));
		PERFORM webhook_inbox._flag_shop(p_source_id, p_tenant, reason);
		RETURN;
	END IF;
	action := 'wait';
	reason := CASE WHEN p_status = 0
				   THEN pg_catalog.format('POST https://%s/admin/oauth/access_token failed: %s', p_tenant, left(p_body, 200))
				   ELSE pg_catalog.format('POST https://%s/admin/oauth/access_token answered %s: %s', p_tenant, p_status,
										  coalesce(msg, 'no message')) END;
END
$$;
COMMENT ON FUNCTION @extschema@._shop_refresh_answer(integer, text, integer, text) IS
	'For the worker: keeps Shopify''s answer to a shop''s token refresh (200: the new access token and the rotated refresh token, encrypted, in one update; 400/401/403: the shop flagged; else wait). Returns a secret: owner only.';

CREATE FUNCTION @extschema@._tenant_reads_due(p_source_id integer, p_tenant text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	n integer;
BEGIN
	/* the reads that waited for the tenant's credentials (give-back credentials_wait) run now */
	UPDATE webhook_inbox.inbox i SET next_attempt_at = now(), updated_at = now()
	 WHERE i.source_id = p_source_id AND i.tenant = p_tenant AND i.status = 'retry'
	   AND (i.reason LIKE 'credentials\_wait:%' OR i.reason LIKE 'credentials\_flagged:%')
	   AND i.next_attempt_at > now();
	GET DIAGNOSTICS n = ROW_COUNT;
	RETURN n;
END
$$;
COMMENT ON FUNCTION @extschema@._tenant_reads_due(integer, text) IS
	'Makes the reads that waited for a tenant''s credentials (reason credentials_wait) due at once; called when its credentials are set or re-enabled. Returns how many.';

---------------------------------------------------------------------------
-- A new token of a tenant: the scopes the old one held are asked again
---------------------------------------------------------------------------

-- (_tenant_scopes_stale(), in sql/worker.sql, also serves app/scopes_update)
CREATE TRIGGER tenant_scopes_stale AFTER INSERT OR UPDATE OF secret ON @extschema@.tenant_credentials
	FOR EACH ROW WHEN (NEW.kind = 'shopify_shop')
	EXECUTE FUNCTION @extschema@._tenant_scopes_stale();
