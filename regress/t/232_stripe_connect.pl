# Convergence of a Stripe Connect platform against a provider that follows
# Connect's contract strictly.
#
# webhook-sim --connect-accounts 6: six connected accounts own every
# subscription, invoice, PaymentIntent and refund; the platform owns none.
# An account's objects, lists and events are visible only under the
# Stripe-Account header naming it (or a Stripe-Context ending at it),
# anything else is 404 resource_missing, as a deleted object is; every event
# delivered carries its top-level account, a thin event its context.  For
# two seeds (the first with a tenth of the subscription events thin, so
# that its accounts are read with Stripe-Context) the stream reaches the real receiver with ~15 % of deliveries
# dropped (holed), duplicated (doubled) and reordered (shuffled); then the
# tenants are discovered from GET /v1/accounts and both sweep layers run per
# account (for the last seed the worker first does both by itself, on its
# sweep_interval, while the passes of an account whose access was revoked
# fail with 403 and hold back no other account's).  webhook-sim verify, comparing per tenant, must report zero
# differences; every refund is recorded once under its account; every
# acknowledged delivery is in the inbox; and no read went out without an
# account.  An effect for an account (a refund) is made under its
# Stripe-Account, and the same one made as the platform finds nothing to
# refund.  Every request the worker made is one stripe-node declares.
#
# Then the wrong-account 404: the platform's own event (no account) for an
# account's subscription is read under the platform's credentials, answered
# 404, deferred, read again and answered 404 once tombstone_confirm_delay
# has passed: that confirms only the platform's view, and the account's
# subscription stays live, with its status.
use strict;
use warnings;

use lib 'regress/t';
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use WorkerTest;
use SimTest qw(contract_dir run_node poll_until);

my @seeds = (404, 505);
my $accounts = 6;
my @types = qw(subscription invoice payment_intent refund);
my $node = worker_node('connect', "webhook_inbox.fetch_concurrency = 8\n");
my $rcv = start_receiver($node);
my $logdir = PostgreSQL::Test::Utils::tempdir;
my ($last_sim, $last_src);

for my $seed (@seeds)
{
	my $t0 = Time::HiRes::time();
	my $src = "platform$seed";
	my $secret = "whsec_connect$seed";
	add_source($node, $src, 'stripe', $secret, 'http://127.0.0.1:9');
	my $sim = start_sim('--seed', $seed, '--objects', 180, '--events', 800,
		'--types', join(',', @types), '--stripe', "$src:$secret",
		'--connect-accounts', $accounts, '--thin-share', $seed == $seeds[0] ? '0.1' : '0',
		'--deliver-to', $rcv->{url}, '--drop', '0.15', '--duplicate', '0.1',
		'--reorder-ms', '150', '--concurrency', 8, '--retry-base-ms', 100,
		'--request-log', "$logdir/requests-$seed.log");
	$node->safe_psql('postgres', "UPDATE webhook_inbox.sources SET api_base = '$sim->{url}' WHERE name = '$src'");
	my $done = poll_until(sub {
		my (undef, $s) = http_json('GET', "$sim->{url}/_sim/status");
		return $s && $s->{done} ? $s : undef;
	}, 60);
	ok($done, "seed $seed: stream delivered");
	cmp_ok($done->{dropped}, '>', 0, "seed $seed: deliveries were dropped ($done->{dropped})");
	cmp_ok($done->{duplicated}, '>', 0, "seed $seed: deliveries were doubled ($done->{duplicated})");
	wait_drained($node, "seed $seed: stream");

	my $truth = sim_truth($sim);
	my (%n, %acct);
	for my $o (@{ $truth->{objects} })
	{
		$n{ $o->{type} }++;
		$acct{ $o->{tenant} }++;
	}
	ok(!exists $acct{''}, "seed $seed: the platform owns no object");
	is(scalar(keys %acct), $accounts, "seed $seed: objects spread over $accounts accounts");
	ok($n{subscription} >= 20 && $n{invoice} >= 20 && $n{payment_intent} >= 20 && $n{refund},
		"seed $seed: " . join(', ', map { "$_=$n{$_}" } sort keys %n));

	# nothing acknowledged is lost: every delivery the receiver took is in the inbox
	my $acked = $done->{generated} - $done->{dropped} - $done->{failed};
	is($node->safe_psql('postgres', qq{
		SELECT count(DISTINCT d.event_id) FROM webhook_inbox.deliveries d
		  JOIN webhook_inbox.sources s ON s.id = d.source_id
		 WHERE s.name = '$src' AND coalesce(d.delivery_id, '') NOT LIKE 'sweep %'}),
		$acked, "seed $seed: every one of the $acked acknowledged deliveries is recorded");
	is($node->safe_psql('postgres', qq{
		SELECT count(*) FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id
		 WHERE s.name = '$src' AND i.tenant = ''}), 0, "seed $seed: every delivery named its account");

	# the last seed: the worker by itself lists the accounts and sweeps each (incremental layer)
	if ($seed == $seeds[-1])
	{
		# an account whose access was revoked: its passes fail, and hold back no other account's
		my $revoked = 'acct_revoked0000000001';
		$node->safe_psql('postgres', qq{
			INSERT INTO webhook_inbox.tenants (source_id, tenant, discovered_by)
			SELECT id, '$revoked', 'manual' FROM webhook_inbox.sources WHERE name = '$src'});
		$node->safe_psql('postgres', "ALTER SYSTEM SET webhook_inbox.sweep_interval = '1s'");
		$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
		my $converged = poll_until(sub {
			my ($vrc) = run_sim('verify', '--db', $node->connstr('postgres'), '--source', $src,
				'--api', $sim->{url});
			return $vrc == 0 ? 1 : undef;
		}, 90);
		ok($converged, "seed $seed: the worker's own per-account sweeps converged");
		$node->safe_psql('postgres', 'ALTER SYSTEM RESET webhook_inbox.sweep_interval');
		$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
		my (undef, $c) = http_json('GET', "$sim->{url}/_sim/counters");
		cmp_ok($c->{account_lists}, '>', 0, "seed $seed: the worker listed the accounts ($c->{account_lists} pages)");
		is($node->safe_psql('postgres', qq{
			SELECT count(DISTINCT r.tenant) FROM webhook_inbox.sweep_runs r
			  JOIN webhook_inbox.sources s ON s.id = r.source_id
			 WHERE s.name = '$src' AND r.trigger = 'schedule' AND r.status <> 'failed'}),
			$accounts, "seed $seed: the worker swept each of the $accounts accounts");
		like($node->safe_psql('postgres', qq{
			SELECT string_agg(DISTINCT r.status || ': ' || r.error, '; ') FROM webhook_inbox.sweep_runs r
			  JOIN webhook_inbox.sources s ON s.id = r.source_id WHERE s.name = '$src' AND r.tenant = '$revoked'}),
			qr/^failed: listing answered http 403$/, "seed $seed: the revoked account's passes failed (403)");
		is($node->safe_psql('postgres', qq{
			SELECT string_agg(DISTINCT q.queue || ' ' || q.tenant, ', ') FROM webhook_inbox.queues q
			 WHERE q.source = '$src' AND q.queue = 'failed_sweep'}),
			"failed_sweep $revoked", "seed $seed: queues shows the revoked account's failed sweeps, and only its");
		# a pass of the worker's round may still begin after the reload: the
		# counts below are of the registered accounts' runs
		$node->safe_psql('postgres', qq{
			DELETE FROM webhook_inbox.sweep_runs WHERE tenant = '$revoked';
			DELETE FROM webhook_inbox.tenants WHERE tenant = '$revoked'});
	}

	# the tenants: discovered from deliveries, and every one from GET /v1/accounts
	is($node->safe_psql('postgres', "SELECT webhook_inbox.discover_tenants('$src')"), $accounts,
		"seed $seed: GET /v1/accounts lists $accounts accounts");
	my @tenants = split /\n/, $node->safe_psql('postgres', qq{
		SELECT t.tenant FROM webhook_inbox.tenants t JOIN webhook_inbox.sources s ON s.id = t.source_id
		 WHERE s.name = '$src' AND t.status = 'active' ORDER BY 1});
	is(scalar(@tenants), $accounts, "seed $seed: $accounts tenants registered");

	# both layers, per account, under its Stripe-Account
	for my $layer (qw(incremental full))
	{
		for my $tenant (@tenants)
		{
			for my $t (@types)
			{
				my ($st, $why) = split /\|/, $node->safe_psql('postgres',
					"SELECT status, coalesce(incomplete_reason, error, '') "
					  . "FROM webhook_inbox.sweep_now('$src', '$t', '$layer', '$tenant')"), 2;
				if ($layer eq 'incremental')
				{
					ok($st eq 'complete' || ($st eq 'incomplete' && $why =~ /^no checkpoint yet/),
						"seed $seed: $layer sweep of $tenant $t ($st)") or diag($why);
				}
				else
				{
					is($st, 'complete', "seed $seed: $layer sweep of $tenant $t") or diag($why);
				}
			}
		}
		wait_drained($node, "seed $seed: $layer sweeps");
	}
	my ($runs, $per_tenant, $rep) = split /\|/, $node->safe_psql('postgres', qq{
		SELECT count(*), count(DISTINCT r.tenant), coalesce(sum(r.repaired), 0)
		  FROM webhook_inbox.sweep_runs r JOIN webhook_inbox.sources s ON s.id = r.source_id
		  JOIN webhook_inbox.tenants t ON t.source_id = r.source_id AND t.tenant = r.tenant
		 WHERE s.name = '$src'});
	is($per_tenant, $accounts, "seed $seed: sweep runs for each of the $accounts accounts ($runs runs)");
	cmp_ok($rep, '>', 0, "seed $seed: the sweeps repaired what was dropped ($rep)");
	is($node->safe_psql('postgres', qq{
		SELECT count(DISTINCT c.tenant) FROM webhook_inbox.sweep_checkpoints c
		  JOIN webhook_inbox.sources s ON s.id = c.source_id WHERE s.name = '$src'}),
		$accounts, "seed $seed: a checkpoint per account");
	verify_source($node, $src, $sim, "seed $seed");
	my @refunds = grep { $_->{kind} eq 'refund' } @{ $truth->{occurrences} };
	is($node->safe_psql('postgres', qq{
		SELECT count(*) || ' ' || count(DISTINCT (c.tenant, c.occurrence_id)) FROM webhook_inbox.occurrences c
		  JOIN webhook_inbox.sources s ON s.id = c.source_id WHERE s.name = '$src' AND c.kind = 'refund'}),
		scalar(@refunds) . ' ' . scalar(@refunds), "seed $seed: every refund recorded exactly once");

	# whose credentials the reads carried: the platform's only for GET /v1/accounts
	my (undef, $counters) = http_json('GET', "$sim->{url}/_sim/counters");
	my %scopes = %{ $counters->{scopes} // {} };
	is($scopes{platform} // 0, 0, "seed $seed: no read without an account but GET /v1/accounts");
	cmp_ok($counters->{account_lists}, '>=', 1, "seed $seed: GET /v1/accounts ($counters->{account_lists} pages)");
	is(scalar(grep { /^acct_/ || /^context:.*acct_/ } keys %scopes), scalar(keys %scopes),
		"seed $seed: every other read named an account: "
		  . join(', ', map { "$_=$scopes{$_}" } sort keys %scopes));
	my $secs = Time::HiRes::time() - $t0;
	cmp_ok($secs, '<', 60, sprintf('seed %d: converged in %.1f s', $seed, $secs));
	if ($seed == $seeds[-1])
	{
		($last_sim, $last_src) = ($sim, $src);
	}
	else
	{
		stop_proc($sim);
	}
}

# An effect for an account is made as that account: a refund requested for
# one of its PaymentIntents is created under its Stripe-Account; the same
# request made as the platform finds no such PaymentIntent.
{
	my $truth = sim_truth($last_sim);
	my %had = map { ($_->{id} => 1) } grep { $_->{kind} eq 'refund' } @{ $truth->{occurrences} };
	my @pis = grep { $_->{type} eq 'payment_intent' && $_->{status} eq 'succeeded' } @{ $truth->{objects} };
	my ($done_pi, $n) = (undef, 0);
	for my $pi (@pis[0 .. ($#pis < 5 ? $#pis : 5)])
	{
		$n++;
		$node->safe_psql('postgres', qq{
			SELECT webhook_inbox.request_effect('connect-refund-$n', 'http',
				'{"method": "POST", "path": "/v1/refunds", "body": {"payment_intent": "$pi->{id}", "amount": $n}}',
				source => '$last_src', tenant => '$pi->{tenant}')});
		$node->safe_psql('postgres', 'CALL webhook_inbox.run_effects()');
		my $st = $node->safe_psql('postgres',
			"SELECT status || ' ' || coalesce(reason, '') FROM webhook_inbox.effects WHERE effect_key = 'connect-refund-$n'");
		diag("refund effect $n for $pi->{id} of $pi->{tenant}: $st");
		if ($st =~ /^done/)
		{
			$done_pi = $pi;
			last;
		}
	}
	ok($done_pi, "a refund effect for an account's PaymentIntent was accepted under its Stripe-Account");
	my $after = sim_truth($last_sim);
	my @mine = grep { $_->{kind} eq 'refund' && !$had{ $_->{id} } } @{ $after->{occurrences} };
	$had{ $_->{id} } = 1 for @mine;
	is(join(',', map { "$_->{tenant} $_->{amount}" } @mine), $done_pi ? "$done_pi->{tenant} $n" : '-',
		'the provider created it, and only it, in that account');
	$node->safe_psql('postgres', qq{
		SELECT webhook_inbox.request_effect('connect-refund-platform', 'http',
			'{"method": "POST", "path": "/v1/refunds", "body": {"payment_intent": "$done_pi->{id}", "amount": 99}}',
			source => '$last_src')});
	$node->safe_psql('postgres', 'CALL webhook_inbox.run_effects()');
	my ($st, $reason) = split /\|/, $node->safe_psql('postgres',
		"SELECT status, coalesce(reason, '') FROM webhook_inbox.effects WHERE effect_key = 'connect-refund-platform'");
	isnt($st, 'done', "the same refund made as the platform is not accepted ($st: $reason)");
	is(scalar(grep { $_->{kind} eq 'refund' && !$had{ $_->{id} } } @{ sim_truth($last_sim)->{occurrences} }), 0,
		'and created nothing');
}

# The wrong-account 404.  A live subscription of an account ...
my $truth = sim_truth($last_sim);
my ($sub) = grep { $_->{type} eq 'subscription' && !$_->{deleted} } @{ $truth->{objects} };
my $before = $node->safe_psql('postgres', qq{
	SELECT o.status || ' ' || o.deleted FROM webhook_inbox.objects o JOIN webhook_inbox.sources s ON s.id = o.source_id
	 WHERE s.name = '$last_src' AND o.tenant = '$sub->{tenant}' AND o.object_id = '$sub->{id}'});
is($before, "$sub->{status} false", "the account's subscription $sub->{id} is mirrored live");
# ... and the platform's own event for it, without an account: read under the platform's credentials
my $body = stripe_event('evt_platform_own_1', 'customer.subscription.updated', 'subscription', $sub->{id},
	'canceled', time);
is($node->safe_psql('postgres', intake_sql($last_src, $body)), 'new', "the platform's own event is taken");
local $PostgreSQL::Test::Utils::timeout_default = 60;
ok($node->poll_query_until('postgres', qq{
	SELECT i.status = 'done' FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id
	 WHERE s.name = '$last_src' AND i.event_id = 'evt_platform_own_1'}),
	'the event was decided by two 404s, tombstone_confirm_delay apart');
my $transitions = $node->safe_psql('postgres', qq{
	SELECT string_agg(t.tenant || ':' || t.to_status || ':' || t.cause, ',') FROM webhook_inbox.transitions t
	  JOIN webhook_inbox.sources s ON s.id = t.source_id
	 WHERE s.name = '$last_src' AND t.object_id = '$sub->{id}' AND t.to_status = 'deleted'});
is($transitions, ':deleted:fetch: http 404, confirmed',
	'the only deletion recorded is the platform\'s view (which never had it), confirmed by a second 404');
is($node->safe_psql('postgres', qq{
	SELECT o.status || ' ' || o.deleted FROM webhook_inbox.objects o JOIN webhook_inbox.sources s ON s.id = o.source_id
	 WHERE s.name = '$last_src' AND o.tenant = '$sub->{tenant}' AND o.object_id = '$sub->{id}'}),
	"$sub->{status} false", "the account's subscription is not tombstoned by a 404 under the platform's credentials");
is($node->safe_psql('postgres', qq{
	SELECT count(*) FROM webhook_inbox.objects o JOIN webhook_inbox.sources s ON s.id = o.source_id
	 WHERE s.name = '$last_src' AND o.tenant <> '' AND o.deleted}), 0,
	'no account object is tombstoned');
stop_proc($last_sim);
is(stop_receiver($rcv), 0, 'the receiver stops cleanly');

# every URL the worker built, checked against stripe-node (GET /v1/accounts included)
my $dir = contract_dir();
my $all = "$logdir/requests.log";
system("cat $logdir/requests-*.log > $all") == 0 or die "cat: $!";
my ($rc, $urls, $err) = run_node("$dir/check_urls.mjs", $all);
is($rc, 0, 'the URL check ran') or diag($err);
ok($_->{ok}, "worker request $_->{request} ($_->{route})") or diag(join('; ', @{ $_->{problems} })) for @$urls;
ok(scalar(grep { $_->{request} =~ m{^GET /v1/accounts\?} } @$urls), 'GET /v1/accounts was checked');

done_testing();
