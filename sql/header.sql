/* webhook_inbox: schema, SQL API and route presets, assembled by make from the fragments in sql/ */

\echo Use "CREATE EXTENSION webhook_inbox" to load this file. \quit
