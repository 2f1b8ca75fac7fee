// The inbox's half of a session. A login hands the page a key, kept in
// this origin's localStorage (which, unlike a cookie, is scoped by port),
// and sent in the X-Inbox-Key header of every request of the inbox's API:
// a server on another port of this host receives the session's cookie but
// never the key, and no answer to the cookie alone holds anything.
"use strict";

(function () {
  var KEY = "toolrun-inbox-key";
  var meta = document.querySelector('meta[name="inbox-key"]');
  if (meta) {
    // The login's answer: keep the key and go on to the inbox.
    localStorage.setItem(KEY, meta.getAttribute("content"));
    location.replace("/inbox");
    return;
  }

  function toLogin() {
    localStorage.removeItem(KEY);
    location.href = "/inbox/login";
  }

  // api fetches path of the inbox's API with the session's key; a 401
  // sends the person to log in.
  function api(path, opts) {
    opts = opts || {};
    var headers = { Accept: "application/json", "X-Inbox-Key": localStorage.getItem(KEY) || "" };
    Object.keys(opts.headers || {}).forEach(function (k) { headers[k] = opts.headers[k]; });
    opts.headers = headers;
    return fetch(path, opts).then(function (r) {
      if (r.status === 401) { toLogin(); throw new Error("the session ended; log in again"); }
      return r;
    });
  }

  function logout() {
    api("/inbox/api/logout", { method: "POST" }).finally(toLogin);
  }

  window.toolrunSession = { api: api, logout: logout, hasKey: function () { return !!localStorage.getItem(KEY); }, toLogin: toLogin };
  document.addEventListener("DOMContentLoaded", function () {
    var b = document.getElementById("logout");
    if (b) b.addEventListener("click", logout);
  });
})();
