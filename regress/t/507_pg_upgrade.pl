# 507_pg_upgrade.pl
#	pg_upgrade from an older PostgreSQL major to this one, of a cluster
#	with the extension, a source whose secrets are sealed under a key
#	file, and a backlog the worker had not reached: the procedure of
#	docs/operations.md ("Upgrading PostgreSQL"), then on the new major
#	every row is there, the worker works through the backlog (fetching
#	with the sealed token in clear), and the receiver answers a signed
#	delivery 200 (verified with the sealed signing secret).
#
#	WI_PG_UPGRADE_FROM lists the bindirs of the older majors to upgrade
#	from, each with this tree's extension installed (make test sets it on
#	the majors after the first: scripts/test.sh).  Without one the test
#	skips, saying so.

use strict;
use warnings;

use lib 'regress/t';
use Cwd qw(getcwd);
use File::Basename qw(dirname);
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WorkerTest;
use SimTest qw(start_sink sink_requests tmpdir);
use ReceiverTest qw(sign post);

my @from = grep { $_ ne '' } split /\s+/, ($ENV{WI_PG_UPGRADE_FROM} // '');
plan skip_all => 'pg_upgrade: no older PostgreSQL given (WI_PG_UPGRADE_FROM=<bindir of 15 with the '
  . 'extension installed>; make test sets it when it runs the suites on several majors)'
  unless @from;

my $newbin = `pg_config --bindir`;
chomp $newbin;

my $key = tmpdir() . '/inbox.key';
open(my $fh, '>', $key) or die "$key: $!";
print $fh 'c0ffee00' x 8, "\n";
close $fh;
chmod 0600, $key or die;

my $reply = tmpdir() . '/reply.json';
open($fh, '>', $reply) or die;
print $fh JSON::PP->new->encode({ status => 200,
	body => '{"id":"sub_u1","object":"subscription","status":"active","created":1767225600}' });
close $fh;
my $api = start_sink(reply => $reply);

my $token = 'sk_UPGRADEPLAIN_token';
my $secret = 'whsec_upgrade';
my $backlog = 40;

# The extension's configuration, the same on both majors; the worker is
# off on the old one so that the deliveries wait as a backlog.
sub inbox_conf
{
	my ($enabled) = @_;
	return qq{
shared_preload_libraries = 'webhook_inbox'
webhook_inbox.enabled = $enabled
webhook_inbox.naptime = 200ms
webhook_inbox.sweep_interval = 0
webhook_inbox.full_sweep_interval = 0
webhook_inbox.fetch_delay = 0
webhook_inbox.http_timeout = 5s
webhook_inbox.key_file = '$key'
log_min_messages = log
};
}

# What must come through: the rows of every table of the extension, by count.
sub census
{
	my ($node) = @_;
	my @tables = split /\n/, $node->safe_psql('postgres', q{
		SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'webhook_inbox' AND c.relkind = 'r' ORDER BY 1});
	return $node->safe_psql('postgres', join(' UNION ALL ',
		map { "SELECT '$_=' || count(*) FROM webhook_inbox.$_" } @tables));
}

# PostgreSQL 15.20 as Debian 12 builds it (15.20-0+deb12u1) stores an
# attribute option pg_attver on every column it creates, which no later
# major knows: pg_upgrade's restore of the schema (by the new major's
# pg_dump, in binary-upgrade mode) stops at the first table with
# 'unrecognized parameter "pg_attver"'.  docs/operations.md's procedure
# removes it in each database of the old cluster first; this is that step.
my $strip_attver = q{
	UPDATE pg_catalog.pg_attribute
	SET attoptions = NULLIF(ARRAY(SELECT o FROM unnest(attoptions) AS o WHERE o NOT LIKE 'pg_attver=%'), '{}')
	WHERE attrelid >= 16384 AND attoptions::text LIKE '%pg_attver=%'};

my $n = 0;
for my $oldbin (@from)
{
	$n++;
	my $oldver = `$oldbin/pg_config --version`;
	chomp $oldver;
	my $oldshare = `$oldbin/pg_config --sharedir`;
	chomp $oldshare;
	if (!-f "$oldshare/extension/webhook_inbox.control")
	{
		fail("$oldver at $oldbin: the extension is not installed there (make install PG_CONFIG=$oldbin/pg_config)");
		next;
	}

	my $old = PostgreSQL::Test::Cluster->new("old$n", install_path => dirname($oldbin));
	my $new = PostgreSQL::Test::Cluster->new("new$n");
	note("pg_upgrade from $oldver to " . `pg_config --version`);

	# both with data checksums: 18's initdb turns them on by default
	$old->init(extra => ['--data-checksums']);
	$old->append_conf('postgresql.conf', inbox_conf('off'));
	$old->start;
	$old->safe_psql('postgres', 'CREATE EXTENSION webhook_inbox');
	$old->safe_psql('postgres', 'CREATE ROLE rcv LOGIN IN ROLE webhook_inbox_receiver');
	$old->safe_psql('postgres', qq{
		SELECT webhook_inbox.create_source('up', 'stripe', '$secret', api_base => '$api->{url}',
			api_token => '$token')});
	like($old->safe_psql('postgres', "SELECT api_token FROM webhook_inbox.sources WHERE name = 'up'"),
		qr/^wi-sealed:/, "$oldver: the api_token is stored sealed");
	$old->safe_psql('postgres', join("\n", map {
		intake_sql('up', stripe_event("evt_u${n}_$_", 'customer.subscription.updated', 'subscription',
			'sub_u1', 'active', 1767225600 + $_)) } 1 .. $backlog));
	is($old->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.inbox WHERE status = 'pending'"),
		$backlog, "$oldver: a backlog of $backlog deliveries");
	my $census = census($old);
	my $release = $old->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'webhook_inbox'");
	for my $db (split /\n/, $old->safe_psql('postgres',
		'SELECT datname FROM pg_database WHERE datallowconn ORDER BY 1'))
	{
		$old->safe_psql($db, $strip_attver);
	}
	$old->stop;

	# the new cluster gets the extension's configuration after pg_upgrade:
	# no worker may connect to a database pg_upgrade recreates
	$new->init(extra => ['--data-checksums']);
	my $cwd = PostgreSQL::Test::Utils::tempdir('upgrade');
	{
		my $tree = getcwd();
		chdir $cwd or die;
		my @cmd = ("$newbin/pg_upgrade", '--no-sync',
			'-d', $old->data_dir, '-D', $new->data_dir,
			'-b', $oldbin, '-B', $newbin,
			'-s', $new->host, '-p', $old->port, '-P', $new->port);
		my ($stdout, $stderr);
		my $ok = IPC::Run::run(\@cmd, '>', \$stdout, '2>', \$stderr);
		chdir $tree or die;
		ok($ok, "$oldver: pg_upgrade succeeds") or diag("$stdout\n$stderr");
	}
	$new->append_conf('postgresql.conf', inbox_conf('on'));
	$new->start;

	is(census($new), $census, "$oldver: every table keeps its rows");
	is($new->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'webhook_inbox'"),
		$release, "$oldver: the same release of the extension");
	# a new cluster (pg_upgrade's new system identifier) is a copy to the
	# worker: outbound work waits for resume_outbound(), as after a restore
	$new->wait_for_log(qr/outbound work paused: this database was restored from a copy/);
	pass("$oldver: the worker pauses outbound work on the new cluster, as on a restored copy");
	is($new->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.inbox WHERE status = 'pending'"),
		$backlog, "$oldver: the backlog waits, untouched");
	$new->safe_psql('postgres', 'SELECT webhook_inbox.resume_outbound()');
	ok(wait_drained($new, "$oldver: after pg_upgrade and resume_outbound(), the backlog"), "$oldver: the worker resumes");
	is($new->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.inbox WHERE status = 'done' "
		  . "AND event_id LIKE 'evt_u${n}_%'"), $backlog, "$oldver: every delivery of the backlog is done");
	cmp_ok(scalar(grep { ($_->{headers}{authorization} // '') eq "Bearer $token" } sink_requests($api)),
		'>=', 1, "$oldver: the worker fetched with the sealed token in clear");

	my $r = start_receiver($new);
	my $body = stripe_event("evt_u${n}_after", 'customer.subscription.updated', 'subscription',
		'sub_u1', 'active', 1767225600 + $backlog + 1);
	my $res = post($r, 'up', sign('stripe', $secret, $body), $body);
	is($res->{status}, 200, "$oldver: the receiver answers a delivery signed with the sealed secret 200");
	is($new->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.inbox WHERE event_id = 'evt_u${n}_after'"),
		1, "$oldver: and stored it");
	stop_receiver($r);
	$new->stop;
}

stop_proc($api);
done_testing();
