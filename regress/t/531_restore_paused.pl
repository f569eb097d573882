# 531_restore_paused.pl
#	A dump restored into a second cluster whose worker is preloaded never
#	acts on the original's provider account by surprise: the restored
#	database starts with outbound work paused (the worker fetches, sweeps
#	and sends nothing, and says why once in its log, even while the restore
#	still loads its tables one by one; sweep_now() and
#	run_effects() refuse), while the provider is reachable and the restored
#	inbox holds events waiting for a fetch and a refund waits to be sent.
#	One call, resume_outbound(),
#	ends the pause; then the mirror converges to the provider's truth.  The
#	dump carries the replay-protection digests, and (as docs/operations.md
#	says for a database without a key file) the sources' secrets in clear.

use strict;
use warnings;

use lib 'regress/t';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use WorkerTest;
use SimTest qw(poll_until slurp);

my $dir = PostgreSQL::Test::Utils::tempdir;
my $reqlog = "$dir/requests.log";

# --- the original: its worker off, so that its dump holds events waiting
# for a fetch (what a copy would send at once)
my $orig = worker_node('original', "webhook_inbox.enabled = off\n");
my $rcv = start_receiver($orig);
add_source($orig, 'acct', 'stripe', 'whsec_restore531', 'http://127.0.0.1:9');
my $sim = start_sim('--seed', 531, '--objects', 40, '--events', 200, '--types', 'subscription,invoice',
	'--stripe', 'acct:whsec_restore531', '--deliver-to', $rcv->{url}, '--drop', '0.2',
	'--concurrency', 4, '--retry-base-ms', 100, '--request-log', $reqlog);
$orig->safe_psql('postgres', "UPDATE webhook_inbox.sources SET api_base = '$sim->{url}', "
	  . "api_token = 'sk_test_restore531' WHERE name = 'acct'");
my $done = poll_until(sub {
	my (undef, $s) = http_json('GET', "$sim->{url}/_sim/status");
	return $s && $s->{done} ? $s : undef;
}, 60);
ok($done, 'the stream was delivered to the original');
is(stop_receiver($rcv), 0, 'the original\'s receiver stops');

# a body-only scheme's digest: a replay of its body is refused for 7 days
$orig->safe_psql('postgres', "SELECT webhook_inbox.create_source('shop', 'shopify', 'shpss_restore531')");
my $body = q{convert_to('{"id":5310,"updated_at":"2026-02-01T00:00:00Z"}', 'UTF8')};
is($orig->safe_psql('postgres', "SELECT webhook_inbox.intake('shop', ARRAY['x-shopify-webhook-id', 'w1', "
	  . "'x-shopify-topic', 'orders/updated'], $body)"), 'new', 'a Shopify body is stored, its digest kept');

# an approved external effect waiting to be sent: a refund
$orig->safe_psql('postgres', q{
	SELECT webhook_inbox.request_effect('refund:531', 'http',
		'{"method": "POST", "path": "/v1/refunds", "body": {"payment_intent": "pi_531", "amount": 500}}',
		source => 'acct', owner => 'finance')});
my $pending = $orig->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.inbox WHERE status = 'pending'");
cmp_ok($pending, '>', 0, "the original has $pending events waiting (fetches among them)");

my $dump = "$dir/original.dump";
$orig->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $orig->connstr('postgres') ], 'pg_dump of the original');
$orig->stop;
my $script = `pg_restore -f - $dump`;
like($script, qr/sk_test_restore531/, 'the dump holds the API token in clear');
like($script, qr/whsec_restore531/, 'and the signing secret');
my $requests_before = () = slurp($reqlog) =~ /\n/g;

# --- the copy: the worker preloaded, sweeps due every second
my $copy = PostgreSQL::Test::Cluster->new('copy');
$copy->init;
$copy->append_conf('postgresql.conf', q{
shared_preload_libraries = 'webhook_inbox'
webhook_inbox.enabled = on
webhook_inbox.database = 'restored'
webhook_inbox.naptime = 200ms
webhook_inbox.sweep_interval = 1s
webhook_inbox.full_sweep_interval = 0
webhook_inbox.fetch_delay = 0
webhook_inbox.http_timeout = 5s
log_min_messages = log
});
$copy->start;
$copy->safe_psql('postgres', 'CREATE DATABASE restored');
# the worker is connected before the restore starts: it sees the extension
# and the tables appear one by one
ok(poll_until(sub { slurp($copy->logfile) =~ /webhook_inbox worker started in database "restored"/ }, 60),
	'the copy\'s worker waits in the empty database');
# table by table, each committed on its own (no --single-transaction): the
# worker sees the data arrive
$copy->command_ok([ 'pg_restore', '-d', $copy->connstr('restored'), $dump ],
	'pg_restore into a second cluster, worker running');

my $t_restored = Time::HiRes::time();
my $paused_re = qr/webhook_inbox worker: outbound work paused: this database (?:was|is being) restored[^\n]*/;
ok(poll_until(sub { slurp($copy->logfile) =~ $paused_re }, 60), 'the worker says outbound work is paused, and why');
my $t_paused = Time::HiRes::time();
like(slurp($copy->logfile), qr/HINT:  .*SELECT webhook_inbox\.resume_outbound\(\);/, 'and which call resumes it');
is($copy->safe_psql('restored', 'SELECT paused, resume_with FROM webhook_inbox.outbound_status'),
	't|SELECT webhook_inbox.resume_outbound();', 'outbound_status says paused');

# an observation window of several worker cycles and sweep intervals (the
# worker wakes every 200 ms, a sweep is due every second)
my $t_end = Time::HiRes::time() + 4;
my $leaked = 0;
while (Time::HiRes::time() < $t_end)
{
	my $n = () = slurp($reqlog) =~ /\n/g;
	$leaked = $n - $requests_before if $n != $requests_before;
	Time::HiRes::sleep(0.2);
}
is($leaked, 0, 'no request left the copy while paused (the provider\'s request log)');
is($copy->safe_psql('restored', "SELECT count(*) FROM webhook_inbox.inbox WHERE status = 'pending'"), $pending,
	'the restored events still wait');
is($copy->safe_psql('restored', 'SELECT count(*) FROM webhook_inbox.sweep_runs'), '0', 'no sweep ran');
is($copy->safe_psql('restored', "SELECT status || ' ' || attempts FROM webhook_inbox.effects WHERE effect_key = 'refund:531'"),
	'pending 0', 'the refund waits, never attempted');
unlike(slurp($reqlog), qr{^POST /v1/refunds}m, 'no refund request reached the provider');
my ($rc, $out, $err) = $copy->psql('restored', "SELECT * FROM webhook_inbox.sweep_now('acct', 'subscription')");
like($err, qr/outbound work is paused/, 'sweep_now() refuses while paused');
($rc, $out, $err) = $copy->psql('restored', 'CALL webhook_inbox.run_effects()');
like($err, qr/outbound work is paused/, 'run_effects() refuses while paused');
# one line, or one more once the original's identity row is loaded too
# (the reason is then more precise): never one per cycle
my @lines = slurp($copy->logfile) =~ /($paused_re)/g;
my %seen;
ok(@lines >= 1 && @lines <= 2 && !grep({ $seen{$_}++ } @lines),
	scalar(@lines) . ' log line(s) for the pause, each reason once, not one per cycle') or diag(join("\n", @lines));
isnt($copy->safe_psql('restored', "SELECT webhook_inbox.intake('shop', ARRAY['x-shopify-webhook-id', 'w2', "
	  . "'x-shopify-topic', 'orders/updated'], $body)"), 'new', 'the replay digests came along: the body is refused as a replay');

# the restored database is not the worker_node's postgres
sub drained
{
	my ($what) = @_;
	local $PostgreSQL::Test::Utils::timeout_default = 120;
	ok($copy->poll_query_until('restored', "SELECT count(*) = 0 FROM webhook_inbox.inbox "
		  . "WHERE status IN ('pending', 'processing', 'retry')"), "$what: the inbox drained");
}

# --- the operator resumes: one call
is($copy->safe_psql('restored', 'SELECT webhook_inbox.resume_outbound()'), 'resumed', 'resume_outbound()');
ok(poll_until(sub { slurp($copy->logfile) =~ /webhook_inbox worker: outbound work resumed/ }, 30),
	'the worker says outbound work resumed');
drained('after resume');
for my $layer (qw(incremental full))
{
	for my $t (qw(subscription invoice))
	{
		my $st = $copy->safe_psql('restored', "SELECT status FROM webhook_inbox.sweep_now('acct', '$t', '$layer')");
		like($st, qr/^(complete|incomplete)$/, "$layer sweep of $t after resume ($st)");
	}
	drained("after the $layer sweeps");
}
ok($copy->poll_query_until('restored', "SELECT attempts > 0 FROM webhook_inbox.effects WHERE effect_key = 'refund:531'"),
	'after resume the refund was sent (' . $copy->safe_psql('restored',
		"SELECT status FROM webhook_inbox.effects WHERE effect_key = 'refund:531'") . ')');
like(slurp($reqlog), qr{^POST /v1/refunds}m, 'the provider received it');
my $requests_after = () = slurp($reqlog) =~ /\n/g;
cmp_ok($requests_after - $requests_before, '>', 0,
	'requests left the copy after resume (' . ($requests_after - $requests_before) . ')');
my ($vrc, $vout, $verr) = run_sim('verify', '--db', $copy->connstr('restored'), '--source', 'acct', '--api', $sim->{url});
my ($summary) = $vout =~ /^(verify .*)$/m;
like($summary // $verr, qr/differences=0$/, 'the mirror of the copy converged: webhook-sim verify, zero differences')
  or diag(substr($vout, 0, 3000));
diag(join("\n", @lines));
diag(sprintf('%d events waiting at the dump; the pause said %.1f s after the restore ended (0: during it); %d requests while paused '
	  . 'over 4 s; %d after resume', $pending, $t_paused - $t_restored, $leaked, $requests_after - $requests_before));

stop_proc($sim);
done_testing();
