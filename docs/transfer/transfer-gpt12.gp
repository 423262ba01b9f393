# transfer-gpt12.gp: written by placer report --transfer; run with gnuplot in this directory.
set datafile missing 'NaN'
set palette defined (-1 '#b2182b', -0.5 '#ef8a62', 0 '#f7f7f7', 0.5 '#67a9cf', 1 '#2166ac')
set cbrange [-1:1]
set cbtics ('-100%%' -1, '0' 0, '100%%' 1)
set xrange [-0.5:4.5]
set yrange [4.5:-0.5]
set size ratio -1
set xtics rotate by 35 right ('t4x4-pcie' 0, 'h200x2-nvlink' 1, 'h200x4-nvlink' 2, 'h200x2-l40sx2' 3, 'l40sx2-h200x2' 4)
set ytics ('t4x4-pcie' 0, 'h200x2-nvlink' 1, 'h200x4-nvlink' 2, 'h200x2-l40sx2' 3, 'l40sx2-h200x2' 4)
set xlabel 'evaluated on T'
set ylabel 'trained on S'
set tics scale 0
set object 1 rect from -0.5,-0.5 to 4.5,4.5 behind fc rgb '#bdbdbd' fs solid noborder
set terminal pngcairo size 1480,880 font ',9'
set output 'transfer-gpt12.png'
set multiplot layout 2,3 title 'gain retained on T by S''s placements, gpt12 (grey: n/a)'
set title 'reinforce, A (m=1 gpipe)'
unset colorbox
plot 'transfer-gpt12-reinforce-A.dat' using 1:2:(0.5):(0.5):3 with boxxyerror fs solid fc palette notitle, '' using 1:2:4 with labels font ',8' notitle
set title 'reinforce, B (m=4 1f1b)'
unset colorbox
plot 'transfer-gpt12-reinforce-B.dat' using 1:2:(0.5):(0.5):3 with boxxyerror fs solid fc palette notitle, '' using 1:2:4 with labels font ',8' notitle
set title 'reinforce, C (m=1 gpipe, cap 3/4 of the single-device peak)'
set colorbox
plot 'transfer-gpt12-reinforce-C.dat' using 1:2:(0.5):(0.5):3 with boxxyerror fs solid fc palette notitle, '' using 1:2:4 with labels font ',8' notitle
set title 'eagle-ppo, A (m=1 gpipe)'
unset colorbox
plot 'transfer-gpt12-eagle-ppo-A.dat' using 1:2:(0.5):(0.5):3 with boxxyerror fs solid fc palette notitle, '' using 1:2:4 with labels font ',8' notitle
set title 'eagle-ppo, B (m=4 1f1b)'
unset colorbox
plot 'transfer-gpt12-eagle-ppo-B.dat' using 1:2:(0.5):(0.5):3 with boxxyerror fs solid fc palette notitle, '' using 1:2:4 with labels font ',8' notitle
set title 'eagle-ppo, C (m=1 gpipe, cap 3/4 of the single-device peak)'
set colorbox
plot 'transfer-gpt12-eagle-ppo-C.dat' using 1:2:(0.5):(0.5):3 with boxxyerror fs solid fc palette notitle, '' using 1:2:4 with labels font ',8' notitle
unset multiplot
unset output
set terminal svg size 1480,880 dynamic font ',9'
set output 'transfer-gpt12.svg'
set multiplot layout 2,3 title 'gain retained on T by S''s placements, gpt12 (grey: n/a)'
set title 'reinforce, A (m=1 gpipe)'
unset colorbox
plot 'transfer-gpt12-reinforce-A.dat' using 1:2:(0.5):(0.5):3 with boxxyerror fs solid fc palette notitle, '' using 1:2:4 with labels font ',8' notitle
set title 'reinforce, B (m=4 1f1b)'
unset colorbox
plot 'transfer-gpt12-reinforce-B.dat' using 1:2:(0.5):(0.5):3 with boxxyerror fs solid fc palette notitle, '' using 1:2:4 with labels font ',8' notitle
set title 'reinforce, C (m=1 gpipe, cap 3/4 of the single-device peak)'
set colorbox
plot 'transfer-gpt12-reinforce-C.dat' using 1:2:(0.5):(0.5):3 with boxxyerror fs solid fc palette notitle, '' using 1:2:4 with labels font ',8' notitle
set title 'eagle-ppo, A (m=1 gpipe)'
unset colorbox
plot 'transfer-gpt12-eagle-ppo-A.dat' using 1:2:(0.5):(0.5):3 with boxxyerror fs solid fc palette notitle, '' using 1:2:4 with labels font ',8' notitle
set title 'eagle-ppo, B (m=4 1f1b)'
unset colorbox
plot 'transfer-gpt12-eagle-ppo-B.dat' using 1:2:(0.5):(0.5):3 with boxxyerror fs solid fc palette notitle, '' using 1:2:4 with labels font ',8' notitle
set title 'eagle-ppo, C (m=1 gpipe, cap 3/4 of the single-device peak)'
set colorbox
plot 'transfer-gpt12-eagle-ppo-C.dat' using 1:2:(0.5):(0.5):3 with boxxyerror fs solid fc palette notitle, '' using 1:2:4 with labels font ',8' notitle
unset multiplot
unset output
