
# 107_source_kinds.pl
#	The one list of source kinds (include/webhook_inbox_kinds.h) is what
#	every part takes: for each kind of the list, create_source() accepts it,
#	the sources.kind constraint names it, webhook-sim replay signs a
#	delivery as it, the receiver verifies that delivery and intake() stores
#	it as new; a kind not in the list is refused by each with its exact
#	error.  Preset routes are for kinds of the list, and the documentation of
#	providers and schemes has a row for every kind.  (The
#	receiver's and the extension's tables are checked against the list at
#	compile time, and by receiver/test_verify.c.)

use strict;
use warnings;

use lib 'receiver/t';
use lib 'tools/test';
use IPC::Run;
use JSON::PP;
use MIME::Base64 qw(encode_base64);
use PostgreSQL::Test::Utils;
use ReceiverTest;
use SimTest qw(kinds_record);
use Test::More;

my @list = map { [ split /\t/ ] } split /\n/,
  `perl scripts/source-kinds.pl --list include/webhook_inbox_kinds.h`;
is($?, 0, 'scripts/source-kinds.pl lists the kinds');
my @kinds = map { $_->[0] } @list;
ok(@kinds >= 9, 'the list has the kinds of this release: ' . join(' ', @kinds));

# One delivery per kind, in the layout where the extension finds its id and
# type; the simulator adds the signature headers.
my %delivery = (
	stripe => { body => { id => 'evt_k1', type => 'charge.succeeded' } },
	standard => { headers => { 'webhook-id' => 'msg_k1' }, body => { type => 'invoice.paid' } },
	shopify => {
		headers => { 'X-Shopify-Webhook-Id' => 'shw_k1', 'X-Shopify-Topic' => 'orders/create' },
		body => { id => 1 }
	},
	github => {
		headers => { 'X-GitHub-Delivery' => 'ghd_k1', 'X-GitHub-Event' => 'issues' },
		body => { action => 'opened' }
	},
	razorpay => { headers => { 'x-razorpay-event-id' => 'rzp_k1' }, body => { event => 'payment.captured' } },
	slack => { body => { event_id => 'Ev_k1', type => 'event_callback', event => { type => 'message' } } },
	paddle => { body => { event_id => 'evt_01k1', event_type => 'transaction.completed' } },
	checkout => { body => { id => 'evt_cko_k1', type => 'payment_approved' } },
	hmac => {
		body => { id => 'hm_k1', type => 'thing.happened' },
		settings => '{"header": "X-Webhook-Signature", "event_id_path": "id", "event_type_path": "type"}'
	},
);
is_deeply([ sort keys %delivery ], [ sort @kinds ], 'this test has a delivery for every kind of the list');

# a secret each kind takes (Standard Webhooks: whsec_ + base64 of the key)
sub secret_of
{
	my ($kind) = @_;
	return $kind eq 'standard' ? 'whsec_' . encode_base64('secret-standard', '') : "secret-$kind";
}

my $node = new_node('kinds');

# create_source() takes every kind of the list, and the constraint names them
for my $kind (@kinds)
{
	my $settings = $delivery{$kind}{settings} ? ", settings => '$delivery{$kind}{settings}'" : '';
	my ($rc, $out, $err) = $node->psql('postgres',
		"SELECT webhook_inbox.create_source('k_$kind', '$kind', '" . secret_of($kind) . "'$settings) > 0");
	is($rc . $out, '0t', "create_source() takes kind $kind") or diag($err);
}
my $def = $node->safe_psql('postgres',
	"SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'sources_kind_check'");
is_deeply([ $def =~ /'(\w+)'::text/g ], \@kinds, 'sources_kind_check allows exactly the kinds of the list');

# a kind not in the list: create_source()'s error names the list's kinds,
# and the constraint refuses a direct insert
my ($rc, $out, $err) = $node->psql('postgres',
	"SELECT webhook_inbox.create_source('k_paypal', 'paypal', 'secret')",
	extra_params => [ '-v', 'VERBOSITY=default' ]);
isnt($rc, 0, 'create_source() refuses kind paypal');
like($err, qr/ERROR:  unknown source kind "paypal"\nHINT:  Valid kinds are: \Q@{[ join(', ', @kinds) ]}\E\.\n/,
	'with its exact error, the hint listing every kind');
($rc, $out, $err) = $node->psql('postgres',
	"INSERT INTO webhook_inbox.sources (name, kind, signing_secrets) VALUES ('k_paypal', 'paypal', '{s}')");
like($err, qr/new row for relation "sources" violates check constraint "sources_kind_check"/,
	'the constraint refuses a row of kind paypal');

# The receiver loads every source (an unknown kind would be reported), the
# simulator signs one delivery per kind, and each is stored as new.
my $r = start_receiver($node);
unlike($r->{log}, qr/unknown kind/, 'the receiver has a scheme for every kind');

my $json = JSON::PP->new->canonical;
my $dir = PostgreSQL::Test::Utils::tempdir('kinds');
my @flags = kinds_record("$dir/kinds.jsonl", \%delivery, { map { $_ => secret_of($_) } @kinds });
my @replay = ('tools/webhook-sim', 'replay', '--file', "$dir/kinds.jsonl", '--mode', 'shuffled',
	'--to', $r->{url}, @flags);
($out, $err) = ('', '');
ok(IPC::Run::run(\@replay, '>', \$out, '2>', \$err), 'webhook-sim replay signs as every kind') or diag($err);
my $n = @kinds;
like($out, qr/events=$n sent=$n 2xx=$n non-2xx=0/, "all $n deliveries were answered 2xx");
my %id = (stripe => 'evt_k1', standard => 'msg_k1', shopify => 'shw_k1', github => 'ghd_k1',
	razorpay => 'rzp_k1', slack => 'Ev_k1', paddle => 'evt_01k1', checkout => 'evt_cko_k1', hmac => 'hm_k1');
is($node->safe_psql('postgres',
		"SELECT string_agg(s.kind || ':' || i.event_id || ':' ||
				(SELECT count(*) FROM webhook_inbox.deliveries d WHERE d.source_id = s.id), ' ' ORDER BY s.id)
		   FROM webhook_inbox.sources s LEFT JOIN webhook_inbox.inbox i ON i.source_id = s.id"),
	join(' ', map { "$_:$id{$_}:1" } @kinds),
	'each kind\'s delivery verified and stored once, under the id its layout names');

# webhook-sim: a kind not in the list is no option; serve takes only the
# kinds its model has events for, and says so for the others
($out, $err) = ('', '');
IPC::Run::run([ @replay, '--paypal', 'p:s' ], '>', \$out, '2>', \$err);
like($err, qr/^webhook-sim replay: unknown option --paypal /, 'webhook-sim refuses kind paypal');
my %modelled = map { $_ => 1 } qw(stripe standard shopify github);
for my $kind (grep { !$modelled{$_} } @kinds)
{
	($out, $err) = ('', '');
	IPC::Run::run([ 'tools/webhook-sim', 'serve', '--listen', '127.0.0.1:0', "--$kind", "x:s" ],
		'>', \$out, '2>', \$err);
	like($err, qr/^webhook-sim serve: --$kind: no $kind provider is simulated \(replay re-sends recorded $kind events\)/,
		"webhook-sim serve: --$kind is for replay");
}

# preset routes are for kinds of the list only
is($node->safe_psql('postgres',
		"SELECT string_agg(DISTINCT source_kind, ' ') FROM webhook_inbox.routes
		  WHERE preset AND source_kind <> ALL ('{" . join(',', @kinds) . "}')"),
	'', 'every preset route is for a kind of the list');

# the documentation of the kinds and of their schemes has a row for each
for my $file ('docs/providers.md', 'docs/receiver.md')
{
	my ($table) = slurp_file($file) =~ /^(\| kind \|.*?)\n\n/ms;
	my @rows = ($table // '') =~ /^\| `(\w+)` \|/mg;
	is_deeply(\@rows, \@kinds, "$file has a row for every kind, in the list's order");
}

stop_receiver($r);
done_testing();
