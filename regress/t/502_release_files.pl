# What a release ships besides the SQL: the version written once (the
# Makefile's EXT_VERSION) and found everywhere it is shown, the binaries'
# --version, the man pages, and what make install put on PATH.
use strict;
use warnings;
use lib 'regress/t';
use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use ReleaseTest;

my $version = ext_version();
like($version, qr/^\d+\.\d+\.\d+$/, "the release is $version");

sub run_out
{
	my (@cmd) = @_;
	my ($out, $err);
	my $ok = IPC::Run::run(\@cmd, '>', \$out, '2>', \$err);
	return ($ok, $out, $err);
}

# the generated files carry it
like(slurp_file('webhook_inbox.control'), qr/^default_version = '\Q$version\E'$/m,
	'the control file defaults to it');
like(slurp_file('META.json'), qr/"version": "\Q$version\E"/, 'META.json names it');
ok(-f "sql/webhook_inbox--$version.sql", "its install script is built");
ok(-f "sql/webhook_inbox--0.1.0--$version.sql", "the upgrade step from 0.1.0 is built");
ok(-f 'sql/webhook_inbox--0.1.0.sql', 'the frozen 0.1.0 install script is there');
if (-f 'debian/changelog')
{
	my ($ok, $out) = run_out('dpkg-parsechangelog', '-l', 'debian/changelog', '-S', 'Version');
	chomp $out;
	like($out, qr/^\Q$version\E-\d+$/, "debian/changelog's latest entry is $version");
}

# every binary answers --version with the one version
for my $bin ('receiver/webhook-receiver', 'tools/webhook-sim')
{
	(my $name = $bin) =~ s{.*/}{};
	my ($ok, $out, $err) = run_out($bin, '--version');
	ok($ok, "$name --version exits 0");
	is($out, "$name $version\n", "$name --version prints the release");
}

# the man pages are well-formed roff, naming the release
for my $page ('man/webhook-receiver.1', 'man/webhook-sim.1')
{
	my ($ok, $out, $err) = run_out('groff', '-man', '-ww', '-z', $page);
	ok($ok && $err eq '', "$page renders without warnings") or diag($err);
	like(slurp_file($page), qr/^\.TH \S+ 1 "" "webhook_inbox \Q$version\E"/m, "$page names the release");
}

# what make install put under its PREFIX (make test installs into a private one)
SKIP:
{
	skip 'WI_PREFIX is not set (make test sets it to the prefix it installed into)', 6
	  unless $ENV{WI_PREFIX};
	my $p = $ENV{WI_PREFIX};
	for my $name ('webhook-receiver', 'webhook-sim')
	{
		my ($ok, $out) = run_out("$p/bin/$name", '--version');
		is($out, "$name $version\n", "installed $name answers --version");
		local $ENV{MANPATH} = "$p/share/man";
		($ok, $out) = run_out('man', '-w', $name);
		is($out, "$p/share/man/man1/$name.1\n", "man $name finds the installed page");
	}
	my ($ok, $out) = do { local $ENV{MANPATH} = "$p/share/man"; local $ENV{MANWIDTH} = 80;
		run_out('man', '-P', 'cat', 'webhook-receiver') };
	$out =~ s/.\x08//g;	# overstrike bold and underline
	like($out, qr/SYNOPSIS.*--db CONNINFO/s, 'man webhook-receiver shows the synopsis');
	like($out, qr/SIGHUP\s+Reload\s+sources/s, 'and the reload signal');
}

done_testing();
