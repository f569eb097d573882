#!/usr/bin/env bash
# make bench: installs what is missing (the build's packages, wrk, gnuplot),
# builds, installs, and runs bench/run.sh, which prints the figures next to
# their references measured in the same run and writes them as CSV under
# bench/results/.  As root, the cluster runs as the postgres user.
# PG_CONFIG=... runs on that server (bench/majors.sh with one server);
# --majors runs bench/majors.sh (make bench-majors).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
missing=""
command -v wrk >/dev/null || missing="$missing wrk"
command -v gnuplot >/dev/null || missing="$missing gnuplot-nox"
if [ -n "$missing" ]; then
	echo "installing:$missing"
	if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=""; fi
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -qq
	# shellcheck disable=SC2086
	$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
# PgQ: the reference the worker's drains are printed against
if ! dpkg-query -W -f='${Status}' postgresql-15-pgq3 2>/dev/null | grep -q "install ok installed"; then
	echo "installing: postgresql-15-pgq3"
	if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=""; fi
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -qq
	$SUDO apt-get install -y -qq --no-install-recommends postgresql-15-pgq3 >/dev/null
fi
for tool in pgbench perl python3 curl; do
	command -v "$tool" >/dev/null || { echo "error: $tool is missing" >&2; exit 1; }
done

# make bench-majors: the receiver and worker parts on each major, one table
if [ "${1:-}" = --majors ]; then
	shift
	exec bench/majors.sh "$@"
fi
# make bench PG_CONFIG=...: every part on that server, through a private copy
# of it (a cached build is never installed into) and a copy of the tree
if [ -n "${PG_CONFIG:-}" ]; then
	HISTORY_EVENTS="${HISTORY_EVENTS:-5000000}" BENCH_MAJORS_PARTS="${*:-receiver worker tenants}" \
		exec bench/majors.sh "$PG_CONFIG"
fi
make -s all
make -s install >/dev/null
exec bench/run.sh "$@"
