// The page, live: applies /api/v1/stream's parts in place and says how fresh they are.
// Inline, allowed by its hash alone (script-src 'sha256-...'); no eval, no external request but
// the stream (connect-src 'self'). Part HTML is rendered and escaped by the server; it is parsed
// in an inert <template> and moved into the page, never built from strings here.
"use strict";
(function () {
  const LOST_AFTER_MS = 20000; // no event at all for this long (heartbeats come every 15 s)
  const REOPEN_AFTER_MS = 5000; // the stream refused (503) or ended for good: try again
  const RELOAD_AFTER_MS = 1000; // at most one reload a second, should a full state never fit
  const first = document.getElementById("freshness");
  if (!first || !first.dataset.stream || !window.EventSource) return; // a page without a stream

  const SAYS = JSON.parse(first.dataset.says); // what to add to the age, per state
  let age = first.dataset.age === "" ? null : Number(first.dataset.age);
  let state = first.dataset.state || "pending";
  let since = performance.now(); // when `age` was true
  let heard = performance.now(); // the last event of any kind
  let lost = false;
  let known = new Set(); // the part ids the stream gave us
  let source = null;

  function byId(id) {
    return document.getElementById(id);
  }

  function show() {
    const shown = byId("freshness");
    if (!shown) return;
    const silent = performance.now() - heard > LOST_AFTER_MS;
    const why = lost || silent ? "lost" : state;
    const seconds = age === null ? null : Math.max(0, Math.round(age + (performance.now() - since) / 1000));
    const when = seconds === null ? "no evaluation yet" : "updated " + seconds + " s ago";
    shown.textContent = when + SAYS[why];
    shown.className = why === "live" ? "freshness ok" : "freshness bad";
    shown.dataset.state = why;
  }

  function heed(data) {
    heard = performance.now();
    lost = false;
    state = data.state in SAYS ? data.state : "stale";
    if (data.age !== null) {
      age = data.age;
      since = heard;
    }
  }

  function element(html) {
    const template = document.createElement("template");
    template.innerHTML = html; // a server-rendered, escaped part
    return template.content.firstElementChild;
  }

  function keepOpen(old, fresh) {
    // a <details> the reader opened stays open when its part is replaced
    const was = [old, ...old.querySelectorAll("details")].filter((e) => e.tagName === "DETAILS");
    const now = [fresh, ...fresh.querySelectorAll("details")].filter((e) => e.tagName === "DETAILS");
    if (was.length !== now.length) return;
    was.forEach((e, i) => {
      now[i].open = e.open;
    });
  }

  function put(part, before) {
    const container = byId(part.container);
    const fresh = element(part.html);
    if (!container || !fresh) return false;
    const old = byId(part.id);
    if (old) {
      keepOpen(old, fresh);
      old.remove();
    }
    const next = before === null ? null : byId(before);
    if (next && next.parentElement === container) container.insertBefore(fresh, next);
    else container.appendChild(fresh);
    known.add(part.id);
    return true;
  }

  function replace(part) {
    const old = byId(part.id);
    const fresh = element(part.html);
    if (!old || !fresh) return false;
    keepOpen(old, fresh);
    old.replaceWith(fresh);
    return true;
  }

  function remove(id) {
    const old = byId(id);
    if (old) old.remove();
    known.delete(id);
  }

  function whole(data) {
    // everything the view has: drop what it no longer has, then put each part in its place
    const ids = new Set(data.added.map((a) => a.id));
    for (const id of known) if (!ids.has(id)) remove(id);
    for (const container of new Set(data.added.map((a) => a.container))) {
      const node = byId(container);
      if (!node) continue;
      for (const child of [...node.children]) if (child.id && !ids.has(child.id)) child.remove();
    }
    known = new Set();
    for (let i = data.added.length - 1; i >= 0; i--) if (!put(data.added[i], data.added[i].before)) return false;
    return true;
  }

  function apply(data) {
    if (data.full) return whole(data);
    data.removed.forEach(remove);
    for (const part of data.changed) if (!replace(part)) return false;
    for (let i = data.added.length - 1; i >= 0; i--) if (!put(data.added[i], data.added[i].before)) return false;
    return true;
  }

  function open() {
    source = new EventSource(first.dataset.stream + window.location.search); // the same view
    source.addEventListener("evaluation", (event) => {
      const data = JSON.parse(event.data);
      heed(data);
      if (!apply(data)) {
        // out of step with the page: start again from a full state; if even that does not fit
        // (the skeleton changed: the first evaluation arrived), load the page again
        source.close();
        if (data.full) window.setTimeout(() => window.location.reload(), RELOAD_AFTER_MS);
        else window.setTimeout(open, 0);
      }
      show();
    });
    source.addEventListener("heartbeat", (event) => {
      heed(JSON.parse(event.data));
      show();
    });
    source.addEventListener("error", () => {
      lost = true;
      show();
      if (source.readyState === EventSource.CLOSED) reopen(REOPEN_AFTER_MS);
    });
  }

  function reopen(after) {
    source.close();
    window.setTimeout(open, after);
  }

  open();
  show();
  window.setInterval(show, 1000);
})();
