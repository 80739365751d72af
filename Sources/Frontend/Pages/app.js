// gatt2mqtt's web frontend (docs/frontend.md). Everything it shows comes from the messages the
// bridge publishes on MQTT, streamed by GET /api/events (Server-Sent Events); what it asks for
// goes to the bridge as MQTT messages would: POST /api/request/<action> (bridge/request/<action>)
// and POST /api/devices/<id>/set|get|<topic>/write. No framework, no build step.
"use strict";

// ---- The model: what the bridge published ----
const model = {
  base: "gatt2mqtt",
  bridgeState: null,
  info: null,
  devices: [],          // bridge/devices
  // Everything indexed by a name from outside (a device id, an address, a transaction) is a
  // Map: a plain object would take "__proto__" or "constructor" for its own.
  states: new Map(),    // id -> the device state
  availability: new Map(), // id -> "online" | "offline"
  health: null,         // bridge/health or the last health_check answer
  events: [],           // [{time, topic, payload}] newest last (bridge/event, <id>/response, bridge/response/…)
  logs: [],             // [{time, level, message}] newest last (the log tail)
  sightings: new Map(), // address -> bridge/scan payload
  commands: new Map(),  // transaction -> {device, command, status, history, error, data}
  commandOrder: [],
  scanning: false,
};
const maxEvents = 300;

function reset() {
  Object.assign(model, { bridgeState: null, info: null, devices: [], states: new Map(), availability: new Map(), health: null,
    events: [], logs: [], sightings: new Map(), scanning: false });
}

function pushEvent(topic, payload) {
  model.events.push({ time: new Date(), topic, payload });
  if (model.events.length > maxEvents) model.events.splice(0, model.events.length - maxEvents);
}

// One message the bridge published: `topic` with its `payload` (JSON, a string, or null when a
// retained topic was cleared).
function apply(msg) {
  const prefix = model.base + "/";
  if (!msg.topic.startsWith(prefix)) return;
  const rest = msg.topic.slice(prefix.length);
  const parts = rest.split("/");
  const p = msg.payload;
  if (parts[0] === "bridge") {
    switch (parts[1]) {
      case "state": model.bridgeState = p && p.state; return;
      case "info": model.info = p; if (p) model.scanning = !!p.scanning; return;
      case "devices": model.devices = Array.isArray(p) ? p : []; return;
      case "health": model.health = p; return;
      case "scan": if (p && p.address) model.sightings.set(String(p.address), Object.assign({ seen: new Date() }, p)); return;
      case "event":
        if (p && p.type === "scan_started") model.scanning = true;
        if (p && p.type === "scan_stopped") model.scanning = false;
        pushEvent(msg.topic, p); return;
      case "response": pushEvent(msg.topic, p); return;
      case "logging":   // the log tail (frontend only: not published on MQTT)
        model.logs.push({ time: new Date(), level: p && p.level, message: p && p.message });
        if (model.logs.length > maxEvents) model.logs.splice(0, model.logs.length - maxEvents);
        return;
      default: return;
    }
  }
  const id = parts[0];
  if (parts.length === 1) {
    if (p === null) model.states.delete(id); else model.states.set(id, p);
  } else if (parts.length === 2 && parts[1] === "availability") {
    if (p === null) model.availability.delete(id); else model.availability.set(id, p && p.state);
  } else if (parts.length === 2 && parts[1] === "response") {
    pushEvent(msg.topic, p);
    trackCommand(id, p);
  } else if (!msg.retain) {
    pushEvent(msg.topic, p);
  }
}

// A command's lifecycle (queued → sent → ok | error | expired), by its transaction.
function trackCommand(device, p) {
  if (!p || p.transaction === undefined) return;
  const t = typeof p.transaction === "string" ? p.transaction : JSON.stringify(p.transaction);
  let c = model.commands.get(t);
  if (!c) { c = { device, command: p.command, history: [] }; model.commands.set(t, c); model.commandOrder.push(t); }
  c.status = p.status;
  c.history.push(p.status);
  if (p.command) c.command = p.command;
  c.error = p.error || null;
  c.data = p.data;
}

// ---- Talking to the bridge ----
async function post(path, body) {
  const res = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body), credentials: "same-origin" });
  let json = null;
  try { json = await res.json(); } catch (e) { json = null; }
  return { ok: res.ok, status: res.status, json };
}

// bridge/request/<action>; resolves to {ok, data | error}.
async function request(action, body) {
  const r = await post("/api/request/" + action, body || {});
  if (r.json && r.json.status === "ok") return { ok: true, data: r.json.data };
  return { ok: false, error: (r.json && r.json.error) || ("HTTP " + r.status) };
}

// A command for a device; its lifecycle then arrives on <id>/response.
async function command(device, kind, body) {
  const r = await post("/api/devices/" + encodeURIComponent(device) + "/" + kind, body);
  if (r.ok && r.json && r.json.transaction) {
    const t = r.json.transaction;
    if (!model.commands.has(t)) {
      model.commands.set(t, { device, command: typeof body === "string" ? body : body, status: "posted", history: ["posted"] });
      model.commandOrder.push(t);
    }
  }
  render();
  return r;
}

async function refreshHealth() {
  const r = await request("health_check", {});
  if (r.ok) { model.health = r.data; render(); }
}

// ---- The live stream ----
let source = null;
function connect() {
  source = new EventSource("/api/events");
  source.addEventListener("hello", (e) => {
    const h = JSON.parse(e.data);
    model.base = h.base;
    document.body.dataset.boot = h.boot;   // which bridge process this page listens to
    if (h.reset) reset();
  });
  source.addEventListener("ready", () => { setLive(true); refreshHealth(); render(); });
  source.onmessage = (e) => { apply(JSON.parse(e.data)); render(); };
  source.onerror = () => setLive(false);   // the browser reconnects by itself (retry: 2 s)
}

function setLive(on) {
  const el = document.getElementById("live");
  el.textContent = on ? "live" : "reconnecting…";
  el.className = "pill " + (on ? "live" : "down");
}

// ---- Rendering helpers ----
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) { el.addEventListener(k.slice(2), v); el.handlers = true; }
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}
function pill(text, cls) { return h("span", { class: "pill " + (cls || text) }, text); }
function fmt(v) {
  if (v === null || v === undefined) return "—";
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}
function ago(iso) {
  if (!iso) return "—";
  const s = Math.round((Date.now() - Date.parse(iso)) / 1000);
  if (isNaN(s)) return iso;
  if (s < 60) return s + " s ago";
  if (s < 3600) return Math.round(s / 60) + " min ago";
  return new Date(iso).toLocaleString();
}
function battery(state) {
  if (!state) return null;
  for (const k of ["battery", "battery_level", "internal_battery_percentage"]) {
    const v = state[k];
    if (typeof v === "number") return v + " %";
    if (v && typeof v === "object" && typeof v.battery_level === "number") return v.battery_level + " %";
  }
  return null;
}
// obj[key] when it is obj's own (not Object.prototype's: key may be "__proto__").
function own(obj, key) {
  return obj && typeof obj === "object" && Object.prototype.hasOwnProperty.call(obj, key) ? obj[key] : undefined;
}
function deviceInfo(id) { return model.devices.find((d) => d.id === id); }
function link(id) {
  const d = model.health && own(model.health.devices, id);
  if (!d) return pill("?", "pending");
  // A passive sensor is never connected: it is heard (its advertisements) or not.
  if (d.passive) return d.available ? pill("heard", "ok") : pill("not heard", "offline");
  return d.connected ? pill("connected", "ok") : pill("no link", "offline");
}
function feedback(el, r, okText) {
  el.className = "feedback " + (r.ok ? "ok" : "error");
  el.textContent = r.ok ? (okText || "ok") : ("error: " + (r.error || (r.json && r.json.error) || ("HTTP " + r.status)));
}
// A shortcut value as the bridge reads it (<device>/set/<attribute>): ON/OFF, JSON, or text.
function shortcut(v) {
  const t = String(v).trim();
  if (/^(on|true)$/i.test(t)) return true;
  if (/^(off|false)$/i.test(t)) return false;
  try { return JSON.parse(t); } catch (e) { return t; }
}

// ---- Views ----
// Each view builds its static part (forms) once per navigation, and its live parts again
// after every message (`live` functions), so typing into a form is never interrupted.
let current = { name: null, arg: null, live: [] };

function route() {
  const hash = location.hash || "#/";
  const m = hash.match(/^#\/(device)\/([^/]+)$/) || hash.match(/^#\/(scan|bridge)$/);
  const name = m ? m[1] : "devices";
  const arg = m && m[2] ? decodeURIComponent(m[2]) : null;
  document.querySelectorAll("[data-nav]").forEach((a) => a.classList.toggle("active", a.dataset.nav === (name === "device" ? "devices" : name)));
  const view = document.getElementById("view");
  view.replaceChildren();
  current = { name, arg, live: [] };
  ({ devices: viewDevices, device: viewDevice, scan: viewScan, bridge: viewBridge })[name](view, arg);
  render();
}

let pending = false;
function render() {
  if (pending) return;
  pending = true;
  requestAnimationFrame(() => {
    pending = false;
    const s = document.getElementById("bridge-state");
    s.textContent = "bridge " + (model.bridgeState || "?");
    s.className = "pill " + (model.bridgeState || "");
    for (const f of current.live) f();
  });
}
function live(container, build) {
  current.live.push(() => patch(container, [build()].flat().filter((c) => c !== null && c !== undefined && c !== false)
    .map((c) => c instanceof Node ? c : document.createTextNode(String(c)))));
  return container;
}
// Brings `parent`'s children to `wanted` keeping every node that is already right: a live part is
// rebuilt after every message (the heart rate's, every second), and a link or a button replaced
// between the press and the release of the mouse loses the click. An element is kept when its tag
// is the same (its attributes and children are then brought over); one with handlers (`on…` in
// `h`) is always the new one, since its handlers close over the data it was built from.
function patch(parent, wanted) {
  const have = Array.from(parent.childNodes);
  wanted.forEach((want, i) => {
    const old = have[i];
    if (old === want) return;
    if (old && old.nodeType === Node.TEXT_NODE && want.nodeType === Node.TEXT_NODE) {
      if (old.data !== want.data) old.data = want.data;
    } else if (old && old.nodeType === Node.ELEMENT_NODE && want.nodeType === Node.ELEMENT_NODE &&
               old.tagName === want.tagName && !old.handlers && !want.handlers) {
      for (const a of Array.from(old.attributes)) if (!want.hasAttribute(a.name)) old.removeAttribute(a.name);
      for (const a of Array.from(want.attributes)) if (old.getAttribute(a.name) !== a.value) old.setAttribute(a.name, a.value);
      patch(old, Array.from(want.childNodes));
    } else if (old) {
      parent.replaceChild(want, old);
    } else {
      parent.append(want);
    }
  });
  for (const extra of have.slice(wanted.length)) if (extra.parentNode === parent) extra.remove();
}

function viewDevices(view) {
  view.append(h("h1", {}, "Devices"));
  const card = h("div", { class: "card" });
  view.append(card);
  live(card, () => {
    if (!model.devices.length) return h("p", { class: "muted" }, "No devices yet: add one from ", h("a", { href: "#/scan" }, "Scan & add"), ".");
    return h("table", { id: "devices" },
      h("tr", {}, ["Name", "Id", "Profile", "Address", "Availability", "Link", "RSSI", "Battery", "Last seen"].map((t) => h("th", {}, t))),
      model.devices.map((d) => {
        const st = model.states.get(d.id) || {};
        const av = model.availability.get(d.id);
        return h("tr", { "data-device": d.id },
          h("td", {}, h("a", { href: "#/device/" + encodeURIComponent(d.id) }, d.name || d.id)),
          h("td", { class: "mono" }, d.id),
          h("td", {}, d.profile),
          h("td", { class: "mono" }, d.address || d.name_pattern || "—"),
          h("td", { class: "availability" }, pill(av || "unknown", av || "pending")),
          h("td", {}, link(d.id)),
          h("td", { class: "num" }, typeof st.rssi === "number" ? st.rssi + " dBm" : "—"),
          h("td", { class: "num" }, battery(st) || "—"),
          h("td", {}, ago(st.last_seen || d.last_seen)));
      }));
  });
}

function viewDevice(view, id) {
  const title = h("h1", {});
  view.append(live(title, () => {
    const d = deviceInfo(id);
    const av = model.availability.get(id);
    return [d ? (d.name || id) + " " : id + " ", pill(av || "unknown", av || "pending"), " ", link(id),
      h("span", { class: "sub" }, d ? `  ${d.profile} · ${d.address || d.name_pattern || ""} · from ${d.source}` : "  (not configured)")];
  }));
  const grid = h("div", { class: "grid" });
  view.append(grid);

  const state = h("div", { class: "card" }, h("h2", {}, "State"));
  const stateBody = h("div", { id: "state" });
  state.append(live(stateBody, () => {
    const st = model.states.get(id);
    if (!st) return h("p", { class: "muted" }, "No state yet.");
    return h("table", { class: "kv" }, Object.entries(st).map(([k, v]) => h("tr", { "data-key": k }, h("td", {}, k), h("td", { class: "mono" }, fmt(v)))));
  }));

  const controls = h("div", { class: "card controls" }, h("h2", {}, "Commands"));
  const controlsBody = h("div", { id: "controls" }, h("p", { class: "muted" }, "Loading…"));
  controls.append(controlsBody);
  loadControls(id, controlsBody);

  const cmds = h("div", { class: "card" }, h("h2", {}, "Command lifecycle"));
  cmds.append(live(h("div", { id: "commands", class: "log" }), () => {
    const rows = model.commandOrder.filter((t) => model.commands.get(t).device === id).slice(-20).reverse();
    if (!rows.length) return h("p", { class: "muted" }, "No commands sent from this page yet.");
    return h("table", {}, h("tr", {}, h("th", {}, "Command"), h("th", {}, "Status"), h("th", {}, "Steps"), h("th", {}, "Error")),
      rows.map((t) => {
        const c = model.commands.get(t);
        return h("tr", { "data-transaction": t },
          h("td", { class: "mono" }, fmt(c.command)),
          h("td", { class: "status" }, pill(c.status)),
          h("td", { class: "muted" }, c.history.join(" → ")),
          h("td", { class: "mono" }, c.error ? `${c.error.code}: ${c.error.message}` : ""));
      }));
  }));

  const events = h("div", { class: "card" }, h("h2", {}, "Last events"));
  events.append(live(h("div", { id: "device-events", class: "log" }), () => {
    const mine = model.events.filter((e) => e.topic.startsWith(model.base + "/" + id + "/") ||
      (e.payload && (e.payload.device === id || e.payload.id === id))).slice(-30).reverse();
    if (!mine.length) return h("p", { class: "muted" }, "Nothing yet.");
    return mine.map((e) => h("div", {}, h("span", { class: "muted" }, e.time.toLocaleTimeString() + " " + e.topic.slice(model.base.length + 1) + " "), h("code", {}, fmt(e.payload))));
  }));

  // Two columns: what the device says (state, commands' lifecycle, events), what to tell it.
  grid.append(h("div", {}, state, cmds, events), h("div", {}, controls, manage(id)));
}

async function loadControls(id, el) {
  const res = await fetch("/api/devices/" + encodeURIComponent(id) + "/controls", { credentials: "same-origin" });
  if (!res.ok) { el.replaceChildren(h("p", { class: "muted" }, "No commands (" + res.status + ").")); return; }
  const list = await res.json();
  el.replaceChildren();
  const setTopic = model.base + "/" + id + "/set";
  // The command a control's MQTT topic and payload stand for, as a request to this server.
  async function send(topic, payload, fb) {
    let r;
    if (topic === setTopic) r = await command(id, "set", payload);
    else if (topic.startsWith(setTopic + "/")) r = await command(id, "set", { [topic.slice(setTopic.length + 1)]: shortcut(payload) });
    else if (topic === model.base + "/" + id + "/get") r = await command(id, "get", payload);
    else if (topic.endsWith("/write")) r = await post("/api/devices/" + encodeURIComponent(id) + "/" + topic.slice(model.base.length + id.length + 2), payload);
    feedback(fb, r, r.ok ? "sent" + (r.json && r.json.transaction ? " (" + r.json.transaction + ")" : "") : null);
  }
  for (const c of list) {
    const fb = h("span", { class: "feedback" });
    const label = h("label", {}, c.name);
    const row = h("div", { class: "row", "data-control": c.object });
    switch (c.component) {
      case "button":
        row.append(label, h("button", { id: "control-" + c.object, onclick: () => send(c.command_topic, c.payload_press, fb) }, c.name));
        break;
      case "switch":
        row.append(label,
          h("button", { id: "control-" + c.object + "-on", onclick: () => send(c.command_topic, c.payload_on, fb) }, "On"),
          h("button", { id: "control-" + c.object + "-off", onclick: () => send(c.command_topic, c.payload_off, fb) }, "Off"));
        break;
      case "select":
      case "setting": {
        const sel = h("select", { id: "control-" + c.object }, (c.options || []).map((o) => h("option", { value: o }, o)));
        const cur = own(model.states.get(id), c.object);
        if (cur !== undefined && (c.options || []).includes(String(cur))) sel.value = String(cur);
        row.append(label, sel, h("button", { onclick: () => send(c.command_topic,
          c.command_template ? c.command_template.replace("{{ value }}", sel.value.replace(/["\\]/g, "\\$&")) : sel.value, fb) }, "Apply"));
        break;
      }
      case "number": {
        const cur = own(model.states.get(id), c.object);
        const input = h("input", { id: "control-" + c.object, type: "number", min: c.min, max: c.max, step: c.step || 1, value: cur !== undefined ? cur : c.min });
        row.append(label, input, h("button", { onclick: () => send(c.command_topic, input.value, fb) }, "Set"));
        break;
      }
      case "get":
        row.append(label, h("button", { onclick: () => send(c.command_topic, { [c.object]: "" }, fb) }, "Read"));
        break;
      case "write": {
        const input = h("input", { id: "control-" + c.object, placeholder: c.codec === "raw" ? "hex, e.g. 01" : "payload" });
        row.append(label, input, h("button", { onclick: () => send(c.command_topic, input.value, fb) }, "Write"));
        break;
      }
      default:
        continue;
    }
    row.append(fb);
    el.append(row);
  }
  // Any command in the profile's JSON vocabulary.
  const raw = h("textarea", { id: "raw-command", placeholder: '{"command":"…"}' });
  const fb = h("div", { class: "feedback" });
  el.append(h("div", {}, h("label", { class: "muted" }, "JSON command (…/set)"), raw,
    h("button", { onclick: async () => { const r = await command(id, "set", raw.value); feedback(fb, r, "sent"); } }, "Send"), fb));
}

function manage(id) {
  const card = h("div", { class: "card" }, h("h2", {}, "Manage"));
  const fb = h("div", { class: "feedback", id: "manage-feedback" });
  const to = h("input", { id: "rename-to", placeholder: "new id" });
  const options = h("textarea", { id: "options", placeholder: '{"name":"Porch","command_timeout":"5s"}' });
  const forget = h("input", { type: "checkbox", id: "remove-forget" });
  async function run(action, body, then) {
    fb.className = "feedback";
    fb.textContent = action + "…";
    const r = await request(action, body);
    feedback(fb, r, action + ": ok");
    if (r.ok && then) then(r);
  }
  card.append(
    h("div", { class: "row" }, h("label", {}, "Rename to"), to,
      h("button", { id: "rename", onclick: () => run("device/rename", { from: id, to: to.value.trim() },
        () => { location.hash = "#/device/" + encodeURIComponent(to.value.trim()); }) }, "Rename")),
    h("div", {}, h("label", { class: "muted" }, "Options (device/options)"), options,
      h("button", { onclick: () => { let o; try { o = JSON.parse(options.value || "{}"); } catch (e) { fb.className = "feedback error"; fb.textContent = "error: invalid JSON: " + e.message; return; }
        run("device/options", { id, options: o }); } }, "Apply options")),
    h("div", { class: "row" },
      h("button", { id: "pair", onclick: () => run("pair", { id }) }, "Pair"),
      h("button", { id: "unpair", onclick: () => run("unpair", { id }) }, "Unpair"),
      h("span", { class: "spacer" }),
      h("label", { class: "inline" }, forget, " forget in BlueZ"),
      h("button", { id: "remove", class: "danger", onclick: () => { if (!confirm("Remove " + id + "?")) return;
        run("device/remove", { id, forget: forget.checked }, () => { location.hash = "#/"; }); } }, "Remove")),
    fb);
  return card;
}

function viewScan(view) {
  view.append(h("h1", {}, "Scan & add"));
  const seconds = h("input", { id: "scan-seconds", type: "number", min: 1, max: 600, value: 30, class: "w80" });
  const fb = h("span", { class: "feedback", id: "scan-feedback" });
  const top = h("div", { class: "card" },
    h("div", { class: "row" }, "Scan for", seconds, "seconds",
      h("button", { id: "scan-start", class: "primary", onclick: async () => { const r = await request("scan", { seconds: Number(seconds.value) }); feedback(fb, r, "scanning"); } }, "Start scan"),
      h("button", { id: "scan-stop", onclick: async () => { const r = await request("scan", { seconds: 0 }); feedback(fb, r, "stopped"); } }, "Stop"),
      fb));
  const status = h("span", {});
  top.append(live(status, () => h("p", { class: "muted" }, model.scanning ? "Scanning…" : "Not scanning.")));
  view.append(top);
  const table = h("div", { class: "card" });
  view.append(table);
  const addFeedback = new Map();
  live(table, () => {
    const list = Array.from(model.sightings.values()).sort((a, b) => (b.rssi || -999) - (a.rssi || -999));
    if (!list.length) return h("p", { class: "muted" }, "No device seen yet: start a scan.");
    return h("table", { id: "sightings" },
      h("tr", {}, ["Address", "Name", "RSSI", "Profile guess", "Services", ""].map((t) => h("th", {}, t))),
      list.map((s) => {
        if (!addFeedback.has(s.address)) addFeedback.set(s.address, h("span", { class: "feedback" }));
        const fb = addFeedback.get(s.address);
        const suggested = (s.name || "device_" + s.address.slice(-5)).toLowerCase().replace(/[^a-z0-9_-]+/g, "_").replace(/^_+|_+$/g, "") || "device";
        if (!addFeedback.has(s.address + "/id")) addFeedback.set(s.address + "/id", h("input", { class: "add-id", value: suggested }));
        const idInput = addFeedback.get(s.address + "/id");
        const configured = s.configured || model.devices.some((d) => d.address === s.address);
        return h("tr", { "data-address": s.address },
          h("td", { class: "mono" }, s.address), h("td", {}, s.name || "—"),
          h("td", { class: "num" }, s.rssi === null || s.rssi === undefined ? "—" : s.rssi + " dBm"),
          h("td", {}, s.profile_guess || "—"), h("td", { class: "mono" }, (s.service_uuids || []).join(" ")),
          h("td", {}, configured
            ? h("span", {}, "added as ", h("a", { href: "#/device/" + encodeURIComponent(s.device || (model.devices.find((d) => d.address === s.address) || {}).id || "") }, s.device || (model.devices.find((d) => d.address === s.address) || {}).id || "?"))
            : h("span", { class: "row" }, idInput, h("button", { class: "primary add", onclick: async (ev) => {
                ev.target.disabled = true;
                fb.className = "feedback"; fb.textContent = "adding…";
                const r = await request("device/add", { id: idInput.value.trim(), address: s.address });
                ev.target.disabled = false;
                feedback(fb, r, "added");
                if (r.ok) location.hash = "#/device/" + encodeURIComponent(idInput.value.trim());
              } }, "Add"), fb)));
      }));
  });
}

function viewBridge(view) {
  view.append(h("h1", {}, "Bridge"));
  refreshHealth();
  const grid = h("div", { class: "grid" });
  view.append(grid);
  const info = h("div", { class: "card" }, h("h2", {}, "Health"));
  info.append(live(h("div", { id: "health" }), () => {
    const i = model.info || {}, he = model.health || {};
    const rows = [["State", model.bridgeState], ["Version", i.version], ["Uptime", he.uptime_s !== undefined ? he.uptime_s + " s" : i.uptime_s + " s"],
      ["Memory (RSS)", he.rss_bytes ? (he.rss_bytes / 1048576).toFixed(1) + " MiB" : null], ["Healthy", he.healthy],
      ["Devices", i.devices], ["Broker", i.mqtt ? `${i.mqtt.host}:${i.mqtt.port} (MQTT ${i.mqtt.protocol})` : null],
      ["Adapter", i.adapter], ["Log level", i.log_level], ["Scanning", i.scanning], ["Restart required", (i.restart_required || []).join(", ") || "—"]];
    return h("table", { class: "kv" }, rows.map(([k, v]) => h("tr", {}, h("td", {}, k), h("td", {}, fmt(v)))));
  }));
  const counters = h("div", { class: "card" }, h("h2", {}, "Counters"));
  counters.append(live(h("div", { id: "counters" }), () => {
    const he = model.health || {};
    const rows = [];
    for (const k of ["commands", "errors"]) if (he[k] && typeof he[k] === "object") for (const [n, v] of Object.entries(he[k])) rows.push([k + "." + n, v]);
    for (const [k, v] of Object.entries(he)) if (typeof v === "number" && !["uptime_s", "rss_bytes"].includes(k)) rows.push([k, v]);
    if (he.devices) for (const [d, v] of Object.entries(he.devices)) rows.push(["device " + d, `connected ${v.connected}, available ${v.available}, queue ${v.queue}, in flight ${v.in_flight}`]);
    return rows.length ? h("table", { class: "kv" }, rows.map(([k, v]) => h("tr", {}, h("td", {}, k), h("td", { class: "num" }, fmt(v))))) : h("p", { class: "muted" }, "…");
  }));
  const levels = ["trace", "debug", "info", "notice", "warning", "error", "critical"];
  const level = h("select", { id: "log-level" }, levels.map((l) => h("option", { value: l }, l)));
  if (model.info && model.info.log_level) level.value = model.info.log_level;
  const fb = h("span", { class: "feedback" });
  const settings = h("div", { class: "card" }, h("h2", {}, "Settings"),
    h("div", { class: "row" }, h("label", {}, "Log level"), level,
      h("button", { id: "log-level-apply", onclick: async () => { const r = await request("options", { log_level: level.value }); feedback(fb, r, "log level: " + level.value); } }, "Apply"), fb),
    h("div", { class: "row" }, h("button", { onclick: refreshHealth }, "Refresh health"),
      h("button", { onclick: async () => { const r = await request("config/reload", {}); feedback(fb, r, "configuration reloaded"); } }, "Reload configuration"),
      h("button", { class: "danger", onclick: async () => { if (confirm("Restart the bridge?")) feedback(fb, await request("restart", {}), "restarting"); } }, "Restart")));
  const tail = h("div", { class: "card" }, h("h2", {}, "Events"));
  tail.append(live(h("div", { id: "event-tail", class: "log" }), () => model.events.slice(-100).reverse().map((e) =>
    h("div", {}, h("span", { class: "muted" }, e.time.toLocaleTimeString() + " " + e.topic.slice(model.base.length + 1) + " "), h("code", {}, fmt(e.payload))))));
  const logs = h("div", { class: "card" }, h("h2", {}, "Log"));
  logs.append(live(h("div", { id: "log-tail", class: "log" }), () => model.logs.length
    ? model.logs.slice(-150).reverse().map((l) => h("div", { class: "level-" + l.level }, h("span", { class: "muted" }, l.time.toLocaleTimeString() + " " + l.level + " "), h("code", {}, l.message)))
    : h("p", { class: "muted" }, "No log lines yet (at the bridge's log level).")));
  grid.append(info, counters, settings, tail, logs);
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", () => {
  route();
  connect();
  // Link state and counters come from health_check (the bridge/health topic is once a minute).
  setInterval(() => { if (document.visibilityState === "visible") refreshHealth(); }, 10000);
  setInterval(render, 30000);  // "… ago"
});
