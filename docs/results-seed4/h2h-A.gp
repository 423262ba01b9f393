# h2h-A.gp: written by placer report; run with gnuplot in this directory.
set datafile missing 'NaN'
set grid lc rgb '#dddddd'
set key top left
set terminal pngcairo size 1000,620 font ',11'
set output 'h2h-A.png'
set title "Setting A: m=1 gpipe, memory cap none (confirmation rounds only)" noenhanced
set ylabel 'step time (ms)'
set yrange [0:9.21812]
set xrange [-0.6:4.6]
set style fill solid 0.55 border -1
set boxwidth 0.6
set key top right
plot 'h2h-A.dat' using 1:3:4:xtic(2) with boxerrorbars lc rgb '#4878a8' title 'confirmed mean ± sd', \
  '' using 1:5 with points pt 9 ps 1.8 lc rgb '#d62728' title 'simulator (calibrated)'
set terminal svg size 1000,620 dynamic font ',11'
set output 'h2h-A.svg'
replot
unset output
