-- A change of a preset route is the user's row (routes_keep, as queue owners
-- do): the preset stays as the release shipped it, the user's row shadows it
-- in classification, is what pg_dump keeps (routes is dumped WHERE NOT
-- preset) and is never touched by an upgrade.  A preset is not deleted.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;
CREATE FUNCTION pe_route(p_kind text, p_type text) RETURNS text LANGUAGE sql AS $$
	SELECT r.event_type || ' ' || r.strategy || ' ' || coalesce(r.object_type, '-') || ' ' || r.priority
		   || CASE WHEN r.preset THEN ' preset' ELSE ' yours' END
	  FROM webhook_inbox._route_of(NULL, p_kind, p_type) x JOIN webhook_inbox.routes r ON r.id = x.id
$$;
CREATE FUNCTION pe_rows(p_kind text, p_pattern text) RETURNS SETOF text LANGUAGE sql AS $$
	SELECT r.event_type || ' ' || r.strategy || ' ' || coalesce(r.object_type, '-') || ' ' || r.priority
		   || CASE WHEN r.preset THEN ' preset' ELSE ' yours' END
	  FROM webhook_inbox.routes r WHERE r.source_kind = p_kind AND r.event_type = p_pattern ORDER BY r.preset, r.id
$$;
SELECT pe_route('shopify', 'products/update');

-- updating a preset stores the user's row; the UPDATE reports no row changed
UPDATE webhook_inbox.routes SET object_type = 'shop_product'
 WHERE preset AND source_kind = 'shopify' AND event_type = 'products/*';
SELECT * FROM pe_rows('shopify', 'products/*');
SELECT pe_route('shopify', 'products/update');
-- a more specific preset still wins over it where it did before
SELECT pe_route('shopify', 'products/delete');
-- updating the preset again changes the user's row, not a second one, in
-- the columns the update changes
UPDATE webhook_inbox.routes SET priority = 105 WHERE preset AND source_kind = 'shopify' AND event_type = 'products/*';
SELECT * FROM pe_rows('shopify', 'products/*');
-- intake classifies by it
SELECT webhook_inbox.create_source('pe_shop', 'shopify', 'shpss_pe') > 0 AS created;
SELECT webhook_inbox.intake('pe_shop', '{x-shopify-webhook-id,pe-1,x-shopify-topic,products/update}',
	convert_to('{"id": 42, "updated_at": "2026-01-01T00:00:00Z", "status": "active"}', 'UTF8'));
SELECT object_type, object_id, strategy, status FROM webhook_inbox.inbox WHERE event_id = 'pe-1';

-- to stop following events, a preset is updated to ignore them
UPDATE webhook_inbox.routes SET class = 'ignore', strategy = 'ignore'
 WHERE preset AND source_kind = 'shopify' AND event_type = 'customers/*';
SELECT pe_route('shopify', 'customers/update');
-- deleting a preset is refused, with that hint; the events are ignored by the user's row
DELETE FROM webhook_inbox.routes WHERE preset AND source_kind = 'shopify' AND event_type = 'customers/*';
SELECT webhook_inbox.intake('pe_shop', '{x-shopify-webhook-id,pe-2,x-shopify-topic,customers/update}',
	convert_to('{"id": 7, "updated_at": "2026-01-01T00:00:00Z", "state": "enabled"}', 'UTF8'));
SELECT status, reason FROM webhook_inbox.inbox WHERE event_id = 'pe-2';

-- pg_dump keeps the user's rows and leaves out the presets CREATE EXTENSION writes
SELECT cond FROM pg_extension, unnest(extconfig, extcondition) AS u(c, cond)
 WHERE extname = 'webhook_inbox' AND c = 'webhook_inbox.routes'::regclass;
SELECT count(*) AS dumped FROM webhook_inbox.routes WHERE NOT preset AND source_kind = 'shopify';

-- deleting the user's row gives the preset back
DELETE FROM webhook_inbox.routes WHERE NOT preset AND source_kind = 'shopify'
   AND event_type IN ('products/*', 'customers/*');
SELECT pe_route('shopify', 'products/update');
SELECT pe_route('shopify', 'customers/update');
SELECT * FROM pe_rows('shopify', 'products/*');

DELETE FROM webhook_inbox.inbox WHERE source_id = (SELECT id FROM webhook_inbox.sources WHERE name = 'pe_shop');
DELETE FROM webhook_inbox.deliveries WHERE source_id = (SELECT id FROM webhook_inbox.sources WHERE name = 'pe_shop');
DELETE FROM webhook_inbox.sources WHERE name = 'pe_shop';
DROP FUNCTION pe_route(text, text);
DROP FUNCTION pe_rows(text, text);
