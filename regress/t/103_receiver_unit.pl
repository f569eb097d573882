
# 103_receiver_unit.pl
#	The receiver's database-free checks inside the TAP suite: the
#	known-answer test of every scheme (receiver/test_verify.c, including the
#	published examples of Standard Webhooks, GitHub and Slack), and short
#	bounded runs of the two libFuzzer harnesses when clang can build them:
#	header parsing and verification (fuzz_verify.c), and HTTP request
#	handling through the real http.c (fuzz_http.c).  All are compiled into a
#	temporary directory, so the tree may be read-only.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 'regress/t';
use ProcessGuard;

my $tmp = PostgreSQL::Test::Utils::tempdir;
my @pure = map { "receiver/$_" } qw(verify.c decode.c encode.c log.c);
my ($out, $err) = ('', '');

ok(IPC::Run::run(
		[ 'cc', '-Wall', '-Wextra', '-Werror', '-O1', '-Ireceiver', '-Iinclude', '-o', "$tmp/test-verify",
		  'receiver/test_verify.c', @pure, '-lcrypto' ],
		'>', \$out, '2>', \$err),
	'known-answer test builds warning-free') or diag($err);
($out, $err) = ('', '');
ok(IPC::Run::run([ "$tmp/test-verify" ], '>', \$out, '2>', \$err),
	'known-answer test passes') or diag($err);
like($out, qr/^\d+ checks, 0 failures$/m, 'known-answer test: no failures');

SKIP:
{
	($out, $err) = ('', '');
	IPC::Run::run(
		[ 'clang', '-g', '-O1', '-fsanitize=fuzzer,address,undefined', '-Ireceiver', '-Iinclude',
		  '-o', "$tmp/fuzz-verify", 'receiver/fuzz/fuzz_verify.c', @pure, '-lcrypto' ],
		'>', \$out, '2>', \$err)
	  or skip('clang with libFuzzer is not available', 2);
	mkdir "$tmp/corpus";
	($out, $err) = ('', '');
	my $ok = IPC::Run::run(
		[ "$tmp/fuzz-verify", '-max_total_time=5', '-max_len=4096',
		  "$tmp/corpus", 'receiver/fuzz/seeds' ],
		'>', \$out, '2>', \$err);
	ok($ok, 'fuzz harness: 5 s without a crash, leak or sanitizer report')
	  or diag(substr($err, -3000));
	like($err, qr/Done \d+ runs/, 'fuzz harness: ran to its time limit');
}

SKIP:
{
	my @pkgs = qw(libevent libevent_openssl openssl);
	chomp(my $cflags = `pkg-config --cflags @pkgs 2>/dev/null`);
	chomp(my $libs = `pkg-config --libs @pkgs 2>/dev/null`);
	chomp(my $pginc = `pg_config --includedir`);
	chomp(my $pglib = `pg_config --libdir`);
	($out, $err) = ('', '');
	IPC::Run::run(
		[ 'clang', '-Wall', '-Wextra', '-Werror', '-g', '-O1', '-fsanitize=fuzzer,address,undefined',
		  '-Ireceiver', '-Iinclude', "-I$pginc", split(' ', $cflags), '-o', "$tmp/fuzz-http", 'receiver/fuzz/fuzz_http.c',
		  (map { "receiver/$_" } qw(http.c conns.c metrics.c sources.c)), @pure,
		  split(' ', $libs), "-L$pglib", '-lpq' ],
		'>', \$out, '2>', \$err)
	  or skip('clang with libFuzzer (or libevent for it) is not available', 2);
	mkdir "$tmp/corpus-http";
	($out, $err) = ('', '');
	my $ok = IPC::Run::run(
		[ "$tmp/fuzz-http", '-max_total_time=5', '-max_len=4096',
		  "$tmp/corpus-http", 'receiver/fuzz/seeds-http' ],
		'>', \$out, '2>', \$err);
	ok($ok, 'HTTP fuzz harness: 5 s without a crash, leak, sanitizer report or a wrong answer')
	  or diag(substr($err, -3000));
	like($err, qr/Done \d+ runs/, 'HTTP fuzz harness: ran to its time limit');
}

done_testing();
