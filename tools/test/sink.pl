#!/usr/bin/perl
#
# tools/test/sink.pl
#	A tiny HTTP/1.1 webhook sink for webhook-sim's TAP tests, independent of
#	the simulator's code.  It accepts many keep-alive connections at once
#	(IO::Select), answers every request, and appends one JSON line per
#	request to --out: {"n","method","path","headers":{lowercased},"body_b64"}.
#
#	perl sink.pl --out FILE [--port 0] [--addr 127.0.0.1] [--fail-first N]
#		[--fail-status 503] [--reply FILE]
#
#	Prints "listening on PORT" when ready.  --fail-first N answers the first
#	N requests with --fail-status (default 500), the rest 200.  --reply FILE
#	(read again for each request, so a test can change it) is a JSON object
#	{"status": 200, "headers": {"Name": "value"}, "body": "..."} to answer
#	with instead.
#
use strict;
use warnings;
use Getopt::Long;
use IO::Select;
use IO::Socket::INET;
use JSON::PP;
use MIME::Base64;

my ($out, $port, $fail_first, $fail_status, $addr, $reply) = (undef, 0, 0, 500, '127.0.0.1', undef);
GetOptions(
	'out=s'         => \$out,
	'port=i'        => \$port,
	'addr=s'        => \$addr,
	'reply=s'       => \$reply,
	'fail-first=i'  => \$fail_first,
	'fail-status=i' => \$fail_status) or die "usage: sink.pl --out FILE\n";
die "sink.pl: --out is required\n" unless defined $out;

my $listen = IO::Socket::INET->new(
	LocalAddr => $addr,
	LocalPort => $port,
	Listen    => 128,
	ReuseAddr => 1) or die "sink.pl: listen: $!\n";
open(my $fh, '>>', $out) or die "sink.pl: $out: $!\n";
$fh->autoflush(1);
$| = 1;
print "listening on ", $listen->sockport, "\n";

$SIG{TERM} = sub { exit 0 };
my $sel = IO::Select->new($listen);
my %buf;
my $n = 0;
my $json = JSON::PP->new->canonical;

while (1)
{
	for my $s ($sel->can_read)
	{
		if ($s == $listen)
		{
			my $c = $listen->accept or next;
			$sel->add($c);
			$buf{$c} = '';
			next;
		}
		my $got = sysread($s, my $chunk, 65536);
		if (!$got)
		{
			$sel->remove($s);
			delete $buf{$s};
			close $s;
			next;
		}
		$buf{$s} .= $chunk;
		# serve every complete request in the buffer
		while ($buf{$s} =~ /\r\n\r\n/)
		{
			my $end = index($buf{$s}, "\r\n\r\n");
			my $head = substr($buf{$s}, 0, $end);
			my @lines = split /\r\n/, $head;
			my ($method, $path) = split / /, shift @lines;
			my %h;
			for (@lines)
			{
				my ($k, $v) = /^([^:]+):\s*(.*)$/ or next;
				$h{lc $k} = $v;
			}
			my $len = $h{'content-length'} // 0;
			last if length($buf{$s}) < $end + 4 + $len;
			my $body = substr($buf{$s}, $end + 4, $len);
			$buf{$s} = substr($buf{$s}, $end + 4 + $len);
			$n++;
			print $fh $json->encode({ n => $n, method => $method, path => $path,
				headers => \%h, body_b64 => encode_base64($body, '') }), "\n";
			my $status = $n <= $fail_first ? $fail_status : 200;
			my $resp = $status == 200 ? '{"ok":true}' : '{"ok":false}';
			my $extra = '';
			if (defined $reply && open(my $rf, '<', $reply))
			{
				my $r = $json->decode(do { local $/; <$rf> });
				close $rf;
				$status = $r->{status} // 200;
				$resp = $r->{body} // '';
				$extra .= "$_: $r->{headers}{$_}\r\n" for sort keys %{ $r->{headers} // {} };
			}
			syswrite($s, "HTTP/1.1 $status X\r\nContent-Type: application/json\r\n$extra"
				  . "Content-Length: " . length($resp) . "\r\n\r\n$resp");
		}
	}
}
