set terminal pngcairo size 1512,682 enhanced font 'Sans,11'
set output 'montage.png'
set title "MNIST, sigma = 0.2, C = 8, rho = 0.1, T = 500 (test accuracy 0.932)\ntop: the 8 highest dFIL; bottom: the 8 lowest among the 10000 examples sampled at least once (0 never sampled: dFIL 0)\nk = times sampled (mean over runs; dFIL sums over those steps, 1 run); pixels shown inverted (dark = high value)" font 'Sans,12'
unset key
unset tics
unset border
unset colorbox
set size ratio -1
set palette gray
set cbrange [0:1]
set xrange [-0.5:251.5]
set yrange [91.5:-0.5]
set label "dFIL 3.53" at 13.5,7.0 center front font 'Sans,10'
set label "#4081 y=4 k=15" at 13.5,13.0 center front font 'Sans,10'
set label "dFIL 3.43" at 45.5,7.0 center front font 'Sans,10'
set label "#134 y=4 k=13" at 45.5,13.0 center front font 'Sans,10'
set label "dFIL 3.31" at 77.5,7.0 center front font 'Sans,10'
set label "#2465 y=6 k=17" at 77.5,13.0 center front font 'Sans,10'
set label "dFIL 3.1" at 109.5,7.0 center front font 'Sans,10'
set label "#5567 y=5 k=11" at 109.5,13.0 center front font 'Sans,10'
set label "dFIL 2.85" at 141.5,7.0 center front font 'Sans,10'
set label "#5093 y=1 k=8" at 141.5,13.0 center front font 'Sans,10'
set label "dFIL 2.82" at 173.5,7.0 center front font 'Sans,10'
set label "#4918 y=5 k=13" at 173.5,13.0 center front font 'Sans,10'
set label "dFIL 2.79" at 205.5,7.0 center front font 'Sans,10'
set label "#2506 y=6 k=15" at 205.5,13.0 center front font 'Sans,10'
set label "dFIL 2.71" at 237.5,7.0 center front font 'Sans,10'
set label "#555 y=9 k=10" at 237.5,13.0 center front font 'Sans,10'
set label "dFIL 0.0018" at 13.5,55.0 center front font 'Sans,10'
set label "#6188 y=0 k=3" at 13.5,61.0 center front font 'Sans,10'
set label "dFIL 0.00198" at 45.5,55.0 center front font 'Sans,10'
set label "#1314 y=0 k=4" at 45.5,61.0 center front font 'Sans,10'
set label "dFIL 0.00296" at 77.5,55.0 center front font 'Sans,10'
set label "#9152 y=8 k=3" at 77.5,61.0 center front font 'Sans,10'
set label "dFIL 0.00297" at 109.5,55.0 center front font 'Sans,10'
set label "#9226 y=2 k=7" at 109.5,61.0 center front font 'Sans,10'
set label "dFIL 0.00315" at 141.5,55.0 center front font 'Sans,10'
set label "#8747 y=2 k=3" at 141.5,61.0 center front font 'Sans,10'
set label "dFIL 0.00359" at 173.5,55.0 center front font 'Sans,10'
set label "#42 y=3 k=4" at 173.5,61.0 center front font 'Sans,10'
set label "dFIL 0.00403" at 205.5,55.0 center front font 'Sans,10'
set label "#1871 y=0 k=4" at 205.5,61.0 center front font 'Sans,10'
set label "dFIL 0.00407" at 237.5,55.0 center front font 'Sans,10'
set label "#9493 y=2 k=4" at 237.5,61.0 center front font 'Sans,10'
plot 'montage.dat' matrix with image
