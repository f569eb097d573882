#!/usr/bin/env bash
# Receiver throughput against the database's own ceiling.
#
#   ceiling:  pgbench, transactions of BEGIN; 50 x intake(); COMMIT with
#             unique ids, no HTTP; the best of 1, 2 and 4 clients.
#   receiver: wrk, 64 connections, replaying pre-signed ~1.2 KB Stripe
#             deliveries (all unique) to webhook-receiver on loopback.
#
# Prints nothing itself; appends rows to $RESULTS_CSV (see lib.sh).
# Environment: RECEIVER_SECONDS (10), CEILING_SECONDS (6), WRK_CONNECTIONS (64),
# WRK_THREADS (2), RECEIVER_ARGS (extra webhook-receiver flags).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

RECEIVER_SECONDS="${RECEIVER_SECONDS:-10}"
CEILING_SECONDS="${CEILING_SECONDS:-6}"
WRK_CONNECTIONS="${WRK_CONNECTIONS:-64}"
WRK_THREADS="${WRK_THREADS:-2}"
RPORT="${BENCH_RECEIVER_PORT:-$(free_port)}"
SECRET=whsec_bench

[ -f "$PGDATA_B/postmaster.pid" ] || cluster_start

# ---- the ceiling: intake() from pgbench in batches of 50 ----
# pgbench takes ":word" for a variable, so the template's colons travel as
# "~" and are put back by translate(); the body bytes are the receiver's.
tpl=$(tr -d '\n' <"$BENCH_DIR/body_template.json" | sed "s/'/''/g; s/:/~/g")
script="$BENCH_WORK/intake50.sql"
{
	echo "BEGIN;"
	for _ in $(seq 50); do
		echo "SELECT webhook_inbox.intake('bench', ARRAY['content-type','application/json','stripe-signature','t=1767225600,v1=$(printf '0%.0s' $(seq 64))'], convert_to(translate(replace('$tpl', '{N}', 'p' || nextval('bench.ids')), '~', chr(58)), 'UTF8'));"
	done
	echo "COMMIT;"
} >"$script"
chmod 644 "$script"

ceiling=0
ceiling_clients=0
for c in 1 2 4; do
	tps=$(pgbench -n -M prepared -h "$SOCK" -p "$BENCH_PGPORT" -U postgres -c "$c" -j "$c" \
		-T "$CEILING_SECONDS" -f "$script" bench 2>&1 | sed -n 's/^tps = \([0-9.]*\) .*/\1/p')
	rows=$(awk -v t="${tps:-0}" 'BEGIN { printf "%.0f", t * 50 }')
	echo "  ceiling: pgbench $c client(s): $rows intake rows/s" >&2
	add_result ceiling "intake rows/s (pgbench -c $c)" "$rows" "rows/s" "-" "-" "-" "-"
	if [ "$rows" -gt "$ceiling" ]; then ceiling=$rows; ceiling_clients=$c; fi
done
q -c "VACUUM ANALYZE webhook_inbox.inbox" -c "VACUUM ANALYZE webhook_inbox.deliveries" >/dev/null

# ---- the receiver under wrk ----
# Enough unique deliveries for 1.5x the ceiling over the whole run.
count=$(awk -v c="$ceiling" -v s="$RECEIVER_SECONDS" 'BEGIN { n = int(c * s * 1.5); if (n < 20000) n = 20000; print n }')
"$BENCH_DIR/gen_requests.pl" "$BENCH_DIR/body_template.json" "$count" "$WRK_THREADS" \
	"$BENCH_WORK/req" "$SECRET" w

# shellcheck disable=SC2086
webhook-receiver --db "$CONNINFO" --listen "127.0.0.1:$RPORT" --log-level warning \
	${RECEIVER_ARGS:-} >"$BENCH_WORK/receiver.log" 2>&1 &
rpid=$!
trap 'kill $rpid 2>/dev/null || true' EXIT
for _ in $(seq 100); do
	curl -sf "http://127.0.0.1:$RPORT/readyz" >/dev/null 2>&1 && break
	sleep 0.1
done
curl -sf "http://127.0.0.1:$RPORT/readyz" >/dev/null || { echo "receiver not ready" >&2; cat "$BENCH_WORK/receiver.log" >&2; exit 1; }

counts="SELECT count(*) FILTER (WHERE d.outcome = 'new') || ' ' || count(*) FILTER (WHERE d.outcome <> 'new')
          FROM webhook_inbox.deliveries d JOIN webhook_inbox.sources s ON s.id = d.source_id WHERE s.name = 'bench'"
read -r new0 other0 <<<"$(q -c "$counts")"
rss_idle=$(awk '/^VmRSS/ { print $2 }' "/proc/$rpid/status")
wrk -t "$WRK_THREADS" -c "$WRK_CONNECTIONS" -d "${RECEIVER_SECONDS}s" --timeout 10s \
	-s "$BENCH_DIR/wrk_replay.lua" "http://127.0.0.1:$RPORT" -- "$BENCH_WORK/req" bench \
	>"$BENCH_WORK/wrk.out" 2>&1 || true
hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$rpid/status")
read -r new1 other1 <<<"$(q -c "$counts")"
kill "$rpid"; wait "$rpid" 2>/dev/null || true
trap - EXIT

res=$(grep '^RESULT' "$BENCH_WORK/wrk.out" || { cat "$BENCH_WORK/wrk.out" >&2; exit 1; })
val() { echo "$res" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
requests=$(val requests); dur=$(val duration_us); bad=$(val status_errors)
sockerr=$(( $(val connect_errors) + $(val read_errors) + $(val write_errors) + $(val timeouts) ))
ok=$((requests - bad))
rate=$(awk -v n="$ok" -v d="$dur" 'BEGIN { printf "%.0f", n / (d / 1e6) }')
newrows=$((new1 - new0))
notnew=$((other1 - other0))
p50=$(awk -v u="$(val p50_us)" 'BEGIN { printf "%.2f", u / 1000 }')
p99=$(awk -v u="$(val p99_us)" 'BEGIN { printf "%.2f", u / 1000 }')
rss_mb=$(awk -v k="$hwm" 'BEGIN { printf "%.1f", k / 1024 }')
ratio=$(fdiv "$rate" "$ceiling")
echo "  receiver: $ok x 2xx of $requests in $(fdiv "$dur" 1000000) s, $newrows new rows, $notnew not new, non-2xx $bad, socket errors $sockerr, wraps $(val wraps), idle RSS $((rss_idle / 1024)) MB" >&2

add_result receiver "accepted deliveries/s (wrk -c $WRK_CONNECTIONS)" "$rate" "req/s" \
	"ceiling: intake x50 pgbench -c $ceiling_clients" "$ceiling" ">= 0.6 x ceiling" "$(check "$ratio" '>=' 0.6)"
add_result receiver "  ratio to ceiling" "$ratio" "x" "-" "-" ">= 0.6" "$(check "$ratio" '>=' 0.6)"
add_result receiver "latency p50" "$p50" "ms" "-" "-" "-" "-"
add_result receiver "latency p99" "$p99" "ms" "-" "-" "<= 20 ms" "$(check "$p99" '<=' 20)"
add_result receiver "peak RSS (VmHWM)" "$rss_mb" "MB" "-" "-" "<= 64 MB" "$(check "$rss_mb" '<=' 64)"
# wrk does not count the answers in flight when it stops, so new rows may
# exceed the 2xx count by up to the connection count; none may be a duplicate.
add_result receiver "non-new outcomes + errors (all unique)" "$((notnew + bad + sockerr))" "count" "-" "-" "= 0" \
	"$( [ $((notnew + bad + sockerr)) -eq 0 ] && echo yes || echo no)"
