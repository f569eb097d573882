# webhook-sim verify: a mirror equal to the truth passes; each planted
# difference is reported on its own line and makes the exit code 1.
use strict;
use warnings;
use lib 'tools/test';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SimTest;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('verify');
$node->init;
my $sharedir = `pg_config --sharedir`;
chomp $sharedir;
my $has_ext = -f "$sharedir/extension/webhook_inbox.control";
# The extension's library defines postmaster-level settings: preload it.
# Its worker has nothing to do here and is switched off.
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'webhook_inbox'\nwebhook_inbox.enabled = off\n")
  if $has_ext;
$node->start;
if ($has_ext)
{
	$node->safe_psql('postgres', q{
		CREATE EXTENSION webhook_inbox;
		SELECT webhook_inbox.create_source('st', 'stripe', 'whsec_test123');
		SELECT webhook_inbox.create_source('shop', 'shopify', 'shpss_secret');
	});
	is($node->safe_psql('postgres', "SELECT count(*) FROM pg_extension WHERE extname = 'webhook_inbox'"),
		1, 'verifying against the webhook_inbox extension');
}
else
{
	# Only until the extension is installed: the three tables verify reads.
	$node->safe_psql('postgres', q{
		CREATE SCHEMA webhook_inbox;
		CREATE TABLE webhook_inbox.sources (id serial PRIMARY KEY, name text UNIQUE NOT NULL);
		CREATE TABLE webhook_inbox.objects (source_id int REFERENCES webhook_inbox.sources (id),
			object_type text, object_id text, status text, version numeric, state jsonb,
			deleted bool NOT NULL DEFAULT false, PRIMARY KEY (source_id, object_type, object_id));
		CREATE TABLE webhook_inbox.occurrences (source_id int REFERENCES webhook_inbox.sources (id),
			kind text, occurrence_id text, amount bigint, currency text,
			UNIQUE (source_id, kind, occurrence_id));
		INSERT INTO webhook_inbox.sources (name) VALUES ('st'), ('shop');
	});
}

my $sim = start_sim('--stripe', 'st:whsec_test123', '--shopify', 'shop:shpss_secret',
	'--seed', 31, '--objects', 60, '--events', 500);
my (undef, $truth) = http_json('GET', "$sim->{url}/_sim/truth");
ok(@{ $truth->{objects} } > 20 && @{ $truth->{occurrences} } > 0, 'truth has objects and occurrences');

# Mirror the truth exactly: deleted objects alternately absent and tombstoned.
sub sqlq { my ($s) = @_; return 'NULL' unless defined $s; $s =~ s/'/''/g; return "'$s'" }
my @sql;
my $i = 0;
for my $o (@{ $truth->{objects} })
{
	next if $o->{deleted} && $i++ % 2;
	push @sql, sprintf('INSERT INTO webhook_inbox.objects (source_id, object_type, object_id, status, version, deleted) '
		  . 'SELECT id, %s, %s, %s, %s, %s FROM webhook_inbox.sources WHERE name = %s;',
		sqlq($o->{type}), sqlq($o->{id}), sqlq($o->{status}), $o->{version} // 'NULL',
		$o->{deleted} ? 'true' : 'false', sqlq($o->{source}));
}
for my $c (@{ $truth->{occurrences} })
{
	push @sql, sprintf('INSERT INTO webhook_inbox.occurrences (source_id, kind, occurrence_id, amount, currency) '
		  . 'SELECT id, %s, %s, %s, %s FROM webhook_inbox.sources WHERE name = %s;',
		sqlq($c->{kind}), sqlq($c->{id}), $c->{amount}, sqlq($c->{currency}), sqlq($c->{source}));
}
$node->safe_psql('postgres', join("\n", @sql));

my $conninfo = $node->connstr('postgres');
sub verify
{
	my ($source) = @_;
	return run_sim('verify', '--db', $conninfo, '--source', $source, '--api', $sim->{url});
}

for my $src (qw(st shop))
{
	my ($rc, $out) = verify($src);
	is($rc, 0, "$src: identical mirror: exit 0");
	like($out, qr/^verify source=$src objects=\d+ occurrences=\d+ differences=0$/m, "$src: summary line");
}

my ($live_sub) = grep { $_->{type} eq 'subscription' && !$_->{deleted} } @{ $truth->{objects} };
my ($live_pay) = grep { $_->{type} eq 'payment_intent' } @{ $truth->{objects} };
my ($live_order) = grep { $_->{type} eq 'order' && !$_->{deleted} } @{ $truth->{objects} };
my ($occ) = @{ $truth->{occurrences} };
my ($dead) = grep { $_->{source} eq 'st' && $_->{deleted} } @{ $truth->{objects} };
ok($live_sub && $live_pay && $live_order && $occ, 'cases to plant');

# Plant one difference of each kind for source st.
my $other = $live_sub->{status} eq 'active' ? 'past_due' : 'active';
$node->safe_psql('postgres', qq{
	UPDATE webhook_inbox.objects SET status = '$other' WHERE object_id = '$live_sub->{id}';
	DELETE FROM webhook_inbox.objects WHERE object_id = '$live_pay->{id}';
	INSERT INTO webhook_inbox.objects (source_id, object_type, object_id, status, deleted)
		SELECT id, 'subscription', 'sub_planted', 'active', false FROM webhook_inbox.sources WHERE name = 'st';
	UPDATE webhook_inbox.occurrences SET amount = amount + 1 WHERE occurrence_id = '$occ->{id}';
});
my ($rc, $out) = verify('st');
is($rc, 1, 'planted differences: exit 1');
like($out, qr/^subscription $live_sub->{id}: status differs: mirror $other, truth $live_sub->{status}$/m,
	'status difference reported');
like($out, qr/^payment_intent $live_pay->{id}: missing from the mirror/m, 'missing object reported');
like($out, qr/^subscription sub_planted: in the mirror but not in the truth$/m, 'extra object reported');
like($out, qr/^occurrence $occ->{kind} $occ->{id}: amount differs/m, 'occurrence amount reported');
like($out, qr/differences=4$/m, 'exactly four differences');

# Orders compare version too; a tombstone must match.
$node->safe_psql('postgres', qq{
	UPDATE webhook_inbox.objects SET version = version - 1 WHERE object_id = '$live_order->{id}';
});
($rc, $out) = verify('shop');
is($rc, 1, 'order version difference: exit 1');
like($out, qr/^order $live_order->{id}: version differs: mirror \d+, truth $live_order->{version}$/m,
	'version difference reported');
$node->safe_psql('postgres', qq{
	UPDATE webhook_inbox.objects SET version = $live_order->{version}, deleted = true
	 WHERE object_id = '$live_order->{id}';
	DELETE FROM webhook_inbox.occurrences WHERE source_id = (SELECT id FROM webhook_inbox.sources WHERE name = 'shop');
	INSERT INTO webhook_inbox.occurrences (source_id, kind, occurrence_id, amount, currency)
		SELECT id, 'refund', 're_planted', 1, 'usd' FROM webhook_inbox.sources WHERE name = 'shop';
});
($rc, $out) = verify('shop');
like($out, qr/^order $live_order->{id}: deleted differs: mirror true, truth false$/m, 'deleted flag reported');
like($out, qr/^occurrence refund re_planted: in the mirror but not in the truth$/m, 'extra occurrence reported');
like($out, qr/differences=2$/m, 'two differences for shop');

SKIP:
{
	skip 'no deleted stripe object in this scenario', 1 unless $dead;
	$node->safe_psql('postgres', qq{
		DELETE FROM webhook_inbox.objects WHERE object_id = '$dead->{id}';
		INSERT INTO webhook_inbox.objects (source_id, object_type, object_id, status, deleted)
			SELECT id, '$dead->{type}', '$dead->{id}', 'active', false FROM webhook_inbox.sources WHERE name = 'st';
	});
	($rc, $out) = verify('st');
	like($out, qr/^$dead->{type} $dead->{id}: deleted differs: mirror false, truth true$/m,
		'live mirror row of a deleted object reported');
}

# Unknown source, usage errors, unreachable simulator.
($rc, $out) = verify('nosuch');
is($rc, 1, 'unknown source: exit 1');
like($out, qr/^source nosuch: not in webhook_inbox.sources$/m, 'unknown source reported');
($rc) = run_sim('verify', '--db', $conninfo, '--source', 'st');
is($rc, 2, 'missing --api: exit 2');
($rc, $out, my $err) = run_sim('verify', '--db', $conninfo, '--source', 'st', '--api', 'http://127.0.0.1:1');
is($rc, 2, 'simulator unreachable: exit 2');

stop_proc($sim);
$node->stop;
done_testing();
