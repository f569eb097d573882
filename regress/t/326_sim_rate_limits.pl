# webhook-sim serve --rate-limit enforces the providers' documented rate
# limits as the providers do, checked against their own clients
# (regress/contract, installed by npm ci): past Stripe's (100 requests/s for
# a live key, 25/s per endpoint; https://docs.stripe.com/rate-limits) a
# request is answered 429 with Stripe-Rate-Limited-Reason global-rate or
# endpoint-rate, which stripe-node raises as StripeRateLimitError (code
# rate_limit); requests paced within them are never refused.  Past GitHub's
# secondary limit (900 points a minute per REST endpoint, a GET 1 point)
# the answer is 403 with retry-after and a basic-error body of GitHub's
# OpenAPI (@octokit/openapi), which @octokit/request raises as an HttpError;
# another endpoint is counted apart.  The simulator counts its refusals.
use strict;
use warnings;
use lib 'tools/test';
use SimTest;
use Test::More;

my $dir = contract_dir();
my $key = 'sk_live_sim326limits';
my $sim = start_sim('--stripe', 'st:whsec_326', '--github', 'gh:gh_326', '--github-repo', 'acme/anvils',
	'--seed', 326, '--objects', 40, '--events', 100, '--types', 'subscription,invoice,payment_intent,customer,issue,pull_request',
	'--api-token', $key, '--rate-limit');

my ($rc, $checks, $err) = run_node("$dir/rate_limits_sdk.mjs", $sim->{url}, $key, 'acme/anvils');
is($rc, 0, 'the SDK run completed') or diag($err);
cmp_ok(scalar @$checks, '>=', 13, 'checks reported: ' . scalar @$checks);
for my $c (@$checks)
{
	ok($c->{ok}, $c->{name}) or diag($c->{detail} // '');
}
my (undef, $c) = http_json('GET', "$sim->{url}/_sim/counters");
# 15 + 8 of Stripe's, 50 of GitHub's
is($c->{rate_limited}, 15 + 8 + 50, "the simulator counted its refusals ($c->{rate_limited})");
stop_proc($sim);

# without --rate-limit, nothing is refused
$sim = start_sim('--stripe', 'st:whsec_326', '--seed', 326, '--objects', 10, '--events', 10, '--types', 'subscription');
my @st = map { (http_json('GET', "$sim->{url}/v1/subscriptions?limit=1"))[0] } 1 .. 60;
is(scalar(grep { $_ == 200 } @st), 60, 'without --rate-limit: 60 requests in a second all answered');
stop_proc($sim);
done_testing();
