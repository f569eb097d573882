#!/usr/bin/perl
# scripts/source-kinds.pl: the source kinds of include/webhook_inbox_kinds.h,
# for the SQL scripts and the tests.
#
#   source-kinds.pl HEADER FILE...   prints the FILEs with the placeholders
#                                    below replaced by the header's kinds
#   source-kinds.pl --list HEADER    prints "name<TAB>timestamp" per kind
#
# Placeholders:
#   @SOURCE_KINDS@            'stripe', 'standard', ...   (SQL literals, for IN)
#   @SOURCE_KINDS_TEXT@       stripe, standard, ...       (for messages)
#   @SOURCE_KINDS_BODY_ONLY@  the kinds whose signature covers the body alone:
#                             shopify, github, ..., hmac without a timestamp
# Any other @SOURCE_KINDS...@ is an error, and so is a header without kinds:
# a build never ships a placeholder or an empty list.
use strict;
use warnings;

my $list = @ARGV && $ARGV[0] eq '--list' ? shift @ARGV : undef;
my $header = shift @ARGV or die "usage: source-kinds.pl [--list] HEADER [FILE...]\n";

open my $fh, '<', $header or die "$header: $!\n";
my (@kinds, $in);
while (<$fh>)
{
	$in = 1 if /^#define WI_SOURCE_KINDS\(X\)/;
	next unless $in;
	push @kinds, { name => $1, ts => $2 } if /^\s*X\((\w+),\s*(WI_TS_\w+)\)/;
	last unless /\\\s*$/;
}
close $fh;
die "$header: no X(name, timestamp) rows under #define WI_SOURCE_KINDS(X)\n" unless @kinds;
my %seen;
for (@kinds)
{
	die "$header: kind $_->{name} is listed twice\n" if $seen{ $_->{name} }++;
	die "$header: kind $_->{name}: unknown timestamp $_->{ts}\n"
	  unless $_->{ts} =~ /^WI_TS_(?:SIGNED|NONE|SETTINGS)$/;
}

if ($list)
{
	print "$_->{name}\t$_->{ts}\n" for @kinds;
	exit 0;
}

my %value = (
	SOURCE_KINDS => join(', ', map { "'$_->{name}'" } @kinds),
	SOURCE_KINDS_TEXT => join(', ', map { $_->{name} } @kinds),
	SOURCE_KINDS_BODY_ONLY => join(', ',
		map { $_->{ts} eq 'WI_TS_NONE' ? $_->{name} : "$_->{name} without a timestamp" }
		grep { $_->{ts} ne 'WI_TS_SIGNED' } @kinds),
);
for my $file (@ARGV)
{
	open my $in, '<', $file or die "$file: $!\n";
	while (my $line = <$in>)
	{
		$line =~ s{\@(SOURCE_KINDS\w*)\@}{
			exists $value{$1} ? $value{$1} : die "$file:$.: unknown placeholder \@$1\@\n"
		}ge;
		print $line;
	}
	close $in;
}
