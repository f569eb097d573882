# webhook-sim replay: shuffled is a permutation, doubled doubles, holed
# drops the share asked for; every replayed event is freshly signed.
use strict;
use warnings;
use lib 'tools/test';
use Digest::SHA qw(hmac_sha256 hmac_sha256_hex);
use JSON::PP;
use MIME::Base64;
use SimTest;
use Test::More;

my $json = JSON::PP->new;
my $dir = tmpdir();
my $file = "$dir/stream.jsonl";
my %secret = (st => 'whsec_test123', shop => 'shpss_secret');

my $sim = start_sim('--stripe', "st:$secret{st}", '--shopify', "shop:$secret{shop}",
	'--seed', 21, '--objects', 40, '--events', 400, '--record', $file);
stop_proc($sim);
my @rec = map { $json->decode($_) } split /\n/, slurp($file);
is(scalar @rec, 400, 'recorded 400 events');
my @rec_bodies = map { $_->{body} } @rec;

# Replay under other source names: the flags name the target sources.
my @flags = ('--stripe', "st2:$secret{st}", '--shopify', "shop2:$secret{shop}");

sub replay
{
	my ($mode, @extra) = @_;
	my $sink = start_sink();
	my ($rc, $out, $err) = run_sim('replay', '--file', $file, '--mode', $mode,
		'--to', $sink->{url}, @flags, '--concurrency', 4, @extra);
	my @req = sink_requests($sink);
	stop_proc($sink);
	return ($rc, $out, $err, @req);
}

sub verifies
{
	my ($r) = @_;
	my $h = $r->{headers};
	if ($r->{path} eq '/hooks/st2')
	{
		my ($t, $v1) = ($h->{'stripe-signature'} // '') =~ /^t=(\d+),v1=([0-9a-f]+)$/ or return 0;
		return abs($t - time()) <= 300 && $v1 eq hmac_sha256_hex("$t.$r->{body}", $secret{st});
	}
	return $r->{path} eq '/hooks/shop2'
	  && ($h->{'x-shopify-hmac-sha256'} // '') eq encode_base64(hmac_sha256($r->{body}, $secret{shop}), '')
	  && $h->{'x-shopify-webhook-id'};
}

sub same_multiset
{
	my ($got, $want) = @_;
	return join("\0", sort @$got) eq join("\0", sort @$want);
}

# shuffled
my ($rc, $out, $err, @req) = replay('shuffled', '--seed', 5);
is($rc, 0, 'shuffled: exit 0');
like($out, qr/^replay mode=shuffled events=400 sent=400 2xx=400 non-2xx=0 dropped=0$/m, 'shuffled: counts');
is(scalar @req, 400, 'shuffled: 400 received');
ok(same_multiset([ map { $_->{body} } @req ], \@rec_bodies), 'shuffled: a permutation of the record');
ok(join("\0", map { $_->{body} } @req) ne join("\0", @rec_bodies), 'shuffled: not in recorded order');
is(scalar(grep { !verifies($_) } @req), 0, 'shuffled: every event verifies');
my %hdr_ok = map { $_->{event_id} => $_ } @rec;
is(scalar(grep { $_->{path} eq '/hooks/shop2'
			&& !$hdr_ok{ $_->{headers}{'x-shopify-webhook-id'} } } @req), 0,
	'recorded Shopify headers are sent again');

# doubled
($rc, $out, $err, @req) = replay('doubled', '--seed', 6);
is($rc, 0, 'doubled: exit 0');
like($out, qr/sent=800 2xx=800 non-2xx=0/, 'doubled: counts');
ok(same_multiset([ map { $_->{body} } @req ], [ @rec_bodies, @rec_bodies ]), 'doubled: every event exactly twice');
is(scalar(grep { !verifies($_) } @req), 0, 'doubled: every event verifies');

# holed
($rc, $out, $err, @req) = replay('holed', '--hole-share', '0.25', '--seed', 7, '--concurrency', 1);
is($rc, 0, 'holed: exit 0');
like($out, qr/sent=300 2xx=300 non-2xx=0 dropped=100/, 'holed: counts');
is(scalar @req, 300, 'holed: 25% of 400 dropped');
my %seen = map { $_->{body} => 1 } @req;
is(scalar keys %seen, 300, 'holed: no event twice');
is(scalar(grep { !$seen{$_} } @rec_bodies), 100, 'holed: the rest of the record is sent');
my %pos;
@pos{@rec_bodies} = 0 .. $#rec_bodies;
my @order = map { $pos{ $_->{body} } } @req;
is(scalar(grep { $order[$_] < $order[ $_ - 1 ] } 1 .. $#order), 0, 'holed: the rest keeps recorded order');

($rc, $out, $err, @req) = replay('holed');
like($out, qr/sent=360 .* dropped=40/, 'holed: default share 10%');

# A receiver that answers non-2xx: exit 1 and counted.
my $sink = start_sink(fail_first => 3);
($rc, $out) = run_sim('replay', '--file', $file, '--mode', 'shuffled', '--to', $sink->{url}, @flags);
stop_proc($sink);
is($rc, 1, 'non-2xx answers: exit 1');
like($out, qr/sent=400 2xx=397 non-2xx=3/, 'non-2xx answers counted');

# Usage errors.
($rc, $out, $err) = run_sim('replay', '--file', $file, '--mode', 'shuffled', '--to', 'http://127.0.0.1:1',
	'--stripe', "st:$secret{st}");
is($rc, 2, 'record kind without a source flag: exit 2');
like($err, qr/no --shopify/, 'names the missing flag');
($rc) = run_sim('replay', '--file', "$dir/none", '--mode', 'shuffled', '--to', 'http://127.0.0.1:1', @flags);
is($rc, 2, 'missing file: exit 2');

done_testing();
