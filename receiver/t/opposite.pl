
# opposite.pl URL1 URL2 SOURCE SECRET PREFIX SECONDS BURST OUTFILE
#	A client for the deadlock test: for SECONDS, round after round, sends
#	the same BURST Stripe-signed deliveries "PREFIX-ROUND-1" …
#	"PREFIX-ROUND-BURST" to two receivers at once, on BURST keep-alive
#	connections to each: ascending ids to URL1, descending to URL2, all
#	written before any answer is read, so that each receiver puts the round
#	into one batch and the two batches carry the same keys in opposite
#	orders.  Writes "id status body" per answer to OUTFILE.

use strict;
use warnings;

use Digest::SHA qw(hmac_sha256_hex);
use IO::Handle;
use IO::Socket::INET;
use Time::HiRes qw(time);

my ($url1, $url2, $source, $secret, $prefix, $seconds, $burst, $outfile) = @ARGV;
open(my $out, '>', $outfile) or die "$outfile: $!";
$out->autoflush(1);

sub connect_all
{
	my ($url) = @_;
	my ($host, $port) = $url =~ m{^http://([^:/]+):(\d+)} or die "bad url $url";
	my @socks;
	for (1 .. $burst)
	{
		my $s = IO::Socket::INET->new(PeerAddr => $host, PeerPort => $port, Proto => 'tcp')
		  or die "connect $url: $!";
		$s->autoflush(1);
		push @socks, $s;
	}
	return \@socks;
}

sub request
{
	my ($id) = @_;
	my $ts = int(time);
	my $body = qq({"id":"$id","object":"event","type":"customer.subscription.updated",)
	  . qq("data":{"object":{"id":"sub_$id","object":"subscription","status":"active"}}});
	my $sig = hmac_sha256_hex("$ts.$body", $secret);
	return "POST /hooks/$source HTTP/1.1\r\nHost: 127.0.0.1\r\n"
	  . "Content-Type: application/json\r\nStripe-Signature: t=$ts,v1=$sig\r\n"
	  . "Content-Length: " . length($body) . "\r\n\r\n$body";
}

# One HTTP answer from $s: (status, body); (599, error) if none.
sub answer
{
	my ($s) = @_;
	my $head = '';
	while ($head !~ /\r\n\r\n/)
	{
		my $n = sysread($s, my $chunk, 1);
		return (599, 'closed') unless $n;
		$head .= $chunk;
	}
	my ($status) = $head =~ m{^HTTP/1\.\d (\d+)};
	my ($len) = $head =~ /^Content-Length:\s*(\d+)/mi;
	my $body = '';
	while (length($body) < ($len // 0))
	{
		my $n = sysread($s, my $chunk, $len - length($body));
		return (599, 'closed') unless $n;
		$body .= $chunk;
	}
	return ($status // 599, $body);
}

my $a = connect_all($url1);
my $b = connect_all($url2);
my $end = time + $seconds;
for (my $round = 1; time < $end; $round++)
{
	my @ids = map { "$prefix-$round-$_" } 1 .. $burst;
	for my $i (0 .. $burst - 1)
	{
		print { $a->[$i] } request($ids[$i]);
		print { $b->[$i] } request($ids[ $burst - 1 - $i ]);
	}
	for my $i (0 .. $burst - 1)
	{
		my ($st, $body) = answer($a->[$i]);
		print $out "$ids[$i] $st $body\n";
		($st, $body) = answer($b->[$i]);
		print $out "$ids[$burst - 1 - $i] $st $body\n";
	}
}
close $out;
