// The approval inbox's page. Every string from a model, a tool, an MCP
// server or a client is written with textContent (never innerHTML), so
// it shows as text whatever it holds; the Content-Security-Policy refuses
// inline script besides.
"use strict";

(function () {
  var csrf = document.querySelector('meta[name="csrf-token"]').getAttribute("content");
  var calls = [];
  var selected = null; // the id of the selected call
  var now = Date.now();
  var skew = 0; // server time minus this browser's

  function $(id) { return document.getElementById(id); }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function pretty(v) { return JSON.stringify(v, null, 2); }

  function ago(t) {
    var s = Math.round((Date.now() + skew - new Date(t).getTime()) / 1000);
    var future = s < 0;
    s = Math.abs(s);
    var txt = s < 60 ? s + " s" : s < 3600 ? Math.round(s / 60) + " min" : s < 86400 ? Math.round(s / 3600) + " h" : Math.round(s / 86400) + " d";
    return future ? "in " + txt : txt + " ago";
  }

  function stamp(t) { return new Date(t).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC"); }

  function flash(msg, kind) {
    var f = $("flash");
    f.textContent = msg;
    f.className = kind || "";
  }

  function filtered() {
    var tool = $("f-tool").value, thread = $("f-thread").value.trim(), age = parseInt($("f-age").value, 10);
    var t = Date.now() + skew;
    return calls.filter(function (c) {
      if (tool && c.toolName !== tool) return false;
      if (thread && c.threadId.indexOf(thread) < 0) return false;
      if (age) {
        var mins = (t - new Date(c.createdAt).getTime()) / 60000;
        if (age > 0 && mins > age) return false;
        if (age < 0 && mins < -age) return false;
      }
      return true;
    });
  }

  function renderTools() {
    var sel = $("f-tool"), cur = sel.value;
    var names = Array.from(new Set(calls.map(function (c) { return c.toolName; }))).sort();
    while (sel.options.length > 1) sel.remove(1);
    names.forEach(function (n) { var o = el("option", "", n); o.value = n; sel.appendChild(o); });
    sel.value = names.indexOf(cur) >= 0 ? cur : "";
  }

  function render() {
    var list = $("list"), shown = filtered();
    var frag = document.createDocumentFragment();
    shown.forEach(function (c) {
      var li = el("li", c.id === selected ? "selected" : "");
      li.dataset.id = c.id;
      li.tabIndex = -1;
      li.appendChild(el("span", "tool", c.toolName));
      li.appendChild(el("span", "thread", c.threadId));
      li.appendChild(el("span", "age", ago(c.createdAt)));
      li.appendChild(el("span", "input", JSON.stringify(c.input).slice(0, 120)));
      li.addEventListener("click", function () { select(c.id); });
      frag.appendChild(li);
    });
    list.replaceChildren(frag);
    $("count").textContent = calls.length === 1 ? "1 call waiting" : calls.length + " calls waiting";
    if (shown.length !== calls.length) $("count").textContent += " (" + shown.length + " shown)";
    $("empty").hidden = calls.length > 0;
    if (calls.length > 0 && shown.length === 0) {
      $("empty").hidden = false;
      $("empty").textContent = "No waiting call matches the filters.";
    } else {
      $("empty").textContent = "Nothing is waiting for a decision. New calls appear here as runs ask.";
    }
    if (!shown.some(function (c) { return c.id === selected; })) {
      selected = shown.length ? shown[0].id : null;
      var first = list.firstChild;
      if (first) first.className = "selected";
    }
    renderDetail();
  }

  function current() {
    for (var i = 0; i < calls.length; i++) if (calls[i].id === selected) return calls[i];
    return null;
  }

  function renderDetail() {
    var c = current(), d = $("detail");
    if (!c) { d.hidden = true; d.dataset.id = ""; return; }
    var same = d.dataset.id === c.id;
    d.hidden = false;
    d.dataset.id = c.id;
    $("d-tool").textContent = c.toolName;
    $("d-thread").textContent = c.threadId;
    $("d-thread").href = "/inbox/runs/" + encodeURIComponent(c.threadId);
    $("d-desc").textContent = c.description || "(the tool has no description)";
    $("d-asked").textContent = stamp(c.createdAt) + " (" + ago(c.createdAt) + ")";
    $("d-expires").textContent = stamp(c.expiresAt) + " (" + ago(c.expiresAt) + ")";
    $("d-run").textContent = c.runTurns + (c.runTurns === 1 ? " turn, $" : " turns, $") + (c.costUSD || 0).toFixed(4) + (c.costIncomplete ? " (incomplete: a model had no price)" : "") + " · owner " + c.owner;
    $("d-reason").textContent = c.reason;
    $("d-input").textContent = pretty(c.input);
    $("d-text").textContent = c.modelText || "(no text before the call)";
    var ol = $("d-turns");
    ol.replaceChildren();
    (c.turns || []).forEach(function (t) {
      var li = el("li", t.role);
      li.appendChild(el("b", "", t.role));
      li.appendChild(el("pre", "", t.text));
      ol.appendChild(li);
    });
    if (!same) {
      $("editor").hidden = true;
      $("reason").value = "";
      $("always").checked = false;
      $("d-result").textContent = "";
    }
  }

  function select(id) {
    selected = id;
    Array.prototype.forEach.call($("list").children, function (li) {
      li.className = li.dataset.id === id ? "selected" : "";
      if (li.dataset.id === id) li.scrollIntoView({ block: "nearest" });
    });
    renderDetail();
  }

  function move(step) {
    var shown = filtered();
    if (!shown.length) return;
    var i = shown.findIndex(function (c) { return c.id === selected; });
    i = Math.max(0, Math.min(shown.length - 1, i + step));
    select(shown[i].id);
  }

  var loading = null, again = false;
  function load() {
    if (loading) { again = true; return loading; }
    loading = fetch("/inbox/api/pending", { headers: { Accept: "application/json" } })
      .then(function (r) {
        if (r.status === 401) { location.href = "/inbox/login"; throw new Error("no session"); }
        return r.json();
      })
      .then(function (body) {
        skew = new Date(body.now).getTime() - Date.now();
        calls = body.pending || [];
        renderTools();
        render();
        document.body.dataset.loaded = String(Date.now());
      })
      .then(function () { $("load-error").textContent = ""; })
      .catch(function (e) { $("load-error").textContent = "Could not load the pending calls: " + e.message; })
      .finally(function () {
        loading = null;
        if (again) { again = false; load(); }
      });
    return loading;
  }

  function decide(body) {
    var c = current();
    if (!c) return;
    var id = c.id, tool = c.toolName;
    return fetch("/inbox/api/interrupts/" + encodeURIComponent(id) + "/decision", {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
      body: JSON.stringify(body)
    }).then(function (r) {
      return r.json().then(function (j) { return { status: r.status, body: j }; });
    }).then(function (res) {
      if (res.status === 200) {
        var b = res.body;
        var what = b.decision === "approve" ? "Approved" : b.decision === "deny" ? "Denied" : "Edited and approved";
        flash(what + " " + tool + " (" + id + ") — by " + b.decidedBy + " at " + stamp(b.decidedAt) + (b.always ? "; always allowed for this run" : "") + (b.nextRun ? "; the run goes on as " + b.nextRun : ""), "ok");
        $("editor").hidden = true;
        document.body.dataset.nextRun = b.nextRun || "";
      } else {
        var msg = (res.body.error && res.body.error.message) || ("the server answered " + res.status);
        flash("Not decided: " + msg, "error");
        if (res.status === 422) showErrors(msg.split("\n").slice(1).map(function (l) { return l.replace(/^- /, ""); }));
      }
      return load();
    }).catch(function (e) { flash("Not decided: " + e.message, "error"); });
  }

  function parseEdit() {
    var c = current(), text = $("edit-input").value, errors = [], value;
    try { value = JSON.parse(text); } catch (e) { errors = ["(root): expected JSON, got " + e.message]; }
    if (!errors.length) errors = window.toolrunValidate(c.schema || {}, value);
    return { value: value, errors: errors };
  }

  function showErrors(errors) {
    var ul = $("edit-errors");
    ul.replaceChildren();
    errors.forEach(function (e) { ul.appendChild(el("li", "", e)); });
  }

  // diffLines returns the lines of a and b as a line diff (longest common
  // subsequence): [" ", line], ["-", line] or ["+", line].
  function diffLines(a, b) {
    var n = a.length, m = b.length, i, j;
    var L = [];
    for (i = 0; i <= n; i++) { L.push(new Array(m + 1).fill(0)); }
    for (i = n - 1; i >= 0; i--) for (j = m - 1; j >= 0; j--) L[i][j] = a[i] === b[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
    var out = [];
    i = 0; j = 0;
    while (i < n && j < m) {
      if (a[i] === b[j]) { out.push([" ", a[i]]); i++; j++; }
      else if (L[i + 1][j] >= L[i][j + 1]) { out.push(["-", a[i]]); i++; }
      else { out.push(["+", b[j]]); j++; }
    }
    for (; i < n; i++) out.push(["-", a[i]]);
    for (; j < m; j++) out.push(["+", b[j]]);
    return out;
  }

  function refreshEdit() {
    var c = current(), p = parseEdit();
    showErrors(p.errors);
    $("edit-send").disabled = p.errors.length > 0;
    var pre = $("edit-diff");
    pre.replaceChildren();
    if (p.errors.length === 0) {
      diffLines(pretty(c.input).split("\n"), pretty(p.value).split("\n")).forEach(function (d) {
        pre.appendChild(el("span", d[0] === "+" ? "add" : d[0] === "-" ? "del" : "same", d[0] + " " + d[1] + "\n"));
      });
    }
  }

  function startEdit() {
    var c = current();
    if (!c) return;
    $("editor").hidden = false;
    $("edit-input").value = pretty(c.input);
    refreshEdit();
    $("edit-input").focus();
  }

  function approve() { decide({ decision: "approve", always: $("always").checked }); }
  function deny() {
    var reason = $("reason").value.trim();
    if (!reason) { $("reason").focus(); flash("Say why in the reason box, then press Deny (or Enter).", ""); return; }
    decide({ decision: "deny", reason: reason });
  }
  function sendEdit() {
    var p = parseEdit();
    if (p.errors.length) { showErrors(p.errors); return; }
    decide({ decision: "edit", input: p.value, always: $("always").checked });
  }

  $("approve").addEventListener("click", approve);
  $("deny").addEventListener("click", deny);
  $("edit").addEventListener("click", startEdit);
  $("edit-send").addEventListener("click", sendEdit);
  $("edit-cancel").addEventListener("click", function () { $("editor").hidden = true; });
  $("edit-input").addEventListener("input", refreshEdit);
  $("reason").addEventListener("keydown", function (e) { if (e.key === "Enter") { e.preventDefault(); deny(); } });
  ["f-tool", "f-age"].forEach(function (id) { $(id).addEventListener("change", render); });
  $("f-thread").addEventListener("input", render);

  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (e.key === "Escape") { if (t && t.blur) t.blur(); $("editor").hidden = true; return; }
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT")) return;
    switch (e.key) {
      case "j": move(1); break;
      case "k": move(-1); break;
      case "a": approve(); break;
      case "d": e.preventDefault(); $("reason").focus(); break;
      case "e": e.preventDefault(); startEdit(); break;
      default: return;
    }
  });

  var es = new EventSource("/inbox/api/events");
  es.addEventListener("changed", function () { load(); });
  es.addEventListener("open", function () { $("live").className = "live on"; });
  es.addEventListener("error", function () { $("live").className = "live"; });
  setInterval(function () { if (calls.length) render(); }, 30000); // ages
  load();
})();
