#!/usr/bin/env bash
# Tenant figures: the background worker's sweep round over TENANT_ACCOUNTS
# (10,000) Stripe Connect accounts with nothing to repair, a full round and
# an incremental one, against a simulator that enforces Stripe's documented
# rate limits (https://docs.stripe.com/rate-limits: 25 requests/s for a
# sandbox key whatever the Stripe-Account, 25/s per endpoint; --rate-limit
# answers 429 past them): the round's time beside the time those limits
# allow for its requests, the requests answered 429 (target 0), the passes
# complete, and the worker's own CPU per account per round.
#
# A webhook-sim serve plays the platform (--connect-accounts: each account's
# objects, lists and events only under its Stripe-Account) and counts the
# requests per Stripe-Account it was sent.  The mirror is filled first by
# one sweep_now() per account against a second simulator of the same seed
# and clock without limits (and the source's pacing raised for it), so that
# the measured rounds find it equal to the truth; the rounds run at the
# source's default pacing.
#
# Appends rows to $RESULTS_CSV (see lib.sh).  Environment: TENANT_ACCOUNTS
# (10000), TENANT_OBJECTS (1 subscription per account), TENANT_ROUND_TIMEOUT
# (1.5 x what the limits allow, + 60 s).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

ACCOUNTS="${TENANT_ACCOUNTS:-10000}"
PER_ACCOUNT="${TENANT_OBJECTS:-1}"
SANDBOX_LIMIT=25
ROUND_TIMEOUT="${TENANT_ROUND_TIMEOUT:-$(( ACCOUNTS * 3 / (2 * SANDBOX_LIMIT) + 60 ))}"
EPOCH=$(( $(date +%s) - 2 * 86400 ))

[ -f "$PGDATA_B/postmaster.pid" ] || cluster_start
worker_enable off

TSIM_PID=""
others=""
cleanup() {
	[ -n "$TSIM_PID" ] && kill "$TSIM_PID" 2>/dev/null || true
	worker_enable off 2>/dev/null || true
	q -c "ALTER SYSTEM RESET webhook_inbox.sweep_interval" -c "ALTER SYSTEM RESET webhook_inbox.full_sweep_interval" \
	  -c "SELECT pg_reload_conf()" >/dev/null 2>&1 || true
	[ -n "$others" ] && q -c "UPDATE webhook_inbox.sources SET enabled = true WHERE id IN ($others)" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# ---- the platform: ACCOUNTS connected accounts, PER_ACCOUNT subscriptions each ----
# The scenario's clock starts two days ago (its events take 0 to 2 s each):
# every change happened before the mirror was filled, so the incremental
# round, like the full one, finds nothing to do (with the clock at now, the
# events would land after the checkpoint, never delivered, and be repairs).
objects=$((ACCOUNTS * PER_ACCOUNT))
# start_tsim NAME [FLAGS]: the platform's simulator (the same seed and clock each time)
start_tsim() {
	local name="$1"
	shift
	webhook-sim serve --listen 127.0.0.1:0 --seed 24 --objects "$objects" --events "$objects" \
		--epoch "$EPOCH" --types subscription --connect-accounts "$ACCOUNTS" --stripe ten:whsec_bench_tenants \
		--api-token sk_bench_tenants "$@" >"$BENCH_WORK/sim-$name.out" 2>&1 &
	TSIM_PID=$!
	for _ in $(seq 600); do grep -qs '^listening on' "$BENCH_WORK/sim-$name.out" && break; sleep 0.1; done
	TSIM="http://$(sed -n 's/^listening on //p' "$BENCH_WORK/sim-$name.out")"
	[ "$TSIM" != "http://" ] || { echo "webhook-sim did not start" >&2; cat "$BENCH_WORK/sim-$name.out" >&2; exit 1; }
}
start_tsim fill
# the fill is not what is measured: the source's pacing raised for it, the simulator without limits
q -c "SELECT webhook_inbox.create_source(name => 'ten', kind => 'stripe', secret => 'whsec_bench_tenants',
      api_base => '$TSIM', api_token => 'sk_bench_tenants',
      settings => '{\"connect\": true, \"rate_limit\": 5000, \"endpoint_rate_limit\": 5000}')" >/dev/null
src=$(q -c "SELECT id FROM webhook_inbox.sources WHERE name = 'ten'")
# only this source is swept in the rounds (the other parts' sources point at simulators that are gone)
others=$(q -c "SELECT string_agg(id::text, ',') FROM webhook_inbox.sources WHERE id <> $src AND enabled")
[ -n "$others" ] && q -c "UPDATE webhook_inbox.sources SET enabled = false WHERE id IN ($others)" >/dev/null

listed=$(q -c "SELECT webhook_inbox.discover_tenants('ten')")
echo "  tenants: GET /v1/accounts listed $listed connected accounts at $TSIM" >&2
[ "$listed" -eq "$ACCOUNTS" ] || { echo "  tenants: expected $ACCOUNTS accounts" >&2; exit 1; }

# ---- the mirror, filled by one full sweep_now() per account (its own transaction each) ----
t0=$(now_s)
q -c "SELECT format('SELECT status FROM webhook_inbox.sweep_now(%L, %L, %L, %L);', 'ten', 'subscription', 'full', tenant)
      FROM webhook_inbox.tenants WHERE source_id = $src ORDER BY tenant" >"$BENCH_WORK/tenants-load.sql"
chmod 644 "$BENCH_WORK/tenants-load.sql"
q -f "$BENCH_WORK/tenants-load.sql" >/dev/null
t1=$(now_s)
read -r loaded load_failed <<<"$(q -F ' ' -c "SELECT coalesce(sum(repaired), 0), count(*) FILTER (WHERE status <> 'complete')
	FROM webhook_inbox.sweep_runs WHERE source_id = $src AND trigger = 'manual'")"
echo "  tenants: mirror filled by $ACCOUNTS sweep_now() calls in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s:" \
	"$loaded objects saved, $load_failed passes not complete" >&2
[ "$load_failed" -eq 0 ] || exit 1

# ---- the measured platform: the same scenario, Stripe's limits enforced; the source at its defaults ----
kill "$TSIM_PID" 2>/dev/null || true
wait "$TSIM_PID" 2>/dev/null || true
start_tsim limits --rate-limit
q -c "UPDATE webhook_inbox.sources SET api_base = '$TSIM', settings = settings - 'rate_limit' - 'endpoint_rate_limit'
      WHERE id = $src" >/dev/null

# round LAYER → "seconds passes repaired not_complete req_min req_avg req_max platform_requests total_requests
#                account_requests rate_limited worker_cpu_s"
# One scheduled round of the worker over every account: the passes before
# it are moved two hours back so that every account's pass of LAYER is due
# (both layers' intervals are an hour: nothing is due twice), the
# simulator's counters are reset, the worker runs until each due pass has
# finished, and the round is the span from its first pass's start to its
# last one's end.  The worker's CPU (user + system, /proc/PID/stat) is read
# before and after.
round() {
	local layer="$1" full_interval due start deadline pid cpu0 cpu1
	full_interval='1h'
	[ "$layer" = incremental ] && full_interval='0'
	q -c "ALTER SYSTEM SET webhook_inbox.sweep_interval = '1h'" \
	  -c "ALTER SYSTEM SET webhook_inbox.full_sweep_interval = '$full_interval'" -c "SELECT pg_reload_conf()" >/dev/null
	q -c "UPDATE webhook_inbox.sweep_runs SET started_at = started_at - interval '2 hours',
	      finished_at = finished_at - interval '2 hours' WHERE source_id = $src" >/dev/null
	due=$(q -c "SELECT count(*) FROM webhook_inbox._sweep_targets('1 hour', '$full_interval') t
	      WHERE t.source_id = $src AND t.layer = '$layer'")
	curl -sf -X POST "$TSIM/_sim/counters/reset" >/dev/null
	start=$(q -c "SELECT clock_timestamp()")
	worker_enable on
	pid=""
	for _ in $(seq 100); do
		pid=$(q -c "SELECT worker_pid FROM webhook_inbox.worker_stats() WHERE worker_pid > 0")
		[ -n "$pid" ] && break
		sleep 0.1
	done
	cpu0=$(pid_ticks "$pid")
	deadline=$(( $(date +%s) + ROUND_TIMEOUT ))
	while [ "$(q -c "SELECT count(*) FROM webhook_inbox.sweep_runs WHERE source_id = $src AND trigger = 'schedule'
	            AND started_at >= '$start' AND status <> 'running'")" -lt "$due" ]; do
		if [ "$(date +%s)" -ge "$deadline" ]; then
			echo "  tenants: the $layer round did not finish in $ROUND_TIMEOUT s" >&2
			break
		fi
		sleep 0.5
	done
	cpu1=$(pid_ticks "$pid")
	worker_enable off
	curl -sf "$TSIM/_sim/counters" >"$BENCH_WORK/tenants-counters-$layer.json"
	printf '%s %s %s\n' \
		"$(q -F ' ' -c "SELECT round(extract(epoch FROM max(finished_at) - min(started_at))::numeric, 3), count(*),
		      coalesce(sum(repaired), 0), count(*) FILTER (WHERE status <> 'complete')
		      FROM webhook_inbox.sweep_runs WHERE source_id = $src AND trigger = 'schedule' AND started_at >= '$start'")" \
		"$(python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))
s = c["scopes"]
acct = [n for k, n in s.items() if k.startswith("acct_")]
# the platform (no Stripe-Account): GET /v1/accounts, counted apart, and any other
others = sum(n for k, n in s.items() if not k.startswith("acct_")) + c["account_lists"]
n = int(sys.argv[2])
# an account sent nothing counts as 0: the minimum is over every account
print(min(acct) if len(acct) == n else 0, "%.2f" % (sum(acct) / n), max(acct, default=0), others, sum(acct) + others,
      sum(acct), c.get("rate_limited", -1))
' "$BENCH_WORK/tenants-counters-$layer.json" "$ACCOUNTS")" \
		"$(awk -v a="$cpu0" -v b="$cpu1" -v t="$CLK_TCK" 'BEGIN { printf "%.2f", (b - a) / t }')"
}

for layer in full incremental; do
	read -r secs passes repaired bad rmin ravg rmax plat total acctreq limited cpu <<<"$(round "$layer")"
	rps=$(fdiv "$acctreq" "$secs")
	# what Stripe's sandbox limit allows for the round's requests: one every 1/25 s
	allowed=$(awk -v n="$acctreq" -v l="$SANDBOX_LIMIT" 'BEGIN { printf "%.1f", (n - 1) / l }')
	ratio=$(fdiv "$secs" "$allowed")
	cpu_ms=$(awk -v c="$cpu" -v n="$ACCOUNTS" 'BEGIN { printf "%.2f", c * 1000 / n }')
	echo "  tenants: $layer round over $ACCOUNTS accounts: $passes passes in $secs s ($allowed s allowed by" \
		"$SANDBOX_LIMIT/s, ${ratio}x), $repaired repaired, $bad not complete, $limited answered 429;" \
		"requests per account per pass min/avg/max $rmin/$ravg/$rmax, $plat of the platform's own (GET /v1/accounts);" \
		"$total requests, $rps/s over the passes; the worker's CPU $cpu s ($cpu_ms ms per account)" >&2
	add_result tenants "$layer round over $ACCOUNTS accounts" "$secs" "s" "allowed by Stripe's sandbox limit ($SANDBOX_LIMIT/s)" \
		"$allowed" "<= 1.10 x allowed" "$(check "$ratio" '<=' 1.10)"
	add_result tenants "  passes complete" "$((passes - bad))" "passes" "accounts" "$ACCOUNTS" "= accounts" \
		"$([ "$passes" -eq "$ACCOUNTS" ] && [ "$bad" -eq 0 ] && echo yes || echo no)"
	add_result tenants "  answered 429 by the limit-enforcing simulator" "$limited" "requests" "-" "-" "<= 0" \
		"$(check "$limited" '<=' 0)"
	add_result tenants "  repaired (nothing to repair)" "$repaired" "objects" "-" "-" "<= 0" "$(check "$repaired" '<=' 0)"
	add_result tenants "  requests per account per pass" "$ravg" "req" "max; any account" "$rmax" "-" "-"
	add_result tenants "  requests/s over the round" "$rps" "req/s" "Stripe sandbox limit" "$SANDBOX_LIMIT" "<= 25" \
		"$(check "$rps" '<=' "$SANDBOX_LIMIT")"
	add_result tenants "  worker CPU per account per round" "$cpu_ms" "ms" "worker CPU over the round (s)" "$cpu" "-" "-"
done
