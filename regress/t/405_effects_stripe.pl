# External effects sent to Stripe as its v1 API takes them, checked by a
# strict Stripe-shaped provider (regress/t/bin/provider.pl, written from the
# official stripe-node package): bodies form-encoded (metadata[key]=value,
# arrays as key[0]=value), a JSON body refused, unknown parameters refused.
# Stripe has no lookup by idempotency key: an uncertain refund is resolved by
# a same-key retry within Stripe's 24 hours, and after them by listing the
# PaymentIntent's refunds (limit=100, starting_after, has_more) for the one
# whose metadata carries the effect key.
use strict;
use warnings;
use lib 'regress/t';
use ProviderTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use HTTP::Tiny;
use Test::More;

my $prov = start_provider();

my $node = PostgreSQL::Test::Cluster->new('effstripe');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_inbox'
webhook_inbox.enabled = off
webhook_inbox.lease = '1s'
webhook_inbox.http_timeout = '1s'
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION webhook_inbox');
$node->safe_psql('postgres', qq{
	SELECT webhook_inbox.create_source('st', 'stripe', 'whsec_x', api_base => '$prov->{url}', api_token => 'sk_test_1');
});

sub status_of
{
	my ($key) = @_;
	return $node->safe_psql('postgres', "SELECT status FROM webhook_inbox.effects WHERE effect_key = '$key'");
}

sub run_until
{
	my ($key, $want) = @_;
	return poll_until(sub {
		$node->psql('postgres', 'CALL webhook_inbox.run_effects()');
		return status_of($key) =~ /^(?:$want)$/;
	}, 60);
}

sub refunds_of
{
	my ($pi) = @_;
	return grep { $_->{payment_intent} eq $pi } @{ provider_ctl($prov)->{refunds} };
}

sub age_attempts
{
	my ($key) = @_;
	$node->safe_psql('postgres', qq{
		UPDATE webhook_inbox.effect_attempts SET started_at = started_at - interval '25 hours'
		 WHERE effect_id = (SELECT id FROM webhook_inbox.effects WHERE effect_key = '$key')});
	provider_ctl($prov, { forget => [$key] });
}

# --- a refund: form-encoded, with its effect key in metadata ---
$node->safe_psql('postgres', q{
	SELECT webhook_inbox.request_effect('refund:1042', 'http',
		'{"method": "POST", "path": "/v1/refunds",
		  "body": {"payment_intent": "pi_A", "amount": 500, "reason": "requested_by_customer",
				   "metadata": {"order": "1042 & co"}, "expand": ["charge"]}}',
		source => 'st', owner => 'finance');
});
$node->safe_psql('postgres', 'CALL webhook_inbox.run_effects()');
is(status_of('refund:1042'), 'done', 'the refund was accepted');
my ($req) = grep { $_->{method} eq 'POST' && $_->{path} eq '/v1/refunds' } provider_requests($prov);
is($req->{headers}{'content-type'}, 'application/x-www-form-urlencoded', 'sent form-encoded');
is($req->{body},
	'amount=500&expand[0]=charge&reason=requested_by_customer&metadata[order]=1042%20%26%20co'
	  . '&metadata[effect_key]=refund%3A1042&payment_intent=pi_A',
	'nested as metadata[key]=value and arrays as key[0]=value, the effect key in metadata');
is($req->{headers}{'idempotency-key'}, 'refund:1042', 'with the effect\'s idempotency key');
is($req->{headers}{authorization}, 'Bearer sk_test_1', 'and the source\'s key');
my @r = refunds_of('pi_A');
is(scalar @r, 1, 'one refund');
is("$r[0]{amount} $r[0]{metadata}{order} $r[0]{metadata}{effect_key}", '500 1042 & co refund:1042',
	'Stripe read the amount and both metadata values');

# --- a JSON body is what Stripe refuses; a string body with its own type is sent as it is ---
my $res = HTTP::Tiny->new->request('POST', "$prov->{url}/v1/refunds",
	{ headers => { 'Content-Type' => 'application/json' }, content => '{"payment_intent":"pi_A","amount":1}' });
is($res->{status}, 400, 'the provider refuses a JSON body, as Stripe does');

# --- uncertain within 24 hours: a same-key retry, Stripe answers the first refund again ---
provider_ctl($prov, { drop => 1 });
$node->safe_psql('postgres', q{
	SELECT webhook_inbox.request_effect('refund:B', 'http',
		'{"method": "POST", "path": "/v1/refunds", "body": {"payment_intent": "pi_B", "amount": 300}}', source => 'st')});
$node->safe_psql('postgres', 'CALL webhook_inbox.run_effects()');
is(status_of('refund:B'), 'uncertain', 'answer dropped: uncertain');
ok(run_until('refund:B', 'done'), 'resolved');
is(scalar(refunds_of('pi_B')), 1, 'one refund');
is(provider_ctl($prov)->{keys}{'refund:B'}{replays}, 1, 'by a same-key retry that Stripe answered from its key');

# --- uncertain after 24 hours: the PaymentIntent's refunds are listed, over two pages ---
provider_ctl($prov, { drop => 1 });
$node->safe_psql('postgres', q{
	SELECT webhook_inbox.request_effect('refund:C', 'http',
		'{"method": "POST", "path": "/v1/refunds", "body": {"payment_intent": "pi_C", "amount": 700}}', source => 'st')});
$node->safe_psql('postgres', 'CALL webhook_inbox.run_effects()');
is(status_of('refund:C'), 'uncertain', 'answer dropped: uncertain');
# 120 later refunds of the same PaymentIntent put ours on the second page
for my $i (1 .. 120)
{
	HTTP::Tiny->new->request('POST', "$prov->{url}/v1/refunds",
		{ headers => { 'Content-Type' => 'application/x-www-form-urlencoded' },
		  content => "payment_intent=pi_C&amount=1&metadata[n]=$i" });
}
age_attempts('refund:C');
ok(run_until('refund:C', 'done'), 'resolved after 24 hours');
is(scalar(grep { ($_->{metadata}{effect_key} // '') eq 'refund:C' } refunds_of('pi_C')), 1, 'one refund, not two');
my @lists = grep { $_->{method} eq 'GET' && $_->{path} eq '/v1/refunds' } provider_requests($prov);
is(join(' ', map { $_->{query} } @lists),
	'payment_intent=pi_C&limit=100 payment_intent=pi_C&limit=100&starting_after=' . (refunds_of('pi_C'))[21]{id},
	'listed by payment_intent, 100 a page, the second after the first page\'s last');
like($node->safe_psql('postgres', q{SELECT reason || ' / ' || response FROM webhook_inbox.effects WHERE effect_key = 'refund:C'}),
	qr/^resolved by listing the PaymentIntent's refunds: re_\d+ is succeeded \/ .*"effect_key": "refund:C"/,
	'with the refund found as the answer');
is($node->safe_psql('postgres', q{
	SELECT string_agg(a.action || ':' || a.outcome, ' ' ORDER BY a.id)
	  FROM webhook_inbox.effect_attempts a JOIN webhook_inbox.effects e ON e.id = a.effect_id
	 WHERE e.effect_key = 'refund:C'}), 'submit:uncertain lookup:uncertain lookup:done',
	'a submission, then two pages of lookup, no second submission');

# --- never reached Stripe, found out after 24 hours: listed, not found, submitted again ---
my ($rc, $out, $err) = $node->psql('postgres', q{
	SELECT webhook_inbox.request_effect('refund:D', 'http',
		'{"method": "POST", "path": "/v1/refunds", "body": {"payment_intent": "pi_D", "amount": 900}}', source => 'st');
	SET webhook_inbox.effects_fault = 'after_claim';
	CALL webhook_inbox.run_effects()});
like($err, qr/injected fault at after_claim/, 'the executor died after recording the attempt');
is(status_of('refund:D'), 'submitting', 'left submitting');
age_attempts('refund:D');
ok(run_until('refund:D', 'done'), 'its lease ended, and it was resolved');
is(scalar(refunds_of('pi_D')), 1, 'one refund');
is($node->safe_psql('postgres', q{
	SELECT string_agg(a.action || ':' || a.outcome, ' ' ORDER BY a.id)
	  FROM webhook_inbox.effect_attempts a JOIN webhook_inbox.effects e ON e.id = a.effect_id
	 WHERE e.effect_key = 'refund:D'}), 'submit:abandoned lookup:pending submit:done',
	'abandoned, listed (not there), submitted');

# --- a Stripe request that is not a refund: after 24 hours it goes to its owner ---
provider_ctl($prov, { drop => 1 });
$node->safe_psql('postgres', q{
	SELECT webhook_inbox.request_effect('refund:E', 'http',
		'{"method": "POST", "path": "/v1/refunds", "body": {"charge": "ch_E", "amount": 1}}', source => 'st', owner => 'finance')});
$node->safe_psql('postgres', 'CALL webhook_inbox.run_effects()');
age_attempts('refund:E');
ok(run_until('refund:E', 'quarantined'), 'a refund of a charge (no PaymentIntent to list) is quarantined');
like($node->safe_psql('postgres', q{SELECT owner || ': ' || reason FROM webhook_inbox.effects WHERE effect_key = 'refund:E'}),
	qr/^finance: uncertain for longer than the provider keeps idempotency keys/, 'for finance, with the reason');

$node->stop;
stop_proc($prov);
done_testing();
