#!/usr/bin/env bash
# History: an occurrence drain and intake's ceiling on an inbox that keeps
# HISTORY_EVENTS processed events, against the same on one that keeps none,
# measured alternately so that the machine's drift (other work on shared
# cores) falls on both sides of each ratio.
#
# Two clusters of the same build and settings side by side, each with its
# own background worker (webhook_inbox.database names one database per
# cluster): "without" and "with", the second given HISTORY_EVENTS done
# events and their deliveries (received over the last 30 days, what an
# inbox holds under prune() keeping 30 days), then VACUUM (FREEZE, ANALYZE)
# as the autovacuum of a production inbox would have left them.  Then
# HISTORY_PAIRS pairs of passes: each pass is prepared on both clusters
# (the open events of the pass before closed, VACUUM ANALYZE, CHECKPOINT)
# and measured on one right after the other, the order alternating from
# pair to pair, the drain in slices of DRAIN_SLICE and intake's ceiling in
# slices of a second, alternating slice by slice; only one cluster works at
# a time.  Printed: every pair,
# and per figure the median of the pairs' ratios (with / without).
#
# Appends rows to $RESULTS_CSV (see lib.sh).  Environment: HISTORY_EVENTS
# (5000000), HISTORY_PAIRS (11), HISTORY_DRAIN (20000 events per drain),
# INTAKE_SECONDS (6 one-second slices per cluster and pair), WARMUP_EVENTS (2000), DRAIN_TIMEOUT
# (120 s per drain).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

HISTORY_EVENTS="${HISTORY_EVENTS:-5000000}"
HISTORY_PAIRS="${HISTORY_PAIRS:-11}"
HISTORY_DRAIN="${HISTORY_DRAIN:-30000}"
INTAKE_SECONDS="${INTAKE_SECONDS:-6}"
WARMUP_EVENTS="${WARMUP_EVENTS:-2000}"
DRAIN_TIMEOUT="${DRAIN_TIMEOUT:-120}"
DRAIN_SLICE="${DRAIN_SLICE:-0.5}"

# use NAME: q, cluster_start and cluster_stop act on that cluster from now
# on (each its own data directory and socket directory, the same port).
use() {
	PGDATA_B="$BENCH_WORK/history-$1/data"
	SOCK="$BENCH_WORK/history-$1"
}
for c in without with; do
	mkdir -p "$BENCH_WORK/history-$c"
	[ "$(id -u)" -eq 0 ] && chown "$RUN_USER" "$BENCH_WORK/history-$c"
	chmod 755 "$BENCH_WORK/history-$c"
done
# the run's own cluster idles meanwhile (its worker is off)
main_sock="$SOCK"; main_data="$PGDATA_B"
cleanup() {
	for c in without with; do use "$c"; q -c "ALTER SYSTEM SET webhook_inbox.enabled = off" 2>/dev/null || true; cluster_stop; done
	SOCK="$main_sock"; PGDATA_B="$main_data"
}
trap cleanup EXIT
for c in without with; do use "$c"; cluster_start; done

echo "SELECT bench.stripe('occ', bench.occurrence_body(nextval('bench.ids')));" >"$BENCH_WORK/history_intake.sql"
chmod 644 "$BENCH_WORK/history_intake.sql"

# prepare: close what the pass before left open (intake's events), so that
# both inboxes hold only done events, then vacuum and checkpoint, so that
# no pass pays for the writes before it.
prepare() {
	q -c "UPDATE webhook_inbox.inbox SET status = 'done', processed_at = now(), updated_at = now()
	      WHERE status IN ('pending', 'retry')" \
	  -c "VACUUM ANALYZE webhook_inbox.inbox" -c "VACUUM ANALYZE webhook_inbox.deliveries" -c "CHECKPOINT" >/dev/null
}
# load_drain N: N pending refund.created events through intake(), one transaction.
load_drain() {
	q -c "SELECT count(bench.stripe('occ', bench.occurrence_body(nextval('bench.ids')))) FROM generate_series(1, $1)" \
	  -c "ANALYZE webhook_inbox.inbox" >/dev/null
}
open_events() { q -c "SELECT count(*) FROM webhook_inbox.inbox WHERE status IN ('pending', 'retry', 'processing')"; }
# drain → events/s of the worker emptying the inbox (the warm-up).
drain() {
	local deadline
	worker_enable on
	deadline=$(( $(date +%s) + DRAIN_TIMEOUT ))
	while [ "$(open_events)" -gt 0 ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.05; done
	worker_enable off
}
# drain_slice FLOOR → "events seconds": what the worker processed (events
# after id FLOOR) in DRAIN_SLICE seconds on, from its first to its last
# processed_at.
drain_slice() {
	local t0
	t0=$(q -c "SELECT clock_timestamp()")
	worker_enable on
	sleep "$DRAIN_SLICE"
	worker_enable off
	q -F ' ' -c "SELECT count(*), coalesce(extract(epoch FROM max(processed_at) - min(processed_at)), 0)
		FROM webhook_inbox.inbox WHERE id > $1 AND processed_at >= '$t0'"
}
# drain_pair ORDER: both clusters' drains of the events loaded, in slices
# alternating in ORDER until either has drained them all; prints the two
# rates (events over the slices' spans), "with without".
drain_pair() {
	local c n t nw=0 tw=0 nn=0 tn=0 deadline=$(( $(date +%s) + DRAIN_TIMEOUT ))
	while [ "$(date +%s)" -lt "$deadline" ]; do
		for c in $1; do
			use "$c"
			read -r n t <<<"$(drain_slice "${floor[$c]}")"
			if [ "$c" = with ]; then nw=$((nw + n)); tw=$(awk -v a="$tw" -v b="$t" 'BEGIN { print a + b }')
			else nn=$((nn + n)); tn=$(awk -v a="$tn" -v b="$t" 'BEGIN { print a + b }'); fi
		done
		use with; [ "$(open_events)" -gt 0 ] || break
		use without; [ "$(open_events)" -gt 0 ] || break
	done
	echo "$(fdiv "$nw" "$tw") $(fdiv "$nn" "$tn")"
}
intake() {
	pgbench -n -h "$SOCK" -p "$BENCH_PGPORT" -U postgres -c 4 -j 2 -T "$1" \
		-f "$BENCH_WORK/history_intake.sql" bench 2>/dev/null | awk '/^tps = / { print $3 }'
}
# intake_pair ORDER: intake's ceiling on both clusters, INTAKE_SECONDS
# one-second slices each, alternating slice by slice in ORDER; prints the
# two mean rates, "with without".
intake_pair() {
	local s c t sw=0 sn=0
	for s in $(seq 1 "$INTAKE_SECONDS"); do
		for c in $1; do
			use "$c"; t=$(intake 1)
			if [ "$c" = with ]; then sw=$(awk -v a="$sw" -v b="$t" 'BEGIN { print a + b }')
			else sn=$(awk -v a="$sn" -v b="$t" 'BEGIN { print a + b }'); fi
		done
	done
	awk -v w="$sw" -v n="$sn" -v k="$INTAKE_SECONDS" 'BEGIN { printf "%.1f %.1f", w / k, n / k }'
}

# ---- the history: HISTORY_EVENTS done events and their deliveries ----
use with
t0=$(now_s)
q <<SQL >/dev/null
INSERT INTO webhook_inbox.inbox (source_id, event_id, event_type, object_type, object_id, strategy,
	route_id, route_version, provider_time, payload, body_sha256, status, reason, received_at, processed_at,
	updated_at, decided_route, decided_route_version)
SELECT s.id, 'evt_o' || n, 'refund.created', 'refund', 're_' || n, 'occurrence', r.id, r.version,
	   to_timestamp(1767225600 + n), bench.occurrence_body(n)::jsonb, sha256(convert_to(n::text, 'UTF8')), 'done',
	   NULL, now() - interval '30 days' + n * (interval '30 days' / $HISTORY_EVENTS),
	   now() - interval '30 days' + n * (interval '30 days' / $HISTORY_EVENTS),
	   now() - interval '30 days' + n * (interval '30 days' / $HISTORY_EVENTS), r.id, r.version
  FROM webhook_inbox.sources s, webhook_inbox.routes r, generate_series(1, $HISTORY_EVENTS) n
 WHERE s.name = 'occ' AND r.source_id = s.id AND r.event_type = 'refund.created';
INSERT INTO webhook_inbox.deliveries (source_id, event_id, delivery_id, received_at, body_sha256, body_size, outcome)
SELECT i.source_id, i.event_id, NULL, i.received_at, i.body_sha256, 300, 'new'
  FROM webhook_inbox.inbox i;
-- history older than CREATE EXTENSION reads as a restored copy, which
-- pauses outbound work: this inbox is the original
SELECT webhook_inbox.resume_outbound();
VACUUM (FREEZE, ANALYZE) webhook_inbox.inbox;
VACUUM (FREEZE, ANALYZE) webhook_inbox.deliveries;
CHECKPOINT;
SQL
t1=$(now_s)
bytes() { q -c "SELECT pg_total_relation_size('webhook_inbox.inbox'), pg_total_relation_size('webhook_inbox.deliveries')"; }
IFS='|' read -r wi wd <<<"$(bytes)"
# the live events' ids follow the history's in both inboxes ("evt_o" || n)
q -c "SELECT setval('bench.ids', $HISTORY_EVENTS)" >/dev/null
use without
q -c "SELECT setval('bench.ids', $HISTORY_EVENTS)" >/dev/null
IFS='|' read -r oi od <<<"$(bytes)"
per_inbox=$(awk -v a="$wi" -v b="$oi" -v n="$HISTORY_EVENTS" 'BEGIN { printf "%.0f", (a - b) / n }')
per_deliv=$(awk -v a="$wd" -v b="$od" -v n="$HISTORY_EVENTS" 'BEGIN { printf "%.0f", (a - b) / n }')
echo "  history: $HISTORY_EVENTS done events added in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", b - a }') s;" \
	"$per_inbox bytes per event in inbox (heap, TOAST, indexes), $per_deliv in deliveries" >&2
use with
q -c "SELECT c.relname, pg_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = 'webhook_inbox' AND c.relkind = 'i' AND pg_relation_size(c.oid) > 8192 * 16 ORDER BY 1" |
	sed 's/^/  history: index with history: /' >&2

# ---- warm-up: each worker's first plans, and the caches of both ----
for c in without with; do
	use "$c"; prepare; load_drain "$WARMUP_EVENTS"; drain >/dev/null; intake 2 >/dev/null
done

# ---- the pairs ----
declare -A floor
dr=(); ir=(); dw=(); dn=(); iw=(); io=()
for p in $(seq 1 "$HISTORY_PAIRS"); do
	if [ $((p % 2)) -eq 1 ]; then order="without with"; else order="with without"; fi
	for c in without with; do
		use "$c"; prepare; floor[$c]=$(q -c "SELECT coalesce(max(id), 0) FROM webhook_inbox.inbox")
		load_drain "$HISTORY_DRAIN"; q -c "CHECKPOINT" >/dev/null
	done
	read -r d1 d0 <<<"$(drain_pair "$order")"
	for c in without with; do use "$c"; prepare; done
	read -r i1 i0 <<<"$(intake_pair "$order")"
	dw+=("$d1"); dn+=("$d0"); iw+=("$i1"); io+=("$i0")
	dr+=("$(fdiv "$d1" "$d0")"); ir+=("$(fdiv "$i1" "$i0")")
	echo "  history: pair $p ($order): drain $d1 / $d0 ev/s = ${dr[-1]}, intake ceiling $i1 / $i0 tx/s = ${ir[-1]}" >&2
done
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
hr_drain=$(median "${dr[@]}"); hr_intake=$(median "${ir[@]}")
echo "  history: median of $HISTORY_PAIRS pairs: drain $hr_drain (pairs ${dr[*]}), intake ceiling $hr_intake (pairs ${ir[*]})" >&2
add_result history "drain occurrence with $HISTORY_EVENTS done (median)" "$(median "${dw[@]}")" "ev/s" "same drain, no history (median)" "$(median "${dn[@]}")" "-" "-"
add_result history "  ratio with / without ($HISTORY_PAIRS pairs)" "$hr_drain" "x" "lowest pair" "$(printf '%s\n' "${dr[@]}" | sort -g | head -1)" ">= 0.9" "$(check "$hr_drain" '>=' 0.9)"
add_result history "intake ceiling with $HISTORY_EVENTS done (median)" "$(median "${iw[@]}")" "rows/s" "same, no history (median)" "$(median "${io[@]}")" "-" "-"
add_result history "  ratio with / without ($HISTORY_PAIRS pairs)" "$hr_intake" "x" "lowest pair" "$(printf '%s\n' "${ir[@]}" | sort -g | head -1)" ">= 0.9" "$(check "$hr_intake" '>=' 0.9)"
add_result history "bytes per done event kept" "$((per_inbox + per_deliv))" "B" "inbox / deliveries" "$per_inbox / $per_deliv" "-" "-"
