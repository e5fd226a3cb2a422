/* The atlas's own script: theme toggle, the block diagram (hover cards, pinning, the block slider),
   the index search and the preview drawings. Plain DOM, no dependencies; every page works without it
   except for these interactions. */
(function () {
  "use strict";

  function $(sel, root) { return (root || document).querySelector(sel); }
  function $all(sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); }
  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) {
      if (k === "text") e.textContent = attrs[k]; else e.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { if (c) e.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return e;
  }
  function grouped(n) { return typeof n === "number" ? n.toLocaleString("en-US") : String(n); }

  /* ---------------------------------------------------------------- theme */
  function effectiveTheme() {
    var t = document.documentElement.getAttribute("data-theme");
    if (t) return t;
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }
  function initTheme() {
    var button = $("#theme-toggle");
    if (!button) return;
    var label = $(".theme-name", button);
    function show() {
      var next = effectiveTheme() === "dark" ? "light" : "dark";
      label.textContent = next === "dark" ? "Dark" : "Light";
      button.setAttribute("aria-label", "Switch to the " + next + " theme");
      button.setAttribute("aria-pressed", effectiveTheme() === "dark" ? "true" : "false");
    }
    button.addEventListener("click", function () {
      var next = effectiveTheme() === "dark" ? "light" : "dark";
      var system = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
      // back to the system's theme: follow the system again; otherwise remember the choice
      if (next === system) document.documentElement.removeAttribute("data-theme");
      else document.documentElement.setAttribute("data-theme", next);
      try {
        if (next === system) localStorage.removeItem("atlas-theme"); else localStorage.setItem("atlas-theme", next);
      } catch (e) { /* storage may be off */ }
      show();
      document.dispatchEvent(new CustomEvent("atlas-theme"));
    });
    show();
  }

  /* ---------------------------------------------------------------- the block diagram */
  function initDiagram() {
    var dataNode = $("#page-data");
    if (!dataNode) return;
    var data = JSON.parse(dataNode.textContent);
    var slider = $("#block-slider"), output = $("#block-index"), kindLink = $("#block-kind");
    var card = $("#part-card");
    var svgs = $all("svg.block-svg");
    var ticks = $all(".ticks .tick");
    var labels = $all("svg.block-svg text[data-template]");
    var block = 0, pinned = null, shown = null;
    var hint = card.innerHTML;

    function modulePath(v) {
      return (v.module || "").replace("{i}", String(block));
    }
    function fill(part) {
      var name = part.getAttribute("data-part");
      var v = data.values[name];
      card.innerHTML = "";
      if (!v) {
        // a part with no standard value: name the module and link its page
        card.appendChild(el("p", { "class": "card-name" }, [el("code", { text: part.getAttribute("data-module") || "" })]));
        card.appendChild(el("p", { "class": "card-desc", text: (part.getAttribute("data-title") || "") + ": no standard value is read here." }));
        if (part.getAttribute("data-link")) card.appendChild(el("p", { "class": "card-links" }, [el("a", { href: part.getAttribute("data-link"), text: "Open the component →" })]));
        shown = part;
        return;
      }
      var head = el("p", { "class": "card-name" }, [el("code", { text: name })]);
      if (v.condition) head.appendChild(el("span", { "class": "warn", title: v.condition, text: " ⚠︎" }));
      if (pinned === part) head.appendChild(el("span", { "class": "pin", text: "pinned · Esc to release" }));
      card.appendChild(head);
      card.appendChild(el("p", { "class": "card-desc", text: v.description }));
      var dl = el("dl");
      function row(k, val) { dl.appendChild(el("dt", { text: k })); dl.appendChild(el("dd", {}, [val])); }
      row("layout", el("span", {}, [v.layout + " ", el("code", { text: "[" + v.dims.join(" ") + "]" })]));
      row("shape here", el("code", { text: "[" + v.shape.map(grouped).join(", ") + "]" }));
      row("read at", el("span", { text: v.read_at }));
      var mod = modulePath(v);
      if (mod) row("module", el("code", { text: mod }));
      if (v.condition) row("only when", el("span", { text: v.condition }));
      card.appendChild(dl);
      var links = el("p", { "class": "card-links" });
      var link = part.getAttribute("data-link");
      if (link) links.appendChild(el("a", { href: link, text: "Open the component →" }));
      links.appendChild(el("a", { href: "c/value." + name + ".html", text: "About " + name + (v.previewed ? ", drawn on the preview run →" : " →") }));
      card.appendChild(links);
      shown = part;
    }
    function show(part) { if (!pinned) fill(part); }
    function restore() { if (pinned) fill(pinned); else { card.innerHTML = hint; shown = null; } }
    function pin(part) {
      if (pinned) pinned.classList.remove("pinned");
      if (pinned === part) { pinned = null; fill(part); return; }
      pinned = part;
      part.classList.add("pinned");
      card.classList.add("is-pinned");
      fill(part);
    }
    function unpin() {
      if (!pinned) return;
      pinned.classList.remove("pinned");
      pinned = null;
      card.classList.remove("is-pinned");
      restore();
    }
    $all(".part").forEach(function (part) {
      part.addEventListener("mouseenter", function () { show(part); });
      part.addEventListener("focus", function () { show(part); });
      part.addEventListener("mouseleave", function () { if (!pinned) restore(); });
      part.addEventListener("click", function () { pin(part); if (!pinned) card.classList.remove("is-pinned"); });
      part.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); pin(part); if (!pinned) card.classList.remove("is-pinned"); }
      });
    });
    document.addEventListener("keydown", function (e) { if (e.key === "Escape") unpin(); });

    function redraw(i) {
      block = i;
      var kind = data.blocks[i];
      for (var s = 0; s < svgs.length; s++) {
        var on = Number(svgs[s].getAttribute("data-kind")) === kind;
        if (on) svgs[s].removeAttribute("hidden"); else svgs[s].setAttribute("hidden", "");
      }
      output.textContent = String(i);
      slider.setAttribute("aria-valuetext", "block " + i + ", " + data.kinds[kind].label);
      for (var n = 0; n < labels.length; n++) labels[n].textContent = labels[n].getAttribute("data-template").replace("[i]", "[" + i + "]");
      kindLink.textContent = data.kinds[kind].label;
      kindLink.setAttribute("href", "c/" + data.kinds[kind].id + ".html");
      for (var t = 0; t < ticks.length; t++) ticks[t].classList.toggle("current", t === i);
      if (pinned && pinned.closest && pinned.closest("svg") && pinned.closest("svg").hasAttribute("hidden")) {
        // the pinned part belongs to another kind's drawing: pin the same part in this one, if drawn
        var same = $("svg.block-svg:not([hidden]) .part[data-part='" + pinned.getAttribute("data-part") + "']");
        pinned.classList.remove("pinned");
        pinned = same || null;
        if (pinned) pinned.classList.add("pinned"); else card.classList.remove("is-pinned");
      }
      if (pinned) fill(pinned); else if (shown) fill(shown);
    }
    window.atlasRedraw = redraw;
    slider.addEventListener("input", function () { redraw(Number(slider.value)); });
    slider.addEventListener("change", function () {
      if (history.replaceState) history.replaceState(null, "", "#block-" + slider.value);
    });
    ticks.forEach(function (t) {
      t.addEventListener("click", function () { slider.value = t.getAttribute("data-block"); redraw(Number(slider.value)); });
    });
    var m = /^#block-(\d+)$/.exec(location.hash);
    var start = m ? Math.min(Number(m[1]), data.blocks.length - 1) : 0;
    slider.value = String(start);
    redraw(start);
    if (m) $("#block").scrollIntoView();
  }

  /* ---------------------------------------------------------------- index search */
  function initSearch() {
    var input = $("#search");
    if (!input) return;
    var cards = $all(".family-card");
    var status = $("#search-status");
    function run() {
      var words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
      var shown = 0;
      cards.forEach(function (card) {
        var hay = (card.getAttribute("data-search") + " " + card.textContent).toLowerCase();
        var ok = words.every(function (w) { return hay.indexOf(w) >= 0; });
        card.hidden = !ok;
        if (ok) shown++;
        var names = $(".names", card);
        names.innerHTML = "";
        // Each standard value carries the page it leads to; the build checked that every one exists.
        var entries = JSON.parse(card.getAttribute("data-names") || "[]");
        var matches = words.length ? entries.filter(function (n) {
          return words.some(function (w) { return n.term.indexOf(w) >= 0; });
        }) : [];
        names.hidden = !matches.length;
        if (matches.length) {
          names.appendChild(document.createTextNode("standard names: "));
          matches.forEach(function (n, k) {
            if (k) names.appendChild(document.createTextNode(", "));
            names.appendChild(el("a", { href: n.target }, [el("code", { text: n.term })]));
          });
        }
      });
      status.textContent = words.length ? shown + " of " + cards.length + " famil" + (cards.length === 1 ? "y" : "ies") + " match" : "";
    }
    input.addEventListener("input", run);
    run();
  }

  document.addEventListener("DOMContentLoaded", function () {
    initTheme();
    initDiagram();
    initSearch();
    if (window.atlasPreviews) window.atlasPreviews();
  });
})();
