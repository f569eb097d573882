# Every C entry point that any install or upgrade script names exists in the
# library PostgreSQL loads.  The scripts bind C functions by symbol name
# (AS 'MODULE_PATHNAME', 'wi_…'), and one library serves them all: a
# database still at an earlier release calls the new library's symbols
# (compat.c), and the frozen upgrade steps PostgreSQL chains to reach the
# current release re-create their functions by those names.  A release that
# dropped or renamed one would break both (docs/releasing.md).
use strict;
use warnings;
use lib 'regress/t';
use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use ReleaseTest;

my $version = ext_version();
my $pkglibdir = `pg_config --pkglibdir`;
chomp $pkglibdir;
my $so = "$pkglibdir/webhook_inbox.so";
ok(-f $so, "the installed library $so");

my ($out, $err) = ('', '');
IPC::Run::run([ 'nm', '-D', '--defined-only', $so ], '>', \$out, '2>', \$err)
  or BAIL_OUT("nm -D $so: $err");
my %exported = map { (split ' ')[-1] => 1 } grep { /\s[TW]\s/ } split /\n/, $out;
cmp_ok(scalar keys %exported, '>', 20, 'the library exports its functions');

# The released scripts (tracked) and the ones this release builds.
my @scripts = sort glob('sql/webhook_inbox--*.sql');
ok((grep { m{--0\.1\.0\.sql$} } @scripts), 'the frozen 0.1.0 script is among them');
ok((grep { m{--\Q$version\E\.sql$} } @scripts), "the $version install script is among them");
ok((grep { m{--0\.1\.0--\Q$version\E\.sql$} } @scripts), "the 0.1.0 → $version step is among them");

my %named;
for my $script (@scripts)
{
	my $text = slurp_file($script);
	my @syms = $text =~ /AS\s+'MODULE_PATHNAME'\s*,\s*'(\w+)'/g;
	cmp_ok(scalar @syms, '>', 0, "$script names C symbols");
	push @{ $named{$_} }, $script for @syms;
}
for my $sym (sort keys %named)
{
	ok($exported{$sym}, "$sym exists in the library") or diag("named by: @{ $named{$sym} }");
	# PostgreSQL also looks for the V1 info function of each
	ok($exported{"pg_finfo_$sym"}, "pg_finfo_$sym exists (PG_FUNCTION_INFO_V1)");
}

# And the check itself: a symbol the library does not have is found missing.
ok(!$exported{wi_no_such_entry_point}, 'a symbol the library lacks is reported missing');

done_testing();
