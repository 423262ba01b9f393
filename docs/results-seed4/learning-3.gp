# learning-3.gp: written by placer report; run with gnuplot in this directory.
set datafile missing 'NaN'
set grid lc rgb '#dddddd'
set key top left
set terminal pngcairo size 1000,620 font ',11'
set output 'learning-3.png'
set title "run 3 (reinforce): predicted step time of sampled placements" noenhanced
set xlabel 'policy update'
set ylabel 'predicted step time (ms)'
set key top right
set yrange [7.3381:7.72781]
plot 'learning-3.dat' using 1:2 with points pt 7 ps 0.35 lc rgb '#99aaaaaa' title 'sampled placements', \
  'learning-3-curve.dat' using 1:2 with lines lw 2 lc rgb '#1f77b4' title 'mean of update', \
  '' using 1:3 with lines lw 1 lc rgb '#2ca02c' title 'best of update', \
  '' using 1:4 with lines lw 2 dt 2 lc rgb '#d62728' title 'best so far'
set terminal svg size 1000,620 dynamic font ',11'
set output 'learning-3.svg'
replot
unset output
