# placement-C.gp: written by placer report; run with gnuplot in this directory.
set datafile missing 'NaN'
set grid lc rgb '#dddddd'
set key top left
set terminal pngcairo size 1000,620 font ',11'
set output 'placement-C.png'
set title "Setting C: each side's pick, nodes coloured by device" noenhanced
set xlabel 'graph node'
set ytics ("rl" 0, "human" 1, "dp" 2, "search" 3)
set yrange [-0.6:3.6]
set xrange [-0.6:39.6]
set xtics rotate by 90 right font ',8' noenhanced
set key outside right top
set style fill solid 1.0 noborder
set grid noxtics noytics
plot 'placement-C.dat' using 1:2:(0.45):(0.4):($3+1):xtic(4) with boxxyerror lc variable notitle, \
  NaN with boxes lc 1 title 'device 0', \
  NaN with boxes lc 2 title 'device 1'
set terminal svg size 1000,620 dynamic font ',11'
set output 'placement-C.svg'
replot
unset output
