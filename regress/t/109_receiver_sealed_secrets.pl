# Sources' signing secrets and api_token encrypted at rest under
# webhook_inbox.key_file, end to end:
#
#  - with a key file, the table holds ciphertext only, and so does a
#    pg_dump of the database (the plaintext secrets are nowhere in it);
#  - a source stored in clear before the key file was set is sealed by
#    seal_secrets(), and inbox_health says so until it is;
#  - the receiver verifies deliveries signed with a sealed secret, and a
#    rotation (rotate_secret, NOTIFY, reload) and a retirement are honoured;
#  - the dump restored into a cluster without the key file cannot read the
#    secrets (a clear error), with another key neither, and with the key
#    file it can: its receiver verifies the same deliveries;
#  - ALTER EXTENSION UPDATE of a 0.1.0 database (secrets in clear) with a
#    key file set encrypts them, and its receiver verifies with them.
use strict;
use warnings;

use lib 'receiver/t';
use ReceiverTest;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $keydir = PostgreSQL::Test::Utils::tempdir('keys');

# A key file of 64 hexadecimal digits, readable by its owner only.
sub key_file
{
	my ($name, $hex) = @_;
	my $path = "$keydir/$name";
	open(my $fh, '>', $path) or die "$path: $!";
	print $fh "$hex\n";
	close $fh;
	chmod 0600, $path or die "chmod $path: $!";
	return $path;
}

sub set_key_file
{
	my ($node, $path) = @_;
	$node->append_conf('postgresql.conf', "webhook_inbox.key_file = '$path'");
	$node->reload;
	poll_until(sub { $node->safe_psql('postgres', 'SHOW webhook_inbox.key_file') eq $path },
		'the key file setting');
}

my $key = key_file('inbox.key', '00112233445566778899aabbccddeeff' x 2);
my $other = key_file('other.key', 'ffeeddccbbaa99887766554433221100' x 2);

my $node = new_node('sealed');
my $early = 'whsec_EARLYPLAIN_secret';
$node->safe_psql('postgres', qq{
	SELECT webhook_inbox.create_source('early', 'stripe', '$early', api_token => 'sk_EARLYPLAIN_token')});
like($node->safe_psql('postgres', 'SELECT secrets_warning FROM webhook_inbox.inbox_health'),
	qr/^1 of 1 sources keep their signing secrets or api_token in clear: webhook_inbox\.key_file is not set/,
	'without a key file inbox_health warns that secrets are in clear');

set_key_file($node, $key);
my $secret = 'whsec_SEALEDPLAIN_one';
my $new = 'whsec_SEALEDPLAIN_two';
my $token = 'sk_SEALEDPLAIN_token';
$node->safe_psql('postgres', qq{
	SELECT webhook_inbox.create_source('st', 'stripe', '$secret', api_token => '$token')});
like($node->safe_psql('postgres', 'SELECT secrets_warning FROM webhook_inbox.inbox_health'),
	qr/^1 of 2 sources keep their signing secrets or api_token in clear although webhook_inbox\.key_file is set: call webhook_inbox\.seal_secrets\(\)$/,
	'with a key file, the source stored before it is the one in clear');
is($node->safe_psql('postgres', 'SELECT webhook_inbox.seal_secrets()'), '1', 'seal_secrets() seals it');
is($node->safe_psql('postgres', "SELECT coalesce(secrets_warning, 'none') FROM webhook_inbox.inbox_health"),
	'none', 'and inbox_health has no warning left');

my $stored = $node->safe_psql('postgres',
	"SELECT string_agg(array_to_string(signing_secrets, ',') || ' ' || coalesce(api_token, ''), E'\\n') FROM webhook_inbox.sources");
unlike($stored, qr/PLAIN/, 'the table holds no plaintext secret');
is(scalar(() = $stored =~ /wi-sealed:/g), 4, 'every secret and token is sealed');

###########################################################################
# The receiver verifies with the sealed secret; rotation and retirement
###########################################################################

my $r = start_receiver($node);
my $n = 0;
sub delivery
{
	my ($sec) = @_;
	my $id = 'evt_sealed_' . ++$n;
	my $body = qq({"id":"$id","object":"event","type":"customer.updated","created":1700000000,"data":{"object":{"id":"cus_$n","object":"customer"}}});
	return ($id, sign('stripe', $sec, $body), $body);
}
my ($id, $h, $body) = delivery($secret);
is(post($r, 'st', $h, $body)->{status}, 200, 'a delivery signed with the sealed secret is accepted');
is(inbox_count($node, 'st', $id), 1, 'and stored');
($id, $h, $body) = delivery($early);
is(post($r, 'early', $h, $body)->{status}, 200, 'the source sealed by seal_secrets() verifies too');
($id, $h, $body) = delivery('whsec_wrong');
is(post($r, 'st', $h, $body)->{status}, 401, 'a wrong signature is refused');

wait_reload($r, $node, "SELECT webhook_inbox.rotate_secret('st', '$new')");
($id, $h, $body) = delivery($new);
is(post($r, 'st', $h, $body)->{status}, 200, 'rotation: the new secret is accepted');
($id, $h, $body) = delivery($secret);
is(post($r, 'st', $h, $body)->{status}, 200, 'rotation: the old one still is');
wait_reload($r, $node, "SELECT webhook_inbox.retire_secret('st', '$secret')");
($id, $h, $body) = delivery($secret);
is(post($r, 'st', $h, $body)->{status}, 401, 'retired: the old secret is refused');
($id, $h, $body) = delivery($new);
is(post($r, 'st', $h, $body)->{status}, 200, 'retired: the new one is accepted');
is(stop_receiver($r), 0, 'clean exit');
unlike($node->safe_psql('postgres',
		"SELECT array_to_string(signing_secrets, ',') FROM webhook_inbox.sources WHERE name = 'st'"),
	qr/PLAIN/, 'the rotated secret is stored sealed');

###########################################################################
# pg_dump holds ciphertext only
###########################################################################

my $dump = PostgreSQL::Test::Utils::tempdir("dump") . "/inbox.sql";
$node->command_ok([ 'pg_dump', '--no-owner', '-f', $dump, '-d', $node->connstr('postgres') ], 'pg_dump');
my $text = slurp_file($dump);
like($text, qr/COPY webhook_inbox\.sources /, 'the dump has the sources');
like($text, qr/wi-sealed:/, 'with their sealed secrets');
for my $plain ($early, 'sk_EARLYPLAIN_token', $secret, $new, $token)
{
	unlike($text, qr/\Q$plain\E/, "the dump does not contain $plain");
}
unlike($text, qr/PLAIN/, 'nor any part of a plaintext secret');

###########################################################################
# A restore elsewhere needs the key file
###########################################################################

my $copy = PostgreSQL::Test::Cluster->new('restored');
$copy->init;
$copy->start;
$copy->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-f', $dump, '-d', $copy->connstr('postgres') ],
	'the dump restores into a cluster without the key file');
my ($ret, $out, $err) = $copy->psql('postgres', 'SELECT count(*) FROM webhook_inbox.receiver_sources()');
isnt($ret, 0, 'without the key file the receiver\'s function fails');
like($err, qr/ERROR:  secret for sources\(\d+\)\.signing_secrets is encrypted and webhook_inbox\.key_file is not set/,
	'with a clear error');
like($err, qr/HINT:  Set webhook_inbox\.key_file to the key file of the database the secrets were encrypted in/,
	'and a hint');
like($copy->safe_psql('postgres', 'SELECT secrets_warning FROM webhook_inbox.inbox_health'),
	qr/^2 of 2 sources have encrypted secrets and webhook_inbox\.key_file is not set/, 'inbox_health says why');

# a receiver started there is not ready, and its log says why; it loads the
# sources by itself once the key file is set
$copy->safe_psql('postgres', 'CREATE ROLE rcv LOGIN IN ROLE webhook_inbox_receiver');
my $rdir = PostgreSQL::Test::Utils::tempdir('waiting_receiver');
my $admin_port = PostgreSQL::Test::Cluster::get_free_port();
my $waiting = { admin => "http://127.0.0.1:$admin_port" };
my $harness = IPC::Run::start([ receiver_bin(), '--db', $copy->connstr('postgres') . ' user=rcv',
		'--listen', '127.0.0.1:' . PostgreSQL::Test::Cluster::get_free_port(),
		'--admin-listen', "127.0.0.1:$admin_port" ],
	'<', \undef, '>', "$rdir/stdout", '2>', "$rdir/stderr");
ok(poll_until(sub { slurp_file("$rdir/stderr") =~ /loading sources failed/ }, 'the receiver\'s first load'),
	'the receiver tried to load its sources');
like(slurp_file("$rdir/stderr"),
	qr/loading sources failed: SQLSTATE F0000: secret for sources\(\d+\)\.signing_secrets is encrypted and webhook_inbox\.key_file is not set/,
	'and logs the clear error');
is(admin_get($waiting, '/readyz')->{status}, 503, 'it is not ready (/readyz 503)');

set_key_file($copy, $other);
($ret, $out, $err) = $copy->psql('postgres', 'SELECT count(*) FROM webhook_inbox.receiver_sources()');
like($err, qr/ERROR:  secret for sources\(\d+\)\.signing_secrets was encrypted under another key/,
	'another key file: a clear error');

my $copied_key = key_file('restored.key', '00112233445566778899aabbccddeeff' x 2);
set_key_file($copy, $copied_key);
ok(poll_until(sub { admin_get($waiting, '/readyz')->{status} == 200 }, 'the receiver ready'),
	'with the key file the waiting receiver loads its sources by itself');
kill 'TERM', $harness->{KIDS}[0]{PID};
$harness->finish;
is($copy->safe_psql('postgres', "SELECT signing_secrets[1] FROM webhook_inbox.receiver_sources() WHERE name = 'st'"),
	$new, 'with the key file the secrets read again');
$r = start_receiver($copy);
($id, $h, $body) = delivery($new);
is(post($r, 'st', $h, $body)->{status}, 200, 'and the restored database\'s receiver verifies deliveries');
is(inbox_count($copy, 'st', $id), 1, 'which it stores');

# the key file lost (a missing file), then the wrong one: inbox_health names the setting, a
# reload of the sources fails and /readyz says so, until the key is back
set_key_file($copy, "$keydir/gone.key");
like($copy->safe_psql('postgres', 'SELECT secrets_warning FROM webhook_inbox.inbox_health'),
	qr/^2 of 2 sources have encrypted secrets the receiver and the worker cannot read: webhook_inbox\.key_file \(\Q$keydir\E\/gone\.key\) cannot be read: /,
	'a missing key file: secrets_warning names webhook_inbox.key_file');
$copy->safe_psql('postgres', "UPDATE webhook_inbox.sources SET enabled = enabled WHERE name = 'st'");
ok(poll_until(sub { admin_get($r, '/readyz')->{status} == 503 }, 'the failed reload'),
	'a reload of the sources that fails: /readyz 503');
like(admin_get($r, '/readyz')->{content}, qr/sources could not be reloaded/, 'saying why');
($id, $h, $body) = delivery($new);
is(post($r, 'st', $h, $body)->{status}, 200, 'the sources loaded before still verify deliveries');
set_key_file($copy, $other);
like($copy->safe_psql('postgres', 'SELECT secrets_warning FROM webhook_inbox.inbox_health'),
	qr/^2 of 2 sources have secrets encrypted under another key \(key id [0-9a-f]{16}\) than the one webhook_inbox\.key_file names \(key id [0-9a-f]{16}\): .*reencrypt_source_secrets/,
	'another key: secrets_warning says so and names reencrypt_source_secrets()');
($ret, $out, $err) = $copy->psql('postgres', 'SELECT count(*) FROM webhook_inbox.receiver_sources()');
like($err, qr/HINT:  Set webhook_inbox\.key_file to the key the secrets were encrypted with; after a rotation to a new key, run SELECT webhook_inbox\.reencrypt_source_secrets\('<the old key file>'\);/,
	'the error\'s hint names the rotation\'s function');
set_key_file($copy, $copied_key);
ok(poll_until(sub { admin_get($r, '/readyz')->{status} == 200 }, 'the reload'), 'the key back: ready again');
is($copy->safe_psql('postgres', 'SELECT secrets_warning IS NULL FROM webhook_inbox.inbox_health'), 't',
	'and secrets_warning is NULL');
is(stop_receiver($r), 0, 'clean exit');

# a fresh install does not read the key file: no source has a secret yet
$copy->safe_psql('postgres', 'CREATE DATABASE fresh');
($ret, $out, $err) = $copy->psql('fresh',
	"SET webhook_inbox.key_file = '$keydir/missing.key'; CREATE EXTENSION webhook_inbox; SELECT 'installed'");
is($out, 'installed', 'CREATE EXTENSION succeeds with a key file set but missing') or diag($err);
($ret, $out, $err) = $copy->psql('fresh',
	"SET webhook_inbox.key_file = '$keydir/missing.key'; SELECT webhook_inbox.create_source('f', 'stripe', 'whsec_f')");
like($err, qr/could not open key file/, 'but the first secret stored with it fails, naming the file');

###########################################################################
# The upgrade from 0.1.0 encrypts what 0.1.0 kept in clear
###########################################################################

my $old = PostgreSQL::Test::Cluster->new('from_0_1_0');
$old->init;
$old->start;
$old->safe_psql('postgres', "CREATE EXTENSION webhook_inbox VERSION '0.1.0'");
my $old_secret = 'whsec_OLDPLAIN_secret';
$old->safe_psql('postgres', qq{
	SELECT webhook_inbox.create_source('old', 'stripe', '$old_secret', api_token => 'sk_OLDPLAIN_token');
	CREATE ROLE rcv LOGIN IN ROLE webhook_inbox_receiver});
is($old->safe_psql('postgres', "SELECT signing_secrets[1] FROM webhook_inbox.sources WHERE name = 'old'"),
	$old_secret, '0.1.0 keeps the secret in clear');
# a key file that is set but missing fails the upgrade, which changes nothing
set_key_file($old, "$keydir/missing.key");
($ret, $out, $err) = $old->psql('postgres', 'ALTER EXTENSION webhook_inbox UPDATE');
like($err, qr/ERROR:  could not open key file "\Q$keydir\E\/missing\.key": No such file or directory/,
	'an upgrade with secrets to seal and a missing key file fails, naming the file');
is($old->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'webhook_inbox'"),
	'0.1.0', 'and leaves the database at 0.1.0');
set_key_file($old, $key);
$old->safe_psql('postgres', 'ALTER EXTENSION webhook_inbox UPDATE');
$stored = $old->safe_psql('postgres',
	"SELECT array_to_string(signing_secrets, ',') || ' ' || api_token FROM webhook_inbox.sources WHERE name = 'old'");
like($stored, qr/^wi-sealed:\S+ wi-sealed:\S+$/, 'the upgrade with a key file set sealed the secret and the token');
unlike($stored, qr/PLAIN/, 'no plaintext is left');
is($old->safe_psql('postgres', "SELECT coalesce(secrets_warning, 'none') FROM webhook_inbox.inbox_health"),
	'none', 'inbox_health has no warning');
$r = start_receiver($old);
($id, $h, $body) = delivery($old_secret);
is(post($r, 'old', $h, $body)->{status}, 200, 'the upgraded database\'s receiver verifies with the sealed secret');
is(stop_receiver($r), 0, 'clean exit');

done_testing();
