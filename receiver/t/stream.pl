
# stream.pl URL SOURCE SECRET PREFIX OUTFILE STOPFILE STOP_ON_REFUSED
#	A client of the receiver for the durability tests: sends GitHub-signed
#	deliveries "PREFIX-1", "PREFIX-2", … one after another until STOPFILE
#	exists, writing "id status" per delivery to OUTFILE as soon as it is
#	answered.  A 599 (no HTTP answer) is written as 599-refused when the
#	connection was refused, else 599-other.  With STOP_ON_REFUSED set, a
#	refused connection ends the stream (the receiver has gone).

use strict;
use warnings;

use Digest::SHA qw(hmac_sha256_hex);
use HTTP::Tiny;
use IO::Handle;

my ($url, $source, $secret, $prefix, $outfile, $stopfile, $stop_on_refused) = @ARGV;
open(my $out, '>', $outfile) or die "$outfile: $!";
$out->autoflush(1);
my $ua = HTTP::Tiny->new(timeout => 30, keep_alive => 1);

for (my $i = 1; !-e $stopfile; $i++)
{
	my $id = "$prefix-$i";
	my $body = qq({"id":"$id","action":"opened"});
	my $res = $ua->request(
		'POST',
		"$url/hooks/$source",
		{
			headers => {
				'X-Hub-Signature-256' => 'sha256=' . hmac_sha256_hex($body, $secret),
				'X-GitHub-Delivery' => $id,
				'X-GitHub-Event' => 'issues',
				'Content-Type' => 'application/json'
			},
			content => $body
		});
	my $status = $res->{status};
	if ($status == 599)
	{
		$status .= $res->{content} =~ /refused/i ? '-refused' : '-other';
	}
	print $out "$id $status\n";
	last if $stop_on_refused && $status eq '599-refused';
}
close $out;
