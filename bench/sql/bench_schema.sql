-- Helpers for the benchmarks, in their own schema of the throw-away bench
-- database: event generators for each strategy, the SQL-only drain that the
-- worker's figures are compared against, and a commit-side timestamp for
-- the latency figure.  Nothing here is part of the extension.

CREATE SCHEMA bench;
CREATE SEQUENCE bench.ids;

-- Sources: one per strategy so that each drain touches only its own rows.
-- A one-day tolerance lets the receiver bench pre-sign its deliveries.
SELECT webhook_inbox.create_source(name => 'bench', kind => 'stripe', secret => 'whsec_bench',
	tolerance => '1 day');
SELECT webhook_inbox.create_source(name => 'occ', kind => 'stripe', secret => 'whsec_bench');
SELECT webhook_inbox.create_source(name => 'mach', kind => 'stripe', secret => 'whsec_bench');
SELECT webhook_inbox.create_source(name => 'ver', kind => 'shopify', secret => 'shpss_bench');
-- Stripe's presets fetch every state event (a real PaymentIntent's lifecycle
-- has cycles) and follow refunds by fetching them too.  The occurrence and
-- machine drains measure the local strategies, so these two sources have
-- routes of their own, as a source without a read API would: refunds are
-- occurrences, and payments walk the article's payment machine.
INSERT INTO webhook_inbox.routes (source_id, event_type, class, strategy, object_type, object_id_path,
								  status_path, amount_path, currency_path, machine)
SELECT s.id, r.event_type, r.class, r.strategy, r.object_type, '$.data.object.id', r.status_path,
	   r.amount_path, r.currency_path, r.machine
  FROM webhook_inbox.sources s
  JOIN (VALUES ('mach', 'payment_intent.*', 'state', 'machine', 'payment', '$.data.object.status'::jsonpath,
				NULL::jsonpath, NULL::jsonpath, 'payment'),
			   ('occ', 'refund.created', 'occurrence', 'occurrence', 'refund', NULL, '$.data.object.amount',
				'$.data.object.currency', NULL))
	AS r(source, event_type, class, strategy, object_type, status_path, amount_path, currency_path, machine)
	ON r.source = s.name;

CREATE FUNCTION bench.stripe(p_source text, p_body text) RETURNS text
LANGUAGE sql AS $$
	SELECT webhook_inbox.intake(p_source,
		ARRAY['content-type', 'application/json', 'stripe-signature', 't=1,v1=00'],
		convert_to(p_body, 'UTF8'))
$$;

-- refund.created: one occurrence per event, each on its own object.
CREATE FUNCTION bench.occurrence_body(n bigint) RETURNS text
LANGUAGE sql AS $$
	SELECT format('{"id":"evt_o%s","object":"event","type":"refund.created","created":%s,'
		'"data":{"object":{"id":"re_%s","object":"refund","amount":%s,"currency":"eur",'
		'"payment_intent":"pi_%s","status":"succeeded","reason":"requested_by_customer"}}}',
		n, 1767225600 + n, n, 100 + n % 900, n)
$$;

-- payment_intent.<status>: step k (0..3) of payment n along the preset machine.
CREATE FUNCTION bench.machine_body(n bigint, k integer) RETURNS text
LANGUAGE sql AS $$
	SELECT format('{"id":"evt_m%s_%s","object":"event","type":"payment_intent.%s","created":%s,'
		'"data":{"object":{"id":"pi_%s","object":"payment_intent","status":"%s","amount":1900,'
		'"currency":"eur"}}}',
		n, k, s, 1767225600 + k, n, s, s)
	  FROM (SELECT (ARRAY['pending', 'authorised', 'captured', 'settled'])[k + 1] AS s) x
$$;

-- Shopify orders/updated: version k of order n (updated_at one second apart).
CREATE FUNCTION bench.version_intake(n bigint, k integer) RETURNS text
LANGUAGE sql AS $$
	SELECT webhook_inbox.intake('ver',
		ARRAY['content-type', 'application/json', 'x-shopify-topic', 'orders/updated',
			  'x-shopify-webhook-id', format('wh-%s-%s', n, k), 'x-shopify-hmac-sha256', 'x'],
		convert_to(format('{"id":%s,"name":"#%s","created_at":"2026-01-01T00:00:00+00:00",'
			'"updated_at":"%s","financial_status":"%s","total_price":"19.00","currency":"EUR"}',
			450789469001 + n, n,
			to_char((timestamptz '2026-01-01 00:00:00+00' + make_interval(secs => k)) AT TIME ZONE 'UTC',
					'YYYY-MM-DD"T"HH24:MI:SS"+00:00"'),
			(ARRAY['pending', 'authorized', 'paid', 'paid'])[k % 4 + 1]), 'UTF8'))
$$;

-- customer.subscription.updated for a subscription the simulator knows.
CREATE FUNCTION bench.fetch_body(n bigint, sub text) RETURNS text
LANGUAGE sql AS $$
	SELECT format('{"id":"evt_f%s","object":"event","type":"customer.subscription.updated",'
		'"created":%s,"data":{"object":{"id":"%s","object":"subscription","status":"active"}}}',
		n, 1767225600 + n, sub)
$$;

/*
 * The worker's cycle from SQL alone, with the worker's transaction shape:
 * one transaction claims up to batch objects, one more runs _work_round()
 * over all of them; the claims that need a fetch are saved 32 to a
 * transaction by _save_fetched_batch(), each from its newest event's own
 * data.object instead of an HTTP answer.  Returns when nothing is
 * claimable.
 */
CREATE PROCEDURE bench.drain_sql(batch integer DEFAULT 100)
LANGUAGE plpgsql AS $$
DECLARE
	tokens bigint[];
	fetches bigint[];
	bodies text[];
	k integer;
	m integer;
BEGIN
	LOOP
		SELECT array_agg(c.claim_token) INTO tokens
		  FROM webhook_inbox.claim('sql', batch, '30 seconds') c;
		COMMIT;
		EXIT WHEN tokens IS NULL;
		SELECT coalesce(array_agg(w.token) FILTER (WHERE w.outcome = 'need_fetch'), '{}') INTO fetches
		  FROM webhook_inbox._work_round(tokens) w;
		COMMIT;
		k := 1;
		WHILE k <= cardinality(fetches) LOOP
			m := least(32, cardinality(fetches) - k + 1);
			bodies := ARRAY(SELECT (SELECT (i.payload #> '{data,object}')::text FROM webhook_inbox.inbox i
									 WHERE i.claim_token = t AND i.status = 'processing' ORDER BY i.id DESC LIMIT 1)
							  FROM unnest(fetches[k:k + m - 1]) WITH ORDINALITY AS f(t, o) ORDER BY f.o);
			PERFORM 1 FROM webhook_inbox._save_fetched_batch(fetches[k:k + m - 1], array_fill(200, ARRAY[m]), bodies,
				array_fill('$'::jsonpath, ARRAY[m]), array_fill('$.status'::jsonpath, ARRAY[m]),
				array_fill(NULL::jsonpath, ARRAY[m]), array_fill(NULL::timestamptz, ARRAY[m]));
			COMMIT;
			k := k + m;
		END LOOP;
	END LOOP;
END
$$;

-- Commit-side time of each event's completion, for the latency figure.
CREATE TABLE bench.done_at (inbox_id bigint PRIMARY KEY, at timestamptz NOT NULL);
CREATE FUNCTION bench.note_done() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO bench.done_at VALUES (NEW.id, clock_timestamp()) ON CONFLICT DO NOTHING;
	RETURN NULL;
END
$$;
