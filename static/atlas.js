/* The atlas's own script: theme toggle, the block diagram (hover cards, pinning, the block slider),
   the index search and the preview drawings. Plain DOM, no dependencies; every page works without it
   except for these interactions. */
(function () {
  "use strict";

  function $(sel, root) { return (root || document).querySelector(sel); }
  // How a pinned card is let go: a finger has no Esc key; a screen that takes both is told both.
  function releaseWords() {
    var coarse = window.matchMedia && window.matchMedia("(pointer: coarse)").matches;
    var touch = coarse || (navigator.maxTouchPoints || 0) > 0;
    return coarse ? "tap the part again to release" : touch ? "Esc or tap the part again to release" : "Esc to release";
  }
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
    var block = 0, shown = null;
    // The pin is a part of the drawing (its value, or its module where it names none), not an element:
    // it follows the reader from block to block, and waits where the block picked has no such part.
    var pin = null, pinnedPart = null;
    var hint = card.innerHTML;
    var narrow = window.matchMedia ? window.matchMedia("(max-width: 760px)") : { matches: false };

    // A label longer than its box (or than the drawing, for the stream's ends) is narrowed to fit,
    // its size kept: measured where it is shown, since a hidden drawing measures nothing.
    function fitLabels(svg) {
      if (svg.getAttribute("data-fitted")) return;
      var right = svg.viewBox.baseVal.width - 4;
      $all("text", svg).forEach(function (text) {
        var g = text.parentNode, rect = g.querySelector(":scope > rect:not(.hit)");
        var x = Number(text.getAttribute("x"));
        var room = (rect ? Number(rect.getAttribute("x")) + Number(rect.getAttribute("width")) - 6 : right) - x;
        if (text.getAttribute("text-anchor") === "middle" || room <= 0) return;
        if (text.getComputedTextLength() > room) {
          text.setAttribute("textLength", String(room));
          text.setAttribute("lengthAdjust", "spacingAndGlyphs");
        }
      });
      svg.setAttribute("data-fitted", "1");
    }
    function keyOf(part) { return part.getAttribute("data-part") || ("module:" + (part.getAttribute("data-module") || "")); }
    function modulePath(v) { return (v.module || "").replace("{i}", String(block)); }
    function valueIn(name, i) {
      var v = data.values[name];
      return !!v && (v.blocks === null || v.blocks.indexOf(i) >= 0);
    }
    function blocksWith(name) {
      var v = data.values[name], runs = [], start = null;
      if (!v || v.blocks === null) return "";
      var sorted = v.blocks.slice().sort(function (a, b) { return a - b; });
      sorted.forEach(function (b, n) {
        if (start === null) start = b;
        if (sorted[n + 1] !== b + 1) { runs.push(start === b ? String(b) : start + "–" + b); start = null; }
      });
      return runs.join(", ");
    }
    function cardHead(name, v, isPinned) {
      var head = el("p", { "class": "card-name" }, [el("code", { text: name })]);
      if (v && v.condition) {
        head.appendChild(document.createTextNode(" "));
        head.appendChild(el("span", { "class": "warn", tabindex: "0", role: "button", "aria-expanded": "false", "aria-label": "only when: " + v.condition, title: v.condition, text: "⚠︎" }));
        head.appendChild(el("span", { "class": "warn-text", text: "only when: " + v.condition }));
      }
      if (isPinned) head.appendChild(el("span", { "class": "pin", text: "pinned · " + releaseWords() }));
      return head;
    }
    function fill(part) {
      var name = part.getAttribute("data-part");
      var v = data.values[name];
      var isPinned = pinnedPart === part;
      card.innerHTML = "";
      shown = part;
      if (!v) {
        // a part with no standard value: name the module and link its page
        card.appendChild(cardHead(part.getAttribute("data-module") || "", null, isPinned));
        card.appendChild(el("p", { "class": "card-desc", text: (part.getAttribute("data-title") || "") + ": no standard value is read here." }));
        if (part.getAttribute("data-link")) card.appendChild(el("p", { "class": "card-links" }, [el("a", { href: part.getAttribute("data-link"), text: "Open the component →" })]));
        return;
      }
      card.appendChild(cardHead(name, v, isPinned));
      card.appendChild(el("p", { "class": "card-desc", text: v.description }));
      var dl = el("dl");
      function row(k, val) { dl.appendChild(el("dt", { text: k })); dl.appendChild(el("dd", {}, [val])); }
      row("layout", el("span", {}, [v.layout + " ", el("code", { text: "[" + v.dims.join(" ") + "]" })]));
      row("shape here", el("code", { text: "[" + v.shape.map(grouped).join(", ") + "]" }));
      row("read at", el("span", { text: v.read_at }));
      var mod = modulePath(v);
      if (mod) row("module", softBreaks(el("code", { text: mod })));
      if (v.condition) row("only when", el("span", { text: v.condition }));
      card.appendChild(dl);
      var links = el("p", { "class": "card-links" });
      var link = part.getAttribute("data-link");
      if (link) links.appendChild(el("a", { href: link, text: "Open the component →" }));
      links.appendChild(el("a", { href: "c/value." + name + ".html", text: "About " + name + (v.previewed ? ", drawn on the preview run →" : " →") }));
      card.appendChild(links);
    }
    function fillWaiting() {
      // the pinned part is not in the block picked: say so, and where it is
      var name = pin.indexOf("module:") === 0 ? pin.slice(7) : pin;
      var v = data.values[name];
      card.innerHTML = "";
      shown = null;
      card.appendChild(cardHead(name, v, true));
      var kind = data.kinds[data.blocks[block]].label;
      var where = v ? blocksWith(name) : "";
      card.appendChild(el("p", { "class": "card-absent", text: "Block " + block + " is a " + kind + ": it has no " + name + "." +
        (where ? " " + name + " is in block" + (where.indexOf("–") >= 0 || where.indexOf(",") >= 0 ? "s " : " ") + where + "." : "") +
        " The pin comes back on a block that has it." }));
    }
    function restore() { if (pinnedPart) fill(pinnedPart); else if (pin) fillWaiting(); else { card.innerHTML = hint; shown = null; } }
    function setPinned(part) {
      if (pinnedPart) pinnedPart.classList.remove("pinned");
      pinnedPart = part;
      if (part) part.classList.add("pinned");
      card.classList.toggle("is-pinned", !!pin);
      card.classList.toggle("is-waiting", !!pin && !part);
    }
    function togglePin(part) {
      var key = keyOf(part);
      if (pin === key && pinnedPart === part) { pin = null; setPinned(null); fill(part); return; }
      pin = key;
      setPinned(part);
      fill(part);
      // on a narrow screen the card sits under the drawing: bring it into view
      if (narrow.matches) {
        var box = card.getBoundingClientRect();
        if (box.top < 0 || box.bottom > window.innerHeight) card.scrollIntoView({ block: "nearest" });
      }
    }
    function unpin() {
      if (!pin) return;
      pin = null;
      setPinned(null);
      restore();
    }
    $all(".part").forEach(function (part) {
      part.addEventListener("mouseenter", function () { if (!pin) fill(part); });
      part.addEventListener("focus", function () { if (!pin) fill(part); });
      part.addEventListener("mouseleave", function () { if (!pin) restore(); });
      part.addEventListener("click", function () { togglePin(part); });
      part.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); togglePin(part); }
      });
    });
    document.addEventListener("keydown", function (e) { if (e.key === "Escape") unpin(); });

    function findPart(key) {
      var visible = $("svg.block-svg:not([hidden])");
      var flowParts = $all(".flow .part");
      var all = $all(".part", visible).concat(flowParts);
      for (var n = 0; n < all.length; n++) if (keyOf(all[n]) === key) return all[n];
      return null;
    }
    function redraw(i) {
      block = i;
      var kind = data.blocks[i];
      for (var s = 0; s < svgs.length; s++) {
        var on = Number(svgs[s].getAttribute("data-kind")) === kind;
        if (on) svgs[s].removeAttribute("hidden"); else svgs[s].setAttribute("hidden", "");
        if (on) fitLabels(svgs[s]);
      }
      output.textContent = String(i);
      slider.setAttribute("aria-valuetext", "block " + i + ", " + data.kinds[kind].label);
      for (var n = 0; n < labels.length; n++) labels[n].textContent = labels[n].getAttribute("data-template").replace("[i]", "[" + i + "]");
      kindLink.textContent = data.kinds[kind].label;
      kindLink.setAttribute("href", "c/" + data.kinds[kind].id + ".html");
      for (var t = 0; t < ticks.length; t++) ticks[t].classList.toggle("current", t === i);
      if (pin) {
        // the pinned part in this block's drawing, if this block has it (and its value is produced here)
        var same = findPart(pin);
        var name = pin.indexOf("module:") === 0 ? null : pin;
        if (same && name && data.values[name] && !valueIn(name, i)) same = null;
        setPinned(same);
        restore();
      } else if (shown) {
        var again = findPart(keyOf(shown));
        if (again) fill(again); else restore();
      }
    }
    function go(i, from) {
      i = Math.max(0, Math.min(data.blocks.length - 1, i));
      slider.value = String(i);
      redraw(i);
      // the address always names the block picked
      if (from !== "hash" && history.replaceState) history.replaceState(null, "", "#block-" + i);
    }
    window.atlasRedraw = redraw;
    slider.addEventListener("input", function () { go(Number(slider.value)); });
    var strip = $(".ticks");
    if (strip) strip.addEventListener("click", function (e) {
      // a tick of its own (24 px on a touch screen) is its block; else the whole strip is one target:
      // the block under the pointer, however narrow its tick
      var tick = e.target.closest && e.target.closest(".tick");
      if (tick && tick.hasAttribute("data-block")) { go(Number(tick.getAttribute("data-block"))); return; }
      var b = strip.getBoundingClientRect();
      var n = data.blocks.length;
      go(Math.floor((e.clientX - b.left) / b.width * n));
    });
    $all("[data-step]").forEach(function (button) {
      button.addEventListener("click", function () { go(block + Number(button.getAttribute("data-step"))); });
    });
    function fromHash() {
      var m = /^#block-(\d+)$/.exec(location.hash);
      return m ? Math.min(Number(m[1]), data.blocks.length - 1) : null;
    }
    window.addEventListener("hashchange", function () {
      var i = fromHash();
      if (i === null) return;
      go(i, "hash");
      $("#block").scrollIntoView();
    });
    var start = fromHash();
    slider.value = String(start || 0);
    redraw(start || 0);
    if (start !== null) $("#block").scrollIntoView();
  }

  /* Long identifiers (model.layers.0.self_attn.kv_a_proj_with_mqa) may wrap after a dot or an
     underscore, never inside a word. */
  function softBreaks(code) {
    if (code.children.length || code.textContent.length < 16) return code;
    var parts = code.textContent.split(/(?<=[._\/])(?=[A-Za-z0-9\[{(])/);
    if (parts.length < 2) return code;
    code.textContent = "";
    parts.forEach(function (p, n) { if (n) code.appendChild(document.createElement("wbr")); code.appendChild(document.createTextNode(p)); });
    return code;
  }
  function initSoftBreaks() {
    $all("code").forEach(function (c) { if (!c.closest("pre, svg, .katex, .support td:first-child")) softBreaks(c); });
  }

  /* A box that scrolls sideways says so: a cue under it while its content is wider than it. */
  function initScrollCues() {
    var boxes = $all(".scroll, .diagram-scroll, pre");
    function mark() {
      boxes.forEach(function (box) {
        var over = box.scrollWidth > box.clientWidth + 1;
        box.classList.toggle("overflowing", over);
        var end = box.scrollLeft + box.clientWidth >= box.scrollWidth - 1;
        box.classList.toggle("at-end", end);
        var cue = box.nextElementSibling && box.nextElementSibling.classList.contains("scroll-cue") ? box.nextElementSibling : null;
        if (over && !cue) {
          cue = el("p", { "class": "scroll-cue", "aria-hidden": "true", text: "scroll sideways for more →" });
          box.parentNode.insertBefore(cue, box.nextSibling);
        }
        if (cue) cue.hidden = !over;
      });
    }
    boxes.forEach(function (box) { box.addEventListener("scroll", function () { box.classList.toggle("at-end", box.scrollLeft + box.clientWidth >= box.scrollWidth - 1); }, { passive: true }); });
    mark();
    window.addEventListener("resize", mark);
    document.addEventListener("toggle", mark, true);  // a <details> opened: its tables are laid out now
  }

  /* ---------------------------------------------------------------- ⚠︎ conditions */
  // Focus shows a mark's condition (CSS); a click, a tap or Enter keeps it open or closes it.
  function initWarnings() {
    function flip(mark) {
      var open = !mark.classList.contains("open");
      mark.classList.toggle("open", open);
      mark.setAttribute("aria-expanded", open ? "true" : "false");
    }
    document.addEventListener("click", function (e) {
      var mark = e.target.closest && e.target.closest(".warn[tabindex]");
      if (mark) { e.stopPropagation(); flip(mark); }
    }, true);
    document.addEventListener("keydown", function (e) {
      if ((e.key === "Enter" || e.key === " ") && e.target.classList && e.target.classList.contains("warn")) { e.preventDefault(); flip(e.target); }
    });
  }

  /* ---------------------------------------------------------------- step lists, rendered on opening */
  // A long list of steps arrives inert (a <template>): the browser parses its equations but neither
  // builds nor lays them out until the reader opens the list, so the page's first math paints sooner.
  function openLater(details) {
    $all(":scope > template.on-open", details).forEach(function (t) { t.replaceWith(t.content); });
  }
  function initOnOpen() {
    // on the click itself, before the list is shown; on toggle for a list opened otherwise (the keyboard, find)
    document.addEventListener("click", function (e) {
      var summary = e.target.closest && e.target.closest("details > summary");
      if (summary) openLater(summary.parentNode);
    }, true);
    document.addEventListener("toggle", function (e) { if (e.target.open) openLater(e.target); }, true);
    $all("details[open]").forEach(openLater);
    window.addEventListener("beforeprint", function () { $all("details").forEach(openLater); });
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
        // found by its family's search words, its standard values' names and libraries' names, and its text
        // (all but the text from search-data.js beside the index: atlas/render/site.py render_search_data)
        var family = card.getAttribute("data-family");
        var known = (window.ATLAS_SEARCH || {})[family] || { words: "", names: [], tools: [] };
        var names = $(".names", card);
        if (names) names.remove();  // the names shown for the last search: not part of the card's text
        var hay = (known.words + " " + known.names.join(" ") + " " + known.tools.join(" ") + " " + card.textContent).toLowerCase();
        var ok = words.every(function (w) { return hay.indexOf(w) >= 0; });
        card.hidden = !ok;
        if (ok) shown++;
        names = el("p", { "class": "names small" });
        // The card lists its standard values by name; each has its page at <family>/c/value.<name>.html
        // (atlas/render/search.py), and the build checked that every one exists.
        var entries = known.names.map(function (term) {
          return { term: term, kind: "value", target: family + "/c/value." + term + ".html" };
        }).concat(known.tools.map(function (pair) {
          // a library's name for a value, "hook_resid_pre=layer_input": it leads to that value's page
          var at = pair.lastIndexOf("=");
          return { term: pair.slice(0, at), kind: "tool", target: family + "/c/value." + pair.slice(at + 1) + ".html" };
        }));
        var matches = words.length ? entries.filter(function (n) {
          return words.some(function (w) { return n.term.indexOf(w) >= 0; });
        }) : [];
        if (matches.length) {
          card.appendChild(names);
          names.appendChild(document.createTextNode("standard names: "));
          matches.forEach(function (n, k) {
            if (k) names.appendChild(document.createTextNode(", "));
            names.appendChild(el("a", { href: n.target }, [el("code", { text: n.term })]));
            // a library's name for a value (nnterp's, TransformerLens's) says which standard value it reaches
            if (n.kind === "tool") names.appendChild(document.createTextNode(" (" + n.target.replace(/^.*value\.|\.html$/g, "") + ")"));
          });
        }
      });
      status.textContent = words.length ? shown + " of " + cards.length + " famil" + (cards.length === 1 ? "y" : "ies") + " match" : "";
    }
    input.addEventListener("input", run);
    run();
  }

  document.addEventListener("DOMContentLoaded", function () {
    initOnOpen();
    initWarnings();
    initTheme();
    initSoftBreaks();
    initDiagram();
    initScrollCues();
    initSearch();
    if (window.atlasPreviews) window.atlasPreviews();
  });
})();
