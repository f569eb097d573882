
# 319_secrets_not_logged.pl
#	No secret in any log, on success or failure.  With log_min_messages =
#	debug1, log_statement = 'all' for the session and pg_stat_statements
#	tracking every statement, the psql recipe of docs/sql.md ("Secrets and
#	the logs", run as the page writes it) loads the secrets from files, and
#	then every credential function (create_source with a signing secret and
#	an api_token, rotate_secret, retire_secret, set_github_app,
#	set_tenant_credentials with a refresh token) fails once and succeeds
#	once; the same through node-postgres's bound parameters (where node
#	is installed).  The receiver verifies a good and a bad delivery.  No secret is
#	in the server's log, the receiver's log or pg_stat_statements, though
#	the failures and the statements are (so the search is of what was
#	logged); a secret written into a statement the old way is found by the
#	same search.

use strict;
use warnings;

use lib 'receiver/t';
use Cwd ();
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use ReceiverTest qw(start_receiver stop_receiver sign post);
use Test::More;

my $tmp = PostgreSQL::Test::Utils::tempdir;
sub spew { my ($f, $s) = @_; open my $fh, '>', $f or die "$f: $!"; print $fh $s; close $fh; chmod 0600, $f; }

my $keyfile = "$tmp/wi_key";
spew($keyfile, unpack('H*', join('', map { chr(int(rand(256))) } 1 .. 32)) . "\n");

my $node = PostgreSQL::Test::Cluster->new('secrets');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_inbox, pg_stat_statements'
webhook_inbox.enabled = off
webhook_inbox.key_file = '$keyfile'
log_min_messages = debug1
pg_stat_statements.track = all
pg_stat_statements.track_utility = on
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION webhook_inbox; CREATE EXTENSION pg_stat_statements');
$node->safe_psql('postgres', 'CREATE ROLE rcv LOGIN IN ROLE webhook_inbox_receiver');

# the secrets, each in a file of its own as the recipe reads them
my %secret = (
	signing => 'ghsec_SIGN319a7f3c9d0e',
	st_signing => 'whsec_SIGN319b81c2d4e6',
	st_new => 'whsec_NEW319c0d9e8f7a',
	token => 'rk_test_TOKEN319d4e5f6a7',
	shop => 'shpat_TOKEN319e1f2a3b4c',
	refresh => 'shprt_REFRESH319f5a6b7c8',);
spew("$tmp/$_.secret", "$secret{$_}\n") for keys %secret;
my ($rc, $out, $err);
IPC::Run::run([ 'openssl', 'genrsa', '-out', "$tmp/app.pem", '2048' ], '>', \$out, '2>', \$err)
  or die "openssl genrsa: $err";
my @pem = split /\n/, slurp_file("$tmp/app.pem");
# the key's own lines (not its BEGIN and END lines)
my @pem_secret = grep { !/-----/ } @pem;
is(scalar(@pem_secret) > 20, 1, 'a 2048-bit RSA key to hide');

# docs/sql.md's recipe, as the page writes it
my $doc = slurp_file('docs/sql.md');
my ($section) = $doc =~ /^### Secrets and the logs\n(.*?)^### /ms;
ok(defined $section, 'docs/sql.md has "Secrets and the logs"');
my ($recipe) = ($section // '') =~ /```sql\n(.*?)```/s;
ok(defined $recipe && $recipe =~ /\\copy secrets/, 'with a psql recipe that reads the secrets with \copy');
$recipe //= '';
$recipe =~ s/^  //mg;
like($recipe, qr/^DROP TABLE secrets;$/m, 'which drops its table at the end');
my ($prelude) = $recipe =~ /^(.*?)^SELECT webhook_inbox/ms;

# psql in the directory of the secret files, as their owner would run it
sub psql_in_tmp
{
	my ($script) = @_;
	my ($o, $e) = ('', '');
	my $ok = IPC::Run::run([ 'psql', '-X', '-d', $node->connstr('postgres'), '-v', 'VERBOSITY=verbose', '-f', '-' ],
		'<', \$script, '>', \$o, '2>', \$e, init => sub { chdir $tmp or die "chdir: $!" });
	return ($ok, $o, $e);
}

# the recipe's own calls: a GitHub App made with its key, logged as all statements are
my ($ok, $o, $e) = psql_in_tmp("SET log_statement = 'all';\n" . $recipe);
ok($ok, 'the recipe runs') or diag($e);
is($node->safe_psql('postgres', "SELECT kind || ' ' || status FROM webhook_inbox.tenant_credentials_status"),
	'github_app active', 'the app key is stored');

# every credential function fails once and succeeds once, the secrets loaded as the recipe loads them
my $load = "SET log_statement = 'all';\n$prelude";
$load =~ s/^\\set ON_ERROR_STOP on\n//m;
for my $name (grep { $_ ne 'signing' } sort keys %secret)
{
	$load .= "\\copy secrets (value) FROM '$name.secret'\nUPDATE secrets SET name = '$name' WHERE name IS NULL;\n";
}
my $calls = <<'SQL';
SELECT webhook_inbox.create_source('st319', 'stripe', pg_temp.secret('st_signing'), api_base => 'http://127.0.0.1:1',
       api_token => pg_temp.secret('token'));
SELECT webhook_inbox.create_source('st319', 'stripe', pg_temp.secret('st_signing'), api_token => pg_temp.secret('token'));
SELECT webhook_inbox.create_source('st319b', 'standard', pg_temp.secret('st_signing') || '!');
SELECT webhook_inbox.rotate_secret('st319', pg_temp.secret('st_new'));
SELECT webhook_inbox.rotate_secret('st319', pg_temp.secret('st_new'));
SELECT webhook_inbox.retire_secret('st319', pg_temp.secret('st_signing'));
SELECT webhook_inbox.retire_secret('st319', pg_temp.secret('st_new'));
SELECT webhook_inbox.retire_secret('st319', pg_temp.secret('token'));
SELECT webhook_inbox.set_github_app('gh-app', 'not-a-number', pg_temp.secret('app.pem'));
SELECT webhook_inbox.set_github_app('gh-app', '123456', pg_temp.secret('signing'));
SELECT webhook_inbox.set_github_app('gh-app', '123457', pg_temp.secret('app.pem'));
SELECT webhook_inbox.create_source('shop319', 'shopify', pg_temp.secret('signing'), settings => '{"tenants": true}');
SELECT webhook_inbox.set_tenant_credentials('shop319', 'a319.myshopify.com', 'shopify_shop', pg_temp.secret('shop'),
       now() - interval '1 hour', pg_temp.secret('refresh'));
SELECT webhook_inbox.set_tenant_credentials('shop319', 'a319.myshopify.com', 'shopify_shop', pg_temp.secret('shop') || ' x');
SELECT webhook_inbox.set_tenant_credentials('shop319', 'a319.myshopify.com', 'shopify_shop', pg_temp.secret('shop'),
       now() + interval '1 hour', pg_temp.secret('refresh'), now() + interval '90 days');
DROP TABLE secrets;
SQL
($ok, $o, $e) = psql_in_tmp($load . $calls);
my @errors = $e =~ /^psql:<stdin>:\d+: ERROR:  (.*)$/mg;
is(join("\n", @errors), join("\n",
		'42710: source "st319" already exists',
		'22023: standard webhooks secret must be base64, optionally prefixed with whsec_',
		'42710: source "st319" already has this secret',
		'55000: cannot retire the only secret of source "st319"',
		'42704: source "st319" has no such secret',
		'22023: invalid GitHub App id "not-a-number"',
		'22023: private key is not in PEM format',
		'22023: expires_at is not in the future',
		'22023: secret contains characters a token never has'),
	'each function refused once, with its message') or diag($e);
is($node->safe_psql('postgres', q{SELECT (SELECT count(*) FROM webhook_inbox.sources WHERE name IN ('st319', 'shop319'))
	|| ' ' || (SELECT string_agg(kind || ':' || status, ',' ORDER BY kind) FROM webhook_inbox.tenant_credentials_status)}),
	'2 github_app:active,shopify_shop:active', 'and succeeded once');

# bound parameters from a client library (node-postgres, when node is here),
# in a session that sets log_parameter_max_length = 0 as the page says
my %bound = (bp_signing => 'whsec_BOUND319a1b2c3d4', bp_shop => 'shpat_BOUND319e5f6a7b8');
SKIP:
{
	skip 'node and npm are not installed', 2 unless grep { -x "$_/node" } split /:/, $ENV{PATH};
	my $dir = Cwd::abs_path('examples/node');
	unless (-d "$dir/node_modules/pg")
	{
		my ($o, $e) = ('', '');
		IPC::Run::run([ 'npm', 'ci', '--no-audit', '--no-fund' ], '>', \$o, '2>', \$e, init => sub { chdir $dir });
		skip "npm ci failed: $e", 2 if $?;
	}
	spew("$tmp/$_.secret", "$bound{$_}\n") for keys %bound;
	spew("$tmp/bound.js", <<'JS');
const { Client } = require('pg');
const fs = require('fs');
const read = (f) => fs.readFileSync(f, 'utf8').replace(/\n$/, '');
const calls = [
  ["SELECT webhook_inbox.create_source($1, 'stripe', $2)", ['bp319', read('bp_signing.secret')]],
  ["SELECT webhook_inbox.create_source($1, 'stripe', $2)", ['bp319', read('bp_signing.secret')]],
  ["SELECT webhook_inbox.rotate_secret($1, $2)", ['bp319', read('bp_signing.secret')]],
  ["SELECT webhook_inbox.set_tenant_credentials($1, $2, 'shopify_shop', $3, now() - interval '1 hour')",
   ['shop319', 'b319.myshopify.com', read('bp_shop.secret')]],
  ["SELECT webhook_inbox.set_tenant_credentials($1, $2, 'shopify_shop', $3, now() + interval '1 hour')",
   ['shop319', 'b319.myshopify.com', read('bp_shop.secret')]],
  ["SELECT webhook_inbox.set_github_app($1, '123458', $2)", ['gh-app', read('bp_shop.secret')]],
  ["SELECT webhook_inbox.set_github_app($1, '123458', $2)", ['gh-app', fs.readFileSync('app.pem', 'utf8')]],
];
(async () => {
  const c = new Client();
  await c.connect();
  await c.query('SET log_parameter_max_length = 0');
  for (const [q, p] of calls) {
    try { await c.query(q, p); console.log('ok'); } catch (e) { console.log(`${e.code}: ${e.message}`); }
  }
  await c.end();
})();
JS
	my ($o, $e) = ('', '');
	local $ENV{NODE_PATH} = "$dir/node_modules";
	local @ENV{qw(PGHOST PGPORT PGDATABASE PGUSER)} = ($node->host, $node->port, 'postgres', scalar getpwuid($<));
	IPC::Run::run([ 'node', "$tmp/bound.js" ], '>', \$o, '2>', \$e, init => sub { chdir $tmp or die "chdir: $!" });
	is($o, join('', map { "$_\n" } 'ok', '42710: source "bp319" already exists', '42710: source "bp319" already has this secret',
			'22023: expires_at is not in the future', 'ok', '22023: private key is not in PEM format', 'ok'),
		'node-postgres with bound parameters: each call fails and succeeds') or diag($e);
	%secret = (%secret, %bound);
	pass('the bound secrets are searched for too');
}

# the receiver verifies with the secrets it reads: a good and a bad signature
my $rcv = start_receiver($node);
my $body = '{"id":"evt_319","object":"event","type":"customer.updated","created":1,"data":{"object":{"id":"cus_1","object":"customer"}}}';
is(post($rcv, 'st319', sign('stripe', $secret{st_new}, $body), $body)->{status}, 200, 'signed with the new secret: 200');
is(post($rcv, 'st319', sign('stripe', $secret{st_signing}, $body), $body)->{status}, 401, 'with the retired one: 401');
is(stop_receiver($rcv), 0, 'the receiver exits cleanly');

# what was logged: the statements and the failures, and no secret
my $log = slurp_file($node->logfile);
like($log, qr/LOG:  statement: COPY\s+secrets \(\s*value\s*\) FROM STDIN/, 'the server log holds the statements');
like($log, qr/ERROR:  expires_at is not in the future/, 'and the failures');
like($log, qr/STATEMENT:  SELECT webhook_inbox\.set_tenant_credentials/, 'with the failed statements');
like($log, qr/DEBUG:/, 'at debug1');
my $pgss = $node->safe_psql('postgres', 'SELECT string_agg(query, E\'\n\') FROM pg_stat_statements');
like($pgss, qr/set_tenant_credentials/, 'pg_stat_statements holds the calls');
for my $where ([ 'the server log', $log ], [ 'the receiver log', $rcv->{log} . $rcv->{out} ],
	[ 'pg_stat_statements', $pgss ])
{
	my ($what, $text) = @$where;
	my @found = grep { index($text, $secret{$_}) >= 0 } sort keys %secret;
	push @found, 'app.pem' if grep { index($text, $_) >= 0 } @pem_secret;
	is("@found", '', "no secret in $what");
}

# the search finds a secret where one is written into a failing statement
$node->psql('postgres', "SELECT webhook_inbox.set_tenant_credentials('shop319', 'a319.myshopify.com', 'shopify_shop', "
	  . "'shpat_LITERAL319', now() - interval '1 hour')");
like(slurp_file($node->logfile), qr/STATEMENT: .*shpat_LITERAL319/,
	'a literal in a failing statement is logged, as PostgreSQL does (why the recipe exists)');

$node->stop;
done_testing();
