
# 102_receiver_durability.pl
#	Nothing acknowledged is lost.  While clients stream signed deliveries,
#	PostgreSQL is stopped (fast, then immediate) and started again: every
#	delivery answered 2xx is in the inbox, every other one was answered
#	503, and the same receiver process serves again by itself.  Then
#	SIGTERM under load: the receiver drains, exits 0, and again every 2xx
#	is in the inbox.

use strict;
use warnings;

use lib 'receiver/t';
use IPC::Run;
use PostgreSQL::Test::Utils;
use ReceiverTest;
use Test::More;
use IO::Select;
use IO::Socket::INET;
use Time::HiRes ();

my $node = new_node('durability');
my $secret = 'durability-secret';
$node->safe_psql('postgres',
	"SELECT webhook_inbox.create_source(name => 'dur', kind => 'github', secret => '$secret')");
my $r = start_receiver($node, '--batch-size', '16', '--commit-timeout', '3000');
my $tmp = PostgreSQL::Test::Utils::tempdir;
my $clients = 4;

# Start $clients streams; returns their harnesses.
sub start_streams
{
	my ($round, $stop_on_refused) = @_;
	my @h;
	for my $k (1 .. $clients)
	{
		push @h,
		  IPC::Run::start(
			[
				$^X, 'receiver/t/stream.pl', $r->{url}, 'dur', $secret, "r$round-c$k",
				"$tmp/out-$round-$k", "$tmp/stop-$round", $stop_on_refused
			]);
	}
	return @h;
}

# All answers so far of one round, in order per client: [id, status].
sub answers
{
	my ($round) = @_;
	my @all;
	for my $k (1 .. $clients)
	{
		open(my $fh, '<', "$tmp/out-$round-$k") or next;
		while (my $line = <$fh>)
		{
			push @all, [ split ' ', $line ] if $line =~ /\n$/;
		}
	}
	return @all;
}

sub count_status
{
	my ($round, $re) = @_;
	return scalar grep { $_->[1] =~ $re } answers($round);
}

# Every 2xx answer's id must be in the inbox.
sub check_acknowledged_stored
{
	my ($round, $what) = @_;
	my %stored = map { $_ => 1 } split /\n/,
	  $node->safe_psql('postgres',
		"SELECT i.event_id FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s "
		  . "ON s.id = i.source_id WHERE s.name = 'dur' AND i.event_id LIKE 'r$round-%'");
	my @acked = map { $_->[0] } grep { $_->[1] =~ /^2/ } answers($round);
	my @lost = grep { !$stored{$_} } @acked;
	cmp_ok(scalar(@acked), '>', 0, "$what: deliveries were acknowledged");
	is(scalar(@lost), 0, "$what: every acknowledged delivery is in the inbox")
	  or diag("lost: @lost[0 .. ($#lost < 9 ? $#lost : 9)]");
	return scalar @acked;
}

for my $mode ('fast', 'immediate')
{
	my $round = $mode;
	my @streams = start_streams($round, 0);
	ok(poll_until(sub { count_status($round, qr/^200$/) >= 200 }, 'traffic', 60),
		"$mode: deliveries flowing");

	$node->stop($mode);
	ok(poll_until(sub { count_status($round, qr/^503$/) >= 20 }, '503s', 30),
		"$mode: database down answers 503");
	is(admin_get($r, '/readyz')->{status}, 503, "$mode: not ready while the database is down");
	like(metric($r, 'webhook_receiver_db_up'), qr/^0$/, "$mode: db_up gauge is 0");

	my $before = count_status($round, qr/^200$/);
	$node->start;
	ok(poll_until(sub { count_status($round, qr/^200$/) >= $before + 100 }, 'recovery', 60),
		"$mode: the same receiver serves again after the restart");
	ok(kill(0, $r->{pid}), "$mode: receiver process was not restarted");

	open(my $fh, '>', "$tmp/stop-$round") or die;
	close $fh;
	$_->finish for @streams;

	my @other = grep { $_->[1] !~ /^(200|503)$/ } answers($round);
	is(scalar(@other), 0, "$mode: every delivery not acknowledged got 503")
	  or diag("other answers: " . join(', ', map { "@$_" } @other[0 .. ($#other < 9 ? $#other : 9)]));
	check_acknowledged_stored($round, $mode);
}

# The answer waits for COMMIT: while intake() is blocked by a lock, the
# client has no answer; once the transaction commits it gets 200, and the
# row is there by then.
{
	my $bg = $node->background_psql('postgres');
	$bg->query_safe('BEGIN; LOCK TABLE webhook_inbox.deliveries IN ACCESS EXCLUSIVE MODE;');
	my $body = '{"id":"wait-1","action":"opened"}';
	my $h = sign('github', $secret, $body, id => 'wait-1');
	my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $r->{port})
	  or die "connect: $!";
	syswrite($s, "POST /hooks/dur HTTP/1.1\r\nHost: x\r\nContent-Length: " . length($body)
		  . "\r\n" . join('', map { "$_: $h->{$_}\r\n" } sort keys %$h) . "\r\n" . $body);
	ok(poll_until(sub {
		$node->safe_psql('postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE usename = 'rcv' AND wait_event_type = 'Lock'") >= 1 },
		'intake waiting on the lock'),
		'commit wait: intake is blocked');
	ok(!IO::Select->new($s)->can_read(0), 'commit wait: no answer before COMMIT');
	$bg->query_safe('ROLLBACK;');
	$bg->quit;
	my $answer = '';
	poll_until(sub {
		if (IO::Select->new($s)->can_read(0)) { sysread($s, my $b, 4096) or return 1; $answer .= $b; }
		$answer =~ /\r\n\r\n\w+$/ }, 'answer');
	like($answer, qr{^HTTP/1\.1 200 .*\r\n\r\n(new|quarantined)$}s, 'commit wait: 200 once committed');
	is(inbox_count($node, 'dur', 'wait-1'), 1, 'commit wait: the row exists when the answer comes');
	close $s;
}

# Reloads under load drop nothing: while clients stream, the sources are
# changed (and so reloaded) over and over; every answer is still 200.
{
	my $round = 'reload';
	my @streams = start_streams($round, 0);
	ok(poll_until(sub { count_status($round, qr/^200$/) >= 100 }, 'traffic', 60),
		'reload: deliveries flowing');
	for my $i (1 .. 20)
	{
		wait_reload($r, $node,
			"UPDATE webhook_inbox.sources SET settings = '{\"n\": $i}' WHERE name = 'dur'");
	}
	my $before = count_status($round, qr/^200$/);
	ok(poll_until(sub { count_status($round, qr/^200$/) >= $before + 50 }, 'traffic', 60),
		'reload: still flowing after 20 reloads');
	open(my $fh, '>', "$tmp/stop-$round") or die;
	close $fh;
	$_->finish for @streams;
	my @other = grep { $_->[1] ne '200' } answers($round);
	is(scalar(@other), 0, 'reload: every delivery answered 200 across 20 reloads')
	  or diag("other answers: " . join(', ', map { "@$_" } @other[0 .. ($#other < 9 ? $#other : 9)]));
	check_acknowledged_stored($round, 'reload');
}

# A database that stops answering (a lock held elsewhere) must not make
# requests hang: the batch is given up after commit-timeout (3 s) with 503,
# and the receiver reconnects and serves again once the lock is gone.
{
	my $bg = $node->background_psql('postgres');
	$bg->query_safe('BEGIN; LOCK TABLE webhook_inbox.deliveries IN ACCESS EXCLUSIVE MODE;');
	my $body = '{"id":"stuck-1","action":"opened"}';
	my $t0 = Time::HiRes::time();
	my $res = post($r, 'dur', sign('github', $secret, $body, id => 'stuck-1'), $body);
	my $took = Time::HiRes::time() - $t0;
	is($res->{status}, 503, 'silent database: 503');
	cmp_ok($took, '>=', 2.5, 'silent database: not before commit-timeout');
	cmp_ok($took, '<', 10, 'silent database: no hang');
	$bg->query_safe('ROLLBACK;');
	$bg->quit;
	$body = '{"id":"stuck-2","action":"opened"}';
	ok(poll_until(sub {
		post($r, 'dur', sign('github', $secret, $body, id => 'stuck-2'), $body)->{status} == 200 },
		'service after the lock', 30),
		'silent database: served again once it answers');
}

# A second signal exits at once, even while a batch cannot finish.
{
	my $x = start_receiver($node, '--commit-timeout', '30000');
	my $bg = $node->background_psql('postgres');
	$bg->query_safe('BEGIN; LOCK TABLE webhook_inbox.deliveries IN ACCESS EXCLUSIVE MODE;');
	my $body = '{"id":"second-1","action":"opened"}';
	my $h = sign('github', $secret, $body, id => 'second-1');
	my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $x->{port})
	  or die "connect: $!";
	syswrite($s, "POST /hooks/dur HTTP/1.1\r\nHost: x\r\nContent-Length: " . length($body)
		  . "\r\n" . join('', map { "$_: $h->{$_}\r\n" } sort keys %$h) . "\r\n" . $body);
	poll_until(sub {
		$node->safe_psql('postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE usename = 'rcv' AND wait_event_type = 'Lock'") >= 1 },
		'intake waiting on the lock');
	kill 'INT', $x->{pid};
	ok(poll_until(sub { $x->{harness}->pump_nb; $x->{log} =~ /draining/ }, 'draining', 10),
		'second signal: first SIGINT starts draining');
	ok(kill(0, $x->{pid}), 'second signal: still draining the blocked batch');
	my $t0 = Time::HiRes::time();
	kill 'TERM', $x->{pid};
	$x->{harness}->finish;
	is($x->{harness}->result(0), 1, 'second signal: exits at once with status 1');
	cmp_ok(Time::HiRes::time() - $t0, '<', 5, 'second signal: did not wait for the batch');
	close $s;
	$bg->query_safe('ROLLBACK;');
	$bg->quit;
}

# SIGTERM under load
{
	my $round = 'term';
	my @streams = start_streams($round, 1);
	ok(poll_until(sub { count_status($round, qr/^200$/) >= 200 }, 'traffic', 60),
		'SIGTERM: deliveries flowing');
	is(stop_receiver($r), 0, 'SIGTERM: receiver exits 0 under load');
	like($r->{log}, qr/shutdown complete/, 'SIGTERM: drained before exiting');
	$_->finish for @streams;
	my @other = grep { $_->[1] !~ /^(200|503|599-refused|599-other)$/ } answers($round);
	is(scalar(@other), 0, 'SIGTERM: only 200, 503 or no answer at all');
	check_acknowledged_stored($round, 'SIGTERM');
}

note("receiver log:\n$r->{log}");
$node->stop;
done_testing();
