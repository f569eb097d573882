-- The version rule, written once (_version_rule()), and every path that
-- saves an object held to it: its whole truth table; upsert_object() (C)
-- giving the rule's answer in every case; the worker's set-based saves
-- calling it rather than a copy of their own.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;

-- a row that did not exist before is always applied
SELECT count(*) AS fresh_not_applied
  FROM (VALUES (NULL::numeric), (1), (2)) v(ver), (VALUES (NULL::numeric), (2)) o(old_ver),
	   (VALUES (false), (true)) d(del), (VALUES (false), (true)) od(old_del), (VALUES (false), (true)) s(same)
 WHERE webhook_inbox._version_rule(true, v.ver, o.old_ver, d.del, od.old_del, s.same) <> 'applied';

-- every other case: incoming version (none, older, equal, newer) against the stored one (none, 2)
SELECT v.ver, o.old_ver, d.del, od.old_del, s.same,
	   webhook_inbox._version_rule(false, v.ver, o.old_ver, d.del, od.old_del, s.same) AS outcome
  FROM (VALUES (NULL::numeric), (1), (2), (3)) v(ver), (VALUES (NULL::numeric), (2)) o(old_ver),
	   (VALUES (false), (true)) d(del), (VALUES (false), (true)) od(old_del), (VALUES (false), (true)) s(same)
 ORDER BY v.ver NULLS FIRST, o.old_ver NULLS FIRST, d.del, od.old_del, s.same;

-- upsert_object() answers what the rule answers, case by case: each case
-- saves its stored row (none, versioned or not, live or a tombstone), then
-- the incoming one, the same or another content, and compares
SELECT webhook_inbox.create_source('vr', 'github', 'vr-secret') IS NOT NULL AS created;
CREATE TEMP TABLE vr_cases AS
SELECT row_number() OVER () AS n, c.*
  FROM (VALUES (true), (false)) f(fresh), (VALUES (NULL::numeric), (2)) o(old_ver),
	   (VALUES (false), (true)) od(old_del), (VALUES (NULL::numeric), (1), (2), (3)) v(ver),
	   (VALUES (false), (true)) d(del), (VALUES (false), (true)) s(same),
	   LATERAL (SELECT f.fresh, o.old_ver, od.old_del, v.ver, d.del, s.same) c
 WHERE NOT (f.fresh AND (o.old_ver IS NOT NULL OR od.old_del));
SELECT count(*) AS cases FROM vr_cases;
CREATE TEMP TABLE vr_answers AS
SELECT c.*,
	   CASE WHEN NOT c.fresh THEN webhook_inbox.upsert_object('vr', 'issue', 'i' || c.n, c.old_ver, 'open',
															   '{"v":"old"}', deleted => c.old_del) END AS stored,
	   NULL::text AS answer
  FROM vr_cases c ORDER BY c.n;
-- the incoming row: the same content as the stored one, or another status and state
UPDATE vr_answers a
   SET answer = webhook_inbox.upsert_object('vr', 'issue', 'i' || a.n, a.ver,
											CASE WHEN a.same THEN 'open' ELSE 'closed' END,
											CASE WHEN a.same THEN '{"v":"old"}' ELSE '{"v":"new"}' END::jsonb,
											deleted => CASE WHEN a.same THEN a.old_del ELSE a.del END);
-- same content means the same tombstone too: the rule is asked with what upsert_object() saw
SELECT count(*) AS disagreements
  FROM vr_answers a
 WHERE a.answer IS DISTINCT FROM webhook_inbox._version_rule(a.fresh, a.ver, a.old_ver,
							CASE WHEN a.same THEN a.old_del ELSE a.del END, a.old_del,
							a.same AND NOT a.fresh);
SELECT answer, count(*) FROM vr_answers GROUP BY answer ORDER BY answer;

-- the worker's saves decide with the rule itself, not a copy of it
SELECT p.proname, p.prosrc LIKE '%webhook_inbox._version_rule(%' AS asks_the_rule,
	   p.prosrc ~ '(e|d)\.ver > (w|d)\.(old_)?ver' AS has_a_copy
  FROM pg_proc p
 WHERE p.pronamespace = 'webhook_inbox'::regnamespace AND p.proname IN ('_work_events', '_save_presents')
 ORDER BY 1;

-- the rule is inlined where the saves call it (no SET clause, IMMUTABLE, SQL)
SELECT p.provolatile, p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'sql') AS is_sql,
	   p.proconfig IS NULL AS unpinned
  FROM pg_proc p WHERE p.oid = 'webhook_inbox._version_rule'::regproc;
