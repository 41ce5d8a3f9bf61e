# Attention weights: a 3 x 8 grid of (6, 6) panels from 17_heads.dat,
# drawn on one colour scale.  Render beside this script with
#     gnuplot -e "fmt='png'" 17_heads.gp    (fmt: 'png' or 'svg')
if (!exists("fmt")) fmt = 'png'
# the data and the image live beside this script, wherever gnuplot runs:
# ARG0 is the script's path as gnuplot was given it
here = ''
do for [i = 1:strlen(ARG0)] { if (ARG0[i:i] eq '/') { here = ARG0[1:i] } }
data = here . '17_heads.dat'
if (!exists("out")) out = here . '17_heads.' . fmt
if (fmt eq 'svg') {
    set terminal svg size 1252,544 font 'sans,11' noenhanced background '#ffffff'
} else { if (fmt eq 'png') {
    set terminal pngcairo size 1252,544 font 'sans,11' noenhanced background '#ffffff'
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
set cbrange [0:0.9275546173310124]
# cell (k, q) is the unit square centred on key k, query q; query 0 on top,
# as in the matrix
set xrange [-0.5:5.5]
set yrange [5.5:-0.5]
set xtics 0, 1, 5
set ytics 0, 1, 5
set tics out nomirror scale 0.5
set format cb '%g'
unset key

set multiplot layout 3,8 \
    margins screen 0.063898, 0.920128, 0.113971, 0.930147 \
    spacing screen 0.012780, 0.077206

# panel (0, 0)
set title 'G=8 head 0: kv 0'
set format x ''; unset xlabel
set format y '%g'; set ylabel 'Queries'
unset colorbox
plot data index 0 matrix with @cells

# panel (0, 1)
set title 'G=8 head 1: kv 1'
set format x ''; unset xlabel
set format y ''; unset ylabel
plot data index 1 matrix with @cells

# panel (0, 2)
set title 'G=8 head 2: kv 2'
set format x ''; unset xlabel
set format y ''; unset ylabel
plot data index 2 matrix with @cells

# panel (0, 3)
set title 'G=8 head 3: kv 3'
set format x ''; unset xlabel
set format y ''; unset ylabel
plot data index 3 matrix with @cells

# panel (0, 4)
set title 'G=8 head 4: kv 4'
set format x ''; unset xlabel
set format y ''; unset ylabel
plot data index 4 matrix with @cells

# panel (0, 5)
set title 'G=8 head 5: kv 5'
set format x ''; unset xlabel
set format y ''; unset ylabel
plot data index 5 matrix with @cells

# panel (0, 6)
set title 'G=8 head 6: kv 6'
set format x ''; unset xlabel
set format y ''; unset ylabel
plot data index 6 matrix with @cells

# panel (0, 7)
set title 'G=8 head 7: kv 7'
set format x ''; unset xlabel
set format y ''; unset ylabel
plot data index 7 matrix with @cells

# panel (1, 0)
set title 'G=2 head 0: kv 0'
set format x ''; unset xlabel
set format y '%g'; set ylabel 'Queries'
plot data index 8 matrix with @cells

# panel (1, 1)
set title 'G=2 head 1: kv 0'
set format x ''; unset xlabel
set format y ''; unset ylabel
plot data index 9 matrix with @cells

# panel (1, 2)
set title 'G=2 head 2: kv 0'
set format x ''; unset xlabel
set format y ''; unset ylabel
plot data index 10 matrix with @cells

# panel (1, 3)
set title 'G=2 head 3: kv 0'
set format x ''; unset xlabel
set format y ''; unset ylabel
plot data index 11 matrix with @cells

# panel (1, 4)
set title 'G=2 head 4: kv 1'
set format x ''; unset xlabel
set format y ''; unset ylabel
plot data index 12 matrix with @cells

# panel (1, 5)
set title 'G=2 head 5: kv 1'
set format x ''; unset xlabel
set format y ''; unset ylabel
plot data index 13 matrix with @cells

# panel (1, 6)
set title 'G=2 head 6: kv 1'
set format x ''; unset xlabel
set format y ''; unset ylabel
plot data index 14 matrix with @cells

# panel (1, 7)
set title 'G=2 head 7: kv 1'
set format x ''; unset xlabel
set format y ''; unset ylabel
plot data index 15 matrix with @cells

# panel (2, 0)
set title 'G=1 head 0: kv 0'
set format x '%g'; set xlabel 'Keys'
set format y '%g'; set ylabel 'Queries'
plot data index 16 matrix with @cells

# panel (2, 1)
set title 'G=1 head 1: kv 0'
set format x '%g'; set xlabel 'Keys'
set format y ''; unset ylabel
plot data index 17 matrix with @cells

# panel (2, 2)
set title 'G=1 head 2: kv 0'
set format x '%g'; set xlabel 'Keys'
set format y ''; unset ylabel
plot data index 18 matrix with @cells

# panel (2, 3)
set title 'G=1 head 3: kv 0'
set format x '%g'; set xlabel 'Keys'
set format y ''; unset ylabel
plot data index 19 matrix with @cells

# panel (2, 4)
set title 'G=1 head 4: kv 0'
set format x '%g'; set xlabel 'Keys'
set format y ''; unset ylabel
plot data index 20 matrix with @cells

# panel (2, 5)
set title 'G=1 head 5: kv 0'
set format x '%g'; set xlabel 'Keys'
set format y ''; unset ylabel
plot data index 21 matrix with @cells

# panel (2, 6)
set title 'G=1 head 6: kv 0'
set format x '%g'; set xlabel 'Keys'
set format y ''; unset ylabel
plot data index 22 matrix with @cells

# panel (2, 7)
set title 'G=1 head 7: kv 0'
set format x '%g'; set xlabel 'Keys'
set format y ''; unset ylabel
# the last panel draws the one colour box, right of the grid
set colorbox user origin screen 0.934505, 0.113971 size screen 0.014377, 0.816176
plot data index 23 matrix with @cells

unset multiplot
unset output
