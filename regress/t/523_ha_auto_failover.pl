# 523_ha_auto_failover.pl
#	Automatic failover with pg_auto_failover: the primary's node is killed
#	under a stream, the monitor promotes the other node, the receiver
#	follows it; nothing acknowledged is lost and no object is wrong.
#
#	A pg_auto_failover monitor and two Postgres nodes on loopback
#	(pg_autoctl create monitor / create postgres / run, as
#	docs/operations.md shows them), the worker preloaded on both nodes
#	(their postgresql.conf, which the second node's pg_basebackup copies).
#	With two nodes pg_auto_failover replicates synchronously
#	(synchronous_standby_names = 'ANY 1 (pgautofailover_standby_2)'), which
#	inbox_health confirms.  The receiver gets the formation's URI from
#	`pg_autoctl show uri --formation default` (both hosts,
#	target_session_attrs=read-write).  webhook-sim streams a holed Stripe
#	stream; halfway every process of the primary's node (its pg_autoctl
#	and its Postgres) is killed with SIGKILL, as a machine that dies.  The
#	monitor's health checks run every second here (a minute or so with the
#	defaults).  The test reports the time to promotion and the deliveries
#	answered 503 meanwhile.
use strict;
use warnings;

use lib 'regress/t';
use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use HATest;
use WorkerTest;

plan skip_all => 'pg_autoctl is not installed (scripts/deps.sh installs postgresql-15-auto-failover)'
  unless grep { -x "$_/pg_autoctl" } split(/:/, $ENV{PATH});
# pg_auto_failover is built per major (its monitor is the extension
# pgautofailover): Debian 12 packages it for 15 only
my $pkglibdir = `pg_config --pkglibdir`;
chomp $pkglibdir;
plan skip_all => "pg_auto_failover is not installed for this PostgreSQL (no $pkglibdir/pgautofailover.so)"
  unless -f "$pkglibdir/pgautofailover.so";

my $tmp = PostgreSQL::Test::Utils::tempdir('autofailover');
# pg_autoctl reaches its local Postgres over the default socket directory
# (its Postgres has no other): not the test framework's PGHOST
delete $ENV{$_} for qw(PGHOST PGHOSTADDR PGPORT PGDATABASE PGUSER);
# pg_autoctl keeps its configuration and state under XDG directories: the test's own
local $ENV{XDG_CONFIG_HOME} = "$tmp/config";
local $ENV{XDG_DATA_HOME} = "$tmp/share";
local $ENV{XDG_RUNTIME_DIR} = "$tmp/run";
mkdir "$tmp/run", 0700;
my $bindir = `pg_config --bindir`;
chomp $bindir;
my $pgctl = "$bindir/pg_ctl";
my %port = map { $_ => PostgreSQL::Test::Cluster::get_free_port() } qw(monitor node1 node2);
my $monitor_uri = "postgres://autoctl_node\@127.0.0.1:$port{monitor}/pg_auto_failover?sslmode=disable";
my $monitor_db = "host=127.0.0.1 port=$port{monitor} dbname=pg_auto_failover";
my %db = map { $_ => "host=127.0.0.1 port=$port{$_} dbname=postgres" } qw(node1 node2);
my %run;

# pg_autoctl ARGS: runs to completion, dies on failure; returns its output
sub autoctl
{
	my (@args) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'pg_autoctl', @args ], '<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(120))
	  or die "pg_autoctl @args: $err";
	note("pg_autoctl @args: " . (split /\n/, $err)[-1]) if $err;
	return $out;
}

# pg_autoctl run for one pgdata, in the background, its log in a file
sub autoctl_run
{
	my ($name) = @_;
	$run{$name} = IPC::Run::start([ 'pg_autoctl', 'run', '--pgdata', "$tmp/$name" ],
		'<', \undef, '>', "$tmp/$name.log", '2>&1');
}

# every process of a node: pg_autoctl run and all its descendants (its
# services, Postgres and Postgres's processes)
sub process_tree
{
	my ($root) = @_;
	my %kids;
	for my $stat (glob '/proc/[0-9]*/stat')
	{
		open(my $fh, '<', $stat) or next;
		my $line = <$fh> // next;
		my ($pid, $ppid) = $line =~ /^(\d+) \(.*\) \S+ (\d+)/s or next;
		push @{ $kids{$ppid} }, $pid;
	}
	my @tree = ($root);
	for (my $i = 0; $i < @tree; $i++)
	{
		push @tree, @{ $kids{ $tree[$i] } // [] };
	}
	return @tree;
}

# the monitor's view of a node: reported state / assigned state
sub node_state
{
	my ($name) = @_;
	return eval {
		sql_at($monitor_db, "SELECT reportedstate || '/' || goalstate FROM pgautofailover.node WHERE nodename = '$name'");
	} // '';
}

END
{
	# whatever happened, no pg_autoctl (and so no Postgres) outlives the test
	for my $h (values %run)
	{
		next unless $h->pumpable;
		$h->signal('TERM');
		eval { $h->finish; 1 } or eval { $h->kill_kill };
	}
}

###########################################################################
# The monitor and two nodes
###########################################################################

my $t_setup = Time::HiRes::time();
autoctl('create', 'monitor', '--pgdata', "$tmp/monitor", '--pgport', $port{monitor},
	'--hostname', '127.0.0.1', '--auth', 'trust', '--no-ssl', '--pgctl', $pgctl);
# pg_auto_failover sizes shared_buffers for the whole machine (a quarter of
# it); after its include, a test-sized one wins
append_to_file("$tmp/monitor/postgresql.conf", "shared_buffers = '128MB'\n");
autoctl_run('monitor');
ok(poll_sql($monitor_db, 'SELECT true', 60), 'the monitor runs');

# the first node: pg_autoctl initialises it; the worker's settings are
# added before it first starts (after pg_auto_failover's include, so
# shared_preload_libraries and a test-sized shared_buffers win)
autoctl('create', 'postgres', '--pgdata', "$tmp/node1", '--pgport', $port{node1}, '--hostname', '127.0.0.1',
	'--name', 'node1', '--auth', 'trust', '--no-ssl', '--monitor', $monitor_uri, '--pgctl', $pgctl);
append_to_file("$tmp/node1/postgresql.conf", ha_conf() . "shared_buffers = '128MB'\n");
autoctl_run('node1');
ok(SimTest::poll_until(sub { node_state('node1') eq 'single/single' }, 60), 'node1 runs alone (single)');
ok(poll_sql($db{node1}, 'SELECT NOT pg_is_in_recovery()', 60), "node1's Postgres accepts connections");
sql_at($db{node1}, 'CREATE EXTENSION webhook_inbox');
sql_at($db{node1}, 'CREATE ROLE rcv LOGIN IN ROLE webhook_inbox_receiver');
my ($src, $secret) = ('ha_auto', 'whsec_haauto');
sql_at($db{node1}, "SELECT webhook_inbox.create_source('$src', 'stripe', '$secret', api_base => 'http://127.0.0.1:9')");
my $t_node1 = Time::HiRes::time() - $t_setup;

# the second node: pg_autoctl makes it a standby of node1 (pg_basebackup,
# whose spread checkpoint took half a minute after CREATE EXTENSION: a
# checkpoint first leaves it nothing to write)
sql_at($db{node1}, 'CHECKPOINT');
autoctl('create', 'postgres', '--pgdata', "$tmp/node2", '--pgport', $port{node2}, '--hostname', '127.0.0.1',
	'--name', 'node2', '--auth', 'trust', '--no-ssl', '--monitor', $monitor_uri, '--pgctl', $pgctl);
autoctl_run('node2');
ok( SimTest::poll_until(sub { node_state('node1') eq 'primary/primary' && node_state('node2') eq 'secondary/secondary' },
		90),
	'node1 primary, node2 secondary') or diag(autoctl('show', 'state', '--pgdata', "$tmp/monitor"));
my $t_setup_done = Time::HiRes::time() - $t_setup;
diag(sprintf('pg_auto_failover: monitor and node1 ready after %.1f s, node2 secondary after %.1f s',
	$t_node1, $t_setup_done));
note(autoctl('show', 'state', '--pgdata', "$tmp/monitor"));

# now that the formation stands: health checks every second, a node
# unhealthy after two seconds, and a dead primary not waited for longer
# than three (defaults: 5 s, 20 s, 30 s)
sql_at($monitor_db, "ALTER SYSTEM SET pgautofailover.$_") for (
	'health_check_period = 1000', 'health_check_timeout = 1000', 'health_check_max_retries = 1',
	'health_check_retry_delay = 500', 'node_considered_unhealthy_timeout = 2000',
	'primary_demote_timeout = 3000');
sql_at($monitor_db, 'SELECT pg_reload_conf()');
ok( poll_sql($db{node1},
		"SELECT synchronous_standby = 'pgautofailover_standby_2' AND ha_warning IS NULL FROM webhook_inbox.inbox_health"),
	'pg_auto_failover replicates synchronously: inbox_health names the standby, no ha_warning');
is(worker_running($db{node1}), 1, 'the worker runs on node1');
is(worker_running($db{node2}), 0, 'not on the secondary');

###########################################################################
# The stream, and the primary's node killed halfway
###########################################################################

my ($uri) = autoctl('show', 'uri', '--pgdata', "$tmp/monitor", '--formation', 'default') =~ m{^(postgres://\S+)}m;
like($uri, qr{^postgres://127\.0\.0\.1:$port{node1},127\.0\.0\.1:$port{node2}/postgres\?target_session_attrs=read-write},
	"the formation's URI names both nodes, read-write");
(my $rcv_uri = $uri) =~ s{^postgres://}{postgres://rcv\@};
my $rcv = start_receiver(undef, { _db => $rcv_uri }, '--commit-timeout', 2000);
my $sim = start_stream($src, $secret, 523, $rcv->{url});
sql_at($db{node1}, "UPDATE webhook_inbox.sources SET api_base = '$sim->{url}' WHERE name = '$src'");

my $half = wait_half($sim);
ok($half, 'half the stream acknowledged by node1');
my @tree = process_tree($run{node1}{KIDS}[0]{PID});
cmp_ok(scalar(@tree), '>', 5, 'node1 is pg_autoctl with its services and Postgres (' . scalar(@tree) . ' processes)');
my $t0 = Time::HiRes::time();
kill 'KILL', @tree;
$run{node1}->finish;
delete $run{node1};

ok( SimTest::poll_until(sub { node_state('node2') =~ m{^(wait_primary|primary)/} }, 120),
	'the monitor promoted node2') or diag(autoctl('show', 'state', '--pgdata', "$tmp/monitor"));
my $t_promoted = Time::HiRes::time() - $t0;
my $at_kill = $half->{acked};
ok(SimTest::poll_until(sub { my $s = sim_status($sim); $s && $s->{acked} > $at_kill + 20 }, 60),
	'deliveries are acknowledged again: the receiver followed the promotion');
my $t_resumed = Time::HiRes::time() - $t0;

my $done = wait_stream_done($sim, 120);
ok($done, 'the stream finished');
is($done->{failed}, 0, 'no delivery used up its retries');
cmp_ok($done->{dropped}, '>', 0, "the stream has holes ($done->{dropped} events never sent)");
my ($acked, $kept) = acked_kept($db{node2}, $src, $done);
is($kept, $acked, "0 of $acked acknowledged deliveries lost: every one is in node2's inbox");
my $n503 = receiver_503($rcv);
diag(sprintf('pg_auto_failover: setup %.1f s; node1 killed at %d acknowledged; node2 promoted after %.1f s, '
	  . 'intake again after %.1f s; %d deliveries answered 503; %d of %d acknowledged kept',
	$t_setup_done, $at_kill, $t_promoted, $t_resumed, $n503, $kept, $acked));

ok(SimTest::poll_until(sub { worker_running($db{node2}) == 1 }, 60), 'the worker started on node2');
drained_at($db{node2}, 'after the automatic failover');
my $repaired = sweep_and_verify_at($db{node2}, $src, $sim, 'pg_auto_failover');
cmp_ok($repaired, '>', 0, "the sweeps repaired the holes ($repaired)");

# node2 runs without a standby now (wait_primary): commits are no longer
# synchronous, and inbox_health says so until node1 (or a new node) is back
like(sql_at($db{node2}, 'SELECT ha_warning FROM webhook_inbox.inbox_health'), qr/^synchronous_standby_names is empty/,
	'node2 without a standby: inbox_health warns');

is(stop_receiver($rcv), 0, 'the receiver stops cleanly');
stop_proc($sim);
for my $name (qw(node2 monitor))
{
	$run{$name}->signal('TERM');
	$run{$name}->finish;
	delete $run{$name};
}
done_testing();
