# Shared by the bench scripts: a private cluster of pg_config's PostgreSQL
# (PG_CONFIG's, another major's for bench/majors.sh) with the extension
# preloaded, the results table, and small helpers.  Sourced, not run.
# Everything listens on loopback or a Unix socket only.

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$BENCH_DIR/.." && pwd)"
. "$ROOT/scripts/common.sh"

CORES="$(nproc)"
BENCH_PGPORT="${BENCH_PGPORT:-5499}"
RESULTS_DIR="${RESULTS_DIR:-$BENCH_DIR/results}"
mkdir -p "$RESULTS_DIR"

# One work directory per run, owned by the cluster's user.
if [ -z "${BENCH_WORK:-}" ]; then
	BENCH_WORK="$(mktemp -d /tmp/webhook_inbox-bench.XXXXXX)"
	export BENCH_WORK
fi
[ "$(id -u)" -eq 0 ] && chown "$RUN_USER" "$BENCH_WORK"
chmod 755 "$BENCH_WORK"
PGDATA_B="$BENCH_WORK/data"
SOCK="$BENCH_WORK"
CONNINFO="host=$SOCK port=$BENCH_PGPORT dbname=bench user=postgres"

# psql against the bench database: quiet, unaligned, stop on error.
q() { psql -X -q -At -v ON_ERROR_STOP=1 -h "$SOCK" -p "$BENCH_PGPORT" -U postgres -d bench "$@"; }

now_s() { date +%s.%N; }
fdiv() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "nan"; else printf "%.3f", a / b }'; }
# pid_ticks PID: the CPU (user + system, /proc/PID/stat) the process used so
# far, in clock ticks (CLK_TCK a second); 0 once it is gone
CLK_TCK=$(getconf CLK_TCK)
pid_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }

# cluster_start: a fresh cluster (initdb) with the library preloaded and the
# worker configured but disabled; bench scripts turn it on when they measure
# it.  Durability settings are left at their defaults (fsync and
# synchronous_commit on): the receiver's promise is a 2xx after a durable
# COMMIT, so the figures include it.
cluster_start() {
	cluster_stop
	rm -rf "$PGDATA_B"
	as_user initdb -D "$PGDATA_B" -A trust -U postgres >/dev/null
	cat >>"$PGDATA_B/postgresql.conf" <<CONF
port = $BENCH_PGPORT
listen_addresses = ''
unix_socket_directories = '$SOCK'
max_connections = 100
shared_buffers = 256MB
wal_buffers = 16MB
max_wal_size = 4GB
checkpoint_timeout = 30min
shared_preload_libraries = 'webhook_inbox'
webhook_inbox.database = 'bench'
webhook_inbox.enabled = off
webhook_inbox.sweep_interval = 0
webhook_inbox.full_sweep_interval = 0
webhook_inbox.naptime = 1000
log_min_messages = warning
CONF
	as_user pg_ctl -D "$PGDATA_B" -l "$BENCH_WORK/postgres.log" -w start >/dev/null
	psql -X -q -h "$SOCK" -p "$BENCH_PGPORT" -U postgres -d postgres -c "CREATE DATABASE bench" >/dev/null
	q -c "CREATE EXTENSION webhook_inbox" >/dev/null
	q -f "$BENCH_DIR/sql/bench_schema.sql" >/dev/null
}

# cluster_resume: starts the cluster cluster_start made, as it was left
cluster_resume() {
	as_user pg_ctl -D "$PGDATA_B" -l "$BENCH_WORK/postgres.log" -w start >/dev/null
}

cluster_stop() {
	if [ -f "$PGDATA_B/postmaster.pid" ]; then
		as_user pg_ctl -D "$PGDATA_B" -m fast -w stop >/dev/null 2>&1 || true
	fi
}

# worker_enable on|off: flip the background worker (a SIGHUP setting).
worker_enable() {
	q -c "ALTER SYSTEM SET webhook_inbox.enabled = $1" -c "SELECT pg_reload_conf()" >/dev/null
}

# load STRATEGY SOURCE COUNT: pending events for one drain, in one
# transaction, through intake() (so they are exactly what the receiver
# would store).  Fetch events each name their own simulator subscription,
# the first COUNT of them (the SQL-alone drain makes no request, so it may
# reuse them); the burst uses the ones after.
load() {
	local n="$3"
	case "$1" in
	occurrence)
		q -c "SELECT count(bench.stripe('$2', bench.occurrence_body(nextval('bench.ids'))))
		      FROM generate_series(1, $n)" >/dev/null ;;
	machine)
		q -c "SELECT count(bench.stripe('$2', bench.machine_body(p, k)))
		      FROM (SELECT nextval('bench.ids') AS p FROM generate_series(1, $n / 4)) g,
		           generate_series(0, 3) k" >/dev/null ;;
	version)
		q -c "SELECT count(bench.version_intake(o, k))
		      FROM (SELECT nextval('bench.ids') AS o FROM generate_series(1, $n / 2)) g,
		           generate_series(1, 2) k" >/dev/null ;;
	fetch)
		q -c "SELECT count(bench.stripe('$2', bench.fetch_body(nextval('bench.ids'), s.id)))
		      FROM bench.subs s WHERE s.i <= $n" >/dev/null ;;
	esac
	q -c "ANALYZE webhook_inbox.inbox" >/dev/null
}

# Results: one CSV per run, and the table printed at the end.
#   add_result SECTION METRIC VALUE UNIT REFERENCE_NAME REFERENCE_VALUE TARGET MET
RESULTS_CSV="${RESULTS_CSV:-$RESULTS_DIR/bench-$(date -u +%Y%m%dT%H%M%SZ).csv}"
export RESULTS_CSV
add_result() {
	if [ ! -f "$RESULTS_CSV" ]; then
		echo "cores,section,metric,value,unit,reference,reference_value,target,met" >"$RESULTS_CSV"
	fi
	# one field per column: a comma inside a name becomes a semicolon
	printf '%s,%s,%s,%s,%s,%s,%s,%s,%s\n' "$CORES" "${1//,/;}" "${2//,/;}" "${3//,/;}" "${4//,/;}" \
		"${5//,/;}" "${6//,/;}" "${7//,/;}" "${8//,/;}" >>"$RESULTS_CSV"
}

# check VALUE OP LIMIT → yes | no | n/a
check() {
	awk -v v="$1" -v op="$2" -v l="$3" 'BEGIN {
		if (v == "" || v == "nan" || v == "-") { print "n/a"; exit }
		if (op == ">=") print (v + 0 >= l + 0) ? "yes" : "no";
		else print (v + 0 <= l + 0) ? "yes" : "no" }'
}

print_table() {
	echo
	echo "webhook_inbox benchmarks — $CORES cores, $(date -u +%Y-%m-%dT%H:%M:%SZ), results in $RESULTS_CSV"
	awk -F, 'NR == 1 { next }
		{ printf "%-9s %-34s %12s %-7s | %-30s %12s | %-16s %s\n", $2, $3, $4, $5, $6, $7, $8, $9 }
		BEGIN { printf "%-9s %-34s %12s %-7s | %-30s %12s | %-16s %s\n", "section", "metric", "value", "unit",
				"reference (same run)", "ref value", "target", "met"
			printf "%s\n", "-------------------------------------------------------------------------------------------------------------------------------------" }' \
		"$RESULTS_CSV"
}

# A free TCP port on loopback (other engineers' tests may hold fixed ones).
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# sim_start OBJECTS: a webhook-sim serve with OBJECTS objects (their truth
# applied before it listens; no delivery), the Stripe source "fet" reading
# from it, and its live subscriptions in bench.subs (i, id).  Sets SIM (its
# base URL) and SIM_PID.
sim_start() {
	webhook-sim serve --listen 127.0.0.1:0 --seed 7 --objects "$1" --events "$1" \
		--stripe fet:whsec_bench >"$BENCH_WORK/sim.out" 2>&1 &
	SIM_PID=$!
	for _ in $(seq 300); do grep -q '^listening on' "$BENCH_WORK/sim.out" && break; sleep 0.1; done
	SIM="http://$(sed -n 's/^listening on //p' "$BENCH_WORK/sim.out")"
	[ "$SIM" != "http://" ] || { echo "webhook-sim did not start" >&2; cat "$BENCH_WORK/sim.out" >&2; return 1; }
	# The pacing raised far past what the drains ask: the worker's own rate is
	# measured, not Stripe's sandbox limit of 25 requests/s (bench/tenants.sh
	# measures the pacing against a simulator that enforces it).
	q -c "SELECT webhook_inbox.create_source(name => 'fet', kind => 'stripe', secret => 'whsec_bench', api_base => '$SIM',
	      settings => '{\"rate_limit\": 100000, \"endpoint_rate_limit\": 100000}')" >/dev/null
	q -c "CREATE TABLE IF NOT EXISTS bench.subs (i serial PRIMARY KEY, id text NOT NULL)" >/dev/null
	curl -sf "$SIM/_sim/truth" | python3 -c '
import json, sys
for o in json.load(sys.stdin)["objects"]:
    if o["type"] == "subscription" and not o["deleted"]:
        print(o["id"])' | q -c "\\copy bench.subs (id) FROM STDIN"
}
