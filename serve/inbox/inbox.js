// The approval inbox's page. Every string from a model, a tool, an MCP
// server or a client is written with textContent (never innerHTML), so
// it shows as text whatever it holds; the Content-Security-Policy refuses
// inline script besides.
//
// Nothing moves under a person's hands: the selection changes only by
// their own keys and clicks. A call that leaves the pending list while
// selected (decided here or elsewhere) stays in place, marked with who
// decided it, when and what, until the person moves on; a decision is
// sent for the call and the version of it shown in the detail pane, and
// the server refuses one on a call that changed since.
//
// The list is a page of the server's (filtered there), updated by the
// server's change events (calls added, calls removed, the counts), never
// read again whole; "Show more" reads the next page.
"use strict";

(function () {
  var session = window.toolrunSession;
  if (!session.hasKey()) { session.toLogin(); return; }
  var api = session.api;
  var calls = []; // the calls listed, newest first: the pages read, updated by the change events
  var selected = null; // the id of the selected call
  var counts = { waiting: 0, matching: 0, setVersion: "" };
  var next = ""; // the cursor of the page after the calls listed, or ""
  var tools = {}; // the tools of the calls waiting, and how many each has
  var linked = (location.hash.match(/^#call=([^&]+)/) || [])[1] || ""; // a notification's link to one call
  var skew = 0; // server time minus this browser's
  var me = { name: "", scopes: [] };

  function $(id) { return document.getElementById(id); }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function pretty(v) { return JSON.stringify(v, null, 2); }

  function serverNow() { return Date.now() + skew; }

  function ago(t) {
    var s = Math.round((serverNow() - new Date(t).getTime()) / 1000);
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

  function can(scope) { return me.scopes.indexOf(scope) >= 0; }
  function expired(c) { return new Date(c.expiresAt).getTime() <= serverNow(); }

  // what describes a decision: "approve", "deny: reason", "edit",
  // "respond: \"text\"".
  function what(d) {
    if (!d || !d.decision) return "decided";
    return d.decision + (d.always ? " (always, for this run)" : "") + (d.reason ? ": " + d.reason : "") + (d.response ? ": " + JSON.stringify(d.response) : "");
  }

  // query returns the list's filter as the API's query string.
  function query() {
    var q = new URLSearchParams();
    if (linked) { q.set("id", decodeURIComponent(linked)); return q; }
    var tool = $("f-tool").value, thread = $("f-thread").value.trim(), age = $("f-age").value;
    if (tool) q.set("tool", tool);
    if (thread) q.set("thread", thread);
    if (age) q.set("age", age);
    return q;
  }
  // applied is the query of the list shown: the filter boxes may hold one
  // the page has not asked for yet (the person is typing).
  var applied = "";
  function filtering() { return applied !== ""; }

  function renderTools() {
    var sel = $("f-tool"), cur = sel.value;
    var names = Object.keys(tools).sort();
    if (cur && names.indexOf(cur) < 0) names.push(cur);
    while (sel.options.length > 1) sel.remove(1);
    names.forEach(function (n) { var o = el("option", "", n + (tools[n] ? " (" + tools[n] + ")" : "")); o.value = n; sel.appendChild(o); });
    sel.value = cur;
  }

  function render() {
    var list = $("list"), shown = calls;
    // The selection changes only by the person's own keys, clicks and
    // filters.
    if (!shown.some(function (c) { return c.id === selected; })) selected = shown.length ? shown[0].id : null;
    var frag = document.createDocumentFragment();
    shown.forEach(function (c, i) { frag.appendChild(row(c, i)); });
    list.replaceChildren(frag);
    var n = counts.waiting;
    $("count").textContent = n === 1 ? "1 call waiting" : n + " calls waiting";
    if (filtering()) $("count").textContent += " (" + counts.matching + " match)";
    $("more").hidden = !next;
    $("more").textContent = "Show more (" + (counts.matching - calls.filter(function (c) { return !c.gone; }).length) + " not listed)";
    var bulk = can("approve") && counts.matching > 0 && !linked;
    $("bulk-approve").hidden = $("bulk-deny").hidden = !bulk;
    $("bulk-approve").textContent = "Approve all " + counts.matching + "…";
    $("bulk-deny").textContent = "Deny all " + counts.matching + "…";
    $("linked").hidden = !linked;
    $("empty").hidden = calls.length > 0;
    if (counts.waiting > 0 && calls.length === 0) {
      $("empty").textContent = "No waiting call matches the filters.";
    } else {
      $("empty").textContent = "Nothing is waiting for a decision. New calls appear here as runs ask.";
    }
    renderDetail();
    document.body.dataset.listed = String(Date.now());
  }

  // row returns the list's item of calls[i], c.
  function row(c, i) {
    var first = i === 0 || calls[i - 1].group !== c.group;
    var cls = (c.id === selected ? "selected" : "") + (c.gone ? " gone" : "") + (!c.gone && expired(c) ? " expired" : "");
    if (c.group) cls += " grouped" + (first ? " group-first" : "");
    var li = el("li", cls.trim());
    li.dataset.id = c.id;
    if (c.group) li.dataset.group = c.group;
    li.appendChild(el("span", "tool", c.toolName));
    li.appendChild(el("span", "thread", c.threadId));
    li.appendChild(el("span", "age", c.gone ? what(c.outcome) + " by " + (c.outcome && c.outcome.decidedBy || "?") : ago(c.createdAt)));
    if (c.group && first) li.appendChild(el("span", "group", "one response, " + c.groupSize + " calls in parallel"));
    li.appendChild(el("span", "input", JSON.stringify(c.input).slice(0, 120)));
    li.addEventListener("click", function () { select(c.id); });
    return li;
  }

  // renderCall draws again the one call c of the list and the detail
  // pane, after a decision on it: the rest of the list is as it was.
  function renderCall(c) {
    var i = calls.indexOf(c), lis = $("list").children;
    if (i < 0 || lis.length !== calls.length || lis[i].dataset.id !== c.id) { render(); return; }
    lis[i].replaceWith(row(c, i));
    renderDetail();
    document.body.dataset.listed = String(Date.now());
  }

  function current() {
    for (var i = 0; i < calls.length; i++) if (calls[i].id === selected) return calls[i];
    return null;
  }

  // renderInput writes v as JSON.stringify(v, null, 2) does, each key of
  // an object in a box of its own, so that a large value scrolls in its
  // box and every key stays in sight.
  function renderInput(pre, v) {
    pre.replaceChildren();
    if (!v || typeof v !== "object" || Array.isArray(v) || !Object.keys(v).length) { pre.textContent = pretty(v); return; }
    var keys = Object.keys(v);
    pre.appendChild(document.createTextNode("{\n"));
    keys.forEach(function (k, i) {
      var m = el("span", "member");
      m.dataset.key = k;
      m.appendChild(el("span", "key", "  " + JSON.stringify(k) + ":"));
      m.appendChild(document.createTextNode(" " + pretty(v[k]).replace(/\n/g, "\n  ") + (i < keys.length - 1 ? "," : "") + "\n"));
      pre.appendChild(m);
    });
    pre.appendChild(document.createTextNode("}"));
  }

  function renderDetail() {
    var c = current(), d = $("detail");
    if (!c) { d.hidden = true; d.dataset.id = ""; d.dataset.version = ""; return; }
    var same = d.dataset.id === c.id && d.dataset.version === c.version;
    d.hidden = false;
    d.dataset.id = c.id;
    d.dataset.version = c.version;
    $("d-tool").textContent = c.toolName;
    $("d-thread").textContent = c.threadId;
    $("d-thread").href = "/inbox/runs/" + encodeURIComponent(c.threadId);
    $("d-story").href = "/inbox/threads/" + encodeURIComponent(c.threadId);
    $("d-desc").textContent = c.description || "(the tool has no description)";
    $("d-asked").textContent = stamp(c.createdAt) + " (" + ago(c.createdAt) + ")";
    var late = expired(c);
    $("d-expires").textContent = stamp(c.expiresAt) + (late ? " (expired " + ago(c.expiresAt) + ": it can only be denied)" : " (" + ago(c.expiresAt) + ")");
    $("d-expires").className = late ? "expired" : "";
    $("d-run").textContent = c.runTurns + (c.runTurns === 1 ? " turn, $" : " turns, $") + (c.costUSD || 0).toFixed(4) + (c.costIncomplete ? " (incomplete: a model had no price)" : "") + " · owner " + c.owner;
    $("d-reason").textContent = c.reason;
    renderInput($("d-input"), c.input);
    $("d-text").textContent = c.modelText || "(no text before the call)";
    var ol = $("d-turns");
    ol.replaceChildren();
    (c.turns || []).forEach(function (t) {
      var li = el("li", t.role);
      li.appendChild(el("b", "", t.role));
      li.appendChild(el("pre", "", t.text));
      ol.appendChild(li);
    });
    var st = $("d-state");
    if (c.gone) {
      var o = c.outcome;
      st.textContent = o ? "Decided by " + (o.decidedBy || "?") + (o.decidedAt ? " at " + stamp(o.decidedAt) : "") + ": " + what(o) + ". Nothing is left to do here; j/k move on." : "No longer waiting: finding out who decided it…";
      st.hidden = false;
    } else {
      st.hidden = true;
      st.textContent = "";
    }
    var open = !c.gone && can("approve");
    $("approve").disabled = !open || late;
    $("edit").hidden = !c.editable;
    $("edit").disabled = !open || late;
    $("always").disabled = !open || late;
    $("deny").disabled = !open;
    $("reason").disabled = !open;
    $("respond").disabled = !open || late;
    $("respond-send").disabled = !open || late;
    $("edit-send").disabled = $("edit-send").disabled || !open || late;
    if (!same) {
      $("editor").hidden = true;
      $("responder").hidden = true;
      $("response").value = "";
      $("reason").value = "";
      $("always").checked = false;
      $("d-result").textContent = "";
    }
  }

  // select shows the call id; calls decided while shown leave the list
  // once the person moves off them.
  function select(id) {
    selected = id;
    calls = calls.filter(function (c) { return !c.gone || c.id === id; });
    render();
    var li = $("list").querySelector("li.selected");
    if (li) li.scrollIntoView({ block: "nearest" });
  }

  function move(step) {
    var shown = calls;
    if (!shown.length) return;
    var i = shown.findIndex(function (c) { return c.id === selected; });
    i = Math.max(0, Math.min(shown.length - 1, i + step));
    select(shown[i].id);
  }

  // outcome asks the server what became of a call that left the list.
  function outcome(c) {
    return api("/inbox/api/interrupts/" + encodeURIComponent(c.id)).then(function (r) { return r.ok ? r.json() : null; }).then(function (o) {
      if (o && o.status !== "pending") {
        c.outcome = { decision: o.decision.decision, reason: o.decision.reason, response: o.decision.response, always: o.decision.always, decidedBy: o.decidedBy, decidedAt: o.decidedAt };
      } else if (!o) {
        c.outcome = { decision: "gone" };
      }
      render();
    }).catch(function () {});
  }

  // setCounts takes the counts of an answer or event of the server.
  function setCounts(b) {
    counts = { waiting: b.waiting, matching: b.matching, setVersion: b.setVersion };
  }

  // load reads the first page of the list (or, with more, the page after
  // the calls listed).
  var loadSeq = 0;
  function load(more) {
    var q = new URLSearchParams(applied), seq = ++loadSeq;
    if (more && next) q.set("after", next);
    return api("/inbox/api/pending?" + q.toString())
      .then(function (r) {
        if (r.status === 403) return r.json().then(function (b) { throw new Error(b.error.message); });
        return r.json();
      })
      .then(function (body) {
        if (seq !== loadSeq) return; // a later load (a filter changed) answers instead
        take(body, more);
      })
      .catch(function (e) { $("load-error").textContent = "Could not load the pending calls: " + e.message; });
  }

  // take shows a page of the list, as the pending list answers it or the
  // change stream's "ready" event carries it: the first page, or with
  // more the page after the calls listed.
  function take(body, more) {
    skew = new Date(body.now).getTime() - Date.now();
    tools = body.tools || {};
    setCounts(body);
    next = body.next || "";
    var fresh = body.pending || [];
    if (more) {
      var have = {};
      calls.forEach(function (c) { have[c.id] = true; });
      calls = calls.concat(fresh.filter(function (c) { return !have[c.id]; }));
    } else {
      var sel = current(), byID = {};
      fresh.forEach(function (c) { byID[c.id] = c; });
      if (sel && sel.gone && !byID[sel.id]) fresh.splice(Math.min(calls.indexOf(sel), fresh.length), 0, sel);
      calls = fresh;
    }
    if (linked && calls.length) selected = calls[0].id;
    renderTools();
    render();
    document.body.dataset.loaded = String(Date.now());
    $("load-error").textContent = "";
  }

  // apply takes a change event of the server: calls added (or changed)
  // and removed. The selected call, if removed, stays in place, marked.
  function apply(d) {
    setCounts(d);
    if (d.truncated) { load(); return; }
    var byID = {};
    calls.forEach(function (c) { byID[c.id] = c; });
    (d.removed || []).forEach(function (id) {
      var c = byID[id];
      if (!c) return;
      if (c.id === selected) { if (!c.gone) { c.gone = true; outcome(c); } }
      else calls.splice(calls.indexOf(c), 1);
    });
    var oldest = next && calls.length ? calls[calls.length - 1].createdAt : "";
    (d.added || []).forEach(function (c) {
      var had = byID[c.id];
      if (had) {
        if (had.id === selected && had.version !== c.version) flash("The selected call changed while it was shown: read it again before deciding.", "error");
        Object.keys(c).forEach(function (k) { had[k] = c[k]; });
        had.gone = false;
        return;
      }
      // A call older than the page's last is on a page not read yet.
      if (oldest && c.createdAt < oldest) return;
      var i = calls.findIndex(function (o) { return o.createdAt < c.createdAt; });
      calls.splice(i < 0 ? calls.length : i, 0, c);
      tools[c.toolName] = tools[c.toolName] || 1;
    });
    render();
  }

  // refuse says why the key pressed does nothing on the call shown, or "".
  function refusal(c, decision) {
    if (!c) return "No call is selected.";
    if (c.gone) return "Not decided: already decided" + (c.outcome && c.outcome.decidedBy ? " by " + c.outcome.decidedBy + " at " + (c.outcome.decidedAt ? stamp(c.outcome.decidedAt) : "?") + " (" + what(c.outcome) + ")" : "") + "; nothing was sent. Move on with j/k.";
    if (!can("approve")) return "This token may read calls but not decide them.";
    if (decision !== "deny" && expired(c)) return "This call's approval expired at " + stamp(c.expiresAt) + ": it can only be denied.";
    return "";
  }

  function decide(body) {
    var d = $("detail"), c = current();
    var no = refusal(c, body.decision);
    if (no) { flash(no, "error"); $("list").focus(); return; }
    // The call and the version on screen, not whatever is selected when
    // the answer comes.
    var id = d.dataset.id, tool = c.toolName;
    body.version = d.dataset.version;
    return api("/inbox/api/interrupts/" + encodeURIComponent(id) + "/decision", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body)
    }).then(function (r) {
      return r.json().then(function (j) { return { status: r.status, body: j }; });
    }).then(function (res) {
      var b = res.body;
      if (res.status === 200) {
        var verb = { approve: "Approved", deny: "Denied", edit: "Edited and approved", respond: "Answered in its place" }[b.decision] || "Decided";
        flash(verb + " " + tool + " (" + id + ") — by " + b.decidedBy + " at " + stamp(b.decidedAt) + (b.always ? "; always allowed for this run" : "") + (b.nextRun ? "; the run goes on as " + b.nextRun : ""), "ok");
        if (b.nextRun) {
          // The run that goes on is told in the thread's story.
          var a = document.createElement("a");
          a.id = "flash-story";
          a.href = "/inbox/threads/" + encodeURIComponent(c.threadId) + "#run-" + encodeURIComponent(b.nextRun);
          a.textContent = "follow it in the thread's story";
          $("flash").appendChild(document.createTextNode(" — "));
          $("flash").appendChild(a);
        }
        $("editor").hidden = true;
        $("responder").hidden = true;
        c.gone = true;
        c.outcome = { decision: b.decision, reason: body.reason, response: body.response, always: b.always, decidedBy: b.decidedBy, decidedAt: b.decidedAt };
        document.body.dataset.nextRun = b.nextRun || "";
      } else {
        var msg = (b.error && b.error.message) || ("the server answered " + res.status);
        flash("Not decided: " + msg, "error");
        if (b.error && b.error.code === "already_decided") {
          c.gone = true;
          c.outcome = { decision: b.decision && b.decision.decision, reason: b.decision && b.decision.reason, response: b.decision && b.decision.response, always: b.decision && b.decision.always, decidedBy: b.decidedBy, decidedAt: b.decidedAt };
        }
        if (b.error && b.error.code === "changed_since_shown" && b.call) {
          // Show the call as it is now; the person reads it again.
          Object.keys(b.call).forEach(function (k) { c[k] = b.call[k]; });
        }
        if (res.status === 422) showErrors(msg.split("\n").slice(1).map(function (l) { return l.replace(/^- /, ""); }));
      }
      renderCall(c);
      $("list").focus();
      document.body.dataset.acked = String(Date.now());
    }).catch(function (e) { flash("Not decided: " + e.message, "error"); $("list").focus(); });
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
    if (!c.editable) { flash("A client tool's call cannot be edited: the client runs it with the input it was sent. Approve or deny it.", "error"); return; }
    var no = refusal(c, "edit");
    if (no) { flash(no, "error"); return; }
    $("responder").hidden = true;
    $("editor").hidden = false;
    $("edit-input").value = pretty(c.input);
    refreshEdit();
    $("edit-input").focus();
  }

  // startRespond opens the box where a person writes the answer the
  // model gets in the tool's place.
  function startRespond() {
    var c = current();
    var no = refusal(c, "respond");
    if (no) { flash(no, "error"); $("list").focus(); return; }
    $("editor").hidden = true;
    $("responder").hidden = false;
    $("response").focus();
  }
  function sendRespond() {
    var no = refusal(current(), "respond");
    if (no) { flash(no, "error"); $("list").focus(); return; }
    var text = $("response").value;
    if (!text.trim()) { $("response").focus(); flash("Write the answer the model gets as the tool's result, then send it.", ""); return; }
    decide({ decision: "respond", response: text });
  }

  function approve() { decide({ decision: "approve", always: $("always").checked }); }
  function deny() {
    var no = refusal(current(), "deny");
    if (no) { flash(no, "error"); $("list").focus(); return; }
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
  $("edit-cancel").addEventListener("click", function () { $("editor").hidden = true; $("list").focus(); });
  $("edit-input").addEventListener("input", refreshEdit);
  $("respond").addEventListener("click", startRespond);
  $("respond-send").addEventListener("click", sendRespond);
  $("respond-cancel").addEventListener("click", function () { $("responder").hidden = true; $("list").focus(); });
  $("response").addEventListener("keydown", function (e) { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); sendRespond(); } });
  $("reason").addEventListener("keydown", function (e) { if (e.key === "Enter") { e.preventDefault(); deny(); } });
  // A filter is the server's: the list and its change stream start
  // again with it.
  function refilter() { linked = ""; if (location.hash) history.replaceState(null, "", location.pathname); stream(); }
  var typing = null;
  ["f-tool", "f-age"].forEach(function (id) { $(id).addEventListener("change", refilter); });
  $("f-thread").addEventListener("input", function () { clearTimeout(typing); typing = setTimeout(refilter, 120); });
  $("more").addEventListener("click", function () { load(true); });
  $("show-all").addEventListener("click", refilter);

  // The bulk decision: every call the filters match, after a
  // confirmation that says how many; the server refuses it if the set
  // changed since.
  var bulkAsk = null;
  function askBulk(decision) {
    var no = !can("approve") ? "This token may read calls but not decide them." : "";
    if (no) { flash(no, "error"); return; }
    var q = new URLSearchParams(applied), parts = [];
    if (q.get("tool")) parts.push("of tool " + q.get("tool"));
    if (q.get("thread")) parts.push("in threads whose id contains \u201c" + q.get("thread") + "\u201d");
    if (q.get("age")) parts.push($("f-age").selectedOptions[0].textContent);
    bulkAsk = { decision: decision, count: counts.matching, setVersion: counts.setVersion, tool: q.get("tool") || undefined, thread: q.get("thread") || undefined, age: q.get("age") ? parseInt(q.get("age"), 10) : undefined };
    var n = counts.matching === 1 ? "1 call" : counts.matching + " calls";
    $("bulk-text").textContent = (decision === "approve" ? "Approve " : "Deny ") + "all " + n + (parts.length ? " " + parts.join(", ") : " waiting (no filter)") + "? This decides every call the filters match, not only the " + calls.length + " listed" + (decision === "approve" ? "; expired ones stay waiting." : ".");
    $("bulk-reason").hidden = decision !== "deny";
    $("bulk-reason").value = "";
    $("bulk-confirm").textContent = (decision === "approve" ? "Approve " : "Deny ") + n;
    $("bulk-confirm").className = decision === "approve" ? "approve" : "deny";
    $("bulk").hidden = false;
    (decision === "deny" ? $("bulk-reason") : $("bulk-confirm")).focus();
  }
  function sendBulk() {
    var b = bulkAsk;
    if (!b) return;
    if (b.decision === "deny") {
      b.reason = $("bulk-reason").value.trim();
      if (!b.reason) { flash("Say why in the reason box: the model of each call is told.", ""); $("bulk-reason").focus(); return; }
    }
    api("/inbox/api/bulk", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(b) })
      .then(function (r) { return r.json().then(function (j) { return { status: r.status, body: j }; }); })
      .then(function (res) {
        var j = res.body;
        if (res.status === 200) {
          $("bulk").hidden = true;
          bulkAsk = null;
          flash((j.decision === "approve" ? "Approved " : "Denied ") + j.decided + (j.decided === 1 ? " call" : " calls") + " — by " + j.decidedBy + " at " + stamp(j.decidedAt) +
            (j.expired ? "; " + j.expired + " expired, left waiting (they can only be denied)" : "") + (j.decidedElsewhere ? "; " + j.decidedElsewhere + " decided elsewhere meanwhile" : ""), "ok");
          $("list").focus();
        } else {
          if (j.error && j.error.code === "changed_since_shown") { setCounts(j); render(); askBulk(b.decision); }
          flash("Not decided: " + ((j.error && j.error.message) || "the server answered " + res.status), "error");
        }
      })
      .catch(function (e) { flash("Not decided: " + e.message, "error"); });
  }
  $("bulk-approve").addEventListener("click", function () { askBulk("approve"); });
  $("bulk-deny").addEventListener("click", function () { askBulk("deny"); });
  $("bulk-confirm").addEventListener("click", sendBulk);
  $("bulk-cancel").addEventListener("click", function () { $("bulk").hidden = true; bulkAsk = null; $("list").focus(); });
  $("bulk-reason").addEventListener("keydown", function (e) { if (e.key === "Enter") { e.preventDefault(); sendBulk(); } });

  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (e.key === "Escape") { if (t && t.blur) t.blur(); $("editor").hidden = true; $("responder").hidden = true; $("list").focus(); return; }
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT")) return;
    switch (e.key) {
      case "j": move(1); break;
      case "k": move(-1); break;
      case "a": approve(); break;
      case "d":
        e.preventDefault();
        var no = refusal(current(), "deny");
        if (no) flash(no, "error"); else $("reason").focus();
        break;
      case "e": e.preventDefault(); startEdit(); break;
      case "r": e.preventDefault(); startRespond(); break;
      default: return;
    }
  });

  // stream follows the server's change events for the list's filter
  // (fetch rather than EventSource, which cannot send the session's
  // key): its "ready" event carries the first page; then each event
  // updates the list. A new filter ends the stream and starts another.
  // The events are read once the session's scopes are known (whoami),
  // which the page draws with.
  var streaming = null, retry = null, whoami = null;
  function stream() {
    if (streaming) streaming.abort();
    clearTimeout(retry);
    var ctl = new AbortController();
    streaming = ctl;
    var q = query().toString();
    api("/inbox/api/events?" + q, { headers: { Accept: "text/event-stream" }, signal: ctl.signal }).then(function (r) {
      if (r.status === 403) { $("live").className = "live"; return; }
      if (!r.ok || !r.body) throw new Error("status " + r.status);
      $("live").className = "live on";
      var reader = r.body.getReader(), dec = new TextDecoder(), buf = "";
      function pump() {
        return reader.read().then(function (x) {
          if (x.done) throw new Error("the stream ended");
          buf += dec.decode(x.value, { stream: true });
          var i;
          while ((i = buf.indexOf("\n\n")) >= 0) {
            var block = buf.slice(0, i);
            buf = buf.slice(i + 2);
            var ev = (block.match(/^event: (.*)$/m) || [])[1], data = (block.match(/^data: (.*)$/m) || [])[1];
            if (ctl !== streaming) return;
            if (ev === "ready") { applied = q; loadSeq++; take(JSON.parse(data), false); }
            if (ev === "delta") apply(JSON.parse(data));
          }
          return pump();
        });
      }
      return whoami.then(function (readable) {
        if (ctl !== streaming) return;
        if (readable) return pump();
        streaming = null; // no retry: the session may not list the calls
        ctl.abort();
      });
    }).catch(function () {
      if (ctl !== streaming) return;
      $("live").className = "live";
      retry = setTimeout(stream, 1000);
    });
  }

  // The change stream, whose first event is the list's first page, is
  // asked for at once, beside who the session is: the server lists the
  // calls while it answers the other.
  var scopesKnown;
  whoami = new Promise(function (resolve) { scopesKnown = resolve; });
  stream();
  api("/inbox/api/me").then(function (r) { return r.json(); }).then(function (b) {
    me = b;
    $("you").textContent = b.name + (b.tenant ? " (" + b.tenant + ")" : "");
    skew = new Date(b.now).getTime() - Date.now();
    document.body.dataset.scopes = b.scopes.join(" ");
    if (!can("read")) {
      $("scope-note").hidden = false;
      $("scope-note").textContent = "The token " + b.name + " has the approve scope without read: as over the JSON API, it may decide a call whose id it is given, but not list the calls or read their inputs. Log in with a token of the read scope to see them.";
      $("empty").hidden = true;
      document.body.dataset.loaded = String(Date.now());
      scopesKnown(false);
      return;
    }
    if (!can("approve")) {
      $("scope-note").hidden = false;
      $("scope-note").textContent = "The token " + b.name + " may read the calls but not decide them.";
    }
    setInterval(function () { if (calls.length) render(); }, 15000); // ages and expiries
    scopesKnown(true);
  }).catch(function (e) { scopesKnown(false); $("load-error").textContent = "Could not load the inbox: " + e.message; });
})();
