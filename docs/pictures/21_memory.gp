# A bar chart of 3 bars from 21_memory.dat.  Render beside this script with
#     gnuplot -e "fmt='png'" 21_memory.gp    (fmt: 'png' or 'svg')
if (!exists("fmt")) fmt = 'png'
# the data and the image live beside this script, wherever gnuplot runs:
# ARG0 is the script's path as gnuplot was given it
here = ''
do for [i = 1:strlen(ARG0)] { if (ARG0[i:i] eq '/') { here = ARG0[1:i] } }
data = here . '21_memory.dat'
if (!exists("out")) out = here . '21_memory.' . fmt
if (fmt eq 'svg') {
    set terminal svg size 640,400 font 'sans,11' noenhanced background '#ffffff'
} else { if (fmt eq 'png') {
    set terminal pngcairo size 640,400 font 'sans,11' noenhanced background '#ffffff'
} else {
    exit error sprintf("fmt must be 'png' or 'svg', not '%s'", fmt)
} }
set output out
set title 'a batch of 8 ragged sequences, Llama 2 70B''s shape, 16-bit'
set xlabel 'cache'
set ylabel 'GiB'
set grid ytics lc rgb '#dddddd'
set border 3
set tics nomirror out scale 0.5
unset key
set style fill solid 0.85 noborder
set boxwidth 0.6
set xrange [-0.6:2.6]
set yrange [0:*]
set offsets 0, 0, graph 0.1, 0
# each bar's value, printed above it
plot data using 0:2:xtic(1) with boxes lc rgb '#cb181d', \
     data using 0:2:(sprintf('%.3g', $2)) with labels offset 0,0.8
unset output
