// The jail dashboard page. Every text that a jailed program or a cloned
// repository can influence (hosts, argv, paths, rules) is set with
// textContent, never parsed as HTML.
"use strict";

const csrf = document.querySelector('meta[name="jail-csrf"]').content;
const sessions = new Map();
const maxRows = 500;

// el makes an element with a class and a text.
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

// unseen matches what a person cannot see or would misread in a
// command, as jail pending escapes it: every control, format, private or
// unassigned character and every space but the ASCII one (line and
// paragraph separators, the marks that reorder text).
const unseen = /(?! )[\p{C}\p{Z}]/gu;

// shownArg is one argument of a held command as people read it: quoted,
// with what cannot be seen escaped, when it is empty or holds a space, a
// quote or a character a shell gives a meaning, so that the arguments
// stay apart and none fakes a line of its own (as jail pending does).
function shownArg(a) {
  a = String(a);
  unseen.lastIndex = 0;
  if (a !== "" && !/[\s'"\\$`;&|<>()*?[\]{}#~]/.test(a) && !unseen.test(a)) return a;
  return JSON.stringify(a).replace(unseen, (c) => {
    const n = c.codePointAt(0);
    return n > 0xffff ? "\\U" + n.toString(16).padStart(8, "0") : "\\u" + n.toString(16).padStart(4, "0");
  });
}

function row(cells) {
  const tr = document.createElement("tr");
  for (const c of cells) tr.appendChild(c instanceof Node ? c : el("td", "", c));
  return tr;
}

function time(t) {
  const d = new Date(t);
  return isNaN(d) ? "" : d.toLocaleTimeString();
}

function policy(st) {
  const p = st.policy || {};
  const parts = ["unknown=" + (p.unknown || "deny")];
  if (p.noNetwork) parts.push("no network");
  if (p.allow && p.allow.length) parts.push("allow " + p.allow.join(" "));
  if (p.ask && p.ask.length) parts.push("ask " + p.ask.join(" "));
  if (p.deny && p.deny.length) parts.push("deny " + p.deny.join(" "));
  if (p.commandAsk && p.commandAsk.length) parts.push("command.ask " + p.commandAsk.join(", "));
  if (p.commandDeny && p.commandDeny.length) parts.push("command.deny " + p.commandDeny.join(", "));
  if (p.writable && p.writable.length) parts.push("writable " + p.writable.join(" "));
  if (p.masked) parts.push(p.masked + " masked");
  if (p.askTimeoutSeconds) parts.push("ask timeout " + p.askTimeoutSeconds + "s");
  if (st.added && st.added.length) parts.push("added: " + st.added.join(", "));
  return parts.join("\n");
}

function renderSession(st) {
  const body = document.querySelector("#sessions tbody");
  let tr = body.querySelector('tr[data-session="' + CSS.escape(st.id) + '"]');
  const c = st.counts || {};
  const next = row([st.id, (st.command || []).join(" "), st.project, time(st.started),
    c.allowed || 0, c.denied || 0, c.pending || 0, el("td", "policy", policy(st))]);
  next.className = "session";
  next.dataset.session = st.id;
  if (tr) body.replaceChild(next, tr); else body.appendChild(next);
}

function post(path, body) {
  return fetch(path, {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-Jail-CSRF": csrf },
    body: JSON.stringify(body),
  }).then(async (r) => {
    if (!r.ok) {
      const j = await r.json().catch(() => ({}));
      throw new Error(j.error || r.statusText);
    }
  }).catch((e) => { document.getElementById("error").textContent = String(e.message || e); });
}

function button(label, cls, scope, onclick) {
  const b = el("button", cls, label);
  b.type = "button";
  b.dataset.scope = scope;
  b.addEventListener("click", onclick);
  return b;
}

// renderHeld adds a held request's row; false when it is there already.
function renderHeld(r) {
  const body = document.querySelector("#pending tbody");
  if (body.querySelector('tr[data-id="' + CSS.escape(r.id) + '"]')) return false;
  const what = r.kind === "command"
    ? (r.argv || []).map(shownArg).join(" ") + "\n  in " + shownArg(r.cwd || "")
    : (r.scheme ? r.scheme + "://" : "") + r.host + (r.port ? ":" + r.port : "");
  const scopes = r.kind === "command" ? ["once", "session"] : ["once", "session", "project", "user"];
  const td = el("td", "answer");
  for (const allow of [true, false]) {
    for (const scope of scopes) {
      td.appendChild(button((allow ? "Allow " : "Deny ") + scope, allow ? "allow" : "deny", scope, () =>
        post("/api/answer", { session: r.session, id: r.id, allow: allow, scope: scope })));
    }
  }
  const tr = row([r.id, r.session, r.kind, el("td", "what", what), r.rule, r.waiting || 1, td]);
  tr.className = "pending kind-" + r.kind;
  tr.dataset.id = r.id;
  tr.dataset.session = r.session;
  tr.dataset.host = r.host || "";
  body.appendChild(tr);
  return true;
}

function removeHeld(r) {
  const tr = document.querySelector('#pending tr[data-id="' + CSS.escape(r.id) + '"]');
  if (tr) tr.remove();
  return !!tr;
}

function matches(tr, q) {
  return !q || tr.dataset.text.includes(q);
}

function renderDecision(session, d) {
  const body = document.querySelector("#decisions tbody");
  const td = el("td", "actions");
  if (d.verdict === "deny" && d.host) {
    td.appendChild(button("allow this", "allow allow-this", "session", () =>
      post("/api/rule", { session: session, allow: true, host: d.host, scope: "session" })));
    td.appendChild(button("always", "allow allow-always", "project", () =>
      post("/api/rule", { session: session, allow: true, host: d.host, scope: "project" })));
  }
  const host = d.host + (d.port ? ":" + d.port : "");
  const tr = row([time(d.time), session, el("td", "verdict", d.verdict), el("td", "host", host), d.rule, d.reason, td]);
  tr.className = "decision verdict-" + d.verdict;
  tr.dataset.session = session;
  tr.dataset.host = d.host;
  tr.dataset.verdict = d.verdict;
  tr.dataset.text = [session, d.verdict, host, d.rule || ""].join(" ").toLowerCase();
  tr.hidden = !matches(tr, filterText());
  body.insertBefore(tr, body.firstChild);
  while (body.rows.length > maxRows) body.deleteRow(body.rows.length - 1);
}

function renderActivity(session, a) {
  const body = document.querySelector("#activity tbody");
  const tr = row([time(a.time), session, a.kind, el("td", "what", a.path || a.addr || ""), a.write ? "write" : "", a.errno || ""]);
  tr.className = "activity";
  body.insertBefore(tr, body.firstChild);
  while (body.rows.length > maxRows) body.deleteRow(body.rows.length - 1);
}

function filterText() {
  return document.getElementById("filter").value.trim().toLowerCase();
}

function applyFilter() {
  const q = filterText();
  for (const tr of document.querySelectorAll("#decisions tr.decision")) tr.hidden = !matches(tr, q);
}

function bump(session, f) {
  const st = sessions.get(session);
  if (!st) return;
  st.counts = st.counts || {};
  f(st);
  renderSession(st);
}

function onEvent(e) {
  switch (e.type) {
    case "hello":
      if (e.status) { sessions.set(e.session, e.status); renderSession(e.status); }
      break;
    case "decision":
      if (!e.decision) break;
      renderDecision(e.session, e.decision);
      bump(e.session, (st) => {
        if (e.decision.verdict === "allow") st.counts.allowed = (st.counts.allowed || 0) + 1;
        if (e.decision.verdict === "deny") st.counts.denied = (st.counts.denied || 0) + 1;
      });
      break;
    case "held":
      if (e.request && renderHeld(e.request)) {
        bump(e.session, (st) => { st.counts.pending = (st.counts.pending || 0) + 1; });
      }
      break;
    case "answered":
      if (e.request && removeHeld(e.request)) {
        bump(e.session, (st) => { st.counts.pending = Math.max(0, (st.counts.pending || 0) - 1); });
      }
      break;
    case "rule":
      bump(e.session, (st) => { st.added = (st.added || []).concat([e.rule]); });
      break;
    case "activity":
      if (e.activity) renderActivity(e.session, e.activity);
      break;
    case "ended": {
      sessions.delete(e.session);
      const tr = document.querySelector('#sessions tr[data-session="' + CSS.escape(e.session) + '"]');
      if (tr) tr.remove();
      for (const p of document.querySelectorAll('#pending tr[data-session="' + CSS.escape(e.session) + '"]')) p.remove();
      break;
    }
  }
}

function connect() {
  const conn = document.getElementById("conn");
  const es = new EventSource("/events");
  es.addEventListener("ready", () => { conn.textContent = "live"; conn.className = "conn live"; });
  es.onmessage = (m) => { try { onEvent(JSON.parse(m.data)); } catch (err) { console.error(err); } };
  es.onerror = () => { conn.textContent = "reconnecting"; conn.className = "conn"; };
  es.addEventListener("open", () => {
    // a reconnect replays the snapshot: start from empty tables
    sessions.clear();
    for (const id of ["sessions", "pending", "decisions", "activity"]) {
      document.querySelector("#" + id + " tbody").replaceChildren();
    }
  });
}

document.getElementById("filter").addEventListener("input", applyFilter);
connect();
