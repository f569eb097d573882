
# 300_worker_shuffle.pl
#	The Shuffle Test.  One recorded stream (>= 2,000 events over >= 200
#	objects: subscriptions and PaymentIntents (fetch), refunds and
#	disputes (fetch, and counted once as occurrences), orders (version)) is replayed through the real
#	receiver shuffled, doubled, and with holes then a sweep.  Each mode
#	writes into its own sources, backed by its own simulator with the same
#	seed (so the same truth); webhook-sim verify must find zero
#	differences in each, and no transition may be recorded twice.

use strict;
use warnings;

use lib 'regress/t';
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use WorkerTest;

my $seed = 4242;
# one scenario clock for the three simulators: the same seed and epoch give the same truth
my @scenario = ('--seed', $seed, '--objects', '220', '--events', '2200', '--epoch', time());
my $node = worker_node('shuffle', "webhook_inbox.fetch_concurrency = 8\n");
my $rec = PostgreSQL::Test::Utils::tempdir . '/stream.jsonl';

# one simulator per mode, the first one records the stream
my %sim;
for my $m (1 .. 3)
{
	$sim{$m} = start_sim(@scenario, '--stripe', "acct$m:whsec_shuffle$m", '--shopify',
		"shop$m:shpss_shuffle$m", ($m == 1 ? ('--record', $rec) : ()));
	add_source($node, "acct$m", 'stripe', "whsec_shuffle$m", $sim{$m}{url});
	add_source($node, "shop$m", 'shopify', "shpss_shuffle$m", $sim{$m}{url});
	# the REST Admin API (GraphQL, the default, has its test of its own)
	$node->safe_psql('postgres', "UPDATE webhook_inbox.sources SET settings = settings || '{\"api\": \"rest\"}' WHERE name = 'shop$m'");
}
my $truth = sim_truth($sim{1});
my %types;
$types{ $_->{type} }++ for @{ $truth->{objects} };
$types{ $_->{kind} }++ for @{ $truth->{occurrences} };
cmp_ok(scalar @{ $truth->{objects} }, '>=', 200, 'at least 200 objects');
ok($types{subscription} && $types{payment_intent} && $types{order} && $types{refund} && $types{dispute},
	'every strategy is in the stream: ' . join(', ', map { "$_=$types{$_}" } sort keys %types));
my $nevents = () = SimTest::slurp($rec) =~ /\n/g;
cmp_ok($nevents, '>=', 2000, "at least 2,000 recorded events ($nevents)");

my $rcv = start_receiver($node);

my %mode = (1 => 'shuffled', 2 => 'doubled', 3 => 'holed');
for my $m (1 .. 3)
{
	my $t0 = Time::HiRes::time();
	my ($rc, $out, $err) = run_sim('replay', '--file', $rec, '--mode', $mode{$m}, '--to', $rcv->{url},
		'--seed', $m, '--stripe', "acct$m:whsec_shuffle$m", '--shopify', "shop$m:shpss_shuffle$m");
	is($rc, 0, "$mode{$m}: replay answered 2xx throughout") or diag("$out $err");
	wait_drained($node, $mode{$m});
	my $secs = Time::HiRes::time() - $t0;
	diag(sprintf('%s: %s; replayed and drained in %.1f s', $mode{$m}, $out =~ s/\n//r, $secs));
	if ($mode{$m} eq 'holed')
	{
		for my $run (sweep_all($node, "acct$m", qw(subscription payment_intent refund dispute)),
			sweep_all($node, "shop$m", 'order'))
		{
			is($run->[1], 'complete', "holed: sweep of $run->[0] completed (listed $run->[2], repaired $run->[3])");
		}
		cmp_ok($node->safe_psql('postgres',
				"SELECT sum(repaired) FROM webhook_inbox.sweep_runs r JOIN webhook_inbox.sources s "
				  . "ON s.id = r.source_id WHERE s.name IN ('acct3', 'shop3')"), '>', 0,
			'holed: the sweeps repaired the holes');
		is($node->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.repairs WHERE before IS NOT NULL "
				  . "AND after IS NULL AND outcome <> 'recorded'"), '0', 'holed: every repair records the state after it');
	}
	verify_source($node, "acct$m", $sim{$m}, $mode{$m});
	verify_source($node, "shop$m", $sim{$m}, $mode{$m});
}

# a second sweep over the repaired mirror finds nothing to repair
for my $run (sweep_all($node, 'acct3', qw(subscription payment_intent)), sweep_all($node, 'shop3', 'order'))
{
	is("$run->[1] $run->[3]", 'complete 0', "a second sweep of $run->[0] repairs nothing");
}
like($node->safe_psql('postgres',
		"SELECT string_agg(object_type || ':' || last_status, ',' ORDER BY object_type) "
		  . "FROM webhook_inbox.sweep_health WHERE source = 'acct3'"),
	qr/^dispute:complete,payment_intent:complete,refund:complete,subscription:complete$/,
	'sweep_health shows the last run per object type');
is($node->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.sweep_checkpoints WHERE checkpoint IS NULL"),
	'0', 'complete sweeps set their checkpoints');

# every transition once: no (object, from, to) applied twice, no event applied twice
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM (SELECT source_id, object_type, object_id, from_status, to_status
	  FROM webhook_inbox.transitions WHERE applied
	 GROUP BY 1, 2, 3, 4, 5 HAVING count(*) > 1) d}), '0', 'no transition is recorded twice');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM (SELECT event_id FROM webhook_inbox.transitions
	 WHERE applied AND event_id IS NOT NULL GROUP BY 1 HAVING count(*) > 1) d}), '0',
	'no event caused two transitions');
cmp_ok($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_inbox.transitions
	 WHERE object_type = 'payment_intent' AND applied AND machine IS NULL}),
	'>', 0, 'PaymentIntent status changes were applied from fetches of the present (their lifecycle has cycles)');

# nothing quarantined, nothing left behind; the counters saw the work
is($node->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.inbox WHERE status = 'quarantined'"),
	'0', 'nothing quarantined');
is($node->safe_psql('postgres', 'SELECT count(*) FROM webhook_inbox.object_leases'), '0', 'no lease left');
my $stats = $node->safe_psql('postgres',
	'SELECT claimed, fetched, saved, stale, backward, occurrences, fenced, errors FROM webhook_inbox.worker_counters');
diag("worker counters (claimed|fetched|saved|stale|backward|occurrences|fenced|errors): $stats");
my @s = split /\|/, $stats;
ok($s[0] > 0 && $s[1] > 0 && $s[2] > 0 && $s[5] > 0, 'counters count claims, fetches, saves and occurrences');
is($s[7], '0', 'the worker logged no error');

stop_receiver($rcv);
stop_proc($sim{$_}) for 1 .. 3;
$node->stop;
done_testing();
