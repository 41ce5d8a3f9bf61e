# 2 lines through 512 points from 16_work.dat.  Render beside this script with
#     gnuplot -e "fmt='png'" 16_work.gp    (fmt: 'png' or 'svg')
if (!exists("fmt")) fmt = 'png'
# the data and the image live beside this script, wherever gnuplot runs:
# ARG0 is the script's path as gnuplot was given it
here = ''
do for [i = 1:strlen(ARG0)] { if (ARG0[i:i] eq '/') { here = ARG0[1:i] } }
data = here . '16_work.dat'
if (!exists("out")) out = here . '16_work.' . fmt
if (fmt eq 'svg') {
    set terminal svg size 640,400 font 'sans,11' noenhanced background '#ffffff'
} else { if (fmt eq 'png') {
    set terminal pngcairo size 640,400 font 'sans,11' noenhanced background '#ffffff'
} else {
    exit error sprintf("fmt must be 'png' or 'svg', not '%s'", fmt)
} }
set output out
set title 'attention multiply-adds of one decoding step, d_model = 4096'
set xlabel 'keys attended to, t'
set ylabel 'million multiply-adds'
set logscale y
set format y '%g'
set grid ytics lc rgb '#dddddd'
set border 3
set tics nomirror out scale 0.5
unset key
set key below height 1
plot data using 1:2 with lines lw 2 lc rgb '#1b9e77' title 'with the cache: 2 t d_model', \
     data using 1:3 with lines lw 2 lc rgb '#d95f02' title 'recomputed: t (t+1) d_model'
unset output
