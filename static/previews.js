/* Drawings of the preview run's tensors on a value page: heatmaps (positions × features), the
   attention pattern of one head at a time, the router's choice per token, histograms and bars.
   The data is the page's own (a JSON block), so this works from file:// too. */
(function () {
  "use strict";

  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { if (k === "text") e.textContent = attrs[k]; else e.setAttribute(k, attrs[k]); });
    (kids || []).forEach(function (c) { if (c) e.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return e;
  }
  function rgb(name) {
    var v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
    var m = /^#([0-9a-f]{6})$/i.exec(v);
    if (!m) return [128, 128, 128];
    var n = parseInt(m[1], 16);
    return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
  }
  function mix(a, b, t) { return [0, 1, 2].map(function (i) { return Math.round(a[i] + (b[i] - a[i]) * t); }); }
  function fmt(x) { return typeof x === "number" ? (Math.abs(x) >= 100 || x === Math.round(x) ? String(x) : x.toPrecision(3)) : String(x); }
  function flat(data) { return Array.isArray(data) ? [].concat.apply([], data.map(flat)) : [data]; }

  /* A grid of values as a canvas, one pixel per cell scaled up by CSS; hover reads a cell. */
  function grid(rows, colors, opts) {
    var h = rows.length, w = rows[0].length;
    var canvas = el("canvas", { width: String(w), height: String(h), role: "img", "aria-label": opts.label, tabindex: "0" });
    var ctx = canvas.getContext("2d");
    var img = ctx.createImageData(w, h);
    for (var r = 0; r < h; r++) for (var c = 0; c < w; c++) {
      var col = colors(rows[r][c], r, c), k = 4 * (r * w + c);
      img.data[k] = col[0]; img.data[k + 1] = col[1]; img.data[k + 2] = col[2]; img.data[k + 3] = 255;
    }
    ctx.putImageData(img, 0, 0);
    var cell = Math.max(4, Math.min(14, Math.floor(560 / w)));
    canvas.style.width = (w * cell) + "px";
    canvas.style.aspectRatio = w + " / " + h;
    var readout = el("p", { "class": "readout small", "aria-live": "polite", text: opts.hint });
    canvas.addEventListener("mousemove", function (e) {
      var b = canvas.getBoundingClientRect();
      var c = Math.min(w - 1, Math.floor((e.clientX - b.left) / b.width * w));
      var r = Math.min(h - 1, Math.floor((e.clientY - b.top) / b.height * h));
      readout.textContent = opts.describe(r, c, rows[r][c]);
    });
    var labels = opts.rowLabels ? el("ol", { "class": "row-labels", "aria-hidden": "true" }, opts.rowLabels.map(function (t) { return el("li", { text: t }); })) : null;
    if (labels) labels.style.gridTemplateRows = "repeat(" + h + ", 1fr)";
    return el("div", { "class": "grid-figure" }, [el("div", { "class": "grid-row" }, [labels, canvas]), readout]);
  }

  function diverging(maxAbs) {
    var neg = rgb("--st-q"), pos = rgb("--st-k"), mid = rgb("--bg");
    return function (v) { var t = Math.min(1, Math.abs(v) / (maxAbs || 1)); return mix(mid, v < 0 ? neg : pos, t); };
  }
  function sequential(max) {
    var lo = rgb("--bg"), hi = rgb("--accent");
    return function (v) { return mix(lo, hi, Math.min(1, Math.max(0, v / (max || 1)))); };
  }

  function histogram(values, label) {
    var n = 40, lo = Math.min.apply(null, values), hi = Math.max.apply(null, values);
    var counts = new Array(n).fill(0);
    values.forEach(function (v) { counts[Math.min(n - 1, Math.floor((v - lo) / ((hi - lo) || 1) * n))]++; });
    var top = Math.max.apply(null, counts);
    var canvas = el("canvas", { width: "400", height: "90", role: "img", "aria-label": label });
    var ctx = canvas.getContext("2d"), fill = rgb("--muted");
    ctx.fillStyle = "rgb(" + fill.join(",") + ")";
    counts.forEach(function (c, i) { var bh = Math.round(c / top * 86); ctx.fillRect(i * 10 + 1, 90 - bh, 8, bh); });
    return el("figure", { "class": "preview hist" }, [canvas, el("figcaption", { text: label + ": " + values.length + " values from " + fmt(lo) + " to " + fmt(hi) + ", in 40 bins" })]);
  }

  function layerOf(key) { var m = /^layers\.(\d+)\./.exec(key); return m ? Number(m[1]) : null; }

  function picker(name, options, onPick) {
    var box = el("div", { "class": "picker-buttons", role: "group", "aria-label": name });
    options.forEach(function (o, i) {
      var b = el("button", { type: "button", "aria-pressed": i === 0 ? "true" : "false", text: o.label });
      b.addEventListener("click", function () {
        Array.prototype.forEach.call(box.children, function (x) { x.setAttribute("aria-pressed", "false"); });
        b.setAttribute("aria-pressed", "true");
        onPick(o.value);
      });
      box.appendChild(b);
    });
    return box;
  }

  function drawAll(root, data) {
    root.innerHTML = "";
    var labels = data.labels, tensors = data.tensors;
    var keys = Object.keys(tensors);
    var value = root.getAttribute("data-value");
    var byName = function (name) { return keys.filter(function (k) { return k.split(".").pop() === name; }); };

    if (value === "attention_probabilities" || value === "attention_scores") {
      var attn = byName(value), state = { key: attn[0], head: 0 };
      var holder = el("div");
      var heads = tensors[attn[0]].shape[0];
      var draw = function () {
        var t = tensors[state.key], rows = t.data[state.head];
        holder.innerHTML = "";
        holder.appendChild(el("figure", { "class": "preview" }, [
          grid(rows, value === "attention_probabilities" ? sequential(1) : diverging(Math.max(Math.abs(t.min), Math.abs(t.max))), {
            label: value + " of head " + state.head + ", block " + layerOf(state.key),
            rowLabels: labels, hint: "Queries down, keys across; hover a cell.",
            describe: function (r, c, v) { return "query " + r + " (" + labels[r] + ") → key " + c + " (" + labels[c] + "): " + fmt(v); },
          }),
          el("figcaption", { text: "Head " + state.head + " of block " + layerOf(state.key) + ": each row is a query position, each column a key position; the cells the mask hides (later keys, and keys outside the window on a sliding-window block) stay empty." }),
        ]));
      };
      if (attn.length > 1) root.appendChild(el("div", { "class": "picker-line" }, [el("span", { "class": "small", text: "block " }), picker("block", attn.map(function (k) { return { label: String(layerOf(k)), value: k }; }), function (k) { state.key = k; draw(); })]));
      root.appendChild(el("div", { "class": "picker-line" }, [el("span", { "class": "small", text: "head " }), picker("head", Array.from({ length: heads }, function (_, h) { return { label: String(h), value: h }; }), function (h) { state.head = h; draw(); })]));
      root.appendChild(holder);
      draw();
      return;
    }

    if (value === "expert_weights" || value === "expert_indices") {
      byName("expert_weights").forEach(function (wk) {
        var ik = wk.replace(/expert_weights$/, "expert_indices");
        var w = tensors[wk], idx = tensors[ik];
        if (!idx) return;
        var experts = Math.max(data.experts || 0, idx.max + 1), rows = [];
        for (var r = 0; r < w.data.length; r++) {
          var row = new Array(experts).fill(0);
          for (var s = 0; s < w.data[r].length; s++) row[idx.data[r][s]] = w.data[r][s];
          rows.push(row);
        }
        root.appendChild(el("figure", { "class": "preview" }, [
          el("h3", { text: "Block " + layerOf(wk) }),
          grid(rows, sequential(w.max), {
            label: "router choice per token, block " + layerOf(wk), rowLabels: labels, hint: "Tokens down, experts across; a colored cell is a chosen expert.",
            describe: function (r, c, v) { return "token " + r + " (" + labels[r] + "), expert " + c + ": " + (v ? "chosen, weight " + fmt(v) : "not chosen"); },
          }),
          el("figcaption", { text: "Each token's " + w.shape[1] + " chosen experts (of " + experts + "), colored by weight; the weights run from " + fmt(w.min) + " to " + fmt(w.max) + "." }),
        ]));
      });
      return;
    }

    keys.forEach(function (k) {
      var t = tensors[k];
      var title = (layerOf(k) === null ? "" : "Block " + layerOf(k) + ": ") + k.split(".").pop();
      var fig = el("figure", { "class": "preview" }, [el("h3", { text: title })]);
      if (t.shape.length === 2) {
        var maxAbs = Math.max(Math.abs(t.min), Math.abs(t.max));
        fig.appendChild(grid(t.data, diverging(maxAbs), {
          label: title, rowLabels: t.shape[0] === labels.length ? labels : null, hint: "Positions down, features across; hover a cell.",
          describe: function (r, c, v) { return "position " + r + (labels[r] ? " (" + labels[r] + ")" : "") + ", feature " + c * (t.strides ? t.strides[1] : 1) + ": " + fmt(v); },
        }));
        fig.appendChild(el("figcaption", { text: "Blue below zero, orange above, scaled to the largest magnitude, " + fmt(maxAbs) + (t.strides && t.strides[1] > 1 ? "; every " + t.strides[1] + "th feature" : "") + "." }));
        fig.appendChild(histogram(flat(t.data), title));
      } else if (t.shape.length === 1) {
        fig.appendChild(grid([t.data], sequential(t.max), {
          label: title, hint: "Hover an entry.",
          describe: function (r, c, v) { return "entry " + c * (t.strides ? t.strides[0] : 1) + ": " + fmt(v); },
        }));
        fig.appendChild(histogram(t.data, title));
      }
      root.appendChild(fig);
    });
  }

  window.atlasPreviews = function () {
    var root = document.getElementById("previews"), node = document.getElementById("preview-data");
    if (!root || !node) return;
    var data = JSON.parse(node.textContent);
    drawAll(root, data);
    var redraw = function () { drawAll(root, data); };
    document.addEventListener("atlas-theme", redraw);
    if (window.matchMedia) window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", redraw);
  };
})();
