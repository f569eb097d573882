---------------------------------------------------------------------------
-- search_path: every function of the extension resolves names through
-- pg_catalog and pg_temp only, whatever path its caller has (a function or
-- operator planted in public by whoever can create there must never be
-- called, CVE-2018-1058).  Set here, once, on everything in the schema, so a
-- function added in any fragment is covered without a clause of its own.
--
-- Not pinned, because a SET clause would cost more than it guards:
--   * procedures (run_effects commits between steps, and a procedure with
--     a SET clause cannot);
--   * the small SQL helpers the planner inlines into set-based statements
--     (a SET clause forbids inlining: _pattern_like, _scalar_text,
--     _version_of, _version_rule (the version rule of every save) and
--     _tombstone_holds (its tombstone half),
--     _time_of, and _round_events, the events every statement
--     of a round reads; _route_of, the route lookup of intake's statement,
--     and _classify_batch, classification in SQL, the bench's reference
--     for it), _fences and _fenced, the
--     fence check of every claim of a round, and _classify, run once per
--     event by reclassify() and requeue_where() (a per-call SET there
--     measured about 30 % of the one-delivery intake's throughput, when
--     intake still called it);
--   * _path_text, in C, called twice for every occurrence a round records
--     (a SET clause there took more time than the path itself), and
--     _path_version beside it, once per fetched or listed object: neither
--     resolves a name, their code calls the jsonpath executor and the
--     input and output functions directly;
--   * _number and _unix_time, which the application views (stripe_invoices
--     and the others) call for every row: inlined, a view read 200,000
--     invoices in about a sixth of the time it took with the SET clause.
--     Called by any role the views are granted to, from any path: their
--     bodies qualify every name, as the helpers' above do.
-- The others are called only from pinned functions or the worker (whose
-- session pins the same path).  All of their bodies qualify every
-- function, operator and type with pg_catalog, so they resolve the same
-- even when a superuser calls them directly with a hostile path.
-- regress/sql/09_search_path.sql lists every unpinned function: a new one
-- fails that test.
---------------------------------------------------------------------------

DO $$
DECLARE
	f regprocedure;
BEGIN
	FOR f IN
		SELECT p.oid::regprocedure
		  FROM pg_catalog.pg_proc p
		 WHERE p.pronamespace OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace
		   AND p.prokind OPERATOR(pg_catalog.<>) 'p'
		   AND p.proconfig IS NULL
		   AND NOT (p.proname OPERATOR(pg_catalog.=) ANY (ARRAY['_pattern_like', '_scalar_text', '_version_of',
															'_time_of', '_classify', '_classify_batch', '_route_of',
															'_fences', '_fenced', '_round_events', '_version_rule',
															'_tombstone_holds', '_path_text', '_path_version',
															'_number', '_unix_time']::pg_catalog.name[]))
	LOOP
		EXECUTE pg_catalog.format('ALTER FUNCTION %s SET search_path = pg_catalog, pg_temp', f);
	END LOOP;
END
$$;
