# Effects of transitions under chaos and replay: the "payment-failed email
# only on active -> past_due, once" rule.  A live stream (subscriptions
# change while the worker fetches them, with duplicates and reordering)
# produces real transitions; the same stream is then replayed shuffled,
# doubled and holed (then swept) into the same database, and a late event
# for a canceled subscription arrives.  Each applied active -> past_due
# transition has exactly one email effect, before and after all of it.  The
# worker fetches at once (fetch_delay 0) so that it sees intermediate states,
# and, since this simulator runs without --rate-limit, the sources say so
# (settings.rate_limit, endpoint_rate_limit): at Stripe's sandbox pace (25/s
# per key and per endpoint) the worker cannot read a stream of ~100 Stripe
# events a second, each subscription living about a second, often enough
# to see it between two of its states (docs/worker.md, Pacing).
use strict;
use warnings;

use lib 'regress/t';
use PostgreSQL::Test::Utils;
use Test::More;
use WorkerTest;

my $node = worker_node('effreplay', "webhook_inbox.fetch_concurrency = 8\nwebhook_inbox.fetch_delay = 0\n");
my $rec = PostgreSQL::Test::Utils::tempdir . '/stream.jsonl';
my $rcv = start_receiver($node);

$node->safe_psql('postgres', q{
	INSERT INTO webhook_inbox.effect_rules (object_type, from_status, to_status, kind, request, owner)
	VALUES ('subscription', 'active', 'past_due', 'email', '{"template": "payment_failed", "to": "{object_id}"}', 'operations'),
		   ('subscription', '*', 'canceled', 'goodbye', '{}', 'operations');
});

# live: the provider's state moves while events are delivered.  The sources
# exist before the first delivery; their read API is set once the simulator
# has its port.
add_source($node, 'acct', 'stripe', 'whsec_eff', 'http://127.0.0.1:1');
add_source($node, 'shop', 'shopify', 'shpss_eff', 'http://127.0.0.1:1');
$node->poll_query_until('postgres', 'SELECT true');
my $sim = start_sim('--seed', 77, '--objects', 120, '--events', 1500, '--stripe', 'acct:whsec_eff',
	'--shopify', 'shop:shpss_eff', '--record', $rec, '--deliver-to', $rcv->{url}, '--rate', 300,
	'--duplicate', '0.2', '--reorder-ms', '200', '--retry-base-ms', '100');
$node->safe_psql('postgres', "UPDATE webhook_inbox.sources SET api_base = '$sim->{url}',
	settings = settings || '{\"rate_limit\": 1000, \"endpoint_rate_limit\": 1000}'");
# done, and every generated event was sent (duplicates aside) or dropped
ok(SimTest::poll_until(sub {
	my (undef, $st) = http_json('GET', "$sim->{url}/_sim/status");
	return $st && $st->{done} && $st->{acked} >= $st->{delivered}
	  && $st->{delivered} - $st->{duplicated} + $st->{dropped} >= $st->{generated};
}, 120), 'live stream delivered and acknowledged');
wait_drained($node, 'live');

my $check = q{
	SELECT (SELECT count(*) FROM webhook_inbox.transitions
			 WHERE applied AND object_type = 'subscription' AND from_status = 'active' AND to_status = 'past_due')
		|| ' ' || (SELECT count(*) FROM webhook_inbox.effects WHERE kind = 'email')
		|| ' ' || (SELECT count(*) FROM webhook_inbox.transitions t
					WHERE t.applied AND t.object_type = 'subscription' AND t.from_status = 'active'
					  AND t.to_status = 'past_due'
					  AND (SELECT count(*) FROM webhook_inbox.effects e WHERE e.transition_id = t.id) <> 1)
		|| ' ' || (SELECT count(*) FROM webhook_inbox.effects)};
my ($transitions, $emails, $wrong, $all) = split ' ', $node->safe_psql('postgres', $check);
cmp_ok($transitions, '>', 0, "the live stream applied active -> past_due transitions ($transitions)");
is($emails, $transitions, 'one email per active -> past_due transition');
is($wrong, 0, 'no such transition without its email, none with two');

# replays of the same stream into the same mirror: nothing new may fire
my %mode = (shuffled => 1, doubled => 2, holed => 3);
for my $m (sort { $mode{$a} <=> $mode{$b} } keys %mode)
{
	my ($rc, $out, $err) = run_sim('replay', '--file', $rec, '--mode', $m, '--to', $rcv->{url},
		'--seed', $mode{$m}, '--stripe', 'acct:whsec_eff', '--shopify', 'shop:shpss_eff');
	is($rc, 0, "$m replay answered 2xx") or diag("$out $err");
	wait_drained($node, $m);
	if ($m eq 'holed')
	{
		sweep_all($node, 'acct', qw(subscription payment_intent refund dispute));
		sweep_all($node, 'shop', 'order');
		wait_drained($node, 'after the sweep');
	}
	is($node->safe_psql('postgres', $check), "$transitions $emails 0 $all",
		"$m: no transition and no effect fired again");
}

# a late state event for a canceled subscription, with an id never seen
my $truth = sim_truth($sim);
my ($canceled) = grep { $_->{type} eq 'subscription' && $_->{status} eq 'canceled' && !$_->{deleted} }
  @{ $truth->{objects} };
ok($canceled, 'a canceled subscription');
my $late = stripe_event('evt_late_after_cancel', 'customer.subscription.updated', 'subscription',
	$canceled->{id}, 'active', 1700000000);
is($node->safe_psql('postgres', intake_sql('acct', $late)), 'new', 'late event taken in');
wait_drained($node, 'late event');
is($node->safe_psql('postgres',
		"SELECT status FROM webhook_inbox.objects WHERE object_id = '$canceled->{id}'"), 'canceled',
	'the late event did not resurrect the subscription');
is($node->safe_psql('postgres', $check), "$transitions $emails 0 $all", 'and fired no effect');

verify_source($node, 'acct', $sim, 'after all replays');
stop_receiver($rcv);
stop_proc($sim);
$node->stop;
done_testing();
