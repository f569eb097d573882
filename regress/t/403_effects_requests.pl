# Effect requests built from a payload cannot be steered: an object id is
# placed into the rule's request as one string value (never a new key, never
# a new host), and an outgoing header value with a CR or LF, or a header name
# that is not a token, is refused and recorded, never sent.  A second
# listener on another loopback address (127.0.0.2) stands for the attacker's
# host: it must receive nothing.
use strict;
use warnings;
use lib 'regress/t';
use ProviderTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use JSON::PP;
use Test::More;

my $json = JSON::PP->new->canonical;
my $prov = start_provider();
my $thief = start_provider(addr => '127.0.0.2');

my $node = PostgreSQL::Test::Cluster->new('effreq');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_inbox'
webhook_inbox.enabled = off
webhook_inbox.lease = '30s'
webhook_inbox.http_timeout = '5s'
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION webhook_inbox');
$node->safe_psql('postgres', qq{
	SELECT webhook_inbox.create_source('gh', 'github', 'hooksecret', api_base => '$prov->{url}',
		api_token => 'tok_secret');
	INSERT INTO webhook_inbox.effect_rules (source_id, object_type, to_status, kind, request, owner)
	SELECT id, 'order', 'paid', 'http',
		'{"method": "POST", "body": {"order": "{object_id}", "status": "{to}"},
		  "path": "/v1/orders/{object_id}/fulfil"}', 'operations'
	  FROM webhook_inbox.sources WHERE name = 'gh';
});

sub sql_literal { my ($s) = @_; $s =~ s/'/''/g; return "'$s'" }

sub paid
{
	my ($id) = @_;
	my ($rc, $out, $err) = $node->psql('postgres',
		'SELECT webhook_inbox.upsert_object(' . join(', ', "'gh'", "'order'", sql_literal($id), 1, "'paid'", "'{}'")
		  . ')');
	return $rc == 0 ? $out : "error: $err";
}

my $evil = qq{a","path":"\@127.0.0.2:$thief->{port}/stolen};
my $quoted = q{o"1'2\\3};
is(paid($evil), 'applied', 'an object id that closes a JSON string: the transition is applied');
is(paid($quoted), 'applied', 'an object id with quotes and a backslash: the transition is applied');

for my $id ($evil, $quoted)
{
	my $lit = sql_literal($id);
	is($node->safe_psql('postgres', qq{
		SELECT (SELECT string_agg(k, ',' ORDER BY k) FROM jsonb_object_keys(request) k) || ' | ' ||
			   (SELECT string_agg(k, ',' ORDER BY k) FROM jsonb_object_keys(request -> 'body') k)
		  FROM webhook_inbox.effects WHERE object_id = $lit}),
		'body,method,path | order,status', "id " . substr($id, 0, 12) . "…: no key added");
	is($node->safe_psql('postgres', "SELECT request #>> '{body,order}' FROM webhook_inbox.effects WHERE object_id = $lit"),
		$id, 'the body holds exactly the object id');
	is($node->safe_psql('postgres', "SELECT request ->> 'path' FROM webhook_inbox.effects WHERE object_id = $lit"),
		'/v1/orders/' . join('', map { /[A-Za-z0-9._~-]/ ? $_ : sprintf('%%%02X', ord) } split //, $id) . '/fulfil',
		'the path holds it percent-encoded, as one segment');
}

$node->safe_psql('postgres', 'CALL webhook_inbox.run_effects()');
is($node->safe_psql('postgres', q{SELECT string_agg(status, ',' ORDER BY id) FROM webhook_inbox.effects}),
	'done,done', 'both effects done');
my @got = grep { $_->{path} =~ m{^/v1/orders/} } provider_requests($prov);
is(scalar @got, 2, 'the source\'s own host got both requests');
is_deeply([ sort map { $json->decode($_->{body})->{order} } @got ], [ sort ($evil, $quoted) ],
	'each request body carries the exact object id');
is(scalar(provider_requests($thief)), 0, 'nothing reached the other address');

# --- outgoing headers: a CR/LF in a value or a name that is not a token is refused ---
$node->safe_psql('postgres', qq{
	SELECT webhook_inbox.create_source('crlf', 'github', 's', api_base => '$prov->{url}',
		api_token => E'tok\\r\\nX-Injected: 1');
	SELECT webhook_inbox.create_source('badname', 'github', 's', api_base => '$prov->{url}',
		api_token => 'tok', settings => '{"auth_header": "X-Api Key:"}');
	SELECT webhook_inbox.request_effect('op:crlf', 'http', '{"method": "POST", "path": "/v1/ops/crlf"}', source => 'crlf');
	SELECT webhook_inbox.request_effect('op:badname', 'http', '{"method": "POST", "path": "/v1/ops/badname"}', source => 'badname');
	SELECT webhook_inbox.request_effect('op:ctype', 'http',
		E'{"method": "POST", "path": "/v1/ops/ctype", "body": "x", "content_type": "text/plain\\\\r\\\\nX-Injected: 1"}', source => 'gh');
});
$node->safe_psql('postgres', 'CALL webhook_inbox.run_effects()');
is($node->safe_psql('postgres', q{
	SELECT string_agg(effect_key || ' ' || status || ': ' || reason, E'\n' ORDER BY id)
	  FROM webhook_inbox.effects WHERE effect_key LIKE 'op:%'}),
	join("\n",
		'op:crlf quarantined: refused: the Authorization value (auth_prefix and api_token) contains a control character (CR, LF …)',
		'op:badname quarantined: refused: the header name in settings.auth_header is not an HTTP token',
		'op:ctype quarantined: refused: the Content-Type value contains a control character (CR, LF …)'),
	'each refused with the reason, for its owner');
is($node->safe_psql('postgres', q{
	SELECT string_agg(a.action || ':' || a.outcome, ',' ORDER BY a.id)
	  FROM webhook_inbox.effect_attempts a JOIN webhook_inbox.effects e ON e.id = a.effect_id
	 WHERE e.effect_key LIKE 'op:%'}), 'submit:refused,submit:refused,submit:refused', 'each refusal recorded as an attempt');
is(scalar(grep { $_->{path} =~ m{^/v1/ops/} } provider_requests($prov)), 0, 'none was sent');
my ($rc, $out, $err) = $node->psql('postgres',
	q{SELECT webhook_inbox.request_effect(E'op:key\r\nX: 1', 'http', '{"method": "POST", "path": "/v1/ops/k"}', source => 'gh')});
like($err, qr/ERROR:  idempotency_key must not contain control characters/, 'a key with CR LF is refused when requested');

$node->stop;
stop_proc($_) for $prov, $thief;
done_testing();
