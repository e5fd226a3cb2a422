/* The cost section of a family page: every figure recomputed in the browser from the facts' coefficients
   (the #cost-data script) when the reader moves the context, the batch or the cache dtype; the same
   expressions as atlas/cost/figures.py's figures(). Hovering or focusing a number shows its formula and check. */
(function () {
  "use strict";
  var data = document.getElementById("cost-data");
  var section = document.getElementById("cost");
  if (!data || !section) return;
  var cost = JSON.parse(data.textContent);
  var slider = document.getElementById("cost-context"), batchInput = document.getElementById("cost-batch");
  var dtypeSelect = document.getElementById("cost-dtype"), shown = document.getElementById("cost-context-value");
  var card = document.getElementById("cost-card");
  var stops = slider.getAttribute("data-stops").split(",").map(Number);

  function grouped(n) { return n.toLocaleString("en-US"); }
  var UNITS = ["KiB", "MiB", "GiB", "TiB", "PiB"];  // atlas/numbers.py's binary_size, the same steps
  function binarySize(n) {
    var value = n / 1024, unit = 0;
    while (value >= 1024 && unit < UNITS.length - 1) { value /= 1024; unit += 1; }
    var hundredths = Math.floor(value * 100 + 0.5);  // halves up, in integers: the same digits Python writes
    return Math.floor(hundredths / 100) + "." + String(hundredths % 100).padStart(2, "0") + " " + UNITS[unit];
  }
  var DECIMAL = ["", "k", "M", "G", "T", "P", "E"];  // atlas/numbers.py's flops_scaled, the same steps
  function flopsScaled(n) {
    var unit = 0;
    while (n >= Math.pow(1000, unit + 1) && unit < DECIMAL.length - 1) unit += 1;
    if (unit === 0) return n + " FLOPs";
    var hundredths = Math.floor(n * 100 / Math.pow(1000, unit) + 0.5);
    if (hundredths >= 100000 && unit < DECIMAL.length - 1) { unit += 1; hundredths = Math.floor(n * 100 / Math.pow(1000, unit) + 0.5); }
    return Math.floor(hundredths / 100) + "." + String(hundredths % 100).padStart(2, "0") + " " + DECIMAL[unit] + "FLOPs";
  }
  // the model's figure (atlas/cost/model_figure.py): FLOPs per key × the keys a token sees, term by term
  function keysSeen(t, c) {
    var keys = Math.floor(c / t.every);
    if (t.chunk && keys) keys = (keys - 1) % t.chunk + 1;
    return t.cap ? Math.min(keys, t.cap) : keys;
  }
  function termsFlops(terms, c) { return terms.reduce(function (sum, t) { return sum + t.per_key * keysSeen(t, c); }, 0); }
  function modelTerms(m, absorbed) { return absorbed && m.absorbed ? m.absorbed.terms : m.terms; }
  function modelFlops(c, absorbed) {
    return cost.flops.model.kinds.reduce(function (sum, m) { return sum + m.count * (m.fixed + termsFlops(modelTerms(m, absorbed), c)); }, cost.flops.model.head.flops);
  }
  function modelFormula(c, absorbed) {
    return "head " + grouped(cost.flops.model.head.flops) + " + " + cost.flops.model.kinds.map(function (m) {
      return m.count + " × (" + grouped(m.fixed) + modelTerms(m, absorbed).map(function (t) { return " + " + grouped(t.per_key) + " × " + grouped(keysSeen(t, c)); }).join("") + ")";
    }).join(" + ");
  }
  function bytes(n) { return grouped(n) + " bytes" + (n >= 1024 ? " (" + binarySize(n) + ")" : ""); }
  function capped(c, cap) { return cap ? Math.min(c, cap) : c; }
  function capWords(c, cap) { return cap ? "min(" + grouped(c) + ", " + grouped(cap) + ")" : grouped(c); }
  // keys pooled from windows of positions (DeepSeek-V4): what the compressors hold, and the FLOPs of the pooled keys
  function pooled(series, c) {
    return (series || []).reduce(function (sum, s) { return sum + s.entry * Math.floor(c / s.every) + s.open * (c % s.every) + (c >= s.every ? s.overlap : 0); }, 0);
  }
  function pooledWords(series, c) {
    return (series || []).map(function (s) { return " + " + grouped(s.entry) + " × " + grouped(Math.floor(c / s.every)) + " pooled keys + " + grouped(s.open) + " × " + grouped(c % s.every) + (c >= s.every && s.overlap ? " + " + grouped(s.overlap) : ""); }).join("");
  }
  function pooledFlops(keys, c) { return keys ? keys.per_key * Math.floor(c / keys.every) : 0; }

  function figures(context, batch, dtype) {
    var size = cost.cache.dtypes[dtype], kinds = cost.cache.kinds, fk = cost.flops.kinds;
    var perToken = 0, held = 0, flops = cost.flops.head.flops, expanded = 0, rows = [];
    kinds.forEach(function (k, i) {
      var positions = capped(context, k.cap), keys = capped(context, fk[i].keys_cap);
      if (k.attention !== "state" && k.attention !== "linear" && k.attention !== "recurrent") perToken += k.count * k.values * size;  // a fixed state does not grow per position
      expanded += k.count * (k.expanded || k.values) * size;
      var kindCache = k.count * (k.values * positions + (k.state || 0) + pooled(k.compressed, context)) * size * batch;
      var kindFlops = k.count * (fk[i].fixed + fk[i].per_key * keys + pooledFlops(fk[i].compressed_keys, context));
      var m = cost.flops.model.kinds[i];
      held += kindCache;
      flops += kindFlops;
      rows.push({ positions: positions, cache_bytes: kindCache, flops: kindFlops, model_flops: m.count * (m.fixed + termsFlops(m.terms, context)) });
    });
    var windowed = kinds.some(function (k) { return k.attention !== "state" && k.attention !== "linear" && k.attention !== "recurrent" && (k.cap || k.compressed); });
    var absorbs = cost.flops.model.kinds.some(function (m) { return m.absorbed; });
    return {
      model_flops: modelFlops(context, false),
      model_flops_formula: modelFormula(context, false),
      absorbed_flops: absorbs ? modelFlops(context, true) : undefined,
      absorbed_flops_formula: absorbs ? modelFormula(context, true) : undefined,
      per_position_here: windowed ? Math.floor(held / (context * batch)) : undefined,
      per_position_here_formula: windowed ? grouped(held) + " bytes ÷ (" + grouped(context) + " positions × batch " + batch + "), rounded down" : undefined,
      per_token: perToken,
      per_token_formula: kinds.filter(function (k) { return k.attention !== "state" && k.attention !== "linear" && k.attention !== "recurrent"; }).map(function (k) { return k.count + " × " + grouped(k.values); }).join(" + ") + " values × " + size + " bytes (" + dtype + ")",
      expanded_per_token: expanded,
      expanded_per_token_formula: kinds.map(function (k) { return k.count + " × " + grouped(k.expanded || k.values); }).join(" + ") + " values × " + size + " bytes",
      cache: held,
      cache_formula: kinds.map(function (k) { var more = k.state || k.compressed; return k.count + " × " + (more ? "(" : "") + grouped(k.values) + " × " + capWords(context, k.cap) + (k.state ? " + " + grouped(k.state) : "") + pooledWords(k.compressed, context) + (more ? ")" : ""); }).join(" + ") + " values × " + size + " bytes × batch " + batch,
      flops: flops,
      flops_formula: "head " + grouped(cost.flops.head.flops) + " + " + fk.map(function (f) { return f.count + " × (" + grouped(f.fixed) + " + " + grouped(f.per_key) + " × " + capWords(context, f.keys_cap) + (f.compressed_keys ? " + " + grouped(f.compressed_keys.per_key) + " × " + grouped(Math.floor(context / f.compressed_keys.every)) + " pooled keys" : "") + ")"; }).join(" + "),
      rows: rows
    };
  }

  // a whole number within the field's own bounds, written back when the reader typed one outside them
  function clamped(input) {
    var low = Number(input.min) || 1, high = Number(input.max) || Infinity;
    var value = Math.min(high, Math.max(low, Math.floor(Number(input.value) || low)));
    if (String(value) !== input.value && input.value !== "") input.value = String(value);
    return value;
  }

  function update() {
    var context = stops[Number(slider.value)] || stops[stops.length - 1];
    var batch = clamped(batchInput);
    var fig = figures(context, batch, dtypeSelect.value);
    shown.textContent = grouped(context) + " tokens";
    Array.prototype.forEach.call(section.querySelectorAll("[data-figure]"), function (e) {
      var name = e.getAttribute("data-figure");
      if (fig[name] === undefined) return;
      e.textContent = /flops$/.test(name) ? grouped(fig[name]) : bytes(fig[name]);
      var scaled = section.querySelector("[data-scaled='" + name + "']");
      if (scaled) scaled.textContent = "(" + flopsScaled(fig[name]) + ")";
      var formula = fig[name + "_formula"];
      if (typeof formula === "string") e.setAttribute("title", formula);  // never the word undefined
    });
    var rows = section.querySelectorAll("#cost-kind-table tbody tr");
    fig.rows.forEach(function (r, i) {
      rows[i].querySelector("[data-cell=positions]").textContent = grouped(r.positions);
      rows[i].querySelector("[data-cell=cache_bytes]").textContent = bytes(r.cache_bytes);
      rows[i].querySelector("[data-cell=flops]").textContent = grouped(r.flops);
      rows[i].querySelector("[data-cell=model_flops]").textContent = grouped(r.model_flops);
    });
    cost.weights.forEach(function (w, i) {
      var cell = section.querySelector("[data-weight='" + i + "']");
      if (cell) cell.textContent = bytes(w.bytes + fig.cache);
    });
  }

  function explain(e) {
    var target = e.target.closest ? e.target.closest(".figure") : null;
    if (!target) return;
    card.textContent = "";
    card.appendChild(document.createTextNode(target.getAttribute("title") || ""));
    card.appendChild(document.createElement("br"));
    card.appendChild(document.createTextNode(target.getAttribute("data-check") || ""));
  }
  slider.addEventListener("input", update);
  batchInput.addEventListener("input", update);
  // left empty (or cleared) and then left: the field shows the batch the figures use
  batchInput.addEventListener("change", function () { batchInput.value = String(clamped(batchInput)); update(); });
  dtypeSelect.addEventListener("change", update);
  section.addEventListener("mouseover", explain);
  section.addEventListener("focusin", explain);
  update();
})();
