#
# tools/test/SimTest.pm
#	Helpers shared by webhook-sim's TAP tests (regress/t/2NN_*.pl): start and
#	stop the simulator and the Perl sink, read what the sink received, small
#	HTTP and polling helpers.  Independent of the simulator's C code: the
#	signature checks in the tests use Digest::SHA on what the sink recorded.
#
package SimTest;

use strict;
use warnings;
use Exporter 'import';
use File::Temp ();
use HTTP::Tiny;
use IPC::Run ();
use JSON::PP;
use MIME::Base64;
use Time::HiRes ();
use lib 'regress/t';
use ProcessGuard;

our @EXPORT = qw(sim_bin tmpdir start_sim stop_proc start_sink sink_requests
  http_json poll_until run_sim slurp spew contract_dir run_node kinds_record);

my $json = JSON::PP->new->canonical;

# Every process started here, so that a test that dies leaves none behind.
my @started;

END
{
	for my $p (@started)
	{
		next unless $p->{h};
		eval { $p->{h}->kill_kill(grace => 2) };
	}
}

sub sim_bin { return 'tools/webhook-sim' }

sub tmpdir { return File::Temp::tempdir('websimXXXX', TMPDIR => 1, CLEANUP => 1) }

sub slurp
{
	my ($file) = @_;
	open(my $fh, '<', $file) or return '';
	local $/;
	my $s = <$fh>;
	return $s // '';
}

# spew(file, text): writes text to file (dies if it cannot), slurp's counterpart.
sub spew
{
	my ($file, $text) = @_;
	open(my $fh, '>', $file) or die "$file: $!";
	print $fh $text;
	close $fh or die "$file: $!";
}

# contract_dir(): a copy of regress/contract with the providers' official SDKs
# installed by `npm ci` from the committed package.json and package-lock.json
# (from npm's cache when it has them, else from the registry).  Dies if npm
# fails or warns that a package's engines exclude the running Node.js: the
# contract tests skip nothing.
sub contract_dir
{
	my $dir = tmpdir();
	opendir(my $dh, 'regress/contract') or die "regress/contract: $!";
	for my $f (grep { /\.(json|mjs)$/ } readdir $dh)
	{
		open(my $in, '<', "regress/contract/$f") or die "$f: $!";
		open(my $out, '>', "$dir/$f") or die "$dir/$f: $!";
		local $/;
		print {$out} <$in>;
	}
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'npm', 'ci', '--no-audit', '--no-fund', '--prefer-offline' ], '<', \undef,
		'>', \$out, '2>', \$err, init => sub { chdir $dir or die })
	  or die "npm ci in $dir failed: $out $err";
	# the Node.js running the SDKs is one they declare they support (the
	# pinned one scripts/deps.sh installs meets package.json's engines)
	die "npm ci in $dir: an engine the running Node.js does not satisfy:\n$err"
	  if "$out$err" =~ /EBADENGINE/;
	return $dir;
}

# run_node(script, args): (exit code, stdout lines decoded as JSON, stderr).
sub run_node
{
	my ($script, @args) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'node', $script, @args ], '<', \undef, '>', \$out, '2>', \$err);
	my @docs = map { eval { $json->decode($_) } // { ok => 0, name => "unparsable output: $_" } }
	  grep { /\S/ } split /\n/, $out;
	return ($? >> 8, \@docs, $err);
}

# kinds_record(FILE, DELIVERIES, SECRETS): writes a record for webhook-sim
# replay with one delivery per kind of DELIVERIES ({kind => {headers, body}},
# in kind order, source k_KIND) and returns replay's flags signing each kind
# with its secret of SECRETS ({kind => secret}).
sub kinds_record
{
	my ($file, $deliveries, $secrets) = @_;
	my ($record, $seq, @flags) = ('', 0);
	for my $kind (sort keys %$deliveries)
	{
		$record .= $json->encode({ seq => ++$seq, source => "k_$kind", kind => $kind,
				headers => $deliveries->{$kind}{headers} // {},
				body => $json->encode($deliveries->{$kind}{body}) }) . "\n";
		push @flags, "--$kind", "k_$kind:$secrets->{$kind}";
	}
	spew($file, $record);
	return @flags;
}

# poll_until(sub { ... }, $seconds): true once the sub returns true, false
# if the deadline passes first.
sub poll_until
{
	my ($cond, $secs) = @_;
	my $deadline = Time::HiRes::time() + ($secs // 60);
	while (Time::HiRes::time() < $deadline)
	{
		my $v = $cond->();
		return $v if $v;
		Time::HiRes::sleep(0.05);
	}
	return $cond->();
}

# Start a process whose stdout goes to a file, and wait for the line
# "listening on [HOST:]PORT".  Returns { h, port, out, err }.
sub _start_listening
{
	my ($cmd, $what) = @_;
	my $dir = tmpdir();
	my ($out, $err) = ("$dir/stdout", "$dir/stderr");
	my $h = IPC::Run::start($cmd, '<', \undef, '>', $out, '2>', $err);
	my $proc = { h => $h, out => $out, err => $err };
	push @started, $proc;
	my $port;
	poll_until(sub {
		($port) = slurp($out) =~ /listening on (?:[\d.]+:)?(\d+)/;
		return defined $port || !$h->pumpable;
	}, 30);
	die "$what did not start: " . slurp($err) unless defined $port;
	$proc->{port} = $port;
	return $proc;
}

# start_sim(@serve_args): webhook-sim serve on a free loopback port.
sub start_sim
{
	my (@args) = @_;
	my $p = _start_listening([ sim_bin(), 'serve', '--listen', '127.0.0.1:0', @args ], 'webhook-sim');
	$p->{url} = "http://127.0.0.1:$p->{port}";
	return $p;
}

# SIGTERM, then the exit code (undef if it had to be killed).
sub stop_proc
{
	my ($p) = @_;
	return undef unless $p && $p->{h};
	$p->{h}->signal('TERM');
	my $ok = eval { $p->{h}->finish; 1 };
	my $st = $ok ? ($p->{h}->full_results)[0] : undef;
	my $rc = (defined $st && !($st & 127)) ? $st >> 8 : undef;
	if (!$ok)
	{
		eval { $p->{h}->kill_kill };
	}
	delete $p->{h};
	return $rc;
}

# start_sink(%opts): tools/test/sink.pl; opts fail_first, fail_status, addr
# (another loopback address), reply (a file with the answer to give).
sub start_sink
{
	my (%opt) = @_;
	my $dir = tmpdir();
	my $file = "$dir/requests.jsonl";
	my @cmd = ($^X, 'tools/test/sink.pl', '--out', $file);
	push @cmd, '--fail-first', $opt{fail_first} if $opt{fail_first};
	push @cmd, '--fail-status', $opt{fail_status} if $opt{fail_status};
	push @cmd, '--addr', $opt{addr} if $opt{addr};
	push @cmd, '--reply', $opt{reply} if $opt{reply};
	my $p = _start_listening(\@cmd, 'sink');
	$p->{file} = $file;
	$p->{url} = 'http://' . ($opt{addr} // '127.0.0.1') . ":$p->{port}";
	return $p;
}

# Requests the sink received so far, each with its decoded body.
sub sink_requests
{
	my ($sink) = @_;
	my @r;
	for my $line (split /\n/, slurp($sink->{file}))
	{
		my $req = eval { $json->decode($line) } or next;
		$req->{body} = decode_base64($req->{body_b64});
		push @r, $req;
	}
	return @r;
}

# http_json(METHOD, URL, { headers => {...}, content => '...' }):
# returns (status, decoded JSON or undef, response).
sub http_json
{
	my ($method, $url, $opt) = @_;
	my $res = HTTP::Tiny->new(timeout => 30, keep_alive => 0)->request($method, $url, $opt // {});
	my $doc = eval { $json->decode($res->{content}) };
	return ($res->{status}, $doc, $res);
}

# run_sim(@args): run webhook-sim to completion; (exit code, stdout, stderr).
sub run_sim
{
	my (@args) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ sim_bin(), @args ], '<', \undef, '>', \$out, '2>', \$err,
		IPC::Run::timeout(120));
	return ($? >> 8, $out, $err);
}

1;
