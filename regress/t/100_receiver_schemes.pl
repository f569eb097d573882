
# 100_receiver_schemes.pl
#	Every signing scheme end to end: a delivery signed in Perl (Digest::SHA,
#	independently of the receiver's C code) is accepted and stored; tampered,
#	wrongly keyed, unsigned, malformed, stale and future ones are refused
#	with 401 and leave no row; several signatures with one valid pass;
#	secret rotation is honoured within a second; the providers' published
#	examples (Standard Webhooks, GitHub) verify; duplicates are stored once
#	and audited twice.

use strict;
use warnings;

use lib 'receiver/t';
use Digest::SHA qw(hmac_sha256_base64);
use MIME::Base64 qw(encode_base64 decode_base64);
use PostgreSQL::Test::Utils;
use ReceiverTest;
use Test::More;

my $node = new_node('schemes');

my $std_secret = 'whsec_' . encode_base64('standard-key-0123456789abcdef', '');
my $std_new = 'whsec_' . encode_base64('standard-key-rotated-98765432', '');
my %kinds = (
	stripe => { secret => 'whsec_stripe_test_secret', ts => 1, multi => 1 },
	standard => { secret => $std_secret, new => $std_new, ts => 1, multi => 1 },
	shopify => { secret => 'shpss_shopify_secret' },
	github => { secret => 'gh-hook-secret' },
	razorpay => { secret => 'rzp-webhook-secret' },
	slack => { secret => '8f742231b10e8888abcd99yyyzzz85a5', ts => 1 },
	paddle => { secret => 'pdl_ntfset_01h_secret', ts => 1, multi => 1 },
	checkout => { secret => 'cko-signature-key' },
	hmac => {
		secret => 'raw hmac secret',
		ts => 1,
		settings => '{"header": "X-Sig", "prefix": "sha256=", "encoding": "base64",'
		  . ' "timestamp_header": "X-Ts", "template": "{timestamp}.{id}.{body}",'
		  . ' "id_header": "X-Id", "event_id_header": "x-id"}'
	},
);

# every kind of the list (include/webhook_inbox_kinds.h), no other
is_deeply([ sort keys %kinds ],
	[ sort map { (split /\t/)[0] } split /\n/, `perl scripts/source-kinds.pl --list include/webhook_inbox_kinds.h` ],
	'a delivery of every kind of the list is checked here');

for my $kind (sort keys %kinds)
{
	my $k = $kinds{$kind};
	my $settings = $k->{settings} ? ", settings => '$k->{settings}'" : '';
	$node->safe_psql('postgres',
		"SELECT webhook_inbox.create_source(name => 'src_$kind', kind => '$kind', "
		  . "secret => '$k->{secret}'$settings)");
}
$node->safe_psql('postgres',
	"SELECT webhook_inbox.create_source(name => 'ghdoc', kind => 'github', "
	  . "secret => 'It''s a Secret to Everybody')");

my $r = start_receiver($node);

# A body in the layout of each kind, carrying the event id where the
# extension looks for it (header kinds carry it in a header instead).
sub body_for
{
	my ($kind, $id) = @_;
	return qq({"id":"$id","type":"charge.succeeded","data":{"object":{"id":"ch_1"}}})
	  if $kind eq 'stripe' || $kind eq 'checkout';
	return qq({"event_id":"$id","type":"event_callback","event":{"type":"message"}})
	  if $kind eq 'slack';
	return qq({"event_id":"$id","event_type":"transaction.completed","data":{"id":"txn_1"}})
	  if $kind eq 'paddle';
	return qq({"id":"$id","action":"opened"});
}

my $n = 0;
sub next_id { return 'evt_' . $_[0] . '_' . ++$n }

# Headers and body of a valid delivery.
sub delivery
{
	my ($kind, %opt) = @_;
	my $id = $opt{id} // next_id($kind);
	my $body = body_for($kind, $id);
	my $h = sign($kind, $opt{secret} // $kinds{$kind}{secret}, $body,
		id => $id, (defined $opt{ts} ? (ts => $opt{ts}) : ()));
	return ($id, $h, $body);
}

# The signature-carrying header(s) of each kind, for the missing case.
my %sig_header = (
	stripe => ['Stripe-Signature'],
	standard => ['webhook-signature'],
	shopify => ['X-Shopify-Hmac-Sha256'],
	github => ['X-Hub-Signature-256'],
	razorpay => ['X-Razorpay-Signature'],
	slack => ['X-Slack-Signature'],
	paddle => ['Paddle-Signature'],
	checkout => ['Cko-Signature'],
	hmac => ['X-Sig'],
);

for my $kind (sort keys %kinds)
{
	my $k = $kinds{$kind};
	my $src = "src_$kind";
	my $accepted = 0;

	# valid
	my ($id, $h, $body) = delivery($kind);
	my $res = post($r, $src, $h, $body);
	is($res->{status}, 200, "$kind: valid delivery is accepted");
	like($res->{content}, qr/^(new|quarantined)$/, "$kind: answer is the outcome");
	is(inbox_count($node, $src, $id), 1, "$kind: valid delivery is in the inbox");
	$accepted++;

	# tampered body
	($id, $h, $body) = delivery($kind);
	my $tampered = $body;
	substr($tampered, 2, 1) = uc substr($tampered, 2, 1);
	$res = post($r, $src, $h, $tampered);
	is($res->{status}, 401, "$kind: tampered body is refused");
	is($res->{content}, 'bad_signature', "$kind: tampered body reason");

	# wrong secret
	($id, $h, $body) = delivery($kind,
		secret => $kind eq 'standard'
		? 'whsec_' . encode_base64('some-other-key', '')
		: 'not-the-secret');
	$res = post($r, $src, $h, $body);
	is($res->{status}, 401, "$kind: wrong secret is refused");

	# missing signature header
	($id, $h, $body) = delivery($kind);
	delete $h->{$_} for @{ $sig_header{$kind} };
	$res = post($r, $src, $h, $body);
	is($res->{status}, 401, "$kind: missing signature header is refused");
	is($res->{content}, 'missing_signature', "$kind: missing header reason");

	# malformed signature header
	($id, $h, $body) = delivery($kind);
	$h->{ $sig_header{$kind}[0] } = 'this is not a signature';
	$res = post($r, $src, $h, $body);
	is($res->{status}, 401, "$kind: malformed signature header is refused");
	is($res->{content}, 'malformed_signature', "$kind: malformed header reason");

	# a signature of the right shape over other bytes (truncated body)
	($id, $h, $body) = delivery($kind);
	$res = post($r, $src, $h, substr($body, 0, -1));
	is($res->{status}, 401, "$kind: truncated body is refused");

	if ($k->{ts})
	{
		# stale and future timestamps, with a valid MAC over them
		($id, $h, $body) = delivery($kind, ts => time - 1000);
		$res = post($r, $src, $h, $body);
		is($res->{status}, 401, "$kind: stale timestamp is refused");
		is($res->{content}, 'stale_timestamp', "$kind: stale reason");
		($id, $h, $body) = delivery($kind, ts => time + 1000);
		$res = post($r, $src, $h, $body);
		is($res->{status}, 401, "$kind: future timestamp is refused");
		is($res->{content}, 'future_timestamp', "$kind: future reason");
	}

	if ($k->{multi})
	{
		# several signatures, only one valid (provider-side rotation)
		($id, $h, $body) = delivery($kind);
		if ($kind eq 'stripe')
		{
			$h->{'Stripe-Signature'} =~ s/,v1=/,v1=${\('0' x 64)},v0=ab,v1=/;
		}
		elsif ($kind eq 'standard')
		{
			$h->{'webhook-signature'} =
			  'v1,' . encode_base64('x' x 32, '') . ' ' . $h->{'webhook-signature'};
		}
		elsif ($kind eq 'paddle')
		{
			$h->{'Paddle-Signature'} =~ s/;h1=/;h1=${\('ab' x 32)};h1=/;
		}
		$res = post($r, $src, $h, $body);
		is($res->{status}, 200, "$kind: one valid signature among several is accepted");
		$accepted++;
	}

	is(inbox_count($node, $src), $accepted,
		"$kind: refused deliveries left no inbox row");
	is(deliveries_count($node, $src), $accepted,
		"$kind: refused deliveries left no deliveries row");
}

# Standard Webhooks through the svix-* header names.
{
	my ($id, $h, $body) = delivery('standard');
	my %svix = map { (my $x = $_) =~ s/^webhook-/svix-/; ($x => $h->{$_}) } keys %$h;
	my $res = post($r, 'src_standard', \%svix, $body);
	is($res->{status}, 200, 'standard: svix-* aliases are accepted');
	is(inbox_count($node, 'src_standard', $id), 1, 'standard: svix delivery stored');
}

# Rotation: old and new both accepted, then the retired one refused.
for my $kind (sort keys %kinds)
{
	my $k = $kinds{$kind};
	my $src = "src_$kind";
	my $new = $k->{new} // "$k->{secret}-rotated";
	my $took = wait_reload($r, $node,
		"SELECT webhook_inbox.rotate_secret('$src', '$new')");
	cmp_ok($took, '<', 1.0, "$kind: rotated secret honoured within a second");
	my ($id, $h, $body) = delivery($kind);
	is(post($r, $src, $h, $body)->{status}, 200, "$kind: old secret still accepted");
	($id, $h, $body) = delivery($kind, secret => $new);
	is(post($r, $src, $h, $body)->{status}, 200, "$kind: new secret accepted");
	wait_reload($r, $node,
		"SELECT webhook_inbox.retire_secret('$src', '$k->{secret}')");
	($id, $h, $body) = delivery($kind);
	is(post($r, $src, $h, $body)->{status}, 401, "$kind: retired secret refused");
	is(inbox_count($node, $src, $id), 0, "$kind: retired-secret delivery not stored");
	($id, $h, $body) = delivery($kind, secret => $new);
	is(post($r, $src, $h, $body)->{status}, 200, "$kind: new secret still accepted");
}

# GitHub's published example, as their documentation gives it.
{
	my $res = post($r, 'ghdoc',
		{
			'X-Hub-Signature-256' =>
			  'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17',
			'X-GitHub-Delivery' => 'gh-doc-1',
			'X-GitHub-Event' => 'ping'
		},
		'Hello, World!');
	is($res->{status}, 200, 'github: published example verifies');
	is(inbox_count($node, 'ghdoc'), 1, 'github: published example stored (quarantined: not JSON)');
}

# Duplicate delivery: 200 both times, one inbox row, two deliveries rows.
{
	my ($id, $h, $body) = delivery('github', secret => 'gh-hook-secret-rotated');
	my $first = post($r, 'src_github', $h, $body);
	my $second = post($r, 'src_github', $h, $body);
	is($first->{status}, 200, 'duplicate: first delivery accepted');
	is($second->{status}, 200, 'duplicate: second delivery accepted');
	is($second->{content}, 'duplicate', 'duplicate: second answer says so');
	is(inbox_count($node, 'src_github', $id), 1, 'duplicate: one inbox row');
	is(deliveries_count($node, 'src_github', $id), 2, 'duplicate: two deliveries rows');
	my $ids = $node->safe_psql('postgres',
		"SELECT string_agg(delivery_id, ',' ORDER BY d.id) FROM webhook_inbox.deliveries d "
		  . "JOIN webhook_inbox.sources s ON s.id = d.source_id "
		  . "WHERE s.name = 'src_github' AND d.event_id = '$id'");
	is($ids,
		"$first->{headers}{'x-webhook-inbox-delivery'},$second->{headers}{'x-webhook-inbox-delivery'}",
		'duplicate: each attempt audited under the delivery id it was answered with');
	like($first->{headers}{'x-webhook-inbox-delivery'}, qr/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
		'delivery id is a random UUID');

	# a client cannot choose the delivery id
	($id, $h, $body) = delivery('github', secret => 'gh-hook-secret-rotated');
	$h->{'X-Webhook-Inbox-Delivery'} = 'chosen-by-client';
	my $res = post($r, 'src_github', $h, $body);
	is($res->{status}, 200, 'client delivery id: accepted');
	is($node->safe_psql('postgres',
		"SELECT delivery_id FROM webhook_inbox.deliveries WHERE event_id = '$id'"),
		$res->{headers}{'x-webhook-inbox-delivery'}, 'client delivery id: replaced by ours');
}

# Verification failures are counted by source and reason.
cmp_ok(
	metric($r,
		'webhook_receiver_verification_failures_total{source="src_stripe",reason="bad_signature"}'
	) // 0,
	'>=', 2,
	'metrics: verification failures by reason');

# The Standard Webhooks published example (its timestamp is from 2021, so a
# second receiver checks timestamps against that moment: --test-now).
{
	my $secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
	my $body = '{"test": 2432232314}';
	my $expected = 'g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=';
	(my $key = $secret) =~ s/^whsec_//;
	my $perl = hmac_sha256_base64(
		"msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.$body", decode_base64($key));
	is("$perl=", $expected, 'standard: published vector recomputed in Perl');

	$node->safe_psql('postgres',
		"SELECT webhook_inbox.create_source(name => 'golden', kind => 'standard', "
		  . "secret => '$secret')");
	my $g = start_receiver($node, '--test-now', '1614265330');
	my %h = (
		'webhook-id' => 'msg_p5jXN8AQM9LWM0D4loKWxJek',
		'webhook-timestamp' => '1614265330',
		'webhook-signature' => "v1,$expected"
	);
	my $res = post($g, 'golden', \%h, $body);
	is($res->{status}, 200, 'standard: published example verifies');
	is(inbox_count($node, 'golden', 'msg_p5jXN8AQM9LWM0D4loKWxJek'), 1,
		'standard: published example stored under its webhook-id');
	$res = post($g, 'golden', \%h, '{"test": 2432232315}');
	is($res->{status}, 401, 'standard: published example with one digit changed is refused');
	$h{'webhook-timestamp'} = '1614265631';
	$res = post($g, 'golden', \%h, $body);
	is($res->{status}, 401, 'standard: published example with another timestamp is refused');
	is(stop_receiver($g), 0, 'golden receiver exits 0');
}

is(stop_receiver($r), 0, 'receiver exits 0 on SIGTERM');
note("receiver log:\n$r->{log}");
unlike($r->{log}, qr/\Q$kinds{github}{secret}\E|whsec_|Hello, World/,
	'log shows no secret and no body');
$node->stop;
done_testing();
