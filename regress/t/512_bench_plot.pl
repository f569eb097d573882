
# 512_bench_plot.pl
#	bench/plot.sh draws a run's figures as SVG charts: one per (section,
#	unit), each figure beside its same-run reference and its target when it
#	is stated in the chart's unit; ratios and counts stay in the table; a run
#	with nothing to draw is an error.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 'regress/t';
use ProcessGuard;

plan skip_all => 'gnuplot is not installed (make bench installs it)'
  unless grep { -x "$_/gnuplot" } split /:/, $ENV{PATH};

my $tmp = PostgreSQL::Test::Utils::tempdir;
open(my $fh, '>', "$tmp/run.csv") or die;
print $fh <<'CSV';
cores,section,metric,value,unit,reference,reference_value,target,met
2,ceiling,intake rows/s (pgbench -c 4),9000.5,rows/s,-,-,-,-
2,receiver,accepted deliveries/s (wrk -c 64),6000.1,req/s,intake() ceiling,9000.5,-,-
2,receiver,  ratio to ceiling,0.66,x,-,-,>= 0.6,yes
2,receiver,latency p50,2.1,ms,-,-,-,-
2,receiver,latency p99,12.5,ms,-,-,<= 20 ms,yes
2,receiver,non-new outcomes + errors (all unique),0,count,-,-,= 0,yes
2,worker,drain fetch (worker),3100,ev/s,same cycle from SQL alone,3500,>= 0.8x,yes
2,worker,drain version (worker),5100,ev/s,same cycle from SQL alone,5600,-,-
2,worker,a name, with a comma,1,ev/s,-,-,-,-
2,worker,not measured,-,ev/s,-,-,-,-
CSV
close $fh;

my ($out, $err) = ('', '');
IPC::Run::run([ 'bench/plot.sh', "$tmp/run.csv", "$tmp/svg" ], '>', \$out, '2>', \$err);
is($? >> 8, 0, 'plot.sh exits 0') or diag($err);
is($err, "bench/plot.sh: line 10 has 10 fields, not 9: skipped\n", 'a malformed row is skipped and named');
is( $out,
	join('', map { "$tmp/svg/bench-$_.svg\n" } qw(ceiling-rows_s receiver-req_s receiver-ms worker-ev_s)),
	'one chart per section and unit, none for ratios and counts');

sub slurp { local (@ARGV, $/) = @_; return <> }

my $workers = slurp("$tmp/svg/bench-worker-ev_s.svg");
like($workers, qr/<svg/, 'an SVG document');
like($workers, qr/worker \(ev\/s\), 2 cores/, 'titled with section, unit and cores');
like($workers, qr/drain fetch \(worker\).*drain version \(worker\)/s, 'each figure labelled');
like($workers, qr/same cycle from SQL alone \(same run\)/, 'with its same-run reference, named');
unlike($workers, qr/>target</, 'no target line for a ratio target (0.8x of the reference)');
unlike($workers, qr/not measured/, 'a figure without a value is left out');

my $latency = slurp("$tmp/svg/bench-receiver-ms.svg");
like($latency, qr/>target</, 'a target stated in the unit of the chart is drawn');
unlike($latency, qr/\(same run\)/, 'no reference series where there is none');

open($fh, '>', "$tmp/empty.csv") or die;
print $fh "cores,section,metric,value,unit,reference,reference_value,target,met\n";
print $fh "2,receiver,  ratio to ceiling,0.66,x,-,-,>= 0.6,yes\n";
close $fh;
IPC::Run::run([ 'bench/plot.sh', "$tmp/empty.csv", "$tmp/none" ], '>', \$out, '2>', \$err);
is($? >> 8, 1, 'nothing to draw: exit 1');
like($err, qr/^bench\/plot.sh: nothing to plot in /, 'with the reason');
IPC::Run::run([ 'bench/plot.sh', "$tmp/missing.csv", "$tmp/none" ], '>', \$out, '2>', \$err);
like($err, qr/cannot read .*missing.csv/, 'an unreadable file is named');

done_testing();
