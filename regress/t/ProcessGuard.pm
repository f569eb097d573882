#
# regress/t/ProcessGuard.pm
#	Every TAP file stops what it starts.  Loaded by the test modules
#	(ReceiverTest, SimTest, WorkerTest, ReleaseTest …) and by the files that
#	use none: at load it marks the test's environment with a token of its
#	own, which every process the test starts inherits (receivers, simulators,
#	sinks, Prometheus, haproxy, pg_autoctl, psql …); at the end of the file,
#	after the modules' own clean-up, a process still alive that carries the
#	token or descends from the test fails the file: each is named, stopped
#	(SIGTERM, then SIGKILL), and the test exits non-zero.
#
#	PostgreSQL servers are PostgreSQL::Test::Cluster's to stop (its own END
#	tears every node down) and are not counted.
#
package ProcessGuard;

use strict;
use warnings;
use Test::More ();
use Time::HiRes ();

our $TOKEN = join('.', $$, time, int(rand(1_000_000_000)));
$ENV{WI_TEST_PROCESS_GUARD} = $TOKEN;
my $owner = $$;

# processes(): { pid => { ppid, state, cmd, exe, marked } } of every process
# this user may read.
sub processes
{
	my %p;
	opendir(my $dh, '/proc') or return {};
	for my $pid (grep { /^\d+$/ } readdir $dh)
	{
		open(my $st, '<', "/proc/$pid/stat") or next;
		my $stat = <$st> // '';
		close $st;
		my ($state, $ppid) = $stat =~ /\)\s+(\S)\s+(\d+)/ or next;
		my ($cmd, $env) = ('', '');
		if (open(my $fh, '<', "/proc/$pid/cmdline"))
		{
			local $/;
			$cmd = join(' ', split /\0/, <$fh> // '');
		}
		if (open(my $fh, '<', "/proc/$pid/environ"))
		{
			local $/;
			$env = <$fh> // '';
		}
		$p{$pid} = {
			ppid => $ppid,
			state => $state,
			cmd => $cmd,
			exe => readlink("/proc/$pid/exe") // '',
			marked => index($env, "\0WI_TEST_PROCESS_GUARD=$TOKEN\0") >= 0
			  || index($env, "WI_TEST_PROCESS_GUARD=$TOKEN\0") == 0,
		};
	}
	return \%p;
}

# alive(): the pids of the processes this test started that still run.
sub alive
{
	my $p = processes();
	my @left;
	for my $pid (sort { $a <=> $b } keys %$p)
	{
		next if $pid == $$;
		my $q = $p->{$pid};
		next if $q->{state} eq 'Z' || $q->{state} eq 'X';
		# a PostgreSQL server or backend: the cluster's to stop
		next if $q->{exe} =~ m{/postgres(?: \(deleted\))?$};
		my $ours = $q->{marked};
		my ($up, $hops) = ($q->{ppid}, 0);
		while (!$ours && $up > 1 && $hops++ < 64)
		{
			$ours = 1 if $up == $$;
			$up = $p->{$up} ? $p->{$up}{ppid} : 0;
		}
		push @left, [ $pid, $q->{cmd} || $q->{exe} ] if $ours;
	}
	return @left;
}

# The check, at the end of the file.  The modules that load this one define
# their END blocks after it, so theirs (SimTest's clean-up of what it
# started) run before this one.
END
{
	if ($$ == $owner)
	{
		my $exit = $?;
		# a process stopped just now may take a moment to go
		my @left = alive();
		my $deadline = Time::HiRes::time() + 2;
		while (@left && Time::HiRes::time() < $deadline)
		{
			Time::HiRes::sleep(0.1);
			@left = alive();
		}
		if (@left)
		{
			Test::More::diag("a process this test started is still running at its end: "
				  . "pid $_->[0]: $_->[1]")
			  for @left;
			kill 'TERM', map { $_->[0] } @left;
			$deadline = Time::HiRes::time() + 5;
			Time::HiRes::sleep(0.1) while alive() && Time::HiRes::time() < $deadline;
			kill 'KILL', map { $_->[0] } alive();
			$exit ||= 1;
		}
		$? = $exit;
	}
}

1;
