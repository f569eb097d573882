#!/usr/bin/env bash
# make run: installs what is missing, builds, installs, and starts a private
# PostgreSQL cluster under .run/ with the extension and its background
# worker.  Running it again reuses the cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
PGPORT="${WI_PGPORT:-5433}"

scripts/deps.sh
. scripts/common.sh

make -s all
make -s install >/dev/null

RUN="$ROOT/.run"
mkdir -p "$RUN"
[ "$(id -u)" -eq 0 ] && chown "$RUN_USER" "$RUN"
if [ ! -f "$RUN/data/PG_VERSION" ]; then
	as_user initdb -D "$RUN/data" -A trust -U postgres >/dev/null
	cat >> "$RUN/data/postgresql.conf" <<CONF
port = $PGPORT
listen_addresses = '127.0.0.1'
unix_socket_directories = '$RUN'
shared_preload_libraries = 'webhook_inbox'
webhook_inbox.database = 'postgres'
CONF
fi
if ! as_user pg_ctl -D "$RUN/data" status >/dev/null 2>&1; then
	as_user pg_ctl -D "$RUN/data" -l "$RUN/postgres.log" -w start >/dev/null
fi
psql -h "$RUN" -p "$PGPORT" -U postgres -q -c "CREATE EXTENSION IF NOT EXISTS webhook_inbox"

cat <<MSG
webhook_inbox is running.
  connect:  psql -h 127.0.0.1 -p $PGPORT -U postgres
  stop:     $( [ "$(id -u)" -eq 0 ] && echo "runuser -u $RUN_USER -- ")$PG_BINDIR/pg_ctl -D $RUN/data stop
MSG
