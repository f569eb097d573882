#!/usr/bin/perl
# scripts/upgrade-script.pl: assembles an extension upgrade script.
#
#   upgrade-script.pl --extension NAME --to VERSION [--rerun FILE]...
#                     HANDWRITTEN FRAGMENT...
#
# prints, on stdout, the \echo guard, then HANDWRITTEN (the upgrade DDL of
# sql/upgrade/FROM--TO.sql: tables, columns, indexes, triggers, preset rows,
# DROP FUNCTION of re-signatured functions), then every statement of the
# FRAGMENTs (the new release's install script, sql/*.sql) that can be run
# again on an existing installation: CREATE FUNCTION, PROCEDURE, AGGREGATE
# and VIEW rewritten as CREATE OR REPLACE, ALTER FUNCTION/PROCEDURE/ROUTINE/
# AGGREGATE, COMMENT ON, GRANT and REVOKE, in the fragments' order.  So a
# function body needs no upgrade DDL, and a new function needs none either.
# Last come the --rerun files, whole: fragments whose every statement is
# idempotent and must see the re-created functions (a DO block setting
# search_path on every function: CREATE OR REPLACE without a SET clause
# clears it).
#
# With --list, prints instead one line per statement of the FRAGMENTs:
# "file:line<TAB>kept|skipped<TAB>first words", for tests and for reading.
#
# The statements are split as psql splits them: semicolons count only outside
# comments (-- and nested /* */), quoted strings ('', E'' with backslash
# escapes, U&''), quoted identifiers, dollar quotes ($$, $tag$) and SQL-body
# BEGIN ATOMIC ... END blocks; psql meta-commands (\echo ...) are skipped.
use strict;
use warnings;
use Getopt::Long;

# statements whose leading words match are re-run on upgrade; $1 is the part
# replaced by "CREATE OR REPLACE" when there is one
my @KEEP = (
	qr/^(CREATE\s+(?:OR\s+REPLACE\s+)?)(?:FUNCTION|PROCEDURE|AGGREGATE)\b/i,
	qr/^(CREATE\s+(?:OR\s+REPLACE\s+)?)(?:RECURSIVE\s+)?VIEW\b/i,
	qr/^()ALTER\s+(?:FUNCTION|PROCEDURE|ROUTINE|AGGREGATE)\b/i,
	qr/^()COMMENT\s+ON\b/i,
	qr/^()(?:GRANT|REVOKE)\b/i,
);

# split_statements(text, file): list of { text, line, file } for each
# statement, text without its leading comments and blanks and without the
# terminating semicolon.  Dies, naming the file and line, on an unterminated
# comment, string, identifier or dollar quote.
sub split_statements
{
	my ($sql, $file) = @_;
	my @out;
	my $len = length($sql);
	my $i = 0;
	my $line = 1;
	my $start;				# offset of the statement's first token
	my $start_line;
	my $depth = 0;			# BEGIN ... END nesting of a SQL-body function
	my $routine;			# the statement is CREATE [OR REPLACE] FUNCTION/PROCEDURE

	my $fail = sub { die "$file:$_[0]: $_[1]\n"; };
	my $begin = sub {
		if (!defined $start)
		{
			$start = $i;
			$start_line = $line;
		}
	};
	while ($i < $len)
	{
		my $c = substr($sql, $i, 1);
		my $rest2 = substr($sql, $i, 2);

		if ($c eq "\n")
		{
			$line++;
			$i++;
		}
		elsif ($c =~ /\s/)
		{
			$i++;
		}
		elsif ($rest2 eq '--')
		{
			my $e = index($sql, "\n", $i);
			$i = $e < 0 ? $len : $e;
		}
		elsif ($rest2 eq '/*')
		{
			my $at = $line;
			my $nest = 0;
			while ($i < $len)
			{
				my $t = substr($sql, $i, 2);
				if ($t eq '/*') { $nest++; $i += 2; }
				elsif ($t eq '*/') { $nest--; $i += 2; last if $nest == 0; }
				else { $line++ if substr($sql, $i, 1) eq "\n"; $i++; }
			}
			$fail->($at, 'unterminated /* comment') if $nest;
		}
		elsif ($c eq '\\' && !defined $start)
		{
			# a psql meta-command runs to the end of its line
			my $e = index($sql, "\n", $i);
			$i = $e < 0 ? $len : $e;
		}
		elsif ($c eq ';' && $depth == 0)
		{
			if (defined $start)
			{
				push @out, { text => substr($sql, $start, $i - $start),
							 line => $start_line, file => $file };
			}
			undef $start;
			$routine = 0;
			$i++;
		}
		elsif ($c eq "'")
		{
			$begin->();
			# E'...' (a standalone E, not the end of a word) takes backslash escapes
			my $escapes = $i > 0 && substr($sql, $i - 1, 1) =~ /[Ee]/
			  && ($i < 2 || substr($sql, $i - 2, 1) !~ /[\w\$]/);
			my $at = $line;
			$i++;
			for (;;)
			{
				$fail->($at, 'unterminated quoted string') if $i >= $len;
				my $d = substr($sql, $i, 1);
				if ($escapes && $d eq '\\') { $i += 2; next; }
				$line++ if $d eq "\n";
				$i++;
				if ($d eq "'")
				{
					if (substr($sql, $i, 1) eq "'") { $i++; next; }
					last;
				}
			}
		}
		elsif ($c eq '"')
		{
			$begin->();
			my $at = $line;
			$i++;
			for (;;)
			{
				$fail->($at, 'unterminated quoted identifier') if $i >= $len;
				my $d = substr($sql, $i, 1);
				$line++ if $d eq "\n";
				$i++;
				if ($d eq '"')
				{
					if (substr($sql, $i, 1) eq '"') { $i++; next; }
					last;
				}
			}
		}
		elsif ($c eq '$' && ($i == 0 || substr($sql, $i - 1, 1) !~ /\w/)
			   && substr($sql, $i) =~ /^(\$(?:[A-Za-z_\x80-\xff][\w\x80-\xff]*)?\$)/)
		{
			# a dollar quote (not $1, not a $ inside an identifier)
			my $tag = $1;
			$begin->();
			my $e = index($sql, $tag, $i + length($tag));
			$fail->($line, "unterminated dollar quote $tag") if $e < 0;
			my $body = substr($sql, $i, $e + length($tag) - $i);
			$line += ($body =~ tr/\n//);
			$i = $e + length($tag);
		}
		elsif ($c =~ /[A-Za-z_\x80-\xff]/)
		{
			$begin->();
			substr($sql, $i) =~ /^([\w\$\x80-\xff]+)/;
			my $word = uc $1;
			$i += length($1);
			if (!$routine && $word =~ /^(FUNCTION|PROCEDURE)$/)
			{
				$routine = substr($sql, $start, $i - $start) =~ /^CREATE\s+(OR\s+REPLACE\s+)?\w+$/i;
			}
			elsif ($routine)
			{
				# psql's rule for SQL-standard bodies: BEGIN opens, CASE nests
				# inside one, END closes
				if ($word eq 'BEGIN') { $depth++; }
				elsif ($word eq 'CASE' && $depth > 0) { $depth++; }
				elsif ($word eq 'END' && $depth > 0) { $depth--; }
			}
		}
		else
		{
			$begin->();
			$i++;
		}
	}
	if (defined $start)
	{
		my $tail = substr($sql, $start);
		push @out, { text => $tail, line => $start_line, file => $file };
	}
	return @out;
}

# kept(text): the statement as it is re-run on upgrade, or undef.
sub kept
{
	my ($text) = @_;
	for my $re (@KEEP)
	{
		if ($text =~ $re)
		{
			my $prefix = $1;
			return $text if $prefix eq '';
			return 'CREATE OR REPLACE ' . substr($text, length($prefix));
		}
	}
	return undef;
}

sub slurp
{
	my ($file) = @_;
	open(my $fh, '<', $file) or die "$file: $!\n";
	local $/;
	my $text = <$fh>;
	close $fh;
	return $text;
}

my ($extension, $to, $list, @rerun);
GetOptions('extension=s' => \$extension, 'to=s' => \$to, 'list' => \$list, 'rerun=s' => \@rerun)
  or die "usage: $0 [--list] --extension NAME --to VERSION HANDWRITTEN FRAGMENT...\n";

if ($list)
{
	for my $file (@ARGV)
	{
		for my $s (split_statements(slurp($file), $file))
		{
			my $words = join(' ', (split /\s+/, $s->{text})[0 .. 2]);
			$words =~ s/\s+$//;
			printf "%s:%d\t%s\t%s\n", $file, $s->{line},
			  defined kept($s->{text}) ? 'kept' : 'skipped', $words;
		}
	}
	exit 0;
}

die "usage: $0 --extension NAME --to VERSION HANDWRITTEN FRAGMENT...\n"
  unless defined $extension && defined $to && @ARGV >= 2;
my ($handwritten, @fragments) = @ARGV;

my $hand = slurp($handwritten);
# the hand-written part must parse too: an unterminated string there would
# swallow the re-created definitions
split_statements($hand, $handwritten);
$hand .= "\n" unless $hand =~ /\n\z/;

print "/* $extension upgrade to $to, assembled by make from $handwritten and the\n",
  " * definitions of the $to fragments (@fragments @rerun); edit those, not this file */\n\n",
  "\\echo Use \"ALTER EXTENSION $extension UPDATE TO '$to'\" to load this file. \\quit\n\n",
  "-- $handwritten\n", $hand, "\n",
  "-- Functions, views, comments and privileges of $to, re-created\n";
for my $file (@fragments)
{
	for my $s (split_statements(slurp($file), $file))
	{
		my $k = kept($s->{text});
		next unless defined $k;
		print "\n-- $file:$s->{line}\n$k;\n";
	}
}
for my $file (@rerun)
{
	my $text = slurp($file);
	split_statements($text, $file);
	$text .= "\n" unless $text =~ /\n\z/;
	print "\n-- $file, re-run whole\n", $text;
}
