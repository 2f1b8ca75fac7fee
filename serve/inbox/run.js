// The page of one thread: its decisions and its conversation, fetched
// from the inbox's API with the session's key and written with
// textContent, so that every string shows as text, exactly as typed.
"use strict";

(function () {
  var session = window.toolrunSession;
  if (!session.hasKey()) { session.toLogin(); return; }
  var thread = document.getElementById("thread").textContent;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function pretty(v) { return JSON.stringify(v, null, 2); }
  function stamp(t) { return new Date(t).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC"); }

  function render(page, b) {
    var dl = el("dl", "meta");
    [["Owner", b.owner, "owner"], ["Turns", String(b.turns), "turns"], ["Cost", "$" + (b.costUSD || 0).toFixed(4) + (b.costIncomplete ? " (incomplete: a model had no price)" : ""), "cost"]].forEach(function (r) {
      dl.appendChild(el("dt", "", r[0]));
      var dd = el("dd", "", r[1]);
      dd.id = r[2];
      dl.appendChild(dd);
    });
    page.appendChild(dl);
    page.appendChild(el("h2", "", "Decisions"));
    if (!b.trail.length) {
      page.appendChild(el("p", "", "No call of this run has asked for a decision."));
    } else {
      var table = el("table");
      table.id = "trail";
      var head = el("tr");
      ["Asked", "Tool", "Input", "Decision", "By", "At"].forEach(function (h) { head.appendChild(el("th", "", h)); });
      table.appendChild(el("thead")).appendChild(head);
      var body = table.appendChild(el("tbody"));
      b.trail.forEach(function (e) {
        var tr = el("tr", e.status);
        tr.dataset.id = e.id;
        tr.appendChild(el("td", "", stamp(e.createdAt)));
        tr.appendChild(el("td", "tool", e.toolName));
        tr.appendChild(el("td")).appendChild(el("pre", "json", pretty(e.input)));
        var d = el("td", "decision");
        if (e.status === "pending") {
          d.appendChild(el("em", "", "waiting"));
        } else {
          d.appendChild(document.createTextNode((e.decision || e.status) + (e.always ? " (always, for this run)" : "") + (e.reason ? ": " + e.reason : "")));
          if (e.editedInput) d.appendChild(el("pre", "json edited", pretty(e.editedInput)));
          if (e.response) d.appendChild(el("pre", "response", e.response));
        }
        tr.appendChild(d);
        tr.appendChild(el("td", "by", e.decidedBy || ""));
        tr.appendChild(el("td", "", e.decidedAt ? stamp(e.decidedAt) : ""));
        body.appendChild(tr);
      });
      page.appendChild(table);
    }
    page.appendChild(el("h2", "", "Conversation"));
    var ol = el("ol", "turns");
    b.messages.forEach(function (m) {
      var li = el("li", m.role.replace(/\s+/g, "-"));
      li.appendChild(el("b", "", m.role));
      li.appendChild(el("pre", "", m.text));
      ol.appendChild(li);
    });
    page.appendChild(ol);
  }

  var page = document.getElementById("page");
  session.api("/inbox/api/me").then(function (r) { return r.json(); }).then(function (b) {
    document.getElementById("you").textContent = b.name;
  }).catch(function () {});
  session.api("/inbox/api/runs/" + encodeURIComponent(thread)).then(function (r) {
    return r.json().then(function (b) { return { status: r.status, body: b }; });
  }).then(function (res) {
    if (res.status !== 200) {
      page.appendChild(el("p", "error", res.status === 404 ? "There is no run " + thread + " on this server." : res.body.error.message));
    } else {
      render(page, res.body);
    }
    document.body.dataset.loaded = String(Date.now());
  }).catch(function (e) { document.getElementById("load-error").textContent = "Could not load the run: " + e.message; });
})();
