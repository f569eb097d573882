-- Pacing within the providers' documented limits: the settings, their checks, pace_status()
-- and sweep_backlog.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;

-- settings the pacing cannot use are refused, naming the setting
SELECT webhook_inbox.create_source('pace_bad', 'stripe', 'whsec_p', settings => '{"rate_limit": 0}');
SELECT webhook_inbox.create_source('pace_bad', 'stripe', 'whsec_p', settings => '{"rate_limit": "fast"}');
SELECT webhook_inbox.create_source('pace_bad', 'stripe', 'whsec_p', settings => '{"endpoint_rate_limit": -1}');
SELECT webhook_inbox.create_source('pace_bad', 'stripe', 'whsec_p', settings => '{"rate_limit_scope": "shop"}');
SELECT count(*) AS none_created FROM webhook_inbox.sources WHERE name = 'pace_bad';

-- good ones are kept, and read by the worker
SELECT webhook_inbox.create_source('pace_ok', 'stripe', 'whsec_p', api_base => 'http://127.0.0.1:1',
       settings => '{"rate_limit": 0.01, "endpoint_rate_limit": 2.5, "rate_limit_scope": "tenant"}') > 0 AS created;
SELECT rate_limit, endpoint_rate_limit, rate_limit_scope
  FROM webhook_inbox._worker_source((SELECT id FROM webhook_inbox.sources WHERE name = 'pace_ok'));
SELECT rate_limit, endpoint_rate_limit, rate_limit_scope
  FROM webhook_inbox._worker_source(webhook_inbox.create_source('pace_default', 'stripe', 'whsec_p'));

-- the constraint holds for a direct update too
\set VERBOSITY terse
UPDATE webhook_inbox.sources SET settings = '{"rate_limit": -3}' WHERE name = 'pace_ok';
UPDATE webhook_inbox.sources SET settings = '{"rate_limit_scope": 1}' WHERE name = 'pace_ok';
\set VERBOSITY default

-- nothing paced yet: no unit of these sources in use; nothing of them due (nothing mirrored)
SELECT count(*) AS units FROM webhook_inbox.pace_status() WHERE source LIKE 'pace%';
SELECT count(*) AS due FROM webhook_inbox.sweep_backlog WHERE source LIKE 'pace%';

-- sweep_now() without a tenant, on a source without tenants: the source's own account, once
SELECT tenant, status, error FROM webhook_inbox.sweep_now('pace_ok', 'subscription');
-- with tenants: one pass per active tenant (the platform owns nothing), each under its account
INSERT INTO webhook_inbox.tenants (source_id, tenant, discovered_by, status)
SELECT id, t, 'manual', CASE WHEN t = 'acct_off' THEN 'disabled' ELSE 'active' END
  FROM webhook_inbox.sources, unnest(ARRAY['acct_a', 'acct_b', 'acct_off']) t WHERE name = 'pace_ok';
SELECT tenant, status FROM webhook_inbox.sweep_now('pace_ok', 'subscription') ORDER BY tenant;
-- the units the passes counted against: each tenant's own (rate_limit_scope tenant), at 0.01/s (one request per 100 s: not idle yet)
SELECT unit, rate, burst, wait_s > 90 AS waits FROM webhook_inbox.pace_status() WHERE source = 'pace_ok' AND rate < 1 ORDER BY unit;
-- errors of the arguments are sweep_now's, tenant or none
SELECT * FROM webhook_inbox.sweep_now('pace_ok', 'subscription', 'sideways');
SELECT * FROM webhook_inbox.sweep_now('pace_ok', NULL);
