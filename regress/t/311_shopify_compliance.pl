
# 311_shopify_compliance.pl
#	Shopify's mandatory compliance webhooks.  A customer's webhooks (the
#	customer, two of her orders, a refund) are mirrored, and so is another
#	customer's order; customers/data_request becomes a data_requests row
#	in the queues view listing what is held (ids only); customers/redact
#	then erases every byte of her from every table of the extension (her
#	e-mail and name are searched for in all of them) while the other
#	customer's data, the ids, digests, statuses, versions and the
#	delivery audit stay, and the redaction is recorded.  shop/redact
#	erases every payload of its source.

use strict;
use warnings;

use lib 'regress/t';
use PostgreSQL::Test::Utils;
use Test::More;
use WorkerTest;

my $node = worker_node('compliance');
$node->safe_psql('postgres', "SELECT webhook_inbox.create_source('shopc', 'shopify', 'shpss_c')");
$node->safe_psql('postgres', "SELECT webhook_inbox.create_source('shopd', 'shopify', 'shpss_d')");
my $n = 0;

sub deliver
{
	my ($source, $topic, $body) = @_;
	$n++;
	$body =~ s/'/''/g;
	return $node->safe_psql('postgres', "SELECT webhook_inbox.intake('$source', ARRAY['X-Shopify-Topic', '$topic', "
		  . "'X-Shopify-Webhook-Id', 'wh-$n', 'X-Shopify-Shop-Domain', '$source.myshopify.com'], convert_to('$body', 'UTF8'))");
}

my $ada = '{"id":7001,"email":"ada.lovelace@example.com","first_name":"Ada","last_name":"Lovelace","phone":"+44 20 7946 0001"}';
deliver('shopc', 'customers/update', '{"id":7001,"email":"ada.lovelace@example.com","first_name":"Ada",'
	  . '"last_name":"Lovelace","state":"enabled","updated_at":"2026-03-01T10:00:00+00:00"}');
deliver('shopc', 'orders/create', qq({"id":8001,"admin_graphql_api_id":"gid://shopify/Order/8001","name":"#1001",)
	  . qq("email":"ada.lovelace\@example.com","financial_status":"paid","updated_at":"2026-03-01T10:05:00+00:00",)
	  . qq("customer":$ada,"billing_address":{"name":"Ada Lovelace","city":"London"}}));
deliver('shopc', 'orders/updated', qq({"id":8002,"name":"#1002","financial_status":"pending",)
	  . qq("updated_at":"2026-03-02T10:00:00+00:00","customer":$ada}));
deliver('shopc', 'refunds/create', '{"id":9001,"order_id":8001,"created_at":"2026-03-03T10:00:00+00:00",'
	  . '"note":"asked by ada.lovelace@example.com"}');
deliver('shopc', 'orders/create', '{"id":8003,"name":"#1003","financial_status":"paid","updated_at":"2026-03-04T10:00:00+00:00",'
	  . '"customer":{"id":7002,"email":"grace.hopper@example.com","first_name":"Grace","last_name":"Hopper"}}');
# a third customer whose address holds hers: "lada.lovelace@..." is not "ada.lovelace@..."
deliver('shopc', 'orders/create', '{"id":8004,"name":"#1004","financial_status":"paid","updated_at":"2026-03-05T10:00:00+00:00",'
	  . '"customer":{"id":7003,"email":"lada.lovelace@example.com.au"}}');
wait_drained($node, 'the customers\' webhooks');
is($node->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.objects o JOIN webhook_inbox.sources s "
		  . "ON s.id = o.source_id WHERE s.name = 'shopc'"), '5', 'the customer and four orders are mirrored');

# a search of every table of the extension for a regular expression, in any column
$node->safe_psql('postgres', q{
	CREATE FUNCTION public.hits(p text, ci boolean DEFAULT true) RETURNS text LANGUAGE plpgsql AS $$
	DECLARE
		r record;
		n bigint;
		out text := '';
	BEGIN
		FOR r IN SELECT c.oid::regclass AS t FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace
				  WHERE ns.nspname = 'webhook_inbox' AND c.relkind IN ('r', 'p', 'm') ORDER BY 1::text LOOP
			EXECUTE format('SELECT count(*) FROM %s x WHERE x::text %s %L', r.t, CASE WHEN ci THEN '~*' ELSE '~' END, p)
			   INTO n;
			IF n > 0 THEN
				out := out || r.t || '=' || n || ' ';
			END IF;
		END LOOP;
		/* raw bodies are bytea: read them as text too */
		SELECT count(*) INTO n FROM webhook_inbox.inbox i
		 WHERE i.raw_body IS NOT NULL AND (convert_from(i.raw_body, 'SQL_ASCII') ~* p AND ci
										   OR convert_from(i.raw_body, 'SQL_ASCII') ~ p);
		IF n > 0 THEN
			out := out || 'inbox.raw_body=' || n || ' ';
		END IF;
		RETURN rtrim(out);
	END $$});
# her address as a whole (not inside "lada.lovelace\@example.com.au"), her names and phone as written
my $email_re = '(^|[^[:alnum:]._%+-])ada\.lovelace@example\.com($|[^[:alnum:]._-])';
like($node->safe_psql('postgres', "SELECT public.hits('$email_re')"), qr/inbox=4 .*objects=3/,
	'before: her e-mail is in the inbox, the mirror and the occurrences');

# --- customers/data_request: a queue row for operations, listing what is held
deliver('shopc', 'customers/data_request', qq({"shop_id":954889,"shop_domain":"shopc.myshopify.com",)
	  . qq("orders_requested":[8001],"customer":$ada,"data_request":{"id":9999}}));
wait_drained($node, 'customers/data_request');
is($node->safe_psql('postgres', "SELECT customer_id || ' ' || data_request_id || ' ' || held::text "
		  . "FROM webhook_inbox.data_requests"),
	'7001 9999 {"objects": [{"id": "7001", "type": "customer"}, {"id": "8001", "type": "order"}, {"id": "8002", "type": "order"}], '
	  . '"occurrences": [{"id": "9001", "kind": "refund"}], "inbox_events": 4}',
	'customers/data_request lists what is held about her, by id');
is($node->safe_psql('postgres', "SELECT queue || ' ' || source || ' ' || owner || ' ' || count FROM webhook_inbox.queues "
		  . "WHERE queue = 'data_request'"), 'data_request shopc operations 1', 'and waits in the queues view for operations');
is($node->safe_psql('postgres', "SELECT status || ' ' || object_type || ' ' || object_id FROM webhook_inbox.inbox "
		  . "WHERE event_type = 'customers/data_request'"),
	'done customers/data_request 9999', 'the webhook itself is recorded once, by its data request id');

# --- customers/redact
my $deliveries = $node->safe_psql('postgres', 'SELECT count(*) FROM webhook_inbox.deliveries');
my $digests = $node->safe_psql('postgres', "SELECT string_agg(event_id || encode(body_sha256, 'hex'), ',' ORDER BY id) FROM webhook_inbox.inbox");
deliver('shopc', 'customers/redact', qq({"shop_id":954889,"shop_domain":"shopc.myshopify.com",)
	  . qq("customer":{"id":7001,"email":"ada.lovelace\@example.com","phone":"+44 20 7946 0001"},"orders_to_redact":[8001]}));
wait_drained($node, 'customers/redact');
is($node->safe_psql('postgres', "SELECT public.hits('$email_re')"), '',
	'after customers/redact: her e-mail is in no table of the extension');
for my $needle ('Lovelace', '"Ada"', '7946 0001')
{
	is($node->safe_psql('postgres', "SELECT public.hits('$needle', false)"), '',
		"after customers/redact: $needle is in no table of the extension");
}
like($node->safe_psql('postgres', "SELECT public.hits('lada\\.lovelace')"), qr/inbox=1 .*objects=1/,
	'an address that merely contains hers is left as it was');
like($node->safe_psql('postgres', "SELECT public.hits('grace.hopper\@example.com')"), qr/inbox=1 .*objects=1/,
	'another customer\'s order is left as it was');
is($node->safe_psql('postgres', "SELECT string_agg(event_id || encode(body_sha256, 'hex'), ',' ORDER BY id) FROM webhook_inbox.inbox "
		  . "WHERE event_type <> 'customers/redact'"), $digests, 'every inbox row keeps its event id and digest');
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM webhook_inbox.deliveries'), '>', $deliveries,
	'the delivery audit keeps every delivery');
is($node->safe_psql('postgres', "SELECT string_agg(object_type || ':' || object_id || ':' || coalesce(status, '') || ':' "
		  . "|| (version IS NOT NULL) || ':' || state::text, ' ' ORDER BY object_id) FROM webhook_inbox.objects "
		  . "WHERE state ? 'redacted'"),
	'customer:7001:enabled:true:{"id": "7001", "redacted": true} order:8001:paid:true:{"id": "8001", "redacted": true} '
	  . 'order:8002:pending:true:{"id": "8002", "redacted": true}',
	'her mirror rows keep id, status and version, their state redacted');
is($node->safe_psql('postgres', "SELECT topic || ' ' || customer_id || ' ' || orders::text || ' ' || inbox_rows || ' ' "
		  . "|| objects || ' ' || occurrences || ' ' || (erased_at IS NOT NULL) FROM webhook_inbox.redactions"),
	'customers/redact 7001 {8001} 6 3 3 true',
	'the redaction is recorded: what was erased, and when');

# --- shop/redact erases every payload of its source
deliver('shopd', 'orders/create', '{"id":8101,"financial_status":"paid","updated_at":"2026-03-01T00:00:00+00:00",'
	  . '"customer":{"id":7101,"email":"linus@example.com"}}');
wait_drained($node, 'the second shop');
deliver('shopd', 'shop/redact', '{"shop_id":954890,"shop_domain":"shopd.myshopify.com"}');
wait_drained($node, 'shop/redact');
is($node->safe_psql('postgres', "SELECT public.hits('linus\@example.com')"), '', 'after shop/redact: nothing of the shop is left');
is($node->safe_psql('postgres', "SELECT topic || ' ' || shop_domain || ' ' || inbox_rows || ' ' || objects "
		  . "FROM webhook_inbox.redactions WHERE topic = 'shop/redact'"), 'shop/redact shopd.myshopify.com 2 1',
	'and is recorded');
like($node->safe_psql('postgres', "SELECT public.hits('grace.hopper\@example.com')"), qr/inbox=1 .*objects=1/,
	'the other source is untouched');

# --- resolving the data request; bad input
$node->safe_psql('postgres', "SELECT webhook_inbox.resolve_data_request(id, 'sent to the merchant') FROM webhook_inbox.data_requests");
is($node->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.queues WHERE queue = 'data_request'"), '0',
	'a resolved data request leaves the queues view');
my ($rc, $out, $err) = $node->psql('postgres', 'SELECT webhook_inbox.resolve_data_request(424242, NULL)');
like($err, qr/data request 424242 does not exist or is resolved already/, 'resolving an unknown data request is an error');
($rc, $out, $err) = $node->psql('postgres', 'SELECT webhook_inbox.shopify_redact_customer(424242)');
like($err, qr/inbox event 424242 does not exist/, 'redacting for an unknown event is an error');

$node->stop;
done_testing();
