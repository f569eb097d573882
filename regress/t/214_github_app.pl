# 214_github_app.pl
#	A GitHub App end to end, against webhook-sim modelling one strictly
#	(--github-app, tools/github_app.c):
#	(a) @octokit/auth-app and @octokit/rest authenticate against the
#	    simulator and accept its answers (regress/contract/github_app_contract.mjs:
#	    installation tokens, installations and repositories with the schemas
#	    of @octokit/openapi, JWTs breaking GitHub's rules refused 401, 403
#	    for a suspended installation, 404 for a removed one);
#	(b) the JWT the extension mints (PKCS#1 and PKCS#8 keys) is verified by
#	    Node's crypto and its claims checked against GitHub's rules
#	    (regress/contract/github_app_jwt.mjs);
#	(c) the worker's credential interface (_tenant_auth(), as
#	    wi_tenant_auth() gives it) mints an installation token through the
#	    simulator, caches it until shortly before it expires, mints again
#	    after expiry or when asked fresh, reads the repository with it, flags
#	    a suspended (403) or removed (404) installation and a refused key
#	    (401) without touching the others, and waits when the token
#	    endpoint is slower than http_timeout;
#	(d) a dump holds ciphertext only, and another key file cannot read it.
use strict;
use warnings;

use lib 'regress/t';
use lib 'tools/test';
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Digest::SHA qw(hmac_sha256_hex);
use JSON::PP;
use SimTest qw(start_sim stop_proc http_json poll_until contract_dir run_node tmpdir spew slurp start_sink
  sink_requests);
use Test::More;

my $dir = contract_dir();
my $tmp = tmpdir();

sub openssl
{
	my @args = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'openssl', @args ], '<', \undef, '>', \$out, '2>', \$err)
	  or die "openssl @args: $err";
	return $out;
}
openssl('genrsa', '-traditional', '-out', "$tmp/app.pem", '2048');
openssl('pkcs8', '-topk8', '-nocrypt', '-in', "$tmp/app.pem", '-out', "$tmp/app8.pem");
openssl('rsa', '-in', "$tmp/app.pem", '-pubout', '-out', "$tmp/app.pub");
openssl('genrsa', '-traditional', '-out', "$tmp/other.pem", '2048');
like(slurp("$tmp/app.pem"), qr/^-----BEGIN RSA PRIVATE KEY-----/, 'the app key is PKCS#1, as GitHub hands it out');
like(slurp("$tmp/app8.pem"), qr/^-----BEGIN PRIVATE KEY-----/, 'and its PKCS#8 form');

my @app = ('--github', 'gh:gh_secret', '--seed', 5, '--objects', 30, '--events', 60, '--github-repo', 'acme/anvils',
	'--github-app', '4242:Iv23liSimApp', '--github-app-key', "$tmp/app.pub");

# (a) the official clients against the simulator
my $log = "$tmp/requests.log";
my $sim = start_sim(@app, '--github-installation', '101', '--github-installation', '102:acme/other,acme/anvils',
	'--request-log', $log);
my ($rc, $checks, $err) = run_node("$dir/github_app_contract.mjs", $sim->{url}, "$tmp/app.pem", "$tmp/other.pem",
	'4242', 'Iv23liSimApp');
is($rc, 0, 'the @octokit/auth-app run completed') or diag($err);
cmp_ok(scalar @$checks, '>=', 29, 'checks reported: ' . scalar @$checks);
ok($_->{ok}, "octokit: $_->{name}") or diag($_->{detail} // '') for @$checks;
stop_proc($sim);
my ($urc, $urls, $uerr) = run_node("$dir/check_urls.mjs", $log);
is($urc, 0, 'the URL check ran') or diag($uerr);
is_deeply([ map { @{ $_->{problems} } } grep { !$_->{ok} } @$urls ], [],
	'every request the SDKs sent is an operation of @octokit/openapi with its parameters');
my %ops = map { ($_->{route} // '') =~ /^(\S+)/ ? ($1 => 1) : () } @$urls;
ok($ops{$_}, "the SDKs called $_") for qw(apps/create-installation-access-token apps/list-installations
  apps/list-repos-accessible-to-installation issues/list-for-repo);

# the app's webhooks name the installation the repository is granted to
my $sink = start_sink();
$sim = start_sim(@app, '--github-installation', '101:acme/other', '--github-installation', '102:acme/anvils',
	'--deliver-to', $sink->{url});
ok(poll_until(sub { my (undef, $s) = http_json('GET', "$sim->{url}/_sim/status"); $s->{done} }, 60), 'stream delivered');
my @dl = sink_requests($sink);
is(scalar @dl, 60, 'every event delivered');
my ($inst, $sig) = (0, 0);
for my $r (@dl)
{
	my $body = JSON::PP->new->decode($r->{body});
	$inst++ if ($body->{installation}{id} // 0) == 102 && $body->{installation}{node_id}
	  && $body->{repository}{full_name} eq 'acme/anvils';
	$sig++ if ($r->{headers}{'x-hub-signature-256'} // '') eq 'sha256=' . hmac_sha256_hex($r->{body}, 'gh_secret');
}
is($inst, 60, 'each carries installation.id 102, the installation granted acme/anvils');
is($sig, 60, 'and is signed over the bytes sent');
stop_proc($sim);
stop_proc($sink);

# a key the simulator cannot use is refused at start
my ($code) = IPC::Run::run([ SimTest::sim_bin(), 'serve', '--listen', '127.0.0.1:0', @app[0 .. 7],
	'--github-app', '4242', '--github-app-key', "$tmp/nosuch.pem" ], '<', \undef, '>', \my $o, '2>', \my $e);
ok(!$code && $e =~ /cannot open --github-app-key/, 'webhook-sim refuses a missing app key') or diag($e);

# (b), (c), (d): the extension
my $node = PostgreSQL::Test::Cluster->new('ghapp');
$node->init;
my $keyfile = $node->data_dir . '/../wi_key';
spew($keyfile, unpack('H*', join('', map { chr(int(rand(256))) } 1 .. 32)) . "\n");
chmod 0600, $keyfile;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_inbox'
webhook_inbox.enabled = off
webhook_inbox.http_timeout = 2s
webhook_inbox.key_file = '$keyfile'
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION webhook_inbox');

$sim = start_sim(@app, '--github-token-ttl', '8', '--github-installation', '101', '--github-installation', '102',
	'--github-installation', '103');
sub lit { my $s = shift; $s =~ s/'/''/g; return "'$s'" }
$node->safe_psql('postgres', "SELECT webhook_inbox.create_source('gh', 'github', 'gh_secret', api_base => '$sim->{url}')");
$node->safe_psql('postgres', "SELECT webhook_inbox.set_github_app('gh', '4242', " . lit(slurp("$tmp/app.pem")) . ", 'Iv23liSimApp')");
my $sid = $node->safe_psql('postgres', "SELECT id FROM webhook_inbox.sources WHERE name = 'gh'");

for my $k ([ 'PKCS#1', 'app.pem' ], [ 'PKCS#8', 'app8.pem' ])
{
	$node->safe_psql('postgres', "SELECT webhook_inbox.set_github_app('gh', '4242', " . lit(slurp("$tmp/$k->[1]")) . ", 'Iv23liSimApp')");
	my $jwt = $node->safe_psql('postgres', "SELECT webhook_inbox._github_app_jwt('gh')");
	my ($jrc, $jchecks, $jerr) = run_node("$dir/github_app_jwt.mjs", $jwt, "$tmp/app.pub", "$tmp/app.pem", 'Iv23liSimApp');
	is($jrc, 0, "the JWT check ran ($k->[0] key)") or diag($jerr);
	cmp_ok(scalar @$jchecks, '>=', 12, "JWT checks reported ($k->[0])");
	ok($_->{ok}, "JWT ($k->[0] key): $_->{name}") or diag($_->{detail} // '') for @$jchecks;
}

sub auth
{
	my ($tenant, $fresh) = @_;
	my $r = $node->safe_psql('postgres',
		"SELECT status || '|' || coalesce(header, '') || '|' || coalesce(reason, '') FROM webhook_inbox._tenant_auth($sid, '$tenant', "
		  . ($fresh ? 'true' : 'false') . ')');
	return split /\|/, $r, 3;
}
sub sim_tokens
{
	my (undef, $doc) = http_json('GET', "$sim->{url}/_sim/github/installations");
	return { map { $_->{id} => $_->{tokens} } @{ $doc->{installations} } };
}
sub read_issues
{
	my ($header) = @_;
	my ($name, $value) = split /: /, $header, 2;
	my ($status) = http_json('GET', "$sim->{url}/repos/acme/anvils/issues?state=all", { headers => { $name => $value } });
	return $status;
}

my ($st, $h1) = auth('101');
is($st, 'ok', 'an installation token through POST /app/installations/101/access_tokens');
like($h1, qr/^Authorization: Bearer ghs_\w{36}$/, 'the header a read sends');
is(sim_tokens()->{101}, 1, 'one token minted');
is(read_issues($h1), 200, 'the repository reads with it');
my ($st2, $h2) = auth('101');
is($h2, $h1, 'the next read uses the cached token');
is(sim_tokens()->{101}, 1, 'no second token minted');
my $stored = $node->safe_psql('postgres',
	"SELECT position(convert_to(" . lit(substr($h1, 22)) . ", 'UTF8') IN secret) FROM webhook_inbox.tenant_credentials WHERE tenant = '101'");
is($stored, '0', 'the cached token is stored encrypted');
my (undef, $h3) = auth('101', 1);
isnt($h3, $h1, 'fresh (after a 401 with a cached token): a new token');
is(sim_tokens()->{101}, 2, 'minted once more');

# tokens expire (8 s here): the cache is left in time and a new one minted
ok(poll_until(sub { read_issues($h1) == 401 }, 30), 'the first token expires: the simulator answers 401');
ok(poll_until(sub { my (undef, $h) = auth('101'); $h ne $h3 && $h ne $h1 }, 30), 'an expiring token is replaced');
my (undef, $h4) = auth('101');
is(read_issues($h4), 200, 'the new token reads');

# a 401 with a cached token: minted again once; a second 401 flags the installation
sub reauth
{
	my ($tenant, $header) = @_;
	my $r = $node->safe_psql('postgres',
		"SELECT status || '|' || coalesce(header, '') || '|' || coalesce(reason, '') FROM webhook_inbox._tenant_reauth($sid, '$tenant', "
		  . lit($header) . ')');
	return split /\|/, $r, 3;
}
my $minted = sim_tokens()->{101};
my ($rs, $h5) = reauth('101', $h4);
ok($rs eq 'ok' && $h5 ne $h4, 'a 401 with the cached token: a new token');
is(sim_tokens()->{101}, $minted + 1, 'minted once');
is(read_issues($h5), 200, 'and it reads');
my ($rs1, $h6) = reauth('101', $h1);
ok($rs1 eq 'ok' && $h6 eq $h5, 'a 401 for a token already replaced: the current one, no request');
is(sim_tokens()->{101}, $minted + 1, 'nothing minted');
my ($rs2, undef, $rr2) = reauth('101', $h5);
is($rs2, 'flagged', 'the token minted after a 401 is refused too: flagged');
like($rr2, qr/refused a token minted after a 401 \(401 twice\)/, 'with its reason');
is(sim_tokens()->{101}, $minted + 1, 'no third token');
$node->safe_psql('postgres', "SELECT webhook_inbox.enable_tenant('gh', '101')");
my ($rs3, $h7) = auth('101');
ok($rs3 eq 'ok' && $h7 ne $h5, 'enabled again: a new token (the refused one is not reused)');

# two backends refused with the same token: one mints, the other waits for it and takes its token
$minted = sim_tokens()->{101};
my $sql = "SELECT 'R|' || status || '|' || header FROM webhook_inbox._tenant_reauth($sid, '101', " . lit($h7) . ')';
my $a = $node->background_psql('postgres');
my $b = $node->background_psql('postgres');
$a->query_safe('BEGIN');
my ($ra) = $a->query_safe($sql) =~ /^R\|ok\|(.*)$/m;
ok($ra && $ra ne $h7, 'the first backend mints a new token in its transaction');
$b->query_until(qr/started/, "\\echo started\n$sql;\n");
ok($node->poll_query_until('postgres',
	"SELECT EXISTS (SELECT FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%_tenant_reauth%')"),
	'the second waits for the first one\'s row lock');
$a->query_safe('COMMIT');
my ($rb) = $b->query_safe('SELECT 1') =~ /^R\|ok\|(.*)$/m;
is($rb, $ra, 'then takes the token the first minted');
is(sim_tokens()->{101}, $minted + 1, 'one token minted for both');
is((auth('101'))[0], 'ok', 'and the installation is not flagged');
$a->quit;
$b->quit;

# suspended and removed installations flag only themselves
my ($s102) = auth('102');
is($s102, 'ok', 'installation 102 has a token');
http_json('POST', "$sim->{url}/_sim/github/installations/102?state=suspended");
http_json('POST', "$sim->{url}/_sim/github/installations/103?state=removed");
my ($f102, undef, $r102) = auth('102', 1);
is($f102, 'flagged', 'a suspended installation (403) is flagged');
like($r102, qr/installation 102 is suspended \(403 .*This installation has been suspended\)/, 'with its reason');
my ($f103, undef, $r103) = auth('103');
is($f103, 'flagged', 'a removed installation (404) is flagged');
like($r103, qr/installation 103 was removed \(404/, 'with its reason');
my ($f999) = auth('999');
is($f999, 'flagged', 'an installation that never was: flagged');
is((auth('101'))[0], 'ok', 'the other installation still reads');
is($node->safe_psql('postgres',
	"SELECT string_agg(tenant || ':' || status || ':' || coalesce(owner, ''), ' ' ORDER BY tenant) FROM webhook_inbox.tenant_credentials_status"),
	':active: 101:active: 102:flagged:engineering 103:flagged:engineering 999:flagged:engineering',
	'tenant_credentials_status: the flagged installations, for engineering');
my ($again) = auth('102');
is($again, 'flagged', 'a flagged installation stays flagged: no token request');
is(sim_tokens()->{102}, 1, 'and the simulator saw none');
http_json('POST', "$sim->{url}/_sim/github/installations/102?state=active");
$node->safe_psql('postgres', "SELECT webhook_inbox.enable_tenant('gh', '102')");
my ($back) = auth('102');
is($back, 'ok', 'unsuspended and enabled again: it reads');

# a key GitHub does not know (401): the app is flagged, until a good key is set
$node->safe_psql('postgres', "SELECT webhook_inbox.set_github_app('gh', '4242', " . lit(slurp("$tmp/other.pem")) . ", 'Iv23liSimApp')");
my ($w, undef, $wr) = auth('101', 1);
is($w, 'flagged', 'a JWT signed by another key is refused: flagged');
like($wr, qr/GitHub refused the app's JWT \(401 .*A JSON web token could not be decoded\)/, 'the app is flagged with GitHub\'s message');
my ($w102) = auth('102', 1);
is($w102, 'flagged', 'every installation waits for the app\'s key');
$node->safe_psql('postgres', "SELECT webhook_inbox.set_github_app('gh', '4242', " . lit(slurp("$tmp/app.pem")) . ", 'Iv23liSimApp')");
my ($good) = auth('101', 1);
is($good, 'ok', 'the right key: tokens again');

# the token request is bounded by http_timeout
http_json('POST', "$sim->{url}/_sim/faults", { content => '{"mode":"slow","ms":4000,"path_prefix":"/app/"}' });
my ($slow, undef, $sr) = auth('101', 1);
is($slow, 'wait', 'a token endpoint slower than http_timeout: the read waits');
like($sr, qr/access_tokens failed: .*(timed out|Timeout)/i, 'with the timeout as its reason');
http_json('DELETE', "$sim->{url}/_sim/faults");
my ($ok2) = auth('101', 1);
is($ok2, 'ok', 'and goes on once it answers');

# (d) a dump holds ciphertext only; another key cannot read it
my ($dump, $derr) = ('', '');
IPC::Run::run([ 'pg_dump', '-d', $node->connstr('postgres') ], '<', \undef, '>', \$dump, '2>', \$derr)
  or die "pg_dump: $derr";
like($dump, qr/COPY webhook_inbox\.tenant_credentials/, 'pg_dump dumps tenant_credentials');
my ($tok) = (split /\|/, $node->safe_psql('postgres', "SELECT header FROM webhook_inbox._tenant_auth($sid, '101')"))[0] =~ /(ghs_\w+)/;
ok($tok && index($dump, $tok) < 0, 'the dump does not hold the installation token');
ok(index($dump, 'PRIVATE KEY') < 0, 'nor the private key');
my $other = "$keyfile.other";
spew($other, ('ab' x 32) . "\n");
chmod 0600, $other;
my ($orc, $oout, $oerr) = $node->psql('postgres',
	"SET webhook_inbox.key_file = '$other'; SELECT status, header IS NULL FROM webhook_inbox._tenant_auth($sid, '101')");
is($oout, 'wait|t', 'another key file cannot decrypt the credentials: the read waits, without a header');
like($oerr, qr/WARNING: .*could not be read: .*was encrypted under another key/, 'and a WARNING says why');

stop_proc($sim);
$node->stop;
done_testing();
