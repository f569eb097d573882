#!/usr/bin/env bash
# bench/majors.sh: the receiver and worker benchmarks on several PostgreSQL
# majors in one run, and one table of each major's ratios to the references
# measured beside it (make bench-majors).
#
#   bench/majors.sh [MAJOR | PATH/TO/pg_config ...]
#       default: $BENCH_MAJORS, else pg_config's major, 17 and 18
#
# For each server, in that order: pg_config's own for its major, a path as
# given, else what scripts/pg-build.sh MAJOR prints.  A build in one prefix
# (pg-build.sh's cache) is copied into this run's directory and only the
# copy is installed into (scripts/private-pg.sh); a copy of the tree is built
# and installed into it, with the receiver and the simulator under that
# copy; PgQ, the worker's reference, is built into it from BENCH_PGQ_SRC (a
# PgQ source tree) when the server has none, and without PgQ the worker part
# of that major is left out with one line.  Then bench/run.sh runs
# BENCH_MAJORS_PARTS (default "receiver worker") on a fresh cluster of that
# server, with HISTORY_EVENTS=0 unless set (the 5,000,000 events of history
# write 10 GB a major); every other knob of bench/run.sh applies as set.
#
# Each major's CSV and charts go to bench/results/majors-TIME/ (RESULTS_DIR),
# the table to majors.csv there.  The table's last rows compare intake_batch()
# over the raw insert, the ratio of the COPY-style write (extension/bulk.c),
# with the first major's: each other major within 15 % of it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
. scripts/private-pg.sh

servers=("$@")
if [ ${#servers[@]} -eq 0 ]; then
	first="$("${PG_CONFIG:-pg_config}" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')"
	read -r -a servers <<<"${BENCH_MAJORS:-$first 17 18}"
fi
PARTS="${BENCH_MAJORS_PARTS:-receiver worker}"
export HISTORY_EVENTS="${HISTORY_EVENTS:-0}"
OUT="${RESULTS_DIR:-$ROOT/bench/results}/majors-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/webhook_inbox-majors-bench.XXXXXX")"
chmod 755 "$WORK"				# the clusters run as another user
trap 'rm -rf "$WORK"' EXIT

# config_of SERVER: the pg_config of a major or of a path
config_of() {
	local own
	case "$1" in
		*/*) echo "$1" ;;
		*)
			own="${PG_CONFIG:-pg_config}"
			if [ "$("$own" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')" = "$1" ]; then
				command -v "$own"
			else
				scripts/pg-build.sh "$1"
			fi ;;
	esac
}

# pgq_into PG_CONFIG: PgQ installed into that server unless it has it
# (Debian's postgresql-15-pgq3 for 15); built from BENCH_PGQ_SRC otherwise.
pgq_into() {
	[ -f "$("$1" --sharedir)/extension/pgq.control" ] && return 0
	[ -n "${BENCH_PGQ_SRC:-}" ] && [ -f "$BENCH_PGQ_SRC/pgq.control" ] || return 1
	rm -rf "$2" && cp -a "$BENCH_PGQ_SRC" "$2" || return 1
	(cd "$2" && { make -s clean PG_CONFIG="$1" || true; } && make -s PG_CONFIG="$1" && make -s install PG_CONFIG="$1") >"$2.log" 2>&1
}

declare -a labels csvs
for s in "${servers[@]}"; do
	if ! config="$(config_of "$s")"; then
		echo "bench-majors: PostgreSQL $s could not be obtained (scripts/pg-build.sh $s says why above): left out" >&2
		continue
	fi
	version="$("$config" --version | awk '{ print $2 }')"
	major="${version%%.*}"
	dir="$WORK/pg$major"
	config="$(wi_private_pg "$config" "$dir")"
	echo "bench-majors: PostgreSQL $version ($config)" >&2
	wi_copy_tree "$dir/tree"
	if ! wi_build_install "$dir/tree" "$config"; then
		echo "bench-majors: the extension did not build or install on $version: left out" >&2
		continue
	fi
	parts="$PARTS"
	if [[ " $parts " == *" worker "* ]] && ! pgq_into "$config" "$dir/pgq"; then
		echo "bench-majors: no PgQ for PostgreSQL $version (BENCH_PGQ_SRC names a PgQ source tree): its worker part is left out" >&2
		parts="$(echo " $parts " | sed 's/ worker / /')"
	fi
	csv="$OUT/pg$major.csv"
	# shellcheck disable=SC2086
	PG_CONFIG="$config" PATH="$dir/tree/prefix/bin:$PATH" RESULTS_CSV="$csv" BENCH_PLOTS="$OUT/pg$major" \
		"$dir/tree/bench/run.sh" $parts || echo "bench-majors: a part failed on $version (its figures are missing)" >&2
	labels+=("$version")
	csvs+=("$csv")
	# the copy of this server and its cluster are not needed any more
	rm -rf "$dir"
done
[ ${#csvs[@]} -gt 0 ] || { echo "bench-majors: no major was measured" >&2; exit 1; }

# fig CSV SECTION METRIC: the value of that section's row of that metric
# ("name*": the first whose metric begins with name); "-" when there is none
fig() {
	[ -f "$1" ] || { echo -; return; }
	awk -F, -v s="$2" -v m="$3" '
		BEGIN { prefix = sub(/\*$/, "", m) }
		$2 == s && (prefix ? index($3, m) == 1 : $3 == m) { v = $4; exit }
		END { print (v == "" ? "-" : v) }' "$1"
}
each() {
	local c
	for c in "${csvs[@]}"; do fig "$c" "$1" "$2"; done
}
table="$OUT/majors.csv"
row() { local IFS=,; echo "$*" >>"$table"; }
row metric target "${labels[@]}"
fixed() { local name="$1" target="$2" sec="$3" metric="$4"; mapfile -t v < <(each "$sec" "$metric"); row "$name" "$target" "${v[@]}"; }
fixed "raw insert ceiling (rows/s)" - ceiling "raw INSERT 50 bytea*"
fixed "intake_batch() ceiling (rows/s)" - ceiling "intake_batch() 50/call*"
fixed "intake_batch() / raw insert" - ceiling "  ratio to raw"
fixed "intake_batch() / raw (synchronous_commit off)" - ceiling "  ratio to raw (sync off)"
fixed "receiver / raw insert (wrk -c 64)" ">= 0.75" receiver "  ratio to raw"
fixed "receiver p99 (ms)" "<= 10" receiver "latency p99"
fixed "receiver p99 at 80 % fixed rate (ms)" "<= 5" receiver "  fixed rate: latency p99"
fixed "drain occurrence / PgQ" ">= 0.5" worker "  occurrence / PgQ"
fixed "drain machine / PgQ" ">= 0.3" worker "  machine / PgQ"
fixed "drain version / PgQ" ">= 0.3" worker "  version / PgQ"
fixed "drain fetch / per-answer saves" ">= 2" worker "  fetch / answer-by-answer saves"
fixed "intake commit -> done p99 (ms)" "<= 50" latency "intake commit -> done p99 (100 ev/s)"
# the fast path's ratio on each major against the first major's
mapfile -t intake < <(each ceiling "  ratio to raw")
rel=() within=()
for v in "${intake[@]}"; do
	r="$(awk -v a="$v" -v b="${intake[0]}" 'BEGIN { if (a == "-" || b == "-" || a == "nan" || b == "nan" || b == 0) print "-"; else printf "%.3f", a / b }')"
	rel+=("$r")
	within+=("$(awk -v r="$r" 'BEGIN { if (r == "-") print "-"; else print (r >= 0.85 && r <= 1.15) ? "yes" : "no" }')")
done
row "intake ratio over the first major's" "0.85-1.15" "${rel[@]}"
row "  within 15 % of the first major's" - "${within[@]}"

echo
echo "webhook_inbox on PostgreSQL majors — $(nproc) cores, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown), results in $OUT"
awk -F, '{ printf "%-46s %-10s", $1, $2; for (i = 3; i <= NF; i++) printf " %10s", $i; printf "\n" }
	NR == 1 { s = sprintf("%-46s %-10s", "", ""); for (i = 3; i <= NF; i++) s = s sprintf(" %10s", ""); gsub(/./, "-", s); print s }' "$table"
