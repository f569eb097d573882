# webhook-sim's Stripe Connect against the official stripe-node client
# (regress/contract, installed by npm ci): with --connect-accounts, the SDK's
# stripeAccount and stripeContext request options read each account's
# lists, events and objects, accounts.list pages the connected accounts, and
# a read under the platform or another account fails as the SDK types a
# missing object (regress/contract/stripe_connect_contract.mjs).  Then every
# request the SDK sent, from the simulator's --request-log, is checked
# against the SDK's methods and params (GET /v1/accounts included), and the
# default Stripe-Version the extension pins is the one stripe-node pins.
use strict;
use warnings;
use lib 'tools/test';
use SimTest;
use Test::More;

my $dir = contract_dir();
my $log = tmpdir() . '/requests.log';
my $sim = start_sim('--stripe', 'st:whsec_connect_sdk', '--seed', 9, '--objects', 60, '--events', 400,
	'--connect-accounts', 5, '--types', 'subscription,invoice,payment_intent,refund',
	'--request-log', $log);

my ($rc, $checks, $err) = run_node("$dir/stripe_connect_contract.mjs", $sim->{url});
is($rc, 0, 'the stripe-node run completed') or diag($err);
cmp_ok(scalar @$checks, '>=', 20, 'checks reported: ' . scalar @$checks);
ok($_->{ok}, "stripe-node: $_->{name}") or diag($_->{detail} // '') for @$checks;

my ($rc2, $urls, $err2) = run_node("$dir/check_urls.mjs", $log);
is($rc2, 0, 'the URL check ran') or diag($err2);
ok($_->{ok}, "SDK request $_->{request}") or diag(join('; ', @{ $_->{problems} })) for @$urls;
ok(scalar(grep { $_->{request} =~ m{^GET /v1/accounts\?} } @$urls), 'GET /v1/accounts was checked');
stop_proc($sim);

# the Stripe-Version the extension pins by default (sql/worker.sql, _worker_source) is stripe-node's
my ($pinned) = SimTest::slurp('sql/worker.sql') =~ /coalesce\(s\.settings ->> 'stripe_version', '([^']+)'\)/;
my ($sdk) = SimTest::slurp("$dir/node_modules/stripe/cjs/apiVersion.js") =~ /ApiVersion = '([^']+)'/;
ok($pinned && $sdk, "the pinned version ($pinned) and stripe-node's ($sdk) were read");
is($pinned, $sdk, 'the default Stripe-Version is the one stripe-node pins');

done_testing();
