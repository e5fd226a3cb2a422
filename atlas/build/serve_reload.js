// Added to each page by `build.py --serve` as it serves it, never written into the site. The pages'
// CSP allows scripts from their own origin and no fetch, so the rebuild status is itself a script,
// loaded again every second; it calls atlasServeStatus with the number of rebuilds done, the families
// being rebuilt, and the last failed rebuild's error line.
(function () {
  "use strict";
  var own = document.currentScript;
  var servedAt = Number(new URL(own.src).searchParams.get("generation"));
  var banner = null;

  function show(error, building) {
    if (!error && !building.length) {
      if (banner) banner.hidden = true;
      return;
    }
    if (!banner) {
      banner = document.createElement("div");
      banner.id = "atlas-serve-status";
      var s = banner.style;
      s.position = "fixed"; s.left = "0"; s.right = "0"; s.top = "0"; s.zIndex = "1000";
      s.padding = "0.6em 1em"; s.font = "14px/1.4 ui-monospace, monospace"; s.whiteSpace = "pre-wrap";
      s.color = "#fff";
      document.body.appendChild(banner);
    }
    banner.setAttribute("role", error ? "alert" : "status");
    banner.style.background = error ? "#7a1212" : "#1f4e79";
    banner.textContent = error ? "The rebuild failed; this is the last good site.\n" + error
                               : "Rebuilding " + building.join(", ") + "\u2026";
    banner.hidden = false;
  }

  window.atlasServeStatus = function (status) {
    if (status.generation !== servedAt) {  // a newer good site: the reloaded page shows any later error itself
      location.reload();
      return;
    }
    show(status.error, status.building);
  };

  function poll() {
    var script = document.createElement("script");
    script.src = "/__atlas__/status.js?at=" + Date.now();
    script.onload = script.onerror = function () {
      script.remove();
      setTimeout(poll, 1000);
    };
    document.head.appendChild(script);
  }
  poll();
})();
