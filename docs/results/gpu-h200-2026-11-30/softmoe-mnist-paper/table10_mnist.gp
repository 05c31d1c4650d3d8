# Drawn by moelab (runner/plot.cpp); run `gnuplot table10_mnist.gp` in this folder to redraw.
set terminal pngcairo size 900,600 font 'sans,11'
set output 'table10_mnist.png'
set title 'Table 10 (mnist): Algorithm 1''s stds above random, mean ± std over seeds'
set xlabel 'n (experts)'
set ylabel 'k'
set view map
unset key
set palette rgb 33,13,10
set xtics ('2' 0, '4' 1, '8' 2, '16' 3, '32' 4, '64' 5, '128' 6, '256' 7, '512' 8)
set ytics ('n/2' 0, 'n/4' 1, 'n/8' 2)
set xrange [-0.5:8.5]
set yrange [-0.5:2.5]
plot 'table10_mnist.dat' using 1:2:3 with image, \
     'table10_mnist.dat' using 1:2:(!valid(3) ? '' : valid(4) ? sprintf("%.3f\n± %.3f", $3, $4) : sprintf('%.3f', $3)) with labels font 'sans,9'
