# gnuplot -e "fmt='svg'" plots/bench_forward.gp  (data beside it)
if (!exists('fmt')) fmt = 'png'
dir = system('dirname ' . ARG0)
if (fmt eq 'svg') { set terminal svg size 1000,420 font 'sans,12' } else { set terminal pngcairo size 1000,420 font 'sans,10' }
set output dir . '/bench_forward.' . fmt
set datafile missing 'nan'
set multiplot layout 1,2 title 'mha forward against the copy-based module, B = 1, D = 512, h = 8'
set logscale x 2
set logscale y 10
set grid
set key left top
set xlabel 'L'
set ylabel 'seconds (whole process)'
plot dir . '/bench_forward.dat' u 1:2 w lp lw 2 t 'mha forward', '' u 1:4 w lp lw 2 t 'copy-based module'
set ylabel 'peak RSS (MiB)'
plot dir . '/bench_forward.dat' u 1:3 w lp lw 2 t 'mha forward', '' u 1:5 w lp lw 2 t 'copy-based module'
unset multiplot
