// live.js keeps the status page current: every few seconds it fetches the
// page it is on again and puts each section marked data-live in place of
// the one shown. The HTML comes from the same server, escaped there by
// html/template; nothing else is read or run. While the tab is hidden it
// waits; after a failed fetch it waits longer, up to a minute.
"use strict";
(function () {
  var every = 3000, max = 60000, wait = every;
  var state = document.getElementById("livestate");
  function show(text, cls) {
    if (state) { state.textContent = text; state.className = "livestate " + cls; }
  }
  function next() { setTimeout(tick, wait); }
  function tick() {
    if (document.hidden) { next(); return; }
    fetch(location.href, { headers: { "Accept": "text/html" }, cache: "no-store", credentials: "same-origin" })
      .then(function (resp) {
        if (!resp.ok) { throw new Error("HTTP " + resp.status); }
        return resp.text();
      })
      .then(function (text) {
        var doc = new DOMParser().parseFromString(text, "text/html");
        var open = {};
        document.querySelectorAll("details[open]").forEach(function (d) { open[d.parentNode.id] = true; });
        doc.querySelectorAll("[data-live][id]").forEach(function (fresh) {
          var old = document.getElementById(fresh.id);
          if (!old) { return; }
          if (open[fresh.id]) { fresh.querySelectorAll("details").forEach(function (d) { d.open = true; }); }
          old.replaceWith(document.importNode(fresh, true));
        });
        wait = every;
        show("live", "ok");
      })
      .catch(function (err) {
        wait = Math.min(wait * 2, max);
        show("offline: " + err.message + "; retrying", "off");
      })
      .then(next);
  }
  next();
})();
