/* Compare two families: the pickers (family pages and the index) and the page that assembles any
   pair in the browser from compare/data.js. The view mirrors atlas/render/compare.py's diff() and
   templates/_compare_view.html, which draw the static pages of near relatives. */
(function () {
  "use strict";

  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") e.textContent = attrs[k]; else e.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { if (c) e.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return e;
  }
  function grouped(n) { return n.toLocaleString("en-US"); }
  function has(o, k) { return Object.prototype.hasOwnProperty.call(o, k); }
  function same(x, y) { return JSON.stringify(x) === JSON.stringify(y); }

  /* ------------------------------------------------------------ the pickers */
  function staticPair(pairs, a, b) {
    for (var i = 0; i < pairs.length; i++) {
      if ((pairs[i][0] === a && pairs[i][1] === b) || (pairs[i][0] === b && pairs[i][1] === a)) return pairs[i][0] + "--" + pairs[i][1] + ".html";
    }
    return null;
  }
  function initPicker(form) {
    var data = window.ATLAS_FAMILIES;
    if (!data) return;
    var a = form.querySelector(".pick-a"), b = form.querySelector(".pick-b"), go = form.querySelector(".pick-go");
    var base = form.getAttribute("data-compare");
    [a, b].forEach(function (select) {
      if (select.options.length) return;
      data.families.forEach(function (f) { select.appendChild(el("option", { value: f.name, text: f.title })); });
    });
    if (form.getAttribute("data-family")) a.value = form.getAttribute("data-family");
    if (b.value === a.value) {
      var other = data.families.filter(function (f) { return f.name !== a.value; })[0];
      if (other) b.value = other.name;
    }
    function update() {
      var page = staticPair(data.pairs, a.value, b.value);
      go.setAttribute("href", base + (page || "index.html#" + a.value + "--" + b.value));
      go.textContent = page ? "Compare (near relatives: a page of their own)" : "Compare";
    }
    a.addEventListener("change", update);
    b.addEventListener("change", update);
    update();
  }
  Array.prototype.forEach.call(document.querySelectorAll("form.family-picker"), initPicker);

  /* ------------------------------------------------------------ the view */
  var summaries = window.ATLAS_COMPARE;
  var view = document.getElementById("compare-view");
  if (!summaries || !view || !document.getElementById("compare-form")) return;

  function rows(x, y, namesX, namesY) {
    var keys = Object.keys(x).concat(Object.keys(y).filter(function (k) { return !has(x, k); }));
    return keys.map(function (k) {
      var va = has(x, k) ? x[k] : null, vb = has(y, k) ? y[k] : null;
      return { key: k, a: va, b: vb, differs: !same(va, vb),
               own_a: namesX && has(namesX, k) ? namesX[k] : null, own_b: namesY && has(namesY, k) ? namesY[k] : null };
    });
  }
  function pairs(list) { var o = {}; list.forEach(function (p) { o[p[0]] = p[1]; }); return o; }
  // Rows of [key, value, own name] aligned by key (atlas/render/compare.py's _named_rows).
  function namedRows(x, y) {
    function split(list) {
      var values = {}, names = {};
      list.forEach(function (r) { values[r[0]] = r[1]; if (r[2]) names[r[0]] = r[2]; });
      return [values, names];
    }
    var sx = split(x), sy = split(y);
    return rows(sx[0], sy[0], sx[1], sy[1]);
  }
  // A step with its sizes set aside (compare.py's normalized_step): the comparison only, never shown.
  function normalized(tex) { return tex.replace(/\d+(?:\{,\}\d+)*(?:\.\d+)?/g, "n"); }
  var WEIGHTS = { attention: 3, component: 2, routing: 2, positions: 2, mlp: 1, norm: 1, activation: 1, residual: 1 };
  function nearness(a, b) {
    var keyOf = function (t) { return t[0] + "\u0000" + t[1]; };
    var inA = {}, inB = {}, shared = 0, union = 0;
    a.forEach(function (t) { inA[keyOf(t)] = true; });
    b.forEach(function (t) { inB[keyOf(t)] = true; });
    a.forEach(function (t) { union += WEIGHTS[t[0]]; if (inB[keyOf(t)]) shared += WEIGHTS[t[0]]; });
    b.forEach(function (t) { if (!inA[keyOf(t)]) union += WEIGHTS[t[0]]; });
    var words = function (x, inY, want) { return x.filter(function (t) { return !!inY[keyOf(t)] === want; }).map(function (t) { return t[1]; }); };
    return { score: union ? Math.round(100 * shared / union) : 0, shared: words(a, inB, true), only_a: words(a, inB, false), only_b: words(b, inA, false) };
  }

  function diff(a, b) {
    var equations = [];
    Object.keys(a.equations).concat(Object.keys(b.equations).filter(function (c) { return !has(a.equations, c); })).forEach(function (cid) {
      var ea = a.equations[cid], eb = b.equations[cid];
      if (!ea || !eb) { equations.push({ id: cid, kind: (ea || eb).kind, only: eb ? "b" : "a", kind_b: null, facts: [], steps_a: [], steps_b: [] }); return; }
      // as the build does: two kinds of computation have no step in common, each family's page shows its own
      if (ea.kind !== eb.kind) { equations.push({ id: cid, kind: ea.kind, kind_b: eb.kind, only: null, facts: [], steps_a: [], steps_b: [] }); return; }
      var facts = rows(ea.facts, eb.facts).filter(function (r) { return r.differs; });
      var na = ea.steps.map(normalized), nb = eb.steps.map(normalized);
      var sa = ea.steps.filter(function (s) { return nb.indexOf(normalized(s)) < 0; });
      var sb = eb.steps.filter(function (s) { return na.indexOf(normalized(s)) < 0; });
      if (facts.length || sa.length || sb.length) equations.push({ id: cid, kind: ea.kind, kind_b: null, only: null, facts: facts, steps_a: sa, steps_b: sb });
    });
    // as the build does (atlas/render/compare.py, _fold_repeats): a repeat of an earlier component's differences points to it
    var first = {};
    equations.forEach(function (e) {
      e.same_as = null;
      if (e.only) return;
      var what = JSON.stringify([e.kind, e.facts, e.steps_a, e.steps_b]);
      if (has(first, what)) { e.same_as = first[what]; e.facts = []; e.steps_a = []; e.steps_b = []; }
      else first[what] = e.id;
    });
    var support = Object.keys(a.support).concat(Object.keys(b.support).filter(function (k) { return !has(a.support, k); })).sort()
      .filter(function (k) { return (has(a.support, k) ? a.support[k] : null) !== (has(b.support, k) ? b.support[k] : null); })
      .map(function (k) { return { key: k, a: has(a.support, k) ? a.support[k] : null, b: has(b.support, k) ? b.support[k] : null }; });
    var kinds = Object.keys(a.parameters.kinds).concat(Object.keys(b.parameters.kinds).filter(function (k) { return !has(a.parameters.kinds, k); }));
    return {
      a: a.name, b: b.name,
      nearness: nearness(a.traits, b.traits),
      standardized: rows(pairs(a.standardized), pairs(b.standardized)),
      cost: rows(pairs(a.cost), pairs(b.cost)).map(function (r, i) {
        r.note_a = a.cost[i] ? a.cost[i][2] : null; r.note_b = b.cost[i] ? b.cost[i][2] : null; return r;
      }),
      config: rows(a.config, b.config, a.config_names, b.config_names),
      kinds: [a.kinds, b.kinds], blocks: [a.blocks, b.blocks],
      parameters: {
        totals: rows({ "total": a.parameters.total, "active per token": a.parameters.active }, { "total": b.parameters.total, "active per token": b.parameters.active }),
        rows: namedRows(a.parameters.rows, b.parameters.rows),
        kinds: kinds.map(function (k) { return { kind: k, rows: namedRows(a.parameters.kinds[k] || [], b.parameters.kinds[k] || []) }; })
      },
      support: support, equations: equations
    };
  }

  function cell(x, own, note) {
    var parts = [];
    if (x === null || x === undefined) parts.push(el("span", { "class": "absent", text: "not set" }));
    else if (typeof x === "number") parts.push(document.createTextNode(grouped(x)));
    else parts.push(el("code", { "class": "json", text: String(x) }));
    if (own) parts.push(" ", el("span", { "class": "own" }, ["as ", el("code", { text: own })]));
    if (note) parts.push(el("span", { "class": "note", text: note }));
    return el("td", {}, parts);
  }
  function table(d, list, onlyDiff, head) {
    var body = el("tbody");
    list.forEach(function (r) {
      if (onlyDiff && !r.differs) return;
      var key = el("td", {}, r.differs ? [el("span", { "class": "mark", title: "differs", "aria-label": "differs", text: "≠" }), " ", el("code", { text: r.key })] : [el("code", { text: r.key })]);
      body.appendChild(el("tr", { "class": r.differs ? "differs" : "same", "data-key": r.key }, [key, cell(r.a, r.own_a, r.note_a), cell(r.b, r.own_b, r.note_b)]));
    });
    return el("div", { "class": "scroll" }, [el("table", { "class": "compare" }, [
      el("thead", {}, [el("tr", {}, [el("th", { text: head || "key" }), el("th", { text: d.a }), el("th", { text: d.b })])]), body])]);
  }
  function section(id, title, children) {
    return el("section", { id: id }, [el("h2", {}, [el("a", { href: "#" + id, text: title })])].concat(children));
  }
  // One proven step as its family writes it, rendered by KaTeX where the page loaded it, else as TeX.
  function step(tex) {
    var li = el("li");
    if (window.katex) {
      try {
        window.katex.render(tex, li, { displayMode: true, trust: true, strict: "ignore", output: "html" });
        var k = li.querySelector(".katex");  // named by its TeX, as the build names its equations (atlas/render/math.py)
        if (k) { k.setAttribute("role", "img"); k.setAttribute("aria-label", tex.replace(/\htmlClass\{[^{}]*\}/g, "").replace(/\s+/g, " ").trim()); }
        return li;
      } catch (e) { li.textContent = ""; }
    }
    li.appendChild(el("code", { text: tex }));
    return li;
  }

  function draw(d) {
    var parts = [];
    var n = d.nearness;
    var words = "Architecture traits in common: " + n.score + "% (weighted)" + (n.shared.length ? ": " + n.shared.join(", ") : "") + "."
      + (n.only_a.length ? " Only " + d.a + ": " + n.only_a.join(", ") + "." : "") + (n.only_b.length ? " Only " + d.b + ": " + n.only_b.join(", ") + "." : "");
    var groups = [["sizes", d.standardized, "sizes"], ["parameters", d.parameters.totals, "totals"], ["cost, from each family's cost section", d.cost, "cost-diff"]];
    var glanceTable = el("table", { "class": "compare glance-table" }, [
      el("thead", {}, [el("tr", {}, [el("th", { text: "figure" }), el("th", { text: d.a }), el("th", { text: d.b })])])].concat(groups.map(function (g) {
        var body = table(d, g[1], false).querySelector("tbody");
        body.id = g[2];
        body.insertBefore(el("tr", { "class": "group" }, [el("th", { colspan: "3", scope: "rowgroup", text: g[0] })]), body.firstChild);
        return body;
      })));
    var glance = section("standardized", "At a glance", [el("p", { "class": "nearness", text: words }), el("div", { "class": "scroll" }, [glanceTable])]);
    glance.className = "glance";
    parts.push(glance);
    var pattern = [];
    [0, 1].forEach(function (side) {
      var name = side ? d.b : d.a;
      pattern.push(el("p", {}, [el("strong", { text: name }), ": " + d.kinds[side].map(function (k) { return k.label + " × " + k.count + " (blocks " + k.ranges + ")"; }).join(", ")]));
      pattern.push(el("ol", { "class": "stack", "aria-label": name + " block stack" }, d.blocks[side].map(function (k, i) {
        return el("li", { "class": "kind-" + k, title: "block " + i + ": " + d.kinds[side][k].label });
      })));
    });
    parts.push(section("pattern", "Block patterns", pattern));
    var differing = d.config.filter(function (r) { return r.differs; }).length;
    parts.push(section("config-diff", "config.json: the values that differ", [
      el("p", { text: differing + " of " + d.config.length + " keys differ (a key one file lacks counts as differing). A key a file names its own way is shown under the name the other families use, with its own name beside the value." }),
      table(d, d.config, true)]));
    var params = [el("p", { text: "Each module under the standard value it produces (support()), so that a module named otherwise in one family meets its counterpart; its own name stands beside its count." }),
      table(d, d.parameters.rows, false, "module")];
    d.parameters.kinds.forEach(function (k) { params.push(el("h3", { text: k.kind })); params.push(table(d, k.rows, false, "module")); });
    parts.push(section("parameters", "Parameters per component", params));
    var support = d.support.length ? [el("div", { "class": "scroll" }, [el("table", { "class": "compare" }, [
      el("thead", {}, [el("tr", {}, [el("th", { text: "value" }), el("th", { text: d.a }), el("th", { text: d.b })])]),
      el("tbody", {}, d.support.map(function (r) {
        return el("tr", { "class": "differs" }, [el("td", {}, [el("code", { text: r.key })])].concat([r.a, r.b].map(function (x) {
          return el("td", {}, [x === null ? el("span", { "class": "absent", text: "not produced" }) : (x || "produced")]);
        })));
      }))])])] : [el("p", { text: "Both produce the same standard values under the same conditions." })];
    parts.push(section("support-diff", "support(): values one produces and the other does not, or under another condition", support));
    var eqs = [el("p", { text: "Steps are compared with their sizes set aside, so a step listed here computes something else, not merely at another width; each is shown as its family proves it, sizes and all." })];
    d.equations.forEach(function (e) {
      var box = el("div", { "class": "eq-diff", id: "eq-" + e.id, "data-component": e.id }, [el("h3", {}, [el("code", { text: e.id }), " ", el("span", { "class": "small", text: "(" + e.kind + (e.kind_b ? " / " + e.kind_b : "") + ")" })])]);
      if (e.only) box.appendChild(el("p", { text: "Only in " + (e.only === "a" ? d.a : d.b) + "." }));
      if (e.kind_b) box.appendChild(el("p", {}, [e.kind + " in " + d.a + ", " + e.kind_b + " in " + d.b +
        ": two kinds of computation with no step in common, each proven on its family's page (",
        el("a", { href: "../" + d.a + "/c/" + e.id + ".html", text: d.a }), ", ", el("a", { href: "../" + d.b + "/c/" + e.id + ".html", text: d.b }), ")."]));
      if (e.same_as) box.appendChild(el("p", {}, ["The same differences as ", el("a", { href: "#eq-" + e.same_as }, [el("code", { text: e.same_as })]), "."]));
      if (e.facts.length) box.appendChild(table(d, e.facts));
      [["steps_a", d.a], ["steps_b", d.b]].forEach(function (p) {
        if (!e[p[0]].length) return;
        box.appendChild(el("p", { text: "Steps only " + p[1] + " takes:" }));
        box.appendChild(el("ul", { "class": "steps" }, e[p[0]].map(step)));
      });
      eqs.push(box);
    });
    if (!d.equations.length) eqs.push(el("p", { text: "Every proven step is the same in both, sizes aside." }));
    parts.push(section("equations-diff", "Equations: the proven steps that differ", eqs));
    view.textContent = "";
    parts.forEach(function (p) { view.appendChild(p); });
  }

  // The first family's nearest relatives (compare/relatives.js, ranked at build by shared architecture).
  function drawRelatives(name) {
    var box = document.getElementById("relatives-list"), data = window.ATLAS_FAMILIES, near = window.ATLAS_RELATIVES;
    if (!box || !data || !near || !has(near, name)) return;
    var title = summaries[name].title;
    box.textContent = "";
    box.appendChild(el("p", { text: "The families nearest " + title + " by what the architectures share, with the traits they share (weighted share of all either has):" }));
    box.appendChild(el("ol", { "class": "relatives-list" }, near[name].map(function (r) {
      var page = staticPair(data.pairs, name, r.name);
      var link = el("a", { href: page || "#" + name + "--" + r.name, text: r.title });
      return el("li", {}, [link, " " + r.score + "% ", el("span", { "class": "shared", text: r.shared.join(" · ") })]);
    })));
  }

  var selectA = document.getElementById("compare-a"), selectB = document.getElementById("compare-b");
  // Only a family the page holds counts: a name such as __proto__ or constructor is found on every
  // object, and taken for a family it would empty the view.
  function family(name) { return has(summaries, name) ? name : null; }
  function fromHash() {
    var m = /^#([\w.-]+)--([\w.-]+)$/.exec(location.hash);
    if (m && family(m[1])) selectA.value = m[1];
    if (m && family(m[2])) selectB.value = m[2];
    else if (location.hash.length > 1 && family(location.hash.slice(1))) selectA.value = location.hash.slice(1);
    if (selectA.value === selectB.value) {
      var other = Object.keys(summaries).filter(function (n) { return n !== selectA.value; })[0];
      if (other) selectB.value = other;
    }
    show();
  }
  function show() {
    draw(diff(summaries[selectA.value], summaries[selectB.value]));
    drawRelatives(selectA.value);
  }
  function pick() {
    history.replaceState(null, "", "#" + selectA.value + "--" + selectB.value);
    show();
  }
  selectA.addEventListener("change", pick);
  selectB.addEventListener("change", pick);
  window.addEventListener("hashchange", fromHash);
  fromHash();
})();
