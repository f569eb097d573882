#!/usr/bin/env bash
# Retention figures: what one event costs on disk and what that makes a day.
#
# A stream of Stripe fetch events (RETENTION_EVENTS of bench/body_template.json's
# ~1.2 KB, four per subscription, as a subscription's life brings several)
# is stored through intake() and
# drained by the worker against webhook-sim; then the schema's size is
# measured, table by table, three times: as processed (the inbox row with
# its payload, the delivery's audit row, the object in the mirror and its
# transitions), with the payloads stripped (prune's
# strip_payloads_older_than: the identities stay), and once prune() with
# its defaults has removed all of it (what stays: the mirror, the newest
# transition of each object).  Bytes per event are the growth over the
# events, indexes and TOAST included, after VACUUM FULL (no free space
# counted).  Growth per day is that at RETENTION_RATE events/s, and the
# steady-state size under prune(RETENTION_DAYS) is a day's growth times the
# days kept (and, with strip_payloads_older_than RETENTION_STRIP_DAYS, the
# stripped size for the days after those).
#
#   bench/run.sh retention        (or on its own, once installed)
# Appends rows to $RESULTS_CSV (see lib.sh).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

EVENTS="${RETENTION_EVENTS:-20000}"
RATE="${RETENTION_RATE:-50}"
DAYS="${RETENTION_DAYS:-30}"
STRIP_DAYS="${RETENTION_STRIP_DAYS:-7}"
PER_OBJECT=4

[ -f "$PGDATA_B/postmaster.pid" ] || cluster_start
worker_enable off
SIM_PID=""
cleanup() {
	[ -n "$SIM_PID" ] && kill "$SIM_PID" 2>/dev/null || true
	worker_enable off 2>/dev/null || true
}
trap cleanup EXIT
objects=$((EVENTS / PER_OBJECT))
q -c "SELECT 1 FROM webhook_inbox.sources WHERE name = 'fet'" | grep -q 1 || sim_start $((objects * 3))

# the schema's size (every relation: heap, indexes, TOAST), after VACUUM FULL
schema_bytes() {
	q -c "VACUUM FULL" >/dev/null
	q -c "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c
	      WHERE c.relnamespace = 'webhook_inbox'::regnamespace AND c.relkind = 'r'"
}
by_table() {
	q -F ' ' -c "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c
	      WHERE c.relnamespace = 'webhook_inbox'::regnamespace AND c.relkind = 'r'
	        AND pg_total_relation_size(c.oid) > 65536 ORDER BY 2 DESC"
}

# a fresh mirror and inbox for the source: the figures are this stream's
q -c "DELETE FROM webhook_inbox.transitions WHERE source_id = (SELECT id FROM webhook_inbox.sources WHERE name = 'fet')" \
  -c "DELETE FROM webhook_inbox.objects WHERE source_id = (SELECT id FROM webhook_inbox.sources WHERE name = 'fet')" \
  -c "DELETE FROM webhook_inbox.inbox WHERE source_id = (SELECT id FROM webhook_inbox.sources WHERE name = 'fet')" \
  -c "DELETE FROM webhook_inbox.deliveries WHERE source_id = (SELECT id FROM webhook_inbox.sources WHERE name = 'fet')" >/dev/null
nsubs=$(q -c "SELECT count(*) FROM bench.subs")
[ "$nsubs" -ge "$objects" ] || objects="$nsubs"
EVENTS=$((objects * PER_OBJECT))
size0=$(schema_bytes)

echo "  retention: $EVENTS events over $objects subscriptions" >&2
# each event is bench/body_template.json (a real-sized, ~1.2 KB Stripe
# customer.subscription.updated) naming one of the simulator's subscriptions
q -v tpl="$(cat "$BENCH_DIR/body_template.json")" >/dev/null <<SQL
SELECT count(bench.stripe('fet', replace(replace(:'tpl', 'sub_{N}', s.id), '{N}', 'r' || nextval('bench.ids'))))
  FROM bench.subs s, generate_series(1, $PER_OBJECT) k WHERE s.i <= $objects;
SQL
worker_enable on
deadline=$(( $(date +%s) + 600 ))
while [ "$(q -c "SELECT count(*) FROM webhook_inbox.inbox WHERE status IN ('pending', 'processing', 'retry')")" -gt 0 ]; do
	[ "$(date +%s)" -lt "$deadline" ] || { echo "  retention: the drain timed out" >&2; exit 1; }
	sleep 0.5
done
worker_enable off
done_events=$(q -c "SELECT count(*) FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id
	WHERE s.name = 'fet' AND i.status = 'done'")

size1=$(schema_bytes)
echo "  retention: as processed, by table (bytes):" >&2
by_table | sed 's/^/    /' >&2
q -c "SELECT * FROM webhook_inbox.prune('1000 years', strip_payloads_older_than => '0 seconds')" >/dev/null
size2=$(schema_bytes)
# time passes beyond every default age, then prune() with its defaults
q -c "UPDATE webhook_inbox.inbox SET processed_at = processed_at - interval '100 days', updated_at = updated_at - interval '100 days'" \
  -c "UPDATE webhook_inbox.deliveries SET received_at = received_at - interval '100 days'" \
  -c "UPDATE webhook_inbox.transitions SET at = at - interval '100 days'" >/dev/null
q -c "SELECT * FROM webhook_inbox.prune('$DAYS days')" >/dev/null
size3=$(schema_bytes)

per_event=$(awk -v a="$size1" -v b="$size0" -v n="$EVENTS" 'BEGIN { printf "%.0f", (a - b) / n }')
per_event_stripped=$(awk -v a="$size2" -v b="$size0" -v n="$EVENTS" 'BEGIN { printf "%.0f", (a - b) / n }')
per_object_kept=$(awk -v a="$size3" -v b="$size0" -v n="$objects" 'BEGIN { printf "%.0f", (a - b) / n }')
day_mb=$(awk -v e="$per_event" -v r="$RATE" 'BEGIN { printf "%.1f", e * r * 86400 / 1048576 }')
day_mb_stripped=$(awk -v e="$per_event_stripped" -v r="$RATE" 'BEGIN { printf "%.1f", e * r * 86400 / 1048576 }')
steady_gb=$(awk -v e="$per_event" -v r="$RATE" -v d="$DAYS" 'BEGIN { printf "%.2f", e * r * 86400 * d / 1073741824 }')
steady_strip_gb=$(awk -v e="$per_event" -v x="$per_event_stripped" -v r="$RATE" -v d="$DAYS" -v k="$STRIP_DAYS" \
	'BEGIN { printf "%.2f", (e * k + x * (d - k)) * r * 86400 / 1073741824 }')

echo "  retention: $done_events of $EVENTS events done; $per_event bytes/event as processed, $per_event_stripped stripped, $per_object_kept per object after prune()" >&2
add_result retention "bytes per event (processed; payload kept)" "$per_event" bytes "-" "-" "-" "-"
add_result retention "bytes per event (payload stripped)" "$per_event_stripped" bytes "-" "-" "-" "-"
add_result retention "bytes per object kept after prune() (mirror)" "$per_object_kept" bytes "-" "-" "-" "-"
add_result retention "growth per day at $RATE events/s" "$day_mb" MB "stripped" "$day_mb_stripped" "-" "-"
add_result retention "steady size under prune('$DAYS days') at $RATE/s" "$steady_gb" GB \
	"payloads stripped after $STRIP_DAYS days" "$steady_strip_gb" "-" "-"
