#!/usr/bin/perl
# Pre-generates signed Stripe-style deliveries for wrk (bench/wrk_replay.lua).
#
#   gen_requests.pl TEMPLATE COUNT THREADS OUT_PREFIX SECRET ID_PREFIX
#
# Writes OUT_PREFIX.0 .. OUT_PREFIX.(THREADS-1), one delivery per line:
# "<Stripe-Signature value>\t<body>".  Each body is TEMPLATE with {N}
# replaced by ID_PREFIX<n> (so every event id and object id is unique), and
# is signed as Stripe does: v1 = hex HMAC-SHA256(secret, "<t>.<body>") with
# t = now (the bench source has a one-day tolerance, so generation time does
# not matter).  Request i goes to thread i % THREADS.
use strict;
use warnings;
use Digest::SHA qw(hmac_sha256_hex);

my ($template, $count, $threads, $prefix, $secret, $idp) = @ARGV;
die "usage: gen_requests.pl TEMPLATE COUNT THREADS OUT_PREFIX SECRET ID_PREFIX\n"
	unless defined $idp;
open(my $tf, '<', $template) or die "$template: $!\n";
my $tpl = do { local $/; <$tf> };
close $tf;
$tpl =~ s/\s+\z//;

my @fh;
for my $i (0 .. $threads - 1) {
	open($fh[$i], '>', "$prefix.$i") or die "$prefix.$i: $!\n";
}
my $t = time;
for my $n (1 .. $count) {
	(my $body = $tpl) =~ s/\{N\}/$idp$n/g;
	my $sig = "t=$t,v1=" . hmac_sha256_hex("$t.$body", $secret);
	print { $fh[$n % $threads] } "$sig\t$body\n";
}
close $_ for @fh;
