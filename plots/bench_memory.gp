# gnuplot -e "fmt='svg'" plots/bench_memory.gp  (data beside it)
if (!exists('fmt')) fmt = 'png'
dir = system('dirname ' . ARG0)
if (fmt eq 'svg') { set terminal svg size 1000,420 font 'sans,12' } else { set terminal pngcairo size 1000,420 font 'sans,10' }
set output dir . '/bench_memory.' . fmt
set datafile missing 'nan'
set multiplot layout 1,2 title 'Exact vs tiled attention, B*h = 8, d_h = 64'
set logscale x 2
set logscale y 10
set grid
set key left top
set xlabel 'L'
set ylabel 'seconds'
plot dir . '/bench_memory.dat' u 1:2 w lp lw 2 t 'exact', '' u 1:4 w lp lw 2 t 'tiled'
set ylabel 'peak RSS (MiB)'
plot dir . '/bench_memory.dat' u 1:3 w lp lw 2 t 'exact', '' u 1:5 w lp lw 2 t 'tiled'
unset multiplot
