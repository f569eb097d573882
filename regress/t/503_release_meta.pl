# META.json for PGXN: valid against the meta-spec 1.0.0 schemas
# (regress/meta-spec/v1, the spec's own), naming the release, the license and
# files that exist.  The validator is shown to refuse what the spec refuses.
use strict;
use warnings;
use lib 'regress/t';
use JSON::PP;
use PostgreSQL::Test::Utils;
use Test::More;
use JsonSchema qw(validate);
use ReleaseTest;

my $dir = 'regress/meta-spec/v1';
my $schema = 'distribution.schema.json';
my $meta = JSON::PP->new->decode(slurp_file('META.json'));
my $version = ext_version();

my @errors = validate($dir, $schema, $meta);
is("@errors", '', 'META.json is valid against the PGXN meta-spec 1.0.0 schema');

is($meta->{version}, $version, 'the distribution is the release');
is($meta->{'meta-spec'}{version}, '1.0.0', 'meta-spec 1.0.0');
is($meta->{license}, 'postgresql', 'the PostgreSQL License');
like(slurp_file('LICENSE'), qr/\APostgreSQL License\n\nCopyright/, 'LICENSE is the PostgreSQL License');
# the supported majors, once: 15 and every later one (pg_compat.h; 15 to 18
# tested), as debian/pgversions ("15+": a package per installed server-dev),
# META.json's ranges (PGXN's ">= 15.0.0": 15 or later) and the README say
my @majors = grep { /\S/ } split /\n/, slurp_file('debian/pgversions');
is("@majors", '15+', 'debian/pgversions: PostgreSQL 15 and later');
is($meta->{prereqs}{runtime}{requires}{PostgreSQL}, '>= 15.0.0', 'PostgreSQL 15 or later at run time');
is($meta->{prereqs}{test}{requires}{PostgreSQL}, '>= 15.0.0', 'and for the tests');
like(slurp_file('README.md'), qr/^PostgreSQL 15, 16, 17 and 18 \(`META.json` declares `>= 15.0.0`, `debian\/pgversions` 15\+\)/m,
	'the README names the majors and the declarations');
like(slurp_file('extension/pg_compat.h'), qr/^#error "webhook_inbox needs PostgreSQL 15 or later"$/m,
	'and the build refuses an earlier major');
my $ext = $meta->{provides}{webhook_inbox};
is($ext->{version}, $version, 'the extension is the release');
ok(-f $ext->{file}, "its file $ext->{file} exists");
ok(-f $ext->{docfile}, "its docfile $ext->{docfile} exists");

# the validator agrees with the spec's own examples
for my $f (sort glob('regress/meta-spec/corpus/*.json'))
{
	my @e = validate($dir, $schema, JSON::PP->new->decode(slurp_file($f)));
	if ($f =~ /invalid/) { ok(scalar @e, "$f is refused"); }
	else { is("@e", '', "$f is valid"); }
}

# the validator refuses what the spec refuses
sub errors_with
{
	my ($change) = @_;
	my $m = JSON::PP->new->decode(slurp_file('META.json'));
	$change->($m);
	return join("\n", validate($dir, $schema, $m));
}
like(errors_with(sub { delete $_[0]{license} }), qr{^/: missing required "license"$}m, 'a missing license');
like(errors_with(sub { $_[0]{license} = 'PostgreSQL License' }), qr{^/license: matches 0 of oneOf}m,
	'a license name outside the list');
like(errors_with(sub { $_[0]{version} = '0.2' }), qr{^/version: "0\.2" does not match}m, 'a version that is not SemVer');
like(errors_with(sub { delete $_[0]{provides}{webhook_inbox}{file} }),
	qr{^/provides/webhook_inbox: missing required "file"$}m, 'an extension without its file');
like(errors_with(sub { $_[0]{homepage} = 'x' }), qr{^/homepage: unknown key "homepage"$}m, 'an unknown key');
is(errors_with(sub { $_[0]{x_custom} = 1 }), '', 'a custom x_ key is allowed');
like(errors_with(sub { $_[0]{'meta-spec'}{version} = 1 }), qr{^/meta-spec/version: expected string, got integer$}m,
	'a number where a string belongs');
like(errors_with(sub { $_[0]{prereqs}{runtime}{requires}{PostgreSQL} = '>= fifteen' }),
	qr{^/prereqs/runtime/requires/PostgreSQL: }m, 'a version range that is none');
like(errors_with(sub { $_[0]{tags} = ['a/b'] }), qr{^/tags/0: }m, 'a tag with a slash');
like(errors_with(sub { $_[0]{release_status} = 'final' }), qr{^/release_status: "final" is not one of}m,
	'an unknown release status');

done_testing();
