-- Intake applies a route's paths in C (route_eval.c): the same values as
-- the routes' SQL form, _classify(), for every shape a path can meet --
-- key paths through objects, arrays that lax mode unwraps, strict paths,
-- filters, a scalar or an array at the top, and every kind of value where
-- a version, a time or a status is read.  A value that cannot be read
-- quarantines its event alone, with the error SQL gives.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;
CREATE FUNCTION rp_wb(t text) RETURNS bytea LANGUAGE sql AS $$ SELECT convert_to(t, 'UTF8') $$;
SELECT webhook_inbox.create_source('rp', 'github', 'gh-rp') > 0 AS created;

CREATE TEMP TABLE rp_routes (event_type text, class text, strategy text, object_type text,
	object_type_path jsonpath, object_id_path jsonpath, version_path jsonpath, time_path jsonpath,
	status_path jsonpath, tombstone boolean DEFAULT false);
-- fetch routes: an event they read no version or status from is still
-- pending, so every value below is compared, found or not
INSERT INTO rp_routes VALUES
	('keys', 'state', 'fetch', 'thing', '$.a.kind', '$.n', '$.a.v', '$.t', '$.a.s'),
	('unwrap', 'state', 'fetch', 'item', '$.items.kind', '$.items.id', '$.items.v', '$.items.t', '$.items.s'),
	('strict', 'state', 'fetch', 'thing', 'strict $.kind', 'strict $.n', 'strict $.v', NULL, NULL),
	('filter', 'state', 'fetch', 'thing', '$.a ? (@.id > 1).kind', '$.n', '$.a ? (@.id > 1).id', NULL, '$.a[*].s'),
	('root', 'state', 'fetch', 'thing', NULL, '$', '$', '$', '$'),
	('rootarr', 'state', 'fetch', 'thing', '$.kind', '$.id', NULL, NULL, '$'),
	('tomb', 'state', 'machine', 'thing', NULL, '$.n', NULL, NULL, '$.a.s'),
	('skip', 'ignore', 'ignore', NULL, NULL, NULL, NULL, NULL, NULL);
UPDATE rp_routes SET tombstone = true WHERE event_type = 'tomb';
INSERT INTO webhook_inbox.routes (source_id, event_type, class, strategy, object_type, object_type_path,
	object_id_path, version_path, time_path, status_path, tombstone, machine)
SELECT (SELECT id FROM webhook_inbox.sources WHERE name = 'rp'), event_type, class, strategy, object_type,
	   object_type_path, object_id_path, version_path, time_path, status_path, tombstone,
	   CASE WHEN strategy = 'machine' THEN 'rp_m' END
  FROM rp_routes;

CREATE TEMP TABLE rp_cases (n int, event_type text, body text);
INSERT INTO rp_cases VALUES
	(1, 'keys', '{"n": 1, "a": {"v": 7, "s": "open"}, "t": 1700000000}'),
	(2, 'keys', '{"n": 2, "a": {"kind": "other", "v": "12.50", "s": true}, "t": "1700000001"}'),
	(3, 'keys', '{"n": 3, "a": {"kind": 7, "v": "2026-01-01T10:00:05Z", "s": 3.25}, "t": "2026-01-01T10:00:05+02:00"}'),
	(4, 'keys', '{"n": 4, "a": {"kind": null, "v": null, "s": null}, "t": null}'),
	(5, 'keys', '{"n": 5, "a": {"kind": {"x": 1}, "v": {"x": 1}, "s": [1]}, "t": [1]}'),
	(6, 'keys', '{"n": 6, "a": {"v": 1.5e3, "s": false}, "t": 1700000000.25}'),
	(7, 'keys', '{"n": 7, "a": [{"kind": "in-array", "v": 3}, {"v": 4}], "t": 5}'),
	(8, 'keys', '{"n": 8, "a": "a string", "t": -17}'),
	(9, 'keys', '{"n": 9}'),
	(10, 'keys', '{"n": 10, "a": {"v": -0.5, "s": "x"}, "t": "0"}'),
	(11, 'keys', '{"n": "eleven", "a": {"v": 100000000000000000000000000001}, "t": "1700000000"}'),
	(12, 'unwrap', '{"items": [{"id": "i1", "kind": "item", "v": 2, "t": 3, "s": "a"}, {"id": "i2"}]}'),
	(13, 'unwrap', '{"items": [[{"id": "deep"}], {"id": "i3", "kind": {"k": 1}, "v": "9"}]}'),
	(14, 'unwrap', '{"items": {"id": "single", "kind": "item", "v": 4}}'),
	(15, 'strict', '{"n": 15, "kind": "strict-kind", "v": 1}'),
	(16, 'filter', '{"n": 16, "a": [{"id": 1, "s": "one"}, {"id": 2, "s": "two", "kind": "second"}]}'),
	(17, 'root', '5'),
	(18, 'root', '"2026-01-01T00:00:00Z"'),
	(19, 'rootarr', '[{"kind": "k", "id": 1}, {"id": 2}]'),
	(20, 'rootarr', '{"kind": "k", "id": "twenty"}'),
	(21, 'tomb', '{"n": 21, "a": {}}'),
	(22, 'tomb', '{"n": 22, "a": {"s": "live"}}'),
	(23, 'skip', '{"n": 23}'),
	(24, 'nomatch', '{"n": 24}');

SELECT count(*) AS new FROM webhook_inbox.intake_batch(
	(SELECT array_agg('rp'::text ORDER BY n) FROM rp_cases),
	(SELECT array_agg(ARRAY['x-github-delivery', 'rp-' || n, 'x-github-event', event_type] ORDER BY n) FROM rp_cases),
	(SELECT array_agg(rp_wb(body) ORDER BY n) FROM rp_cases)) b
 WHERE b.outcome = 'new';

-- what intake stored, and where it differs from _classify() (none)
SELECT c.n, i.status, i.object_type, i.object_id, i.provider_version, i.provider_time, i.status_value,
	   row(i.route_id, i.route_version, i.strategy, i.object_type, i.object_id, i.provider_version,
		   i.provider_time, i.status_value)::text IS DISTINCT FROM row(o.*)::text AS differs
  FROM rp_cases c
  JOIN webhook_inbox.inbox i ON i.event_id = 'rp-' || c.n
 CROSS JOIN LATERAL webhook_inbox._classify(i.source_id, 'github', i.event_type, i.payload) o
 ORDER BY c.n;

-- a value a route cannot read quarantines its own event, with SQL's error,
-- and its batch-mates are classified
SELECT b.ord, b.outcome FROM webhook_inbox.intake_batch(ARRAY['rp', 'rp', 'rp', 'rp'],
	ARRAY[['x-github-delivery', 'rp-bad-1', 'x-github-event', 'keys'],
		  ['x-github-delivery', 'rp-bad-2', 'x-github-event', 'keys'],
		  ['x-github-delivery', 'rp-bad-3', 'x-github-event', 'strict'],
		  ['x-github-delivery', 'rp-bad-4', 'x-github-event', 'keys']],
	ARRAY[rp_wb('{"n": "b1", "a": {"v": "not a time"}}'), rp_wb('{"n": "b2", "a": {"v": 1}, "t": 1e300}'),
		  rp_wb('{"n": "b3", "kind": "k"}'), rp_wb('{"n": "b4", "a": {"v": 2}}')]) b;
SELECT event_id, status, object_id, provider_version, reason FROM webhook_inbox.inbox
 WHERE event_id LIKE 'rp-bad-%' ORDER BY event_id;
-- the same errors from SQL
SELECT webhook_inbox._version_of('"not a time"');
SELECT webhook_inbox._time_of('1e300');
SELECT jsonb_path_query_first('{"n": "b3", "kind": "k"}', 'strict $.v');

-- _path_text(), the worker's reading of an occurrence's amount and currency
-- and of a fetched object's status, is _scalar_text(jsonb_path_query_first())
-- in one call: every case's body read by every path of the routes above and
-- a few more, the same value or the same error (none differs)
CREATE FUNCTION rp_try(f text, b jsonb, p jsonpath) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	r text;
BEGIN
	CASE f
		WHEN 'c' THEN r := webhook_inbox._path_text(b, p);
		WHEN 'sql' THEN r := webhook_inbox._scalar_text(jsonb_path_query_first(b, p));
		WHEN 'cv' THEN r := webhook_inbox._path_version(b, p);
		WHEN 'sqlv' THEN r := webhook_inbox._version_of(jsonb_path_query_first(b, p));
	END CASE;
	RETURN coalesce('value ' || r, 'null');
EXCEPTION WHEN OTHERS THEN
	RETURN 'error ' || SQLERRM;
END
$$;
CREATE TEMP TABLE rp_paths AS
SELECT t::jsonpath AS p FROM (
	SELECT p::text FROM rp_routes,
		   LATERAL (VALUES (object_type_path), (object_id_path), (version_path), (time_path), (status_path)) v(p)
	 WHERE p IS NOT NULL
	UNION
	SELECT unnest(ARRAY['$.a', '$.a.v.x', '$.items[0].id', 'strict $.a.v', '$.n.none', '$.a.kind', '$."n"',
						'$.items.kind.k', '$ ? (@.n > 5).n'])) x(t);
-- rp_compare(C, SQL): every case's body by every path, read both ways
CREATE FUNCTION rp_compare(cf text, sf text, OUT pairs bigint, OUT "values" bigint, OUT errors bigint,
	OUT differ bigint) LANGUAGE sql AS $$
	SELECT count(*), count(*) FILTER (WHERE c LIKE 'value %'), count(*) FILTER (WHERE c LIKE 'error %'),
		   count(*) FILTER (WHERE c IS DISTINCT FROM s)
	  FROM (SELECT rp_try(cf, c.body::jsonb, p.p) AS c, rp_try(sf, c.body::jsonb, p.p) AS s
			  FROM rp_cases c, rp_paths p) x
$$;
SELECT * FROM rp_compare('c', 'sql');
-- a lax path of keys, walked without the executor, and one the executor decides
SELECT webhook_inbox._path_text('{"data": {"object": {"amount": 1250, "currency": "eur"}}}', '$.data.object.amount') AS amount,
	   webhook_inbox._path_text('{"data": {"object": {"amount": 1250, "currency": "eur"}}}', '$.data.object.currency') AS currency,
	   webhook_inbox._path_text('{"data": [{"object": {"amount": 7}}]}', '$.data.object.amount') AS unwrapped,
	   webhook_inbox._path_text('{"data": {"object": {"amount": 1250}}}', '$.data.object') AS object,
	   webhook_inbox._path_text('{"data": {"object": {"amount": 1250}}}', NULL) AS no_path;
SELECT webhook_inbox._path_text('{"n": "b3", "kind": "k"}', 'strict $.v');

-- _path_version(), the reading of a fetched or listed object's version, is
-- _version_of(jsonb_path_query_first()) in one call, over the same pairs
-- and the bodies whose versions raise
INSERT INTO rp_cases VALUES
	(25, 'keys', '{"n": "b1", "a": {"v": "not a time"}}'),
	(26, 'keys', '{"n": 26, "a": {"v": "2026-01-01 10:00:05+05:30"}, "t": true}'),
	(27, 'keys', '{"n": 27, "a": {"v": "-12"}, "t": "-3"}');
SELECT * FROM rp_compare('cv', 'sqlv');
SELECT webhook_inbox._path_version('{"data": {"object": {"updated": 1700000000}}}', '$.data.object.updated') AS number,
	   webhook_inbox._path_version('{"v": "12.50"}', '$.v') AS numeric_string,
	   webhook_inbox._path_version('{"v": "2026-01-01T10:00:05Z"}', '$.v') AS timestamp,
	   webhook_inbox._path_version('{"v": [{"x": 3}]}', '$.v.x') AS unwrapped,
	   webhook_inbox._path_version('{"v": {"x": 3}}', '$.v') AS object,
	   webhook_inbox._path_version('{"v": true}', '$.v') AS boolean,
	   webhook_inbox._path_version('{"v": 1}', NULL) AS no_path;
SELECT webhook_inbox._path_version('{"a": {"v": "not a time"}}', '$.a.v');
