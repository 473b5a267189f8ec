set terminal pngcairo size 1000,700 enhanced font 'Sans,12'
set output 'figure5.png'
set title "MNIST ConvNet DP-SGD: n = 10000, B = 200, T <= 500, momentum 0.5, 1 run\n(20 bounds below 2e-09 drawn at the bottom edge)"
set xlabel 'test accuracy'
set ylabel 'MSE lower bound'
set logscale y
set format y '10^{%L}'
set xrange [0.3823:0.9582]
set yrange [1.67e-09:1.67e+05]
set grid
set key outside right top
plot 'figure5_rdp_bound.dat' using 1:2 with points pt 7 ps 1.1 lc rgb '#1f77b4' title 'RDP (Theorem 1)', 'figure5_rdp_bound_front.dat' using 1:2 with lines dt 2 lw 2 lc rgb '#1f77b4' title 'Pareto front', 'figure5_max_dfil_bound.dat' using 1:2 with points pt 7 ps 1.1 lc rgb '#d62728' title 'max dFIL (Theorem 2)', 'figure5_max_dfil_bound_front.dat' using 1:2 with lines dt 2 lw 2 lc rgb '#d62728' title 'Pareto front', 'figure5_median_dfil_bound.dat' using 1:2 with points pt 7 ps 1.1 lc rgb '#ff7f0e' title 'median dFIL (Theorem 2)', 'figure5_median_dfil_bound_front.dat' using 1:2 with lines dt 2 lw 2 lc rgb '#ff7f0e' title 'Pareto front', 1.0 with lines dt 3 lw 2 lc rgb 'black' title 'perfect privacy (MSE = 1)'
