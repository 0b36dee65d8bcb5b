// The Log page's live tail: new events are fetched every two seconds and put on top,
// until paused. Plain JavaScript shipped in the package: no build, no CDN.
(function () {
  "use strict";
  var toggle = document.getElementById("tail-toggle");
  var rows = document.getElementById("log-rows");
  if (!toggle || !rows) { return; }
  var state = document.getElementById("tail-state");
  var paused = false;
  var busy = false;
  // How far the last poll read (its Eventcraft-Read-To header): a poll reads a bounded
  // stretch of the log, so a filter matching little goes on from there, not from its rows.
  var readTo = null;

  function newest() {
    if (readTo !== null) { return readTo; }
    var first = rows.querySelector("tr[data-position]");
    return first ? first.getAttribute("data-position") : "0";
  }

  function poll() {
    if (paused || busy) { return; }
    busy = true;
    var url = toggle.getAttribute("data-url");
    url += (url.indexOf("?") < 0 ? "?" : "&") + "after=" + newest();
    fetch(url, { credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) { return null; }
        var read = response.headers.get("Eventcraft-Read-To");
        return response.text().then(function (html) { return { html: html, read: read }; });
      })
      .then(function (got) {
        if (!got || paused) { return; }  // paused meanwhile: the next poll asks again
        if (got.html.trim()) {
          var holder = document.createElement("tbody");
          holder.innerHTML = got.html;
          var added = Array.prototype.slice.call(holder.children);
          for (var i = added.length - 1; i >= 0; i--) {
            added[i].classList.add("new");
            rows.insertBefore(added[i], rows.firstChild);
          }
        }
        if (got.read !== null && /^[0-9]+$/.test(got.read)) { readTo = got.read; }
      })
      .catch(function () { state.textContent = "live tail: the console cannot be reached"; })
      .then(function () { busy = false; });
  }

  toggle.addEventListener("click", function () {
    paused = !paused;
    toggle.textContent = paused ? "Resume live tail" : "Pause live tail";
    state.textContent = paused ? "paused" : "live: new events appear on top";
    if (!paused) { poll(); }
  });
  setInterval(poll, 2000);
})();
