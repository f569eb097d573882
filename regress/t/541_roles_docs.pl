# 541_roles_docs.pl
#	The roles have the privileges the docs' role tables say.  Each row of
#	the table in docs/operations.md (role, can, cannot) and of the one in
#	docs/sql.md's Roles (role, may) is read: every relation of the
#	extension named in a role's "can"/"may" cell must be readable by it,
#	every function named there callable, and every relation or function
#	named in its "cannot" cell must not be.  Names that are neither (a
#	column, a settings key) are not privileges and are passed over.
#	And a synopsis the docs give of a command: docs/webhook-sim.md's of
#	webhook-sim serve names every option its --help lists.

use strict;
use warnings;

use lib 'tools/test';
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('roles_docs');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'webhook_inbox'\nwebhook_inbox.enabled = off\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION webhook_inbox');

my %relation = map { $_ => 1 } split /\n/, $node->safe_psql('postgres', q{
	SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	 WHERE n.nspname = 'webhook_inbox' AND c.relkind IN ('r', 'v', 'm')});
my %function = map { $_ => 1 } split /\n/, $node->safe_psql('postgres', q{
	SELECT DISTINCT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
	 WHERE n.nspname = 'webhook_inbox'});

sub slurp
{
	my ($f) = @_;
	open(my $fh, '<', $f) or die "$f: $!";
	local $/;
	return <$fh>;
}

# may ROLE read RELATION / call some FUNCTION of that name
sub can_read
{
	my ($role, $rel) = @_;
	return $node->safe_psql('postgres', "SELECT has_table_privilege('$role', 'webhook_inbox.$rel', 'SELECT')") eq 't';
}
sub can_call
{
	my ($role, $fn) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT bool_or(has_function_privilege('$role', p.oid, 'EXECUTE')) FROM pg_proc p
		  JOIN pg_namespace n ON n.oid = p.pronamespace
		 WHERE n.nspname = 'webhook_inbox' AND p.proname = '$fn'}) eq 't';
}

# the privileges a cell names: relations and functions of the extension, and what is neither
sub named
{
	my ($cell) = @_;
	my (@rels, @fns);
	while ($cell =~ /`([a-z_][a-z0-9_]*)(\(?)[^`]*`/g)
	{
		my ($name, $call) = ($1, $2);
		if ($relation{$name} && !$call) { push @rels, $name }
		elsif ($function{$name}) { push @fns, $name }
	}
	return (\@rels, \@fns);
}

my $checked = 0;
for my $doc ([ 'docs/operations.md', qr/^\| role \| can \| cannot \|$/m ], [ 'docs/sql.md', qr/^\| role \| may \|$/m ])
{
	my ($file, $head) = @$doc;
	my $text = slurp($file);
	ok($text =~ /$head\n\|[-|]+\|\n((?:\|.*\|\n)+)/, "$file has its role table") or next;
	my $rows = $1;
	for my $row (split /\n/, $rows)
	{
		my (undef, $who, $can, $cannot) = split /\s*\|\s*/, $row;
		my ($role) = $who =~ /^`(webhook_inbox_[a-z]+)`/ or next;
		my ($rels, $fns) = named($can);
		for my $r (@$rels)
		{
			ok(can_read($role, $r), "$file: $role can read $r");
			$checked++;
		}
		for my $f (@$fns)
		{
			ok(can_call($role, $f), "$file: $role can call $f()");
			$checked++;
		}
		next unless defined $cannot;
		($rels, $fns) = named($cannot);
		for my $r (@$rels)
		{
			ok(!can_read($role, $r), "$file: $role cannot read $r");
			$checked++;
		}
		for my $f (@$fns)
		{
			ok(!can_call($role, $f), "$file: $role cannot call $f()");
			$checked++;
		}
	}
}
cmp_ok($checked, '>=', 60, "$checked privileges checked against the docs");

# what the issue found missing, named here too so that a table losing them fails
ok(can_read('webhook_inbox_application', 'github_pull_requests'), 'the application reads github_pull_requests');
ok(can_read('webhook_inbox_reader', 'tenants') && can_read('webhook_inbox_operator', 'tenants'),
	'readers and operators read tenants, as the alert tells them to');
ok(!can_read('webhook_inbox_reader', 'tenant_credentials'), 'but never the credentials themselves');

# webhook-sim serve's synopsis in docs/webhook-sim.md: every option of its --help
use SimTest qw(sim_bin);
my ($help, $help_err) = ('', '');
IPC::Run::run([ sim_bin(), 'serve', '--help' ], '>', \$help, '2>', \$help_err);
my %option = map { $_ => 1 } ($help . $help_err) =~ /^\s+(--[a-z0-9-]+)/mg;
cmp_ok(scalar(keys %option), '>=', 30, scalar(keys %option) . ' options in webhook-sim serve --help');
my ($synopsis) = slurp('docs/webhook-sim.md') =~ /^## serve\n\n```\n(.*?)```/ms;
my %documented = map { $_ => 1 } ($synopsis // '') =~ /(--[a-z0-9-]+)/g;
my @undocumented = grep { !$documented{$_} } sort keys %option;
is("@undocumented", '', 'docs/webhook-sim.md\'s serve synopsis names every option');

$node->stop;
done_testing();
