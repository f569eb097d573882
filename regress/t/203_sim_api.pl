# webhook-sim read API: objects (a canceled subscription stays retrievable,
# a deleted order answers 404), stable pagination under concurrent changes
# (Stripe starting_after, newest first; Shopify Link page_info), the events
# API with created filters, default list filters, auth, injected faults
# (429/Retry-After, 5xx, slow) and counters.
use strict;
use warnings;
use lib 'tools/test';
use JSON::PP;
use SimTest;
use Test::More;
use Time::HiRes ();

my $json = JSON::PP->new;

my @src = ('--stripe', 'st:whsec_test123', '--shopify', 'shop:shpss_secret');

sub truth_of
{
	my ($sim) = @_;
	my (undef, $t) = http_json('GET', "$sim->{url}/_sim/truth");
	return $t;
}

# Page through a Stripe collection; returns the list of entries.
sub stripe_pages
{
	my ($sim, $coll, $filter, $limit) = @_;
	my ($after, @all) = (undef);
	for (my $guard = 0; $guard < 10000; $guard++)
	{
		my $url = "$sim->{url}/v1/$coll?limit=$limit$filter"
		  . (defined $after ? "&starting_after=$after" : '');
		my ($code, $doc) = http_json('GET', $url);
		die "list $coll: $code" unless $code == 200 && $doc->{object} eq 'list';
		push @all, @{ $doc->{data} };
		last unless $doc->{has_more};
		$after = $doc->{data}[-1]{id};
	}
	return @all;
}

# Page through Shopify orders by following Link rel="next".
sub shopify_pages
{
	my ($sim, $min, $limit) = @_;
	my $url = "$sim->{url}/admin/api/2024-01/orders.json?limit=$limit&status=any&updated_at_min=$min";
	my @all;
	while ($url)
	{
		my ($code, $doc, $res) = http_json('GET', $url);
		die "orders: $code $url $res->{content}" unless $code == 200;
		push @all, @{ $doc->{orders} };
		($url) = ($res->{headers}{link} // '') =~ /<([^>]+)>;\s*rel="next"/;
	}
	return @all;
}

# 1. Pagination while the scenario is changing objects.
my $sink = start_sink();
my $sim = start_sim(@src, '--seed', 4, '--objects', 400, '--events', 3000, '--rate', 600,
	'--deliver-to', $sink->{url}, '--concurrency', 8);
ok(poll_until(sub { my $t = truth_of($sim); $t && @{ $t->{objects} } > 100 }, 30), 'objects being created');
my $t0 = truth_of($sim);
my $since = time() - 1;
my (undef, $st0) = http_json('GET', "$sim->{url}/_sim/status");
ok(!$st0->{done}, 'stream still running while paging');

my %t0ids;
push @{ $t0ids{ $_->{type} } }, $_->{id} for @{ $t0->{objects} };
my %colls = (subscription => [ 'subscriptions', '&status=all' ], payment_intent => [ 'payment_intents', '' ]);
for my $type (sort keys %colls)
{
	my ($coll, $filter) = @{ $colls{$type} };
	my @got = stripe_pages($sim, $coll, $filter, 7);
	my %n;
	$n{ $_->{id} }++ for @got;
	is(scalar(grep { $_ > 1 } values %n), 0, "$coll: no object repeated across pages");
	is(scalar(grep { !$n{$_} } @{ $t0ids{$type} }), 0,
		"$coll: every object existing before the listing is listed");
	my @c = map { $_->{created} } @got;
	is(scalar(grep { $c[$_] > $c[ $_ - 1 ] } 1 .. $#c), 0, "$coll: newest first");
}
my @orders = shopify_pages($sim, '2000-01-01T00:00:00Z', 9);
my %on;
$on{ $_->{id} }++ for @orders;
is(scalar(grep { $_ > 1 } values %on), 0, 'orders: no order repeated across Link pages');
# an order deleted while the pages were read is rightly gone from them: the
# truth after the listing says which were
my %gone = map { $_->{id} => 1 } grep { $_->{type} eq 'order' && $_->{deleted} } @{ truth_of($sim)->{objects} };
my @unlisted = grep { !$on{$_} && !$gone{$_} } map { $_->{id} } grep { $_->{type} eq 'order' } @{ $t0->{objects} };
is(scalar(@unlisted), 0, 'orders: every order existing before the listing and not deleted since is listed')
  or diag("not listed: @unlisted");

ok(poll_until(sub { my (undef, $s) = http_json('GET', "$sim->{url}/_sim/status"); $s->{done} }, 60),
	'stream finished');
my $t1 = truth_of($sim);
# the events API: everything the stream sent, newest first, by created
my @events = stripe_pages($sim, 'events', '', 100);
my @recv = grep { $_->{path} eq '/hooks/st' } sink_requests($sink);
my %sent = map { ($json->decode($_->{body})->{id} => 1) } @recv;
my %listed = map { ($_->{id} => 1) } @events;
is(scalar(grep { !$listed{$_} } keys %sent), 0, 'every delivered Stripe event is in /v1/events');
ok(!(grep { $_->{object} ne 'event' || !$_->{data}{object}{id} } @events), 'events carry data.object');
my $mid = $events[ int(@events / 2) ]{created};
my @recent = stripe_pages($sim, 'events', "&created[gte]=$mid", 100);
is(scalar @recent, scalar(grep { $_->{created} >= $mid } @events), 'created[gte] filters events');
my @pi_ev = stripe_pages($sim, 'events', '&types[]=payment_intent.succeeded&types[]=payment_intent.canceled', 100);
ok(@pi_ev && !(grep { $_->{type} !~ /^payment_intent\.(succeeded|canceled)$/ } @pi_ev), 'types[] filters events');
my @grp = stripe_pages($sim, 'events', '&type=customer.subscription.*', 100);
ok(@grp && !(grep { $_->{type} !~ /^customer\.subscription\./ } @grp), 'type with a * wildcard');
my @none = stripe_pages($sim, 'events', '&created[gt]=' . (time() + 100000), 10);
is(scalar @none, 0, 'nothing created in the future');
my @later_orders = shopify_pages($sim, '2100-01-01T00:00:00%2B00:00', 50);
is(scalar @later_orders, 0, 'updated_at_min in the future: no orders');
stop_proc($sim);
stop_proc($sink);

# 2. Objects and 404s against a finished scenario.
$sim = start_sim(@src, '--seed', 8, '--objects', 80, '--events', 800);
my $t = truth_of($sim);
my ($live) = grep { $_->{type} eq 'subscription' && $_->{status} ne 'canceled' } @{ $t->{objects} };
my ($gone) = grep { $_->{type} eq 'subscription' && $_->{status} eq 'canceled' } @{ $t->{objects} };
my ($pay) = grep { $_->{type} eq 'payment_intent' } @{ $t->{objects} };
my ($order) = grep { $_->{type} eq 'order' && !$_->{deleted} } @{ $t->{objects} };
my ($gone_order) = grep { $_->{type} eq 'order' && $_->{deleted} } @{ $t->{objects} };
my ($occ) = grep { $_->{kind} eq 'refund' } @{ $t->{occurrences} };
my ($dsp) = grep { $_->{kind} eq 'dispute' } @{ $t->{occurrences} };
ok($live && $gone && $pay && $order && $gone_order && $occ && $dsp, 'scenario has every case');

my ($code, $doc) = http_json('GET', "$sim->{url}/v1/subscriptions/$live->{id}");
is($code, 200, 'live subscription: 200');
is($doc->{status}, $live->{status}, 'status equals the truth');
ok(!exists $doc->{updated} && $doc->{object} eq 'subscription', 'Stripe object JSON, no field of our own');
($code, $doc) = http_json('GET', "$sim->{url}/v1/subscriptions/$gone->{id}");
is("$code $doc->{status}", '200 canceled', 'canceled subscription: still retrievable, status canceled');
($code, $doc) = http_json('GET', "$sim->{url}/v1/subscriptions/sub_doesnotexist");
is("$code $doc->{error}{code} $doc->{error}{param}", '404 resource_missing id', 'unknown subscription: 404 resource_missing');
my %in_default = map { ($_->{id} => 1) } stripe_pages($sim, 'subscriptions', '', 100);
ok(!$in_default{ $gone->{id} } && $in_default{ $live->{id} }, 'the default subscription list omits canceled ones');
my %in_canceled = map { ($_->{id} => 1) } stripe_pages($sim, 'subscriptions', '&status=canceled', 100);
ok($in_canceled{ $gone->{id} } && !$in_canceled{ $live->{id} }, 'status=canceled lists them');
($code, $doc) = http_json('GET', "$sim->{url}/v1/subscriptions?updated_since=0");
is("$code $doc->{error}{type} $doc->{error}{code} $doc->{error}{param}",
	'400 invalid_request_error parameter_unknown updated_since', 'unknown parameter: 400 parameter_unknown');
is($doc->{error}{message}, 'Received unknown parameter: updated_since', "Stripe's message");
($code, $doc) = http_json('GET', "$sim->{url}/v1/subscriptions?created%5Bsince%5D=0");
is("$code $doc->{error}{code} $doc->{error}{param}", '400 parameter_unknown created[since]',
	'unknown range operator: parameter_unknown');
($code, $doc) = http_json('GET', "$sim->{url}/v1/payment_intents?status=succeeded");
is("$code $doc->{error}{code}", '400 parameter_unknown', 'payment_intents take no status filter');
($code, $doc) = http_json('GET', "$sim->{url}/v1/subscriptions?status=bogus");
is("$code $doc->{error}{param}", '400 status', 'bad status value: 400');
($code, $doc) = http_json('GET', "$sim->{url}/v1/subscriptions?price=price_1");
is("$code $doc->{error}{code}", '400 parameter_unsupported', 'a declared parameter the simulator does not model');
($code, $doc) = http_json('GET', "$sim->{url}/v1/subscriptions/$live->{id}?status=all");
is("$code $doc->{error}{code}", '400 parameter_unknown', 'retrieve takes only expand');
($code, $doc) = http_json('GET', "$sim->{url}/v1/subscriptions?starting_after=sub_nope");
is("$code $doc->{error}{code} $doc->{error}{param}", '400 resource_missing starting_after', 'unknown cursor');
($code, $doc) = http_json('GET', "$sim->{url}/v1/subscriptions?starting_after=a&ending_before=b");
is($code, 400, 'starting_after with ending_before: 400');
($code, $doc) = http_json('GET', "$sim->{url}/v1/idempotency/key-1");
is($code, 404, 'no lookup by idempotency key (Stripe has none)');
($code, $doc) = http_json('GET', "$sim->{url}/v1/payment_intents/$pay->{id}");
is("$code $doc->{status} $doc->{object}", "200 $pay->{status} payment_intent", 'payment_intent read');
ok($doc->{amount} > 0 && $doc->{currency}, 'payment has amount and currency');
($code, $doc) = http_json('GET', "$sim->{url}/v1/refunds/$occ->{id}");
is("$code $doc->{amount} $doc->{currency}", "200 $occ->{amount} $occ->{currency}", 'refund read');
ok($doc->{payment_intent} =~ /^pi_/, 'refund names its payment_intent');
($code, $doc) = http_json('GET', "$sim->{url}/v1/disputes/$dsp->{id}");
is("$code $doc->{object}", '200 dispute', 'dispute read');
($code, $doc) = http_json('GET', "$sim->{url}/admin/api/2024-01/orders/$order->{id}.json");
is($code, 200, 'live order: 200');
is($doc->{order}{financial_status}, $order->{status}, 'order status equals the truth');
require Time::Local;
my ($y, $mo, $d, $h, $mi, $s) = $doc->{order}{updated_at} =~ /^(\d+)-(\d+)-(\d+)T(\d+):(\d+):(\d+)/;
is(Time::Local::timegm($s, $mi, $h, $d, $mo - 1, $y), $order->{version}, 'truth version = updated_at epoch');
($code, $doc) = http_json('GET', "$sim->{url}/admin/api/2024-01/orders/$gone_order->{id}.json");
is($code, 404, 'deleted order: 404');
is($doc->{errors}, 'Not Found', 'Shopify Not Found error');
($code, $doc) = http_json('GET', "$sim->{url}/v1/subscriptions?limit=101");
is("$code $doc->{error}{param}", '400 limit', 'limit over 100: 400');
($code, $doc) = http_json('GET', "$sim->{url}/v1/subscriptions?status=all");
is(scalar @{ $doc->{data} }, 10, 'default limit 10');
my $first = $doc->{data}[0]{id};
my $tenth = $doc->{data}[9]{id};
($code, $doc) = http_json('GET', "$sim->{url}/v1/subscriptions?status=all&limit=3&ending_before=$tenth");
is(join(' ', map { $_->{id} } @{ $doc->{data} }), join(' ', map { $_->{id} } @{ (http_json('GET',
	"$sim->{url}/v1/subscriptions?status=all"))[1]{data} }[ 6 .. 8 ]), 'ending_before: the newer page, newest first');
ok($doc->{has_more}, 'ending_before: has_more towards newer ones');
($code, $doc, my $res) = http_json('GET', "$sim->{url}/admin/api/2024-01/orders.json?limit=2&status=any");
my ($next) = ($res->{headers}{link} // '') =~ /<([^>]+)>;\s*rel="next"/;
ok($next && $next =~ /page_info=/, 'Shopify Link header with page_info');
($code, $doc) = http_json('GET', "$next&status=any");
is($code, 400, 'page_info with another filter: 400');
($code, $doc) = http_json('GET', "$sim->{url}/admin/api/2024-01/orders.json?updated_since=0");
ok($code == 400 && $doc->{errors}{updated_since}, 'Shopify: an unknown parameter is refused');
my @open = grep { !$_->{cancelled_at} } @{ (http_json('GET', "$sim->{url}/admin/api/2024-01/orders.json?limit=250"))[1]{orders} };
my @all_o = @{ (http_json('GET', "$sim->{url}/admin/api/2024-01/orders.json?limit=250&status=any"))[1]{orders} };
ok(@all_o > @open && scalar(@open) == scalar(@{ (http_json('GET', "$sim->{url}/admin/api/2024-01/orders.json?limit=250"))[1]{orders} }),
	'the default order list is status=open: cancelled orders need status=any');
($code, $doc) = http_json('PUT', "$sim->{url}/v1/subscriptions/$live->{id}");
is($code, 404, 'a method Stripe does not route: 404, as Stripe answers');
like($doc->{error}{message}, qr/^Unrecognized request URL/, "Stripe's message");

# counters
http_json('POST', "$sim->{url}/_sim/counters/reset");
http_json('GET', "$sim->{url}/v1/subscriptions/$live->{id}") for 1 .. 3;
http_json('GET', "$sim->{url}/admin/api/2024-01/orders/$order->{id}.json");
http_json('GET', "$sim->{url}/v1/payment_intents?limit=5");
(undef, $doc) = http_json('GET', "$sim->{url}/_sim/counters");
is($doc->{fetches}{ $live->{id} }, 3, 'three fetches counted');
is($doc->{fetches}{ $order->{id} }, 1, 'order fetch counted');
is($doc->{lists}, 1, 'one list counted');

# faults: 429 with Retry-After for a path prefix and a count
($code, $doc) = http_json('POST', "$sim->{url}/_sim/faults",
	{ content => '{"status":429,"share":1.0,"retry_after":2,"path_prefix":"/v1/subscriptions","count":3}' });
is($code, 200, 'fault accepted');
my @codes;
for (1 .. 4)
{
	my ($c, undef, $res) = http_json('GET', "$sim->{url}/v1/subscriptions/$live->{id}");
	push @codes, $c . '/' . ($res->{headers}{'retry-after'} // '-');
}
is("@codes", '429/2 429/2 429/2 200/-', 'three 429s with Retry-After: 2, then served');
($code) = http_json('GET', "$sim->{url}/v1/payment_intents/$pay->{id}");
is($code, 200, 'other paths unaffected');
(undef, $doc) = http_json('GET', "$sim->{url}/_sim/counters");
is($doc->{fetches}{ $live->{id} }, 7, 'faulted fetches are counted too');

http_json('POST', "$sim->{url}/_sim/faults", { content => '{"status":503,"path_prefix":"/admin/"}' });
($code, $doc) = http_json('GET', "$sim->{url}/admin/api/2024-01/orders/$order->{id}.json");
is($code, 503, 'injected 503 on Shopify paths');
ok(defined $doc->{errors}, 'in Shopify error format');
($code) = http_json('DELETE', "$sim->{url}/_sim/faults");
($code) = http_json('GET', "$sim->{url}/admin/api/2024-01/orders/$order->{id}.json");
is($code, 200, 'DELETE /_sim/faults clears them');

http_json('POST', "$sim->{url}/_sim/faults", { content => '{"mode":"slow","ms":400,"count":1}' });
my $t_0 = Time::HiRes::time();
($code) = http_json('GET', "$sim->{url}/v1/payment_intents/$pay->{id}");
my $el = Time::HiRes::time() - $t_0;
is($code, 200, 'slow response still answers');
ok($el >= 0.39, "slow response took ${el}s");
($code) = http_json('POST', "$sim->{url}/_sim/faults", { content => '{"status":99}' });
is($code, 400, 'invalid fault: 400');
stop_proc($sim);

# 3. Fault flags and auth.
$sim = start_sim(@src, '--seed', 8, '--objects', 20, '--events', 100, '--fault-429', '0.5',
	'--retry-after', 3, '--api-token', 'sekret');
$t = truth_of($sim);
($live) = grep { $_->{type} eq 'payment_intent' } @{ $t->{objects} };
($order) = grep { $_->{type} eq 'order' } @{ $t->{objects} };
($code, $doc) = http_json('GET', "$sim->{url}/v1/payment_intents/$live->{id}");
is($code, 401, 'missing token: 401');
($code) = http_json('GET', "$sim->{url}/v1/payment_intents/$live->{id}",
	{ headers => { Authorization => 'Bearer wrong' } });
is($code, 401, 'wrong token: 401');
($code) = http_json('GET', "$sim->{url}/admin/api/2024-01/orders/$order->{id}.json",
	{ headers => { Authorization => 'Bearer sekret' } });
is($code, 401, 'Shopify paths want X-Shopify-Access-Token');
my %c;
for (1 .. 200)
{
	my ($cd, undef, $res) = http_json('GET', "$sim->{url}/v1/payment_intents/$live->{id}",
		{ headers => { Authorization => 'Bearer sekret' } });
	$c{$cd}++;
	$c{ra} = $res->{headers}{'retry-after'} if $cd == 429;
}
ok($c{429} > 70 && $c{429} < 130, "--fault-429 0.5: $c{429} of 200 are 429");
is($c{429} + $c{200}, 200, 'the others are served');
is($c{ra}, 3, 'Retry-After from --retry-after');
my $ok200 = 0;
for (1 .. 20)
{
	my ($cd) = http_json('GET', "$sim->{url}/admin/api/2024-01/orders/$order->{id}.json",
		{ headers => { 'X-Shopify-Access-Token' => 'sekret' } });
	$ok200++ if $cd == 200;
}
ok($ok200 > 0, 'Shopify token accepted');
stop_proc($sim);

$sim = start_sim(@src, '--seed', 8, '--objects', 20, '--events', 100, '--fault-5xx', '1');
$t = truth_of($sim);
my %five;
$five{ (http_json('GET', "$sim->{url}/v1/payment_intents/x"))[0] }++ for 1 .. 40;
ok($five{500} && $five{503} && $five{500} + $five{503} == 40, '--fault-5xx 1: only 500 and 503');
stop_proc($sim);

done_testing();
