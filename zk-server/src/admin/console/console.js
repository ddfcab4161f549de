// The zkrs operator's console: reads the AdminServer's commands and the REST data API of the
// server that serves it. No framework, no network beyond this server.
"use strict";

const COMMANDS = document.body.dataset.commands || "/commands";
const STORAGE = "/api/v1/storage";
const HISTORY = 150; // samples kept for the charts: 5 minutes at one every 2 s
let current = { path: "/", data: null, stat: null };

function $(id) { return document.getElementById(id); }

function text(el, value) { el.textContent = value; }

function round(v) { return Math.round(Number(v) * 100) / 100; }

// HTTP Basic credentials from the header's fields, as base64 of the UTF-8 "user:password".
function authHeaders() {
  const user = $("user").value;
  if (!user) return {};
  const bytes = new TextEncoder().encode(user + ":" + $("password").value);
  let bin = "";
  bytes.forEach((b) => { bin += String.fromCharCode(b); });
  return { Authorization: "Basic " + btoa(bin) };
}

function encodePath(path) {
  return path.split("/").map(encodeURIComponent).join("/");
}

// GET `url` as JSON; an error status throws, its message starting with `what` when given.
async function getJson(url, what) {
  const r = await fetch(url);
  if (!r.ok) throw new Error((what ? what + ": " : "") + "HTTP " + r.status);
  return r.json();
}

async function command(name) {
  return getJson(COMMANDS + "/" + encodeURIComponent(name), name);
}

async function storage(path, query, init) {
  const opts = Object.assign({ headers: authHeaders() }, init || {});
  opts.headers = Object.assign({}, authHeaders(), (init && init.headers) || {});
  const r = await fetch(STORAGE + encodePath(path) + (query ? "?" + query : ""), opts);
  let body = null;
  if ((r.headers.get("content-type") || "").startsWith("application/json")) body = await r.json();
  return { status: r.status, ok: r.ok, body };
}

function showStatus(message, ok) {
  const s = $("status");
  text(s, message);
  s.className = ok ? "ok" : "error";
}

function refusal(what, r) {
  const b = r.body || {};
  return what + ": " + r.status + " " + (b.error || "") + (b.message ? " (" + b.message + ")" : "");
}

// ---- ensemble at a glance ----
//
// This server's figures come from its server_stats command; every member's (this one's
// included) from ENSEMBLE, which this server answers by asking each member `srvr` with a short
// timeout (see zk-server/src/admin/members.rs for why). The charts keep HISTORY samples a
// member, at most MAX_MEMBERS members: a member that does not answer leaves a gap.

const ENSEMBLE = "/console/api/ensemble";
const MAX_MEMBERS = 64;
const SERIES = ["latency", "outstanding", "connections", "lag"];
const COLORS = ["#2a6fd6", "#d6542a", "#1e7b34", "#8a2ad6", "#c79a00", "#00838f", "#ad1457", "#5d4037"];
const history = new Map(); // sid -> { latency: [], outstanding: [], connections: [], lag: [] }

function color(sid) { return COLORS[Math.abs(Number(sid)) % COLORS.length]; }

// One polyline per member and per run of answered samples, scaled to the largest value shown.
function chart(id, series) {
  const svg = $(id);
  const all = [].concat(...series.map((s) => s.values.filter((v) => v !== null)));
  const max = Math.max(1, ...all);
  const step = 300 / Math.max(1, HISTORY - 1);
  svg.replaceChildren();
  for (const s of series) {
    const offset = HISTORY - s.values.length;
    let run = [];
    const flush = () => {
      if (run.length === 0) return;
      const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
      line.setAttribute("points", run.join(" "));
      line.setAttribute("stroke", color(s.sid));
      line.dataset.sid = s.sid;
      svg.appendChild(line);
      run = [];
    };
    s.values.forEach((v, i) => {
      if (v === null) { flush(); return; }
      run.push(((offset + i) * step).toFixed(1) + "," + (58 - (v / max) * 56).toFixed(1));
    });
    flush();
  }
  const title = document.createElementNS("http://www.w3.org/2000/svg", "title");
  title.textContent = "max " + max;
  svg.appendChild(title);
}

function push(sid, name, v) {
  if (!history.has(sid)) {
    if (history.size >= MAX_MEMBERS) return;
    history.set(sid, { latency: [], outstanding: [], connections: [], lag: [] });
  }
  const a = history.get(sid)[name];
  a.push(v === null || v === undefined ? null : Number(v));
  if (a.length > HISTORY) a.shift();
}

function drawCharts() {
  for (const name of SERIES) {
    const series = Array.from(history.entries()).map(([sid, h]) => ({ sid, values: h[name] }));
    chart("chart-" + name, series);
  }
  const legend = $("legend");
  legend.replaceChildren(...Array.from(history.keys()).map((sid) => {
    const span = document.createElement("span");
    span.className = "swatch";
    span.style.borderColor = color(sid);
    span.textContent = sid === 0 ? "this server" : "server " + sid;
    return span;
  }));
}

async function refreshOverview() {
  try {
    const answer = await command("server_stats");
    if (answer.error) throw new Error(answer.error);
    const s = answer.server_stats;
    text($("role"), s.server_state);
    text($("zxid"), "0x" + Number(s.last_processed_zxid).toString(16));
    text($("connections"), s.num_alive_client_connections);
    text($("outstanding"), s.outstanding_requests);
    text($("latency"), round(s.avg_latency) + " / " + s.max_latency);
    text($("uptime"), Math.round(s.uptime / 1000) + " s");
  } catch (e) {
    text($("role"), "not serving (" + e.message + ")");
  }
  await refreshMembers();
}

function cell(tr, value, className) {
  const td = document.createElement("td");
  td.textContent = value === null || value === undefined ? "—" : value;
  if (className) td.className = className;
  tr.appendChild(td);
}

async function refreshMembers() {
  let view;
  try {
    view = await getJson(ENSEMBLE);
  } catch (e) {
    text($("ensemble-note"), "This server did not answer for the ensemble (" + e.message + ").");
    return;
  }
  const rows = view.members.map((m) => {
    const tr = document.createElement("tr");
    tr.dataset.sid = m.sid;
    if (m.role === "leader") tr.className = "leader";
    if (!m.reachable) tr.className = "unreachable";
    cell(tr, view.standalone ? "—" : m.sid + (m.self ? " (this)" : ""));
    cell(tr, m.address);
    cell(tr, m.reachable ? m.role : "unreachable");
    if (!m.reachable) tr.lastChild.title = m.error;
    cell(tr, m.zxid);
    cell(tr, m.lag);
    cell(tr, m.connections);
    cell(tr, m.reachable && m.latency_avg_ms !== null ? round(m.latency_avg_ms) + " / " + m.latency_max_ms : null);
    cell(tr, m.outstanding);
    push(m.sid, "latency", m.reachable ? m.latency_avg_ms : null);
    push(m.sid, "outstanding", m.reachable ? m.outstanding : null);
    push(m.sid, "connections", m.reachable ? m.connections : null);
    push(m.sid, "lag", m.reachable ? m.lag : null);
    return tr;
  });
  $("members").tBodies[0].replaceChildren(...rows);
  drawCharts();
  let note;
  if (view.standalone) note = "Standalone: no other members.";
  else if (view.leader !== null) note = "Leader: server " + view.leader + " at zxid " + view.leader_zxid + ".";
  else note = "No leader answers now.";
  const down = view.members.filter((m) => !m.reachable).map((m) => "server " + m.sid + ": " + m.error);
  if (down.length) note += " Unreachable: " + down.join("; ") + ".";
  if (view.left_out) note += " " + view.left_out + " more members not asked (limit).";
  text($("ensemble-note"), note);
}

// ---- sessions and their watches ----

const SESSIONS = "/console/api/sessions";
let sessionOffset = 0;

async function refreshSessions() {
  const limit = Number($("session-limit").value);
  let page;
  try {
    page = await getJson(SESSIONS + "?offset=" + sessionOffset + "&limit=" + limit);
  } catch (e) {
    text($("sessions-note"), "Sessions not available (" + e.message + ").");
    return;
  }
  const rows = page.sessions.map((s) => {
    const tr = document.createElement("tr");
    tr.dataset.session = s.id;
    cell(tr, s.id);
    cell(tr, s.timeout_ms);
    cell(tr, s.connected_here ? s.remote : "(another server)");
    cell(tr, s.last_seen_ms ? Math.max(0, Math.round((page.now_ms - s.last_seen_ms) / 1000)) + " s ago" : null);
    cell(tr, s.ephemerals);
    let w = s.watches.join(", ");
    if (s.watch_count > s.watches.length) w += " … and " + (s.watch_count - s.watches.length) + " more";
    cell(tr, s.watch_count ? w : "", "watches");
    return tr;
  });
  $("session-table").tBodies[0].replaceChildren(...rows);
  let note = page.total === 0 ? "No sessions."
    : "Sessions " + (page.shown ? page.offset + 1 : 0) + "–" + (page.offset + page.shown) + " of " + page.total + ".";
  if (page.capped) note += " The list is capped at " + page.limit + " a page: use next for more.";
  note += " Watches: " + page.watch_summary.watches + " on " + page.watch_summary.paths +
    " paths (those set through this server).";
  text($("sessions-note"), note);
  $("sessions-prev").disabled = page.offset === 0;
  $("sessions-next").disabled = !page.capped;
}

// ---- tree browser ----

function crumbs(path) {
  const nav = $("crumbs");
  nav.replaceChildren();
  const parts = path === "/" ? [] : path.slice(1).split("/");
  const link = (label, target) => {
    const a = document.createElement("a");
    a.href = "#" + target;
    a.textContent = label;
    a.addEventListener("click", (ev) => { ev.preventDefault(); open(target); });
    return a;
  };
  nav.appendChild(link("/", "/"));
  parts.forEach((p, i) => {
    if (i > 0) nav.appendChild(document.createTextNode(" / "));
    nav.appendChild(link(p, "/" + parts.slice(0, i + 1).join("/")));
  });
}

function hexDump(bytes) {
  const lines = [];
  for (let i = 0; i < bytes.length; i += 16) {
    const row = Array.from(bytes.slice(i, i + 16));
    const hex = row.map((b) => b.toString(16).padStart(2, "0")).join(" ");
    const ascii = row.map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join("");
    lines.push(i.toString(16).padStart(8, "0") + "  " + hex.padEnd(48) + " " + ascii);
  }
  return lines.join("\n");
}

function renderData() {
  const pre = $("data");
  if (!current.data) { text(pre, ""); return; }
  const view = document.querySelector("input[name=view]:checked").value;
  const bin = atob(current.data.data);
  const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
  if (view === "hex") {
    text(pre, hexDump(bytes));
  } else if (view === "json") {
    try { text(pre, JSON.stringify(JSON.parse(current.data.text), null, 2)); }
    catch (e) { text(pre, "(not JSON)"); }
  } else {
    text(pre, current.data.text === null ? "(not UTF-8: view as hex)" : current.data.text);
  }
}

function table(el, rows) {
  el.replaceChildren(...rows.map(([k, v]) => {
    const tr = document.createElement("tr");
    const th = document.createElement("th");
    th.textContent = k;
    const td = document.createElement("td");
    td.textContent = v;
    tr.append(th, td);
    return tr;
  }));
}

async function open(path) {
  current = { path, data: null, stat: null };
  $("path").value = path;
  crumbs(path);
  showStatus("", true);
  const [kids, data, acl] = await Promise.all([
    storage(path, "children=true"),
    storage(path, "format=json"),
    storage(path, "acl=true"),
  ]);
  const list = $("children");
  list.replaceChildren();
  if (kids.ok) {
    for (const name of kids.body.children) {
      const li = document.createElement("li");
      const a = document.createElement("a");
      const target = (path === "/" ? "" : path) + "/" + name;
      a.href = "#" + target;
      a.textContent = name;
      a.dataset.path = target;
      a.addEventListener("click", (ev) => { ev.preventDefault(); open(target); });
      li.appendChild(a);
      list.appendChild(li);
    }
  }
  if (data.ok) {
    current.data = data.body;
    current.stat = data.body.stat;
    $("new-data").value = data.body.text === null ? "" : data.body.text;
    const s = data.body.stat;
    const owner = s.ephemeralOwner ? "0x" + BigInt.asUintN(64, BigInt(s.ephemeralOwner)).toString(16) : "none";
    table($("stat"), [
      ["version", s.version], ["cversion", s.cversion], ["aversion", s.aversion],
      ["czxid", "0x" + s.czxid.toString(16)], ["mzxid", "0x" + s.mzxid.toString(16)],
      ["pzxid", "0x" + s.pzxid.toString(16)], ["ctime", new Date(s.ctime).toISOString()],
      ["mtime", new Date(s.mtime).toISOString()], ["ephemeral owner", owner],
      ["data length", s.dataLength], ["children", s.numChildren],
    ]);
  } else {
    table($("stat"), []);
    showStatus(refusal("read " + path, data), false);
  }
  table($("acl"), acl.ok ? acl.body.acl.map((a) => [a.scheme + ":" + a.id, a.perms]) : [["ACL", "not readable (" + acl.status + ")"]]);
  renderData();
}

async function save(ev) {
  ev.preventDefault();
  if (!current.stat) { showStatus("nothing to save: the node was not read", false); return; }
  const r = await storage(current.path, "version=" + current.stat.version, {
    method: "PUT",
    body: $("new-data").value,
  });
  if (r.ok) {
    showStatus("saved " + current.path + " at version " + r.body.stat.version, true);
    const path = current.path;
    await open(path);
    showStatus("saved " + path + " at version " + r.body.stat.version, true);
  } else {
    showStatus(refusal("save " + current.path, r), false);
  }
}

// The parent of `path` ("/" for a top-level node).
function parentOf(path) {
  const i = path.lastIndexOf("/");
  return i <= 0 ? "/" : path.slice(0, i);
}

async function createChild(ev) {
  ev.preventDefault();
  const name = $("child-name").value.trim();
  if (!name) { showStatus("a child needs a name", false); return; }
  const path = (current.path === "/" ? "" : current.path) + "/" + name;
  const r = await storage(path, "mode=" + encodeURIComponent($("child-mode").value), {
    method: "POST",
    body: $("child-data").value,
  });
  if (r.ok) {
    // A sequential node's name is the server's: open the one it made.
    const made = r.body.path;
    $("child-name").value = "";
    $("child-data").value = "";
    await open(made);
    showStatus("created " + made, true);
  } else {
    showStatus(refusal("create " + path, r), false);
  }
}

async function deleteNode() {
  if (!current.stat) { showStatus("nothing to delete: the node was not read", false); return; }
  const path = current.path;
  if (path === "/") { showStatus("the root cannot be deleted", false); return; }
  if (!window.confirm("Delete " + path + " (version " + current.stat.version + ")?")) return;
  const r = await storage(path, "version=" + current.stat.version, { method: "DELETE" });
  if (r.ok) {
    await open(parentOf(path));
    showStatus("deleted " + path, true);
  } else {
    showStatus(refusal("delete " + path, r), false);
  }
}

// ---- search by path ----
//
// The server walks the tree below the open node with the caller's own reads, bounded in nodes
// listed and matches returned, and says which bound it reached.

async function search(ev) {
  ev.preventDefault();
  const needle = $("search").value;
  if (!needle) return;
  const box = $("search-box");
  box.hidden = false;
  text($("search-note"), "searching below " + current.path + " …");
  $("search-results").replaceChildren();
  const r = await storage(current.path, "search=" + encodeURIComponent(needle));
  if (!r.ok) {
    text($("search-note"), refusal("search below " + current.path, r));
    return;
  }
  const b = r.body;
  const items = b.matches.map((p) => {
    const li = document.createElement("li");
    const a = document.createElement("a");
    a.href = "#" + p;
    a.textContent = p;
    a.dataset.path = p;
    a.addEventListener("click", (e) => { e.preventDefault(); open(p); });
    li.appendChild(a);
    return li;
  });
  $("search-results").replaceChildren(...items);
  let note = b.matches.length + " match" + (b.matches.length === 1 ? "" : "es") + " for " +
    (b.mode === "prefix" ? "paths starting with " : "paths containing ") + JSON.stringify(b.search) +
    " below " + b.path + " (" + b.visited + " nodes listed).";
  if (b.truncated === "results") note += " Stopped at the limit of " + b.limits.results + " matches: narrow the search.";
  if (b.truncated === "visits") note += " Stopped after listing " + b.limits.visits + " nodes: search below a deeper node.";
  if (b.unreadable) note += " " + b.unreadable + " nodes not readable with these credentials were not searched.";
  text($("search-note"), note);
}

// ---- commands ----

async function runCommand(ev) {
  ev.preventDefault();
  const name = $("command").value.trim();
  if (!name) return;
  try {
    text($("command-output"), JSON.stringify(await command(name), null, 2));
  } catch (e) {
    text($("command-output"), e.message);
  }
}

// ---- start ----

$("goto").addEventListener("submit", (ev) => { ev.preventDefault(); open($("path").value || "/"); });
$("edit").addEventListener("submit", save);
$("create").addEventListener("submit", createChild);
$("delete").addEventListener("click", deleteNode);
$("command-form").addEventListener("submit", runCommand);
$("search-form").addEventListener("submit", search);
$("sessions-form").addEventListener("submit", (ev) => { ev.preventDefault(); refreshSessions(); });
$("session-limit").addEventListener("change", () => { sessionOffset = 0; refreshSessions(); });
$("sessions-prev").addEventListener("click", () => {
  sessionOffset = Math.max(0, sessionOffset - Number($("session-limit").value));
  refreshSessions();
});
$("sessions-next").addEventListener("click", () => {
  sessionOffset += Number($("session-limit").value);
  refreshSessions();
});
document.querySelectorAll("input[name=view]").forEach((r) => r.addEventListener("change", renderData));
$("user").addEventListener("input", () => { text($("who"), $("user").value ? "as " + $("user").value : "anonymous"); });
$("login").addEventListener("submit", (ev) => { ev.preventDefault(); open(current.path); });

refreshOverview();
setInterval(refreshOverview, 2000);
refreshSessions();
setInterval(refreshSessions, 5000);
open(location.hash.length > 1 ? decodeURIComponent(location.hash.slice(1)) : "/");
