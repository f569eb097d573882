# webhook-sim against the official stripe-node client (regress/contract,
# installed by npm ci): the SDK lists every type with its auto-pagination
# (starting_after, has_more), pages back with ending_before, retrieves
# (a canceled subscription, a deleted customer, a missing object), reads the
# events API with created[gte] and types[], creates a refund with an
# idempotency key and metadata and finds it again in the PaymentIntent's
# refund list, and surfaces Stripe's errors as its own classes
# (StripeInvalidRequestError parameter_unknown, StripeIdempotencyError).
# Statuses and event types must be members of the unions the SDK's .d.ts
# files declare.  Then every request the SDK sent, from the simulator's
# --request-log, is checked against the SDK's methods and params.
use strict;
use warnings;
use lib 'tools/test';
use SimTest;
use Test::More;

my $dir = contract_dir();
my $log = tmpdir() . '/requests.log';
my $sim = start_sim('--stripe', 'st:whsec_sdk', '--seed', 7, '--objects', 160, '--events', 1200,
	'--types', 'subscription,invoice,payment_intent,refund,dispute,charge,customer,checkout.session',
	'--request-log', $log);

my ($rc, $checks, $err) = run_node("$dir/stripe_contract.mjs", $sim->{url});
is($rc, 0, 'the stripe-node run completed') or diag($err);
cmp_ok(scalar @$checks, '>=', 60, 'checks reported: ' . scalar @$checks);
for my $c (@$checks)
{
	ok($c->{ok}, "stripe-node: $c->{name}") or diag($c->{detail} // '');
}

my ($rc2, $urls, $err2) = run_node("$dir/check_urls.mjs", $log);
is($rc2, 0, 'the URL check ran') or diag($err2);
my @bad = grep { !$_->{ok} } @$urls;
# the two requests the run makes on purpose with parameters the SDK's types do not declare
is_deeply([ sort map { @{ $_->{problems} } } @bad ],
	[ 'status: not a field of PaymentIntentListParams', 'updated_since: not a field of SubscriptionListParams' ],
	'every other request the SDK sent is one its methods and params declare');
cmp_ok(scalar(grep { $_->{ok} } @$urls), '>=', 20, 'distinct request shapes checked: ' . scalar @$urls);
stop_proc($sim);

done_testing();
