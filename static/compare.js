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

  function rows(x, y) {
    var keys = Object.keys(x).concat(Object.keys(y).filter(function (k) { return !has(x, k); }));
    return keys.map(function (k) {
      var va = has(x, k) ? x[k] : null, vb = has(y, k) ? y[k] : null;
      return { key: k, a: va, b: vb, differs: !same(va, vb) };
    });
  }
  function pairs(list) { var o = {}; list.forEach(function (p) { o[p[0]] = p[1]; }); return o; }

  function diff(a, b) {
    var equations = [];
    Object.keys(a.equations).concat(Object.keys(b.equations).filter(function (c) { return !has(a.equations, c); })).forEach(function (cid) {
      var ea = a.equations[cid], eb = b.equations[cid];
      if (!ea || !eb) { equations.push({ id: cid, kind: (ea || eb).kind, only: eb ? "b" : "a", facts: [], steps_a: [], steps_b: [] }); return; }
      var facts = rows(ea.facts, eb.facts).filter(function (r) { return r.differs; });
      var sa = ea.steps.filter(function (s) { return eb.steps.indexOf(s) < 0; });
      var sb = eb.steps.filter(function (s) { return ea.steps.indexOf(s) < 0; });
      if (facts.length || sa.length || sb.length) equations.push({ id: cid, kind: ea.kind, only: null, facts: facts, steps_a: sa, steps_b: sb });
    });
    var support = Object.keys(a.support).concat(Object.keys(b.support).filter(function (k) { return !has(a.support, k); })).sort()
      .filter(function (k) { return (has(a.support, k) ? a.support[k] : null) !== (has(b.support, k) ? b.support[k] : null); })
      .map(function (k) { return { key: k, a: has(a.support, k) ? a.support[k] : null, b: has(b.support, k) ? b.support[k] : null }; });
    var kinds = Object.keys(a.parameters.kinds).concat(Object.keys(b.parameters.kinds).filter(function (k) { return !has(a.parameters.kinds, k); }));
    return {
      a: a.name, b: b.name,
      standardized: rows(a.standardized, b.standardized),
      config: rows(a.config, b.config),
      kinds: [a.kinds, b.kinds], blocks: [a.blocks, b.blocks],
      parameters: {
        totals: rows({ "total": a.parameters.total, "active per token": a.parameters.active }, { "total": b.parameters.total, "active per token": b.parameters.active }),
        rows: rows(pairs(a.parameters.rows), pairs(b.parameters.rows)),
        kinds: kinds.map(function (k) { return { kind: k, rows: rows(pairs(a.parameters.kinds[k] || []), pairs(b.parameters.kinds[k] || [])) }; })
      },
      support: support, equations: equations
    };
  }

  function cell(x) {
    if (x === null || x === undefined) return el("span", { "class": "absent", text: "not set" });
    if (typeof x === "number") return document.createTextNode(grouped(x));
    return el("code", { "class": "json", text: String(x) });
  }
  function table(d, list, onlyDiff, head) {
    var body = el("tbody");
    list.forEach(function (r) {
      if (onlyDiff && !r.differs) return;
      var key = el("td", {}, r.differs ? [el("span", { "class": "mark", title: "differs", text: "≠" }), " ", el("code", { text: r.key })] : [el("code", { text: r.key })]);
      body.appendChild(el("tr", { "class": r.differs ? "differs" : "same", "data-key": r.key }, [key, el("td", {}, [cell(r.a)]), el("td", {}, [cell(r.b)])]));
    });
    return el("div", { "class": "scroll" }, [el("table", { "class": "compare" }, [
      el("thead", {}, [el("tr", {}, [el("th", { text: head || "key" }), el("th", { text: d.a }), el("th", { text: d.b })])]), body])]);
  }
  function section(id, title, children) {
    return el("section", { id: id }, [el("h2", {}, [el("a", { href: "#" + id, text: title })])].concat(children));
  }

  function draw(d) {
    var parts = [];
    parts.push(section("standardized", "Standardized config", [table(d, d.standardized)]));
    var differing = d.config.filter(function (r) { return r.differs; }).length;
    parts.push(section("config-diff", "config.json: the values that differ", [
      el("p", { text: differing + " of " + d.config.length + " keys differ (a key one file lacks counts as differing)." }),
      table(d, d.config, true)]));
    var pattern = [];
    [0, 1].forEach(function (side) {
      var name = side ? d.b : d.a;
      pattern.push(el("p", {}, [el("strong", { text: name }), ": " + d.kinds[side].map(function (k) { return k.label + " × " + k.count + " (blocks " + k.ranges + ")"; }).join(", ")]));
      pattern.push(el("ol", { "class": "stack", "aria-label": name + " block stack" }, d.blocks[side].map(function (k, i) {
        return el("li", { "class": "kind-" + k, title: "block " + i + ": " + d.kinds[side][k].label });
      })));
    });
    parts.push(section("pattern", "Block patterns", pattern));
    var params = [table(d, d.parameters.totals), table(d, d.parameters.rows)];
    d.parameters.kinds.forEach(function (k) { params.push(el("h3", { text: k.kind })); params.push(table(d, k.rows)); });
    parts.push(section("parameters", "Parameters per component", params));
    var support = d.support.length ? [el("div", { "class": "scroll" }, [el("table", { "class": "compare" }, [
      el("thead", {}, [el("tr", {}, [el("th", { text: "value" }), el("th", { text: d.a }), el("th", { text: d.b })])]),
      el("tbody", {}, d.support.map(function (r) {
        return el("tr", { "class": "differs" }, [el("td", {}, [el("code", { text: r.key })])].concat([r.a, r.b].map(function (x) {
          return el("td", {}, [x === null ? el("span", { "class": "absent", text: "not produced" }) : (x || "produced")]);
        })));
      }))])])] : [el("p", { text: "Both produce the same standard values under the same conditions." })];
    parts.push(section("support-diff", "support(): values one produces and the other does not, or under another condition", support));
    var eqs = [el("p", { text: "Steps are compared with their sizes taken out (written n), so a row here computes something else, not merely at another width." })];
    d.equations.forEach(function (e) {
      var box = el("div", { "class": "eq-diff", "data-component": e.id }, [el("h3", {}, [el("code", { text: e.id }), " ", el("span", { "class": "small", text: "(" + e.kind + ")" })])]);
      if (e.only) box.appendChild(el("p", { text: "Only in " + (e.only === "a" ? d.a : d.b) + "." }));
      if (e.facts.length) box.appendChild(table(d, e.facts));
      [["steps_a", d.a], ["steps_b", d.b]].forEach(function (p) {
        if (!e[p[0]].length) return;
        box.appendChild(el("p", { text: "Steps only " + p[1] + " takes:" }));
        box.appendChild(el("ul", {}, e[p[0]].map(function (s) { return el("li", {}, [el("code", { text: s })]); })));
      });
      eqs.push(box);
    });
    if (!d.equations.length) eqs.push(el("p", { text: "Every proven step is the same in both, sizes aside." }));
    parts.push(section("equations-diff", "Equations: the proven steps that differ", eqs));
    view.textContent = "";
    parts.forEach(function (p) { view.appendChild(p); });
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
    draw(diff(summaries[selectA.value], summaries[selectB.value]));
  }
  function pick() {
    history.replaceState(null, "", "#" + selectA.value + "--" + selectB.value);
    draw(diff(summaries[selectA.value], summaries[selectB.value]));
  }
  selectA.addEventListener("change", pick);
  selectB.addEventListener("change", pick);
  window.addEventListener("hashchange", fromHash);
  fromHash();
})();
