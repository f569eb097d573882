
# 307_worker_tombstone.pl
#	A read API's 404 is believed only when a second one, at least
#	webhook_inbox.tombstone_confirm_delay later, confirms it: a single 404
#	(a proxy's, a wrong api_base's) deletes nothing, the claim waits without
#	spending an attempt, and a newer version arriving meanwhile is applied;
#	two 404s save the tombstone, a read's inference that a strictly newer version
#	the read API shows again revives (a repair of its own, revived).

use strict;
use warnings;

use lib 'regress/t';
use PostgreSQL::Test::Utils;
use Test::More;
use WorkerTest;
use SimTest qw(poll_until);

my $node = worker_node('tombstone', qq{
webhook_inbox.fetch_delay = 0
webhook_inbox.tombstone_confirm_delay = 3s
});
my $sim = start_sim('--seed', '9', '--objects', '40', '--events', '100', '--shopify', 'shop:shpss_t');
$node->safe_psql('postgres', "SELECT webhook_inbox.create_source('shop', 'shopify', 'shpss_t', "
	  . "api_base => '$sim->{url}', settings => '{\"api_version\": \"2025-10\", \"api\": \"rest\"}')");
my $truth = sim_truth($sim);
my @orders = grep { $_->{type} eq 'order' && !$_->{deleted} } @{ $truth->{objects} };
cmp_ok(scalar @orders, '>=', 3, 'three live orders in the scenario');

sub fetches
{
	my (undef, $doc) = http_json('GET', "$sim->{url}/_sim/counters");
	return $doc->{fetches}{ $_[0] } // 0;
}

sub fault_404
{
	my ($oid, $count) = @_;
	my ($st) = http_json('POST', "$sim->{url}/_sim/faults", {
		content => qq({"status":404,"path_prefix":"/admin/api/2025-10/orders/$oid","count":$count}),
		headers => { 'Content-Type' => 'application/json' } });
	is($st, 200, "a 404 for order $oid, $count time(s)");
}

sub order_event
{
	my ($wid, $oid, $at, $note) = @_;
	$node->safe_psql('postgres', "SELECT webhook_inbox.intake('shop', ARRAY['X-Shopify-Topic', 'orders/updated', "
		  . "'X-Shopify-Webhook-Id', '$wid'], convert_to('{\"id\":$oid,\"updated_at\":\"$at\","
		  . "\"financial_status\":\"pending\",\"note\":\"$note\"}', 'UTF8'))");
}

sub object_row
{
	my ($oid) = @_;
	return $node->safe_psql('postgres', "SELECT deleted || '|' || coalesce(version::bigint::text, '') "
		  . "FROM webhook_inbox.objects WHERE object_id = '$oid'");
}

sub event_row
{
	my ($wid) = @_;
	return $node->safe_psql('postgres', "SELECT status || '|' || attempts || '|' || coalesce(reason, '') "
		  . "FROM webhook_inbox.inbox WHERE event_id = '$wid'");
}

# --- one 404: a tie sends the worker to the read API, which answers 404 once
my $a = $orders[0]{id};
fault_404($a, 1);
order_event("a1", $a, '2026-01-01T00:00:05+00:00', 'one');
wait_drained($node, 'first version');
order_event("a2", $a, '2026-01-01T00:00:05+00:00', 'two');
ok(poll_until(sub { fetches($a) >= 1 }, 30), 'the tie was fetched and answered 404');
ok(poll_until(sub { event_row('a2') =~ /^retry\|0\|tombstone_unconfirmed: http 404/ }, 30),
	'the claim waits for a confirmation, no attempt spent');
like(object_row($a), qr/^false\|/, 'one 404 deleted nothing');
# a newer version arrives while the tombstone is unconfirmed
order_event("a3", $a, '2026-01-01T00:00:15+00:00', 'three');
ok(poll_until(sub { event_row('a3') =~ /^done\|/ }, 30), 'the newer version is processed');
is(object_row($a), 'false|1767225615', 'and applied (not stale)');
wait_drained($node, 'the waiting claim');
is(event_row('a2'), 'ignored|0|stale: a newer version is stored', 'the waiting tie is settled after the delay (stale), no attempt spent');
is(fetches($a), 1, 'no second fetch: the newer version settled the tie');
is(object_row($a), 'false|1767225615', 'the order keeps the newer version, not deleted');
is($node->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.inbox WHERE status = 'quarantined'"), 0,
	'nothing quarantined');

# --- one 404 and nothing else: the fetch after the delay finds the order
my $c = $orders[2]{id};
fault_404($c, 1);
order_event("c1", $c, '2026-01-01T00:00:05+00:00', 'one');
wait_drained($node, 'first version of c');
order_event("c2", $c, '2026-01-01T00:00:05+00:00', 'two');
wait_drained($node, 'a 404, then the order');
is(fetches($c), 2, 'asked again after the delay');
like(event_row('c2'), qr/^done\|0\|fetched: applied$/, 'the second fetch saved the order');
like(object_row($c), qr/^false\|/, 'not deleted');

# --- two 404s: the tombstone is confirmed; a newer version the read API shows revives it
my $b = $orders[1]{id};
fault_404($b, 2);
order_event("b1", $b, '2026-01-01T00:00:05+00:00', 'one');
wait_drained($node, 'first version of b');
my $t0 = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
order_event("b2", $b, '2026-01-01T00:00:05+00:00', 'two');
wait_drained($node, 'two 404s');
is(fetches($b), 2, 'two fetches, both 404');
like(event_row('b2'), qr/^done\|0\|fetched: tombstone$/, 'the second 404 saved the tombstone');
like(object_row($b), qr/^true\|/, 'the order is deleted');
cmp_ok($node->safe_psql('postgres', "SELECT extract(epoch FROM max(t.at) - '$t0'::timestamptz) "
	  . "FROM webhook_inbox.transitions t WHERE t.object_id = '$b' AND t.to_status = 'deleted'"), '>=', 2.9,
	'not before the confirmation delay');
order_event("b3", $b, '2026-01-01T00:00:25+00:00', 'three');
wait_drained($node, 'newer version after a confirmed tombstone');
is($node->safe_psql('postgres', "SELECT tombstone_evidence FROM webhook_inbox.mirror WHERE object_id = '$b'"), '',
	'a newer version is no longer under a tombstone');
# the tombstone was a read's inference: the order the read API shows again, newer, brings it back
like(object_row($b), qr/^false\|/, 'a confirmed tombstone a read inferred yields to a newer version (revived)');
is($node->safe_psql('postgres', "SELECT outcome || ' ' || (run_id IS NULL) FROM webhook_inbox.repairs WHERE object_id = '$b'"),
	'revived true', 'recorded as a revival');

$node->stop;
stop_proc($sim);
done_testing();
