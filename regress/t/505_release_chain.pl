# The chain from release 0.1.0 to the release being built, with what a user
# of 0.1.0 has: preset routes they edited (one in place, one replaced by a
# route of their own) and PaymentIntents 0.1.0 mirrored as object_type
# payment, one with an event still to process.  The 0.1.0 rows are written
# while the new library is loaded (its 0.1.0 paths, compat_0_1_0_*.c), as they
# would be between the packages' upgrade and ALTER EXTENSION UPDATE.  After
# the update:
#  - the edits are the user's rows: kept, chosen by classification over the
#    release's preset of the same key, and kept by pg_dump and a restore;
#  - the payment objects are payment_intent objects, with their history and
#    pending event; later events update them from the provider (webhook-sim
#    speaking Stripe's API), stripe_payment_intents lists each once, and
#    webhook-sim verify finds the mirror equal to the provider.
use strict;
use warnings;
use lib 'regress/t';
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ReleaseTest;
use WorkerTest;

my $version = ext_version();
my ($rc, $out, $err);
my $node = PostgreSQL::Test::Cluster->new('chain');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_inbox'
webhook_inbox.enabled = on
webhook_inbox.naptime = 200ms
webhook_inbox.sweep_interval = 0
webhook_inbox.full_sweep_interval = 0
webhook_inbox.fetch_delay = 0
log_min_messages = log
});
$node->start;
$node->safe_psql('postgres', "CREATE EXTENSION webhook_inbox VERSION '0.1.0'");
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'webhook_inbox'"),
	'0.1.0', 'a database at 0.1.0, the new library loaded');

# the provider: PaymentIntents with their lifecycles, no deliveries
my $sim = start_sim('--seed', 7, '--objects', 12, '--events', 60, '--types', 'payment_intent',
	'--stripe', 'chain:whsec_chain');
my @pis = sort map { $_->{id} } grep { $_->{type} eq 'payment_intent' } @{ sim_truth($sim)->{objects} };
cmp_ok(scalar @pis, '>=', 6, scalar(@pis) . ' PaymentIntents at the provider');
$node->safe_psql('postgres', qq{
	INSERT INTO webhook_inbox.sources (name, kind, signing_secrets, api_base, api_token)
	VALUES ('chain', 'stripe', '{whsec_chain}', '$sim->{url}', 'sk_test_chain');
	-- a Razorpay payment keeps its type: it is no PaymentIntent
	INSERT INTO webhook_inbox.sources (name, kind, signing_secrets) VALUES ('rzp', 'razorpay', '{rzp_secret}');
});

# Two edits of preset routes, as 0.1.0 allowed them: in place (0.1.0's
# version trigger refuses any UPDATE of routes, so with it off), and a
# preset replaced by a route of the user's with the same key.
$node->safe_psql('postgres', q{
	ALTER TABLE webhook_inbox.routes DISABLE TRIGGER routes_bump;
	UPDATE webhook_inbox.routes SET priority = 120 WHERE preset AND source_kind = 'stripe' AND event_type = 'invoice.*';
	ALTER TABLE webhook_inbox.routes ENABLE TRIGGER routes_bump;
	DELETE FROM webhook_inbox.routes WHERE preset AND source_kind = 'stripe' AND event_type = 'customer.*';
	INSERT INTO webhook_inbox.routes (source_kind, event_type, class, strategy, object_type, object_id_path, priority)
	VALUES ('stripe', 'customer.*', 'state', 'fetch', 'customer', '$.data.object.id', 95);
});

# 0.1.0's mirror of the PaymentIntents: objects of type payment with a
# transition each (upsert_object, served by the 0.1.0 path), and one event
# taken in by 0.1.0's intake and not yet processed.
for my $pi (@pis)
{
	is($node->safe_psql('postgres',
		"SELECT webhook_inbox.upsert_object('chain', 'payment', '$pi', NULL, 'pending', '{\"id\": \"$pi\"}', NULL)"),
		'applied', "0.1.0 mirrors $pi as a payment");
}
$node->safe_psql('postgres', "SELECT webhook_inbox.upsert_object('rzp', 'payment', 'pay_R1', NULL, 'captured', '{}', NULL)");
my $pending = stripe_event('evt_chain_pending', 'payment_intent.processing', 'payment_intent', $pis[0], 'processing', 1700000000);
is($node->safe_psql('postgres', intake_sql('chain', $pending)), 'new', "0.1.0's intake takes an event of $pis[0]");
is($node->safe_psql('postgres', q{SELECT object_type || ' ' || strategy || ' ' || status FROM webhook_inbox.inbox
	WHERE event_id = 'evt_chain_pending'}), 'payment machine pending', 'as 0.1.0 wrote it: a payment, for the machine');

# the rest of 0.1.0's C API on its schema, served by this library
is($node->safe_psql('postgres', intake_sql('chain', $pending)), 'duplicate', "0.1.0's intake: a duplicate");
is($node->safe_psql('postgres', intake_sql('chain', 'not json')), 'quarantined', "0.1.0's intake: an unreadable body");
is($node->safe_psql('postgres', q{SELECT webhook_inbox.intake('rzp', '{x-razorpay-event-id,evt_r1}',
	convert_to('{"event":"payment.captured","created_at":1700000000,"payload":{"payment":{"entity":{"id":"pay_R2","status":"captured"}}}}', 'UTF8'))}),
	'new', "0.1.0's intake: a Razorpay payment");
is($node->safe_psql('postgres', q{SELECT source || ' ' || object_type || ' ' || object_id || ' ' || strategy
	FROM webhook_inbox.claim('chain-test', 5, '100 milliseconds') WHERE source = 'rzp'}),
	'rzp payment pay_R2 machine', "0.1.0's claim");
is($node->safe_psql('postgres', q{SELECT webhook_inbox.transition_allowed('payment', 'pending', 'captured')}), 't',
	"0.1.0's transition_allowed");
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_inbox.worker_stats() WHERE worker_pid IS NOT NULL}), '1',
	"0.1.0's worker_stats, with its own columns");
($rc, $out, $err) = $node->psql('postgres', q{SELECT webhook_inbox.sweep_now('chain', 'payment_intent')});
like($err, qr/webhook_inbox\.sweep_now\(\) needs the extension updated to \Q$version\E/,
	'sweep_now() on 0.1.0: refused, naming the release');
like($err, qr/HINT:  Run ALTER EXTENSION webhook_inbox UPDATE in this database/, '... with the command to run');

# the worker does not touch a 0.1.0 schema: it waits
ok($node->wait_for_log(qr/has webhook_inbox 0\.1\.0 installed, the library loaded is \Q$version\E; waiting until ALTER EXTENSION webhook_inbox UPDATE/),
	'the worker waits, saying which versions and the command');

($rc, $out, $err) = $node->psql('postgres', 'ALTER EXTENSION webhook_inbox UPDATE');
is($rc, 0, 'ALTER EXTENSION webhook_inbox UPDATE') or diag($err);
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'webhook_inbox'"),
	$version, "updated to $version");

# the edits
sub edits
{
	my ($db) = @_;
	return $node->safe_psql($db, q{
		SELECT string_agg(format('%s %s %s', event_type, priority, preset), ', ' ORDER BY event_type, preset)
		  FROM webhook_inbox.routes WHERE source_kind = 'stripe' AND event_type IN ('invoice.*', 'customer.*')});
}
sub chosen
{
	my ($db, $type) = @_;
	return $node->safe_psql($db, qq{
		SELECT r.priority || ' ' || r.preset FROM webhook_inbox.routes r
		 WHERE r.id = (SELECT id FROM webhook_inbox._route_of(NULL, 'stripe', '$type'))});
}
is(edits('postgres'), 'customer.* 95 f, customer.* 90 t, invoice.* 120 f, invoice.* 100 t',
	"the edits are the user's rows, beside the release's presets");
is(chosen('postgres', 'invoice.paid'), '120 false', 'the route edited in place classifies invoice events');
is(chosen('postgres', 'customer.updated'), '95 false', 'the replacing route classifies customer events');

# an edit under this release is kept the same way, and a preset is not deleted
$node->safe_psql('postgres', q{UPDATE webhook_inbox.routes SET priority = 105
	WHERE preset AND source_kind = 'stripe' AND event_type = 'charge.*'});
is($node->safe_psql('postgres', q{SELECT string_agg(priority || ' ' || preset, ', ' ORDER BY preset)
	FROM webhook_inbox.routes WHERE source_kind = 'stripe' AND event_type = 'charge.*'}),
	'105 false, 90 true', "$version: updating a preset stores the user's row");
($rc, $out, $err) = $node->psql('postgres', q{DELETE FROM webhook_inbox.routes
	WHERE preset AND source_kind = 'stripe' AND event_type = 'charge.*'});
like($err, qr/preset route for stripe charge\.\* cannot be deleted/, "$version: a preset route is not deleted");

# the objects
is($node->safe_psql('postgres', q{SELECT string_agg(object_type || ' ' || n, ', ') FROM (SELECT object_type, count(*) AS n
	FROM webhook_inbox.objects o JOIN webhook_inbox.sources s ON s.id = o.source_id
	WHERE s.name = 'chain' GROUP BY object_type) t}),
	'payment_intent ' . scalar(@pis), 'every 0.1.0 payment object is a payment_intent');
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_inbox.transitions t
	JOIN webhook_inbox.sources s ON s.id = t.source_id WHERE s.name = 'chain' AND t.object_type = 'payment_intent'
	AND t.from_status IS NULL AND t.to_status = 'pending'}),
	scalar(@pis), 'with their history');
is($node->safe_psql('postgres', q{SELECT string_agg(object_type || ' ' || object_id, ', ' ORDER BY object_id)
	FROM webhook_inbox.objects o JOIN webhook_inbox.sources s ON s.id = o.source_id
	WHERE s.name = 'rzp' AND o.object_id = 'pay_R1'}),
	'payment pay_R1', "Razorpay's payment stays a payment");

# later events: the pending one and one per PaymentIntent, fetched from the provider
my $t = 1700000100;
for my $pi (@pis)
{
	$node->safe_psql('postgres', intake_sql('chain',
		stripe_event("evt_chain_$pi", 'payment_intent.updated', 'payment_intent', $pi, 'ignored', $t++)));
}
wait_drained($node, 'later events');
is($node->safe_psql('postgres', q{SELECT status FROM webhook_inbox.objects o JOIN webhook_inbox.sources s
	ON s.id = o.source_id WHERE s.name = 'rzp' AND o.object_id = 'pay_R2'}), 'captured',
	'the Razorpay event 0.1.0 claimed is processed once its lease expired');
my %truth = map { $_->{id} => $_->{status} } grep { $_->{type} eq 'payment_intent' } @{ sim_truth($sim)->{objects} };
is($node->safe_psql('postgres', q{SELECT string_agg(id || ' ' || status, ', ' ORDER BY id)
	FROM webhook_inbox.stripe_payment_intents WHERE source = 'chain'}),
	join(', ', map { "$_ $truth{$_}" } @pis), "stripe_payment_intents lists each once, with the provider's status");
isnt($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_inbox.objects o
	JOIN webhook_inbox.sources s ON s.id = o.source_id WHERE s.name = 'chain' AND o.state ? 'amount'}), '0',
	'their state is the fetched PaymentIntent');
verify_source($node, 'chain', $sim, 'after the chain');

# pg_dump and a restore keep the user's routes
my $dump = PostgreSQL::Test::Utils::tempdir() . '/chain.dump';
IPC::Run::run([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('postgres') ], '2>', \$err)
  or BAIL_OUT("pg_dump: $err");
$node->safe_psql('postgres', 'CREATE DATABASE restored');
IPC::Run::run([ 'pg_restore', '--exit-on-error', '-d', $node->connstr('restored'), $dump ], '2>', \$err);
is($?, 0, 'the dump restores') or diag($err);
is(edits('restored'), edits('postgres'), 'the restored database has the same edits');
is(chosen('restored', 'invoice.paid'), '120 false', 'and classifies by them');
is($node->safe_psql('restored', q{SELECT string_agg(priority || ' ' || preset, ', ' ORDER BY preset)
	FROM webhook_inbox.routes WHERE source_kind = 'stripe' AND event_type = 'charge.*'}),
	'105 false, 90 true', "the $version edit too");

# no repeated errors from the worker meanwhile
my $log = slurp_file($node->logfile);
my @failures = $log =~ /^.*webhook_inbox worker: (?!the extension exists|database ".*" has webhook_inbox|started|stopping).*$/mg;
is(scalar @failures, 0, 'the worker logged no error') or diag(join("\n", @failures[0 .. ($#failures < 9 ? $#failures : 9)]));
my $waits = () = $log =~ /waiting until ALTER EXTENSION webhook_inbox UPDATE/g;
is($waits, 1, 'the worker said once that it waits');
stop_proc($sim);
$node->stop;
done_testing();
