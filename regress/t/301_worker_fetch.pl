
# 301_worker_fetch.pl
#	The worker against webhook-sim's read API, one behaviour at a time:
#	coalescing (a burst of 50 events costs at most 2 fetches), 404 is a
#	tombstone once a second 404 confirms it, and is not retried, 429 with Retry-After: 2 keeps the whole
#	source quiet for 2 s, 5xx is retried then quarantined after
#	max_attempts, 401 quarantines and flags the source, a lost update is
#	fenced after lease expiry, a version tie is resolved by a fetch (or
#	quarantined without a read API), and unordered events are quarantined.

use strict;
use warnings;

use lib 'regress/t';
use PostgreSQL::Test::Utils;
use Test::More;
use WorkerTest;

my $node = worker_node('fetch', qq{
webhook_inbox.fetch_concurrency = 1
webhook_inbox.max_attempts = 3
webhook_inbox.lease = 1s
});
my $sim = start_sim('--seed', '7', '--objects', '60', '--events', '400', '--stripe', 'acct:whsec_f',
	'--shopify', 'shop:shpss_f');
add_source($node, 'acct', 'stripe', 'whsec_f', $sim->{url});
add_source($node, 'shop', 'shopify', 'shpss_f', $sim->{url});
# the REST Admin API (GraphQL, the default, has its test of its own)
$node->safe_psql('postgres', "UPDATE webhook_inbox.sources SET settings = settings || '{\"api\": \"rest\"}' WHERE name = 'shop'");

my $truth = sim_truth($sim);
my @subs = map { $_->{id} } grep { $_->{type} eq 'subscription' && !$_->{deleted} } @{ $truth->{objects} };
my ($order) = grep { $_->{type} eq 'order' && !$_->{deleted} } @{ $truth->{objects} };
cmp_ok(scalar @subs, '>=', 8, 'enough live subscriptions in the scenario');
my $evt = 0;

sub fetches
{
	my ($st, $doc) = http_json('GET', "$sim->{url}/_sim/counters");
	return $doc->{fetches}{ $_[0] } // 0;
}

sub fault
{
	my ($rule) = @_;
	my ($st) = http_json('POST', "$sim->{url}/_sim/faults",
		{ content => $rule, headers => { 'Content-Type' => 'application/json' } });
	is($st, 200, "fault rule $rule accepted");
}

# intake of events naming subscriptions, all in one transaction
sub intake_subs
{
	my (@ids) = @_;
	my $sql = 'BEGIN; ';
	for my $id (@ids)
	{
		$evt++;
		$sql .= intake_sql('acct', stripe_event("evt_t$evt", 'customer.subscription.updated',
				'subscription', $id, 'active', 1767225600 + $evt));
	}
	$node->safe_psql('postgres', $sql . ' COMMIT;');
}

sub event_row
{
	my ($object) = @_;
	return $node->safe_psql('postgres', "SELECT status || '|' || attempts || '|' || coalesce(reason, '') "
		  . "FROM webhook_inbox.inbox WHERE object_id = '$object' ORDER BY id DESC LIMIT 1");
}

sub object_row
{
	my ($object) = @_;
	return $node->safe_psql('postgres', "SELECT coalesce(status, '') || '|' || "
		  . "CASE WHEN deleted THEN 't' ELSE 'f' END FROM webhook_inbox.objects WHERE object_id = '$object'");
}

# --- coalescing: 50 events for one object, one transaction, one claim
http_json('POST', "$sim->{url}/_sim/counters/reset");
intake_subs(($subs[0]) x 50);
wait_drained($node, 'coalescing');
cmp_ok(fetches($subs[0]), '<=', 2, 'a burst of 50 events cost at most 2 fetches (' . fetches($subs[0]) . ')');
is($node->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.inbox WHERE object_id = '$subs[0]' "
		  . "AND status = 'done' AND reason LIKE 'fetched: %'"), '50', 'all 50 events completed by the fetch');
my ($sub0) = grep { $_->{id} eq $subs[0] } @{ $truth->{objects} };
is(object_row($subs[0]), "$sub0->{status}|f", 'the mirror holds the fetched status');

# --- 404: a tombstone once a second 404 confirms it, not an error, never retried
intake_subs('sub_doesnotexist');
wait_drained($node, '404');
is(event_row('sub_doesnotexist'), 'done|0|fetched: tombstone', '404 twice completes the event as a tombstone');
is(object_row('sub_doesnotexist'), '|t', 'the object is mirrored as deleted');
is(fetches('sub_doesnotexist'), 2, 'the 404 was confirmed once (tombstone_confirm_delay), not retried');

# --- 429 with Retry-After: 2: nothing goes to the source inside the window
http_json('POST', "$sim->{url}/_sim/counters/reset");
fault('{"status":429,"retry_after":2,"path_prefix":"/v1/subscriptions","count":1}');
my $t0 = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
intake_subs(@subs[1 .. 3]);
wait_drained($node, '429');
my $total = 0;
$total += fetches($_) for @subs[1 .. 3];
is($total, 4, 'one 429, then exactly one fetch per object');
my $gap = $node->safe_psql('postgres', "SELECT extract(epoch FROM min(updated_at) - '$t0'::timestamptz) "
	  . "FROM webhook_inbox.objects WHERE object_id IN ('" . join("','", @subs[1 .. 3]) . "')");
cmp_ok($gap, '>=', 1.9, "no object of the source was fetched inside the 2 s window (first save after $gap s)");
is(worker_stat($node, 'rate_limited'), '1', 'the 429 was counted');
cmp_ok(worker_stat($node, 'deferred'), '>=', 2, 'the other claims were deferred, not failed');
is($node->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.inbox WHERE object_id IN ('"
		  . join("','", @subs[1 .. 3]) . "') AND status = 'done'"), '3', 'all three completed after the window');
http_json('DELETE', "$sim->{url}/_sim/faults");

# --- 5xx: retried with backoff, quarantined after max_attempts (3)
fault(qq({"status":500,"path_prefix":"/v1/subscriptions/$subs[4]"}));
http_json('POST', "$sim->{url}/_sim/counters/reset");
intake_subs($subs[4]);
wait_drained($node, '5xx', 60);
like(event_row($subs[4]), qr/^quarantined\|3\|max_attempts: http 500 from the read API$/,
	'5xx retried, then quarantined after max_attempts');
is(fetches($subs[4]), 3, 'exactly max_attempts requests were made');
http_json('DELETE', "$sim->{url}/_sim/faults");

# --- lost update: the first claim's lease expires mid-fetch, a second claim saves a later state
fault(qq({"mode":"slow","ms":3000,"path_prefix":"/v1/subscriptions/$subs[5]","count":1}));
http_json('POST', "$sim->{url}/_sim/counters/reset");
intake_subs($subs[5]);
ok(SimTest::poll_until(sub { fetches($subs[5]) == 1 }, 20), 'the worker started its (slow) fetch');
ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM webhook_inbox.object_leases "
		  . "WHERE object_id = '$subs[5]' AND expires_at < now()"), 'its lease expired mid-fetch');
my $token = $node->safe_psql('postgres', "SELECT claim_token FROM webhook_inbox.claim('other', 10, '30 s') "
	  . "WHERE object_id = '$subs[5]'");
like($token, qr/^\d+$/, 'a second worker took the object over');
is($node->safe_psql('postgres', "SELECT webhook_inbox.upsert_object('acct', 'subscription', '$subs[5]', "
		  . "NULL, 'later_state', '{\"status\": \"later_state\"}', $token)"), 'applied', 'the second worker saved a later state');
$node->safe_psql('postgres', "SELECT webhook_inbox.complete($token)");
ok($node->poll_query_until('postgres', 'SELECT fenced >= 1 FROM webhook_inbox.worker_stats()'),
	"the first worker's late save was fenced");
is(object_row($subs[5]), 'later_state|f', 'the mirror holds the later state');
http_json('DELETE', "$sim->{url}/_sim/faults");

# --- version tie: equal version, different content
my $oid = $order->{id};
my $hdr = sub { "ARRAY['X-Shopify-Topic', 'orders/updated', 'X-Shopify-Webhook-Id', '$_[0]']" };
for my $src ('shop', 'shopnoapi')
{
	$node->safe_psql('postgres', "SELECT webhook_inbox.create_source('shopnoapi', 'shopify', 'x')")
	  if $src eq 'shopnoapi';
	for my $k (1, 2)
	{
		$node->safe_psql('postgres', "SELECT webhook_inbox.intake('$src', " . $hdr->("tie-$src-$k")
			  . qq{, convert_to('{"id":$oid,"updated_at":"2026-01-01T00:00:05+00:00","financial_status":"pending","note":"$k"}', 'UTF8'))});
		wait_drained($node, "tie $src $k");
	}
}
like($node->safe_psql('postgres', "SELECT reason FROM webhook_inbox.inbox WHERE event_id = 'tie-shop-2'"),
	qr/^fetched: (applied|duplicate)$/, 'a tie on a source with a read API is resolved by a fetch');
is($node->safe_psql('postgres', "SELECT o.status || '|' || (o.version = $order->{version}) FROM webhook_inbox.objects o "
		  . "JOIN webhook_inbox.sources s ON s.id = o.source_id WHERE s.name = 'shop' AND o.object_id = '$oid'"),
	"$order->{status}|true", 'the fetched present replaced the tied state');
is($node->safe_psql('postgres', "SELECT status || '|' || reason FROM webhook_inbox.inbox WHERE event_id = 'tie-shopnoapi-2'"),
	'quarantined|ambiguous_tie: equal version with different content and no read API',
	'a tie without a read API is quarantined as ambiguous');
cmp_ok(worker_stat($node, 'ties'), '>=', 2, 'ties are counted');

# --- unordered: no version, no read API, no machine
$node->safe_psql('postgres', "SELECT webhook_inbox.create_source('std', 'standard', 'whsec_dGVzdHNlY3JldA==')");
$node->safe_psql('postgres', q{SELECT webhook_inbox.intake('std', ARRAY['webhook-id', 'msg_1'],
	convert_to('{"type":"thing.updated","timestamp":"2026-01-01T00:00:00Z","data":{"id":"t1","object":"thing","status":"a"}}', 'UTF8'))});
wait_drained($node, 'unordered');
like(event_row('t1'), qr/^quarantined\|0\|unorderable: /, 'an unordered event is quarantined as unorderable');
is(worker_stat($node, 'unorderable'), '1', 'and counted');

# --- 401: quarantined, the source flagged for a person
fault(qq({"status":401,"path_prefix":"/v1/subscriptions/$subs[6]"}));
intake_subs($subs[6]);
wait_drained($node, '401');
like(event_row($subs[6]), qr/^quarantined\|0\|auth: the read API refused our credentials \(http 401\)$/,
	'401 quarantines the event');
like($node->safe_psql('postgres', "SELECT flagged FROM webhook_inbox.sources WHERE name = 'acct'"),
	qr/^the read API answered 401/, 'and flags the source');
is(worker_stat($node, 'auth_refused'), '1', 'auth refusals are counted');

# the counters are readable by monitoring roles, not by PUBLIC
$node->safe_psql('postgres', 'CREATE ROLE mon LOGIN IN ROLE pg_monitor; CREATE ROLE nobody LOGIN');
like($node->safe_psql('postgres', 'SELECT claimed > 0 FROM webhook_inbox.worker_counters', extra_params => [ '-U', 'mon' ]),
	qr/^t$/, 'pg_monitor reads worker_counters');
my ($ret, $out, $err) = $node->psql('postgres', 'SELECT * FROM webhook_inbox.worker_counters',
	extra_params => [ '-U', 'nobody' ]);
like($err, qr/permission denied/, 'PUBLIC does not');

is(worker_stat($node, 'errors'), '0', 'the worker logged no error');
stop_proc($sim);
$node->stop;
done_testing();
