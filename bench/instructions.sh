#!/usr/bin/env bash
# Instructions per event of the worker's local drains and of their PgQ
# reference, counted by valgrind (callgrind) in a single-user backend: the
# same figure on a busy machine as on a calm one, where a drain's rate moves
# with whatever else runs (the same build's occurrence drain was seen at
# 12,437 and 22,549 events/s on one afternoon).  A count is not a time, so
# these rows carry no target; they show where a change moved the work.
#
# On a cluster of its own: for each of the occurrence, machine and version
# strategies, INSTR_EVENTS events are loaded through intake() (as
# bench/worker.sh loads them), the cluster is stopped, and one backend
# drains them as the background worker's fast path does (_work_local() of
# local_batch_size objects, a commit each, until none is left) under
# callgrind; PgQ's batch consumer (bench/sql/pgq.sql, as worker.sh's
# reference) drains as many refunds the same way.  A backend that only runs
# SELECT 1 is counted too and taken away from each.
#
# Appends rows to $RESULTS_CSV (see lib.sh).  Environment: INSTR_EVENTS (4000).
# Needs valgrind; without it the part says so and adds no rows.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

INSTR_EVENTS="${INSTR_EVENTS:-4000}"
if ! command -v valgrind >/dev/null; then
	echo "  instructions: valgrind is not installed (apt-get install valgrind); part left out" >&2
	exit 0
fi

main_sock="$SOCK"; main_data="$PGDATA_B"
SOCK="$BENCH_WORK/instr"; PGDATA_B="$SOCK/data"
mkdir -p "$SOCK"
[ "$(id -u)" -eq 0 ] && chown "$RUN_USER" "$SOCK"
chmod 755 "$SOCK"
cleanup() { cluster_stop; SOCK="$main_sock"; PGDATA_B="$main_data"; }
trap cleanup EXIT

# single NAME SQL: the instructions a single-user backend of the bench
# database spends on SQL, from start to exit
single() {
	echo "$2" | as_user valgrind --tool=callgrind --callgrind-out-file="$SOCK/callgrind.$1" \
		"$PG_BINDIR/postgres" --single -D "$PGDATA_B" bench >"$SOCK/single.$1.out" 2>"$SOCK/valgrind.$1.log"
	if grep -E "(ERROR|FATAL|PANIC):" "$SOCK/valgrind.$1.log" >&2; then
		echo "  instructions: the single-user backend ($1) failed; $SOCK/valgrind.$1.log" >&2
		exit 1
	fi
	sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$SOCK/valgrind.$1.log"
}
# per_event TOTAL: instructions per event above the idle backend's
per_event() { awk -v t="$1" -v b="$idle" -v n="$INSTR_EVENTS" 'BEGIN { printf "%.0f", (t - b) / n }'; }

cluster_start
q -f "$BENCH_DIR/sql/pgq.sql" >/dev/null
batch=$(q -c "SELECT current_setting('webhook_inbox.local_batch_size')")
q <<SQL >/dev/null
CREATE PROCEDURE bench.local_drain() LANGUAGE plpgsql AS \$\$
DECLARE
	n integer;
BEGIN
	LOOP
		SELECT count(*) INTO n FROM webhook_inbox._work_local($batch, true);
		COMMIT;
		EXIT WHEN n = 0;
	END LOOP;
END
\$\$;
SELECT pgq.create_queue('instr');
SELECT pgq.register_consumer('instr', 'bench_c');
SELECT pgq.set_queue_config('instr', 'ticker_max_count', '1000');
SQL
q -c "CALL bench.pgq_load($INSTR_EVENTS, 'instr')" >/dev/null
cluster_stop
idle=$(single idle "SELECT 1;")
pgq_total=$(single pgq "CALL bench.pgq_drain('instr');")
pgq=$(per_event "$pgq_total")
echo "  PgQ batch consumer: $pgq instructions per event" >&2

# the cluster runs between the drains: each strategy's count is checked
# and the next one's events loaded in the same start
cluster_resume
for strategy in occurrence machine version; do
	case "$strategy" in occurrence) src=occ ;; machine) src=mach ;; version) src=ver ;; esac
	load "$strategy" "$src" "$INSTR_EVENTS"
	q -c "VACUUM ANALYZE" -c "CHECKPOINT" >/dev/null
	cluster_stop
	w=$(per_event "$(single "$strategy" "CALL bench.local_drain();")")
	cluster_resume
	left=$(q -c "SELECT count(*) FROM webhook_inbox.inbox WHERE status IN ('pending', 'retry', 'processing')")
	echo "  $strategy: worker $w instructions per event (open after the drain: $left)" >&2
	[ "$left" -eq 0 ] || { echo "  instructions: the $strategy drain left $left events open" >&2; exit 1; }
	add_result instructions "drain $strategy: instructions per event" "$w" "instr" \
		"PgQ batch consumer" "$pgq" "-" "-"
	add_result instructions "  PgQ / $strategy (instructions per event)" "$(fdiv "$pgq" "$w")" "x" "-" "-" "-" "-"
done
