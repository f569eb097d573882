# 508_extension_control_path.pl
#	PostgreSQL 18's extension_control_path: the extension under a directory
#	of its own, as CloudNativePG mounts an extension image (make
#	extension-dir: the library in lib/, the control file and the scripts
#	in share/extension/, nothing else), loaded from there by a server that
#	has no file of it in its own share and lib.  The server is configured
#	the way docs/operations.md says:
#	  extension_control_path = '$system:DIR/share'
#	  dynamic_library_path = '$libdir:DIR/lib'
#	  shared_preload_libraries = 'webhook_inbox'
#	and then: the library preloaded from DIR/lib (the server's own
#	mappings name that file), CREATE EXTENSION, a delivery through intake()
#	that the worker fetches and mirrors, CREATE EXTENSION ... VERSION
#	'0.1.0' and ALTER EXTENSION UPDATE from the scripts in DIR, which
#	spellings of shared_preload_libraries start the server, and that an
#	entry naming DIR/share/extension itself finds nothing.
#
#	The server is a copy of the one under test (pg_config on PATH) with
#	the extension's files removed from it: make test has installed them
#	there.  Skips before PostgreSQL 18, which has no extension_control_path.

use strict;
use warnings;

use lib 'regress/t';
use File::Path qw(make_path);
use File::Basename qw(dirname);
use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WorkerTest;
use SimTest qw(start_sink sink_requests tmpdir);
use ReleaseTest ();

sub pg_config
{
	my ($what) = @_;
	my $v = `pg_config --$what`;
	die "pg_config --$what failed" if $? != 0;
	chomp $v;
	return $v;
}

my ($major) = pg_config('version') =~ /^PostgreSQL (\d+)/ or die 'no major in pg_config --version';
plan skip_all => "PostgreSQL $major has no extension_control_path (new in 18): "
  . 'the extension loads from the server\'s own share and lib only'
  if $major < 18;

my $release = ReleaseTest::ext_version();

# --- make extension-dir -------------------------------------------------------

my $dir = tmpdir() . '/webhook_inbox';
{
	my ($out, $err);
	# this make is not a sub-make of the one running the tests
	delete local $ENV{MAKEFLAGS};
	delete local $ENV{MAKELEVEL};
	my $ok = IPC::Run::run([ 'make', '-s', 'extension-dir', "EXTENSION_DIR=$dir",
			'PG_CONFIG=' . pg_config('bindir') . '/pg_config' ], '>', \$out, '2>', \$err);
	ok($ok, 'make extension-dir') or diag("$out\n$err");
	like($out, qr/^\Q  extension_control_path = '\E\$system:\Q$dir\E\/share'$/m,
		'make extension-dir prints the extension_control_path line');
	like($out, qr/^\Q  dynamic_library_path = '\E\$libdir:\Q$dir\E\/lib'$/m,
		'and the dynamic_library_path line');
}
my @files;
{
	my @stack = ($dir);
	while (my $d = shift @stack)
	{
		opendir(my $dh, $d) or die "$d: $!";
		for my $e (sort grep { !/^\.\.?$/ } readdir $dh)
		{
			-d "$d/$e" ? push(@stack, "$d/$e") : push(@files, substr("$d/$e", length($dir) + 1));
		}
	}
}
my @scripts = map { "share/extension/$_" } sort map { s{^sql/}{}r } glob('sql/webhook_inbox--*.sql');
is_deeply([ sort @files ], [ sort('lib/webhook_inbox.so', 'share/extension/webhook_inbox.control', @scripts) ],
	'the directory holds the library, the control file and every script, nothing else: ' . scalar(@files) . ' files');
ok((grep { $_ eq "share/extension/webhook_inbox--0.1.0--$release.sql" } @files),
	"the upgrade script from 0.1.0 to $release is among them");

# --- a server without the extension -----------------------------------------------

# A copy of bindir, sharedir and pkglibdir at the same paths under $root:
# PostgreSQL finds its share and lib relative to its binaries, so the copy
# serves its own.
my $root = PostgreSQL::Test::Utils::tempdir('pg');
for my $d (pg_config('bindir'), pg_config('sharedir'), pg_config('pkglibdir'))
{
	make_path(dirname("$root$d"));
	system('cp', '-a', $d, "$root$d") == 0 or die "cp -a $d failed";
}
my $share = $root . pg_config('sharedir');
my $pkglib = $root . pg_config('pkglibdir');
unlink(glob("$share/extension/webhook_inbox.control $share/extension/webhook_inbox--*.sql"),
	"$pkglib/webhook_inbox.so");
system('rm', '-rf', "$pkglib/bitcode/webhook_inbox", "$pkglib/bitcode/webhook_inbox.index.bc") == 0 or die;
is_deeply([ glob("$share/extension/webhook_inbox* $pkglib/webhook_inbox*") ], [],
	'the server has no file of the extension in its share or lib');

my $reply = tmpdir() . '/reply.json';
open(my $fh, '>', $reply) or die;
print $fh JSON::PP->new->encode({ status => 200,
	body => '{"id":"sub_e1","object":"subscription","status":"active","created":1767225600}' });
close $fh;
my $api = start_sink(reply => $reply);

my $node = PostgreSQL::Test::Cluster->new('ecp', install_path => $root . dirname(pg_config('bindir')));
$node->init;
my $paths = qq{
extension_control_path = '\$system:$dir/share'
dynamic_library_path = '\$libdir:$dir/lib'
};
my $settings = q{
webhook_inbox.enabled = on
webhook_inbox.naptime = 200ms
webhook_inbox.sweep_interval = 0
webhook_inbox.full_sweep_interval = 0
webhook_inbox.fetch_delay = 0
webhook_inbox.http_timeout = 5s
log_min_messages = log
};
my $conf = slurp_file($node->data_dir . '/postgresql.conf');
sub configure
{
	my ($preload) = @_;
	open(my $out, '>', $node->data_dir . '/postgresql.conf') or die;
	print $out $conf, $paths, "shared_preload_libraries = '$preload'\n", $settings;
	close $out;
}

# --- preloaded from the directory ------------------------------------------------

configure('webhook_inbox');
$node->start;
is($node->safe_psql('postgres', 'SHOW extension_control_path'), "\$system:$dir/share",
	'extension_control_path names the directory\'s share');
# the postmaster's mappings: it loaded the preloaded library
my ($pid) = slurp_file($node->data_dir . '/postmaster.pid') =~ /^(\d+)/;
SKIP:
{
	skip 'no /proc/PID/maps to read the mapped library from', 1 unless -r "/proc/$pid/maps";
	# each line: address perms offset dev inode path
	my %seen;
	my @mapped = sort grep { m{/webhook_inbox\.so$} && !$seen{$_}++ }
	  map { (split ' ', $_, 6)[5] // '' } split /\n/, slurp_file("/proc/$pid/maps");
	is_deeply(\@mapped, ["$dir/lib/webhook_inbox.so"],
		'shared_preload_libraries = \'webhook_inbox\' loaded the library of the directory (dynamic_library_path), no other');
}
is($node->safe_psql('postgres', q{
	SELECT module_name || ' ' || version || ' ' || file_name FROM pg_get_loaded_modules()
	 WHERE module_name = 'webhook_inbox'}), "webhook_inbox $release webhook_inbox.so",
	'pg_get_loaded_modules() names the preloaded library and its release');
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'webhook_inbox worker'"),
	'the worker runs');
is($node->safe_psql('postgres',
		"SELECT default_version FROM pg_available_extensions WHERE name = 'webhook_inbox'"),
	$release, 'the extension is available, at the release being built');

# without the directory in the paths the server has no such extension
my ($ret, $out, $err) = $node->psql('postgres',
	"SET extension_control_path = '\$system'; CREATE EXTENSION webhook_inbox");
like($err, qr/extension "webhook_inbox" is not available/,
	'without the directory in extension_control_path CREATE EXTENSION finds nothing');
($ret, $out, $err) = $node->psql('postgres',
	"SET extension_control_path = '\$system:$dir/share/extension'; CREATE EXTENSION webhook_inbox");
like($err, qr/extension "webhook_inbox" is not available/,
	'nor when it names share/extension itself: the server appends /extension to each entry');
($ret, $out, $err) = $node->psql('postgres', "SET dynamic_library_path = '\$libdir'; LOAD 'webhook_inbox'");
like($err, qr/could not access file "webhook_inbox"/,
	'without it in dynamic_library_path the library is not found');

# --- CREATE EXTENSION, intake, the worker ---------------------------------------

$node->safe_psql('postgres', 'CREATE EXTENSION webhook_inbox');
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'webhook_inbox'"),
	$release, 'CREATE EXTENSION from the directory');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_proc WHERE prolang = (SELECT oid FROM pg_language WHERE lanname = 'c')
	   AND probin <> '$libdir/webhook_inbox' AND pronamespace = 'webhook_inbox'::regnamespace}),
	'0', 'its C functions name $libdir/webhook_inbox, as the control file\'s module_pathname says');

$node->safe_psql('postgres', qq{
	SELECT webhook_inbox.create_source('ecp', 'stripe', 'whsec_ecp', api_base => '$api->{url}',
		api_token => 'sk_ECP_token')});
is($node->safe_psql('postgres',
		intake_sql('ecp', stripe_event('evt_e1', 'customer.subscription.updated', 'subscription',
			'sub_e1', 'past_due', 1767225600))), 'new', 'intake() stores a delivery (the C function, from the directory)');
ok(wait_drained($node, 'the delivery', 60), 'the worker processes it');
is($node->safe_psql('postgres', "SELECT status FROM webhook_inbox.objects WHERE object_id = 'sub_e1'"),
	'active', 'the mirror has the state the worker fetched (active, not the delivery\'s past_due)');
cmp_ok(scalar(grep { ($_->{headers}{authorization} // '') eq 'Bearer sk_ECP_token' } sink_requests($api)),
	'>=', 1, 'the worker fetched with the source\'s token');

# --- ALTER EXTENSION UPDATE from the directory's scripts ------------------------

$node->safe_psql('postgres', 'CREATE DATABASE upd');
$node->safe_psql('upd', "CREATE EXTENSION webhook_inbox VERSION '0.1.0'");
is($node->safe_psql('upd', "SELECT extversion FROM pg_extension WHERE extname = 'webhook_inbox'"),
	'0.1.0', 'CREATE EXTENSION ... VERSION \'0.1.0\' from the directory');
$node->safe_psql('upd', 'ALTER EXTENSION webhook_inbox UPDATE');
is($node->safe_psql('upd', "SELECT extversion FROM pg_extension WHERE extname = 'webhook_inbox'"),
	$release, "ALTER EXTENSION UPDATE to $release from the directory");
$node->safe_psql('upd', q{SELECT webhook_inbox.create_source('u', 'stripe', 'whsec_u')});
is($node->safe_psql('upd',
		intake_sql('u', stripe_event('evt_u1', 'customer.subscription.updated', 'subscription',
			'sub_u1', 'active', 1767225600))), 'new', 'intake() in the updated database');
$node->stop;

# --- which spellings of shared_preload_libraries start the server ---------------

# the library's path in full: a name with a directory is opened as it is
configure("$dir/lib/webhook_inbox");
$node->start;
is($node->safe_psql('postgres', 'SELECT count(*) FROM webhook_inbox.inbox'), '1',
	'shared_preload_libraries naming the library\'s full path starts the server too');
$node->stop;

# $libdir/webhook_inbox is the server's own lib: not searched elsewhere
configure('$libdir/webhook_inbox');
my $log_offset = -s $node->logfile;
ok(!$node->start(fail_ok => 1), 'shared_preload_libraries = \'$libdir/webhook_inbox\' does not start the server');
like(slurp_file($node->logfile, $log_offset), qr/could not access file "\$libdir\/webhook_inbox"/,
	'it says it could not access $libdir/webhook_inbox');

configure('webhook_inbox');
$node->start;
is($node->safe_psql('postgres', 'SELECT count(*) FROM webhook_inbox.inbox'), '1',
	'the bare name again: the server starts, the inbox kept');
$node->stop;

stop_proc($api);
done_testing();
