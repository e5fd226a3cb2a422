/* Runs before the page paints: apply the theme the reader chose last time, if any. */
(function () {
  var t = null;
  try { t = localStorage.getItem("atlas-theme"); } catch (e) { /* storage may be off */ }
  if (t === "light" || t === "dark") document.documentElement.setAttribute("data-theme", t);
})();
