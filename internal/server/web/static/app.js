// The run page's live part: it follows the run's log stream (Server-Sent
// Events) and appends what arrives as text nodes, never as markup.
"use strict";
(function () {
  var live = document.getElementById("live");
  if (!live || !window.EventSource) {
    return;
  }
  var events = document.getElementById("events");
  var state = document.getElementById("state");
  var reason = document.getElementById("reason");
  var note = document.getElementById("live-note");
  var last = "";

  function say(text) {
    note.textContent = text;
  }

  function setState(status, why) {
    state.textContent = status;
    state.className = "state state-" + status;
    reason.textContent = why ? "(" + why + ")" : "";
  }

  // follow keeps the log scrolled to its end unless the reader scrolled up.
  function append(text) {
    var atEnd = live.scrollTop + live.clientHeight >= live.scrollHeight - 4;
    live.appendChild(document.createTextNode(text));
    if (atEnd) {
      live.scrollTop = live.scrollHeight;
    }
  }

  live.textContent = "";
  say("Following the run as it goes.");
  var es = new EventSource(live.getAttribute("data-stream"));

  es.addEventListener("output", function (e) {
    var p = JSON.parse(e.data);
    var what = p.kind === "check" ? "check " + (p.name || "") : "agent";
    var key = p.attempt + " " + what;
    if (key !== last) {
      append("── attempt " + p.attempt + ", " + what + " ──\n");
      last = key;
    }
    append(p.text);
  });

  es.addEventListener("event", function (e) {
    var ev = JSON.parse(e.data);
    var li = document.createElement("li");
    var parts = [ev.time, ev.type];
    if (ev.attempt) {
      parts.push("attempt " + ev.attempt);
    }
    if (ev.status) {
      parts.push(ev.status);
    }
    if (ev.reason) {
      parts.push(ev.reason);
    }
    if (ev.message) {
      parts.push(ev.message);
    }
    li.textContent = parts.join(" · ");
    events.appendChild(li);
    if (ev.type === "state" && ev.status) {
      setState(ev.status, ev.reason);
    }
  });

  es.addEventListener("end", function (e) {
    es.close();
    var r = JSON.parse(e.data);
    setState(r.status, r.reason);
    document.body.setAttribute("data-run-ended", r.status);
    say("The run has ended: " + r.status + ". ");
    var a = document.createElement("a");
    a.href = window.location.pathname;
    a.textContent = "Reload the page for its result.";
    note.appendChild(a);
  });

  // An "error" event with data is the server's (a catalog error); one
  // without is the connection's, which EventSource retries by itself
  // from the last event id, unless the answer was not a stream at all.
  es.addEventListener("error", function (e) {
    if (e.data) {
      es.close();
      var d = JSON.parse(e.data);
      say("The stream ended with an error: " + (d.error ? d.error.error : e.data));
    } else if (es.readyState === EventSource.CLOSED) {
      say("The stream could not be followed; reload the page to try again.");
    } else {
      say("Reconnecting to the stream…");
    }
  });
})();
