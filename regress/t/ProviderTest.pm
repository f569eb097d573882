#
# regress/t/ProviderTest.pm
#	Helpers of the effects TAP tests that run against regress/t/bin/provider.pl,
#	the small strict Stripe-shaped provider: start one on a loopback address,
#	read what it received, steer its faults.
#
package ProviderTest;

use strict;
use warnings;
use Exporter 'import';
use JSON::PP;

use lib 'tools/test';
use SimTest qw(stop_proc http_json poll_until);

our @EXPORT = qw(start_provider provider_requests provider_ctl stop_proc http_json poll_until);

my $json = JSON::PP->new->canonical;

# start_provider(addr => '127.0.0.1', delay_ms => N): { url, port, file, ... }
sub start_provider
{
	my (%opt) = @_;
	my $dir = SimTest::tmpdir();
	my $addr = $opt{addr} // '127.0.0.1';
	my @cmd = ($^X, 'regress/t/bin/provider.pl', '--out', "$dir/requests.jsonl", '--state', "$dir/state.json",
		'--addr', $addr);
	push @cmd, '--delay-ms', $opt{delay_ms} if $opt{delay_ms};
	my $p = SimTest::_start_listening(\@cmd, "provider on $addr");
	$p->{file} = "$dir/requests.jsonl";
	$p->{url} = "http://$addr:$p->{port}";
	return $p;
}

# Every request the provider received so far, oldest first.
sub provider_requests
{
	my ($p) = @_;
	my @r = -e $p->{file} ? map { $json->decode($_) } grep { /\S/ } split /\n/, SimTest::slurp($p->{file}) : ();
	return @r;
}

# provider_ctl(p, { drop => N, forget_keys => 1, forget => [KEY…] }): the provider's state after the change.
sub provider_ctl
{
	my ($p, $ctl) = @_;
	my (undef, $st) = http_json('POST', "$p->{url}/_ctl", { content => $json->encode($ctl // {}) });
	return $st;
}

1;
