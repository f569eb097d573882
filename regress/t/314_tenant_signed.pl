
# 314_tenant_signed.pl
#	A Shopify app's one source serves two shops, A and B; Shopify signs a
#	webhook's body, and names the shop in the unsigned X-Shopify-Shop-Domain.
#	Played as an attacker of the public endpoint who holds shop A's signed
#	bodies and no secret, over real HTTP through the receiver with the
#	worker on:
#	(a) prune('1 second') leaves every digest inside its 7-day window, so
#	    A's customers/redact body sent again under a fresh webhook id is
#	    still a replay (200 duplicate) and changes nothing;
#	(b) once the digests have expired, the same body, and A's shop/redact,
#	    customers/data_request and app/uninstalled bodies under B's header,
#	    are refused 400 tenant_mismatch: nothing stored, no redaction, no
#	    data request, B still active with every payload, counted in
#	    webhook_receiver_refusals_total;
#	(c) a shop/redact or app/uninstalled whose body names no shop is kept in
#	    quarantine (tenant_unconfirmed) and acts on no one;
#	(d) the same bodies under their own shop's header are carried out, for
#	    that shop only;
#	(e) the reads of a shop that never gave credentials wait, and past
#	    webhook_inbox.tenant_credentials_wait its events are quarantined
#	    unknown_tenant, once, and shown in queues.

use strict;
use warnings;

use lib 'regress/t';
use PostgreSQL::Test::Utils;
use Test::More;
use WorkerTest;
use ReceiverTest qw(sign post metric poll_until);

my $secret = 'shpss_app314';
my $node = worker_node('tenant_signed');
$node->safe_psql('postgres',
	"SELECT webhook_inbox.create_source('app', 'shopify', '$secret', settings => '{\"tenants\": true}')");
my $rcv = start_receiver($node);
my ($shop_a, $shop_b) = ('shop-a.myshopify.com', 'shop-b.myshopify.com');
my $n = 0;

# one signed delivery over HTTP: its status and body
sub deliver
{
	my ($topic, $shop, $body) = @_;
	my $h = sign('shopify', $secret, $body, id => 'wh314-' . ++$n);
	$h->{'X-Shopify-Topic'} = $topic;
	$h->{'X-Shopify-Shop-Domain'} = $shop if defined $shop;
	my $res = post($rcv, 'app', $h, $body);
	return "$res->{status} $res->{content}";
}

sub sql { return $node->safe_psql('postgres', $_[0]) }

# what an attacker could change in shop B: its mirrored order (prune() below
# deletes the done inbox rows), its status, what was redacted or requested
sub shop_b_state
{
	return sql("SELECT (SELECT string_agg(o.object_id || '=' || coalesce(o.state ->> 'email', 'none'), ',' ORDER BY o.object_id)
				   FROM webhook_inbox.objects o WHERE o.tenant = '$shop_b')
		 || ' ' || (SELECT status FROM webhook_inbox.tenants WHERE tenant = '$shop_b')
		 || ' redactions=' || (SELECT count(*) FROM webhook_inbox.redactions)
		 || ' requests=' || (SELECT count(*) FROM webhook_inbox.data_requests)");
}

my $order = '{"id":%d,"email":"ann@example.com","financial_status":"paid","updated_at":"2026-03-01T10:00:00Z"}';
is(deliver('orders/create', $shop_a, sprintf($order, 3141)), '200 new', "shop A's order");
is(deliver('orders/create', $shop_b, sprintf($order, 3142)), '200 new', "shop B's order, same customer e-mail");
ok(wait_drained($node, 'the orders'), 'the orders are mirrored');

# shop A's own compliance and uninstall bodies, as Shopify signed them
my $redact_a = qq({"shop_id":1,"shop_domain":"$shop_a","customer":{"id":77,"email":"ann\@example.com"},"orders_to_redact":[3141]});
my $shop_redact_a = qq({"shop_id":1,"shop_domain":"$shop_a"});
my $request_a = qq({"shop_id":1,"shop_domain":"$shop_a","customer":{"id":77,"email":"ann\@example.com"},"orders_requested":[3141],"data_request":{"id":9}});
my $uninstall_a = qq({"id":1,"name":"Shop A","domain":"shop-a.example.com","myshopify_domain":"$shop_a"});
my $before = shop_b_state();
like($before, qr/^3142=ann\@example\.com active redactions=0 requests=0$/,
	"shop B before: its order, active, nothing redacted");

# (a) the digests outlive a short retention
is(sql("SELECT count(*) FROM webhook_inbox.seen_bodies"), '2', 'two digests');
is(deliver('customers/redact', $shop_a, $redact_a), '200 new', "A's customers/redact");
ok(wait_drained($node, 'the redaction'), 'carried out');
is(sql("SELECT shop_domain || ' ' || inbox_rows FROM webhook_inbox.redactions"), "$shop_a 2", "A's order and the request erased");
sql("UPDATE webhook_inbox.seen_bodies SET first_seen_at = now() - interval '2 seconds'");
sql("SELECT webhook_inbox.prune('1 second')");
is(sql("SELECT count(*) FROM webhook_inbox.seen_bodies"), '3', "prune('1 second') keeps every digest inside its window");
is(deliver('customers/redact', $shop_a, $redact_a), '200 duplicate', "A's redact again, under a fresh webhook id: still a replay");
ok(wait_drained($node, 'nothing'), 'drained');
is(shop_b_state(), $before =~ s/redactions=0/redactions=1/r, 'shop B unchanged');

# (b) past the window a replay is judged by what is signed
sql("UPDATE webhook_inbox.seen_bodies SET expires_at = now() - interval '1 second'");
sql("SELECT webhook_inbox.prune('30 days')");
is(sql("SELECT count(*) FROM webhook_inbox.seen_bodies"), '0', 'expired digests are pruned');
my $stored = sql("SELECT (SELECT count(*) FROM webhook_inbox.inbox) || '/' || (SELECT count(*) FROM webhook_inbox.deliveries)");
is(deliver('customers/redact', $shop_b, $redact_a), '400 tenant_mismatch', "A's customers/redact under B's header: refused");
is(deliver('shop/redact', $shop_b, $shop_redact_a), '400 tenant_mismatch', "A's shop/redact under B's header: refused");
is(deliver('customers/data_request', $shop_b, $request_a), '400 tenant_mismatch', "A's data request under B's header: refused");
is(deliver('app/uninstalled', $shop_b, $uninstall_a), '400 tenant_mismatch', "A's app/uninstalled under B's header: refused");
is(sql("SELECT (SELECT count(*) FROM webhook_inbox.inbox) || '/' || (SELECT count(*) FROM webhook_inbox.deliveries)"),
	$stored, 'nothing stored, not even a delivery attempt');
ok(wait_drained($node, 'nothing'), 'drained');
is(shop_b_state(), $before =~ s/redactions=0/redactions=1/r, 'shop B unchanged: not erased, not disabled');
is(metric($rcv, 'webhook_receiver_refusals_total{source="app",reason="tenant_mismatch"}'), '4',
	'the refusals are counted by reason');

# (c) a topic that acts on its shop, with no shop in its signed body
is(deliver('shop/redact', $shop_b, '{"shop_id":2}'), '200 quarantined', 'a shop/redact naming no shop: quarantined');
is(deliver('app/uninstalled', $shop_b, '{"id":2,"domain":"shop-b.example.com"}'), '200 quarantined',
	'an app/uninstalled naming no myshopify.com domain: quarantined');
is(sql("SELECT string_agg(split_part(reason, ':', 1), ',') FROM webhook_inbox.inbox WHERE status = 'quarantined'"),
	'tenant_unconfirmed,tenant_unconfirmed', 'for tenant_unconfirmed');
ok(wait_drained($node, 'nothing'), 'drained');
is(shop_b_state(), $before =~ s/redactions=0/redactions=1/r, 'shop B unchanged');

# (d) under its own shop's header each is carried out, for that shop only
is(deliver('app/uninstalled', $shop_a, $uninstall_a), '200 new', "A's app/uninstalled under A's header");
is(deliver('shop/redact', $shop_a, $shop_redact_a), '200 new', "A's shop/redact under A's header");
ok(wait_drained($node, 'the shop redaction'), 'carried out');
is(sql("SELECT tenant || ' ' || status FROM webhook_inbox.tenants ORDER BY tenant"), "$shop_a disabled\n$shop_b active",
	'A is disabled, B is not');
is(sql("SELECT string_agg(topic || ' ' || shop_domain, ',' ORDER BY id) FROM webhook_inbox.redactions"),
	"customers/redact $shop_a,shop/redact $shop_a", 'both redactions name A');
is(shop_b_state(), $before =~ s/redactions=0/redactions=2/r, "shop B's payloads untouched");

# (e) a shop that never gave credentials (nothing can mint them) waits
# webhook_inbox.tenant_credentials_wait, then its events are set aside once
sql("SELECT webhook_inbox.create_source('app2', 'shopify', 'shpss_app2', api_base => 'http://127.0.0.1:9',
	settings => '{\"tenants\": true, \"shop_base_url\": \"http://127.0.0.1:9/shops/{shop}\"}')");
sql("INSERT INTO webhook_inbox.routes (source_id, event_type, class, object_type, strategy, object_id_path, priority)
	 SELECT id, 'orders/*', 'state', 'order', 'fetch', '\$.id', 200 FROM webhook_inbox.sources WHERE name = 'app2'");
is(sql("SELECT webhook_inbox.intake('app2', ARRAY['X-Shopify-Topic', 'orders/create', 'X-Shopify-Webhook-Id', 'wh314-e1',
	'X-Shopify-Shop-Domain', 'shop-c.myshopify.com'], convert_to('{\"id\":3143,\"updated_at\":\"2026-03-01T10:00:00Z\"}', 'UTF8'))"),
	'new', 'an order of a shop without credentials');
my $state = "SELECT status || ' ' || attempts || ' ' || split_part(coalesce(reason, ''), ':', 1) FROM webhook_inbox.inbox WHERE event_id = 'wh314-e1'";
ok(poll_until(sub { sql($state) eq 'retry 0 credentials_wait' }, 'the read waits'), 'its read waits, no attempt spent')
  or diag(sql($state));
sql("UPDATE webhook_inbox.tenants SET first_seen = now() - interval '2 days 1 minute' WHERE tenant = 'shop-c.myshopify.com'");
sql("UPDATE webhook_inbox.inbox SET next_attempt_at = now() WHERE event_id = 'wh314-e1'");
ok(poll_until(sub { sql($state) eq 'quarantined 0 unknown_tenant' }, 'set aside'),
	'past tenant_credentials_wait (2 days by default) it is quarantined unknown_tenant, no attempt spent')
  or diag(sql($state));
is(sql("SELECT queue || ' ' || reason || ' ' || count FROM webhook_inbox.queues WHERE source = 'app2'"),
	'quarantined_event unknown_tenant 1', 'shown in queues');

is(stop_receiver($rcv), 0, 'receiver exits cleanly');
unlike($rcv->{log}, qr/\Q$secret\E/, 'the receiver logged no secret');
$node->stop;
done_testing();
