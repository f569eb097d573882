
# 106_receiver_reconnect.pl
#	The receiver reconnects by itself however its connections go away,
#	and soon: while a client streams signed deliveries, PostgreSQL is
#	restarted (fast shutdown and start, several times: the receiver's
#	attempts meet "the database system is shutting down" and then a
#	server that is up again at once), stopped immediately and started,
#	and the receiver's backends are killed with SIGKILL (crash recovery).
#	After each, deliveries are answered 200 again within a few seconds.
#	The receiver logs at debug level throughout, so a log that nobody
#	reads would stall it within these outages (see start_receiver).

use strict;
use warnings;

use lib 'receiver/t';
use IPC::Run;
use PostgreSQL::Test::Utils;
use ReceiverTest;
use Test::More;

my $node = new_node('reconnect');
$node->append_conf('postgresql.conf', "restart_after_crash = on\nlog_connections = on\n");
$node->restart;
my $secret = 'reconnect-secret';
$node->safe_psql('postgres',
	"SELECT webhook_inbox.create_source(name => 'rec', kind => 'github', secret => '$secret')");
my $r = start_receiver($node, '--batch-size', '16', '--log-level', 'debug');
my $tmp = PostgreSQL::Test::Utils::tempdir;
my @streams = map {
	IPC::Run::start([ $^X, 'receiver/t/stream.pl', $r->{url}, 'rec', $secret, "c$_",
			"$tmp/out-$_", "$tmp/stop", 0 ])
} 1 .. 2;

# Number of 200 answers so far.
sub acked
{
	my $n = 0;
	for my $k (1 .. 2)
	{
		open(my $fh, '<', "$tmp/out-$k") or next;
		while (my $line = <$fh>)
		{
			$n++ if $line =~ / 200\n$/;
		}
	}
	return $n;
}

# After an outage: 200s again within $limit seconds, or the receiver's log.
sub serves_again
{
	my ($what, $limit) = @_;
	my $before = acked();
	my $ok = ok(poll_until(sub { acked() >= $before + 50 }, "200s after $what", $limit),
		"$what: deliveries are answered 200 again within ${limit}s");
	unless ($ok)
	{
		my @lines = split /\n/, $r->{log};
		splice(@lines, 0, @lines - 200) if @lines > 200;
		diag("receiver log (last lines):\n" . join("\n", @lines));
	}
	return $ok;
}

ok(poll_until(sub { acked() >= 100 }, 'traffic', 60), 'deliveries flowing');

for my $i (1 .. 12)
{
	$node->restart;
	serves_again("fast restart $i", 15) or last;
}
for my $i (1 .. 2)
{
	$node->stop('immediate');
	$node->start;
	serves_again("immediate stop and start $i", 15) or last;
}
for my $i (1 .. 2)
{
	my @pids = split /\n/, $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE usename = 'rcv'");
	ok(@pids > 0, "kill $i: the receiver has backends");
	kill 'KILL', $_ for @pids;
	serves_again("SIGKILL of a backend $i", 15) or last;
}

ok(kill(0, $r->{pid}), 'the same receiver process served throughout');
open(my $fh, '>', "$tmp/stop") or die;
close $fh;
$_->finish for @streams;
is(stop_receiver($r), 0, 'SIGTERM: receiver exits 0');
$node->stop;
done_testing();
