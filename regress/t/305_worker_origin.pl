
# 305_worker_origin.pl
#	Requests to a provider only ever go to the source's own scheme, host
#	and port (its api_base): a list answer whose Link rel="next" names
#	another loopback listener, a user name in the URL, another port or
#	scheme, and a fetch_url template naming another host are refused and
#	recorded (the sweep run's error, the event's reason, the worker's
#	refused counter); the other listener receives nothing, so the source's
#	token never leaves for it.

use strict;
use warnings;

use lib 'regress/t';
use JSON::PP;
use PostgreSQL::Test::Utils;
use Test::More;
use WorkerTest;
use SimTest qw(start_sink sink_requests poll_until tmpdir);

my $node = worker_node('origin', qq{
webhook_inbox.fetch_delay = 0
});

# elsewhere: another loopback address, and another port on the same one
my $far = start_sink(addr => '127.0.0.2');
my $near = start_sink();
# the provider: answers every list page with the Link the test writes
my $reply = tmpdir() . '/reply.json';
my $api = start_sink(reply => $reply);
my $json = JSON::PP->new->canonical;

sub answer_with_next
{
	my ($next) = @_;
	open(my $fh, '>', $reply) or die "$reply: $!";
	print $fh $json->encode({ status => 200, body => '{"orders":[]}',
		headers => { Link => "<$next>; rel=\"next\"" } });
	close $fh;
}

$node->safe_psql('postgres', qq{
	SELECT webhook_inbox.create_source('shop', 'shopify', 'shpss_o', api_base => '$api->{url}',
		api_token => 'shpat_secret_token', settings => '{"api": "rest"}')});
# the token's scopes already known, so that every pass asks for list pages only
$node->safe_psql('postgres', "INSERT INTO webhook_inbox.source_scopes (source_id, scopes) "
	  . "SELECT id, '{read_orders}' FROM webhook_inbox.sources WHERE name = 'shop'");
my $path = '/admin/api/2024-10/orders.json?page_info=p2&limit=250';
my ($api_port) = $api->{url} =~ /:(\d+)$/;
my ($near_port) = $near->{url} =~ /:(\d+)$/;

my @cases = (
	[ 'another host', "$far->{url}$path", qr{refused: http://127\.0\.0\.2:\d+ is not the source's api_base origin http://127\.0\.0\.1:$api_port} ],
	[ 'a user name before another host', "http://127.0.0.1:$api_port\@127.0.0.2:" . ($far->{url} =~ /:(\d+)$/)[0] . $path,
		qr{refused: the URL to http://127\.0\.0\.2:\d+ carries a user name or password} ],
	[ 'another port', "$near->{url}$path", qr{refused: http://127\.0\.0\.1:$near_port is not the source's api_base origin} ],
	[ 'another scheme', "https://127.0.0.1:$api_port$path", qr{refused: https://127\.0\.0\.1:$api_port is not the source's api_base origin} ],
);
my $refused_before = worker_stat($node, 'refused');
for my $c (@cases)
{
	my ($what, $next, $reason) = @$c;
	answer_with_next($next);
	my $served = scalar sink_requests($api);
	my $row = $node->safe_psql('postgres',
		"SELECT status || '|' || error FROM webhook_inbox.sweep_now('shop', 'order')");
	my ($status, $error) = split /\|/, $row, 2;
	is($status, 'failed', "$what: the pass failed");
	like($error, $reason, "$what: the refusal is recorded in sweep_runs");
	is(scalar sink_requests($api), $served + 1, "$what: the provider served the first page only");
}
is(scalar sink_requests($far), 0, 'the other host received nothing');
is(scalar sink_requests($near), 0, 'the other port received nothing');
is(worker_stat($node, 'refused') - $refused_before, scalar @cases, 'each refusal counted');
is($node->safe_psql('postgres',
	"SELECT count(*) FROM webhook_inbox.sweep_checkpoints c JOIN webhook_inbox.sources s ON s.id = c.source_id WHERE s.name = 'shop'"),
	0, 'no refused pass moved a checkpoint');

# without the foreign link the same pass completes
open(my $fh, '>', $reply) or die;
print $fh $json->encode({ status => 200, body => '{"orders":[]}' });
close $fh;
is($node->safe_psql('postgres', "SELECT status FROM webhook_inbox.sweep_now('shop', 'order')"),
	'complete', 'the same listing without the link completes');

# a fetch whose configured URL names another host: quarantined, never sent
$node->safe_psql('postgres', qq{
	SELECT webhook_inbox.create_source('acct', 'stripe', 'whsec_o', api_base => '$api->{url}',
		api_token => 'sk_secret_token',
		settings => '{"fetch_url": "$far->{url}/v1/{type}/{id}"}')});
$node->safe_psql('postgres', intake_sql('acct',
	stripe_event('evt_o1', 'customer.subscription.updated', 'subscription', 'sub_o1', 'active', 1767225600)));
ok(poll_until(sub {
	$node->safe_psql('postgres', "SELECT status FROM webhook_inbox.inbox WHERE event_id = 'evt_o1'") eq 'quarantined'
}, 60), 'the event whose fetch was refused is quarantined');
like($node->safe_psql('postgres', "SELECT reason FROM webhook_inbox.inbox WHERE event_id = 'evt_o1'"),
	qr{^refused_url: refused: http://127\.0\.0\.2:\d+ is not the source's api_base origin}, 'with the refusal as its reason');
is(scalar sink_requests($far), 0, 'the other host still received nothing');

# an effect whose path turns api_base into a user name before another host
my ($far_port) = $far->{url} =~ /:(\d+)$/;
$node->safe_psql('postgres', qq{
	SELECT webhook_inbox.request_effect('refund:o1', 'http',
		'{"method": "POST", "path": "/v1/refunds", "body": {"amount": 1}}', source => 'acct');
	UPDATE webhook_inbox.effects SET request = jsonb_set(request, '{path}', '"\@127.0.0.2:$far_port/stolen"')
	 WHERE effect_key = 'refund:o1';
});
$node->safe_psql('postgres', 'CALL webhook_inbox.run_effects()');
like($node->safe_psql('postgres', "SELECT status || ' ' || coalesce(reason, '') FROM webhook_inbox.effects WHERE effect_key = 'refund:o1'"),
	qr{^(failed|quarantined) .*(refused: the URL to http://127\.0\.0\.2:$far_port carries a user name|path)},
	'the effect is not sent, and says why');
is(scalar sink_requests($far), 0, 'the other host received no effect');
is(scalar grep({ ($_->{headers}{authorization} // '') =~ /sk_secret_token/ } sink_requests($api)), 0,
	'the provider itself got no effect request either');

$node->stop;
stop_proc($_) for ($far, $near, $api);
done_testing();
