# scripts/upgrade-script.pl, which assembles the upgrade script: statements
# split as psql splits them (quotes, dollar quotes, comments, SQL bodies),
# exactly the re-runnable ones kept, CREATE made CREATE OR REPLACE, and on the
# real fragments every function, procedure and view found.
use strict;
use warnings;
use lib 'regress/t';
use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use ReleaseTest;

my $dir = PostgreSQL::Test::Utils::tempdir();
sub script
{
	my (@args) = @_;
	my ($out, $err);
	my $ok = IPC::Run::run([ 'perl', 'scripts/upgrade-script.pl', @args ], '>', \$out, '2>', \$err);
	return ($ok, $out, $err);
}

PostgreSQL::Test::Utils::append_to_file("$dir/hand.sql", 'ALTER TABLE @extschema@.t ADD COLUMN c int;' . "\n");
PostgreSQL::Test::Utils::append_to_file("$dir/tricky.sql", <<'SQL');
\echo Use "CREATE EXTENSION x" to load this file. \quit
-- a comment; with 'quotes' and $$
/* a /* nested; */ comment */
CREATE TABLE @extschema@.t (a text DEFAULT ';', "b;" text DEFAULT E'\';', d text DEFAULT 'it''s;');
CREATE FUNCTION @extschema@.f(x int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
	RETURN $1 + 1;	-- $1 is no dollar quote; neither is foo$bar
END
$$;
CREATE OR REPLACE FUNCTION @extschema@.g() RETURNS text LANGUAGE plpgsql AS $fn$
BEGIN
	RETURN $$;$$ || 'x;';
END
$fn$;
CREATE FUNCTION @extschema@.h(x int) RETURNS text LANGUAGE sql
BEGIN ATOMIC
	SELECT CASE WHEN x > 0 THEN 'a;' ELSE 'b' END;
	SELECT 'c';
END;
CREATE PROCEDURE @extschema@.p() LANGUAGE sql AS 'SELECT 1;';
COMMENT ON FUNCTION @extschema@.f(int) IS 'adds one; really';
CREATE VIEW @extschema@.v AS SELECT 1 AS one;
CREATE TRIGGER t_trg AFTER INSERT ON @extschema@.t FOR EACH ROW EXECUTE FUNCTION @extschema@.f();
INSERT INTO @extschema@.t VALUES ('x;y');
GRANT EXECUTE ON FUNCTION @extschema@.f(int) TO PUBLIC;
REVOKE ALL ON @extschema@.t FROM PUBLIC;
ALTER FUNCTION @extschema@.g() SET search_path = pg_catalog;
SELECT pg_catalog.pg_extension_config_dump('@extschema@.t', '');
SQL

my ($ok, $out, $err) = script('--list', "$dir/tricky.sql");
ok($ok, 'tricky SQL is split') or diag($err);
$out =~ s/^\Q$dir\E\///mg;
is($out, <<'LIST', 'each statement found at its line, kept or skipped by its kind');
tricky.sql:4	skipped	CREATE TABLE @extschema@.t
tricky.sql:5	kept	CREATE FUNCTION @extschema@.f(x
tricky.sql:10	kept	CREATE OR REPLACE
tricky.sql:15	kept	CREATE FUNCTION @extschema@.h(x
tricky.sql:20	kept	CREATE PROCEDURE @extschema@.p()
tricky.sql:21	kept	COMMENT ON FUNCTION
tricky.sql:22	kept	CREATE VIEW @extschema@.v
tricky.sql:23	skipped	CREATE TRIGGER t_trg
tricky.sql:24	skipped	INSERT INTO @extschema@.t
tricky.sql:25	kept	GRANT EXECUTE ON
tricky.sql:26	kept	REVOKE ALL ON
tricky.sql:27	kept	ALTER FUNCTION @extschema@.g()
tricky.sql:28	skipped	SELECT pg_catalog.pg_extension_config_dump('@extschema@.t', '')
LIST

($ok, $out, $err) = script('--extension', 'x', '--to', '9.9.9', "$dir/hand.sql", "$dir/tricky.sql");
ok($ok, 'an upgrade script is assembled') or diag($err);
like($out, qr/^\\echo Use "ALTER EXTENSION x UPDATE TO '9\.9\.9'" to load this file\. \\quit$/m, 'the \echo guard');
like($out, qr/\\quit\n.*ADD COLUMN c int;.*CREATE OR REPLACE FUNCTION \@extschema\@\.f/s,
	'the hand-written DDL first, then the definitions');
is(() = $out =~ /^CREATE OR REPLACE FUNCTION /mg, 3, 'three functions, as CREATE OR REPLACE');
like($out, qr/^CREATE OR REPLACE PROCEDURE \@extschema\@\.p\(\) LANGUAGE sql AS 'SELECT 1;';$/m, 'the procedure');
like($out, qr/^CREATE OR REPLACE VIEW \@extschema\@\.v AS SELECT 1 AS one;$/m, 'the view');
like($out, qr/\$\$;\$\$ \|\| 'x;';\nEND\n\$fn\$;\n/, 'a dollar-quoted body is kept whole');
like($out, qr/BEGIN ATOMIC\n.*'a;'.*SELECT 'c';\nEND;\n/s, 'a SQL-standard body is kept whole');
unlike($out, qr/CREATE TABLE|CREATE TRIGGER|INSERT INTO|config_dump|CREATE OR REPLACE OR REPLACE/,
	'tables, triggers, rows and config registrations are left to the hand-written DDL');
like($out, qr/^COMMENT ON FUNCTION \@extschema\@\.f\(int\) IS 'adds one; really';$/m, 'comments are re-applied');

# --rerun files come last, whole
PostgreSQL::Test::Utils::append_to_file("$dir/rerun.sql", "DO \$\$ BEGIN PERFORM 1; END \$\$;\n");
($ok, $out, $err) = script('--extension', 'x', '--to', '9.9.9', '--rerun', "$dir/rerun.sql", "$dir/hand.sql", "$dir/tricky.sql");
ok($ok, 'an upgrade script with a re-run fragment') or diag($err);
like($out, qr/SET search_path = pg_catalog;\n\n-- \Q$dir\E\/rerun\.sql, re-run whole\nDO \$\$ BEGIN PERFORM 1; END \$\$;\n\z/,
	'the re-run fragment is appended whole, after the definitions');

# broken input is refused, naming the place
PostgreSQL::Test::Utils::append_to_file("$dir/broken.sql", "SELECT 1;\nCREATE FUNCTION f() AS \$body\$ SELECT 1;\n");
($ok, $out, $err) = script('--list', "$dir/broken.sql");
ok(!$ok, 'an unterminated dollar quote is an error');
like($err, qr/broken\.sql:2: unterminated dollar quote \$body\$/, 'with its file and line');
PostgreSQL::Test::Utils::append_to_file("$dir/hand2.sql", "ALTER TABLE t ADD COLUMN c text DEFAULT 'x;\n");
($ok, $out, $err) = script('--extension', 'x', '--to', '1', "$dir/hand2.sql", "$dir/tricky.sql");
ok(!$ok, 'an unterminated string in the hand-written DDL is an error');
like($err, qr/hand2\.sql:1: unterminated quoted string/, 'with its file and line');

# the real fragments: every function, procedure and view is re-created,
# counted here independently of the splitter (they start their lines)
my @parts = split ' ', `make -s -f Makefile print-sql-parts 2>/dev/null`;
ok(@parts >= 3, 'the fragments are listed by the Makefile') or diag("@parts");
my $creates = 0;
for my $f (@parts)
{
	$creates += () = slurp_file($f) =~ /^CREATE\s+(?:OR\s+REPLACE\s+)?(?:FUNCTION|PROCEDURE|VIEW)\b/mg;
}
($ok, $out, $err) = script('--extension', 'webhook_inbox', '--to', ext_version(),
	'sql/upgrade/0.1.0--' . ext_version() . '.sql', @parts);
ok($ok, 'the upgrade script of the fragments is assembled') or diag($err);
is(() = $out =~ /^CREATE OR REPLACE (?:FUNCTION|PROCEDURE|VIEW)\b/mg, $creates,
	"all $creates functions, procedures and views of the fragments are re-created");

done_testing();
