
# 303_worker_long_txn.pl
#	A long-open transaction holds back vacuum while events flow: the
#	worker keeps up.  The same load (3,000 payment and refund events over
#	1,000 payments, machine and occurrence strategies, one commit) is
#	drained once without and once with a REPEATABLE READ transaction open
#	since before the load; both throughputs are printed.

use strict;
use warnings;

use lib 'regress/t';
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use WorkerTest;

my $node = worker_node('longtxn', "webhook_inbox.batch_size = 200\n");
$node->safe_psql('postgres', "SELECT webhook_inbox.create_source('acct', 'stripe', 'whsec_l')");
# without a read API, this source's payments walk the article's payment machine (custom routes:
# a real PaymentIntent's lifecycle has cycles, and the presets fetch it) and refunds are occurrences
$node->safe_psql('postgres', q{
	INSERT INTO webhook_inbox.routes (source_id, event_type, class, strategy, object_type, object_id_path,
									  status_path, amount_path, currency_path, machine)
	SELECT s.id, r.event_type, r.class, r.strategy, r.object_type, '$.data.object.id', r.status_path,
		   r.amount_path, r.currency_path, r.machine
	  FROM webhook_inbox.sources s,
		   (VALUES ('payment_intent.*', 'state', 'machine', 'payment', '$.data.object.status'::jsonpath,
					NULL::jsonpath, NULL::jsonpath, 'payment'),
				   ('refund.created', 'occurrence', 'occurrence', 'refund', NULL, '$.data.object.amount',
					'$.data.object.currency', NULL)) AS r(event_type, class, strategy, object_type, status_path,
														 amount_path, currency_path, machine)
	 WHERE s.name = 'acct'});

# 3 events per payment (pending, authorised, captured) in shuffled order,
# and one refund occurrence per payment
sub load
{
	my ($tag) = @_;
	return qq{
	SELECT count(webhook_inbox.intake('acct', '{}', convert_to(body, 'UTF8')))
	  FROM (SELECT format('{"id":"evt_${tag}_%s_%s","type":"%s","created":%s,"data":{"object":{"id":"%s_${tag}_%s","object":"x","status":"%s","amount":100,"currency":"eur"}}}',
					p, s, CASE WHEN s = 'refund' THEN 'refund.created' ELSE 'payment_intent.' || s END,
					1767225600 + p * 10 + k, CASE WHEN s = 'refund' THEN 're' ELSE 'pi' END, p, s) AS body
			  FROM generate_series(1, 1000) p,
				   unnest(ARRAY['pending', 'authorised', 'captured', 'refund']) WITH ORDINALITY AS u(s, k)
			 ORDER BY md5(p::text || s)) q};
}

sub run_load
{
	my ($tag) = @_;
	my $t0 = Time::HiRes::time();
	is($node->safe_psql('postgres', load($tag)), '4000', "$tag: 4,000 events stored in one commit");
	wait_drained($node, $tag, 180);
	my $secs = Time::HiRes::time() - $t0;
	is($node->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.objects WHERE object_id LIKE 'pi\\_${tag}\\_%' "
			  . "AND status = 'captured'"), '1000', "$tag: every payment reached captured");
	is($node->safe_psql('postgres', "SELECT count(*) FROM webhook_inbox.occurrences WHERE occurrence_id LIKE 're\\_${tag}\\_%'"),
		'1000', "$tag: every refund recorded once");
	return 4000 / $secs;
}

my $free = run_load('free');

# a transaction open since before the load pins the xmin horizon
my $bg = $node->background_psql('postgres');
$bg->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
$bg->query_safe('SELECT count(*) FROM webhook_inbox.inbox');
my $held = run_load('held');
my $dead = $node->safe_psql('postgres', "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'inbox'");
$bg->query_safe('COMMIT');
$bg->quit;

diag(sprintf('throughput: %.0f events/s without, %.0f events/s with a long-open transaction (inbox dead tuples %s)',
	$free, $held, $dead));
cmp_ok($held, '>=', $free * 0.2, 'the worker keeps up while vacuum is held back');

$node->stop;
done_testing();
