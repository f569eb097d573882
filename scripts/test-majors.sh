#!/usr/bin/env bash
# scripts/test-majors.sh: the suites on the other PostgreSQL majors (make
# test runs it after its own suites; make test-matrix runs it alone).
#
# For each major of WI_PG_MAJORS (default "17 18"; the major of pg_config
# itself is skipped, make test has run everything on it), in that order:
# scripts/pg-build.sh provides the server (the distribution's, a cached
# build, or one built now); a build of its own (one prefix) is copied into
# this run's directory, so that the cache stays as built and runs beside
# each other do not share an installed extension; the tree is built against
# it in a copy and installed into it, and scripts/test.sh runs on it with
#   WI_SUITES=$WI_MATRIX_SUITES   (default "regress isolation tap")
#   PROVE_TESTS=$WI_MATRIX_TAP    (default: the TAP files named below)
# WI_PG_UPGRADE_FROM is set to the bindirs tested before it (pg_config's
# first), so regress/t/507_pg_upgrade.pl upgrades from each; the extension
# is installed into pg_config's PostgreSQL first unless make test has done
# it (WI_PG_FIRST_INSTALLED=1).
#
# A major that cannot be obtained is skipped with one line; with
# WI_PG_MAJORS_STRICT=1 (CI) it fails the run.  WI_PG_SRC_DIR names a
# directory of release tarballs (scripts/pg-build.sh).  Writes one result
# line per major to $WI_MAJORS_OUT when set.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/private-pg.sh

# Why these TAP files on the other majors: each exercises code whose
# backend APIs differ between majors, or the harness itself. The preload
# and the worker's start and signals (001, 302), the encodings (002), the
# receiver's every scheme and its batch path through intake_batch() and
# bulk.c (100, 104), sealed secrets end to end (109, 318), the worker's
# fetch, coalescing and sweeps (300, 301, 308), tenants (313), effects
# (401), the release upgrade compared by pg_dump and the pg_regress suite
# on the upgraded database (500, 501), pg_upgrade from the majors before
# (507), the extension loaded from a directory of its own with 18's
# extension_control_path (508; it skips before 18), the docs' examples
# (540).  The rest (HA with pg_auto_failover,
# which Debian packages for 15 only; the simulator's contracts; the
# benchmarks' plots; packaging) does not depend on the server's major and
# runs on the first one only.
DEFAULT_TAP="regress/t/001_preload.pl regress/t/002_encoding.pl regress/t/100_receiver_schemes.pl
regress/t/104_receiver_batch.pl regress/t/109_receiver_sealed_secrets.pl regress/t/300_worker_shuffle.pl
regress/t/301_worker_fetch.pl regress/t/302_worker_crash.pl regress/t/308_sweep_pass.pl
regress/t/313_shopify_app.pl regress/t/318_worker_sealed_token.pl regress/t/401_effects.pl
regress/t/500_release_upgrade_script.pl regress/t/501_release_upgrade.pl regress/t/507_pg_upgrade.pl
regress/t/508_extension_control_path.pl regress/t/540_docs.pl"

MAJORS="${WI_PG_MAJORS-17 18}"
SUITES="${WI_MATRIX_SUITES:-regress isolation tap}"
TAP="$(echo ${WI_MATRIX_TAP:-$DEFAULT_TAP})"
OUT="${WI_MAJORS_OUT:-/dev/null}"

first_config="${PG_CONFIG:-pg_config}"
first_major="$("$first_config" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')"
upgrade_from="$("$first_config" --bindir)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/webhook_inbox-majors.XXXXXX")"
chmod 755 "$WORK"				# the suites run as another user
failed=""

if [ "${WI_PG_FIRST_INSTALLED:-}" != 1 ] && [ -n "$MAJORS" ]; then
	wi_copy_tree "$WORK/tree-$first_major"
	wi_build_install "$WORK/tree-$first_major" "$(command -v "$first_config")" ||
		{ echo "PostgreSQL $first_major: the extension did not build or install"; exit 1; }
fi

for major in $MAJORS; do
	[ "$major" = "$first_major" ] && continue
	echo "=== PostgreSQL $major ==="
	started=$(date +%s)
	if ! config="$(scripts/pg-build.sh "$major")"; then
		if [ "${WI_PG_MAJORS_STRICT:-}" = 1 ]; then
			echo "PostgreSQL $major: could not be obtained (scripts/pg-build.sh $major)" | tee -a "$OUT"
			failed="$failed $major"
		else
			echo "PostgreSQL $major: skipped, could not be obtained (scripts/pg-build.sh $major says why above)" | tee -a "$OUT"
		fi
		continue
	fi
	# a PostgreSQL in one prefix (relocatable): this run's own copy
	config="$(wi_private_pg "$config" "$WORK/pg-$major")"
	obtained=$(($(date +%s) - started))
	# a copy of the tree without this tree's objects, built for this major
	tree="$WORK/tree-$major"
	wi_copy_tree "$tree"
	if ! wi_build_install "$tree" "$config"; then
		echo "PostgreSQL $major: the extension did not build or install" | tee -a "$OUT"
		failed="$failed $major"
		continue
	fi
	WI_SUITES="$SUITES" PROVE_TESTS="$TAP" PG_CONFIG="$config" WI_PG_MAJORS="" \
		WI_PG_UPGRADE_FROM="$upgrade_from" "$tree/scripts/test.sh"
	rc=$?
	result="$([ $rc = 0 ] && echo passed || echo FAILED)"
	echo "PostgreSQL $major ($("$config" --version)): $SUITES $result in $(($(date +%s) - started)) s" \
		"(of which $obtained s to obtain the server)" | tee -a "$OUT"
	[ $rc = 0 ] || failed="$failed $major"
	upgrade_from="$upgrade_from $("$config" --bindir)"
done

rm -rf "$WORK"
[ -z "$failed" ]
