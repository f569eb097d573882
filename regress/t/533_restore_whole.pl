# 533_restore_whole.pl
#	A dump restores whole.  A database with every kind of row (Stripe
#	Connect tenants with their statuses, occurrences, Shopify compliance
#	requests and redactions, effects with attempts and resolutions, sealed
#	credentials, replay digests, edited presets, requeues, reconciliation
#	passes and repairs) is dumped with pg_dump -Fc and as plain SQL; each is
#	restored into a new database (pg_restore, psql) and every table of the
#	extension is compared with the original row for row, every sequence by
#	its position: the restore exits 0 and nothing differs (the copy's own
#	installation row aside).  Every table of the extension is either
#	registered with pg_extension_config_dump() or declared derived by
#	_derived_tables(): a table in neither fails here.  No trigger re-runs
#	business logic while the dump loads (a compliance handler would write
#	the data request again, a transition its effect).

use strict;
use warnings;

use lib 'regress/t';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run ();
use WorkerTest;
use SimTest qw(tmpdir);

my $dir = tmpdir();
my $key = "$dir/inbox.key";
open(my $fh, '>', $key) or die "$key: $!";
print $fh '0f1e2d3c4b5a69788796a5b4c3d2e1f0' x 2, "\n";
close $fh;
chmod 0600, $key or die;

# the worker off: the rows stay as written (its claims, its waiting fetches)
my $node = worker_node('whole', qq{
webhook_inbox.enabled = off
webhook_inbox.key_file = '$key'
});

$node->safe_psql('postgres', <<'SQL');
SET client_min_messages = warning;
-- a Stripe Connect platform, a Shopify app, a GitHub source; secrets sealed under the key file
SELECT webhook_inbox.create_source('platform', 'stripe', 'whsec_r533', api_base => 'http://127.0.0.1:9',
	api_token => 'sk_test_r533');
SELECT webhook_inbox.create_source('shopapp', 'shopify', 'shpss_r533', settings => '{"tenants": true}');
SELECT webhook_inbox.create_source('gh', 'github', 'gh_r533');
-- routes of the user's: the connected accounts' payments and refunds are occurrences
INSERT INTO webhook_inbox.routes (source_id, event_type, class, strategy, object_type,
	object_id_path, amount_path, currency_path, priority)
SELECT id, 'payment_intent.succeeded', 'occurrence', 'occurrence', 'payment', '$.data.object.id',
	'$.data.object.amount', '$.data.object.currency', 50 FROM webhook_inbox.sources WHERE name = 'platform';
INSERT INTO webhook_inbox.routes (source_id, event_type, class, strategy, object_type,
	object_id_path, amount_path, currency_path, priority)
SELECT id, 'charge.refunded', 'occurrence', 'occurrence', 'refund', '$.data.object.id',
	'$.data.object.amount_refunded', '$.data.object.currency', 50 FROM webhook_inbox.sources WHERE name = 'platform';
-- edited presets: a route and a queue owner (each becomes a row of the user's)
UPDATE webhook_inbox.routes SET priority = 90 WHERE preset AND source_kind = 'stripe' AND event_type = 'invoice.*';
UPDATE webhook_inbox.queue_owners SET owner = 'finance' WHERE preset AND queue = 'failed_sweep';
-- a machine of the user's and an effect rule on its transitions
INSERT INTO webhook_inbox.machines (machine, from_state, to_state)
VALUES ('r533_ticket', 'unknown', 'open'), ('r533_ticket', 'open', 'closed');
INSERT INTO webhook_inbox.effect_rules (object_type, from_status, to_status, kind, request, owner)
VALUES ('ticket', 'open', 'closed', 'http', '{"method": "POST", "path": "/v1/tickets/{{object_id}}/close"}', 'operations');

CREATE FUNCTION pg_temp.evt(id text, acct text, typ text, obj text) RETURNS bytea LANGUAGE sql AS $$
	SELECT convert_to(format('{"id":"%s","object":"event","account":"%s","type":"%s","created":1767225600,"data":{"object":%s}}',
		id, acct, typ, obj), 'UTF8')
$$;
-- 13 occurrences over three connected accounts; subscriptions waiting for a fetch
SELECT webhook_inbox.intake('platform', '{}', pg_temp.evt('evt_pay' || i, 'acct_' || (i % 3 + 1), 'payment_intent.succeeded',
	format('{"id":"pi_%s","amount":%s,"currency":"eur","status":"succeeded"}', i, i * 100)))
  FROM generate_series(1, 9) i;
SELECT webhook_inbox.intake('platform', '{}', pg_temp.evt('evt_ref' || i, 'acct_' || (i % 3 + 1), 'charge.refunded',
	format('{"id":"ch_%s","amount_refunded":%s,"currency":"eur"}', i, i * 10)))
  FROM generate_series(1, 4) i;
SELECT webhook_inbox.intake('platform', '{}', pg_temp.evt('evt_sub' || i, 'acct_1', 'customer.subscription.updated',
	format('{"id":"sub_%s","status":"active"}', i)))
  FROM generate_series(1, 3) i;
-- a shop of the app: a customer, an order, then Shopify's compliance webhooks
SELECT webhook_inbox.intake('shopapp', ARRAY['x-shopify-webhook-id', 'w-c1', 'x-shopify-topic', 'customers/update',
	'x-shopify-shop-domain', 'one.myshopify.com'],
	convert_to('{"id": 55, "email": "y@example.com", "state": "enabled", "updated_at": "2026-01-01T00:00:00Z"}', 'UTF8'));
SELECT webhook_inbox.intake('shopapp', ARRAY['x-shopify-webhook-id', 'w-o1', 'x-shopify-topic', 'orders/updated',
	'x-shopify-shop-domain', 'one.myshopify.com'],
	convert_to('{"id": 4501, "customer": {"id": 66, "email": "z@example.com"}, "updated_at": "2026-01-01T00:00:00Z"}', 'UTF8'));
SELECT webhook_inbox.intake('shopapp', ARRAY['x-shopify-webhook-id', 'w-dr', 'x-shopify-topic', 'customers/data_request',
	'x-shopify-shop-domain', 'one.myshopify.com'],
	convert_to('{"shop_id": 1, "shop_domain": "one.myshopify.com", "customer": {"id": 55, "email": "y@example.com"},
		"orders_requested": [], "data_request": {"id": 77}}', 'UTF8'));
SELECT webhook_inbox.intake('shopapp', ARRAY['x-shopify-webhook-id', 'w-cr', 'x-shopify-topic', 'customers/redact',
	'x-shopify-shop-domain', 'one.myshopify.com'],
	convert_to('{"shop_id": 1, "shop_domain": "one.myshopify.com", "customer": {"id": 66, "email": "z@example.com"},
		"orders_to_redact": [4501]}', 'UTF8'));
-- the worker's local work, as its cycle runs it: occurrences, the mirror, the compliance handlers
SELECT count(*) FROM webhook_inbox._work_local(100);
-- an unreadable delivery, quarantined, and a requeue batch naming an event
SELECT webhook_inbox.intake('gh', ARRAY['x-github-delivery', 'd-1', 'x-github-event', 'issues'], '\xff00');
SELECT count(*) FROM webhook_inbox.requeue_where(source => 'gh', dry_run => false, note => 'r533');
INSERT INTO webhook_inbox.requeues (event_id, previous_status, previous_reason, note, batch_id)
SELECT i.id, 'quarantined', 'http 500', 'r533', b.id FROM webhook_inbox.inbox i, webhook_inbox.requeue_batches b
 WHERE i.event_id = 'evt_sub3';
-- transitions; the second fires its effect, attempted once with an unknown outcome
SELECT webhook_inbox.apply_transition('gh', 'ticket', 't-1', 'r533_ticket', 'open');
SELECT webhook_inbox.apply_transition('gh', 'ticket', 't-1', 'r533_ticket', 'closed');
INSERT INTO webhook_inbox.effect_attempts (effect_id, claim_token, action, finished_at, outcome, error)
SELECT id, nextval('webhook_inbox.claim_token_seq'), 'submit', now(), 'uncertain', 'timeout' FROM webhook_inbox.effects;
UPDATE webhook_inbox.effects SET status = 'uncertain', attempts = 1, uncertain_since = now();
-- an effect a person resolved
SELECT webhook_inbox.request_effect('r533:manual', 'http', '{"method": "POST", "path": "/v1/refunds", "body": {"amount": 5}}',
	source => 'platform', owner => 'finance', tenant => 'acct_1');
UPDATE webhook_inbox.effects SET status = 'quarantined', reason = 'r533' WHERE effect_key = 'r533:manual';
SELECT webhook_inbox.resolve_effect(id, 'failed', 'refused by the customer') FROM webhook_inbox.effects
 WHERE effect_key = 'r533:manual';
-- the tenants' statuses: a deauthorized account, one whose reads were refused; a shop's sealed token
UPDATE webhook_inbox.tenants SET status = 'disabled', reason = 'deauthorized' WHERE tenant = 'acct_2';
UPDATE webhook_inbox.tenants SET status = 'flagged', reason = 'http 401' WHERE tenant = 'acct_3';
SELECT webhook_inbox.set_tenant_credentials('shopapp', 'one.myshopify.com', 'shopify_shop', 'shpat_r533');
-- a claim held on an object waiting for its fetch
SELECT count(*) FROM webhook_inbox.claim('r533-worker', 1, '1 hour', '0');
-- a reconciliation pass of a connected account with a repair, and its checkpoint
INSERT INTO webhook_inbox.sweep_runs (source_id, object_type, trigger, finished_at, pages, listed, differences,
	repaired, status, layer, tenant)
SELECT id, 'subscription', 'manual', now(), 1, 3, 1, 1, 'complete', 'full', 'acct_1'
  FROM webhook_inbox.sources WHERE name = 'platform';
INSERT INTO webhook_inbox.repairs (run_id, source_id, object_type, object_id, after, outcome, tenant)
SELECT r.id, r.source_id, 'subscription', 'sub_1', '{"id": "sub_1", "status": "active"}', 'inserted', 'acct_1'
  FROM webhook_inbox.sweep_runs r;
INSERT INTO webhook_inbox.sweep_checkpoints (source_id, object_type, checkpoint, last_run_id, layer, tenant)
SELECT r.source_id, 'subscription', now(), r.id, 'full', 'acct_1' FROM webhook_inbox.sweep_runs r;
SQL

# what the issue saw lost: the figures of the original
is($node->safe_psql('postgres', 'SELECT count(*) FROM webhook_inbox.occurrences'), '15',
	'the original: 13 payments and refunds, 2 compliance requests recorded once');
is($node->safe_psql('postgres', "SELECT string_agg(tenant || ' ' || status, ', ' ORDER BY tenant) FROM webhook_inbox.tenants"),
	'acct_1 active, acct_2 disabled, acct_3 flagged, one.myshopify.com active', 'its tenants and their statuses');
is($node->safe_psql('postgres', 'SELECT (SELECT count(*) FROM webhook_inbox.data_requests) || \' \' || '
	  . '(SELECT count(*) FROM webhook_inbox.redactions)'), '1 1', 'a data request and a redaction');
like($node->safe_psql('postgres', "SELECT api_token FROM webhook_inbox.sources WHERE name = 'platform'"),
	qr/^wi-sealed:/, 'the API token is sealed');

# --- every table of the extension is dumped or declared derived
my %dumped = map { $_ => 1 } split /\n/, $node->safe_psql('postgres', q{
	SELECT c.relname FROM pg_extension e, unnest(e.extconfig) x(oid) JOIN pg_class c ON c.oid = x.oid
	 WHERE e.extname = 'webhook_inbox'});
my %derived = map { $_ => 1 } split /\n/,
  $node->safe_psql('postgres', 'SELECT table_name FROM webhook_inbox._derived_tables()');
my @tables = split /\n/, $node->safe_psql('postgres', q{
	SELECT c.relname FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
	 WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
	   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'webhook_inbox') AND c.relkind = 'r'
	 ORDER BY 1});
my @sequences = split /\n/, $node->safe_psql('postgres', q{
	SELECT c.relname FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
	 WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
	   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'webhook_inbox') AND c.relkind = 'S'
	 ORDER BY 1});
cmp_ok(scalar(@tables), '>=', 25, scalar(@tables) . ' tables in the extension');
my @neither = grep { !$dumped{$_} && !$derived{$_} } @tables, @sequences;
is("@neither", '', 'every table and sequence of the extension is dumped or declared derived');
my @both = grep { $dumped{$_} && $derived{$_} } @tables;
is("@both", '', 'none is both');
# every kind of row: each dumped table holds some, so that a comparison compares something
my @empty = grep {
	$dumped{$_} && $node->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.$_") eq '0'
} @tables;
is("@empty", '', 'every dumped table has rows in the original');

# the rows of a table as text, sorted; in a copy, the installation row that
# is the copy's own aside
sub table_rows
{
	my ($db, $table) = @_;
	my $where = $table eq 'installation' && $db ne 'postgres'
	  ? 'WHERE t.database_oid <> (SELECT oid FROM pg_database WHERE datname = current_database())' : '';
	return $node->safe_psql($db, "SET timezone = 'UTC'; SELECT t::text FROM webhook_inbox.$table t $where ORDER BY 1");
}

my %original = map { $_ => table_rows('postgres', $_) } grep { !$derived{$_} } @tables;
my %positions = map {
	$_ => $node->safe_psql('postgres', "SELECT last_value || ' ' || is_called FROM webhook_inbox.$_")
} @sequences;

sub compare_copy
{
	my ($db, $what) = @_;
	my @differ;
	for my $t (sort keys %original)
	{
		my $copy = table_rows($db, $t);
		next if $copy eq $original{$t};
		push @differ, $t;
		my %in_copy = map { $_ => 1 } split /\n/, $copy;
		my %in_orig = map { $_ => 1 } split /\n/, $original{$t};
		diag("$what: $t: missing " . join(' | ', grep { !$in_copy{$_} } split /\n/, $original{$t}));
		diag("$what: $t: extra " . join(' | ', grep { !$in_orig{$_} } split /\n/, $copy));
	}
	is("@differ", '', "$what: every table equal to the original, row for row");
	my @moved = grep {
		$node->safe_psql($db, "SELECT last_value || ' ' || is_called FROM webhook_inbox.$_") ne $positions{$_}
	} @sequences;
	is("@moved", '', "$what: every sequence where the original's was");
	is($node->safe_psql($db, 'SELECT count(*) FROM webhook_inbox.installation WHERE database_oid = '
		  . '(SELECT oid FROM pg_database WHERE datname = current_database())'), '1',
		"$what: the copy's own installation row beside the original's");
	like($node->safe_psql($db, 'SELECT paused FROM webhook_inbox.outbound_status'), qr/^t$/,
		"$what: outbound work paused in the copy");
}

# --- pg_dump -Fc, pg_restore into a new database
my $dump = "$dir/whole.dump";
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('postgres') ], 'pg_dump -Fc');
$node->safe_psql('postgres', 'CREATE DATABASE custom_copy');
my ($rc, $out, $err) = run_cmd([ 'pg_restore', '-d', $node->connstr('custom_copy'), $dump ]);
is($rc, 0, 'pg_restore exits 0');
is($err, '', 'and says nothing');
compare_copy('custom_copy', 'pg_restore');

# --- a plain SQL dump, restored by psql
my $script = "$dir/whole.sql";
$node->command_ok([ 'pg_dump', '-f', $script, '-d', $node->connstr('postgres') ], 'pg_dump (plain SQL)');
$node->safe_psql('postgres', 'CREATE DATABASE plain_copy');
($rc, $out, $err) = run_cmd([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('plain_copy'),
	'-f', $script ]);
is($rc, 0, 'psql -f of the plain dump exits 0');
unlike($err, qr/ERROR/, 'and reports no error');
compare_copy('plain_copy', 'plain SQL');

# the compliance handler runs as ever outside a restore: a second data request is recorded
$node->safe_psql('custom_copy', q{
	SELECT webhook_inbox.intake('shopapp', ARRAY['x-shopify-webhook-id', 'w-dr2', 'x-shopify-topic', 'customers/data_request',
		'x-shopify-shop-domain', 'one.myshopify.com'],
		convert_to('{"shop_id": 1, "shop_domain": "one.myshopify.com", "customer": {"id": 55}, "data_request": {"id": 78}}', 'UTF8'));
	SELECT count(*) FROM webhook_inbox._work_local(10)});
is($node->safe_psql('custom_copy', "SELECT string_agg(data_request_id, ',' ORDER BY id) FROM webhook_inbox.data_requests"),
	'77,78', 'in the restored copy, a new compliance webhook is still carried out');

sub run_cmd
{
	my ($cmd) = @_;
	my ($stdout, $stderr) = ('', '');
	IPC::Run::run($cmd, '>', \$stdout, '2>', \$stderr);
	return ($? >> 8, $stdout, $stderr);
}

done_testing();
