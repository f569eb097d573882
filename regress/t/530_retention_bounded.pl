# 530_retention_bounded.pl
#	After prune() with its defaults, no table of the schema grows without
#	bound under a steady stream.  webhook-sim streams Stripe subscription
#	and invoice events over a fixed set of 300 objects through the receiver
#	(some dropped, so the sweeps repair), the worker fetches, saves and
#	sweeps every second or two; after each round of the stream, time passes
#	(every record's timestamps move 100 days back: older than every default
#	age) and prune() runs with its defaults.  The rows of every table of
#	the schema are counted after each round: a table whose count after the
#	last two rounds exceeds what the rounds before them reached (plus half
#	a round's new rows) grows without bound.  The counts are printed: they
#	are what docs/operations.md ("Retention") quotes.

use strict;
use warnings;

use lib 'regress/t';
use PostgreSQL::Test::Utils;
use Test::More;
use WorkerTest;
use SimTest qw(poll_until);

my $rounds = 5;
my $per_round = 300;			# deliveries per round of the stream
my $node = worker_node('retention', "webhook_inbox.sweep_interval = 1s\nwebhook_inbox.full_sweep_interval = 2s\n"
	  . "webhook_inbox.fetch_delay = 0\n");
my $rcv = start_receiver($node);
add_source($node, 'acct', 'stripe', 'whsec_ret530', 'http://127.0.0.1:9');
my $sim = start_sim('--seed', 530, '--objects', 300, '--events', 100000, '--rate', 150,
	'--types', 'subscription,invoice', '--stripe', 'acct:whsec_ret530', '--deliver-to', $rcv->{url},
	'--drop', '0.05', '--concurrency', 4, '--retry-base-ms', 100);
# the simulator runs without --rate-limit: the source says so, so that the
# worker reads at the stream's pace (at Stripe's sandbox pace, 25/s, it reads
# each object about once a round, at its last state, and few transitions
# are applied: nothing to prune)
$node->safe_psql('postgres', "UPDATE webhook_inbox.sources SET api_base = '$sim->{url}', "
	  . "settings = settings || '{\"rate_limit\": 1000, \"endpoint_rate_limit\": 1000}' WHERE name = 'acct'");

# every table of the schema, whoever added it
my @tables = split /\n/, $node->safe_psql('postgres', q{
	SELECT c.relname FROM pg_class c WHERE c.relnamespace = 'webhook_inbox'::regnamespace AND c.relkind = 'r'
	 ORDER BY 1});
cmp_ok(scalar @tables, '>=', 20, 'the schema\'s tables: ' . join(', ', @tables));

# time passes: every timestamp of the rows moves 100 days back, except the
# present's own clocks (leases, checkpoints); the installation's record
# moves too, so the restore guard still sees the data as younger than it
my $shift = $node->safe_psql('postgres', q{
	SELECT string_agg(format('UPDATE webhook_inbox.%I SET %s', t, cols), '; ')
	  FROM (SELECT c.relname AS t, string_agg(format('%I = %I - interval ''100 days''', a.attname, a.attname), ', ') AS cols
			  FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
			 WHERE c.relnamespace = 'webhook_inbox'::regnamespace AND c.relkind = 'r'
			   AND a.attnum > 0 AND NOT a.attisdropped AND a.atttypid = 'timestamptz'::regtype
			   AND c.relname NOT IN ('object_leases', 'sweep_checkpoints')
			 GROUP BY c.relname) x});

sub counts
{
	my %n;
	for my $row (split /\n/, $node->safe_psql('postgres',
		join(' UNION ALL ', map { "SELECT '$_', count(*) FROM webhook_inbox.$_" } @tables)))
	{
		my ($t, $c) = split /\|/, $row;
		$n{$t} = $c;
	}
	return \%n;
}

sub deliveries_total
{
	my (undef, $s) = http_json('GET', "$sim->{url}/_sim/status");
	return $s ? ($s->{delivered} // $s->{generated} // 0) : 0;
}

my @after;
my $pruned_any = 0;
my %pruned = (transitions => 0, sweep_runs => 0);
for my $r (1 .. $rounds)
{
	my $before = $node->safe_psql('postgres', 'SELECT last_value FROM webhook_inbox.deliveries_id_seq');
	ok(poll_until(sub {
		$node->safe_psql('postgres', 'SELECT last_value FROM webhook_inbox.deliveries_id_seq') >= $before + $per_round
	}, 60), "round $r: $per_round more deliveries");
	# the worker has caught up with what was delivered (the stream goes on)
	ok($node->poll_query_until('postgres', q{
		SELECT count(*) < 50 FROM webhook_inbox.inbox WHERE status IN ('pending', 'processing', 'retry')}),
		"round $r: the worker keeps up");
	$node->safe_psql('postgres', $shift);
	my ($p, $tr, $sr) = split /\|/, $node->safe_psql('postgres', q{
		SELECT inbox_deleted + deliveries_deleted + transitions_deleted + sweep_runs_deleted + repairs_deleted,
			   transitions_deleted, sweep_runs_deleted
		  FROM webhook_inbox.prune('30 days')});
	$pruned_any += $p;
	$pruned{transitions} += $tr;
	$pruned{sweep_runs} += $sr;
	push @after, counts();
	diag("round $r: repairs by outcome: " . join(', ', split /\n/, $node->safe_psql('postgres',
		q{SELECT coalesce(outcome, '-') || '=' || count(*) FROM webhook_inbox.repairs GROUP BY outcome ORDER BY 1})));
	diag("round $r: pruned $p rows; " . join(', ', map { "$_=$after[-1]{$_}" } grep { $after[-1]{$_} } @tables));
}
cmp_ok($pruned_any, '>', 0, 'prune() deleted rows');
cmp_ok($pruned{$_}, '>', 0, "prune() deleted old $_ ($pruned{$_})") for qw(transitions sweep_runs);
my $n_sweeps = $node->safe_psql('postgres', 'SELECT count(*) FROM webhook_inbox.sweep_runs');
cmp_ok($n_sweeps, '>', 0, "sweeps ran and their newest runs are kept ($n_sweeps)");
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM webhook_inbox.objects'), '>', 0, 'the mirror holds the objects');

# bounded: the tables that follow the mirror by the provider's objects
# (the mirror learns them as their events come: one row per object, its
# newest transition, a kept sweep run's repairs of them); every other one
# ends the last two rounds, the lower of them, no higher than the highest
# of rounds 2 and 3 (after the first, the warm-up) plus half a round's new
# rows.  The lower of two: the events open at a prune() are kept, and in
# some rounds a hundred or two are (a batch claimed for its fetches while
# the stream goes on, a sweep's feed of missed events): inbox 27, 6, 9,
# then 222 once, a burst and not growth.  A table that grows keeps what it
# grew in both rounds.
my $n_objects = 300;
my %per_object = (objects => 1, object_leases => 1, transitions => 3, repairs => 4);
for my $t (sort keys %per_object)
{
	cmp_ok($after[-1]{$t} // 0, '<=', $per_object{$t} * $n_objects,
		"$t is bounded by the provider's $n_objects objects: " . join(' → ', map { $_->{$t} // 0 } @after));
}
for my $t (grep { !$per_object{$_} } @tables)
{
	my ($max) = sort { $b <=> $a } map { $after[$_]{$t} } 1 .. $rounds - 3;
	my ($lower) = sort { $a <=> $b } map { $after[$_]{$t} } $rounds - 2 .. $rounds - 1;
	cmp_ok($lower, '<=', $max + $per_round / 2,
		"$t is bounded: " . join(' → ', map { $_->{$t} } @after));
}
# the objects' transitions: at most a few per object (the newest is always kept)
my ($objects, $transitions) = split /\|/, $node->safe_psql('postgres',
	'SELECT (SELECT count(*) FROM webhook_inbox.objects), (SELECT count(*) FROM webhook_inbox.transitions)');
cmp_ok($transitions, '<=', 3 * $objects, "transitions kept: $transitions for $objects objects");

# the control: a round whose prune keeps the sweep history (a NULL age)
# leaves more of it than any round with the defaults did, so the bounds
# above measure prune()'s retention, not a quiet stream
my $before = $node->safe_psql('postgres', 'SELECT last_value FROM webhook_inbox.deliveries_id_seq');
ok(poll_until(sub {
	$node->safe_psql('postgres', 'SELECT last_value FROM webhook_inbox.deliveries_id_seq') >= $before + $per_round
}, 60), "control round: $per_round more deliveries");
$node->safe_psql('postgres', $shift);
# the worker sweeps every second: wait until it has run more passes than any
# bounded round kept (a loaded machine may take longer than the round did)
my ($max_runs) = sort { $b <=> $a } map { $_->{sweep_runs} } @after;
ok(poll_until(sub { counts()->{sweep_runs} > $max_runs }, 60),
	"control round: more sweep runs than any bounded round kept ($max_runs)");
$node->safe_psql('postgres', q{SELECT * FROM webhook_inbox.prune('30 days', sweep_runs_older_than => NULL)});
my $kept = counts();
for my $t (qw(sweep_runs))
{
	my ($max) = sort { $b <=> $a } map { $_->{$t} } @after;
	cmp_ok($kept->{$t}, '>', $max, "control: with NULL ages $t keeps its history ($kept->{$t} > $max)");
}

stop_proc($sim);
is(stop_receiver($rcv), 0, 'the receiver stops cleanly');
done_testing();
