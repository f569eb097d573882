# webhook-sim: signed chaotic delivery, checked by code independent of the
# simulator (Digest::SHA over the bytes the sink received).
use strict;
use warnings;
use lib 'tools/test';
use Digest::SHA qw(hmac_sha256 hmac_sha256_hex);
use JSON::PP;
use MIME::Base64;
use SimTest;
use Test::More;

my $json = JSON::PP->new;
my %secret = (st => 'whsec_test123', shop => 'shpss_secret',
	std => 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw');
my @src = ('--stripe', "st:$secret{st}", '--shopify', "shop:$secret{shop}",
	'--standard', "std:$secret{std}");

# Signature check of one received request, per scheme; returns a reason or ''.
sub bad_signature
{
	my ($r) = @_;
	my ($h, $body) = ($r->{headers}, $r->{body});
	return 'method' unless $r->{method} eq 'POST';
	return 'content-type' unless ($h->{'content-type'} // '') eq 'application/json';
	if ($r->{path} eq '/hooks/st')
	{
		my ($t, $v1) = ($h->{'stripe-signature'} // '') =~ /^t=(\d+),v1=([0-9a-f]{64})$/
		  or return 'stripe header';
		return 'stripe timestamp' if abs($t - time()) > 300;
		return 'stripe hmac' unless $v1 eq hmac_sha256_hex("$t.$body", $secret{st});
	}
	elsif ($r->{path} eq '/hooks/shop')
	{
		return 'shopify hmac' unless ($h->{'x-shopify-hmac-sha256'} // '') eq
		  encode_base64(hmac_sha256($body, $secret{shop}), '');
		for (qw(x-shopify-topic x-shopify-webhook-id x-shopify-event-id x-shopify-shop-domain
			x-shopify-triggered-at x-shopify-api-version))
		{
			return "missing $_" unless $h->{$_};
		}
	}
	elsif ($r->{path} eq '/hooks/std')
	{
		my ($id, $ts, $sig) = @$h{qw(webhook-id webhook-timestamp webhook-signature)};
		return 'standard headers' unless $id && $ts && $sig;
		return 'standard timestamp' if abs($ts - time()) > 300;
		(my $k = $secret{std}) =~ s/^whsec_//;
		return 'standard hmac' unless $sig eq 'v1,' . encode_base64(hmac_sha256("$id.$ts.$body", decode_base64($k)), '');
	}
	else
	{
		return "path $r->{path}";
	}
	return '';
}

sub event_id
{
	my ($r) = @_;
	return $r->{headers}{'x-shopify-webhook-id'} // $r->{headers}{'webhook-id'}
	  // $json->decode($r->{body})->{id};
}

# 1. A large stream with chaos: every delivery verifies, shares within tolerance.
my $sink = start_sink();
my $n = 4000;
my $sim = start_sim(@src, '--seed', 11, '--objects', 300, '--events', $n,
	'--deliver-to', $sink->{url}, '--drop', '0.1', '--duplicate', '0.2',
	'--reorder-ms', '30', '--concurrency', 8);
my $st;
ok(poll_until(sub { (undef, $st) = http_json('GET', "$sim->{url}/_sim/status"); $st && $st->{done} }, 120),
	'delivery finished');
is($st->{generated}, $n, 'all events generated');
my @req = sink_requests($sink);
is(scalar @req, $st->{delivered}, 'sink received every delivery');
is($st->{acked}, $st->{delivered}, 'every delivery acknowledged');

my %why;
$why{ bad_signature($_) }++ for @req;
is_deeply(\%why, { '' => scalar @req }, 'every delivery verifies under its scheme')
  or diag explain \%why;

my $drop_share = $st->{dropped} / $n;
ok($drop_share > 0.07 && $drop_share < 0.13, "drop share $drop_share near 0.1");
my $dup_share = $st->{duplicated} / ($n - $st->{dropped});
ok($dup_share > 0.16 && $dup_share < 0.24, "duplicate share $dup_share near 0.2");
is(scalar @req, $n - $st->{dropped} + $st->{duplicated}, 'deliveries = generated - dropped + duplicated');

my %times;
$times{ event_id($_) }++ for @req;
is(scalar keys %times, $n - $st->{dropped}, 'each surviving event delivered');
is(scalar(grep { $_ > 2 } values %times), 0, 'no event delivered more than twice');
is(scalar(grep { $_ == 2 } values %times), $st->{duplicated}, 'duplicates are the same message (same ids)');

# Reorder: deliveries do not arrive in generation order.
# generation order of Stripe events: their "created" is non-decreasing in generation
my @created = map { $json->decode($_->{body})->{created} } grep { $_->{path} eq '/hooks/st' } @req;
my $inv = grep { $created[$_] < $created[ $_ - 1 ] } 1 .. $#created;
ok($inv > 0, "reordered: $inv inversions of Stripe created times");
is(stop_proc($sim), 0, 'serve exits 0 on SIGTERM');
stop_proc($sink);

# 2. Retries: non-2xx answers are retried with backoff until acknowledged.
$sink = start_sink(fail_first => 6, fail_status => 503);
$sim = start_sim('--stripe', "st:$secret{st}", '--seed', 3, '--objects', 5, '--events', 10,
	'--deliver-to', $sink->{url}, '--concurrency', 1, '--retry-base-ms', 20, '--retry-max-ms', 80);
ok(poll_until(sub { (undef, $st) = http_json('GET', "$sim->{url}/_sim/status"); $st && $st->{done} }, 60),
	'retried delivery finished');
is($st->{acked}, 10, 'all 10 acknowledged after retries');
is($st->{attempts}, 16, '6 failed attempts were retried');
@req = sink_requests($sink);
my %per;
$per{ event_id($_) }++ for @req;
is(scalar keys %per, 10, 'ten distinct messages');
is((grep { bad_signature($_) ne '' } @req), 0, 'retries are freshly signed and verify');
ok(poll_until(sub { slurp($sim->{out}) =~ /^status \{.*"done":true/m }, 10), 'status line printed when done');
stop_proc($sim);
stop_proc($sink);

# 3. Give up after --max-attempts; failures are counted.
$sink = start_sink(fail_first => 1000, fail_status => 500);
$sim = start_sim('--shopify', "shop:$secret{shop}", '--seed', 3, '--objects', 2, '--events', 3,
	'--deliver-to', $sink->{url}, '--retry-base-ms', 5, '--max-attempts', 3);
ok(poll_until(sub { (undef, $st) = http_json('GET', "$sim->{url}/_sim/status"); $st && $st->{done} }, 60),
	'failing delivery finished');
is($st->{failed}, 3, 'three messages gave up');
is($st->{attempts}, 9, 'after three attempts each');
stop_proc($sim);
stop_proc($sink);

# 4. --rate paces generation.
$sink = start_sink();
my $t0 = time();
$sim = start_sim('--stripe', "st:$secret{st}", '--seed', 9, '--objects', 10, '--events', 40,
	'--rate', 20, '--deliver-to', $sink->{url});
(undef, $st) = http_json('GET', "$sim->{url}/_sim/status");
ok($st->{generated} < 40, "rate-limited: $st->{generated} generated at start");
ok(poll_until(sub { (undef, $st) = http_json('GET', "$sim->{url}/_sim/status"); $st && $st->{done} }, 60),
	'paced stream finished');
ok(time() - $t0 >= 1, 'forty events at 20/s took more than a second');
stop_proc($sim);
stop_proc($sink);

done_testing();
