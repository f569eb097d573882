
# 104_receiver_batch.pl
#	One delivery's own fault is its own answer.  A batch that holds, among
#	valid deliveries, one with a 4,000-byte id, one for a source disabled
#	in the database since the receiver loaded it, and one whose body is not
#	JSON: every valid delivery is answered 200 and stored, each bad one
#	gets its own code, and the batch commits.  Batches take their share of
#	what waits, side by side on two connections or one behind the other on
#	one connection's pipeline, where a batch that fails does not touch the
#	one behind it.  Then two receivers take the same ids in opposite orders
#	for 20 s: no deadlock, no 503, every id stored once and answered new
#	exactly once.

use strict;
use warnings;

use lib 'receiver/t';
use Digest::SHA qw(hmac_sha256_hex);
use IO::Socket::INET;
use IPC::Run;
use PostgreSQL::Test::Utils;
use ReceiverTest;
use Test::More;

my $node = new_node('batch');
my $ssec = 'whsec_batch';
my $gsec = 'gh-batch';
$node->safe_psql('postgres', qq{
	SELECT webhook_inbox.create_source(name => 'bs', kind => 'stripe', secret => '$ssec');
	SELECT webhook_inbox.create_source(name => 'bg', kind => 'github', secret => '$gsec');
	SELECT webhook_inbox.create_source(name => 'bd', kind => 'stripe', secret => '$ssec');
});

# ---- isolation inside one batch ----
# A long batch delay makes every request below share the first one's batch
# (on one database connection with one batch in flight: with more slots,
# each would take its share).
my $r = start_receiver($node, '--batch-delay', '2000', '--batch-size', '64',
	'--db-connections', '1', '--db-pipeline', '1');

# Disable 'bd' without telling the receiver (no NOTIFY): it still takes the
# delivery, and the database refuses it.
$node->safe_psql('postgres', q{
	ALTER TABLE webhook_inbox.sources DISABLE TRIGGER sources_changed;
	UPDATE webhook_inbox.sources SET enabled = false WHERE name = 'bd';
	ALTER TABLE webhook_inbox.sources ENABLE TRIGGER sources_changed;
});

sub stripe_body
{
	my ($id) = @_;
	return qq({"id":"$id","object":"event","type":"customer.subscription.updated",)
	  . qq("data":{"object":{"id":"sub_$id","object":"subscription","status":"active"}}});
}

sub raw_request
{
	my ($source, $headers, $body) = @_;
	my $req = "POST /hooks/$source HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
	$req .= "$_: $headers->{$_}\r\n" for sort keys %$headers;
	return $req . "Content-Length: " . length($body) . "\r\n\r\n$body";
}

# [label, source, headers, body, expected status, expected answer]
my @cases;
for my $i (1 .. 20)
{
	my $body = stripe_body("evt_ok_$i");
	push @cases, [ "valid $i", 'bs', sign('stripe', $ssec, $body), $body, 200, 'new' ];
}
my $gbody = '{"action":"opened","issue":{"id":4000}}';
# 4,000 hex digits that do not compress: too long for a btree entry
my $long_id = join '', map { Digest::SHA::sha256_hex("id$_") } 1 .. 63;
$long_id = substr($long_id, 0, 4000);
push @cases, [ 'over-long id', 'bg', sign('github', $gsec, $gbody, id => $long_id),
	$gbody, 400, 'event_id_too_long' ];
my $dbody = stripe_body('evt_disabled');
push @cases, [ 'disabled source', 'bd', sign('stripe', $ssec, $dbody), $dbody, 404,
	'source_disabled' ];
my $bad = 'this is not json';
push @cases, [ 'malformed body', 'bs', sign('stripe', $ssec, $bad), $bad, 200, 'quarantined' ];

my $committed0 = metric($r, 'webhook_receiver_batches_total{result="committed"}') // 0;
my @socks;
for my $c (@cases)
{
	my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $r->{port}, Proto => 'tcp')
	  or die "connect: $!";
	print $s raw_request($c->[1], $c->[2], $c->[3]);
	push @socks, $s;
}
for my $k (0 .. $#cases)
{
	my $s = $socks[$k];
	local $/;
	my $answer = <$s> // '';
	my ($status) = $answer =~ m{^HTTP/1\.\d (\d+)};
	my ($text) = $answer =~ /\r\n\r\n(.*)$/s;
	is($status, $cases[$k][4], "$cases[$k][0]: status $cases[$k][4]");
	is($text, $cases[$k][5], "$cases[$k][0]: answer $cases[$k][5]");
}
is((metric($r, 'webhook_receiver_batches_total{result="committed"}') // 0) - $committed0,
	1, 'all of them shared one committed batch');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id
	 WHERE s.name = 'bs' AND i.event_id LIKE 'evt_ok_%' AND i.status = 'pending'}),
	20, 'every valid delivery is stored');
is($node->safe_psql('postgres', q{
	SELECT i.status || ' ' || i.reason FROM webhook_inbox.inbox i JOIN webhook_inbox.sources s ON s.id = i.source_id
	 WHERE s.name = 'bs' AND i.event_id LIKE 'sha256:%'}),
	'quarantined invalid_json: Token "this" is invalid.', 'the malformed body is kept in quarantine');
is(inbox_count($node, 'bg') + inbox_count($node, 'bd'), 0,
	'the refused deliveries stored nothing');
is(deliveries_count($node, 'bg') + deliveries_count($node, 'bd'), 0,
	'and are not audited as accepted');
is(stop_receiver($r), 0, 'receiver exits 0');

# ---- two connections: each batch takes its share of what waits ----
# 20 requests held by a long batch delay, two database connections: when the
# delay ends, each connection takes half (the 20 clients wait for answers, so
# no more company comes), and the two batches run side by side.
my $rs = start_receiver($node, '--batch-delay', '1500', '--batch-size', '64',
	'--db-connections', '2', '--db-pipeline', '1');
my $batches0 = metric($rs, 'webhook_receiver_batches_total{result="committed"}') // 0;
my $sum0 = metric($rs, 'webhook_receiver_batch_size_sum') // 0;

# held_requests(receiver, prefix, n): n signed deliveries sent at once, each
# on its own connection; returns { event id => status }.
sub held_requests
{
	my ($rcv, $prefix, $n) = @_;
	my @socks;
	for my $i (1 .. $n)
	{
		my $body = stripe_body("${prefix}_$i");
		my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $rcv->{port}, Proto => 'tcp')
		  or die "connect: $!";
		print $s raw_request('bs', sign('stripe', $ssec, $body), $body);
		push @socks, [ "${prefix}_$i", $s ];
	}
	my %status;
	for my $pair (@socks)
	{
		local $/;
		my $answer = readline($pair->[1]) // '';
		my ($code) = $answer =~ m{^HTTP/1\.\d (\d+)};
		$status{ $pair->[0] } = $code // 'none';
	}
	return \%status;
}

sub tally
{
	my ($status) = @_;
	my %n;
	$n{$_}++ for values %$status;
	return \%n;
}

is_deeply(tally(held_requests($rs, 'evt_share', 20)), { 200 => 20 }, 'all 20 answered 200');
is((metric($rs, 'webhook_receiver_batches_total{result="committed"}') // 0) - $batches0,
	2, 'in two batches');
is((metric($rs, 'webhook_receiver_batch_size_sum') // 0) - $sum0, 20, 'of 20 deliveries together');
is(metric($rs, 'webhook_receiver_batch_size_bucket{le="8"}'), 0, 'neither of 8 deliveries or fewer');
is(metric($rs, 'webhook_receiver_batch_size_bucket{le="16"}'), 2, 'both of 9 to 16: half each');
is(stop_receiver($rs), 0, 'receiver exits 0');

# ---- one connection's pipeline: a failed batch leaves the next alone ----
# Two slots on one connection (the default --db-pipeline 2): 20 held
# requests go as two batches of 10, the second sent behind the first.  A
# trigger makes the batch holding evt_pipe_1 fail: its deliveries are
# answered 503 and stored nothing; the batch behind it commits, 200.
$node->safe_psql('postgres', q{
	CREATE FUNCTION public.refuse_pipe_1() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		IF NEW.event_id = 'evt_pipe_1' THEN
			RAISE EXCEPTION 'test: evt_pipe_1 fails its batch';
		END IF;
		RETURN NEW;
	END $$;
	CREATE TRIGGER refuse_pipe_1 BEFORE INSERT ON webhook_inbox.inbox
		FOR EACH ROW EXECUTE FUNCTION public.refuse_pipe_1();
});
my $rp = start_receiver($node, '--batch-delay', '1500', '--batch-size', '64', '--db-connections', '1');
my $pipe = held_requests($rp, 'evt_pipe', 20);
is($pipe->{evt_pipe_1}, 503, 'the delivery that fails its batch is answered 503');
is_deeply(tally($pipe), { 200 => 10, 503 => 10 }, 'its batch of 10 is 503, the batch behind it 200');
is(metric($rp, 'webhook_receiver_batches_total{result="failed"}'), 1, 'one batch failed');
is(metric($rp, 'webhook_receiver_batches_total{result="committed"}'), 1, 'the other committed');
my @ok = sort grep { $pipe->{$_} == 200 } keys %$pipe;
is($node->safe_psql('postgres', q{
	SELECT string_agg(event_id, ',' ORDER BY event_id COLLATE "C") FROM webhook_inbox.inbox
	 WHERE event_id LIKE 'evt\_pipe\_%'}),
	join(',', @ok), 'exactly the deliveries answered 200 are stored');
is(stop_receiver($rp), 0, 'receiver exits 0');
unlike($rp->{log}, qr/no transaction in progress|current transaction is aborted/,
	'no batch inherits the failed one\'s transaction');
$node->safe_psql('postgres', q{
	DROP TRIGGER refuse_pipe_1 ON webhook_inbox.inbox;
	DROP FUNCTION public.refuse_pipe_1();
});

# ---- the same ids in opposite orders on two receivers, for 20 s ----
my $r1 = start_receiver($node, '--db-connections', '1');
my $r2 = start_receiver($node, '--db-connections', '1');
my $tmp = PostgreSQL::Test::Utils::tempdir;
my $burst = 24;
IPC::Run::run([ $^X, 'receiver/t/opposite.pl', $r1->{url}, $r2->{url}, 'bs', $ssec,
	'evt_opp', 20, $burst, "$tmp/answers" ]) or die 'opposite.pl failed';
open(my $fh, '<', "$tmp/answers") or die "$tmp/answers: $!";
my (%by_id, %statuses, %outcomes);
while (my $line = <$fh>)
{
	chomp $line;
	my ($id, $status, $text) = split ' ', $line, 3;
	$statuses{$status}++;
	$outcomes{$text // ''}++;
	push @{ $by_id{$id} }, $text // '';
}
my $ids = scalar keys %by_id;
cmp_ok($ids, '>=', $burst * 2, "at least two rounds of $burst ids ran ($ids ids)");
is_deeply([ sort keys %statuses ], ['200'], 'every answer is 200: no 503, no deadlock');
is(scalar(grep { @{ $by_id{$_} } != 2 } keys %by_id), 0, 'every id was answered twice');
is(scalar(grep { join(',', sort @{ $by_id{$_} }) ne 'duplicate,new' } keys %by_id), 0,
	'every id is new exactly once, and duplicate once');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM webhook_inbox.inbox WHERE event_id LIKE 'evt\_opp-%'}),
	$ids, 'every id is stored once');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM webhook_inbox.deliveries WHERE event_id LIKE 'evt\_opp-%'}),
	2 * $ids, 'both deliveries of every id are audited');
is(stop_receiver($r1), 0, 'first receiver exits 0');
is(stop_receiver($r2), 0, 'second receiver exits 0');
unlike($r1->{log} . $r2->{log}, qr/deadlock|batch failed/, 'no batch failed');

done_testing();
