# webhook-sim effects, as Stripe's POST /v1/refunds works: form-encoded
# parameters (RefundCreateParams, nested metadata[key]), Idempotency-Key
# (same key and parameters: the stored answer, Idempotent-Replayed; other
# parameters: idempotency_error; kept for --idempotency-ttl), refund rules
# (a succeeded PaymentIntent, at most its unrefunded amount), drop after
# accept, finding a refund by metadata through GET /v1/refunds?payment_intent=
# (Stripe has no lookup by key), and the per-key submission counter.
use strict;
use warnings;
use lib 'tools/test';
use SimTest;
use Test::More;

my @src = ('--stripe', 'st:whsec_test123', '--types', 'payment_intent,refund');

sub refunds_in_truth
{
	my ($sim) = @_;
	my (undef, $t) = http_json('GET', "$sim->{url}/_sim/truth");
	return grep { $_->{kind} eq 'refund' } @{ $t->{occurrences} };
}

sub post_refund
{
	my ($sim, $key, $body, $ctype) = @_;
	my %h = ('Content-Type' => $ctype // 'application/x-www-form-urlencoded');
	$h{'Idempotency-Key'} = $key if defined $key;
	return http_json('POST', "$sim->{url}/v1/refunds", { headers => \%h, content => $body });
}

# succeeded PaymentIntents with nothing refunded yet
sub refundable
{
	my ($sim) = @_;
	my (undef, $t) = http_json('GET', "$sim->{url}/_sim/truth");
	my %refunded = map { (http_json('GET', "$sim->{url}/v1/refunds/$_->{id}"))[1]{payment_intent} => 1 }
	  grep { $_->{kind} eq 'refund' } @{ $t->{occurrences} };
	return grep { $_->{type} eq 'payment_intent' && $_->{status} eq 'succeeded' && !$refunded{ $_->{id} } }
	  @{ $t->{objects} };
}

my $sim = start_sim(@src, '--seed', 2, '--objects', 30, '--events', 120, '--idempotency-ttl', 2);
my ($pi, $pi2, $pi3, $pi4) = refundable($sim);
ok($pi4, 'succeeded payment intents to refund');
my ($bad_pi) = grep { $_->{type} eq 'payment_intent' && $_->{status} ne 'succeeded' }
  @{ (http_json('GET', "$sim->{url}/_sim/truth"))[1]{objects} };
my $base = scalar refunds_in_truth($sim);

my $body = "payment_intent=$pi->{id}&amount=150&metadata[effect_key]=ek-1";
my ($code, $r1, $res1) = post_refund($sim, 'key-1', $body);
is($code, 200, 'refund created');
like($r1->{id}, qr/^re_/, 'refund id');
is("$r1->{amount} $r1->{payment_intent} $r1->{object} $r1->{status}", "150 $pi->{id} refund succeeded",
	'refund JSON');
is($r1->{metadata}{effect_key}, 'ek-1', 'nested metadata[key] kept');
is(scalar refunds_in_truth($sim), $base + 1, 'the truth has the new refund');

my ($code2, $r2, $res2) = post_refund($sim, 'key-1', $body);
is($code2, 200, 'same key, same parameters: 200');
is($res2->{content}, $res1->{content}, 'the same stored response');
is($res2->{headers}{'idempotent-replayed'}, 'true', 'Idempotent-Replayed: true');
is(scalar refunds_in_truth($sim), $base + 1, 'no second refund');

my ($code3, $r3) = post_refund($sim, 'key-1', "payment_intent=$pi->{id}&amount=151&metadata[effect_key]=ek-1");
is("$code3 $r3->{error}{type}", '400 idempotency_error', 'same key, other parameters: 400 idempotency_error');
is(scalar refunds_in_truth($sim), $base + 1, 'still one refund');

my ($c4, $n1) = post_refund($sim, undef, "payment_intent=$pi->{id}&amount=10");
my ($c5, $n2) = post_refund($sim, undef, "payment_intent=$pi->{id}&amount=10");
ok($c4 == 200 && $c5 == 200 && $n1->{id} ne $n2->{id}, 'no key: a new refund each time');
is(scalar refunds_in_truth($sim), $base + 3, 'two more refunds');

# a refund is found by its metadata in the PaymentIntent's refund list
my ($lc, $list) = http_json('GET', "$sim->{url}/v1/refunds?payment_intent=$pi->{id}&limit=100");
my @found = grep { ($_->{metadata}{effect_key} // '') eq 'ek-1' } @{ $list->{data} };
is("$lc " . scalar(@found) . " $found[0]{id}", "200 1 $r1->{id}", 'refund list by payment_intent finds it by metadata');
ok(!(grep { $_->{payment_intent} ne $pi->{id} } @{ $list->{data} }), 'only that PaymentIntent\'s refunds');

# the contract's errors
my ($c, $e) = post_refund($sim, 'key-json', qq({"payment_intent":"$pi->{id}"}), 'application/json');
is($c, 400, 'a JSON body: 400');
like($e->{error}{message}, qr/x-www-form-urlencoded/, 'says the v1 API takes form parameters');
($c, $e) = post_refund($sim, 'key-x', 'amount=5');
is("$c $e->{error}{code}", '400 parameter_missing', 'payment_intent or charge required');
($c, $e) = post_refund($sim, 'key-y', 'payment_intent=pi_nope&amount=5');
is("$c $e->{error}{code} $e->{error}{param}", '404 resource_missing payment_intent', 'unknown payment_intent');
($c, $e) = post_refund($sim, 'key-z', "payment_intent=$pi->{id}&amount=-3");
is("$c $e->{error}{code}", '400 parameter_invalid_integer', 'negative amount: 400');
($c, $e) = post_refund($sim, 'key-u', "payment_intent=$pi->{id}&effect_key=x");
is("$c $e->{error}{code} $e->{error}{param}", '400 parameter_unknown effect_key', 'unknown parameter: parameter_unknown');
($c, $e) = post_refund($sim, 'key-big', "payment_intent=$pi2->{id}&amount=100000000");
is("$c $e->{error}{code}", '400 amount_too_large', 'more than the unrefunded amount: 400');
($c, $e) = post_refund($sim, 'key-np', "payment_intent=$bad_pi->{id}");
is($c, 400, "a $bad_pi->{status} PaymentIntent cannot be refunded");
($c, $e) = post_refund($sim, 'key-full', "payment_intent=$pi2->{id}");
is($c, 200, 'no amount: the whole unrefunded amount');
($c, $e) = post_refund($sim, 'key-again', "payment_intent=$pi2->{id}&amount=1");
is("$c $e->{error}{code}", '400 charge_already_refunded', 'nothing left to refund');
($c) = http_json('POST', "$sim->{url}/v1/refunds?payment_intent=$pi->{id}",
	{ headers => { 'Content-Type' => 'application/x-www-form-urlencoded' }, content => '' });
is($c, 400, 'parameters in the query string of a POST: 400');
($lc) = http_json('GET', "$sim->{url}/v1/idempotency/key-1");
is($lc, 404, 'no lookup by idempotency key: Stripe has no such endpoint');

# drop after accept: the refund happens, the answer never comes
http_json('POST', "$sim->{url}/_sim/faults", { content => '{"mode":"drop_after_accept","count":1}' });
my $before = scalar refunds_in_truth($sim);
my $dbody = "payment_intent=$pi3->{id}&amount=99&metadata[effect_key]=ek-drop";
my ($dc, $dd, $dres) = post_refund($sim, 'key-drop', $dbody);
is($dc, 599, 'drop-after-accept: no HTTP answer');
like($dres->{content}, qr/closed|reset|EOF|Unexpected end/i, 'the connection was closed');
is(scalar refunds_in_truth($sim), $before + 1, 'but the refund was performed');
($lc, $list) = http_json('GET', "$sim->{url}/v1/refunds?payment_intent=$pi3->{id}");
my ($dropped) = grep { ($_->{metadata}{effect_key} // '') eq 'ek-drop' } @{ $list->{data} };
is($dropped->{amount}, 99, 'the refund list resolves the uncertain outcome');
my ($rc2, $again) = post_refund($sim, 'key-drop', $dbody);
is("$rc2 $again->{id}", "200 $dropped->{id}", 'same-key retry returns the same refund');
is(scalar refunds_in_truth($sim), $before + 1, 'and creates nothing new');
# the refund's event exists (not delivered: a sweep of /v1/events finds it)
my (undef, $ev) = http_json('GET', "$sim->{url}/v1/events?type=refund.created&limit=100");
ok((grep { $_->{data}{object}{id} eq $dropped->{id} } @{ $ev->{data} }), 'refund.created of the API refund is in /v1/events');

my (undef, $cnt) = http_json('GET', "$sim->{url}/_sim/counters");
is($cnt->{effects}{'key-1'}, 3, 'three submissions of key-1 counted');
is($cnt->{effects}{'key-drop'}, 2, 'two submissions of key-drop counted');
my ($rl) = grep { $_->{id} eq $r1->{id} } refunds_in_truth($sim);
is("$rl->{amount} $rl->{currency} $rl->{source}", "150 $r1->{currency} st", 'truth occurrence has amount, currency, source');

# a key is kept --idempotency-ttl seconds (Stripe: 24 hours), then forgotten
ok(poll_until(sub {
	my ($cc, $rr) = post_refund($sim, 'key-1', "payment_intent=$pi4->{id}&amount=5");
	return $cc == 200 && $rr->{payment_intent} eq $pi4->{id};
}, 10), 'after the key expired, the same key makes a new refund');
stop_proc($sim);

# the drop fault from a flag
$sim = start_sim(@src, '--seed', 2, '--objects', 30, '--events', 120, '--fault-drop-after-accept', '1');
($pi) = refundable($sim);
$before = scalar refunds_in_truth($sim);
($dc) = post_refund($sim, 'k', "payment_intent=$pi->{id}&amount=10");
is($dc, 599, '--fault-drop-after-accept 1: connection dropped');
is(scalar refunds_in_truth($sim), $before + 1, 'refund performed');
stop_proc($sim);

done_testing();
