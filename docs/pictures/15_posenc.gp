# Attention weights: a 1 x 1 grid of (60, 32) panels from 15_posenc.dat,
# drawn on one colour scale.  Render beside this script with
#     gnuplot -e "fmt='png'" 15_posenc.gp    (fmt: 'png' or 'svg')
if (!exists("fmt")) fmt = 'png'
# the data and the image live beside this script, wherever gnuplot runs:
# ARG0 is the script's path as gnuplot was given it
here = ''
do for [i = 1:strlen(ARG0)] { if (ARG0[i:i] eq '/') { here = ARG0[1:i] } }
data = here . '15_posenc.dat'
if (!exists("out")) out = here . '15_posenc.' . fmt
if (fmt eq 'svg') {
    set terminal svg size 420,640 font 'sans,11' noenhanced background '#ffffff'
} else { if (fmt eq 'png') {
    set terminal pngcairo size 420,640 font 'sans,11' noenhanced background '#ffffff'
} else {
    exit error sprintf("fmt must be 'png' or 'svg', not '%s'", fmt)
} }
set output out
# a PNG gets each panel as one bitmap, scaled without smoothing;
# an SVG a rectangle per cell, since SVG viewers smooth bitmaps
cells = fmt eq 'svg' ? 'image pixels' : 'image'

# white to dark blue (matplotlib's 'Blues')
set palette defined (0 '#f7fbff', 0.125 '#deebf7', 0.25 '#c6dbef', 0.375 '#9ecae1', 0.5 '#6baed6', 0.625 '#4292c6', 0.75 '#2171b5', 0.875 '#08519c', 1 '#08306b')
# one colour scale for every panel: the smallest and the largest weight
set cbrange [-0.9999999947045152:1]
# cell (k, q) is the unit square centred on key k, query q; query 0 on top,
# as in the matrix
set xrange [-0.5:31.5]
set yrange [59.5:-0.5]
set xtics 0, 5, 31
set ytics 0, 5, 59
set tics out nomirror scale 0.5
set format cb '%g'
unset key

set multiplot layout 1,1 \
    margins screen 0.190476, 0.761905, 0.185937, 0.889062 \
    spacing screen 0.038095, 0.028125

# panel (0, 0)
unset title
set format x '%g'; set xlabel 'column j'
set format y '%g'; set ylabel 'position i'
# the last panel draws the one colour box, right of the grid
set colorbox user origin screen 0.804762, 0.185937 size screen 0.042857, 0.703125
plot data index 0 matrix with @cells

unset multiplot
unset output
