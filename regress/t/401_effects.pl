# Effects end to end against webhook-sim: once per approved decision, and
# visibly uncertain when the outcome cannot be known.  Each check is on money
# and state (the simulator's refunds and per-key submission counters, the
# effect's status), not on HTTP codes.
use strict;
use warnings;
use lib 'tools/test';
use SimTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use IPC::Run;
use Test::More;

my $sim = start_sim('--stripe', 'st:whsec_test', '--seed', 11, '--objects', 40, '--events', 200);
my (undef, $truth) = http_json('GET', "$sim->{url}/_sim/truth");
# Stripe refunds only a PaymentIntent that has succeeded
my @payments = map { $_->{id} }
  grep { $_->{type} eq 'payment_intent' && !$_->{deleted} && $_->{status} eq 'succeeded' } @{ $truth->{objects} };
ok(@payments >= 6, 'succeeded payments to refund');

my $node = PostgreSQL::Test::Cluster->new('effects');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_inbox'
webhook_inbox.enabled = off
webhook_inbox.lease = '1s'
webhook_inbox.http_timeout = '5s'
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION webhook_inbox');
# three flavours of the same provider: with a lookup (its refund list), with
# only a same-key retry, and with neither
$node->safe_psql('postgres', qq{
	SELECT webhook_inbox.create_source('st', 'stripe', 'whsec_test', api_base => '$sim->{url}',
		settings => '{"effects": {"retry_same_key": false}}');
	SELECT webhook_inbox.create_source('st_retry', 'stripe', 'whsec_test', api_base => '$sim->{url}',
		settings => '{"effects": {"retry_same_key": true}}');
	SELECT webhook_inbox.create_source('st_blind', 'stripe', 'whsec_test', api_base => '$sim->{url}',
		settings => '{"effects": {"retry_same_key": false, "list_refunds": false}}');
	SELECT webhook_inbox.create_source('shop', 'shopify', 'shpss');
	-- D102 below is the same bytes from a second subscription: with replay
	-- protection on it would be a duplicate of D101; this test is about two
	-- messages that share a correlation id, so it turns the protection off
	UPDATE webhook_inbox.sources SET replay_window = '0 seconds' WHERE name = 'shop';
});

sub counters
{
	my (undef, $c) = http_json('GET', "$sim->{url}/_sim/counters");
	return $c->{effects} // {};
}

sub refund_count
{
	my (undef, $t) = http_json('GET', "$sim->{url}/_sim/truth");
	return scalar grep { $_->{kind} eq 'refund' } @{ $t->{occurrences} };
}

sub request_refund
{
	my ($key, $source, $pi, $amount) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT webhook_inbox.request_effect('$key', 'http',
			jsonb_build_object('method', 'POST', 'path', '/v1/refunds',
							   'body', jsonb_build_object('payment_intent', '$pi', 'amount', $amount)),
			source => '$source', owner => 'finance')});
}

sub status_of
{
	my ($key) = @_;
	return $node->safe_psql('postgres',
		"SELECT status FROM webhook_inbox.effects WHERE effect_key = '$key'");
}

# run the executor until the effect reaches one of the wanted states
sub run_until
{
	my ($key, $want) = @_;
	return poll_until(sub {
		$node->psql('postgres', 'CALL webhook_inbox.run_effects()');
		return status_of($key) =~ /^(?:$want)$/;
	}, 60);
}

# --- D101 delivered three times and D102 (the same event, second subscription) ---
$node->safe_psql('postgres', q{
	INSERT INTO webhook_inbox.effect_rules (object_type, from_status, to_status, kind, owner)
	VALUES ('order', '*', 'paid', 'fulfil', 'operations');
});
my $order = '{"id":450789469001,"updated_at":"2026-01-01T10:00:05Z","financial_status":"paid"}';
for my $d ([ 'D101', 'new' ], [ 'D101', 'duplicate' ], [ 'D101', 'duplicate' ], [ 'D102', 'new' ])
{
	is($node->safe_psql('postgres', qq{
		SELECT webhook_inbox.intake('shop', ARRAY['x-shopify-webhook-id', '$d->[0]', 'x-shopify-event-id', 'E1',
			'x-shopify-topic', 'orders/paid'], convert_to('$order', 'UTF8'))}),
		$d->[1], "delivery $d->[0]: $d->[1]");
}
# a worker of the user's own, on the claim API
$node->safe_psql('postgres', q{
	DO $$
	DECLARE c record; e record;
	BEGIN
		FOR c IN SELECT * FROM webhook_inbox.claim('own', 100, '1 minute') LOOP
			FOR e IN SELECT * FROM webhook_inbox.inbox WHERE id = ANY (c.event_ids) ORDER BY provider_version, id LOOP
				PERFORM webhook_inbox.upsert_object(c.source, c.object_type, c.object_id, e.provider_version,
					e.status_value, e.payload, c.claim_token, false, NULL, e.id);
			END LOOP;
			PERFORM webhook_inbox.complete(c.claim_token);
		END LOOP;
	END $$;
});
is($node->safe_psql('postgres', q{
	SELECT (SELECT count(*) FROM webhook_inbox.deliveries) || ' deliveries, ' ||
		   (SELECT count(*) FROM webhook_inbox.inbox) || ' messages, ' ||
		   (SELECT count(*) FROM webhook_inbox.effects WHERE kind = 'fulfil') || ' effect'}),
	'4 deliveries, 2 messages, 1 effect', 'D101 x3 and D102: one approved effect');

# --- two workers racing on one effect: one submission ---
request_refund('refund:race', 'st', $payments[0], 100);
my $before = refund_count();
my @h;
for my $w (1 .. 2)
{
	my ($o, $e);
	push @h, IPC::Run::start([ 'psql', '-X', '-q', '-d', $node->connstr('postgres'),
		'-c', "CALL webhook_inbox.run_effects(10, 'racer$w')" ], '>', \$o, '2>', \$e);
}
$_->finish for @h;
is(status_of('refund:race'), 'done', 'raced effect done');
is(counters()->{'refund:race'}, 1, 'two workers racing: one submission');
is(refund_count(), $before + 1, 'one refund at the provider');

# --- crash after the attempt was recorded, before the request left ---
request_refund('refund:crash-before-send', 'st', $payments[1], 200);
my ($ret, $out, $err) = $node->psql('postgres',
	"SET webhook_inbox.effects_fault = 'after_claim'; CALL webhook_inbox.run_effects()");
like($err, qr/injected fault at after_claim/, 'session died after recording the attempt');
is(status_of('refund:crash-before-send'), 'submitting', 'left submitting');
is(counters()->{'refund:crash-before-send'} // 0, 0, 'nothing reached the provider');
ok(run_until('refund:crash-before-send', 'done'), 'recovered to done');
is(counters()->{'refund:crash-before-send'}, 1, 'submitted exactly once');
is($node->safe_psql('postgres', q{
	SELECT string_agg(a.action || ':' || a.outcome, ' ' ORDER BY a.id)
	  FROM webhook_inbox.effect_attempts a JOIN webhook_inbox.effects e ON e.id = a.effect_id
	 WHERE e.effect_key = 'refund:crash-before-send'}),
	'submit:abandoned lookup:pending submit:done',
	'abandoned, looked up (never performed), then submitted with the same key');

# --- crash after the provider accepted, before the answer was committed ---
request_refund('refund:crash-after-send', 'st', $payments[2], 300);
$before = refund_count();
($ret, $out, $err) = $node->psql('postgres',
	"SET webhook_inbox.effects_fault = 'after_send'; CALL webhook_inbox.run_effects()");
like($err, qr/injected fault at after_send/, 'session died after the provider answered');
is(counters()->{'refund:crash-after-send'}, 1, 'the provider got it');
ok(run_until('refund:crash-after-send', 'done'), 'resolved');
is(counters()->{'refund:crash-after-send'}, 1, 'no second submission');
is(refund_count(), $before + 1, 'one refund');
like($node->safe_psql('postgres',
		"SELECT reason || ' ' || response FROM webhook_inbox.effects WHERE effect_key = 'refund:crash-after-send'"),
	qr/^resolved by listing the PaymentIntent's refunds: /, 'resolved by lookup, with the provider\'s record')
	or diag($node->safe_psql('postgres',
		"SELECT reason || ' ' || response FROM webhook_inbox.effects WHERE effect_key = 'refund:crash-after-send'"));

# --- accept, then drop the connection: uncertain, then resolved by lookup ---
http_json('POST', "$sim->{url}/_sim/faults", { content => '{"mode":"drop_after_accept","count":1}' });
request_refund('refund:dropped', 'st', $payments[3], 400);
$before = refund_count();
$node->safe_psql('postgres', 'CALL webhook_inbox.run_effects()');
is(status_of('refund:dropped'), 'uncertain', 'dropped answer: uncertain, not failed, not retried');
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_inbox.effects_unresolved WHERE effect_key = 'refund:dropped'}),
	'1', 'shown as unresolved meanwhile');
ok(run_until('refund:dropped', 'done'), 'uncertain resolved by lookup');
is(counters()->{'refund:dropped'}, 1, 'no second submission');
is(refund_count(), $before + 1, 'one refund');

# --- a provider with idempotent retries but no lookup: same key, same body ---
http_json('POST', "$sim->{url}/_sim/faults", { content => '{"mode":"drop_after_accept","count":1}' });
request_refund('refund:retry', 'st_retry', $payments[4], 500);
$before = refund_count();
$node->safe_psql('postgres', 'CALL webhook_inbox.run_effects()');
is(status_of('refund:retry'), 'uncertain', 'uncertain after the drop');
ok(run_until('refund:retry', 'done'), 'done after a same-key retry');
is(counters()->{'refund:retry'}, 2, 'submitted twice under the same key');
is(refund_count(), $before + 1, 'the provider\'s idempotency made it one refund');

# --- a provider with neither: quarantined for finance, never resubmitted ---
http_json('POST', "$sim->{url}/_sim/faults", { content => '{"mode":"drop_after_accept","count":1}' });
request_refund('refund:blind', 'st_blind', $payments[5], 600);
$node->safe_psql('postgres', 'CALL webhook_inbox.run_effects()');
ok(run_until('refund:blind', 'quarantined'), 'quarantined');
$node->safe_psql('postgres', 'CALL webhook_inbox.run_effects()') for 1 .. 3;
is(counters()->{'refund:blind'}, 1, 'never submitted again');
is($node->safe_psql('postgres', q{
	SELECT status || ' ' || owner || ' ' || (reason LIKE 'uncertain: the provider offers no lookup%')
	  FROM webhook_inbox.effects_unresolved WHERE effect_key = 'refund:blind'}),
	'quarantined finance true', 'effects_unresolved shows owner finance and the reason');
$node->safe_psql('postgres', q{
	SELECT webhook_inbox.resolve_effect(id, 'done', 'refund found in the provider dashboard')
	  FROM webhook_inbox.effects WHERE effect_key = 'refund:blind'});
is(status_of('refund:blind'), 'done', 'a person resolved it');
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_inbox.effect_resolutions}), '1', 'audited');

# --- a definitive rejection is failed, not retried ---
$node->safe_psql('postgres', q{
	SELECT webhook_inbox.request_effect('refund:bad', 'http',
		'{"method": "POST", "path": "/v1/refunds", "body": {"payment_intent": "pi_nope", "amount": 5}}',
		source => 'st')});
$node->safe_psql('postgres', 'CALL webhook_inbox.run_effects()');
is($node->safe_psql('postgres', q{SELECT status || ' ' || response_status FROM webhook_inbox.effects WHERE effect_key = 'refund:bad'}),
	'failed 404', 'rejection recorded as failed with the provider\'s answer');

# --- the background worker executes http effects by itself ---
$node->safe_psql('postgres', 'ALTER SYSTEM SET webhook_inbox.enabled = on');
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
request_refund('refund:by-worker', 'st', $payments[0], 7);
ok($node->poll_query_until('postgres',
		"SELECT status = 'done' FROM webhook_inbox.effects WHERE effect_key = 'refund:by-worker'"),
	'the worker submitted the effect');
is(counters()->{'refund:by-worker'}, 1, 'once');
like($node->safe_psql('postgres',
		"SELECT holder FROM webhook_inbox.effects e JOIN webhook_inbox.effect_attempts a ON a.effect_id = e.id "
		  . "WHERE e.effect_key = 'refund:by-worker'"), qr/^$/, 'the claim was released');

$node->stop;
stop_proc($sim);
done_testing();
