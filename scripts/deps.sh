#!/usr/bin/env bash
# Installs the Debian packages the build, the tests and the demo need, when
# any is missing.  Safe to run again: it does nothing when all are present.
set -euo pipefail

PACKAGES="postgresql-15 postgresql-server-dev-15 libevent-dev libcurl4-openssl-dev libssl-dev
libpq-dev libipc-run-perl make gcc clang libclang-rt-14-dev curl
debhelper postgresql-server-dev-all dpkg-dev pkg-config man-db groff-base nodejs
prometheus prometheus-postgres-exporter python3-psycopg postgresql-15-auto-failover haproxy"

missing=""
for p in $PACKAGES; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
# npm comes with some nodejs builds and is its own package in Debian's
command -v npm >/dev/null 2>&1 || missing="$missing npm"
[ -z "$missing" ] && exit 0

echo "installing:$missing"
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null; then SUDO=sudo; else
		echo "error: missing packages:$missing (run as root or install them)" >&2
		exit 1
	fi
else
	SUDO=""
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
