/* Runs before the page paints: apply the theme the reader chose last time, if any. */
(function () {
  var t = null;
  try { t = localStorage.getItem("atlas-theme"); } catch (e) { /* storage may be off */ }
  if (t === "light" || t === "dark") document.documentElement.setAttribute("data-theme", t);
})();

/* Also before the page paints: fetch the KaTeX fonts the page's equations use (the build lists them in
   a meta tag, atlas/render/math.py) now, with the stylesheets, rather than after the first layout asks
   for them. Not from a page opened from disk, where a font fetched this way is refused as cross-origin
   (the stylesheet still loads it there), and not as a parser preload, which would hold the first paint
   until the fonts arrive. */
(function () {
  var meta = document.querySelector('meta[name="atlas-math-fonts"]');
  if (!meta || location.protocol === "file:") return;
  meta.getAttribute("content").split(" ").forEach(function (href) {
    var link = document.createElement("link");
    link.rel = "preload";
    link.as = "font";
    link.type = "font/woff2";
    link.crossOrigin = "anonymous";
    link.href = href;
    document.head.appendChild(link);
  });
})();
