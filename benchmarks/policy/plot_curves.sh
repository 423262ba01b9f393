#!/bin/sh
# plot_curves.sh DIR: draw every curve_*.csv that placer_quality wrote in DIR
# as DIR/curve_*.png with gnuplot: best-so-far step time of each placer
# against simulations spent, and the RL policy's mean sample time, beside
# the exhaustive optimum.
set -eu
dir=${1:?usage: plot_curves.sh DIR}
command -v gnuplot >/dev/null || { echo "plot_curves.sh: gnuplot is not installed" >&2; exit 1; }
for csv in "$dir"/curve_*.csv; do
    [ -e "$csv" ] || { echo "plot_curves.sh: no curve_*.csv in $dir" >&2; exit 1; }
    png=${csv%.csv}.png
    title=$(basename "$csv" .csv | sed 's/^curve_//; s/_/ setting /')
    gnuplot <<GP
set datafile separator ','
set terminal pngcairo size 900,560
set output '$png'
set title 'placer quality: $title'
set xlabel 'simulations'
set ylabel 'step time (ms)'
set key top right
set grid
plot '$csv' using 2:(\$3/1e3) with lines lw 2 dt 2 lc rgb 'black' title 'exhaustive optimum', \
     '' using 2:(\$4/1e3) with lines lw 2 title 'RL best found', \
     '' using 2:(\$5/1e3) with lines lw 1 title 'RL mean sample', \
     '' using 2:(\$6/1e3) with lines lw 1 title 'RL uniform start, best', \
     '' using 2:(\$8/1e3) with lines lw 1 title 'prior alone, best', \
     '' using 2:(\$9/1e3) with lines lw 1 title 'random, best', \
     '' using 2:(\$10/1e3) with lines lw 1 title 'anneal, best', \
     '' using 2:(\$11/1e3) with lines lw 1 title 'local, best'
GP
    echo "$png"
done
