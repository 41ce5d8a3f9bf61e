# gnuplot -e "fmt='svg'" plots/bench_decode.gp  (data beside it)
if (!exists('fmt')) fmt = 'png'
dir = system('dirname ' . ARG0)
if (fmt eq 'svg') { set terminal svg size 800,500 font 'sans,12' noenhanced } else { set terminal pngcairo size 800,500 font 'sans,10' noenhanced }
set output dir . '/bench_decode.' . fmt
set title 'Decoding one sequence, D = 512, h = 8, float64: time of one step'
set xlabel 'keys attended to, t'
set ylabel 'ms per step'
set logscale x 2
set logscale y 10
set key left top
set grid
set datafile missing 'nan'
plot dir . '/bench_decode.dat' u 1:2 w lp lw 2 t 'with the key-value cache (kv_cache_decode_step)', \
  '' u 1:3 w lp lw 2 t 'recomputing all t positions (multihead_forward, causal)'
