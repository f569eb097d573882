# regress/t/ReleaseTest.pm
#	Helpers of the release tests (regress/t/5NN_release_*.pl): the release
#	being built, read from the Makefile (the one place it is written), and a
#	schema dump of an extension's objects that two installations can be
#	compared by.
package ReleaseTest;

use strict;
use warnings;
use Exporter 'import';
use IPC::Run;
use lib 'regress/t';
use ProcessGuard;
use PostgreSQL::Test::Utils;
use Test::More;

our @EXPORT = qw(ext_version schema_dump normalize_dump same_text);

# ext_version(): EXT_VERSION of the top-level Makefile (tests run from the
# top of the tree).
sub ext_version
{
	open(my $fh, '<', 'Makefile') or die "Makefile: $!";
	while (<$fh>)
	{
		return $1 if /^EXT_VERSION\s*=\s*(\S+)/;
	}
	die 'no EXT_VERSION in the Makefile';
}

# schema_dump(node, dbname): the normalised schema of the database, extension
# members included.
#
# A plain pg_dump --schema-only shows an extension as one CREATE EXTENSION
# line; --binary-upgrade (the mode pg_upgrade uses) dumps every member object
# with its definition, ownership, privileges and the extension's initial
# privileges, which is what an upgrade must get right.
sub schema_dump
{
	my ($node, $dbname) = @_;
	my ($stdout, $stderr);
	IPC::Run::run([ 'pg_dump', '--schema-only', '--binary-upgrade', '--no-sync',
			'-d', $node->connstr($dbname) ], '>', \$stdout, '2>', \$stderr)
	  or die "pg_dump $dbname failed: $stderr";
	return normalize_dump($stdout);
}

# normalize_dump(text): the dump without what legitimately differs between
# an upgraded and a freshly created installation, and nothing else:
#  - OIDs, relfilenodes, attribute versions and relfrozenxid/relminmxid
#    (binary_upgrade_set_next_* calls, the pg_class UPDATEs): physical
#    identities, never the same in two databases;
#  - the extension's configuration tables (the OID arrays of
#    binary_upgrade_create_empty_extension): compared by name and condition
#    on their own by the test, as the arrays are in registration order;
#  - the order of the columns of a table: ALTER TABLE ADD COLUMN appends, a
#    fresh install puts a column where its CREATE TABLE does; each column is
#    still compared with its type, default and constraints;
#  - dropped columns (binary upgrade recreates them as placeholders to drop
#    again): an upgrade that dropped a column has one, a fresh install not;
#  - the "missing value" of a column added with a default (the value rows
#    written before ALTER TABLE ADD COLUMN read it from): storage, not schema;
#  - sequence values (setval): data, compared by the test as such;
#  - ACL entries that grant and revoke nothing: a table or sequence whose
#    privileges were written explicitly (by a REVOKE ... ON ALL TABLES IN
#    SCHEMA that ran after it existed, as the re-run privileges of an upgrade
#    do) next to one still at the built-in default: the same privileges;
#  - the comments pg_dump writes before its binary-upgrade calls, and its
#    \restrict line (a random key).
sub normalize_dump
{
	my ($dump) = @_;
	my @in = split /\n/, $dump, -1;
	my @out;
	for (my $i = 0; $i < @in; $i++)
	{
		my $l = $in[$i];
		next if $l =~ /^SELECT pg_catalog\.binary_upgrade_set_next_/;
		next if $l =~ /^-- For binary upgrade, /;
		next if $l =~ /^\\(un)?restrict /;
		next if $l =~ /^SELECT pg_catalog\.setval\(/;
		next if $l =~ /^-- set missing value\.$/;
		next if $l =~ /^SELECT pg_catalog\.binary_upgrade_set_missing_value\(/;
		if ($l =~ /^UPDATE pg_catalog\.pg_(class|attribute)$/)
		{
			# a multi-line UPDATE: skip to its semicolon
			$i++ while $i < @in && $in[$i] !~ /;$/;
			next;
		}
		next if $l =~ /pg\.dropped\./ && $l =~ /^ALTER TABLE ONLY .* DROP COLUMN /;
		if ($l =~ /^SELECT pg_catalog\.binary_upgrade_create_empty_extension\(('[^']*'), ('[^']*'), (\w+), ('[^']*'),/)
		{
			push @out, "SELECT pg_catalog.binary_upgrade_create_empty_extension($1, $2, $3, $4, <configuration tables>);";
			next;
		}
		if ($l =~ /^CREATE (UNLOGGED )?TABLE .* \($/)
		{
			push @out, $l;
			my @cols;
			$i++;
			while ($i < @in && $in[$i] !~ /^\)/)
			{
				my $c = $in[$i++];
				next if $c =~ /pg\.dropped\./;
				$c =~ s/,$//;
				push @cols, $c;
			}
			push @out, join(",\n", sort @cols), $in[$i];
			next;
		}
		push @out, $l;
	}
	my $text = join("\n", @out);
	my $empty = 'SELECT pg_catalog.binary_upgrade_set_record_init_privs';
	$text =~ s/--\n-- Name: [^\n]*; Type: ACL; [^\n]*\n--\n\n\Q$empty\E\(true\);\n\Q$empty\E\(false\);\n\n//g;
	$text =~ s/\n{3,}/\n\n/g;
	return $text;
}

# same_text(got, expected, name): one test; on a difference, the unified
# diff (expected → got) is printed, not two walls of text.
sub same_text
{
	my ($got, $expected, $name) = @_;
	return pass($name) if $got eq $expected;
	my $dir = PostgreSQL::Test::Utils::tempdir();
	(my $file = $name) =~ s/\W+/_/g;
	PostgreSQL::Test::Utils::append_to_file("$dir/$file.expected", $expected);
	PostgreSQL::Test::Utils::append_to_file("$dir/$file.got", $got);
	my ($diff, $err);
	IPC::Run::run([ 'diff', '-u', "$dir/$file.expected", "$dir/$file.got" ], '>', \$diff, '2>', \$err);
	fail($name);
	diag("$name: differences (- expected, + got):\n$diff");
	return 0;
}

1;
