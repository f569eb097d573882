
# 101_receiver_http.pl
#	The receiver as an HTTP server: routes and status codes, limits (body
#	size without reading it all, a slow client cut off, connection count),
#	health, readiness and metrics, configuration errors, reloads on NOTIFY
#	and SIGHUP, TLS, and what a rejected request leaves in the log.

use strict;
use warnings;

use lib 'receiver/t';
use IO::Select;
use IO::Socket::INET;
use IPC::Run;
use PostgreSQL::Test::Utils;
use ReceiverTest;
use Test::More;
use Time::HiRes qw(time);

$SIG{PIPE} = 'IGNORE';

my $node = new_node('http');
my $secret = 'http-test-secret';
$node->safe_psql('postgres',
	"SELECT webhook_inbox.create_source(name => 'gh', kind => 'github', secret => '$secret')");

my $n = 0;
sub gh_delivery
{
	my ($pad) = @_;
	my $id = 'http-' . ++$n;
	my $body = qq({"id":"$id","action":"opened","pad":") . ('x' x ($pad // 0)) . '"}';
	return ($id, sign('github', $secret, $body, id => $id), $body);
}

# Read from a raw socket until EOF or the deadline; returns what came.
sub read_until_eof
{
	my ($s, $limit) = @_;
	my $sel = IO::Select->new($s);
	my $buf = '';
	my $deadline = time + $limit;
	while (time < $deadline)
	{
		next unless $sel->can_read(0.1);
		my $got = sysread($s, my $chunk, 65536);
		last unless $got;
		$buf .= $chunk;
	}
	return $buf;
}

sub connect_raw
{
	my ($r) = @_;
	my $s = IO::Socket::INET->new(
		PeerAddr => '127.0.0.1',
		PeerPort => $r->{port},
		Proto => 'tcp')
	  or die "connect: $!";
	return $s;
}

###########################################################################
# Configuration: --help, and invalid settings exit 2 with one line
###########################################################################

{
	my ($out, $err) = ('', '');
	IPC::Run::run([ receiver_bin(), '--help' ], '>', \$out, '2>', \$err);
	is($? >> 8, 0, '--help exits 0');
	like($out, qr/--db .*--listen .*--max-body .*--read-timeout .*--max-connections .*--batch-size .*--batch-delay .*--log-level/s,
		'--help lists the settings');
}

my $tmp = PostgreSQL::Test::Utils::tempdir;
my $db = $node->connstr('postgres') . ' user=rcv';
open(my $fh, '>', "$tmp/bad.conf") or die;
print $fh "# a comment\nbatch_size = many\n";
close $fh;
open($fh, '>', "$tmp/unknown.conf") or die;
print $fh "colour = blue\n";
close $fh;

my @bad = (
	[ [], qr/\bdb\b/, 'missing --db' ],
	[ [ '--db', $db, '--batch-size', '0' ], qr/batch-size/, 'batch-size 0' ],
	[ [ '--db', $db, '--batch-size', 'abc' ], qr/batch-size/, 'batch-size abc' ],
	[ [ '--db', $db, '--listen', 'nowhere' ], qr/listen/, 'listen without port' ],
	[ [ '--db', $db, '--max-body', '12q' ], qr/max-body/, 'max-body with a bad suffix' ],
	[ [ '--db', $db, '--read-timeout', '-1' ], qr/read-timeout/, 'negative read-timeout' ],
	[ [ '--db', $db, '--max-connections', '0' ], qr/max-connections/, 'max-connections 0' ],
	[ [ '--db', $db, '--batch-delay', 'soon' ], qr/batch-delay/, 'batch-delay soon' ],
	[ [ '--db', $db, '--db-pipeline', '0' ], qr/db-pipeline/, 'db-pipeline 0' ],
	[ [ '--db', $db, '--db-pipeline', '9' ], qr/db-pipeline/, 'db-pipeline 9, over the most' ],
	[ [ '--db', $db, '--log-level', 'loud' ], qr/log-level/, 'log-level loud' ],
	[ [ '--db', $db, '--tls-cert', "$tmp/none.pem" ], qr/tls-key/, 'tls-cert without tls-key' ],
	[ [ '--db', $db, '--tls-cert', "$tmp/none.pem", '--tls-key', "$tmp/none.key" ],
		qr/tls-cert/, 'unreadable tls-cert' ],
	[ [ '--db', $db, '--config', "$tmp/bad.conf" ], qr/batch-size.*line 2/, 'bad value in a config file' ],
	[ [ '--db', $db, '--config', "$tmp/unknown.conf" ], qr/unknown setting "colour"/, 'unknown key in a config file' ],
	[ [ '--db', $db, '--config', "$tmp/absent.conf" ], qr/config/, 'missing config file' ],
	[ [ '--db', $db, '--colour', 'blue' ], qr/unknown setting "colour"/, 'unknown flag' ],
);
for my $case (@bad)
{
	my ($args, $re, $what) = @$case;
	my ($out, $err) = ('', '');
	IPC::Run::run([ receiver_bin(), @$args ], '>', \$out, '2>', \$err);
	is($? >> 8, 2, "$what: exit status 2");
	like($err, $re, "$what: the error names the setting");
	is(scalar(() = $err =~ /\n/g), 1, "$what: one line");
}

###########################################################################
# A receiver configured by file; routes, status codes, health, metrics
###########################################################################

my $port = PostgreSQL::Test::Cluster::get_free_port();
open($fh, '>', "$tmp/good.conf") or die;
print $fh qq(db = "$db"\nlisten = 127.0.0.1:$port\nmax_body = 64k\n)
  . qq(read-timeout = 1s\nbatch-size = 8\n);
close $fh;
# flags win over the file: the listen port below is the one used
my $r = start_receiver($node, '--config', "$tmp/good.conf");
like($r->{url}, qr/:\d+$/, 'receiver configured by file is ready');

is(http_get($r, '/healthz')->{status}, 200, 'healthz: 200');
is(admin_get($r, '/readyz')->{content}, 'ready', 'readyz (admin listener): ready');
{
	my $res = HTTP::Tiny->new->request('POST', "$r->{url}/healthz");
	is($res->{status}, 405, 'healthz: POST is 405');
	$res = HTTP::Tiny->new->get("$r->{url}/elsewhere");
	is($res->{status}, 404, 'unknown route: 404');
	$res = HTTP::Tiny->new->get("$r->{url}/hooks/gh");
	is($res->{status}, 405, 'GET on a hook: 405');
	is($res->{headers}{allow}, 'POST', 'GET on a hook: Allow: POST');
	$res = HTTP::Tiny->new->request('PUT', "$r->{url}/hooks/gh", { content => 'x' });
	is($res->{status}, 405, 'PUT on a hook: 405');
	my ($id, $h, $body) = gh_delivery();
	$res = post($r, 'nosuchsource', $h, $body);
	is($res->{status}, 404, 'unknown source: 404');
	is($res->{content}, 'unknown source', 'unknown source: short reason');
	is(inbox_count($node, 'gh'), 0, 'rejected requests stored nothing');
}

# body size: at the limit accepted, over it refused
{
	my ($id, $h, $body) = gh_delivery(0);
	my $pad = 65536 - length($body);
	($id, $h, $body) = gh_delivery($pad);
	is(length($body), 65536, 'body of exactly max-body built');
	my $res = post($r, 'gh', $h, $body);
	is($res->{status}, 200, 'body of exactly max-body: 200');

	($id, $h, $body) = gh_delivery($pad + 1);
	my $s = connect_raw($r);
	my $head = "POST /hooks/gh HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n"
	  . join('', map { "$_: $h->{$_}\r\n" } sort keys %$h) . "\r\n";
	syswrite($s, $head . $body);
	my $t0 = time;
	my $resp = read_until_eof($s, 10);
	like($resp, qr{^HTTP/1\.1 413 }, 'body announced over max-body: 413');
	cmp_ok(time - $t0, '<', 5, '413 came without the rest of the body being sent');
	close $s;

	# chunked, no length announced: cut off once it grows over the limit
	$s = connect_raw($r);
	syswrite($s, "POST /hooks/gh HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
	my $chunk = 'y' x 16384;
	for (1 .. 6)
	{
		last unless syswrite($s, sprintf("%x\r\n%s\r\n", length($chunk), $chunk));
	}
	$resp = read_until_eof($s, 10);
	like($resp, qr{^HTTP/1\.1 413 }, 'chunked body growing over max-body: 413');
	close $s;
	is(inbox_count($node, 'gh', $id), 0, 'oversized delivery not stored');
	is(metric($r, 'webhook_receiver_requests_total{source="",status="413"}'), 2,
		'413 answers are counted');
	poll_until(sub { $r->{harness}->pump_nb; $r->{log} =~ /status=413/ }, '413 log line', 5);
	is(scalar(() = $r->{log} =~ /rejected: source=- status=413 reason=body_or_head_too_large/g),
		2, 'one log line per 413');

	# a head over max-header (16k by default) is refused too
	$s = connect_raw($r);
	syswrite($s, "POST /hooks/gh HTTP/1.1\r\nHost: x\r\nX-Big: " . ('z' x 20000) . "\r\n\r\n");
	like(read_until_eof($s, 10), qr{^HTTP/1\.1 (413|431|400) }, 'head over max-header: refused');
	close $s;
}

# a client trickling its headers is cut off after read-timeout (1 s here),
# although it sends something every 200 ms
{
	my $s = connect_raw($r);
	syswrite($s, "POST /hooks/gh HTTP/1.1\r\nHost: x\r\n");
	my $sel = IO::Select->new($s);
	my $t0 = time;
	my $closed = 0;
	while (time - $t0 < 10)
	{
		if ($sel->can_read(0.2))
		{
			my $got = sysread($s, my $buf, 4096);
			if (!$got)
			{
				$closed = 1;
				last;
			}
		}
		if (!syswrite($s, "X-Slow: 1\r\n"))
		{
			$closed = 1;
			last;
		}
	}
	my $took = time - $t0;
	ok($closed, 'slow client: connection closed by the receiver');
	cmp_ok($took, '>=', 0.8, 'slow client: not before read-timeout');
	cmp_ok($took, '<', 4, 'slow client: soon after read-timeout');
	close $s;
}

# a header value that is not UTF-8 is stored (as '?'), not a failed batch
{
	my ($id, $h, $body) = gh_delivery();
	$h->{'X-Latin1'} = "caf\xe9";
	# HTTP::Tiny refuses such a value; curl sends the bytes as given
	my $res = curl($r, 'POST', '/hooks/gh', $h, $body);
	is($res->{status}, 200, 'non-UTF-8 header value: 200');
	is(inbox_count($node, 'gh', $id), 1, 'non-UTF-8 header value: stored');
}

# a NUL or another control byte in the head refuses the request with 400
# and its reason; libevent would have read the value up to the NUL
# (a\0b.myshopify.com as a) and the signed delivery would have been stored
{
	for my $case (
		[ "X-Shopify-Shop-Domain: a\0b.myshopify.com", 'nul_byte_in_header', 'NUL byte', 'NUL byte in the request head' ],
		[ "X-Note: a\x01b", 'control_byte_in_header', 'control byte', 'control byte in the request head' ],
		[ "X-Note: a\rb", 'control_byte_in_header', 'bare CR', 'control byte in the request head' ],
		[ "X-Note: a\x7fb", 'control_byte_in_header', 'DEL', 'control byte in the request head' ])
	{
		my ($hline, $reason, $what, $text) = @$case;
		my ($id, $h, $body) = gh_delivery();
		my $s = connect_raw($r);
		syswrite($s, "POST /hooks/gh HTTP/1.1\r\nHost: x\r\n"
			  . join('', map { "$_: $h->{$_}\r\n" } sort keys %$h)
			  . "$hline\r\nContent-Type: application/json\r\nContent-Length: "
			  . length($body) . "\r\n\r\n$body");
		my $answer = read_until_eof($s, 10);
		close $s;
		like($answer, qr{^HTTP/1\.1 400 Bad Request\r\n}, "$what in a header: 400");
		like($answer, qr/\r\n\r\n\Q$text\E$/, "$what in a header: the answer says why");
		is(inbox_count($node, 'gh', $id), 0, "$what in a header: nothing stored");
		poll_until(sub { $r->{log} =~ /rejected: source=- status=400 reason=$reason/ }, "$what log line", 5);
		like($r->{log}, qr/rejected: source=- status=400 reason=$reason/, "$what in a header: logged with its reason");
	}
	is(metric($r, 'webhook_receiver_early_refusals_total{status="400",reason="nul_byte_in_header"}'), 1,
		'metrics: the NUL refusal counted');
	is(metric($r, 'webhook_receiver_early_refusals_total{status="400",reason="control_byte_in_header"}'), 3,
		'metrics: the control byte refusals counted');

	# a request pipelined behind a valid one is checked too
	my $s = connect_raw($r);
	syswrite($s, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
		  . "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Note: \0\r\nConnection: close\r\n\r\n");
	my $answer = read_until_eof($s, 10);
	close $s;
	like($answer, qr{^HTTP/1\.1 200 OK\r\n.*\r\n\r\nokHTTP/1\.1 400 Bad Request\r\n.*NUL byte in the request head$}s,
		'pipelined: the valid request 200, the one with a NUL 400');

	# the head's bytes only: a body may hold any byte (the signature covers it)
	my ($id, $h, $body) = gh_delivery();
	$body =~ s/"action"/"\\u0000 \x01":1,"action"/;
	$h = sign('github', $secret, $body, id => $id);
	is(post($r, 'gh', $h, $body)->{status}, 200, 'control bytes in the body: not refused');
}

# one log line per rejected request: source, status, reason; no values
{
	my ($id, $h, $body) = gh_delivery();
	$h->{'X-Sentinel'} = 'HEADER-SENTINEL-VALUE';
	$h->{'X-Hub-Signature-256'} = 'sha256=' . ('0' x 64);
	my $before = () = $r->{log} =~ /rejected: source=gh status=401 reason=bad_signature/g;
	post($r, 'gh', $h, $body . 'BODY-SENTINEL') for 1 .. 3;
	poll_until(
		sub {
			$r->{harness}->pump_nb;
			my $now = () = $r->{log} =~ /rejected: source=gh status=401 reason=bad_signature/g;
			$now >= $before + 3;
		},
		'log lines');
	my $now = () = $r->{log} =~ /rejected: source=gh status=401 reason=bad_signature/g;
	is($now - $before, 3, 'one log line per rejected request');
	unlike($r->{log}, qr/SENTINEL|\Q$secret\E/, 'no header value, body or secret in the log');
}

# metrics
{
	my $m = admin_get($r, '/metrics');
	is($m->{status}, 200, 'metrics (admin listener): 200');
	like($m->{headers}{'content-type'}, qr{^text/plain; version=0\.0\.4}, 'metrics: Prometheus content type');
	like($m->{content}, qr/^webhook_receiver_requests_total\{source="gh",status="200"\} \d+$/m,
		'metrics: requests by source and status');
	like($m->{content}, qr/^webhook_receiver_requests_total\{source="",status="404"\} \d+$/m,
		'metrics: unknown sources share one label value');
	like($m->{content}, qr/^webhook_receiver_verification_failures_total\{source="gh",reason="bad_signature"\} 3$/m,
		'metrics: verification failures by reason');
	like($m->{content}, qr/^webhook_receiver_batch_size_bucket\{le="\+Inf"\} [1-9]/m,
		'metrics: batch size histogram');
	like($m->{content}, qr/^webhook_receiver_commit_seconds_count [1-9]/m,
		'metrics: commit latency histogram');
	# every 200 so far answered a delivery after its batch's COMMIT, and
	# each of those is one observation of its time in the queue and batch
	my $ok = 0;
	$ok += $1 while $m->{content} =~ /^webhook_receiver_requests_total\{source="[^"]*",status="200"\} (\d+)$/mg;
	my ($dcount) = $m->{content} =~ /^webhook_receiver_delivery_seconds_count (\d+)$/m;
	my ($dinf) = $m->{content} =~ /^webhook_receiver_delivery_seconds_bucket\{le="\+Inf"\} (\d+)$/m;
	ok($ok > 0 && defined $dcount && $dcount == $ok && $dinf == $dcount,
		"metrics: one delivery latency observation per 200 ($ok 200s, count "
		  . ($dcount // 'none') . ')');
	like($m->{content}, qr/^webhook_receiver_db_up 1$/m, 'metrics: database up');
	unlike($m->{content}, qr/nosuchsource/, 'metrics: no label from an unknown source');
}

# reloads: NOTIFY (disabling a source), SIGHUP (a change made without one)
{
	wait_reload($r, $node, "UPDATE webhook_inbox.sources SET enabled = false WHERE name = 'gh'");
	my ($id, $h, $body) = gh_delivery();
	is(post($r, 'gh', $h, $body)->{status}, 404, 'disabled source: 404');
	wait_reload($r, $node, "UPDATE webhook_inbox.sources SET enabled = true WHERE name = 'gh'");
	is(post($r, 'gh', $h, $body)->{status}, 200, 're-enabled source: 200');

	$node->safe_psql('postgres',
		"ALTER TABLE webhook_inbox.sources DISABLE TRIGGER sources_changed; "
		  . "SELECT webhook_inbox.create_source(name => 'quiet', kind => 'github', secret => '$secret'); "
		  . "ALTER TABLE webhook_inbox.sources ENABLE TRIGGER sources_changed;");
	($id, $h, $body) = gh_delivery();
	is(post($r, 'quiet', $h, $body)->{status}, 404, 'source added without NOTIFY: not yet known');
	kill 'HUP', $r->{pid};
	ok(poll_until(sub { post($r, 'quiet', $h, $body)->{status} == 200 }, 'SIGHUP reload', 10),
		'SIGHUP: source loaded');
}

# max-connections: a third connection does not wait for the two silent
# ones to time out; the older of them is shed (110_receiver_slow_clients.pl
# tests this under load)
{
	my $c = start_receiver($node, '--max-connections', '2', '--read-timeout', '5s');
	my @held = (connect_raw($c), connect_raw($c));
	my $t0 = time;
	my $res = HTTP::Tiny->new(timeout => 10)->get("$c->{url}/healthz");
	is($res->{status}, 200, 'max-connections: a third connection is served');
	cmp_ok(time - $t0, '<', 2, 'max-connections: at once, not after read-timeout');
	like(read_until_eof($held[0], 5), qr/^$/, 'max-connections: the oldest silent one closed');
	close $_ for @held;
	is(stop_receiver($c), 0, 'max-connections receiver exits 0');
}

is(stop_receiver($r), 0, 'receiver exits 0');
note("receiver log:\n$r->{log}");

###########################################################################
# TLS
###########################################################################

SKIP:
{
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[
			'openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes',
			'-keyout', "$tmp/key.pem", '-out', "$tmp/cert.pem",
			'-days', '1', '-subj', '/CN=localhost'
		],
		'>', \$out, '2>', \$err) or skip('openssl cannot make a certificate', 4);
	my $t = start_receiver($node, '--tls-cert', "$tmp/cert.pem", '--tls-key', "$tmp/key.pem");
	is(curl($t, 'GET', '/healthz')->{status}, 200, 'TLS: healthz over https');
	my ($id, $h, $body) = gh_delivery();
	my $res = curl($t, 'POST', '/hooks/gh', $h, $body);
	is($res->{status}, 200, 'TLS: signed delivery accepted over https');
	is(inbox_count($node, 'gh', $id), 1, 'TLS: delivery stored');
	is(http_get($t, '/healthz')->{status} == 200 ? 1 : 0, 0, 'TLS: plain HTTP is not served');
	is(stop_receiver($t), 0, 'TLS receiver exits 0');
}

$node->stop;
done_testing();
