# Convergence of a GitHub App against webhook-sim modelling one strictly
# (--github-app, tools/github_app.c).
#
# The app has three installations: the model spreads its issues and pull
# requests over two repositories, acme/anvils granted to 101 (with an empty
# acme/spare) and beta/bolts to 102; 103 was granted only an empty
# repository and sends no webhook (GET /app/installations names it).
# Installation tokens last 3 s (--github-token-ttl), so they expire many
# times while the stream is delivered and swept.  A repository is readable
# only with the token of the installation it was granted to; any other
# read is 401, 403 or 404.  For two seeds the stream reaches the real
# receiver with ~15 % of the deliveries dropped (holed), doubled and
# reordered (shuffled), each carrying installation.id; the worker sweeps on
# a 1 s interval, per (installation, type), listing each installation's
# repositories (GET /installation/repositories) and then each repository's
# issues and pulls under that installation's token.  webhook-sim verify,
# comparing per tenant, reports zero differences; every acknowledged
# delivery is in the inbox; both installations' tokens were minted again.
#
# The first seed's app key is disabled while its stream begins: its
# passes fail without sending anything (a failed_sweep row in queues says
# why, tenant_credentials_status shows the key disabled), and once
# enable_tenant() gives it back they run and converge by themselves.  The
# last seed's installation 101 is then suspended: a read under its token
# is answered 403, the token endpoint says it is suspended (403), the
# installation is flagged for engineering (tenant_credentials_status), its
# passes fail, and none of its objects is tombstoned; unsuspended and
# enabled again, it is swept again.  The installation webhooks then
# suspend (a flagged_tenant queue row), unsuspend and delete (no longer
# swept) installation 102.
#
# Then a rate limit per installation (--github-rate-limit): one
# installation over its limit waits for its reset, sends nothing meanwhile
# and is not flagged, while the other is swept; and an organisation's
# webhook without an app or settings.repo, whose deliveries name two
# repositories, is reconciled over both.
use strict;
use warnings;

use lib 'regress/t';
use lib 'tools/test';
use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use WorkerTest;
use SimTest qw(poll_until tmpdir slurp spew);

my $t_start = Time::HiRes::time();
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
openssl('rsa', '-in', "$tmp/app.pem", '-pubout', '-out', "$tmp/app.pub");
my $keyfile = "$tmp/wi_key";
spew($keyfile, unpack('H*', join('', map { chr(int(rand(256))) } 1 .. 32)) . "\n");
chmod 0600, $keyfile;

my $node = worker_node('ghapp_conv', "webhook_inbox.key_file = '$keyfile'\nwebhook_inbox.http_timeout = 3s\n");
my $rcv = start_receiver($node);
my @types = qw(issue pull_request);
sub lit { my $s = shift; $s =~ s/'/''/g; return "'$s'" }
sub q1 { return $node->safe_psql('postgres', $_[0]) }
sub set_conf
{
	my ($k, $v) = @_;
	q1(defined $v ? "ALTER SYSTEM SET $k = '$v'" : "ALTER SYSTEM RESET $k");
	q1('SELECT pg_reload_conf()');
}
sub verified
{
	my ($src, $sim) = @_;
	my ($vrc) = run_sim('verify', '--db', $node->connstr('postgres'), '--source', $src, '--api', $sim->{url});
	return $vrc == 0;
}

my @seeds = (21, 34);
for my $seed (@seeds)
{
	my $src = "ghapp$seed";
	my $secret = "gh_secret$seed";
	my $first = $seed == $seeds[0];
	add_source($node, $src, 'github', $secret, 'http://127.0.0.1:9');
	my $sid = q1("SELECT id FROM webhook_inbox.sources WHERE name = '$src'");
	q1("SELECT webhook_inbox.set_github_app('$src', '4242', " . lit(slurp("$tmp/app.pem")) . ", 'Iv23liSimApp')");
	# the first seed's app key is disabled while the stream begins: its reads wait
	q1("SELECT webhook_inbox.disable_tenant('$src', '', 'the app key is being rotated')") if $first;
	my $sim = start_sim('--github', "$src:$secret", '--seed', $seed, '--objects', 60, '--events', 400,
		'--github-repo', 'acme/anvils,beta/bolts', '--github-app', '4242:Iv23liSimApp',
		'--github-app-key', "$tmp/app.pub", '--github-installation', '101:acme/anvils,acme/spare',
		'--github-installation', '102:beta/bolts', '--github-installation', '103:gamma/empty',
		'--github-token-ttl', '3', '--deliver-to', $rcv->{url}, '--drop', '0.15', '--duplicate', '0.1',
		'--reorder-ms', '150', '--concurrency', 8, '--retry-base-ms', 100, '--rate', 50);
	q1("UPDATE webhook_inbox.sources SET api_base = '$sim->{url}' WHERE name = '$src'");
	set_conf('webhook_inbox.sweep_interval', '1s');

	if ($first)
	{
		# no usable key: passes fail without a request, and say why in queues
		ok(poll_until(sub {
			q1(qq{SELECT count(*) > 0 FROM webhook_inbox.sweep_runs WHERE source_id = $sid AND tenant = '101'
				AND status = 'failed' AND error LIKE '%tenant_credentials: the GitHub App''s key is disabled: the app key is being rotated%'}) eq 't'
		}, 30), "seed $seed: with the app's key disabled the installation's passes fail (tenant_credentials)");
		like(q1(qq{SELECT string_agg(DISTINCT queue || ' ' || owner || ' ' || tenant, ', ')
			FROM webhook_inbox.queues WHERE source = '$src'}),
			qr/failed_sweep engineering 101/, "seed $seed: queues shows the installation's waiting reads for engineering");
		my (undef, $gi) = http_json('GET', "$sim->{url}/_sim/github/installations");
		is(join(',', map { $_->{tokens} } @{ $gi->{installations} }), '0,0,0',
			"seed $seed: no token was asked for without a key");
		is(q1("SELECT status FROM webhook_inbox.tenant_credentials_status WHERE source = '$src' AND tenant = ''"),
			'disabled', "seed $seed: tenant_credentials_status shows the disabled key");
		q1("SELECT webhook_inbox.enable_tenant('$src', '')");
		# installation 103 sends no webhook (its repository is empty): GET /app/installations names it
		is(q1("SELECT webhook_inbox.discover_tenants('$src')"), 3, "seed $seed: GET /app/installations lists all three");
	}
	else
	{
		ok(poll_until(sub {
			q1("SELECT discovered_by FROM webhook_inbox.tenants WHERE source_id = $sid AND tenant = '103'") eq 'list'
		}, 30), "seed $seed: the worker found installation 103 in GET /app/installations");
	}

	my $done = poll_until(sub {
		my (undef, $s) = http_json('GET', "$sim->{url}/_sim/status");
		return $s && $s->{done} ? $s : undef;
	}, 60);
	ok($done, "seed $seed: stream delivered");
	cmp_ok($done->{dropped}, '>', 0, "seed $seed: deliveries were dropped ($done->{dropped})");
	cmp_ok($done->{duplicated}, '>', 0, "seed $seed: deliveries were doubled ($done->{duplicated})");
	wait_drained($node, "seed $seed: stream");
	my $acked = $done->{generated} - $done->{dropped} - $done->{failed};
	is(q1(qq{SELECT count(DISTINCT d.event_id) FROM webhook_inbox.deliveries d
		WHERE d.source_id = $sid AND coalesce(d.delivery_id, '') NOT LIKE 'sweep %'}),
		$acked, "seed $seed: every one of the $acked acknowledged deliveries is recorded");
	is(q1("SELECT string_agg(DISTINCT tenant, ',' ORDER BY tenant) FROM webhook_inbox.inbox WHERE source_id = $sid"),
		'101,102', "seed $seed: every delivery named the installation of its repository (installation.id)");

	# the worker's own passes, per installation and repository
	ok(poll_until(sub { verified($src, $sim) }, 40), "seed $seed: the worker's per-installation sweeps converged");
	is(q1(qq{SELECT string_agg(DISTINCT tenant, ',' ORDER BY tenant) FROM webhook_inbox.sweep_runs
		WHERE source_id = $sid AND trigger = 'schedule' AND status IN ('complete', 'incomplete')}), '101,102,103',
		"seed $seed: the worker swept each installation");

	# both layers by hand, per installation and type
	for my $layer (qw(incremental full))
	{
		for my $tenant (qw(101 102 103))
		{
			for my $t (@types)
			{
				my ($st, $why) = split /\|/, q1("SELECT status, coalesce(incomplete_reason, error, '') "
					  . "FROM webhook_inbox.sweep_now('$src', '$t', '$layer', '$tenant')"), 2;
				ok($st eq 'complete' || ($st eq 'incomplete' && $why =~ /^(no checkpoint yet|objects absent)/),
					"seed $seed: $layer sweep of installation $tenant, $t ($st)") or diag($why);
			}
		}
	}
	wait_drained($node, "seed $seed: sweeps");
	verify_source($node, $src, $sim, "seed $seed");
	cmp_ok(q1("SELECT coalesce(sum(repaired), 0) FROM webhook_inbox.sweep_runs WHERE source_id = $sid"), '>', 0,
		"seed $seed: the sweeps repaired what was dropped");
	is(q1("SELECT count(*) FROM webhook_inbox.objects WHERE source_id = $sid AND deleted"), 0,
		"seed $seed: nothing tombstoned");
	is(q1(qq{SELECT string_agg(DISTINCT tenant || ' ' || (state -> 'repository' ->> 'full_name'), ', ')
		FROM webhook_inbox.objects WHERE source_id = $sid AND state ? 'repository'}),
		'101 acme/anvils, 102 beta/bolts', "seed $seed: each repository's objects under its own installation");
	my (undef, $gi) = http_json('GET', "$sim->{url}/_sim/github/installations");
	my %tok = map { $_->{id} => $_->{tokens} } @{ $gi->{installations} };
	cmp_ok($tok{101}, '>=', 2, "seed $seed: installation 101's 3 s tokens expired and were minted again ($tok{101})");
	cmp_ok($tok{102}, '>=', 2, "seed $seed: and installation 102's ($tok{102})");
	cmp_ok($tok{103}, '>=', 1, "seed $seed: installation 103 got tokens of its own ($tok{103})");
	is($gi->{jwt_refused}, 0, "seed $seed: no JWT was refused");

	if ($seed == $seeds[-1])
	{
		# a repository is readable only with the token of the installation it was granted to
		(my $h = q1("SELECT header FROM webhook_inbox._tenant_auth($sid, '102')")) =~ s/^Authorization: //;
		my ($c1) = http_json('GET', "$sim->{url}/repos/acme/anvils/issues?state=all", { headers => { Authorization => $h } });
		is($c1, 404, "another installation's repository is 404 under 102's token");
		my ($c2) = http_json('GET', "$sim->{url}/repos/beta/bolts/issues?state=all", { headers => { Authorization => $h } });
		is($c2, 200, 'its own is 200');

		# suspended: a queue row for engineering, never deletions
		set_conf('webhook_inbox.full_sweep_interval', '1s');
		my ($code) = http_json('POST', "$sim->{url}/_sim/github/installations/101?state=suspended");
		is($code, 200, 'installation 101 suspended');
		my ($st, $err) = split /\|/, q1("SELECT status, coalesce(error, '') FROM webhook_inbox.sweep_now('$src', 'issue', 'full', '101')"), 2;
		is($st, 'failed', 'a pass of the suspended installation fails');
		like($err, qr/tenant_credentials: installation 101 .*suspended.*403/i, 'because the token endpoint said 403 suspended')
		  or diag($err);
		is(q1("SELECT status || ' ' || owner FROM webhook_inbox.tenant_credentials_status WHERE source = '$src' AND tenant = '101'"),
			'flagged engineering', 'the installation is flagged for engineering');
		is(q1("SELECT status || ' ' || owner FROM webhook_inbox.tenant_status WHERE source = '$src' AND tenant = '101'"),
			'flagged engineering', 'its one status (tenant_status) says flagged too');
		like(q1("SELECT string_agg(queue || ' ' || owner || ' ' || tenant, ', ') FROM webhook_inbox.queues WHERE source = '$src'"),
			qr/flagged_tenant engineering 101/, 'queues shows it as a flagged_tenant row');
		# flagged, it waits for a person: the worker tries none of its passes, 102's go on
		my $t_flag = q1('SELECT now()');
		ok(poll_until(sub {
			q1("SELECT count(*) FROM webhook_inbox.sweep_runs WHERE source_id = $sid AND tenant = '102' "
				  . "AND trigger = 'schedule' AND started_at > '$t_flag'") > 2
		}, 30), 'the worker goes on sweeping installation 102');
		is(q1("SELECT count(*) FROM webhook_inbox.sweep_runs WHERE source_id = $sid AND tenant = '101' "
			  . "AND trigger = 'schedule' AND started_at > '$t_flag'"), 0, 'and tries no pass of the flagged one');
		is(q1("SELECT count(*) FROM webhook_inbox.objects WHERE source_id = $sid AND deleted"), 0,
			'and tombstones none of its objects');
		is(q1(qq{SELECT count(*) FROM webhook_inbox.sweep_runs WHERE source_id = $sid AND tenant = '102'
			AND status = 'failed' AND started_at > now() - interval '3 seconds'}), 0,
			'installation 102 is not held back');
		($code) = http_json('POST', "$sim->{url}/_sim/github/installations/101?state=active");
		q1("SELECT webhook_inbox.enable_tenant('$src', '101')");
		is(q1("SELECT status FROM webhook_inbox.sweep_now('$src', 'issue', 'full', '101')"), 'complete',
			'unsuspended and enabled, it is swept again');
		verify_source($node, $src, $sim, 'after the suspension');
		set_conf('webhook_inbox.full_sweep_interval', undef);

		# the installation's own lifecycle webhooks (X-GitHub-Event: installation)
		my $n = 0;
		my $life = sub {
			my ($action, $id) = @_;
			$n++;
			q1("SELECT webhook_inbox.intake('$src', ARRAY['x-github-delivery', 'life-$seed-$n', 'x-github-event', "
				  . "'installation'], convert_to('{\"action\":\"$action\",\"installation\":{\"id\":$id}}', 'UTF8'))");
			return q1("SELECT status FROM webhook_inbox.tenants WHERE source_id = $sid AND tenant = '$id'");
		};
		is($life->('suspend', 102), 'flagged', 'installation.suspend flags the installation');
		is(q1("SELECT owner || ' ' || tenant FROM webhook_inbox.queues WHERE source = '$src' AND queue = 'flagged_tenant'"),
			'engineering 102', 'a flagged_tenant row for engineering');
		is($life->('unsuspend', 102), 'active', 'installation.unsuspend makes it active again');
		is($life->('deleted', 102), 'disabled', 'installation.deleted disables it');
		is($life->('unsuspend', 102), 'disabled', 'and an unsuspend does not bring a deleted installation back');
		like(q1("SELECT reason FROM webhook_inbox.tenants WHERE source_id = $sid AND tenant = '102'"),
			qr/^uninstalled: installation\.deleted received at /, 'the reason says which webhook and when');
		my $before = q1("SELECT count(*) FROM webhook_inbox.sweep_runs WHERE source_id = $sid AND tenant = '102'");
		set_conf('webhook_inbox.sweep_interval', '1s');
		ok(poll_until(sub {
			q1("SELECT count(*) FROM webhook_inbox.sweep_runs WHERE source_id = $sid AND tenant = '101' "
				. "AND started_at > now() - interval '1 second'") > 0
		}, 20), 'the worker sweeps on');
		is(q1("SELECT count(*) FROM webhook_inbox.sweep_runs WHERE source_id = $sid AND tenant = '102'"), $before,
			'but no longer the deleted installation');
	}
	set_conf('webhook_inbox.sweep_interval', undef);
	stop_proc($sim);
}
# GitHub meters an app per installation (x-ratelimit-remaining, until
# x-ratelimit-reset): a spent limit makes that installation's reads wait
# for its reset, is no suspension, and holds back no other installation.
{
	my $src = 'ghrate';
	add_source($node, $src, 'github', 'rate_secret', 'http://127.0.0.1:9');
	q1("SELECT webhook_inbox.set_github_app('$src', '4242', " . lit(slurp("$tmp/app.pem")) . ", 'Iv23liSimApp')");
	my $sim = start_sim('--github', "$src:rate_secret", '--seed', 77, '--objects', 40, '--events', 160,
		'--github-repo', 'acme/anvils,beta/bolts', '--github-app', '4242:Iv23liSimApp',
		'--github-app-key', "$tmp/app.pub", '--github-installation', '101:acme/anvils',
		'--github-installation', '102:beta/bolts', '--github-rate-limit', '4/5', '--drop', '0.2',
		'--deliver-to', $rcv->{url});
	q1("UPDATE webhook_inbox.sources SET api_base = '$sim->{url}' WHERE name = '$src'");
	ok(poll_until(sub { my (undef, $st) = http_json('GET', "$sim->{url}/_sim/status"); $st && $st->{done} }, 60),
		'rate limits: stream delivered');
	wait_drained($node, 'rate limits');
	my $pass = sub {
		my ($t, $layer, $tenant) = @_;
		return split /\|/, q1("SELECT status, coalesce(error, '') FROM webhook_inbox.sweep_now('$src', '$t', '$layer', '$tenant')"), 2;
	};
	my $inst = sub {
		my (undef, $gi) = http_json('GET', "$sim->{url}/_sim/github/installations");
		return { map { $_->{id} => $_ } @{ $gi->{installations} } };
	};
	# four requests per installation per 5 s: two passes (its repositories, then a list) each
	is(($pass->('issue', 'full', '101'))[0], 'complete', 'rate limits: 101 issues');
	is(($pass->('pull_request', 'full', '101'))[0], 'complete', 'rate limits: 101 pulls');
	my $tokens = $inst->()->{101}{tokens};
	# two passes in one session (the window is kept in the process, as in the worker)
	my ($first, $second) = split /\n/, q1(join(';', map {
		"SELECT status || '|' || coalesce(error, '') FROM webhook_inbox.sweep_now('$src', 'issue', 'incremental', '101')"
	} 1 .. 2));
	my ($st, $err) = split /\|/, $first, 2;
	is($st, 'failed', "rate limits: 101's fifth request is over its limit");
	like($err, qr/rate_limited: installation 101: http 403, x-ratelimit-remaining 0, waiting \d+ s/,
		'the pass says it waits for the reset') or diag($err);
	is($inst->()->{101}{tokens}, $tokens, 'no token was minted for it: a rate limit is no suspension');
	is(($pass->('issue', 'full', '102'))[0], 'complete', 'rate limits: 102 is not held back (issues)');
	is(($pass->('pull_request', 'full', '102'))[0], 'complete', 'nor its pulls');
	like($second, qr/^failed\|.*rate_limited: installation 101's rate limit is spent until its reset/,
		'inside the window 101 sends nothing');
	is($inst->()->{101}{rate_limited}, 1, 'GitHub refused one request of 101 only');
	is(q1("SELECT status FROM webhook_inbox.tenant_credentials_status WHERE source = '$src' AND tenant = '101'"),
		'active', 'and 101 is not flagged');
	ok(poll_until(sub { ($pass->('issue', 'incremental', '101'))[0] =~ /^(complete|incomplete)$/ }, 15),
		'after the reset 101 is swept again');
	wait_drained($node, 'rate limits: sweeps');
	verify_source($node, $src, $sim, 'rate limits');
	stop_proc($sim);
}

# An organisation's webhook (no app, one hook for its repositories, no
# settings.repo): the sweeps list every repository its deliveries named.
{
	my $src = 'ghorg';
	q1("SELECT webhook_inbox.create_source('$src', 'github', 'org_secret', api_base => 'http://127.0.0.1:9', "
		  . "api_token => 'ghp_orgtoken')");
	my $sid = q1("SELECT id FROM webhook_inbox.sources WHERE name = '$src'");
	my $sim = start_sim('--github', "$src:org_secret", '--seed', 55, '--objects', 40, '--events', 200,
		'--github-repo', 'octo-org/widgets,octo-org/gadgets', '--api-token', 'ghp_orgtoken', '--deliver-to', $rcv->{url},
		'--drop', '0.2', '--duplicate', '0.1', '--reorder-ms', '100', '--concurrency', 8, '--retry-base-ms', 100);
	q1("UPDATE webhook_inbox.sources SET api_base = '$sim->{url}' WHERE name = '$src'");
	ok(poll_until(sub { my (undef, $st) = http_json('GET', "$sim->{url}/_sim/status"); $st && $st->{done} }, 60),
		'organisation hook: stream delivered');
	wait_drained($node, 'organisation hook');
	ok(!verified($src, $sim), 'organisation hook: the holed stream left differences');
	is(q1("SELECT string_agg(DISTINCT state -> 'repository' ->> 'full_name', ',' ORDER BY state -> 'repository' ->> 'full_name') "
		  . "FROM webhook_inbox.objects WHERE source_id = $sid"), 'octo-org/gadgets,octo-org/widgets',
		'organisation hook: its deliveries named two repositories');
	for my $t (@types)
	{
		is(q1("SELECT status FROM webhook_inbox.sweep_now('$src', '$t', 'full')"), 'complete',
			"organisation hook: a full pass of $t over the repository the deliveries named");
	}
	wait_drained($node, 'organisation hook sweeps');
	verify_source($node, $src, $sim, 'organisation hook');
	stop_proc($sim);
}

my $secs = Time::HiRes::time() - $t_start;
cmp_ok($secs, '<', 90, sprintf('done in %.1f s', $secs));
is(stop_receiver($rcv), 0, 'the receiver exits 0 on SIGTERM');
done_testing();
