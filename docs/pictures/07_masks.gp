# Attention weights: a 1 x 2 grid of (6, 4) panels from 07_masks.dat,
# drawn on one colour scale.  Render beside this script with
#     gnuplot -e "fmt='png'" 07_masks.gp    (fmt: 'png' or 'svg')
if (!exists("fmt")) fmt = 'png'
# the data and the image live beside this script, wherever gnuplot runs:
# ARG0 is the script's path as gnuplot was given it
here = ''
do for [i = 1:strlen(ARG0)] { if (ARG0[i:i] eq '/') { here = ARG0[1:i] } }
data = here . '07_masks.dat'
if (!exists("out")) out = here . '07_masks.' . fmt
if (fmt eq 'svg') {
    set terminal svg size 516,340 font 'sans,11' noenhanced background '#ffffff'
} else { if (fmt eq 'png') {
    set terminal pngcairo size 516,340 font 'sans,11' noenhanced background '#ffffff'
} else {
    exit error sprintf("fmt must be 'png' or 'svg', not '%s'", fmt)
} }
set output out
# a PNG gets each panel as one bitmap, scaled without smoothing;
# an SVG a rectangle per cell, since SVG viewers smooth bitmaps
cells = fmt eq 'svg' ? 'image pixels' : 'image'

# white to black (matplotlib's 'Greys')
set palette defined (0 '#ffffff', 0.125 '#f0f0f0', 0.25 '#d9d9d9', 0.375 '#bdbdbd', 0.5 '#969696', 0.625 '#737373', 0.75 '#525252', 0.875 '#252525', 1 '#000000')
# one colour scale for every panel: from 0 (white, exactly 0) to the
# largest weight
set cbrange [0:1]
# cell (k, q) is the unit square centred on key k, query q; query 0 on top,
# as in the matrix
set xrange [-0.5:3.5]
set yrange [5.5:-0.5]
set xtics 0, 1, 3
set ytics 0, 1, 5
set tics out nomirror scale 0.5
set format cb '%g'
unset key

set multiplot layout 1,2 \
    margins screen 0.155039, 0.806202, 0.182353, 0.888235 \
    spacing screen 0.031008, 0.123529

# panel (0, 0)
set title 'repeat_interleave'
set format x '%g'; set xlabel 'Keys'
set format y '%g'; set ylabel 'row b*h+i'
unset colorbox
plot data index 0 matrix with @cells

# panel (0, 1)
set title 'tile'
set format x '%g'; set xlabel 'Keys'
set format y ''; unset ylabel
# the last panel draws the one colour box, right of the grid
set colorbox user origin screen 0.841085, 0.182353 size screen 0.034884, 0.705882
plot data index 1 matrix with @cells

unset multiplot
unset output
