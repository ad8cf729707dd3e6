// agentrunner dashboard: live updates, and nothing else. Every page and
// action works without this script; with it, a page that names a stream
// (data-live-stream) listens to the run's events over Server-Sent Events
// and, after each burst of them, fetches the page again and swaps its
// live parts ([data-live]) in place, keeping the keyboard focus.
(function () {
  "use strict";
  var root = document.querySelector("[data-live-stream]");
  if (!root || !window.fetch || !window.TextDecoder) { return; }
  var url = root.getAttribute("data-live-stream");
  var state = document.getElementById("live-state");
  var events = document.getElementById("events-body");
  var lastID = "";
  var timer = null;

  function say(text) { if (state) { state.textContent = text; } }

  // addEvent puts one event at the top of the events table.
  function addEvent(ev) {
    if (!events) { return; }
    var tr = document.createElement("tr");
    tr.className = "new";
    var d = ev.details ? JSON.stringify(ev.details) : "";
    var cells = [String(ev.id), (ev.timestamp || "").replace("T", " ").replace(/\.\d+/, ""), ev.level || "", ev.event_type || "", ev.step || "", d.length > 300 ? d.slice(0, 300) + "…" : d];
    cells.forEach(function (text, i) {
      var td = document.createElement("td");
      if (i === 2) { var b = document.createElement("span"); b.className = "badge lv-" + text; b.textContent = text; td.appendChild(b); }
      else if (i === 5) { var c = document.createElement("code"); c.className = "details"; c.textContent = text; td.appendChild(c); }
      else { td.textContent = text; }
      tr.appendChild(td);
    });
    events.insertBefore(tr, events.firstChild);
  }

  // refresh fetches the page again and replaces each live part, then
  // puts the focus back on the same link or button if it was in one.
  function refresh() {
    timer = null;
    fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var active = document.activeElement;
        var focusHref = active && active.closest && active.closest("[data-live]") ? active.getAttribute("href") : null;
        document.querySelectorAll("[data-live]").forEach(function (el) {
          var fresh = doc.getElementById(el.id);
          if (fresh) { el.replaceWith(document.importNode(fresh, true)); }
        });
        if (focusHref) {
          var again = document.querySelector('[data-live] a[href="' + focusHref.replace(/"/g, '\\"') + '"]');
          if (again) { again.focus(); }
        }
      })
      .catch(function () { say("(could not refresh)"); });
  }

  function schedule() { if (!timer) { timer = setTimeout(refresh, 300); } }

  // handle parses one SSE message block.
  function handle(block) {
    var data = "", id = "";
    block.split("\n").forEach(function (line) {
      if (line.indexOf("data:") === 0) { data += line.slice(5).trim(); }
      else if (line.indexOf("id:") === 0) { id = line.slice(3).trim(); }
    });
    if (id) { lastID = id; }
    if (!data) { return; }
    try { addEvent(JSON.parse(data)); } catch (e) { return; }
    schedule();
  }

  // connect reads the stream with fetch (an EventSource only hands over
  // the event types it was told of) and reconnects after a pause, from
  // the last event seen.
  function connect() {
    var headers = { "Accept": "text/event-stream" };
    if (lastID) { headers["Last-Event-ID"] = lastID; }
    fetch(url, { credentials: "same-origin", headers: headers }).then(function (r) {
      if (!r.ok || !r.body) { throw new Error(String(r.status)); }
      say("live");
      var reader = r.body.getReader(), dec = new TextDecoder(), buf = "";
      function pump() {
        return reader.read().then(function (res) {
          if (res.done) { throw new Error("closed"); }
          buf += dec.decode(res.value, { stream: true });
          var at;
          while ((at = buf.indexOf("\n\n")) >= 0) { handle(buf.slice(0, at)); buf = buf.slice(at + 2); }
          return pump();
        });
      }
      return pump();
    }).catch(function () {
      say("reconnecting…");
      setTimeout(connect, 3000);
    });
  }
  connect();
})();
