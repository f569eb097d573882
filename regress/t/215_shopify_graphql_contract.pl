# The Shopify GraphQL contract (regress/contract/shopify_graphql.mjs), with
# Shopify's Admin API schema from @shopify/dev-mcp and the graphql package
# installed from the committed package.json/package-lock.json: every
# document the adapter can send (extension/adapters/shopify_graphql.h)
# validates against the schema, a document naming a field the schema lacks
# does not, the fields the mirror reads have the types it expects, and
# every field and argument webhook-sim answers is one the schema has; the
# documents the schema refuses, webhook-sim refuses with Shopify's codes.
# Then the checker itself is shown to fail on a header with a bad field.
use strict;
use warnings;
use lib 'tools/test';
use SimTest;
use Test::More;

my $dir = contract_dir();
my $header = 'extension/adapters/shopify_graphql.h';
my $sim = start_sim('--shopify', 'shop:shpss_gql', '--seed', 5, '--objects', 30, '--events', 200);

my ($rc, $checks, $err) = run_node("$dir/shopify_graphql.mjs", $header, $sim->{url});
is($rc, 0, 'the contract run completed') or diag($err);
cmp_ok(scalar @$checks, '>=', 60, 'checks reported: ' . scalar @$checks);
for my $c (@$checks)
{
	ok($c->{ok}, "shopify graphql: $c->{name}") or diag($c->{detail} // '');
}
my @neg = grep { $_->{name} =~ /^negative:/ && $_->{ok} } @$checks;
cmp_ok(scalar @neg, '>=', 12, 'the negative cases ran: ' . scalar(@neg) . ' documents and bodies refused');
ok((grep { $_->{name} =~ /field the schema lacks fails validation/ } @neg)
	  && (grep { $_->{name} =~ /undefinedField/ } @neg),
	'among them the unknown field, refused by the schema and by webhook-sim');

# the same checker on a header whose order query names a field Shopify lacks
my $bad = slurp($header);
$bad =~ s/displayFinancialStatus/displayFinancialStatus webhookInboxNoSuchField/ or die 'no field to break';
spew("$dir/bad_graphql.h", $bad);
my ($rc2, $checks2) = run_node("$dir/shopify_graphql.mjs", "$dir/bad_graphql.h");
is($rc2, 0, 'the contract run on the broken header completed');
my @failed = map { $_->{name} } grep { !$_->{ok} } @$checks2;
is_deeply([ sort @failed ], [ 'SHOPIFY_GQL_ORDERS_QUERY validates against the Admin schema',
	'SHOPIFY_GQL_ORDER_QUERY validates against the Admin schema' ],
	'a query naming a field the schema lacks fails the contract: ' . join(', ', @failed));
stop_proc($sim);

# the cost bucket's flag refuses what is not MAX:RATE with both positive
for my $bad ('abc', '0:5', '100:0', '100:5x')
{
	my ($brc, $bout, $berr) = run_sim('serve', '--listen', '127.0.0.1:0', '--shopify', 's:x', '--shopify-bucket', $bad);
	is($brc, 2, "--shopify-bucket $bad: exit code 2");
	like($berr, qr/invalid value "\Q$bad\E" for --shopify-bucket/, "--shopify-bucket $bad: the error names the flag");
}

done_testing();
