# A line through 600 points from 13_loss.dat.  Render beside this script with
#     gnuplot -e "fmt='png'" 13_loss.gp    (fmt: 'png' or 'svg')
if (!exists("fmt")) fmt = 'png'
# the data and the image live beside this script, wherever gnuplot runs:
# ARG0 is the script's path as gnuplot was given it
here = ''
do for [i = 1:strlen(ARG0)] { if (ARG0[i:i] eq '/') { here = ARG0[1:i] } }
data = here . '13_loss.dat'
if (!exists("out")) out = here . '13_loss.' . fmt
if (fmt eq 'svg') {
    set terminal svg size 640,400 font 'sans,11' noenhanced background '#ffffff'
} else { if (fmt eq 'png') {
    set terminal pngcairo size 640,400 font 'sans,11' noenhanced background '#ffffff'
} else {
    exit error sprintf("fmt must be 'png' or 'svg', not '%s'", fmt)
} }
set output out
set title 'training loss (cross-entropy per answer)'
set xlabel 'step'
set ylabel 'loss'
set logscale y
set format y '%g'
set grid ytics lc rgb '#dddddd'
set border 3
set tics nomirror out scale 0.5
unset key
plot data using 1:2 with lines lw 2 lc rgb '#cb181d'
unset output
