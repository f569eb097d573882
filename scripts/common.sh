# Shared by the scripts: PostgreSQL's binaries, and running as a non-root
# user (initdb refuses root).
PG_BINDIR="$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)"
export PATH="$PG_BINDIR:$PATH"

if [ "$(id -u)" -eq 0 ]; then
	RUN_USER="${WI_RUN_USER:-postgres}"
	as_user() { runuser -u "$RUN_USER" -- env PATH="$PATH" "$@"; }
else
	RUN_USER="$(id -un)"
	as_user() { "$@"; }
fi
