# The Debian packages, installed (scripts/test-package.sh installs them with
# dpkg -i, or unpacks them into a private root with a copy of PostgreSQL 15):
# their files run the whole pg_regress suite on a clean cluster, upgrade
# from 0.1.0, and the packaged receiver serves with its packaged
# configuration, reloads on SIGHUP and drains on SIGTERM; systemd-analyze
# accepts the service unit.
use strict;
use warnings;
use lib 'regress/t';
use HTTP::Tiny;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use ReleaseTest;

my $root = $ENV{WI_PKG_ROOT} or plan skip_all => 'run by scripts/test-package.sh';
$root =~ s{/$}{};
my $pgdir = "$root/usr/lib/postgresql/15";
my $version = ext_version();

my $node = PostgreSQL::Test::Cluster->new('package', install_path => $pgdir);
$node->init;
$node->append_conf('postgresql.conf', slurp_file('regress/regress.conf'));
$node->start;

is($node->safe_psql('postgres', 'SHOW shared_preload_libraries'), 'webhook_inbox',
	'the packaged library preloads');
is($node->safe_psql('postgres', q{SELECT default_version FROM pg_available_extensions WHERE name = 'webhook_inbox'}),
	$version, "the packaged control file offers $version");
like($node->safe_psql('postgres', q{SELECT setting FROM pg_config WHERE name = 'PKGLIBDIR'}),
	qr{^\Q$pgdir\E/lib$}, 'the server is the one the packages were installed into');

# the whole pg_regress suite on the packaged files
$node->safe_psql('postgres', 'CREATE DATABASE contrib_regression');
$node->safe_psql('contrib_regression', 'CREATE EXTENSION webhook_inbox');
my @regress = sort map { m{([^/]+)\.sql$} } glob('regress/sql/*.sql');
my $outdir = PostgreSQL::Test::Utils::tempdir();
my ($out, $err) = ('', '');
my $ok = IPC::Run::run([ $ENV{PG_REGRESS}, '--use-existing', '--dbname=contrib_regression',
		'--host=' . $node->host, '--port=' . $node->port, "--bindir=$pgdir/bin",
		'--inputdir=regress', "--outputdir=$outdir", @regress ], '>', \$out, '2>', \$err);
ok($ok, 'the pg_regress suite passes on the packaged extension')
  or diag("$out\n$err\n" . (-f "$outdir/regression.diffs" ? substr(slurp_file("$outdir/regression.diffs"), 0, 20000) : ''));
like($out, qr/All \d+ tests passed/, 'every test ran');

# the packaged upgrade path
$node->safe_psql('postgres', 'CREATE DATABASE upgraded');
$node->safe_psql('upgraded', "CREATE EXTENSION webhook_inbox VERSION '0.1.0'");
$node->safe_psql('upgraded', 'ALTER EXTENSION webhook_inbox UPDATE');
is($node->safe_psql('upgraded', q{SELECT extversion FROM pg_extension WHERE extname = 'webhook_inbox'}),
	$version, "0.1.0 from the package updates to $version");

# the packaged binaries
for my $name ('webhook-receiver', 'webhook-sim')
{
	my ($o, $e);
	IPC::Run::run([ "$root/usr/bin/$name", '--version' ], '>', \$o, '2>', \$e);
	is($o, "$name $version\n", "the packaged $name answers --version");
	my $page = "$root/usr/share/man/man1/$name.1.gz";
	IPC::Run::run([ 'man', '-l', $page ], '>', \$o, '2>', \$e, init => sub { $ENV{MANWIDTH} = 80 });
	like($o, qr/NAME.*\Q$name\E/s, "man -l renders the packaged $name(1)");
}

# the packaged receiver with the packaged configuration (flags override its
# db, listen and admin-listen): ready (on the admin listener), reloads on
# SIGHUP, drains and exits 0 on SIGTERM
$node->safe_psql('postgres', q{CREATE EXTENSION webhook_inbox});
$node->safe_psql('postgres', q{SELECT webhook_inbox.create_source('pkg-stripe', 'stripe', 'whsec_pkg')});
my $port = PostgreSQL::Test::Cluster::get_free_port();
my $admin = PostgreSQL::Test::Cluster::get_free_port();
my ($rout, $rerr) = ('', '');
my $receiver = IPC::Run::start([ "$root/usr/bin/webhook-receiver", '--config', $ENV{WI_PKG_CONF},
		'--db', $node->connstr('postgres'), '--listen', "127.0.0.1:$port", '--admin-listen', "127.0.0.1:$admin" ],
	'>', \$rout, '2>', \$rerr);
my $http = HTTP::Tiny->new(timeout => 5);
sub wait_ready
{
	my $deadline = Time::HiRes::time() + 20;
	while (Time::HiRes::time() < $deadline)
	{
		my $r = $http->get("http://127.0.0.1:$admin/readyz");
		return 1 if $r->{status} == 200;
		Time::HiRes::sleep(0.1);
	}
	return 0;
}
ok(wait_ready(), 'the packaged receiver is ready with the packaged configuration') or diag($rerr);
is($http->post("http://127.0.0.1:$port/hooks/no-such-source", { content => '{}' })->{status}, 404,
	'it answers for its sources: 404 for an unknown one');
is($http->post("http://127.0.0.1:$port/hooks/pkg-stripe", { content => '{}' })->{status}, 401,
	'401 for an unsigned delivery to a known one');
kill 'HUP', $receiver->{KIDS}[0]{PID};
my $deadline = Time::HiRes::time() + 10;
while ($rerr !~ /SIGHUP: reloading sources/ && Time::HiRes::time() < $deadline)
{
	$receiver->pump_nb;
	Time::HiRes::sleep(0.05);
}
like($rerr, qr/SIGHUP: reloading sources/, 'SIGHUP reloads the sources');
ok(wait_ready(), 'still ready after SIGHUP');
kill 'TERM', $receiver->{KIDS}[0]{PID};
$receiver->finish;
is($receiver->result(0), 0, 'SIGTERM: exit 0');

# the service unit
SKIP:
{
	my $analyze = `command -v systemd-analyze 2>/dev/null`;
	chomp $analyze;
	skip 'systemd-analyze is not installed', 3 unless $analyze;
	my $unit = "$root/lib/systemd/system/webhook-receiver.service";
	ok(-f $unit, 'the unit is installed');
	my $check = $unit;
	if ($root ne '')
	{
		# unpacked, not installed: verify a copy whose ExecStart points at the
		# unpacked binary (verify requires the executable to exist)
		$check = PostgreSQL::Test::Utils::tempdir() . '/webhook-receiver.service';
		(my $text = slurp_file($unit)) =~ s{^ExecStart=/usr/bin/}{ExecStart=$root/usr/bin/}m;
		PostgreSQL::Test::Utils::append_to_file($check, $text);
	}
	my ($o, $e);
	my $verified = IPC::Run::run([ $analyze, 'verify', $check ], '>', \$o, '2>', \$e);
	ok($verified && $e eq '', 'systemd-analyze verify accepts the unit') or diag("$o$e");
	IPC::Run::run([ $analyze, 'security', '--offline=yes', $check ], '>', \$o, '2>', \$e);
	my ($level) = $o =~ /Overall exposure level for \S+: ([\d.]+)/;
	diag("systemd-analyze security: exposure " . ($level // '?'));
	ok(defined $level && $level < 2.0, 'systemd-analyze security rates its hardening below 2.0 (OK)')
	  or diag($o);
}

$node->stop;
done_testing();
