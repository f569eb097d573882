# An effect is sent only while its lease is live, and a same-key retry only
# while the provider still keeps the key.
#
# Two executors share a slow provider without idempotency (each submission
# takes 1 s; it offers a lookup by key).  With a 3 s lease, an executor that
# took five effects at once would still be sending the fourth after its lease
# ended, while the other executor, having taken the expired ones over, looks
# them up ("never performed") and submits them too: operations performed
# twice.  Claims now hold only what fits in the lease, so each operation is
# performed once.
#
# Then an uncertain Stripe effect older than Stripe's 24 hours of key
# retention: a same-key retry would be a new request to Stripe, so it goes to
# its owner instead.
use strict;
use warnings;
use lib 'regress/t';
use ProviderTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use IPC::Run;
use Test::More;

my $slow = start_provider(delay_ms => 1000);
my $prov = start_provider();

my $node = PostgreSQL::Test::Cluster->new('efflease');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_inbox'
webhook_inbox.enabled = off
webhook_inbox.lease = '3s'
webhook_inbox.http_timeout = '2s'
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION webhook_inbox');
$node->safe_psql('postgres', qq{
	SELECT webhook_inbox.create_source('ops', 'github', 's', api_base => '$slow->{url}',
		settings => '{"effects": {"lookup": "/v1/ops/{key}"}}');
	SELECT webhook_inbox.request_effect('op-' || i, 'http',
		jsonb_build_object('method', 'POST', 'path', '/v1/ops/op-' || i), source => 'ops')
	  FROM generate_series(1, 5) i;
});

sub open_effects
{
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM webhook_inbox.effects WHERE status NOT IN ('done', 'failed', 'quarantined')");
}

# executor A takes what it may and sends it; B keeps running alongside
my ($aout, $aerr) = ('', '');
my $a = IPC::Run::start([ 'psql', '-X', '-q', '-d', $node->connstr('postgres'),
	'-c', "CALL webhook_inbox.run_effects(5, 'A')" ], '>', \$aout, '2>', \$aerr);
ok(poll_until(sub {
	$node->psql('postgres', "CALL webhook_inbox.run_effects(5, 'B')");
	return open_effects() == 0;
}, 90), 'every effect finished');
$a->finish;
is($aerr, '', 'executor A ended without an error');
my $st = provider_ctl($slow);
is(join(',', map { "$_=" . ($st->{ops}{$_} // 0) } map { "op-$_" } 1 .. 5), 'op-1=1,op-2=1,op-3=1,op-4=1,op-5=1',
	'each operation performed once at the provider');
is($node->safe_psql('postgres', q{SELECT string_agg(DISTINCT status, ',') FROM webhook_inbox.effects}), 'done',
	'all done');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM webhook_inbox.effect_attempts a JOIN webhook_inbox.effects e ON e.id = a.effect_id
	 WHERE a.action = 'submit' AND a.outcome NOT IN ('given_back', 'fenced')}), '5',
	'five submissions on record, one per operation');

# --- Stripe keeps idempotency keys 24 hours: an older uncertain effect is not retried ---
# (a longer lease, so that one executor round takes both effects)
$node->safe_psql('postgres', "ALTER SYSTEM SET webhook_inbox.lease = '30s'");
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
$node->safe_psql('postgres', qq{
	SELECT webhook_inbox.create_source('st', 'stripe', 'whsec_x', api_base => '$prov->{url}', api_token => 'sk_test',
		settings => '{"effects": {"list_refunds": false}}');
	SELECT webhook_inbox.request_effect('refund:young', 'http',
		'{"method": "POST", "path": "/v1/refunds", "body": {"payment_intent": "pi_young", "amount": 100}}',
		source => 'st', owner => 'finance');
	-- (the provider's /v1/ops performs every submission, as Stripe does once it forgot a key)
	SELECT webhook_inbox.request_effect('capture:old', 'http',
		'{"method": "POST", "path": "/v1/ops/capture:old", "body": {"amount": 200}}',
		source => 'st', owner => 'finance');
});
provider_ctl($prov, { drop => 2 });
$node->safe_psql('postgres', 'CALL webhook_inbox.run_effects()');
is($node->safe_psql('postgres', q{SELECT string_agg(status, ',' ORDER BY id) FROM webhook_inbox.effects WHERE kind = 'http' AND source_id = (SELECT id FROM webhook_inbox.sources WHERE name = 'st')}),
	'uncertain,uncertain', 'both answers dropped: uncertain');
# a day later Stripe has forgotten the keys
$node->safe_psql('postgres', q{
	UPDATE webhook_inbox.effect_attempts SET started_at = started_at - interval '25 hours'
	 WHERE effect_id = (SELECT id FROM webhook_inbox.effects WHERE effect_key = 'capture:old')});
$node->safe_psql('postgres', 'CALL webhook_inbox.run_effects()');
is($node->safe_psql('postgres', q{
	SELECT string_agg(effect_key || ' ' || status || ' ' || owner, ',' ORDER BY id) FROM webhook_inbox.effects_unresolved}),
	'capture:old quarantined finance', 'the day-old one went to its owner');
like($node->safe_psql('postgres', q{SELECT reason FROM webhook_inbox.effects WHERE effect_key = 'capture:old'}),
	qr/^uncertain for longer than the provider keeps idempotency keys \(24:00:00\)/, 'with the reason');
is($node->safe_psql('postgres', q{SELECT status FROM webhook_inbox.effects WHERE effect_key = 'refund:young'}), 'done',
	'the young one was retried with the same key');
$st = provider_ctl($prov);
is(join(',', map { $_->{payment_intent} } @{ $st->{refunds} }), 'pi_young', 'one refund at the provider');
is($st->{ops}{'capture:old'}, 1, 'the day-old operation was not submitted again');

$node->stop;
stop_proc($_) for $slow, $prov;
done_testing();
