
# 313_shopify_app.pl
#	A Shopify app installed in several shops: one source (settings.tenants),
#	every shop's webhooks at its one URL told apart by X-Shopify-Shop-Domain,
#	every read at the shop's own origin (webhook-sim's /shops/{shop}/, through
#	settings.shop_base_url on api_base's origin) with that shop's own
#	X-Shopify-Access-Token.  The tokens are expiring offline tokens that last
#	a few seconds here (an hour at Shopify) with a refresh token replaced on
#	every use, so they expire and are refreshed during every stream.
#	(a) On two seeds, a recorded stream over three shops replayed shuffled
#	    and doubled (GraphQL fetch on notify) and holed (then a GraphQL sweep
#	    per shop) converges to zero differences, nothing acknowledged lost;
#	    no refresh was refused (a spent refresh token would be) and no shop
#	    refreshed more than once per token lifetime; one shop installed only
#	    after its deliveries arrived waited without spending an attempt and
#	    converged once its credentials were set.
#	(b) Two backends race for one shop's refresh: the second waits for the
#	    first one's row lock and takes the token it saved; one refresh.
#	(c) The official client (@shopify/shopify-api's auth.refreshToken)
#	    against webhook-sim's token endpoint, and the extension's refresh body
#	    against the SDK's; a refused refresh flags the shop for engineering.
#	(d) The origin rule: a shop that is not a myshopify.com domain, and a
#	    shop_base_url off api_base's origin, are never read.
#	(e) app/uninstalled disables the shop (no read, no refresh) until the
#	    app is installed again.
#	(f) A read refused 401 under a shop's own (revoked) token flags that
#	    shop, not the source, and waits without spending an attempt.

use strict;
use warnings;

use lib 'regress/t';
use JSON::PP;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use WorkerTest;
use SimTest qw(spew contract_dir run_node);

my $tmp = PostgreSQL::Test::Utils::tempdir;
my $keyfile = "$tmp/wi_key";
spew($keyfile, unpack('H*', join('', map { chr(int(rand(256))) } 1 .. 32)) . "\n");
chmod 0600, $keyfile;
my $node = worker_node('shopify_app',
	"webhook_inbox.fetch_concurrency = 8\nwebhook_inbox.max_attempts = 5\nwebhook_inbox.key_file = '$keyfile'\n");
my $rcv;
my $ttl = 3;
my $client = 'sim-shopify-client-id';

sub shops
{
	my ($sim) = @_;
	my ($st, $doc) = http_json('GET', "$sim->{url}/_sim/shopify/shops");
	die "shops: $st" unless $st == 200;
	return { map { $_->{shop} => $_ } @{ $doc->{shops} } };
}

# the app installed in a shop: its tokens as the OAuth grant gave them
sub install
{
	my ($name, $s) = @_;
	$node->safe_psql('postgres', qq{
		SELECT webhook_inbox.set_tenant_credentials('$name', '$s->{shop}', 'shopify_shop', '$s->{access_token}',
			now() + interval '$s->{expires_in} seconds', '$s->{refresh_token}',
			now() + interval '$s->{refresh_token_expires_in} seconds')});
}

sub app_source
{
	my ($name, $sim) = @_;
	$node->safe_psql('postgres', qq{
		SELECT webhook_inbox.create_source('$name', 'shopify', 'shpss_$name', api_base => '$sim->{url}',
			settings => jsonb_build_object('tenants', true, 'shopify_client_id', '$client',
				'shop_base_url', '$sim->{url}/shops/{shop}'))});
}

sub fetch_route
{
	my ($source) = @_;
	$node->safe_psql('postgres', qq{
		INSERT INTO webhook_inbox.routes (source_id, event_type, class, object_type, strategy, object_id_path, priority)
		SELECT id, 'orders/*', 'state', 'order', 'fetch', '\$.id', 200 FROM webhook_inbox.sources WHERE name = '$source'});
}

my %mode = (1 => 'shuffled', 2 => 'doubled', 3 => 'holed');
for my $seed (41, 42)
{
	my @scenario = ('--seed', $seed, '--objects', '45', '--events', '360', '--epoch', int(time()),
		'--shopify-shops', '3', '--shopify-token-ttl', $ttl, '--shopify-client-id', $client);
	my $rec = "$tmp/stream$seed.jsonl";
	my (%sim, %started);
	for my $m (1 .. 3)
	{
		my $name = "a${seed}_$m";
		$sim{$m} = start_sim(@scenario, '--shopify', "$name:shpss_$name", ($m == 1 ? ('--record', $rec) : ()));
		$started{$m} = time();
		app_source($name, $sim{$m});
		fetch_route($name) unless $mode{$m} eq 'holed';
		my $shops = shops($sim{$m});
		is(scalar(keys %$shops), 3, "seed $seed $mode{$m}: three shops");
		# in the shuffled stream the third shop installs the app only after its deliveries arrived
		for my $shop (sort keys %$shops)
		{
			install($name, $shops->{$shop}) unless $m == 1 && $shop eq 'shop-3.myshopify.com';
		}
	}
	$rcv //= start_receiver($node);
	my $truth = sim_truth($sim{1});
	cmp_ok(scalar(grep { $_->{type} eq 'order' } @{ $truth->{objects} }), '>=', 40, "seed $seed: enough orders");

	for my $m (1 .. 3)
	{
		my $name = "a${seed}_$m";
		my ($rc, $out, $err) = run_sim('replay', '--file', $rec, '--mode', $mode{$m}, '--to', $rcv->{url},
			'--seed', $m, '--shopify', "$name:shpss_$name");
		is($rc, 0, "seed $seed $mode{$m}: replay answered 2xx throughout") or diag("$out $err");
		is($node->safe_psql('postgres', qq{
			SELECT string_agg(DISTINCT i.tenant, ',' ORDER BY i.tenant) FROM webhook_inbox.inbox i
			  JOIN webhook_inbox.sources s ON s.id = i.source_id WHERE s.name = '$name'}),
			'shop-1.myshopify.com,shop-2.myshopify.com,shop-3.myshopify.com',
			"seed $seed $mode{$m}: every delivery is its shop's (X-Shopify-Shop-Domain)");
		if ($m == 1)
		{
			# the shop without credentials: its reads wait, no attempt spent, a queue row says why
			ok($node->poll_query_until('postgres', qq{
				SELECT count(*) = 0 FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id
				 WHERE s.name = '$name' AND i.status IN ('pending', 'processing', 'retry')
				   AND NOT (i.tenant = 'shop-3.myshopify.com' AND i.reason LIKE 'credentials\\_wait:%')}),
				"seed $seed: every other shop's reads ran");
			my $waiting = $node->safe_psql('postgres', qq{
				SELECT count(*) || ' ' || coalesce(max(i.attempts), 0) FROM webhook_inbox.inbox i
				  JOIN webhook_inbox.sources s ON s.id = i.source_id
				 WHERE s.name = '$name' AND i.tenant = 'shop-3.myshopify.com' AND i.status = 'retry'});
			my ($n, $att) = split ' ', $waiting;
			cmp_ok($n, '>', 0, "seed $seed: $n events of the uninstalled shop wait");
			is($att, '0', "seed $seed: without spending an attempt");
			like($node->safe_psql('postgres', qq{
				SELECT reason FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id
				 WHERE s.name = '$name' AND i.tenant = 'shop-3.myshopify.com' AND i.status = 'retry' LIMIT 1}),
				qr/^credentials_wait: no credentials for tenant shop-3\.myshopify\.com yet/,
				"seed $seed: the queue says why");
			# the install's grant, long after the stream: fresh tokens
			my $s3 = shops($sim{1})->{'shop-3.myshopify.com'};
			my ($gst, $grant) = http_json('POST', "$sim{1}{url}/shops/shop-3.myshopify.com/admin/oauth/access_token", {
					headers => { 'Content-Type' => 'application/json' },
					content => encode_json({ client_id => $client, client_secret => "shpss_$name",
							refresh_token => $s3->{refresh_token}, grant_type => 'refresh_token' }) });
			is($gst, 200, "seed $seed: the third shop's grant");
			install($name, { %$grant, shop => 'shop-3.myshopify.com' });
		}
		wait_drained($node, "seed $seed $mode{$m}", 60);
		if ($mode{$m} eq 'holed')
		{
			for my $shop (sort keys %{ shops($sim{$m}) })
			{
				my $run = $node->safe_psql('postgres',
					"SELECT status || ' ' || listed || ' ' || repaired FROM webhook_inbox.sweep_now('$name', 'order', 'full', '$shop')");
				like($run, qr/^complete \d+ \d+$/, "seed $seed holed: the GraphQL sweep of $shop completed ($run)");
				# an order the shop deleted is read by id twice before it is a tombstone
				settle_tombstones($node, $name, 'order', 'full', $shop);
			}
		}
		verify_source($node, $name, $sim{$m}, "seed $seed $mode{$m}");
		is($node->safe_psql('postgres', qq{
			SELECT count(*) FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id
			 WHERE s.name = '$name' AND i.status = 'quarantined'}), '0',
			"seed $seed $mode{$m}: nothing quarantined");

		# one refresh per expiry per shop: none refused (a second refresh with a spent token would be)
		my $elapsed = time() - $started{$m};
		my $most = int($elapsed / ($ttl * 0.75)) + 1;
		for my $s (sort { $a->{shop} cmp $b->{shop} } values %{ shops($sim{$m}) })
		{
			is($s->{refused}, 0, "seed $seed $mode{$m}: $s->{shop}: no refresh refused");
			cmp_ok($s->{refreshes}, '<=', $most,
				"seed $seed $mode{$m}: $s->{shop}: $s->{refreshes} refreshes in ${\ int($elapsed)} s, at most one per token lifetime");
		}
		my $total = 0;
		$total += $_->{refreshes} for values %{ shops($sim{$m}) };
		cmp_ok($total, '>=', 1, "seed $seed $mode{$m}: tokens expired and were refreshed during the stream ($total)")
		  if $mode{$m} ne 'holed' || $elapsed > $ttl;
		is($node->safe_psql('postgres', qq{
			SELECT count(*) FROM webhook_inbox.tenant_credentials_status WHERE source = '$name' AND status <> 'active'}),
			'0', "seed $seed $mode{$m}: no shop lost (none flagged)");
	}
	stop_proc($sim{$_}) for 1 .. 3;
}

# --- (b) two backends race for one shop's refresh
my $sim = start_sim('--seed', 7, '--objects', 10, '--events', 20, '--shopify', 'race:shpss_race',
	'--shopify-shops', 2, '--shopify-token-ttl', 3600, '--shopify-client-id', $client);
app_source('race', $sim);
install('race', $_) for values %{ shops($sim) };
my $sid = $node->safe_psql('postgres', "SELECT id FROM webhook_inbox.sources WHERE name = 'race'");
is($node->safe_psql('postgres', "SELECT string_agg(t.tenant || ' ' || t.status || ' ' || t.discovered_by, ', ' ORDER BY t.tenant) "
		  . "FROM webhook_inbox.tenants t WHERE t.source_id = $sid"),
	'shop-1.myshopify.com active manual, shop-2.myshopify.com active manual',
	'installed shops are tenants before their first delivery (the sweep reconciles every installed shop)');
my $shop = 'shop-1.myshopify.com';
my $before = shops($sim)->{$shop};
is($node->safe_psql('postgres', "SELECT status || ' ' || header FROM webhook_inbox._tenant_auth($sid, '$shop')"),
	"ok X-Shopify-Access-Token: $before->{access_token}", 'a fresh token is sent as it is, no refresh');
# the token is due: a quarter of its life left
$node->safe_psql('postgres', qq{
	UPDATE webhook_inbox.tenant_credentials SET secret_at = now() - interval '1 hour', expires_at = now() + interval '2 minutes'
	 WHERE source_id = $sid AND tenant = '$shop'});
my $sql = "SELECT 'R|' || status || '|' || header FROM webhook_inbox._tenant_auth($sid, '$shop')";
my $a = $node->background_psql('postgres');
my $b = $node->background_psql('postgres');
$a->query_safe('BEGIN');
my ($ta) = $a->query_safe($sql) =~ /^R\|ok\|X-Shopify-Access-Token: (.*)$/m;
ok($ta && $ta ne $before->{access_token}, 'the first backend refreshes the due token in its transaction');
$b->query_until(qr/started/, "\\echo started\n$sql;\n");
ok($node->poll_query_until('postgres',
	"SELECT EXISTS (SELECT FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%_tenant_auth%')"),
	'the second waits for the first one\'s lock on the shop\'s credentials');
$a->query_safe('COMMIT');
my ($tb) = $b->query_safe('SELECT 1') =~ /^R\|ok\|X-Shopify-Access-Token: (.*)$/m;
is($tb, $ta, 'then takes the token the first one saved');
my $after = shops($sim)->{$shop};
# a session sitting in an open transaction on the shop's row stalls nobody for long
$node->safe_psql('postgres', qq{
	UPDATE webhook_inbox.tenant_credentials SET secret_at = now() - interval '1 hour', expires_at = now() + interval '2 minutes'
	 WHERE source_id = $sid AND tenant = '$shop'});
$a->query_safe('BEGIN');
my ($tc) = $a->query_safe($sql) =~ /^R\|ok\|X-Shopify-Access-Token: (.*)$/m;
my $t0 = time();
like($b->query_safe("SET lock_timeout = '300ms'; SELECT 'W|' || status || '|' || reason FROM webhook_inbox._tenant_auth($sid, '$shop')"),
	qr/^W\|wait\|another session has held the credentials of shop shop-1\.myshopify\.com for over 300ms/m,
	'a backend waits for another one\'s open transaction at most lock_timeout (else twice http_timeout), then its read waits');
cmp_ok(time() - $t0, '<', 5, 'and does not block longer');
$a->query_safe('COMMIT');
is(shops($sim)->{$shop}{refreshes}, 2, 'the refresh the open transaction made is the only one');
$a->quit;
$b->quit;
is($after->{refreshes}, 1, 'one refresh for both backends');
is($after->{refused}, 0, 'and no refresh with a spent refresh token');
is($after->{access_token}, $ta, 'the token webhook-sim issued is the one both send');
$ta = $tc;
is($node->safe_psql('postgres', qq{
	SELECT has_refresh_token AND refresh_expires_at > now() + interval '80 days' AND expires_at > now() + interval '50 minutes'
	  FROM webhook_inbox.tenant_credentials_status WHERE source = 'race' AND tenant = '$shop'}), 't',
	'the rotated refresh token and both expiries were saved with the access token');
my ($st, $doc) = http_json('POST', "$sim->{url}/shops/$shop/admin/oauth/access_token", {
		headers => { 'Content-Type' => 'application/json' },
		content => encode_json({ client_id => $client, client_secret => 'shpss_race',
				refresh_token => $before->{refresh_token}, grant_type => 'refresh_token' }) });
is("$st $doc->{error}", '400 invalid_grant', 'webhook-sim refuses the spent refresh token, as Shopify does');

# --- (c) the official client, and the extension's body against it
my $dir = contract_dir();
$node->safe_psql('postgres', qq{
	UPDATE webhook_inbox.tenant_credentials SET secret_at = now() - interval '1 hour', expires_at = now() + interval '2 minutes'
	 WHERE source_id = $sid AND tenant = 'shop-2.myshopify.com'});
my $body = $node->safe_psql('postgres', "SELECT body FROM webhook_inbox._shop_refresh_begin($sid, 'shop-2.myshopify.com')");
my $two = shops($sim)->{'shop-2.myshopify.com'};
my ($rc, $checks, $err) = run_node("$dir/shopify_refresh.mjs", $sim->{url}, 'shop-2.myshopify.com', $client,
	'shpss_race', $two->{refresh_token}, $body);
is($rc, 0, 'the SDK contract run completed') or diag($err);
cmp_ok(scalar @$checks, '>=', 12, 'SDK checks reported: ' . scalar @$checks);
ok($_->{ok}, "shopify-api refreshToken: $_->{name}") or diag($_->{detail} // '') for @$checks;
# the SDK spent the shop's refresh token the extension holds: Shopify refuses it, the shop is flagged
is($node->safe_psql('postgres', "SELECT status FROM webhook_inbox._tenant_auth($sid, 'shop-2.myshopify.com')"),
	'flagged', 'a refused refresh flags the shop');
is($node->safe_psql('postgres', qq{
	SELECT status || ' ' || owner || ' ' || (status_reason LIKE 'Shopify refused to refresh the token of shop shop-2.myshopify.com (400%invalid%')
	  FROM webhook_inbox.tenant_credentials_status WHERE source = 'race' AND tenant = 'shop-2.myshopify.com'}),
	'flagged engineering true', 'for engineering, saying what Shopify answered');
is($node->safe_psql('postgres', qq{
	SELECT count(*) FROM webhook_inbox.queues q WHERE q.queue = 'flagged_tenant'}), '1',
	'a flagged_tenant queue row');
unlike($node->safe_psql('postgres', "SELECT string_agg(status_reason, ' ') FROM webhook_inbox.tenant_credentials"),
	qr/shprt_|shpat_|shpss_/, 'no token in any reason');

# --- (e) app/uninstalled disables the shop; installing again enables it
is($node->safe_psql('postgres', qq{
	SELECT webhook_inbox.intake('race', ARRAY['X-Shopify-Topic', 'app/uninstalled', 'X-Shopify-Webhook-Id', 'wh-uninstall-1',
		'X-Shopify-Shop-Domain', '$shop'], convert_to('{"id":1,"name":"Shop One","domain":"$shop"}', 'UTF8'))}),
	'new', 'app/uninstalled is stored like any delivery');
is($node->safe_psql('postgres', qq{
	SELECT status || ' ' || (reason LIKE 'uninstalled: app/uninstalled received at %') FROM webhook_inbox.tenants
	 WHERE source_id = $sid AND tenant = '$shop'}), 'disabled true', 'and disables the shop\'s tenant');
like($node->safe_psql('postgres', "SELECT status || ' ' || reason FROM webhook_inbox._tenant_auth($sid, '$shop')"),
	qr/^flagged shop shop-1\.myshopify\.com uninstalled the app/, 'its reads stop: no token is sent for it');
install('race', { %{ shops($sim)->{$shop} }, shop => $shop });
is($node->safe_psql('postgres', "SELECT t.status || ' ' || a.status FROM webhook_inbox.tenants t, "
		  . "webhook_inbox._tenant_auth($sid, '$shop') a WHERE t.source_id = $sid AND t.tenant = '$shop'"),
	'active ok', 'a new install (set_tenant_credentials) enables it again');

# --- (d) the origin rule
$node->safe_psql('postgres', qq{
	INSERT INTO webhook_inbox.tenant_credentials (source_id, tenant, kind, secret)
	VALUES ($sid, 'evil.example.com', 'api_token', webhook_inbox._seal('x', webhook_inbox._credential_context($sid, 'evil.example.com', 'secret')))});
like($node->safe_psql('postgres', qq{
	SELECT status || ' ' || coalesce(error, '') FROM webhook_inbox.sweep_now('race', 'order', 'full', 'evil.example.com')}),
	qr/not a shop's myshopify\.com domain/, 'a tenant that is not a myshopify.com domain is never read');
$node->safe_psql('postgres', qq{
	UPDATE webhook_inbox.sources SET settings = settings || '{"shop_base_url": "http://127.0.0.2:1/shops/{shop}"}'
	 WHERE name = 'race'});
like($node->safe_psql('postgres', qq{
	SELECT coalesce(error, '') FROM webhook_inbox.sweep_now('race', 'order', 'full', '$shop')}),
	qr/not the source's api_base origin/, 'a shop_base_url off api_base\'s origin is refused');
is(shops($sim)->{$shop}{unauthorized}, 0, 'and nothing was sent to the shop without its token');

# --- (f) a shop's token refused (revoked before its app/uninstalled arrived): the shop is flagged, not the source
$node->safe_psql('postgres', qq{
	UPDATE webhook_inbox.sources SET settings = settings || jsonb_build_object('shop_base_url', '$sim->{url}/shops/{shop}')
	 WHERE name = 'race'});
fetch_route('race');
my ($order) = map { $_->{id} } grep { $_->{type} eq 'order' && $_->{tenant} eq $shop } @{ sim_truth($sim)->{objects} };
$node->safe_psql('postgres', qq{
	SELECT webhook_inbox.set_tenant_credentials('race', '$shop', 'shopify_shop', 'shpat_revoked', now() + interval '1 hour')});
$node->safe_psql('postgres', qq{
	SELECT webhook_inbox.intake('race', ARRAY['X-Shopify-Topic', 'orders/updated', 'X-Shopify-Webhook-Id', 'wh-revoked-1',
		'X-Shopify-Shop-Domain', '$shop'], convert_to('{"id":$order,"updated_at":"2026-01-01T00:00:00Z"}', 'UTF8'))});
ok($node->poll_query_until('postgres', qq{
	SELECT EXISTS (SELECT FROM webhook_inbox.inbox WHERE event_id = 'wh-revoked-1' AND status = 'retry'
					AND reason LIKE 'credentials\\_flagged: http 401 from tenant $shop%')}),
	'a read refused 401 under the shop\'s token waits as credentials_flagged');
is($node->safe_psql('postgres', qq{
	SELECT (SELECT flagged IS NULL FROM webhook_inbox.sources WHERE name = 'race') || ' '
		|| (SELECT status FROM webhook_inbox.tenant_credentials_status WHERE source = 'race' AND tenant = '$shop') || ' '
		|| (SELECT attempts FROM webhook_inbox.inbox WHERE event_id = 'wh-revoked-1')}),
	'true flagged 0', 'the shop is flagged, the source is not, and no attempt was spent');
cmp_ok(shops($sim)->{$shop}{unauthorized}, '>=', 1, 'webhook-sim answered the revoked token 401');
stop_proc($sim);
is(stop_receiver($rcv), 0, 'the receiver exits 0 on SIGTERM');

done_testing();
