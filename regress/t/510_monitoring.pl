
# 510_monitoring.pl
#	Monitoring end to end: the alert rules load and pass their promtool unit
#	tests; the receiver's /metrics and postgres_exporter running
#	monitoring/postgres_exporter.yml (as a webhook_inbox_reader) both pass
#	promtool check metrics; a real Prometheus on loopback scrapes both
#	with the shipped rules, and a source flagged in the database fires
#	WebhookInboxSourceFlagged.

use strict;
use warnings;

use lib 'receiver/t';
use Cwd qw(abs_path);
use HTTP::Tiny;
use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Utils;
use ReceiverTest;
use Test::More;

for my $tool (qw(promtool prometheus prometheus-postgres-exporter))
{
	plan skip_all => "$tool is not installed (scripts/deps.sh installs it)"
	  unless grep { -x "$_/$tool" } split /:/, $ENV{PATH};
}

my $rules = abs_path('monitoring/alerts.yml');
my $rules_test = abs_path('monitoring/alerts_test.yml');
my $queries = abs_path('monitoring/postgres_exporter.yml');
my $tmp = PostgreSQL::Test::Utils::tempdir;

# promtool reading stdin (or files): exit code and what it printed
sub promtool
{
	my ($in, @args) = @_;
	my ($out, $err) = ('', '');
	# test rules keeps its series in a temporary database
	local $ENV{TMPDIR} = $tmp;
	IPC::Run::run([ 'promtool', @args ], '<', \$in, '>', \$out, '2>', \$err);
	return ($? >> 8, $out . $err);
}

sub get_json
{
	my ($url) = @_;
	my $res = HTTP::Tiny->new(timeout => 5)->get($url);
	return undef unless $res->{success};
	return eval { decode_json($res->{content}) };
}

###########################################################################
# The rules: valid, and each alert fires exactly where its unit test says
###########################################################################

{
	my ($rc, $out) = promtool('', 'check', 'rules', $rules);
	is($rc, 0, 'promtool check rules accepts monitoring/alerts.yml');
	# every rule of the file, however many there are
	my $n = () = PostgreSQL::Test::Utils::slurp_file($rules) =~ /^\s*- alert:/mg;
	like($out, qr/SUCCESS: $n rules found/, "all $n rules load");
	($rc, $out) = promtool('', 'test', 'rules', $rules_test);
	is($rc, 0, 'promtool test rules passes') or diag($out);
	like($out, qr/SUCCESS/, 'the rules unit tests report success');
}

###########################################################################
# Two scrape targets: the receiver and postgres_exporter
###########################################################################

my $node = new_node('monitoring');
my $secret = 'mon-secret';
$node->safe_psql('postgres', qq{
	SELECT webhook_inbox.create_source(name => 'mon_gh', kind => 'github', secret => '$secret');
	CREATE ROLE exporter LOGIN IN ROLE webhook_inbox_reader;
});
my $r = start_receiver($node);

# traffic of every kind the metrics count: a good delivery, a bad signature
my $body = '{"action":"opened","issue":{"id":5,"state":"open","updated_at":"2026-01-01T00:00:00Z"}}';
my $good = post($r, 'mon_gh', sign('github', $secret, $body, id => 'mon-1', event => 'issues'), $body);
is($good->{status}, 200, 'a signed delivery is accepted');
my $bad = post($r, 'mon_gh', sign('github', 'wrong', $body, id => 'mon-2', event => 'issues'), $body);
is($bad->{status}, 401, 'a wrongly signed delivery is refused');

my $rmetrics = admin_get($r, '/metrics');
is($rmetrics->{status}, 200, 'the receiver serves /metrics (on its admin listener)');
{
	my ($rc, $out) = promtool($rmetrics->{content}, 'check', 'metrics');
	is($rc, 0, "the receiver's /metrics passes promtool check metrics");
	is($out, '', 'promtool has nothing to say about it');
}
like($rmetrics->{content}, qr/^webhook_receiver_requests_total\{source="mon_gh",status="401"\} 1$/m,
	'the refused delivery is counted by source and status');

my $eport = PostgreSQL::Test::Cluster::get_free_port();
my ($eout, $elog) = ('', '');
my $exporter;
{
	local $ENV{DATA_SOURCE_NAME} = 'host=' . $node->host . ' port=' . $node->port
	  . ' user=exporter dbname=postgres sslmode=disable';
	$exporter = IPC::Run::start(
		[
			'prometheus-postgres-exporter', '--disable-default-metrics',
			'--disable-settings-metrics', "--extend.query-path=$queries",
			"--web.listen-address=127.0.0.1:$eport"
		],
		'>', \$eout, '2>', \$elog);
}
my $emetrics;
ok( poll_until(
		sub {
			my $res = HTTP::Tiny->new(timeout => 5)->get("http://127.0.0.1:$eport/metrics");
			$emetrics = $res->{content} if $res->{success};
			return $res->{success} && $res->{content} =~ /^webhook_inbox_source_flagged/m;
		},
		'exporter metrics', 60),
	'postgres_exporter serves the webhook_inbox queries') or diag($elog);
{
	my ($rc, $out) = promtool($emetrics, 'check', 'metrics');
	is($rc, 0, "the exporter's metrics pass promtool check metrics") or diag($out);
}
like($emetrics, qr/^webhook_inbox_inbox_pending\{[^}]*\} 1$/m, 'the pending event is exported');
like($emetrics, qr/^webhook_inbox_source_flagged\{kind="github",[^}]*source="mon_gh"\} 0$/m,
	'the source is exported, not flagged');
like($emetrics, qr/^webhook_inbox_worker_claimed_total\{[^}]*\} 0$/m, "the worker's counters are exported");
like($emetrics, qr/^webhook_inbox_tenant_inbox_pending\{[^}]*source="mon_gh"[^}]*\} 1$/m,
	"the pending event is exported per tenant (the source's own account)");
unlike($emetrics, qr/pg_exporter_last_scrape_error\{[^}]*\} 1/, 'no query of the file failed');
unlike($emetrics, qr/$secret/, 'no secret in what the exporter shows');

###########################################################################
# A real Prometheus with the shipped rules
###########################################################################

my $pport = PostgreSQL::Test::Cluster::get_free_port();
open(my $fh, '>', "$tmp/prometheus.yml") or die;
print $fh <<"EOF";
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $rules
scrape_configs:
  - job_name: receiver
    static_configs:
      - targets: ['127.0.0.1:$r->{admin_port}']
  - job_name: postgres
    static_configs:
      - targets: ['127.0.0.1:$eport']
EOF
close $fh;
my ($pout, $plog) = ('', '');
my $prom = IPC::Run::start(
	[
		'prometheus', "--config.file=$tmp/prometheus.yml",
		"--storage.tsdb.path=$tmp/tsdb", "--web.listen-address=127.0.0.1:$pport"
	],
	'>', \$pout, '2>', \$plog);
my $api = "http://127.0.0.1:$pport/api/v1";

ok( poll_until(
		sub {
			my $t = get_json("$api/targets") or return 0;
			my @up = grep { $_->{health} eq 'up' } @{ $t->{data}{activeTargets} };
			return @up == 2;
		},
		'both targets up', 60),
	'Prometheus scrapes the receiver and the exporter') or diag($plog);

sub firing
{
	my ($name) = @_;
	my $a = get_json("$api/alerts") or return ();
	return grep { $_->{labels}{alertname} eq $name && $_->{state} eq 'firing' } @{ $a->{data}{alerts} };
}

# the rules are loaded and evaluated; with nothing flagged nothing fires
ok( poll_until(
		sub {
			my $g = get_json("$api/rules") or return 0;
			my @rules = map { @{ $_->{rules} } } @{ $g->{data}{groups} };
			my ($flag) = grep { $_->{name} eq 'WebhookInboxSourceFlagged' } @rules;
			return $flag && $flag->{health} eq 'ok' && $flag->{lastEvaluation} !~ /^0001/;
		},
		'rules evaluated', 60),
	'Prometheus evaluates the shipped rules');
is(scalar(firing('WebhookInboxSourceFlagged')), 0, 'no source is flagged yet: the alert is quiet');

# the provider refuses the credentials: the worker flags the source
$node->safe_psql('postgres',
	"UPDATE webhook_inbox.sources SET flagged = 'the read API answered 401: check api_token' WHERE name = 'mon_gh'");
my @fired;
ok(poll_until(sub { @fired = firing('WebhookInboxSourceFlagged'); return @fired > 0 }, 'the alert', 90),
	'WebhookInboxSourceFlagged fires');
is($fired[0]{labels}{source}, 'mon_gh', 'for the flagged source');
is($fired[0]{labels}{owner}, 'engineering', 'owned by engineering');
is($fired[0]{annotations}{summary}, 'mon_gh: the provider refused our credentials', 'with its summary');
note('fired: ' . JSON::PP->new->canonical->encode($fired[0]));

# a tenant of another source whose credentials the provider refused: a queue row with its tenant, exported
# with the tenant as a label, and WebhookInboxTenantFlagged fires for it (not WebhookInboxSourceFlagged)
$node->safe_psql('postgres', q{
	SELECT webhook_inbox.create_source(name => 'mon_app', kind => 'github', secret => 'mon-app-secret');
	INSERT INTO webhook_inbox.tenants (source_id, tenant, discovered_by, status, reason)
	SELECT id, '4242', 'delivery', 'flagged', 'the read API answered 403 for this tenant: check its credentials'
	  FROM webhook_inbox.sources WHERE name = 'mon_app';
});
ok( poll_until(
		sub {
			my $res = HTTP::Tiny->new(timeout => 5)->get("http://127.0.0.1:$eport/metrics");
			return $res->{success}
			  && $res->{content} =~ /^webhook_inbox_queue_items\{[^}]*queue="flagged_tenant"[^}]*source="mon_app"[^}]*tenant="4242"[^}]*\} 1$/m;
		},
		'the flagged tenant exported', 60),
	'the exporter shows the flagged tenant as a queue item labelled with its tenant');
my @tfired;
ok(poll_until(sub { @tfired = firing('WebhookInboxTenantFlagged'); return @tfired > 0 }, 'the tenant alert', 90),
	'WebhookInboxTenantFlagged fires');
is($tfired[0]{labels}{tenant}, '4242', 'for the flagged tenant');
is($tfired[0]{labels}{source}, 'mon_app', 'of its source');
is($tfired[0]{annotations}{summary}, 'mon_app: the provider refused the credentials of tenant 4242', 'with its summary');
is(scalar(grep { $_->{labels}{source} eq 'mon_app' } firing('WebhookInboxSourceFlagged')), 0,
	'its source is not flagged');

$prom->signal('TERM');
$prom->finish;
$exporter->signal('TERM');
$exporter->finish;
is(stop_receiver($r), 0, 'the receiver exits 0');
$node->stop;
done_testing();
