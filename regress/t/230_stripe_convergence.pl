# Convergence against a provider that speaks Stripe's contract strictly.
#
# For several seeds, webhook-sim (unknown parameters refused, the
# subscription list without canceled ones by default, PaymentIntents with
# their cycles, refunds with their own statuses, the events API) sends a
# stream over subscriptions, invoices, PaymentIntents and refunds through
# the real receiver with ~15 % of deliveries dropped, duplicates and
# reordering.  After the stream the sweeps run (both layers: the events API
# and the full listing), and webhook-sim verify must report zero
# differences between the mirror and the provider's truth, with every
# refund recorded exactly once in occurrences, within a time per seed that
# keeps the suite fast.  Every request the worker sent (fetches, lists, the
# events API) is in the simulator's --request-log, and each must be one the
# official stripe-node declares (regress/contract/check_urls.mjs).
use strict;
use warnings;

use lib 'regress/t';
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use WorkerTest;
use SimTest qw(contract_dir run_node);

my @seeds = (101, 202, 303);
my @types = qw(subscription invoice payment_intent refund);
my $node = worker_node('converge', "webhook_inbox.fetch_concurrency = 8\n");
my $rcv = start_receiver($node);
my $logdir = PostgreSQL::Test::Utils::tempdir;

for my $seed (@seeds)
{
	my $t0 = Time::HiRes::time();
	my $src = "acct$seed";
	my $secret = "whsec_conv$seed";
	# the source exists before the first delivery; its read API is known once the simulator listens
	add_source($node, $src, 'stripe', $secret, 'http://127.0.0.1:9');
	my $sim = start_sim('--seed', $seed, '--objects', 150, '--events', 700,
		'--types', join(',', @types), '--stripe', "$src:$secret",
		'--deliver-to', $rcv->{url}, '--drop', '0.15', '--duplicate', '0.1',
		'--reorder-ms', '150', '--concurrency', 8, '--retry-base-ms', 100,
		'--request-log', "$logdir/requests-$seed.log");
	$node->safe_psql('postgres', "UPDATE webhook_inbox.sources SET api_base = '$sim->{url}' WHERE name = '$src'");
	my $done = SimTest::poll_until(sub {
		my (undef, $s) = http_json('GET', "$sim->{url}/_sim/status");
		return $s && $s->{done} ? $s : undef;
	}, 60);
	ok($done, "seed $seed: stream delivered");
	diag(sprintf('seed %d: generated %d, dropped %d, duplicated %d', $seed, $done->{generated},
		$done->{dropped}, $done->{duplicated})) if $done;
	cmp_ok($done->{dropped}, '>', 0, "seed $seed: deliveries were dropped");
	wait_drained($node, "seed $seed: stream");

	my $truth = sim_truth($sim);
	my %n;
	$n{ $_->{type} }++ for @{ $truth->{objects} };
	ok($n{subscription} >= 30 && $n{invoice} >= 30 && $n{payment_intent} >= 30 && $n{refund},
		"seed $seed: " . join(', ', map { "$_=$n{$_}" } sort keys %n));

	# both reconciliation layers: the events API, then the full listing
	my %repaired;
	for my $layer (qw(incremental full))
	{
		for my $t (@types)
		{
			my ($st, $listed, $rep, $why) = split /\|/, $node->safe_psql('postgres',
				"SELECT status, listed, repaired, coalesce(incomplete_reason, error, '') "
				  . "FROM webhook_inbox.sweep_now('$src', '$t', '$layer')");
			# the first pass of the events layer has no checkpoint: it compares Stripe's
			# 30 days of events and says that the full pass compares the rest
			if ($layer eq 'incremental')
			{
				ok($st eq 'complete' || ($st eq 'incomplete' && $why =~ /^no checkpoint yet/),
					"seed $seed: $layer sweep of $t ($st, listed $listed, repaired $rep)") or diag($why);
			}
			else
			{
				is($st, 'complete', "seed $seed: $layer sweep of $t (listed $listed, repaired $rep)") or diag($why);
			}
			$repaired{$layer} += $rep;
		}
		wait_drained($node, "seed $seed: $layer sweep");
	}
	cmp_ok($repaired{incremental}, '>', 0, "seed $seed: the events API repaired what was dropped ($repaired{incremental})");
	verify_source($node, $src, $sim, "seed $seed");
	my @refunds = grep { $_->{kind} eq 'refund' } @{ $truth->{occurrences} };
	is($node->safe_psql('postgres', qq{
		SELECT count(*) || ' ' || count(DISTINCT c.occurrence_id) FROM webhook_inbox.occurrences c
		  JOIN webhook_inbox.sources s ON s.id = c.source_id WHERE s.name = '$src' AND c.kind = 'refund'}),
		scalar(@refunds) . ' ' . scalar(@refunds), "seed $seed: every refund recorded exactly once");
	my $secs = Time::HiRes::time() - $t0;
	cmp_ok($secs, '<', 90, sprintf('seed %d: converged in %.1f s', $seed, $secs));
	stop_proc($sim);
}

# the receiver is done: stopped here, not left running after the test
is(stop_receiver($rcv), 0, 'the receiver stops cleanly');

# every URL the adapters built, checked against the SDK
my $dir = contract_dir();
my $all = "$logdir/requests.log";
system("cat $logdir/requests-*.log > $all") == 0 or die "cat: $!";
my $n = () = SimTest::slurp($all) =~ /\n/g;
my ($rc, $urls, $err) = run_node("$dir/check_urls.mjs", $all);
is($rc, 0, "the URL check ran over the worker's $n requests") or diag($err);
ok($_->{ok}, "worker request $_->{request} ($_->{route})") or diag(join('; ', @{ $_->{problems} })) for @$urls;
my %kinds;
for my $u (@$urls)
{
	$kinds{events}++ if $u->{request} =~ m{^GET /v1/events\?};
	$kinds{list}++ if $u->{request} =~ m{^GET /v1/(?!events)[a-z_]+\?};
	$kinds{object}++ if $u->{request} =~ m{^GET /v1/[a-z_]+/[a-z]+_};
}
ok($kinds{events} && $kinds{list} && $kinds{object},
	'the worker used the events API, the lists and single objects: ' . join(', ', map { "$_=$kinds{$_}" } sort keys %kinds));

done_testing();
