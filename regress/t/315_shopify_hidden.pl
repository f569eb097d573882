
# 315_shopify_hidden.pl
#	Hidden is not deleted.  A Shopify app without read_all_orders sees only
#	the orders created in the last 60 days: webhook-sim's shop of 40
#	orders, 10 of them created 61 to 400 days ago, answers order(id:) null
#	and never lists those, while their signed webhooks keep coming.  On a
#	shuffled stream (every webhook delivered) and after two full sweeps
#	every order equals the shop's, the old ones included, and none of them
#	is deleted: each is hidden (hidden_objects, sweep_health), known from
#	its payloads only; the same through fetch-on-notify, where an old
#	order's null is answered by applying its newest payload by version.
#	On a holed stream no old order is deleted and every recent one equals
#	the shop's.  The source asks its access scopes once
#	(currentAppInstallation { accessScopes { handle } }); with
#	read_all_orders granted the holed stream converges with no difference.
#	Last, a tombstone a read inferred (a recent order the shop no longer
#	has, read twice) yields to a newer signed webhook (revived), while an
#	orders/delete tombstone stays final.

use strict;
use warnings;

use lib 'regress/t';
use PostgreSQL::Test::Utils;
use Test::More;
use WorkerTest;

my $node = worker_node('shopify_hidden', "webhook_inbox.fetch_concurrency = 4\n");
my $rcv;
my $tmp = PostgreSQL::Test::Utils::tempdir;

sub q1 { return $node->safe_psql('postgres', $_[0]) }

sub counters
{
	my ($sim) = @_;
	my ($st, $doc) = http_json('GET', "$sim->{url}/_sim/counters");
	return $doc;
}

# a full sweep's 404 is a tombstone only once a second read confirms it
sub sweep_settled
{
	my ($name, $what) = @_;
	my ($run, $left) = settle_tombstones($node, $name, 'order');
	ok($run =~ /^complete/ && $left eq '0', "$what: a full sweep settled ($run, $left unconfirmed)");
}

sub deleted_old
{
	my ($name) = @_;
	return q1(qq{SELECT count(*) FROM webhook_inbox.objects o JOIN webhook_inbox.sources s ON s.id = o.source_id
		WHERE s.name = '$name' AND o.deleted AND o.object_id IN (SELECT unnest('{@{[ join(',', @_[1..$#_]) ]}}'::text[]))});
}

my @scenario = ('--seed', 41, '--objects', '40', '--events', '320', '--epoch', time(), '--shopify-old-orders', '10');
my $rec = "$tmp/stream.jsonl";
my %sim;
my %mode = (shuf => 'shuffled', fetch => 'shuffled', holed => 'holed', all => 'holed');
for my $m (qw(shuf fetch holed all))
{
	$sim{$m} = start_sim(@scenario, '--shopify', "h_$m:shpss_$m",
		($m eq 'shuf' ? ('--record', $rec) : ()),
		($m eq 'all' ? ('--shopify-scopes', 'read_orders,read_all_orders') : ()));
	add_source($node, "h_$m", 'shopify', "shpss_$m", $sim{$m}{url});
}
# fetch-on-notify for h_fetch: orders/* read by gid, orders/delete still the deletion it says it is
q1(q{INSERT INTO webhook_inbox.routes (source_id, event_type, class, object_type, strategy, object_id_path, priority)
	 SELECT id, 'orders/*', 'state', 'order', 'fetch', '$.id', 200 FROM webhook_inbox.sources WHERE name = 'h_fetch'});
q1(q{INSERT INTO webhook_inbox.routes (source_id, event_type, class, object_type, strategy, object_id_path,
		version_path, tombstone, priority)
	 SELECT id, 'orders/delete', 'state', 'order', 'version', '$.id', '$.updated_at', true, 210
	   FROM webhook_inbox.sources WHERE name = 'h_fetch'});
$rcv = start_receiver($node);

my $truth = sim_truth($sim{shuf});
my @orders = grep { $_->{type} eq 'order' } @{ $truth->{objects} };
is(scalar(@orders), 40, 'the shop has 40 orders');

for my $m (qw(shuf fetch holed all))
{
	my ($rc, $out, $err) = run_sim('replay', '--file', $rec, '--mode', $mode{$m}, '--to', $rcv->{url},
		'--seed', 3, '--shopify', "h_$m:shpss_$m");
	is($rc, 0, "$m: replay answered 2xx throughout") or diag("$out $err");
	wait_drained($node, $m);
}

# the old orders, by what their webhooks said (every one was delivered to h_shuf)
my @old = split /\n/, q1(q{SELECT o.object_id FROM webhook_inbox.objects o JOIN webhook_inbox.sources s ON s.id = o.source_id
	WHERE s.name = 'h_shuf' AND (o.state ->> 'created_at')::timestamptz < now() - interval '60 days' ORDER BY 1});
is(scalar(@old), 10, '10 orders were created more than 60 days ago: ' . join(' ', @old));
# the shop deleted some of them (orders/delete): those, and only those, are deleted in the mirror
my %gone = map { $_->{id} => 1 } grep { $_->{deleted} } @orders;
my $old_gone = grep { $gone{$_} } @old;
my $old_live = @old - $old_gone;
cmp_ok($old_live, '>', 0, "$old_live of the old orders still exist in the shop");
my ($st, $one) = http_json('POST', "$sim{shuf}{url}/admin/api/2026-10/graphql.json",
	{ headers => { 'Content-Type' => 'application/json' },
	  content => '{"query":"query { order(id: \\"gid://shopify/Order/' . $old[0] . '\\") { id } }"}' });
ok($st == 200 && exists $one->{data}{order} && !defined $one->{data}{order},
	'webhook-sim answers order(id:) null for an old order without read_all_orders');

# --- shuffled, every webhook delivered: two full sweeps, nothing old deleted, every order the shop's
for my $m (qw(shuf fetch))
{
	sweep_settled("h_$m", "$m first");
	sweep_settled("h_$m", "$m second");
	is(deleted_old("h_$m", grep { !$gone{$_} } @old), '0',
		"$m: none of the $old_live old orders the shop has is deleted after two full sweeps");
	is(deleted_old("h_$m", grep { $gone{$_} } @old), $old_gone, "$m: the $old_gone the shop deleted are deleted");
	verify_source($node, "h_$m", $sim{$m}, "$m after two full sweeps");
	is(q1("SELECT count(*) FROM webhook_inbox.hidden_objects WHERE source = 'h_$m' AND known_from = 'payloads'"),
		$old_live, "$m: the $old_live old orders are hidden, known from their payloads");
	like(q1("SELECT hidden_reason FROM webhook_inbox.hidden_objects WHERE source = 'h_$m' LIMIT 1"),
		qr/^age: created .*, more than 60 days ago, and the source (?:does not hold|has not been told it holds) read_all_orders$/,
		"$m: the reason names the horizon");
	is(q1("SELECT hidden || ' ' || (hidden_share = round(hidden::numeric / (SELECT count(*) FROM webhook_inbox.objects o "
		  . "JOIN webhook_inbox.sources s ON s.id = o.source_id WHERE s.name = 'h_$m' AND NOT o.deleted), 4)) "
		  . "FROM webhook_inbox.sweep_health WHERE source = 'h_$m' AND object_type = 'order'"),
		"$old_live true",
		"$m: sweep_health counts them");
	is(q1("SELECT count(*) FROM webhook_inbox.repairs r JOIN webhook_inbox.sources s ON s.id = r.source_id "
		  . "WHERE s.name = 'h_$m' AND r.outcome = 'tombstone' AND r.object_id = ANY ('{" . join(',', @old) . "}')"),
		'0', "$m: no tombstone repair of an old order");
	is(q1("SELECT count(*) FROM webhook_inbox.transitions t JOIN webhook_inbox.sources s ON s.id = t.source_id "
		  . "WHERE s.name = 'h_$m' AND t.to_status = 'deleted' AND t.object_id = ANY ('{" . join(',', @old) . "}') "
		  . "AND t.cause NOT LIKE 'event%'"),
		'0', "$m: no transition of an old order to deleted but a deletion event's");
	is(counters($sim{$m})->{access_scope_queries}, 1, "$m: the access scopes were asked once");
	is(q1("SELECT array_to_string(c.scopes, ',') FROM webhook_inbox.source_scopes c JOIN webhook_inbox.sources s "
		  . "ON s.id = c.source_id WHERE s.name = 'h_$m'"), 'read_orders', "$m: source_scopes holds read_orders");
}
cmp_ok(q1("SELECT count(*) FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id "
		  . "WHERE s.name = 'h_fetch' AND i.reason = 'fetched: applied' "
		  . "AND i.object_id = ANY ('{" . join(',', grep { !$gone{$_} } @old) . "}')"), '>', 0,
	'fetch: the old orders\' payloads were applied when their fetch answered null');

# --- holed: no old order deleted, every recent one equal to the shop's
sweep_settled('h_holed', 'holed first');
sweep_settled('h_holed', 'holed second');
is(deleted_old('h_holed', grep { !$gone{$_} } @old), '0', "holed: none of the $old_live old orders the shop has is deleted");
my %is_old = map { $_ => 1 } @old;
my %mirror = map { my ($id, $stt, $ver, $del) = split /\|/; ($id => [ $stt, $ver, $del ]) }
  split /\n/, q1(q{SELECT o.object_id || '|' || coalesce(o.status, '') || '|' || coalesce(trunc(o.version)::text, '') || '|' || o.deleted
	FROM webhook_inbox.objects o JOIN webhook_inbox.sources s ON s.id = o.source_id WHERE s.name = 'h_holed'});
my @differ;
for my $o (grep { !$is_old{ $_->{id} } } @orders)
{
	my $m = $mirror{ $o->{id} };
	my $want = $o->{deleted} ? 'true' : 'false';
	push @differ, $o->{id}
	  unless $m && $m->[2] eq $want && ($o->{deleted} || ($m->[0] eq ($o->{status} // '') && $m->[1] eq $o->{version}));
}
is(scalar(@differ), 0, 'holed: every recent order equals the shop\'s (' . (40 - @old) . ' compared)')
  or diag("differ: @differ");

# --- with read_all_orders the same holed stream converges with no difference
sweep_settled('h_all', 'read_all_orders');
verify_source($node, 'h_all', $sim{all}, 'read_all_orders holed');
is(q1("SELECT count(*) FROM webhook_inbox.hidden_objects WHERE source = 'h_all'"), '0',
	'read_all_orders: nothing is hidden');
like(q1("SELECT array_to_string(c.scopes, ',') FROM webhook_inbox.source_scopes c JOIN webhook_inbox.sources s "
	  . "ON s.id = c.source_id WHERE s.name = 'h_all'"), qr/read_all_orders/, 'read_all_orders: the scope is known');

# --- app/scopes_update: the scopes are forgotten and asked again by the next sweep
is(counters($sim{all})->{access_scope_queries}, 1, 'read_all_orders: the scopes were asked once');
q1(q{SELECT webhook_inbox.intake('h_all', ARRAY['X-Shopify-Topic', 'app/scopes_update', 'X-Shopify-Webhook-Id', 'su-1'],
	convert_to('{"id":1,"previous":["read_orders"],"current":["read_orders","read_all_orders"],"updated_at":"2026-12-01T00:00:00Z"}', 'UTF8'))});
wait_drained($node, 'app/scopes_update');
is(q1("SELECT count(*) FROM webhook_inbox.source_scopes c JOIN webhook_inbox.sources s ON s.id = c.source_id "
	  . "WHERE s.name = 'h_all'"), '0', 'app/scopes_update forgets the scopes');
sweep_settled('h_all', 'after app/scopes_update');
is(counters($sim{all})->{access_scope_queries}, 2, 'the next sweep asked them again');

# --- a new token: its scopes are asked again
q1("UPDATE webhook_inbox.sources SET api_token = 'another' WHERE name = 'h_shuf'");
is(q1("SELECT count(*) FROM webhook_inbox.source_scopes c JOIN webhook_inbox.sources s ON s.id = c.source_id "
	  . "WHERE s.name = 'h_shuf'"), '0', 'a new api_token forgets the scopes of the old one');

# --- a tombstone a read inferred yields to a newer signed webhook; a deletion event's stays
sub order_hook
{
	my ($src, $topic, $wid, $id, $updated, $created) = @_;
	my $body = qq({"id":$id,"admin_graphql_api_id":"gid://shopify/Order/$id","created_at":"$created",)
	  . qq("updated_at":"$updated","financial_status":"paid","total_price":"10.00","currency":"USD"});
	q1("SELECT webhook_inbox.intake('$src', ARRAY['X-Shopify-Topic', '$topic', 'X-Shopify-Webhook-Id', '$wid'], "
		  . "convert_to('$body', 'UTF8'))");
}
my $now = q1("SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')");
order_hook('h_holed', 'orders/create', 'rv-1', 990001, '2026-01-01T00:00:00Z', $now);
order_hook('h_holed', 'orders/create', 'rv-2', 990002, '2026-01-01T00:00:00Z', $now);
wait_drained($node, 'revival: the two orders');
order_hook('h_holed', 'orders/delete', 'rv-3', 990002, '2026-01-02T00:00:00Z', $now);
wait_drained($node, 'revival: the deletion');
# 990001 is recent and the shop does not have it: two reads confirm its tombstone
sweep_settled('h_holed', 'revival');
is(q1("SELECT deleted || ' ' || tombstone_evidence FROM webhook_inbox.mirror WHERE source = 'h_holed' AND object_id = '990001'"),
	'true read', 'a recent order the shop does not have is tombstoned by two reads, evidence read');
is(q1("SELECT deleted || ' ' || tombstone_evidence FROM webhook_inbox.mirror WHERE source = 'h_holed' AND object_id = '990002'"),
	'true provider', 'the orders/delete tombstone is the provider\'s');
order_hook('h_holed', 'orders/updated', 'rv-4', 990001, '2026-01-03T00:00:00Z', $now);
order_hook('h_holed', 'orders/updated', 'rv-5', 990002, '2026-01-03T00:00:00Z', $now);
wait_drained($node, 'revival: the newer webhooks');
is(q1("SELECT deleted || ' ' || status FROM webhook_inbox.mirror WHERE source = 'h_holed' AND object_id = '990001'"),
	'false paid', 'a newer signed webhook revives the read-inferred tombstone');
is(q1("SELECT count(*) FROM webhook_inbox.repairs r JOIN webhook_inbox.sources s ON s.id = r.source_id "
	  . "WHERE s.name = 'h_holed' AND r.object_id = '990001' AND r.outcome = 'revived' AND r.run_id IS NULL"),
	'1', 'recorded as a revived repair');
is(q1("SELECT revived_last_day FROM webhook_inbox.sweep_health WHERE source = 'h_holed' AND object_type = 'order'"),
	'1', 'sweep_health counts the revival');
cmp_ok(worker_stat($node, 'revived'), '>=', 1, 'worker_stats counts it');
is(q1("SELECT deleted FROM webhook_inbox.mirror WHERE source = 'h_holed' AND object_id = '990002'"),
	't', 'the orders/delete tombstone stays final');
is(q1("SELECT status || ' ' || reason FROM webhook_inbox.inbox WHERE event_id = 'rv-5'"),
	'ignored stale: a newer version is stored', 'its later webhook is stale');

ok($node->log_contains('without it such an order is hidden, never deleted'),
	'the log says what happens to the orders the app cannot see');

stop_receiver($rcv);
stop_proc($sim{$_}) for keys %sim;
$node->stop;
done_testing();
