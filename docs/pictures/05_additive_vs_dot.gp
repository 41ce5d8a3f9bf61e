# Attention weights: a 2 x 2 grid of (1, 10) panels from 05_additive_vs_dot.dat,
# drawn on one colour scale.  Render beside this script with
#     gnuplot -e "fmt='png'" 05_additive_vs_dot.gp    (fmt: 'png' or 'svg')
if (!exists("fmt")) fmt = 'png'
# the data and the image live beside this script, wherever gnuplot runs:
# ARG0 is the script's path as gnuplot was given it
here = ''
do for [i = 1:strlen(ARG0)] { if (ARG0[i:i] eq '/') { here = ARG0[1:i] } }
data = here . '05_additive_vs_dot.dat'
if (!exists("out")) out = here . '05_additive_vs_dot.' . fmt
if (fmt eq 'svg') {
    set terminal svg size 676,260 font 'sans,11' noenhanced background '#ffffff'
} else { if (fmt eq 'png') {
    set terminal pngcairo size 676,260 font 'sans,11' noenhanced background '#ffffff'
} else {
    exit error sprintf("fmt must be 'png' or 'svg', not '%s'", fmt)
} }
set output out
# gnuplot draws an image of 2 x 2 cells or more: a single query or key
# is drawn as boxes, each a hair wider than its cell so that no seam
# shows between neighbours
half = 0.5250
cells = 'boxxyerror fs solid noborder fc palette'

# white to dark red (matplotlib's 'Reds')
set palette defined (0 '#ffffff', 0.125 '#fee0d2', 0.25 '#fcbba1', 0.375 '#fc9272', 0.5 '#fb6a4a', 0.625 '#ef3b2c', 0.75 '#cb181d', 0.875 '#a50f15', 1 '#67000d')
# one colour scale for every panel: from 0 (white, exactly 0) to the
# largest weight
set cbrange [0:0.9214554913818744]
# cell (k, q) is the unit square centred on key k, query q; query 0 on top,
# as in the matrix
set xrange [-0.5:9.5]
set yrange [0.5:-0.5]
set xtics 0, 1, 9
set ytics 0, 1, 0
set tics out nomirror scale 0.5
set format cb '%g'
unset key

set multiplot layout 2,2 \
    margins screen 0.118343, 0.852071, 0.373077, 0.719231 \
    spacing screen 0.023669, 0.161538

# panel (0, 0)
set title 'additive, example 0'
set format x ''; unset xlabel
set format y '%g'; set ylabel 'Queries'
unset colorbox
plot data index 0 matrix using 1:2:(half):(half):3 with @cells

# panel (0, 1)
set title 'additive, example 1'
set format x ''; unset xlabel
set format y ''; unset ylabel
plot data index 1 matrix using 1:2:(half):(half):3 with @cells

# panel (1, 0)
set title 'dot product, example 0'
set format x '%g'; set xlabel 'Keys'
set format y '%g'; set ylabel 'Queries'
plot data index 2 matrix using 1:2:(half):(half):3 with @cells

# panel (1, 1)
set title 'dot product, example 1'
set format x '%g'; set xlabel 'Keys'
set format y ''; unset ylabel
# the last panel draws the one colour box, right of the grid
set colorbox user origin screen 0.878698, 0.238462 size screen 0.026627, 0.615385
plot data index 3 matrix using 1:2:(half):(half):3 with @cells

unset multiplot
unset output
