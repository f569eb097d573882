-- search_path: functions and operators planted in public by a database
-- owner who is not a superuser are never called by the extension, even by
-- a superuser session whose path puts public before pg_catalog.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;

-- every function is pinned, except the documented few (sql/search_path.sql)
SELECT p.oid::regprocedure AS unpinned
  FROM pg_proc p
 WHERE p.pronamespace = 'webhook_inbox'::regnamespace
   AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false)
 ORDER BY 1::text;

-- the planter owns the database, so it may create in public
CREATE ROLE wi_planter;
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I OWNER TO wi_planter', current_database()); END $$;
SET ROLE wi_planter;
-- a sequence counts the calls (not undone by a rolled-back subtransaction)
CREATE SEQUENCE public.planted_calls;
CREATE FUNCTION public.planted(what text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_catalog.nextval('public.planted_calls'::pg_catalog.regclass);
	RAISE WARNING 'planted % called', what;
END $$;
-- look-alikes with the same or a better-matching signature than pg_catalog's
CREATE FUNCTION public.nextval(text) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted('nextval(text)'); RETURN pg_catalog.nextval($1::pg_catalog.regclass); END $$;
CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted('now()'); RETURN pg_catalog.now(); END $$;
CREATE FUNCTION public.jsonb_path_query_first(jsonb, text) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted('jsonb_path_query_first'); RETURN pg_catalog.jsonb_path_query_first($1, $2::pg_catalog.jsonpath); END $$;
CREATE FUNCTION public.jsonb_path_query_first(jsonb, jsonpath, jsonb DEFAULT '{}', boolean DEFAULT false) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted('jsonb_path_query_first'); RETURN pg_catalog.jsonb_path_query_first($1, $2, $3, $4); END $$;
CREATE FUNCTION public.jsonb_path_query(jsonb, text) RETURNS SETOF jsonb LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted('jsonb_path_query'); RETURN QUERY SELECT pg_catalog.jsonb_path_query($1, $2::pg_catalog.jsonpath); END $$;
CREATE FUNCTION public.jsonb_typeof(jsonb) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted('jsonb_typeof'); RETURN pg_catalog.jsonb_typeof($1); END $$;
CREATE FUNCTION public.replace(text, text, text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted('replace'); RETURN pg_catalog.replace($1, $2, $3); END $$;
CREATE FUNCTION public.length(text) RETURNS integer LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted('length'); RETURN pg_catalog.length($1); END $$;
CREATE FUNCTION public.lower(text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted('lower'); RETURN pg_catalog.lower($1); END $$;
CREATE FUNCTION public.to_timestamp(double precision) RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted('to_timestamp'); RETURN pg_catalog.to_timestamp($1); END $$;
CREATE FUNCTION public.planted_texteq(text, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted('= (text)'); RETURN pg_catalog.texteq($1, $2); END $$;
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.planted_texteq);
CREATE FUNCTION public.planted_textne(text, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted('<> (text)'); RETURN pg_catalog.textne($1, $2); END $$;
CREATE OPERATOR public.<> (LEFTARG = text, RIGHTARG = text, FUNCTION = public.planted_textne);
CREATE FUNCTION public.planted_like(text, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted('~~ (text)'); RETURN pg_catalog.textlike($1, $2); END $$;
CREATE OPERATOR public.~~ (LEFTARG = text, RIGHTARG = text, FUNCTION = public.planted_like);
CREATE FUNCTION public.planted_arrow(jsonb, text[]) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted('#>> (jsonb)'); RETURN pg_catalog.jsonb_extract_path_text($1, VARIADIC $2); END $$;
CREATE OPERATOR public.#>> (LEFTARG = jsonb, RIGHTARG = text[], FUNCTION = public.planted_arrow);
CREATE FUNCTION public.planted_big_eq(bigint, bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted('= (bigint)'); RETURN pg_catalog.int8eq($1, $2); END $$;
CREATE OPERATOR public.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.planted_big_eq);
RESET ROLE;
-- the planted names are live: a session with this path calls them
SET search_path = public, pg_catalog;
SELECT now() IS NOT NULL AS planted_now_resolves;
SELECT last_value AS planted_calls_before FROM public.planted_calls;
SELECT pg_catalog.setval('public.planted_calls', 1, false);

-- the whole SQL API, from that path
SELECT webhook_inbox.create_source('sp_stripe', 'stripe', 'whsec_sp', api_base => 'http://127.0.0.1:9');
SELECT webhook_inbox.create_source('sp_shop', 'shopify', 'shpss_sp');
SELECT webhook_inbox.rotate_secret('sp_stripe', 'whsec_sp2');
SELECT webhook_inbox.retire_secret('sp_stripe', 'whsec_sp');
SELECT count(*) > 0 AS sources_listed FROM webhook_inbox.receiver_sources();
SELECT webhook_inbox.intake('sp_stripe', '{}', convert_to('{"id":"evt_sp1","type":"customer.subscription.updated","created":1700000000,"data":{"object":{"id":"sub_sp","status":"active"}}}', 'UTF8'));
SELECT webhook_inbox.intake('sp_stripe', '{}', convert_to('{"id":"evt_sp1","type":"customer.subscription.updated","created":1700000000,"data":{"object":{"id":"sub_sp","status":"active"}}}', 'UTF8'));
SELECT webhook_inbox.intake('sp_stripe', '{}', convert_to('{"id":"evt_sp2","type":"refund.created","created":1700000002,"data":{"object":{"id":"re_sp","amount":200,"currency":"eur"}}}', 'UTF8'));
SELECT webhook_inbox.intake('sp_stripe', '{}', convert_to('not json', 'UTF8'));
SELECT webhook_inbox.intake('sp_shop', ARRAY['X-Shopify-Webhook-Id', 'wh-sp1', 'X-Shopify-Topic', 'orders/updated'], convert_to('{"id":77,"updated_at":"2026-01-01T10:00:05Z","financial_status":"paid"}', 'UTF8'));
-- (the route's id and version are left out: they differ on a database upgraded from 0.1.0)
SELECT c.strategy, c.object_type, c.object_id, c.version, c.provider_time, c.status_value
  FROM webhook_inbox.sources s,
	   webhook_inbox._classify(s.id, s.kind, 'orders/updated', '{"id":78,"updated_at":"2026-01-01T10:00:05Z"}') c
 WHERE s.name OPERATOR(pg_catalog.=) 'sp_shop';
SELECT c.ord, c.strategy, c.object_type, c.object_id, c.version, c.provider_time, c.status_value
  FROM webhook_inbox.sources s,
	   webhook_inbox._classify_batch(ARRAY[s.id], ARRAY[s.kind], ARRAY['orders/updated'],
			ARRAY['{"id":78,"updated_at":"2026-01-01T10:00:05Z"}'::jsonb]) c
 WHERE s.name OPERATOR(pg_catalog.=) 'sp_shop';
-- claim, the worker's own step for non-fetch claims, complete, retry, quarantine
UPDATE webhook_inbox.inbox SET status = 'done' WHERE status OPERATOR(pg_catalog.=) ANY ('{pending,retry}') AND source_id NOT IN
	(SELECT id FROM webhook_inbox.sources WHERE name OPERATOR(pg_catalog.~~) 'sp\_%');
CREATE TEMP TABLE sp_c AS SELECT * FROM webhook_inbox.claim('sp', 10, '30 seconds');
SELECT object_id, strategy FROM sp_c ORDER BY object_id;
SELECT count(*) AS worked FROM sp_c, LATERAL webhook_inbox._work_claim(sp_c.claim_token) w WHERE sp_c.strategy OPERATOR(pg_catalog.<>) 'fetch';
SELECT webhook_inbox.retry((SELECT claim_token FROM sp_c WHERE object_id OPERATOR(pg_catalog.=) 'sub_sp'), 'test', '0 seconds');
CREATE TEMP TABLE sp_c2 AS SELECT * FROM webhook_inbox.claim('sp', 10, '30 seconds');
SELECT webhook_inbox.quarantine((SELECT claim_token FROM sp_c2 WHERE object_id OPERATOR(pg_catalog.=) 'sub_sp'), 'test');
SELECT webhook_inbox.reclassify(ARRAY(SELECT id FROM webhook_inbox.inbox WHERE event_id OPERATOR(pg_catalog.=) 'evt_sp1'));
CREATE TEMP TABLE sp_c3 AS SELECT * FROM webhook_inbox.claim('sp', 10, '30 seconds');
SELECT webhook_inbox.complete((SELECT claim_token FROM sp_c3 WHERE object_id OPERATOR(pg_catalog.=) 'sub_sp'));
SELECT webhook_inbox.requeue(ARRAY(SELECT id FROM webhook_inbox.inbox WHERE event_id OPERATOR(pg_catalog.=) 'evt_sp1'), 'test');
-- the mirror: versions, machines, occurrences
SELECT webhook_inbox.upsert_object('sp_stripe', 'thing', 't1', 1, 'a', '{"v":1}');
SELECT webhook_inbox.upsert_object('sp_stripe', 'thing', 't1', 2, 'b', '{"v":2}');
SELECT webhook_inbox.upsert_object('sp_stripe', 'thing', 't1', 1, 'a', '{"v":1}');
INSERT INTO webhook_inbox.machines VALUES ('sp_m', 'unknown', 'new'), ('sp_m', 'new', 'paid'), ('sp_m', 'paid', 'shipped');
SELECT webhook_inbox.transition_allowed('sp_m', 'new', 'shipped');
SELECT webhook_inbox.transition_allowed('sp_m', 'shipped', 'new');
SELECT webhook_inbox.apply_transition('sp_stripe', 'order', 'o1', 'sp_m', 'paid');
SELECT webhook_inbox.apply_transition('sp_stripe', 'order', 'o1', 'sp_m', 'new');
SELECT webhook_inbox.record_occurrence('sp_stripe', 'payment', 'pay_sp', '{"amount":5}');
SELECT webhook_inbox.record_occurrence('sp_stripe', 'payment', 'pay_sp', '{"amount":5}');
-- effects: a rule fired by a transition, a requested one, claimed, completed, resolved
INSERT INTO webhook_inbox.effect_rules (object_type, to_status, kind, request)
	VALUES ('order', 'shipped', 'notify', '{"object":"{object_id}"}');
SELECT webhook_inbox.apply_transition('sp_stripe', 'order', 'o1', 'sp_m', 'shipped');
SELECT webhook_inbox.request_effect('sp_refund', 'notify', '{"x":1}', source => 'sp_stripe') > 0 AS requested;
CREATE TEMP TABLE sp_e AS SELECT * FROM webhook_inbox.claim_effects('sp', ARRAY['notify']);
SELECT count(*) AS effects_claimed FROM sp_e;
SELECT webhook_inbox.complete_effect(id, claim_token, 'failed') FROM sp_e ORDER BY id;
SELECT webhook_inbox.resolve_effect(id, 'done', 'checked') FROM sp_e ORDER BY id;
-- the executor and a sweep against a closed port: errors, nothing planted
SELECT webhook_inbox.request_effect('sp_http', 'http', '{"method":"POST","path":"/v1/refunds","body":{}}', source => 'sp_stripe') > 0 AS requested;
CALL webhook_inbox.run_effects();
SELECT status FROM webhook_inbox.effects WHERE effect_key OPERATOR(pg_catalog.=) 'sp_http';
SELECT status FROM webhook_inbox.sweep_now('sp_stripe', 'subscription');
SELECT count(*) >= 0 AS pruned FROM (SELECT webhook_inbox.prune('1000 days')) x;
CALL webhook_inbox.prune_in_batches('1000 days', '999 days', 2);
SELECT count(*) >= 0 AS health FROM webhook_inbox.inbox_health;
SELECT count(*) >= 0 AS stats FROM webhook_inbox.worker_stats();
-- the application views, whose helpers (_number, _unix_time) are inlined
-- into the reader's statement: planted #>>, jsonb_typeof and to_timestamp
-- stay uncalled
SELECT webhook_inbox.upsert_object('sp_stripe', 'invoice', 'in_sp', 1, 'paid',
	'{"amount_due": 1200, "amount_paid": "1200", "currency": "eur"}');
SELECT webhook_inbox.upsert_object('sp_stripe', 'subscription', 'sub_sp2', 1, 'active',
	'{"current_period_end": 1700000000, "canceled_at": "never"}');
SELECT id, amount_due, amount_paid, currency FROM webhook_inbox.stripe_invoices WHERE id OPERATOR(pg_catalog.=) 'in_sp';
SELECT id, current_period_end AT TIME ZONE 'UTC' AS current_period_end, canceled_at
  FROM webhook_inbox.stripe_subscriptions WHERE id OPERATOR(pg_catalog.=) 'sub_sp2';

-- nothing planted was called
RESET search_path;
SELECT last_value, is_called FROM public.planted_calls;

DO $$ BEGIN EXECUTE format('ALTER DATABASE %I OWNER TO %I', current_database(), session_user); END $$;
DROP OWNED BY wi_planter;
DROP ROLE wi_planter;
