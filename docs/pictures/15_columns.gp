# 4 lines through 60 points from 15_columns.dat.  Render beside this script with
#     gnuplot -e "fmt='png'" 15_columns.gp    (fmt: 'png' or 'svg')
if (!exists("fmt")) fmt = 'png'
# the data and the image live beside this script, wherever gnuplot runs:
# ARG0 is the script's path as gnuplot was given it
here = ''
do for [i = 1:strlen(ARG0)] { if (ARG0[i:i] eq '/') { here = ARG0[1:i] } }
data = here . '15_columns.dat'
if (!exists("out")) out = here . '15_columns.' . fmt
if (fmt eq 'svg') {
    set terminal svg size 640,400 font 'sans,11' noenhanced background '#ffffff'
} else { if (fmt eq 'png') {
    set terminal pngcairo size 640,400 font 'sans,11' noenhanced background '#ffffff'
} else {
    exit error sprintf("fmt must be 'png' or 'svg', not '%s'", fmt)
} }
set output out
set title 'columns 6 to 9 of P'
set xlabel 'position i'
set ylabel 'P[i, j]'
set grid ytics lc rgb '#dddddd'
set border 3
set tics nomirror out scale 0.5
unset key
set key below height 1
plot data using 1:2 with lines lw 2 lc rgb '#1b9e77' title 'col 6', \
     data using 1:3 with lines lw 2 lc rgb '#d95f02' title 'col 7', \
     data using 1:4 with lines lw 2 lc rgb '#7570b3' title 'col 8', \
     data using 1:5 with lines lw 2 lc rgb '#e7298a' title 'col 9'
unset output
