# 535_quarantine_reasons.pl
#	docs/troubleshooting.md lists every quarantine reason the code can
#	write, as it says it does.  The reasons are read from the code: the
#	worker's quarantines (wi_give_back() with GIVE_QUARANTINE in
#	extension/, and the reasons written into a field such a call passes on,
#	e.g. a request's auth_wait), what intake sets aside (extension/intake*.c and the JSON
#	reader), and the reasons the SQL writes beside a status set to
#	quarantined (sql/core.sql, sql/worker.sql).  A reason is its first word,
#	before the colon, as queues and requeue_where(reason => …) group it: a
#	word of letters, digits and underscores.  Each must appear in the
#	Quarantine reasons section, and each reason of its tables must be one
#	the code writes.

use strict;
use warnings;

use Test::More;

sub slurp
{
	my ($f) = @_;
	open(my $fh, '<', $f) or die "$f: $!";
	local $/;
	return <$fh>;
}

my %code;
# the frozen 0.1.0 code paths write 0.1.0's reasons
my @c_files = grep { !/compat_0_1_0/ } sort glob('extension/*.c extension/adapters/*.c');
my %field;    # a quarantine passing a field on: the reasons written into that field
for my $f (@c_files)
{
	my $s = slurp($f);
	while ($s =~ /wi_give_back\s*\(([^;]*?GIVE_QUARANTINE[^;]*?)\);/sg)
	{
		my $call = $1;
		$code{$1} //= $f while $call =~ /"([^"%:\n]+?)(?::| %)/g;
		$field{$1} = 1 if $call =~ /GIVE_QUARANTINE,\s*\w+->(\w+)\s*,/;
	}
}
for my $f (@c_files)
{
	my $s = slurp($f);
	for my $fld (keys %field)
	{
		$code{$1} //= $f while $s =~ /->\Q$fld\E\s*=\s*(?:psprintf|pstrdup)?\(?\s*"([a-z][a-z0-9_]+): /g;
	}
}
for my $f (@c_files)
{
	my $s = slurp($f);
	if ($f =~ m{/(?:intake[a-z_]*|json_fast)\.c$})
	{
		while ($s =~ /"([a-z][a-z0-9_]+): /g)
		{
			# log lines and errors name the extension, never a reason
			$code{$1} //= $f unless $1 eq 'webhook_inbox';
		}
		$code{$1} //= $f while $s =~ /intake_truncate_reason\("([a-z][a-z0-9_]+)"/g;
	}
}
for my $f (qw(sql/core.sql sql/worker.sql))
{
	my @lines = split /\n/, slurp($f);
	for my $i (0 .. $#lines)
	{
		# a status set to quarantined, and its reason in the lines below it
		next unless $lines[$i] =~ /quarantine\(/
		  || grep { /'quarantined'/ } @lines[ ($i > 8 ? $i - 8 : 0) .. $i ];
		$code{$1} //= "$f:" . ($i + 1) while $lines[$i] =~ /'([a-z][a-z0-9_ ]+?): /g;
	}
}
cmp_ok(scalar(keys %code), '>=', 20, scalar(keys %code) . ' reasons read from the code');
ok($code{$_}, "the code's reasons include $_") for qw(invalid_json unclassifiable unorderable auth max_attempts refused_url);

my $doc = slurp('docs/troubleshooting.md');
my ($section) = $doc =~ /^## Quarantine reasons\n(.*?)(?=^## )/ms;
ok(defined $section, 'docs/troubleshooting.md has its Quarantine reasons section');
$section //= '';
my %listed;
$listed{$1} = 1 while $section =~ /`([a-z][a-z0-9_]*)[^`]*`/g;

my @badly_named = grep { !/^[a-z][a-z0-9_]*$/ } sort keys %code;
is("@badly_named", '', 'every reason is one word before its colon') or diag(join("\n", map { "$_ ($code{$_})" } @badly_named));
my @missing = grep { /^[a-z][a-z0-9_]*$/ && !$listed{$_} } sort keys %code;
is("@missing", '', 'every reason the code writes is in troubleshooting.md') or diag(join("\n", map { "$_ ($code{$_})" } @missing));

# the reasons of the tables (their first column): each one the code writes
my @table;
push @table, $1 while $section =~ /^\| `([a-z][a-z0-9_]*)`/mg;
push @table, $1 while $section =~ /^\| `[a-z][a-z0-9_]*`, `([a-z][a-z0-9_]*)`/mg;
cmp_ok(scalar(@table), '>=', 20, scalar(@table) . ' reasons in the tables');
my @stale = grep { !$code{$_} } @table;
is("@stale", '', 'every reason of the tables is one the code writes');

done_testing();
