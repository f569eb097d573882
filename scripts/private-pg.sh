# shellcheck shell=bash
# Sourced by the scripts that build this tree against a PostgreSQL other
# than pg_config's (scripts/test-majors.sh, bench/majors.sh): a copy of the
# tree without its build products, built and installed into a private copy
# of that PostgreSQL.  Defines functions only.

# wi_copy_tree DIR: this tree without its build products, for a build
# against another PostgreSQL that leaves this tree's objects as they are.
wi_copy_tree() {
	local root
	root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
	mkdir -p "$1"
	tar -C "$root" --exclude=.git --exclude=.run --exclude=regress/out --exclude=regress/out_isolation \
		--exclude=tmp_check --exclude=./debian/tmp --exclude=node_modules --exclude=./build \
		--exclude=./bench/results --exclude='*.o' --exclude='*.so' --exclude='*.bc' -cf - . | tar -C "$1" -xf -
	# of bench/results (the runs' output) only what the tree holds: the
	# history that docs/benchmarks.md links to
	mkdir -p "$1/bench/results"
	cp "$root/bench/results/HISTORY.md" "$1/bench/results/"
}
# wi_build_install DIR PG_CONFIG: the extension of the copy in DIR, built and
# installed into that PostgreSQL (the tools under DIR/prefix).
wi_build_install() {
	(cd "$1" && make -s all PG_CONFIG="$2" && make -s install PG_CONFIG="$2" PREFIX="$1/prefix" >/dev/null)
}
# wi_private_pg PG_CONFIG DIR: prints the pg_config of a PostgreSQL to
# install into.  A build in one prefix (scripts/pg-build.sh's cache) is
# copied to DIR/pg first, so that the cache stays as built and runs beside
# each other never share an installed extension; a distribution's
# PostgreSQL (its files spread over /usr) is the one make install uses.
wi_private_pg() {
	local config="$1" prefix
	prefix="$(dirname "$("$config" --bindir)")"
	case "$("$config" --sharedir)/$("$config" --pkglibdir)" in
		"$prefix"/*/"$prefix"/*)
			rm -rf "$2/pg"
			mkdir -p "$2"
			cp -a "$prefix" "$2/pg"
			echo "$2/pg/bin/pg_config" ;;
		*) command -v "$config" ;;
	esac
}
