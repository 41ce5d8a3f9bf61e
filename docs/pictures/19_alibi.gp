# Attention weights: a 2 x 4 grid of (8, 8) panels from 19_alibi.dat,
# drawn on one colour scale.  Render beside this script with
#     gnuplot -e "fmt='png'" 19_alibi.gp    (fmt: 'png' or 'svg')
if (!exists("fmt")) fmt = 'png'
# the data and the image live beside this script, wherever gnuplot runs:
# ARG0 is the script's path as gnuplot was given it
here = ''
do for [i = 1:strlen(ARG0)] { if (ARG0[i:i] eq '/') { here = ARG0[1:i] } }
data = here . '19_alibi.dat'
if (!exists("out")) out = here . '19_alibi.' . fmt
if (fmt eq 'svg') {
    set terminal svg size 1188,652 font 'sans,11' noenhanced background '#ffffff'
} else { if (fmt eq 'png') {
    set terminal pngcairo size 1188,652 font 'sans,11' noenhanced background '#ffffff'
} else {
    exit error sprintf("fmt must be 'png' or 'svg', not '%s'", fmt)
} }
set output out
# a PNG gets each panel as one bitmap, scaled without smoothing;
# an SVG a rectangle per cell, since SVG viewers smooth bitmaps
cells = fmt eq 'svg' ? 'image pixels' : 'image'

# white to dark red (matplotlib's 'Reds')
set palette defined (0 '#ffffff', 0.125 '#fee0d2', 0.25 '#fcbba1', 0.375 '#fc9272', 0.5 '#fb6a4a', 0.625 '#ef3b2c', 0.75 '#cb181d', 0.875 '#a50f15', 1 '#67000d')
# one colour scale for every panel: the smallest and the largest weight
set cbrange [-3.5:0]
# cell (k, q) is the unit square centred on key k, query q; query 0 on top,
# as in the matrix
set xrange [-0.5:7.5]
set yrange [7.5:-0.5]
set xtics 0, 1, 7
set ytics 0, 1, 7
set tics out nomirror scale 0.5
set format cb '%g'
unset key

set multiplot layout 2,4 title 'bias -m (i - j); the future keys (above the diagonal) are hidden, drawn at 0' font ',13' \
    margins screen 0.067340, 0.915825, 0.095092, 0.895706 \
    spacing screen 0.013468, 0.064417

# panel (0, 0)
set title 'head 0, m = 1/2'
set format x ''; unset xlabel
set format y '%g'; set ylabel 'Queries'
unset colorbox
plot data index 0 matrix with @cells

# panel (0, 1)
set title 'head 1, m = 1/4'
set format x ''; unset xlabel
set format y ''; unset ylabel
plot data index 1 matrix with @cells

# panel (0, 2)
set title 'head 2, m = 1/8'
set format x ''; unset xlabel
set format y ''; unset ylabel
plot data index 2 matrix with @cells

# panel (0, 3)
set title 'head 3, m = 1/16'
set format x ''; unset xlabel
set format y ''; unset ylabel
plot data index 3 matrix with @cells

# panel (1, 0)
set title 'head 4, m = 1/32'
set format x '%g'; set xlabel 'Keys'
set format y '%g'; set ylabel 'Queries'
plot data index 4 matrix with @cells

# panel (1, 1)
set title 'head 5, m = 1/64'
set format x '%g'; set xlabel 'Keys'
set format y ''; unset ylabel
plot data index 5 matrix with @cells

# panel (1, 2)
set title 'head 6, m = 1/128'
set format x '%g'; set xlabel 'Keys'
set format y ''; unset ylabel
plot data index 6 matrix with @cells

# panel (1, 3)
set title 'head 7, m = 1/256'
set format x '%g'; set xlabel 'Keys'
set format y ''; unset ylabel
# the last panel draws the one colour box, right of the grid
set colorbox user origin screen 0.930976, 0.095092 size screen 0.015152, 0.800613
plot data index 7 matrix with @cells

unset multiplot
unset output
