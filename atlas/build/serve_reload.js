// Added to each page by `build.py --serve` as it serves it, never written into the site. Four times a second
// it fetches the rebuild status from the page's own origin (/__atlas__/status.json: JSON that no other
// origin may read; the server's policy for the pages it serves while watching allows this one fetch):
// the number of rebuilds done, the families being rebuilt, and the last failed rebuild's error line.
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

  // true when the page is reloading: no further poll
  function apply(status) {
    if (status.generation !== servedAt) {  // a newer good site: the reloaded page shows any later error itself
      location.reload();
      return true;
    }
    show(status.error, status.building);
    return false;
  }

  function poll() {
    fetch("/__atlas__/status.json", {cache: "no-store", credentials: "same-origin"})
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (status) { return status ? apply(status) : false; },
            function () { return false; })  // the server is stopped or restarting: ask again
      .then(function (reloading) { if (!reloading) setTimeout(poll, 250); });
  }
  poll();
})();
