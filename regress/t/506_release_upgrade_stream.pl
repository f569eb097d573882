# The upgrade sequence under a stream: the release's library and receiver
# are installed on a database still at 0.1.0, PostgreSQL is restarted, and
# later ALTER EXTENSION webhook_inbox UPDATE runs, while webhook-sim sends a
# Stripe stream (subscriptions, invoices, PaymentIntents, duplicates and
# reordering) through the receiver all along.
#  - the receiver finds no intake_batch() and writes through 0.1.0's
#    intake() (served by the library's 0.1.0 path), then uses intake_batch()
#    again soon after the update, by itself;
#  - no delivery is answered anything but 200, except 503s while PostgreSQL
#    restarts; every event of the stream is acknowledged and in the inbox;
#  - the worker waits with one log line per start, logs no error, and once
#    the update ran processes what piled up: the mirror equals the provider.
use strict;
use warnings;
use lib 'regress/t';
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use ReleaseTest;
use WorkerTest;

my $t0 = Time::HiRes::time();
my $version = ext_version();
my $node = PostgreSQL::Test::Cluster->new('upstream');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_inbox'
webhook_inbox.enabled = on
webhook_inbox.naptime = 200ms
webhook_inbox.sweep_interval = 0
webhook_inbox.full_sweep_interval = 0
webhook_inbox.fetch_delay = 0
webhook_inbox.fetch_concurrency = 8
log_min_messages = log
});
$node->start;
$node->safe_psql('postgres', "CREATE EXTENSION webhook_inbox VERSION '0.1.0'");
$node->safe_psql('postgres', 'CREATE ROLE rcv LOGIN IN ROLE webhook_inbox_receiver');
$node->safe_psql('postgres', q{INSERT INTO webhook_inbox.sources (name, kind, signing_secrets, api_base)
	VALUES ('up', 'stripe', '{whsec_upstream}', 'http://127.0.0.1:9')});

my $rcv = start_receiver($node);
my $record = PostgreSQL::Test::Utils::tempdir() . '/stream.jsonl';
my $sim = start_sim('--seed', 26, '--objects', 250, '--events', 1500, '--rate', 50,
	'--types', 'subscription,invoice,payment_intent', '--stripe', 'up:whsec_upstream',
	'--deliver-to', $rcv->{url}, '--duplicate', '0.05', '--reorder-ms', '50', '--concurrency', 4,
	'--retry-base-ms', 100, '--retry-max-ms', 1000, '--max-attempts', 60, '--record', $record);
$node->safe_psql('postgres', "UPDATE webhook_inbox.sources SET api_base = '$sim->{url}' WHERE name = 'up'");

# answers by HTTP status, from the receiver's counters
sub answered
{
	my %n;
	my $res = ReceiverTest::admin_get($rcv, '/metrics');
	for my $line (split /\n/, $res->{content} // '')
	{
		$n{$1} += $2 if $line =~ /^webhook_receiver_requests_total\{source="up",status="(\d+)"\} (\d+)$/;
	}
	return \%n;
}
sub ok_count { return answered()->{200} // 0 }
sub other_count
{
	my $n = answered();
	my $other = 0;
	$other += $n->{$_} for grep { $_ ne '200' } keys %$n;
	return $other;
}
sub wait_more
{
	my ($more, $what) = @_;
	my $from = ok_count();
	ok(SimTest::poll_until(sub { ok_count() >= $from + $more }, 60), "$what: $more more deliveries answered 200");
}

# 1. the database at 0.1.0, the new library and receiver
wait_more(150, '0.1.0 schema');
like($rcv->{log}, qr/intake_batch\(\) does not exist .*run ALTER EXTENSION webhook_inbox UPDATE/,
	'the receiver says it writes through 0.1.0\'s intake()');
is(other_count(), 0, 'no answer but 200 before the restart');
is($node->safe_psql('postgres', q{SELECT count(*) > 0 FROM webhook_inbox.inbox WHERE status = 'pending'}), 't',
	'the events wait in the inbox, written as 0.1.0 writes them');

# 2. PostgreSQL restarted (the library is the release's already)
$node->restart;
wait_more(150, 'after the restart');
my $after_restart = other_count();
diag("answered other than 200 across the restart: " . encode_json(answered()));

# 3. ALTER EXTENSION UPDATE under the stream
my ($rc, $out, $err) = $node->psql('postgres', 'ALTER EXTENSION webhook_inbox UPDATE');
is($rc, 0, 'ALTER EXTENSION webhook_inbox UPDATE under the stream') or diag($err);
ok(SimTest::poll_until(sub { $rcv->{log} =~ /intake_batch\(\) exists now, batches use it again/ }, 30),
	'the receiver uses intake_batch() again by itself');
wait_more(150, 'after the update');

my $done = SimTest::poll_until(sub {
	my (undef, $s) = http_json('GET', "$sim->{url}/_sim/status");
	return $s && $s->{done} ? $s : undef;
}, 90);
ok($done, 'the stream was delivered');
is($done->{failed}, 0, 'no delivery gave up') if $done;
is(other_count(), $after_restart, 'no answer but 200 after the restart: none because of the schema');

# every event of the stream acknowledged and stored
my @events = map { decode_json($_) } grep { /\S/ } split /\n/, slurp_file($record);
my %stored = map { $_ => 1 } split /\n/, $node->safe_psql('postgres',
	q{SELECT i.event_id FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id WHERE s.name = 'up'});
my @lost = grep { !$stored{ $_->{event_id} } } @events;
cmp_ok(scalar @events, '>=', 800, scalar(@events) . ' events in the stream');
is(scalar @lost, 0, '0 acknowledged deliveries lost') or diag("lost: @{[ map { $_->{event_id} } @lost[0 .. ($#lost < 9 ? $#lost : 9)] ]}");
cmp_ok($done->{acked}, '>=', scalar @events, 'each was acknowledged') if $done;

# the mirror converges once the update ran
wait_drained($node, 'after the update');
verify_source($node, 'up', $sim, 'after the update');
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_inbox.objects o JOIN webhook_inbox.sources s
	ON s.id = o.source_id WHERE s.name = 'up' AND o.object_type = 'payment'}), '0',
	'no PaymentIntent left as a 0.1.0 payment');

# the worker: one line per start while it waited, no error
my $log = slurp_file($node->logfile);
my $waits = () = $log =~ /webhook_inbox worker: database "postgres" has webhook_inbox 0\.1\.0 installed, the library loaded is \Q$version\E; waiting until ALTER EXTENSION webhook_inbox UPDATE is run in it/g;
is($waits, 2, 'the worker said it waits once per start (before and after the restart)');
my @errors = $log =~ /^(.*\bERROR: .*)$/mg;
is(scalar @errors, 0, 'no ERROR in the server log') or diag(join("\n", @errors[0 .. ($#errors < 9 ? $#errors : 9)]));
my @failures = $log =~ /^.*webhook_inbox worker: (?!the extension exists|database "postgres" has webhook_inbox).*$/mg;
is(scalar @failures, 0, 'the worker logged no failure') or diag(join("\n", @failures[0 .. ($#failures < 9 ? $#failures : 9)]));
like($log, qr/webhook_inbox worker: the extension exists, processing the inbox/, 'the worker resumed by itself');

# intake_batch() gone under the connected receiver (its batch fails with
# SQLSTATE 42883): the connection starts again, finds no intake_batch() and
# writes through intake() by itself.
$node->safe_psql('postgres', q{
	ALTER EXTENSION webhook_inbox DROP FUNCTION webhook_inbox.intake_batch(text[], text[], bytea[]);
	DROP FUNCTION webhook_inbox.intake_batch(text[], text[], bytea[])});
my @answers;
ok(SimTest::poll_until(sub {
	my $n = scalar @answers;
	my $body = qq({"id":"evt_gone_$n","object":"event","type":"customer.subscription.updated","created":1700000000,)
	  . qq("data":{"object":{"id":"sub_gone","object":"subscription","status":"active"}}});
	my $res = ReceiverTest::post($rcv, 'up', ReceiverTest::sign('stripe', 'whsec_upstream', $body), $body);
	push @answers, $res->{status};
	return $res->{status} == 200;
}, 30), 'intake_batch() dropped: deliveries are answered 200 again by themselves (answers: @answers)');
like($rcv->{log}, qr/batch statement's function does not exist \(SQLSTATE 42883\): reconnecting/,
	'the receiver reconnected on SQLSTATE 42883');
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_inbox.inbox WHERE event_id LIKE 'evt\_gone\_%'}),
	scalar(grep { $_ == 200 } @answers), 'the delivery answered 200 is stored');

is(stop_receiver($rcv), 0, 'the receiver stops cleanly');
stop_proc($sim);
$node->stop;
cmp_ok(Time::HiRes::time() - $t0, '<', 90, sprintf('the test took %.0f s', Time::HiRes::time() - $t0));
done_testing();
