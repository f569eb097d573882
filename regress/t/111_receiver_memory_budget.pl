
# 111_receiver_memory_budget.pl
#	The receiver's memory is bounded whatever clients hold: 250 clients
#	each holding a 1 MiB body one byte short of complete keep the
#	receiver's peak RSS under the budget (64 MiB of unanswered requests by
#	default, 256 MB in all).  A request is counted by the body it announces
#	once its head is in, so the holders past the budget are answered 503
#	with Retry-After at their head; so is a valid delivery too large for
#	what is left, while a small one still fits; the provider's retry after
#	the holders went is stored; nothing answered 200 is missing from the
#	inbox.

use strict;
use warnings;

use lib 'receiver/t';
use IO::Select;
use IO::Socket::INET;
use IPC::Run;
use PostgreSQL::Test::Utils;
use ReceiverTest;
use Test::More;
use Time::HiRes qw(time);

$SIG{PIPE} = 'IGNORE';

my $node = new_node('budget');
my $secret = 'budget-test-secret';
$node->safe_psql('postgres',
	"SELECT webhook_inbox.create_source(name => 'gh', kind => 'github', secret => '$secret')");
my $tmp = PostgreSQL::Test::Utils::tempdir;

my $n = 0;
sub delivery
{
	my ($pad) = @_;
	my $id = 'budget-' . ++$n;
	my $body = qq({"id":"$id","action":"opened","pad":") . ('x' x ($pad // 0)) . '"}';
	return ($id, sign('github', $secret, $body, id => $id), $body);
}

# kB of the process's resident set: now (VmRSS) or at its peak (VmHWM)
sub rss_kb
{
	my ($pid, $field) = @_;
	open(my $f, '<', "/proc/$pid/status") or return undef;
	while (<$f>)
	{
		return $1 if /^\Q$field\E:\s+(\d+) kB/;
	}
	return undef;
}

sub status_of
{
	my ($file) = @_;
	open(my $f, '<', $file) or return {};
	my %s;
	while (<$f>)
	{
		$s{open} = $1, $s{answered} = $2, $s{connects} = $3 if /^open (\d+) answered (\d+) connects (\d+)/;
		$s{"status$1"} = $2 if /^status (\d+) (\d+)/;
	}
	return \%s;
}

SKIP:
{
	skip('no /proc to read the receiver\'s memory from', 1) unless -r "/proc/$$/status";

	# the defaults, with time enough to hold the bodies while they are measured
	my $r = start_receiver($node, '--read-timeout', '60s');
	my @acked;
	{
		my ($id, $h, $body) = delivery();
		is(post($r, 'gh', $h, $body)->{status}, 200, 'a delivery before the holders: 200');
		push @acked, $id;
	}
	my $base = rss_kb($r->{pid}, 'VmRSS');

	my ($stop, $status) = ("$tmp/stop", "$tmp/status");
	my $holders = IPC::Run::start([ $^X, 'receiver/t/slow_clients.pl', $r->{port}, 'hold', 250, 2,
			$stop, $status ], '>', "$tmp/hold.out", '2>', "$tmp/hold.err");
	# every holder has either been answered or is holding its body
	# (with no budget: all 250 bodies in memory, 250 MiB)
	my $held = sub {
		my $s = status_of($status);
		my $buffered = metric($r, 'webhook_receiver_buffered_bytes') // 0;
		my $rss = rss_kb($r->{pid}, 'VmRSS') // 0;
		# the held bodies read, not only announced: the RSS shows them
		return (($s->{answered} // 0) + int($buffered / (1 << 20)) >= 245 && $rss - $base > 50 * 1024)
		  || $rss - $base > 250 * 1024;
	};
	poll_until($held, 'the 250 holders to be answered or held', 60);
	# what is left of the budget is under 1 MiB: 63 holders of 1 MiB and a head
	my ($id, $h, $body) = delivery(1048000);
	my $res = post($r, 'gh', $h, $body);
	my ($small_id, $small_h, $small_body) = delivery();
	my $small = post($r, 'gh', $small_h, $small_body);
	my $peak = rss_kb($r->{pid}, 'VmHWM');
	my $s = status_of($status);
	my $buffered = metric($r, 'webhook_receiver_buffered_bytes') // 0;
	diag(sprintf('250 clients holding 1 MiB bodies: receiver RSS %d MiB before, peak %d MiB; '
		  . '%d answered 503, %d MiB held', $base / 1024, $peak / 1024, $s->{status503} // 0,
		  $buffered / (1 << 20)));
	cmp_ok($peak, '<', 256 * 1000, 'peak RSS under 256 MB');
	cmp_ok($peak - $base, '<', (64 + 32) * 1024, 'peak RSS within the 64 MiB budget (and 32 MiB of overhead)');
	cmp_ok($buffered, '<=', 64 << 20, 'bytes held within --max-buffered');
	cmp_ok($s->{status503} // 0, '>', 100, 'the holders past the budget: answered 503');

	is($res->{status}, 503, 'a valid delivery larger than what is left of the budget: 503');
	is($res->{headers}{'retry-after'}, '5', '503: Retry-After, which providers retry');
	like($res->{content}, qr/retry later/, '503: says why');
	cmp_ok(metric($r, 'webhook_receiver_early_refusals_total{status="503",reason="buffer_budget"}') // 0,
		'>', 100, 'metrics: refusals for the budget counted');
	like($r->{log}, qr/rejected: source=- status=503 reason=buffer_budget/, 'log: the refusal and its reason');
	is($small->{status}, 200, 'a small valid delivery beside the holders: 200');
	push @acked, $small_id if $small->{status} == 200;

	# the holders go: the provider's retry of the same delivery is stored
	open(my $f, '>', $stop) or die;
	close $f;
	$holders->finish;
	ok(poll_until(sub { (metric($r, 'webhook_receiver_buffered_bytes') // 1) == 0 }, 'budget released', 30),
		'the held bytes released when the holders went');
	is(post($r, 'gh', $h, $body)->{status}, 200, 'the retry after the holders went: 200');
	push @acked, $id;
	for (1 .. 20)
	{
		my ($id2, $h2, $body2) = delivery();
		push @acked, $id2 if post($r, 'gh', $h2, $body2)->{status} == 200;
	}
	is(scalar(@acked), 23, 'every delivery after the holders: 200');
	my $list = join(',', map { "'$_'" } @acked);
	is($node->safe_psql('postgres',
			"SELECT count(DISTINCT event_id) FROM webhook_inbox.inbox WHERE event_id IN ($list)"),
		scalar(@acked), 'every delivery answered 200 is in the inbox');
	is($node->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.inbox"),
		scalar(@acked), 'nothing of the held bodies stored');
	is(stop_receiver($r), 0, 'receiver exits 0');
}

# a budget too small for one request is a configuration error
{
	my ($out, $err) = ('', '');
	IPC::Run::run([ receiver_bin(), '--db', 'dbname=x', '--max-buffered', '512k', '--max-body', '1m' ],
		'>', \$out, '2>', \$err);
	like($err, qr/invalid value for max-buffered: it must hold one request of max-body plus max-header/,
		'max-buffered under max-body: refused, naming the setting');
}

$node->stop;
done_testing();
