# What the receiver exposes, and to whom.
#
#  - /metrics and /readyz (every source's name and traffic) are served on the
#    admin listener (--admin-listen, loopback by default) and are 404 on the
#    public one; /healthz is on both; --admin-listen off serves neither.
#  - A password in --db is shown by ps: the receiver says so on one line
#    (without the secret) and overwrites the argument, and it connects with
#    a password from PGPASSWORD, a passfile (PGPASSFILE or passfile=) or a db
#    line in the --config file, none of which ps shows.
#  - The receiver's role reads, through receiver_sources(), only what
#    verification needs of enabled sources, and nothing else.
use strict;
use warnings;

use lib 'receiver/t';
use ReceiverTest;
use PostgreSQL::Test::Utils;
use IPC::Run;
use Test::More;

my $node = new_node('exposure');
my $secret = 'whsec_exposure_test';
$node->safe_psql('postgres', qq{
	SELECT webhook_inbox.create_source('st-live', 'stripe', '$secret', api_token => 'sk_live_TOKEN');
	SELECT webhook_inbox.create_source('acme', 'hmac', 'acme-secret', api_token => 'acme_TOKEN',
		settings => '{"header": "X-Acme-Signature", "prefix": "sha256=", "encoding": "hex",
					  "auth_prefix": "Token ", "api_version": "2024-01", "effects": {"retry_same_key": true}}');
	SELECT webhook_inbox.create_source('old', 'github', 'old-secret');
	UPDATE webhook_inbox.sources SET enabled = false WHERE name = 'old';
});

sub cmdline
{
	my ($pid) = @_;
	open(my $fh, '<', "/proc/$pid/cmdline") or return '';
	local $/;
	my $c = <$fh>;
	$c =~ tr/\0/ /;
	return $c;
}

###########################################################################
# The admin listener
###########################################################################

my $r = start_receiver($node);
my $body = '{"id":"evt_x1","type":"customer.created","data":{"object":{"id":"cus_1"}}}';
is(post($r, 'st-live', sign('stripe', $secret, $body), $body)->{status}, 200, 'a delivery is accepted');
for my $path ('/metrics', '/readyz')
{
	my $res = http_get($r, $path);
	is($res->{status}, 404, "public listener: $path is 404");
	unlike($res->{content}, qr/st-live|webhook_receiver_/, "public listener: $path shows nothing");
}
is(http_get($r, '/healthz')->{status}, 200, 'public listener: /healthz');
my $m = admin_get($r, '/metrics');
is($m->{status}, 200, 'admin listener: /metrics');
like($m->{content}, qr/^webhook_receiver_requests_total\{source="st-live",status="200"\} 1$/m,
	'admin listener: per-source traffic');
is(admin_get($r, '/readyz')->{content}, 'ready', 'admin listener: /readyz');
is(admin_get($r, '/healthz')->{status}, 200, 'admin listener: /healthz');
is(admin_get($r, '/hooks/st-live')->{status}, 404, 'admin listener: no hooks');
like($r->{log}, qr{admin \(metrics, readyz\) listening on http://127\.0\.0\.1:$r->{admin_port}}, 'the log names it');
is(stop_receiver($r), 0, 'clean exit');

$r = start_receiver($node, '--admin-listen', 'off');
is(http_get($r, '/metrics')->{status}, 404, 'admin-listen off: /metrics nowhere');
is(http_get($r, '/healthz')->{status}, 200, 'admin-listen off: /healthz on the public listener');
unlike($r->{log}, qr/admin/, 'admin-listen off: no admin listener');
is(stop_receiver($r), 0, 'clean exit');

for my $case ([ 'nowhere', qr/^webhook-receiver: invalid value for admin-listen: "nowhere" \(expected HOST:PORT or off\)$/ ],
	[ '127.0.0.1:7', qr/^webhook-receiver: invalid value for admin-listen: it must differ from listen$/, '127.0.0.1:7' ])
{
	my ($val, $re, $listen) = @$case;
	my ($out, $err) = ('', '');
	IPC::Run::run([ receiver_bin(), '--db', 'dbname=x', '--admin-listen', $val, ($listen ? ('--listen', $listen) : ()) ],
		'>', \$out, '2>', \$err);
	is($? >> 8, 2, "admin-listen $val: exit status 2");
	like($err, $re, "admin-listen $val: one line naming the setting");
}
{
	my ($out, $err) = ('', '');
	IPC::Run::run([ receiver_bin(), '--help' ], '>', \$out, '2>', \$err);
	like($out, qr/--admin-listen HOST:PORT\|off .*default 127\.0\.0\.1:9180/, '--help shows the default');
}

###########################################################################
# The database password: never on the command line
###########################################################################

my $pw = 'Pw-' . join('', map { ('a' .. 'z')[ rand 26 ] } 1 .. 12);
$node->safe_psql('postgres', qq{
	SET password_encryption = 'scram-sha-256';
	CREATE ROLE rcvpw LOGIN PASSWORD '$pw' IN ROLE webhook_inbox_receiver;
});
# rcvpw must give its password, also on the local socket
my $hba = $node->data_dir . '/pg_hba.conf';
my $old = PostgreSQL::Test::Utils::slurp_file($hba);
open(my $fh, '>', $hba) or die;
print $fh "local all rcvpw scram-sha-256\nhost all rcvpw 127.0.0.1/32 scram-sha-256\n$old";
close $fh;
$node->reload;
my $base = $node->connstr('postgres') . ' user=rcvpw';
my $tmp = PostgreSQL::Test::Utils::tempdir;

# the password in --db: one warning line, and the argument overwritten
$r = start_receiver($node, { _db => "$base password=$pw" });
my $cmd = cmdline($r->{pid});
like($cmd, qr/--db x+ /, '--db with a password: the argument is overwritten');
unlike($cmd, qr/\Q$pw\E/, '/proc/PID/cmdline does not show the password');
my @warn = grep { /carries a password/ } split /\n/, $r->{log};
is(scalar @warn, 1, 'one warning line');
like($warn[0] // '', qr/use a passfile .*PGPASSWORD.*--config/, 'it says what to use instead');
unlike($r->{log}, qr/\Q$pw\E/, 'the log never shows the password');
is(stop_receiver($r), 0, 'clean exit');

# PGPASSWORD
$r = start_receiver($node, { _db => $base, PGPASSWORD => $pw });
ok($r->{pid}, 'PGPASSWORD: ready with the password from the environment');
unlike(cmdline($r->{pid}), qr/\Q$pw\E/, 'PGPASSWORD: not on the command line');
unlike($r->{log}, qr/carries a password/, 'PGPASSWORD: no warning');
is(stop_receiver($r), 0, 'clean exit');

# a passfile, named by PGPASSFILE or by passfile= in the connection string
open($fh, '>', "$tmp/pgpass") or die;
print $fh "*:*:*:rcvpw:$pw\n";
close $fh;
chmod 0600, "$tmp/pgpass";
$r = start_receiver($node, { _db => $base, PGPASSFILE => "$tmp/pgpass" });
ok($r->{pid}, 'PGPASSFILE: ready');
is(stop_receiver($r), 0, 'clean exit');
$r = start_receiver($node, { _db => "$base passfile=$tmp/pgpass" });
ok($r->{pid}, 'passfile=: ready');
unlike(cmdline($r->{pid}) . $r->{log}, qr/\Q$pw\E|carries a password/, 'passfile=: no password shown, no warning');
is(stop_receiver($r), 0, 'clean exit');

# db in the --config file (flags come after it, so give no --db at all)
open($fh, '>', "$tmp/rcv.conf") or die;
print $fh qq(db = "$base password=$pw"\n);
close $fh;
chmod 0600, "$tmp/rcv.conf";
{
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $admin = PostgreSQL::Test::Cluster::get_free_port();
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start([ receiver_bin(), '--config', "$tmp/rcv.conf", '--listen', "127.0.0.1:$port",
		'--admin-listen', "127.0.0.1:$admin" ], '>', \$out, '2>', \$err);
	my $rr = { admin => "http://127.0.0.1:$admin" };
	ok(poll_until(sub { $h->pump_nb; (admin_get($rr, '/readyz')->{status} // 0) == 200 }, 'ready', 60),
		'db in the config file: ready');
	unlike(cmdline($h->{KIDS}[0]{PID}) . $err, qr/\Q$pw\E|carries a password/,
		'db in the config file: no password shown, no warning');
	$h->signal('TERM');
	$h->finish;
}

###########################################################################
# What the receiver's role can reach
###########################################################################

is($node->safe_psql('postgres', q{
	SET ROLE rcvpw;
	SELECT string_agg(name || ' ' || kind || ' ' || array_to_string(signing_secrets, ',') || ' ' || settings::text, E'\n' ORDER BY name)
	  FROM webhook_inbox.receiver_sources()}),
	qq(acme hmac acme-secret {"header": "X-Acme-Signature", "prefix": "sha256=", "encoding": "hex"}\n)
	  . qq(st-live stripe $secret {}),
	'receiver_sources(): enabled sources, their secrets and verification settings only');
for my $sql ('SELECT api_token FROM webhook_inbox.sources', 'SELECT count(*) FROM webhook_inbox.inbox',
	'SELECT count(*) FROM webhook_inbox.deliveries', 'SELECT count(*) FROM webhook_inbox.effects',
	"SELECT webhook_inbox.create_source('x', 'github', 's')", "SELECT * FROM webhook_inbox.claim('w', 1, '1 minute')",
	'SELECT * FROM webhook_inbox.inbox_health')
{
	my ($rc, $out, $err) = $node->psql('postgres', "SET ROLE rcvpw; $sql");
	like($err, qr/permission denied/, "the receiver's role cannot: $sql");
}
is($node->safe_psql('postgres', q{
	SET ROLE rcvpw;
	SELECT webhook_inbox.intake('st-live', ARRAY['stripe-signature', 'x'],
		convert_to('{"id":"evt_x2","type":"customer.created","data":{"object":{"id":"cus_2"}}}', 'UTF8'))}),
	'new', 'but it can call intake()');

done_testing();
