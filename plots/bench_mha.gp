# gnuplot -e "fmt='svg'" plots/bench_mha.gp  (data beside it)
if (!exists('fmt')) fmt = 'png'
dir = system('dirname ' . ARG0)
if (fmt eq 'svg') { set terminal svg size 800,500 font 'sans,12' } else { set terminal pngcairo size 800,500 font 'sans,10' }
set output dir . '/bench_mha.' . fmt
set title 'Self-attention forward, B = 8, D = 512, h = 8, float64'
set xlabel 'sequence length L'
set ylabel 'GFLOP/s  (8BLD^2 + 4BL^2D flops)'
set logscale x 2
set logscale y 10
set key left top
set grid
set datafile missing 'nan'
plot dir . '/bench_mha.dat' u 1:2 w lp lw 2 dt 2 t 'dgemm (B*L,D)x(D,D)', \
  '' u 1:3 w lp lw 2 t 'fast path, heads in parallel', \
  '' u 1:4 w lp t 'fast path, BLAS threads', \
  '' u 1:5 w lp t 'copy-based path (d2l)', \
  '' u 1:7 w lp t 'PyTorch float64', \
  '' u 1:8 w lp t 'fast path on GSL reference CBLAS', \
  '' u 1:6 w p pt 7 ps 1.5 t 'naive loops'
