# 522_ha_two_receivers.pl
#	Two receivers behind one address, one killed mid-stream: nothing
#	acknowledged is lost.
#
#	Two webhook-receiver processes on the same database, behind haproxy
#	(Debian's; round robin, a health check of each receiver's /readyz every
#	200 ms).  haproxy's own retries are off (retries 0): with them it
#	resends by itself most requests a dead receiver held, and the test is
#	about what the provider's retries cover.  The first
#	receiver's batches wait a second for company, so that it holds
#	deliveries when it is killed.  webhook-sim
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
# the first receiver's batches wait a second for company, so that it holds
# deliveries unanswered when it is killed (a couple of dozen at the
# stream's rate)
my @rcv = (start_receiver($node, '--commit-timeout', 2000, '--batch-delay', 1000),
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
note('the first receiver before the kill: '
	  . join(', ', grep { /^webhook_receiver_(requests|batches)_total/ } split /\n/, ReceiverTest::admin_get($rcv[0], '/metrics')->{content}));
kill 'KILL', $rcv[0]{pid};
$rcv[0]{harness}->finish;

my $done = wait_stream_done($sim, 120);
ok($done, 'the stream finished');
is($done->{failed}, 0, 'no delivery used up its retries');
my ($acked, $kept) = acked_kept($db, $src, $done);
is($kept, $acked, "0 of $acked acknowledged deliveries lost with one receiver killed");
my $r2_after = ReceiverTest::metric($rcv[1], "webhook_receiver_requests_total{source=\"$src\",status=\"200\"}") // 0;
cmp_ok($r2_after, '>', $r2_before, 'the surviving receiver took the rest of the stream');
cmp_ok($done->{attempts}, '>', $done->{delivered},
	'the provider retried what the killed receiver held unanswered (haproxy answered 502)');
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
