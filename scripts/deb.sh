#!/usr/bin/env bash
# make deb: builds the Debian packages (debian/, pg_buildext) out of a copy
# of the tree, so the work tree stays clean:
#   postgresql-N-webhook-inbox   the extension and its background worker, one
#                                package per PostgreSQL major (below)
#   webhook-receiver             the receiver, its man page, systemd service
#                                and /etc/webhook-receiver/receiver.conf
#   webhook-sim                  the simulator and its man page
# The .deb files go to $WI_DEB_DIR (default: build/deb).  Refuses to build
# when debian/changelog names another version than the Makefile's EXT_VERSION.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

version="$(sed -n 's/^EXT_VERSION = //p' Makefile)"
deb_version="$(dpkg-parsechangelog -l debian/changelog -S Version)"
if [ "${deb_version%-*}" != "$version" ]; then
	echo "error: debian/changelog is at $deb_version, the Makefile's EXT_VERSION is $version:" \
		"add a debian/changelog entry (dch -v $version-1)" >&2
	exit 1
fi

OUT="${WI_DEB_DIR:-$ROOT/build/deb}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
BUILD="$(mktemp -d "${TMPDIR:-/tmp}/webhook_inbox-deb.XXXXXX")"
trap 'rm -rf "$BUILD"' EXIT
SRC="$BUILD/webhook-inbox-$version"
mkdir -p "$SRC"

# the sources only: what git knows (tracked, or new and not ignored), or, in a
# copy without git, everything after make clean
if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	git -C "$ROOT" ls-files -z --cached --others --exclude-standard |
		(cd "$ROOT" && xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh) |
		tar -C "$ROOT" --null -T - -cf - | tar -C "$SRC" -xf -
else
	tar -C "$ROOT" --exclude=./.run --exclude=./build --exclude=./tmp_check --exclude=./regress/out \
		--exclude=./regress/out_isolation -cf - . | tar -C "$SRC" -xf -
	make -C "$SRC" -s clean >/dev/null 2>&1 || true
fi

# One extension package per major whose postgresql-server-dev-N is installed
# (debian/pgversions says 15+): debian/control is made from debian/control.in
# for them.  Debian's own default would be its release's major only (15 on
# Debian 12), whatever else is installed.  PG_SUPPORTED_VERSIONS="15 18"
# names the majors instead.
export PG_SUPPORTED_VERSIONS="${PG_SUPPORTED_VERSIONS:-installed}"
(cd "$SRC" && pg_buildext updatecontrol) || {
	echo "error: no PostgreSQL major of debian/pgversions to build for (PG_SUPPORTED_VERSIONS=$PG_SUPPORTED_VERSIONS):" \
		"install postgresql-server-dev-N" >&2
	exit 1
}
majors="$(cd "$SRC" && pg_buildext supported-versions | xargs)"
# every extension package carries the same documents as 15's
for v in $majors; do
	docs="$SRC/debian/postgresql-$v-webhook-inbox.docs"
	[ -e "$docs" ] || cp "$SRC/debian/postgresql-15-webhook-inbox.docs" "$docs"
done
echo "building the packages of $deb_version for PostgreSQL $majors in $BUILD"
(cd "$SRC" && DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-noautodbgsym}" \
	dpkg-buildpackage -us -uc -b >"$BUILD/build.log" 2>&1) || {
	tail -n 60 "$BUILD/build.log" >&2
	echo "error: dpkg-buildpackage failed" >&2
	exit 1
}
for f in "$BUILD"/*.deb; do
	cp "$f" "$OUT/"
	echo "$OUT/$(basename "$f")"
done
