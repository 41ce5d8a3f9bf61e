//> 08
/* explorer.js: the script of the page explorer.c writes (the Makefile
 * builds it in, without its chapter marks).  It reads the JSON in
 * #mha-data and draws every view as inline SVG:
 *
 *   D.w    the weights (B, h, Lq, Lk), row after row
 *   D.lo, D.hi   the keys row (b, q) sees: lo <= k < hi, (B, Lq), and
 *                with D.first (a window that keeps the first keys) also
 *                k < first
 *   D.trace      the module's trace records (trace.h's JSON)
 *   D.numbers    each step of the split and join, run on numbered inputs
 *                (plot/numbers.h)
 *
 * Nothing is fetched: the page works from a file with no network. */
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("mha-data").textContent);
  var B = D.B, H = D.h, G = D.G || D.h, Lq = D.Lq, Lk = D.Lk;
  var WIN = 64; // positions the head view shows at once
  var NS = "http://www.w3.org/2000/svg";
  var app = document.getElementById("app");
  var state = { b: 0, on: [], query: -1, q0: 0, k0: 0 };
  for (var i0 = 0; i0 < H; i0++) state.on.push(true);

  var maxW = 0;
  for (var n = 0; n < D.w.length; n++) if (D.w[n] > maxW) maxW = D.w[n];
  if (!(maxW > 0)) maxW = 1;

  function W(b, i, q, k) { return D.w[((b * H + i) * Lq + q) * Lk + k]; }
  function seen(b, q, k) {
    var r = b * Lq + q;
    return k >= D.lo[r] && k < D.hi[r] || D.first !== undefined && k < D.first[r];
  }
  // the keys row (b, q) sees: how many, and which, in words ("keys 0 to 2",
  // "key 0 and keys 3 to 4")
  function seenCount(b, q) {
    var r = b * Lq + q;
    return Math.max(0, D.hi[r] - D.lo[r]) + (D.first ? D.first[r] : 0);
  }
  function seenText(b, q) {
    var r = b * Lq + q, parts = [];
    function range(lo, hi) {
      if (hi > lo) parts.push(hi - lo === 1 ? "key " + lo : "keys " + lo + " to " + (hi - 1));
    }
    if (D.first) range(0, D.first[r]);
    range(D.lo[r], D.hi[r]);
    return parts.length ? parts.join(" and ") : "no key";
  }
  function fmt(v) { return v.toFixed(3); }

  // one colour per head: Tableau's ten, then evenly spaced hues
  var PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                 "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];
  function colour(i) {
    return H <= PALETTE.length ? PALETTE[i]
                               : "hsl(" + Math.round(360 * i / H) + ", 65%, 45%)";
  }
  // the one scale of every heatmap: white (0) to dark blue (the largest weight)
  function shade(v) {
    var t = Math.max(0, Math.min(1, v / maxW));
    var r = Math.round(255 - t * (255 - 8)), g = Math.round(255 - t * (255 - 48)),
        b = Math.round(255 - t * (255 - 107));
    return "rgb(" + r + "," + g + "," + b + ")";
  }

  function svg(name, attrs, parent, text) {
    var e = document.createElementNS(NS, name);
    for (var a in attrs) e.setAttribute(a, attrs[a]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function html(name, attrs, parent, text) {
    var e = document.createElement(name);
    for (var a in attrs) e.setAttribute(a, attrs[a]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); }
  function shapeStr(s) {
    return "(" + s.join(", ") + (s.length === 1 ? ",)" : ")");
  }
  // the hatching of masked keys, defined in each SVG that uses it (a
  // saved SVG must carry its own)
  function hatch(root) {
    var defs = svg("defs", {}, root);
    var p = svg("pattern", { id: root.id + "-masked", width: 6, height: 6,
                             patternUnits: "userSpaceOnUse",
                             patternTransform: "rotate(45)" }, defs);
    svg("rect", { width: 6, height: 6, fill: "#e4e4e4" }, p);
    svg("line", { x1: 0, y1: 0, x2: 0, y2: 6, stroke: "#999", "stroke-width": 2 }, p);
    return "url(#" + root.id + "-masked)";
  }

  // --- saving a view ----------------------------------------------------
  // the page's rules (explorer.css) that draw a picture, for a saved copy:
  // without them its text falls back to the viewer's default, larger, and
  // runs over its neighbours
  var SVG_STYLE = "text{font:12px system-ui,sans-serif}.qlabel.active{font-weight:bold}" +
      ".klabel.masked{fill:#aaa;text-decoration:line-through}line.attn.dim{display:none}" +
      ".panel.off{opacity:.2}";
  function svgText(root) {
    var copy = root.cloneNode(true);
    copy.setAttribute("xmlns", NS);
    copy.removeAttribute("class");
    if (!copy.querySelector("style")) // a picture with its own style keeps it
      copy.insertBefore(svg("style", {}, null, SVG_STYLE), copy.firstChild);
    return '<?xml version="1.0" encoding="UTF-8"?>\n' +
           new XMLSerializer().serializeToString(copy);
  }
  function download(blob, name) {
    var a = html("a", { href: URL.createObjectURL(blob), download: name }, document.body);
    a.click();
    setTimeout(function () { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
  }
  function saveSvg(root, name) {
    download(new Blob([svgText(root)], { type: "image/svg+xml" }), name + ".svg");
  }
  function savePng(root, name) {
    var img = new Image();
    var url = URL.createObjectURL(new Blob([svgText(root)], { type: "image/svg+xml" }));
    img.onload = function () {
      var c = document.createElement("canvas"), scale = 2;
      c.width = root.width.baseVal.value * scale;
      c.height = root.height.baseVal.value * scale;
      var g = c.getContext("2d");
      g.fillStyle = "#fff";
      g.fillRect(0, 0, c.width, c.height);
      g.scale(scale, scale);
      g.drawImage(img, 0, 0);
      URL.revokeObjectURL(url);
      c.toBlob(function (blob) { download(blob, name + ".png"); }, "image/png");
    };
    img.src = url;
  }
  function saves(section, getRoot, name) {
    var box = html("span", { "class": "saves" }, section);
    html("button", { type: "button", "class": "save-svg" }, box, "save SVG")
      .addEventListener("click", function () { saveSvg(getRoot(), name); });
    html("button", { type: "button", "class": "save-png" }, box, "save PNG")
      .addEventListener("click", function () { savePng(getRoot(), name); });
  }
  // a section of the page: its title, then, when it has a picture (the
  // one getRoot returns), the buttons that save it as name and a line of
  // help
  function section(id, title, getRoot, name, help) {
    var s = html("section", { id: id }, app);
    html("h2", {}, s, title);
    if (getRoot) {
      saves(s, getRoot, name);
      html("p", { "class": "help" }, s, help);
    }
    return s;
  }

  // --- the summary and the controls ---------------------------------------
  var p = D.p ? D.p : "p";
  var summary = "B = " + B + " example" + (B > 1 ? "s" : "") + ", " + H +
      " head" + (H > 1 ? "s" : "") + (G < H ? " over " + G + " key-value head" +
      (G > 1 ? "s" : "") : "") + ", " + Lq + " quer" + (Lq > 1 ? "ies" : "y") +
      " and " + Lk + " key" + (Lk > 1 ? "s" : "") + rule() +
      ": weights (" + B + ", " + H + ", " + Lq + ", " + Lk + "), the largest " +
      fmt(maxW) + ".";
  html("p", { id: "summary" }, app, summary);
  // what the module did to the scores: causal, a window (causal too), the
  // first keys kept, ALiBi, sinks
  function rule() {
    return (D.window ? ", window " + D.window + (D.keep ? ", keep-first " + D.keep : "")
                     : D.causal ? ", causal" : "") +
        (D.alibi ? ", ALiBi" : "") + (D.sinks ? ", a sink per head" : "");
  }
  var bar = html("div", { "class": "bar", id: "controls" }, app);
  if (B > 1) {
    var lab = html("label", {}, bar, "example ");
    var sel = html("select", { id: "example" }, lab);
    for (var b0 = 0; b0 < B; b0++) html("option", { value: b0 }, sel, String(b0));
    sel.addEventListener("change", function () { state.b = +sel.value; state.query = -1; draw(); });
  }
  var heads = html("span", { id: "heads" }, bar, "heads: ");
  for (var i1 = 0; i1 < H; i1++) (function (i) {
    var l = html("label", {}, heads);
    var cb = html("input", { type: "checkbox", "data-head": i }, l);
    cb.checked = true;
    html("span", { "class": "swatch", style: "background:" + colour(i) }, l);
    l.appendChild(document.createTextNode(String(i) + " "));
    cb.addEventListener("change", function () { state.on[i] = cb.checked; draw(); });
  })(i1);
  function allHeads(on) {
    var boxes = heads.querySelectorAll("input");
    for (var i = 0; i < H; i++) { state.on[i] = on; boxes[i].checked = on; }
    draw();
  }
  html("button", { type: "button" }, bar, "all").addEventListener("click", function () { allHeads(true); });
  html("button", { type: "button" }, bar, "none").addEventListener("click", function () { allHeads(false); });

  // --- 1. the head view ----------------------------------------------------
  var hv = section("head-view", "Head view", function () { return hvSvg; }, "head-view",
       "Queries on the left, keys on the right. A line joins a query to each key it " +
       "sees, as wide and as dark as its weight, in its head's colour. Hover a query " +
       "to keep only its lines and read its row of weights (they stay until you hover " +
       "another query, or the word queries for all of them); a key it does not see " +
       "is struck through.");
  var thumbBox = html("div", { id: "hv-thumb" }, hv);
  var hvSvg = svg("svg", { id: "hv-svg" }, hv);
  // room for the row's table, so that the page below does not move
  var hvRow = html("div", { id: "hv-row", style: "min-height:" + (1.6 * (H + 4)) + "em" }, hv);

  function windowed() { return Lq > WIN || Lk > WIN; }
  function drawThumb() {
    clear(thumbBox);
    if (!windowed()) return;
    html("p", { "class": "help" }, thumbBox,
         "More than " + WIN + " positions: the lines show queries " + state.q0 + "-" +
         (Math.min(Lq, state.q0 + WIN) - 1) + " and keys " + state.k0 + "-" +
         (Math.min(Lk, state.k0 + WIN) - 1) + ", the square on this thumbnail of the " +
         "mean over the heads shown. Click the thumbnail to move it.");
    var c = html("canvas", { "class": "thumb", width: Lk, height: Lq, id: "thumb" }, thumbBox);
    var scale = Math.max(1, Math.floor(240 / Math.max(Lq, Lk)));
    c.style.width = Lk * scale + "px";
    c.style.height = Lq * scale + "px";
    var g = c.getContext("2d"), img = g.createImageData(Lk, Lq), on = 0;
    for (var i = 0; i < H; i++) if (state.on[i]) on++;
    for (var q = 0; q < Lq; q++)
      for (var k = 0; k < Lk; k++) {
        var s = 0;
        for (var h = 0; h < H; h++) if (state.on[h]) s += W(state.b, h, q, k);
        var rgb = seen(state.b, q, k) ? shade(on ? s / on : 0).match(/\d+/g) : [200, 200, 200];
        var o = 4 * (q * Lk + k);
        img.data[o] = +rgb[0]; img.data[o + 1] = +rgb[1]; img.data[o + 2] = +rgb[2];
        img.data[o + 3] = 255;
      }
    g.putImageData(img, 0, 0);
    g.strokeStyle = "#e00";
    g.lineWidth = 1;
    g.strokeRect(state.k0 + 0.5, state.q0 + 0.5, Math.min(WIN, Lk) - 1, Math.min(WIN, Lq) - 1);
    c.addEventListener("click", function (ev) {
      var r = c.getBoundingClientRect();
      var k = Math.floor((ev.clientX - r.left) / r.width * Lk);
      var q = Math.floor((ev.clientY - r.top) / r.height * Lq);
      state.q0 = Math.max(0, Math.min(Lq - Math.min(WIN, Lq), q - WIN / 2));
      state.k0 = Math.max(0, Math.min(Lk - Math.min(WIN, Lk), k - WIN / 2));
      state.query = -1;
      draw();
    });
  }

  function drawHeadView() {
    clear(hvSvg);
    var nq = Math.min(Lq, WIN), nk = Math.min(Lk, WIN), rowH = 22;
    var width = 720, xq = 200, xk = 520;
    var height = 30 + rowH * Math.max(nq, nk);
    hvSvg.setAttribute("width", width);
    hvSvg.setAttribute("height", height);
    hvSvg.setAttribute("viewBox", "0 0 " + width + " " + height);
    svg("rect", { width: width, height: height, fill: "#fff" }, hvSvg);
    svg("text", { x: xq, y: 14, "text-anchor": "end", "font-weight": "bold", "class": "qall" },
        hvSvg, "queries").addEventListener("mouseenter", function () { showQuery(-1); });
    svg("text", { x: xk, y: 14, "font-weight": "bold" }, hvSvg, "keys");
    function yq(q) { return 30 + rowH * (q - state.q0) + rowH / 2; }
    function yk(k) { return 30 + rowH * (k - state.k0) + rowH / 2; }
    var lines = svg("g", { id: "hv-lines" }, hvSvg);
    for (var h = 0; h < H; h++) {
      if (!state.on[h]) continue;
      for (var q = state.q0; q < state.q0 + nq; q++)
        for (var k = state.k0; k < state.k0 + nk; k++) {
          var v = W(state.b, h, q, k);
          if (!seen(state.b, q, k) || v < 0.005) continue;
          svg("line", { "class": "attn", "data-q": q, "data-k": k, "data-head": h,
                        x1: xq + 6, y1: yq(q), x2: xk - 6, y2: yk(k),
                        stroke: colour(h), "stroke-opacity": Math.min(1, v / maxW),
                        "stroke-width": 0.5 + 3.5 * v / maxW }, lines);
        }
    }
    for (var q1 = state.q0; q1 < state.q0 + nq; q1++) (function (q) {
      var t = svg("text", { "class": "qlabel", "data-q": q, x: xq, y: yq(q) + 4,
                            "text-anchor": "end" }, hvSvg, D.queries[q]);
      t.addEventListener("mouseenter", function () { showQuery(q); });
    })(q1);
    for (var k1 = state.k0; k1 < state.k0 + nk; k1++)
      svg("text", { "class": "klabel", "data-k": k1, x: xk, y: yk(k1) + 4 }, hvSvg, D.keys[k1]);
    showQuery(state.query);
  }

  // hovering query q: its lines alone, its row of weights under the picture
  function showQuery(q) {
    state.query = q;
    hvSvg.setAttribute("data-query", q);
    var ls = hvSvg.querySelectorAll("line.attn");
    for (var n = 0; n < ls.length; n++)
      ls[n].classList.toggle("dim", q >= 0 && +ls[n].getAttribute("data-q") !== q);
    var qs = hvSvg.querySelectorAll(".qlabel");
    for (n = 0; n < qs.length; n++)
      qs[n].classList.toggle("active", +qs[n].getAttribute("data-q") === q);
    var ks = hvSvg.querySelectorAll(".klabel");
    for (n = 0; n < ks.length; n++)
      ks[n].classList.toggle("masked", q >= 0 && !seen(state.b, q, +ks[n].getAttribute("data-k")));
    clear(hvRow);
    if (q < 0) {
      html("p", { "class": "help" }, hvRow, "Hover a query to read its weights.");
      return;
    }
    html("p", { id: "hv-says" }, hvRow, "Example " + state.b + ", query " + D.queries[q] +
         " (position " + q + "): it sees " + seenText(state.b, q) + "; " +
         (D.sinks ? "each head's weights sum to less than 1: the rest goes to the " +
                    "head's sink (the last column)."
                  : "each head's weights sum to 1."));
    var t = html("table", { "class": "row", id: "hv-table" }, hvRow);
    var tr = html("tr", {}, t);
    html("th", {}, tr, "head \\ key");
    var k0 = state.k0, nk = Math.min(Lk, WIN);
    for (var k = k0; k < k0 + nk; k++) html("th", {}, tr, D.keys[k]);
    if (D.sinks) html("th", {}, tr, "sink");
    for (var h = 0; h < H; h++) {
      if (!state.on[h]) continue;
      tr = html("tr", { "data-head": h }, t);
      var th = html("th", {}, tr);
      html("span", { "class": "swatch", style: "background:" + colour(h) }, th);
      th.appendChild(document.createTextNode(String(h)));
      for (k = k0; k < k0 + nk; k++) {
        var ok = seen(state.b, q, k);
        html("td", { "class": ok ? "w" : "w masked", "data-k": k,
                     title: ok ? "" : "masked: weight exactly 0" },
             tr, ok ? fmt(W(state.b, h, q, k)) : "masked");
      }
      if (D.sinks) { // 1 minus the row's sum, every key's weight counted
        var sum = 0;
        for (k = 0; k < Lk; k++) sum += W(state.b, h, q, k);
        html("td", { "class": "sink", title: "1 minus the row's sum: the sink's share" },
             tr, fmt(Math.max(0, 1 - sum)));
      }
    }
  }

  // --- 2. the grid of heads --------------------------------------------------
  var gr = section("grid", "Grid of heads", function () { return grSvg; }, "heads",
       "One panel per example and head: queries down, keys across, one colour scale " +
       "for every panel. Grey stripes are keys a query does not see (masked: weight " +
       "exactly 0), which a small weight, near white, is not. " +
       (G < H ? "Heads that share a key-value head are boxed together. " : "") +
       "Click a panel to enlarge it.");
  var grSvg = svg("svg", { id: "grid-svg" }, gr);
  var big = html("div", { id: "enlarged", hidden: "" }, document.body);

  // one panel of cell-size c at (x, y) into parent; an image past 64 x 64
  function panel(parent, b, h, x, y, c, hatchUrl, labels) {
    var g = svg("g", { "class": "panel", "data-b": b, "data-head": h,
                       transform: "translate(" + x + "," + y + ")" }, parent);
    if (Lq * Lk > WIN * WIN) {
      var cv = document.createElement("canvas");
      cv.width = Lk; cv.height = Lq;
      var cg = cv.getContext("2d"), img = cg.createImageData(Lk, Lq);
      for (var q = 0; q < Lq; q++)
        for (var k = 0; k < Lk; k++) {
          var rgb = seen(b, q, k) ? shade(W(b, h, q, k)).match(/\d+/g) : [200, 200, 200];
          var o = 4 * (q * Lk + k);
          img.data[o] = +rgb[0]; img.data[o + 1] = +rgb[1]; img.data[o + 2] = +rgb[2];
          img.data[o + 3] = 255;
        }
      cg.putImageData(img, 0, 0);
      svg("image", { width: Lk * c, height: Lq * c, href: cv.toDataURL(),
                     preserveAspectRatio: "none", style: "image-rendering:pixelated" }, g);
    } else {
      for (var q1 = 0; q1 < Lq; q1++)
        for (var k1 = 0; k1 < Lk; k1++) {
          var ok = seen(b, q1, k1), v = W(b, h, q1, k1);
          var r = svg("rect", { x: k1 * c, y: q1 * c, width: c, height: c,
                                fill: ok ? shade(v) : hatchUrl }, g);
          svg("title", {}, r, "query " + D.queries[q1] + ", key " + D.keys[k1] + ": " +
              (ok ? fmt(v) : "masked"));
          if (labels && ok)
            svg("text", { x: k1 * c + c / 2, y: q1 * c + c / 2 + 4, "text-anchor": "middle",
                          fill: v / maxW > 0.55 ? "#fff" : "#000",
                          "pointer-events": "none" }, g, fmt(v));
        }
    }
    svg("rect", { width: Lk * c, height: Lq * c, fill: "none", stroke: "#888" }, g);
    return g;
  }

  function legend(root, x, y, hatchUrl) {
    var grad = svg("linearGradient", { id: root.id + "-scale" }, root.querySelector("defs"));
    for (var s = 0; s <= 4; s++)
      svg("stop", { offset: s / 4, "stop-color": shade(maxW * s / 4) }, grad);
    svg("rect", { x: x, y: y, width: 160, height: 10, fill: "url(#" + root.id + "-scale)",
                  stroke: "#888" }, root);
    svg("text", { x: x, y: y + 24 }, root, "0");
    svg("text", { x: x + 160, y: y + 24, "text-anchor": "end" }, root, fmt(maxW));
    svg("rect", { x: x + 190, y: y, width: 16, height: 10, fill: hatchUrl, stroke: "#888" }, root);
    svg("text", { x: x + 212, y: y + 9 }, root, "masked (not seen)");
  }

  function drawGrid() {
    clear(grSvg);
    var c = Math.max(1, Math.min(16, Math.floor(160 / Math.max(Lq, Lk))));
    var pw = Lk * c, ph = Lq * c, gap = 14, per = H / G;
    var groupGap = G < H ? 12 : 0;
    // at least the legend's width
    var width = Math.max(420, 70 + H * (pw + gap) + G * groupGap), top = G < H ? 36 : 24;
    var rowH = ph + (G < H ? 52 : 40);
    var height = top + B * rowH + 40;
    grSvg.setAttribute("width", width);
    grSvg.setAttribute("height", height);
    grSvg.setAttribute("viewBox", "0 0 " + width + " " + height);
    svg("rect", { width: width, height: height, fill: "#fff" }, grSvg);
    var hatchUrl = hatch(grSvg);
    for (var b = 0; b < B; b++) {
      var y = top + b * rowH + 16;
      svg("text", { x: 0, y: y + ph / 2 }, grSvg, "example " + b);
      for (var h = 0; h < H; h++) {
        var grp = Math.floor(h / per);
        var x = 70 + h * (pw + gap) + grp * groupGap;
        if (G < H && h % per === 0) {
          svg("rect", { x: x - 5, y: y - 17, width: per * (pw + gap) - gap + 10,
                        height: ph + 22, fill: "none", stroke: "#bbb",
                        "stroke-dasharray": "4 3" }, grSvg);
          svg("text", { x: x - 5, y: y - 21, fill: "#666" }, grSvg,
              "key-value head " + grp + ": query heads " + h + "-" + (h + per - 1));
        }
        svg("text", { x: x + pw, y: y - 3, "text-anchor": "end", fill: colour(h) },
              grSvg, "head " + h);
        var g = panel(grSvg, b, h, x, y, c, hatchUrl, false);
        if (!state.on[h]) g.classList.add("off");
        g.addEventListener("click", enlarge.bind(null, b, h));
      }
    }
    legend(grSvg, 70, height - 30, hatchUrl);
  }

  function enlarge(b, h) {
    clear(big);
    big.hidden = false;
    var bar2 = html("div", { "class": "bar" }, big);
    html("strong", {}, bar2, "example " + b + ", head " + h +
         (G < H ? " (key-value head " + Math.floor(h / (H / G)) + ")" : ""));
    html("button", { type: "button", id: "close" }, bar2, "close")
      .addEventListener("click", function () { big.hidden = true; });
    var root = svg("svg", { id: "enlarged-svg" });
    var c = Math.max(2, Math.min(64, Math.floor(560 / Math.max(Lq, Lk))));
    var width = Lk * c + 80, height = Lq * c + 80;
    root.setAttribute("width", width);
    root.setAttribute("height", height);
    root.setAttribute("viewBox", "0 0 " + width + " " + height);
    svg("rect", { width: width, height: height, fill: "#fff" }, root);
    var hatchUrl = hatch(root);
    panel(root, b, h, 60, 20, c, hatchUrl, c >= 36 && Lq <= 16 && Lk <= 16);
    svg("text", { x: 60 + Lk * c / 2, y: Lq * c + 56, "text-anchor": "middle" }, root, "keys");
    svg("text", { x: 2, y: 12 }, root, "queries");
    if (c >= 12) {
      for (var q = 0; q < Lq; q++)
        svg("text", { x: 56, y: 20 + q * c + c / 2 + 4, "text-anchor": "end" }, root, D.queries[q]);
      for (var k = 0; k < Lk; k++)
        svg("text", { x: 60 + k * c + c / 2, y: Lq * c + 36, "text-anchor": "middle" }, root, D.keys[k]);
    }
    saves(bar2, function () { return root; }, "example" + b + "-head" + h);
    big.appendChild(root);
  }

  // --- 3. the dataflow ---------------------------------------------------------
  var df = section("dataflow", "Dataflow", D.trace.length ? function () { return dfSvg; } : null,
       "dataflow",
       "The module's steps as its trace recorded them, in order: each with the shape " +
       "it made and whether it was a view (no number moved), a copy (the same " +
       "numbers in a new order) or new numbers. Hover a step for its shapes; the " +
       "steps that make the weights link to the pictures above.");
  var dfRow = html("div", { "class": "side" }, df);
  var dfSvg = svg("svg", { id: "df-svg" }, dfRow);
  var dfDetail = html("div", { id: "df-detail" }, dfRow);
  var KIND = { view: "#59a14f", copy: "#e15759", "new": "#4e79a7", step: "#777" };
  // the step that makes the weights: a softmax with as many numbers as
  // (B, h, Lq, Lk), however its axes are grouped ((B*h, Lq, Lk), or
  // (B*G, h/G*Lq, Lk) for grouped-query heads)
  function isWeights(r) {
    var s = r.output;
    if (!s || r.name.indexOf("softmax") < 0) return false;
    var n = s.shape.reduce(function (a, d) { return a * d; }, 1);
    return n === B * H * Lq * Lk && s.shape[s.shape.length - 1] === Lk;
  }
  // the names as the text trace prints them: an unnamed dimension by its size
  function names(s) { return s.names.some(function (x) { return x; }) ? " " + shapeStr(s.names.map(function (x, d) { return x || String(s.shape[d]); })) : ""; }
  function drawDataflow() {
    clear(dfSvg);
    var steps = D.trace.filter(function (r) { return r.kind !== "note" && r.depth >= 1; });
    if (!steps.length) {
      dfSvg.setAttribute("width", 0);
      dfSvg.setAttribute("height", 0);
      dfDetail.textContent = "No trace was recorded for this page.";
      return;
    }
    var rowH = 26, width = 780, height = 10 + rowH * steps.length;
    dfSvg.setAttribute("width", width);
    dfSvg.setAttribute("height", height);
    dfSvg.setAttribute("viewBox", "0 0 " + width + " " + height);
    svg("rect", { width: width, height: height, fill: "#fff" }, dfSvg);
    steps.forEach(function (r, n) {
      var x = 10 + 24 * (r.depth - 1), y = 5 + n * rowH;
      var g = svg("g", { "class": "step", "data-seq": r.seq }, dfSvg);
      svg("rect", { "class": "box", x: x, y: y, width: 360 - (x - 10), height: rowH - 6,
                    rx: 4, fill: "#fafafa", stroke: KIND[r.kind] || "#777" }, g);
      svg("text", { x: x + 6, y: y + 14 }, g, r.op.length > 48 ? r.op.slice(0, 47) + "…" : r.op);
      svg("text", { x: 380, y: y + 14, fill: KIND[r.kind] || "#777", "font-weight": "bold" },
          g, r.kind === "step" ? "" : r.kind);
      svg("text", { x: 430, y: y + 14 }, g, r.output ? shapeStr(r.output.shape) : "");
      svg("text", { x: 530, y: y + 14, fill: "#666" }, g, r.output ? names(r.output) : "");
      if (isWeights(r)) {
        var a = svg("a", { "class": "jump", href: "#grid" }, g);
        svg("text", { x: 680, y: y + 14, fill: "#06c", "text-decoration": "underline" }, a,
            "the weights ↑");
      }
      g.addEventListener("mouseenter", function () {
        g.classList.add("hover");
        var ins = r.inputs.map(function (s) {
          return (s.label ? s.label + " " : "") + shapeStr(s.shape) + (s.transposed ? "^T" : "") +
                 names(s) + (s.side ? " (read on the side)" : "");
        });
        dfDetail.textContent = r.op + "   [" + r.kind + "]\n  in:  " + (ins.join("\n       ") || "-") +
          "\n  out: " + (r.output ? shapeStr(r.output.shape) + names(r.output) : "(the steps inside)");
        dfDetail.setAttribute("data-seq", r.seq);
      });
      g.addEventListener("mouseleave", function () { g.classList.remove("hover"); });
    });
    dfDetail.textContent = "Hover a step to see its input and output shapes.";
  }

  // --- 4. decoding, for causal attention ----------------------------------------
  var dec = null, decSvg = null, slider = null, decText = null;
  if (D.causal) {
    dec = section("decoding", "Decoding step by step", function () { return decSvg; },
         "decoding",
         "Causal attention generates one position at a time: at each step the new " +
         "position's key and value join the cache and its query attends to " +
         (D.window ? "the last " + D.window + " keys cached so far (its window)" +
                     (D.keep ? " and the first " + D.keep : "")
                   : "every key cached so far") +
         ", those its valid length allows. Its row of weights is the row of the whole " +
         "causal matrix (chapter 16 checks that they are equal). Move the slider to step.");
    var db = html("div", { "class": "bar" }, dec);
    slider = html("input", { type: "range", id: "step", min: 0, max: Lq - 1, value: Lq - 1 }, db);
    decText = html("span", { id: "step-text" }, db);
    slider.addEventListener("input", drawDecoding);
    decSvg = svg("svg", { id: "dec-svg" }, dec);
  }
  function drawDecoding() {
    if (!dec) return;
    clear(decSvg);
    var s = +slider.value, t = s + Lk - Lq + 1; // keys cached after step s
    var n = seenCount(state.b, s); // of them, those the query sees
    decText.textContent = "step " + s + ": query " + D.queries[s] +
        (B > 1 ? " of example " + state.b : "") + " attends to " +
        (n < t ? n + " of the " + t : t) + " cached key" + (t > 1 ? "s" : "") +
        "; the cache of K (and of V) is (" + B + ", " + G + ", " + t + ", " + p + ")";
    var nk = Math.min(Lk, WIN), c = Math.max(4, Math.min(22, Math.floor(560 / nk)));
    var on = [];
    for (var h = 0; h < H; h++) if (state.on[h]) on.push(h);
    // a row is as tall as its cells or its label, whichever is taller; the
    // labels are centred on their rows
    var rowH = Math.max(c, 14) + 6, top = 18;
    var k0 = Math.max(0, t - nk);
    if (k0 > 0) top += 20; // a line to say which keys are drawn
    var width = Math.max(640, 90 + nk * c + 20), height = top + (on.length + 1) * rowH + 30;
    decSvg.setAttribute("width", width);
    decSvg.setAttribute("height", height);
    decSvg.setAttribute("viewBox", "0 0 " + width + " " + height);
    svg("rect", { width: width, height: height, fill: "#fff" }, decSvg);
    var hatchUrl = hatch(decSvg);
    if (k0 > 0)
      svg("text", { id: "dec-note", x: 90, y: 14, fill: "#666" }, decSvg,
          "the last " + nk + " of the " + t + " cached keys: keys " + D.keys[k0] + " to " +
          D.keys[t - 1]);
    function label(y, text, attrs) {
      attrs.x = 0;
      attrs.y = y + c / 2 + 4;
      return svg("text", attrs, decSvg, text);
    }
    label(top, "cache", { "class": "dec-label" });
    for (var k = k0; k < k0 + nk; k++) {
      var x = 90 + (k - k0) * c;
      svg("rect", { x: x, y: top, width: c - 1, height: c - 1,
                    fill: k < t ? (k === t - 1 ? "#f28e2b" : "#bbb") : "none",
                    stroke: "#888", "data-k": k, "class": k < t ? "cached" : "empty" }, decSvg);
    }
    on.forEach(function (h, n) {
      var y = top + (n + 1) * rowH;
      label(y, "head " + h, { "class": "dec-label", "data-head": h, fill: colour(h) });
      for (var k = k0; k < k0 + nk; k++)
        if (k < t)
          svg("rect", { x: 90 + (k - k0) * c, y: y, width: c - 1, height: c - 1, "data-head": h,
                        fill: seen(state.b, s, k) ? shade(W(state.b, h, s, k)) : hatchUrl },
              decSvg).appendChild(svg("title", {}, null, "head " + h + ", key " + D.keys[k] +
                                    ": " + (seen(state.b, s, k) ? fmt(W(state.b, h, s, k))
                                                                : "masked")));
    });
    svg("text", { x: 90, y: height - 8, fill: "#666" }, decSvg,
        "orange: the key and value this step added; rows: the new query's weights");
  }

  // --- 5. where each number goes: the split and the join -------------------------
  // D.numbers (plot/numbers.h): each step of transpose_qkv and
  // transpose_output run again by the library on an input whose elements
  // hold their own index, so each stage says which element each position
  // holds and where it lies in memory; views and copies are the library's.
  var NUM = D.numbers || [], nu = null, nuSvg = null, nuDetail = null;
  var nuStep = NUM.map(function () { return -1; }); // -1: every step at once
  if (NUM.length) {
    nu = section("numbers", "Where each number goes", function () { return nuSvg; },
         "numbers",
         "The split into heads (transpose_qkv) and the join (transpose_output), one " +
         "stage per step. Each cell is one number, labelled with its index in the " +
         "step's input (coloured by it, light to dark); under each stage the same " +
         "numbers lie in memory, in the order of their addresses. A view leaves " +
         "memory as it was and only changes the strides; a copy writes the numbers " +
         "to a new buffer in the new order. Hover or tap a cell: the same number " +
         "lights up at every stage and in every memory row. Walk through the steps " +
         "with the buttons.");
    NUM.forEach(function (sp, s) {
      var bar = html("div", { "class": "bar" }, nu);
      html("strong", {}, bar, sp.op + ", the " + sp.of + ":");
      var sel = html("select", { "class": "nu-step", "data-split": s }, bar);
      html("option", { value: -1 }, sel, "every step");
      sp.stages.forEach(function (st, k) {
        html("option", { value: k }, sel, k ? "step " + k + ": " + st.op : "the input");
      });
      function go(k) { nuStep[s] = k; sel.value = k; stepShow(s); }
      sel.addEventListener("change", function () { go(+sel.value); });
      html("button", { type: "button", "class": "nu-back" }, bar, "◀ back")
        .addEventListener("click", function () { go(Math.max(0, nuStep[s] - 1)); });
      html("button", { type: "button", "class": "nu-next" }, bar, "next step ▶")
        .addEventListener("click", function () {
          go(nuStep[s] < 0 || nuStep[s] + 1 >= sp.stages.length ? 0 : nuStep[s] + 1);
        });
    });
    nuSvg = svg("svg", { id: "numbers-svg" }, nu);
    // hovering or tapping a cell: its number, everywhere
    var follow = function (ev) {
      var c = ev.target.closest ? ev.target.closest("g.cell") : null;
      if (!c) return;
      var s = +c.closest("[data-split]").getAttribute("data-split"), k = 0;
      var shape = NUM[s].stages[0].shape, idx = c.getAttribute("data-src").split(",");
      for (var d = 0; d < shape.length; d++) k = k * shape[d] + +idx[d];
      lightNumber(s, k);
    };
    nuSvg.addEventListener("mouseover", follow);
    nuSvg.addEventListener("click", follow);
    nuDetail = html("p", { id: "nu-detail", "class": "help" }, nu,
                    "Hover a cell to follow its number.");
  }
  function tuple(a) { return a.length === 1 ? "(" + a[0] + ",)" : "(" + a.join(", ") + ")"; }
  // input element k of a split as its indices in the input's shape
  function unflat(k, shape) {
    var idx = [];
    for (var d = shape.length - 1; d >= 0; d--) { idx.unshift(k % shape[d]); k = Math.floor(k / shape[d]); }
    return idx;
  }
  function named(st) {
    return st.names.some(function (x) { return x; }) ? " = " +
      tuple(st.names.map(function (x, d) { return x || String(st.shape[d]); })) : "";
  }
  // one sentence per split: which steps moved numbers (the copies)
  function movedSentence(sp) {
    var copies = [];
    sp.stages.forEach(function (st, k) { if (st.kind === "copy") copies.push(k); });
    var n = sp.stages.length - 1;
    if (!copies.length) return "None of the " + n + " steps moved a number: all are views.";
    var views = [];
    for (var k = 1; k <= n; k++) if (copies.indexOf(k) < 0) views.push(k);
    return "Only step" + (copies.length > 1 ? "s " : " ") + copies.join(" and ") +
        " moved numbers (a cop" + (copies.length > 1 ? "ies" : "y") + " into a new buffer)" +
        (views.length ? "; step" + (views.length > 1 ? "s " : " ") + views.join(" and ") +
         (views.length > 1 ? " are views" : " is a view") + "." : ".");
  }
  function stepShow(s) {
    var gs = nuSvg.querySelectorAll("g.stage[data-split='" + s + "']");
    for (var n = 0; n < gs.length; n++) {
      var k = +gs[n].getAttribute("data-stage");
      gs[n].classList.toggle("later", nuStep[s] >= 0 && k > nuStep[s]);
      gs[n].classList.toggle("current", nuStep[s] === k);
    }
  }
  // light every cell that holds input element src of split s
  function lightNumber(s, src) {
    var on = nuSvg.querySelectorAll(".lit");
    for (var n = 0; n < on.length; n++) on[n].classList.remove("lit");
    var sp = NUM[s], cells = nuSvg.querySelectorAll("[data-split='" + s + "'] [data-src='" +
        unflat(src, sp.stages[0].shape).join(",") + "']");
    for (n = 0; n < cells.length; n++) cells[n].classList.add("lit");
    var where = sp.stages.map(function (st, k) {
      var at = st.cells.indexOf(src), idx = [], r = at;
      for (var d = st.index.length - 1; d >= 0; d--) {
        idx.unshift(st.index[d][r % st.index[d].length]);
        r = Math.floor(r / st.index[d].length);
      }
      return (k ? "step " + k + " (" + st.kind + ")" : "the input") + ": [" + idx.join(", ") +
             "], memory slot " + st.slots[at] + (st.buffer ? " of buffer " + st.buffer : "");
    });
    nuDetail.textContent = "Input element " + src + ", [" +
        unflat(src, sp.stages[0].shape).join(", ") + "] of " + sp.op + "'s input: " +
        where.join("; ") + ".";
  }

  // the width of a text drawn in the page (an estimate before it is)
  function textWidth(t) {
    var n = t.getComputedTextLength ? t.getComputedTextLength() : 0;
    return n > 0 ? Math.ceil(n) : 7 * t.textContent.length;
  }
  function drawNumbers() {
    if (!nu) return;
    clear(nuSvg);
    var WRAP = 1100, CH = 18, top = 0, width = 0;
    var style = svg("style", {}, nuSvg);
    // the picture's own style, so that a saved SVG looks as the page does
    style.textContent = "text{font:12px system-ui,sans-serif}.cell rect{stroke:#fff}.lit rect{fill:#f28e2b;stroke:#000;" +
        "stroke-width:2}.later{opacity:.12}.current .frame{stroke:#f28e2b;stroke-width:2}" +
        "text.num{font-size:10px;pointer-events:none}text.dim{font-size:10px;fill:#666}";
    var bg = svg("rect", { fill: "#fff" }, nuSvg);
    NUM.forEach(function (sp, s) {
      var digits = String(Math.max(1, sp.numel - 1)).length, CW = Math.max(20, 7 * digits + 6);
      var inShape = sp.stages.length ? sp.stages[0].shape : [];
      var rank = {}; // light to dark by the input index, among those drawn
      (sp.stages.length ? sp.stages[0].cells : []).forEach(function (src, i) { rank[src] = i; });
      function tone(src) {
        var t = sp.shown > 1 ? rank[src] / (sp.shown - 1) : 0;
        return "rgb(" + Math.round(238 - t * 120) + "," + Math.round(243 - t * 95) + "," +
               Math.round(251 - t * 50) + ")";
      }
      function cell(parent, x, y, src, attrs, tip) {
        attrs["class"] = attrs["class"] || "cell";
        attrs["data-src"] = unflat(src, inShape).join(",");
        attrs.transform = "translate(" + x + "," + y + ")";
        var g = svg("g", attrs, parent);
        svg("rect", { width: CW, height: CH, fill: tone(src) }, g);
        svg("text", { "class": "num", x: CW / 2, y: CH - 5, "text-anchor": "middle" }, g, String(src));
        svg("title", {}, g, tip);
      }
      top += 22;
      var head = svg("g", { "class": "split", "data-split": s }, nuSvg);
      svg("text", { x: 0, y: top, "font-weight": "bold" }, head, sp.op + " on the " + sp.of +
          (sp.stages.length ? ": " + sp.stages.map(function (st) { return tuple(st.shape); })
              .join(" → ") : ""));
      if (sp.note) {
        top += 18;
        svg("text", { x: 0, y: top }, head, sp.note);
        return;
      }
      top += 18;
      svg("text", { x: 0, y: top, "font-weight": "bold", fill: "#b22" }, head, movedSentence(sp));
      if (sp.shown < sp.numel) {
        var box = sp.stages.filter(function (st) { return st.shape.length === 4; })[0] || sp.stages[0];
        top += 18;
        svg("text", { x: 0, y: top, fill: "#666" }, head, "A sample: " + sp.shown + " of the " +
            sp.numel + " numbers, the same at every step: " + box.shape.map(function (n, d) {
              return (box.names[d] || "dimension " + d) + " " + box.index[d].length + " of " + n;
            }).join(", ") + ".");
      }
      top += 10;
      sp.stages.forEach(function (st, k) {
        var g = svg("g", { "class": "stage", "data-split": s, "data-stage": k }, nuSvg);
        var y0 = top;
        top += 18;
        // the frame holds its captions too, however few the numbers
        var caption = svg("text", { x: 8, y: top, "font-weight": "bold" }, g,
            (k ? "step " + k + ": " + st.op + " → " : "input ") + tuple(st.shape) + named(st) +
            (k ? ", a " + st.kind : ""));
        top += 8;
        // the grid: the last two dimensions as a block of rows and
        // columns, a third before them as blocks side by side, a fourth
        // as lines of blocks
        var nd = st.shape.length, L = st.index, n = L.map(function (l) { return l.length; });
        var rows = nd >= 2 ? n[nd - 2] : 1, cols = n[nd - 1];
        var head = nd === 4 ? 28 : nd === 3 ? 14 : 4; // room for the labels
        var bw = cols * CW, bh = rows * CH, lineW = 8 + textWidth(caption), x = 8,
            y = top + head;
        var per = rows * cols, blocks = st.cells.length / per;
        var inner = nd >= 3 ? n[nd - 3] : 1;
        function dimLabel(d, i) { return (st.names[d] || "dim " + d) + " " + L[d][i]; }
        for (var bl = 0; bl < blocks; bl++) {
          var outer = unflatBlock(bl, n.slice(0, Math.max(0, nd - 2)));
          // a group of blocks (one value of a 4-D tensor's first index)
          // starts a new line when it does not fit on this one
          var group = nd === 4 && bl % inner === 0;
          if (x > 8 && (x + (group ? inner * (bw + 10) : bw) > WRAP)) {
            x = 8; y += bh + head + 4;
          }
          if (group) {
            if (x > 8) x += 14;
            svg("text", { x: x, y: y - 17, "class": "dim" }, g, dimLabel(0, outer[0]) + ":");
          }
          if (nd >= 3)
            svg("text", { x: x, y: y - 3, "class": "dim" }, g, dimLabel(nd - 3, outer[nd - 3]));
          for (var c = 0; c < per; c++) {
            var at = bl * per + c, r = Math.floor(c / cols), q = c % cols;
            var idx = outer.map(function (i, d) { return L[d][i]; });
            if (nd >= 2) idx.push(L[nd - 2][r]);
            idx.push(L[nd - 1][q]);
            cell(g, x + q * CW, y + r * CH, st.cells[at],
                 { "data-idx": idx.join(","), "data-slot": st.slots[at] },
                 "[" + idx.join(", ") + "] holds input element " + st.cells[at] + " [" +
                 unflat(st.cells[at], inShape).join(", ") + "], memory slot " + st.slots[at]);
          }
          svg("rect", { x: x, y: y, width: bw, height: bh, fill: "none", stroke: "#888" }, g);
          x += bw + 10;
          lineW = Math.max(lineW, x);
        }
        top = y + bh + 8;
        // memory: the same cells in the order of their slots
        var order = st.cells.map(function (src, i) { return i; })
            .sort(function (a, b) { return st.slots[a] - st.slots[b]; });
        var fresh = k && st.kind === "copy";
        top += 14;
        lineW = Math.max(lineW, 8 + textWidth(svg("text", { x: 8, y: top, fill: fresh ? "#b22" : "#333" }, g,
            "memory, buffer " + st.buffer +
            (k ? (fresh ? ": a new buffer, the numbers written in the new order"
                        : ": the same buffer, not one number moved") : "") +
            "; strides " + tuple(st.strides) + (st.offset ? ", offset " + st.offset : ""))));
        var mem = svg("g", { "class": "memory", "data-buffer": st.buffer }, g);
        var perLine = Math.max(8, Math.floor((WRAP - 60) / CW)), mx = 60, my = top + 6;
        order.forEach(function (i, m) {
          if (m % perLine === 0) {
            if (m) my += CH + 4;
            mx = 60;
            svg("text", { x: 54, y: my + CH - 5, "text-anchor": "end", fill: "#666" }, mem,
                "slot " + st.slots[i]);
          } else if (st.slots[i] !== st.slots[order[m - 1]] + 1) {
            svg("text", { x: mx + 2, y: my + CH - 5, fill: "#666" }, mem, "…");
            mx += 12;
          }
          cell(mem, mx, my, st.cells[i], { "class": "cell mem", "data-slot": st.slots[i] },
               "memory slot " + st.slots[i] + " holds input element " + st.cells[i]);
          mx += CW;
          lineW = Math.max(lineW, mx);
        });
        top = my + CH + 10;
        svg("rect", { "class": "frame", x: 0, y: y0, width: lineW + 8, height: top - y0,
                      fill: "none", stroke: "#ddd" }, g);
        width = Math.max(width, lineW + 10);
        top += 6;
      });
      top += 10;
    });
    width = Math.max(width, 700);
    nuSvg.setAttribute("width", width);
    nuSvg.setAttribute("height", top);
    nuSvg.setAttribute("viewBox", "0 0 " + width + " " + top);
    bg.setAttribute("width", width);
    bg.setAttribute("height", top);
    NUM.forEach(function (sp, s) { stepShow(s); });
  }
  // block number bl of the dimensions before the last two (sizes n) as indices
  function unflatBlock(bl, n) {
    var idx = [];
    for (var d = n.length - 1; d >= 0; d--) { idx.unshift(bl % n[d]); bl = Math.floor(bl / n[d]); }
    return idx;
  }

  function draw() {
    drawThumb();
    drawHeadView();
    drawGrid();
    drawDecoding();
  }
  draw();
  drawDataflow();
  drawNumbers();
  document.body.setAttribute("data-ready", "1");
})();
//<
