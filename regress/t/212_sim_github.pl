# webhook-sim's GitHub side: webhooks as GitHub sends them (X-GitHub-Event,
# X-GitHub-Delivery, X-Hub-Signature-256 = sha256=HMAC of the body, checked
# here with Digest::SHA), and the REST API driven by the official
# @octokit/rest client (regress/contract/github_contract.mjs: the issues
# list with octokit.paginate, state, since, sort, single issues and pull
# requests, the pulls list, a 404 as RequestError), with every object
# carrying what @octokit/openapi's schemas require; then every request the
# SDK sent is checked against @octokit/openapi's operations.
use strict;
use warnings;
use lib 'tools/test';
use Digest::SHA qw(hmac_sha256_hex);
use JSON::PP;
use SimTest;
use Test::More;

my $json = JSON::PP->new;
my $dir = contract_dir();

# webhooks
my $sink = start_sink();
my $sim = start_sim('--github', 'gh:gh_secret', '--seed', 9, '--objects', 40, '--events', 300,
	'--deliver-to', $sink->{url}, '--github-repo', 'acme/anvils');
ok(poll_until(sub { my (undef, $s) = http_json('GET', "$sim->{url}/_sim/status"); $s->{done} }, 60),
	'stream delivered');
my @req = sink_requests($sink);
is(scalar @req, 300, 'one delivery per event');
my ($badsig, $badhdr, %events, %actions) = (0, 0);
for my $r (@req)
{
	my $h = $r->{headers};
	$badsig++ unless ($h->{'x-hub-signature-256'} // '') eq 'sha256=' . hmac_sha256_hex($r->{body}, 'gh_secret');
	$badhdr++ unless ($h->{'x-github-delivery'} // '') =~ /^[0-9a-f-]{36}$/ && $r->{path} eq '/hooks/gh';
	my $b = $json->decode($r->{body});
	$events{ $h->{'x-github-event'} }++;
	$actions{ $b->{action} }++;
	$badhdr++ unless $b->{repository}{full_name} eq 'acme/anvils'
	  && ($h->{'x-github-event'} eq 'issues' ? $b->{issue}{id} : $b->{pull_request}{id} && $b->{number});
}
is($badsig, 0, 'every X-Hub-Signature-256 is sha256=HMAC-SHA256(secret, body)');
is($badhdr, 0, 'delivery ids, repository and the issue or pull_request object');
ok($events{issues} && $events{pull_request}, 'issues and pull_request events');
ok($actions{opened} && $actions{closed} && $actions{reopened} && $actions{edited}, 'opened, edited, closed, reopened');
stop_proc($sim);
stop_proc($sink);

# the REST API through @octokit/rest
my $log = tmpdir() . '/requests.log';
$sim = start_sim('--github', 'gh:gh_secret', '--seed', 9, '--objects', 80, '--events', 500,
	'--github-repo', 'acme/anvils', '--api-token', 'ghp_contract', '--request-log', $log);
my ($rc, $checks, $err) = run_node("$dir/github_contract.mjs", $sim->{url}, 'acme/anvils', 'ghp_contract');
is($rc, 0, 'the @octokit/rest run completed') or diag($err);
cmp_ok(scalar @$checks, '>=', 13, 'checks reported: ' . scalar @$checks);
ok($_->{ok}, "octokit: $_->{name}") or diag($_->{detail} // '') for @$checks;
my ($code, $doc) = http_json('GET', "$sim->{url}/repos/acme/anvils/issues?updated_since=2026-01-01T00:00:00Z",
	{ headers => { Authorization => 'token ghp_contract' } });
is($code, 400, 'an unknown parameter is refused (GitHub would ignore it)');
($code, $doc) = http_json('GET', "$sim->{url}/repos/acme/anvils/issues?state=bogus",
	{ headers => { Authorization => 'token ghp_contract' } });
is("$code $doc->{message} $doc->{errors}[0]{field}", '422 Validation Failed state', 'a bad value: 422 Validation Failed');
($code, $doc) = http_json('GET', "$sim->{url}/repos/acme/anvils/issues");
is("$code $doc->{message}", '401 Bad credentials', 'no token: 401 Bad credentials');
($code, $doc) = http_json('GET', "$sim->{url}/repos/acme/other/issues", { headers => { Authorization => 'token ghp_contract' } });
is("$code $doc->{message}", '404 Not Found', 'another repository: 404');
stop_proc($sim);

my ($rc2, $urls, $err2) = run_node("$dir/check_urls.mjs", $log);
is($rc2, 0, 'the URL check ran') or diag($err2);
my @bad = grep { !$_->{ok} } @$urls;
is_deeply([ map { @{ $_->{problems} } } @bad ], [ 'updated_since: not a query parameter of issues/list-for-repo' ],
	'every request but the deliberate one is an operation of @octokit/openapi with its parameters');
cmp_ok(scalar(grep { $_->{ok} && $_->{route} =~ /^(issues|pulls)\// } @$urls), '>=', 5,
	'request shapes checked: ' . scalar @$urls);

done_testing();
