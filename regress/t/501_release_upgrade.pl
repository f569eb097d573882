# The upgrade from release 0.1.0: an installation of 0.1.0 with rows in every
# table, ALTER EXTENSION webhook_inbox UPDATE, then
#  (a) its schema (pg_dump of every member object) equals a fresh install of
#      the release being built, and so do its configuration tables and its
#      preset routes and machines: this is the check that fails the build
#      when the schema changed without its upgrade DDL in
#      sql/upgrade/0.1.0--<release>.sql, printing the difference;
#  (b) its data is intact: every row of every 0.1.0 table, column by column;
#  (c) the whole pg_regress suite passes on a database upgraded this way.
use strict;
use warnings;
use lib 'regress/t';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ReleaseTest;

my $version = ext_version();
my $node = PostgreSQL::Test::Cluster->new('upgrade');
$node->init;
$node->append_conf('postgresql.conf', slurp_file('regress/regress.conf'));
$node->start;

my $extension_oid = "(SELECT oid FROM pg_extension WHERE extname = 'webhook_inbox')";
sub extversion
{
	my ($db) = @_;
	return $node->safe_psql($db, "SELECT extversion FROM pg_extension WHERE extname = 'webhook_inbox'");
}

# The member tables (or sequences) of the extension, by name.
sub members
{
	my ($db, $relkind) = @_;
	return split /\n/, $node->safe_psql($db, qq{
		SELECT c.oid::regclass FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
		 WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_extension'::regclass
		   AND d.refobjid = $extension_oid AND d.deptype = 'e' AND c.relkind = '$relkind'
		 ORDER BY 1::text});
}

# Every row of a table, by the given columns, sorted: one line per row.
sub rows_of
{
	my ($db, $table, $columns, $where) = @_;
	return $node->safe_psql($db, qq{
		SELECT coalesce(string_agg(r::text, E'\\n' ORDER BY r::text), '')
		  FROM (SELECT $columns FROM $table $where) r});
}

sub columns_of
{
	my ($db, $table, $except) = @_;
	return $node->safe_psql($db, qq{
		SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute
		 WHERE attrelid = '$table'::regclass AND attnum > 0 AND NOT attisdropped
		   AND attname <> ALL ('{$except}'::name[])});
}

sub has_preset
{
	my ($db, $table) = @_;
	return $node->safe_psql($db, qq{SELECT count(*) FROM pg_attribute
		WHERE attrelid = '$table'::regclass AND attname = 'preset' AND NOT attisdropped}) eq '1';
}

# A fresh install of the release being built.
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION webhook_inbox');
is(extversion('fresh'), $version, "a fresh install is $version");

# 0.1.0, with rows in every table.
$node->safe_psql('postgres', 'CREATE DATABASE upgraded');
$node->safe_psql('upgraded', "CREATE EXTENSION webhook_inbox VERSION '0.1.0'");
is(extversion('upgraded'), '0.1.0', 'release 0.1.0 installs from its tracked script');
my ($rc, $out, $err) = $node->psql('upgraded', slurp_file('regress/upgrade/data-0.1.0.sql'));
is($rc, 0, 'rows made through the 0.1.0 API') or diag($err);

my @tables = members('upgraded', 'r');
my @sequences = members('upgraded', 'S');
cmp_ok(scalar @tables, '>=', 17, 'the 0.1.0 tables are listed');
my @empty = grep { $node->safe_psql('upgraded', "SELECT count(*) FROM $_") eq '0' } @tables;
is("@empty", '', 'every 0.1.0 table has rows');

# What must survive the upgrade: user rows by their 0.1.0 columns (preset
# rows are compared with a fresh install below), and the sequences.
my (%columns, %before);
for my $t (@tables)
{
	$columns{$t} = columns_of('upgraded', $t, '');
	my $where = has_preset('upgraded', $t) ? 'WHERE NOT preset' : '';
	$before{$t} = rows_of('upgraded', $t, $columns{$t}, $where);
}
$before{$_} = $node->safe_psql('upgraded', "SELECT last_value || ' ' || is_called FROM $_") for @sequences;

($rc, $out, $err) = $node->psql('upgraded', 'ALTER EXTENSION webhook_inbox UPDATE');
is($rc, 0, 'ALTER EXTENSION webhook_inbox UPDATE') or diag($err);
is(extversion('upgraded'), $version, "updated to $version");

# (a) the schema
same_text(schema_dump($node, 'upgraded'), schema_dump($node, 'fresh'),
	"schema after the upgrade equals a fresh $version install (missing upgrade DDL in sql/upgrade/0.1.0--$version.sql?)");

my $config = q{SELECT coalesce(string_agg(format('%s %L', c::regclass, cond), E'\n' ORDER BY c::regclass::text), '')
	FROM pg_extension, unnest(extconfig, extcondition) AS u(c, cond) WHERE extname = 'webhook_inbox'};
same_text($node->safe_psql('upgraded', $config), $node->safe_psql('fresh', $config),
	'the same configuration tables, dumped under the same conditions');

# Presets by content: not their ids (sequence order differs), nor a route's
# version, the count of its changes (an upgrade that changed a preset route
# bumps it, as any change does, so replays show the new mapping).
for my $t (members('fresh', 'r'))
{
	next unless has_preset('fresh', $t);
	my $cols = columns_of('fresh', $t, 'id,version');
	same_text(rows_of('upgraded', $t, $cols, 'WHERE preset'), rows_of('fresh', $t, $cols, 'WHERE preset'),
		"preset rows of $t equal a fresh install's");
}

# (b) the data
for my $t (@tables)
{
	my $where = has_preset('upgraded', $t) ? 'WHERE NOT preset' : '';
	same_text(rows_of('upgraded', $t, $columns{$t}, $where), $before{$t}, "rows of $t intact");
}
for my $s (@sequences)
{
	# a table with preset rows gets the release's new presets: its sequence
	# moves forward (never back, and past every id), the others stay as they were
	(my $t = $s) =~ s/_id_seq$//;
	if (has_preset('upgraded', $t))
	{
		my ($last) = split ' ', $before{$s};
		is($node->safe_psql('upgraded', "SELECT last_value >= $last AND last_value >= (SELECT max(id) FROM $t) FROM $s"),
			't', "sequence $s not moved back, past every id");
	}
	else
	{
		is($node->safe_psql('upgraded', "SELECT last_value || ' ' || is_called FROM $s"), $before{$s},
			"sequence $s intact");
	}
}

# (c) the pg_regress suite on a database that had 0.1.0 and was updated
$node->safe_psql('postgres', 'CREATE DATABASE contrib_regression');
$node->safe_psql('contrib_regression', "CREATE EXTENSION webhook_inbox VERSION '0.1.0'");
$node->safe_psql('contrib_regression', 'ALTER EXTENSION webhook_inbox UPDATE');
my @regress = sort map { m{([^/]+)\.sql$} } glob('regress/sql/*.sql');
my $outdir = PostgreSQL::Test::Utils::tempdir();
my $bindir = `pg_config --bindir`;
chomp $bindir;
my $pg_regress = $ENV{PG_REGRESS} or BAIL_OUT('PG_REGRESS is not set (run through make installcheck-tap)');
($rc, $out, $err) = (0, '', '');
IPC::Run::run([ $pg_regress, '--use-existing', '--dbname=contrib_regression',
		'--host=' . $node->host, '--port=' . $node->port, "--bindir=$bindir",
		'--inputdir=regress', "--outputdir=$outdir", @regress ], '>', \$out, '2>', \$err)
  or $rc = 1;
is($rc, 0, 'the pg_regress suite passes on the upgraded database')
  or diag("$out\n$err\n" . (-f "$outdir/regression.diffs" ? substr(slurp_file("$outdir/regression.diffs"), 0, 20000) : ''));
like($out, qr/All \d+ tests passed/, 'every test ran');

$node->stop;
done_testing();
