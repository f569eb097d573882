# 522_ha_two_receivers.pl
#	Two receivers behind one address, one killed mid-stream: nothing
#	acknowledged is lost.
#
#	Two webhook-receiver processes on the same database, behind haproxy
#	(Debian's; round robin, a health check of each receiver's /readyz every
#	200 ms, its own retries off: the test is about what the provider's
#	retries cover).  The first receiver is killed while a batch of its
#	deliveries is held in the database (a test trigger waits for an
#	advisory lock the test holds), so that it certainly dies with
#	deliveries unanswered.  webhook-sim
#	streams a holed Stripe stream to haproxy's address; halfway one
#	receiver is killed with SIGKILL.  The deliveries it held unanswered
#	fail at the provider (haproxy answers 502), the provider retries them
#	and the other receiver takes them: every event the provider saw a 2xx
#	for is in the inbox, the survivor answered after the kill, and after
#	the sweeps webhook-sim verify finds no wrong object.
use strict;
use warnings;

use lib 'regress/t';
use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use HATest;
use WorkerTest;

plan skip_all => 'haproxy is not installed (scripts/deps.sh installs it)'
  unless grep { -x "$_/haproxy" } split(/:/, $ENV{PATH}), '/usr/sbin';
my $haproxy = (grep { -x "$_/haproxy" } split(/:/, $ENV{PATH}), '/usr/sbin')[0] . '/haproxy';

my ($src, $secret) = ('ha_two', 'whsec_hatwo');
my $node = worker_node('two_receivers');
add_source($node, $src, 'stripe', $secret, 'http://127.0.0.1:9');
my $db = $node->connstr('postgres');
# The first receiver logs in as rcv1.  To kill it while it certainly holds
# deliveries unanswered, its batches can be held at their audit insert: a
# test trigger waits there for an advisory lock the test takes, for rcv1's
# sessions only.
$node->safe_psql('postgres', q{
	CREATE ROLE rcv1 LOGIN IN ROLE webhook_inbox_receiver;
	CREATE FUNCTION public.hold_rcv1() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
	BEGIN
		IF session_user = 'rcv1' THEN
			PERFORM pg_advisory_xact_lock_shared(522);
		END IF;
		RETURN NULL;
	END $$;
	CREATE TRIGGER hold_rcv1 AFTER INSERT ON webhook_inbox.deliveries
		FOR EACH STATEMENT EXECUTE FUNCTION public.hold_rcv1();
});
my @rcv = (start_receiver($node, { _db => "$db user=rcv1" }, '--commit-timeout', 30000),
	start_receiver($node, '--commit-timeout', 2000));

# one address for both
my $port = PostgreSQL::Test::Cluster::get_free_port();
my $tmp = PostgreSQL::Test::Utils::tempdir;
open(my $fh, '>', "$tmp/haproxy.cfg") or die;
print $fh <<"EOF";
global
	maxconn 256
defaults
	mode http
	timeout connect 1s
	timeout client 10s
	timeout server 10s
	retries 0
frontend hooks
	bind 127.0.0.1:$port
	default_backend receivers
backend receivers
	balance roundrobin
	option httpchk GET /readyz
	server r1 127.0.0.1:$rcv[0]{port} check port $rcv[0]{admin_port} inter 200ms fall 1 rise 1
	server r2 127.0.0.1:$rcv[1]{port} check port $rcv[1]{admin_port} inter 200ms fall 1 rise 1
EOF
close $fh;
my ($hout, $herr) = ('', '');
my $lb = IPC::Run::start([ $haproxy, '-db', '-f', "$tmp/haproxy.cfg" ], '<', \undef, '>', \$hout, '2>', \$herr);
ok( SimTest::poll_until(sub {
		my ($st) = http_json('GET', "http://127.0.0.1:$port/hooks/nosuch");
		$lb->pump_nb;
		return $st == 405 || $st == 404;
	}, 30),
	'haproxy forwards to the receivers') or diag($herr);

my $sim = start_stream($src, $secret, 522, "http://127.0.0.1:$port", '--concurrency', 32);
$node->safe_psql('postgres', "UPDATE webhook_inbox.sources SET api_base = '$sim->{url}' WHERE name = '$src'");

my $half = wait_half($sim);
ok($half, 'half the stream acknowledged through both receivers');
my $r2_before = ReceiverTest::metric($rcv[1], "webhook_receiver_requests_total{source=\"$src\",status=\"200\"}") // 0;
cmp_ok(ReceiverTest::metric($rcv[0], "webhook_receiver_requests_total{source=\"$src\",status=\"200\"}") // 0, '>', 0,
	'the first receiver answered part of it');
cmp_ok($r2_before, '>', 0, 'and the second one the rest');

# hold the first receiver's next batch, then kill it
my ($lin, $lout) = ("SELECT pg_advisory_lock(522);\n", '');
my $locker = IPC::Run::start([ 'psql', '-X', '-q', '-d', $db ], '<', \$lin, '>', \$lout, '2>&1');
$locker->pump while length $lin;
ok( $node->poll_query_until('postgres', q{
		SELECT count(*) > 0 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		 WHERE l.locktype = 'advisory' AND l.objid = 522 AND NOT l.granted AND a.usename = 'rcv1'}),
	'the first receiver holds a batch of deliveries, unanswered');
kill 'KILL', $rcv[0]{pid};
$rcv[0]{harness}->finish;
$lin .= "SELECT pg_advisory_unlock(522);\n\\q\n";
$locker->finish;

my $done = wait_stream_done($sim, 120);
ok($done, 'the stream finished');
is($done->{failed}, 0, 'no delivery used up its retries');
my ($acked, $kept) = acked_kept($db, $src, $done);
is($kept, $acked, "0 of $acked acknowledged deliveries lost with one receiver killed");
my $r2_after = ReceiverTest::metric($rcv[1], "webhook_receiver_requests_total{source=\"$src\",status=\"200\"}") // 0;
cmp_ok($r2_after, '>', $r2_before, 'the surviving receiver took the rest of the stream');
cmp_ok($done->{attempts}, '>', $done->{delivered},
	'the provider retried what the killed receiver held unanswered (haproxy answered 502)');
my $held = $node->safe_psql('postgres', q{
	SELECT count(*) FROM webhook_inbox.deliveries d JOIN webhook_inbox.sources s ON s.id = d.source_id
	 WHERE s.name = 'ha_two' AND d.outcome = 'duplicate'});
note("deliveries recorded as duplicates (the held batch committed after its receiver died, then retried): $held");
diag(sprintf('two receivers: killed one at %d acknowledged; %d sends for %d deliveries (%d retried); '
	  . 'the survivor answered %d after the kill', $half->{acked}, $done->{attempts}, $done->{delivered},
	$done->{attempts} - $done->{delivered}, $r2_after - $r2_before));

drained_at($db, 'two receivers');
sweep_and_verify_at($db, $src, $sim, 'two receivers');

$lb->signal('TERM');
$lb->finish;
is(stop_receiver($rcv[1]), 0, 'the surviving receiver stops cleanly');
stop_proc($sim);
done_testing();
