# The two reconciliation layers against webhook-sim speaking Stripe's API
# strictly (unknown parameters are 400 parameter_unknown, /v1/events keeps
# 30 days, the subscription list omits canceled ones unless status=all):
#
#	incremental: deliveries dropped on the way are repaired through
#	GET /v1/events, each listed event fed into the inbox as a delivery;
#	full: a stream older than the event window, whose drops no events list
#	can repair, is repaired by listing every object; canceled subscriptions
#	stay mirrored as canceled; an object the provider no longer has becomes a
#	tombstone.
use strict;
use warnings;

use lib 'regress/t';
use PostgreSQL::Test::Utils;
use Test::More;
use WorkerTest;

my @types = qw(subscription payment_intent);
my $node = worker_node('layers', "webhook_inbox.fetch_concurrency = 8\n");
my $rcv = start_receiver($node);

# stream(source, seed, sim options): a stream with drops delivered to the receiver, drained
sub stream
{
	my ($src, $seed, @epoch) = @_;
	add_source($node, $src, 'stripe', "whsec_$src", 'http://127.0.0.1:9');
	my $sim = start_sim('--seed', $seed, '--objects', 40, '--events', 400, @epoch,
		'--types', join(',', @types), '--stripe', "$src:whsec_$src",
		'--deliver-to', $rcv->{url}, '--drop', '0.2', '--concurrency', 8, '--retry-base-ms', 100);
	$node->safe_psql('postgres', "UPDATE webhook_inbox.sources SET api_base = '$sim->{url}' WHERE name = '$src'");
	my $done = SimTest::poll_until(sub {
		my (undef, $s) = http_json('GET', "$sim->{url}/_sim/status");
		return $s && $s->{done} ? $s : undef;
	}, 90);
	ok($done, "$src: stream delivered");
	cmp_ok($done ? $done->{dropped} : 0, '>', 0, "$src: deliveries were dropped");
	wait_drained($node, "$src: stream");
	return $sim;
}

sub qs { return $node->safe_psql('postgres', $_[0]); }

sub run_pass
{
	my ($src, $type, $layer) = @_;
	return qs("SELECT status, listed, repaired, missing, coalesce(incomplete_reason, '') "
		  . "FROM webhook_inbox.sweep_now('$src', '$type', '$layer')");
}

# --- incremental: the events list repairs what the webhooks dropped
my $sim = stream('live', 310);
my ($rc, $out);

# earlier passes were complete an hour ago: the events window covers the checkpoint
qs("INSERT INTO webhook_inbox.sweep_checkpoints (source_id, object_type, layer, checkpoint)
   SELECT s.id, t, 'incremental', now() - interval '1 hour'
     FROM webhook_inbox.sources s, unnest(ARRAY['subscription', 'payment_intent']) t WHERE s.name = 'live'");
my $fed = 0;
for my $t (@types)
{
	my ($status, $listed, $repaired, $missing, $why) = split /\|/, run_pass('live', $t, 'incremental');
	is($status, 'complete', "live: incremental pass of $t complete (listed $listed events, fed $repaired)");
	cmp_ok($listed, '>', 0, "live: the events list named $t events");
	$fed += $repaired;
}
cmp_ok($fed, '>', 0, 'live: the incremental layer fed missed events');
is(qs("SELECT count(*) FROM webhook_inbox.repairs r JOIN webhook_inbox.sweep_runs w ON w.id = r.run_id
	   JOIN webhook_inbox.sources s ON s.id = w.source_id WHERE s.name = 'live' AND r.outcome = 'event'"),
	$fed, 'live: each fed event is a repair');
is(qs("SELECT count(*) FROM webhook_inbox.deliveries d JOIN webhook_inbox.sources s ON s.id = d.source_id
	   WHERE s.name = 'live' AND d.delivery_id LIKE 'sweep %' AND d.outcome = 'new'"),
	$fed, 'live: each fed event was recorded as a delivery of the sweep');
cmp_ok(qs("SELECT count(*) FROM webhook_inbox.deliveries d JOIN webhook_inbox.sources s ON s.id = d.source_id
	   WHERE s.name = 'live' AND d.delivery_id LIKE 'sweep %' AND d.outcome = 'duplicate'"),
	'>', 0, 'live: events the webhooks had delivered were deduplicated on their id');
wait_drained($node, 'live: fed events');
verify_source($node, 'live', $sim, 'live: after the incremental layer');
for my $t (@types)
{
	my ($status, undef, $repaired) = split /\|/, run_pass('live', $t, 'incremental');
	is("$status $repaired", 'complete 0', "live: a second incremental pass of $t repairs nothing");
}
stop_proc($sim);

# --- full: a stream older than Stripe's 30 days of events
$sim = stream('old', 311, '--epoch', time() - 45 * 86400);
for my $t (@types)
{
	my ($status, $listed, $repaired, undef, $why) = split /\|/, run_pass('old', $t, 'incremental');
	is("$status $listed $repaired", 'incomplete 0 0', "old: the events list has nothing of $t left to compare");
	like($why, qr/^no checkpoint yet: only the provider's 30 days of events were compared/,
		"old: the incremental pass of $t says why it is incomplete");
}
($rc, $out) = run_sim('verify', '--db', $node->connstr('postgres'), '--source', 'old', '--api', $sim->{url});
like($out, qr/differences=[1-9]/, 'old: the incremental layer could not repair drops older than the window');

my $repaired = 0;
for my $t (@types)
{
	my ($status, $listed, $rep) = split /\|/, run_pass('old', $t, 'full');
	is($status, 'complete', "old: full pass of $t complete (listed $listed, repaired $rep)");
	$repaired += $rep;
}
cmp_ok($repaired, '>', 0, 'old: the full layer repaired objects older than the event window');
wait_drained($node, 'old: full passes');
verify_source($node, 'old', $sim, 'old: after the full layer');

# canceled subscriptions are listed (status=all) and kept as canceled, never tombstones
my $truth = sim_truth($sim);
my $canceled = grep { $_->{type} eq 'subscription' && ($_->{status} // '') eq 'canceled' } @{ $truth->{objects} };
cmp_ok($canceled, '>', 0, "old: the provider has canceled subscriptions ($canceled)");
is(qs("SELECT count(*) FROM webhook_inbox.objects o JOIN webhook_inbox.sources s ON s.id = o.source_id
	   WHERE s.name = 'old' AND o.object_type = 'subscription' AND o.status = 'canceled' AND NOT o.deleted"),
	$canceled, 'old: every canceled subscription is mirrored as canceled, not deleted');

# both checkpoints moved with the complete full passes; the next incremental pass is complete
is(qs("SELECT string_agg(layer, ',' ORDER BY layer) FROM webhook_inbox.sweep_checkpoints c
	   JOIN webhook_inbox.sources s ON s.id = c.source_id WHERE s.name = 'old' AND c.object_type = 'subscription'"),
	'full,incremental', 'old: a complete full pass moves both checkpoints');
is((split /\|/, run_pass('old', 'subscription', 'incremental'))[0], 'complete',
	'old: after the full pass the incremental layer compares everything again');

# an object the mirror has and the provider does not: read by id, 404, a tombstone
qs("SELECT webhook_inbox.upsert_object('old', 'subscription', 'sub_nolongerthere', NULL, 'active', '{\"id\": \"sub_nolongerthere\"}')");
my ($status, $listed, $rep, $missing) = split /\|/, run_pass('old', 'subscription', 'full');
is("$status $missing", 'complete 1', 'old: the full pass found the one object the provider no longer lists');
is(qs("SELECT deleted || ' ' || (tombstone_pending_since IS NOT NULL) FROM webhook_inbox.objects "
	  . "WHERE object_id = 'sub_nolongerthere'"), 'false true', 'old: one 404 is not yet believed');
is(qs("SELECT retry_ids FROM webhook_inbox.sweep_runs ORDER BY id DESC LIMIT 1"), '{sub_nolongerthere}',
	'old: the next pass reads it by id first');
my ($settled) = settle_tombstones($node, 'old', 'subscription');
like($settled, qr/^complete/, "old: a second read tombstone_confirm_delay later ($settled)");
is(qs("SELECT deleted || ' ' || tombstone_evidence FROM webhook_inbox.objects WHERE object_id = 'sub_nolongerthere'"),
	'true read', 'old: it is a tombstone a read inferred');
is(qs("SELECT outcome FROM webhook_inbox.repairs WHERE object_id = 'sub_nolongerthere'"), 'tombstone',
	'old: recorded as a repair');

is(qs("SELECT count(*) FROM webhook_inbox.inbox WHERE status = 'quarantined'"), '0', 'nothing quarantined');
is(qs('SELECT count(*) FROM webhook_inbox.object_leases'), '0', 'no lease left');

stop_proc($sim);
stop_receiver($rcv);
$node->stop;
done_testing();
