# 318_worker_sealed_token.pl
#	With webhook_inbox.key_file set, a source's api_token is stored sealed
#	(ciphertext only in sources) and the background worker's fetch, a
#	sweep and the effects runner still send it in clear to the source's
#	api_base, read through _worker_source() and unsealed under the key.

use strict;
use warnings;

use lib 'regress/t';
use JSON::PP;
use PostgreSQL::Test::Utils;
use Test::More;
use WorkerTest;
use SimTest qw(start_sink sink_requests poll_until tmpdir);

my $key = tmpdir() . '/inbox.key';
open(my $fh, '>', $key) or die "$key: $!";
print $fh 'a1b2c3d4e5f60718293a4b5c6d7e8f90' x 2, "\n";
close $fh;
chmod 0600, $key or die;

my $node = worker_node('sealedtok', qq{
webhook_inbox.fetch_delay = 0
webhook_inbox.key_file = '$key'
});

my $reply = tmpdir() . '/reply.json';
open($fh, '>', $reply) or die;
print $fh JSON::PP->new->encode({ status => 200,
	body => '{"id":"sub_k1","object":"subscription","status":"active","created":1767225600}' });
close $fh;
my $api = start_sink(reply => $reply);

my $token = 'sk_SEALEDPLAIN_worker';
$node->safe_psql('postgres', qq{
	SELECT webhook_inbox.create_source('st', 'stripe', 'whsec_k', api_base => '$api->{url}',
		api_token => '$token')});
my $stored = $node->safe_psql('postgres', "SELECT api_token FROM webhook_inbox.sources WHERE name = 'st'");
like($stored, qr/^wi-sealed:/, 'the api_token is stored sealed');
unlike($stored, qr/PLAIN/, 'with no plaintext in it');

sub bearer_requests
{
	my ($method) = @_;
	return scalar grep { $_->{method} eq $method && ($_->{headers}{authorization} // '') eq "Bearer $token" }
	  sink_requests($api);
}

# the background worker's fetch
$node->safe_psql('postgres', intake_sql('st',
	stripe_event('evt_k1', 'customer.subscription.updated', 'subscription', 'sub_k1', 'active', 1767225600)));
wait_drained($node, 'fetch with a sealed token');
is($node->safe_psql('postgres', "SELECT status FROM webhook_inbox.inbox WHERE event_id = 'evt_k1'"), 'done',
	'the event is done');
cmp_ok(bearer_requests('GET'), '>=', 1, 'the worker fetched with the token in clear');
is($node->safe_psql('postgres',
	"SELECT status FROM webhook_inbox.objects WHERE object_id = 'sub_k1'"), 'active', 'and saved the object');

# an effect
$node->safe_psql('postgres', q{
	SELECT webhook_inbox.request_effect('refund:k1', 'http',
		'{"method": "POST", "path": "/v1/refunds", "body": {"amount": 1}}', source => 'st')});
$node->safe_psql('postgres', 'CALL webhook_inbox.run_effects()');
ok(poll_until(sub { bearer_requests('POST') >= 1 }, 30), 'the effects runner sent the token in clear');

unlike(join("\n", map { $_->{headers}{authorization} // '' } sink_requests($api)), qr/wi-sealed/,
	'no request carried the sealed value');

$node->stop;
stop_proc($api);
done_testing();
