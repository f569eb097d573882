#!/usr/bin/env bash
# bench/plot.sh RESULTS.csv OUTDIR: draws the figures of a bench run as SVG
# charts with gnuplot, one per (section, unit): each figure beside the
# reference measured in the same run (when it has one) and its target
# limit as a dashed line (when it is stated in the chart's unit).  Ratios and counts are
# left to the table.  Prints the files it wrote, one a line.
#
# The CSV is add_result()'s (bench/lib.sh): cores, section, metric, value,
# unit, reference, reference_value, target, met.
set -euo pipefail

csv="${1:?usage: bench/plot.sh RESULTS.csv OUTDIR}"
out="${2:?usage: bench/plot.sh RESULTS.csv OUTDIR}"
command -v gnuplot >/dev/null || { echo "bench/plot.sh: gnuplot is not installed" >&2; exit 1; }
[ -r "$csv" ] || { echo "bench/plot.sh: cannot read $csv" >&2; exit 1; }
mkdir -p "$out"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# One data file per (section, unit): metric, value, reference value, target.
awk -F, -v dir="$tmp" '
	NR == 1 { next }
	NF != 9 { printf "bench/plot.sh: line %d has %d fields, not 9: skipped\n", NR, NF > "/dev/stderr"; next }
	$5 == "x" || $5 == "count" || $4 !~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/ { next }
	{
		key = $2 "\t" $5
		if (!(key in file)) {
			n++
			file[key] = dir "/" n ".dat"
			print $2 "\t" $5 "\t" file[key] > (dir "/index")
		}
		ref = ($7 ~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/) ? $7 : "NaN"
		tgt = "NaN"
		# a target stated in the unit of the chart (<= 20 ms), not a ratio
		if (index($8, " " $5) > 0 && match($8, /-?[0-9.]+/)) tgt = substr($8, RSTART, RLENGTH)
		label = $3
		gsub(/^ +/, "", label)
		gsub(/"/, "", label)
		printf "\"%s\"\t%s\t%s\t%s\t\"%s\"\n", label, $4, ref, tgt, $6 > file[key]
	}' "$csv"
[ -f "$tmp/index" ] || { echo "bench/plot.sh: nothing to plot in $csv" >&2; exit 1; }
cores="$(awk -F, 'NR == 2 { print $1 }' "$csv")"

while IFS=$'\t' read -r section unit dat; do
	name="$(printf 'bench-%s-%s' "$section" "$unit" | tr -c 'A-Za-z0-9_.-' '_' | sed 's/_*$//')"
	svg="$out/$name.svg"
	rows="$(wc -l <"$dat")"
	has_ref="$(awk -F'\t' '$3 != "NaN" { print "yes"; exit }' "$dat")"
	# the references' name when the chart has one kind of reference
	ref_name="$(awk -F'\t' '$3 != "NaN" { gsub(/"/, "", $5); n[$5] = 1 }
		END { k = 0; for (r in n) { k++; name = r } print (k == 1 ? name : "reference") }' "$dat" | tr -d "'")"
	has_tgt="$(awk -F'\t' '$4 != "NaN" { print "yes"; exit }' "$dat")"
	width=$((420 + rows * 130))
	[ "$width" -gt 1100 ] && width=1100
	{
		echo "set terminal svg size $width,380 dynamic enhanced font 'Helvetica,11' background '#ffffff'"
		echo "set output '$svg'"
		echo "set title '$section ($unit), $cores cores' noenhanced"
		echo "set ylabel '$unit' noenhanced"
		echo "set style fill solid 0.85 border -1"
		echo "set yrange [0:*]"
		echo "set xrange [-0.6:$rows - 0.4]"
		echo "set grid ytics lc rgb '#dddddd'"
		echo "set key outside top center horizontal noenhanced"
		echo "set xtics noenhanced rotate by -15 left nomirror"
		echo "set datafile separator '\t'"
		echo "set bmargin 6"
		# figure i: measured left of i, reference right of it, target across both
		if [ -n "$has_ref" ]; then
			plot="plot '$dat' using (\$0 - 0.2):2:(0.38):xtic(1) with boxes title 'measured' lc rgb '#3b6ea8'"
			plot="$plot, '' using (\$0 + 0.2):3:(0.38) with boxes title '$ref_name (same run)' lc rgb '#b0b0b0'"
		else
			plot="plot '$dat' using (\$0):2:(0.5):xtic(1) with boxes title 'measured' lc rgb '#3b6ea8'"
		fi
		if [ -n "$has_tgt" ]; then
			plot="$plot, '' using (\$0):4:(0.45) with xerrorbars pt -1 lw 2 dt 2 lc rgb '#c0392b' title 'target'"
		fi
		echo "$plot"
	} >"$tmp/plot.gp"
	gnuplot "$tmp/plot.gp"
	echo "$svg"
done <"$tmp/index"
