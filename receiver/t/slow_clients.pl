
# slow_clients.pl PORT MODE COUNT FIRST_ADDR STOPFILE STATUSFILE
#	Clients that hold the receiver's connections, for the tests of what
#	slow clients may take from valid ones; run until STOPFILE exists.
#	COUNT connections to 127.0.0.1:PORT, spread over the loopback source
#	addresses 127.0.0.FIRST_ADDR … FIRST_ADDR+7 (eight connections or more
#	each), so that no cap per address is what bounds them.
#	MODE:
#	  trickle  half trickle their headers, half announce a body of 100 kB
#	           and trickle it: a byte every 200 ms; each connection the
#	           receiver closes is opened again 100 ms later, as an attacker
#	           would.
#	  hold     each sends a head announcing a 1 MiB body and all of it but
#	           its last byte, then holds the connection (no reconnect);
#	           whatever the receiver answers is recorded.
#	STATUSFILE is rewritten every 200 ms: "open N answered N connects N"
#	and one "status S N" line per HTTP status received.

use strict;
use warnings;

use IO::Select;
use IO::Socket::INET;
use Socket qw(SOL_SOCKET SO_SNDBUF);
use Time::HiRes qw(time);

$SIG{PIPE} = 'IGNORE';
my ($port, $mode, $count, $first, $stopfile, $statusfile) = @ARGV;
my $body_len = $mode eq 'hold' ? 1 << 20 : 100_000;
my (%conn, %status);
my ($answered, $connects) = (0, 0);
my $next_status = 0;

# one connection, numbered $k: what it sends first, and what it trickles
sub open_one
{
	my ($k) = @_;
	my $s = IO::Socket::INET->new(
		PeerAddr => '127.0.0.1',
		PeerPort => $port,
		LocalAddr => '127.0.0.' . ($first + $k % 8),
		Proto => 'tcp',
		Blocking => 0) or return;
	$connects++;
	my $c = { sock => $s, k => $k, in => '', due => time };
	if ($mode eq 'hold')
	{
		$c->{out} = "POST /hooks/gh HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
		  . "Content-Length: $body_len\r\n\r\n" . ('x' x ($body_len - 1));
	}
	elsif ($k % 2)
	{
		$c->{out} = "POST /hooks/gh HTTP/1.1\r\nHost: x\r\nContent-Length: $body_len\r\n\r\n";
		$c->{drip} = 'x';
	}
	else
	{
		$c->{out} = "POST /hooks/gh HTTP/1.1\r\nHost: x\r\n";
		$c->{drip} = "X-Slow: 1\r\n";
	}
	$conn{ fileno($s) } = $c;
}

sub close_one
{
	my ($c) = @_;
	delete $conn{ fileno($c->{sock}) };
	close $c->{sock};
	# trickle: back 100 ms later
	push @{ $main::again }, [ time + 0.1, $c->{k} ] if $mode eq 'trickle';
}

$main::again = [];
open_one($_) for 0 .. $count - 1;
my $deadline = time + 600;
while (!-e $stopfile && time < $deadline)
{
	my $now = time;
	my @due = grep { $_->[0] <= $now } @{$main::again};
	$main::again = [ grep { $_->[0] > $now } @{$main::again} ];
	open_one($_->[1]) for @due;

	my ($r, $w) = (IO::Select->new, IO::Select->new);
	for my $c (values %conn)
	{
		$r->add($c->{sock});
		$w->add($c->{sock}) if length $c->{out};
	}
	my ($rr, $ww) = IO::Select->select($r, $w, undef, 0.05);
	for my $s (@{ $ww // [] })
	{
		my $c = $conn{ fileno($s) } or next;
		my $n = syswrite($s, $c->{out}, 65536);
		if (!defined $n)
		{
			close_one($c) unless $!{EAGAIN};
			next;
		}
		substr($c->{out}, 0, $n) = '';
	}
	for my $s (@{ $rr // [] })
	{
		my $c = $conn{ fileno($s) } or next;
		my $n = sysread($s, my $buf, 65536);
		next if !defined $n && $!{EAGAIN};
		if ($n)
		{
			$c->{in} .= $buf;
			if (!$c->{answered} && $c->{in} =~ m{^HTTP/1\.1 (\d+) })
			{
				$c->{answered} = 1;
				$answered++;
				$status{$1}++;
			}
			next;
		}
		close_one($c);
	}
	$now = time;
	for my $c (values %conn)
	{
		next unless $c->{drip} && !length $c->{out} && $c->{due} <= $now;
		$c->{out} = $c->{drip};
		$c->{due} = $now + 0.2;
	}
	if ($now >= $next_status)
	{
		$next_status = $now + 0.2;
		open(my $f, '>', "$statusfile.tmp") or die;
		print $f 'open ' . scalar(keys %conn) . " answered $answered connects $connects\n";
		print $f "status $_ $status{$_}\n" for sort keys %status;
		close $f;
		rename "$statusfile.tmp", $statusfile;
	}
}
close $_->{sock} for values %conn;
