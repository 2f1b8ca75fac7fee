// The story of one thread: every run in the order they started, each
// with its calls, the person's decision on each beside the call and its
// result, how the run ended and what it cost, and a time axis on which
// the waits for a person are drawn. Fetched from the inbox's API with the
// session's key; every string is written with textContent.
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
  function dollars(v) { return "$" + (v || 0).toFixed(4); }
  // span says a duration in milliseconds as a person reads it.
  function span(ms) {
    if (ms < 1000) return ms + " ms";
    var s = ms / 1000;
    if (s < 60) return s.toFixed(1) + " s";
    var m = Math.floor(s / 60);
    if (m < 60) return m + " min " + Math.round(s - m * 60) + " s";
    return Math.floor(m / 60) + " h " + (m % 60) + " min";
  }
  // ended says how a run ended, for a person.
  function ended(r) {
    switch (r.outcome) {
      case "success": return "finished";
      case "interrupt": return "stopped: waiting for a person";
      case "cancelled": return "cancelled";
      case "interrupted": return "interrupted (the server stopped)";
      case "error": return "failed: " + (r.code || "error") + (r.message ? " — " + r.message : "");
      case "": case undefined: return r.status === "running" ? "running" : r.status;
    }
    return r.outcome;
  }
  // verb names a decision in the past tense.
  function verb(d) {
    return { approve: "approved", deny: "denied", edit: "approved with an edit", respond: "answered in the tool's place" }[d.decision] || d.decision;
  }

  function decisionCell(d) {
    var cell = el("div", "decision " + (d.status === "pending" ? "pending" : d.decision));
    if (d.status === "pending") {
      cell.appendChild(el("b", "", "waiting for a person"));
      cell.appendChild(el("span", "when", " since " + stamp(d.waitFrom) + " (" + span(d.waitMs) + " so far)"));
      return cell;
    }
    var who = el("span", "by", d.decidedBy || "");
    cell.appendChild(el("b", "what", verb(d) + (d.always ? " (always, for this run)" : "")));
    cell.appendChild(document.createTextNode(" by "));
    cell.appendChild(who);
    cell.appendChild(el("span", "when", " at " + stamp(d.decidedAt) + ", after a wait of " + span(d.waitMs)));
    if (d.reason) cell.appendChild(el("p", "reason", "Reason: " + d.reason));
    if (d.editedInput) cell.appendChild(el("pre", "json edited", pretty(d.editedInput)));
    if (d.response) cell.appendChild(el("pre", "response", d.response));
    return cell;
  }

  function callItem(c, runIndex, byRun) {
    var li = el("li", "call");
    li.dataset.call = c.toolCallId;
    var head = el("div", "call-head");
    head.appendChild(el("span", "tool", c.toolName));
    head.appendChild(el("span", "when", stamp(c.at)));
    li.appendChild(head);
    li.appendChild(el("pre", "json", pretty(c.input)));
    if (c.decision) li.appendChild(decisionCell(c.decision));
    var denied = c.decision && c.decision.status !== "pending" && c.decision.decision === "deny";
    if (c.resultAt) {
      var res = el("div", "result" + (denied ? " denial" : ""));
      var label = denied ? "The model was told" : c.decision && c.decision.decision === "respond" ? "The model got the person's answer" : "Result";
      if (c.resultRun && byRun[c.resultRun] !== runIndex) label += " (in run " + (byRun[c.resultRun] + 1) + ")";
      res.appendChild(el("b", "", label + ", " + stamp(c.resultAt)));
      res.appendChild(el("pre", "", c.result + (c.resultTruncated ? "…" : "")));
      li.appendChild(res);
    } else if (!c.decision || c.decision.status !== "pending") {
      li.appendChild(el("p", "result none", "No result yet."));
    }
    if (denied) li.classList.add("denied");
    return li;
  }

  // timeline draws the thread on one time axis: a row per run (its span),
  // and under it a row per call that waited (the wait, from the moment
  // it began waiting to the decision) and ran (to its result).
  function timeline(b, byRun) {
    var from = Infinity, to = -Infinity;
    function see(t) { if (!t) return; var v = Date.parse(t); if (v < from) from = v; if (v > to) to = v; }
    b.runs.forEach(function (r) {
      see(r.startedAt); see(r.endedAt || (r.status === "running" ? b.now : r.startedAt));
      r.calls.forEach(function (c) {
        see(c.at); see(c.resultAt);
        if (c.decision) { see(c.decision.waitFrom); see(c.decision.decidedAt || b.now); }
      });
    });
    var box = el("section", "axis");
    box.id = "axis";
    box.setAttribute("aria-label", "the thread on a time axis");
    if (!isFinite(from)) return box;
    var total = Math.max(to - from, 1);
    function bar(row, cls, a, z, title) {
      var s = el("span", "bar " + cls);
      var x = (Date.parse(a) - from) / total, w = Math.max((Date.parse(z) - Date.parse(a)) / total, 0.004);
      s.style.left = (x * 100).toFixed(3) + "%";
      s.style.width = (Math.min(w, 1 - x) * 100).toFixed(3) + "%";
      s.title = title;
      row.querySelector(".track").appendChild(s);
      return s;
    }
    function row(label, cls) {
      var r = el("div", "row " + (cls || ""));
      r.appendChild(el("span", "label", label));
      r.appendChild(el("span", "track"));
      box.appendChild(r);
      return r;
    }
    var scale = el("div", "row scale");
    scale.appendChild(el("span", "label", ""));
    var tr = scale.appendChild(el("span", "track"));
    tr.appendChild(el("span", "start", stamp(new Date(from).toISOString())));
    tr.appendChild(el("span", "end", "+" + span(to - from)));
    box.appendChild(scale);
    b.runs.forEach(function (r, i) {
      var rr = row("run " + (i + 1), "run");
      bar(rr, "run " + (r.outcome || r.status), r.startedAt, r.endedAt || b.now, "run " + r.id + ": " + ended(r));
      r.calls.forEach(function (c) {
        if (!c.decision && !c.resultAt) return;
        var cr = row(c.toolName, "call");
        if (c.decision) {
          var d = c.decision;
          var w = bar(cr, "wait", d.waitFrom, d.decidedAt || b.now, "waited " + span(d.waitMs) + " for a person" + (d.decidedBy ? "; " + verb(d) + " by " + d.decidedBy : ""));
          w.appendChild(el("span", "what", "wait " + span(d.waitMs) + (d.decidedBy ? " → " + d.decision + " by " + d.decidedBy : "")));
          w.dataset.call = c.toolCallId;
        }
        if (c.resultAt) {
          // The tool runs once its run does: after the decision, and no
          // sooner than the run that gave its result started.
          var since = c.decision && c.decision.decidedAt ? c.decision.decidedAt : c.at;
          var rr2 = b.runs[byRun[c.resultRun]];
          if (rr2 && Date.parse(rr2.startedAt) > Date.parse(since)) since = rr2.startedAt;
          var denied = c.decision && c.decision.decision === "deny";
          bar(cr, denied ? "told denial" : "ran", since, c.resultAt, denied ? "the model was told of the denial" : "the tool ran");
        }
      });
    });
    var key = el("p", "key");
    [["run", "a run"], ["wait", "waiting for a person"], ["ran", "a tool running"], ["denial", "a denial told"]].forEach(function (k) {
      key.appendChild(el("span", "bar " + k[0]));
      key.appendChild(document.createTextNode(" " + k[1] + "  "));
    });
    box.appendChild(key);
    return box;
  }

  function render(page, b) {
    var dl = el("dl", "meta");
    var waited = b.decisions ? span(b.waitMs) + " over " + b.decisions + " decision" + (b.decisions === 1 ? "" : "s") : "none";
    [["Owner", b.owner, "owner"], ["Runs", String(b.runs.length), "runs-count"], ["Turns", String(b.turns), "turns"],
     ["Cost", dollars(b.costUSD) + (b.costIncomplete ? " (incomplete: a model had no price)" : ""), "cost"],
     ["Decisions", b.decisions + (b.denials ? " (" + b.denials + " denied)" : ""), "decisions"],
     ["Waiting for a person", waited, "waited"]].forEach(function (r) {
      dl.appendChild(el("dt", "", r[0]));
      var dd = el("dd", "", r[1]);
      dd.id = r[2];
      dl.appendChild(dd);
    });
    page.appendChild(dl);
    page.appendChild(el("h2", "", "Time"));
    var byRun = {};
    b.runs.forEach(function (r, i) { byRun[r.id] = i; });
    page.appendChild(timeline(b, byRun));
    page.appendChild(el("h2", "", "Runs"));
    var ol = el("ol", "runs");
    ol.id = "runs";
    b.runs.forEach(function (r, i) {
      var li = el("li", "run " + (r.outcome || r.status));
      li.id = "run-" + r.id;
      li.dataset.run = r.id;
      var h = el("h3");
      h.appendChild(el("span", "n", "Run " + (i + 1) + " "));
      h.appendChild(el("code", "", r.id));
      h.appendChild(el("span", "end", ended(r)));
      li.appendChild(h);
      var facts = el("p", "facts");
      var cost = r.costKnown ? dollars(r.costUSD) : "cost unknown";
      facts.appendChild(el("span", "started", "started " + stamp(r.startedAt) + (r.endedAt ? ", ran " + span(Date.parse(r.endedAt) - Date.parse(r.startedAt)) : "")));
      facts.appendChild(document.createTextNode(" · by " + r.owner + " · "));
      facts.appendChild(el("span", "cost", cost));
      facts.appendChild(document.createTextNode(" (" + r.inputTokens + " in, " + r.outputTokens + " out" + (r.model ? ", " + r.model : "") + ")"));
      li.appendChild(facts);
      if (r.continuesFrom) li.appendChild(el("p", "continues", "Went on from run " + (byRun[r.continuesFrom] + 1) + " after its decisions."));
      if (r.calls.length) {
        var calls = el("ol", "calls");
        r.calls.forEach(function (c) { calls.appendChild(callItem(c, i, byRun)); });
        li.appendChild(calls);
      }
      if (r.answer) li.appendChild(el("pre", "answer", r.answer));
      ol.appendChild(li);
    });
    page.appendChild(ol);
    if (!b.runs.length) page.appendChild(el("p", "", "The server has no run of this thread."));
  }

  var page = document.getElementById("page");
  session.api("/inbox/api/me").then(function (r) { return r.json(); }).then(function (b) {
    document.getElementById("you").textContent = b.name;
  }).catch(function () {});
  session.api("/inbox/api/threads/" + encodeURIComponent(thread)).then(function (r) {
    return r.json().then(function (b) { return { status: r.status, body: b }; });
  }).then(function (res) {
    if (res.status !== 200) {
      page.appendChild(el("p", "error", res.status === 404 ? "There is no thread " + thread + " on this server." : res.body.error.message));
    } else {
      render(page, res.body);
    }
    document.body.dataset.loaded = String(Date.now());
  }).catch(function (e) { document.getElementById("load-error").textContent = "Could not load the thread: " + e.message; });
})();
