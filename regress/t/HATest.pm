#
# regress/t/HATest.pm
#	Helpers of the high-availability TAP tests (regress/t/52N_*.pl): a
#	primary that can stream with the worker preloaded, a standby from its
#	backup, SQL through a connection string (pg_auto_failover's nodes are no
#	PostgreSQL::Test::Cluster), and a Stripe stream from webhook-sim through
#	the receiver with a failure halfway, counting what the provider saw
#	acknowledged against what the surviving database holds.
#	Builds on regress/t/WorkerTest.pm.
#
package HATest;

use strict;
use warnings;
use Exporter 'import';
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

use lib 'regress/t';
use WorkerTest;

our @EXPORT = qw(ha_conf ha_primary ha_standby sql_at poll_sql sim_status
  start_stream wait_half wait_stream_done acked_kept worker_running
  drained_at sweep_and_verify_at receiver_503);

# The worker's settings of WorkerTest::worker_node, and the warning on.
sub ha_conf
{
	return qq{
shared_preload_libraries = 'webhook_inbox'
webhook_inbox.enabled = on
webhook_inbox.naptime = 200ms
webhook_inbox.sweep_interval = 0
webhook_inbox.full_sweep_interval = 0
webhook_inbox.http_timeout = 5s
webhook_inbox.tombstone_confirm_delay = 1s
webhook_inbox.require_synchronous_standby = on
log_min_messages = log
};
}

# ha_primary(name, extra conf): a started primary that can stream, with the
# extension and the receiver's login role.
sub ha_primary
{
	my ($name, $extra) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(allows_streaming => 1);
	$node->append_conf('postgresql.conf', ha_conf() . ($extra // ''));
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION webhook_inbox');
	$node->safe_psql('postgres', 'CREATE ROLE rcv LOGIN IN ROLE webhook_inbox_receiver');
	return $node;
}

# ha_standby(primary, name): a started streaming standby made from a fresh
# backup of primary (its postgresql.conf, preload included, comes along;
# not the primary's synchronous_standby_names, which would make the
# promoted standby wait for a standby of its own that nobody built).
sub ha_standby
{
	my ($primary, $name) = @_;
	$primary->backup("${name}_backup");
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init_from_backup($primary, "${name}_backup", has_streaming => 1);
	$node->append_conf('postgresql.conf', "synchronous_standby_names = ''\n");
	$node->start;
	$primary->wait_for_catchup($name);
	return $node;
}

# sql_at(conninfo, sql): psql's unaligned output, trimmed; dies on error.
sub sql_at
{
	my ($conninfo, $sql) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'psql', '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $conninfo, '-c', $sql ],
		'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(60))
	  or die "psql \"$conninfo\": $sql: $err";
	chomp $out;
	return $out;
}

# poll_sql(conninfo, sql, seconds): true once sql returns 't' (errors count
# as not yet: the server may be starting or in recovery).
sub poll_sql
{
	my ($conninfo, $sql, $secs) = @_;
	return SimTest::poll_until(sub { (eval { sql_at($conninfo, $sql) } // '') eq 't' }, $secs // 60);
}

sub sim_status
{
	my ($sim) = @_;
	my ($st, $s) = http_json('GET', "$sim->{url}/_sim/status");
	return $st == 200 ? $s : undef;
}

# start_stream(source, secret, seed, receiver url): a webhook-sim stream of
# Stripe subscriptions, PaymentIntents and refunds, 10 % of the events never
# sent (holes for the sweep), no duplicates (so every acknowledged event is
# one inbox row and a lost one shows), paced so that a failover lands
# halfway; 503s and refused connections are retried every few hundred
# milliseconds for minutes, as a provider does for days.
sub start_stream
{
	my ($source, $secret, $seed, $url, @extra) = @_;
	return start_sim('--seed', $seed, '--objects', 60, '--events', 400,
		'--types', 'subscription,payment_intent,refund', '--stripe', "$source:$secret",
		'--deliver-to', $url, '--rate', 50, '--drop', '0.1', '--duplicate', 0,
		'--reorder-ms', 50, '--concurrency', 4, '--retry-base-ms', 100, '--retry-max-ms', 500,
		'--max-attempts', 400, '--timeout', 5, @extra);
}

# wait_half(sim): the status once half the events are acknowledged.
sub wait_half
{
	my ($sim) = @_;
	return SimTest::poll_until(sub {
		my $s = sim_status($sim);
		return $s && $s->{acked} >= 180 ? $s : undef;
	}, 60);
}

sub wait_stream_done
{
	my ($sim, $secs) = @_;
	return SimTest::poll_until(sub {
		my $s = sim_status($sim);
		return $s && $s->{done} ? $s : undef;
	}, $secs // 120);
}

# acked_kept(conninfo, source, status): (acknowledged, stored): the events the
# provider saw a 2xx for (no duplicates: one per message) and the inbox rows
# of the source.  Counted before any sweep, which adds events of its own.
sub acked_kept
{
	my ($conninfo, $source, $s) = @_;
	my $stored = sql_at($conninfo,
		"SELECT count(*) FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id "
		  . "WHERE s.name = '$source'");
	return ($s->{acked}, $stored);
}

sub worker_running
{
	my ($conninfo) = @_;
	return sql_at($conninfo,
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'webhook_inbox worker'");
}

# drained_at(conninfo, what): the inbox of every source drains.
sub drained_at
{
	my ($conninfo, $what, $secs) = @_;
	my $ok = poll_sql($conninfo,
		"SELECT count(*) = 0 FROM webhook_inbox.inbox WHERE status IN ('pending', 'processing', 'retry')",
		$secs // 120);
	ok($ok, "$what: the worker drained the inbox");
	diag(sql_at($conninfo,
		"SELECT string_agg(status || ' ' || coalesce(reason, '') || ' ' || n, '; ') FROM "
		  . "(SELECT status, reason, count(*) n FROM webhook_inbox.inbox GROUP BY 1, 2) q")) unless $ok;
	return $ok;
}

# sweep_and_verify_at(conninfo, source, sim, what): both reconciliation
# layers of every streamed type repair the holes; webhook-sim verify then
# finds no wrong object.  Returns the repairs.
sub sweep_and_verify_at
{
	my ($conninfo, $source, $sim, $what) = @_;
	my $repaired = 0;
	for my $layer (qw(incremental full))
	{
		for my $t (qw(subscription payment_intent refund))
		{
			my ($st, $rep) = split /\|/, sql_at($conninfo,
				"SELECT status, repaired FROM webhook_inbox.sweep_now('$source', '$t', '$layer')");
			ok($st eq 'complete' || ($layer eq 'incremental' && $st eq 'incomplete'),
				"$what: $layer sweep of $t ($st, repaired $rep)");
			$repaired += $rep;
		}
		drained_at($conninfo, "$what: after the $layer sweeps");
	}
	my ($rc, $out, $err) = run_sim('verify', '--db', $conninfo, '--source', $source, '--api', $sim->{url});
	my ($summary) = $out =~ /^(verify .*)$/m;
	like($summary // $err, qr/differences=0$/, "$what: webhook-sim verify: 0 wrong objects")
	  or diag(substr($out, 0, 3000));
	return $repaired;
}

# receiver_503(receiver): deliveries the receiver answered 503, all sources.
sub receiver_503
{
	my ($r) = @_;
	my $res = ReceiverTest::admin_get($r, '/metrics');
	my $n = 0;
	$n += $1 while $res->{content} =~ /^webhook_receiver_requests_total\{[^}]*status="503"\} (\d+)$/mg;
	return $n;
}

1;
