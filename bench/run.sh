#!/usr/bin/env bash
# Runs every benchmark on one fresh private cluster and prints the table
# (also written as CSV under bench/results/).  Called by scripts/bench.sh
# (make bench) after the build; can be run on its own once installed.
#
#   bench/run.sh [receiver] [worker] [tenants] [history] [retention] [instructions]
#   (default: the first three; worker runs history.sh at its end)
#   BENCH_PLOTS=DIR  where the SVG charts go (default: next to the CSV)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(receiver worker tenants)

cleanup() {
	cluster_stop
	[ -n "${KEEP_BENCH_WORK:-}" ] || rm -rf "$BENCH_WORK"
}
trap cleanup EXIT

echo "bench: $CORES cores, work directory $BENCH_WORK" >&2
# A run writes up to about 4.5 GB for the receiver part and 10.5 GB with
# the worker's history (5,000,000 events, the WAL up to max_wal_size): a
# disk that fills up part-way stalls every write and the figures with it,
# so a run starts only with that much room (BENCH_MIN_FREE_MB=0: no check).
# The tenants part alone (10,000 accounts' sweeps) writes under 1 GB.
need_mb=1000
for p in "${parts[@]}"; do [ "$p" = receiver ] && need_mb=5000; done
# history: about 1.4 KB per event kept (HISTORY_EVENTS, 5,000,000: 12 GB
# with the worker part); HISTORY_EVENTS=0 leaves it out, and with it most of
# what the worker part writes.
for p in "${parts[@]}"; do
	case "$p" in worker | history) need_mb=$((5000 + ${HISTORY_EVENTS:-5000000} / 714)) ;; esac
done
need_mb="${BENCH_MIN_FREE_MB:-$need_mb}"
free_mb=$(df -Pm "$BENCH_WORK" | awk 'NR == 2 { print $4 }')
if [ "$free_mb" -lt "$need_mb" ]; then
	echo "bench: $free_mb MB free under $BENCH_WORK; this run needs $need_mb MB (BENCH_MIN_FREE_MB)" >&2
	exit 1
fi
cluster_start
status=0
for p in "${parts[@]}"; do
	echo "bench: $p" >&2
	"$BENCH_DIR/$p.sh" || { echo "bench: $p failed (exit $?)" >&2; status=1; }
done
print_table
# the figures as SVG charts beside their references (docs/benchmarks.md
# embeds the ones in docs/img: make bench BENCH_PLOTS=docs/img)
if command -v gnuplot >/dev/null; then
	"$BENCH_DIR/plot.sh" "$RESULTS_CSV" "${BENCH_PLOTS:-${RESULTS_CSV%.csv}}" >&2 || status=1
fi
exit $status
