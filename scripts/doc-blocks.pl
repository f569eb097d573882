#!/usr/bin/perl
# doc-blocks.pl: the code blocks, links and headings of Markdown files, for
# the documentation test (regress/t/540_docs.pl).
#
#   perl scripts/doc-blocks.pl --check FILE...    structural problems, one a
#                                                 line (exit 1 if any)
#   perl scripts/doc-blocks.pl --blocks FILE      the file's fenced blocks as
#                                                 JSON lines
#
# Structure: every fence opened with ``` (or ~~~) is closed by a line of
# the same fence and nothing else; a link to a file of the tree names one
# that exists, and a link to an anchor (#…, here or in another .md file)
# names a heading there (GitHub's anchors: lower case, punctuation dropped,
# spaces as hyphens, -1, -2 … for repeats).
#
# Blocks: each has its file, line, language (the fence's info string),
# text, and the marker of the HTML comment on the line before the fence
# (blank lines between allowed):
#   <!-- run -->                 the test runs the block
#   <!-- run: NAME=value … -->   runs it with these shell variables set
#   <!-- not-run: reason -->     the test does not run it, for that reason
#   <!-- output -->              (before a block right after a run block)
#                                the run block's expected output
use strict;
use warnings;
use File::Basename qw(dirname);
use File::Spec;
use JSON::PP;

# GitHub's anchor of a heading's text.
sub slug
{
	my ($text) = @_;
	$text =~ s/`//g;
	$text =~ s/\[([^\]]*)\]\([^)]*\)/$1/g;
	$text = lc $text;
	$text =~ s/[^\w\- ]//g;
	$text =~ s/ /-/g;
	return $text;
}

# parse(FILE): { blocks => [...], problems => [...], anchors => {...}, links => [...] }
sub parse
{
	my ($file) = @_;
	open(my $fh, '<', $file) or die "$file: $!";
	my @lines = <$fh>;
	close $fh;
	chomp @lines;
	my (@blocks, @problems, @links, %anchors, %seen);
	my ($open, $fence, $marker, $marker_line);
	for (my $i = 0; $i < @lines; $i++)
	{
		my $line = $lines[$i];
		my $n = $i + 1;
		if ($open)
		{
			if ($line =~ /^\s*(\Q$fence\E[`~]*)\s*$/)
			{
				$open->{text} = join("\n", @{ $open->{lines} }) . (@{ $open->{lines} } ? "\n" : '');
				delete $open->{lines};
				push @blocks, $open;
				undef $open;
			}
			elsif ($line =~ /^\s*\Q$fence\E/)
			{
				push @problems, "$file:$n: a fence with text after it ($line): the block opened at line $open->{line} is not closed by it";
				push @{ $open->{lines} }, $line;
			}
			else
			{
				push @{ $open->{lines} }, $line;
			}
			next;
		}
		if ($line =~ /^\s*(```+|~~~+)\s*([^`\s]*)\s*(.*)$/)
		{
			$fence = $1;
			$open = { file => $file, line => $n, lang => $2, lines => [] };
			if (defined $marker && $marker_line == $n - 1)
			{
				@{$open}{qw(marker arg)} = @$marker;
			}
			undef $marker;
			next;
		}
		if ($line =~ /^<!--\s*(run|not-run|output)\s*(?::\s*(.*?))?\s*-->\s*$/)
		{
			$marker = [ $1, $2 // '' ];
			$marker_line = $n;
			push @problems, "$file:$n: not-run needs a reason" if $1 eq 'not-run' && !length($2 // '');
			next;
		}
		# blank lines between a marker and its fence
		$marker_line = $n if defined $marker && $line =~ /^\s*$/ && $marker_line == $n - 1;
		if ($line =~ /^(#{1,6})\s+(.*?)\s*#*\s*$/)
		{
			my $s = slug($2);
			my $k = $seen{$s}++ ? "$s-" . ($seen{$s} - 1) : $s;
			$anchors{$k} = 1;
		}
		# links outside inline code
		(my $prose = $line) =~ s/`[^`]*`//g;
		while ($prose =~ /\]\(([^)\s]+)\)/g)
		{
			push @links, { line => $n, target => $1 };
		}
	}
	push @problems, "$file:$open->{line}: the fence opened here is never closed" if $open;
	return { blocks => \@blocks, problems => \@problems, anchors => \%anchors, links => \@links };
}

my ($mode, @files) = @ARGV;
die "usage: $0 --check FILE... | --blocks FILE\n" unless $mode && @files;
my $json = JSON::PP->new->canonical;
if ($mode eq '--blocks')
{
	my $p = parse($files[0]);
	print $json->encode($_), "\n" for @{ $p->{blocks} };
	exit 0;
}
die "unknown mode $mode\n" unless $mode eq '--check';

my %parsed;
my @problems;
for my $file (@files)
{
	$parsed{$file} //= parse($file);
	my $p = $parsed{$file};
	push @problems, @{ $p->{problems} };
	for my $l (@{ $p->{links} })
	{
		my $t = $l->{target};
		next if $t =~ /^(https?|mailto):/;
		my ($path, $anchor) = $t =~ /^([^#]*)(?:#(.*))?$/;
		my $target = $file;
		if (length $path)
		{
			$target = File::Spec->abs2rel(File::Spec->rel2abs($path, dirname($file)));
			if (!-e $target)
			{
				push @problems, "$file:$l->{line}: link to $t: no file $target";
				next;
			}
		}
		next unless defined $anchor && length $anchor;
		if ($target !~ /\.md$/)
		{
			push @problems, "$file:$l->{line}: link to $t: an anchor in a file that is not Markdown";
			next;
		}
		$parsed{$target} //= parse($target);
		push @problems, "$file:$l->{line}: link to $t: no heading with anchor #$anchor in $target"
		  unless $parsed{$target}{anchors}{$anchor};
	}
}
print "$_\n" for @problems;
exit(@problems ? 1 : 0);
