
# 540_docs.pl
#	The documentation works as written.  Structure, over every Markdown
#	file of the tree: each fence is closed, each link to a file names one
#	that exists and each link to an anchor a heading that has it
#	(scripts/doc-blocks.pl --check; a file with a broken fence and broken
#	links shows the check would fail).  Blocks, in README.md and the
#	docs/ pages readers follow (tutorial, providers, receiver): each sql and
#	sh block is marked <!-- run --> or <!-- not-run: reason -->, and every
#	run block runs against a real cluster with the extension, in the file's
#	order: SQL through psql (ON_ERROR_STOP; in the file's database, app,
#	which like a user's already has tables of its own, some named as the
#	extension's, left as they were; or a fresh one with run: db=NAME), shell through bash -e with PG* set to that
#	database, the tree's binaries first on PATH, and a webhook-receiver of
#	the test answering at the addresses the docs use (localhost:8080,
#	127.0.0.1:8080, and :9180 for the admin listener); Stripe's API
#	(https://api.stripe.com in a block) is webhook-sim's.  In a comment, "→
#	text" is a result the block shows: its output must contain the text (a
#	remark in brackets after it aside).  And the Install section's
#	PG_CONFIG=: a tree built for one PostgreSQL rebuilds its library for
#	another's pg_config.

use strict;
use warnings;

use lib 'receiver/t';
use lib 'tools/test';
use Cwd qw(abs_path);
use File::Find;
use File::Spec;
use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use ReceiverTest;
use SimTest qw(start_sim stop_proc);
use Test::More;

my @pages = ('README.md', 'docs/tutorial.md', 'docs/providers.md', 'docs/receiver.md');
my %runnable = map { $_ => 1 } qw(sql sh bash shell console);

# --- structure --------------------------------------------------------------

my @md;
find({ no_chdir => 1, wanted => sub {
			$File::Find::prune = 1 if m{/(\.git|node_modules|build|tmp_check|results|\.run)$};
			push @md, $File::Find::name =~ s{^\./}{}r if /\.md$/ && -f;
		} }, '.');
@md = sort @md;
ok(scalar(grep { $_ eq 'docs/receiver.md' } @md), 'the Markdown files of the tree: ' . scalar(@md));
my ($out, $err) = ('', '');
IPC::Run::run([ 'perl', 'scripts/doc-blocks.pl', '--check', @md ], '>', \$out, '2>', \$err);
is($out . $err, '', 'every fence is closed, every link names an existing file and heading');

# the check fails where it should
my $tmp = PostgreSQL::Test::Utils::tempdir('docs');
PostgreSQL::Test::Utils::append_to_file("$tmp/bad.md",
	"# Bad page\n\nSee [this](#bad-page), [that](#nowhere), [a file](missing.md), [one](bad.md#bad-page).\n\n"
	  . "<!-- not-run: -->\n```sh\ntrue\n```\n\n```sql\nSELECT 1;\n``` and text\n");
($out, $err) = ('', '');
IPC::Run::run([ 'perl', 'scripts/doc-blocks.pl', '--check', "$tmp/bad.md" ], '>', \$out, '2>', \$err);
is_deeply([ split /\n/, $out ], [
		"$tmp/bad.md:5: not-run needs a reason",
		"$tmp/bad.md:12: a fence with text after it (``` and text): the block opened at line 10 is not closed by it",
		"$tmp/bad.md:10: the fence opened here is never closed",
		"$tmp/bad.md:3: link to #nowhere: no heading with anchor #nowhere in $tmp/bad.md",
		"$tmp/bad.md:3: link to missing.md: no file " . File::Spec->abs2rel("$tmp/missing.md"),
	], 'a not-run without reason, a broken fence, a missing anchor and a missing file are each reported')
  or diag($out);

# every reason word the code writes (intake, the worker's rounds, steps and
# sweeps, and their SQL) is explained in troubleshooting.md
my $trouble = slurp_file('docs/troubleshooting.md');
my %reason;
for my $f ((glob "extension/intake*.c"), (glob "extension/sweep*.c"), qw(extension/json_fast.c extension/round.c extension/step.c))
{
	$reason{$_} = $f for slurp_file($f) =~ /"([a-z_]+): /g;
	# intake's refusals are named in a table and begin their reasons
	$reason{$_} = $f for slurp_file($f) =~ /\[INTAKE_REFUSE_\w+\] = \{"([a-z_]+)"/g;
}
for my $f (qw(sql/core.sql sql/worker.sql))
{
	$reason{$_} = $f for slurp_file($f) =~ /'([a-z_]+): /g;
}
delete $reason{$_} for qw(webhook_inbox incremental);    # a message prefix; a comment on the layers
my @unexplained = map { "$_ ($reason{$_})" } grep { $trouble !~ /`\Q$_\E[`:]/ } sort keys %reason;
ok(keys(%reason) >= 30, 'the reasons the code writes: ' . scalar(keys %reason));
is("@unexplained", '', 'each is explained in docs/troubleshooting.md');

# --- the README's Install: PG_CONFIG picks another PostgreSQL ------------------

# A tree built for one PostgreSQL (this one: make test built it) and then
# given another's pg_config must rebuild the library, not install the
# objects of the first: a copy of the built tree, asked with make -q.
{
	my $tree = "$tmp/tree";
	mkdir $tree or die "$tree: $!";
	IPC::Run::run([ 'tar', '-cf', '-', 'Makefile', '.pg-build', 'webhook_inbox.so', 'extension', 'include' ],
		'|', [ 'tar', '-C', $tree, '-xf', '-' ]) or die "copying the built tree failed";
	# the same server headers, another version
	my $other = "$tmp/other-pg_config";
	PostgreSQL::Test::Utils::append_to_file($other,
		qq{#!/bin/sh
case "\$1" in --version) echo "PostgreSQL 99.0" ;; *) exec pg_config "\$@" ;; esac
});
	chmod 0755, $other;
	my $up_to_date = sub {
		delete local $ENV{MAKEFLAGS};
		delete local $ENV{MAKELEVEL};
		my ($o, $e) = ('', '');
		IPC::Run::run([ 'make', '-q', '-C', $tree, 'webhook_inbox.so', @_ ], '>', \$o, '2>', \$e);
		return $? == 0 ? 'up to date' : "to be rebuilt (exit " . ($? >> 8) . ")$e";
	};
	is($up_to_date->(), 'up to date', 'the built tree is up to date for its own pg_config');
	is($up_to_date->("PG_CONFIG=$other"), 'to be rebuilt (exit 1)', 'make PG_CONFIG=<another PostgreSQL> rebuilds the library');
	is($up_to_date->(), 'to be rebuilt (exit 1)', 'and so does going back to the first');
}

# --- blocks -------------------------------------------------------------------

my $json = JSON::PP->new;
my %blocks;
for my $page (@pages)
{
	($out, $err) = ('', '');
	IPC::Run::run([ 'perl', 'scripts/doc-blocks.pl', '--blocks', $page ], '>', \$out, '2>', \$err)
	  or die "doc-blocks.pl --blocks $page: $err";
	$blocks{$page} = [ map { $json->decode($_) } split /\n/, $out ];
	my @unmarked = map { "$page:$_->{line} ($_->{lang})" }
	  grep { $runnable{ $_->{lang} } && !($_->{marker} && $_->{marker} =~ /^(run|not-run)$/) } @{ $blocks{$page} };
	is("@unmarked", '', "$page: every sql and sh block is marked run or not-run");
}

# The tables of the database the docs install into (app), made before the
# extension, and what they hold once every block has run.
my $users_tables = q{
	CREATE TABLE public.customers (id bigserial PRIMARY KEY, name text NOT NULL);
	CREATE TABLE public.inbox (id bigserial PRIMARY KEY, customer_id bigint REFERENCES public.customers, note text);
	CREATE TABLE public.sources (name text PRIMARY KEY, secret text);
	CREATE TABLE public.objects (id int);
	INSERT INTO public.customers (name) VALUES ('acme'), ('globex');
	INSERT INTO public.inbox (customer_id, note) VALUES (1, 'mine'), (2, 'also mine');
	INSERT INTO public.sources VALUES ('mine', 'not the extension''s');
};
my $users_rows = q{SELECT (SELECT string_agg(name, ',' ORDER BY id) FROM public.customers)
	|| ' ' || (SELECT string_agg(note, ',' ORDER BY id) FROM public.inbox)
	|| ' ' || (SELECT string_agg(name || '=' || secret, ',') FROM public.sources)
	|| ' ' || (SELECT count(*) FROM public.objects)};
my $users_rows_then = "acme,globex mine,also mine mine=not the extension's 0";

my $bin = abs_path('.');
my $path = "$bin/receiver:$bin/tools:$ENV{PATH}";

# a block's "→ text" comments: what its output must show
sub shown
{
	my ($text) = @_;
	my @shown = $text =~ /(?:--|#)[^\n]*?→\s*([^\n]+?)\s*$/mg;
	s/\s+\([^()]*\)$// for @shown;    # a remark in brackets after the result
	return @shown;
}

for my $page (@pages)
{
	my @run = grep { ($_->{marker} // '') eq 'run' } @{ $blocks{$page} };
	next unless @run;
	(my $name = $page) =~ s/\W+/_/g;
	my $node = PostgreSQL::Test::Cluster->new("docs_$name");
	$node->init;
	$node->start;
	my %made;
	my $database = sub {
		my ($db) = @_;
		return $db if $made{$db}++;
		$node->safe_psql('postgres', qq{CREATE DATABASE "$db"});
		if ($db eq 'app')
		{
			# the database a user already has: tables of theirs, some with
			# the names of the extension's own, before CREATE EXTENSION
			$node->safe_psql($db, $users_tables);
			$node->safe_psql($db, 'CREATE EXTENSION webhook_inbox');
		}
		return $db;
	};
	my ($receiver, $sim);
	for my $b (@run)
	{
		my %arg;
		for my $kv (split /\s+(?=\w+=)/, ($b->{arg} // ''))
		{
			my ($k, $v) = $kv =~ /^(\w+)=(.*)$/ or die "$page:$b->{line}: run: NAME=value, not $kv";
			$v =~ s/^'(.*)'$/$1/;
			$arg{$k} = $v;
		}
		my $db = $database->(delete $arg{db} // 'app');
		my $where = "$page:$b->{line}";
		my ($rc, $o, $e);
		if ($b->{lang} eq 'sql')
		{
			# Stripe's API is webhook-sim's (its model's objects, any token)
			my $text = $b->{text};
			if ($text =~ m{https://api\.stripe\.com})
			{
				$sim //= start_sim('--seed', '1', '--objects', '20', '--events', '100', '--stripe', 'docs:whsec_docs');
				$text =~ s{https://api\.stripe\.com}{$sim->{url}}g;
			}
			($o, $e) = ('', '');
			IPC::Run::run([ 'psql', '-X', '-v', 'ON_ERROR_STOP=1', '-h', $node->host, '-p', $node->port,
					'-d', $db, '-f', '-' ], '<', \$text, '>', \$o, '2>', \$e);
			$rc = $?;
		}
		else
		{
			my $text = $b->{text};
			if ($text =~ /(localhost|127\.0\.0\.1):(8080|9180)\b/)
			{
				unless ($receiver)
				{
					$node->safe_psql($db, 'CREATE ROLE rcv LOGIN IN ROLE webhook_inbox_receiver');
					$receiver = start_receiver($node, { _db => $node->connstr($db) . ' user=rcv' });
				}
				$text =~ s/\b(localhost|127\.0\.0\.1):8080\b/127.0.0.1:$receiver->{port}/g;
				$text =~ s/\b(localhost|127\.0\.0\.1):9180\b/127.0.0.1:$receiver->{admin_port}/g;
			}
			local $ENV{PATH} = $path;
			local $ENV{PGHOST} = $node->host;
			local $ENV{PGPORT} = $node->port;
			local $ENV{PGDATABASE} = $db;
			local @ENV{ keys %arg } = values %arg;
			($o, $e) = ('', '');
			IPC::Run::run([ 'bash', '-e', '-o', 'pipefail', '-c', $text ], '<', \undef, '>', \$o, '2>', \$e,
				init => sub { chdir $tmp or die });
			$rc = $?;
		}
		note("$where:\n$o");
		is($rc, 0, "$where: the $b->{lang} block runs") or diag("$b->{text}\n--- output:\n$o\n--- errors:\n$e");
		for my $want (shown($b->{text}))
		{
			like($o, qr/\Q$want\E/, "$where: shows $want") or diag("--- output:\n$o\n--- errors:\n$e");
		}
	}
	stop_receiver($receiver) if $receiver;
	stop_proc($sim) if $sim;
	is($node->safe_psql('app', $users_rows), $users_rows_then, "$page: the user's own tables in app are as they were")
	  if $made{app};
	$node->stop;
}

done_testing();
