# Pacing of a Connect platform's reads within Stripe's documented limits
# (https://docs.stripe.com/rate-limits: 25 requests/s for a sandbox key,
# 25/s per endpoint by default), Connect calls counted against the
# platform, per source settings, and fetches on notify before sweeps.
#
# webhook-sim plays a platform with 50 connected accounts, enforces Stripe's
# sandbox limits (--rate-limit: 429 past them) and writes the time of every
# request it is sent (--request-times).  Then:
#  - sweep_now(source, type) without a tenant sweeps every active tenant,
#    one pass each (it used to sweep only the platform's own, empty,
#    account), filling the mirror at the default limits: no second holds
#    more than 25 requests, nor more than 25 of one endpoint;
#  - with settings.rate_limit 5 the same sweep of the 50 tenants never has
#    more than 5 requests in any one-second window, and takes the time that
#    rate allows and not much more (the sweep's passes share the budget
#    whatever backend runs them);
#  - the worker's own scheduled round over the 50 tenants, at 5/s, yields
#    to a fetch on notify: a delivery for an account's subscription is
#    fetched within a second, while the round still has tenants to go, and
#    the round and the fetch together still keep to 5/s; sweep_backlog shows
#    the passes still due, pace_status() the platform's unit;
#  - the simulator never had to refuse a request, and the mirror equals its
#    truth;
#  - settings outside sources_pacing_check are refused with its error.
use strict;
use warnings;

use lib 'regress/t';
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use WorkerTest;
use SimTest qw(poll_until slurp);

my $accounts = 50;
my $node = worker_node('pacing', "webhook_inbox.fetch_concurrency = 8\n");
my $dir = PostgreSQL::Test::Utils::tempdir;
my $times = "$dir/times.log";
my $src = 'plat';

add_source($node, $src, 'stripe', 'whsec_pace', 'http://127.0.0.1:9');
# the scenario's changes all happened two days ago: nothing for the rounds to repair once filled
my $sim = start_sim('--seed', 316, '--objects', 2 * $accounts, '--events', 2 * $accounts,
	'--epoch', time() - 2 * 86400, '--types', 'subscription', '--stripe', "$src:whsec_pace",
	'--connect-accounts', $accounts, '--request-times', $times, '--rate-limit');
$node->safe_psql('postgres', "UPDATE webhook_inbox.sources SET api_base = '$sim->{url}' WHERE name = '$src'");
is($node->safe_psql('postgres', "SELECT webhook_inbox.discover_tenants('$src')"), $accounts,
	"GET /v1/accounts lists the $accounts accounts");

# the requests logged from line $from on: [epoch seconds, method, path, account]
sub requests
{
	my ($from) = @_;
	my @lines = split /\n/, slurp($times);
	return map { [ split / /, $_, 4 ] } @lines[ $from .. $#lines ];
}

sub logged { my @l = split /\n/, slurp($times); return scalar @l }

# the most requests in any one-second window [t, t + 1) of those given
sub busiest_second
{
	my @t = sort { $a <=> $b } map { $_->[0] } @_;
	my ($max, $j) = (0, 0);
	for my $i (0 .. $#t)
	{
		$j++ while $j <= $#t && $t[$j] < $t[$i] + 1.0;
		$max = $j - $i if $j - $i > $max;
	}
	return $max;
}

sub endpoint { my ($path) = $_[0]->[2] =~ m{^(/v1/[a-z_]+)}; return $path // $_[0]->[2] }

# ---- sweep_now() without a tenant: every tenant, at the default limits ----
my $from = logged();
my $t0 = Time::HiRes::time();
is($node->safe_psql('postgres', qq{
	SELECT count(*) || ' ' || count(DISTINCT tenant) || ' ' || count(*) FILTER (WHERE status = 'complete')
	  || ' ' || sum(repaired) FROM webhook_inbox.sweep_now('$src', 'subscription')}),
	"$accounts $accounts $accounts " . 2 * $accounts,
	"sweep_now() without a tenant: one complete pass per tenant, every object repaired");
my @fill = requests($from);
cmp_ok(scalar @fill, '>=', 2 * $accounts, 'the fill read every account\'s list and objects (' . scalar(@fill) . ' requests)');
ok(!grep({ $_->[3] eq '-' } @fill), 'every read of the fill named its account');
my $busiest = busiest_second(@fill);
cmp_ok($busiest, '<=', 25, "at the sandbox key's default, at most 25 requests in any second ($busiest)");
my %by_endpoint;
push @{ $by_endpoint{ endpoint($_) } }, $_ for @fill;
for my $e (sort keys %by_endpoint)
{
	my $b = busiest_second(@{ $by_endpoint{$e} });
	cmp_ok($b, '<=', 25, "endpoint $e: at most 25 requests in any second ($b)");
}

# ---- settings.rate_limit 5: the same sweep over 50 tenants, never more than 5 in a second ----
$node->safe_psql('postgres',
	"UPDATE webhook_inbox.sources SET settings = settings || '{\"rate_limit\": 5}' WHERE name = '$src'");
$from = logged();
$t0 = Time::HiRes::time();
is($node->safe_psql('postgres', qq{
	SELECT count(*) || ' ' || count(*) FILTER (WHERE status = 'complete') || ' ' || sum(repaired)
	  FROM webhook_inbox.sweep_now('$src', 'subscription')}),
	"$accounts $accounts 0", 'rate_limit 5: the sweep of every tenant completes, nothing to repair');
my $elapsed = Time::HiRes::time() - $t0;
my @slow = requests($from);
my $n = scalar @slow;
cmp_ok($n, '>=', $accounts, "one list request per account at least ($n)");
$busiest = busiest_second(@slow);
cmp_ok($busiest, '<=', 5, "rate_limit 5: at most 5 requests in any one-second window ($busiest)");
my $allowed = ($n - 1) / 5;
# the pacing keeps 3 % below the rate, so that no second holds one more as requests arrive
cmp_ok($elapsed, '>=', $allowed * 0.98, sprintf('the sweep took the time the limit needs (%.1f s for %d requests)', $elapsed, $n));
cmp_ok($elapsed, '<=', $allowed * 1.1 + 1, sprintf('and not much more (%.1f s, %.1f s allowed)', $elapsed, $allowed));

# ---- the worker's round at 5/s, and a fetch on notify that goes first ----
$node->safe_psql('postgres', qq{
	UPDATE webhook_inbox.sweep_runs SET started_at = started_at - interval '2 hours',
		   finished_at = finished_at - interval '2 hours';
	ALTER SYSTEM SET webhook_inbox.sweep_interval = '1h';
	SELECT pg_reload_conf()});
$from = logged();
my $truth = sim_truth($sim);
my ($sub) = grep { $_->{type} eq 'subscription' && !$_->{deleted} } @{ $truth->{objects} };
ok(poll_until(sub { scalar(requests($from)) >= 10 ? 1 : undef }, 30), 'the worker\'s round is under way');
my $body = qq({"id":"evt_pace1","object":"event","type":"customer.subscription.updated","account":"$sub->{tenant}",)
  . qq("created":@{[time()]},"data":{"object":{"id":"$sub->{id}","object":"subscription","status":"active"}}});
$body =~ s/'/''/g;
my $notified = Time::HiRes::time();
$node->safe_psql('postgres', "SELECT webhook_inbox.intake('$src', '{}', convert_to('$body', 'UTF8'))");
ok(poll_until(sub { (grep { $_->[2] =~ m{^/v1/subscriptions/\Q$sub->{id}\E} } requests($from)) ? 1 : undef }, 30),
	'the notified subscription was fetched');
my $backlog = $node->safe_psql('postgres', qq{
	SELECT coalesce(sum(due_passes), 0) FROM webhook_inbox.sweep_backlog WHERE source = '$src'});
# pace_status() lists a unit while it is ahead of now: the round's next
# request is paced, and between two of them it may have just caught up
my $unit;
poll_until(sub {
	$unit = $node->safe_psql('postgres', qq{
		SELECT unit || ' ' || rate FROM webhook_inbox.pace_status() WHERE source = '$src' AND unit = 'platform'});
	$unit ne '' ? 1 : undef }, 10);
is($unit, 'platform 5', 'pace_status() shows the platform\'s unit at 5/s');
ok(poll_until(sub {
	$node->safe_psql('postgres', qq{
		SELECT count(*) FROM webhook_inbox.sweep_runs WHERE trigger = 'schedule' AND status <> 'running'}) >= $accounts
	  ? 1 : undef }, 60), "the worker's round swept the $accounts accounts");
my @round = requests($from);
my ($fetch) = grep { $_->[2] =~ m{^/v1/subscriptions/\Q$sub->{id}\E} } @round;
my @sweeps_after = grep { $_->[0] > $fetch->[0] && $_->[2] =~ m{^/v1/(subscriptions|events)\?} } @round;
# fetch_delay (1 s) lets an object's notifications settle first; then the round goes within a naptime
cmp_ok($fetch->[0] - $notified, '<', 2.0, sprintf('the fetch went %.2f s after the notify (fetch_delay 1 s)', $fetch->[0] - $notified));
cmp_ok(scalar @sweeps_after, '>=', 5, 'while the round still had tenants to sweep (' . scalar(@sweeps_after) . ' requests after it)');
cmp_ok($backlog, '>', 0, "sweep_backlog showed the round's passes still due ($backlog)");
$busiest = busiest_second(@round);
cmp_ok($busiest, '<=', 5, "the round and the fetch: at most 5 requests in any second ($busiest)");
is($node->safe_psql('postgres', qq{
	SELECT count(*) FROM webhook_inbox.sweep_backlog WHERE source = '$src'}), 0, 'sweep_backlog: nothing due after the round');

# the simulator enforced Stripe's sandbox limits throughout: it never had to refuse
my (undef, $counters) = http_json('GET', "$sim->{url}/_sim/counters");
is($counters->{rate_limited}, 0, 'no request was answered 429 by the limit-enforcing simulator');
verify_source($node, $src, $sim, 'after the sweeps');

# ---- settings the pacing cannot use are refused ----
for my $bad ('{"rate_limit": 0}', '{"rate_limit": "fast"}', '{"endpoint_rate_limit": -1}', '{"rate_limit_scope": "shop"}')
{
	my ($rc, $out, $err) = $node->psql('postgres',
		"UPDATE webhook_inbox.sources SET settings = settings || '$bad' WHERE name = '$src'");
	like($err, qr/violates check constraint "sources_pacing_check"/, "settings $bad: refused by sources_pacing_check");
}

stop_proc($sim);
$node->stop;
done_testing();
