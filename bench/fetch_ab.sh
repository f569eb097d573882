#!/usr/bin/env bash
# fetch_ab.sh OLD_BINDIR NEW_BINDIR [PAIRS]
#
# The fetch drain of two builds of the extension, measured alternately on the
# same machine: each pass starts a fresh cluster from the PostgreSQL binaries
# in BINDIR (an installation holding that build, e.g. a relocated copy of
# /usr/lib/postgresql/15 it was installed into), stores FETCH_EVENTS (8000)
# customer.subscription.updated events for distinct subscriptions of a
# webhook-sim serve, turns the worker on and times the drain (events / (last
# - first processed_at)).  Prints one line per pair and the mean ratio: the
# same-conditions comparison of a change to the fetch path against the build
# before it.  Needs webhook-sim on PATH (tools/) and the bench's own tools.
set -euo pipefail
BENCH_DIR="$(cd "$(dirname "$0")" && pwd)"
OLD_BIN="${1:?usage: fetch_ab.sh OLD_BINDIR NEW_BINDIR [PAIRS]}"
NEW_BIN="${2:?usage: fetch_ab.sh OLD_BINDIR NEW_BINDIR [PAIRS]}"
PAIRS="${3:-3}"
FETCH_EVENTS="${FETCH_EVENTS:-8000}"
command -v webhook-sim >/dev/null || { echo "webhook-sim is not on PATH" >&2; exit 1; }
port="${BENCH_PGPORT:-}"
. "$BENCH_DIR/lib.sh"
BENCH_PGPORT="${port:-$(free_port)}"

one() {
	local t0
	PATH="$1:$PATH"
	cluster_start
	worker_enable off
	sim_start $((FETCH_EVENTS * 2 + 2000))
	q -c "SELECT count(bench.stripe('fet', bench.fetch_body(nextval('bench.ids'), s.id)))
	      FROM bench.subs s WHERE s.i <= $FETCH_EVENTS" >/dev/null
	q -c "ANALYZE webhook_inbox.inbox" -c "CHECKPOINT" >/dev/null
	t0=$(q -c "SELECT clock_timestamp()")
	worker_enable on
	while [ "$(q -c "SELECT count(*) FROM webhook_inbox.inbox WHERE status IN ('pending', 'retry', 'processing')")" != 0 ]; do
		sleep 0.2
	done
	worker_enable off
	q -c "SELECT round(count(*) / extract(epoch FROM max(processed_at) - min(processed_at)))
	      FROM webhook_inbox.inbox WHERE processed_at >= '$t0'"
	kill "$SIM_PID"
	cluster_stop
}

sum_old=0
sum_new=0
for k in $(seq "$PAIRS"); do
	o=$(one "$OLD_BIN")
	n=$(one "$NEW_BIN")
	echo "pair $k: old $o ev/s, new $n ev/s, $(awk -v a="$n" -v b="$o" 'BEGIN { printf "%.2f", a / b }') x"
	sum_old=$((sum_old + o))
	sum_new=$((sum_new + n))
done
rm -rf "$BENCH_WORK"
echo "mean: old $((sum_old / PAIRS)) ev/s, new $((sum_new / PAIRS)) ev/s, $(awk -v a="$sum_new" -v b="$sum_old" 'BEGIN { printf "%.2f", a / b }') x"
