#!/usr/bin/env bash
# Worker figures: drain rate per strategy against the same cycle from SQL
# alone, latency at a steady 100 events/s, coalescing under a burst of
# duplicates, and the drain rate with a transaction held open; then
# history.sh (its own clusters, HISTORY_* there).
#
# Appends rows to $RESULTS_CSV (see lib.sh).  Environment: DRAIN_EVENTS
# (20000), DRAIN_PAIRS (3), FETCH_EVENTS (8000), LATENCY_SECONDS (20), BURST_OBJECTS (200),
# BURST_EVENTS (2000), DRAIN_TIMEOUT (120 s per drain), HISTORY_EVENTS
# (5000000; 0 skips the history part and the 10 GB it writes).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

DRAIN_EVENTS="${DRAIN_EVENTS:-20000}"
# every drain this many times, each right after a drain of its reference (a
# PgQ drain of its own; for fetch, the same drain saved answer by answer);
# the figures are the medians (one drain of 20,000 events lasts a quarter to
# half a second, and a single PgQ drain was seen to move by 10 % between
# runs of the same build)
DRAIN_PAIRS="${DRAIN_PAIRS:-3}"
FETCH_EVENTS="${FETCH_EVENTS:-8000}"
# a warm-up drain of this many events before each measured one (PgQ's and the
# worker's), so that both are measured in their steady state, not a session's
# first plans
WARMUP_EVENTS="${WARMUP_EVENTS:-2000}"
LATENCY_SECONDS="${LATENCY_SECONDS:-20}"
BURST_OBJECTS="${BURST_OBJECTS:-200}"
BURST_EVENTS="${BURST_EVENTS:-2000}"
DRAIN_TIMEOUT="${DRAIN_TIMEOUT:-120}"

[ -f "$PGDATA_B/postmaster.pid" ] || cluster_start
worker_enable off
# The receiver part's rows (source "bench", a fetch route without a read
# API) would be claimed first and only quarantined: out of the way.
q -c "DELETE FROM webhook_inbox.inbox WHERE source_id = (SELECT id FROM webhook_inbox.sources WHERE name = 'bench')" \
  -c "VACUUM ANALYZE webhook_inbox.inbox" >/dev/null

# ---- the simulator: the read API for the fetch strategy ----
SIM_PID=""
holder_pid=""
cleanup() {
	[ -n "$SIM_PID" ] && kill "$SIM_PID" 2>/dev/null || true
	[ -n "$holder_pid" ] && kill "$holder_pid" 2>/dev/null || true
	worker_enable off 2>/dev/null || true
}
trap cleanup EXIT
sim_objects=$((FETCH_EVENTS * 2 + BURST_OBJECTS * 2 + 1000))
sim_start "$sim_objects"
nsubs=$(q -c "SELECT count(*) FROM bench.subs")
if [ "$nsubs" -lt $((FETCH_EVENTS + BURST_OBJECTS)) ]; then
	echo "  only $nsubs simulator subscriptions; fetch drain reduced" >&2
	FETCH_EVENTS=$((nsubs - BURST_OBJECTS))
fi
echo "  simulator at $SIM with $nsubs live subscriptions" >&2

# ---- loading and draining ----
# open_events [SOURCE]: the events still open, of SOURCE or of every source
open_events() {
	q -c "SELECT count(*) FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id
	      WHERE ${1:+s.name = '$1' AND} i.status IN ('pending', 'retry', 'processing')"
}

# drain_worker SOURCE → "events/s" over the span of processed_at of the
# events drained (first to last), or "nan" on timeout.  The worker is on
# only for the drain.
drain_worker() {
	local src="$1" t0 deadline span n
	t0=$(q -c "SELECT clock_timestamp()")
	worker_enable on
	deadline=$(( $(date +%s) + DRAIN_TIMEOUT ))
	while [ "$(open_events "$src")" -gt 0 ]; do
		if [ "$(date +%s)" -ge "$deadline" ]; then
			echo "  drain of $src timed out: $(open_events "$src") events still open" >&2
			worker_enable off
			echo nan
			return
		fi
		sleep 0.05
	done
	worker_enable off
	read -r n span <<<"$(q -F ' ' -c "SELECT count(*), extract(epoch FROM max(i.processed_at) - min(i.processed_at))
		FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id
		WHERE s.name = '$src' AND i.processed_at >= '$t0'")"
	fdiv "$n" "$span"
}

# drain_sql → "events/s" of bench.drain_sql() over COUNT events.
drain_sql() {
	local n="$1" t0 t1
	t0=$(now_s)
	q -c "CALL bench.drain_sql(100)" >/dev/null
	t1=$(now_s)
	awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", n / (b - a) }'
}

# empty_mirror SOURCE: forget the source's mirrored objects and their
# transitions, so that the next drain saves every object afresh.
empty_mirror() {
	q -c "DELETE FROM webhook_inbox.transitions WHERE source_id = (SELECT id FROM webhook_inbox.sources WHERE name = '$1')" \
	  -c "DELETE FROM webhook_inbox.objects WHERE source_id = (SELECT id FROM webhook_inbox.sources WHERE name = '$1')" >/dev/null
}

outcomes() {
	q -c "SELECT coalesce(string_agg(status || '=' || c, ' '), 'none') FROM (SELECT i.status, count(*) c
	      FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id
	      WHERE s.name = '$1' GROUP BY 1 ORDER BY 1) x"
}

# ---- the reference: PgQ's batch consumer on the same events ----
# The same refund.created bodies go into a PgQ queue (a tick per 1000
# events, as a ticker would make them); the consumer takes each batch and
# records its refunds insert-once in one statement.  That is what
# set-based consumption inside PostgreSQL costs on this machine, now.
q -f "$BENCH_DIR/sql/pgq.sql" >/dev/null
# pgq_drain → "events/s" of one PgQ drain: a queue of its own (a tick per
# 1000 events, as a ticker would make them), a warm-up drain of
# WARMUP_EVENTS, then DRAIN_EVENTS loaded and drained into an emptied table;
# the queue is dropped afterwards, so that every drain starts from the same
# state and none reads tables the ones before it filled
pgq_drain() {
	local t0 t1 n r qn
	qn="bench_q_$(date +%s%N)"
	q -c "SELECT pgq.create_queue('$qn')" -c "SELECT pgq.register_consumer('$qn', 'bench_c')" \
	  -c "SELECT pgq.set_queue_config('$qn', 'ticker_max_count', '1000')" \
	  -c "CALL bench.pgq_load($WARMUP_EVENTS, '$qn')" -c "CALL bench.pgq_drain('$qn')" \
	  -c "TRUNCATE bench.pgq_occurrences" -c "CALL bench.pgq_load($DRAIN_EVENTS, '$qn')" >/dev/null
	t0=$(now_s)
	q -c "CALL bench.pgq_drain('$qn')" >/dev/null
	t1=$(now_s)
	n=$(q -c "SELECT count(*) FROM bench.pgq_occurrences")
	q -c "SELECT pgq.unregister_consumer('$qn', 'bench_c')" -c "SELECT pgq.drop_queue('$qn')" >/dev/null
	r=$(awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", n / (b - a) }')
	echo "  PgQ batch consumer: $n refunds recorded insert-once at $r ev/s" >&2
	echo "$r"
}
# median X... → the middle value (the mean of the two middle ones for an even count)
median() {
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
		END { if (NR % 2) printf "%.3f", v[(NR + 1) / 2]; else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
pgq=$(pgq_drain)
add_result reference "PgQ batch consumer, occurrence" "$pgq" "ev/s" "-" "-" "-" "-"

# ---- the other reference: Graphile Worker draining jobs that do nothing ----
# From npm into the work directory (bench/ only; never part of the product).
graphile="-"
if command -v npm >/dev/null && command -v node >/dev/null; then
	mkdir -p "$BENCH_WORK/graphile"
	cp "$BENCH_DIR/graphile/package.json" "$BENCH_DIR/graphile/drain.js" "$BENCH_WORK/graphile/"
	if (cd "$BENCH_WORK/graphile" && npm install --no-audit --no-fund --silent >/dev/null 2>&1); then
		graphile=$(node "$BENCH_WORK/graphile/drain.js" \
			"postgresql:///bench?host=$SOCK&port=$BENCH_PGPORT&user=postgres" "$DRAIN_EVENTS" 4 2>"$BENCH_WORK/graphile.err") \
			|| { echo "  graphile-worker drain failed: $(tail -3 "$BENCH_WORK/graphile.err")" >&2; graphile="-"; }
	else
		echo "  graphile-worker could not be installed from npm; its reference is left out" >&2
	fi
fi
echo "  Graphile Worker no-op drain: $graphile jobs/s" >&2
add_result reference "Graphile Worker no-op drain" "$graphile" "jobs/s" "-" "-" "-" "-"
# The references leave their queues' dead rows behind: vacuum them now, so that
# autovacuum does not clean up after them during the worker's drains.
q -c "VACUUM ANALYZE" -c "CHECKPOINT" >/dev/null

for strategy in occurrence machine version fetch; do
	case "$strategy" in
	occurrence) src=occ; n=$DRAIN_EVENTS; target=">= 5000 ev/s"; op=">="; lim=5000 ;;
	machine) src=mach; n=$DRAIN_EVENTS; target="-"; op=""; lim="" ;;
	version) src=ver; n=$DRAIN_EVENTS; target="-"; op=""; lim="" ;;
	fetch) src=fet; n=$FETCH_EVENTS; target=">= 2000 ev/s"; op=">="; lim=2000 ;;
	esac
	if [ "$strategy" != fetch ] && [ "$WARMUP_EVENTS" -gt 0 ]; then
		load "$strategy" "$src" "$WARMUP_EVENTS"
		drain_worker "$src" >/dev/null
	fi
	per=""
	ws=() ps=()
	for _ in $(seq "$DRAIN_PAIRS"); do
		if [ "$strategy" = fetch ]; then
			# The same-run reference of the set-based save: the same drain with
			# every answer saved by a _save_fetched() call of its own (a
			# diagnostic setting), each drain on an empty mirror of its objects.
			empty_mirror "$src"
			q -c "ALTER SYSTEM SET webhook_inbox.debug_save_per_answer = on" -c "SELECT pg_reload_conf()" >/dev/null
			load "$strategy" "$src" "$n"
			ps+=("$(drain_worker "$src")")
			q -c "ALTER SYSTEM RESET webhook_inbox.debug_save_per_answer" -c "SELECT pg_reload_conf()" >/dev/null
			echo "  fetch, answers saved one by one: worker ${ps[-1]} ev/s; outcomes $(outcomes "$src")" >&2
			empty_mirror "$src"
			curl -sf -X POST "$SIM/_sim/counters/reset" >/dev/null
		else
			ps+=("$(pgq_drain)")
		fi
		load "$strategy" "$src" "$n"
		ws+=("$(drain_worker "$src")")
		echo "  $strategy: worker ${ws[-1]} ev/s" >&2
	done
	w=$(median "${ws[@]}")
	if [ "$strategy" = fetch ]; then
		per=$(median "${ps[@]}")
		ref=$pgq
		echo "  $strategy: medians of $DRAIN_PAIRS: worker $w ev/s, answers saved one by one $per ev/s" >&2
	else
		ref=$(median "${ps[@]}")
		echo "  $strategy: medians of $DRAIN_PAIRS: worker $w ev/s, PgQ $ref ev/s" >&2
	fi
	fetches=""
	if [ "$strategy" = fetch ]; then
		fetches=$(curl -sf "$SIM/_sim/counters" | python3 -c 'import json,sys; print(sum(json.load(sys.stdin)["fetches"].values()))')
		fetches="$fetches, worker fetch latency avg/max ms $(q -F / -c "SELECT round(fetch_latency_avg_ms::numeric, 2), round(fetch_latency_max_ms::numeric, 2) FROM webhook_inbox.worker_stats()")"
	fi
	echo "  $strategy: worker $w ev/s; outcomes $(outcomes "$src")${fetches:+; simulator fetches $fetches}" >&2
	load "$strategy" "$src" "$n"
	s=$(drain_sql "$n")
	echo "  $strategy: SQL alone $s ev/s; outcomes $(outcomes "$src")" >&2
	met="-"
	[ -n "$op" ] && met=$(check "$w" "$op" "$lim")
	add_result worker "drain $strategy (worker)" "$w" "ev/s" "same cycle from SQL alone" "$s" "$target" "$met"
	if [ -n "$per" ]; then
		r=$(fdiv "$w" "$per")
		add_result worker "  fetch / answer-by-answer saves" "$r" "x" "same drain, per-answer saves" "$per" ">= 2 x" \
			"$(check "$r" '>=' 2)"
	fi
	case "$strategy" in
	occurrence) rlim=0.5 ;;
	machine|version) rlim=0.3 ;;
	*) rlim="" ;;
	esac
	r=$(fdiv "$w" "$ref")
	add_result worker "  $strategy / PgQ" "$r" "x" "PgQ batch consumer" "$ref" "${rlim:+>= $rlim x}" \
		"$([ -n "$rlim" ] && check "$r" '>=' "$rlim" || echo -)"
	add_result worker "  $strategy / Graphile no-op" "$(fdiv "$w" "$graphile")" "x" "Graphile Worker no-op" "$graphile" "-" "-"
done

# ---- latency from intake commit to processed at a steady 100 events/s ----
q -c "CREATE TRIGGER bench_note_done AFTER UPDATE OF status ON webhook_inbox.inbox
      FOR EACH ROW WHEN (NEW.status = 'done' AND OLD.status <> 'done') EXECUTE FUNCTION bench.note_done()" >/dev/null
echo "SELECT bench.stripe('occ', bench.occurrence_body(nextval('bench.ids')));" >"$BENCH_WORK/one_intake.sql"
chmod 644 "$BENCH_WORK/one_intake.sql"
worker_enable on
# What the phases before left open is drained first (the SQL-alone fetch
# drain leaves events it did not take, and the worker spent the first
# seconds of this run fetching them: those seconds held the p99): the
# figure is the latency of a worker with nothing else to do.
deadline=$(( $(date +%s) + DRAIN_TIMEOUT ))
while [ "$(open_events)" -gt 0 ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.05; done
sleep 0.5
t0=$(q -c "SELECT clock_timestamp()")
pgbench -n -h "$SOCK" -p "$BENCH_PGPORT" -U postgres -c 1 -R 100 -T "$LATENCY_SECONDS" \
	-f "$BENCH_WORK/one_intake.sql" bench >"$BENCH_WORK/pgbench_latency.out" 2>&1
for _ in $(seq 100); do [ "$(open_events occ)" -eq 0 ] && break; sleep 0.05; done
worker_enable off
q -c "DROP TRIGGER bench_note_done ON webhook_inbox.inbox" >/dev/null
read -r lat_n lat_p50 lat_p99 lat_max <<<"$(q -F ' ' -c "
	SELECT count(*),
	       round((percentile_cont(0.5) WITHIN GROUP (ORDER BY ms))::numeric, 2),
	       round((percentile_cont(0.99) WITHIN GROUP (ORDER BY ms))::numeric, 2),
	       round(max(ms)::numeric, 2)
	  FROM (SELECT extract(epoch FROM d.at - i.received_at) * 1000 AS ms
	          FROM webhook_inbox.inbox i JOIN bench.done_at d ON d.inbox_id = i.id
	         WHERE i.received_at >= '$t0') x")"
echo "  latency: $lat_n events at 100/s: p50 $lat_p50 ms, p99 $lat_p99 ms, max $lat_max ms" >&2
add_result latency "intake commit -> done p50 (100 ev/s)" "$lat_p50" "ms" "-" "-" "-" "-"
add_result latency "intake commit -> done p99 (100 ev/s)" "$lat_p99" "ms" "-" "-" "<= 50 ms" "$(check "$lat_p99" '<=' 50)"

# ---- coalescing under a burst of duplicates ----
# BURST_EVENTS distinct events over BURST_OBJECTS simulator subscriptions,
# each delivered twice, from 4 clients at full speed while the worker runs.
curl -sf -X POST "$SIM/_sim/counters/reset" >/dev/null
first=$((FETCH_EVENTS + 1)); last=$((FETCH_EVENTS + BURST_OBJECTS))
cat >"$BENCH_WORK/burst.sql" <<SQL
\\set s random($first, $last)
SELECT bench.stripe('fet', b), bench.stripe('fet', b)
  FROM (SELECT bench.fetch_body(nextval('bench.ids'), id) AS b FROM bench.subs WHERE i = :s) x;
SQL
chmod 644 "$BENCH_WORK/burst.sql"
t0=$(q -c "SELECT clock_timestamp()")
worker_enable on
pgbench -n -h "$SOCK" -p "$BENCH_PGPORT" -U postgres -c 4 -j 2 -t $((BURST_EVENTS / 4)) \
	-f "$BENCH_WORK/burst.sql" bench >"$BENCH_WORK/pgbench_burst.out" 2>&1
deadline=$(( $(date +%s) + DRAIN_TIMEOUT ))
while [ "$(open_events fet)" -gt 0 ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.05; done
worker_enable off
objs=$(q -c "SELECT count(DISTINCT object_id) FROM webhook_inbox.inbox WHERE received_at >= '$t0' AND object_type = 'subscription'")
evs=$(q -c "SELECT count(*) FROM webhook_inbox.inbox WHERE received_at >= '$t0' AND object_type = 'subscription'")
fetches=$(curl -sf "$SIM/_sim/counters" | python3 -c 'import json,sys; print(sum(json.load(sys.stdin)["fetches"].values()))')
per=$(fdiv "$fetches" "$objs")
echo "  coalescing: $evs distinct events (x2 deliveries) on $objs objects -> $fetches fetches" >&2
add_result coalescing "fetches per distinct object (burst)" "$per" "x" "events per object" "$(fdiv "$evs" "$objs")" "<= 1.1" "$(check "$per" '<=' 1.1)"

# ---- held-back vacuum: drain with a transaction held open vs without ----
load occurrence occ "$DRAIN_EVENTS"
free=$(drain_worker occ)
psql -X -q -h "$SOCK" -p "$BENCH_PGPORT" -U postgres -d bench \
	-c "SET application_name = 'bench_holder'" \
	-c "BEGIN" -c "SELECT txid_current()" -c "SELECT pg_sleep(3600)" >/dev/null 2>&1 &
holder_pid=$!
for _ in $(seq 50); do
	[ "$(q -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'bench_holder' AND backend_xid IS NOT NULL")" -gt 0 ] && break
	sleep 0.1
done
load occurrence occ "$DRAIN_EVENTS"
held=$(drain_worker occ)
q -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'bench_holder'" >/dev/null
wait "$holder_pid" 2>/dev/null || true
holder_pid=""
ratio=$(fdiv "$held" "$free")
echo "  held-back vacuum: $held ev/s with a transaction open, $free ev/s without" >&2
add_result vacuum "drain occurrence with xact held open" "$held" "ev/s" "same drain with nothing held" "$free" "-" "-"
add_result vacuum "  ratio held / free" "$ratio" "x" "-" "-" ">= 0.8" "$(check "$ratio" '>=' 0.8)"

# ---- history: the same work with HISTORY_EVENTS processed events kept ----
# on two clusters of their own, alternately (history.sh); HISTORY_EVENTS=0
# skips it
if [ "${HISTORY_EVENTS:-5000000}" -eq 0 ]; then
	echo "  history: skipped (HISTORY_EVENTS=0)" >&2
	exit 0
fi
"$BENCH_DIR/history.sh"
