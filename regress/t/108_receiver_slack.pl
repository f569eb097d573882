
# 108_receiver_slack.pl
#	Slack's Events API enables a Request URL only if the URL answers its
#	url_verification request with the request's challenge.  A handshake
#	signed as Slack signs it (HMAC-SHA256 of "v0:timestamp:body" in
#	X-Slack-Signature, X-Slack-Request-Timestamp; the same signature is
#	accepted by @slack/bolt's verifySlackRequest) is answered 200 with
#	{"challenge": ...} and stores nothing; unsigned, tampered and stale
#	handshakes are refused 401 without the challenge; then events are
#	stored, as ignored with reason no_route (kinds slack, paddle, checkout
#	and hmac have no preset route, as the README says).

use strict;
use warnings;

use lib 'receiver/t';
use lib 'tools/test';
use JSON::PP;
use MIME::Base64 qw(encode_base64);
use PostgreSQL::Test::Utils;
use ReceiverTest;
use SimTest qw(contract_dir run_node spew);
use Test::More;

my $secret = '8f742231b10e8888abcd99yyyzzz85a5';
my $json = JSON::PP->new->canonical;
my $node = new_node('slack');
$node->safe_psql('postgres', "SELECT webhook_inbox.create_source('slack-app', 'slack', '$secret')");
my $r = start_receiver($node);

# the body of Slack's url_verification event page, byte for byte
my $challenge = '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P';
my $handshake = qq({\n    "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl",\n    "challenge": "$challenge",\n    "type": "url_verification"\n});
my $headers = sign('slack', $secret, $handshake);

# Slack's own SDK accepts the signature the test sends
my $dir = contract_dir();
my $tmp = PostgreSQL::Test::Utils::tempdir('slack');
spew("$tmp/requests.jsonl",
	$json->encode({ path => '/hooks/k_slack', headers => { map { lc($_) => $headers->{$_} } keys %$headers },
		body_b64 => encode_base64($handshake, '') }) . "\n");
spew("$tmp/secrets.json", $json->encode({ slack => $secret }));
my ($nrc, $checks, $nerr) = run_node("$dir/signatures_sdk.mjs", "$tmp/requests.jsonl", "$tmp/secrets.json");
is($nrc, 0, 'the SDK check ran') or diag($nerr);
ok(@$checks == 1 && $checks->[0]{ok}, "\@slack/bolt's verifySlackRequest accepts the handshake's signature")
  or diag(explain($checks));

my $res = post($r, 'slack-app', $headers, $handshake);
is($res->{status}, 200, 'the signed url_verification is answered 200');
is($res->{headers}{'content-type'}, 'application/json', 'as JSON');
is_deeply(eval { decode_json($res->{content}) }, { challenge => $challenge },
	'echoing the challenge: {"challenge": ...}') or diag($res->{content});
is(inbox_count($node, 'slack-app') . '/' . deliveries_count($node, 'slack-app'), '0/0',
	'the handshake is no event: nothing stored');
like($r->{log}, qr/answered slack url_verification: source=slack-app/, 'and the log says so');
unlike($r->{log}, qr/\Q$challenge\E/, 'without the challenge itself');

# a challenge with escapes is echoed as the same JSON string
my $escaped = '{"type":"url_verification","challenge":"a\"b\\u00e9"}';
$res = post($r, 'slack-app', sign('slack', $secret, $escaped), $escaped);
is_deeply([ $res->{status}, eval { decode_json($res->{content}) } ], [ 200, { challenge => "a\"b\x{e9}" } ],
	'a challenge with escapes is echoed as the same string');

# refused: unsigned, tampered, under another secret, stale; none of them
# sees the challenge
my %bad = (
	unsigned => [ {}, $handshake, 'missing_signature' ],
	tampered => [ $headers, $handshake =~ s/3eZb/3eZc/r, 'bad_signature' ],
	'other secret' => [ sign('slack', 'another-secret', $handshake), $handshake, 'bad_signature' ],
	stale => [ sign('slack', $secret, $handshake, ts => time - 3600), $handshake, 'stale_timestamp' ],
);
for my $case (sort keys %bad)
{
	my ($h, $b, $reason) = @{ $bad{$case} };
	$res = post($r, 'slack-app', $h, $b);
	is("$res->{status} $res->{content}", "401 $reason", "the $case handshake is refused: $reason");
}

# a handshake to a source of another kind is an ordinary delivery
wait_reload($r, $node, "SELECT webhook_inbox.create_source('gh', 'github', 'gh-secret')");
my $gh = sign('github', 'gh-secret', $handshake, id => 'ghd_handshake');
$res = post($r, 'gh', $gh, $handshake);
is("$res->{status} $res->{content}", '200 quarantined',
	'a GitHub source keeps a url_verification body as a delivery (of an issue without one)');

# then Slack's events are stored, under their event_id; with no preset
# route they are ignored (no_route) until a route says more
my $event = $json->encode({ token => 'x', team_id => 'T1', type => 'event_callback', event_id => 'Ev08MFMKH6',
	event_time => 1700000000, event => { type => 'app_mention', user => 'U1', text => 'hi', ts => '1.2' } });
$res = post($r, 'slack-app', sign('slack', $secret, $event), $event);
is("$res->{status} $res->{content}", '200 new', 'an event_callback is stored');
$res = post($r, 'slack-app', sign('slack', $secret, $event), $event);
is("$res->{status} $res->{content}", '200 duplicate', 'its retry is a duplicate');
is($node->safe_psql('postgres',
		"SELECT event_id || ' ' || event_type || ' ' || status || ' ' || split_part(reason, ':', 1)
		   FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id
		  WHERE s.name = 'slack-app'"),
	'Ev08MFMKH6 app_mention ignored no_route',
	'stored under its event_id and event.type, ignored for want of a route');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM webhook_inbox.routes
		  WHERE preset AND source_kind IN ('slack', 'paddle', 'checkout', 'hmac')"),
	'0', 'kinds slack, paddle, checkout and hmac have no preset route');
is(metric($r, 'webhook_receiver_requests_total{source="slack-app",status="200"}'), 4,
	'the handshakes and events answered 200 are counted');

stop_receiver($r);
done_testing();
