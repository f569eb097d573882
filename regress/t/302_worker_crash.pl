
# 302_worker_crash.pl
#	Crash boundaries while the simulator streams deliveries through the
#	receiver (with duplicates, reordering, drops and slow API answers):
#	the worker is killed with SIGKILL in the middle of a batch of fetches,
#	later PostgreSQL is restarted mid-stream.  Processing resumes by
#	itself, nothing is lost, and after the stream the worker's own
#	scheduled sweeps repair the drops: webhook-sim verify finds zero
#	differences.

use strict;
use warnings;

use lib 'regress/t';
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use WorkerTest;

my $node = worker_node('crash', qq{
webhook_inbox.sweep_interval = 2s
webhook_inbox.full_sweep_interval = 30s
webhook_inbox.fetch_concurrency = 8
webhook_inbox.lease = 5s
restart_after_crash = on
});
# the API's address is known once the simulator runs: a dead port until then
add_source($node, 'acct', 'stripe', 'whsec_crash', 'http://127.0.0.1:9');
add_source($node, 'shop', 'shopify', 'shpss_crash', 'http://127.0.0.1:9');
my $rcv = start_receiver($node);
my $sim = start_sim('--seed', '99', '--objects', '150', '--events', '1500', '--stripe', 'acct:whsec_crash',
	'--shopify', 'shop:shpss_crash', '--deliver-to', $rcv->{url}, '--rate', '250', '--duplicate', '0.1',
	'--reorder-ms', '100', '--drop', '0.03', '--slow', '0.3:150', '--retry-base-ms', '200',
	'--retry-max-ms', '2000', '--max-attempts', '20');
$node->safe_psql('postgres', "UPDATE webhook_inbox.sources SET api_base = '$sim->{url}'");

sub worker_pid
{
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'webhook_inbox worker'");
}

# When the stream stalls: what the receiver logged and where the simulator is.
sub stream_diag
{
	my @lines = split /\n/, $rcv->{log};
	splice(@lines, 0, @lines - 300) if @lines > 300;
	diag("receiver log (last lines):\n" . join("\n", @lines));
	my (undef, $st) = http_json('GET', "$sim->{url}/_sim/status");
	diag('simulator status: '
		  . ($st ? join(' ', map { "$_=$st->{$_}" } sort grep { !ref $st->{$_} } keys %$st) : 'no answer'));
}

# kill -9 while the worker has fetches in flight
ok($node->poll_query_until('postgres', q{
	SELECT count(*) >= 300 FROM webhook_inbox.inbox}), 'the stream is flowing');
ok($node->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity
	 WHERE backend_type = 'webhook_inbox worker' AND state = 'active' AND query = 'fetching'}),
	'the worker is in the middle of a batch of fetches');
my $pid = worker_pid();
ok(kill('KILL', $pid), "worker $pid killed with SIGKILL");
ok(poll_after_crash($node, 'postgres', qq{
	SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'webhook_inbox worker' AND pid <> $pid}),
	'the worker is back after crash recovery');

# restart PostgreSQL mid-stream
ok($node->poll_query_until('postgres', q{SELECT count(*) >= 900 FROM webhook_inbox.inbox}),
	'the stream goes on');
$node->restart;
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'webhook_inbox worker'}),
	'the worker runs after the restart');

# the stream ends; every delivery was eventually acknowledged
my $status;
ok(SimTest::poll_until(sub {
		(undef, $status) = http_json('GET', "$sim->{url}/_sim/status");
		return $status && $status->{done};
	}, 180), 'the simulator delivered its whole stream')
  or stream_diag();
is($status->{failed}, 0, 'no delivery used up its attempts')
  or stream_diag();
my $done_at = $node->safe_psql('postgres', 'SELECT now()');
wait_drained($node, 'after the stream', 120);

# a scheduled sweep of every (source, type) that started after the stream ended
ok($node->poll_query_until('postgres', qq{
	SELECT count(DISTINCT (source_id, object_type)) = 5 FROM webhook_inbox.sweep_runs
	 WHERE status = 'complete' AND started_at > '$done_at'}), 'the worker swept every type after the stream');
wait_drained($node, 'after the sweeps', 60);
verify_source($node, 'acct', $sim, 'after kill -9 and restart');
verify_source($node, 'shop', $sim, 'after kill -9 and restart');
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM webhook_inbox.repairs'), '>', 0,
	'the sweeps repaired what the drops left out');
is($node->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.inbox WHERE status = 'quarantined'"),
	'0', 'nothing quarantined');
diag('stream: ' . join(' ', map { "$_=$status->{$_}" } sort grep { !ref $status->{$_} } keys %$status));

stop_receiver($rcv);
stop_proc($sim);
$node->stop;
done_testing();
