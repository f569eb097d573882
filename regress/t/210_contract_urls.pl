# The URL checker of the contract tests (regress/contract/check_urls.mjs),
# with the official stripe-node package installed from the committed
# package.json/package-lock.json: it reads every method's HTTP method and
# path from the SDK's resources and each params interface from its .d.ts,
# and must accept what the SDK declares and flag what it does not, with the
# exact reason.  Also webhook-sim's --request-log, which feeds it: one line
# per provider API request (method, path?query, a POST's form body), none
# for /_sim/.
use strict;
use warnings;
use lib 'tools/test';
use IPC::Run ();
use JSON::PP;
use SimTest;
use Test::More;

my $json = JSON::PP->new;
my $dir = contract_dir();
ok(-d "$dir/node_modules/stripe", 'npm ci installed the pinned stripe-node');
my $pkg = $json->decode(slurp("$dir/node_modules/stripe/package.json"));
is($pkg->{version}, $json->decode(slurp('regress/contract/package.json'))->{dependencies}{stripe},
	"stripe-node $pkg->{version}, as package.json pins it");

sub check_log
{
	my (@lines) = @_;
	spew("$dir/requests.log", join('', map { "$_\n" } @lines));
	my ($o, $e) = ('', '');
	IPC::Run::run([ 'node', "$dir/check_urls.mjs", "$dir/requests.log" ], '<', \undef, '>', \$o, '2>', \$e)
	  or die "check_urls: $e";
	return map { $json->decode($_) } split /\n/, $o;
}

# what the SDK declares
my @good = check_log(
	'GET /v1/subscriptions?limit=100&status=all',
	'GET /v1/subscriptions?limit=100&status=all&starting_after=sub_1',
	'GET /v1/events?created[gte]=1767225600&types[0]=invoice.paid&types[1]=refund.created&limit=100',
	'GET /v1/events?created%5Bgte%5D=1767225600&types%5B%5D=customer.subscription.deleted',
	'GET /v1/payment_intents/pi_123',
	'GET /v1/checkout/sessions?limit=100&ending_before=cs_test_a',
	'GET /v1/refunds?payment_intent=pi_123&limit=100',
	'POST /v1/refunds payment_intent=pi_123&amount=150&metadata[effect_key]=ek-1',
	'GET /admin/api/2024-01/orders.json?status=any&limit=250');
is(scalar @good, 8, 'one verdict per Stripe request shape (Shopify paths are not Stripe\'s)');
is(scalar(grep { !$_->{ok} } @good), 0, 'every request the SDK declares passes')
  or diag(join("\n", map { $_->{request} . ': ' . join('; ', @{ $_->{problems} }) } grep { !$_->{ok} } @good));
my ($refund) = grep { $_->{request} =~ /^POST/ } @good;
like($refund->{route}, qr/^Refunds\.js create\(RefundCreateParams\)$/, 'a POST is checked against its Create params');

# what it does not
my %bad = map { ($_->{request} => $_) } check_log(
	'GET /v1/subscriptions?updated_since=1767225600&limit=100',
	'GET /v1/payment_intents?status=succeeded',
	'GET /v1/events?created[since]=1',
	'GET /v1/events?types[x]=a',
	'GET /v1/idempotency/key-1',
	'POST /v1/refunds payment_intent=pi_1&effect_key=ek');
my @problems = sort map { @{ $_->{problems} } } values %bad;
is_deeply(\@problems, [
	'GET /v1/idempotency/key-1: no stripe-node method has this path',
	'created[since]: a RangeQueryParam takes [gt|gte|lt|lte]',
	'effect_key: not a field of RefundCreateParams',
	'status: not a field of PaymentIntentListParams',
	'types[x]: an array takes [] or [N]',
	'updated_since: not a field of SubscriptionListParams',
], 'each undeclared parameter or path is flagged with its reason');
is(scalar(grep { $_->{ok} } values %bad), 0, 'none of them passes');

# webhook-sim --request-log
my $log = "$dir/sim-requests.log";
my $sim = start_sim('--stripe', 'st:whsec_x', '--shopify', 'shop:s', '--seed', 3, '--objects', 10,
	'--events', 40, '--request-log', $log);
http_json('GET', "$sim->{url}/v1/subscriptions?limit=3&status=all");
http_json('POST', "$sim->{url}/v1/refunds", { headers => { 'Content-Type' => 'application/x-www-form-urlencoded' },
	content => 'payment_intent=pi_x&amount=5&metadata[k]=v' });
http_json('GET', "$sim->{url}/admin/api/2024-01/orders.json?limit=2");
http_json('GET', "$sim->{url}/_sim/truth");
is(stop_proc($sim), 0, 'simulator stopped');
is(slurp($log), "GET /v1/subscriptions?limit=3&status=all\n"
	  . "POST /v1/refunds payment_intent=pi_x&amount=5&metadata[k]=v\n"
	  . "GET /admin/api/2024-01/orders.json?limit=2\n",
	'one line per provider request, with the form body of a POST; /_sim/ is not logged');
my ($rc, undef, $e2) = run_sim('serve', '--listen', '127.0.0.1:0', '--stripe', 'st:whsec_x',
	'--request-log', "$dir/no/such/dir/log");
is($rc, 1, 'an unwritable request log: exit 1');
like($e2, qr/cannot open request log/, 'with the reason');

done_testing();
