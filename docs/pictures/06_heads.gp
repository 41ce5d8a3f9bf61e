# Attention weights: a 1 x 8 grid of (2, 2) panels from 06_heads.dat,
# drawn on one colour scale.  Render beside this script with
#     gnuplot -e "fmt='png'" 06_heads.gp    (fmt: 'png' or 'svg')
if (!exists("fmt")) fmt = 'png'
# the data and the image live beside this script, wherever gnuplot runs:
# ARG0 is the script's path as gnuplot was given it
here = ''
do for [i = 1:strlen(ARG0)] { if (ARG0[i:i] eq '/') { here = ARG0[1:i] } }
data = here . '06_heads.dat'
if (!exists("out")) out = here . '06_heads.' . fmt
if (fmt eq 'svg') {
    set terminal svg size 1252,290 font 'sans,11' noenhanced background '#ffffff'
} else { if (fmt eq 'png') {
    set terminal pngcairo size 1252,290 font 'sans,11' noenhanced background '#ffffff'
} else {
    exit error sprintf("fmt must be 'png' or 'svg', not '%s'", fmt)
} }
set output out
# a PNG gets each panel as one bitmap, scaled without smoothing;
# an SVG a rectangle per cell, since SVG viewers smooth bitmaps
cells = fmt eq 'svg' ? 'image pixels' : 'image'

# white to dark blue (matplotlib's 'Blues')
set palette defined (0 '#f7fbff', 0.125 '#deebf7', 0.25 '#c6dbef', 0.375 '#9ecae1', 0.5 '#6baed6', 0.625 '#4292c6', 0.75 '#2171b5', 0.875 '#08519c', 1 '#08306b')
# one colour scale for every panel: from 0 (white, exactly 0) to the
# largest weight
set cbrange [0:31]
# cell (k, q) is the unit square centred on key k, query q; query 0 on top,
# as in the matrix
set xrange [-0.5:1.5]
set yrange [1.5:-0.5]
set xtics 0, 1, 1
set ytics 0, 1, 1
set tics out nomirror scale 0.5
set format cb '%g'
unset key

set multiplot layout 1,8 title '(8, 2, 2): where the numbers 0 to 31 land' font ',13' \
    margins screen 0.063898, 0.920128, 0.282759, 0.696552 \
    spacing screen 0.012780, 0.144828

# panel (0, 0)
set title 'head 0'
set format x '%g'; set xlabel 'feature'
set format y '%g'; set ylabel 'position'
unset colorbox
plot data index 0 matrix with @cells

# panel (0, 1)
set title 'head 1'
set format x '%g'; set xlabel 'feature'
set format y ''; unset ylabel
plot data index 1 matrix with @cells

# panel (0, 2)
set title 'head 2'
set format x '%g'; set xlabel 'feature'
set format y ''; unset ylabel
plot data index 2 matrix with @cells

# panel (0, 3)
set title 'head 3'
set format x '%g'; set xlabel 'feature'
set format y ''; unset ylabel
plot data index 3 matrix with @cells

# panel (0, 4)
set title 'head 4'
set format x '%g'; set xlabel 'feature'
set format y ''; unset ylabel
plot data index 4 matrix with @cells

# panel (0, 5)
set title 'head 5'
set format x '%g'; set xlabel 'feature'
set format y ''; unset ylabel
plot data index 5 matrix with @cells

# panel (0, 6)
set title 'head 6'
set format x '%g'; set xlabel 'feature'
set format y ''; unset ylabel
plot data index 6 matrix with @cells

# panel (0, 7)
set title 'head 7'
set format x '%g'; set xlabel 'feature'
set format y ''; unset ylabel
# the last panel draws the one colour box, right of the grid
set colorbox user origin screen 0.934505, 0.213793 size screen 0.014377, 0.551724
plot data index 7 matrix with @cells

unset multiplot
unset output
