# 532_full_disk.pl
#	A full disk under a stream: the schema's tables live in a tablespace on
#	a small filesystem (WI_SMALL_FS, which scripts/test.sh mounts when it
#	runs as root), and a filler file takes every byte left while webhook-sim
#	streams Stripe events through the receiver.  Deliveries are answered 503,
#	never 2xx for one that was not committed (every acknowledgement the
#	provider counted is in the audit at any moment); the receiver's
#	webhook_receiver_db_errors_total{sqlstate="53100"} counts the refusals
#	(what the WebhookInboxDiskFull alert reads); the worker says once that
#	the disk is full, not once per failed step.  The filler is deleted:
#	without a person everything resumes, every event of the stream is
#	stored (0 acknowledged lost), and the mirror equals the provider's truth.

use strict;
use warnings;

use lib 'regress/t';
use JSON::PP;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use WorkerTest;
use SimTest qw(poll_until slurp);

my $fs = $ENV{WI_SMALL_FS};
plan skip_all => 'no small filesystem: WI_SMALL_FS is not set (scripts/test.sh mounts one when it runs as root)'
  unless $fs && -d $fs && -w $fs;

# the worker off while the tables move (each move takes an exclusive lock),
# and until the disk is full
my $node = worker_node('full_disk', "webhook_inbox.fetch_delay = 0\nwebhook_inbox.enabled = off\n");
my $ts = "$fs/tablespace";
mkdir $ts or die "mkdir $ts: $!";
$node->safe_psql('postgres', "CREATE TABLESPACE inbox_small LOCATION '$ts'");
$node->safe_psql('postgres', 'ALTER TABLE ALL IN TABLESPACE pg_default SET TABLESPACE inbox_small');
$node->safe_psql('postgres', 'ALTER INDEX ALL IN TABLESPACE pg_default SET TABLESPACE inbox_small');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_class c WHERE c.relnamespace = 'webhook_inbox'::regnamespace
	   AND c.relkind IN ('r', 'i') AND c.reltablespace = 0}), '0', "the schema's tables and indexes live on the small filesystem");

my $rcv = start_receiver($node);
my $dir = PostgreSQL::Test::Utils::tempdir;
add_source($node, 'acct', 'stripe', 'whsec_full532', 'http://127.0.0.1:9');
my $sim = start_sim('--seed', 532, '--objects', 60, '--events', 1500, '--rate', 100,
	'--types', 'subscription,invoice', '--stripe', 'acct:whsec_full532', '--deliver-to', $rcv->{url},
	'--concurrency', 4, '--retry-base-ms', 100, '--retry-max-ms', 500, '--max-attempts', 1000,
	'--record', "$dir/stream.jsonl");
$node->safe_psql('postgres', "UPDATE webhook_inbox.sources SET api_base = '$sim->{url}' WHERE name = 'acct'");

sub status { my (undef, $s) = http_json('GET', "$sim->{url}/_sim/status"); return $s // {} }
sub metric_of { return ReceiverTest::metric($rcv, $_[0]) // 0 }
sub stored
{
	return $node->safe_psql('postgres', 'SELECT count(DISTINCT event_id) FROM webhook_inbox.deliveries');
}
my $full_re = qr/webhook_inbox worker: the disk is full, work waits until space returns/;

# the worker stays off until the disk is full, so that it has work then
ok(poll_until(sub { stored() >= 150 }, 60), 'the stream is being stored');

# --- the disk fills: a filler takes every byte left
my $filler = "$fs/filler";
open(my $fh, '>', $filler) or die "open $filler: $!";
my $chunk = "\0" x (1024 * 1024);
my $filled = 0;
while (1)
{
	my $n = syswrite($fh, $chunk);
	last unless defined $n && $n > 0;
	$filled += $n;
}
close $fh;
note(sprintf('filler: %.1f MB', $filled / 1048576));
my $t_full = Time::HiRes::time();

ok(poll_until(sub { metric_of('webhook_receiver_requests_total{source="acct",status="503"}') >= 50 }, 60),
	'deliveries are answered 503');
my $waiting = $node->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.inbox WHERE status = 'pending'");
cmp_ok($waiting, '>', 0, "$waiting events wait for the worker");
$node->safe_psql('postgres', 'ALTER SYSTEM SET webhook_inbox.enabled = on');
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
cmp_ok(metric_of('webhook_receiver_db_errors_total{sqlstate="53100"}'), '>', 0,
	'webhook_receiver_db_errors_total{sqlstate="53100"} counts the refusals');
ok(poll_until(sub { slurp($node->logfile) =~ $full_re }, 60), 'the worker says the disk is full');
# while full: every acknowledgement the provider counted is a stored delivery
# (read in that order: the stored ones can only grow)
my $acked = status()->{acked};
my $have = stored();
cmp_ok($acked, '<=', $have, "no 2xx for an uncommitted delivery: acknowledged $acked, stored $have");
# the disk stays full for several more of the worker's retries (each
# counted in worker_stats().errors) and of the provider's: the pause is said
# once
my $s503 = metric_of('webhook_receiver_requests_total{source="acct",status="503"}');
my $errors = worker_stat($node, 'errors');
ok(poll_until(sub { worker_stat($node, 'errors') >= $errors + 4 }, 60),
	'the worker keeps trying while the disk is full (' . (worker_stat($node, 'errors') - $errors) . ' more failed steps)');
ok(poll_until(sub { metric_of('webhook_receiver_requests_total{source="acct",status="503"}') >= $s503 + 200 }, 60),
	'the stream keeps being refused');
my @said = slurp($node->logfile) =~ /($full_re)/g;
is(scalar @said, 1, 'one log line from the worker for the full disk, not one per step or cycle');
$acked = status()->{acked};
$have = stored();
cmp_ok($acked, '<=', $have, "still no 2xx for an uncommitted delivery: acknowledged $acked, stored $have");

# --- space returns: nobody does anything else
unlink $filler or die "unlink $filler: $!";
my $t_free = Time::HiRes::time();
my $done = poll_until(sub { my $s = status(); return $s->{done} ? $s : undef }, 180);
ok($done, 'the stream completed after space returned');
my $t_done = Time::HiRes::time();
is($done->{failed}, 0, 'the provider gave up on no delivery');
is($done->{acked}, $done->{generated}, "every event acknowledged ($done->{acked} of $done->{generated})");
ok(poll_until(sub { slurp($node->logfile) =~ /webhook_inbox worker: writes succeed again after the disk was full/ }, 60),
	'the worker says writes succeed again');
wait_drained($node, 'after the full disk');

# 0 acknowledged lost: every event of the stream is in the inbox
my $json = JSON::PP->new;
my %ids;
for my $line (split /\n/, slurp("$dir/stream.jsonl"))
{
	my $rec = $json->decode($line);
	my $ev = $json->decode($rec->{body});
	$ids{ $ev->{id} } = 1;
}
my %in = map { $_ => 1 } split /\n/, $node->safe_psql('postgres', 'SELECT event_id FROM webhook_inbox.inbox');
my @lost = grep { !$in{$_} } sort keys %ids;
is(scalar @lost, 0, sprintf('0 acknowledged lost: %d events of the stream, all stored', scalar keys %ids))
  or diag("lost: @lost[0 .. ($#lost < 9 ? $#lost : 9)]");
verify_source($node, 'acct', $sim, 'after the full disk');
my $n503 = metric_of('webhook_receiver_requests_total{source="acct",status="503"}');
diag(sprintf('full for %.1f s; %d deliveries answered 503; the stream completed %.1f s after space returned; '
	  . '%d disk_full refusals counted', $t_free - $t_full, $n503, $t_done - $t_free,
	  metric_of('webhook_receiver_db_errors_total{sqlstate="53100"}')));

diag(join("\n", slurp($node->logfile) =~ /^(.*webhook_inbox worker: (?:the disk|writes succeed).*)$/mg));

stop_proc($sim);
is(stop_receiver($rcv), 0, 'the receiver stops cleanly');
done_testing();
