# webhook-sim effects: refunds with Idempotency-Key (same key and body: same
# refund; different body: idempotency_error), drop-after-accept, lookup by
# key, --no-effect-lookup, and the per-key submission counter.
use strict;
use warnings;
use lib 'tools/test';
use SimTest;
use Test::More;

my @src = ('--stripe', 'st:whsec_test123');

sub refunds_in_truth
{
	my ($sim) = @_;
	my (undef, $t) = http_json('GET', "$sim->{url}/_sim/truth");
	return grep { $_->{kind} eq 'refund' } @{ $t->{occurrences} };
}

sub post_refund
{
	my ($sim, $key, $body, $ctype) = @_;
	my %h = ('Content-Type' => $ctype // 'application/json');
	$h{'Idempotency-Key'} = $key if defined $key;
	return http_json('POST', "$sim->{url}/v1/refunds", { headers => \%h, content => $body });
}

my $sim = start_sim(@src, '--seed', 2, '--objects', 10, '--events', 30);
my (undef, $t) = http_json('GET', "$sim->{url}/_sim/truth");
my ($pi) = grep { $_->{type} eq 'payment' } @{ $t->{objects} };
ok($pi, 'a payment to refund');
my $base = scalar refunds_in_truth($sim);

my $body = qq({"payment_intent":"$pi->{id}","amount":150});
my ($code, $r1, $res1) = post_refund($sim, 'key-1', $body);
is($code, 200, 'refund created');
like($r1->{id}, qr/^re_/, 'refund id');
is("$r1->{amount} $r1->{payment_intent} $r1->{object}", "150 $pi->{id} refund", 'refund JSON');
is(scalar refunds_in_truth($sim), $base + 1, 'the truth has the new refund');

my ($code2, $r2, $res2) = post_refund($sim, 'key-1', $body);
is($code2, 200, 'same key, same body: 200');
is($res2->{content}, $res1->{content}, 'the same stored response');
is(scalar refunds_in_truth($sim), $base + 1, 'no second refund');

my ($code3, $r3) = post_refund($sim, 'key-1', qq({"payment_intent":"$pi->{id}","amount":151}));
is($code3, 400, 'same key, different body: 400');
is($r3->{error}{type}, 'idempotency_error', 'idempotency_error');
is(scalar refunds_in_truth($sim), $base + 1, 'still one refund');

my ($c4, $n1) = post_refund($sim, undef, $body);
my ($c5, $n2) = post_refund($sim, undef, $body);
ok($c4 == 200 && $c5 == 200 && $n1->{id} ne $n2->{id}, 'no key: a new refund each time');
is(scalar refunds_in_truth($sim), $base + 3, 'two more refunds');

my ($c6, $f) = post_refund($sim, 'key-form', "payment_intent=$pi->{id}&amount=7",
	'application/x-www-form-urlencoded');
is("$c6 $f->{amount}", '200 7', 'form-encoded body accepted');

my ($c7, $e7) = post_refund($sim, 'key-x', '{"amount":5}');
is("$c7 $e7->{error}{code}", '400 parameter_missing', 'payment_intent required');
my ($c8, $e8) = post_refund($sim, 'key-y', '{"payment_intent":"pi_nope","amount":5}');
is("$c8 $e8->{error}{code}", '404 resource_missing', 'unknown payment_intent: 404');
my ($c9) = post_refund($sim, 'key-z', '{"payment_intent":"' . $pi->{id} . '","amount":-3}');
is($c9, 400, 'negative amount: 400');

# lookup by key
my ($lc, $look) = http_json('GET', "$sim->{url}/v1/idempotency/key-1");
is($lc, 200, 'lookup of a done key: 200');
is("$look->{key} $look->{status} $look->{response}{id}", "key-1 done $r1->{id}", 'lookup returns the stored response');
($lc) = http_json('GET', "$sim->{url}/v1/idempotency/never-used");
is($lc, 404, 'lookup of an unknown key: 404');

# drop after accept: the refund happens, the answer never comes
http_json('POST', "$sim->{url}/_sim/faults", { content => '{"mode":"drop_after_accept","count":1}' });
my $before = scalar refunds_in_truth($sim);
my $dbody = qq({"payment_intent":"$pi->{id}","amount":99});
my ($dc, $dd, $dres) = post_refund($sim, 'key-drop', $dbody);
is($dc, 599, 'drop-after-accept: no HTTP answer');
like($dres->{content}, qr/closed|reset|EOF|Unexpected end/i, 'the connection was closed');
is(scalar refunds_in_truth($sim), $before + 1, 'but the refund was performed');
($lc, $look) = http_json('GET', "$sim->{url}/v1/idempotency/key-drop");
is("$lc $look->{response}{amount}", '200 99', 'lookup resolves the uncertain outcome');
my ($rc2, $again) = post_refund($sim, 'key-drop', $dbody);
is("$rc2 $again->{id}", "200 $look->{response}{id}", 'same-key retry returns the same refund');
is(scalar refunds_in_truth($sim), $before + 1, 'and creates nothing new');

my (undef, $cnt) = http_json('GET', "$sim->{url}/_sim/counters");
is($cnt->{effects}{'key-1'}, 3, 'three submissions of key-1 counted');
is($cnt->{effects}{'key-drop'}, 2, 'two submissions of key-drop counted');
my ($rl) = grep { $_->{id} eq $r1->{id} } refunds_in_truth($sim);
is("$rl->{amount} $rl->{currency} $rl->{source}", "150 $r1->{currency} st", 'truth occurrence has amount, currency, source');
my ($lcode, $list) = http_json('GET', "$sim->{url}/v1/refunds?limit=100&updated_since=" . (time() - 600));
ok((grep { $_->{id} eq $r1->{id} } @{ $list->{data} }), 'effect refunds appear in the changed-since list');
stop_proc($sim);

# A provider flavour without lookup, with the drop fault from a flag.
$sim = start_sim(@src, '--seed', 2, '--objects', 10, '--events', 30, '--no-effect-lookup',
	'--fault-drop-after-accept', '1');
(undef, $t) = http_json('GET', "$sim->{url}/_sim/truth");
($pi) = grep { $_->{type} eq 'payment' } @{ $t->{objects} };
$before = scalar refunds_in_truth($sim);
($dc) = post_refund($sim, 'k', qq({"payment_intent":"$pi->{id}","amount":10}));
is($dc, 599, '--fault-drop-after-accept 1: connection dropped');
is(scalar refunds_in_truth($sim), $before + 1, 'refund performed');
($lc) = http_json('GET', "$sim->{url}/v1/idempotency/k");
is($lc, 404, '--no-effect-lookup: lookup always 404');
stop_proc($sim);

done_testing();
