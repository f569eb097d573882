# 520_ha_sync_failover.pl
#	Failover with a synchronous standby loses nothing acknowledged.
#
#	A primary with the worker preloaded and a synchronous standby
#	(synchronous_standby_names names it, synchronous_commit on); the
#	receiver is given both (host=…,… port=P1,P2 target_session_attrs=
#	read-write).  webhook-sim streams a holed Stripe stream through it;
#	halfway the primary is stopped immediately and the standby promoted.
#	Every event the provider saw a 2xx for is in the new primary's inbox;
#	the worker, which never ran on the standby (BgWorkerStart_Recovery-
#	Finished), starts there and drains the inbox; the sweeps repair the
#	holes and webhook-sim verify finds no wrong object, and each
#	PaymentIntent that succeeded fired its effect (an effect rule) exactly
#	once, whichever primary saved it.  On the way,
#	inbox_health's synchronous_standby and ha_warning follow the standby:
#	waiting while none is connected, quiet while one streams, nothing on
#	the standby, warning again on the promoted server that has none.
use strict;
use warnings;

use lib 'regress/t';
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use HATest;
use WorkerTest;

my ($src, $secret) = ('ha_sync', 'whsec_hasync');
my $primary = ha_primary('sync_primary');
add_source($primary, $src, 'stripe', $secret, 'http://127.0.0.1:9');
# an effect per PaymentIntent that succeeds (an outbox kind: it waits for a
# consumer), to count across the failover
$primary->safe_psql('postgres', q{
	INSERT INTO webhook_inbox.effect_rules (object_type, from_status, to_status, kind, request, owner)
	VALUES ('payment_intent', '*', 'succeeded', 'receipt', '{"payment_intent": "{object_id}"}', 'operations')});

# named but not connected yet: commits would wait, and inbox_health says so
$primary->append_conf('postgresql.conf', "synchronous_standby_names = 'sync_standby'\n");
$primary->reload;
ok( $primary->poll_query_until('postgres',
		"SELECT ha_warning LIKE 'no synchronous standby is connected (synchronous_standby_names is sync_standby)%' "
		  . "FROM webhook_inbox.inbox_health"),
	'no standby connected yet: ha_warning says that commits wait');
my $standby = ha_standby($primary, 'sync_standby');
ok( $primary->poll_query_until('postgres',
		"SELECT synchronous_standby = 'sync_standby' AND ha_warning IS NULL FROM webhook_inbox.inbox_health"),
	'the standby streams synchronously: synchronous_standby names it, no ha_warning');
is($primary->safe_psql('postgres', 'SET synchronous_commit = local; SELECT ha_warning FROM webhook_inbox.inbox_health'),
	'synchronous_commit is local: commits are acknowledged without waiting for a standby, and a failover loses the last acknowledged deliveries',
	'a session with synchronous_commit = local is warned');
is($standby->safe_psql('postgres', 'SELECT coalesce(ha_warning, \'none\') FROM webhook_inbox.inbox_health'),
	'none', 'the standby acknowledges nothing: no ha_warning there');
is(worker_running($standby->connstr('postgres')), 0, 'no worker on the standby (it cannot write)');
is(worker_running($primary->connstr('postgres')), 1, 'the worker runs on the primary');

# the receiver follows the primary: both hosts, read-write only
my $conninfo = sprintf('host=%s,%s port=%d,%d dbname=postgres user=rcv target_session_attrs=read-write',
	$primary->host, $standby->host, $primary->port, $standby->port);
my $rcv = start_receiver(undef, { _db => $conninfo }, '--commit-timeout', 2000);
my $sim = start_stream($src, $secret, 520, $rcv->{url});
$primary->safe_psql('postgres', "UPDATE webhook_inbox.sources SET api_base = '$sim->{url}' WHERE name = '$src'");

my $half = wait_half($sim);
ok($half, 'half the stream acknowledged by the primary');
my $t0 = Time::HiRes::time();
$primary->stop('immediate');
$standby->promote;
my $t_promoted = Time::HiRes::time() - $t0;
my $new = $standby->connstr('postgres');
# claims the old primary's worker held: their leases (webhook_inbox.lease)
# must run out before the new worker takes the objects over
my $claimed_at_stop = sql_at($new, "SELECT count(*) FROM webhook_inbox.inbox WHERE status = 'processing'");
my $effects_at_stop = sql_at($new, "SELECT count(*) FROM webhook_inbox.effects WHERE kind = 'receipt'");
my $at_stop = $half->{acked};
ok(SimTest::poll_until(sub { my $s = sim_status($sim); $s && $s->{acked} > $at_stop + 20 }, 60),
	'deliveries are acknowledged again, by the promoted standby');
my $t_resumed = Time::HiRes::time() - $t0;

my $done = wait_stream_done($sim, 120);
ok($done, 'the stream finished');
is($done->{failed}, 0, 'no delivery used up its retries');
cmp_ok($done->{dropped}, '>', 0, "the stream has holes ($done->{dropped} events never sent)");
my ($acked, $kept) = acked_kept($new, $src, $done);
is($kept, $acked, "0 of $acked acknowledged deliveries lost: every one is in the new primary's inbox");
my $n503 = receiver_503($rcv);
diag(sprintf('sync failover: acked at the stop %d, promotion %.1f s, intake again after %.1f s, '
	  . '%d deliveries answered 503, %d of %d acknowledged kept', $at_stop, $t_promoted, $t_resumed,
	$n503, $kept, $acked));
cmp_ok($n503, '>', 0, 'deliveries were answered 503 during the failover (and retried)');

# the worker starts only where it can write, and works there
ok(SimTest::poll_until(sub { worker_running($new) == 1 }, 60), 'the worker started on the promoted standby');
drained_at($new, 'after the failover');
my $t_drained = Time::HiRes::time() - $t0;
diag(sprintf('sync failover: %d events under the old worker\'s claims at the stop; inbox drained %.1f s after it',
	$claimed_at_stop, $t_drained));
cmp_ok(sql_at($new, 'SELECT claimed FROM webhook_inbox.worker_stats()'), '>', 0,
	"the promoted standby's worker claimed objects");
my $repaired = sweep_and_verify_at($new, $src, $sim, 'sync failover');
cmp_ok($repaired, '>', 0, "the sweeps repaired the holes ($repaired)");

# effects: one per PaymentIntent that succeeded, whichever primary saved it
my @succeeded = sort map { $_->{id} }
  grep { $_->{type} eq 'payment_intent' && ($_->{status} // '') eq 'succeeded' } @{ sim_truth($sim)->{objects} };
cmp_ok(scalar(@succeeded), '>', 0, 'PaymentIntents succeeded during the stream (' . scalar(@succeeded) . ')');
is(sql_at($new, "SELECT string_agg(object_id || ' ' || n, ',' ORDER BY object_id) FROM "
	  . "(SELECT object_id, count(*) n FROM webhook_inbox.effects WHERE kind = 'receipt' GROUP BY 1) e"),
	join(',', map { "$_ 1" } @succeeded),
	'each succeeded PaymentIntent fired its effect exactly once across the failover');
diag(sprintf('sync failover: %d effects, %d of them fired on the old primary', scalar(@succeeded), $effects_at_stop));

# the promoted server has no standby of its own: the warning is back
is(sql_at($new, 'SHOW synchronous_standby_names'), '', 'the promoted standby has no synchronous_standby_names');
like(sql_at($new, 'SELECT ha_warning FROM webhook_inbox.inbox_health'), qr/^synchronous_standby_names is empty/,
	'and inbox_health warns on it');

is(stop_receiver($rcv), 0, 'the receiver stops cleanly');
stop_proc($sim);
done_testing();
