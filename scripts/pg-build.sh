#!/usr/bin/env bash
# scripts/pg-build.sh MAJOR[.MINOR] [--src-dir DIR]
#
# A PostgreSQL of that release for building and testing the extension
# against, where the distribution does not package it; prints the pg_config
# to use (the only line on stdout; progress goes to stderr).
#
#   1. postgresql-server-dev-MAJOR installed with its server (Debian's
#      /usr/lib/postgresql/MAJOR): that one, nothing is built.
#   2. A build of this script cached outside the clone, one directory per
#      version: $WI_PG_CACHE/pg-VERSION (default /var/cache/webhook_inbox),
#      reused as long as it is complete.
#   3. Otherwise it is built from source, taken from the first that has it:
#      - a directory of release tarballs given with --src-dir or
#        WI_PG_SRC_DIR (Debian's names, postgresql-18_18.6.orig.tar.bz2, or
#        upstream's, postgresql-18.6.tar.bz2);
#      - Debian's source package of that major (trixie, sid, experimental),
#        fetched with apt-get source through a private apt configuration
#        under the cache (its own sources list, lists and archives; the
#        mirror is read from the system's apt sources, whose state is never
#        touched); a file that answers 404 (a mirror mid-sync) is asked
#        again, then the next older version the index lists;
#      - ../shared/pg-src beside the clone, when it exists.
#    A tarball fetched from Debian is kept in $WI_PG_CACHE/src and taken
#    from there the next time.  --fetch-only stops once the source is
#    there, printing the tarball's path instead.
#
# Built with ./configure --with-openssl --enable-tap-tests --without-icu
# --without-readline (bison and flex are needed: release tarballs since 17
# carry no generated parser), installed with pg_regress, the isolation
# tester and the TAP modules, as PGXS's installcheck targets need them, and
# with contrib (the suites use pg_stat_statements).
#
# Exits 2, saying why on stderr, when the release cannot be obtained.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

say() { echo "pg-build: $*" >&2; }

want="" src_dir="${WI_PG_SRC_DIR:-}" fetch_only=""
while [ $# -gt 0 ]; do
	case "$1" in
		--src-dir) src_dir="$2"; shift 2 ;;
		--fetch-only) fetch_only=1; shift ;;
		-h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
		-*) say "unknown option $1"; exit 64 ;;
		*) want="$1"; shift ;;
	esac
done
if ! [[ "$want" =~ ^([0-9]+)(\.([0-9]+))?$ ]]; then
	say "usage: scripts/pg-build.sh MAJOR[.MINOR] [--src-dir DIR] [--fetch-only]"
	exit 64
fi
major="${BASH_REMATCH[1]}"
minor="${BASH_REMATCH[3]}"
CACHE="${WI_PG_CACHE:-/var/cache/webhook_inbox}"
if [ -z "${WI_PG_CACHE:-}" ] && [ "$(id -u)" -ne 0 ] && ! mkdir -p "$CACHE" 2>/dev/null; then
	CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/webhook_inbox"
fi
JOBS="${WI_PG_JOBS:-$(nproc 2>/dev/null || echo 2)}"

# 1. the distribution's own
if [ -z "$minor" ] && [ -z "$fetch_only" ] && [ -x "/usr/lib/postgresql/$major/bin/pg_config" ] &&
	[ -x "/usr/lib/postgresql/$major/bin/postgres" ] &&
	dpkg-query -W -f='${Status}' "postgresql-server-dev-$major" 2>/dev/null | grep -q "install ok installed"; then
	echo "/usr/lib/postgresql/$major/bin/pg_config"
	exit 0
fi

# 2. a complete build in the cache: the version asked for, or the newest of the major
complete() {
	[ -f "$1/.webhook_inbox-build-complete" ] && [ -x "$1/bin/pg_config" ] &&
		[ -f "$1/share/postgresql/extension/pg_stat_statements.control" ]
}
newest_cached() {
	local d best="" bestmin=-1 m
	for d in "$CACHE"/pg-"$major".*; do
		[ -d "$d" ] && complete "$d" || continue
		m="${d##*/pg-$major.}"
		[[ "$m" =~ ^[0-9]+$ ]] && [ "$m" -gt "$bestmin" ] && { best="$d"; bestmin="$m"; }
	done
	[ -n "$best" ] && echo "$best"
}
if [ -n "$fetch_only" ]; then
	:
elif [ -n "$minor" ]; then
	complete "$CACHE/pg-$major.$minor" && { echo "$CACHE/pg-$major.$minor/bin/pg_config"; exit 0; }
else
	if d="$(newest_cached)"; then echo "$d/bin/pg_config"; exit 0; fi
fi

for tool in bison flex make gcc; do
	command -v "$tool" >/dev/null || { say "$tool is needed to build PostgreSQL from source (scripts/deps.sh installs it)"; exit 2; }
done
mkdir -p "$CACHE"
WORK="$(mktemp -d "$CACHE/work.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# 3a. a tarball from a directory: prints its path
version_of() { basename "$1" | sed -E "s/^postgresql-($major\_)?($major\.[0-9]+)(\.orig)?\.tar\..*/\2/"; }
tarball_in() {
	local dir="$1" f best="" bestmin=-1 m
	[ -n "$dir" ] && [ -d "$dir" ] || return 1
	for f in "$dir"/postgresql-"$major"_"$major".*.orig.tar.* "$dir"/postgresql-"$major".*.tar.*; do
		[ -f "$f" ] || continue
		m="$(basename "$f" | sed -E "s/^postgresql-($major\_)?$major\.([0-9]+)(\.orig)?\.tar\..*/\2/")"
		[[ "$m" =~ ^[0-9]+$ ]] || continue
		if [ -n "$minor" ]; then [ "$m" = "$minor" ] || continue; fi
		[ "$m" -gt "$bestmin" ] && { best="$f"; bestmin="$m"; }
	done
	[ -n "$best" ] || return 1
	echo "$best"
}

# 3b. Debian's source package, through apt of our own
apt_mirror() {
	local m
	m="$(grep -hsE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null |
		grep -v security | grep -oE 'https?://[^ ]+/debian/?' | head -n 1)"
	echo "${m:-http://deb.debian.org/debian}"
}
# A suite whose Release file is past its Valid-Until (experimental, on a
# mirror that lags behind) would fail the whole update: its date is not
# checked, its signature still is.
apt_private() {
	local a="$CACHE/apt" cmd="$1"
	shift
	"$cmd" -q -o Dir::Etc::SourceList="$a/sources.list" -o Dir::Etc::SourceParts="$a/sources.list.d" \
		-o Dir::State::Lists="$a/lists" -o Dir::Cache="$a/cache" -o Dir::State::status="$a/status" \
		-o Dir::Etc::Preferences="$a/preferences" -o Dir::Etc::PreferencesParts="$a/preferences.d" \
		-o APT::Sandbox::User=root -o Acquire::Check-Valid-Until=false "$@"
}
tarball_from_debian() {
	local a="$CACHE/apt" mirror v tries f
	command -v apt-get >/dev/null || return 1
	mkdir -p "$a/lists/partial" "$a/cache/archives/partial" "$a/sources.list.d" "$a/preferences.d"
	: > "$a/status"
	mirror="$(apt_mirror)"
	printf 'deb-src %s %s main\n' "$mirror" trixie "$mirror" sid "$mirror" experimental > "$a/sources.list"
	say "asking $mirror (trixie, sid, experimental) for postgresql-$major's source"
	apt_private apt-get update >/dev/null 2>"$WORK/apt-update.err" || { say "apt-get update failed: $(tail -n 1 "$WORK/apt-update.err")"; return 1; }
	# newest first; with a minor asked for, only its Debian revisions
	for v in $(apt_private apt-cache showsrc "postgresql-$major" 2>/dev/null | sed -n 's/^Version: //p' | sort -rV | uniq); do
		if [ -n "$minor" ] && [[ "$v" != "$major.$minor-"* ]]; then continue; fi
		for tries in 1 2 3; do
			rm -rf "$WORK/deb" && mkdir -p "$WORK/deb"
			if (cd "$WORK/deb" && apt_private apt-get source --download-only "postgresql-$major=$v" >"$WORK/apt-source.log" 2>&1); then
				f="$(ls "$WORK"/deb/postgresql-"$major"_*.orig.tar.* 2>/dev/null | head -n 1)"
				if [ -n "$f" ]; then
					mkdir -p "$CACHE/src"
					mv "$f" "$CACHE/src/"
					echo "$CACHE/src/$(basename "$f")"
					return 0
				fi
			fi
			if grep -q '404' "$WORK/apt-source.log"; then
				say "postgresql-$major $v: the mirror answered 404 (try $tries of 3)"
				sleep $((tries * 5))
			else
				say "postgresql-$major $v: $(grep -E '^(E|W):' "$WORK/apt-source.log" | head -n 1)"
				break
			fi
		done
	done
	return 1
}

tarball=""
if [ -n "$src_dir" ] && tarball="$(tarball_in "$src_dir")"; then
	say "source: $tarball"
elif tarball="$(tarball_in "$CACHE/src")"; then
	say "source: $tarball (fetched before)"
elif tarball="$(tarball_from_debian)"; then
	say "source: Debian's postgresql-$major, $tarball"
elif tarball="$(tarball_in "${WI_PG_SRC_FALLBACK:-$ROOT/../shared/pg-src}")"; then
	say "source: $tarball"
else
	say "no source of PostgreSQL $want: not in ${src_dir:-a --src-dir}, not served by the Debian mirror, not in ../shared/pg-src"
	exit 2
fi

[ -n "$fetch_only" ] && { echo "$tarball"; exit 0; }
version="$(version_of "$tarball")"
[[ "$version" =~ ^$major\.[0-9]+$ ]] || { say "cannot tell the version of $tarball"; exit 2; }
PREFIX="$CACHE/pg-$version"
if complete "$PREFIX"; then
	echo "$PREFIX/bin/pg_config"
	exit 0
fi
rm -rf "$PREFIX"
started=$(date +%s)
say "building PostgreSQL $version into $PREFIX (make -j$JOBS; log in $PREFIX.log)"
# Run from make test, this script inherits make's MAKELEVEL, MAKEFLAGS and
# MFLAGS: PostgreSQL's build makes its generated headers (utils/errcodes.h
# and the others) first only at MAKELEVEL 0, and stopped at the first file
# that includes them.  Each step stops the build when it fails.
(
	unset MAKELEVEL MAKEFLAGS MFLAGS MAKEOVERRIDES
	tar -C "$WORK" -xf "$tarball" &&
	cd "$WORK/postgresql-$version" &&
	./configure --prefix="$PREFIX" --with-openssl --enable-tap-tests --without-icu --without-readline &&
	make -j"$JOBS" &&
	make install &&
	make -C contrib -j"$JOBS" install
) >"$PREFIX.log" 2>&1 || { say "the build failed; the end of $PREFIX.log:"; tail -n 20 "$PREFIX.log" >&2; exit 1; }
echo "$version built in $(($(date +%s) - started)) s from $(basename "$tarball")" > "$PREFIX/.webhook_inbox-build-complete"
say "PostgreSQL $version built in $(($(date +%s) - started)) s"
echo "$PREFIX/bin/pg_config"
