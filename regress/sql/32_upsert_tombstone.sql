-- upsert_object()'s tombstones follow the worker's rule (_tombstone_holds()):
-- one a read inferred (cause names a read's 404 or 410, "fetch: http 404")
-- yields to a strictly newer version, which revives the object (a transition
-- and a repairs row revived); one the provider stated (any other cause, or a
-- state saying "deleted": true) is final.  objects.tombstone_evidence says
-- which, for every path upsert_object() takes.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;

SELECT webhook_inbox.create_source('ut', 'github', 'ut-secret') IS NOT NULL AS created;
CREATE TEMP VIEW ut AS
SELECT o.object_id, o.status, o.version, o.deleted, o.tombstone_evidence
  FROM webhook_inbox.objects o JOIN webhook_inbox.sources s ON s.id = o.source_id
 WHERE s.name = 'ut';

-- a read's 404: evidence read
SELECT webhook_inbox.upsert_object('ut', 'issue', 'r1', 5, 'open', '{"v":5}', cause => 'event 1');
SELECT webhook_inbox.upsert_object('ut', 'issue', 'r1', NULL, NULL, NULL, deleted => true, cause => 'fetch: http 404');
SELECT * FROM ut WHERE object_id = 'r1';
-- an equal or older version does not bring it back
SELECT webhook_inbox.upsert_object('ut', 'issue', 'r1', 5, 'open', '{"v":5}', cause => 'event 2');
SELECT webhook_inbox.upsert_object('ut', 'issue', 'r1', 5, 'closed', '{"v":"5b"}', cause => 'event 3');
SELECT webhook_inbox.upsert_object('ut', 'issue', 'r1', 4, 'open', '{"v":4}', cause => 'event 4');
SELECT * FROM ut WHERE object_id = 'r1';
SELECT count(*) AS repairs_before FROM webhook_inbox.repairs WHERE object_id = 'r1';
-- a strictly newer one does: applied, live again, evidence cleared
SELECT webhook_inbox.upsert_object('ut', 'issue', 'r1', 6, 'closed', '{"v":6}', cause => 'event 5', event_id => 5);
SELECT * FROM ut WHERE object_id = 'r1';
-- the revival: a transition from deleted, and a repair of its own kind outside any sweep
SELECT from_status, to_status, version, cause, event_id FROM webhook_inbox.transitions
 WHERE object_id = 'r1' ORDER BY id;
SELECT run_id, tenant, before, after, outcome FROM webhook_inbox.repairs WHERE object_id = 'r1' ORDER BY id;

-- the worker's other form of a read's answer: 410, confirmed by a second read
SELECT webhook_inbox.upsert_object('ut', 'issue', 'r2', 1, 'open', '{}');
SELECT webhook_inbox.upsert_object('ut', 'issue', 'r2', NULL, NULL, NULL, deleted => true, cause => 'fetch: http 410, confirmed');
SELECT webhook_inbox.upsert_object('ut', 'issue', 'r2', 2, 'open', '{"v":2}');
SELECT * FROM ut WHERE object_id = 'r2';
-- a read tombstone saved with a version: only a version beyond it revives
SELECT webhook_inbox.upsert_object('ut', 'issue', 'r3', 7, NULL, NULL, deleted => true, cause => 'fetch: http 404');
SELECT webhook_inbox.upsert_object('ut', 'issue', 'r3', 7, 'open', '{}');
SELECT webhook_inbox.upsert_object('ut', 'issue', 'r3', 8, 'open', '{}');
SELECT * FROM ut WHERE object_id = 'r3';

-- the provider's word: no cause, a deletion event, a fetched object saying "deleted": true
SELECT webhook_inbox.upsert_object('ut', 'issue', 'p1', 5, 'open', '{}');
SELECT webhook_inbox.upsert_object('ut', 'issue', 'p1', NULL, NULL, NULL, deleted => true);
SELECT webhook_inbox.upsert_object('ut', 'issue', 'p2', 5, 'open', '{}');
SELECT webhook_inbox.upsert_object('ut', 'issue', 'p2', 6, NULL, NULL, deleted => true, cause => 'event 9', event_id => 9);
SELECT webhook_inbox.upsert_object('ut', 'issue', 'p3', 5, 'open', '{}');
SELECT webhook_inbox.upsert_object('ut', 'issue', 'p3', NULL, NULL, '{"id": "p3", "deleted": true}', deleted => true, cause => 'fetch');
SELECT webhook_inbox.upsert_object('ut', 'issue', 'p4', 5, 'open', '{}');
SELECT webhook_inbox.upsert_object('ut', 'issue', 'p4', NULL, NULL, '{"id": "p4", "deleted": true}', deleted => true, cause => 'fetch: http 404');
-- a cause that only resembles a read's answer is none
SELECT webhook_inbox.upsert_object('ut', 'issue', 'p5', 5, 'open', '{}');
SELECT webhook_inbox.upsert_object('ut', 'issue', 'p5', NULL, NULL, NULL, deleted => true, cause => 'fetch: http 4040');
SELECT webhook_inbox.upsert_object('ut', 'issue', 'p6', 5, 'open', '{}');
SELECT webhook_inbox.upsert_object('ut', 'issue', 'p6', NULL, NULL, NULL, deleted => true, cause => 'sweep: fetch: http 404');
SELECT * FROM ut WHERE object_id LIKE 'p%' ORDER BY object_id;
-- final: a strictly newer version is stale
SELECT object_id, webhook_inbox.upsert_object('ut', 'issue', object_id, 100, 'open', '{"v":100}', cause => 'event 10') AS outcome
  FROM ut WHERE object_id LIKE 'p%' ORDER BY object_id;
SELECT * FROM ut WHERE object_id LIKE 'p%' ORDER BY object_id;
SELECT count(*) AS provider_repairs FROM webhook_inbox.repairs WHERE object_id LIKE 'p%';

-- the provider's word after a read's: applied (newer), and final from then on
SELECT webhook_inbox.upsert_object('ut', 'issue', 'm1', 1, 'open', '{}');
SELECT webhook_inbox.upsert_object('ut', 'issue', 'm1', NULL, NULL, NULL, deleted => true, cause => 'fetch: http 404');
SELECT webhook_inbox.upsert_object('ut', 'issue', 'm1', 2, NULL, NULL, deleted => true, cause => 'event 11');
SELECT webhook_inbox.upsert_object('ut', 'issue', 'm1', 3, 'open', '{}');
SELECT * FROM ut WHERE object_id = 'm1';
-- a repeated tombstone is a duplicate and keeps its evidence
SELECT webhook_inbox.upsert_object('ut', 'issue', 'm2', 1, 'open', '{}');
SELECT webhook_inbox.upsert_object('ut', 'issue', 'm2', NULL, NULL, NULL, deleted => true, cause => 'fetch: http 404');
SELECT webhook_inbox.upsert_object('ut', 'issue', 'm2', NULL, NULL, NULL, deleted => true, cause => 'event 12');
SELECT * FROM ut WHERE object_id = 'm2';
-- a live save has no evidence
SELECT webhook_inbox.upsert_object('ut', 'issue', 'm3', 1, 'open', '{}');
SELECT * FROM ut WHERE object_id = 'm3';
-- the present (no version) replaces even the provider's tombstone, as ever; that revival is recorded too
SELECT webhook_inbox.upsert_object('ut', 'issue', 'p1', NULL, 'open', '{"v":"present"}', cause => 'fetch');
SELECT * FROM ut WHERE object_id = 'p1';
SELECT before, after, outcome FROM webhook_inbox.repairs WHERE object_id = 'p1' ORDER BY id;

-- a machine's transition that brings a tombstone back leaves no evidence on the live object
SELECT webhook_inbox.upsert_object('ut', 'payment', 'mt1', NULL, 'pending', '{}');
SELECT webhook_inbox.upsert_object('ut', 'payment', 'mt1', NULL, NULL, NULL, deleted => true, cause => 'fetch: http 404');
SELECT webhook_inbox.apply_transition('ut', 'payment', 'mt1', 'payment', 'captured');
SELECT * FROM ut WHERE object_id = 'mt1';

-- the mirror shows the evidence
SELECT object_id, deleted, tombstone_evidence FROM webhook_inbox.mirror
 WHERE source = 'ut' AND deleted ORDER BY object_id;

-- one rule: upsert_object() asks _tombstone_holds(), which the worker's saves ask too
SELECT webhook_inbox._tombstone_holds(true, 'read', 6, 5) AS read_newer,
	   webhook_inbox._tombstone_holds(true, 'read', 5, 5) AS read_equal,
	   webhook_inbox._tombstone_holds(true, 'provider', 6, 5) AS provider_newer;
SELECT p.proname, p.prosrc LIKE '%webhook_inbox._tombstone_holds(%' AS asks_the_rule
  FROM pg_proc p
 WHERE p.pronamespace = 'webhook_inbox'::regnamespace AND p.proname IN ('_work_events', '_save_presents')
 ORDER BY 1;
