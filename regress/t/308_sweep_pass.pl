
# 308_sweep_pass.pl
#	What one sweep pass keeps and moves: a difference skipped because a live
#	claim held its object is recorded and read by id by the next pass (so
#	the checkpoint can move without losing it); a pass holds one page at a time in memory, not the listing; and
#	the first incremental pass of a (source, object type) lists a bounded
#	window (webhook_inbox.sweep_lookback, 30 days by default), not from 1970.

use strict;
use warnings;

use lib 'regress/t';
use JSON::PP;
use PostgreSQL::Test::Utils;
use Test::More;
use WorkerTest;
use SimTest qw(start_sink sink_requests tmpdir);

# the worker off: the test holds claims itself
my $node = worker_node('sweep_pass', "webhook_inbox.enabled = off\n");
my $json = JSON::PP->new->canonical;
my $reply = tmpdir() . '/reply.json';
open(my $fh, '>', $reply) or die;
print $fh $json->encode({ status => 200,
	body => '{"orders":[{"id":501,"updated_at":"2026-01-01T00:00:10Z","financial_status":"paid"}]}' });
close $fh;
my $api = start_sink(reply => $reply);
$node->safe_psql('postgres', qq{
	SELECT webhook_inbox.create_source('shop', 'shopify', 'shpss_p', api_base => '$api->{url}', api_token => 'shpat_p',
		settings => '{"api": "rest"}')});
# the tokens' scopes already known (the stub answers every request with a
# list page): each pass sends list requests only
sub scopes_known
{
	my ($name) = @_;
	$node->safe_psql('postgres', "INSERT INTO webhook_inbox.source_scopes (source_id, scopes) "
		  . "SELECT id, '{read_orders}' FROM webhook_inbox.sources WHERE name = '$name'");
}
scopes_known('shop');

sub run_row
{
	return $node->safe_psql('postgres', "SELECT status || '|' || skipped || '|' || repaired || '|' || "
		  . "coalesce(incomplete_reason, '') FROM webhook_inbox.sweep_now('shop', 'order', 'incremental')");
}

sub checkpoints
{
	return $node->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.sweep_checkpoints c "
		  . "JOIN webhook_inbox.sources s ON s.id = c.source_id WHERE s.name = 'shop' AND c.layer = 'incremental'");
}

# --- the first incremental pass lists the last 30 days
run_row();
my ($first) = map { $_->{path} } sink_requests($api);
my ($since) = ($first // '') =~ /updated_at_min=([0-9T:%A-Z-]+)/;
$since =~ s/%3A/:/g if defined $since;
my $days = $node->safe_psql('postgres', "SELECT round(extract(epoch FROM now() - '$since'::timestamptz) / 86400)");
is($days, 30, "the first pass listed from 30 days back ($since), not from 1970");
$node->safe_psql('postgres', "SELECT webhook_inbox.create_source('shop2', 'shopify', 'shpss_p', api_base => '$api->{url}', "
	  . "settings => '{\"api\": \"rest\"}')");
scopes_known('shop2');
my $n = scalar sink_requests($api);
$node->safe_psql('postgres', "SET webhook_inbox.sweep_lookback = '2d'; SELECT 1 FROM webhook_inbox.sweep_now('shop2', 'order', 'incremental')");
my ($second) = map { $_->{path} } (sink_requests($api))[$n];
($since) = ($second // '') =~ /updated_at_min=([0-9T:%A-Z-]+)/;
$since =~ s/%3A/:/g if defined $since;
is($node->safe_psql('postgres', "SELECT round(extract(epoch FROM now() - '$since'::timestamptz) / 86400)"), 2,
	'webhook_inbox.sweep_lookback sets that window');

# a provider whose answer to the scopes question is not one (the stub's list
# page): sweep_now() is not failed by it, the scopes stay unknown, the pass
# goes on and the server log says why
my $log_at = -s $node->logfile;
$node->safe_psql('postgres', "SELECT webhook_inbox.create_source('shop3', 'shopify', 'shpss_p', api_base => '$api->{url}', "
	  . "api_token => 'shpat_q', settings => '{\"api\": \"rest\"}')");
is($node->safe_psql('postgres', "SELECT status FROM webhook_inbox.sweep_now('shop3', 'order', 'incremental')"),
	'complete', 'an unusable answer to the scopes question fails no pass');
is($node->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.source_scopes c JOIN webhook_inbox.sources s "
	  . "ON s.id = c.source_id WHERE s.name = 'shop3'"), 0, 'and leaves the scopes unknown');
like(slurp_file($node->logfile, $log_at), qr/source "shop3" could not read its access scopes: the access scopes answer has no data\.currentAppInstallation\.accessScopes array/,
	'the log says why');
$node->safe_psql('postgres', "DELETE FROM webhook_inbox.sweep_checkpoints; DELETE FROM webhook_inbox.objects");

# --- a difference under a live claim: skipped and recorded; the checkpoint
# may move, because the next pass reads the object by id first
$node->safe_psql('postgres', "SELECT webhook_inbox.intake('shop', ARRAY['X-Shopify-Topic', 'orders/updated', "
	  . "'X-Shopify-Webhook-Id', 'p1'], convert_to('{\"id\":501,\"updated_at\":\"2026-01-01T00:00:05Z\",\"financial_status\":\"pending\"}', 'UTF8'))");
my $token = $node->safe_psql('postgres', "SELECT claim_token FROM webhook_inbox.claim('holder', 10, '5 minutes')");
ok($token > 0, 'a live claim holds order 501');
is(run_row(), 'complete|1|0|', 'the pass skipped the difference under the claim');
is($node->safe_psql('postgres', "SELECT retry_ids FROM webhook_inbox.sweep_runs ORDER BY id DESC LIMIT 1"), '{501}',
	'and recorded it for the next pass');
# the claim saves nothing (its lease is given back); the listing moves on:
# order 501 is no longer in it, but its read by id answers
$node->safe_psql('postgres', "SELECT webhook_inbox.complete($token)");
open($fh, '>', $reply) or die;
print $fh $json->encode({ status => 200,
	body => '{"orders":[],"order":{"id":501,"updated_at":"2026-01-01T00:00:10Z","financial_status":"paid"}}' });
close $fh;
my $before = scalar sink_requests($api);
like(run_row(), qr/^complete\|0\|1\|$/, 'the next pass read the skipped object by id and repaired it');
ok((grep { $_->{path} =~ m{/orders/501\.json} } (sink_requests($api))[ $before .. scalar(sink_requests($api)) - 1 ]),
	'by a GET of that object');
is(checkpoints(), 1, 'the checkpoint moves');
is($node->safe_psql('postgres', "SELECT status || '|' || version::bigint FROM webhook_inbox.objects WHERE object_id = '501'"),
	'paid|1767225610', 'the provider\'s version was saved');

# --- memory: a pass over many pages holds one page at a time
my $sim = start_sim('--seed', '4', '--objects', '1500', '--events', '1500', '--shopify', 'big:shpss_b');
$node->safe_psql('postgres', "SELECT webhook_inbox.create_source('big', 'shopify', 'shpss_b', api_base => '$sim->{url}', "
	  . "settings => '{\"api\": \"rest\"}')");
my ($ret, $out, $err) = $node->psql('postgres',
	"SET client_min_messages = debug1; SELECT status FROM webhook_inbox.sweep_now('big', 'order', 'full')");
my @held = $err =~ /sweep run \d+ page \d+ done, (\d+) bytes held/g;
cmp_ok(scalar @held, '>=', 3, 'the full pass listed ' . scalar(@held) . ' pages');
my $repaired = $node->safe_psql('postgres', "SELECT repaired FROM webhook_inbox.sweep_runs ORDER BY id DESC LIMIT 1");
cmp_ok($repaired, '>=', 500, "and repaired $repaired differences");
cmp_ok($held[-1], '<=', $held[0] + 16384, "what the pass holds does not grow with its pages (@held)");

stop_proc($sim);
stop_proc($api);
$node->stop;
done_testing();
