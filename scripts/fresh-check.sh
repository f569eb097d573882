#!/usr/bin/env bash
# The README's two commands on a fresh Debian 12: builds a minimal Debian 12
# root with debootstrap (minbase, from the system's own Debian mirror), with
# only git, ca-certificates, make and sudo added, clones this checkout's HEAD
# into root's home there, and runs, as root in that root:
#   1. make -n test (make says nothing of a missing pg_config), then
#      scripts/deps.sh, then checks that no process is running in the root
#      (it starts no service);
#   2. make run, until it has converged, then Ctrl-C twice (SIGINT to its
#      process group), then checks that it printed its three verify lines with
#      no difference and that nothing is left running;
#   3. make test (every suite), which must exit 0 with prove's Result: PASS
#      as its last line, every other PostgreSQL major built and passed
#      (scripts/test-majors.sh skips one it cannot obtain).
# Prints one line per step and a verdict, writes them to fresh-check.txt
# beside the logs, and exits 0 only if every step passed.  Needs root and
# about 4 GB; make test takes half an hour or more.
#
#   WI_FRESH_DIR      where the root and the logs go (/var/tmp/webhook_inbox-fresh);
#                     the root is made afresh each time
#   WI_FRESH_MIRROR   the Debian mirror (the system's, from its apt sources)
#   WI_FRESH_STEPS    the steps to run ("deps run test")
#   WI_FRESH_SUITES   the suites of make test (WI_SUITES; all of them by default)
#   WI_FRESH_SHARED   the project's shared docs, copied beside the clone as
#                     ../shared, as CI has them (../shared of this checkout)
#   WI_FRESH_PORT_DIR a directory of port locks shared with other test runs
#                     on this machine (PG_TEST_PORT_DIR), bind-mounted in
#
# The system's local CA certificates (/usr/local/share/ca-certificates) are
# copied into the root, so that a proxy that inspects TLS is trusted there
# as it is here.  Where the root cannot reach the npm registry, it uses this
# machine's pinned Node.js and npm cache instead (offline), and says so.
set -uo pipefail
cd "$(dirname "$0")/.."
SRC="$(pwd)"

[ "$(id -u)" -eq 0 ] || { echo "error: fresh-check.sh needs root (debootstrap, chroot)" >&2; exit 1; }
DIR="${WI_FRESH_DIR:-/var/tmp/webhook_inbox-fresh}"
R="$DIR/root"
STEPS="${WI_FRESH_STEPS:-deps run test}"
SUITE=bookworm
MIRROR="${WI_FRESH_MIRROR:-}"
if [ -z "$MIRROR" ]; then
	MIRROR="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null |
		grep -v '^[[:space:]]*#' | sed -nE 's/^URIs:[[:space:]]*([^[:space:]]+).*/\1/p; s/^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?([^[:space:]]+).*/\2/p' |
		grep -E '/debian/?$' | head -n 1)"
	MIRROR="${MIRROR:-http://deb.debian.org/debian}"
fi
command -v debootstrap >/dev/null || { apt-get install -y -qq debootstrap >/dev/null || exit 1; }

REPORT="$DIR/fresh-check.txt"
say() { echo "fresh-check: $*" | tee -a "$REPORT"; }
in_root() { chroot "$R" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
	PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin ${CHROOT_ENV:-} "$@"; }
# the processes running inside the root
root_procs()
{
	local p
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/root" 2>/dev/null)" = "$R" ] && echo "${p#/proc/} $(tr '\0' ' ' < "$p/cmdline" 2>/dev/null)"
	done
}
MOUNTED=0
cleanup()
{
	local pids
	pids="$(root_procs | cut -d' ' -f1)"
	if [ -n "$pids" ]; then
		# shellcheck disable=SC2086
		kill -TERM $pids 2>/dev/null; sleep 2
		# shellcheck disable=SC2086
		kill -KILL $(root_procs | cut -d' ' -f1) 2>/dev/null
	fi
	if [ "$MOUNTED" = 1 ]; then
		for m in $(awk -v r="$R" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/mounts | sort -r); do
			umount -l "$m" 2>/dev/null
		done
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 1. the root: debootstrap minbase, then git ca-certificates make sudo
if [ -d "$R" ]; then
	if awk -v r="$R" '$2 == r || index($2, r "/") == 1' /proc/mounts | grep -q .; then
		echo "error: $R still has mounts" >&2; exit 1
	fi
	rm -rf "$R"
fi
mkdir -p "$DIR"
: > "$REPORT"
say "debootstrap --variant=minbase $SUITE from $MIRROR into $R"
debootstrap --variant=minbase "$SUITE" "$R" "$MIRROR" > "$DIR/debootstrap.log" 2>&1 ||
	{ say "FAIL: debootstrap (see $DIR/debootstrap.log)"; exit 1; }
cat > "$R/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb ${MIRROR%/debian*}/debian-security $SUITE-security main
EOF
mount -t proc proc "$R/proc" && MOUNTED=1
mount --rbind /dev "$R/dev" && mount --make-rslave "$R/dev"
mount -t sysfs sysfs "$R/sys"
mkdir -p "$R/tmp" && chmod 1777 "$R/tmp"
cp /etc/resolv.conf "$R/etc/resolv.conf" 2>/dev/null
if [ -n "${WI_FRESH_PORT_DIR:-}" ]; then
	mkdir -p "$R$WI_FRESH_PORT_DIR" && mount --bind "$WI_FRESH_PORT_DIR" "$R$WI_FRESH_PORT_DIR"
	CHROOT_ENV="PG_TEST_PORT_DIR=$WI_FRESH_PORT_DIR"
fi
in_root apt-get update -qq > "$DIR/apt.log" 2>&1 &&
	in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq git ca-certificates make sudo >> "$DIR/apt.log" 2>&1 ||
	{ say "FAIL: apt-get install git ca-certificates make sudo (see $DIR/apt.log)"; exit 1; }
if ls /usr/local/share/ca-certificates/* >/dev/null 2>&1; then
	mkdir -p "$R/usr/local/share/ca-certificates"
	cp /usr/local/share/ca-certificates/* "$R/usr/local/share/ca-certificates/"
	in_root update-ca-certificates >/dev/null 2>&1
fi
say "root ready: $(in_root dpkg-query -W -f='.\n' | wc -l) packages"

# the checkout's HEAD, cloned into root's home, with ../shared beside it
git clone -q "$SRC" "$R/root/webhook_inbox" || { say "FAIL: git clone"; exit 1; }
git -C "$R/root/webhook_inbox" checkout -q "$(git -C "$SRC" rev-parse HEAD)"
SHARED="${WI_FRESH_SHARED:-$SRC/../shared}"
[ -d "$SHARED" ] && mkdir -p "$R/root/shared" && cp -a "$SHARED/." "$R/root/shared/"
say "clone of $(git -C "$SRC" rev-parse --short HEAD) in /root/webhook_inbox"

if ! in_root timeout 20 bash -c 'exec 3<>/dev/tcp/registry.npmjs.org/443' 2>/dev/null; then
	# no way to reach the npm registry from here: this machine's Node.js and npm cache, offline
	. "$SRC/scripts/common.sh"
	cache=""
	for c in "${HOME:-/root}/.npm" "$(getent passwd postgres | cut -d: -f6)/.npm"; do
		[ -d "$c/_cacache" ] && { cache="$c"; break; }
	done
	if [ -x "$WI_NODE_DIR/bin/node" ] && [ -n "$cache" ]; then
		mkdir -p "$R$(dirname "$WI_NODE_DIR")" "$R/var/cache/webhook_inbox-npm"
		cp -a "$WI_NODE_DIR" "$R$WI_NODE_DIR"
		cp -a "$cache/." "$R/var/cache/webhook_inbox-npm/"
		chmod -R a+rwX "$R/var/cache/webhook_inbox-npm"
		CHROOT_ENV="${CHROOT_ENV:-} npm_config_cache=/var/cache/webhook_inbox-npm npm_config_offline=true"
		say "the npm registry is out of reach: this machine's Node.js $WI_NODE_VERSION and npm cache ($cache) are used, offline"
	else
		say "the npm registry is out of reach, and this machine has no pinned Node.js or npm cache to lend: the contract tests will fail"
	fi
fi

ok=1
W=/root/webhook_inbox
for step in $STEPS; do
	case "$step" in
	deps)
		# before anything is installed: make's first words are not an error of its own
		first="$(in_root make -C "$W" --no-print-directory -n test 2>&1 | head -n 1)"
		if [ "$first" = "scripts/test.sh" ]; then
			say "make test before deps: no complaint of make's (no pg_config yet)"
		else
			ok=0; say "FAIL: make test before deps begins with: $first"
		fi
		if in_root bash -c "cd $W && scripts/deps.sh" > "$DIR/deps.log" 2>&1; then
			running="$(root_procs)"
			if [ -z "$running" ]; then
				say "deps: ok ($(grep -c . "$DIR/deps.log") lines), no service running"
			else
				ok=0; say "FAIL: deps left running: $(echo "$running" | tr '\n' ';')"
			fi
		else
			ok=0; say "FAIL: deps (see $DIR/deps.log)"
		fi
		;;
	run)
		# make run in a session of its own; Ctrl-C is SIGINT to its process group
		setsid chroot "$R" /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
			PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin ${CHROOT_ENV:-} \
			bash -c "cd $W && exec make run" > "$DIR/run.log" 2>&1 < /dev/null &
		RUN_PID=$!
		for _ in $(seq 1 1800); do
			grep -q 'Press Ctrl-C to stop everything' "$DIR/run.log" && break
			kill -0 "$RUN_PID" 2>/dev/null || break
			sleep 1
		done
		kill -INT -- "-$RUN_PID" 2>/dev/null; sleep 0.5; kill -INT -- "-$RUN_PID" 2>/dev/null
		for _ in $(seq 1 120); do kill -0 "$RUN_PID" 2>/dev/null || break; sleep 0.5; done
		wait "$RUN_PID" 2>/dev/null
		sleep 1
		verified="$(grep -c '^verify .*differences=0' "$DIR/run.log")"
		running="$(root_procs)"
		if grep -q '^converged:' "$DIR/run.log" && [ "$verified" = 3 ] && grep -q '^stopped' "$DIR/run.log" &&
			[ -z "$running" ]; then
			say "make run: converged ($verified verify lines, 0 differences), stopped on Ctrl-C, nothing left running"
		else
			ok=0
			say "FAIL: make run: $verified verify lines with 0 differences$(grep -q '^stopped' "$DIR/run.log" || echo ', never stopped')${running:+, left running: $(echo "$running" | tr '\n' ';')} (see $DIR/run.log)"
		fi
		grep -m1 "cluster's data" "$DIR/run.log" | sed 's/^/fresh-check:   /' | tee -a "$REPORT"
		;;
	test)
		start=$SECONDS
		in_root ${WI_FRESH_SUITES:+WI_SUITES="$WI_FRESH_SUITES"} bash -c "cd $W && make test" > "$DIR/test.log" 2>&1
		rc=$?
		mins=$(( (SECONDS - start) / 60 ))
		last="$(grep . "$DIR/test.log" | tail -n 1)"
		running="$(root_procs)"
		if [ "$rc" = 0 ] && [ "$last" = "Result: PASS" ] && [ -z "$running" ]; then
			say "make test: exit 0 in $mins min, last line \"$last\" ($(grep -m1 '^Files=' "$DIR/test.log")), nothing left running"
		else
			ok=0
			say "FAIL: make test: exit $rc in $mins min, last line \"$last\"${running:+, left running: $(echo "$running" | tr '\n' ';')} (see $DIR/test.log)"
			sed -n '/^=== summary ===/,$p' "$DIR/test.log" | head -n 40 | sed 's/^/fresh-check:   /' | tee -a "$REPORT"
		fi
		# each other major's line (scripts/test-majors.sh); on a fresh
		# machine every one must have been obtained and passed
		majors="$(grep -E '^PostgreSQL [0-9]+(: | \()' "$DIR/test.log" | sort -u)"
		echo "$majors" | sed '/^$/d; s/^/fresh-check:   /' | tee -a "$REPORT"
		if [ -n "$majors" ] && echo "$majors" | grep -qv ' passed in '; then
			ok=0
			say "FAIL: make test: not every other PostgreSQL major was built and passed"
		fi
		;;
	*) echo "error: unknown step $step" >&2; exit 2 ;;
	esac
done

cleanup
MOUNTED=0
if [ "$ok" = 1 ]; then say "PASS ($STEPS) on Debian $(cat "$R/etc/debian_version")"; else say "FAIL"; fi
[ "$ok" = 1 ]
