# 534_paused_silent.pl
#	A paused copy sends nothing.  A database whose sources read a Stripe
#	Connect platform, a GitHub App and a Shopify app at webhook-sim (which
#	logs every request it receives) is dumped and restored into a second
#	database: outbound work is paused there, and every documented call
#	that would reach a provider (tenant discovery, sweeps of the sources
#	and of their tenants, effects, minting and refreshing a tenant's token
#	after a refusal or on request) either refuses with the pause's reason or
#	waits, while the provider's request log grows by 0 requests.  After
#	resume_outbound() the same calls reach the provider again.

use strict;
use warnings;

use lib 'regress/t';
use lib 'tools/test';
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SimTest qw(start_sim stop_proc http_json slurp spew tmpdir);

my $tmp = tmpdir();
my $log = "$tmp/requests.log";
my $keyfile = "$tmp/wi_key";
spew($keyfile, '5a' x 32 . "\n");
chmod 0600, $keyfile;
my $ossl_err = '';
IPC::Run::run([ 'openssl', 'genrsa', '-traditional', '-out', "$tmp/app.pem", '2048' ], '2>', \$ossl_err) or die $ossl_err;
IPC::Run::run([ 'openssl', 'rsa', '-in', "$tmp/app.pem", '-pubout', '-out', "$tmp/app.pub" ], '2>', \$ossl_err)
  or die $ossl_err;
my $client = 'sim-534-client';

my $sim = start_sim('--seed', 534, '--objects', 12, '--events', 24, '--types', 'subscription,order,issue',
	'--stripe', 'platform:whsec_534', '--connect-accounts', 2,
	'--github', 'ghapp:gh_534', '--github-repo', 'acme/anvils', '--github-app', '4242:Iv23liSimApp',
	'--github-app-key', "$tmp/app.pub", '--github-installation', '101',
	'--shopify', 'shopapp:shpss_534', '--shopify-shops', 1, '--shopify-client-id', $client,
	'--request-log', $log);

my $node = PostgreSQL::Test::Cluster->new('paused');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_inbox'
webhook_inbox.enabled = off
webhook_inbox.http_timeout = 5s
webhook_inbox.key_file = '$keyfile'
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION webhook_inbox');

sub lit { my $s = shift; $s =~ s/'/''/g; return "'$s'" }
my (undef, $shops) = http_json('GET', "$sim->{url}/_sim/shopify/shops");
my $shop = $shops->{shops}[0];
$node->safe_psql('postgres', qq{
	SELECT webhook_inbox.create_source('platform', 'stripe', 'whsec_534', api_base => '$sim->{url}',
		api_token => 'sk_test_534');
	SELECT webhook_inbox.create_source('ghapp', 'github', 'gh_534', api_base => '$sim->{url}');
	SELECT webhook_inbox.set_github_app('ghapp', '4242', } . lit(slurp("$tmp/app.pem")) . qq{, 'Iv23liSimApp');
	SELECT webhook_inbox.create_source('shopapp', 'shopify', 'shpss_534', api_base => '$sim->{url}',
		settings => jsonb_build_object('tenants', true, 'shopify_client_id', '$client',
			'shop_base_url', '$sim->{url}/shops/{shop}'));
	SELECT webhook_inbox.set_tenant_credentials('shopapp', '$shop->{shop}', 'shopify_shop', '$shop->{access_token}',
		now() + interval '$shop->{expires_in} seconds', '$shop->{refresh_token}',
		now() + interval '$shop->{refresh_token_expires_in} seconds');
	SELECT webhook_inbox.request_effect('refund:534', 'http',
		'{"method": "POST", "path": "/v1/refunds", "body": {"payment_intent": "pi_534", "amount": 500}}',
		source => 'platform', owner => 'finance');
	SELECT webhook_inbox.request_effect('mail:534', 'email', '{"to": "ops\@example.com"}');
});
# the original reaches the provider: its tenants listed, an installation token minted
is($node->safe_psql('postgres', "SELECT webhook_inbox.discover_tenants('platform')"), '2',
	'the original lists the platform\'s 2 connected accounts');
is($node->safe_psql('postgres', "SELECT webhook_inbox.discover_tenants('ghapp')"), '1',
	'and the app\'s installation');
my %sid = map { split /\|/ } split /\n/,
  $node->safe_psql('postgres', 'SELECT name, id FROM webhook_inbox.sources');
is($node->safe_psql('postgres', "SELECT status FROM webhook_inbox._tenant_auth($sid{ghapp}, '101', true)"), 'ok',
	'and mints a token for it');
my $acct = $node->safe_psql('postgres', "SELECT min(tenant) FROM webhook_inbox.tenants WHERE tenant LIKE 'acct_%'");
sub requests { my @l = split /\n/, slurp($log); return scalar @l }
cmp_ok(requests(), '>', 0, requests() . ' requests from the original');

my $dump = "$tmp/original.dump";
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('postgres') ], 'pg_dump -Fc');
$node->safe_psql('postgres', 'CREATE DATABASE copy');
$node->command_ok([ 'pg_restore', '-d', $node->connstr('copy'), $dump ], 'pg_restore into a copy');
is($node->safe_psql('copy', 'SELECT paused FROM webhook_inbox.outbound_status'), 't', 'the copy is paused');

# the installation's cached token (no request needed), as a read would
# send it; the shop's token due for its refresh
my $gh_header = $node->safe_psql('copy', "SELECT header FROM webhook_inbox._tenant_auth($sid{ghapp}, '101')");
like($gh_header, qr/^Authorization: /, 'the copy holds the installation\'s token');
$node->safe_psql('copy', "UPDATE webhook_inbox.tenant_credentials SET secret_at = now() - interval '1 hour', "
	  . "expires_at = now() + interval '1 minute' "
	  . "WHERE source_id = $sid{shopapp}");

# every documented call that would send: refused or waiting, and 0 requests
my @calls = (
	[ "SELECT webhook_inbox.discover_tenants('platform')", 'tenant discovery (Stripe GET /v1/accounts)' ],
	[ "SELECT webhook_inbox.discover_tenants('ghapp')", 'tenant discovery (GitHub GET /app/installations)' ],
	[ "SELECT status FROM webhook_inbox.sweep_now('platform', 'subscription')", 'a sweep of the platform' ],
	[ "SELECT status FROM webhook_inbox.sweep_now('platform', 'subscription', 'incremental', '$acct')",
		'a sweep of a connected account' ],
	[ "SELECT status FROM webhook_inbox.sweep_now('ghapp', 'issue', 'full', '101')", 'a sweep of an installation' ],
	[ "SELECT status FROM webhook_inbox.sweep_now('shopapp', 'order', 'full', '$shop->{shop}')", 'a sweep of a shop' ],
	[ 'CALL webhook_inbox.run_effects()', 'the effects' ],
	[ "SELECT status || ' ' || coalesce(reason, '') FROM webhook_inbox._tenant_auth($sid{ghapp}, '101', true)",
		'minting an installation token' ],
	[ "SELECT status || ' ' || coalesce(reason, '') FROM webhook_inbox._tenant_reauth($sid{ghapp}, '101', " . lit($gh_header) . ")",
		'minting again after a refusal' ],
	[ "SELECT status || ' ' || coalesce(reason, '') FROM webhook_inbox._tenant_auth($sid{shopapp}, '$shop->{shop}', true)",
		'refreshing a shop\'s token' ],
);
for my $c (@calls)
{
	my ($sql, $what) = @$c;
	my $before = requests();
	my ($rc, $out, $err) = $node->psql('copy', $sql);
	like("$out $err", qr/outbound work is paused/, "$what: refused or waiting, with the pause as its reason");
	is(requests() - $before, 0, "$what: 0 requests reached the provider");
}
is($node->safe_psql('copy', "SELECT status || ' ' || attempts FROM webhook_inbox.effects WHERE kind = 'http'"), 'pending 0',
	'the refund waits, never attempted');
# the outbox: the application's code is handed no effect to carry out either
my ($crc, $cout, $cerr) = $node->psql('copy', "SELECT count(*) FROM webhook_inbox.claim_effects('app', '{email}')");
like($cerr, qr/outbound work is paused/, 'claim_effects() refuses while paused');
is($node->safe_psql('copy', "SELECT status || ' ' || attempts FROM webhook_inbox.effects WHERE kind = 'email'"), 'pending 0',
	'the e-mail effect waits, never claimed');

# resumed: the same calls reach the provider
is($node->safe_psql('copy', 'SELECT webhook_inbox.resume_outbound()'), 'resumed', 'resume_outbound()');
is($node->safe_psql('copy', "SELECT count(*) FROM webhook_inbox.claim_effects('app', '{email}')"), '1',
	'the outbox hands out its effect after resume');
my $before = requests();
is($node->safe_psql('copy', "SELECT webhook_inbox.discover_tenants('platform')"), '2', 'tenant discovery after resume');
like(join("\n", (split /\n/, slurp($log))[ $before .. requests() - 1 ]), qr{^GET /v1/accounts}m,
	'sends GET /v1/accounts');
$before = requests();
is($node->safe_psql('copy', "SELECT status FROM webhook_inbox._tenant_auth($sid{ghapp}, '101', true)"), 'ok',
	'a token minted after resume');
like(join("\n", (split /\n/, slurp($log))[ $before .. requests() - 1 ]),
	qr{^POST /app/installations/101/access_tokens}m, 'with POST /app/installations/101/access_tokens');
$before = requests();
is($node->safe_psql('copy', "SELECT status FROM webhook_inbox._tenant_auth($sid{shopapp}, '$shop->{shop}', true)"), 'ok',
	'a shop\'s token refreshed after resume');
like(join("\n", (split /\n/, slurp($log))[ $before .. requests() - 1 ]), qr{^POST \S*/admin/oauth/access_token}m,
	'with POST /admin/oauth/access_token');

stop_proc($sim);
$node->stop;
done_testing();
