/* webhook_inbox: schema, SQL API and route presets, assembled by make from the fragments in sql/ */

\echo Use "CREATE EXTENSION webhook_inbox" to load this file. \quit

/*
 * Bodies are read and stored as UTF8 JSON (jsonb and text), so in a
 * database of another encoding a body beyond ASCII is quarantined as
 * "unconvertible" (SQL_ASCII: jsonb refuses its non-ASCII \u escapes).
 * Refuse to install there, before anything is created.
 */
DO $$
DECLARE
	enc text := pg_catalog.getdatabaseencoding();
BEGIN
	IF enc OPERATOR(pg_catalog.<>) 'UTF8' THEN
		RAISE EXCEPTION 'webhook_inbox requires a database with encoding UTF8'
			USING ERRCODE = 'feature_not_supported',
				  DETAIL = pg_catalog.format('Database %I has encoding %s; bodies are read and stored as UTF8 JSON, and here a body beyond ASCII would be quarantined as unconvertible or have its \u escapes refused.',
											 pg_catalog.current_database(), enc),
				  HINT = 'Create the database with ENCODING ''UTF8'' (createdb -E UTF8 -T template0 …) and create the extension there.';
	END IF;
END
$$;
