# Attention weights: a 1 x 2 grid of (3, 5) panels from 02_linear.dat,
# drawn on one colour scale.  Render beside this script with
#     gnuplot -e "fmt='png'" 02_linear.gp    (fmt: 'png' or 'svg')
if (!exists("fmt")) fmt = 'png'
# the data and the image live beside this script, wherever gnuplot runs:
# ARG0 is the script's path as gnuplot was given it
here = ''
do for [i = 1:strlen(ARG0)] { if (ARG0[i:i] eq '/') { here = ARG0[1:i] } }
data = here . '02_linear.dat'
if (!exists("out")) out = here . '02_linear.' . fmt
if (fmt eq 'svg') {
    set terminal svg size 676,260 font 'sans,11' noenhanced background '#ffffff'
} else { if (fmt eq 'png') {
    set terminal pngcairo size 676,260 font 'sans,11' noenhanced background '#ffffff'
} else {
    exit error sprintf("fmt must be 'png' or 'svg', not '%s'", fmt)
} }
set output out
# a PNG gets each panel as one bitmap, scaled without smoothing;
# an SVG a rectangle per cell, since SVG viewers smooth bitmaps
cells = fmt eq 'svg' ? 'image pixels' : 'image'

# dark purple to yellow (matplotlib's 'viridis')
set palette defined (0 '#440154', 0.125 '#472d7b', 0.25 '#3b528b', 0.375 '#2c728e', 0.5 '#21918c', 0.625 '#28ae80', 0.75 '#5ec962', 0.875 '#addc30', 1 '#fde725')
# one colour scale for every panel: the smallest and the largest weight
set cbrange [-1.3267985461861826:0.9785014220979065]
# cell (k, q) is the unit square centred on key k, query q; query 0 on top,
# as in the matrix
set xrange [-0.5:4.5]
set yrange [2.5:-0.5]
set xtics 0, 1, 4
set ytics 0, 1, 2
set tics out nomirror scale 0.5
set format cb '%g'
unset key

set multiplot layout 1,2 \
    margins screen 0.118343, 0.852071, 0.269231, 0.823077 \
    spacing screen 0.023669, 0.161538

# panel (0, 0)
set title 'y[0], sequence 0'
set format x '%g'; set xlabel 'output feature'
set format y '%g'; set ylabel 'position'
unset colorbox
plot data index 0 matrix with @cells

# panel (0, 1)
set title 'y[1], sequence 1'
set format x '%g'; set xlabel 'output feature'
set format y ''; unset ylabel
# the last panel draws the one colour box, right of the grid
set colorbox user origin screen 0.878698, 0.238462 size screen 0.026627, 0.615385
plot data index 1 matrix with @cells

unset multiplot
unset output
