# CREATE EXTENSION refuses a database whose encoding is not UTF8 (bodies are
# stored as jsonb and text: SQL_ASCII or LATIN1 would quarantine every body
# with a character outside them as unconvertible), with its errcode, message,
# detail and hint, and leaves nothing behind; a UTF8 database of the same
# cluster takes it.  pg_regress cannot make such a database inside its own,
# hence this test.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 'regress/t';
use ProcessGuard;

my $node = PostgreSQL::Test::Cluster->new('encoding');
$node->init;
$node->start;

for my $enc ('SQL_ASCII', 'LATIN1')
{
	my $db = lc "db_$enc";
	$node->command_ok([ 'createdb', '-h', $node->host, '-p', $node->port, '-E', $enc, '-T', 'template0',
			'--locale=C', $db ], "createdb -E $enc");
	my ($rc, $out, $err) = $node->psql($db, 'CREATE EXTENSION webhook_inbox',
		extra_params => [ '-v', 'VERBOSITY=verbose', '-v', 'SHOW_CONTEXT=never' ]);
	isnt($rc, 0, "CREATE EXTENSION refused in a $enc database");
	like($err, qr/^psql:[^\n]*ERROR:  0A000: webhook_inbox requires a database with encoding UTF8$/m,
		'feature_not_supported, with its message');
	like($err, qr/^DETAIL:  Database $db has encoding $enc; bodies are read and stored as UTF8 JSON, and here a body beyond ASCII would be quarantined as unconvertible or have its \\u escapes refused\.$/m,
		'the detail names the database, its encoding and what would happen');
	like($err, qr/^HINT:  Create the database with ENCODING 'UTF8' \(createdb -E UTF8 -T template0 …\) and create the extension there\.$/m,
		'the hint says what to do');
	is($node->safe_psql($db, q{SELECT count(*) FROM pg_namespace WHERE nspname = 'webhook_inbox'}), '0',
		'nothing is left behind');
}

$node->command_ok([ 'createdb', '-h', $node->host, '-p', $node->port, '-E', 'UTF8', '-T', 'template0',
		'--locale=C', 'db_utf8' ], 'createdb -E UTF8');
$node->safe_psql('db_utf8', 'CREATE EXTENSION webhook_inbox');
is($node->safe_psql('db_utf8', q{SELECT extname FROM pg_extension WHERE extname = 'webhook_inbox'}),
	'webhook_inbox', 'a UTF8 database takes the extension');

$node->stop;
done_testing();
