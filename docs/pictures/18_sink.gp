# Attention weights: a 2 x 1 grid of (3, 5) panels from 18_sink.dat,
# drawn on one colour scale.  Render beside this script with
#     gnuplot -e "fmt='png'" 18_sink.gp    (fmt: 'png' or 'svg')
if (!exists("fmt")) fmt = 'png'
# the data and the image live beside this script, wherever gnuplot runs:
# ARG0 is the script's path as gnuplot was given it
here = ''
do for [i = 1:strlen(ARG0)] { if (ARG0[i:i] eq '/') { here = ARG0[1:i] } }
data = here . '18_sink.dat'
if (!exists("out")) out = here . '18_sink.' . fmt
if (fmt eq 'svg') {
    set terminal svg size 420,430 font 'sans,11' noenhanced background '#ffffff'
} else { if (fmt eq 'png') {
    set terminal pngcairo size 420,430 font 'sans,11' noenhanced background '#ffffff'
} else {
    exit error sprintf("fmt must be 'png' or 'svg', not '%s'", fmt)
} }
set output out
# a PNG gets each panel as one bitmap, scaled without smoothing;
# an SVG a rectangle per cell, since SVG viewers smooth bitmaps
cells = fmt eq 'svg' ? 'image pixels' : 'image'

# white to dark red (matplotlib's 'Reds')
set palette defined (0 '#ffffff', 0.125 '#fee0d2', 0.25 '#fcbba1', 0.375 '#fc9272', 0.5 '#fb6a4a', 0.625 '#ef3b2c', 0.75 '#cb181d', 0.875 '#a50f15', 1 '#67000d')
# one colour scale for every panel: from 0 (white, exactly 0) to the
# largest weight
set cbrange [0:1]
# cell (k, q) is the unit square centred on key k, query q; query 0 on top,
# as in the matrix
set xrange [-0.5:4.5]
set yrange [2.5:-0.5]
set xtics 0, 1, 4
set ytics 0, 1, 2
set tics out nomirror scale 0.5
set format cb '%g'
unset key

set multiplot layout 2,1 \
    margins screen 0.190476, 0.761905, 0.144186, 0.911628 \
    spacing screen 0.038095, 0.097674

# panel (0, 0)
set title 'example 0, valid_len 3'
set format x ''; unset xlabel
set format y '%g'; set ylabel 'Queries'
unset colorbox
plot data index 0 matrix with @cells

# panel (1, 0)
set title 'example 1, valid_len 0'
set format x '%g'; set xlabel 'Keys (the last one: zeros)'
set format y '%g'; set ylabel 'Queries'
# the last panel draws the one colour box, right of the grid
set colorbox user origin screen 0.804762, 0.144186 size screen 0.042857, 0.767442
plot data index 1 matrix with @cells

unset multiplot
unset output
