#!/usr/bin/env bash
# make test: installs what is missing, builds, installs, and runs every
# suite (pg_regress, isolation, TAP, package), each on private servers.
# Exits non-zero if any suite failed; the TAP runner's summary comes last
# (the logs of failed TAP files before it, each named).
# The package suite (scripts/test-package.sh) builds the Debian packages,
# installs them (see WI_PACKAGE_INSTALL there) and tests the installed files.
#
# While developing, WI_SUITES="regress tap" picks suites and
# PROVE_TESTS="regress/t/300_worker_shuffle.pl …" picks TAP files.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

scripts/deps.sh || exit 1
. scripts/common.sh

# The suites write into the tree and run as a non-root user: give them a copy.
WORK="$(mktemp -d "${TMPDIR:-/tmp}/webhook_inbox-test.XXXXXX")"

# The extension goes into PostgreSQL (pg_config's); the receiver, the
# simulator and their man pages into a private prefix, checked by
# regress/t/502_release_files.pl (the tests run the binaries of the tree).
make -s all || exit 1
make -s install PREFIX="$WORK/prefix" >/dev/null || exit 1
export WI_PREFIX="$WORK/prefix"
tar -C "$ROOT" --exclude=.git --exclude=.run --exclude=regress/out --exclude=regress/out_isolation \
	--exclude=tmp_check --exclude=./debian/tmp --exclude=node_modules -cf - . | tar -C "$WORK" -xf -
chown -R "$RUN_USER" "$WORK"
chmod 755 "$WORK"

# A small filesystem for the full-disk test (regress/t/532_full_disk.pl),
# which runs unprivileged: mounted here while root (private to this run when
# it has a mount namespace of its own) and unmounted after the suites; the
# test skips, saying why, without it.
SMALL_FS=""
if [ "$(id -u)" -eq 0 ] && [[ " ${WI_SUITES:-regress isolation tap package} " == *" tap "* ]]; then
	mkdir -p "$WORK/smallfs"
	if mount -t tmpfs -o size=64m,mode=0755 webhook_inbox_small "$WORK/smallfs" 2>/dev/null; then
		chown "$RUN_USER" "$WORK/smallfs"
		SMALL_FS="$WORK/smallfs"
		export WI_SMALL_FS="$SMALL_FS"
	fi
fi

failed=""
TAP_OUT="$WORK/tap.out"
for suite in ${WI_SUITES:-regress isolation tap package}; do
	echo "=== $suite ==="
	if [ "$suite" = package ]; then
		scripts/test-package.sh || failed="$failed package"
		continue
	fi
	if [ "$suite" = tap ]; then
		as_user make -C "$WORK" -s installcheck-tap ${PROVE_TESTS:+PROVE_TESTS="$PROVE_TESTS"} 2>&1 | tee "$TAP_OUT"
		[ "${PIPESTATUS[0]}" = 0 ] && continue
		failed="$failed tap"
		# the logs of the files that failed, each named, before the summary
		for t in $(sed -n '/^Test Summary Report/,$s/^\(regress\/t\/[^ ]*\.pl\) .*/\1/p' "$TAP_OUT"); do
			log="$WORK/tmp_check/log/regress_log_$(basename "$t" .pl)"
			[ -f "$log" ] && { echo "--- $t: the end of $log"; tail -n 60 "$log"; }
		done
		continue
	fi
	if ! as_user make -C "$WORK" -s "installcheck-$suite"; then
		failed="$failed $suite"
		for f in "$WORK"/regress/out/regression.diffs "$WORK"/regress/out_isolation/regression.diffs; do
			[ -f "$f" ] && head -c 20000 "$f"
		done
	fi
done

[ -n "$SMALL_FS" ] && umount "$SMALL_FS"

# The other PostgreSQL majors (scripts/test-majors.sh): WI_PG_MAJORS, by
# default 17 and 18 when every suite runs; WI_PG_MAJORS="" for none.
# The extension is installed into pg_config's PostgreSQL again first: the
# package suite (WI_PACKAGE_INSTALL=dpkg) purges its package, and with it the
# files make install had put in the same places; 507_pg_upgrade upgrades
# from that installation.
if [ -z "${WI_SUITES:-}" ] || [ -n "${WI_PG_MAJORS:-}" ]; then
	if make -s install PREFIX="$WORK/prefix" >/dev/null; then
		WI_PG_FIRST_INSTALLED=1 WI_MAJORS_OUT="$WORK/majors.out" scripts/test-majors.sh || failed="$failed majors"
	else
		failed="$failed majors"
	fi
fi

# Last: the suites that failed, then the TAP runner's summary (its report of
# failed files and its Result line) again, so that it is what a reader sees.
{ [ -n "$failed" ] || [ -f "$TAP_OUT" ] || [ -f "$WORK/majors.out" ]; } && echo "=== summary ==="
[ -f "$WORK/majors.out" ] && cat "$WORK/majors.out"
[ -n "$failed" ] && echo "failed suites:$failed (work tree kept in $WORK)"
if [ -f "$TAP_OUT" ]; then
	sed -n '/^Test Summary Report/,/^Result:/p; /^All tests successful/,/^Result:/p' "$TAP_OUT"
	grep -q '^Result:' "$TAP_OUT" || echo "the TAP runner ended without its summary (see $TAP_OUT)"
fi
[ -n "$failed" ] && exit 1
rm -rf "$WORK"
exit 0
