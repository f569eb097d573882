-- The worker's reference, PgQ's batch consumer on the same events
-- (bench/worker.sh, bench/instructions.sh): its table and its load and
-- drain procedures, in the bench schema (bench_schema.sql first).
CREATE EXTENSION IF NOT EXISTS pgq;
CREATE TABLE bench.pgq_occurrences (occurrence_id text PRIMARY KEY, amount bigint, currency text,
	payload jsonb, first_event_id bigint);
CREATE PROCEDURE bench.pgq_load(n integer, qn text) LANGUAGE plpgsql AS $$
DECLARE
	k integer := 0;
BEGIN
	WHILE k < n LOOP
		PERFORM pgq.insert_event(qn, 'refund.created', bench.occurrence_body(nextval('bench.ids')))
		   FROM generate_series(1, least(1000, n - k));
		k := k + 1000;
		COMMIT;
		PERFORM pgq.ticker(qn);
		COMMIT;
	END LOOP;
	PERFORM pgq.force_tick(qn);
	COMMIT;
	PERFORM pgq.ticker(qn);
END
$$;
CREATE PROCEDURE bench.pgq_drain(qn text) LANGUAGE plpgsql AS $$
DECLARE
	b bigint;
BEGIN
	LOOP
		b := pgq.next_batch(qn, 'bench_c');
		EXIT WHEN b IS NULL;
		INSERT INTO bench.pgq_occurrences (occurrence_id, amount, currency, payload, first_event_id)
		SELECT d #>> '{data,object,id}', (d #>> '{data,object,amount}')::bigint,
			   d #>> '{data,object,currency}', d #> '{data,object}', x.ev_id
		  FROM (SELECT e.ev_id, e.ev_data::jsonb AS d FROM pgq.get_batch_events(b) e) x
		ON CONFLICT DO NOTHING;
		PERFORM pgq.finish_batch(b);
		COMMIT;
	END LOOP;
END
$$;
