# Attention weights: a 1 x 4 grid of (6, 6) panels from 15_rope_heads.dat,
# drawn on one colour scale.  Render beside this script with
#     gnuplot -e "fmt='png'" 15_rope_heads.gp    (fmt: 'png' or 'svg')
if (!exists("fmt")) fmt = 'png'
# the data and the image live beside this script, wherever gnuplot runs:
# ARG0 is the script's path as gnuplot was given it
here = ''
do for [i = 1:strlen(ARG0)] { if (ARG0[i:i] eq '/') { here = ARG0[1:i] } }
data = here . '15_rope_heads.dat'
if (!exists("out")) out = here . '15_rope_heads.' . fmt
if (fmt eq 'svg') {
    set terminal svg size 1188,340 font 'sans,11' noenhanced background '#ffffff'
} else { if (fmt eq 'png') {
    set terminal pngcairo size 1188,340 font 'sans,11' noenhanced background '#ffffff'
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
set cbrange [0:0.6405445221953828]
# cell (k, q) is the unit square centred on key k, query q; query 0 on top,
# as in the matrix
set xrange [-0.5:5.5]
set yrange [5.5:-0.5]
set xtics 0, 1, 5
set ytics 0, 1, 5
set tics out nomirror scale 0.5
set format cb '%g'
unset key

set multiplot layout 1,4 \
    margins screen 0.067340, 0.915825, 0.182353, 0.888235 \
    spacing screen 0.013468, 0.123529

# panel (0, 0)
set title 'head 0'
set format x '%g'; set xlabel 'Keys'
set format y '%g'; set ylabel 'Queries'
unset colorbox
plot data index 0 matrix with @cells

# panel (0, 1)
set title 'head 1'
set format x '%g'; set xlabel 'Keys'
set format y ''; unset ylabel
plot data index 1 matrix with @cells

# panel (0, 2)
set title 'head 2'
set format x '%g'; set xlabel 'Keys'
set format y ''; unset ylabel
plot data index 2 matrix with @cells

# panel (0, 3)
set title 'head 3'
set format x '%g'; set xlabel 'Keys'
set format y ''; unset ylabel
# the last panel draws the one colour box, right of the grid
set colorbox user origin screen 0.930976, 0.182353 size screen 0.015152, 0.705882
plot data index 3 matrix with @cells

unset multiplot
unset output
