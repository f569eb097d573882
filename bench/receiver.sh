#!/usr/bin/env bash
# Receiver throughput against the database's own ceilings, in one run.
#
#   raw:      pgbench -c 2, one INSERT ... SELECT ... ON CONFLICT DO NOTHING
#             of 50 ~1.2 KB bodies as bytea into a table with a unique
#             (source, event id) key: what a durable, deduplicated insert
#             of the same bytes costs.
#   batch:    pgbench -c 2, intake_batch() of the same 50 bodies per call.
#   per-call: pgbench -c 2, BEGIN; 50 x intake(); COMMIT (for reference).
#   receiver: wrk, 64 connections, replaying pre-signed ~1.2 KB Stripe
#             deliveries (all unique) to webhook-receiver on loopback.
#   fixed rate: bench/openloop.c, FIXED_SHARE (0.8) of the rate wrk measured,
#             offered at a fixed rate over 64 connections whatever the
#             answers take; latency from when each request was due, so a
#             stall counts for every request it held up (wrk, a closed loop,
#             sends less while the receiver stalls).
#
# Prints nothing itself; appends rows to $RESULTS_CSV (see lib.sh).
# Environment: RECEIVER_SECONDS (10), CEILING_SECONDS (6), CEILING_CLIENTS (2),
# WRK_CONNECTIONS (64), WRK_THREADS (2), RECEIVER_ARGS (extra webhook-receiver flags),
# FIXED_SECONDS (10), FIXED_SHARE (0.8).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

RECEIVER_SECONDS="${RECEIVER_SECONDS:-10}"
CEILING_SECONDS="${CEILING_SECONDS:-6}"
CEILING_CLIENTS="${CEILING_CLIENTS:-2}"
WRK_CONNECTIONS="${WRK_CONNECTIONS:-64}"
WRK_THREADS="${WRK_THREADS:-2}"
FIXED_SECONDS="${FIXED_SECONDS:-10}"
FIXED_SHARE="${FIXED_SHARE:-0.8}"
RPORT="${BENCH_RECEIVER_PORT:-$(free_port)}"
APORT="$(free_port)"
SECRET=whsec_bench

[ -f "$PGDATA_B/postmaster.pid" ] || cluster_start

# ---- the ceilings: pgbench, 50 bodies per transaction ----
# pgbench takes ":word" for a variable, so the template's colons travel as
# "~" and are put back by translate(); the body bytes are the receiver's,
# with a unique id per row from a sequence.
tpl=$(tr -d '\n' <"$BENCH_DIR/body_template.json" | sed "s/'/''/g; s/:/~/g")
body_sql() { echo "convert_to(translate(replace('$tpl', '{N}', '$1' || $2), '~', chr(58)), 'UTF8')"; }
q -c "CREATE TABLE bench.raw (source_id integer NOT NULL, event_id text NOT NULL, body bytea NOT NULL,
	UNIQUE (source_id, event_id))"

echo "INSERT INTO bench.raw (source_id, event_id, body)
SELECT 1, 'r' || n, $(body_sql r n) FROM (SELECT nextval('bench.ids') AS n FROM generate_series(1, 50)) s
ON CONFLICT DO NOTHING;" | tr '\n' ' ' >"$BENCH_WORK/raw50.sql"
echo "SELECT count(*) FROM webhook_inbox.intake_batch(array_fill('bench'::text, ARRAY[50]), '{}',
ARRAY(SELECT $(body_sql b "nextval('bench.ids')") FROM generate_series(1, 50)));" | tr '\n' ' ' >"$BENCH_WORK/batch50.sql"
{
	echo "BEGIN;"
	for _ in $(seq 50); do
		echo "SELECT webhook_inbox.intake('bench', '{}', $(body_sql p "nextval('bench.ids')"));"
	done
	echo "COMMIT;"
} >"$BENCH_WORK/intake50.sql"
# classification alone in its SQL form (read-only, no commit): its CPU cost
# per event, an upper bound of intake's, which applies the routes' paths in C
q -c "CREATE TABLE bench.payloads AS SELECT convert_from($(body_sql c n), 'UTF8')::jsonb AS p FROM generate_series(1, 50) n"
echo "SELECT count(*) FROM webhook_inbox._classify_batch(array_fill((SELECT id FROM webhook_inbox.sources
WHERE name = 'bench'), ARRAY[50]), array_fill('stripe'::text, ARRAY[50]),
array_fill('customer.subscription.updated'::text, ARRAY[50]), (SELECT array_agg(p) FROM bench.payloads));" |
	tr '\n' ' ' >"$BENCH_WORK/classify50.sql"
chmod 644 "$BENCH_WORK"/*.sql

# Where the CPU goes (clock ticks, from /proc): the machine's busy time, and
# the cluster's processes (the postmaster and its children, pid by pid, so
# that a process started meanwhile counts whole and one that ended is not
# lost before it did: every reading is taken while its processes run).
machine_busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
# cluster_ticks FILE: writes "pid ticks" of every cluster process to FILE
cluster_ticks() {
	local pm p
	pm=$(head -1 "$PGDATA_B/postmaster.pid")
	for p in $pm $(pgrep -P "$pm"); do echo "$p $(pid_ticks "$p")"; done >"$1"
}
# cluster_delta BEFORE AFTER: the ticks the cluster's processes used between them
cluster_delta() { awk 'NR == FNR { b[$1] = $2; next } { d += $2 - ($1 in b ? b[$1] : 0) } END { print d + 0 }' "$1" "$2"; }
# us_per COUNT TICKS: microseconds per item
us_per() { awk -v t="$2" -v n="$1" -v hz="$CLK_TCK" 'BEGIN { if (n == 0) print "nan"; else printf "%.1f", t / hz * 1e6 / n }'; }

# ceiling NAME SCRIPT [PGOPTIONS]: rows/s of pgbench with CEILING_CLIENTS clients
# (and the machine's busy ticks over pgbench's run in $BENCH_WORK/busy.NAME).
# Every measured phase starts after a CHECKPOINT: otherwise it inherits the
# dirty buffers of the phase before, and writes them out itself (the
# receiver after the ceilings: p99 about 50 ms instead of 13).
ceiling() {
	local tps busy0
	q -c "CHECKPOINT" >/dev/null
	busy0=$(machine_busy)
	tps=$(PGOPTIONS="${3:-}" pgbench -n -M prepared -h "$SOCK" -p "$BENCH_PGPORT" -U postgres -c "$CEILING_CLIENTS" \
		-j "$CEILING_CLIENTS" -T "$CEILING_SECONDS" -f "$BENCH_WORK/$2" bench 2>&1 |
		sed -n 's/^tps = \([0-9.]*\) .*/\1/p')
	echo $(( $(machine_busy) - busy0 )) >"$BENCH_WORK/busy.$1"
	awk -v t="${tps:-0}" 'BEGIN { printf "%.0f", t * 50 }'
}
raw1=$(ceiling raw raw50.sql)
# the machine's busy time over it (pgbench and the cluster)
raw_busy=$(cat "$BENCH_WORK/busy.raw")
echo "  raw set-based insert: $raw1 rows/s" >&2
batch1=$(ceiling batch batch50.sql)
echo "  intake_batch(): $batch1 rows/s" >&2
# the same without waiting for the WAL flush: the CPU cost alone (the
# machine's disk is shared, and with it the flush latency)
rawcpu=$(ceiling raw raw50.sql "-c synchronous_commit=off")
batchcpu=$(ceiling batch batch50.sql "-c synchronous_commit=off")
echo "  synchronous_commit off: raw $rawcpu, intake_batch() $batchcpu rows/s" >&2
percall=$(ceiling percall intake50.sql)
echo "  intake() x 50: $percall rows/s" >&2
# one generic plan, as a statement that inlines it is planned in intake
classify=$(ceiling classify classify50.sql "-c plan_cache_mode=force_generic_plan")
echo "  classification alone: $classify rows/s" >&2
q -c "VACUUM ANALYZE webhook_inbox.inbox" -c "VACUUM ANALYZE webhook_inbox.deliveries" >/dev/null

add_result ceiling "intake() x50/txn (pgbench -c $CEILING_CLIENTS)" "$percall" "rows/s" \
	"raw insert (before)" "$raw1" "-" "-"
add_result ceiling "_classify_batch() alone 50/call (read-only)" "$classify" "rows/s" "-" "-" "-" "-"
add_result ceiling "raw INSERT (synchronous_commit off)" "$rawcpu" "rows/s" "-" "-" "-" "-"
add_result ceiling "intake_batch() (synchronous_commit off)" "$batchcpu" "rows/s" \
	"raw insert (sync off)" "$rawcpu" "-" "-"
add_result ceiling "  ratio to raw (sync off)" "$(fdiv "$batchcpu" "$rawcpu")" "x" "-" "-" "-" "-"
ceiling=$batch1

# ---- the receiver under wrk ----
# Enough unique deliveries for 3x the intake_batch ceiling over the run
# (the receiver may batch more per commit than pgbench does), up to
# 800,000 (about 1 GB in wrk; 400,000 wrapped at 40,000 deliveries/s).
count=$(awk -v c="$ceiling" -v s="$RECEIVER_SECONDS" 'BEGIN { n = int(c * s * 3); if (n < 60000) n = 60000; if (n > 800000) n = 800000; print n }')
"$BENCH_DIR/gen_requests.pl" "$BENCH_DIR/body_template.json" "$count" "$WRK_THREADS" \
	"$BENCH_WORK/req" "$SECRET" w

# shellcheck disable=SC2086
webhook-receiver --db "$CONNINFO" --listen "127.0.0.1:$RPORT" --admin-listen "127.0.0.1:$APORT" --log-level warning \
	${RECEIVER_ARGS:-} >"$BENCH_WORK/receiver.log" 2>&1 &
rpid=$!
trap 'kill $rpid 2>/dev/null || true' EXIT
for _ in $(seq 100); do
	curl -sf "http://127.0.0.1:$APORT/readyz" >/dev/null 2>&1 && break
	sleep 0.1
done
curl -sf "http://127.0.0.1:$APORT/readyz" >/dev/null || { echo "receiver not ready" >&2; cat "$BENCH_WORK/receiver.log" >&2; exit 1; }

counts="SELECT count(*) FILTER (WHERE d.outcome = 'new') || ' ' || count(*) FILTER (WHERE d.outcome <> 'new')
          FROM webhook_inbox.deliveries d JOIN webhook_inbox.sources s ON s.id = d.source_id WHERE s.name = 'bench'"
read -r new0 other0 <<<"$(q -c "$counts")"
q -c "CHECKPOINT" >/dev/null
rss_idle=$(awk '/^VmRSS/ { print $2 }' "/proc/$rpid/status")
cluster_ticks "$BENCH_WORK/ticks.0"
rcv_t0=$(pid_ticks "$rpid")
wrk -t "$WRK_THREADS" -c "$WRK_CONNECTIONS" -d "${RECEIVER_SECONDS}s" --timeout 10s \
	-s "$BENCH_DIR/wrk_replay.lua" "http://127.0.0.1:$RPORT" -- "$BENCH_WORK/req" bench \
	>"$BENCH_WORK/wrk.out" 2>&1 || true
cluster_ticks "$BENCH_WORK/ticks.1"
rcv_ticks=$(( $(pid_ticks "$rpid") - rcv_t0 ))
db_ticks=$(cluster_delta "$BENCH_WORK/ticks.0" "$BENCH_WORK/ticks.1")
read -r new1 other1 <<<"$(q -c "$counts")"

# ---- the same receiver at a fixed rate: FIXED_SHARE of what wrk measured ----
res=$(grep '^RESULT' "$BENCH_WORK/wrk.out" || { cat "$BENCH_WORK/wrk.out" >&2; exit 1; })
val() { echo "$res" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
capacity=$(awk -v n="$(( $(val requests) - $(val status_errors) ))" -v d="$(val duration_us)" 'BEGIN { printf "%.0f", n / (d / 1e6) }')
fixed_rate=$(awk -v c="$capacity" -v s="$FIXED_SHARE" 'BEGIN { r = int(c * s); print (r < 1 ? 1 : r) }')
cc -O2 -o "$BENCH_WORK/openloop" "$BENCH_DIR/openloop.c"
"$BENCH_DIR/gen_requests.pl" "$BENCH_DIR/body_template.json" \
	"$(awk -v r="$fixed_rate" -v s="$FIXED_SECONDS" 'BEGIN { print int(r * s) + 100 }')" 1 "$BENCH_WORK/fixed" "$SECRET" f
q -c "CHECKPOINT" >/dev/null
"$BENCH_WORK/openloop" 127.0.0.1 "$RPORT" "$fixed_rate" "$FIXED_SECONDS" "$WRK_CONNECTIONS" bench \
	"$BENCH_WORK/fixed.0" >"$BENCH_WORK/openloop.out" 2>&1 || true
hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$rpid/status")
curl -sf "http://127.0.0.1:$APORT/metrics" >"$BENCH_WORK/receiver-metrics.txt" || true
kill "$rpid"; wait "$rpid" 2>/dev/null || true
trap - EXIT

# The ceilings again: the machine is shared, so the reference is the
# better of the samples before and after the receiver.
raw2=$(ceiling raw raw50.sql)
batch2=$(ceiling batch batch50.sql)
echo "  after the receiver: raw $raw2, intake_batch() $batch2 rows/s" >&2
raw=$(( raw1 > raw2 ? raw1 : raw2 ))
batch=$(( batch1 > batch2 ? batch1 : batch2 ))
add_result ceiling "raw INSERT 50 bytea (pgbench -c $CEILING_CLIENTS)" "$raw" "rows/s" \
	"samples before / after" "$raw1 / $raw2" "-" "-"
add_result ceiling "intake_batch() 50/call (pgbench -c $CEILING_CLIENTS)" "$batch" "rows/s" \
	"samples before / after" "$batch1 / $batch2" "-" "-"
add_result ceiling "  ratio to raw" "$(fdiv "$batch" "$raw")" "x" "-" "-" "-" "-"

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
ratio=$(fdiv "$rate" "$raw")
echo "  receiver: $ok x 2xx of $requests in $(fdiv "$dur" 1000000) s, $newrows new rows, $notnew not new, non-2xx $bad, socket errors $sockerr, wraps $(val wraps), idle RSS $((rss_idle / 1024)) MB" >&2

add_result receiver "accepted deliveries/s (wrk -c $WRK_CONNECTIONS)" "$rate" "req/s" \
	"raw insert" "$raw" ">= 0.75 x raw" "$(check "$ratio" '>=' 0.75)"
add_result receiver "  ratio to raw" "$ratio" "x" "-" "-" ">= 0.75 (mean of 5)" "$(check "$ratio" '>=' 0.75)"
add_result receiver "  ratio to intake_batch()" "$(fdiv "$rate" "$batch")" "x" "-" "-" "-" "-"
add_result receiver "latency p50" "$p50" "ms" "-" "-" "-" "-"
add_result receiver "latency p99" "$p99" "ms" "-" "-" "<= 10 ms" "$(check "$p99" '<=' 10)"
# the CPU budget: what a delivery costs the receiver and the database under
# wrk, against what a raw row costs the whole machine (pgbench included);
# wrk's own share is not counted (its start reads the requests on a core)
raw_rows=$(awk -v r="$raw1" -v s="$CEILING_SECONDS" 'BEGIN { printf "%.0f", r * s }')
add_result receiver "CPU per delivery: receiver process" "$(us_per "$newrows" "$rcv_ticks")" "us" "-" "-" "-" "-"
add_result receiver "CPU per delivery: database (every process)" "$(us_per "$newrows" "$db_ticks")" "us" \
	"raw row: machine (pgbench + db)" "$(us_per "$raw_rows" "$raw_busy")" "-" "-"
add_result receiver "peak RSS (VmHWM)" "$rss_mb" "MB" "-" "-" "<= 64 MB" "$(check "$rss_mb" '<=' 64)"
# wrk does not count the answers in flight when it stops, so new rows may
# exceed the 2xx count by up to the connection count; none may be a duplicate.
add_result receiver "non-new outcomes + errors (all unique)" "$((notnew + bad + sockerr))" "count" "-" "-" "= 0" \
	"$( [ $((notnew + bad + sockerr)) -eq 0 ] && echo yes || echo no)"

# the fixed-rate run: its p99 at FIXED_SHARE of the capacity above
fres=$(grep '^RESULT' "$BENCH_WORK/openloop.out" || { cat "$BENCH_WORK/openloop.out" >&2; exit 1; })
fval() { echo "$fres" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
fbad=$(( $(fval non2xx) + $(fval errors) + $(fval unsent) + $(fval unanswered) ))
fp50=$(awk -v u="$(fval p50_us)" 'BEGIN { printf "%.2f", u / 1000 }')
fp99=$(awk -v u="$(fval p99_us)" 'BEGIN { printf "%.2f", u / 1000 }')
fmax=$(awk -v u="$(fval max_us)" 'BEGIN { printf "%.2f", u / 1000 }')
echo "  fixed rate $fixed_rate/s (${FIXED_SHARE} x $capacity): $(fval ok) x 2xx of $(fval offered) offered, non-2xx $(fval non2xx), errors $(fval errors), unsent $(fval unsent), p50 $fp50 ms, p99 $fp99 ms, max $fmax ms, queue up to $(fval max_queue)" >&2
add_result receiver "fixed rate offered (openloop -c $WRK_CONNECTIONS)" "$fixed_rate" "req/s" \
	"capacity (wrk)" "$capacity" "${FIXED_SHARE} x capacity" "-"
add_result receiver "  fixed rate: latency p50" "$fp50" "ms" "-" "-" "-" "-"
add_result receiver "  fixed rate: latency p99" "$fp99" "ms" "-" "-" "<= 5 ms" "$(check "$fp99" '<=' 5)"
add_result receiver "  fixed rate: not answered 2xx" "$fbad" "count" "-" "-" "= 0" \
	"$( [ "$fbad" -eq 0 ] && echo yes || echo no)"
