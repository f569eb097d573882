
# 511_examples.pl
#	The application examples: examples/node (node-postgres) and
#	examples/python (psycopg 3) each read the mirror through a typed view
#	and execute the effects outbox, woken by LISTEN/NOTIFY only (their
#	fallback timer is set far beyond the test's deadline), exactly once per
#	transition, leaving other kinds alone; they log in as a member of
#	webhook_inbox_application, the application's role.

use strict;
use warnings;

use lib 'receiver/t';
use Cwd qw(abs_path);
use IPC::Run;
use PostgreSQL::Test::Utils;
use ReceiverTest;
use Test::More;

my $node = new_node('examples');
$node->safe_psql('postgres', q{
	SELECT webhook_inbox.create_source(name => 'app_stripe', kind => 'stripe', secret => 'whsec_app');
	INSERT INTO webhook_inbox.effect_rules (object_type, from_status, to_status, kind, request, owner) VALUES
		('subscription', 'active', 'past_due', 'email', '{"template": "payment_failed", "subscription": "{object_id}"}', 'operations'),
		('subscription', 'past_due', 'active', 'email', '{"template": "payment_recovered", "subscription": "{object_id}"}', 'operations'),
		('subscription', '*', 'canceled', 'ledger', '{}', 'finance');
});

# Reads what the example printed so far; false once it has exited.
sub pump
{
	my ($h) = @_;
	return 0 unless $h->pumpable;
	eval { $h->pump_nb };
	return $h->pumpable;
}

# the examples log in as the application does: a member of
# webhook_inbox_application, which reads the typed views and runs the outbox
$node->safe_psql('postgres', 'CREATE ROLE app LOGIN IN ROLE webhook_inbox_application');
my %env = (
	PGHOST => $node->host,
	PGPORT => $node->port,
	PGDATABASE => 'postgres',
	PGUSER => 'app',
	PGTZ => 'UTC',
	WI_KINDS => 'email',
	WI_POLL_MS => 600000,
	WI_POLL_S => 600,
	WI_EXIT_AFTER => 2);

sub save
{
	my ($id, $version, $status) = @_;
	return qq{SELECT webhook_inbox.upsert_object('app_stripe', 'subscription', '$id', $version, '$status',
			'{"id": "$id", "object": "subscription", "status": "$status", "customer": "cus_$id",
			  "items": {"data": [{"current_period_end": 1767225600}]}}');};
}

# Runs one example against fresh subscriptions of its own.
sub check_example
{
	my ($name, $dir, @cmd) = @_;
	my ($out, $err) = ('', '');
	my $h;
	{
		local @ENV{ keys %env } = values %env;
		$h = IPC::Run::start(\@cmd, '>', \$out, '2>', \$err, init => sub { chdir $dir or die "chdir $dir: $!" });
	}
	ok(poll_until(sub { pump($h); $out =~ /^listening for email effects/m }, "$name listening", 60),
		"$name: connects and listens") or diag($err);

	my $sub = "sub_$name";
	# one transaction: the notification comes at its commit
	$node->safe_psql('postgres', join("\n", 'BEGIN;',
		save($sub, 1, 'active'),
		save($sub, 2, 'past_due'),
		save($sub, 2, 'past_due'),    # a duplicate fires nothing
		save($sub, 3, 'canceled'),    # another kind: not this consumer's
		'COMMIT;'));
	ok( poll_until(
			sub {
				pump($h);
				$node->safe_psql('postgres',
					"SELECT status FROM webhook_inbox.effects WHERE object_id = '$sub' AND kind = 'email'") eq 'done';
			},
			"the first effect of $name", 30),
		"$name: woken by NOTIFY, executes the effect and completes it") or diag("$out\n$err");
	poll_until(sub { pump($h); $out =~ /^effect /m }, "the output of $name", 10);
	like($out, qr/^effect \d+ email subscription\/$sub key=email:\d+:subscription\/$sub:active->past_due#\d+ request=\{"subscription": ?"$sub", ?"template": ?"payment_failed"\} status=canceled customer=cus_$sub period_end=2026-01-01T00:00:00(\.000Z|\+00:00)$/m,
		"$name: the effect's request, and the subscription read through the typed view");

	# a second transition: one more email, then the example exits as told
	$node->safe_psql('postgres', qq{
		SELECT webhook_inbox.upsert_object('app_stripe', 'subscription', '${sub}_b', 1, 'past_due', '{}');
		SELECT webhook_inbox.upsert_object('app_stripe', 'subscription', '${sub}_b', 2, 'active', '{}');});
	ok(poll_until(sub { !pump($h) }, "$name exit", 30), "$name: exits after two effects")
	  or $h->kill_kill;
	$h->finish;
	is($h->result(0), 0, "$name: exit code 0") or diag($err);
	is( $node->safe_psql('postgres',
			"SELECT string_agg(kind || ':' || status || ':' || coalesce(response, '') || ':' || coalesce(holder, '-'), ' ' ORDER BY id)"
			  . " FROM webhook_inbox.effects WHERE object_id IN ('$sub', '${sub}_b')"),
		'email:done:sent:- ledger:pending::- email:done:sent:-',
		"$name: each email once, done with its response; the ledger effect left for its own consumer");
	my @lines = ($out =~ /^effect /mg);
	is(scalar(@lines), 2, "$name: two effects executed, no more");
}

SKIP:
{
	skip 'node and npm are not installed', 7
	  unless grep { -x "$_/node" } split /:/, $ENV{PATH};
	my $dir = abs_path('examples/node');
	unless (-d "$dir/node_modules/pg")
	{
		my ($o, $e) = ('', '');
		IPC::Run::run([ 'npm', 'ci', '--no-audit', '--no-fund' ], '>', \$o, '2>', \$e,
			init => sub { chdir $dir });
		skip "npm ci failed: $e", 7 if $?;
	}
	check_example('node', $dir, 'node', 'consume.js');
}

SKIP:
{
	my $py = '/usr/bin/python3';
	system($py, '-c', 'import psycopg') == 0
	  or skip 'python3-psycopg is not installed (scripts/deps.sh installs it)', 7;
	check_example('python', abs_path('examples/python'), $py, 'consume.py');
}

$node->stop;
done_testing();
