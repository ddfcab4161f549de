// The zkrs operator's console: reads the AdminServer's commands and the REST data API of the
// server that serves it. No framework, no network beyond this server.
"use strict";

const COMMANDS = document.body.dataset.commands || "/commands";
const STORAGE = "/api/v1/storage";
const HISTORY = 150; // samples kept for the charts: 5 minutes at one every 2 s
const samples = { latency: [], outstanding: [], connections: [] };
let current = { path: "/", data: null, stat: null };

function $(id) { return document.getElementById(id); }

function text(el, value) { el.textContent = value; }

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

async function command(name) {
  const r = await fetch(COMMANDS + "/" + encodeURIComponent(name));
  if (!r.ok) throw new Error(name + ": HTTP " + r.status);
  return r.json();
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

function chart(id, values) {
  const svg = $(id);
  const max = Math.max(1, ...values);
  const step = 300 / Math.max(1, HISTORY - 1);
  const points = values.map((v, i) => (i * step).toFixed(1) + "," + (58 - (v / max) * 56).toFixed(1)).join(" ");
  svg.replaceChildren();
  const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
  line.setAttribute("points", points);
  svg.appendChild(line);
  const title = document.createElementNS("http://www.w3.org/2000/svg", "title");
  title.textContent = "max " + max;
  svg.appendChild(title);
}

function push(name, v) {
  const a = samples[name];
  a.push(Number(v) || 0);
  if (a.length > HISTORY) a.shift();
}

async function refreshOverview() {
  try {
    const s = (await command("server_stats")).server_stats;
    text($("role"), s.server_state);
    text($("zxid"), "0x" + Number(s.last_processed_zxid).toString(16));
    text($("connections"), s.num_alive_client_connections);
    text($("outstanding"), s.outstanding_requests);
    text($("latency"), s.avg_latency + " / " + s.max_latency);
    text($("uptime"), Math.round(s.uptime / 1000) + " s");
    push("latency", s.avg_latency);
    push("outstanding", s.outstanding_requests);
    push("connections", s.num_alive_client_connections);
    chart("chart-latency", samples.latency);
    chart("chart-outstanding", samples.outstanding);
    chart("chart-connections", samples.connections);
    await refreshMembers(s.server_state);
  } catch (e) {
    text($("role"), "unreachable (" + e.message + ")");
  }
}

async function refreshMembers(state) {
  const body = $("members").tBodies[0];
  if (state === "standalone") {
    body.replaceChildren();
    text($("ensemble-note"), "Standalone: no other members.");
    return;
  }
  const [view, leader] = await Promise.all([command("voting_view"), command("leader")]);
  const rows = Object.entries(view.current_config || {}).map(([sid, m]) => {
    const tr = document.createElement("tr");
    const isLeader = Number(sid) === leader.leader_id;
    if (isLeader) tr.className = "leader";
    for (const v of [sid, m.client_address || (m.server_addresses || []).join(", "), isLeader ? "leader" : "voter"]) {
      const td = document.createElement("td");
      td.textContent = v;
      tr.appendChild(td);
    }
    return tr;
  });
  body.replaceChildren(...rows);
  text($("ensemble-note"), leader.leader_id > 0 ? "Leader: server " + leader.leader_id + "." : "No leader now.");
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
$("command-form").addEventListener("submit", runCommand);
document.querySelectorAll("input[name=view]").forEach((r) => r.addEventListener("change", renderData));
$("user").addEventListener("input", () => { text($("who"), $("user").value ? "as " + $("user").value : "anonymous"); });
$("login").addEventListener("submit", (ev) => { ev.preventDefault(); open(current.path); });

refreshOverview();
setInterval(refreshOverview, 2000);
open(location.hash.length > 1 ? decodeURIComponent(location.hash.slice(1)) : "/");
