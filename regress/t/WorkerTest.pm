#
# regress/t/WorkerTest.pm
#	Helpers of the background worker's TAP tests (regress/t/3NN_*.pl): a
#	cluster with the worker on, sources pointing at webhook-sim's read API,
#	waiting for the inbox to drain, sweeping, and webhook-sim verify.
#	Builds on tools/test/SimTest.pm (simulator) and receiver/t/ReceiverTest.pm
#	(receiver).
#
package WorkerTest;

use strict;
use warnings;
use Exporter 'import';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run ();
use lib 'regress/t';
use ProcessGuard;

use lib 'tools/test';
use lib 'receiver/t';
use SimTest qw(start_sim stop_proc run_sim http_json poll_until);
use ReceiverTest qw(start_receiver stop_receiver);

our @EXPORT = qw(worker_node add_source wait_drained verify_source sweep_all
  start_sim stop_proc run_sim http_json start_receiver stop_receiver
  sim_truth stripe_event intake_sql worker_stat settle_tombstones poll_after_crash);

# worker_node(name, extra postgresql.conf lines): a started cluster with the
# library preloaded, the worker on, the extension created and the
# receiver's login role.
sub worker_node
{
	my ($name, $extra) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_inbox'
webhook_inbox.enabled = on
webhook_inbox.naptime = 200ms
webhook_inbox.sweep_interval = 0
webhook_inbox.full_sweep_interval = 0
webhook_inbox.http_timeout = 5s
webhook_inbox.tombstone_confirm_delay = 1s
log_min_messages = log
} . ($extra // ''));
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION webhook_inbox');
	$node->safe_psql('postgres', 'CREATE ROLE rcv LOGIN IN ROLE webhook_inbox_receiver');
	return $node;
}

# add_source(node, name, kind, secret, api_base)
sub add_source
{
	my ($node, $name, $kind, $secret, $api) = @_;
	$node->safe_psql('postgres',
		"SELECT webhook_inbox.create_source('$name', '$kind', '$secret', api_base => '$api')");
}

# wait_drained(node, what, seconds): true once no event is pending,
# processing or waiting for a retry.
sub wait_drained
{
	my ($node, $what, $secs) = @_;
	local $PostgreSQL::Test::Utils::timeout_default = $secs // 120;
	my $ok = $node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM webhook_inbox.inbox WHERE status IN ('pending', 'processing', 'retry')");
	ok($ok, "$what: the inbox drained");
	diag($node->safe_psql('postgres',
		"SELECT status || ' ' || coalesce(reason, '') || ' ' || count(*) FROM webhook_inbox.inbox "
		  . "GROUP BY status, reason ORDER BY count(*) DESC LIMIT 10")) unless $ok;
	return $ok;
}

# verify_source(node, source, sim): webhook-sim verify reports no difference.
sub verify_source
{
	my ($node, $source, $sim, $what) = @_;
	my ($rc, $out, $err) = run_sim('verify', '--db', $node->connstr('postgres'),
		'--source', $source, '--api', $sim->{url});
	my ($summary) = $out =~ /^(verify .*)$/m;
	like($summary // $err, qr/differences=0$/, "$what: verify $source: zero differences")
	  or diag(substr($out, 0, 3000));
	return $rc == 0;
}

# sweep_all(node, source, types): sweep_now of each type; returns the runs.
# A pass that left unconfirmed tombstones (a 404 read once) is followed by
# the passes that confirm them (settle_tombstones); the first pass's row
# is returned.
sub sweep_all
{
	my ($node, $source, @types) = @_;
	my @runs;
	for my $t (@types)
	{
		my $row = $node->safe_psql('postgres',
			"SELECT status || ' ' || listed || ' ' || repaired || ' ' || errors "
			  . "FROM webhook_inbox.sweep_now('$source', '$t')");
		push @runs, [ $t, split(' ', $row) ];
		settle_tombstones($node, $source, $t)
		  if $node->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.objects o "
			  . "JOIN webhook_inbox.sources s ON s.id = o.source_id WHERE s.name = '$source' "
			  . "AND o.object_type = '$t' AND o.tombstone_pending_since IS NOT NULL") ne '0';
	}
	return @runs;
}

# settle_tombstones(node, source, type, layer, tenant): a sweep's 404 is believed
# only when a second read, tombstone_confirm_delay (1 s here) later,
# answers the same (the pass reads it by id first).  Sweeps, and while an
# unconfirmed tombstone of the source is left, waits out the delay and
# sweeps again.  Returns the last pass's "status listed repaired errors"
# and how many stayed unconfirmed.
sub settle_tombstones
{
	my ($node, $source, $type, $layer, $tenant) = @_;
	$layer //= 'full';
	$tenant //= '';
	my $pending = "SELECT count(*) FROM webhook_inbox.objects o JOIN webhook_inbox.sources s ON s.id = o.source_id "
	  . "WHERE s.name = '$source' AND o.tenant = '$tenant' AND o.object_type = '$type' "
	  . "AND o.tombstone_pending_since IS NOT NULL";
	my ($run, $left);
	for my $try (1 .. 8)
	{
		$run = $node->safe_psql('postgres',
			"SELECT status || ' ' || listed || ' ' || repaired || ' ' || errors || ' ' || coalesce(error, '') "
			  . "FROM webhook_inbox.sweep_now('$source', '$type', '$layer', '$tenant')");
		$left = $node->safe_psql('postgres', $pending);
		last if $run =~ /^complete/ && $left eq '0';
		$node->poll_query_until('postgres',
			"SELECT coalesce(max(o.tombstone_pending_since), now() - interval '1 hour') < now() - interval '1.2 s' "
			  . "FROM webhook_inbox.objects o JOIN webhook_inbox.sources s ON s.id = o.source_id "
			  . "WHERE s.name = '$source' AND o.tenant = '$tenant' AND o.object_type = '$type'");
	}
	$run =~ s/ +$//;
	return ($run, $left);
}

sub sim_truth
{
	my ($sim) = @_;
	my ($st, $doc) = http_json('GET', "$sim->{url}/_sim/truth");
	die "truth: $st" unless $st == 200;
	return $doc;
}

# A Stripe event body naming a subscription (fetch strategy).
sub stripe_event
{
	my ($evt, $type, $object, $id, $status, $created) = @_;
	return qq({"id":"$evt","object":"event","type":"$type","created":$created,)
	  . qq("data":{"object":{"id":"$id","object":"$object","status":"$status"}}});
}

# SQL that stores one Stripe body through intake() (the receiver's call).
sub intake_sql
{
	my ($source, $body) = @_;
	$body =~ s/'/''/g;
	return "SELECT webhook_inbox.intake('$source', '{}', convert_to('$body', 'UTF8'));";
}

sub worker_stat
{
	my ($node, $col) = @_;
	return $node->safe_psql('postgres', "SELECT $col FROM webhook_inbox.worker_stats()");
}

# poll_after_crash(node, dbname, query): poll_query_until for a server that
# may be in crash recovery.  poll_query_until writes the query to psql's
# input, and a psql refused at connect exits before reading it: the write
# fails ("ack Broken pipe") and takes the test file down.  Here the query
# is psql's argument.  Returns 1 once it returns 't', 0 at the timeout.
sub poll_after_crash
{
	my ($node, $dbname, $query) = @_;
	my ($out, $err);
	my $ok = poll_until(sub {
		($out, $err) = ('', '');
		IPC::Run::run([ $node->installed_command('psql'), '-XAt', '-d', $node->connstr($dbname), '-c', $query ],
			'<', \undef, '>', \$out, '2>', \$err);
		chomp $out;
		return $out eq 't' && $err eq '';
	}, $PostgreSQL::Test::Utils::timeout_default);
	diag("poll_after_crash timed out: $query\nlast output: $out\nstderr: $err") unless $ok;
	return $ok ? 1 : 0;
}

1;
