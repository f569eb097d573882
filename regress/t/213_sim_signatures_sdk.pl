# The signatures webhook-sim writes, checked by the providers' official SDKs
# (regress/contract, installed by npm ci): one delivery of each kind that
# has an official verifier (stripe-node's webhooks.constructEvent,
# standardwebhooks' Webhook.verify, @octokit/webhooks-methods' verify,
# razorpay's validateWebhookSignature, @paddle/paddle-node-sdk's
# isSignatureValid, @shopify/shopify-api's webhooks.validate, @slack/bolt's
# verifySlackRequest) is replayed to
# a sink, and each SDK must accept what was recorded; the same deliveries
# with one byte of the body changed, or under another secret, must each be
# refused.  Then the deliveries of a serve run (the simulator's own events,
# with the headers its model writes) are checked the same way.  The receiver's schemes are checked
# against the same simulator in 100_receiver_schemes.pl and
# 107_source_kinds.pl, so these SDKs are the contract both follow.
use strict;
use warnings;
use lib 'tools/test';
use JSON::PP;
use MIME::Base64;
use SimTest;
use Test::More;

my $json = JSON::PP->new->canonical;
my $dir = contract_dir();
for my $pkg (qw(stripe standardwebhooks @octokit/webhooks-methods razorpay @paddle/paddle-node-sdk
	@shopify/shopify-api @slack/bolt))
{
	my $version = eval { $json->decode(slurp("$dir/node_modules/$pkg/package.json"))->{version} } // 'missing';
	is($version, $json->decode(slurp('regress/contract/package.json'))->{dependencies}{$pkg},
		"$pkg $version, as package.json pins it");
}

my %secret = (
	stripe => 'whsec_sdk_signatures',
	standard => 'whsec_' . encode_base64('standard webhooks key', ''),
	github => 'github-sdk-secret',
	razorpay => 'razorpay-sdk-secret',
	paddle => 'pdl_ntfset_01sdk_signatures',
	shopify => 'shpss_sdk_signatures',
	slack => '8f742231b10e8888abcd99yyyzzz85a5',
);
my %delivery = (
	stripe => { body => { id => 'evt_sdk1', object => 'event', type => 'charge.succeeded' } },
	standard => { headers => { 'webhook-id' => 'msg_sdk1' }, body => { type => 'invoice.paid' } },
	github => {
		headers => { 'X-GitHub-Delivery' => 'ghd_sdk1', 'X-GitHub-Event' => 'issues' },
		body => { action => 'opened' }
	},
	razorpay => { headers => { 'x-razorpay-event-id' => 'rzp_sdk1' }, body => { event => 'payment.captured' } },
	paddle => { body => { event_id => 'evt_01sdk1', event_type => 'transaction.completed' } },
	shopify => {
		headers => {
			'X-Shopify-Topic' => 'orders/updated', 'X-Shopify-Webhook-Id' => 'b54557e4-sdk1',
			'X-Shopify-Shop-Domain' => 'sdk.myshopify.com', 'X-Shopify-API-Version' => '2025-10'
		},
		body => { id => 820982911946154508 }
	},
	slack => { body => { event_id => 'Ev_sdk1', type => 'event_callback', event => { type => 'message' } } },
);
my @kinds = sort keys %delivery;

my $tmp = tmpdir();
my @flags = kinds_record("$tmp/record.jsonl", \%delivery, \%secret);
spew("$tmp/secrets.json", $json->encode(\%secret));

my $sink = start_sink();
my ($rc, $out, $err) = run_sim('replay', '--file', "$tmp/record.jsonl", '--mode', 'shuffled', '--to', $sink->{url}, @flags);
is($rc, 0, 'webhook-sim replay signed and sent one delivery per kind') or diag($err);
my $n = @kinds;
like($out, qr/events=$n sent=$n 2xx=$n/, "the sink answered all $n");
# Paddle's SDK refuses a signature older than 5 seconds: checked right away
my ($nrc, $checks, $nerr) = run_node("$dir/signatures_sdk.mjs", $sink->{file}, "$tmp/secrets.json");
is($nrc, 0, 'the SDK checks ran') or diag($nerr);
is_deeply([ sort map { $_->{kind} } @$checks ], \@kinds, 'one check per kind');
for my $c (@$checks)
{
	ok($c->{ok}, "the official SDK accepts $c->{name}") or diag($c->{detail});
}

# the same deliveries with one byte of each body changed: every SDK refuses
my @tampered;
for my $line (grep { /\S/ } split /\n/, slurp($sink->{file}))
{
	my $req = $json->decode($line);
	my $body = decode_base64($req->{body_b64});
	$body =~ s/"(\w)/"X/;
	$req->{body_b64} = encode_base64($body, '');
	push @tampered, $json->encode($req);
}
spew("$tmp/tampered.jsonl", join('', map { "$_\n" } @tampered));
($nrc, $checks, $nerr) = run_node("$dir/signatures_sdk.mjs", "$tmp/tampered.jsonl", "$tmp/secrets.json");
is($nrc, 0, 'the SDK checks of changed bodies ran') or diag($nerr);
is(scalar @$checks, $n, "$n checks of changed bodies");
for my $c (@$checks)
{
	is($c->{ok}, 0, "the official SDK refuses $c->{name} with a changed body") or diag($c->{detail});
}

# and under another secret
my %other = map { $_ => ($_ eq 'standard' ? 'whsec_' . encode_base64('another key', '') : "$secret{$_}-other") } @kinds;
spew("$tmp/other.json", $json->encode(\%other));
($nrc, $checks, $nerr) = run_node("$dir/signatures_sdk.mjs", $sink->{file}, "$tmp/other.json");
is($nrc, 0, 'the SDK checks under other secrets ran') or diag($nerr);
for my $c (@$checks)
{
	is($c->{ok}, 0, "the official SDK refuses $c->{name} under another secret") or diag($c->{detail});
}
stop_proc($sink);

# A serve run: the simulator's own events to four sources, signed and with
# the headers its model writes, as the providers deliver them
my $served = start_sink();
my $sim = start_sim('--seed', 11, '--objects', 40, '--events', 120,
	(map { ("--$_", "k_$_:$secret{$_}") } qw(stripe standard shopify github)), '--deliver-to', $served->{url});
my %seen;
ok(poll_until(sub {
			%seen = ();
			$seen{ ($_->{path} =~ m{/hooks/k_(\w+)})[0] }++ for sink_requests($served);
			return 4 == grep { ($seen{$_} // 0) >= 2 } qw(stripe standard shopify github);
		}, 60),
	'the serve run delivered to every source: ' . join(' ', map { "$_=" . ($seen{$_} // 0) } sort keys %seen));
stop_proc($sim);
stop_proc($served);
($nrc, $checks, $nerr) = run_node("$dir/signatures_sdk.mjs", $served->{file}, "$tmp/secrets.json");
is($nrc, 0, 'the SDK checks of the serve run ran') or diag($nerr);
my @refused = grep { !$_->{ok} } @$checks;
cmp_ok(scalar @$checks, '>=', 8, 'deliveries of the serve run checked: ' . scalar @$checks);
is_deeply([ map { "$_->{name}: $_->{detail}" } @refused ], [], 'the official SDKs accept every delivery of the serve run');

done_testing();
