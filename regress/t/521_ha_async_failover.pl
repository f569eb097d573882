# 521_ha_async_failover.pl
#	Failover with an asynchronous standby: what can be lost, and the
#	warning that said so beforehand.
#
#	The same stream and failure as 520_ha_sync_failover.pl, with the
#	standby streaming asynchronously (synchronous_standby_names empty).
#	With webhook_inbox.require_synchronous_standby on, inbox_health (and so
#	postgres_exporter's webhook_inbox_ha_warning and the
#	WebhookInboxNoSynchronousStandby alert) says before the failure that
#	this primary acknowledges commits without a synchronous standby.
#
#	Halfway the standby loses its connection to the primary (its
#	primary_conninfo points nowhere, as a network partition would), which
#	an asynchronous primary does not wait for: it goes on acknowledging.
#	Then the primary stops and the lagging standby is promoted.  The
#	deliveries acknowledged after the cut are gone from the inbox, and the
#	provider never sends them again: the test counts them (more than zero,
#	by construction).  On loopback without the cut the standby is seldom
#	behind; the count is what a lag costs.  The sweep still repairs the
#	mirror from Stripe's events API, so no object is wrong in the end; a
#	provider without a changed-since list would keep the loss.
use strict;
use warnings;

use lib 'regress/t';
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use HATest;
use WorkerTest;

my ($src, $secret) = ('ha_async', 'whsec_haasync');
my $primary = ha_primary('async_primary');
add_source($primary, $src, 'stripe', $secret, 'http://127.0.0.1:9');
my $standby = ha_standby($primary, 'async_standby');

ok( $primary->poll_query_until('postgres',
		"SELECT state = 'streaming' AND sync_state = 'async' FROM pg_stat_replication WHERE application_name = 'async_standby'"),
	'the standby streams asynchronously');
is($primary->safe_psql('postgres', 'SELECT coalesce(synchronous_standby, \'none\') || \' | \' || ha_warning FROM webhook_inbox.inbox_health'),
	'none | synchronous_standby_names is empty: commits are acknowledged without a standby, and a failover loses the last acknowledged deliveries',
	'inbox_health warns: no synchronous standby');
is($primary->safe_psql('postgres', 'SET webhook_inbox.require_synchronous_standby = off; SELECT coalesce(ha_warning, \'none\') FROM webhook_inbox.inbox_health'),
	'none', 'with webhook_inbox.require_synchronous_standby off it does not');

my $conninfo = sprintf('host=%s,%s port=%d,%d dbname=postgres user=rcv target_session_attrs=read-write',
	$primary->host, $standby->host, $primary->port, $standby->port);
my $rcv = start_receiver(undef, { _db => $conninfo }, '--commit-timeout', 2000);
my $sim = start_stream($src, $secret, 521, $rcv->{url});
$primary->safe_psql('postgres', "UPDATE webhook_inbox.sources SET api_base = '$sim->{url}' WHERE name = '$src'");

my $half = wait_half($sim);
ok($half, 'half the stream acknowledged by the primary');

# the standby falls behind; the primary does not wait for it
$standby->append_conf('postgresql.conf', "primary_conninfo = 'host=/nonexistent port=1'\n");
$standby->reload;
ok($primary->poll_query_until('postgres', 'SELECT count(*) = 0 FROM pg_stat_replication'),
	'the standby is cut off from the primary');
my $cut = sim_status($sim)->{acked};
my $before = SimTest::poll_until(sub { my $s = sim_status($sim); $s && $s->{acked} >= $cut + 30 ? $s : undef }, 60);
ok($before, 'the primary goes on acknowledging without it');
my $t0 = Time::HiRes::time();
$primary->stop('immediate');
$standby->promote;
my $t_promoted = Time::HiRes::time() - $t0;
my $new = $standby->connstr('postgres');

my $done = wait_stream_done($sim, 120);
ok($done, 'the stream finished');
is($done->{failed}, 0, 'no delivery used up its retries');
my ($acked, $kept) = acked_kept($new, $src, $done);
cmp_ok($kept, '<', $acked, sprintf('acknowledged deliveries are lost: %d of %d', $acked - $kept, $acked));
cmp_ok($acked - $kept, '>=', $before->{acked} - $cut,
	'at least those acknowledged after the cut (' . ($before->{acked} - $cut) . ')');
diag(sprintf('async failover: standby cut off at %d acknowledged, primary stopped at %d, promotion %.1f s, '
	  . '%d deliveries answered 503, %d of %d acknowledged lost', $cut, $before->{acked}, $t_promoted,
	receiver_503($rcv), $acked - $kept, $acked));

ok(SimTest::poll_until(sub { worker_running($new) == 1 }, 60), 'the worker started on the promoted standby');
drained_at($new, 'after the failover');
sweep_and_verify_at($new, $src, $sim, 'async failover');

is(stop_receiver($rcv), 0, 'the receiver stops cleanly');
stop_proc($sim);
done_testing();
