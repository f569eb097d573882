# The library loads through shared_preload_libraries, the extension is
# created, and intake() wakes nothing it should not: a smoke test of the
# module as operators install it.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 'regress/t';
use ReleaseTest ();

my $node = PostgreSQL::Test::Cluster->new('preload');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_inbox'
webhook_inbox.enabled = off
});
$node->start;

is($node->safe_psql('postgres', "SHOW shared_preload_libraries"), 'webhook_inbox',
	'library preloaded');
$node->safe_psql('postgres', 'CREATE EXTENSION webhook_inbox');
is($node->safe_psql('postgres',
		"SELECT extversion FROM pg_extension WHERE extname = 'webhook_inbox'"),
	ReleaseTest::ext_version(), 'extension created at the release being built');

# the GUCs exist with their defaults, units and bounds
is($node->safe_psql('postgres', "SHOW webhook_inbox.lease"), '30s', 'lease GUC has a unit');
is($node->safe_psql('postgres', "SHOW webhook_inbox.max_attempts"), '8', 'max_attempts default');
my ($ret, $out, $err) = $node->psql('postgres', "SET webhook_inbox.max_attempts = 0");
isnt($ret, 0, 'out-of-range GUC refused');
like($err, qr/0 is outside the valid range for parameter "webhook_inbox.max_attempts"/,
	'clear GUC range error');
is($node->safe_psql('postgres', "SHOW webhook_inbox.local_batch_size"), '1000', 'local_batch_size default');
($ret, $out, $err) = $node->psql('postgres', "ALTER SYSTEM SET webhook_inbox.local_batch_size = 10001");
like($err, qr/10001 is outside the valid range for parameter "webhook_inbox.local_batch_size" \(1 \.\. 10000\)/,
	'local_batch_size: out of range refused with its bounds');
($ret, $out, $err) = $node->psql('postgres', "SET webhook_inbox.nosuch = 1");
like($err, qr/invalid configuration parameter name "webhook_inbox.nosuch"/,
	'prefix reserved: typos are caught');

# the SQL API works end to end in the preloaded server
$node->safe_psql('postgres', q{SELECT webhook_inbox.create_source('s', 'stripe', 'whsec_x')});
is($node->safe_psql('postgres', q{
	SELECT webhook_inbox.intake('s', '{}', convert_to(
		'{"id":"evt_1","type":"payment_intent.captured","data":{"object":{"id":"pi_1","status":"captured"}}}', 'UTF8'))}),
	'new', 'intake in a preloaded server');
is($node->safe_psql('postgres', q{
	SELECT string_agg(object_id || ':' || strategy, ',') FROM webhook_inbox.claim('t', 10, '1 minute', '0')}),
	'pi_1:fetch', 'claim in a preloaded server');

# the extension survives a restart and a second database
$node->restart;
$node->safe_psql('postgres', 'CREATE DATABASE other');
$node->safe_psql('other', 'CREATE EXTENSION webhook_inbox');
is($node->safe_psql('other', 'SELECT count(*) > 0 FROM webhook_inbox.routes'), 't',
	'presets in a second database');
is($node->safe_psql('postgres', 'SELECT count(*) FROM webhook_inbox.inbox'), '1',
	'inbox durable across restart');

$node->stop;

# without shared_preload_libraries every SQL function still works
my $plain = PostgreSQL::Test::Cluster->new('plain');
$plain->init;
$plain->start;
$plain->safe_psql('postgres', 'CREATE EXTENSION webhook_inbox');
$plain->safe_psql('postgres', q{SELECT webhook_inbox.create_source('s', 'stripe', 'whsec_x')});
is($plain->safe_psql('postgres', q{
	SELECT webhook_inbox.intake('s', '{}', convert_to(
		'{"id":"evt_1","type":"payment_intent.captured","data":{"object":{"id":"pi_1","status":"captured"}}}', 'UTF8'))}),
	'new', 'intake without preloading');
is($plain->safe_psql('postgres', q{LOAD 'webhook_inbox'; SHOW webhook_inbox.max_attempts}), '8',
	'settings exist once the library is loaded');
($ret, $out, $err) = $plain->psql('postgres', q{LOAD 'webhook_inbox'; SHOW webhook_inbox.database});
like($err, qr/unrecognized configuration parameter "webhook_inbox.database"/,
	'the worker database is a server-start setting');
$plain->stop;

done_testing();
