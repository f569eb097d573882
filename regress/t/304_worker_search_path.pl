
# 304_worker_search_path.pl
#	Functions and operators planted in public by a database owner who is
#	not a superuser are never called by the background worker (which runs as
#	a superuser), nor by the SQL it reaches: the database's search_path puts
#	public first, then the worker fetches, saves, sweeps and sends an effect
#	against webhook-sim.  Each planted look-alike bumps a sequence, which no
#	rollback undoes; the test's own queries pin their own path.

use strict;
use warnings;

use lib 'regress/t';
use PostgreSQL::Test::Utils;
use Test::More;
use WorkerTest;
use SimTest qw(poll_until);

my $sim = start_sim('--seed', '3', '--objects', '20', '--events', '60', '--stripe', 'acct:whsec_sp');
my $node = worker_node('search_path', qq{
webhook_inbox.sweep_interval = 1s
webhook_inbox.full_sweep_interval = 1s
webhook_inbox.fetch_delay = 0
});

# the test's own statements never go through the planted names
sub qs
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', "SET search_path = pg_catalog; $sql");
}

qs(q{
	CREATE ROLE planter LOGIN;
	ALTER DATABASE postgres OWNER TO planter;
});
$node->safe_psql('postgres', q{
	SET ROLE planter;
	CREATE SEQUENCE public.planted_calls;
	CREATE FUNCTION public.planted() RETURNS void LANGUAGE sql AS
		$$ SELECT pg_catalog.nextval('public.planted_calls'::pg_catalog.regclass) $$;
	CREATE FUNCTION public.nextval(text) RETURNS bigint LANGUAGE sql AS
		$$ SELECT public.planted(); SELECT pg_catalog.nextval($1::pg_catalog.regclass) $$;
	CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE sql AS
		$$ SELECT public.planted(); SELECT pg_catalog.now() $$;
	CREATE FUNCTION public.jsonb_path_query_first(jsonb, text) RETURNS jsonb LANGUAGE sql AS
		$$ SELECT public.planted(); SELECT pg_catalog.jsonb_path_query_first($1, $2::pg_catalog.jsonpath) $$;
	CREATE FUNCTION public.jsonb_path_query(jsonb, text) RETURNS SETOF jsonb LANGUAGE sql AS
		$$ SELECT public.planted(); SELECT pg_catalog.jsonb_path_query($1, $2::pg_catalog.jsonpath) $$;
	CREATE FUNCTION public.jsonb_typeof(jsonb) RETURNS text LANGUAGE sql AS
		$$ SELECT public.planted(); SELECT pg_catalog.jsonb_typeof($1) $$;
	CREATE FUNCTION public.make_interval(years int DEFAULT 0, months int DEFAULT 0, weeks int DEFAULT 0,
		days int DEFAULT 0, hours int DEFAULT 0, mins int DEFAULT 0, secs double precision DEFAULT 0)
		RETURNS interval LANGUAGE sql AS
		$$ SELECT public.planted(); SELECT pg_catalog.make_interval(years, months, weeks, days, hours, mins, secs) $$;
	CREATE FUNCTION public.p_texteq(text, text) RETURNS boolean LANGUAGE sql AS
		$$ SELECT public.planted(); SELECT pg_catalog.texteq($1, $2) $$;
	CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.p_texteq);
	CREATE FUNCTION public.p_int8eq(bigint, bigint) RETURNS boolean LANGUAGE sql AS
		$$ SELECT public.planted(); SELECT pg_catalog.int8eq($1, $2) $$;
	CREATE OPERATOR public.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.p_int8eq);
	ALTER DATABASE postgres SET search_path = public, pg_catalog;
});
is($node->safe_psql('postgres', q{SELECT now() IS NOT NULL; SELECT last_value FROM public.planted_calls}),
	"t\n1", 'a session on the database calls the planted now()');
qs(q{SELECT pg_catalog.setval('public.planted_calls', 1, false)});
# the worker connects again, with the database's path
$node->restart;

add_source($node, 'acct', 'stripe', 'whsec_sp', $sim->{url});
my $truth = sim_truth($sim);
my @subs = map { $_->{id} } grep { $_->{type} eq 'subscription' && !$_->{deleted} } @{ $truth->{objects} };
# a succeeded PaymentIntent with nothing refunded yet: Stripe refunds only those
my @payments = grep { !@{ (http_json('GET', "$sim->{url}/v1/refunds?payment_intent=$_"))[1]{data} } }
  map { $_->{id} } grep { $_->{type} eq 'payment_intent' && $_->{status} eq 'succeeded' } @{ $truth->{objects} };
ok(@subs >= 3 && @payments >= 1, 'subscriptions and a payment in the scenario');

# fetch-strategy events through intake(), from a session with the hostile
# path; the provider first throttles (a deferral) and fails once (a retry)
for my $rule ('{"status":429,"retry_after":1,"path_prefix":"/v1/subscriptions","count":1}',
	qq({"status":503,"path_prefix":"/v1/subscriptions/$subs[1]","count":1}))
{
	my ($st) = http_json('POST', "$sim->{url}/_sim/faults",
		{ content => $rule, headers => { 'Content-Type' => 'application/json' } });
	is($st, 200, "fault rule $rule accepted");
}
my $sql = '';
my $n = 0;
for my $id (@subs[0 .. 2])
{
	$n++;
	$sql .= intake_sql('acct', stripe_event("evt_sp$n", 'customer.subscription.updated',
			'subscription', $id, 'active', 1767225600 + $n));
}
$node->safe_psql('postgres', $sql);
ok(poll_until(sub {
	qs(q{SELECT count(*) FROM webhook_inbox.inbox WHERE status OPERATOR(pg_catalog.=) ANY ('{pending,processing,retry}')}) == 0
}, 60), 'the worker fetched and saved every event');
my $three = join(',', map { "'$_'" } @subs[0 .. 2]);
is(qs(qq{SELECT count(*) FROM webhook_inbox.objects WHERE state IS NOT NULL
	AND object_id OPERATOR(pg_catalog.=) ANY (ARRAY[$three])}), 3, 'the three objects mirrored');

# the worker's own sweeps
ok(poll_until(sub { qs(q{SELECT count(*) FROM webhook_inbox.sweep_runs WHERE finished_at IS NOT NULL}) >= 2 }, 60),
	'the worker ran sweeps');
is(qs(q{SELECT count(*) FROM webhook_inbox.sweep_runs WHERE error IS NOT NULL}), 0, 'no sweep failed');

# an effect the worker sends
$node->safe_psql('postgres', qq{
	SELECT webhook_inbox.request_effect('refund:sp', 'http',
		jsonb_build_object('method', 'POST', 'path', '/v1/refunds',
			'body', jsonb_build_object('payment_intent', '$payments[0]', 'amount', 100)),
		source => 'acct', owner => 'finance')});
ok(poll_until(sub { qs(q{SELECT status FROM webhook_inbox.effects WHERE effect_key OPERATOR(pg_catalog.=) 'refund:sp'}) eq 'done' }, 60),
	'the worker sent the effect');
# and sweep_now from the hostile session
like($node->safe_psql('postgres', q{SELECT status FROM webhook_inbox.sweep_now('acct', 'subscription')}),
	qr/^complete$/, 'sweep_now from the hostile session');

my (undef, $counters) = http_json('GET', "$sim->{url}/_sim/counters");
cmp_ok($counters->{faulted} // 0, '>=', 2, 'the throttle and the failure were answered');
is(qs(q{SELECT last_value::text || ' ' || is_called::text FROM public.planted_calls}), '1 false',
	'nothing planted was ever called');

$node->stop;
stop_proc($sim);
done_testing();
