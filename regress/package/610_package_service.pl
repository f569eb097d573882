# The packaged receiver, configured exactly as the README's "Install"
# section says, logs in and accepts a delivery on a stock Debian cluster
# (pg_createcluster: "local all all peer"): run as the service's user
# (webhook-receiver, HOME /nonexistent, so no ~/.pgpass) with the packaged
# /etc/webhook-receiver/receiver.conf (root:webhook-receiver 0640) whose db
# line is the README's, it is first refused by peer authentication (the OS
# user is not the role), then, with the README's pg_ident map and pg_hba
# line added and the cluster reloaded, it connects by itself and stores a
# signed delivery.
#
# Needs root and the packages installed with dpkg (scripts/test-package.sh
# runs it so, as root, in its private mount namespace or on a disposable
# machine); skipped otherwise.
use strict;
use warnings;
use Digest::SHA qw(hmac_sha256_hex);
use File::Temp ();
use HTTP::Tiny;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

plan skip_all => 'needs root and the packages installed with dpkg (scripts/test-package.sh)'
  unless $> == 0 && ($ENV{WI_PKG_MODE} // '') eq 'dpkg';

my $readme = slurp_file('README.md');
my ($ident) = $readme =~ /^(webhook\s+webhook-receiver\s+webhook_receiver)\s*$/m;
my ($hba) = $readme =~ /^(local\s+all\s+webhook_receiver\s+peer\s+map=webhook)\s*$/m;
my ($db) = $readme =~ /^sudoedit \/etc\/webhook-receiver\/receiver\.conf\s+# (db = "[^"]*")$/m;
my ($role) = $readme =~ /^(CREATE ROLE webhook_receiver LOGIN IN ROLE webhook_inbox_receiver;)$/m;
ok($ident && $hba && $db && $role, "the README gives the role, the pg_ident map, the pg_hba line and the db line")
  or diag(join "\n", map { $_ // '(missing)' } $ident, $hba, $db, $role);
my ($dbname) = $db =~ /dbname=(\w+)/;

sub run_ok
{
	my ($cmd, $what) = @_;
	my ($o, $e) = ('', '');
	my $ok = IPC::Run::run($cmd, '<', \undef, '>', \$o, '2>', \$e);
	ok($ok, $what) or diag("@$cmd: $o$e");
	return $o;
}

# the sockets of this test's cluster in a private /run/postgresql when
# the packages are installed in a private mount namespace
if ($ENV{WI_PKG_NAMESPACE})
{
	mkdir '/run/postgresql';
	run_ok([ 'mount', '-t', 'tmpfs', '-o', 'mode=2775', 'tmpfs', '/run/postgresql' ],
		'a private /run/postgresql');
	run_ok([ 'chown', 'postgres:postgres', '/run/postgresql' ], 'owned by postgres');
}

# a stock cluster (sockets only: no TCP port of the machine is taken)
my $cluster = 'wipkg' . $$;
my $port = PostgreSQL::Test::Cluster::get_free_port();
run_ok([ 'pg_createcluster', '15', $cluster, '--port', $port ],
	'pg_createcluster: a stock Debian cluster');
my $etc = "/etc/postgresql/15/$cluster";
like(slurp_file("$etc/pg_hba.conf"), qr/^local\s+all\s+all\s+peer\s*$/m, 'whose pg_hba.conf has "local all all peer"');
PostgreSQL::Test::Utils::append_to_file("$etc/conf.d/wipkg.conf", "listen_addresses = ''\n");
run_ok([ 'pg_ctlcluster', '15', $cluster, 'start' ], 'started');

sub psql
{
	my ($dbn, $sql) = @_;
	return run_ok([ 'runuser', '-u', 'postgres', '--', 'psql', '-X', '-At', '-v', 'ON_ERROR_STOP=1',
			'-p', $port, '-h', '/var/run/postgresql', '-d', $dbn, '-c', $sql ], $sql);
}
psql('postgres', "CREATE DATABASE $dbname");
psql($dbname, 'CREATE EXTENSION webhook_inbox');
psql($dbname, $role);
my $secret = 'whsec_package_service';
psql($dbname, "SELECT webhook_inbox.create_source('pkg-live', 'stripe', '$secret')");

# the packaged configuration, edited as sudoedit would (its owner and mode
# kept): the README's db line on this cluster's port, free ports to listen on
my $conf = '/etc/webhook-receiver/receiver.conf';
my $listen = PostgreSQL::Test::Cluster::get_free_port();
my $admin = PostgreSQL::Test::Cluster::get_free_port();
(my $dbline = $db) =~ s/"$/ port=$port"/;
(my $text = slurp_file($conf)) =~ s/^db = .*$/$dbline/m;
$text =~ s/^listen = .*$/listen = 127.0.0.1:$listen/m;
$text .= "admin-listen = 127.0.0.1:$admin\n";
open(my $fh, '>', $conf) or die "$conf: $!";
print $fh $text;
close $fh;
is(`stat -c '%U:%G %a' $conf`, "root:webhook-receiver 640\n", 'the configuration stays root:webhook-receiver 0640');

# the service's user and environment (the unit's User=, Group=, no home)
my $log = File::Temp->new;
my $receiver = IPC::Run::start(
	[ 'runuser', '-u', 'webhook-receiver', '-g', 'webhook-receiver', '--', 'env', '-i', 'HOME=/nonexistent',
		'PATH=/usr/bin:/bin', '/usr/bin/webhook-receiver', '--config', $conf ],
	'<', \undef, '>', $log->filename, '2>&1');
my $http = HTTP::Tiny->new(timeout => 5);

sub poll
{
	my ($cond, $what) = @_;
	my $deadline = Time::HiRes::time() + 30;
	while (Time::HiRes::time() < $deadline)
	{
		return 1 if $cond->();
		Time::HiRes::sleep(0.1);
	}
	diag("timed out waiting for $what");
	return 0;
}

# stock peer authentication: the OS user webhook-receiver is no role
ok(poll(sub { slurp_file($log->filename) =~ /Peer authentication failed for user "webhook_receiver"/ }, 'peer refusal'),
	'with the stock pg_hba.conf, peer authentication refuses the service')
  or diag(slurp_file($log->filename));
is($http->get("http://127.0.0.1:$admin/readyz")->{status}, 503, 'and it is not ready');

# the README's map and line, then a reload: the receiver reconnects by itself
PostgreSQL::Test::Utils::append_to_file("$etc/pg_ident.conf", "$ident\n");
(my $hbatext = slurp_file("$etc/pg_hba.conf")) =~ s/^(local\s+all\s+all\s+peer)/$hba\n$1/m;
open($fh, '>', "$etc/pg_hba.conf") or die;
print $fh $hbatext;
close $fh;
run_ok([ 'pg_ctlcluster', '15', $cluster, 'reload' ], 'the README\'s pg_ident map and pg_hba line, reloaded');
ok(poll(sub { $http->get("http://127.0.0.1:$admin/readyz")->{status} == 200 }, 'ready'),
	'the packaged receiver logs in as webhook_receiver by peer and is ready')
  or diag(slurp_file($log->filename));

my $body = '{"id":"evt_pkg_service","object":"event","type":"customer.created","data":{"object":{"id":"cus_1","object":"customer"}}}';
my $t = time;
my $res = $http->post("http://127.0.0.1:$listen/hooks/pkg-live",
	{ content => $body, headers => { 'Stripe-Signature' => "t=$t,v1=" . hmac_sha256_hex("$t.$body", $secret),
		'Content-Type' => 'application/json' } });
is("$res->{status} $res->{content}", '200 new', 'it accepts a signed delivery');
is(psql($dbname, "SELECT string_agg(event_id, ' ') FROM webhook_inbox.inbox"), "evt_pkg_service\n", 'stored');
is(psql($dbname, "SELECT count(*) > 0 FROM pg_stat_activity WHERE usename = 'webhook_receiver' AND datname = '$dbname'"),
	"t\n", 'by a session of the role webhook_receiver');

kill 'TERM', $receiver->{KIDS}[0]{PID};
$receiver->finish;
is($receiver->result(0), 0, 'SIGTERM: exit 0');
run_ok([ 'pg_dropcluster', '15', $cluster, '--stop' ], 'the cluster dropped');
done_testing();
