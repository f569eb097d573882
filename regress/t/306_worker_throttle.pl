
# 306_worker_throttle.pl
#	Rate limits defer, they never spend attempts: a provider that answers
#	429 and 503 for longer than max_attempts retries would take never
#	quarantines an event (each is done with zero attempts once the provider
#	answers), and a sweep that falls due while its source is inside a
#	Retry-After window waits for the window to end.

use strict;
use warnings;

use lib 'regress/t';
use PostgreSQL::Test::Utils;
use Test::More;
use WorkerTest;
use SimTest qw(poll_until);

my $node = worker_node('throttle', qq{
webhook_inbox.fetch_concurrency = 1
webhook_inbox.max_attempts = 2
webhook_inbox.fetch_delay = 0
});
my $sim = start_sim('--seed', '5', '--objects', '30', '--events', '100', '--stripe', 'acct:whsec_r');
add_source($node, 'acct', 'stripe', 'whsec_r', $sim->{url});
my $truth = sim_truth($sim);
my @subs = map { $_->{id} } grep { $_->{type} eq 'subscription' && !$_->{deleted} } @{ $truth->{objects} };
cmp_ok(scalar @subs, '>=', 3, 'three live subscriptions');

sub fetches
{
	my (undef, $doc) = http_json('GET', "$sim->{url}/_sim/counters");
	return $doc->{fetches}{ $_[0] } // 0;
}

sub fault
{
	my ($rule) = @_;
	my ($st) = http_json('POST', "$sim->{url}/_sim/faults",
		{ content => $rule, headers => { 'Content-Type' => 'application/json' } });
	is($st, 200, "fault rule $rule accepted");
}

my $evt = 0;
sub intake_sub
{
	my ($id) = @_;
	$evt++;
	$node->safe_psql('postgres', intake_sql('acct', stripe_event("evt_r$evt", 'customer.subscription.updated',
			'subscription', $id, 'active', 1767225600 + $evt)));
}

sub event_row
{
	my ($object) = @_;
	return $node->safe_psql('postgres', "SELECT status || '|' || attempts "
		  . "FROM webhook_inbox.inbox WHERE object_id = '$object' ORDER BY id DESC LIMIT 1");
}

# --- four 429s (Retry-After 1) for one object and four 503s for another:
# twice as many throttled answers as max_attempts
fault(qq({"status":429,"retry_after":1,"path_prefix":"/v1/subscriptions/$subs[0]","count":4}));
fault(qq({"status":503,"path_prefix":"/v1/subscriptions/$subs[1]","count":4}));
intake_sub($subs[0]);
intake_sub($subs[1]);
wait_drained($node, 'throttled', 90);
is(event_row($subs[0]), 'done|0', '429 four times: done, no attempt spent');
is(event_row($subs[1]), 'done|0', '503 four times: done, no attempt spent');
is(fetches($subs[0]), 5, 'four throttled fetches of the first, then the one that worked');
is(fetches($subs[1]), 5, 'four throttled fetches of the second, then the one that worked');
is($node->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.inbox WHERE status = 'quarantined'"), 0,
	'nothing quarantined');
cmp_ok(worker_stat($node, 'rate_limited'), '>=', 8, 'every throttled answer counted');

# --- sweeps every second; a 429 with Retry-After: 4 holds them back
$node->append_conf('postgresql.conf', "webhook_inbox.sweep_interval = 1s\n");
$node->reload;
ok(poll_until(sub { $node->safe_psql('postgres', 'SELECT count(*) FROM webhook_inbox.sweep_runs') >= 2 }, 60),
	'sweeps run every second');
fault(qq({"status":429,"retry_after":4,"path_prefix":"/v1/subscriptions/$subs[2]","count":1}));
intake_sub($subs[2]);
ok(poll_until(sub { fetches($subs[2]) >= 1 }, 30), 'the throttled fetch was answered');
my $t = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
ok(poll_until(sub { event_row($subs[2]) eq 'done|0' }, 30), 'the throttled object is done after the window');
ok(poll_until(sub {
	$node->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.sweep_runs WHERE started_at > '$t'::timestamptz + interval '4 s'") > 0
}, 30), 'sweeps resume after the window');
is($node->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.sweep_runs "
	  . "WHERE started_at BETWEEN '$t'::timestamptz + interval '0.3 s' AND '$t'::timestamptz + interval '3.5 s'"),
	0, 'no sweep started inside the Retry-After window');

$node->stop;
stop_proc($sim);
done_testing();
