/* Fetch the KaTeX fonts the page's equations use (the build lists them in a meta tag before this
   script, atlas/render/math.py) now, with the stylesheets, rather than after the first layout asks for
   them. Loaded async, so that it runs as soon as it arrives, waiting for no stylesheet. Not from a page
   opened from disk, where a font fetched this way is refused as cross-origin (the stylesheet still loads
   it there), and not as a parser preload, which would hold the first paint until the fonts arrive. */
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
