#!/usr/bin/env bash
# The packaged install (make test's "package" suite): builds the Debian
# packages (scripts/deb.sh), checks what they contain, installs them, and
# runs regress/package/600_package.pl against the installed files: the
# pg_regress suite on a clean cluster, the upgrade from 0.1.0, the packaged
# receiver with its packaged configuration, systemd-analyze on its unit;
# installed with dpkg, also 610_package_service.pl as root: the service's
# user logging in to a stock cluster as the README configures it.
#
# How the packages are installed (WI_PACKAGE_INSTALL):
#   namespace  dpkg -i in a private mount namespace whose /usr, /etc and /var
#              are overlays: the real install (maintainer scripts, the
#              service user, the system PostgreSQL finding the files), seen
#              by nothing else on the machine and gone afterwards.  Needs
#              root and overlayfs; the default when both are there.
#   dpkg       dpkg -i into the system, dpkg --purge afterwards: for
#              disposable machines (.ci/run sets it).
#   extract    nothing installed: the packages are unpacked (dpkg-deb -x)
#              into a private root holding a copy of this machine's
#              PostgreSQL 15, whose binaries then find the packaged files as
#              a system install would.  The default without root.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
. scripts/common.sh

MODE="${WI_PACKAGE_INSTALL:-auto}"
if [ "$MODE" = auto ]; then
	MODE=extract
	if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
		probe="$(mktemp -d "${TMPDIR:-/tmp}/webhook_inbox-ovl.XXXXXX")"
		mkdir -p "$probe/u" "$probe/w"
		if unshare -m sh -c "mount -t overlay overlay -o lowerdir=/usr,upperdir=$probe/u,workdir=$probe/w /usr" 2>/dev/null; then
			MODE=namespace
		fi
		rm -rf "$probe"
	fi
fi
if [ "$MODE" = namespace ]; then
	OVL="$(mktemp -d "${TMPDIR:-/tmp}/webhook_inbox-ovl.XXXXXX")"
	echo "installing with dpkg -i in a private mount namespace (overlays in $OVL)"
	rc=0
	unshare -m bash -c '
		set -e
		for d in usr etc var; do
			mkdir -p "$1/$d/u" "$1/$d/w"
			mount -t overlay overlay -o "lowerdir=/$d,upperdir=$1/$d/u,workdir=$1/$d/w" "/$d"
		done
		WI_PACKAGE_INSTALL=dpkg WI_PACKAGE_NAMESPACE=1 exec "$2"' sh "$OVL" "$0" || rc=$?
	rm -rf "$OVL"
	exit "$rc"
fi
version="$(sed -n 's/^EXT_VERSION = //p' Makefile)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/webhook_inbox-pkg.XXXXXX")"
chmod 755 "$WORK"
PACKAGES="postgresql-15-webhook-inbox webhook-receiver webhook-sim"
installed=0
cleanup()
{
	if [ "$installed" = 1 ] && [ -z "${WI_PACKAGE_NAMESPACE:-}" ]; then
		# shellcheck disable=SC2086
		# quiet: the prove summary above stays the last line of the run
		dpkg --purge $PACKAGES >/dev/null 2>&1 || echo "warning: dpkg --purge failed" >&2
	fi
	[ "${keep:-0}" = 1 ] || rm -rf "$WORK"
}
trap cleanup EXIT
keep=1

WI_DEB_DIR="$WORK/deb" scripts/deb.sh
debs=()
for p in $PACKAGES; do
	f="$(ls "$WORK"/deb/"${p}"_"${version}"-*_*.deb)"
	debs+=("$f")
done

# each package holds what it must
contents()
{
	dpkg-deb -c "$1" | awk '{print $6}' | sed 's|^\./|/|'
}
missing=""
expect()
{
	local deb="$1"; shift
	local list
	list="$(contents "$deb")"
	for path in "$@"; do
		grep -qx -- "$path" <<<"$list" || missing="$missing $(basename "$deb"):$path"
	done
}
expect "${debs[0]}" /usr/lib/postgresql/15/lib/webhook_inbox.so \
	/usr/share/postgresql/15/extension/webhook_inbox.control \
	"/usr/share/postgresql/15/extension/webhook_inbox--$version.sql" \
	/usr/share/postgresql/15/extension/webhook_inbox--0.1.0.sql \
	"/usr/share/postgresql/15/extension/webhook_inbox--0.1.0--$version.sql" \
	/usr/share/doc/postgresql-15-webhook-inbox/copyright
expect "${debs[1]}" /usr/bin/webhook-receiver /usr/share/man/man1/webhook-receiver.1.gz \
	/lib/systemd/system/webhook-receiver.service /etc/webhook-receiver/receiver.conf \
	/usr/share/doc/webhook-receiver/copyright
expect "${debs[2]}" /usr/bin/webhook-sim /usr/share/man/man1/webhook-sim.1.gz
if [ -n "$missing" ]; then
	echo "error: missing from the packages:$missing" >&2
	exit 1
fi
dpkg-deb --ctrl-tarfile "${debs[1]}" | tar -xO ./conffiles | grep -qx /etc/webhook-receiver/receiver.conf || {
	echo "error: /etc/webhook-receiver/receiver.conf is not a conffile" >&2
	exit 1
}
echo "packages: ${debs[*]##*/}"

if [ "$MODE" = dpkg ]; then
	[ "$(id -u)" -eq 0 ] || { echo "error: WI_PACKAGE_INSTALL=dpkg needs root" >&2; exit 1; }
	installed=1
	dpkg -i "${debs[@]}" >/dev/null
	PKG_ROOT=/
	# the configuration is the service user's, not the test user's
	stat -c '%U:%G %a' /etc/webhook-receiver/receiver.conf | grep -qx 'root:webhook-receiver 640' || {
		echo "error: receiver.conf is $(stat -c '%U:%G %a' /etc/webhook-receiver/receiver.conf)" >&2
		exit 1
	}
	cp /etc/webhook-receiver/receiver.conf "$WORK/receiver.conf"
else
	PKG_ROOT="$WORK/root"
	mkdir -p "$PKG_ROOT/usr/lib/postgresql" "$PKG_ROOT/usr/share/postgresql"
	cp -a /usr/lib/postgresql/15 "$PKG_ROOT/usr/lib/postgresql/"
	cp -a /usr/share/postgresql/15 "$PKG_ROOT/usr/share/postgresql/"
	# a clean copy: nothing of ours but what the packages bring
	rm -rf "$PKG_ROOT"/usr/lib/postgresql/15/lib/webhook_inbox.so \
		"$PKG_ROOT"/usr/lib/postgresql/15/lib/bitcode/webhook_inbox* \
		"$PKG_ROOT"/usr/share/postgresql/15/extension/webhook_inbox*
	for f in "${debs[@]}"; do dpkg-deb -x "$f" "$PKG_ROOT"; done
	cp "$PKG_ROOT/etc/webhook-receiver/receiver.conf" "$WORK/receiver.conf"
fi

# the checks run as the unprivileged user, from a copy of the test files
mkdir -p "$WORK/tree"
cp -a regress Makefile README.md "$WORK/tree/"
chown -R "$RUN_USER" "$WORK/tree" "$WORK/receiver.conf"
PGDIR="$PKG_ROOT/usr/lib/postgresql/15"
PGDIR="${PGDIR//\/\//\/}"
if as_user env WI_PKG_ROOT="$PKG_ROOT" WI_PKG_MODE="$MODE" WI_PKG_CONF="$WORK/receiver.conf" \
	PG_REGRESS="$PGDIR/lib/pgxs/src/test/regress/pg_regress" \
	sh -c "cd '$WORK/tree' && prove --timer -I '$PGDIR/lib/pgxs/src/test/perl' -I regress/t regress/package/*.pl" &&
	# the service as installed: its own user, on a stock cluster (as root)
	{ [ "$MODE" != dpkg ] || (cd "$WORK/tree" && env WI_PKG_MODE="$MODE" WI_PKG_NAMESPACE="${WI_PACKAGE_NAMESPACE:-}" \
		prove --timer -I "$PGDIR/lib/pgxs/src/test/perl" -I regress/t regress/package/610_package_service.pl); }; then
	keep=0
else
	echo "package test failed (kept in $WORK)" >&2
	for f in "$WORK"/tree/tmp_check/log/regress_log_*; do
		[ -f "$f" ] && { echo "--- $f (tail)"; tail -n 60 "$f"; }
	done
	exit 1
fi
