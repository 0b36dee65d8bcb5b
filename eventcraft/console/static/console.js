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

  function newest() {
    var first = rows.querySelector("tr[data-position]");
    return first ? first.getAttribute("data-position") : "0";
  }

  function poll() {
    if (paused || busy) { return; }
    busy = true;
    var url = toggle.getAttribute("data-url");
    url += (url.indexOf("?") < 0 ? "?" : "&") + "after=" + newest();
    fetch(url, { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : ""; })
      .then(function (html) {
        if (!paused && html.trim()) {
          var holder = document.createElement("tbody");
          holder.innerHTML = html;
          var added = Array.prototype.slice.call(holder.children);
          for (var i = added.length - 1; i >= 0; i--) {
            added[i].classList.add("new");
            rows.insertBefore(added[i], rows.firstChild);
          }
        }
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
