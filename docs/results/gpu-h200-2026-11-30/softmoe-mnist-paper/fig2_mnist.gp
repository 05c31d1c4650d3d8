# Drawn by moelab (runner/plot.cpp); run `gnuplot fig2_mnist.gp` in this folder to redraw.
set terminal pngcairo size 900,600 font 'sans,11'
set output 'fig2_mnist.png'
set title 'Soft MoE on mnist: k of n experts (mean over training seeds)'
set xlabel 'n (experts)'
set ylabel 'test accuracy (%), bars: +- std over training seeds'
set key outside right
set grid
set logscale x
set offsets 0, 0, graph 0.05, graph 0.05
plot 'fig2_mnist.dat' index 0 using 1:2:3:4 with yerrorlines lw 2 pt 7 title 'all experts', \
     'fig2_mnist.dat' index 1 using 1:2:3:4 with yerrorlines lw 2 pt 7 title 'Algorithm 1, k = n/2', \
     'fig2_mnist.dat' index 2 using 1:2:3:4 with yerrorlines lw 2 pt 7 title 'random, k = n/2', \
     'fig2_mnist.dat' index 3 using 1:2:3:4 with yerrorlines lw 2 pt 7 title 'Algorithm 1, k = n/4', \
     'fig2_mnist.dat' index 4 using 1:2:3:4 with yerrorlines lw 2 pt 7 title 'random, k = n/4', \
     'fig2_mnist.dat' index 5 using 1:2:3:4 with yerrorlines lw 2 pt 7 title 'Algorithm 1, k = n/8', \
     'fig2_mnist.dat' index 6 using 1:2:3:4 with yerrorlines lw 2 pt 7 title 'random, k = n/8'
