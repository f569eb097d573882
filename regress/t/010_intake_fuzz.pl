
# 010_intake_fuzz.pl
#	A short bounded run of the libFuzzer harness of intake()'s reading of a
#	delivery (extension/fuzz/fuzz_intake.c over extension/intake_ids.c, the
#	id and type of each source kind from headers and body, the body parsed
#	by PostgreSQL's JSON parser from libpgcommon), when clang can build it.
#	Compiled into a temporary directory, so the tree may be read-only.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 'regress/t';
use ProcessGuard;

my $tmp = PostgreSQL::Test::Utils::tempdir;
chomp(my $inc = `pg_config --includedir-server`);
chomp(my $lib = `pg_config --pkglibdir`);
my ($out, $err) = ('', '');

SKIP:
{
	IPC::Run::run(
		[ 'clang', '-g', '-O1', '-fsanitize=fuzzer,address,undefined', '-Wall', '-Wextra', '-Werror',
		  '-Wno-unused-parameter', '-Wno-missing-field-initializers', '-Wno-sign-compare',
		  '-Wno-ignored-attributes', '-DFRONTEND', "-I$inc", '-Iextension', '-Iinclude',
		  '-o', "$tmp/fuzz-intake", 'extension/fuzz/fuzz_intake.c', 'extension/intake_ids.c',
		  "-L$lib", '-lpgcommon', '-lpgport' ],
		'>', \$out, '2>', \$err)
	  or skip("clang with libFuzzer and libpgcommon are not available: $err", 2);
	mkdir "$tmp/corpus";
	($out, $err) = ('', '');
	# the harness frees what it allocates (a run of any length stays small:
	# it once reached libFuzzer's 2 GB limit within 5 s); the code under
	# test's few intermediate strings per input are freed by a memory
	# context in the server, which the harness has not, so LeakSanitizer
	# does not report them
	local $ENV{ASAN_OPTIONS} = 'detect_leaks=0';
	my $ok = IPC::Run::run(
		[ "$tmp/fuzz-intake", '-max_total_time=' . ($ENV{FUZZ_TIME} // 5), '-max_len=4096',
		  "$tmp/corpus", 'extension/fuzz/seeds' ],
		'>', \$out, '2>', \$err);
	ok($ok, 'intake fuzz harness: no crash, failed check or sanitizer report')
	  or diag(substr($err, -3000));
	like($err, qr/Done \d+ runs/, 'intake fuzz harness: ran to its time limit');
}

done_testing();
