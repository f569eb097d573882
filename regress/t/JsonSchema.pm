# regress/t/JsonSchema.pm
#	A JSON Schema (draft 2020-12) validator for the keywords the PGXN
#	meta-spec schemas use (regress/meta-spec/v1, copied from
#	github.com/pgxn/pgxn-meta-spec), so META.json is checked against the spec's own
#	schemas without a network or a CPAN module.  A keyword it does not know
#	is an error, never silently ignored.
#
#	validate(dir, file, data): list of errors ("/json/pointer: message"),
#	empty when data is valid against dir/file.
package JsonSchema;

use strict;
use warnings;
use B ();
use JSON::PP ();
use Exporter 'import';

our @EXPORT_OK = qw(validate);

# keywords that only annotate
my %ANNOTATION = map { $_ => 1 } qw($comment $id $schema $defs title description examples);

my %docs;

sub load
{
	my ($dir, $file) = @_;
	return $docs{"$dir/$file"} //= do {
		open(my $fh, '<', "$dir/$file") or die "$dir/$file: $!";
		local $/;
		JSON::PP->new->decode(<$fh>);
	};
}

# the JSON type of a decoded value
sub json_type
{
	my ($v) = @_;
	return 'null' unless defined $v;
	return 'boolean' if JSON::PP::is_bool($v);
	return 'object' if ref $v eq 'HASH';
	return 'array' if ref $v eq 'ARRAY';
	my $flags = B::svref_2object(\$v)->FLAGS;
	return 'string' if $flags & B::SVp_POK;
	return 'integer' if $flags & B::SVp_IOK;
	return ($v == int($v)) ? 'integer' : 'number';
}

sub canonical { return JSON::PP->new->canonical->allow_nonref->encode($_[0]); }

sub resolve
{
	my ($dir, $file, $ref) = @_;
	my ($target, $pointer) = split /#/, $ref, 2;
	$target = $file if !defined $target || $target eq '';
	my $node = load($dir, $target);
	for my $part (grep { length } split m{/}, $pointer // '')
	{
		$part =~ s/~1/\//g;
		$part =~ s/~0/~/g;
		die "$ref: no $part" unless ref $node eq 'HASH' && exists $node->{$part};
		$node = $node->{$part};
	}
	return ($target, $node);
}

sub check
{
	my ($dir, $file, $schema, $v, $path, $errors) = @_;
	my $fail = sub { push @$errors, ($path eq '' ? '/' : $path) . ": $_[0]"; };

	if (JSON::PP::is_bool($schema))
	{
		$fail->('no value is allowed here') unless $schema;
		return;
	}
	my $type = json_type($v);
	for my $k (sort keys %$schema)
	{
		my $s = $schema->{$k};
		next if $ANNOTATION{$k};
		if ($k eq '$ref')
		{
			my ($f, $node) = resolve($dir, $file, $s);
			check($dir, $f, $node, $v, $path, $errors);
		}
		elsif ($k eq 'type')
		{
			my @types = ref $s ? @$s : ($s);
			$fail->("expected " . join(' or ', @types) . ", got $type")
			  unless grep { $_ eq $type || ($_ eq 'number' && $type eq 'integer') } @types;
		}
		elsif ($k eq 'enum')
		{
			my $c = canonical($v);
			$fail->("$c is not one of " . canonical($s)) unless grep { canonical($_) eq $c } @$s;
		}
		elsif ($k eq 'const')
		{
			$fail->(canonical($v) . ' is not ' . canonical($s)) unless canonical($v) eq canonical($s);
		}
		elsif ($k eq 'minLength' || $k eq 'maxLength' || $k eq 'pattern' || $k eq 'format')
		{
			next unless $type eq 'string';
			if ($k eq 'minLength') { $fail->("shorter than $s characters") if length($v) < $s; }
			elsif ($k eq 'maxLength') { $fail->("longer than $s characters") if length($v) > $s; }
			elsif ($k eq 'pattern') { $fail->("\"$v\" does not match $s") unless $v =~ /$s/u; }
			elsif ($s eq 'uri') { $fail->("\"$v\" is not a URI") unless $v =~ /^[A-Za-z][A-Za-z0-9+.-]*:[^\s]+$/; }
			elsif ($s eq 'email') { $fail->("\"$v\" is not an email address") unless $v =~ /^[^\s@]+@[^\s@]+$/; }
			else { die "unsupported format $s"; }
		}
		elsif ($k eq 'required')
		{
			next unless $type eq 'object';
			$fail->("missing required \"$_\"") for grep { !exists $v->{$_} } @$s;
		}
		elsif ($k eq 'minProperties')
		{
			$fail->("fewer than $s properties") if $type eq 'object' && keys(%$v) < $s;
		}
		elsif ($k eq 'propertyNames')
		{
			next unless $type eq 'object';
			check($dir, $file, $s, $_, "$path/$_ (name)", $errors) for sort keys %$v;
		}
		elsif ($k eq 'properties' || $k eq 'patternProperties' || $k eq 'additionalProperties')
		{
			next unless $type eq 'object';
			next if $k ne 'additionalProperties' && exists $schema->{additionalProperties};
			# the three together decide which schema(s) each member meets
			my $props = $schema->{properties} // {};
			my $patterns = $schema->{patternProperties} // {};
			for my $name (sort keys %$v)
			{
				my $matched = 0;
				if (exists $props->{$name})
				{
					$matched = 1;
					check($dir, $file, $props->{$name}, $v->{$name}, "$path/$name", $errors);
				}
				for my $re (sort keys %$patterns)
				{
					next unless $name =~ /$re/u;
					$matched = 1;
					check($dir, $file, $patterns->{$re}, $v->{$name}, "$path/$name", $errors);
				}
				if (!$matched && exists $schema->{additionalProperties})
				{
					my $add = $schema->{additionalProperties};
					if (JSON::PP::is_bool($add) && !$add)
					{
						push @$errors, "$path/$name: unknown key \"$name\"";
					}
					else
					{
						check($dir, $file, $add, $v->{$name}, "$path/$name", $errors);
					}
				}
			}
		}
		elsif ($k eq 'items')
		{
			next unless $type eq 'array';
			check($dir, $file, $s, $v->[$_], "$path/$_", $errors) for 0 .. $#$v;
		}
		elsif ($k eq 'minItems')
		{
			$fail->("fewer than $s items") if $type eq 'array' && @$v < $s;
		}
		elsif ($k eq 'uniqueItems')
		{
			next unless $type eq 'array' && $s;
			my %seen;
			$fail->('items are not unique') if grep { $seen{canonical($_)}++ } @$v;
		}
		elsif ($k eq 'anyOf' || $k eq 'oneOf')
		{
			my @sub_errors;
			my $valid = 0;
			for my $alt (@$s)
			{
				my @e;
				check($dir, $file, $alt, $v, $path, \@e);
				$valid++ unless @e;
				push @sub_errors, @e;
			}
			if ($k eq 'anyOf' && !$valid)
			{
				$fail->('matches none of anyOf: ' . join('; ', @sub_errors));
			}
			elsif ($k eq 'oneOf' && $valid != 1)
			{
				$fail->("matches $valid of oneOf, not exactly one" . ($valid ? '' : ': ' . join('; ', @sub_errors)));
			}
		}
		else
		{
			die "$file: unsupported keyword $k";
		}
	}
}

sub validate
{
	my ($dir, $file, $data) = @_;
	my @errors;
	check($dir, $file, load($dir, $file), $data, '', \@errors);
	return @errors;
}

1;
