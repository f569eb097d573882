
# 110_receiver_slow_clients.pl
#	Slow or idle clients cannot starve valid ones: beside twice
#	--max-connections clients trickling their heads or bodies (and opening
#	a connection again whenever the receiver closes one), valid deliveries
#	are answered with a p99 under 1 s and every one is in the inbox; a
#	client address over --max-connections-per-address has its new
#	connections closed; an idle keep-alive connection gives way first; the
#	deadline is for the whole request, not per read; and /metrics counts
#	what was shed.

use strict;
use warnings;

use lib 'receiver/t';
use IO::Select;
use IO::Socket::INET;
use IPC::Run;
use PostgreSQL::Test::Utils;
use ReceiverTest;
use Test::More;
use Time::HiRes qw(time);

$SIG{PIPE} = 'IGNORE';

my $node = new_node('slow');
my $secret = 'slow-test-secret';
$node->safe_psql('postgres',
	"SELECT webhook_inbox.create_source(name => 'gh', kind => 'github', secret => '$secret')");
my $tmp = PostgreSQL::Test::Utils::tempdir;

my $n = 0;
sub delivery
{
	my $id = 'slow-' . ++$n;
	my $body = qq({"id":"$id","action":"opened"});
	return ($id, sign('github', $secret, $body, id => $id), $body);
}

sub status_of
{
	my ($file) = @_;
	open(my $f, '<', $file) or return {};
	my %s;
	while (<$f>)
	{
		$s{open} = $1, $s{answered} = $2, $s{connects} = $3 if /^open (\d+) answered (\d+) connects (\d+)/;
		$s{"status$1"} = $2 if /^status (\d+) (\d+)/;
	}
	return \%s;
}

sub connect_from
{
	my ($r, $local) = @_;
	my $s = IO::Socket::INET->new(
		PeerAddr => '127.0.0.1',
		PeerPort => $r->{port},
		LocalAddr => $local,
		Proto => "tcp") or die "connect: $!";
	return $s;
}

# Has the receiver closed $s (EOF or reset) within $limit seconds?
sub closed_within
{
	my ($s, $limit) = @_;
	my $sel = IO::Select->new($s);
	my $deadline = time + $limit;
	while (time < $deadline)
	{
		next unless $sel->can_read(0.05);
		my $got = sysread($s, my $buf, 4096);
		return 1 unless $got;
	}
	return 0;
}

my $max = 32;
my $r = start_receiver($node, '--max-connections', $max, '--read-timeout', '5s');

# an idle keep-alive connection is the first to give way when slots run out
{
	my $c = start_receiver($node, '--max-connections', '2', '--read-timeout', '30s');
	my $ka = connect_from($c, '127.0.0.1');
	syswrite($ka, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
	my $sel = IO::Select->new($ka);
	my $answer = '';
	poll_until(
		sub {
			if ($sel->can_read(0.05))
			{
				my $chunk = '';
				sysread($ka, $chunk, 4096);
				$answer .= $chunk;
			}
			return $answer =~ /\r\n\r\nok/;
		},
		'keep-alive answer', 10);
	like($answer, qr{^HTTP/1\.1 200 }, 'keep-alive connection: answered, kept open');
	my $slow = connect_from($c, '127.0.0.1');
	syswrite($slow, "POST /hooks/gh HTTP/1.1\r\nHost: x\r\n");
	my ($id, $h, $body) = delivery();
	my $t0 = time;
	is(post($c, 'gh', $h, $body, timeout => 10)->{status}, 200, 'third connection at max 2: served');
	cmp_ok(time - $t0, '<', 2, 'third connection at max 2: at once, not after read-timeout');
	ok(closed_within($ka, 5), 'the idle keep-alive connection was the one closed');
	ok(!closed_within($slow, 0.3), 'the unfinished request was left alone');
	is(metric($c, 'webhook_receiver_connections_shed_total{reason="idle"}'), 1,
		'metrics: one idle connection shed');
	is(stop_receiver($c), 0, 'receiver exits 0');
}

# the deadline is for the whole request: a body trickled a byte every
# 200 ms is cut off at read-timeout, though every read is well inside it
{
	my $c = start_receiver($node, '--read-timeout', '1s');
	my $s = connect_from($c, '127.0.0.1');
	syswrite($s, "POST /hooks/gh HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n");
	my $t0 = time;
	my $sel = IO::Select->new($s);
	my $closed = 0;
	while (time - $t0 < 10)
	{
		if ($sel->can_read(0.2))
		{
			my $got = sysread($s, my $buf, 4096);
			if (!$got) { $closed = 1; last; }
		}
		if (!syswrite($s, 'x')) { $closed = 1; last; }
	}
	my $took = time - $t0;
	ok($closed, 'trickled body: connection closed');
	cmp_ok($took, '<', 4, "trickled body: cut off at read-timeout ($took s)");
	is(metric($c, 'webhook_receiver_connections_shed_total{reason="deadline"}'), 1,
		'metrics: the deadline counted');
	is(stop_receiver($c), 0, 'receiver exits 0');
}

# a cap per client address: past it a new connection is closed at once,
# other addresses served
{
	my $c = start_receiver($node, '--max-connections-per-address', '4');
	my @held = map { connect_from($c, '127.0.0.3') } 1 .. 4;
	syswrite($_, "POST /hooks/gh HTTP/1.1\r\n") for @held;
	my $over = connect_from($c, '127.0.0.3');
	ok(closed_within($over, 5), 'fifth connection of one address: closed');
	ok(!closed_within($held[0], 0.3), 'its first four: still open');
	my ($id, $h, $body) = delivery();
	is(post($c, 'gh', $h, $body)->{status}, 200, 'another address: served');
	is(metric($c, 'webhook_receiver_connections_shed_total{reason="address_cap"}'), 1,
		'metrics: one connection over the address cap');
	close $_ for @held;
	is(stop_receiver($c), 0, 'receiver exits 0');
}

# twice max-connections trickling clients, from eight addresses, and
# valid deliveries one after another beside them
{
	my ($stop, $status) = ("$tmp/stop", "$tmp/status");
	my $h = IPC::Run::start([ $^X, 'receiver/t/slow_clients.pl', $r->{port}, 'trickle', 2 * $max, 2,
			$stop, $status ], '>', "$tmp/slow.out", '2>', "$tmp/slow.err");
	ok(poll_until(sub { (metric($r, 'webhook_receiver_connections') // 0) >= $max }, 'slots full', 30),
		"the slow clients hold all $max connections");
	ok(poll_until(sub { (status_of($status)->{connects} // 0) > 2 * $max }, 'slow clients reconnecting', 30),
		'the slow clients are shed and come back');

	my (@lat, @ids, %st);
	# at most a minute: today's queueing behind the slow clients takes
	# read-timeout per delivery
	my $until = time + 60;
	while (@lat < 100 && time < $until)
	{
		my ($id, $hd, $body) = delivery();
		my $t0 = time;
		my $res = post($r, 'gh', $hd, $body, timeout => 15);
		push @lat, time - $t0;
		$st{ $res->{status} }++;
		push @ids, $id if $res->{status} == 200;
	}
	my @sorted = sort { $a <=> $b } @lat;
	my ($p50, $p99) = @sorted[ int(@sorted * 0.50), int(@sorted * 0.99) ];
	my $s = status_of($status);
	diag(sprintf('valid deliveries beside %d slow clients: p50 %.3f s, p99 %.3f s, max %.3f s; '
		  . 'slow clients: %d connects, %d open', 2 * $max, $p50, $p99, $sorted[-1],
		  $s->{connects} // 0, $s->{open} // 0));
	is(scalar(@lat), 100, 'a hundred valid deliveries sent within a minute');
	is($st{200} // 0, 100, 'every valid delivery answered 200')
	  or diag(join(', ', map { "$_: $st{$_}" } sort keys %st));
	cmp_ok($p99, '<', 1, sprintf('p99 of valid deliveries under 1 s (%.3f s)', $p99));
	cmp_ok($s->{connects}, '>', 2 * $max, 'the slow clients kept coming back');

	open(my $f, '>', $stop) or die;
	close $f;
	$h->finish;

	my $list = join(',', map { "'$_'" } @ids);
	is($node->safe_psql('postgres',
			"SELECT count(DISTINCT event_id) FROM webhook_inbox.inbox WHERE event_id IN ($list)"),
		scalar(@ids), 'every delivery answered 200 is in the inbox');
	cmp_ok(metric($r, 'webhook_receiver_connections_shed_total{reason="slots_full"}') // 0,
		'>', 0, 'metrics: slow clients shed at max-connections');
	ok(poll_until(sub { (metric($r, 'webhook_receiver_connections') // 99) == 0 }, 'connections closed', 30),
		'no connection left behind');
	is(metric($r, 'webhook_receiver_buffered_bytes'), 0, 'no bytes left counted as buffered');
}

is(stop_receiver($r), 0, 'receiver exits 0');
$node->stop;
done_testing();
