
# 309_worker_no_fetch.pl
#	What the worker does when it would fetch and cannot: a version tie on a
#	GitHub source (issues are versioned and never fetched by id, even with
#	api_base) is quarantined ambiguous_tie, owned by operations, as a tie
#	on a source without a read API is; a Stripe thin event whose
#	related_object.type the adapter does not read (billing.meter), and a
#	Stripe event on a source without api_base, are quarantined
#	no_read_api, owned by engineering.  No request is sent for any of them.

use strict;
use warnings;

use lib 'regress/t';
use PostgreSQL::Test::Utils;
use Test::More;
use WorkerTest;

my $node = worker_node('nofetch');
# api_base points at a port nothing listens on: a request would be a transport error
$node->safe_psql('postgres', q{
	SELECT webhook_inbox.create_source('gh', 'github', 'gh-secret', api_base => 'http://127.0.0.1:9',
		api_token => 'ghp_x', settings => '{"repo": "octo/repo"}');
	SELECT webhook_inbox.create_source('ghnoapi', 'github', 'gh-secret');
	SELECT webhook_inbox.create_source('st', 'stripe', 'whsec_st', api_base => 'http://127.0.0.1:9');
	SELECT webhook_inbox.create_source('stnoapi', 'stripe', 'whsec_st');
});

# two deliveries of issue 7 with one updated_at and different titles
for my $src ('gh', 'ghnoapi')
{
	for my $k (1, 2)
	{
		my $body = '{"action":"edited","issue":{"id":7,"number":7,"state":"open","title":"title ' . $k
		  . '","updated_at":"2026-01-01T00:00:00Z"}}';
		$node->safe_psql('postgres', "SELECT webhook_inbox.intake('$src', "
			  . "ARRAY['X-GitHub-Delivery', 'tie-$src-$k', 'X-GitHub-Event', 'issues'], convert_to('$body', 'UTF8'))");
		wait_drained($node, "tie $src $k");
	}
}
is($node->safe_psql('postgres', "SELECT status || '|' || coalesce(reason, '') FROM webhook_inbox.inbox WHERE event_id = 'tie-gh-1'"),
	'done|', 'the first content is saved');
is($node->safe_psql('postgres', "SELECT status || '|' || reason FROM webhook_inbox.inbox WHERE event_id = 'tie-gh-2'"),
	'quarantined|ambiguous_tie: equal version with different content and no read API for this object type',
	'a tie on a GitHub source with api_base is ambiguous: GitHub is never fetched by id');
is($node->safe_psql('postgres', "SELECT status || '|' || reason FROM webhook_inbox.inbox WHERE event_id = 'tie-ghnoapi-2'"),
	'quarantined|ambiguous_tie: equal version with different content and no read API',
	'as one on a GitHub source without api_base');
is($node->safe_psql('postgres', "SELECT string_agg(source || ':' || owner, ' ' ORDER BY source) FROM webhook_inbox.queues "
		  . "WHERE reason = 'ambiguous_tie'"),
	'gh:operations ghnoapi:operations', 'both wait on operations');

# Stripe: a thin event of a type the adapter does not read, and a source without api_base
$node->safe_psql('postgres', intake_sql('st',
		'{"id":"evt_thin_meter","object":"v2.core.event","type":"v1.billing.meter.error_report_triggered",'
		  . '"created":"2026-01-01T00:00:00Z","related_object":{"id":"mtr_1","type":"billing.meter",'
		  . '"url":"/v1/billing/meters/mtr_1"}}'));
$node->safe_psql('postgres', intake_sql('stnoapi', stripe_event('evt_noapi', 'customer.updated', 'customer', 'cus_1', '', 1767225600)));
wait_drained($node, 'no read API');
is($node->safe_psql('postgres', "SELECT string_agg(event_id || '|' || status || '|' || reason, ' ' ORDER BY event_id) "
		  . "FROM webhook_inbox.inbox WHERE event_id IN ('evt_thin_meter', 'evt_noapi')"),
	'evt_noapi|quarantined|no_read_api: the source has no read API for this object type '
	  . 'evt_thin_meter|quarantined|no_read_api: the source has no read API for this object type',
	'a thin event of an unmapped type, and an event of a source without api_base: no_read_api');
is($node->safe_psql('postgres', "SELECT string_agg(DISTINCT owner, ' ') FROM webhook_inbox.queues WHERE reason = 'no_read_api'"),
	'engineering', 'owned by engineering');
is(worker_stat($node, 'fetched'), '0', 'no request was sent for any of them');

$node->stop;
done_testing();
