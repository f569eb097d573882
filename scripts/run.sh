#!/usr/bin/env bash
# make run: the whole system on an embedded default.
#
# Installs what is missing, builds, and starts, all on loopback:
#   - a private PostgreSQL cluster under .run/ with the extension and its
#     background worker;
#   - webhook-receiver on 127.0.0.1:$WI_PORT (default 8080);
#   - webhook-sim as the provider, a real-shaped Stripe account (subscriptions
#     with their eight statuses, invoices, PaymentIntents with their cycles,
#     refunds and disputes, all as stripe-node types them) and a Shopify shop,
#     delivering a chaotic stream (duplicates, reordering, drops) through the
#     receiver;
#   - a second webhook-sim as a Stripe Connect platform ($WI_CONNECT_ACCOUNTS
#     connected accounts, each account's objects readable only under its
#     Stripe-Account), posting to one source, demo-connect.
# It shows progress, shows what was dropped (PaymentIntents, canceled
# subscriptions, refunds among them), sweeps both layers (Stripe's events
# API, then the full listing) and shows what they repaired, lists the
# platform's accounts and sweeps each under its own header, prints per
# account what was dropped and repaired, checks the mirror
# against the provider's truth with `webhook-sim verify`, and keeps the
# receiver serving until Ctrl-C, which stops everything.  Running it again
# reuses the cluster.
#
# Settings (environment or make variables):
#   WI_PORT (8080) receiver port      WI_SIM_PORT (8081) provider API port
#   WI_ADMIN_PORT (9180) receiver's admin port (/metrics, /readyz)
#   WI_PGPORT (5433) PostgreSQL port  WI_EVENTS (2000)   stream size
#   WI_OBJECTS (200)                  WI_SEED (42)
#   WI_DUPLICATE (0.1) WI_DROP (0.05) WI_REORDER_MS (300) WI_RATE (400/s)
#   WI_CONNECT_SIM_PORT (8082) the Stripe Connect platform's provider port
#   WI_CONNECT_ACCOUNTS (5) its connected accounts
#   WI_SETUP_ONLY=1: stop after the cluster is up (no receiver, no stream)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

PGPORT="${WI_PGPORT:-5433}"
PORT="${WI_PORT:-8080}"
SIM_PORT="${WI_SIM_PORT:-8081}"
ADMIN_PORT="${WI_ADMIN_PORT:-9180}"
EVENTS="${WI_EVENTS:-2000}"
OBJECTS="${WI_OBJECTS:-200}"
SEED="${WI_SEED:-42}"
DUPLICATE="${WI_DUPLICATE:-0.1}"
DROP="${WI_DROP:-0.05}"
REORDER_MS="${WI_REORDER_MS:-300}"
RATE="${WI_RATE:-400}"
STRIPE_SECRET="whsec_demo_stripe_secret"
STRIPE_TYPES="subscription,invoice,payment_intent,refund,dispute"
SHOP_SECRET="shpss_demo_shop_secret"
CONNECT_SIM_PORT="${WI_CONNECT_SIM_PORT:-8082}"
CONNECT_ACCOUNTS="${WI_CONNECT_ACCOUNTS:-5}"
CONNECT_SECRET="whsec_demo_connect_secret"
CONNECT_TYPES="subscription,invoice,payment_intent,refund"

scripts/deps.sh
. scripts/common.sh

echo "building..."
make -s all
make -s install >/dev/null

# The cluster runs as $RUN_USER (postgres, when root runs this): its data
# is in .run/ when that user can reach it, else (a checkout in root's home,
# say) in that user's home, $WI_RUN_DIR to choose, with .run a link to it.
RUN="$ROOT/.run"
if [ "$(id -u)" -eq 0 ]; then
	if [ ! -L "$RUN" ]; then
		mkdir -p "$RUN"
		chown "$RUN_USER" "$RUN"
	fi
	if [ -n "${WI_RUN_DIR:-}" ] || [ -L "$RUN" ] || ! as_user test -w "$RUN/." -a -x "$RUN/."; then
		home="$(getent passwd "$RUN_USER" | cut -d: -f6)"
		RUN="${WI_RUN_DIR:-$home/webhook_inbox-run/$(basename "$ROOT")-$(echo "$ROOT" | cksum | cut -d' ' -f1)}"
		mkdir -p "$RUN"
		chown "$RUN_USER" "$RUN"
		chmod 700 "$RUN"
		if [ ! -L "$ROOT/.run" ] && rmdir "$ROOT/.run" 2>/dev/null; then
			ln -s "$RUN" "$ROOT/.run"
		fi
		as_user test -w "$RUN/." || { echo "error: $RUN_USER cannot write $RUN: set WI_RUN_DIR to a directory it can" >&2; exit 1; }
		echo "the cluster's data: $RUN ($RUN_USER cannot reach $ROOT/.run)"
	fi
else
	mkdir -p "$RUN"
fi
# the cluster's commands, run in its directory (the checkout may be out of reach)
pg_user() { (cd "$RUN" && as_user "$@"); }

# Ctrl-C (or any exit) stops what was started; once stopping, further
# Ctrl-Cs are ignored until everything has stopped.
PIDS=()
cleanup()
{
	trap - EXIT
	trap '' INT TERM
	echo
	echo "stopping..."
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do
		for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	pg_user pg_ctl -D "$RUN/data" -m fast -w stop >/dev/null 2>&1 || true
	echo "stopped (the cluster and its data stay in $RUN; make run starts them again)"
}
trap cleanup INT TERM EXIT

if [ ! -f "$RUN/data/PG_VERSION" ]; then
	pg_user initdb -D "$RUN/data" -A trust -U postgres >/dev/null
	cat >> "$RUN/data/postgresql.conf" <<CONF
port = $PGPORT
listen_addresses = '127.0.0.1'
unix_socket_directories = '$RUN'
shared_preload_libraries = 'webhook_inbox'
webhook_inbox.database = 'postgres'
webhook_inbox.sweep_interval = '60s'
webhook_inbox.sweep_overlap = '10s'
CONF
fi
# A rebuilt library or install script since the last run: the preloaded
# library needs a restart, and the extension is created afresh (the demo's
# data is regenerated below anyway).
BUILD_SUM="$(cat webhook_inbox.so sql/webhook_inbox--*.sql | md5sum | cut -d' ' -f1)"
CHANGED=0
[ "$(cat "$RUN/build.md5" 2>/dev/null)" = "$BUILD_SUM" ] || CHANGED=1
if pg_user pg_ctl -D "$RUN/data" status >/dev/null 2>&1; then
	[ "$CHANGED" = 1 ] && pg_user pg_ctl -D "$RUN/data" -l "$RUN/postgres.log" -w -m fast restart >/dev/null
else
	pg_user pg_ctl -D "$RUN/data" -l "$RUN/postgres.log" -w start >/dev/null
fi
PSQL=(psql -X -q -h "$RUN" -p "$PGPORT" -U postgres -d postgres -v ON_ERROR_STOP=1)
if [ "$CHANGED" = 1 ]; then
	"${PSQL[@]}" -c "SET client_min_messages = warning" -c "DROP EXTENSION IF EXISTS webhook_inbox CASCADE"
fi
"${PSQL[@]}" -c "SET client_min_messages = warning" -c "CREATE EXTENSION IF NOT EXISTS webhook_inbox"
echo "$BUILD_SUM" > "$RUN/build.md5"
# A read's 404 is a tombstone once a second read confirms it, this long
# after the first (60 s by default; the demo's stream lasts about a minute)
"${PSQL[@]}" -c "ALTER SYSTEM SET webhook_inbox.tombstone_confirm_delay = '2s'" -c "SELECT pg_reload_conf()" >/dev/null

if [ "${WI_SETUP_ONLY:-}" = 1 ]; then
	trap - INT TERM EXIT
	echo "PostgreSQL with webhook_inbox: psql -h 127.0.0.1 -p $PGPORT -U postgres"
	exit 0
fi

# The demo sources point at the simulator's read API; the receiver logs in as
# a role that may only call intake() and read its sources.
"${PSQL[@]}" <<SQL
DO \$\$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM webhook_inbox.sources WHERE name = 'demo-stripe') THEN
		PERFORM webhook_inbox.create_source('demo-stripe', 'stripe', '$STRIPE_SECRET',
			api_base => 'http://127.0.0.1:$SIM_PORT', api_token => 'sk_demo');
	END IF;
	IF NOT EXISTS (SELECT 1 FROM webhook_inbox.sources WHERE name = 'demo-shop') THEN
		PERFORM webhook_inbox.create_source('demo-shop', 'shopify', '$SHOP_SECRET',
			api_base => 'http://127.0.0.1:$SIM_PORT', api_token => 'sk_demo');
	END IF;
	UPDATE webhook_inbox.sources SET api_base = 'http://127.0.0.1:$SIM_PORT'
	 WHERE name IN ('demo-stripe', 'demo-shop');
	-- a Stripe Connect platform: one endpoint for its connected accounts
	IF NOT EXISTS (SELECT 1 FROM webhook_inbox.sources WHERE name = 'demo-connect') THEN
		PERFORM webhook_inbox.create_source('demo-connect', 'stripe', '$CONNECT_SECRET',
			api_base => 'http://127.0.0.1:$CONNECT_SIM_PORT', api_token => 'sk_demo',
			settings => '{"connect": true}');
	END IF;
	UPDATE webhook_inbox.sources SET api_base = 'http://127.0.0.1:$CONNECT_SIM_PORT' WHERE name = 'demo-connect';
END
\$\$;
-- each run starts the demo afresh: the provider's truth is regenerated from the seed
DO \$\$
DECLARE
	ids integer[] := ARRAY(SELECT id FROM webhook_inbox.sources WHERE name IN ('demo-stripe', 'demo-shop', 'demo-connect'));
	t text;
BEGIN
	FOREACH t IN ARRAY ARRAY['repairs', 'sweep_runs', 'sweep_checkpoints', 'effects', 'transitions',
							 'occurrences', 'object_leases', 'objects', 'deliveries', 'inbox', 'tenants'] LOOP
		IF to_regclass('webhook_inbox.' || t) IS NOT NULL THEN
			EXECUTE format('DELETE FROM webhook_inbox.%I WHERE source_id = ANY (\$1)', t) USING ids;
		END IF;
	END LOOP;
	IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'demo_receiver') THEN
		CREATE ROLE demo_receiver LOGIN IN ROLE webhook_inbox_receiver;
	END IF;
END
\$\$;
SQL

receiver/webhook-receiver --db "host=$RUN port=$PGPORT user=demo_receiver dbname=postgres" \
	--listen "127.0.0.1:$PORT" --admin-listen "127.0.0.1:$ADMIN_PORT" --log-level warning \
	> "$RUN/receiver.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do
	curl -fsS "http://127.0.0.1:$ADMIN_PORT/readyz" >/dev/null 2>&1 && break
	sleep 0.1
done
curl -fsS "http://127.0.0.1:$ADMIN_PORT/readyz" >/dev/null || { echo "receiver did not become ready; see $RUN/receiver.log"; exit 1; }

tools/webhook-sim serve --listen "127.0.0.1:$SIM_PORT" --seed "$SEED" --objects "$OBJECTS" \
	--events "$EVENTS" --stripe "demo-stripe:$STRIPE_SECRET" --shopify "demo-shop:$SHOP_SECRET" \
	--types "$STRIPE_TYPES,order" \
	--api-token sk_demo --deliver-to "http://127.0.0.1:$PORT" --duplicate "$DUPLICATE" \
	--drop "$DROP" --reorder-ms "$REORDER_MS" --rate "$RATE" --retry-base-ms 200 \
	> "$RUN/sim.log" 2>&1 &
PIDS+=($!)
SIM="http://127.0.0.1:$SIM_PORT"
for _ in $(seq 1 100); do
	curl -fsS "$SIM/_sim/status" >/dev/null 2>&1 && break
	sleep 0.1
done
# the Connect platform: its accounts' objects readable only under their Stripe-Account
tools/webhook-sim serve --listen "127.0.0.1:$CONNECT_SIM_PORT" --seed "$SEED" --objects $((OBJECTS / 2)) \
	--events $((EVENTS / 2)) --stripe "demo-connect:$CONNECT_SECRET" --types "$CONNECT_TYPES" \
	--connect-accounts "$CONNECT_ACCOUNTS" --api-token sk_demo --deliver-to "http://127.0.0.1:$PORT" \
	--duplicate "$DUPLICATE" --drop "$DROP" --reorder-ms "$REORDER_MS" --rate "$RATE" --retry-base-ms 200 \
	> "$RUN/sim-connect.log" 2>&1 &
PIDS+=($!)
CSIM="http://127.0.0.1:$CONNECT_SIM_PORT"
for _ in $(seq 1 100); do
	curl -fsS "$CSIM/_sim/status" >/dev/null 2>&1 && break
	sleep 0.1
done

cat <<MSG
webhook_inbox demo: $EVENTS events over $OBJECTS objects, seed $SEED,
chaos: duplicate $DUPLICATE, drop $DROP, reorder up to ${REORDER_MS} ms.
  receiver  http://127.0.0.1:$PORT/hooks/{source}   (metrics: http://127.0.0.1:$ADMIN_PORT/metrics)
  provider  $SIM  (webhook-sim)
  Connect   $CSIM  (webhook-sim: a platform with $CONNECT_ACCOUNTS connected accounts)
  database  psql -h 127.0.0.1 -p $PGPORT -U postgres
MSG

json_field() { sed -n "s/.*\"$1\":\([a-z0-9]*\).*/\1/p"; }
progress()
{
	local st q
	st="$(curl -fsS "$SIM/_sim/status" 2>/dev/null || echo '{}')"
	q="$("${PSQL[@]}" -At -F' ' -c "SELECT
		(SELECT count(*) FROM webhook_inbox.inbox WHERE status IN ('done', 'ignored')),
		(SELECT count(*) FROM webhook_inbox.inbox WHERE status IN ('pending', 'processing', 'retry')),
		(SELECT coalesce(sum(fetched), 0) FROM webhook_inbox.worker_stats()),
		(SELECT coalesce(sum(repaired), 0) FROM webhook_inbox.sweep_runs)")"
	set -- $q
	LINE="delivered $(echo "$st" | json_field delivered) acknowledged $(echo "$st" | json_field acked) dropped $(echo "$st" | json_field dropped) | processed $1 waiting $2 fetched $3 repaired $4"
	DONE="$(echo "$st" | json_field done)"
	# every generated event was sent (duplicates aside) or deliberately dropped
	local gen sent dup drop
	gen="$(echo "$st" | json_field generated)"; sent="$(echo "$st" | json_field delivered)"
	dup="$(echo "$st" | json_field duplicated)"; drop="$(echo "$st" | json_field dropped)"
	if [ $(( ${sent:-0} - ${dup:-0} + ${drop:-0} )) -lt "${gen:-1}" ]; then
		DONE=false
	fi
	WAITING="$2"
}

TTY=0
[ -t 1 ] && TTY=1
last=0
while :; do
	progress
	if [ "$TTY" = 1 ]; then
		printf '\r%-100s' "$LINE"
	elif [ $((SECONDS - last)) -ge 2 ]; then
		echo "$LINE"
		last=$SECONDS
	fi
	[ "$DONE" = true ] && [ "$WAITING" = 0 ] && break
	sleep 0.5
done
[ "$TTY" = 1 ] && echo
for _ in $(seq 1 600); do
	curl -fsS "$CSIM/_sim/status" 2>/dev/null | grep -q '"done":true' && break
	sleep 0.5
done

# what the network lost on the way, by the kind of change
st="$(curl -fsS "$SIM/_sim/status")"
dropped_of() { echo "$st" | grep -o "\"$1[^\"]*\":[0-9]*" | awk -F: '{ n += $NF } END { print n + 0 }'; }
echo "stream delivered; dropped on the way (never sent; only a sweep can repair them):"
echo "  PaymentIntent events $(dropped_of payment_intent.), canceled subscriptions $(dropped_of customer.subscription.deleted)," \
	"other subscription events $(( $(dropped_of customer.subscription.) - $(dropped_of customer.subscription.deleted) )),"
echo "  refund events $(dropped_of refund.), invoice events $(dropped_of invoice.), dispute events $(dropped_of charge.dispute.)," \
	"order events $(dropped_of orders/)"
echo "sweeping: Stripe's events API (incremental), then every object (full)..."
"${PSQL[@]}" -At -F' ' -c "SELECT v.s || ' ' || v.t || ' ' || l.layer || ': listed ' || r.listed || ', repaired ' || r.repaired
	FROM (VALUES ('demo-stripe', 'subscription', 1), ('demo-stripe', 'invoice', 2), ('demo-stripe', 'payment_intent', 3),
				 ('demo-stripe', 'refund', 4), ('demo-stripe', 'dispute', 5), ('demo-shop', 'order', 6)) v(s, t, n),
		 (VALUES ('incremental', 1), ('full', 2)) l(layer, k),
		 LATERAL webhook_inbox.sweep_now(v.s, v.t, l.layer) r
	WHERE NOT (v.s = 'demo-shop' AND l.layer = 'incremental')
	ORDER BY l.k, v.n" | sed 's/^/  /'
echo "Connect platform: its accounts, from GET /v1/accounts, each swept under its Stripe-Account..."
"${PSQL[@]}" -At -c "SELECT webhook_inbox.discover_tenants('demo-connect')" > /dev/null
"${PSQL[@]}" -At -F' ' <<SQL | sed 's/^/  /'
CREATE TEMP TABLE demo_passes AS
SELECT t.tenant, r.object_type, r.layer, r.status, coalesce(r.incomplete_reason, r.error) AS reason
  FROM webhook_inbox.tenants t JOIN webhook_inbox.sources s ON s.id = t.source_id AND s.name = 'demo-connect',
	   unnest(string_to_array('$CONNECT_TYPES', ',')) ty, unnest(ARRAY['incremental', 'full']) l,
	   LATERAL webhook_inbox.sweep_now('demo-connect', ty, l, t.tenant) r
 WHERE t.status = 'active';
SELECT count(*) FILTER (WHERE status = 'complete') || ' of ' || count(*) || ' passes complete' FROM demo_passes;
SELECT '  ' || tenant || ' ' || object_type || ' ' || layer || ': ' || status || coalesce(' (' || reason || ')', '')
  FROM demo_passes WHERE status <> 'complete' ORDER BY 1;
SQL
# The objects a full sweep did not find and read by id as 404 are deleted
# once a second read confirms it (tombstone_confirm_delay later): one more
# pass of what is pending
PENDING="SELECT s.name, o.object_type, o.tenant FROM webhook_inbox.objects o
	JOIN webhook_inbox.sources s ON s.id = o.source_id
	WHERE o.tombstone_pending_since IS NOT NULL AND s.name IN ('demo-stripe', 'demo-shop', 'demo-connect')
	GROUP BY 1, 2, 3"
for _ in 1 2 3; do
	[ "$("${PSQL[@]}" -At -c "SELECT count(*) FROM ($PENDING) p")" = 0 ] && break
	for _ in $(seq 1 100); do
		[ "$("${PSQL[@]}" -At -c "SELECT coalesce(max(tombstone_pending_since) < now() -
			current_setting('webhook_inbox.tombstone_confirm_delay')::interval - interval '0.2 s', true)
			FROM webhook_inbox.objects")" = t ] && break
		sleep 0.1
	done
	echo "confirming what a full sweep read as gone: a second read, tombstone_confirm_delay after the first..."
	"${PSQL[@]}" -At -F' ' -c "SELECT p.name || ' ' || p.object_type || coalesce(' ' || nullif(p.tenant, ''), '')
			|| ': listed ' || r.listed || ', repaired ' || r.repaired
		FROM ($PENDING) p(name, object_type, tenant),
			 LATERAL webhook_inbox.sweep_now(p.name, p.object_type, 'full', p.tenant) r ORDER BY 1" | sed 's/^/  /'
done
# repairs may enqueue work of their own: let the worker finish it
for _ in $(seq 1 200); do
	w="$("${PSQL[@]}" -At -c "SELECT count(*) FROM webhook_inbox.inbox WHERE status IN ('pending', 'processing', 'retry')")"
	[ "$w" = 0 ] && break
	sleep 0.2
done
progress
echo "$LINE"
echo "repaired (by the sweeps and by fetches of later events), per object type:"
"${PSQL[@]}" -At -F' ' -c "SELECT '  ' || r.object_type || ': ' || count(*) || ' (' ||
		count(*) FILTER (WHERE r.before IS NULL OR r.before->>'status' IS NULL) || ' missing from the mirror, ' ||
		count(*) FILTER (WHERE r.before->>'status' IS NOT NULL) || ' with another status)'
	FROM webhook_inbox.repairs r JOIN webhook_inbox.sources s ON s.id = r.source_id
	WHERE s.name IN ('demo-stripe', 'demo-shop') GROUP BY r.object_type ORDER BY 1"

echo "per connected account: deliveries dropped on the way, and repaired:"
"${PSQL[@]}" -At -F' ' -v st="$(curl -fsS "$CSIM/_sim/status")" <<'SQL' | sed 's/^/  /'
SELECT t.tenant || ': dropped ' || coalesce((:'st'::jsonb -> 'dropped_accounts' ->> t.tenant)::int, 0)
	   || ', repaired ' || (SELECT count(*) FROM webhook_inbox.repairs r
							 WHERE r.source_id = t.source_id AND r.tenant = t.tenant)
	   || ', objects ' || (SELECT count(*) FROM webhook_inbox.objects o
							WHERE o.source_id = t.source_id AND o.tenant = t.tenant)
  FROM webhook_inbox.tenants t JOIN webhook_inbox.sources s ON s.id = t.source_id
 WHERE s.name = 'demo-connect' ORDER BY t.tenant;
SQL

ok=1
if tools/webhook-sim verify --db "host=$RUN port=$PGPORT user=postgres dbname=postgres" \
	--source demo-connect --api "$CSIM" > "$RUN/verify-demo-connect.txt" 2>&1; then
	echo "verify demo-connect: every account's mirror equals its truth ($(tail -n 1 "$RUN/verify-demo-connect.txt"))"
else
	ok=0
	echo "verify demo-connect: DIFFERENCES"
	head -n 20 "$RUN/verify-demo-connect.txt"
fi
for s in demo-stripe demo-shop; do
	if tools/webhook-sim verify --db "host=$RUN port=$PGPORT user=postgres dbname=postgres" \
		--source "$s" --api "$SIM" > "$RUN/verify-$s.txt" 2>&1; then
		echo "verify $s: the mirror equals the provider's truth ($(tail -n 1 "$RUN/verify-$s.txt"))"
	else
		ok=0
		echo "verify $s: DIFFERENCES"
		head -n 20 "$RUN/verify-$s.txt"
	fi
done
[ "$ok" = 1 ] && echo "converged: duplicates, reordering and drops made no difference."

cat <<MSG

The receiver keeps serving on http://127.0.0.1:$PORT. To add a real provider:
  psql -h 127.0.0.1 -p $PGPORT -U postgres -c \\
    "SELECT webhook_inbox.create_source('stripe-live', 'stripe', 'whsec_…', api_base => 'https://api.stripe.com', api_token => 'sk_…')"
then point the provider's webhook endpoint at https://<your host>/hooks/stripe-live
(behind TLS: run webhook-receiver with --tls-cert/--tls-key, or a TLS proxy).
Press Ctrl-C to stop everything.
MSG

# the simulator has finished its stream; keep the receiver in the foreground
wait "${PIDS[0]}"
