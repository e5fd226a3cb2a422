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
  function flat(data) { return Array.isArray(data) ? [].concat.apply([], data.map(flat)) : (data === null ? [] : [data]); }

  /* A grid of values as a canvas, one pixel per cell scaled up by CSS; hover reads a cell. */
  function grid(rows, colors, opts) {
    var h = rows.length, w = rows[0].length;
    var canvas = el("canvas", { width: String(w), height: String(h), role: "img", "aria-label": opts.label, tabindex: "0" });
    var ctx = canvas.getContext("2d");
    var img = ctx.createImageData(w, h);
    for (var r = 0; r < h; r++) for (var c = 0; c < w; c++) {
      var v = rows[r][c], k = 4 * (r * w + c);
      if (v === null) continue;  // masked (-inf): left transparent, the page shows through
      var col = colors(v, r, c);
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
      readout.textContent = rows[r][c] === null ? opts.describe(r, c, "masked (−∞)") : opts.describe(r, c, rows[r][c]);
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
    return bars(counts, label, label + ": " + values.length + " values from " + fmt(lo) + " to " + fmt(hi) + ", in " + n + " bins");
  }

  /* Counts already binned (a weight tensor's histogram, every value counted at build time). */
  function bars(counts, label, caption) {
    var n = counts.length, top = Math.max.apply(null, counts) || 1, w = 400, h = 90, step = w / n;
    var canvas = el("canvas", { width: String(w), height: String(h), role: "img", "aria-label": label });
    var ctx = canvas.getContext("2d"), fill = rgb("--muted");
    ctx.fillStyle = "rgb(" + fill.join(",") + ")";
    counts.forEach(function (c, i) { var bh = c ? Math.max(1, Math.round(c / top * (h - 4))) : 0; ctx.fillRect(Math.round(i * step) + 1, h - bh, Math.max(1, Math.round(step) - 2), bh); });
    return el("figure", { "class": "preview hist" }, [canvas, el("figcaption", { text: caption })]);
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

    keys.forEach(function (k) { root.appendChild(figureOf(k, tensors[k], labels)); });
  }

  // An axis of a layout in words: [one, several].
  var AXES = {
    num_heads: ["head", "heads"], num_kv_heads: ["key/value head", "key/value heads"], top_k: ["routing slot", "routing slots"],
    seq: ["position", "positions"], query: ["query", "queries"], key: ["key", "keys"], hidden_size: ["feature", "features"],
    qk_head_dim: ["dim", "dims"], head_dim: ["dim", "dims"], intermediate_size: ["neuron", "neurons"],
    vocab_size: ["token id", "token ids"], num_experts: ["expert", "experts"],
  };
  function axisWord(name, plural) { var w = AXES[name]; return w ? w[plural ? 1 : 0] : (name || "").replace(/_/g, " "); }

  /* One captured tensor: a grid for two axes, a strip for one, and a picker over the first axis
     (a head, a routing slot) for three; each with the histogram of the values shown. */
  function figureOf(k, t, labels) {
    var title = (layerOf(k) === null ? "" : "Block " + layerOf(k) + ": ") + k.split(".").pop();
    var fig = el("figure", { "class": "preview" }, [el("h3", { text: title })]);
    var axes = t.axes || [];
    var stride = function (a) { return t.strides && t.strides[a] > 1 ? t.strides[a] : 1; };
    var rowName = function (a, r) { var i = r * stride(a); return axes[a] === "seq" || axes[a] === "query" || axes[a] === "key" ? "position " + i + (labels[i] ? " (" + labels[i] + ")" : "") : axisWord(axes[a]) + " " + i; };
    if (t.shape.length === 3) {
      var holder = el("div"), pick = { i: 0 };
      var draw = function () {
        var rows = t.data[pick.i], maxAbs = Math.max(Math.abs(t.min), Math.abs(t.max));
        holder.innerHTML = "";
        holder.appendChild(grid(rows, diverging(maxAbs), {
          label: title + ", " + axisWord(axes[0]) + " " + pick.i, rowLabels: axes[1] === "seq" && t.shape[1] === labels.length ? labels : null,
          hint: axisWord(axes[1], true) + " down, " + axisWord(axes[2], true) + " across; hover a cell.",
          describe: function (r, c, v) { return rowName(1, r) + ", " + rowName(2, c) + ": " + fmt(v); },
        }));
        holder.appendChild(el("p", { "class": "small", text: axisWord(axes[0]) + " " + pick.i + " of " + t.shape[0] + ": blue below zero, orange above, scaled to the largest magnitude of all of them, " + fmt(maxAbs) + "." }));
        holder.appendChild(histogram(flat(rows), title + ", " + axisWord(axes[0]) + " " + pick.i));
      };
      fig.appendChild(el("div", { "class": "picker-line" }, [el("span", { "class": "small", text: axisWord(axes[0]) + " " }),
        picker(axisWord(axes[0], true), Array.from({ length: t.shape[0] }, function (_, h) { return { label: String(h * stride(0)), value: h }; }), function (h) { pick.i = h; draw(); })]));
      fig.appendChild(holder);
      draw();
    } else if (t.shape.length === 2) {
      var maxAbs = Math.max(Math.abs(t.min), Math.abs(t.max));
      fig.appendChild(grid(t.data, diverging(maxAbs), {
        label: title, rowLabels: t.shape[0] === labels.length ? labels : null, hint: axisWord(axes[0] || "seq", true) + " down, " + axisWord(axes[1] || "hidden_size", true) + " across; hover a cell.",
        describe: function (r, c, v) { return rowName(0, r) + ", " + rowName(1, c) + ": " + fmt(v); },
      }));
      fig.appendChild(el("figcaption", { text: "Blue below zero, orange above, scaled to the largest magnitude, " + fmt(maxAbs) + (stride(1) > 1 ? "; every " + stride(1) + "th " + axisWord(axes[1]) : "") + "." }));
      fig.appendChild(histogram(flat(t.data), title));
    } else if (t.shape.length === 1 && axes.length === 1 && axes[0].indexOf(", ") > 0) {
      // a scalar layout read as a tuple (input_size: the call's batch and seq)
      var names = axes[0].split(", ");
      var pairs = [];
      names.forEach(function (n, i) { if (i) pairs.push(" · "); pairs.push(el("span", { "class": "tuple" }, [n + " ", el("strong", { text: String(t.data[i]) })])); });
      fig.appendChild(el("p", { "class": "values" }, pairs));
    } else if (t.shape.length === 1) {
      var tokens = axes[0] === "seq" && t.shape[0] === labels.length;
      fig.appendChild(grid([t.data], t.min < 0 ? diverging(Math.max(Math.abs(t.min), Math.abs(t.max))) : sequential(t.max), {
        label: title, hint: "Hover an entry.",
        describe: function (r, c, v) { return (tokens ? rowName(0, c) : "entry " + c * stride(0)) + ": " + fmt(v); },
      }));
      if (t.dtype === "int64") {
        fig.appendChild(el("p", { "class": "values small" }, [el("code", { text: t.data.map(function (v, i) { return tokens ? labels[i] + " " + v : String(v); }).join(tokens ? " · " : ", ") })]));
      } else {
        fig.appendChild(histogram(t.data, title));
      }
    }
    return fig;
  }

  function drawHistogram(root, h) {
    root.innerHTML = "";
    var width = (h.max - h.min) / h.bins.length;
    root.appendChild(bars(h.bins, "histogram of " + h.name,
      "All " + h.elements.toLocaleString("en-US") + " values of " + h.name + " in the preview model, in " + h.bins.length + " bins of width " + fmt(width) +
      " from " + fmt(h.min) + " to " + fmt(h.max) + "; mean " + fmt(h.mean) + ", standard deviation " + fmt(h.std) + "."));
  }

  window.atlasPreviews = function () {
    var root = document.getElementById("previews"), node = document.getElementById("preview-data");
    var hist = document.getElementById("histogram-data");
    if (root && hist) {
      var h = JSON.parse(hist.textContent);
      drawHistogram(root, h);
      document.addEventListener("atlas-theme", function () { drawHistogram(root, h); });
      return;
    }
    if (!root || !node) return;
    var data = JSON.parse(node.textContent);
    drawAll(root, data);
    var redraw = function () { drawAll(root, data); };
    document.addEventListener("atlas-theme", redraw);
    if (window.matchMedia) window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", redraw);
  };
})();
