-- Last: the extension drops cleanly, with everything made by the tests
-- before, and comes back with its presets.
SET client_min_messages = warning;
DROP EXTENSION webhook_inbox CASCADE;
CREATE EXTENSION webhook_inbox;
SELECT count(*) > 0 AS presets FROM webhook_inbox.routes;
SELECT count(*) > 0 AS presets FROM webhook_inbox.machines;
