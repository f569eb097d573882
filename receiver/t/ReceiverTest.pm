
# ReceiverTest.pm
#	Helpers for the webhook-receiver TAP tests (regress/t/1NN_*.pl):
#	a PostgreSQL node with the extension, a receiver process bound to it,
#	signing of deliveries for every scheme (independently of the C code:
#	Perl's Digest::SHA and MIME::Base64), and polling with deadlines.

package ReceiverTest;

use strict;
use warnings;

use Digest::SHA qw(hmac_sha256_hex hmac_sha256_base64 hmac_sha256);
use Exporter 'import';
use HTTP::Tiny;
use IPC::Run;
use MIME::Base64 qw(decode_base64 encode_base64);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use lib 'regress/t';
use ProcessGuard;

our @EXPORT = qw(new_node start_receiver stop_receiver sign post http_get admin_get curl
  poll_until inbox_count deliveries_count metric receiver_bin wait_reload);

my $seq = 0;

# The receiver under test: the tree's build if there is one, else PATH.
sub receiver_bin
{
	return -x 'receiver/webhook-receiver'
	  ? 'receiver/webhook-receiver'
	  : 'webhook-receiver';
}

# A started node with the extension and a login role that is a member of
# webhook_inbox_receiver only, as in production.
sub new_node
{
	my ($name) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	# no shared_preload_libraries: no background worker touches the inbox
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION webhook_inbox');
	$node->safe_psql('postgres',
		'CREATE ROLE rcv LOGIN IN ROLE webhook_inbox_receiver');
	return $node;
}

# poll_until(sub { ... }, $what, $seconds): true once the sub is, or
# false after the deadline (never a fixed sleep).
sub poll_until
{
	my ($cond, $what, $limit) = @_;
	$limit //= 30;
	my $deadline = time + $limit;
	while (time < $deadline)
	{
		return 1 if $cond->();
		select(undef, undef, undef, 0.05);
	}
	diag("timed out after ${limit}s waiting for $what");
	return 0;
}

# Start a receiver for $node; returns a hash with url, port, admin (the
# admin listener's URL), pid, harness.  Waits until the admin listener's
# /readyz answers 200 (with --admin-listen off: the public /healthz).
# %env: environment variables for the receiver only (PGPASSWORD …).
#
# The receiver's stdout and stderr go to files, and $r->{log} / $r->{out}
# read those files each time they are used.  They must not be pipes: the
# receiver writes its log synchronously, and a pipe that the test drains
# only when it calls pump_nb fills up (64 kB: a few seconds of 503 lines
# during an outage) and then blocks the receiver's event loop in write(2)
# - it stops reconnecting and answering until the test reads the pipe.
# Calling $r->{harness}->pump_nb is harmless and no longer needed.
sub start_receiver
{
	my ($node, @extra) = @_;
	my %env = ref $extra[0] eq 'HASH' ? %{ shift @extra } : ();
	my %r;
	$r{port} = PostgreSQL::Test::Cluster::get_free_port();
	$r{scheme} = (grep { $_ eq '--tls-cert' } @extra) ? 'https' : 'http';
	$r{url} = "$r{scheme}://127.0.0.1:$r{port}";
	my $dir = PostgreSQL::Test::Utils::tempdir('receiver');
	my ($logfile, $outfile) = ("$dir/stderr", "$dir/stdout");
	tie $r{log}, 'ReceiverTest::File', $logfile;
	tie $r{out}, 'ReceiverTest::File', $outfile;
	my @admin;
	if (!grep { /^--admin-listen/ } @extra)
	{
		$r{admin_port} = PostgreSQL::Test::Cluster::get_free_port();
		@admin = ('--admin-listen', "127.0.0.1:$r{admin_port}");
	}
	$r{admin} = "http://127.0.0.1:$r{admin_port}" if $r{admin_port};
	my $db = $env{_db} // ($node->connstr('postgres') . ' user=rcv');
	delete $env{_db};
	my @cmd = (receiver_bin(), '--db', $db, '--listen', "127.0.0.1:$r{port}",
		'--batch-delay', '5', @admin, @extra);
	{
		local @ENV{ keys %env } = values %env;
		$r{harness} = IPC::Run::start(\@cmd, '<', \undef, '>', $outfile, '2>', $logfile);
	}
	$r{pid} = $r{harness}->{KIDS}[0]{PID};
	my $ready = poll_until(
		sub {
			$r{harness}->pump_nb;
			return admin_get(\%r, '/readyz')->{status} == 200 if $r{admin};
			my $res =
			    $r{scheme} eq 'https'
			  ? curl(\%r, 'GET', '/healthz')
			  : http_get(\%r, '/healthz');
			return $res->{status} == 200;
		},
		'receiver ready',
		60);
	die "receiver did not become ready:\n$r{log}" unless $ready;
	return \%r;
}

# SIGTERM and wait; returns the exit status.
sub stop_receiver
{
	my ($r) = @_;
	kill 'TERM', $r->{pid};
	$r->{harness}->finish;
	return $r->{harness}->result(0);
}

# An HTTPS-capable request through curl (HTTP::Tiny would need
# IO::Socket::SSL); the test certificate is self-signed, hence -k.
sub curl
{
	my ($r, $method, $path, $headers, $body) = @_;
	my @cmd = ('curl', '-sk', '-X', $method, '-o', '-', '-w', '\n%{http_code}',
		'--max-time', '10');
	push @cmd, '-H', "$_: $headers->{$_}" for sort keys %{ $headers // {} };
	push @cmd, '--data-binary', '@-' if defined $body;
	push @cmd, $r->{url} . $path;
	my ($out, $err) = ('', '');
	IPC::Run::run(\@cmd, '<', \($body // ''), '>', \$out, '2>', \$err);
	my ($content, $status) = $out =~ /^(.*)\n(\d+)$/s;
	return { status => ($status // 0) + 0, content => $content // '' };
}

sub http_get
{
	my ($r, $path) = @_;
	return HTTP::Tiny->new(timeout => 10)->get($r->{url} . $path);
}

# GET from the admin listener (/metrics, /readyz).
sub admin_get
{
	my ($r, $path) = @_;
	return HTTP::Tiny->new(timeout => 10)->get($r->{admin} . $path);
}

# POST a body with headers (hashref) to /hooks/$source.
sub post
{
	my ($r, $source, $headers, $body, %opt) = @_;
	my $ua = HTTP::Tiny->new(timeout => $opt{timeout} // 20, keep_alive => 0);
	return $ua->request('POST', "$r->{url}/hooks/$source",
		{ headers => $headers, content => $body });
}

# sign($kind, $secret, $body, %opt) -> headers for one delivery.
# %opt: id (event id), ts (timestamp, default now), plus per-kind knobs.
sub sign
{
	my ($kind, $secret, $body, %opt) = @_;
	my $ts = $opt{ts} // int(time);
	my $id = $opt{id} // ('evt_' . $$ . '_' . ++$seq);
	if ($kind eq 'stripe')
	{
		my $sig = hmac_sha256_hex("$ts.$body", $secret);
		return { 'Stripe-Signature' => "t=$ts,v1=$sig" };
	}
	if ($kind eq 'standard')
	{
		(my $k = $secret) =~ s/^whsec_//;
		my $sig = hmac_sha256_base64("$id.$ts.$body", decode_base64($k));
		$sig .= '=' while length($sig) % 4;
		return {
			'webhook-id' => $id,
			'webhook-timestamp' => $ts,
			'webhook-signature' => "v1,$sig"
		};
	}
	if ($kind eq 'shopify')
	{
		my $sig = hmac_sha256_base64($body, $secret);
		$sig .= '=' while length($sig) % 4;
		return {
			'X-Shopify-Hmac-Sha256' => $sig,
			'X-Shopify-Webhook-Id' => $id,
			'X-Shopify-Topic' => 'orders/updated'
		};
	}
	if ($kind eq 'github')
	{
		return {
			'X-Hub-Signature-256' => 'sha256=' . hmac_sha256_hex($body, $secret),
			'X-GitHub-Delivery' => $id,
			'X-GitHub-Event' => 'issues'
		};
	}
	if ($kind eq 'razorpay')
	{
		return {
			'X-Razorpay-Signature' => hmac_sha256_hex($body, $secret),
			'X-Razorpay-Event-Id' => $id
		};
	}
	if ($kind eq 'slack')
	{
		return {
			'X-Slack-Request-Timestamp' => $ts,
			'X-Slack-Signature' => 'v0=' . hmac_sha256_hex("v0:$ts:$body", $secret)
		};
	}
	if ($kind eq 'paddle')
	{
		my $sig = hmac_sha256_hex("$ts:$body", $secret);
		return { 'Paddle-Signature' => "ts=$ts;h1=$sig" };
	}
	if ($kind eq 'checkout')
	{
		return { 'Cko-Signature' => hmac_sha256_hex($body, $secret) };
	}
	if ($kind eq 'hmac')
	{
		# the configuration used by the tests: see 100_receiver_schemes.pl
		my $sig = hmac_sha256_base64("$ts.$id.$body", $secret);
		$sig .= '=' while length($sig) % 4;
		return { 'X-Sig' => "sha256=$sig", 'X-Ts' => $ts, 'X-Id' => $id };
	}
	die "no signer for kind $kind";
}

sub inbox_count
{
	my ($node, $source, $event_id) = @_;
	my $where = defined $event_id ? " AND i.event_id = '$event_id'" : '';
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM webhook_inbox.inbox i "
		  . "JOIN webhook_inbox.sources s ON s.id = i.source_id "
		  . "WHERE s.name = '$source'$where");
}

sub deliveries_count
{
	my ($node, $source, $event_id) = @_;
	my $where = defined $event_id ? " AND d.event_id = '$event_id'" : '';
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM webhook_inbox.deliveries d "
		  . "JOIN webhook_inbox.sources s ON s.id = d.source_id "
		  . "WHERE s.name = '$source'$where");
}

# The value of one sample of /metrics (exact name with labels), or undef.
sub metric
{
	my ($r, $sample) = @_;
	my $res = admin_get($r, '/metrics');
	return undef unless $res->{success};
	for my $line (split /\n/, $res->{content})
	{
		return $1 if $line =~ /^\Q$sample\E (\S+)$/;
	}
	return undef;
}

# Run $change (SQL) and wait until the receiver reloaded its sources.
# Returns the seconds it took.
sub wait_reload
{
	my ($r, $node, $sql) = @_;
	my $before = metric($r, 'webhook_receiver_source_reloads_total');
	my $t0 = time;
	$node->safe_psql('postgres', $sql);
	poll_until(
		sub {
			(metric($r, 'webhook_receiver_source_reloads_total') // 0) > $before;
		},
		'source reload');
	return time - $t0;
}

# A scalar that reads as the current contents of a file (read-only).
package ReceiverTest::File;

sub TIESCALAR
{
	my ($class, $path) = @_;
	return bless { path => $path }, $class;
}

sub FETCH
{
	my ($self) = @_;
	open(my $fh, '<', $self->{path}) or return '';
	local $/;
	my $text = <$fh>;
	close $fh;
	return $text // '';
}

sub STORE
{
	die "ReceiverTest: the receiver's output is read-only\n";
}

1;
