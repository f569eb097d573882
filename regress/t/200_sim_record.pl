# webhook-sim: deterministic recorded stream, scenario shape, command line.
use strict;
use warnings;
use lib 'tools/test';
use JSON::PP;
use SimTest;
use Test::More;

my $dir = tmpdir();
my @src = ('--stripe', 'st:whsec_test123', '--shopify', 'shop:shpss_secret',
	'--standard', 'std:whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw');
my $json = JSON::PP->new;

# Without --deliver-to the whole scenario is applied and recorded at start.
sub record
{
	my ($file, @args) = @_;
	# a fixed scenario clock: the same seed gives the same bytes
	my $sim = start_sim('--record', $file, '--epoch', 1767225600, @args);
	my ($code, $truth) = http_json('GET', "$sim->{url}/_sim/truth");
	is($code, 200, "truth served ($file)");
	is(stop_proc($sim), 0, 'SIGTERM exits 0');
	return $truth;
}

my $t1 = record("$dir/a.jsonl", '--seed', 42, '--objects', 60, '--events', 600, @src);
record("$dir/b.jsonl", '--seed', 42, '--objects', 60, '--events', 600, @src);
record("$dir/c.jsonl", '--seed', 43, '--objects', 60, '--events', 600, @src);
my ($a, $b, $c) = map { slurp("$dir/$_.jsonl") } qw(a b c);
ok(length($a) > 10000, 'record is not empty');
ok($a eq $b, 'same seed: byte-identical record');
ok($a ne $c, 'different seed: different record');

my @ev = map { $json->decode($_) } split /\n/, $a;
is(scalar @ev, 600, 'one line per event');
is_deeply([ map { $_->{seq} } @ev ], [ 1 .. 600 ], 'seq counts 1..n');
my %ids;
$ids{ $_->{event_id} }++ for @ev;
is(scalar keys %ids, 600, 'event ids are unique');
ok(!(grep { $_->{body} =~ /"updated"/ } @ev), 'no wall-clock field in recorded bodies');
ok(!(grep { exists $_->{headers}{'Stripe-Signature'} || exists $_->{headers}{'X-Shopify-Hmac-Sha256'}
		|| exists $_->{headers}{'webhook-signature'} } @ev), 'no signatures in the record');

my %kinds;
$kinds{"$_->{source}/$_->{kind}/$_->{object_type}"}++ for @ev;
ok($kinds{'std/standard/subscription'}, 'subscriptions go to the standard source when given');
ok($kinds{'st/stripe/payment_intent'}, 'payment intents go to the stripe source');
ok($kinds{'shop/shopify/order'}, 'orders go to the shopify source');
ok(!$kinds{'st/stripe/subscription'}, 'no stripe subscription events with --standard');

# Every body is JSON of its provider's layout.
my $bad = 0;
for my $e (@ev)
{
	my $body = eval { $json->decode($e->{body}) };
	if (!$body) { $bad++; next; }
	if ($e->{kind} eq 'stripe')
	{
		$bad++ unless $body->{id} eq $e->{event_id} && $body->{type} eq $e->{type}
		  && $body->{created} =~ /^\d+$/ && $body->{data}{object}{id};
	}
	elsif ($e->{kind} eq 'standard')
	{
		$bad++ unless $e->{headers}{'webhook-id'} eq $e->{event_id}
		  && $body->{type} =~ /^subscription\.(created|updated|deleted|paused|resumed)$/ && $body->{data}{id};
	}
	else
	{
		$bad++ unless $e->{headers}{'X-Shopify-Webhook-Id'} eq $e->{event_id}
		  && $e->{headers}{'X-Shopify-Topic'} eq $e->{type}
		  && $e->{headers}{'X-Shopify-Event-Id'} && $body->{id} =~ /^\d+$/;
	}
}
is($bad, 0, 'bodies and headers match each provider layout');

# Orders: updated_at strictly increasing per order, +1 s at least; the
# truth version of a live order is its last updated_at.
my (%last, $nonmono);
$nonmono = 0;
for my $e (grep { $_->{object_type} eq 'order' && $_->{type} ne 'orders/delete' } @ev)
{
	my $o = $json->decode($e->{body});
	my ($y, $mo, $d, $h, $mi, $s) = $o->{updated_at} =~ /^(\d+)-(\d+)-(\d+)T(\d+):(\d+):(\d+)\+00:00$/
	  or do { $nonmono++; next };
	require Time::Local;
	my $t = Time::Local::timegm($s, $mi, $h, $d, $mo - 1, $y);
	$nonmono++ if defined $last{ $o->{id} } && $t < $last{ $o->{id} } + 1;
	$last{ $o->{id} } = $t;
}
is($nonmono, 0, 'order updated_at strictly increasing by >= 1 s');
my @orders = grep { $_->{type} eq 'order' && !$_->{deleted} } @{ $t1->{objects} };
ok(@orders > 3, 'live orders in the truth');
is(scalar(grep { $_->{version} != $last{ $_->{id} } } @orders), 0,
	'truth version of each live order equals its last recorded updated_at');

# PaymentIntents: statuses of PaymentIntent.Status (stripe-node), each event
# type with the status it reports, and cycles: a failed attempt goes back to
# requires_payment_method and the intent goes on.
my %pi_type = (
	'payment_intent.created' => 'requires_payment_method',
	'payment_intent.payment_failed' => 'requires_payment_method',
	'payment_intent.requires_action' => 'requires_action',
	'payment_intent.processing' => 'processing',
	'payment_intent.amount_capturable_updated' => 'requires_capture',
	'payment_intent.succeeded' => 'succeeded',
	'payment_intent.canceled' => 'canceled');
my ($mismatch, $cycles, %failed) = (0, 0);
for my $e (grep { $_->{type} =~ /^payment_intent\./ } @ev)
{
	my $o = $json->decode($e->{body})->{data}{object};
	$mismatch++ unless ($pi_type{ $e->{type} } // '') eq $o->{status} && $o->{object} eq 'payment_intent';
	$cycles++ if $failed{ $o->{id} } && $e->{type} ne 'payment_intent.payment_failed';
	$failed{ $o->{id} } = 1 if $e->{type} eq 'payment_intent.payment_failed';
}
is($mismatch, 0, 'each payment_intent event carries the status its type names');
ok($cycles > 0, "PaymentIntents go on after a failed attempt ($cycles events after a failure)");
my @rs = map { $json->decode($_->{body})->{data}{object} } grep { $_->{type} =~ /^refund\./ } @ev;
ok(scalar(grep { $_->{status} eq 'pending' } @rs) && scalar(grep { $_->{status} eq 'succeeded' } @rs),
	'refunds are created pending or succeeded');
ok(scalar(grep { $_->{type} eq 'refund.updated' || $_->{type} eq 'refund.failed' } @ev),
	'refund status changes are events of their own');
ok(scalar(grep { $_->{type} eq 'charge.dispute.created' } @ev), 'dispute events emitted');
is(scalar(@{ $t1->{occurrences} }),
	scalar(grep { $_->{type} =~ /^(refund\.created|charge\.dispute\.created)$/ } @ev),
	'one truth occurrence per refund and dispute');
my @canceled = grep { $_->{type} eq 'subscription' && $_->{status} eq 'canceled' } @{ $t1->{objects} };
ok(@canceled && !(grep { $_->{deleted} } @canceled),
	'canceled subscriptions stay in the truth as canceled, not deleted');

# Stripe thin events.
record("$dir/thin.jsonl", '--seed', 5, '--objects', 30, '--events', 300,
	'--stripe', 'st:whsec_test123', '--thin-share', 1);
my @thin = grep { $_->{object_type} eq 'subscription' } map { $json->decode($_) } split /\n/, slurp("$dir/thin.jsonl");
ok(@thin > 0, 'subscription events with --thin-share 1');
is(scalar(grep {
		my $b = $json->decode($_->{body});
		$b->{object} eq 'v2.core.event' && $_->{type} =~ /^v1\.customer\.subscription\./
		  && $b->{related_object}{url} eq "/v1/subscriptions/$b->{related_object}{id}"
		  && $b->{created} =~ /^\d{4}-\d\d-\d\dT/ } @thin), scalar(@thin), 'all are thin events');

# Command line.
my ($rc, $out, $err) = run_sim('serve', '--help');
is($rc, 0, 'serve --help exits 0');
like($out, qr/--deliver-to URL/, 'serve --help documents the flags');
for my $cmd ([ 'serve', '--bogus' ], [ 'serve', '--listen', '127.0.0.1:0', '--stripe', 'x:y', '--drop', '2' ],
	[ 'replay', '--mode', 'sideways' ], [ 'verify', '--nope' ], [ 'verify' ], [ 'frobnicate' ],
	[ 'serve', '--listen', '127.0.0.1:0' ])
{
	($rc, $out, $err) = run_sim(@$cmd);
	is($rc, 2, "@$cmd: exit 2");
	is(scalar(() = $err =~ /\n/g), 1, "@$cmd: one-line error");
}
for my $cmd (qw(replay verify))
{
	($rc, $out) = run_sim($cmd, '--help');
	is($rc, 0, "$cmd --help exits 0");
}

done_testing();
