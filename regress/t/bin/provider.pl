#!/usr/bin/perl
#
# regress/t/bin/provider.pl
#	A small strict provider for the effects TAP tests, written from Stripe's
#	v1 API contract (the official stripe-node package: RefundCreateParams,
#	RefundListParams, PaginationParams, stringifyRequestData) and not from
#	our own code, so that it cannot agree with a wrong request builder.
#
#	perl provider.pl --out FILE --state FILE [--addr 127.0.0.1] [--port 0]
#	                 [--delay-ms N]
#
#	POST /v1/refunds      form-encoded only (a JSON body is refused as Stripe
#	                      refuses it), unknown parameters 400
#	                      parameter_unknown, Idempotency-Key with Stripe's
#	                      semantics (same key and parameters: the first answer
#	                      again; other parameters: 400 idempotency_error)
#	GET  /v1/refunds      payment_intent, limit (1-100), starting_after,
#	                      ending_before, charge, created, expand; newest
#	                      first; has_more
#	POST /v1/ops/{key}    a provider without idempotency: performs every time
#	GET  /v1/ops/{key}    its lookup by key: 200 once performed, else 404
#	POST /_ctl            {"drop": N} perform, then drop the next N
#	                      connections unanswered; {"forget_keys": true}
#	                      forgets every idempotency key, {"forget": [KEY…]}
#	                      those (Stripe forgets a key after 24 h)
#	GET  /_ctl            the state: refunds, keys, ops
#	anything else         200 {"ok":true}
#
#	Every request is appended to --out as one JSON line with its arrival
#	time.  One process per connection (--delay-ms slows the POSTs that
#	perform something without holding up the others); the state is a JSON
#	file under an flock.  Prints "listening on ADDR:PORT" when ready.
#
use strict;
use warnings;
use Fcntl qw(:flock);
use Getopt::Long;
use IO::Socket::INET;
use JSON::PP;
use Time::HiRes qw(time usleep);

my ($out, $state_file, $addr, $port, $delay_ms) = (undef, undef, '127.0.0.1', 0, 0);
GetOptions(
	'out=s'      => \$out,
	'state=s'    => \$state_file,
	'addr=s'     => \$addr,
	'port=i'     => \$port,
	'delay-ms=i' => \$delay_ms) or die "usage: provider.pl --out FILE --state FILE\n";
die "provider.pl: --out and --state are required\n" unless defined $out && defined $state_file;

my $json = JSON::PP->new->canonical;
my $listen = IO::Socket::INET->new(
	LocalAddr => $addr,
	LocalPort => $port,
	Listen    => 128,
	ReuseAddr => 1) or die "provider.pl: listen on $addr: $!\n";
unless (-e $state_file)
{
	open(my $fh, '>', $state_file) or die "provider.pl: $state_file: $!\n";
	print $fh $json->encode({ refunds => [], keys => {}, ops => {}, drop => 0, n => 0 });
	close $fh;
}
$| = 1;
print "listening on $addr:", $listen->sockport, "\n";

$SIG{CHLD} = 'IGNORE';
$SIG{TERM} = sub { exit 0 };

# Run $code on the state under an exclusive lock; it may change it.
sub with_state
{
	my ($code) = @_;
	open(my $lock, '>', "$state_file.lock") or die "provider.pl: lock: $!\n";
	flock($lock, LOCK_EX) or die "provider.pl: flock: $!\n";
	open(my $in, '<', $state_file) or die "provider.pl: $state_file: $!\n";
	my $st = $json->decode(do { local $/; <$in> });
	close $in;
	my @r = $code->($st);
	open(my $fh, '>', "$state_file.tmp") or die "provider.pl: $state_file.tmp: $!\n";
	print $fh $json->encode($st);
	close $fh;
	rename("$state_file.tmp", $state_file) or die "provider.pl: rename: $!\n";
	close $lock;
	return @r;
}

sub log_request
{
	my ($rec) = @_;
	open(my $fh, '>>', $out) or die "provider.pl: $out: $!\n";
	flock($fh, LOCK_EX);
	print $fh $json->encode($rec), "\n";
	close $fh;
}

sub pct_decode
{
	my ($s) = @_;
	$s =~ tr/+/ /;
	$s =~ s/%([0-9A-Fa-f]{2})/chr(hex($1))/ge;
	return $s;
}

# Stripe's form parameters: a[b][c]=v and a[0]=v, as stripe-node writes them
# (brackets literal or percent-encoded).  Returns a hash, or dies with a
# message for a malformed pair.
sub parse_form
{
	my ($body) = @_;
	my %p;
	for my $pair (split /&/, $body)
	{
		next if $pair eq '';
		my ($k, $v) = split /=/, $pair, 2;
		die "malformed parameter\n" unless defined $v;
		$k = pct_decode($k);
		$v = pct_decode($v);
		my ($top, $rest) = $k =~ /^([^\[\]]+)((?:\[[^\[\]]*\])*)$/ or die "malformed parameter name\n";
		my @path = ($top, $rest =~ /\[([^\[\]]*)\]/g);
		my $node = \%p;
		for my $i (0 .. $#path - 1)
		{
			$node->{ $path[$i] } //= {};
			die "malformed parameter name\n" unless ref $node->{ $path[$i] } eq 'HASH';
			$node = $node->{ $path[$i] };
		}
		$node->{ $path[-1] } = $v;
	}
	return \%p;
}

sub stripe_error
{
	my ($status, $type, $code, $message, $param) = @_;
	my %e = (type => $type, message => $message);
	$e{code} = $code if defined $code;
	$e{param} = $param if defined $param;
	return ($status, $json->encode({ error => \%e }));
}

my %refund_create = map { $_ => 1 } qw(amount charge currency customer expand instructions_email metadata
  origin payment_intent reason refund_application_fee reverse_transfer);
my %refund_list = map { $_ => 1 } qw(charge created ending_before expand limit payment_intent starting_after);

# POST /v1/refunds: returns (status, body, drop).
sub create_refund
{
	my ($h, $body) = @_;
	return stripe_error(400, 'invalid_request_error', undef,
		'Invalid request (check that your POST content type is application/x-www-form-urlencoded).')
	  unless ($h->{'content-type'} // '') =~ m{^application/x-www-form-urlencoded\b};
	my $p = eval { parse_form($body) };
	return stripe_error(400, 'invalid_request_error', undef, "Invalid request: $@") unless $p;
	for my $k (sort keys %$p)
	{
		return stripe_error(400, 'invalid_request_error', 'parameter_unknown',
			"Received unknown parameter: $k", $k) unless $refund_create{$k};
	}
	if (exists $p->{metadata})
	{
		return stripe_error(400, 'invalid_request_error', 'parameter_invalid_string',
			'Invalid hash', 'metadata') unless ref $p->{metadata} eq 'HASH';
		for (values %{ $p->{metadata} })
		{
			return stripe_error(400, 'invalid_request_error', 'parameter_invalid_string',
				'Metadata values must be strings', 'metadata') if ref $_;
		}
	}
	return stripe_error(400, 'invalid_request_error', 'parameter_missing',
		'One of the following params should be provided for this request: payment_intent or charge.')
	  unless defined $p->{payment_intent} || defined $p->{charge};
	return stripe_error(404, 'invalid_request_error', 'resource_missing',
		"No such payment_intent: '$p->{payment_intent}'", 'payment_intent')
	  if defined $p->{payment_intent} && $p->{payment_intent} !~ /^pi_/;
	return stripe_error(400, 'invalid_request_error', 'parameter_invalid_integer',
		'Invalid integer: ' . ($p->{amount} // ''), 'amount')
	  if defined $p->{amount} && $p->{amount} !~ /^\d+$/;
	my $key = $h->{'idempotency-key'};
	my $params = $json->encode($p);
	return with_state(sub {
		my ($st) = @_;
		my $drop = 0;
		if ($st->{drop} > 0)
		{
			$st->{drop}--;
			$drop = 1;
		}
		if (defined $key && $st->{keys}{$key})
		{
			my $k = $st->{keys}{$key};
			return (stripe_error(400, 'idempotency_error', undef,
				'Keys for idempotent requests can only be used with the same parameters they were first used with.'),
				$drop) if $k->{params} ne $params;
			$k->{replays}++;
			return ($k->{status}, $k->{body}, $drop);
		}
		my $r = { id => sprintf('re_%04d', scalar @{ $st->{refunds} } + 1), object => 'refund',
			amount => 0 + ($p->{amount} // 1000), currency => $p->{currency} // 'usd',
			payment_intent => $p->{payment_intent}, metadata => $p->{metadata} // {},
			status => 'succeeded', created => int(time) };
		push @{ $st->{refunds} }, $r;
		my $b = $json->encode($r);
		$st->{keys}{$key} = { params => $params, status => 200, body => $b, replays => 0 } if defined $key;
		return (200, $b, $drop);
	});
}

# GET /v1/refunds?…: a page, newest first.
sub list_refunds
{
	my ($query) = @_;
	my %q;
	for my $pair (split /&/, $query // '')
	{
		my ($k, $v) = split /=/, $pair, 2;
		$k = pct_decode($k);
		(my $top = $k) =~ s/\[.*//;
		return stripe_error(400, 'invalid_request_error', 'parameter_unknown',
			"Received unknown parameter: $top", $top) unless $refund_list{$top};
		$q{$k} = pct_decode($v // '');
	}
	my $limit = $q{limit} // 10;
	return stripe_error(400, 'invalid_request_error', 'parameter_invalid_integer',
		'Invalid integer: ' . $limit, 'limit') unless $limit =~ /^\d+$/ && $limit >= 1 && $limit <= 100;
	my ($st) = with_state(sub { return $_[0] });
	my @all = reverse grep { !defined $q{payment_intent} || $_->{payment_intent} eq $q{payment_intent} }
	  @{ $st->{refunds} };
	if (defined $q{starting_after})
	{
		my ($i) = grep { $all[$_]{id} eq $q{starting_after} } 0 .. $#all;
		return stripe_error(400, 'invalid_request_error', 'resource_missing',
			"No such refund: '$q{starting_after}'", 'starting_after') unless defined $i;
		@all = @all[ $i + 1 .. $#all ];
	}
	my @page = @all > $limit ? @all[ 0 .. $limit - 1 ] : @all;
	return (200, $json->encode({ object => 'list', url => '/v1/refunds', data => \@page,
		has_more => @all > $limit ? JSON::PP::true : JSON::PP::false }));
}

# One request on one connection; the answer closes it.
sub serve
{
	my ($c) = @_;
	my $buf = '';
	while ($buf !~ /\r\n\r\n/)
	{
		my $got = sysread($c, $buf, 65536, length $buf);
		return unless $got;
	}
	my $end = index($buf, "\r\n\r\n");
	my @lines = split /\r\n/, substr($buf, 0, $end);
	my ($method, $target) = split / /, shift @lines;
	my %h;
	for (@lines)
	{
		my ($k, $v) = /^([^:]+):\s*(.*)$/ or next;
		$h{ lc $k } = $v;
	}
	my $len = $h{'content-length'} // 0;
	my $body = substr($buf, $end + 4);
	while (length($body) < $len)
	{
		my $got = sysread($c, $body, 65536, length $body);
		last unless $got;
	}
	my ($path, $query) = split /\?/, $target, 2;
	log_request({ t => time, method => $method, path => $path, query => $query // '', headers => \%h,
		body => $body });

	my ($status, $resp, $drop) = (200, '{"ok":true}', 0);
	if ($method eq 'POST' && $path eq '/v1/refunds')
	{
		usleep($delay_ms * 1000) if $delay_ms;
		($status, $resp, $drop) = create_refund(\%h, $body);
	}
	elsif ($method eq 'GET' && $path eq '/v1/refunds')
	{
		($status, $resp) = list_refunds($query);
	}
	elsif ($path =~ m{^/v1/ops/([^/]+)$})
	{
		my $key = pct_decode($1);
		if ($method eq 'POST')
		{
			usleep($delay_ms * 1000) if $delay_ms;
			($resp, $drop) = with_state(sub {
				my ($st) = @_;
				my $d = 0;
				if ($st->{drop} > 0)
				{
					$st->{drop}--;
					$d = 1;
				}
				$st->{ops}{$key}++;
				return ($json->encode({ key => $key, count => $st->{ops}{$key} }), $d);
			});
		}
		else
		{
			my ($st) = with_state(sub { return $_[0] });
			($status, $resp) = $st->{ops}{$key}
			  ? (200, $json->encode({ key => $key, count => $st->{ops}{$key} }))
			  : (404, '{"error":"no such operation"}');
		}
	}
	elsif ($path eq '/_ctl')
	{
		my $ctl = $method eq 'POST' ? eval { $json->decode($body) } // {} : {};
		my ($st) = with_state(sub {
			my ($s) = @_;
			$s->{drop} = $ctl->{drop} if defined $ctl->{drop};
			$s->{keys} = {} if $ctl->{forget_keys};
			delete @{ $s->{keys} }{ @{ $ctl->{forget} } } if $ctl->{forget};
			return $s;
		});
		$resp = $json->encode($st);
	}
	return if $drop;
	syswrite($c, "HTTP/1.1 $status X\r\nContent-Type: application/json\r\nConnection: close\r\n"
		  . 'Content-Length: ' . length($resp) . "\r\n\r\n$resp");
}

while (1)
{
	my $c = $listen->accept or next;
	my $pid = fork;
	if (!defined $pid)
	{
		close $c;
		next;
	}
	if ($pid == 0)
	{
		close $listen;
		serve($c);
		close $c;
		exit 0;
	}
	close $c;
}
