# calibration.gp: written by placer report; run with gnuplot in this directory.
set datafile missing 'NaN'
set grid lc rgb '#dddddd'
set key top left
set terminal pngcairo size 1000,620 font ',11'
set output 'calibration.png'
set title 'Simulator against hardware: step time of each measured placement'
set xlabel 'measured step time (ms)'
set ylabel 'predicted step time (ms)'
set size ratio -1
set logscale xy
set xtics (10, 20)
set ytics (10, 20)
set xrange [6.05274:23.7657]
set yrange [6.05274:23.7657]
plot x with lines dt 2 lc rgb 'black' title 'y = x', \
  'calibration-test.dat' using 1:2 with points pt 6 ps 1.2 lc rgb '#ff7f0e' title 'held out, before', \
  'calibration-test.dat' using 1:3 with points pt 7 ps 1.2 lc rgb '#1f77b4' title 'held out, after', \
  'calibration-train.dat' using 1:3 with points pt 1 ps 0.8 lc rgb '#7f7f7f' title 'fitted on, after'
set terminal svg size 1000,620 dynamic font ',11'
set output 'calibration.svg'
replot
unset output
