
# 312_shopify_graphql.pl
#	Shopify through the GraphQL Admin API (the default): on two seeds, one
#	recorded order stream is replayed through the receiver shuffled and
#	doubled into sources that fetch every order on notify (order(id:)),
#	and with holes into a source that keeps the webhooks' payloads, then
#	swept (orders(first:, after:, sortKey: UPDATED_AT, query:)).  Every
#	source must converge to zero differences, the mirror must hold one
#	shape whichever path brought an order (the GraphQL fetch and sweep
#	against the REST-shaped webhook: same state, status, version and
#	shopify_orders row), and a second sweep finds nothing to repair.
#	Then a stream against a tiny cost bucket: THROTTLED answers, paced by
#	the cost extension, converge without spending an attempt.  Last, the
#	answers with errors: an unknown field quarantines, ACCESS_DENIED flags
#	the source, INTERNAL_SERVER_ERROR is retried.

use strict;
use warnings;

use lib 'regress/t';
use JSON::PP;
use PostgreSQL::Test::Utils;
use Test::More;
use WorkerTest;
use SimTest qw(start_sink sink_requests spew);

my $node = worker_node('shopify_graphql', "webhook_inbox.fetch_concurrency = 8\nwebhook_inbox.max_attempts = 3\n");
my $rcv;
my $tmp = PostgreSQL::Test::Utils::tempdir;

# orders/* (deletions included) fetched by id from the GraphQL API
sub fetch_route
{
	my ($source) = @_;
	$node->safe_psql('postgres', qq{
		INSERT INTO webhook_inbox.routes (source_id, event_type, class, object_type, strategy, object_id_path, priority)
		SELECT id, 'orders/*', 'state', 'order', 'fetch', '\$.id', 200 FROM webhook_inbox.sources WHERE name = '$source'});
}

sub counters
{
	my ($sim) = @_;
	my ($st, $doc) = http_json('GET', "$sim->{url}/_sim/counters");
	return $doc;
}

my %mode = (1 => 'shuffled', 2 => 'doubled', 3 => 'holed');
for my $seed (31, 32)
{
	my @scenario = ('--seed', $seed, '--objects', '50', '--events', '400', '--epoch', time());
	my $rec = "$tmp/stream$seed.jsonl";
	my %sim;
	for my $m (1 .. 3)
	{
		my $name = "g${seed}_$m";
		$sim{$m} = start_sim(@scenario, '--shopify', "$name:shpss_$name", ($m == 1 ? ('--record', $rec) : ()));
		add_source($node, $name, 'shopify', "shpss_$name", $sim{$m}{url});
		fetch_route($name) unless $mode{$m} eq 'holed';
	}
	$rcv //= start_receiver($node);
	my $truth = sim_truth($sim{1});
	cmp_ok(scalar(grep { $_->{type} eq 'order' } @{ $truth->{objects} }), '>=', 40, "seed $seed: enough orders");

	for my $m (1 .. 3)
	{
		my $name = "g${seed}_$m";
		my ($rc, $out, $err) = run_sim('replay', '--file', $rec, '--mode', $mode{$m}, '--to', $rcv->{url},
			'--seed', $m, '--shopify', "$name:shpss_$name");
		is($rc, 0, "seed $seed $mode{$m}: replay answered 2xx throughout") or diag("$out $err");
		wait_drained($node, "seed $seed $mode{$m}");
		if ($mode{$m} eq 'holed')
		{
			my ($run) = sweep_all($node, $name, 'order');
			is($run->[1], 'complete', "seed $seed holed: the GraphQL sweep completed (listed $run->[2], repaired $run->[3])");
			my $live = grep { $_->{type} eq 'order' && !$_->{deleted} } @{ $truth->{objects} };
			is($run->[2], $live, "seed $seed holed: the sweep listed every live order ($live)");
			my $inc = $node->safe_psql('postgres',
				"SELECT status || ' ' || repaired FROM webhook_inbox.sweep_now('$name', 'order', 'incremental')");
			is($inc, 'complete 0', "seed $seed holed: an incremental GraphQL pass after it repairs nothing");
		}
		else
		{
			cmp_ok(scalar(keys %{ counters($sim{$m})->{fetches} }), '>=', 40,
				"seed $seed $mode{$m}: orders were fetched by gid through GraphQL");
		}
		verify_source($node, $name, $sim{$m}, "seed $seed $mode{$m}");
	}

	# one shape: what GraphQL fetches saved equals what webhooks and the sweep saved
	my ($fetched, $webhooked) = ("g${seed}_1", "g${seed}_3");
	my $cmp = $node->safe_psql('postgres', qq{
		SELECT count(*) || ' ' || count(*) FILTER (WHERE a.state IS DISTINCT FROM b.state
			OR a.status IS DISTINCT FROM b.status OR a.version IS DISTINCT FROM b.version)
		  FROM webhook_inbox.objects a JOIN webhook_inbox.sources sa ON sa.id = a.source_id AND sa.name = '$fetched'
		  JOIN webhook_inbox.objects b ON b.object_type = a.object_type AND b.object_id = a.object_id
		  JOIN webhook_inbox.sources sb ON sb.id = b.source_id AND sb.name = '$webhooked'
		 WHERE NOT a.deleted AND NOT b.deleted});
	my ($same, $differ) = split ' ', $cmp;
	cmp_ok($same, '>=', 30, "seed $seed: $same live orders in both the GraphQL-fetched and the webhook-fed mirror");
	is($differ, '0', "seed $seed: the same state, status and version whichever path brought an order");
	is($node->safe_psql('postgres', qq{
		SELECT count(*) FROM ((SELECT id, name, financial_status, total_price, currency FROM webhook_inbox.shopify_orders
			WHERE source = '$fetched' AND NOT deleted
		  EXCEPT SELECT id, name, financial_status, total_price, currency FROM webhook_inbox.shopify_orders
			WHERE source = '$webhooked' AND NOT deleted)
		UNION ALL (SELECT id, name, financial_status, total_price, currency FROM webhook_inbox.shopify_orders
			WHERE source = '$webhooked' AND NOT deleted
		  EXCEPT SELECT id, name, financial_status, total_price, currency FROM webhook_inbox.shopify_orders
			WHERE source = '$fetched' AND NOT deleted)) d}), '0',
		"seed $seed: shopify_orders reads the same rows from both");
	like($node->safe_psql('postgres', "SELECT financial_status FROM webhook_inbox.shopify_orders "
			  . "WHERE source = '$fetched' AND NOT deleted LIMIT 1"),
		qr/^(pending|authorized|paid|voided|partially_refunded|refunded)$/,
		"seed $seed: statuses are REST's lower-case financial_status, not GraphQL's enum");
	stop_proc($sim{$_}) for 1 .. 3;
}
# --- a full GraphQL pass over several pages (250 orders a page), nothing delivered
{
	my $sim = start_sim('--seed', '34', '--objects', '700', '--events', '900', '--epoch', time(),
		'--shopify', 'gbig:shpss_big');
	add_source($node, 'gbig', 'shopify', 'shpss_big', $sim->{url});
	my $live = grep { $_->{type} eq 'order' && !$_->{deleted} } @{ sim_truth($sim)->{objects} };
	cmp_ok($live, '>', 500, "paging: $live live orders");
	my $row = $node->safe_psql('postgres',
		"SELECT status || ' ' || pages || ' ' || listed || ' ' || repaired FROM webhook_inbox.sweep_now('gbig', 'order')");
	my ($status, $pages, $listed, $repaired) = split ' ', $row;
	is("$status $listed", "complete $live", 'paging: the full pass listed every live order');
	cmp_ok($pages, '>=', 3, "paging: over $pages pages, after pageInfo.endCursor");
	is($repaired, $live, 'paging: each one repaired into the empty mirror');
	verify_source($node, 'gbig', $sim, 'paging');
	stop_proc($sim);
}
ok($node->log_contains('Orders older than 60 days are listed only to an app with the read_all_orders scope'),
	'a full pass says that orders older than 60 days need read_all_orders');

# --- a throttled stream: a 12-point bucket restored at 60 points/s, 3 points an order
{
	my $sim = start_sim('--seed', '33', '--objects', '40', '--events', '240', '--epoch', time(),
		'--shopify', 'gthr:shpss_thr', '--shopify-bucket', '12:60', '--record', "$tmp/thr.jsonl");
	add_source($node, 'gthr', 'shopify', 'shpss_thr', $sim->{url});
	fetch_route('gthr');
	my ($rc, $out, $err) = run_sim('replay', '--file', "$tmp/thr.jsonl", '--mode', 'doubled', '--to', $rcv->{url},
		'--seed', 1, '--shopify', 'gthr:shpss_thr');
	is($rc, 0, 'throttled: replay answered 2xx throughout') or diag("$out $err");
	wait_drained($node, 'throttled');
	verify_source($node, 'gthr', $sim, 'throttled');
	cmp_ok(counters($sim)->{graphql_throttled}, '>', 0,
		'throttled: webhook-sim answered THROTTLED (' . counters($sim)->{graphql_throttled} . ' times)');
	is($node->safe_psql('postgres', "SELECT coalesce(max(i.attempts), 0) FROM webhook_inbox.inbox i "
			  . "JOIN webhook_inbox.sources s ON s.id = i.source_id WHERE s.name = 'gthr'"),
		'0', 'throttled: no attempt was spent on throttling');
	is($node->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s "
			  . "ON s.id = i.source_id WHERE s.name = 'gthr' AND i.status = 'quarantined'"), '0',
		'throttled: nothing quarantined');
	stop_proc($sim);
}

# --- answers with errors, from a fake Shopify that answers one canned body
sub canned
{
	my ($name, $body) = @_;
	my $reply = "$tmp/$name.json";
	spew($reply, JSON::PP->new->encode({ status => 200, body => $body }));
	my $api = start_sink(reply => $reply);
	$node->safe_psql('postgres', "SELECT webhook_inbox.create_source('$name', 'shopify', 'x', api_base => '$api->{url}')");
	fetch_route($name);
	$node->safe_psql('postgres', "SELECT webhook_inbox.intake('$name', ARRAY['X-Shopify-Topic', 'orders/updated', "
		  . "'X-Shopify-Webhook-Id', 'w-$name'], convert_to('{\"id\":77,\"updated_at\":\"2026-01-01T00:00:00Z\"}', 'UTF8'))");
	return $api;
}

sub event_row
{
	my ($name) = @_;
	return $node->safe_psql('postgres', "SELECT i.status || '|' || i.attempts || '|' || coalesce(i.reason, '') "
		  . "FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id WHERE s.name = '$name'");
}

my $unknown = canned('gbad', '{"errors":[{"message":"Field \'nope\' doesn\'t exist on type \'Order\'","locations":[{"line":1,"column":9}],'
	  . '"path":["query","order","nope"],"extensions":{"code":"undefinedField","typeName":"Order","fieldName":"nope"}}]}');
ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM webhook_inbox.inbox WHERE event_id = 'w-gbad' AND status = 'quarantined'"),
	'an unknown field quarantines the event');
like(event_row('gbad'), qr/^quarantined\|0\|unusable_answer: graphql undefinedField: Field 'nope' doesn't exist on type 'Order'$/,
	'with the GraphQL error in its reason, no attempt spent');
is(scalar(grep { $_->{method} eq 'POST' && $_->{path} =~ m{^/admin/api/2026-10/graphql\.json$} } sink_requests($unknown)),
	1, 'one POST to graphql.json of the current API version');
my ($req) = sink_requests($unknown);
is($req->{headers}{'content-type'}, 'application/json', 'sent as application/json');
like($req->{body}, qr/"variables":\{"id":"gid:\/\/shopify\/Order\/77"\}/, 'the order asked for by its gid');

canned('gdenied', '{"errors":[{"message":"Access denied for order field.","extensions":{"code":"ACCESS_DENIED",'
	  . '"documentation":"https://shopify.dev/api/usage/access-scopes"}}],"data":{"order":null}}');
ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM webhook_inbox.inbox WHERE event_id = 'w-gdenied' AND status = 'quarantined'"),
	'ACCESS_DENIED quarantines the event (never a deletion, though order is null)');
like($node->safe_psql('postgres', "SELECT flagged FROM webhook_inbox.sources WHERE name = 'gdenied'"),
	qr/answered 403/, 'and flags the source');
is($node->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.objects o JOIN webhook_inbox.sources s "
		  . "ON s.id = o.source_id WHERE s.name = 'gdenied' AND o.deleted"), '0', 'no tombstone was saved');

canned('gis', '{"errors":[{"message":"Internal error. Looks like something went wrong on our end.",'
	  . '"extensions":{"code":"INTERNAL_SERVER_ERROR","requestId":"r1"}}]}');
ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM webhook_inbox.inbox WHERE event_id = 'w-gis' "
		  . "AND status = 'quarantined' AND attempts = 3"),
	'INTERNAL_SERVER_ERROR is retried, then quarantined after max_attempts');
like(event_row('gis'), qr/graphql INTERNAL_SERVER_ERROR: Internal error/, 'its reason names the GraphQL error');

# --- an unknown settings.api: create_source() refuses it, naming the two it knows; one written
# past it (an UPDATE) leaves the source without a read API (and a WARNING, which this node's
# log_min_messages = log omits)
my ($soap_rc, undef, $soap_err) = $node->psql('postgres', "SELECT webhook_inbox.create_source('gsoap', 'shopify', 'x', "
	  . "api_base => 'http://127.0.0.1:1', settings => '{\"api\": \"soap\"}')");
like($soap_err, qr/ERROR:  unknown Shopify API "soap"\nHINT:  Set settings.api to "graphql" \(the default\) or "rest"\./,
	'create_source() refuses an unknown settings.api');
$node->safe_psql('postgres', "SELECT webhook_inbox.create_source('gsoap', 'shopify', 'x', api_base => 'http://127.0.0.1:1')");
$node->safe_psql('postgres', "UPDATE webhook_inbox.sources SET settings = '{\"api\": \"soap\"}' WHERE name = 'gsoap'");
fetch_route('gsoap');
$node->safe_psql('postgres', "SELECT webhook_inbox.intake('gsoap', ARRAY['X-Shopify-Topic', 'orders/updated', "
	  . "'X-Shopify-Webhook-Id', 'w-gsoap'], convert_to('{\"id\":78,\"updated_at\":\"2026-01-01T00:00:00Z\"}', 'UTF8'))");
ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM webhook_inbox.inbox WHERE event_id = 'w-gsoap' "
		  . "AND status = 'quarantined' AND reason LIKE 'no_read_api:%'"),
	'an unknown settings.api leaves the source without a read API');

stop_receiver($rcv);
$node->stop;
done_testing();
